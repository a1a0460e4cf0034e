"""Errors of the compiler layer, all derived from :class:`vta.isa.errors.VTAError`."""

from __future__ import annotations

from vta.isa.errors import VTAError


class CompilerError(VTAError):
    """Base class of the compiler's errors."""


class ScheduleError(CompilerError):
    """An invalid schedule primitive (unknown axis, wrong stage, bad factor)."""


class LoweringError(CompilerError):
    """A schedule, expression or layer that cannot be lowered: to the loop IR, or onto this
    VTA configuration (a graph layer then runs on the CPU)."""


class TensorizeError(CompilerError):
    """The computation under a tensorize point is not the intrinsic's computation."""


class DmaError(CompilerError):
    """A copy that cannot be expressed as VTA LOAD/STORE instructions."""


class AluError(CompilerError):
    """Element-wise work that cannot be expressed as VTA ALU instructions."""


class ScratchpadOverflowError(CompilerError):
    """A schedule needs more on-chip buffer entries than the configuration has."""


class VerifyError(CompilerError):
    """The loop IR is malformed (a pass bug or a hand-written IR error)."""


class CodegenError(CompilerError):
    """Code generation failed (unsupported node, target not available)."""


__all__ = ["CompilerError", "ScheduleError", "LoweringError", "TensorizeError", "DmaError",
           "AluError", "ScratchpadOverflowError", "VerifyError", "CodegenError"]


class InputError(VTAError):
    """An input tensor with the wrong shape, dtype or file (a graph's feeds, a Gather's
    indices)."""
