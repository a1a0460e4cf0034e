"""Direct lowering of a quantized conv2d / dense onto VTA instructions (no im2col).

The packed input ``(N/b, C/bi, H, W, b, bi)`` is read tile by tile: a tile is ``th`` output rows
of one batch block; its input rows (with the convolution's zero padding produced by the LOAD's
y/x padding) go to the input buffer, one region per input-channel block. One GEMM instruction
per (tile, output-channel block, input-channel chunk) walks the output pixels with its two loops
(rows: ``iter_out``, columns: ``iter_in``) over micro-ops, one per (input block, kh, kw).
The accumulator is initialised with the bias (a LOAD ACC that repeats one element: x_stride 0),
and the epilogue runs on the ALU: SHR (rounding is folded in the bias), MAX lo, MIN hi; STORE
writes the int8 result into the packed output.

Dependency tokens: load and compute hand over once per step (load pushes RAW, compute pushes WAR
back); compute and store once per (tile, output block); FINISH waits for the last STORE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from vta.isa import AluInsn, AluOp, Config, FinishInsn, GemmInsn, Insn, MemInsn, MemType, Opcode
from vta.isa.insn import Uop
from vta.isa.layout import ITER_BITS

from ..errors import LoweringError  # the layer does not fit the config: it runs on the CPU
from .pack import ceil_div


@dataclass(frozen=True)
class ConvGeom:
    n: int
    c: int
    h: int
    w: int
    o: int
    kh: int
    kw: int
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, left, bottom, right
    dil: tuple[int, int]

    @property
    def oh(self) -> int:
        return (self.h + self.pads[0] + self.pads[2] - self.dil[0] * (self.kh - 1) - 1) \
            // self.stride[0] + 1

    @property
    def ow(self) -> int:
        return (self.w + self.pads[1] + self.pads[3] - self.dil[1] * (self.kw - 1) - 1) \
            // self.stride[1] + 1

    @property
    def macs(self) -> int:
        return self.n * self.o * self.oh * self.ow * self.c * self.kh * self.kw


@dataclass(frozen=True)
class Addrs:
    """DRAM element addresses (relative to the arena base) of the layer's buffers."""

    inp: int  # INP elements
    wgt: int  # WGT elements
    bias: int  # ACC elements
    out: int  # OUT elements
    uop: int  # UOP elements
    shift: int = -1  # ACC elements: per-channel shift amounts (-1: one shift for all)


@dataclass(frozen=True)
class Tiling:
    th: int  # output rows per tile
    chunk: int  # input-channel blocks per GEMM step
    group: int  # output-channel blocks per GEMM (one accumulator region each)
    rows: int  # input rows held per channel block (incl. padding)
    wp: int  # padded input row width
    inp_slots: int = 1  # 2: the input buffer is split in two (load ahead while computing)
    wgt_slots: int = 1
    acc_slots: int = 1
    order: str = "tile"  # "tile": row tiles outer (input stationary); "group": weights stationary

    @property
    def slots(self) -> tuple[int, int, int]:
        return (self.inp_slots, self.wgt_slots, self.acc_slots)

    def acc_half(self, cfg: Config) -> int:
        """Accumulator entries per slot (the top ``2 * group`` entries hold the biases and
        the per-channel shift amounts)."""
        return (cfg.acc_depth - 2 * self.group) // self.acc_slots

    def bias_base(self, cfg: Config) -> int:
        return cfg.acc_depth - self.group

    def shift_base(self, cfg: Config) -> int:
        return cfg.acc_depth - 2 * self.group

    def chunks(self, g: ConvGeom, cfg: Config) -> list[tuple[int, int]]:
        cb = ceil_div(g.c, cfg.block_in)
        return [(c0, min(cb, c0 + self.chunk)) for c0 in range(0, cb, self.chunk)]

    def meta(self) -> dict[str, int | str]:
        return {"rows": self.th, "chunk": self.chunk, "group": self.group,
                "inp_slots": self.inp_slots, "wgt_slots": self.wgt_slots,
                "acc_slots": self.acc_slots, "order": self.order}


