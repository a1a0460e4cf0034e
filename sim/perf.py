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
    INSN_BYTES,
    INSN_QUEUE_DEPTH,
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
from vta.isa.image import RunResult, as_dram, as_program_bytes, check_program

MODULES = ("load", "compute", "store")


@dataclass(frozen=True)
class PerfParams:
    """Timing constants (cycles), in one place; :func:`calibrate` fits them to tsim."""

    bus_bytes: int = 8            #: memory port data width in bytes (64-bit PYNQ port)
    mem_latency: float = 20.0     #: cycles from a burst request to its first data beat
    max_burst: int = 16           #: beats per burst
    outstanding: int = 1          #: bursts in flight on the port (1: request, data, next)
    fetch_per_insn: float = 0.0   #: extra fetch cycles per instruction beyond its data beats
    insn_overhead: float = 2.0    #: decode/issue cycles of every instruction
    gemm_ii: float = 1.0          #: cycles per GEMM micro-op iteration
    gemm_latency: float = 4.0     #: GEMM pipeline fill/drain per instruction
    alu_ii: float = 1.0           #: cycles per ALU micro-op iteration
    alu_latency: float = 4.0      #: ALU pipeline fill/drain per instruction
    pad_per_row: float = 0.0      #: extra cycles per padded row written by a LOAD
    token_latency: float = 1.0    #: cycles from a push to the matching pop being seen

    def with_bus_width(self, bus_width: int) -> PerfParams:
        return replace(self, bus_bytes=bus_width // 8)


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
    def _transfer(self, rows: int, row_bytes: int, start_byte: int = 0) -> tuple[float, int]:
        """(cycles, beats) to move ``rows`` rows of ``row_bytes`` contiguous bytes each."""
        if rows <= 0 or row_bytes <= 0:
            return 0.0, 0
        bb = self.p.bus_bytes
        first = start_byte % bb
        beats_row = math.ceil((first + row_bytes) / bb)
        bursts_row = math.ceil(beats_row / self.p.max_burst)
        beats = rows * beats_row
        bursts = rows * bursts_row
        waves = math.ceil(bursts / max(1, self.p.outstanding))
        return waves * self.p.mem_latency + beats, beats

    def _mem_cycles(self, insn: MemInsn) -> tuple[float, float, int]:
        """(memory-port cycles, cycles inside the module without the port, bytes moved)."""
        esz = self.cfg.elem_bytes(insn.memory_type)
        if insn.x_size == 0:
            return 0.0, 0.0, 0
        if insn.opcode == Opcode.STORE:
            cyc, _ = self._transfer(insn.y_size, insn.x_size * esz, insn.dram_base * esz)
            return cyc, 0.0, insn.y_size * insn.x_size * esz
        cyc, _ = self._transfer(insn.y_size, insn.x_size * esz, insn.dram_base * esz)
        local = (insn.y_pad_0 + insn.y_pad_1) * self.p.pad_per_row
        return cyc, local, insn.y_size * insn.x_size * esz

    def _compute_cycles(self, insn: Insn) -> float:
        if isinstance(insn, GemmInsn | AluInsn):
            n = insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_bgn)
            if isinstance(insn, GemmInsn):
                return n * self.p.gemm_ii + (self.p.gemm_latency if n else 0.0)
            return n * self.p.alu_ii + (self.p.alu_latency if n else 0.0)
        return 0.0

    # --------------------------------------------------------------------- run
    def run(self, insns: Sequence[Insn]) -> dict[str, Any]:
        p = self.p
        mods = {m: _Module(m, deque()) for m in MODULES}
        # fetch: instructions arrive in program order; each occupies the port for its beats
        fetch_beats = math.ceil(INSN_BYTES / p.bus_bytes)
        arrival = np.empty(len(insns))
        fetch_bursts: list[tuple[float, float]] = []  # port intervals taken by fetch
        t = 0.0
        per_burst = max(1, p.max_burst // fetch_beats)
        for k in range(len(insns)):
            if k % per_burst == 0:
                fetch_bursts.append((t, 0.0))
                t += p.mem_latency
            t += fetch_beats + p.fetch_per_insn
            arrival[k] = t
            fetch_bursts[-1] = (fetch_bursts[-1][0], t)
        fetch_ends = [b1 for _, b1 in fetch_bursts]
        for k, insn in enumerate(insns):
            mods[insn.module if not isinstance(insn, FinishInsn) else "compute"].queue.append(
                (k, insn))
        # token queues: times at which tokens become visible, per (src, dst)
        tokens: dict[tuple[str, str], deque] = {
            (a, b): deque() for a, b in (("load", "compute"), ("compute", "load"),
                                         ("compute", "store"), ("store", "compute"))}
        prev = {"load": None, "compute": "load", "store": "compute"}
        nxt = {"load": "compute", "compute": "store", "store": None}
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
                port, local, nbytes = self._mem_cycles(insn)
                if port:
                    begin = _after_fetch(max(start + p.insn_overhead, port_free), port,
                                         fetch_bursts, fetch_ends)
                    m.mem_wait += begin - (start + p.insn_overhead)
                    port_free = begin + port
                    port_busy += port
                    dur = (port_free - start) + local
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
                bus_width: int | None = None, **_: Any) -> RunResult:
    """The backend entry point: the DRAM image is returned unchanged (no data is computed)."""
    prog = as_program_bytes(program, cfg)
    insns = check_program(prog, cfg)
    if bus_width is not None:
        params = params.with_bus_width(bus_width)
    stats = PerfModel(cfg, params).run(insns)
    events = stats.pop("_trace")
    stats["note"] = "perf backend: cycle estimate only; the DRAM image is not computed"
    meta = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": i + 1, "args": {"name": m}}
            for i, m in enumerate(MODULES)]
    return RunResult(as_dram(dram), stats, meta + events if trace else None)


# --------------------------------------------------------------------- calibration
FITTED = ("mem_latency", "insn_overhead", "gemm_latency", "alu_ii", "alu_latency",
          "token_latency", "fetch_per_insn")


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
