"""Cycle-approximate performance model of the VTA core (``vta sim --backend perf``).

An event-driven model of what decides VTA's run time: fetch routing instructions in order into
bounded per-module queues, the three modules (load, compute, store) each running its queue in order,
the four dependency-token queues (pop before an instruction starts, push when it ends, plus a token
latency), and one shared memory port (bursts with a fixed latency and a bus width). It does not
compute data, so one instruction costs O(1) however many micro-ops it runs.

Every timing constant is in :class:`PerfParams`, measured from the RTL (tsim) by :func:`calibrate`;
the defaults describe the kit's RTL on a PYNQ-like 64-bit port.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
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
from vta.isa.image import RunResult, as_dram, as_program_bytes, check_program


@dataclass(frozen=True)
class PerfParams:
    """Timing constants (cycles), in one place.

    Structural values (bus, bandwidth, bursts, outstanding reads, one micro-op per cycle) are
    the RTL's and tsim's defaults; the others were fitted to tsim's cycle counts at the default
    config with ``bench/bench_perf_model.py --calibrate`` on every other program of its
    benchmark set (refitted for the pipelined compute datapath: 9/8-cycle GEMM/ALU drains only
    before a token push, two-operand ALU micro-ops at one per two cycles); the training,
    held-out and other-configuration errors are in the README (from its record).
    """

    bus_bytes: int = 8            #: memory port data width in bytes (64-bit PYNQ port)
    bandwidth: float = 8.0        #: memory bytes per cycle (tsim's default: one 64-bit word)
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
    alu2_ii: float = 2.0          #: cycles per two-operand ALU micro-op (one acc read port)
    alu_latency: float = 4.86     #: ALU cycles per instruction beyond insn_overhead
    alu_drain: float = 8.0        #: ALU pipeline drain, only before pushing a token
    pad_per_row: float = 0.0      #: extra cycles per padded row written by a LOAD
    token_latency: float = 15.0   #: cycles from a push to the dependent instruction starting

    def with_bus_width(self, bus_width: int) -> PerfParams:
        return replace(self, bus_bytes=bus_width // 8)

    @property
    def beat(self) -> float:
        """Cycles per data beat (the bus word or the memory bandwidth, whichever is slower)."""
        return max(1.0, self.bus_bytes / self.bandwidth)

    def burst_train(self, bursts: int, beats: int, latency: float) -> float:
        """Cycles to move ``beats`` beats in ``bursts`` bursts with ``outstanding`` in flight:
        the first burst's latency, then one burst per period (data-bound or latency-bound)."""
        if bursts <= 0:
            return 0.0
        b = beats / bursts * self.beat
        period = max(b, (latency + b) / max(1, self.outstanding))
        return latency + b + (bursts - 1) * period


DEFAULT_PARAMS = PerfParams()