def choose_tiling(cfg: Config, g: ConvGeom, slots: int | tuple[int, int, int] = 1,
                  order: str = "tile", max_chunk: int | None = None) -> Tiling:
    """The largest tiles that fit the on-chip buffers (each split into ``slots`` parts: an int
    for all three buffers, or (inp, wgt, acc)): all input-channel blocks per step when one band
    of rows fits, as many output-channel blocks per GEMM as the weight, micro-op and
    accumulator buffers hold, then as many output rows as the input buffer holds.
    ``max_chunk`` caps the input-channel blocks per step (smaller chunks, taller row tiles)."""
    si, sw_, sa = (slots, slots, slots) if isinstance(slots, int) else slots
    sh, _sw = g.stride
    cb = ceil_div(g.c, cfg.block_in)
    ob = ceil_div(g.o, cfg.block_out)
    wp = g.w + g.pads[1] + g.pads[3]
    r1 = g.dil[0] * (g.kh - 1) + 1
    kk = g.kh * g.kw
    inp_cap, wgt_cap = cfg.inp_depth // si, cfg.wgt_depth // sw_
    if max(g.pads) > 15:
        raise LoweringError(f"padding {max(g.pads)} exceeds the 4-bit LOAD pad fields")
    if sh * wp >= 1 << cfg.log_inp_depth or g.ow >= 1 << ITER_BITS:
        raise LoweringError(f"an input row of {wp} pixels does not fit the GEMM loop fields")
    # micro-op sets: one per (chunk size, inp slot, wgt slot, acc slot) combination
    sets = 2 * si * sw_ * sa
    fixed = 3 * sa  # epilogue, bias-add and vector-shift micro-ops
    chunk = min(cb, inp_cap // (r1 * wp), wgt_cap // kk,
                (cfg.uop_depth - fixed - sa) // (sets * kk + sa), max_chunk or cb)
    if chunk < 1 or g.ow > cfg.acc_depth // sa - 1:
        raise LoweringError("one band of input rows or one output row does not fit on chip")
    group = min(ob, wgt_cap // (chunk * kk),
                (cfg.uop_depth - fixed) // (sets * chunk * kk + sa))
    # the biases of a group sit in the top accumulator entries
    while group > 0 and group * g.ow > (cfg.acc_depth - 2 * group) // sa:
        group -= 1
    if group < 1:
        raise LoweringError("one output row does not fit the accumulator buffer")
    acc_cap = (cfg.acc_depth - 2 * group) // sa
    th = 0
    for t in range(g.oh, 0, -1):
        rows = (t - 1) * sh + r1
        if chunk * rows * wp <= inp_cap and group * t * g.ow <= acc_cap and t < 1 << ITER_BITS:
            th = t
            break
    if th == 0:  # pragma: no cover - chunk and group were sized for one row
        raise LoweringError("no row tile fits on chip")
    return Tiling(th, chunk, group, (th - 1) * sh + r1, wp, si, sw_, sa, order)


@dataclass
class _Step:
    n: int
    r0: int
    th: int
    o0: int
    o1: int
    c0: int
    c1: int
    reload: bool  # this step loads its input tile
    reload_wgt: bool  # this step loads its weights
    inp_epoch: int  # how many input loads came before (the slot is epoch % inp_slots)
    wgt_epoch: int
    group: int  # accumulator group index (tile, output-channel group)
    inp_slot: int = 0
    wgt_slot: int = 0
    acc_slot: int = 0


def _steps(cfg: Config, g: ConvGeom, t: Tiling) -> list[_Step]:
    """The steps in execution order, with what each loads and which buffer slots it uses.

    An operand that does not change between consecutive steps (the input tile across
    output-channel groups in "tile" order, the weights across row tiles in "group" order) is
    not reloaded; each (re)load starts a new epoch and takes the next slot."""
    ob = ceil_div(g.o, cfg.block_out)
    nb = ceil_div(g.n, cfg.batch)
    chunks = t.chunks(g, cfg)
    tiles = [(n, r0) for n in range(nb) for r0 in range(0, g.oh, t.th)]
    groups = list(range(0, ob, t.group))
    if t.order == "tile":
        outer = [(ti, gi) for ti in range(len(tiles)) for gi in range(len(groups))]
    else:
        outer = [(ti, gi) for gi in range(len(groups)) for ti in range(len(tiles))]
    out: list[_Step] = []
    prev_tile = prev_group = None
    inp_epoch = wgt_epoch = -1
    for grp, (ti, gi) in enumerate(outer):
        n, r0 = tiles[ti]
        o0 = groups[gi]
        for c0, c1 in chunks:
            reload_inp = len(chunks) > 1 or ti != prev_tile
            reload_wgt = len(chunks) > 1 or gi != prev_group
            inp_epoch += reload_inp
            wgt_epoch += reload_wgt
            out.append(_Step(n, r0, min(t.th, g.oh - r0), o0, min(ob, o0 + t.group), c0, c1,
                             reload_inp, reload_wgt, inp_epoch, wgt_epoch, grp,
                             inp_epoch % t.inp_slots, wgt_epoch % t.wgt_slots,
                             grp % t.acc_slots))
        prev_tile, prev_group = ti, gi
    return out


def _load_waits(steps: list[_Step], t: Tiling) -> list[int]:
    """For each step, the last compute step that must be finished before its loads run: the
    last user of every buffer slot the step overwrites (-1: nothing to wait for)."""
    first_of: dict[tuple[str, int], int] = {}
    for k, st in enumerate(steps):
        first_of.setdefault(("inp", st.inp_epoch), k)
        first_of.setdefault(("wgt", st.wgt_epoch), k)
    need: list[int] = []
    for st in steps:
        w = -1
        for kind, reload, epoch, nslots in (("inp", st.reload, st.inp_epoch, t.inp_slots),
                                            ("wgt", st.reload_wgt, st.wgt_epoch, t.wgt_slots)):
            if reload and epoch >= nslots:
                # the slot held epoch - nslots, used until epoch - nslots + 1 began
                w = max(w, first_of[(kind, epoch - nslots + 1)] - 1)
        need.append(max(w, need[-1] if need else -1))
    return need


def layer_uops(cfg: Config, g: ConvGeom, t: Tiling
               ) -> tuple[list[Uop], dict]:
    """Micro-ops, in this order: per accumulator slot s the epilogue ALU op (index s), the
    bias add (index acc_slots + s) and the vector shift (2 acc_slots + s); per slot the reset
    set (one per output block of a group); then one GEMM set per (chunk size, inp slot, wgt
    slot, acc slot) that occurs, ordered (group, input block, kh, kw). Returns the uops and
    the start of each set (reset sets under the key ``("reset", s)``)."""
    region = t.rows * t.wp
    inp_half, wgt_half = cfg.inp_depth // t.inp_slots, cfg.wgt_depth // t.wgt_slots
    acc_half, bias = t.acc_half(cfg), t.bias_base(cfg)
    acc_region = t.th * g.ow
    uops = [Uop(s * acc_half, s * acc_half, 0) for s in range(t.acc_slots)]
    uops += [Uop(s * acc_half, bias, 0) for s in range(t.acc_slots)]
    uops += [Uop(s * acc_half, t.shift_base(cfg), 0) for s in range(t.acc_slots)]
    start: dict = {}
    for s in range(t.acc_slots):
        start[("reset", s)] = len(uops)
        uops += [Uop(s * acc_half + gi * acc_region, 0, 0) for gi in range(t.group)]
    for st in _steps(cfg, g, t):
        key = (st.c1 - st.c0, st.inp_slot, st.wgt_slot, st.acc_slot)
        if key in start:
            continue
        size = key[0]
        start[key] = len(uops)
        ib, wb, ab = st.inp_slot * inp_half, st.wgt_slot * wgt_half, st.acc_slot * acc_half
        for gi in range(t.group):
            for ci in range(size):
                for i in range(g.kh):
                    for j in range(g.kw):
                        uops.append(Uop(ab + gi * acc_region,
                                        ib + ci * region + i * g.dil[0] * t.wp + j * g.dil[1],
                                        wb + ((gi * size + ci) * g.kh + i) * g.kw + j))
    if len(uops) > cfg.uop_depth:  # pragma: no cover - choose_tiling budgets for this
        raise LoweringError(f"{len(uops)} micro-ops exceed the micro-op buffer")
    return uops, start


def lower_conv(cfg: Config, g: ConvGeom, a: Addrs, *, shift: int | list[int], lo: int, hi: int,
               tiling: Tiling | None = None, cb_total: int | None = None,
               ob_total: int | None = None) -> tuple[list[Insn], list[Uop]]:
    """Instructions (ending with FINISH) and micro-ops of one quantized conv layer.

    With split buffers the load module runs ahead of compute: before overwriting a slot it
    waits (pops compute's per-step tokens) only for the last step that used that slot; compute
    waits for the store of accumulator group j - acc_slots before reusing its slot.

    ``cb_total``/``ob_total``: channel blocks of the whole packed input/output tensors when this
    conv covers a slice of them (a group of a grouped conv; ``a`` then points at the slice).
    """
    t = tiling or best_tiling(cfg, g)
    sh, sw = g.stride
    dh = g.dil[0]
    cb = ceil_div(g.c, cfg.block_in)
    ob = ceil_div(g.o, cfg.block_out)
    cbt, obt = cb_total or cb, ob_total or ob
    kk = g.kh * g.kw
    oh, ow = g.oh, g.ow
    region = t.rows * t.wp
    inp_half, wgt_half = cfg.inp_depth // t.inp_slots, cfg.wgt_depth // t.wgt_slots
    acc_half, bias_base = t.acc_half(cfg), t.bias_base(cfg)
    acc_region = t.th * ow
    uops, uop_start = layer_uops(cfg, g, t)
    vector_shift = isinstance(shift, list | tuple)
    if vector_shift and a.shift < 0:
        raise LoweringError("per-channel shifts need the shift vector's address (Addrs.shift)")
    prog: list[Insn] = [MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, sram_base=0,
                                dram_base=a.uop, y_size=1, x_size=len(uops),
                                x_stride=len(uops))]
    steps = _steps(cfg, g, t)
    waits = _load_waits(steps, t)
    last_needed = waits[-1]  # compute steps after this one need not return a token
    popped = -1  # the last compute step whose token the load module has consumed
    ngroups = steps[-1].group + 1
    lag = t.acc_slots
    for k, st in enumerate(steps):
        first_chunk, last_chunk = st.c0 == 0, st.c1 == cb
        size, gsize = st.c1 - st.c0, st.o1 - st.o0
        # ---------------------------------------------------------------- load module
        load: list[Insn] = []
        if st.reload:
            ih0 = st.r0 * sh - g.pads[0]
            rows = (st.th - 1) * sh + dh * (g.kh - 1) + 1
            top = max(0, -ih0)
            bot = max(0, ih0 + rows - g.h)
            for ci in range(st.c0, st.c1):
                load.append(MemInsn(
                    opcode=Opcode.LOAD, memory_type=MemType.INP,
                    sram_base=st.inp_slot * inp_half + (ci - st.c0) * region,
                    dram_base=a.inp + ((st.n * cbt + ci) * g.h + ih0 + top) * g.w,
                    y_size=rows - top - bot, x_size=g.w, x_stride=g.w, y_pad_0=top,
                    y_pad_1=bot, x_pad_0=g.pads[1], x_pad_1=g.pads[3]))
        if st.reload_wgt or not load:  # a step always loads something: it carries the tokens
            load.append(MemInsn(opcode=Opcode.LOAD, memory_type=MemType.WGT,
                                sram_base=st.wgt_slot * wgt_half,
                                dram_base=a.wgt + (st.o0 * cb + st.c0) * kk, y_size=gsize,
                                x_size=size * kk, x_stride=cb * kk))
        pops = waits[k] - popped
        popped = waits[k]
        # every pop must happen before the first byte moves: one pop per instruction, the
        # extra ones on zero-size LOADs (which only move tokens) in front
        if pops > 0:
            load = [MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, pop_next_dep=1)
                    for _ in range(pops - 1)] + load
            load[pops - 1] = _with(load[pops - 1], pop_next_dep=1)
        load[-1] = _with(load[-1], push_next_dep=1)
        prog += load
        # ------------------------------------------------------------- compute module
        comp: list[Insn] = []
        acc0 = st.acc_slot * acc_half
        if first_chunk:
            # acc = 0 (GEMM reset), biases into the top entries, acc += bias (ALU)
            rb = uop_start[("reset", st.acc_slot)]
            comp.append(GemmInsn(reset_reg=1, uop_bgn=rb, uop_end=rb + gsize, iter_out=st.th,
                                 iter_in=ow, dst_factor_out=ow, dst_factor_in=1))
            comp.append(MemInsn(opcode=Opcode.LOAD, memory_type=MemType.ACC,
                                sram_base=bias_base, dram_base=a.bias + st.o0, y_size=1,
                                x_size=gsize, x_stride=gsize))
            ub = t.acc_slots + st.acc_slot
            comp.append(AluInsn(uop_bgn=ub, uop_end=ub + 1, iter_out=gsize,
                                iter_in=st.th * ow, dst_factor_out=acc_region, dst_factor_in=1,
                                src_factor_out=1, src_factor_in=0, alu_opcode=AluOp.ADD,
                                use_imm=0))
            if vector_shift:
                comp.append(MemInsn(opcode=Opcode.LOAD, memory_type=MemType.ACC,
                                    sram_base=t.shift_base(cfg), dram_base=a.shift + st.o0,
                                    y_size=1, x_size=gsize, x_stride=gsize))
        bgn = uop_start[(size, st.inp_slot, st.wgt_slot, st.acc_slot)]
        comp.append(GemmInsn(uop_bgn=bgn, uop_end=bgn + gsize * size * kk, iter_out=st.th,
                             iter_in=ow, dst_factor_out=ow, dst_factor_in=1,
                             src_factor_out=sh * t.wp, src_factor_in=sw, wgt_factor_out=0,
                             wgt_factor_in=0))
        if last_chunk:
            if vector_shift:  # acc >>= shift[channel]: the shift vector broadcast over pixels
                us = 2 * t.acc_slots + st.acc_slot
                comp.append(AluInsn(uop_bgn=us, uop_end=us + 1, iter_out=gsize,
                                    iter_in=st.th * ow, dst_factor_out=acc_region,
                                    dst_factor_in=1, src_factor_out=1, src_factor_in=0,
                                    alu_opcode=AluOp.SHR, use_imm=0))
            for op, imm in ((AluOp.SHR, shift), (AluOp.MAX, lo), (AluOp.MIN, hi)):
                if op == AluOp.SHR and (vector_shift or shift == 0):
                    continue
                comp.append(AluInsn(uop_bgn=st.acc_slot, uop_end=st.acc_slot + 1,
                                    iter_out=1, iter_in=gsize * acc_region, dst_factor_in=1,
                                    src_factor_in=1, alu_opcode=op, use_imm=1, imm=imm))
        comp[0] = _with(comp[0], pop_prev_dep=1,
                        pop_next_dep=int(first_chunk and st.group >= lag))
        comp[-1] = _with(comp[-1], push_prev_dep=int(k <= last_needed),
                         push_next_dep=int(last_chunk))
        prog += comp
        # --------------------------------------------------------------- store module
        if last_chunk:
            base = a.out + ((st.n * obt + st.o0) * oh + st.r0) * ow
            if st.th == t.th or gsize == 1:
                stores = [MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, sram_base=acc0,
                                  dram_base=base, y_size=gsize, x_size=st.th * ow,
                                  x_stride=oh * ow)]
            else:  # a short last tile: the accumulator regions are not back to back
                stores = [MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT,
                                  sram_base=acc0 + gi * acc_region,
                                  dram_base=base + gi * oh * ow, y_size=1, x_size=st.th * ow,
                                  x_stride=st.th * ow)
                          for gi in range(gsize)]
            j = st.group
            stores[0] = _with(stores[0], pop_prev_dep=1)
            stores[-1] = _with(stores[-1], push_prev_dep=int(j + lag < ngroups
                                                             or j == ngroups - 1))
            prog += stores
    prog.append(FinishInsn(pop_next_dep=1))
    return prog, uops


