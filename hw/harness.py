"""What every whole-core simulation harness shares (Amaranth sim, cocotb, Verilator tsim).

Pure Python (no Amaranth): placing the instruction stream outside the user's DRAM image,
turning the core's counter registers into :class:`~vta.isa.stats.RunStats`, naming the
stuck modules and queues of a deadlock, and building a Chrome trace from instruction spans.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from vta.isa import MODULES, POP_FLAGS, TOKEN_QUEUES, Config, queue_of
from vta.isa.errors import DeadlockError, ProgramError
from vta.isa.fileio import check_output_file
from vta.isa.insn import AluInsn, FinishInsn, GemmInsn, Insn, MemInsn
from vta.isa.layout import AluOp, MemType, Opcode
from vta.isa.stats import AxiCounts, ModuleCycles, RunStats, program_stats, uop_iterations

from .regs import MODULE_STATES, REGISTER_MAP

#: The instruction stream starts on the first page boundary after the DRAM image.
PROGRAM_ALIGN = 4096
MODULE_NAMES = MODULES

#: Counter registers read after a run (and by the watchdog).
COUNTER_REGS = (
    "cycles", "fetched", "load_done", "compute_done", "store_done",
    "load_busy", "compute_busy", "store_busy",
    "load_token_wait", "compute_token_wait", "store_token_wait",
    "load_mem_wait", "compute_mem_wait", "store_mem_wait",
    "gemm_uops", "alu_uops", "bytes_read", "bytes_written",
)
#: Registers whose change means the core made progress.
PROGRESS_REGS = ("fetched", "load_done", "compute_done", "store_done", "gemm_uops", "alu_uops",
                 "bytes_read", "bytes_written")
#: Registers read to explain a deadlock.
DEBUG_REGS = ("status", "states", *(f"tokens_{q.short}" for q in TOKEN_QUEUES),
              *(f"queue_{m}" for m in MODULES), "fetched",
              *(f"{m}_done" for m in MODULES))


class CycleLimitError(ProgramError):
    """The program did not finish within the cycle budget (max_cycles)."""


def align_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


@dataclass
class MemoryImage:
    """The simulated device memory: the user's DRAM image, then the instruction stream."""

    mem: np.ndarray  # uint8, whole address space of the model
    user_bytes: int  # length of the user's DRAM image (writes beyond it are errors)
    insn_addr: int  # byte address of the instruction stream
    insn_count: int

    def user_dram(self) -> np.ndarray:
        return self.mem[:self.user_bytes].copy()


