"""DMA injection: ``pragma dma_copy`` copy loops -> VTA LOAD/STORE (2D strided, with padding)."""

from __future__ import annotations

from dataclasses import dataclass

from vta.isa import Config

from ..errors import DmaError
from ..tir.expr import (
    Binary,
    BufferLoad,
    Cast,
    Const,
    Expr,
    Select,
    Var,
    bits,
    free_vars,
    linear,
    simplify,
    structural_equal,
    substitute,
)
from ..tir.stmt import (
    ACC_SCOPE,
    INP_SCOPE,
    VTA_SCOPES,
    WGT_SCOPE,
    Attr,
    Buffer,
    Dma,
    For,
    PadSpec,
    PrimFunc,
    Stmt,
    Store,
    rebuild,
)
from .base import Pass


def tile_shape(cfg: Config, scope: str) -> tuple[int, int]:
    return {INP_SCOPE: (cfg.batch, cfg.block_in), WGT_SCOPE: (cfg.block_out, cfg.block_in),
            ACC_SCOPE: (cfg.batch, cfg.block_out)}[scope]


@dataclass(frozen=True)
class _Loop:
    var: Var
    extent: int
    dst: int
    src: int


@dataclass(frozen=True)
class InjectDma(Pass):
    """Replace every ``pragma_dma_copy`` loop nest by :class:`Dma` statements."""

    cfg: Config
    name = "inject-dma"

    def apply(self, func: PrimFunc) -> PrimFunc:
        def fn(s: Stmt) -> Stmt | None:
            if isinstance(s, Attr) and s.key == "pragma_dma_copy":
                return self.lower_copy(s.body, str(s.value))
            return None

        return PrimFunc(func.name, func.params, rebuild(func.body, fn), dict(func.attrs))

    def lower_copy(self, s: Stmt, stage: str) -> Stmt:
        loops, store, value, cond = _copy_nest(s, stage)
        direction, sram, dram, sram_idx, dram_idx = self._sides(store, value, cond, stage)
        names = f"stage {stage}"
        _check_tiles(tile_shape(self.cfg, sram.scope), loops, sram, dram, sram_idx, dram_idx,
                     names)
        outer = loops[:-2]
        s_lin = linear(_flat(sram, sram_idx))
        d_lin = linear(_flat(dram, dram_idx))
        lv = {v for v, _ in outer}
        for lin, b in ((s_lin, sram), (d_lin, dram)):
            _check_affine(lin, b, lv, names)
        pads = _padding(cond, lv, names) if cond is not None else {}
        merged = _merged_loops(outer, s_lin, d_lin, direction, pads)
        x, y, host = _dma_axes(merged, pads, names)
        y_size, x_size, x_stride = _dma_shape(x, y)
        # host loops over the remaining dimensions; DMA axes at zero
        zero = {v: Const(0, "int32") for v, _ in outer if v not in {h[0] for h in host}}
        node = Dma(direction, sram, simplify(substitute(s_lin.to_expr(), zero)), dram,
                   simplify(substitute(d_lin.to_expr(), zero)), y_size, x_size, x_stride,
                   _padspec(pads, y, zero), _padspec(pads, x, zero))
        out: Stmt = node
        for v, e, _sc, _dc in reversed(host):
            out = For(v, e, out)
        # loops of extent 1 that were dropped keep index 0 (already substituted)
        return out

    def _sides(self, s: Store, value: BufferLoad, cond: Expr | None, stage: str
               ) -> tuple[str, Buffer, Buffer, tuple[Expr, ...], tuple[Expr, ...]]:
        """(direction, on-chip buffer, DRAM buffer, their indices) of one element copy."""
        dst, src = s.buffer, value.buffer
        if dst.scope in VTA_SCOPES and src.scope == "global":
            if bits(src.dtype) != bits(dst.dtype):
                raise DmaError(f"stage {stage}: loading {src.dtype} into a {dst.dtype} buffer; "
                               "cast on the host first (LOAD copies bits)")
            return "load", dst, src, s.indices, value.indices
        if dst.scope == "global" and src.scope == ACC_SCOPE:
            if bits(dst.dtype) != self.cfg.out_width:
                raise DmaError(f"stage {stage}: STORE writes {self.cfg.out_width}-bit outputs, "
                               f"{dst.name} is {dst.dtype}")
            if cond is not None:
                raise DmaError(f"stage {stage}: a STORE cannot pad")
            return "store", src, dst, value.indices, s.indices
        raise DmaError(f"stage {stage}: dma_copy from {src.scope} to {dst.scope} is not a "
                       "VTA transfer (LOAD: global -> inp/wgt/acc buffer, STORE: acc -> "
                       "global)")


