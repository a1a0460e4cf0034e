"""Devices: one API over the functional simulator, the RTL simulators, the performance model and
a PYNQ board.

Every device owns a DRAM :class:`~vta.runtime.arena.Arena`, the micro-op cache (which kernels are
resident in its micro-op buffer) and the JIT kernel table, and runs instruction streams against
its arena memory. Devices that do not keep their SRAM between runs (``keeps_sram = False``: rtl,
tsim) have their micro-op cache invalidated after every run.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import numpy as np
from vta.hw.harness import check_vcd_path
from vta.hw.verilator import ToolMissingError, find_verilator
from vta.isa import Config, MemType, decode_program
from vta.isa.checks import check_insns
from vta.isa.image import as_program_bytes, check_program
from vta.isa.stats import RunStats, program_stats

from . import backends
from .arena import Arena, DeviceBuffer
from .errors import DeviceError, DeviceUnavailableError
from .kernel import UopCache, UopKernel
from .queue import CommandQueue


class Device:
    """Base class: arena, micro-op cache, kernel table; subclasses implement :meth:`_execute`."""

    target = "?"
    #: Whether SRAM contents (micro-ops in particular) survive from one run to the next.
    keeps_sram = True
    #: Whether runs compute data (the performance model only estimates time).
    computes_results = True
    #: Whether the backend itself runs :func:`vta.isa.checks.check_insns` over its whole DRAM
    #: image (the simulators do); a board does not, so :meth:`run_queued` checks for it.
    backend_checks = False

    def __init__(self, cfg: Config, *, arena_size: int, arena_base: int = 0,
                 memory: np.ndarray | None = None) -> None:
        self.cfg = cfg
        self.arena = Arena(cfg, arena_size, base=arena_base, memory=memory,
                           on_free=self._on_free)
        self.uop_cache = UopCache(cfg.uop_depth)
        self.kernels: dict[Any, UopKernel] = {}
        self._uop_dram: dict[bytes, DeviceBuffer] = {}
        self.runs = 0
        #: The statistics of the last run (None before the first).
        self.last_stats: RunStats | None = None
        self._closed = False

    # ----------------------------------------------------------------- memory
    def alloc(self, nbytes: int, *, mem_type: MemType | int | str | None = None,
              align: int | None = None) -> DeviceBuffer:
        """Allocate device memory (see :meth:`Arena.alloc`)."""
        return self.arena.alloc(nbytes, mem_type=mem_type, align=align)

    def array(self, data: np.ndarray, *, mem_type: MemType | int | str | None = None,
              align: int | None = None) -> DeviceBuffer:
        """Allocate a buffer holding a copy of ``data`` (host -> device)."""
        data = np.ascontiguousarray(data)
        buf = self.alloc(max(data.nbytes, 1), mem_type=mem_type, align=align)
        buf.copyfrom(data)
        return buf

    def kernel_dram(self, kernel: UopKernel) -> DeviceBuffer:
        """The DRAM copy of a kernel's micro-op words (allocated once per distinct kernel)."""
        buf = self._uop_dram.get(kernel.key)
        if buf is None:
            buf = self.alloc(len(kernel.key), mem_type=MemType.UOP)
            buf.copyfrom(kernel.words)
            self._uop_dram[kernel.key] = buf
        return buf

    def _on_free(self, buf: DeviceBuffer) -> None:
        for key, b in list(self._uop_dram.items()):
            if b is buf:
                del self._uop_dram[key]

    # ----------------------------------------------------------------- running
    def command_queue(self, **opts: Any) -> CommandQueue:
        """A command queue on this device (options: see :class:`CommandQueue`)."""
        return CommandQueue(self, **opts)

    def run(self, program: bytes | list, *, timeout: float | None = None) -> RunStats:
        """Run an instruction stream (ending with FINISH) against the arena memory; returns the
        device's statistics. The program may overwrite the micro-op buffer, so the micro-op cache
        is invalidated. ``timeout`` bounds the wait on a board (simulators have watchdogs)."""
        program = as_program_bytes(program, self.cfg)
        if not self.backend_checks:  # a simulator checks the program itself
            check_program(program, self.cfg)
        return self.run_queued(program, timeout=timeout, keeps_kernels=False)

    def run_queued(self, program: bytes, *, timeout: float | None = None,
                   keeps_kernels: bool = True) -> RunStats:
        """Run a program (every program reaches the device here); the micro-op cache stays
        valid when ``keeps_kernels`` and the device keeps its SRAM. The program gets the
        static checks every backend runs (:func:`vta.isa.checks.check_insns`, a
        :class:`ProgramError` as on fsim) against the arena's DRAM range."""
        if self._closed:
            raise DeviceError(f"the {self.target} device is closed")
        if not self.backend_checks:  # before the board sees it: bounds are the arena's
            check_insns(decode_program(program, self.cfg), self.cfg,
                        self.arena.base + self.arena.size, self.arena.base)
        t0 = time.perf_counter()
        try:
            stats = self._execute(program, timeout)
        finally:
            if not keeps_kernels or not self.keeps_sram:
                self.uop_cache.invalidate()
        if stats.seconds is None:
            stats = stats.replace(seconds=time.perf_counter() - t0)
        self.runs += 1
        self.last_stats = stats
        return stats

    def run_recorded(self, rec, *, timeout: float | None = None) -> RunStats:
        """Relocate a :class:`RecordedProgram` against this arena and run it."""
        if rec.cfg != self.cfg:
            raise DeviceError("the recorded program was made for another configuration")
        ubuf = self.alloc(len(rec.uops), mem_type=MemType.UOP) if rec.uops else None
        try:
            if ubuf is not None:
                ubuf.copyfrom(np.frombuffer(rec.uops, dtype=np.uint8))
            program = rec.relocate(self.arena.base, ubuf.addr if ubuf is not None else None)
            return self.run(program, timeout=timeout)  # invalidates the micro-op cache
        finally:
            if ubuf is not None:
                ubuf.free()

    def _execute(self, program: bytes, timeout: float | None) -> RunStats:
        raise NotImplementedError

    def _board_stats(self, program: bytes, cycles: int) -> RunStats:
        """A board's statistics: the program's counts and the cycles its core counted."""
        return program_stats(decode_program(program, self.cfg), self.cfg, backend=self.target,
                             cycles=cycles)

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.target} {self.arena!r}>"


