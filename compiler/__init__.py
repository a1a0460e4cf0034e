"""vta.compiler: tensor expressions, schedules, loop IR, passes and code generation.

>>> from vta.compiler import te, build, Env
>>> from vta.isa import Config
>>> env = Env(Config())

Layers: ``te`` (tensor expressions, TVM spelling) -> ``schedule`` (split, tile, reorder, fuse,
compute_at, cache_read/write, pragma, tensorize, bind to cthread; recorded as a replayable trace)
-> ``lower`` (loop IR with bounds inference, ``tir``) -> ``passes`` (DMA/ALU injection, micro-op
folding, virtual threads, scratchpad allocation, token synchronisation) -> ``codegen`` (VTA via
vta.runtime's CommandQueue, CPU via LLVM). Operators live in ``topi``.
"""

from . import te
from .build import TARGETS, VtaModule, build, lower_vta, vta_pipeline
from .env import Env, gemm_intrin
from .errors import (
    AluError,
    CodegenError,
    CompilerError,
    DmaError,
    LoweringError,
    ScheduleError,
    ScratchpadOverflowError,
    TensorizeError,
    VerifyError,
)
from .lower import lower
from .schedule import Schedule, Stage, create_schedule, replay

__all__ = [
    "te", "build", "lower", "lower_vta", "vta_pipeline", "VtaModule", "TARGETS", "Env",
    "gemm_intrin", "Schedule", "Stage", "create_schedule", "replay", "CompilerError",
    "ScheduleError", "LoweringError", "TensorizeError", "DmaError", "AluError",
    "ScratchpadOverflowError", "VerifyError", "CodegenError",
]
