"""A command queue's counters, and the counts a recorded program carries.

:class:`QueueStats` is the host side of a queue's work (instructions generated, programs run,
micro-kernel cache hits and misses, hazard notes); the device's statistics of each run are a
:class:`~vta.isa.stats.RunStats`. :class:`RecordStats` is what a
:class:`~vta.runtime.record.RecordedProgram` records of its queue (its file header's
``stats``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vta.isa.errors import FileError
from vta.isa.records import JsonRecord


@dataclass
class QueueStats:
    """Running counters of a :class:`~vta.runtime.queue.CommandQueue` (they only grow)."""

    insns: int = 0           #: instructions of every program run or recorded
    noops: int = 0           #: no-ops emitted to move dependency tokens
    programs: int = 0        #: programs run or recorded
    auto_flushes: int = 0    #: programs cut because max_insns was reached
    uop_loads: int = 0       #: LOAD UOP instructions generated
    uop_hits: int = 0        #: kernels found resident in the micro-op buffer
    uop_misses: int = 0      #: kernels that had to be loaded
    uop_evictions: int = 0   #: kernels evicted to make room
    gemm: int = 0            #: GEMM instructions generated
    alu: int = 0             #: ALU instructions generated
    loads: int = 0           #: LOAD instructions generated
    stores: int = 0          #: STORE instructions generated
    hazards: list[str] = field(default_factory=list)  #: micro-op hazard notes
    device_seconds: float = 0.0  #: wall time spent in the device's runs


@dataclass(frozen=True)
class RecordStats(JsonRecord):
    """What a recorded program says of itself and of its queue when it was recorded."""

    error = FileError
    what = "recorded program header"

    insns: int       #: instructions of the program
    uop_words: int   #: micro-op words of its own segment
    gemm: int        #: GEMM, ALU, LOAD and STORE instructions the queue had generated
    alu: int
    loads: int
    stores: int


__all__ = ["QueueStats", "RecordStats"]
