"""The functional simulator: the kit's golden model of VTA.

Every other part of the kit is checked against this module: the RTL scoreboards, tsim, the runtime
and the compiler tests. It implements the semantics of ARCHITECTURE.md exactly (docs/fsim.md gives
the details that document leaves open) and is fast: every LOAD, STORE, GEMM and ALU instruction is a
handful of numpy operations, never a Python loop per micro-op.

>>> import numpy as np
>>> from vta.isa import Config, FinishInsn
>>> result = run([FinishInsn()], np.zeros(16, np.uint8), Config())
>>> result.stats.insn_count, len(result.dram)
(1, 16)

Scheduling model. Fetch hands instructions in program order to three in-order modules: load (LOAD
INP/WGT), compute (LOAD UOP/ACC, GEMM, ALU, FINISH) and store (STORE). Fetch stalls when the target
module's queue is full. Four dependency-token queues order the modules (load->compute,
compute->load, compute->store, store->compute); an instruction pops its tokens before it runs and
pushes after it finishes. Because fsim has no time, an instruction runs atomically; the *order*
(``load-first``, ``compute-first``, ``store-first`` or seeded ``random``) decides which ready module
goes next. A token-correct program gives the same result under every order; :func:`check_races`
runs them all and raises :class:`~vta.isa.errors.RaceError` when results differ.
"""

from __future__ import annotations

import random as _random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from vta.isa import (
    COMPUTE_MODULE,
    INSN_QUEUE_DEPTH,
    LOAD_MODULE,
    MODULES,
    POP_FLAGS,
    PUSH_FLAGS,
    STORE_MODULE,
    TOKEN_QUEUE_DEPTH,
    TOKEN_QUEUE_NAMES,
    AluInsn,
    AluOp,
    Config,
    FinishInsn,
    GemmInsn,
    Insn,
    MemInsn,
    MemType,
    Opcode,
    uop_fields,
)
from vta.isa.checks import DEP_QUEUES, MAX_UOPS_PER_INSN, check_insns, check_work, insn_name
from vta.isa.errors import DeadlockError, ProgramError, RaceError
from vta.isa.image import RunResult, as_program_bytes, check_program
from vta.isa.stats import LOADED_TYPES, OPCODE_NAMES, RunStats

from .blas import blas_threads, exact_matmul
from .loops import (
    GeneralPlan,
    Grid,
    Groups,
    TooManyRounds,
    acc_order,
    alu_rounds,
    dense_plan,
    rounds_by_rank,
)

#: Scheduling orders accepted by :class:`FunctionalSim` (``random`` is seeded).
ORDERS = ("load-first", "compute-first", "store-first", "random")

_PRIORITY = {
    "load-first": (LOAD_MODULE, COMPUTE_MODULE, STORE_MODULE),
    "compute-first": (COMPUTE_MODULE, LOAD_MODULE, STORE_MODULE),
    "store-first": (STORE_MODULE, COMPUTE_MODULE, LOAD_MODULE),
    "random": MODULES,
}


#: Largest operand gather (bytes, as float64) of the dense GEMM path; beyond it (a loop that
#: reuses few entries very many times) the general path, which works in chunks, runs instead.
_DENSE_BYTES = 1 << 28
#: Bound on the sequential vector steps of one ALU instruction in fsim (micro-ops that update the
#: same accumulator entry, or read one an earlier micro-op wrote, run one step after another);
#: about half a second of work. A pooling or requantisation loop needs a few dozen.
MAX_ALU_ROUNDS = 1 << 16



#: Instructions (summed over programs) whose checks, order of execution and steps a simulator
#: keeps for a replay (the graph executor runs each layer's program once per image; ResNet-18's
#: 28 programs hold 7838 instructions); past it, the programs kept are dropped.
_INSNS_KEPT = 1 << 18

#: Micro-ops per chunk of the general GEMM path (bounds its temporary memory).
_GEMM_CHUNK = 1 << 12

_MEM_NAMES = {mt.value: mt.name for mt in MemType}
_OPCODE_NAMES = {op.value: op.name for op in Opcode}

def _int_dtype(bits: int) -> np.dtype:
    return np.dtype(f"<i{bits // 8}")


