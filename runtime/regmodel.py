"""A register-level model of a PYNQ board, for testing the board driver without a board.

:class:`SimulatedBoard` stands in for :class:`vta.runtime.pynq.PynqPlatform`:

* physical memory is one numpy array; ``allocate`` hands out page-aligned contiguous buffers whose
  host view is a SEPARATE copy (a non-coherent cache): data reaches the device only through
  ``flush()`` and comes back only through ``invalidate()``, so a driver that forgets either gets
  wrong results;
* ``mmio`` is a :class:`RegisterModel` of the host registers (:data:`vta.hw.regs.REGISTER_MAP`):
  it logs every access, rejects writes to read-only registers and launches while running, runs the
  program fetched from physical memory on a simulator backend at launch, and reports "finished"
  (and makes the results visible in memory) only after ``busy_polls`` reads of the control
  register.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from vta.hw.regs import CONTROL_FINISHED, CONTROL_LAUNCH, CORE_ID, REGISTER_MAP, REGISTERS
from vta.isa import Config
from vta.isa.stats import RunStats
from vta.sim.fsim import FunctionalSim

from .errors import DeviceError
from .pynq import hw_config_word

PAGE = 4096


class RegisterModel:
    """The host registers of one VTA core, backed by a simulator."""

    def __init__(self, board: SimulatedBoard, *, busy_polls: int = 3) -> None:
        self.board = board
        self.busy_polls = busy_polls
        self.log: list[tuple[str, int, int]] = []  # ("r"|"w", offset, value)
        self.values = {r.offset: 0 for r in REGISTERS}
        self.values[REGISTER_MAP["id"]] = CORE_ID
        self.values[REGISTER_MAP["hw_config"]] = hw_config_word(board.cfg)
        self._access = {r.offset: r.access for r in REGISTERS}
        self._polls_left = 0
        self._pending: np.ndarray | None = None
        self.launches = 0

    def read(self, offset: int) -> int:
        if offset not in self._access:
            raise DeviceError(f"read of unmapped register 0x{offset:02X}")
        if offset == REGISTER_MAP["control"] and self._pending is not None:
            self._polls_left -= 1
            if self._polls_left <= 0:
                self._complete()
        value = self.values[offset]
        self.log.append(("r", offset, value))
        return value

    def write(self, offset: int, value: int) -> None:
        if offset not in self._access:
            raise DeviceError(f"write to unmapped register 0x{offset:02X}")
        if not 0 <= value < 1 << 32:
            raise DeviceError(f"register value {value} does not fit 32 bits")
        if self._access[offset] == "ro":
            raise DeviceError(f"write to read-only register 0x{offset:02X}")
        self.log.append(("w", offset, value))
        if offset == REGISTER_MAP["control"]:
            if value & CONTROL_LAUNCH:
                self._launch()
            return
        if self._pending is not None:
            raise DeviceError(f"register 0x{offset:02X} written while the core is running")
        self.values[offset] = value

    def _launch(self) -> None:
        if self._pending is not None:
            raise DeviceError("launch while the core is running")
        addr = self.values[REGISTER_MAP["insn_addr"]]
        count = self.values[REGISTER_MAP["insn_count"]]
        if addr % 16:
            raise DeviceError(f"insn_addr 0x{addr:x} is not 16-byte aligned")
        if count == 0:
            raise DeviceError("launch with insn_count = 0")
        mem = self.board.memory
        if addr + 16 * count > mem.size:
            raise DeviceError(f"instruction stream [0x{addr:x}, +{16 * count}) is outside memory")
        program = mem[addr:addr + 16 * count].tobytes()
        dram = mem.copy()  # the device works on memory; results appear when finished
        stats = self.board.execute(program, dram)
        self._pending = dram
        self._polls_left = self.busy_polls
        self.values[REGISTER_MAP["control"]] = CONTROL_LAUNCH  # running
        self.values[REGISTER_MAP["cycles"]] = (stats.cycles or 0) & 0xFFFFFFFF
        self.launches += 1

    def _complete(self) -> None:
        assert self._pending is not None
        self.board.memory[:] = self._pending
        self._pending = None
        self.values[REGISTER_MAP["control"]] = CONTROL_FINISHED


class _Buffer:
    """Contiguous memory with a separate (non-coherent) host view."""

    def __init__(self, board: SimulatedBoard, addr: int, nbytes: int) -> None:
        self.board = board
        self.physical_address = addr
        self.nbytes = nbytes
        self.array = np.zeros(nbytes, dtype=np.uint8)
        self.flushes = 0
        self.invalidates = 0
        self.freed = False

    def flush(self) -> None:
        self.board.memory[self.physical_address:self.physical_address + self.nbytes] = self.array
        self.flushes += 1

    def invalidate(self) -> None:
        self.array[:] = self.board.memory[self.physical_address:
                                          self.physical_address + self.nbytes]
        self.invalidates += 1

    def free(self) -> None:
        self.freed = True


class SimulatedBoard:
    """A fake PYNQ platform: physical memory, contiguous allocation, registers on a simulator.

    ``backend`` is "fsim" (keeps SRAM between launches, like the board) or "rtl" (the Amaranth
    simulation, which starts from empty SRAM at each launch).
    """

    def __init__(self, cfg: Config, *, mem_size: int = 80 << 20, backend: str = "fsim",
                 busy_polls: int = 3, **backend_opts: Any) -> None:
        self.cfg = cfg
        self.memory = np.zeros(mem_size, dtype=np.uint8)
        self._next = PAGE  # physical address 0 is never handed out
        self.buffers: list[_Buffer] = []
        self.backend = backend
        if backend == "fsim":
            self._sim = FunctionalSim(cfg, **backend_opts)
            self.keeps_sram = True
        elif backend == "rtl":
            from vta.hw.simulate import run_program  # deferred: amaranth

            self._run_program = run_program
            self._opts = backend_opts
            self.keeps_sram = False
        else:
            raise DeviceError(f"unknown board-model backend {backend!r}; use 'fsim' or 'rtl'")
        self.mmio = RegisterModel(self, busy_polls=busy_polls)

    def allocate(self, nbytes: int) -> _Buffer:
        addr = self._next
        size = -(-nbytes // PAGE) * PAGE
        if addr + size > self.memory.size:
            raise DeviceError(f"the simulated board is out of contiguous memory ({nbytes} B "
                              f"asked, {self.memory.size - addr} B left)")
        self._next += size
        buf = _Buffer(self, addr, nbytes)
        self.buffers.append(buf)
        return buf

    def execute(self, program: bytes, dram: np.ndarray) -> RunStats:
        if self.backend == "fsim":
            return self._sim.run(program, dram)
        result = self._run_program(program, dram, self.cfg, **self._opts)
        dram[:] = np.asarray(result.dram, dtype=np.uint8)
        return result.stats


__all__ = ["SimulatedBoard", "RegisterModel"]