@dataclass(frozen=True)
class GroupPlan:
    """A grouped conv as ``count`` independent convs over channel-block slices."""

    count: int
    geom: ConvGeom  # one slice
    cb_total: int
    ob_total: int

    def slices(self, w: np.ndarray, cfg: Config) -> list[np.ndarray]:
        """Each slice's OIHW weights (depthwise: block-diagonal BLOCK x BLOCK kernels)."""
        o, cg = w.shape[:2]
        if cg == self.geom.c:
            og = o // self.count
            return [w[k * og:(k + 1) * og] for k in range(self.count)]
        blk = cfg.block
        out = []
        for k in range(self.count):
            d = np.zeros((blk, blk) + w.shape[2:], w.dtype)
            d[np.arange(blk), np.arange(blk)] = w[k * blk:(k + 1) * blk, 0]
            out.append(d)
        return out


def group_plan(cfg: Config, x_shape: tuple[int, ...], w_shape: tuple[int, ...],
               attrs: dict) -> GroupPlan:
    """How a conv with ``attrs["group"]`` groups maps onto VTA: whole channel blocks per group
    (each group its own conv), or a depthwise conv (multiplier 1) as block-diagonal convs of
    BLOCK channels, as TVM's VTA ran MobileNet. Raises LoweringError otherwise."""
    geom = conv_geom(x_shape, w_shape, attrs)
    grp = attrs.get("group", 1)
    c, o = geom.c, geom.o
    cbt, obt = ceil_div(c, cfg.block_in), ceil_div(o, cfg.block_out)
    if grp == 1:
        return GroupPlan(1, geom, cbt, obt)
    blk = cfg.block
    if (c // grp) % cfg.block_in == 0 and (o // grp) % cfg.block_out == 0:
        sub = ConvGeom(geom.n, c // grp, geom.h, geom.w, o // grp, geom.kh, geom.kw,
                       geom.stride, geom.pads, geom.dil)
        return GroupPlan(grp, sub, cbt, obt)
    if grp == c == o and c % blk == 0:
        sub = ConvGeom(geom.n, blk, geom.h, geom.w, blk, geom.kh, geom.kw, geom.stride,
                       geom.pads, geom.dil)
        return GroupPlan(c // blk, sub, cbt, obt)
    raise LoweringError(f"{grp} groups of {c // grp} input channels do not split into whole "
                        f"{blk}-channel blocks")


def concat_programs(parts: list[list[Insn]]) -> list[Insn]:
    """One program running several lowered programs in sequence: each one's FINISH becomes a
    compute-module no-op (a zero-size LOAD ACC) that waits for its last STORE and releases the
    load module, whose first instruction of the next part waits for it."""
    out: list[Insn] = []
    for k, prog in enumerate(parts):
        body = list(prog[:-1])
        if k > 0:
            i = next(j for j, x in enumerate(body) if isinstance(x, MemInsn)
                     and x.opcode == Opcode.LOAD and x.memory_type in (MemType.INP, MemType.WGT))
            body[i] = _with(body[i], pop_next_dep=1)
        out += body
        if k < len(parts) - 1:
            out.append(MemInsn(opcode=Opcode.LOAD, memory_type=MemType.ACC, pop_next_dep=1,
                               push_prev_dep=1))
        else:
            out.append(prog[-1])
    return out


def estimate_cycles(insns: list[Insn], cfg: Config) -> float:
    """Cycles from the performance model (vta.sim.perf); bytes moved when it is absent."""
    try:
        from vta.sim.perf import PerfModel
    except ImportError:  # pragma: no cover - the model ships with the kit
        return float(sum(i.y_size * i.x_size * cfg.elem_bytes(i.memory_type)
                         for i in insns if isinstance(i, MemInsn)))
    return float(PerfModel(cfg).run(list(insns))["cycles"])


#: The buffer splits tried by :func:`best_tiling`: (inp, wgt, acc) slots.
SLOT_CHOICES = ((1, 1, 1), (2, 2, 2), (1, 2, 2), (2, 1, 2))
_BEST: dict[tuple[Config, ConvGeom], Tiling] = {}


def quick_estimate(cfg: Config, g: ConvGeom, t: Tiling) -> float:
    """A rough cycle count from the step plan alone: bytes over a ~3.5 B/cycle port (plus a
    burst latency per row) and micro-op iterations, summed when every buffer is single,
    overlapped when one is split. Ranks candidate tilings before the performance model."""
    kk = g.kh * g.kw
    mem = comp = 0.0
    for st in _steps(cfg, g, t):
        size, gsize = st.c1 - st.c0, st.o1 - st.o0
        if st.reload:
            rows = (st.th - 1) * g.stride[0] + g.dil[0] * (g.kh - 1) + 1
            mem += size * (rows * g.w * cfg.inp_elem_bytes / 3.5 + 20 * rows)
        if st.reload_wgt:
            mem += gsize * (size * kk * cfg.wgt_elem_bytes / 3.5 + 20)
        px = st.th * g.ow
        comp += px * gsize * size * kk + 8
        if st.c0 == 0:
            comp += 2 * px * gsize
        if st.c1 * cfg.block_in >= g.c:
            comp += 3 * px * gsize
            mem += gsize * (px * cfg.out_elem_bytes / 3.5 + 20)
    return max(mem, comp) if max(t.slots) > 1 else mem + comp


def best_tiling(cfg: Config, g: ConvGeom) -> Tiling:
    """The fastest buffer split x loop order (input- or weight-stationary) x input-channel
    chunk: candidates are ranked by :func:`quick_estimate`, the best four are timed by the
    performance model on their programs (memoised per geometry)."""
    key = (cfg, g)
    if key in _BEST:
        return _BEST[key]
    cands: list[tuple[float, Tiling]] = []
    cb = ceil_div(g.c, cfg.block_in)
    for slots in SLOT_CHOICES:
        for order in ("tile", "group"):
            for max_chunk in sorted({cb, max(1, cb // 2), max(1, cb // 4)}, reverse=True):
                try:
                    t = choose_tiling(cfg, g, slots, order, max_chunk)
                except LoweringError:
                    continue
                if all(t != c[1] for c in cands):
                    cands.append((quick_estimate(cfg, g, t), t))
    if not cands:
        raise LoweringError("no tiling fits the on-chip buffers")
    cands.sort(key=lambda c: c[0])
    timed = []
    for _, t in cands[:4]:
        insns, _ = lower_conv(cfg, g, Addrs(0, 0, 0, 0, 0), shift=1, lo=-128, hi=127, tiling=t)
        timed.append((estimate_cycles(insns, cfg), len(insns), t))
    # among the tilings within 3% of the fewest cycles, the one with fewest instructions
    # (cheaper to simulate and to fetch)
    fastest = min(c[0] for c in timed)
    best = min((c for c in timed if c[0] <= fastest * 1.03), key=lambda c: c[1])[2]
    if len(_BEST) > 256:
        _BEST.clear()
    _BEST[key] = best
    return best


def _with(insn: Insn, **flags: int) -> Insn:
    """Set dependency flags (instructions are built mutable-free, so copy via __dict__)."""
    new = object.__new__(type(insn))
    new.__dict__.update(insn.__dict__)
    new.__dict__.update(flags)
    return new


_DEP = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")


def encode_fast(insns: list[Insn], cfg: Config) -> bytes:
    """Vectorised :func:`vta.isa.encode_program` (same bytes, same range checks per field).

    Every field lies within one 64-bit half (the layout guarantees it), so each kind of
    instruction is packed column-wise into two uint64 words with numpy.
    """
    import numpy as np
    from vta.isa.errors import EncodeError

    lay = cfg.layouts
    out = np.zeros((len(insns), 2), dtype=np.uint64)
    kinds: dict[str, list[int]] = {}
    for k, i in enumerate(insns):
        kinds.setdefault(i.layout_name, []).append(k)
    for kind, idx in kinds.items():
        layout = getattr(lay, kind)
        rows = [insns[k] for k in idx]
        for f in layout.fields:
            if f.name == "opcode":
                vals = np.array([int(r.opcode) for r in rows], dtype=np.int64)
            else:
                vals = np.array([getattr(r, f.name) for r in rows], dtype=np.int64)
            bad = (vals < f.min) | (vals > f.max)
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                raise EncodeError(f"instruction {idx[j]}: {f.name}={int(vals[j])} does not fit "
                                  f"its {f.width}-bit field (range {f.min}..{f.max})")
            u = (vals & f.mask).astype(np.uint64)
            half, off = divmod(f.offset, 64)
            out[idx, half] |= u << np.uint64(off)
    return out.astype("<u8").tobytes()


def conv_geom(x_shape: tuple[int, ...], w_shape: tuple[int, ...], attrs: dict) -> ConvGeom:
    if len(x_shape) == 2:  # dense: (N, K) x (O, K)
        return ConvGeom(x_shape[0], x_shape[1], 1, 1, w_shape[0], 1, 1, (1, 1), (0, 0, 0, 0),
                        (1, 1))
    n, c, h, w = x_shape
    return ConvGeom(n, c, h, w, w_shape[0], w_shape[2], w_shape[3], tuple(attrs["strides"]),
                    tuple(attrs["pads"]), tuple(attrs["dilations"]))