class FunctionalSim:
    """A VTA device whose SRAM state persists across :meth:`run` calls.

    Attributes ``uop`` (uint32[uop_depth]), ``inp`` (int[inp_depth, batch, block_in]), ``wgt``
    (int[wgt_depth, block_out, block_in]) and ``acc`` (int[acc_depth, batch, block_out], the
    accumulator width) are the on-chip buffers; they start at zero and keep their contents from
    one run to the next (the runtime's micro-kernel cache relies on that).

    ``order`` picks which ready module runs next (see :data:`ORDERS`); ``seed`` seeds the
    ``random`` order. ``trace=True`` records Chrome trace events of each run in
    :attr:`trace_events`. ``gemm_path="general"`` disables the dense-matmul fast path (used by
    the tests to check the fast path against the general one). ``blas_threads`` is the BLAS
    thread count during a run (default 1: the per-instruction products are small, see
    :mod:`vta.sim.blas`; ``None`` leaves the process setting alone).
    """

    def __init__(self, cfg: Config, *, trace: bool = False, order: str = "compute-first",
                 seed: int | None = None, insn_queue_depth: int = INSN_QUEUE_DEPTH,
                 token_queue_depth: int = TOKEN_QUEUE_DEPTH, gemm_path: str = "auto",
                 blas_threads: int | None = 1, max_uops: int = MAX_UOPS_PER_INSN) -> None:
        if order not in ORDERS:
            raise ValueError(f"unknown scheduling order {order!r}; choose one of "
                             f"{', '.join(ORDERS)}")
        if gemm_path not in ("auto", "general"):
            raise ValueError(f"gemm_path must be 'auto' or 'general', not {gemm_path!r}")
        if insn_queue_depth < 1 or token_queue_depth < 1:
            raise ValueError("queue depths must be at least 1")
        if max_uops < 1:
            raise ValueError(f"max_uops must be at least 1, not {max_uops}")
        self.cfg = cfg
        self.max_uops = max_uops
        self.trace = trace
        self.order = order
        self.seed = seed
        self.insn_queue_depth = insn_queue_depth
        self.token_queue_depth = token_queue_depth
        self.gemm_path = gemm_path
        self.blas_threads = blas_threads
        self._rng = _random.Random(seed)
        self.inp_dtype = _int_dtype(cfg.inp_width)
        self.wgt_dtype = _int_dtype(cfg.wgt_width)
        self.acc_dtype = _int_dtype(cfg.acc_width)
        self.out_dtype = _int_dtype(cfg.out_width)
        self.uop = np.zeros(cfg.uop_depth, np.uint32)
        self.inp = np.zeros((cfg.inp_depth, cfg.batch, cfg.block_in), self.inp_dtype)
        self.wgt = np.zeros((cfg.wgt_depth, cfg.block_out, cfg.block_in), self.wgt_dtype)
        self.acc = np.zeros((cfg.acc_depth, cfg.batch, cfg.block_out), self.acc_dtype)
        #: Chrome trace events of the last run (when ``trace`` is on), else None.
        self.trace_events: list[dict[str, Any]] | None = None
        #: How many GEMM instructions took the dense-matmul fast path (for tests and benches).
        self.fast_gemms = 0
        self._elem_bytes = {mt.value: cfg.elem_bytes(mt) for mt in MemType}
        # loop nest + micro-op words -> (dst, src, wgt micro-op fields, fast-path grids)
        self._plans: dict[tuple, tuple] = {}
        # _run_key -> (instructions, the order they ran in, their steps, counts per module and
        # per opcode) of the programs that ran to FINISH under a fixed order (see _replay)
        self._ran: dict[tuple, tuple] = {}
        self._sram = {MemType.UOP: self.uop, MemType.WGT: self.wgt, MemType.INP: self.inp,
                      MemType.ACC: self.acc}

    def reset(self) -> None:
        """Clear every on-chip buffer to zero."""
        for buf in (self.uop, self.inp, self.wgt, self.acc):
            buf[...] = 0

    # ------------------------------------------------------------------ scheduling
    def run(self, program: bytes | bytearray | Sequence[Insn],
            dram: np.ndarray | bytearray) -> RunStats:
        """Run ``program`` to FINISH; ``dram`` (a writable uint8 array) is modified in place.

        Returns the run's :class:`~vta.isa.stats.RunStats` (see docs/fsim.md), counted as the
        instructions run. Raises a
        :class:`~vta.isa.errors.ProgramError` (or its DeadlockError subclass) for a program
        that cannot run; SRAM and DRAM then hold whatever the instructions before the failing
        one wrote.
        """
        prog = as_program_bytes(program, self.cfg)
        mem = _as_writable_dram(dram)
        with blas_threads(self.blas_threads):
            ran = self._ran.get(self._run_key(prog, mem))
            if ran is not None:
                return self._replay(*ran, mem)
            return self._run(prog, mem)

    def _run(self, prog: bytes, mem: np.ndarray) -> RunStats:
        """Check and schedule the program as it runs; remember the order it ran in and the
        steps made for its instructions (for :meth:`_replay`)."""
        cfg = self.cfg
        insns = check_program(prog, cfg)
        modules = check_insns(insns, cfg, mem.size)
        check_work(insns, self.max_uops, "fsim")
        pops = [tuple(DEP_QUEUES[m][f] for f in POP_FLAGS if getattr(i, f))
                for m, i in zip(modules, insns)]
        pushes = [tuple(DEP_QUEUES[m][f] for f in PUSH_FLAGS if getattr(i, f))
                  for m, i in zip(modules, insns)]

        queues: dict[str, deque[int]] = {m: deque() for m in MODULES}
        tokens: dict[str, deque[int]] = {q: deque() for q in TOKEN_QUEUE_NAMES}
        stats = _Counts()
        events: list[dict[str, Any]] | None = _trace_header() if self.trace else None
        self.trace_events = events  # also what ran before an error, for debugging
        priority = _PRIORITY[self.order]
        qdepth, tdepth = self.insn_queue_depth, self.token_queue_depth
        fetch_pc, n = 0, len(insns)
        schedule: list[tuple[int, str]] = []
        steps: list[Callable[[np.ndarray, _Counts], None]] = []
        while True:
            while fetch_pc < n and len(queues[modules[fetch_pc]]) < qdepth:
                queues[modules[fetch_pc]].append(fetch_pc)
                fetch_pc += 1
            ready = [m for m in priority
                     if queues[m] and all(tokens[q] for q in pops[queues[m][0]])]
            if not ready:
                raise DeadlockError(_deadlock_message(insns, modules, queues, tokens,
                                                      fetch_pc, qdepth))
            module = ready[0] if self.order != "random" else self._rng.choice(ready)
            idx = queues[module].popleft()
            insn = insns[idx]
            for name in pops[idx]:
                tokens[name].popleft()
            stats.per_opcode[_OPCODE_NAMES[insn.opcode]] += 1
            step = self._step(idx, insn)
            step(mem, stats)
            steps.append(step)
            for name in pushes[idx]:
                q = tokens[name]
                if len(q) >= tdepth:
                    raise ProgramError(
                        f"instruction {idx} ({insn_name(insn)}) pushes a token onto the "
                        f"full {name} queue (depth {tdepth}); too many tokens are pushed and "
                        f"not yet popped")
                q.append(idx)
            stats.per_module[module] += 1
            if events is not None:
                events.append(_trace_event(idx, insn, module, len(schedule)))
            schedule.append((idx, module))
            if isinstance(insn, FinishInsn):
                _check_finish(idx, insns, queues, tokens)
                break
        if self.order != "random" and len(insns) <= _INSNS_KEPT:
            if sum(len(r[0]) for r in self._ran.values()) + len(insns) > _INSNS_KEPT:
                self._ran.clear()
            self._ran[self._run_key(prog, mem)] = (insns, tuple(schedule), tuple(steps),
                                                   dict(stats.per_module),
                                                   dict(stats.per_opcode))
        return stats.result(len(schedule), cfg)

    def _run_key(self, prog: bytes, mem: np.ndarray) -> tuple:
        """What a program's checks and order of execution depend on."""
        return (prog, mem.size, self.order, self.insn_queue_depth, self.token_queue_depth,
                self.max_uops)

    def _replay(self, insns: list[Insn], schedule: tuple[tuple[int, str], ...],
                steps: tuple[Callable[[np.ndarray, _Counts], None], ...],
                per_module: dict[str, int], per_opcode: dict[str, int],
                mem: np.ndarray) -> RunStats:
        """Run a program that ran to FINISH before, in the order it ran then (the order
        depends on the instructions' dependency flags alone, not on the data), by the steps
        made for its instructions then."""
        stats = _Counts(per_module=dict(per_module), per_opcode=dict(per_opcode))
        events: list[dict[str, Any]] | None = _trace_header() if self.trace else None
        self.trace_events = events
        if events is None:
            for step in steps:
                step(mem, stats)
        else:  # an event per step as it runs (what ran before an error, for debugging)
            for seq, (step, (idx, module)) in enumerate(zip(steps, schedule)):
                step(mem, stats)
                events.append(_trace_event(idx, insns[idx], module, seq))
        return stats.result(len(schedule), self.cfg)

    # ------------------------------------------------------------------ execution
    def _step(self, idx: int, insn: Insn) -> Callable[[np.ndarray, _Counts], None]:
        """Instruction ``idx`` as a function of the DRAM image and the run's counts (a LOAD or
        STORE with its SRAM views and DRAM offsets worked out once)."""
        if isinstance(insn, MemInsn):
            return self._load(insn) if insn.opcode == Opcode.LOAD else self._store(insn)
        if isinstance(insn, GemmInsn):
            return lambda mem, stats: self._gemm(idx, insn, stats)
        if isinstance(insn, AluInsn):
            return lambda mem, stats: self._alu(idx, insn, stats)
        return _no_work  # FINISH

    def _load(self, insn: MemInsn) -> Callable[[np.ndarray, _Counts], None]:
        if insn.x_size == 0:
            return _no_work
        mt = insn.memory_type
        buf = self._sram[mt]
        eb = self._elem_bytes[mt]
        rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
        width = insn.x_pad_0 + insn.x_size + insn.x_pad_1
        block = buf[insn.sram_base:insn.sram_base + rows * width]
        block = block.reshape((rows, width) + buf.shape[1:])
        padded = rows != insn.y_size or width != insn.x_size
        ys, xs = insn.y_size, insn.x_size
        dest = block[insn.y_pad_0:insn.y_pad_0 + ys, insn.x_pad_0:insn.x_pad_0 + xs]
        shape = (ys, xs) + buf.shape[1:]
        dtype = buf.dtype.newbyteorder("<")
        base, row, stride = insn.dram_base * eb, xs * eb, insn.x_stride * eb
        name, nbytes = _MEM_NAMES[mt], ys * xs * eb

        def load(mem: np.ndarray, stats: _Counts) -> None:
            if padded:
                block[...] = 0
            if ys:
                raw = _dram_rows(mem, base, ys, row, stride)
                dest[...] = np.ascontiguousarray(raw).view(dtype).reshape(shape)
                stats.loaded[name] += nbytes
        return load

    def _store(self, insn: MemInsn) -> Callable[[np.ndarray, _Counts], None]:
        if insn.x_size == 0 or insn.y_size == 0:
            return _no_work
        eb = self._elem_bytes[MemType.OUT]
        ys, count = insn.y_size, insn.y_size * insn.x_size
        acc = self.acc[insn.sram_base:insn.sram_base + count]
        dtype = self.out_dtype.newbyteorder("<")
        stride, row = insn.x_stride * eb, insn.x_size * eb
        base = insn.dram_base * eb

        def store(mem: np.ndarray, stats: _Counts) -> None:
            data = acc.astype(dtype).view(np.uint8).reshape(ys, row)
            if stride >= row or ys == 1:
                _dram_rows(mem, base, ys, row, stride)[...] = data
            else:  # rows overlap: later rows win, as in program order
                for y in range(ys):
                    mem[base + y * stride:base + y * stride + row] = data[y]
            stats.stored += count * eb
        return store

    def _loop_indices(self, idx: int, insn: GemmInsn | AluInsn, kind: str):
        """Micro-op fields and loop factors, bounds-checked; None when there is no work."""
        cfg = self.cfg
        n_uops = insn.uop_end - insn.uop_bgn
        if n_uops == 0 or insn.iter_out == 0 or insn.iter_in == 0:
            return None
        d, s, w = uop_fields(self.uop[insn.uop_bgn:insn.uop_end], cfg)
        specs = [("dst", d, insn.dst_factor_out, insn.dst_factor_in, "acc", cfg.acc_depth),
                 ("src", s, insn.src_factor_out, insn.src_factor_in,
                  "inp" if kind == "GEMM" else "acc",
                  cfg.inp_depth if kind == "GEMM" else cfg.acc_depth)]
        if kind == "GEMM":
            specs.append(("wgt", w, insn.wgt_factor_out, insn.wgt_factor_in, "wgt",
                          cfg.wgt_depth))
        o_max, i_max = insn.iter_out - 1, insn.iter_in - 1
        for name, base, f_out, f_in, buf, depth in specs:
            # a GEMM reset reads no operand, nor does an ALU micro-op with an immediate (an
            # ALU's reset_reg is ignored, as in TVM)
            if name != "dst" and (insn.use_imm if kind == "ALU" else insn.reset_reg):
                continue  # not read
            top = base + o_max * f_out + i_max * f_in
            if int(top.max()) >= depth:
                u = int(np.argmax(top >= depth))
                raise ProgramError(
                    f"instruction {idx} ({insn_name(insn)}): micro-op {insn.uop_bgn + u} "
                    f"({name}_idx={int(base[u])}) with {name}_factor_out={f_out}, "
                    f"{name}_factor_in={f_in} reaches {buf} index {int(top[u])} at "
                    f"o={o_max}, i={i_max}, beyond the {buf} buffer (depth {depth})")
        return d, s, w

    @staticmethod
    def _flat(base: np.ndarray, insn: GemmInsn | AluInsn, f_out: int, f_in: int) -> np.ndarray:
        """Indices in execution order (o outer, i, then micro-op innermost)."""
        o = np.arange(insn.iter_out, dtype=np.int64)[:, None, None] * f_out
        i = np.arange(insn.iter_in, dtype=np.int64)[None, :, None] * f_in
        return (o + i + base[None, None, :]).ravel()

    def _gemm(self, idx: int, insn: GemmInsn, stats: _Counts) -> None:
        if insn.uop_end == insn.uop_bgn or insn.iter_out == 0 or insn.iter_in == 0:
            return
        key = (insn.reset_reg, insn.iter_out, insn.iter_in, insn.dst_factor_out,
               insn.dst_factor_in, insn.src_factor_out, insn.src_factor_in,
               insn.wgt_factor_out, insn.wgt_factor_in,
               self.uop[insn.uop_bgn:insn.uop_end].tobytes())
        info = self._plans.get(key)
        if info is None:
            # first time this loop nest is seen: bounds checks and the fast-path analysis
            d, s, w = self._loop_indices(idx, insn, "GEMM")
            plan = None
            if insn.reset_reg:  # the entries to clear
                plan = _as_slice(self._flat(d, insn, insn.dst_factor_out, insn.dst_factor_in))
            elif self.gemm_path == "auto":
                grids = dense_plan(insn, d, s, w)
                if grids is not None and _dense_bytes(grids, self.cfg) <= _DENSE_BYTES:
                    dg, sg, wg, n_major = acc_order(*grids)
                    plan = (Grid(dg.T if n_major else dg), Grid(sg), Grid(wg), n_major)
            if len(self._plans) >= 512:
                self._plans.clear()
            info = self._plans[key] = [d, s, w, plan, None]
        d, s, w, plan, general = info
        n = insn.iter_out * insn.iter_in * len(d)
        stats.gemm += n
        stats.useful += 0 if insn.reset_reg else n
        if insn.reset_reg:
            self.acc[plan] = 0
        elif plan is not None:
            self._gemm_dense(*plan)
            self.fast_gemms += 1
        else:
            if general is None:
                general = info[4] = GeneralPlan(
                    self._flat(d, insn, insn.dst_factor_out, insn.dst_factor_in),
                    self._flat(s, insn, insn.src_factor_out, insn.src_factor_in),
                    self._flat(w, insn, insn.wgt_factor_out, insn.wgt_factor_in), self.cfg)
            self._gemm_general(general)

    def _gemm_general(self, gp: GeneralPlan) -> None:
        """Any index pattern: products per micro-op, summed per accumulator entry (exact).

        When few distinct (input, weight) entries are involved, which is the usual case (a
        convolution reuses each entry many times), every product of a distinct input entry with
        a distinct weight entry comes from one BLAS matrix product and each micro-op picks its
        own; otherwise the products are computed per micro-op in chunks.
        """
        cfg = self.cfg
        if gp.pairs is not None:
            ns, nw = gp.us.size, gp.uw.size
            a = self.inp[gp.us].reshape(ns * cfg.batch, cfg.block_in)
            b = self.wgt[gp.uw].reshape(nw * cfg.block_out, cfg.block_in)
            p = exact_matmul(a, b)
            if cfg.batch == 1:
                p = p.reshape(ns * nw, 1, cfg.block_out)
            else:
                p = p.reshape(ns, cfg.batch, nw, cfg.block_out).transpose(0, 2, 1, 3)
                p = p.reshape(ns * nw, cfg.batch, cfg.block_out)
            self._add_sorted(gp.groups, p[gp.pairs])
            return
        for lo in range(0, len(gp.dst), _GEMM_CHUNK):
            hi = lo + _GEMM_CHUNK
            a = self.inp[gp.src[lo:hi]].astype(np.int64)
            b = self.wgt[gp.wgt[lo:hi]].astype(np.int64)
            self._accumulate(gp.dst[lo:hi], np.einsum("nbc,noc->nbo", a, b))

    def _accumulate(self, dst: np.ndarray, values: np.ndarray) -> None:
        """acc[dst] += values with wrap-around; repeated dst entries all accumulate."""
        groups = Groups(dst)
        self._add_sorted(groups, values[groups.order])

    def _add_sorted(self, groups: Groups, values: np.ndarray) -> None:
        """acc[groups.uniq] += per-entry sums of ``values`` (already in ``groups.order``).

        Sums are taken in the values' integer type and wrapped to the accumulator width: both
        are arithmetic modulo a power of two at least as large, so the result is exact.
        """
        sums = values if groups.starts is None else np.add.reduceat(values, groups.starts, axis=0)
        uniq = groups.uniq
        self.acc[uniq] = self.acc[uniq] + sums.astype(self.acc_dtype)

    def _gemm_dense(self, dgrid: Grid, sgrid: Grid, wgrid: Grid, n_major: bool) -> None:
        """acc[D[m,n]] += sum_k inp[S[m,k]] @ wgt[W[n,k]]^T as one BLAS matrix product
        (``dgrid`` is D, or D transposed when ``n_major``: its entries run n-major)."""
        mt, kt = sgrid.shape
        nt = wgrid.shape[0]
        _, bsz, bin_ = self.inp.shape
        bout = self.wgt.shape[1]
        a = sgrid.gather(self.inp)  # (M, K, batch, block_in)
        b = wgrid.gather(self.wgt)  # (N, K, block_out, block_in)
        depth = kt * bin_
        am = a.reshape(mt, depth) if bsz == 1 else a.transpose(0, 2, 1, 3).reshape(mt * bsz,
                                                                                    depth)
        bm = b.transpose(0, 2, 1, 3).reshape(nt * bout, depth)
        c = exact_matmul(am, bm)
        if n_major:  # N x M consecutive entries (acc_order): add in place
            view = self.acc[dgrid.start:dgrid.start + dgrid.size].reshape(nt, mt, bsz, bout)
            view += c.reshape(mt, bsz, nt, bout).transpose(2, 0, 1, 3)
            return
        if bsz == 1:
            c = c.reshape(mt * nt, 1, bout)
        else:
            c = c.reshape(mt, bsz, nt, bout).transpose(0, 2, 1, 3).reshape(mt * nt, bsz, bout)
        if not dgrid.unique:
            self._accumulate(dgrid.flat, c)
            return
        c = c.astype(self.acc_dtype, copy=False)
        if dgrid.start is not None:
            view = self.acc[dgrid.start:dgrid.start + dgrid.size]
            view += c
        else:  # rows by np.take and a 2-D scatter: several times faster than acc[flat]
            acc, flat = self.acc.reshape(self.acc.shape[0], -1), dgrid.flat
            acc[flat] = np.take(acc, flat, axis=0) + c.reshape(-1, acc.shape[1])

    def _alu(self, idx: int, insn: AluInsn, stats: _Counts) -> None:
        if insn.uop_end == insn.uop_bgn or insn.iter_out == 0 or insn.iter_in == 0:
            return
        key = ("ALU", insn.use_imm, insn.iter_out, insn.iter_in,
               insn.dst_factor_out, insn.dst_factor_in, insn.src_factor_out, insn.src_factor_in,
               self.uop[insn.uop_bgn:insn.uop_end].tobytes())
        steps = self._plans.get(key)
        if steps is None:
            # first time: bounds checks, then the vector steps that keep sequential semantics
            d, s, _ = self._loop_indices(idx, insn, "ALU")
            dst = self._flat(d, insn, insn.dst_factor_out, insn.dst_factor_in)
            try:
                if insn.use_imm:
                    steps = [(dst if sel is None else dst[sel], None)
                             for sel in rounds_by_rank(dst, MAX_ALU_ROUNDS)]
                else:
                    src = self._flat(s, insn, insn.src_factor_out, insn.src_factor_in)
                    steps = [(dst, src) if sel is None else (dst[sel], src[sel])
                             for sel in alu_rounds(dst, src, self.cfg.acc_depth, MAX_ALU_ROUNDS)]
            except TooManyRounds as e:
                raise ProgramError(
                    f"instruction {idx} ({insn_name(insn)}): its micro-ops need {e.rounds} "
                    f"sequential steps (they update the same accumulator entries over and "
                    f"over), beyond fsim's bound of {MAX_ALU_ROUNDS} per instruction; split "
                    f"the loop") from None
            steps = [(_as_slice(dd), ss if ss is None else _as_slice(ss)) for dd, ss in steps]
            if len(self._plans) >= 512:
                self._plans.clear()
            self._plans[key] = steps
        stats.alu += insn.iter_out * insn.iter_in * (insn.uop_end - insn.uop_bgn)
        op, acc = AluOp(insn.alu_opcode), self.acc
        for dd, ss in steps:
            b = insn.imm if ss is None else acc[ss]
            if isinstance(dd, slice):  # a run of entries: in place on the view
                self._alu_op(op, acc[dd], b)
            else:
                a = acc[dd]
                self._alu_op(op, a, b)
                acc[dd] = a

    def _alu_op(self, op: AluOp, a: np.ndarray, b: np.ndarray | int) -> None:
        """``a = op(a, b)`` in place on accumulator values, wrapped to the accumulator width
        (numpy's integer array arithmetic wraps; ``b`` may overlap ``a``)."""
        width = self.cfg.acc_width
        if op == AluOp.MIN:  # (a 16-bit immediate fits every accumulator type)
            np.minimum(a, b, out=a)
        elif op == AluOp.MAX:
            np.maximum(a, b, out=a)
        elif op == AluOp.ADD:
            np.add(a, b, out=a)
        elif op == AluOp.MUL:
            np.multiply(a, b, out=a)
        elif not isinstance(b, int):  # SHR by per-entry amounts
            a[...] = _alu_int64(op, a, b, width)
        elif b >= 0:  # SHR: arithmetic right shift
            np.right_shift(a, min(b, width - 1), out=a)
        elif -b >= width:  # a left shift by the whole width or more
            a[...] = 0
        else:  # a negative amount shifts left, keeping the low bits
            u = a.view(a.dtype.str.replace("i", "u"))
            np.left_shift(u, -b, out=u)


