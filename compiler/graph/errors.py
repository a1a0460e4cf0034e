"""Errors of the graph level: bad models, unsupported operators, bad inputs, bad modules."""

from __future__ import annotations

from vta.isa.errors import VTAError


class ModelError(VTAError):
    """A model file that cannot be read or is not a valid network."""


class UnsupportedOpError(ModelError):
    """An operator (or an attribute value of one) the graph compiler does not implement."""


class InputError(VTAError):
    """An input tensor with the wrong shape, dtype or file."""


class ModuleError(VTAError):
    """A compiled module directory that is missing, incomplete or from another version."""


class QuantizationError(ModelError):
    """A layer whose int8 requantization cannot be expressed (it then stays float)."""
