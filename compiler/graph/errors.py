"""Errors of the graph level: bad models, unsupported operators, bad inputs, bad modules."""

from __future__ import annotations

from vta.isa.errors import VTAError

from ..errors import InputError  # noqa: F401 - the graph level's errors, one import


class ModelError(VTAError):
    """A model file that cannot be read or is not a valid network."""


class UnsupportedOpError(ModelError):
    """An operator (or an attribute value of one) the graph compiler does not implement."""


class ModuleError(VTAError):
    """A compiled module directory that is missing, incomplete or from another version."""


class QuantizationError(ModelError):
    """A layer whose int8 requantization cannot be expressed (it then stays float)."""