def _alu_int64(op: AluOp, a: np.ndarray, b: np.ndarray | int, width: int) -> np.ndarray:
    """op(a, b) computed in int64 and wrapped to ``a``'s type (the general case)."""
    a64 = a.astype(np.int64)
    b64 = np.asarray(b, dtype=np.int64)
    if op == AluOp.MIN:
        r = np.minimum(a64, b64)
    elif op == AluOp.MAX:
        r = np.maximum(a64, b64)
    elif op == AluOp.ADD:
        r = a64 + b64
    elif op == AluOp.MUL:
        r = a64 * b64
    else:  # SHR: arithmetic right shift; a negative amount shifts left
        right = a64 >> np.clip(b64, 0, width - 1)
        left = a64 << np.clip(-b64, 0, width)
        r = np.where(b64 >= 0, right, left)
    return r.astype(a.dtype)


# ---------------------------------------------------------------------- helpers
def _no_work(mem: np.ndarray, stats: _Counts) -> None:
    """A step that does nothing (FINISH, a LOAD or STORE of no elements)."""


def _as_slice(index: np.ndarray) -> np.ndarray | slice:
    """A run of consecutive indices as a slice (a view of the buffer, no gather)."""
    first = int(index[0])
    if index.size > 1 and np.array_equal(index, np.arange(first, first + index.size)):
        return slice(first, first + index.size)
    return index


