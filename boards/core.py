"""The VTA core's Verilog for a board: what the project emitter, the open flow and the
synthesis report all start from."""

from __future__ import annotations

from vta.isa import Config

from .registry import Board


def generate_core(cfg: Config, board: Board) -> str:
    """The VTA core's Verilog (module ``vta_core``) for ``board`` (its bus width and hardware
    options) from :mod:`vta.hw.verilog`."""
    from vta.hw.verilog import generate  # deferred: amaranth, not needed to list boards

    return generate(cfg, bus_width=board.bus_width, name="vta_core", options=board.core_options)
