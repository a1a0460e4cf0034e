"""Helpers shared by subcommands: config selection and argument conventions."""

from __future__ import annotations

import argparse

from vta.isa import Config, preset_names


def add_config_args(p: argparse.ArgumentParser) -> None:
    """``--config FILE`` (TVM's vta_config.json) or ``--preset NAME``; default: the Pynq config."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--config", metavar="FILE", help="a vta_config.json (TVM's format)")
    g.add_argument("--preset", metavar="NAME",
                   help=f"a built-in configuration: {', '.join(preset_names())} "
                        "(default: default, the PYNQ 1x16x16 config)")


def config_from_args(args: argparse.Namespace) -> Config:
    if getattr(args, "config", None):
        return Config.from_json(args.config)
    if getattr(args, "preset", None):
        return Config.preset(args.preset)
    return Config()