def _as_writable_dram(dram: np.ndarray | bytearray) -> np.ndarray:
    if isinstance(dram, bytearray | memoryview):
        arr = np.frombuffer(dram, dtype=np.uint8)
    elif isinstance(dram, np.ndarray):
        arr = dram
    else:
        raise TypeError(f"dram must be a writable uint8 numpy array or a bytearray, "
                        f"not {type(dram).__name__}")
    if arr.dtype != np.uint8 or arr.ndim != 1 or not arr.flags.c_contiguous:
        raise TypeError(f"dram must be a 1-D contiguous uint8 array, not {arr.dtype} "
                        f"with shape {arr.shape}")
    if not arr.flags.writeable:
        raise TypeError("dram must be writable (it is modified in place); pass a copy")
    return arr


def _dram_rows(dram: np.ndarray, base: int, rows: int, row_bytes: int,
               stride_bytes: int) -> np.ndarray:
    """A (rows, row_bytes) strided view of DRAM (bounds were checked by check_insns)."""
    if rows == 1 or stride_bytes == row_bytes:
        return dram[base:base + rows * row_bytes].reshape(rows, row_bytes)
    if stride_bytes > row_bytes and base + rows * stride_bytes <= dram.size:
        return dram[base:base + rows * stride_bytes].reshape(rows, stride_bytes)[:, :row_bytes]
    return np.lib.stride_tricks.as_strided(
        dram[base:], shape=(rows, row_bytes), strides=(stride_bytes, 1))


