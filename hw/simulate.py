"""Run a program image on the whole VTA core in the Amaranth simulator (``vta sim --backend rtl``).

The core (:class:`vta.hw.core.VTACore`) sits between two testbenches: an AXI4 memory model
(:class:`vta.hw.axi_model.AxiMemory`) holding the user's DRAM image with the instruction stream
on the next 4 KiB page after it, and a host driver that programs the registers through the
AXI4-Lite port exactly like a CPU would (instruction address and count, launch, poll
``finished``), then reads the core's counters. A watchdog stops a run that makes no progress.

Needs no external tool; it runs a few thousand cycles per second, so it is meant for tests and
small programs (use the Verilator backend :mod:`vta.hw.tsim` for long ones).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from vta.isa import Config
from vta.isa.checks import MAX_UOPS_PER_INSN, check_insns, check_work
from vta.isa.errors import VTAError
from vta.isa.image import RunResult, as_dram, as_program_bytes, check_program
from vta.isa.insn import Insn
from vta.isa.signals import raise_if_signalled
from vta.isa.stats import AxiCounts

from .axi_model import AxiMemory
from .harness import (
    COUNTER_REGS,
    DEBUG_REGS,
    DONE_REGS,
    PROGRESS_REGS,
    PROGRESS_SECONDS,
    MemoryImage,
    check_vcd_path,
    chrome_trace,
    cycle_limit_error,
    deadlock_error,
    default_max_cycles,
    place_program,
    progress_line,
    run_stats,
    spans_from_samples,
)
from .options import CoreOptions
from .regs import CONTROL_FINISHED, CONTROL_LAUNCH, REGISTER_MAP

#: Defaults of the embedded memory model: first-beat latency in cycles, no bandwidth limit.
DEFAULT_MEM_LATENCY = 8
#: Wall-clock seconds one clock cycle may take before the simulation is declared stuck.
STALL_SECONDS = 60.0
#: Cycles without any progress (no memory traffic, no instruction or micro-op retired) that make
#: the watchdog declare a deadlock.
DEFAULT_IDLE_LIMIT = 4000


class SimulationStallError(VTAError):
    """The simulated design stopped advancing in time (it does not settle within a cycle)."""


@contextlib.contextmanager
def _stall_guard(cycle: Callable[[], int], seconds: float = STALL_SECONDS) -> Iterator[None]:
    """Turn a simulation that never finishes a clock cycle into an error instead of a hang.

    Amaranth's simulator has no limit on delta cycles, so a combinational loop in the design
    makes it spin forever inside one cycle; the cycle-level watchdog cannot see that. A wall-clock
    timer checks that the cycle count moves at least every ``seconds`` (a cycle normally takes
    milliseconds). Only in the main thread (it uses SIGALRM); elsewhere it does nothing.
    """
    if (threading.current_thread() is not threading.main_thread()
            or not hasattr(signal, "setitimer")):
        yield
        return
    period = seconds / 4
    last = {"cycle": -1, "since": time.monotonic()}

    def check(signum: int, frame: Any) -> None:
        now, c = time.monotonic(), cycle()
        if c != last["cycle"]:
            last["cycle"], last["since"] = c, now
        elif now - last["since"] >= seconds:
            signal.setitimer(signal.ITIMER_REAL, 0)
            raise SimulationStallError(
                f"the simulation has been stuck in clock cycle {c} for "
                f"{now - last['since']:.0f} s: the design does not settle (a combinational "
                f"loop? `vta verilog` reports it)")

    previous = signal.signal(signal.SIGALRM, check)
    signal.setitimer(signal.ITIMER_REAL, period, period)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Job:
    """One program run of a batch: the program, the initial DRAM image and the memory model."""

    program: bytes
    insns: list[Insn]
    image: MemoryImage
    memory: AxiMemory
    max_cycles: int  # the cycle bound of this job (given, or the program's default bound)
    result: RunResult | None = None


def run_program(program: bytes | Sequence[Insn], dram: np.ndarray | bytes, cfg: Config, *,
                max_cycles: int | None = None,
                idle_limit: int = DEFAULT_IDLE_LIMIT, trace: bool = False,
                mem_latency: int = DEFAULT_MEM_LATENCY, mem_bandwidth: float | None = None,
                mem_stall: float = 0.0, seed: int = 0, poll_interval: int = 32,
                vcd: str | None = None, options: CoreOptions | None = None,
                progress: float | None = PROGRESS_SECONDS,
                max_uops: int = MAX_UOPS_PER_INSN) -> RunResult:
    """Run ``program`` on the Amaranth simulation of :class:`VTACore` for ``cfg`` (its bus
    width included) and return the result.

    ``dram`` is the initial device memory (byte 0 at address 0); the result's ``dram`` has the
    same length. ``mem_latency`` (cycles to the first read beat), ``mem_bandwidth`` (bytes per
    cycle, ``None`` = one bus word per cycle) and ``mem_stall`` (probability of random
    backpressure, seeded by ``seed``) shape the memory model. Raises
    :class:`vta.isa.errors.DeadlockError` naming the stuck modules and queues after
    ``idle_limit`` cycles without progress, and :class:`CycleLimitError` past ``max_cycles``
    (default: :func:`~vta.hw.harness.default_max_cycles` of the program). A run longer than
    ``progress`` seconds prints a progress line on stderr every ``progress`` seconds (``None``:
    never). ``vcd`` must name a file in an existing directory. ``options`` selects a hardware
    variant of :class:`VTACore` (:class:`CoreOptions`). A GEMM/ALU instruction of more than
    ``max_uops`` micro-op iterations is rejected before simulating, as on every backend.
    """
    return run_programs([(program, dram)], cfg, max_cycles=max_cycles,
                        idle_limit=idle_limit, trace=trace, mem_latency=mem_latency,
                        mem_bandwidth=mem_bandwidth, mem_stall=mem_stall, seed=seed,
                        poll_interval=poll_interval, vcd=vcd,
                        options=options, progress=progress, max_uops=max_uops)[0]


def run_programs(jobs: Sequence[tuple[bytes | Sequence[Insn], np.ndarray | bytes]],
                 cfg: Config, *, max_cycles: int | None = None,
                 idle_limit: int = DEFAULT_IDLE_LIMIT, trace: bool = False,
                 mem_latency: int = DEFAULT_MEM_LATENCY, mem_bandwidth: float | None = None,
                 mem_stall: float = 0.0, seed: int = 0, poll_interval: int = 32,
                 vcd: str | None = None, reset_between: bool = True,
                 options: CoreOptions | None = None,
                 progress: float | None = PROGRESS_SECONDS,
                 max_uops: int = MAX_UOPS_PER_INSN) -> list[RunResult]:
    """Run several ``(program, dram)`` jobs one after the other on ONE simulated core.

    The core is elaborated once; between jobs it is reset (``reset_between``) and given a fresh
    memory model, like a host driver reusing the device. Its scratchpads keep their contents
    across jobs, as on hardware. Returns one :class:`RunResult` per job.
    """
    from amaranth.hdl import ClockDomain, Module  # deferred: amaranth, only to simulate
    from amaranth.sim import Simulator  # deferred: amaranth, only to simulate

    from .axi_sim import AxiLiteHost, axi_memory_testbench  # deferred: amaranth, only to simulate
    from .probe import ProbedCore  # deferred: amaranth, only to simulate

    check_vcd_path(vcd)
    if max_cycles is not None and max_cycles < 1:
        raise VTAError(f"max_cycles must be at least 1, not {max_cycles}")
    prepared = _prepare_jobs(jobs, cfg, max_cycles=max_cycles,
                             mem_latency=mem_latency, mem_bandwidth=mem_bandwidth,
                             mem_stall=mem_stall, seed=seed, max_uops=max_uops)
    if not prepared:
        return []
    core = ProbedCore(cfg, options=options)
    top = Module()
    top.domains.sync = cd = ClockDomain("sync")
    top.submodules.core = core
    current = {"job": prepared[0]}
    samples: list[tuple[int, ...]] = []
    probe = ((core.debug_states, core.debug_load_done, core.debug_compute_done,
              core.debug_store_done) if trace else None)

    def sample_probe(ctx: Any) -> None:
        samples.append((current["job"].memory.cycle, *(ctx.get(p) for p in probe)))

    memory_bench = axi_memory_testbench(core, lambda: current["job"].memory,
                                        on_edge=sample_probe if probe is not None else None)

    host = AxiLiteHost(core)
    outcomes: list[dict[str, int]] = []

    async def driver(ctx: Any) -> None:
        for n, job in enumerate(prepared):
            current["job"] = job
            samples.clear()
            if n and reset_between:
                ctx.set(cd.rst, 1)
                for _ in range(2):
                    await ctx.tick()  # (``repeat`` would raise DomainReset)
                ctx.set(cd.rst, 0)
            counters = await _run_job(ctx, host, job, poll_interval=poll_interval,
                                      idle_limit=idle_limit, progress=progress,
                                      default_bound=max_cycles is None)
            outcomes.append(counters)
            job.result = _result(job, counters, cfg, samples if trace else None)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(memory_bench, background=True)
    sim.add_testbench(driver)
    with _stall_guard(lambda: current["job"].memory.cycle):
        if vcd is not None:
            with sim.write_vcd(vcd):
                sim.run()
        else:
            sim.run()
    return [job.result for job in prepared if job.result is not None]


def _prepare_jobs(jobs: Sequence[tuple[bytes | Sequence[Insn], np.ndarray | bytes]],
                  cfg: Config, *, max_cycles: int | None, mem_latency: int,
                  mem_bandwidth: float | None, mem_stall: float, seed: int,
                  max_uops: int) -> list[Job]:
    """Check every job's program and DRAM and give it its memory image, model and cycle bound."""
    prepared: list[Job] = []
    for n, (program, dram) in enumerate(jobs):
        program = as_program_bytes(program, cfg)
        insns = check_program(program, cfg)
        dram = as_dram(dram)
        check_insns(insns, cfg, len(dram))  # the same bounds as every backend
        check_work(insns, max_uops, "rtl")
        image = place_program(dram, program)
        memory = AxiMemory(image.mem, bus_bytes=cfg.bus_bytes, latency=mem_latency,
                           bandwidth=mem_bandwidth, stall=mem_stall, seed=seed + n,
                           write_limit=image.user_bytes)
        bound = max_cycles if max_cycles is not None else default_max_cycles(
            insns, cfg, mem_latency=mem_latency,
            mem_bandwidth=mem_bandwidth, mem_stall=mem_stall)
        prepared.append(Job(program, insns, image, memory, bound))
    return prepared


