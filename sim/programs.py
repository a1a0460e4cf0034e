"""Ready-made VTA programs: a tiled int8 matrix multiply, and the tiled DRAM layouts it uses.

>>> import numpy as np
>>> from vta.isa import Config
>>> mm = matmul_program(Config(), 20, 40, 50, seed=1)
>>> mm.plan.read_c(mm.dram).shape   # before running: whatever was in the C region
(20, 40)

Semantics of :func:`matmul_program` (what the program computes, exactly):

1. ``acc = A @ B.T`` over integers, wrapped to the accumulator width (int32 by default);
   A is ``(M, K)`` and B is ``(N, K)``, both int8 (the input/weight widths of the config).
2. if ``shift`` is non-zero: ``acc = acc >> shift`` (arithmetic; a negative shift is a left shift,
   see the ALU SHR semantics in docs/fsim.md);
3. if ``clip=(lo, hi)``: ``acc = min(max(acc, lo), hi)``;
4. ``C = low 8 bits of acc`` (the output width), as int8: a STORE truncates, it never saturates.

:meth:`MatmulPlan.reference` computes the same thing with numpy.

DRAM layout (VTA's tiled element layout, each region aligned to its element size):
A element ``(mb, kb)`` (``batch x block_in`` values) at element ``a_base + mb*Kb + kb``; B element
``(nb, kb)`` (``block_out x block_in``) at ``b_base + nb*Kb + kb``; C element ``(mb, nb)``
(``batch x block_out``) at ``c_base + mb*Nb + nb``, where ``Mb, Nb, Kb`` are the matrix sizes in
elements, rounded up (the padding is zero and does not change the result).

The program: one LOAD UOP of every micro-op, then for each output tile (``tm x tn`` elements) a
GEMM with reset_reg, then per K step (``tk`` elements) a LOAD INP and a LOAD WGT of the tile and one
GEMM whose micro-ops run over k while iter_out runs over m and iter_in over n (a dense block
product: one matrix multiply in fsim), then the ALU steps and a STORE. Tokens come from
:class:`~vta.sim.progen.ProgramBuilder`. With ``double_buffer=True`` the SRAM buffers are split in
two halves used by alternate steps and the loads of step s+1 are issued before the GEMM of step s
(two interleaved streams in the virtual-thread style), so loads overlap GEMMs and stores overlap
the next tile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil, isqrt
from typing import NamedTuple

import numpy as np
from vta.isa.config import Config
from vta.isa.insn import AluInsn, GemmInsn, MemInsn, Uop, encode_uops
from vta.isa.layout import AluOp, MemType, Opcode

from .progen import ProgramBuilder


# ------------------------------------------------------------------------- layouts
def pack_tiles(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Split a 2D matrix into ``rows x cols`` tiles in row-major tile order, zero-padded.

    Returns an array of shape ``(R*C, rows, cols)`` where ``R = ceil(H/rows)``, ``C =
    ceil(W/cols)``: tile ``(r, c)`` is element ``r*C + c``, VTA's tiled element layout.
    """
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"expected a 2D matrix, got shape {x.shape}")
    h, w = x.shape
    r_, c_ = ceil(h / rows), ceil(w / cols)
    padded = np.zeros((r_ * rows, c_ * cols), x.dtype)
    padded[:h, :w] = x
    return padded.reshape(r_, rows, c_, cols).transpose(0, 2, 1, 3).reshape(r_ * c_, rows, cols)


def unpack_tiles(tiles: np.ndarray, h: int, w: int) -> np.ndarray:
    """The inverse of :func:`pack_tiles`: an ``(h, w)`` matrix from ``(R*C, rows, cols)`` tiles."""
    _, rows, cols = tiles.shape
    r_, c_ = ceil(h / rows), ceil(w / cols)
    full = tiles.reshape(r_, c_, rows, cols).transpose(0, 2, 1, 3).reshape(r_ * rows, c_ * cols)
    return full[:h, :w]


@dataclass(frozen=True)
class Tiling:
    """Tile sizes in elements: ``tm`` row blocks (of batch rows), ``tn`` and ``tk`` blocks."""

    tm: int
    tn: int
    tk: int


def _field_max(cfg: Config, layout: str, name: str) -> int:
    return getattr(cfg.layouts, layout)[name].max


