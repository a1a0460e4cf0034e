"""The kit's error family.

Every bad input (a file, a field, a config, a program, a model) raises a subclass of
:class:`VTAError` whose message names the thing and how to fix it. The CLI prints the message
on one line and exits with status 2.
"""

from __future__ import annotations


class VTAError(Exception):
    """Base class of every error the kit reports to a user."""


class ConfigError(VTAError):
    """An invalid hardware configuration (a vta_config.json or a Config)."""


class EncodeError(VTAError):
    """An instruction or micro-op field value does not fit its bit field."""


class DecodeError(VTAError):
    """Bytes that are not a valid instruction stream."""


class AsmError(VTAError):
    """A syntax or semantic error in assembler text, with file, line and column."""

    def __init__(self, message: str, *, file: str = "<input>", line: int = 0, col: int = 0):
        self.file, self.line, self.col, self.reason = file, line, col, message
        super().__init__(f"{file}:{line}:{col}: {message}")


class ProgramError(VTAError):
    """A program that cannot run: out-of-bounds access, bad token use, missing FINISH."""


class DeadlockError(ProgramError):
    """Every module still has work but none can make progress."""


class RaceError(ProgramError):
    """Different legal interleavings of the modules give different results."""


class FileError(VTAError):
    """A file that cannot be read or written, or whose contents are not what was expected."""