def _dense_bytes(grids: tuple[np.ndarray, ...], cfg: Config) -> int:
    """Bytes the dense path gathers (as float64) for grids (D, S, W)."""
    _, sgrid, wgrid = grids
    return 8 * (sgrid.size * cfg.batch * cfg.block_in + wgrid.size * cfg.block_out * cfg.block_in)


def _deadlock_message(insns, modules, queues, tokens, fetch_pc, qdepth) -> str:
    parts = []
    for m in MODULES:
        if not queues[m]:
            parts.append(f"{m} idle (queue empty)")
            continue
        idx = queues[m][0]
        insn = insns[idx]
        waits = [DEP_QUEUES[m][f] for f in POP_FLAGS if getattr(insn, f)
                 and not tokens[DEP_QUEUES[m][f]]]
        parts.append(f"{m} blocked at instruction {idx} ({insn_name(insn)}) waiting for a "
                     f"token on {' and '.join(waits)}")
    msg = "deadlock: " + "; ".join(parts)
    if fetch_pc < len(insns):
        msg += (f"; fetch stalled at instruction {fetch_pc} ({insn_name(insns[fetch_pc])}): "
                f"the {modules[fetch_pc]} queue is full ({qdepth} entries)")
    return msg + "; check the dependency flags (a pop needs an earlier matching push)"


