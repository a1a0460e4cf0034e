"""The hardware design space: GEMM shape, buffer sizes and bus width; valid combinations only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vta.isa import Config
from vta.isa.errors import ConfigError

from ..space import ConfigSpace

#: Default ranges of the hardware knobs (log2 values, as in vta_config.json).
DEFAULT_RANGES: dict[str, Sequence[int]] = {
    "LOG_BATCH": (0, 1, 2),
    "LOG_BLOCK": (3, 4, 5),
    "LOG_UOP_BUFF_SIZE": (13, 14, 15, 16),
    "LOG_INP_BUFF_SIZE": (14, 15, 16, 17),
    "LOG_WGT_BUFF_SIZE": (16, 17, 18, 19),
    "LOG_ACC_BUFF_SIZE": (16, 17, 18, 19),
    "bus_width": (64, 128),
}


@dataclass(frozen=True)
class HardwareCandidate:
    """One point of the hardware space: a configuration (its bus width included)."""

    cfg: Config

    @property
    def bus_width(self) -> int:
        return self.cfg.bus_width

    @property
    def key(self) -> str:
        p = self.cfg.params
        return (f"{self.cfg.batch}x{self.cfg.block_in}x{self.cfg.block_out} "
                f"uop{p['LOG_UOP_BUFF_SIZE']} inp{p['LOG_INP_BUFF_SIZE']} "
                f"wgt{p['LOG_WGT_BUFF_SIZE']} acc{p['LOG_ACC_BUFF_SIZE']} bus{self.bus_width}")


def candidate_from_values(values: dict[str, int], base: Config) -> HardwareCandidate:
    """The candidate of knob ``values``; the parameters they do not set (the data widths) are
    ``base``'s."""
    params = {k: v for k, v in values.items() if k != "bus_width"}
    bus = values.get("bus_width", base.bus_width)
    return HardwareCandidate(base.replace(**params, BUS_WIDTH=bus))


def _valid(values: dict[str, int], base: Config) -> bool:
    try:
        candidate_from_values(values, base)
    except ConfigError:
        return False
    return True


def hardware_space(ranges: dict[str, Sequence[int]] | None = None, *,
                   base: Config) -> ConfigSpace:
    """A :class:`ConfigSpace` over the hardware knobs (``base`` gives the parameters they do
    not set); invalid Configs are filtered out."""
    space = ConfigSpace()
    for name, cands in (ranges or DEFAULT_RANGES).items():
        space.define_knob(name, list(cands))
    cache: dict[tuple, bool] = {}

    def valid(e) -> bool:
        key = tuple(sorted(e.values.items()))
        if key not in cache:
            cache[key] = _valid(dict(e.values), base)
        return cache[key]

    space.add_constraint(valid)
    return space