@dataclass
class _Module:
    name: str
    queue: deque  # (insn index, insn)
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
        self.insn_queue_depth = insn_queue_depth

    # ------------------------------------------------------------- memory costs
    def _rows(self, rows: int, row_bytes: int, start_byte: int) -> tuple[int, int]:
        """(bursts, beats) of ``rows`` rows of ``row_bytes`` contiguous bytes each."""
        bb = self.p.bus_bytes
        beats_row = math.ceil((start_byte % bb + row_bytes) / bb)
        return rows * math.ceil(beats_row / self.p.max_burst), rows * beats_row

    def _mem_cycles(self, insn: MemInsn) -> tuple[float, float, float, float, int]:
        """(lead, data, tail, local, bytes) of a LOAD/STORE: ``lead`` is the request latency
        (it overlaps other modules' traffic), ``data`` the cycles its beats occupy the port,
        ``tail`` what follows the data (the write response), ``local`` cycles without the
        port (padding)."""
        if insn.x_size == 0:
            return 0.0, 0.0, 0.0, 0.0, 0
        p = self.p
        esz = self.cfg.elem_bytes(insn.memory_type)
        nbytes = insn.y_size * insn.x_size * esz
        bursts, beats = self._rows(insn.y_size, insn.x_size * esz, insn.dram_base * esz)
        # elements narrower than the bus are written/read one per cycle inside the module
        narrow = insn.y_size * insn.x_size if esz < p.bus_bytes else 0
        if insn.opcode == Opcode.STORE:
            return 0.0, max(beats * p.beat, narrow), p.write_latency + p.mem_overhead, 0.0, \
                nbytes
        data = max(p.burst_train(bursts, beats, p.mem_latency) - p.mem_latency, narrow)
        local = (insn.y_pad_0 + insn.y_pad_1) * p.pad_per_row
        return p.mem_latency, data, p.mem_overhead, local, nbytes

    def _compute_cycles(self, insn: Insn) -> float:
        if isinstance(insn, GemmInsn | AluInsn):
            n = insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_bgn)
            if not n:
                return 0.0
            # the pipeline drains only before a token is pushed (the next instruction of the
            # same kind starts while the micro-ops of this one are still in flight)
            pushes = bool(insn.push_prev_dep or insn.push_next_dep)
            if isinstance(insn, GemmInsn):
                return n * self.p.gemm_ii + self.p.gemm_latency + \
                    (self.p.gemm_drain if pushes else 0.0)
            ii = self.p.alu_ii if insn.use_imm else self.p.alu2_ii  # reset_reg: GEMM only
            return n * ii + self.p.alu_latency + (self.p.alu_drain if pushes else 0.0)
        return 0.0

    # --------------------------------------------------------------------- run
    def run(self, insns: Sequence[Insn]) -> dict[str, Any]:
        p = self.p
        mods = {m: _Module(m, deque()) for m in MODULES}
        # fetch: pipelined bursts of instructions in program order; the port carries their
        # data beats (fetch has priority in the arbiter)
        fetch_beats = math.ceil(INSN_BYTES / p.bus_bytes)
        per_burst = max(1, p.max_burst // fetch_beats)
        burst_cycles = per_burst * fetch_beats * p.beat
        period = max(burst_cycles, (p.mem_latency + burst_cycles) / max(1, p.outstanding))
        arrival = np.empty(len(insns))
        fetch_bursts: list[tuple[float, float]] = []  # port intervals taken by fetch
        for j in range(math.ceil(len(insns) / per_burst)):
            start = p.mem_latency + j * period
            n_in = min(per_burst, len(insns) - j * per_burst)  # the last burst may be short
            fetch_bursts.append((start, start + n_in * fetch_beats * p.beat))
            for k in range(j * per_burst, min(len(insns), (j + 1) * per_burst)):
                arrival[k] = start + (k - j * per_burst + 1) * fetch_beats * p.beat \
                    + (k + 1) * p.fetch_per_insn
        fetch_ends = [b1 for _, b1 in fetch_bursts]
        for k, insn in enumerate(insns):
            mods[insn.module if not isinstance(insn, FinishInsn) else COMPUTE_MODULE].queue.append(
                (k, insn))
        # token queues: times at which tokens become visible, per (src, dst)
        tokens: dict[tuple[str, str], deque] = {(q.src, q.dst): deque() for q in TOKEN_QUEUES}
        prev, nxt = PREV, NEXT
        port_free = 0.0
        port_busy = 0.0
        stats_bytes = {t.name: 0 for t in MemType}
        stats_store = 0
        gemm_uops = useful_uops = alu_uops = 0
        trace: list[dict[str, Any]] = []
        finish_t = None
        # fetch stalls on a full queue: an instruction cannot enter its module's queue before
        # the one `depth` ahead of it has left (started)
        left_at: dict[str, deque] = {m: deque() for m in MODULES}

        def ready_time(m: _Module) -> float | None:
            k, insn = m.queue[0]
            t0 = max(m.free_at, arrival[k])
            q = left_at[m.name]
            if len(q) >= self.insn_queue_depth:
                t0 = max(t0, q[-self.insn_queue_depth])
            if insn.pop_prev_dep:
                dq = tokens[(prev[m.name], m.name)] if prev[m.name] else None
                if not dq:
                    return None
                t0 = max(t0, dq[0])
            if insn.pop_next_dep:
                dq = tokens[(nxt[m.name], m.name)] if nxt[m.name] else None
                if not dq:
                    return None
                t0 = max(t0, dq[0])
            return t0

        remaining = len(insns)
        while remaining:
            best, best_t = None, math.inf
            for m in mods.values():
                if m.queue:
                    rt = ready_time(m)
                    if rt is not None and rt < best_t:
                        best, best_t = m, rt
            if best is None:
                stuck = []
                for m in mods.values():
                    if m.queue:
                        k, insn = m.queue[0]
                        want = [f"{prev[m.name]}->{m.name}" for f in [insn.pop_prev_dep] if f] + \
                               [f"{nxt[m.name]}->{m.name}" for f in [insn.pop_next_dep] if f]
                        stuck.append(f"{m.name} at instruction {k} waits on token queue "
                                     f"{' and '.join(want)}")
                raise DeadlockError("deadlock: " + "; ".join(stuck))
            m = best
            k, insn = m.queue.popleft()
            t_wait_tok = best_t - max(m.free_at, arrival[k])
            if insn.pop_prev_dep:
                tokens[(prev[m.name], m.name)].popleft()
            if insn.pop_next_dep:
                tokens[(nxt[m.name], m.name)].popleft()
            start = best_t
            dur = p.insn_overhead
            if isinstance(insn, MemInsn):
                lead, data, tail, local, nbytes = self._mem_cycles(insn)
                if data:
                    ready = start + p.insn_overhead + lead
                    begin = _after_fetch(max(ready, port_free), data, fetch_bursts, fetch_ends)
                    m.mem_wait += begin - ready
                    port_free = begin + data
                    port_busy += data
                    dur = (port_free + tail - start) + local
                else:
                    dur += local
                if insn.opcode == Opcode.STORE:
                    stats_store += nbytes
                else:
                    stats_bytes[MemType(insn.memory_type).name] += nbytes
            else:
                dur += self._compute_cycles(insn)
                n = (insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_bgn)
                     if isinstance(insn, GemmInsn | AluInsn) else 0)
                if isinstance(insn, GemmInsn):
                    gemm_uops += n
                    useful_uops += 0 if insn.reset_reg else n  # resets do no MACs
                elif isinstance(insn, AluInsn):
                    alu_uops += n
            end = start + dur
            m.busy += dur
            m.token_wait += max(0.0, t_wait_tok)
            m.free_at = end
            m.done += 1
            left_at[m.name].append(start)
            if insn.push_prev_dep and prev[m.name]:
                tokens[(m.name, prev[m.name])].append(end + p.token_latency)
            if insn.push_next_dep and nxt[m.name]:
                tokens[(m.name, nxt[m.name])].append(end + p.token_latency)
            trace.append({"name": _short_name(insn), "ph": "X", "pid": 1,
                          "tid": MODULES.index(m.name) + 1, "ts": start, "dur": dur,
                          "args": {"index": k}})
            if isinstance(insn, FinishInsn):
                finish_t = end
            remaining -= 1
        total = max([finish_t or 0.0] + [m.free_at for m in mods.values()])
        peak = self.cfg.macs_per_cycle
        cycles = int(math.ceil(total))
        return {
            "backend": "perf",
            "cycles": cycles,
            "modules": {m.name: {"busy": int(round(m.busy)), "token_wait": int(round(m.token_wait)),
                                 "memory_wait": int(round(m.mem_wait)), "insns": m.done}
                        for m in mods.values()},
            "memory_port_busy": int(round(port_busy)),
            "gemm_uops": gemm_uops,
            "alu_uops": alu_uops,
            "gemm_useful_uops": useful_uops,
            # useful MACs / (cycles x peak MACs per cycle)
            "gemm_utilization": (useful_uops * peak) / (cycles * peak) if cycles else 0.0,
            "bytes_loaded": stats_bytes,
            "bytes_stored": stats_store,
            "insns": _count_opcodes(insns),
            "_trace": trace,
        }


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


