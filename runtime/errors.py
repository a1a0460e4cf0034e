"""Errors of the runtime layer, all derived from :class:`vta.isa.errors.VTAError`."""

from __future__ import annotations

from vta.isa.errors import VTAError


class RuntimeVTAError(VTAError):
    """Base class of the runtime's errors."""


class DeviceError(RuntimeVTAError):
    """A device failed: it did not finish, or reported an error while running."""


class DeviceUnavailableError(DeviceError):
    """The device cannot be opened here (its module or external tool is missing)."""


class BusError(DeviceError):
    """The core got an AXI error response (SLVERR/DECERR) and stopped: an address it used is
    not mapped to memory on the board. The core must be reset (reload the bitstream)."""


class OutOfMemoryError(RuntimeVTAError):
    """The DRAM arena has no free block large enough for an allocation."""


class ArenaError(RuntimeVTAError):
    """A bad buffer operation: double free, copy of the wrong size, misaligned address."""


class QueueError(RuntimeVTAError):
    """A bad command-queue call: wrong sizes, scopes, buffer indices or token use."""


class KernelError(QueueError):
    """A malformed micro-kernel description (loops, modes, indices)."""


class HazardWarning(UserWarning):
    """Consecutive micro-ops write the same accumulator entry and could not be reordered."""


__all__ = ["RuntimeVTAError", "DeviceError", "DeviceUnavailableError", "BusError",
           "OutOfMemoryError",
           "ArenaError", "QueueError", "KernelError", "HazardWarning"]