async def _read_regs(ctx: Any, host: Any, names: Sequence[str]) -> dict[str, int]:
    return {n: await host.read(ctx, REGISTER_MAP[n]) for n in names}


async def _run_job(ctx: Any, host: Any, job: Job, *, poll_interval: int, idle_limit: int,
                   progress: float | None, default_bound: bool) -> dict[str, int]:
    """Program and launch ``job`` like a host driver, poll until it finishes (watching for the
    cycle bound and deadlocks), then read the counters (plus ``_launch_cycle``)."""
    reg = REGISTER_MAP
    memory = job.memory
    await host.write(ctx, reg["insn_addr"], job.image.insn_addr)
    await host.write(ctx, reg["insn_count"], job.image.insn_count)
    launch_cycle = memory.cycle
    await host.write(ctx, reg["control"], CONTROL_LAUNCH)
    last_progress = memory.cycle
    snapshot: dict[str, int] | None = None
    t0 = time.monotonic()
    next_line = t0 + (progress or 0.0)
    while True:
        for _ in range(poll_interval):  # (not ``repeat``: it cannot be closed mid-wait)
            await ctx.tick()
        raise_if_signalled()  # a Ctrl-C or SIGTERM whose exception a __del__ swallowed
        if await host.read(ctx, reg["control"]) & CONTROL_FINISHED:
            break
        now = memory.cycle
        if now - launch_cycle > job.max_cycles:
            raise cycle_limit_error(job.max_cycles, default_bound, "rtl")
        if progress is not None and time.monotonic() >= next_line:
            progress_line("rtl", now - launch_cycle, job.max_cycles,
                          await _read_regs(ctx, host, DONE_REGS), job.insns,
                          time.monotonic() - t0)
            next_line = time.monotonic() + progress
        last_progress = max(last_progress, memory.last_activity)
        if now - last_progress >= idle_limit // 2:
            current_regs = await _read_regs(ctx, host, PROGRESS_REGS)
            if current_regs != snapshot:
                snapshot = current_regs
                last_progress = now
            elif now - last_progress >= idle_limit:
                raise deadlock_error(await _read_regs(ctx, host, DEBUG_REGS), job.insns,
                                     now - last_progress)
    counters = await _read_regs(ctx, host, COUNTER_REGS)
    counters["_launch_cycle"] = launch_cycle
    return counters


def _result(job: Job, counters: dict[str, int], cfg: Config,
            samples: list[tuple[int, ...]] | None) -> RunResult:
    launch = counters.pop("_launch_cycle")
    events = None
    if samples is not None:
        shifted = [(c - launch, *rest) for c, *rest in samples if c >= launch]
        events = chrome_trace(spans_from_samples(shifted, job.insns), job.insns)
    m = job.memory
    axi = AxiCounts(read_bursts=m.stats.read_bursts, write_bursts=m.stats.write_bursts,
                    read_beats=m.stats.read_beats, write_beats=m.stats.write_beats)
    stats = run_stats(job.insns, cfg, counters, backend="rtl", axi=axi)
    return RunResult(dram=job.image.user_dram(), stats=stats, trace=events)


__all__ = ["run_program", "run_programs", "SimulationStallError", "DEFAULT_MEM_LATENCY",
           "DEFAULT_IDLE_LIMIT", "STALL_SECONDS"]