def _check_finish(idx: int, insns, queues, tokens) -> None:
    for m in (LOAD_MODULE, STORE_MODULE):
        if queues[m]:
            first = queues[m][0]
            raise ProgramError(
                f"FINISH (instruction {idx}) ran while the {m} module still had "
                f"{len(queues[m])} instruction(s) pending (first: instruction {first}, "
                f"{insn_name(insns[first])}); make FINISH wait for them with dependency tokens")
    left = [f"{len(q)} on {name} (pushed by instruction {', '.join(map(str, list(q)[:4]))}"
            f"{', ...' if len(q) > 4 else ''})" for name, q in tokens.items() if q]
    if left:
        raise ProgramError(f"tokens left over at FINISH (instruction {idx}): "
                           f"{'; '.join(left)}; every pushed token must be popped")


@dataclass
class _Counts:
    """What fsim counts as it runs (the program-level fields of :class:`RunStats`)."""

    per_opcode: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPCODE_NAMES, 0))
    per_module: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MODULES, 0))
    loaded: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LOADED_TYPES, 0))
    stored: int = 0
    gemm: int = 0
    useful: int = 0
    alu: int = 0

    def result(self, insn_count: int, cfg: Config) -> RunStats:
        return RunStats(backend="fsim", insn_count=insn_count, insns_per_opcode=self.per_opcode,
                        insns_per_module=self.per_module, gemm_uops=self.gemm,
                        gemm_useful_uops=self.useful, alu_uops=self.alu,
                        macs_per_uop=cfg.macs_per_cycle, bytes_loaded=self.loaded,
                        bytes_stored=self.stored)


