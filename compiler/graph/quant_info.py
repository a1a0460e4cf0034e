"""The per-layer quantization records: what the quantizer decided for each layer (the
manifest and the compile report read them) and the quantized graph with its scales."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .ir import Graph


# ---------------------------------------------------------------- calibration
@dataclass
class QuantInfo:
    """Per-layer quantization record (manifest and report)."""

    node: str
    op: str
    in_scale: float | None = None
    w_scale: float | list[float] | None = None
    out_scale: float | None = None
    shift: int | list[int] | None = None
    mul: int | list[int] | None = None
    shift2: int | None = None
    rel_error: float | None = None
    float_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class QuantResult:
    graph: Graph
    scales: dict[str, float]
    layers: list[QuantInfo] = field(default_factory=list)
    #: int8 tensors stored with an offset (``x = scale * (q + offset)``)
    offsets: dict[str, int] = field(default_factory=dict)
    #: every tensor of the float graph's run on the first calibration sample (calibration
    #: ran it; :func:`layer_errors` compares with it)
    float_env: dict[str, np.ndarray] | None = None