def place_program(dram: np.ndarray, program: bytes) -> MemoryImage:
    """Lay out memory: DRAM image at 0, the program on the next 4 KiB page, padded to a page."""
    n = len(dram)
    insn_addr = align_up(max(n, 1), PROGRAM_ALIGN)
    size = align_up(insn_addr + len(program), PROGRAM_ALIGN)
    if size > 1 << 32:
        raise ProgramError(f"the DRAM image ({n} bytes) plus the program does not fit the 32-bit "
                           f"address space of the core")
    mem = np.zeros(size, dtype=np.uint8)
    mem[:n] = dram
    mem[insn_addr:insn_addr + len(program)] = np.frombuffer(program, dtype=np.uint8)
    return MemoryImage(mem, n, insn_addr, len(program) // 16)


# ---------------------------------------------------------------------- statistics
def module_of(insn: Insn) -> str:
    """Which module executes ``insn`` (load, compute or store)."""
    return insn.module


def run_stats(insns: Sequence[Insn], cfg: Config, counters: Mapping[str, int], *,
              backend: str, axi: AxiCounts) -> RunStats:
    """The program's statistics plus the core's counters: cycles, per-module busy and waits
    (busy: cycles with an instruction in progress, including its token and memory waits)."""
    modules = {m: ModuleCycles(insns=counters[f"{m}_done"], busy=counters[f"{m}_busy"],
                               token_wait=counters[f"{m}_token_wait"],
                               mem_wait=counters[f"{m}_mem_wait"])
               for m in MODULE_NAMES}
    return program_stats(insns, cfg, backend=backend, cycles=counters["cycles"],
                         bus_width=cfg.bus_width, modules=modules,
                         hw_counters={k: counters[k] for k in COUNTER_REGS if k in counters},
                         axi=axi)


# ---------------------------------------------------------------------- run bounds
#: The default cycle bound of a run is BOUND_BASE + BOUND_MARGIN x the program's static cost.
BOUND_BASE = 1_000_000
BOUND_MARGIN = 16
#: Static cost of one instruction beyond its data: fetch, decode, token handshakes.
INSN_COST = 100
#: Wall-clock seconds between progress lines on stderr (the first after as long a run).
PROGRESS_SECONDS = 10.0


def static_cycles(insns: Sequence[Insn], cfg: Config, *, mem_latency: int,
                  mem_bandwidth: float | None = None, mem_stall: float = 0.0) -> int:
    """A rough serial cost of ``insns`` in cycles (no overlap of the modules): per instruction
    :data:`INSN_COST`, per LOAD/STORE row the memory latency and its bytes at the bus rate, per
    GEMM/ALU micro-op iteration 2 cycles, slowed down by random memory stalls."""
    rate = min(cfg.bus_bytes, mem_bandwidth or cfg.bus_bytes)
    stall = 1.0 / (1.0 - min(max(mem_stall, 0.0), 0.99))
    total = 0.0
    for insn in insns:
        total += INSN_COST
        if isinstance(insn, MemInsn) and insn.x_size:
            rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
            width = insn.x_pad_0 + insn.x_size + insn.x_pad_1
            eb = cfg.elem_bytes(insn.memory_type) if insn.memory_type in \
                MemType._value2member_map_ else 64
            total += stall * (rows * (mem_latency + 8) + rows * width * eb / rate)
        elif isinstance(insn, GemmInsn | AluInsn):
            total += 2 * uop_iterations(insn)
    return int(total)


def default_max_cycles(insns: Sequence[Insn], cfg: Config, **cost: Any) -> int:
    """The cycle bound of a run without ``max_cycles``: far above what the program needs (see
    :func:`static_cycles`), so only a core that stops making useful progress reaches it."""
    return BOUND_BASE + BOUND_MARGIN * static_cycles(insns, cfg, **cost)


def cycle_limit_error(max_cycles: int, default: bool, backend: str) -> CycleLimitError:
    how = ("the default bound for this program (16 x its static cost + 1M cycles)" if default
           else "max_cycles")
    return CycleLimitError(f"the program did not finish within {max_cycles} cycles on "
                           f"{backend} ({how}); raise --max-cycles (max_cycles=) to allow more")


def check_vcd_path(vcd: str | os.PathLike[str] | None) -> None:
    """A waveform file must go to an existing, writable directory (checked before simulating,
    as every output file is: :func:`vta.isa.fileio.check_output_file`)."""
    if vcd is not None:
        check_output_file(vcd, "VCD file")


#: Registers a progress line reads: instructions and micro-ops retired.
DONE_REGS = ("load_done", "compute_done", "store_done", "gemm_uops", "alu_uops")


def progress_line(backend: str, cycles: int, max_cycles: int, regs: Mapping[str, int],
                  insns: Sequence[Insn], seconds: float) -> None:
    """One progress line on stderr for a long run (``regs``: the :data:`DONE_REGS` values)."""
    done = regs["load_done"] + regs["compute_done"] + regs["store_done"]
    uops = sum(uop_iterations(i) for i in insns if isinstance(i, GemmInsn | AluInsn))
    print(f"{backend}: {cycles:,} cycles, {done} of {len(insns)} instructions and "
          f"{regs['gemm_uops'] + regs['alu_uops']:,} of {uops:,} micro-ops done, "
          f"{seconds:.0f} s (bound {max_cycles:,} cycles)", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- deadlock diagnosis
_STATE_NAMES = {v: k for k, v in MODULE_STATES.items()}


def module_streams(insns: Sequence[Insn]) -> dict[str, list[int]]:
    """Program indices of the instructions each module executes, in order."""
    streams: dict[str, list[int]] = {m: [] for m in MODULE_NAMES}
    for i, insn in enumerate(insns):
        streams[module_of(insn)].append(i)
    return streams


def describe_deadlock(regs: Mapping[str, int], insns: Sequence[Insn], idle: int) -> str:
    """One line naming the stuck modules, the instruction each is on and the empty queues."""
    streams = module_streams(insns)
    states = regs.get("states", 0)
    parts = []
    for k, m in enumerate(MODULE_NAMES):
        done = regs.get(f"{m}_done", 0)
        stream = streams[m]
        if done >= len(stream):
            continue
        idx = stream[done]
        insn = insns[idx]
        state = _STATE_NAMES.get((states >> (4 * (k + 1))) & 0xF, "?")
        waits = []
        for flag in POP_FLAGS:
            q = queue_of(m, flag)
            if q and getattr(insn, flag) and regs.get(f"tokens_{q.short}", 0) == 0:
                waits.append(f"a token on {q.name} (empty)")
        what = f"waiting for {' and '.join(waits)}" if waits else f"in state {state}"
        parts.append(f"{m} stuck at instruction {idx} ({Opcode(insn.opcode).name}) {what}")
    if not parts:
        parts.append(f"fetch stuck after {regs.get('fetched', 0)} of {len(insns)} instructions")
    tokens = " ".join(f"{q.short}={regs.get('tokens_' + q.short, 0)}" for q in TOKEN_QUEUES)
    return (f"deadlock: no progress for {idle} cycles; " + "; ".join(parts)
            + f" (tokens {tokens}; check the program's push/pop flags)")


def deadlock_error(regs: Mapping[str, int], insns: Sequence[Insn], idle: int) -> DeadlockError:
    return DeadlockError(describe_deadlock(regs, insns, idle))


# ---------------------------------------------------------------------- trace
@dataclass(frozen=True)
class Span:
    """One instruction of one module: it left idle at ``start``, began running (left the
    decode / token-wait states) at ``run_start`` and completed at ``end`` (exclusive)."""

    module: str
    index: int  # program index
    start: int
    end: int
    run_start: int | None = None


_WAIT_STATES = (MODULE_STATES["decode"], MODULE_STATES["pop_tokens"])


def spans_from_samples(samples: Iterable[Sequence[int]], insns: Sequence[Insn]) -> list[Span]:
    """Instruction spans from samples ``(cycle, states, load_done, compute_done, store_done)``
    taken every cycle, or at least at every cycle where one of them changed. An instruction
    starts when its module leaves idle and ends when the module's done counter increments."""
    streams = module_streams(insns)
    spans: list[Span] = []
    start: list[int | None] = [None, None, None]
    run: list[int | None] = [None, None, None]
    last_done = [0, 0, 0]
    for cycle, states, *done in samples:
        for k in range(3):
            stream = streams[MODULE_NAMES[k]]
            for j in range(last_done[k], done[k]):
                s = start[k] if start[k] is not None else cycle
                if j < len(stream):
                    spans.append(Span(MODULE_NAMES[k], stream[j], s, cycle,
                                      run[k] if run[k] is not None else s))
                start[k] = run[k] = None
            last_done[k] = max(last_done[k], done[k])
            state = (states >> (4 * (k + 1))) & 0xF
            if state and start[k] is None:
                start[k] = cycle
            if state and state not in _WAIT_STATES and run[k] is None:
                run[k] = cycle
    return spans


def chrome_trace(spans: Sequence[Span], insns: Sequence[Insn], *, clock_mhz: float = 100.0,
                 process: str = "vta") -> list[dict[str, Any]]:
    """Chrome trace events: one track (thread) per module, each instruction a complete event.

    Timestamps are microseconds at ``clock_mhz`` (1 cycle = 10 ns at 100 MHz); ``args`` carries
    the cycle numbers and the instruction's fields.
    """
    us = 1.0 / clock_mhz
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": process}}]
    for k, m in enumerate(MODULE_NAMES):
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": k, "args": {"name": m}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": k,
                       "args": {"sort_index": k}})
    for s in spans:
        insn = insns[s.index]
        name = Opcode(insn.opcode).name
        if isinstance(insn, MemInsn) and insn.memory_type in MemType._value2member_map_:
            name += f" {MemType(insn.memory_type).name}"
        elif isinstance(insn, AluInsn) and insn.alu_opcode in AluOp._value2member_map_:
            name += f" {AluOp(insn.alu_opcode).name}"
        run = s.start if s.run_start is None else s.run_start
        tid = MODULE_NAMES.index(s.module)
        if run > s.start:
            events.append({"name": "wait", "cat": "wait", "ph": "X", "pid": 0, "tid": tid,
                           "ts": s.start * us, "dur": (run - s.start) * us,
                           "args": {"index": s.index, "start_cycle": s.start,
                                    "end_cycle": run}})
        args: dict[str, Any] = {"index": s.index, "start_cycle": run, "end_cycle": s.end}
        if not isinstance(insn, FinishInsn):
            args.update({k: v for k, v in insn.to_dict().items() if k != "opcode"})
        events.append({"name": name, "cat": s.module, "ph": "X", "pid": 0, "tid": tid,
                       "ts": run * us, "dur": max(s.end - run, 1) * us, "args": args})
    return events


def reg_offsets(names: Iterable[str]) -> list[tuple[str, int]]:
    return [(n, REGISTER_MAP[n]) for n in names]


__all__ = ["MemoryImage", "place_program", "run_stats", "describe_deadlock",
           "deadlock_error", "Span", "spans_from_samples", "chrome_trace", "CycleLimitError",
           "COUNTER_REGS", "PROGRESS_REGS", "DEBUG_REGS", "MODULE_NAMES", "module_streams",
           "align_up", "reg_offsets"]