def choose_tiling(cfg: Config, mb: int, nb: int, kb: int, *, double_buffer: bool = False,
                  alu_steps: int = 0) -> Tiling:
    """The tiling that minimises DRAM traffic (plus a per-instruction cost) within the buffers.

    ``mb, nb, kb`` are the matrix sizes in elements. With double buffering each buffer holds two
    tiles. The chosen GEMMs are large dense block products (fast in fsim, efficient in hardware).
    """
    slots = 2 if double_buffer else 1
    inp_cap, wgt_cap, acc_cap = (cfg.inp_depth // slots, cfg.wgt_depth // slots,
                                 cfg.acc_depth // slots)
    iter_max = _field_max(cfg, "gemm", "iter_out")
    k_max = min(_field_max(cfg, "gemm", "src_factor_out"), _field_max(cfg, "gemm", "wgt_factor_in"),
                (cfg.uop_depth - 2 * slots) // (slots * slots))
    n_max = min(_field_max(cfg, "gemm", "dst_factor_out"), iter_max)
    eb = cfg.inp_elem_bytes, cfg.wgt_elem_bytes, cfg.out_elem_bytes
    best: tuple[float, Tiling] | None = None

    def candidates(total: int, cap: int) -> set[int]:
        """Tile sizes worth trying: every distinct ceil(total / j), i.e. each tile count once."""
        r = isqrt(total) + 1
        values = {ceil(total / j) for j in range(1, r + 1)} | set(range(1, r + 1))
        return {v for v in values if v <= min(cap, total)}

    for tk in candidates(kb, min(kb, k_max, inp_cap, wgt_cap)):
        tm_max = min(mb, inp_cap // tk, iter_max)
        tn_max = min(nb, wgt_cap // tk, n_max)
        for tm in candidates(mb, tm_max):
            tn = min(tn_max, acc_cap // tm)
            if tn < 1:
                continue
            tn = ceil(nb / ceil(nb / tn))  # same number of tiles, evener sizes
            nm, nn, nk = ceil(mb / tm), ceil(nb / tn), ceil(kb / tk)
            traffic = nn * mb * kb * eb[0] + nm * nb * kb * eb[1] + mb * nb * eb[2]
            insns = nm * nn * (3 * nk + 2 + alu_steps)
            cost = traffic + 512 * insns
            if best is None or cost < best[0]:
                best = (cost, Tiling(tm, tn, tk))
    if best is None:
        raise ValueError(f"no tiling fits the buffers of this config (inp {cfg.inp_depth}, "
                         f"wgt {cfg.wgt_depth}, acc {cfg.acc_depth} entries)")
    return best[1]


@dataclass(frozen=True)
class MatmulPlan:
    """Where a matmul program keeps its data, and how to put A, B in and read C out."""

    cfg: Config
    M: int
    N: int
    K: int
    tiling: Tiling
    uop_addr: int
    a_addr: int
    b_addr: int
    c_addr: int
    dram_bytes: int
    shift: int = 0
    clip: tuple[int, int] | None = None
    double_buffer: bool = False
    stats: dict = field(default_factory=dict, compare=False)

    @property
    def blocks(self) -> tuple[int, int, int]:
        """(Mb, Nb, Kb): the matrix sizes in elements, rounded up."""
        c = self.cfg
        return ceil(self.M / c.batch), ceil(self.N / c.block_out), ceil(self.K / c.block_in)

    def write_inputs(self, dram: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        """Lay out A ``(M, K)`` and B ``(N, K)`` in ``dram`` (uint8, in place)."""
        c = self.cfg
        a = np.asarray(a)
        b = np.asarray(b)
        if a.shape != (self.M, self.K) or b.shape != (self.N, self.K):
            raise ValueError(f"expected A {(self.M, self.K)} and B {(self.N, self.K)}, got "
                             f"{a.shape} and {b.shape}")
        at = pack_tiles(_as_int(a, c.inp_width, "A"), c.batch, c.block_in)
        bt = pack_tiles(_as_int(b, c.wgt_width, "B"), c.block_out, c.block_in)
        for addr, t in ((self.a_addr, at), (self.b_addr, bt)):
            raw = t.astype(t.dtype.newbyteorder("<")).view(np.uint8).ravel()
            dram[addr:addr + raw.size] = raw

    def read_c(self, dram: np.ndarray) -> np.ndarray:
        """C ``(M, N)`` (int8, the output width) from a DRAM image after the run."""
        c = self.cfg
        mb, nb, _ = self.blocks
        size = mb * nb * c.out_elem_bytes
        raw = np.asarray(dram, dtype=np.uint8)[self.c_addr:self.c_addr + size]
        vals = raw.view(f"<i{c.out_width // 8}").reshape(mb * nb, c.batch, c.block_out)
        return unpack_tiles(vals, self.M, self.N)

    def reference_acc(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The accumulators ``A @ B.T`` wrapped to the accumulator width (int32 by default),
        before the shift, clip and truncation (what ``FunctionalSim.acc`` holds for a tile)."""
        c = self.cfg
        acc = _wrap(np.asarray(a, np.int64) @ np.asarray(b, np.int64).T, c.acc_width)
        return acc.astype(f"i{c.acc_width // 8}")

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """What the program computes, with numpy (see the module docstring)."""
        c = self.cfg
        acc = self.reference_acc(a, b).astype(np.int64)
        if self.shift > 0:
            acc = acc >> min(self.shift, c.acc_width - 1)
        elif self.shift < 0:
            acc = _wrap(acc << min(-self.shift, c.acc_width), c.acc_width)
        if self.clip is not None:
            acc = np.clip(acc, *self.clip)
        return _wrap(acc, c.out_width).astype(f"i{c.out_width // 8}")


class MatmulProgram(NamedTuple):
    """``(program, dram, plan)``: the instruction stream, the initial DRAM image holding A and B,
    and the :class:`MatmulPlan` (``plan.read_c(dram_after)`` gives C)."""

    program: bytes
    dram: np.ndarray
    plan: MatmulPlan

    def read_c(self, dram: np.ndarray) -> np.ndarray:
        return self.plan.read_c(dram)


def _wrap(x: np.ndarray, bits: int) -> np.ndarray:
    x = np.asarray(x, np.int64) & ((1 << bits) - 1)
    return np.where(x >= 1 << (bits - 1), x - (1 << bits), x)


def _as_int(x: np.ndarray, bits: int, what: str) -> np.ndarray:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if x.size and (x.min() < lo or x.max() > hi):
        raise ValueError(f"{what} has values outside int{bits} ({x.min()}..{x.max()})")
    return x.astype(f"i{bits // 8}")


def _align(addr: int, to: int) -> int:
    return -(-addr // to) * to


def matmul_program(cfg: Config, M: int, N: int, K: int, *, a: np.ndarray | None = None,
                   b: np.ndarray | None = None, seed: int | None = 0, shift: int = 0,
                   clip: tuple[int, int] | None = None, double_buffer: bool = False,
                   tiling: Tiling | None = None, uop_addr: int | None = None,
                   a_addr: int | None = None, b_addr: int | None = None,
                   c_addr: int | None = None, dram_bytes: int | None = None) -> MatmulProgram:
    """A tiled int8 matmul ``C = A @ B.T`` as a VTA program (see the module docstring).

    ``a`` (M, K) and ``b`` (N, K) default to random int8 matrices drawn with ``seed``. Addresses
    are byte addresses in the DRAM image (each a multiple of its element size; by default the
    regions are packed from 0: micro-ops, A, B, C); ``dram_bytes`` defaults to the end of C.
    ``tiling`` defaults to :func:`choose_tiling`. Returns ``(program, dram, plan)``.
    """
    for name, v in (("M", M), ("N", N), ("K", K)):
        if not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    if clip is not None and not (-(1 << 15) <= clip[0] <= clip[1] < 1 << 15):
        raise ValueError(f"clip must be (lo, hi) with lo <= hi within 16-bit immediates, "
                         f"not {clip!r}")
    if not -(1 << 15) <= shift < 1 << 15:
        raise ValueError(f"shift must fit a 16-bit immediate, not {shift}")
    rng = np.random.default_rng(seed)
    imin, imax = -(1 << (cfg.inp_width - 1)), 1 << (cfg.inp_width - 1)
    wmin, wmax = -(1 << (cfg.wgt_width - 1)), 1 << (cfg.wgt_width - 1)
    if a is None:
        a = rng.integers(imin, imax, (M, K), dtype=np.int64)
    if b is None:
        b = rng.integers(wmin, wmax, (N, K), dtype=np.int64)
    mb, nb, kb = ceil(M / cfg.batch), ceil(N / cfg.block_out), ceil(K / cfg.block_in)
    slots = 2 if double_buffer else 1
    n_alu = (shift != 0) + 2 * (clip is not None)
    t = tiling or choose_tiling(cfg, mb, nb, kb, double_buffer=double_buffer, alu_steps=n_alu)
    _check_tiling(cfg, t, slots)

    lay = _UopLayout.build(t, slots)
    uop_addr, a_addr, b_addr, c_addr, dram_bytes = _dram_layout(
        cfg, len(lay.uops), mb, nb, kb, uop_addr=uop_addr, a_addr=a_addr, b_addr=b_addr,
        c_addr=c_addr, dram_bytes=dram_bytes)
    plan = MatmulPlan(cfg, M, N, K, t, uop_addr, a_addr, b_addr, c_addr, dram_bytes, shift,
                      clip, double_buffer)
    dram = np.zeros(dram_bytes, np.uint8)
    words = np.frombuffer(encode_uops(lay.uops, cfg), np.uint8)
    dram[uop_addr:uop_addr + words.size] = words
    plan.write_inputs(dram, a, b)

    pb = ProgramBuilder(cfg)
    pb.emit(MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, sram_base=0,
                    dram_base=uop_addr // 4, y_size=1, x_size=len(lay.uops),
                    x_stride=len(lay.uops)))
    tiles = [(m0, n0) for m0 in range(0, mb, t.tm) for n0 in range(0, nb, t.tn)]
    steps = _steps(t, tiles, mb, nb, kb)
    alu_ops = ([(AluOp.SHR, shift)] if shift else []) + \
        ([(AluOp.MAX, clip[0]), (AluOp.MIN, clip[1])] if clip is not None else [])
    _emit_steps(pb, cfg, lay, steps, slots, kb, nb, alu_ops, a_el=a_addr // cfg.inp_elem_bytes,
                b_el=b_addr // cfg.wgt_elem_bytes, c_el=c_addr // cfg.out_elem_bytes,
                double_buffer=double_buffer)
    program = pb.program()
    plan.stats.update(insns=len(program) // 16, tiles=len(tiles), steps=len(steps),
                      macs=mb * nb * kb * cfg.batch * cfg.block_in * cfg.block_out)
    return MatmulProgram(program, dram, plan)


@dataclass(frozen=True)
class _UopLayout:
    """The micro-op buffer of a matmul: per (acc slot, io slot) a GEMM set over k, then per acc
    slot a reset and an ALU micro-op; SRAM bases of each slot's acc, inp and wgt tiles."""

    uops: list[Uop]
    abase: list[int]
    ibase: list[int]
    wbase: list[int]
    gemm_at: dict[tuple[int, int], int]
    reset_at: dict[int, int]
    alu_at: dict[int, int]

    @classmethod
    def build(cls, t: Tiling, slots: int) -> _UopLayout:
        abase = [s * t.tm * t.tn for s in range(slots)]
        ibase = [s * t.tm * t.tk for s in range(slots)]
        wbase = [s * t.tn * t.tk for s in range(slots)]
        uops: list[Uop] = []
        gemm_at: dict[tuple[int, int], int] = {}
        for sa in range(slots):
            for si in range(slots):
                gemm_at[(sa, si)] = len(uops)
                uops += [Uop(abase[sa], ibase[si] + k, wbase[si] + k) for k in range(t.tk)]
        reset_at = {sa: len(uops) + sa for sa in range(slots)}
        uops += [Uop(abase[sa], 0, 0) for sa in range(slots)]
        alu_at = {sa: len(uops) + sa for sa in range(slots)}
        uops += [Uop(abase[sa], abase[sa], 0) for sa in range(slots)]
        return cls(uops, abase, ibase, wbase, gemm_at, reset_at, alu_at)


def _dram_layout(cfg: Config, n_uops: int, mb: int, nb: int, kb: int, *, uop_addr: int | None,
                 a_addr: int | None, b_addr: int | None, c_addr: int | None,
                 dram_bytes: int | None) -> tuple[int, int, int, int, int]:
    """The byte addresses of the micro-ops, A, B and C (packed from 0 where not given) and the
    DRAM size, checked for alignment, size and overlap."""
    uop_addr = 0 if uop_addr is None else uop_addr
    a_addr = _align(uop_addr + 4 * n_uops, cfg.inp_elem_bytes) if a_addr is None else a_addr
    a_end = a_addr + mb * kb * cfg.inp_elem_bytes
    b_addr = _align(a_end, cfg.wgt_elem_bytes) if b_addr is None else b_addr
    b_end = b_addr + nb * kb * cfg.wgt_elem_bytes
    c_addr = _align(b_end, cfg.out_elem_bytes) if c_addr is None else c_addr
    c_end = c_addr + mb * nb * cfg.out_elem_bytes
    for name, addr, eb in (("uop_addr", uop_addr, 4), ("a_addr", a_addr, cfg.inp_elem_bytes),
                           ("b_addr", b_addr, cfg.wgt_elem_bytes),
                           ("c_addr", c_addr, cfg.out_elem_bytes)):
        if addr < 0 or addr % eb:
            raise ValueError(f"{name}={addr} must be a non-negative multiple of {eb} bytes")
    end = max(uop_addr + 4 * n_uops, a_end, b_end, c_end)
    dram_bytes = end if dram_bytes is None else dram_bytes
    if dram_bytes < end:
        raise ValueError(f"dram_bytes={dram_bytes} is too small; the layout needs {end}")
    regions = sorted([(uop_addr, uop_addr + 4 * n_uops, "micro-ops"), (a_addr, a_end, "A"),
                      (b_addr, b_end, "B"), (c_addr, c_end, "C")])
    for (_, hi1, n1), (lo2, _, n2) in zip(regions, regions[1:]):
        if lo2 < hi1:
            raise ValueError(f"DRAM regions {n1} and {n2} overlap")
    return uop_addr, a_addr, b_addr, c_addr, dram_bytes


def _steps(t: Tiling, tiles: list[tuple[int, int]], mb: int, nb: int, kb: int) -> list[tuple]:
    """(tile number, m0, tm, n0, tn, k0, tk, first k?, last k?) of every k step of every tile."""
    steps = []
    for tile, (m0, n0) in enumerate(tiles):
        ks = list(range(0, kb, t.tk))
        for j, k0 in enumerate(ks):
            steps.append((tile, m0, min(t.tm, mb - m0), n0, min(t.tn, nb - n0), k0,
                          min(t.tk, kb - k0), j == 0, j == len(ks) - 1))
    return steps


def _emit_steps(pb: ProgramBuilder, cfg: Config, lay: _UopLayout, steps: list[tuple],
                slots: int, kb: int, nb: int, alu_ops: list[tuple[AluOp, int]], *, a_el: int,
                b_el: int, c_el: int, double_buffer: bool) -> None:
    """Per step: its tile loads (one step ahead when double-buffered), a reset on a tile's first
    k step, the GEMM, and on its last k step the ALU epilogue and the store of C."""
    uops = lay.uops

    def emit_loads(s: int) -> None:
        _, m0, tm, n0, tn, k0, tk, _, _ = steps[s]
        si = s % slots
        pb.emit(MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, sram_base=lay.ibase[si],
                        dram_base=a_el + m0 * kb + k0, y_size=tm, x_size=tk, x_stride=kb))
        pb.emit(MemInsn(opcode=Opcode.LOAD, memory_type=MemType.WGT, sram_base=lay.wbase[si],
                        dram_base=b_el + n0 * kb + k0, y_size=tn, x_size=tk, x_stride=kb))

    if double_buffer:
        emit_loads(0)
    for s, (tile, m0, tm, n0, tn, _k0, tk, first, last) in enumerate(steps):
        sa, si = tile % slots, s % slots
        if double_buffer:
            if s + 1 < len(steps):
                emit_loads(s + 1)
        else:
            emit_loads(s)
        loops = dict(iter_out=tm, iter_in=tn, dst_factor_out=tn, dst_factor_in=1)
        if first:
            u = lay.reset_at[sa]
            pb.emit(GemmInsn(reset_reg=1, uop_bgn=u, uop_end=u + 1, **loops),
                    uops=[uops[u]])
        g = lay.gemm_at[(sa, si)]
        pb.emit(GemmInsn(uop_bgn=g, uop_end=g + tk, src_factor_out=tk, src_factor_in=0,
                         wgt_factor_out=0, wgt_factor_in=tk, **loops), uops=uops[g:g + tk])
        if not last:
            continue
        u = lay.alu_at[sa]
        for op, imm in alu_ops:
            pb.emit(AluInsn(uop_bgn=u, uop_end=u + 1, src_factor_out=tn, src_factor_in=1,
                            alu_opcode=op, use_imm=1, imm=imm, **loops), uops=[uops[u]])
        pb.emit(MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, sram_base=lay.abase[sa],
                        dram_base=c_el + m0 * nb + n0, y_size=tm, x_size=tn, x_stride=nb))


def _check_tiling(cfg: Config, t: Tiling, slots: int) -> None:
    if min(t.tm, t.tn, t.tk) < 1:
        raise ValueError(f"tile sizes must be positive: {t}")
    for what, used, depth in (("inp", t.tm * t.tk, cfg.inp_depth),
                              ("wgt", t.tn * t.tk, cfg.wgt_depth),
                              ("acc", t.tm * t.tn, cfg.acc_depth),
                              ("uop", slots * slots * t.tk + 2 * slots, cfg.uop_depth)):
        if used * (slots if what != "uop" else 1) > depth:
            raise ValueError(f"tiling {t} needs {used} {what} entries per buffer slot "
                             f"({slots} slot(s)) but the {what} buffer has {depth}")


__all__ = ["matmul_program", "MatmulProgram", "MatmulPlan", "Tiling", "choose_tiling",
           "pack_tiles", "unpack_tiles"]