def _count_opcodes(insns: Sequence[Insn]) -> dict[str, int]:
    out = {o.name: 0 for o in Opcode}
    for i in insns:
        out[Opcode(i.opcode).name] += 1
    return out


def estimate(program: bytes | Sequence[Insn], cfg: Config, *,
             params: PerfParams = DEFAULT_PARAMS, bus_width: int | None = None) -> dict[str, Any]:
    """Statistics (with ``cycles``) of a program, without running its data."""
    prog = as_program_bytes(program, cfg)
    insns = check_program(prog, cfg)
    if bus_width is not None:
        params = params.with_bus_width(bus_width)
    stats = PerfModel(cfg, params).run(insns)
    stats.pop("_trace")
    return stats


def run_program(program: bytes | Sequence[Insn], dram: bytes | np.ndarray, cfg: Config, *,
                trace: bool = False, params: PerfParams = DEFAULT_PARAMS,
                bus_width: int | None = None, max_uops: int = MAX_UOPS_PER_INSN,
                **_: Any) -> RunResult:
    """The backend entry point: the DRAM image is returned unchanged (no data is computed, so
    ``vta sim --backend perf`` writes no OUT.bin). The program is checked against the image with
    the same bounds as every other backend (:func:`vta.isa.checks.check_insns`)."""
    prog = as_program_bytes(program, cfg)
    insns = check_program(prog, cfg)
    dram = as_dram(dram)
    check_insns(insns, cfg, len(dram))  # the same bounds as every backend
    check_work(insns, max_uops, "perf")
    if bus_width is not None:
        params = params.with_bus_width(bus_width)
    stats = PerfModel(cfg, params).run(insns)
    events = stats.pop("_trace")
    stats["note"] = "perf backend: cycle estimate only; the DRAM image is not computed"
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
        e = [abs(PerfModel(cfg, p).run(list(insns))["cycles"] - c) / c for insns, c in samples]
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