def _strip_casts(value: Expr) -> Expr:
    while isinstance(value, Cast):
        value = value.value
    return value


def _copy_nest(s: Stmt, stage: str
               ) -> tuple[list[tuple[Var, int]], Store, BufferLoad, Expr | None]:
    """The loops of a dma_copy nest, its element store, the loaded value and the pad guard."""
    loops: list[tuple[Var, int]] = []
    while isinstance(s, For):
        loops.append((s.var, s.extent))
        s = s.body
    if not isinstance(s, Store):
        raise DmaError(f"stage {stage}: a dma_copy loop nest must end in one element copy, "
                       f"found {type(s).__name__} (a split that does not divide the axis "
                       "adds a guard: use factors that divide the shape)")
    value, cond = _strip_casts(s.value), None
    if isinstance(value, Select):
        cond = value.cond
        if not (isinstance(value.f, Const) and value.f.value == 0):
            raise DmaError(f"stage {stage}: padding must fill zeros, not {value.f}")
        value = _strip_casts(value.t)
    if not isinstance(value, BufferLoad):
        raise DmaError(f"stage {stage}: dma_copy needs a plain copy, got {s.value}")
    return loops, s, value, cond


def _check_tiles(tile: tuple[int, ...], loops: list[tuple[Var, int]], sram: Buffer,
                 dram: Buffer, sram_idx: tuple[Expr, ...], dram_idx: tuple[Expr, ...],
                 names: str) -> None:
    """Both buffers end in whole tiles and the two innermost loops walk them in order."""
    for b in (sram, dram):
        if b.ndim < 3 or tuple(b.shape[-2:]) != tile:
            raise DmaError(f"{names}: {b.name} has shape {b.shape}; VTA copies whole "
                           f"{tile[0]}x{tile[1]} tiles, so its last two dimensions must be "
                           f"{tile} (pack the tensor)")
    # the two innermost loops must walk the tile identically on both sides
    if len(loops) < 2:
        raise DmaError(f"{names}: the copy must loop over the {tile} tile")
    (v1, e1), (v2, e2) = loops[-2:]
    for idx, b in ((sram_idx, sram), (dram_idx, dram)):
        if not (isinstance(idx[-2], Var) and idx[-2] is v1 and isinstance(idx[-1], Var)
                and idx[-1] is v2 and (e1, e2) == tile):
            raise DmaError(f"{names}: loops {v1.name}, {v2.name} must copy whole tiles of "
                           f"{b.name} in order (indices {idx[-2]}, {idx[-1]})")


def _check_affine(lin, b: Buffer, lv: set[Var], names: str) -> None:
    """Every outer loop indexes ``b`` with a constant stride."""
    for k, a in lin.atoms.items():
        if k in lin.terms and not isinstance(a, Var) and _uses(a, lv):
            v = next(v for v in lv if _uses(a, {v}))
            raise DmaError(f"{names}: loop {v.name} indexes {b.name} non-linearly "
                           f"({a}); a DMA needs affine strides")


def _merged_loops(outer: list[tuple[Var, int]], s_lin, d_lin, direction: str,
                  pads: dict) -> list[list]:
    """The outer loops as [var, extent, sram coefficient, dram coefficient], extent-1 loops
    dropped (unless padded) and adjacent loops contiguous on both sides merged."""
    if direction == "load":
        info = [_Loop(v, e, s_lin.coef(v), d_lin.coef(v)) for v, e in outer]
    else:
        info = [_Loop(v, e, d_lin.coef(v), s_lin.coef(v)) for v, e in outer]
    # info.dst is the on-chip side for loads, the DRAM side for stores: normalise to
    # (sram coefficient, dram coefficient)
    sinfo = [(lp.var, lp.extent, lp.dst if direction == "load" else lp.src,
              lp.src if direction == "load" else lp.dst) for lp in info]
    sinfo = [t for t in sinfo if t[1] > 1 or t[0] in pads]
    # merge adjacent loops that are contiguous on both sides
    merged: list[list] = []
    for v, e, sc, dc in sinfo:
        if merged and not pads.keys() & {v, merged[-1][0]}:
            pv, pe, psc, pdc = merged[-1]
            if psc == sc * e and pdc == dc * e:
                merged[-1] = [v, pe * e, sc, dc]
                continue
        merged.append([v, e, sc, dc])
    return merged


