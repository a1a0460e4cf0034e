"""The VTA core's Verilog for a board: what the project emitter, the open flow and the
synthesis report all start from."""

from __future__ import annotations

from vta.isa import Config

from .registry import Board


def generate_core(cfg: Config, board: Board) -> str:
    """The VTA core's Verilog (module ``vta_core``) for ``board`` (its hardware options and its
    family's primitives; the configuration's bus must be the board's memory port) from
    :mod:`vta.hw.verilog`."""
    from vta.hw.verilog import generate  # deferred: amaranth, not needed to list boards

    board.check_bus(cfg)
    return generate(cfg, name="vta_core", options=board.core_options,
                    family=board.family)
