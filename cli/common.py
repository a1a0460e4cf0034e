"""Helpers shared by subcommands: config selection and argument conventions."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from vta.isa import Config, preset_names


def add_config_args(p: argparse.ArgumentParser, *,
                    default: str = "default, the PYNQ 1x16x16 config") -> None:
    """``--config FILE`` (TVM's vta_config.json) or ``--preset NAME``; ``default`` says what
    the command uses without either (the Pynq config unless the command says otherwise)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--config", metavar="FILE", help="a vta_config.json (TVM's format)")
    g.add_argument("--preset", metavar="NAME",
                   help=f"a built-in configuration: {', '.join(preset_names())} "
                        f"(default: {default})")


#: What the board commands use without --config/--preset.
BOARD_DEFAULT = "the board's own configuration, see `vta boards`"


def config_from_args(args: argparse.Namespace) -> Config:
    if getattr(args, "config", None):
        return Config.from_json(args.config)
    if getattr(args, "preset", None):
        return Config.preset(args.preset)
    return Config()


def add_core_options_arg(p: argparse.ArgumentParser, *, board: bool = True) -> None:
    """``--core-options NAMES``: the hardware variants (vta.hw.options.CoreOptions)."""
    instead = " instead of the board's" if board else ""
    p.add_argument("--core-options", metavar="NAMES",
                   help=f"comma-separated hardware variants to build{instead}: "
                        "replicate_control, replicate_operands ('' for none; same results, "
                        "see hw/README.md)")


def core_options_from_args(args: argparse.Namespace) -> dict[str, bool] | None:
    """The ``--core-options`` given (validated), or None when the option was not given."""
    names = getattr(args, "core_options", None)
    if names is None:
        return None
    from vta.hw.options import CoreOptions

    return CoreOptions.from_names(names).as_dict()


def board_from_args(args: argparse.Namespace) -> Any:
    """``--board`` as a :class:`vta.boards.Board`, with ``--core-options`` applied."""
    from vta.boards import get_board

    board = get_board(args.board)
    options = core_options_from_args(args)
    return board if options is None else dataclasses.replace(board, core_options=options)
