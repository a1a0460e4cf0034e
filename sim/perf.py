"""Cycle-approximate performance model of the VTA core (``vta sim --backend perf``).

An event-driven model of what decides VTA's run time: fetch routing instructions in order into
bounded per-module queues, the three modules (load, compute, store) each running its queue in order,
the four dependency-token queues (pop before an instruction starts, push when it ends, plus a token
latency), and one shared memory port (bursts with a fixed latency and a bus width). It does not
compute data, so one instruction costs O(1) however many micro-ops it runs.

Every timing constant is in :class:`PerfParams`, measured from the RTL (tsim) by :func:`calibrate`;
the defaults describe the kit's RTL on tsim's default memory. The bus width is the
configuration's (:attr:`vta.isa.Config.bus_width`): a 128-bit core moves 16-byte beats.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from vta.isa import (
    COMPUTE_MODULE,
    INSN_BYTES,
    INSN_QUEUE_DEPTH,
    MODULES,
    NEXT,
    PREV,
    TOKEN_QUEUES,
    AluInsn,
    Config,
    DeadlockError,
    FinishInsn,
    GemmInsn,
    Insn,
    MemInsn,
    MemType,
    Opcode,
)
from vta.isa.checks import MAX_UOPS_PER_INSN, check_insns, check_work
from vta.isa.fusion import alu_chains
from vta.isa.gcpause import paused_gc
from vta.isa.image import RunResult, as_dram, as_program_bytes, check_program
from vta.isa.stats import ModuleCycles, RunStats, program_stats


@dataclass(frozen=True)
class PerfParams:
    """Timing constants (cycles), in one place.

    Structural values (bandwidth, bursts, outstanding reads, one micro-op per cycle) are
    the RTL's and tsim's defaults (the bus width is the configuration's); the others were
    fitted to tsim's cycle counts at the default config with ``bench/bench_perf_model.py
    --calibrate`` on every other program of its benchmark set (refitted for the pipelined
    compute datapath: 9/8-cycle GEMM/ALU drains only before a token push, two-operand ALU
    micro-ops at one per two cycles); the training, held-out and other-configuration errors
    are in the README (from its record).
    """

    bandwidth: float = 8.0        #: memory bytes per cycle (tsim's default: 8, a 64-bit word)
    mem_latency: float = 30.0     #: cycles from a read burst request to its first data beat
    write_latency: float = 2.0    #: cycles a STORE adds after its last write beat
    max_burst: int = 16           #: beats per burst
    outstanding: int = 4          #: read bursts in flight on the port (the RTL's arbiter)
    fetch_per_insn: float = 3.0   #: extra fetch cycles per instruction beyond its data beats
    insn_overhead: float = 4.3    #: pop/decode/push cycles of every instruction
    mem_overhead: float = 0.0     #: extra cycles of every LOAD/STORE that moves data
    gemm_ii: float = 1.0          #: cycles per GEMM micro-op iteration
    gemm_latency: float = 1.6     #: GEMM cycles per instruction beyond insn_overhead
    gemm_drain: float = 9.0       #: GEMM pipeline drain, only before pushing a token
    alu_ii: float = 1.0           #: cycles per ALU micro-op iteration with an immediate
    alu2_ii: float = 2.0          #: cycles per two-operand ALU micro-op that reads its src
    alu_latency: float = 4.86     #: ALU cycles per instruction beyond insn_overhead
    alu_drain: float = 8.0        #: ALU pipeline drain, only before pushing a token
    chain_drain: float = 17.0     #: an ALU chain's drain (always: the next waits for it;
    #:                               chains: vta.isa.fusion)
    chain_gather: float = 3.0     #: cycles per member an ALU chain takes to gather (and per
    #:                               ALU instruction that could head one)
    pad_per_row: float = 0.0      #: extra cycles per padded row written by a LOAD
    token_latency: float = 15.0   #: cycles from a push to the dependent instruction starting

    def for_core(self, extra_gemm_latency: int) -> PerfParams:
        """These parameters for a core variant whose GEMM pipeline is ``extra_gemm_latency``
        stages longer (``vta.hw.options.CoreOptions.extra_gemm_latency``, e.g. the ULX3S's
        DSP registers): its drain before a token push is that many cycles longer."""
        return replace(self, gemm_drain=self.gemm_drain + extra_gemm_latency)

    def beat(self, bus_bytes: int) -> float:
        """Cycles per data beat of a ``bus_bytes``-wide bus (the bus word or the memory
        bandwidth, whichever is slower)."""
        return max(1.0, bus_bytes / self.bandwidth)

    def burst_train(self, bursts: int, beats: int, latency: float, beat: float) -> float:
        """Cycles to move ``beats`` beats of ``beat`` cycles in ``bursts`` bursts with
        ``outstanding`` in flight: the first burst's latency, then one burst per period
        (data-bound or latency-bound)."""
        if bursts <= 0:
            return 0.0
        b = beats / bursts * beat
        period = max(b, (latency + b) / max(1, self.outstanding))
        return latency + b + (bursts - 1) * period


DEFAULT_PARAMS = PerfParams()
#: isinstance tuple of the GEMM/ALU instructions (an ``A | B`` union is built at every call)
_LOOP_INSNS = (GemmInsn, AluInsn)


@dataclass
class _Module:
    name: str
    queue: deque  # instruction indices
    free_at: float = 0.0
    busy: float = 0.0
    token_wait: float = 0.0
    mem_wait: float = 0.0
    done: int = 0


class PerfModel:
    """Estimate the cycles of a program on one configuration."""

    def __init__(self, cfg: Config, params: PerfParams = DEFAULT_PARAMS, *,
                 insn_queue_depth: int = INSN_QUEUE_DEPTH) -> None:
        self.cfg = cfg
        self.p = params
        self.bus_bytes = cfg.bus_bytes
        self.beat = params.beat(cfg.bus_bytes)  #: cycles per data beat
        self.insn_queue_depth = insn_queue_depth
        #: Chrome trace events of the last :meth:`run` with ``trace``.
        self.trace_events: list[dict[str, Any]] = []
        self._mem_memo: dict[tuple, tuple[float, float, float, float]] = {}

    # ------------------------------------------------------------- memory costs
    def _rows(self, rows: int, row_bytes: int, start_byte: int) -> tuple[int, int]:
        """(bursts, beats) of ``rows`` rows of ``row_bytes`` contiguous bytes each."""
        bb = self.bus_bytes
        beats_row = math.ceil((start_byte % bb + row_bytes) / bb)
        return rows * math.ceil(beats_row / self.p.max_burst), rows * beats_row

    def _mem_cycles(self, insn: MemInsn) -> tuple[float, float, float, float]:
        """(lead, data, tail, local) of a LOAD/STORE: ``lead`` is the request latency
        (it overlaps other modules' traffic), ``data`` the cycles its beats occupy the port,
        ``tail`` what follows the data (the write response), ``local`` cycles without the
        port (padding). Memoised by what they depend on."""
        if insn.x_size == 0:
            return 0.0, 0.0, 0.0, 0.0
        esz = self.cfg.elem_bytes(insn.memory_type)
        key = (insn.opcode == Opcode.STORE, esz, insn.y_size, insn.x_size,
               insn.dram_base * esz % self.bus_bytes, insn.y_pad_0 + insn.y_pad_1)
        c = self._mem_memo.get(key)
        if c is None:
            c = self._mem_memo[key] = self._mem_cost(*key)
        return c

    def _mem_cost(self, store: bool, esz: int, y_size: int, x_size: int, start_byte: int,
                  pad_rows: int) -> tuple[float, float, float, float]:
        p = self.p
        bursts, beats = self._rows(y_size, x_size * esz, start_byte)
        # elements narrower than the bus are written/read one per cycle inside the module
        narrow = y_size * x_size if esz < self.bus_bytes else 0
        if store:
            return 0.0, max(beats * self.beat, narrow), p.write_latency + p.mem_overhead, 0.0
        data = max(p.burst_train(bursts, beats, p.mem_latency, self.beat) - p.mem_latency,
                   narrow)
        return p.mem_latency, data, p.mem_overhead, pad_rows * p.pad_per_row

    def _compute_cycles(self, insn: Insn, chain: int | None = None) -> float:
        """Cycles of a GEMM/ALU beyond ``insn_overhead``. ``chain``: ``insn`` heads a fused
        ALU chain of that many instructions (1: a head no instruction joined), None: it heads
        none."""
        if isinstance(insn, _LOOP_INSNS):
            n = insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_bgn)
            if not n:
                return 0.0
            # the pipeline drains only before a token is pushed (the next instruction of the
            # same kind starts while the micro-ops of this one are still in flight), and after
            # an ALU chain
            pushes = bool(insn.push_prev_dep or insn.push_next_dep)
            if isinstance(insn, GemmInsn):
                return n * self.p.gemm_ii + self.p.gemm_latency + \
                    (self.p.gemm_drain if pushes else 0.0)
            # (reset_reg: GEMM only) a two-operand micro-op reads its src through the one
            # port unless it repeats the src read before it
            cycles = n * self.p.alu_ii + (0.0 if insn.use_imm else
                                          src_reads(insn) * (self.p.alu2_ii - self.p.alu_ii))
            if chain:  # a look at the queue per member taken, and one at the next
                drain = self.p.chain_drain if chain > 1 else \
                    (self.p.alu_drain if pushes else 0.0)
                return cycles + self.p.alu_latency + self.p.chain_gather * chain + drain
            return cycles + self.p.alu_latency + (self.p.alu_drain if pushes else 0.0)
        return 0.0

    # --------------------------------------------------------------------- run
    def run(self, insns: Sequence[Insn], *, trace: bool = False) -> RunStats:
        """Schedule ``insns``: each step starts the module instruction that can start first.
        With ``trace``, the Chrome trace events of the run are left in :attr:`trace_events`
        (else it is empty: a knob search times hundreds of programs)."""
        state = _RunState(self._fetch_bursts(len(insns)))
        mods = {m: _Module(m, deque()) for m in MODULES}
        links = _links(mods, state.tokens)
        chains = alu_chains(insns)
        steps = [self._step(insn, mods, links, chains.get(k)) for k, insn in enumerate(insns)]
        for k, st in enumerate(steps):
            st.module.queue.append(k)
        order = [mods[m] for m in MODULES]
        # each module's head start time (None: it waits on an absent token); only the module
        # that ran and those it pushed tokens to change theirs
        ready: dict[str, float | None] = {m.name: self._ready_time(state, m, steps)
                                          for m in order}
        arrival, token_latency = state.arrival, self.p.token_latency
        for _ in range(len(insns)):
            m, best_t = _next_ready(order, ready, insns, steps)
            k = m.queue.popleft()
            st = steps[k]
            t_wait_tok = best_t - max(m.free_at, arrival[k])
            for dq in st.pops:
                dq.popleft()
            start = best_t
            dur = st.dur if st.mem is None else self._execute(state, m, st, start)
            end = start + dur
            m.busy += dur
            m.token_wait += max(0.0, t_wait_tok)
            m.free_at = end
            m.done += 1
            state.left_at[m.name].append(start)
            ready[m.name] = self._ready_time(state, m, steps)
            for dq, dst in st.pushes:
                dq.append(end + token_latency)
                ready[dst.name] = self._ready_time(state, dst, steps)
            if trace:
                state.trace.append({"name": _short_name(insns[k]), "ph": "X", "pid": 1,
                                    "tid": MODULES.index(m.name) + 1, "ts": start, "dur": dur,
                                    "args": {"index": k}})
            if st.finish:
                state.finish_t = end
        self.trace_events = state.trace
        return self._report(state, mods, insns)

    def _step(self, insn: Insn, mods: dict[str, _Module],
              links: dict[str, tuple], chain: int | None = None) -> _Step:
        """What scheduling ``insn`` needs, computed once: its module, the token queues it
        pops and pushes (``links``: per module, see :func:`_links`), and its costs."""
        name = COMPUTE_MODULE if type(insn) is FinishInsn else insn.module
        pop_prev, pop_next, push_prev, push_next = links[name]
        pops: tuple = ()
        if insn.pop_prev_dep or insn.pop_next_dep:
            pops = ((pop_prev,) if insn.pop_prev_dep else ()) + \
                ((pop_next,) if insn.pop_next_dep else ())
        pushes: tuple = ()
        if insn.push_prev_dep or insn.push_next_dep:  # (prev, then next; where the module has it)
            prev = push_prev if insn.push_prev_dep and push_prev else None
            nxt = push_next if insn.push_next_dep and push_next else None
            pushes = (prev, nxt) if prev and nxt else (prev,) if prev else (nxt,) if nxt else ()
        if isinstance(insn, MemInsn):
            mem = self._mem_cycles(insn)
            if mem[1]:
                return _Step(mods[name], pops, pushes, mem, 0.0, False)
            return _Step(mods[name], pops, pushes, None, self.p.insn_overhead + mem[3], False)
        # (a later member of an ALU chain runs with its head)
        dur = 0.0 if chain == 0 else self.p.insn_overhead + self._compute_cycles(insn, chain)
        return _Step(mods[name], pops, pushes, None, dur, type(insn) is FinishInsn)

    def _fetch_bursts(self, n_insns: int) -> _Fetch:
        """Fetch: pipelined bursts of instructions in program order; the port carries their
        data beats (fetch has priority in the arbiter)."""
        p = self.p
        fetch_beats = math.ceil(INSN_BYTES / self.bus_bytes)
        per_burst = max(1, p.max_burst // fetch_beats)
        burst_cycles = per_burst * fetch_beats * self.beat
        period = max(burst_cycles, (p.mem_latency + burst_cycles) / max(1, p.outstanding))
        arrival = [0.0] * n_insns  # Python floats: read once per scheduling step
        bursts: list[tuple[float, float]] = []  # port intervals taken by fetch
        beat, per_insn = self.beat, p.fetch_per_insn
        for j in range(math.ceil(n_insns / per_burst)):
            start = p.mem_latency + j * period
            n_in = min(per_burst, n_insns - j * per_burst)  # the last burst may be short
            bursts.append((start, start + n_in * fetch_beats * beat))
            for k in range(j * per_burst, min(n_insns, (j + 1) * per_burst)):
                arrival[k] = float(start + (k - j * per_burst + 1) * fetch_beats * beat
                                   + (k + 1) * per_insn)
        return _Fetch(arrival, bursts, [b1 for _, b1 in bursts])

    def _ready_time(self, state: _RunState, m: _Module, steps: list[_Step]) -> float | None:
        """When the head of ``m``'s queue can start, or None while a token it pops is absent
        (or ``m``'s queue is empty)."""
        if not m.queue:
            return None
        k = m.queue[0]
        t0 = max(m.free_at, state.fetch.arrival[k])
        q = state.left_at[m.name]
        if len(q) >= self.insn_queue_depth:
            t0 = max(t0, q[-self.insn_queue_depth])
        for dq in steps[k].pops:
            if not dq:
                return None
            t0 = max(t0, dq[0])
        return t0

    def _execute(self, state: _RunState, m: _Module, st: _Step, start: float) -> float:
        """The duration of the LOAD/STORE of ``st`` (one that moves data) started at
        ``start``, booking the memory port and stats."""
        p = self.p
        lead, data, tail, local = st.mem
        ready = start + p.insn_overhead + lead
        begin = _after_fetch(max(ready, state.port_free), data, state.fetch.bursts,
                             state.fetch.ends)
        m.mem_wait += begin - ready
        state.port_free = begin + data
        state.port_busy += data
        return (state.port_free + tail - start) + local

    def _report(self, state: _RunState, mods: dict[str, _Module],
                insns: Sequence[Insn]) -> RunStats:
        total = max([state.finish_t or 0.0] + [m.free_at for m in mods.values()])
        modules = {m.name: ModuleCycles(insns=m.done, busy=int(round(m.busy)),
                                        token_wait=int(round(m.token_wait)),
                                        mem_wait=int(round(m.mem_wait)))
                   for m in mods.values()}
        return program_stats(insns, self.cfg, backend="perf", cycles=int(math.ceil(total)),
                             bus_width=self.cfg.bus_width, modules=modules,
                             memory_port_busy=int(round(state.port_busy)))


def src_reads(insn: AluInsn) -> int:
    """Micro-op iterations of a two-operand ALU instruction that read their src through the
    accumulator's port: all with several micro-ops (their srcs are in the micro-op buffer),
    else those whose src differs from the iteration's before (the compute module keeps the
    last src read; the first always reads, and a dst equal to its src, which the compiler never
    writes, is not modelled)."""
    n = insn.iter_out * insn.iter_in
    if insn.uop_end - insn.uop_bgn != 1 or (insn.iter_in > 1 and insn.src_factor_in):
        return n * max(0, insn.uop_end - insn.uop_bgn)
    return insn.iter_out if insn.iter_out > 1 and insn.src_factor_out else 1


class _Step:
    """One instruction as the scheduler sees it: its ``module``, the token queues it ``pops``
    (None: a queue its module does not have), the (queue, consumer module) pairs it
    ``pushes``, a LOAD/STORE's ``mem`` costs (lead, data, tail, local) when it moves data,
    else its fixed duration ``dur``, and whether it is FINISH."""

    __slots__ = ("module", "pops", "pushes", "mem", "dur", "finish")

    def __init__(self, module: _Module, pops: tuple, pushes: tuple,
                 mem: tuple[float, float, float, float] | None, dur: float,
                 finish: bool) -> None:
        self.module, self.pops, self.pushes = module, pops, pushes
        self.mem, self.dur, self.finish = mem, dur, finish


def _links(mods: dict[str, _Module], tokens: dict[tuple[str, str], deque]) -> dict[str, tuple]:
    """Per module: the token queues it pops from its previous and next module (None where it
    has no such neighbour) and the (queue, consumer module) it pushes to each (None alike)."""
    out = {}
    for m in MODULES:
        prev, nxt = PREV[m], NEXT[m]
        out[m] = (tokens.get((prev, m)), tokens.get((nxt, m)),
                  (tokens[(m, prev)], mods[prev]) if prev else None,
                  (tokens[(m, nxt)], mods[nxt]) if nxt else None)
    return out


def _next_ready(order: list[_Module], ready: dict[str, float | None], insns: Sequence[Insn],
                steps: list[_Step]) -> tuple[_Module, float]:
    """The module whose head instruction starts first (the first in module order on a tie),
    and when; DeadlockError if none can."""
    best, best_t = None, math.inf
    for m in order:
        rt = ready[m.name]
        if rt is not None and rt < best_t:
            best, best_t = m, rt
    if best is not None:
        return best, best_t
    stuck = []
    for m in order:
        if m.queue:
            k = m.queue[0]
            insn = insns[k]
            want = [f"{PREV[m.name]}->{m.name}" for f in [insn.pop_prev_dep] if f] + \
                   [f"{NEXT[m.name]}->{m.name}" for f in [insn.pop_next_dep] if f]
            stuck.append(f"{m.name} at instruction {k} waits on token queue "
                         f"{' and '.join(want)}")
    raise DeadlockError("deadlock: " + "; ".join(stuck))


@dataclass
class _Fetch:
    """When each instruction reaches its queue, and the port intervals fetch bursts take."""

    arrival: list[float]
    bursts: list[tuple[float, float]]  # sorted, disjoint
    ends: list[float]  # their end times


@dataclass
class _RunState:
    """What one :meth:`PerfModel.run` tracks besides the modules."""

    fetch: _Fetch
    # token queues: times at which tokens become visible, per (src, dst)
    tokens: dict[tuple[str, str], deque] = field(
        default_factory=lambda: {(q.src, q.dst): deque() for q in TOKEN_QUEUES})
    # fetch stalls on a full queue: an instruction cannot enter its module's queue before the
    # one `depth` ahead of it has left (started)
    left_at: dict[str, deque] = field(default_factory=lambda: {m: deque() for m in MODULES})
    port_free: float = 0.0
    port_busy: float = 0.0
    trace: list[dict[str, Any]] = field(default_factory=list)
    finish_t: float | None = None

    @property
    def arrival(self) -> list[float]:
        return self.fetch.arrival


def _after_fetch(begin: float, dur: float, bursts: list[tuple[float, float]],
                 ends: list[float]) -> float:
    """The first time >= begin at which a transfer of ``dur`` cycles overlaps no fetch burst
    (``bursts`` are sorted and disjoint; ``ends`` are their end times)."""
    k = bisect.bisect_right(ends, begin)
    while k < len(bursts) and bursts[k][0] < begin + dur:
        begin = bursts[k][1]
        k += 1
    return begin


def _short_name(insn: Insn) -> str:
    if isinstance(insn, MemInsn):
        op = "LOAD" if insn.opcode == Opcode.LOAD else "STORE"
        return f"{op} {MemType(insn.memory_type).name}" if insn.memory_type in \
            MemType._value2member_map_ else op
    return Opcode(insn.opcode).name


def estimate(program: bytes | Sequence[Insn], cfg: Config, *,
             params: PerfParams = DEFAULT_PARAMS) -> RunStats:
    """Statistics (with ``cycles``) of a program on ``cfg``'s core (its bus width included),
    without running its data."""
    with paused_gc():
        insns = check_program(as_program_bytes(program, cfg), cfg)
        return PerfModel(cfg, params).run(insns)


def run_program(program: bytes | Sequence[Insn], dram: bytes | np.ndarray, cfg: Config, *,
                trace: bool = False, params: PerfParams = DEFAULT_PARAMS,
                max_uops: int = MAX_UOPS_PER_INSN,
                **_: Any) -> RunResult:
    """The backend entry point: the DRAM image is returned unchanged (no data is computed, so
    ``vta sim --backend perf`` writes no OUT.bin). The program is checked against the image with
    the same bounds as every other backend (:func:`vta.isa.checks.check_insns`)."""
    prog = as_program_bytes(program, cfg)
    insns = check_program(prog, cfg)
    dram = as_dram(dram)
    check_insns(insns, cfg, len(dram))  # the same bounds as every backend
    check_work(insns, max_uops, "perf")
    model = PerfModel(cfg, params)
    stats = model.run(insns, trace=trace)
    events = model.trace_events
    meta = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": i + 1, "args": {"name": m}}
            for i, m in enumerate(MODULES)]
    return RunResult(dram, stats, meta + events if trace else None)


# --------------------------------------------------------------------- calibration
FITTED = ("mem_latency", "write_latency", "insn_overhead", "mem_overhead", "gemm_latency",
          "alu_latency", "token_latency", "fetch_per_insn", "pad_per_row")


def calibrate(samples: Sequence[tuple[Sequence[Insn], int]], cfg: Config,
              base: PerfParams = DEFAULT_PARAMS, *, rounds: int = 3) -> tuple[PerfParams, float]:
    """Fit the constants in :data:`FITTED` to measured (program, cycles) samples by coordinate
    search; returns the parameters and their mean relative error."""

    def err(p: PerfParams) -> float:
        e = [abs(PerfModel(cfg, p).run(list(insns)).cycles - c) / c for insns, c in samples]
        return float(np.mean(e))

    best, best_e = base, err(base)
    for _ in range(rounds):
        for name in FITTED:
            cur = getattr(best, name)
            steps = {cur * f for f in (0.5, 0.75, 0.9, 1.1, 1.25, 1.5, 2.0)}
            for cand in steps | {cur + 1, max(0.0, cur - 1)}:
                trial = replace(best, **{name: cand})
                e = err(trial)
                if e < best_e:
                    best, best_e = trial, e
    return best, best_e


def params_dict(p: PerfParams) -> dict[str, float]:
    return asdict(p)


__all__ = ["PerfParams", "DEFAULT_PARAMS", "PerfModel", "estimate", "run_program", "calibrate",
           "params_dict", "FITTED"]