def _dma_axes(merged: list[list], pads: dict, names: str
              ) -> tuple[list | None, list | None, list[list]]:
    """(x, y, host loops): the DMA columns and rows taken from the innermost merged loops."""
    # x: the innermost loop when it is contiguous on both sides, else a 1-element row
    if merged and merged[-1][2] == 1 and merged[-1][3] == 1:
        x = merged.pop()
    else:
        x = None
    x_size = x[1] if x else 1
    # y: the next loop when the on-chip block stays dense (rows of x_size entries)
    y = None
    x_padded = x is not None and x[0] in pads
    if merged and merged[-1][2] == x_size and (merged[-1][3] >= x_size or x is None
                                               or x_padded):
        y = merged.pop()
    host = merged
    for v, _e, _sc, _dc in host:
        if v in pads:
            raise DmaError(f"{names}: padding along loop {v.name}, which is not one of the "
                           "two DMA axes (rows and columns of one 2D transfer); make the "
                           "padded dimensions the innermost copied loops")
    if x is None and pads and (y is None or y[0] not in pads or len(pads) > 1):
        raise DmaError(f"{names}: padding needs the padded loops to be the DMA rows and "
                       "columns, contiguous in DRAM")
    return x, y, host


def _dma_shape(x: list | None, y: list | None) -> tuple[int, int, int]:
    """(y_size, x_size, x_stride) of the 2D transfer."""
    x_size = x[1] if x else 1
    if y is None:
        return 1, x_size, x_size
    return y[1], x_size, y[3]

def _flat(b: Buffer, idx: tuple[Expr, ...]) -> Expr:
    strides = b.elem_strides()
    out: Expr = Const(0, "int32")
    for i, st in zip(idx[:-2], strides):
        out = out + i * st
    return simplify(out)


def _uses(e: Expr, vs: set[Var]) -> bool:
    return bool(free_vars(e) & vs)


def _conjuncts(c: Expr) -> list[Expr]:
    if isinstance(c, Binary) and c.op == "and":
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


def _padding(cond: Expr, loop_vars: set[Var], names: str) -> dict[Var, PadSpec]:
    """Turn a conjunction of bounds checks into (start, lo, hi) per loop variable."""
    found: dict[Var, list] = {}
    for c in _conjuncts(cond):
        if not (isinstance(c, Binary) and c.op in ("lt", "le")):
            raise DmaError(f"{names}: padding condition {c} is not a bounds check")
        lin = linear(simplify(c.a - c.b))
        vs = [v for v in loop_vars if lin.coef(v)]
        if len(vs) != 1 or abs(lin.coef(vs[0])) != 1:
            raise DmaError(f"{names}: padding condition {c} must bound one copied loop")
        v = vs[0]
        coef = lin.coef(v)
        rest = lin.without([v])
        rconst = rest.const
        rvar = rest
        rvar.const = 0
        strict = 1 if c.op == "lt" else 0
        if coef == 1:  # v + rvar + rconst < 0 (or <= 0)
            start, lo, hi = rvar.to_expr(), None, -rconst + (0 if strict else 1)
        else:  # -v + rvar + rconst < 0  <=>  v - rvar > rconst
            start, lo, hi = (rvar.scale(-1)).to_expr(), rconst + (1 if strict else 0), None
        ent = found.setdefault(v, [start, None, None])

        if not structural_equal(simplify(ent[0]), simplify(start)):
            raise DmaError(f"{names}: inconsistent padding bounds on loop {v.name}")
        if lo is not None:
            ent[1] = lo if ent[1] is None else max(ent[1], lo)
        if hi is not None:
            ent[2] = hi if ent[2] is None else min(ent[2], hi)
    return {v: PadSpec(simplify(st), lo if lo is not None else -(1 << 30),
                       hi if hi is not None else (1 << 30)) for v, (st, lo, hi) in found.items()}


def _padspec(pads: dict[Var, PadSpec], axis: list | None, zero: dict) -> PadSpec | None:
    if axis is None or axis[0] not in pads:
        return None
    p = pads[axis[0]]
    return PadSpec(simplify(substitute(p.start, zero)), p.lo, p.hi)


__all__ = ["InjectDma", "tile_shape"]