def _trace_header() -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
                                 "args": {"name": "VTA fsim"}}]
    for tid, m in enumerate(MODULES):
        ev.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid,
                   "args": {"name": m}})
        ev.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": tid,
                   "args": {"sort_index": tid}})
    return ev


def _trace_event(idx: int, insn: Insn, module: str, seq: int) -> dict[str, Any]:
    args: dict[str, Any] = {"index": idx}
    args.update(insn.to_dict())
    return {"name": insn_name(insn), "cat": module, "ph": "X", "ts": seq, "dur": 1, "pid": 0,
            "tid": MODULES.index(module), "args": args}


# ---------------------------------------------------------------------- entry points
def run(program: bytes | bytearray | Sequence[Insn], dram: np.ndarray | bytes | bytearray,
        cfg: Config, *, trace: bool = False, order: str = "compute-first",
        check_races: bool = False, seed: int | None = None, **options: Any) -> RunResult:
    """Run ``program`` on a fresh simulator with a copy of ``dram``.

    Returns a :class:`~vta.isa.image.RunResult` whose ``dram`` is the whole image after FINISH
    (same length as the input). With ``check_races=True`` every scheduling order is run first
    (see :func:`check_races`). Other ``options`` (``insn_queue_depth``, ``token_queue_depth``,
    ``gemm_path``, ``blas_threads``) go to :class:`FunctionalSim`.
    """
    if check_races:
        result = _race_check(program, dram, cfg, seed=0 if seed is None else seed)
        if not trace and order == "compute-first" and not options:
            return result
    mem = _copy_dram(dram)
    sim = FunctionalSim(cfg, trace=trace, order=order, seed=seed, **options)
    stats = sim.run(program, mem)
    return RunResult(dram=mem, stats=stats, trace=sim.trace_events)


