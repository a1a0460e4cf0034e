"""vta.runtime: devices, the DRAM arena, the command queue and the micro-kernel JIT.

The layer the compiler drives and a user can script by hand, after TVM VTA's C runtime
(``VTALoadBuffer2D``, ``VTAStoreBuffer2D``, ``VTAUopLoopBegin/End``, ``VTAUopPush``,
``VTAPushGEMMOp``, ``VTAPushALUOp``, ``VTADepPush/Pop``, ``VTASynchronize``) with one API over every
device. See runtime/API.md for a walk-through.

>>> import numpy as np, vta.runtime as rt
>>> dev = rt.open("fsim")                                   # doctest: +SKIP
>>> cq = dev.command_queue()                                # doctest: +SKIP
"""

from .arena import Arena, DeviceBuffer, as_mem_type
from .device import Device, FsimDevice, PerfDevice, RtlDevice, TsimDevice
from .errors import (
    ArenaError,
    BusError,
    DeviceError,
    DeviceUnavailableError,
    HazardWarning,
    KernelError,
    OutOfMemoryError,
    QueueError,
    RuntimeVTAError,
)
from .kernel import ALU, GEMM, Loop, UopCache, UopKernel
from .opener import TARGETS, open
from .queue import COMPUTE_STAGE, LOAD_STAGE, STAGES, STORE_STAGE, CommandQueue, as_stage
from .record import RecordedProgram, Relocation

__all__ = [
    "open", "TARGETS", "Device", "FsimDevice", "RtlDevice", "TsimDevice", "PerfDevice",
    "Arena", "DeviceBuffer", "as_mem_type",
    "CommandQueue", "as_stage", "STAGES", "LOAD_STAGE", "COMPUTE_STAGE", "STORE_STAGE",
    "UopKernel", "UopCache", "Loop", "GEMM", "ALU",
    "RecordedProgram", "Relocation",
    "RuntimeVTAError", "DeviceError", "BusError", "DeviceUnavailableError", "OutOfMemoryError",
    "ArenaError", "QueueError", "KernelError", "HazardWarning",
]