class _SimDevice(Device):
    """A simulator device: the DRAM image is host memory; the arena sits at ``arena_base``."""

    backend_checks = True  # fsim, rtl, tsim, perf check against the whole image

    def __init__(self, cfg: Config, *, arena_size: int, arena_base: int = 0) -> None:
        if arena_base < 0 or arena_base % 4096:
            raise DeviceError(f"arena_base 0x{arena_base:x} must be a multiple of 4096")
        self.dram = np.zeros(arena_base + arena_size, dtype=np.uint8)
        super().__init__(cfg, arena_size=arena_size, arena_base=arena_base,
                         memory=self.dram[arena_base:])


class FsimDevice(_SimDevice):
    """The functional simulator (vta.sim.fsim); its SRAM state persists across runs."""

    target = "fsim"
    keeps_sram = True

    def __init__(self, cfg: Config, *, arena_size: int, arena_base: int = 0,
                 **opts: Any) -> None:
        fsim = _import("vta.sim.fsim", "fsim")
        super().__init__(cfg, arena_size=arena_size, arena_base=arena_base)
        try:
            self.sim = fsim.FunctionalSim(cfg, **opts)
        except (TypeError, ValueError) as e:
            raise DeviceError(f"bad option for the fsim device: {e}") from None

    def _execute(self, program: bytes, timeout: float | None) -> RunStats:
        return self.sim.run(program, self.dram)


class _RunProgramDevice(_SimDevice):
    """A backend with the ``run_program(program, dram, cfg, **opts) -> RunResult`` contract."""

    def __init__(self, cfg: Config, *, arena_size: int, arena_base: int = 0,
                 **opts: Any) -> None:
        self._mod = _import(self.module(), self.target)
        if opts.get("vcd") is not None:  # a waveform file: fail at open, not after a run

            check_vcd_path(opts["vcd"])
        super().__init__(cfg, arena_size=arena_size, arena_base=arena_base)
        self.opts = opts

    def _execute(self, program: bytes, timeout: float | None) -> RunStats:
        opts = dict(self.opts)
        result = self._mod.run_program(program, self.dram, self.cfg, **opts)
        out = np.asarray(result.dram, dtype=np.uint8).reshape(-1)
        if self.computes_results:
            if out.size != self.dram.size:
                raise DeviceError(f"the {self.target} backend returned {out.size} B of DRAM for "
                                  f"a {self.dram.size} B image")
            self.dram[:] = out
        return result.stats

    @classmethod
    def module(cls) -> str:
        """The module of the backend's ``run_program`` (from the backend registry)."""
        return backends.REGISTRY[cls.target].program[0]


class RtlDevice(_RunProgramDevice):
    """The Amaranth RTL simulation of the core (vta.hw.simulate); slow, use small programs."""

    target = "rtl"
    keeps_sram = False


class TsimDevice(_RunProgramDevice):
    """The Verilator build of the core (vta.hw.tsim)."""

    target = "tsim"
    keeps_sram = False

    def __init__(self, cfg: Config, **kw: Any) -> None:
        try:
            find_verilator()
        except ToolMissingError as e:
            raise DeviceUnavailableError(f"the tsim device needs verilator: {e}") from None
        super().__init__(cfg, **kw)


class PerfDevice(_RunProgramDevice):
    """The performance model (vta.sim.perf): statistics and cycle estimates, no data."""

    target = "perf"
    keeps_sram = True
    computes_results = False


def _import(module: str, target: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise DeviceUnavailableError(
            f"the {target} device is not available: cannot import {module} ({e}); "
            f"use another target (fsim is always built in)") from None


__all__ = ["Device", "FsimDevice", "RtlDevice", "TsimDevice", "PerfDevice"]
