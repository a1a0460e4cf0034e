"""What a command queue and a recorded program need of a device: the :class:`Target` protocol.

:class:`vta.runtime.device.Device` satisfies it; the queue and the recorder are typed against it
so that they sit below the device module (which builds queues) instead of importing it back.
"""

from __future__ import annotations

from typing import Any, Protocol

from vta.isa import Config
from vta.isa.stats import RunStats

from .arena import Arena, DeviceBuffer
from .kernel import UopCache, UopKernel


class Target(Protocol):
    """A device as the command queue and :class:`RecordedProgram` see it."""

    cfg: Config
    arena: Arena
    uop_cache: UopCache
    kernels: dict[Any, UopKernel]
    #: Whether SRAM contents (micro-ops in particular) survive from one run to the next.
    keeps_sram: bool
    #: Programs run so far (a queue notices another program running between its own).
    runs: int

    def kernel_dram(self, kernel: UopKernel) -> DeviceBuffer: ...

    def run_queued(self, program: bytes, *, timeout: float | None = None,
                   keeps_kernels: bool = True) -> RunStats: ...

    def run_recorded(self, rec: Any, *, timeout: float | None = None) -> RunStats:
        """Run ``rec``, a :class:`~vta.runtime.record.RecordedProgram` (which calls this, so
        this module does not import it)."""