def _copy_dram(dram: np.ndarray | bytes | bytearray) -> np.ndarray:
    if isinstance(dram, np.ndarray):
        if dram.dtype != np.uint8:
            raise TypeError(f"dram must be a uint8 array, not {dram.dtype}")
        return np.array(dram, dtype=np.uint8, copy=True).reshape(-1)
    return np.frombuffer(bytes(dram), dtype=np.uint8).copy()


def check_races(program: bytes | bytearray | Sequence[Insn],
                dram: np.ndarray | bytes | bytearray, cfg: Config, *, random_orders: int = 4,
                seed: int = 0) -> RunResult:
    """Run the program under every scheduling order and compare the final DRAM images.

    Runs load-first, compute-first, store-first and ``random_orders`` seeded random orders.
    Returns the compute-first :class:`RunResult` when all agree; raises
    :class:`~vta.isa.errors.RaceError` naming the two orders, the first differing byte and the
    STORE that writes it when they do not (a missing dependency token in the program). A program
    that fails under one order but not another is a race too.
    """
    prog = as_program_bytes(program, cfg)
    runs: list[tuple[str, RunResult | ProgramError]] = []
    orders = [("compute-first", None), ("load-first", None), ("store-first", None)]
    orders += [("random", seed + k) for k in range(random_orders)]
    for order, s in orders:
        label = order if s is None else f"random (seed {s})"
        try:
            runs.append((label, run(prog, dram, cfg, order=order, seed=s)))
        except ProgramError as e:
            runs.append((label, e))
    good = [(label, r) for label, r in runs if isinstance(r, RunResult)]
    bad = [(label, r) for label, r in runs if not isinstance(r, RunResult)]
    if not good:
        raise runs[0][1]  # fails under every order: an error of the program, not a race
    ref_label, ref = good[0]
    for label, res in good[1:]:
        diff = np.flatnonzero(res.dram != ref.dram)
        if diff.size:
            addr = int(diff[0])
            writer = _last_store_writing(prog, cfg, addr)
            raise RaceError(
                f"results differ between the {ref_label} and {label} orders: {diff.size} "
                f"DRAM byte(s) differ, first at {addr:#x} ({ref.dram[addr]} vs "
                f"{res.dram[addr]}){writer}; a dependency token is missing")
    if bad:
        label, err = bad[0]
        raise RaceError(f"the program works under the {ref_label} order but fails under "
                        f"{label}: {err}; a dependency token is missing") from None
    return ref


_race_check = check_races


def _last_store_writing(program: bytes, cfg: Config, addr: int) -> str:
    insns = check_program(program, cfg)
    eb = cfg.out_elem_bytes
    found = None
    for n, insn in enumerate(insns):
        if isinstance(insn, MemInsn) and insn.opcode == Opcode.STORE and insn.x_size:
            rel = addr - insn.dram_base * eb
            if rel < 0:
                continue
            for y in range(insn.y_size):
                off = rel - y * insn.x_stride * eb
                if 0 <= off < insn.x_size * eb:
                    found = n
                    break
    return "" if found is None else f", written by instruction {found} (STORE)"


__all__ = ["FunctionalSim", "run", "check_races", "ORDERS", "insn_name"]
