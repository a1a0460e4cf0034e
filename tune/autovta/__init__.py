"""AutoVTA: search the accelerator's own parameters under an FPGA board's resource budget."""

from .resources import ResourceModel, buffer_brams
from .space import HardwareCandidate, hardware_space

__all__ = ["ResourceModel", "buffer_brams", "HardwareCandidate", "hardware_space"]
