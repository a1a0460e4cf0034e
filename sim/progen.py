"""Program construction: automatic dependency tokens, and random token-correct programs.

:class:`ProgramBuilder` takes instructions in program order together with what each one reads and
writes (SRAM entry ranges, DRAM byte ranges; derived from the instruction fields when not given)
and sets the four dependency flags so that **every legal interleaving of the load, compute and
store modules gives the result of running the program sequentially**. It inserts a token only
where two modules touch the same data, so independent work overlaps (double buffering comes out
of it naturally), places each push on the earliest instruction that satisfies the dependency, and
inserts a no-op in compute when load and store must be ordered (they share no token queue).

>>> from vta.isa import Config, MemInsn, MemType, Opcode
>>> b = ProgramBuilder(Config())
>>> _ = b.emit(MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, y_size=1, x_size=1,
...                    x_stride=1))
>>> _ = b.emit(MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, y_size=1, x_size=1,
...                    x_stride=1, dram_base=64))
>>> [type(i).__name__ for i in b.finish()]
['MemInsn', 'MemInsn', 'FinishInsn']

:func:`random_program` generates random token-correct programs (used by the fsim tests, the RTL
cocotb tests and tsim): every instruction kind, memory type, padding, stride, ALU operation and
loop shape, with all indices in bounds and every SRAM entry written before it is read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from vta.isa.config import Config
from vta.isa.deps import COMPUTE_MODULE, DEP_FLAGS, LOAD_MODULE, MODULES, STORE_MODULE, TOKEN_QUEUES
from vta.isa.insn import (
    AluInsn,
    FinishInsn,
    GemmInsn,
    Insn,
    MemInsn,
    Uop,
    encode_program,
    encode_uops,
    nop_insn,
)
from vta.isa.layout import AluOp, MemType, Opcode

#: Buffers an access can name ("dram" ranges are in bytes, the others in SRAM entries).
BUFFERS = ("uop", "inp", "wgt", "acc", "dram")

# (from, to) -> (flag set on the pushing instruction, flag set on the popping instruction)
_LINK = {(q.src, q.dst): (q.push_flag, q.pop_flag) for q in TOKEN_QUEUES}


@dataclass(frozen=True)
class Access:
    """A half-open range ``[lo, hi)`` of one buffer (SRAM entries, or DRAM bytes)."""

    buffer: str
    lo: int
    hi: int

    def __post_init__(self) -> None:
        if self.buffer not in BUFFERS:
            raise ValueError(f"unknown buffer {self.buffer!r}; choose one of {BUFFERS}")


def mem_accesses(insn: MemInsn, cfg: Config) -> tuple[list[Access], list[Access]]:
    """(reads, writes) of a LOAD or STORE, from its fields."""
    if insn.x_size == 0:
        return [], []
    mt = MemType(insn.memory_type)
    eb = cfg.elem_bytes(mt)
    dram = []
    if insn.y_size:
        end = insn.dram_base + (insn.y_size - 1) * insn.x_stride + insn.x_size
        dram = [Access("dram", insn.dram_base * eb, end * eb)]
    if insn.opcode == Opcode.STORE:
        sram = Access("acc", insn.sram_base, insn.sram_base + insn.y_size * insn.x_size)
        return [sram], dram
    rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    name = {MemType.UOP: "uop", MemType.WGT: "wgt", MemType.INP: "inp", MemType.ACC: "acc"}[mt]
    return dram, [Access(name, insn.sram_base, insn.sram_base + rows * cols)]


def loop_accesses(insn: GemmInsn | AluInsn, cfg: Config,
                  uops: Sequence[Uop] | None) -> tuple[list[Access], list[Access]]:
    """(reads, writes) of a GEMM or ALU; ``uops`` are the micro-ops at [uop_bgn, uop_end).

    Without ``uops`` the whole inp, wgt and acc buffers are assumed (always safe).
    """
    if insn.uop_end <= insn.uop_bgn or insn.iter_out == 0 or insn.iter_in == 0:
        return [], []
    uop_read = Access("uop", insn.uop_bgn, insn.uop_end)
    if uops is None:
        acc = Access("acc", 0, cfg.acc_depth)
        if isinstance(insn, GemmInsn):
            return [uop_read, acc, Access("inp", 0, cfg.inp_depth),
                    Access("wgt", 0, cfg.wgt_depth)], [acc]
        return [uop_read, acc], [acc]
    if len(uops) != insn.uop_end - insn.uop_bgn:
        raise ValueError(f"{len(uops)} micro-ops given for uop range "
                         f"[{insn.uop_bgn}, {insn.uop_end})")

    def span(vals: list[int], f_out: int, f_in: int) -> tuple[int, int]:
        top = (insn.iter_out - 1) * f_out + (insn.iter_in - 1) * f_in
        return min(vals), max(vals) + top + 1

    dlo, dhi = span([u.dst_idx for u in uops], insn.dst_factor_out, insn.dst_factor_in)
    writes = [Access("acc", dlo, dhi)]
    reads = [uop_read, Access("acc", dlo, dhi)]
    if insn.reset_reg and isinstance(insn, GemmInsn):  # an ALU ignores reset_reg
        return [uop_read], writes
    slo, shi = span([u.src_idx for u in uops], insn.src_factor_out, insn.src_factor_in)
    if isinstance(insn, GemmInsn):
        wlo, whi = span([u.wgt_idx for u in uops], insn.wgt_factor_out, insn.wgt_factor_in)
        reads += [Access("inp", slo, shi), Access("wgt", wlo, whi)]
    elif not insn.use_imm:
        reads.append(Access("acc", slo, shi))
    return reads, writes


class ProgramBuilder:
    """Collects instructions in program order and sets their dependency tokens.

    Use :meth:`emit` for each instruction (its own dependency flags are ignored and replaced),
    then :meth:`finish` (appends FINISH, which waits for every module) or :meth:`program`.
    The result runs identically under every legal interleaving; only the data dependencies
    described by the accesses are enforced, so give the real ranges to get overlap.
    """

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._insns: list[Insn] = []
        self._flags: list[dict[str, int]] = []
        self._module: list[str] = []
        self._mpos: list[int] = []                      # position within its module
        self._by_module: dict[str, list[int]] = {m: [] for m in MODULES}
        self._clock: list[dict[str, int]] = []          # per insn: instructions done before+self
        self._head: dict[str, dict[str, int]] = {m: dict.fromkeys(MODULES, 0) for m in MODULES}
        self._last_push: dict[tuple[str, str], int] = dict.fromkeys(_LINK, -1)
        # per (buffer, module): list of (mpos, is_write, lo, hi), mpos increasing
        self._records: dict[tuple[str, str], list[tuple[int, bool, int, int]]] = {
            (b, m): [] for b in BUFFERS for m in MODULES}
        self._finished = False

    def __len__(self) -> int:
        return len(self._insns)

    @property
    def insns(self) -> list[Insn]:
        """The instructions so far, with their dependency flags."""
        return [dataclasses.replace(i, **f) for i, f in zip(self._insns, self._flags)]

    def emit(self, insn: Insn, *, uops: Sequence[Uop] | None = None,
             reads: Iterable[Access] | None = None, writes: Iterable[Access] | None = None,
             after: Iterable[int] = ()) -> int:
        """Append ``insn``; returns its index in the program (a no-op may be inserted first).

        ``reads``/``writes`` default to what the instruction's fields say (for GEMM/ALU give
        ``uops``, the micro-ops it runs, for exact ranges; otherwise whole buffers are assumed).
        ``after`` lists program indices this instruction must follow in any case.
        """
        if self._finished:
            raise ValueError("the program already ends with FINISH")
        if isinstance(insn, FinishInsn):
            raise ValueError("use finish() to end the program")
        if not isinstance(insn, MemInsn | GemmInsn | AluInsn):
            raise TypeError(f"expected a MemInsn, GemmInsn or AluInsn, not {insn!r}")
        if reads is None or writes is None:
            if isinstance(insn, MemInsn):
                r, w = mem_accesses(insn, self.cfg)
            else:
                r, w = loop_accesses(insn, self.cfg, uops)
            reads = r if reads is None else reads
            writes = w if writes is None else writes
        return self._append(insn, list(reads), list(writes), list(after))

    def nop(self, module: str) -> int:
        """A no-op in ``module`` (a LOAD/STORE with x_size=0); useful only for its tokens."""
        return self._append(nop_insn(module), [], [], [])

    def finish(self) -> list[Insn]:
        """Append FINISH (waiting for every load and store) and return the whole program."""
        if not self._finished:
            after = [self._by_module[m][-1] for m in (LOAD_MODULE, STORE_MODULE)
                     if self._by_module[m]]
            self._append(FinishInsn(), [], [], after)
            self._finished = True
        return self.insns

    def program(self) -> bytes:
        """The encoded instruction stream, ending with FINISH."""
        return encode_program(self.finish(), self.cfg)

    # ------------------------------------------------------------------ internals
    def _needs(self, module: str, reads: list[Access], writes: list[Access],
               after: list[int]) -> dict[str, int]:
        """For each other module: how many of its instructions must be done first."""
        head = self._head[module]
        need = {m: 0 for m in MODULES if m != module}
        for idx in after:
            m = self._module[idx]
            if m != module:
                need[m] = max(need[m], self._mpos[idx] + 1)
        for accesses, is_write in ((reads, False), (writes, True)):
            for acc in accesses:
                if acc.hi <= acc.lo:
                    continue
                for other in need:
                    recs = self._records[(acc.buffer, other)]
                    floor = max(head[other], need[other])
                    for mpos, rec_write, lo, hi in reversed(recs):
                        if mpos < floor:
                            break
                        if (rec_write or is_write) and lo < acc.hi and acc.lo < hi:
                            need[other] = mpos + 1
                            break
        return need

    def _append(self, insn: Insn, reads: list[Access], writes: list[Access],
                after: list[int]) -> int:
        module = insn.module
        need = self._needs(module, reads, writes, after)
        flags = dict.fromkeys(DEP_FLAGS, 0)
        clock = dict(self._head[module])
        # load and store share no token queue: order them through a compute instruction
        if module != COMPUTE_MODULE:
            far = STORE_MODULE if module == LOAD_MODULE else LOAD_MODULE
            if need[far] > clock[far]:
                z = self._find_relay(module, far, need[far], need[COMPUTE_MODULE])
                if z is None:
                    z = self._append(nop_insn(COMPUTE_MODULE), [], [],
                                     [self._by_module[far][need[far] - 1]])
                need[COMPUTE_MODULE] = max(need[COMPUTE_MODULE], self._mpos[z] + 1)
                clock = dict(self._head[module])
        for other, count in need.items():
            if count <= clock[other] or (other, module) not in _LINK:
                continue
            y = self._by_module[other][count - 1]
            push_flag, pop_flag = _LINK[(other, module)]
            assert self._last_push[(other, module)] < count - 1, "token order violated"
            self._flags[y][push_flag] = 1
            self._last_push[(other, module)] = count - 1
            flags[pop_flag] = 1
            for m, c in self._clock[y].items():
                clock[m] = max(clock[m], c)
        index = len(self._insns)
        mpos = len(self._by_module[module])
        clock[module] = mpos + 1
        self._insns.append(insn)  # its own flags are replaced by ``insns``
        self._flags.append(flags)
        self._module.append(module)
        self._mpos.append(mpos)
        self._by_module[module].append(index)
        self._clock.append(clock)
        self._head[module] = dict(clock)
        for accesses, is_write in ((reads, False), (writes, True)):
            for acc in accesses:
                if acc.hi > acc.lo:
                    self._records[(acc.buffer, module)].append((mpos, is_write, acc.lo, acc.hi))
        return index

    def _find_relay(self, module: str, far: str, far_count: int, comp_count: int) -> int | None:
        """The earliest compute instruction that already follows ``far_count`` instructions of
        ``far`` and may still push to ``module`` (keeping tokens in order)."""
        last = self._last_push[(COMPUTE_MODULE, module)]
        for mpos in range(max(last + 1, comp_count - 1, 0),
                          len(self._by_module[COMPUTE_MODULE])):
            idx = self._by_module[COMPUTE_MODULE][mpos]
            if self._clock[idx][far] >= far_count:
                return idx
        return None


# ------------------------------------------------------------------------ random programs
def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


def random_program(cfg: Config, rng: np.random.Generator | int | None = None, *,
                   n_insns: int = 40, dram_bytes: int | None = None, max_loop: int = 3,
                   max_uops: int = 3, max_rows: int = 3, max_cols: int = 4,
                   dense_gemm_ratio: float = 0.25) -> tuple[bytes, np.ndarray]:
    """A random token-correct program and its initial DRAM image.

    About ``n_insns`` instructions (at least 8; initial loads, micro-op loads and FINISH are
    counted): LOADs of every memory type with random paddings and strides, GEMMs (some shaped
    as dense block products, the fsim fast path) and ALUs (every operation, immediates
    including negative ones, reset, both loops, several micro-ops, micro-ops that write the
    same accumulator entry back to back) and STOREs, with dependency tokens from
    :class:`ProgramBuilder`, so every interleaving gives the same result. Every index is in
    bounds, every SRAM entry read was written before (no dependence on initial SRAM contents)
    and the program ends with FINISH. ``max_*`` bound the sizes (keep them small for the RTL
    simulators). ``dram_bytes`` defaults to what the program needs; a larger value is honoured.
    """
    return _RandomProgram(cfg, _rng(rng), n_insns=max(8, n_insns), dram_bytes=dram_bytes,
                          max_loop=max_loop, max_uops=max_uops, max_rows=max_rows,
                          max_cols=max_cols, dense_ratio=dense_gemm_ratio).build()


class _RandomProgram:
    def __init__(self, cfg: Config, rng: np.random.Generator, *, n_insns: int,
                 dram_bytes: int | None, max_loop: int, max_uops: int, max_rows: int,
                 max_cols: int, dense_ratio: float) -> None:
        self.cfg, self.rng, self.n = cfg, rng, n_insns
        self.max_loop, self.max_uops = max(1, max_loop), max(1, max_uops)
        self.max_rows, self.max_cols = max(1, max_rows), max(1, max_cols)
        self.dense_ratio = dense_ratio
        r = self.rng
        # a window of each SRAM buffer, written in full at the start, where all the work happens
        self.win: dict[str, tuple[int, int]] = {}
        for name, depth, size in (("inp", cfg.inp_depth, 24), ("wgt", cfg.wgt_depth, 12),
                                  ("acc", cfg.acc_depth, 24), ("uop", cfg.uop_depth, 32)):
            size = min(size, depth)
            base = int(r.choice([0, depth - size, int(r.integers(0, depth - size + 1))]))
            self.win[name] = (base, size)
        # DRAM: [micro-ops | data]; loads read and stores write anywhere in the data region
        self.uop_bytes = 4 * self.n * 3 * self.max_uops + 64  # room for strided layouts
        data_min = 2 * max(cfg.acc_elem_bytes * 24, cfg.wgt_elem_bytes * 12,
                           cfg.inp_elem_bytes * 24, 256)
        need = self.uop_bytes + data_min
        self.dram_bytes = max(need, dram_bytes or 0)
        self.dram = r.integers(0, 256, self.dram_bytes, dtype=np.uint8)
        self.uop_next = 0  # next free micro-op word in the DRAM micro-op region
        self.b = ProgramBuilder(cfg)

    # -- helpers
    def _data_span(self, eb: int) -> tuple[int, int]:
        """The data region in elements of ``eb`` bytes: [first, end)."""
        first = -(-self.uop_bytes // eb)
        return first, self.dram_bytes // eb

    def _dram_rows(self, eb: int, y: int, x: int) -> tuple[int, int]:
        """(dram_base, x_stride) of a random in-bounds strided region of y rows of x elements."""
        r = self.rng
        first, end = self._data_span(eb)
        avail = end - first
        stride = x + int(r.integers(0, 3)) if r.random() < 0.8 else int(r.integers(0, x + 1))
        while y > 1 and (y - 1) * stride + x > avail:
            stride = max(0, stride - 1)
        span = (y - 1) * stride + x if y else 0
        base = first + int(r.integers(0, avail - span + 1))
        return base, stride

    def _load(self, mt: MemType, sram_base: int, y: int, x: int, pads=(0, 0, 0, 0)) -> None:
        eb = self.cfg.elem_bytes(mt)
        base, stride = self._dram_rows(eb, y, x)
        self.b.emit(MemInsn(opcode=Opcode.LOAD, memory_type=mt, sram_base=sram_base,
                            dram_base=base, y_size=y, x_size=x, x_stride=stride,
                            y_pad_0=pads[0], y_pad_1=pads[1], x_pad_0=pads[2],
                            x_pad_1=pads[3]))

    def _put_uops(self, uops: list[Uop]) -> int:
        """Write micro-ops into the DRAM micro-op region and LOAD them; returns uop_bgn.

        The LOAD varies: one contiguous row; several rows read with a stride (gaps in DRAM);
        or one row with zero padding around it (the padding entries are not used).
        """
        r = self.rng
        n = len(uops)
        wb, wsize = self.win["uop"]
        words = np.frombuffer(encode_uops(uops, self.cfg), dtype="<u4")
        kind = int(r.integers(0, 3))
        y0 = y1 = x0 = x1 = 0
        rows, cols, gap = 1, n, 0
        if kind == 1 and n > 1:  # rows of `cols` micro-ops, `gap` unused words between rows
            cols = next(c for c in range(int(r.integers(1, n)), 0, -1) if n % c == 0)
            rows, gap = n // cols, int(r.integers(0, 3))
        elif kind == 2:
            y0, y1, x0, x1 = (int(r.integers(0, 2)) for _ in range(4))
        width = x0 + cols + x1
        entries = (y0 + rows + y1) * width
        if entries > wsize:  # keep it simple when the padding would not fit
            y0 = y1 = x0 = x1 = 0
            width, entries = cols, rows * cols
        at = wb + int(r.integers(0, wsize - entries + 1))
        for row in range(rows):
            start = (self.uop_next + row * (cols + gap)) * 4
            self.dram[start:start + 4 * cols] = words[row * cols:(row + 1) * cols].view(np.uint8)
        self.b.emit(MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, sram_base=at,
                            dram_base=self.uop_next, y_size=rows, x_size=cols,
                            x_stride=cols + gap, y_pad_0=y0, y_pad_1=y1, x_pad_0=x0,
                            x_pad_1=x1))
        self.uop_next += rows * (cols + gap)
        return at + y0 * width + x0

    # -- instruction kinds
    def init(self) -> None:
        for mt, name in ((MemType.INP, "inp"), (MemType.WGT, "wgt"), (MemType.ACC, "acc")):
            base, size = self.win[name]
            y = 2 if size % 2 == 0 and self.rng.random() < 0.5 else 1
            self._load(mt, base, y, size // y)

    def rand_load(self) -> None:
        r = self.rng
        mt, name = [(MemType.INP, "inp"), (MemType.WGT, "wgt"), (MemType.ACC, "acc")][
            int(r.integers(0, 3))]
        wbase, wsize = self.win[name]
        for _ in range(20):
            y = int(r.integers(0, self.max_rows + 1))
            x = int(r.integers(1, self.max_cols + 1))
            pads = [int(r.integers(0, 3)) if r.random() < 0.3 else 0 for _ in range(4)]
            entries = (pads[0] + y + pads[1]) * (pads[2] + x + pads[3])
            if 0 < entries <= wsize:
                self._load(mt, wbase + int(r.integers(0, wsize - entries + 1)), y, x, pads)
                return

    def rand_store(self) -> None:
        r = self.rng
        wbase, wsize = self.win["acc"]
        y = int(r.integers(1, self.max_rows + 1))
        x = int(r.integers(1, self.max_cols + 1))
        while y * x > wsize:
            y, x = max(1, y - 1), max(1, x - 1)
        eb = self.cfg.out_elem_bytes
        base, stride = self._dram_rows(eb, y, x)
        if r.random() < 0.8:
            stride = max(stride, x)
            while y > 1 and (y - 1) * stride + x > self._data_span(eb)[1] - base:
                y -= 1
        self.b.emit(MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT,
                            sram_base=wbase + int(r.integers(0, wsize - y * x + 1)),
                            dram_base=base, y_size=y, x_size=x, x_stride=stride))

    def _loops(self) -> tuple[int, int]:
        r = self.rng
        return int(r.integers(1, self.max_loop + 1)), int(r.integers(1, self.max_loop + 1))

    def _fit(self, count: int, name: str, n_out: int, n_in: int) -> tuple[list[int], int, int]:
        """Random base indices and factors whose indices stay inside buffer window ``name``."""
        r = self.rng
        wbase, wsize = self.win[name]
        while True:
            f_out, f_in = (int(r.integers(0, 4)) for _ in range(2))
            top = (n_out - 1) * f_out + (n_in - 1) * f_in
            if top < wsize:
                break
        bases = [wbase + int(r.integers(0, wsize - top)) for _ in range(count)]
        return bases, f_out, f_in

    def rand_gemm(self) -> None:
        r = self.rng
        if r.random() < self.dense_ratio:
            self._dense_gemm()
            return
        n_out, n_in = self._loops()
        nu = int(r.integers(1, self.max_uops + 1))
        dsts, dfo, dfi = self._fit(nu, "acc", n_out, n_in)
        if nu > 1 and r.random() < 0.3:
            dsts[1] = dsts[0]  # two micro-ops accumulating into the same entry back to back
        srcs, sfo, sfi = self._fit(nu, "inp", n_out, n_in)
        wgts, wfo, wfi = self._fit(nu, "wgt", n_out, n_in)
        self._loop_insn(GemmInsn, [Uop(d, s, w) for d, s, w in zip(dsts, srcs, wgts)],
                        n_out, n_in, dict(dst_factor_out=dfo, dst_factor_in=dfi,
                                          src_factor_out=sfo, src_factor_in=sfi,
                                          wgt_factor_out=wfo, wgt_factor_in=wfi),
                        reset=r.random() < 0.15)

    def _dense_gemm(self) -> None:
        """acc[m*N+n] += sum_k inp[m*K+k] wgt[n*K+k]^T: micro-ops over k, loops over m and n."""
        r = self.rng
        db, ds = self.win["acc"]
        ib, isz = self.win["inp"]
        wb, wsz = self.win["wgt"]
        k = int(r.integers(1, self.max_uops + 1))
        m, n = self._loops()
        while m * n > ds or m * k > isz or n * k > wsz:
            m, n, k = max(1, m - 1), max(1, n - 1), max(1, k - 1)
        d0 = db + int(r.integers(0, ds - m * n + 1))
        s0 = ib + int(r.integers(0, isz - m * k + 1))
        w0 = wb + int(r.integers(0, wsz - n * k + 1))
        uops = [Uop(d0, s0 + j, w0 + j) for j in range(k)]
        self._loop_insn(GemmInsn, uops, m, n, dict(dst_factor_out=n, dst_factor_in=1,
                                                   src_factor_out=k, src_factor_in=0,
                                                   wgt_factor_out=0, wgt_factor_in=k))

    def rand_alu(self) -> None:
        r = self.rng
        n_out, n_in = self._loops()
        nu = int(r.integers(1, self.max_uops + 1))
        dsts, dfo, dfi = self._fit(nu, "acc", n_out, n_in)
        if nu > 1 and r.random() < 0.3:
            dsts[1] = dsts[0]
        srcs, sfo, sfi = self._fit(nu, "acc", n_out, n_in)
        op = AluOp(int(r.integers(0, len(AluOp))))
        use_imm = int(r.random() < 0.5)
        if op == AluOp.SHR and (use_imm or r.random() < 0.5):
            imm = int(r.integers(-40, 41))
        else:
            imm = int(r.integers(-(1 << 15), 1 << 15)) if r.random() < 0.5 else \
                int(r.integers(-9, 10))
        self._loop_insn(AluInsn, [Uop(d, s, 0) for d, s in zip(dsts, srcs)], n_out, n_in,
                        dict(dst_factor_out=dfo, dst_factor_in=dfi, src_factor_out=sfo,
                             src_factor_in=sfi, alu_opcode=op, use_imm=use_imm, imm=imm),
                        reset=r.random() < 0.08)

    def _loop_insn(self, cls, uops: list[Uop], n_out: int, n_in: int, factors: dict,
                   reset: bool = False) -> None:
        bgn = self._put_uops(uops)
        insn = cls(reset_reg=int(reset), uop_bgn=bgn, uop_end=bgn + len(uops), iter_out=n_out,
                   iter_in=n_in, **factors)
        self.b.emit(insn, uops=uops)

    def rand_nop(self) -> None:
        r = self.rng
        choice = int(r.integers(0, 3))
        if choice == 0:
            self.b.nop(MODULES[int(r.integers(0, 3))])
        else:  # a GEMM/ALU with an empty loop
            cls = GemmInsn if choice == 1 else AluInsn
            self.b.emit(cls(uop_bgn=1, uop_end=1, iter_out=1, iter_in=1))

    def build(self) -> tuple[bytes, np.ndarray]:
        r = self.rng
        self.init()
        kinds = [self.rand_load, self.rand_gemm, self.rand_alu, self.rand_store, self.rand_nop]
        weights = np.array([3, 3, 3, 2, 0.5])
        weights /= weights.sum()
        stored = False
        while len(self.b) < self.n - 3:
            kind = kinds[int(r.choice(len(kinds), p=weights))]
            kind()
            stored |= kind == self.rand_store
        if not stored:
            self.rand_store()
        return self.b.program(), self.dram


__all__ = ["Access", "ProgramBuilder", "mem_accesses", "loop_accesses", "random_program",
           "BUFFERS"]
