"""``vta verilog``: write the core's Verilog and a JSON description of its ports and registers.

``vta verilog [--config F | --preset P] [--name vta_core] -o DIR`` writes
``DIR/<name>.v`` and ``DIR/<name>.json`` (ports, register map, configuration); the core's
memory bus is the configuration's ``BUS_WIDTH`` (``vta config write --bus-width 128``).
``--board NAME`` instead writes a whole board project (core, top wrapper, project files) through
``vta.boards.project.write_project``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vta.isa import VTAError
from vta.isa.fileio import atomic_paths, output_dir

from .common import (
    BOARD_DEFAULT,
    add_config_args,
    add_core_options_arg,
    board_config_from_args,
    board_from_args,
    check_outputs,
    config_from_args,
    core_options_from_args,
)


class VerilogError(VTAError):
    """Verilog generation failed or was asked for something unsupported."""


#: The longest ``--name``: it names the files ``<name>.v`` and ``<name>.json``, which file
#: systems limit to 255 bytes.
MAX_NAME = 200


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verilog", help="generate the core's Verilog",
        description="Write the VTA core's Verilog (from the Amaranth description) and a JSON "
                    "description of its ports, host register map and configuration.")
    add_config_args(p, default=f"the PYNQ 1x16x16 config; with --board {BOARD_DEFAULT}")
    add_core_options_arg(p, board=False)
    p.add_argument("--name", default="vta_core", help="Verilog module name (default vta_core)")
    p.add_argument("--board", metavar="NAME",
                   help="write a complete board project instead (see `vta boards`)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="output directory (made, with missing parents, when it does not exist)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    out = Path(args.output)
    check_outputs({}, dirs={"output directory": args.output}, inputs=(args.config,))
    if not args.name.isidentifier():
        raise VerilogError(f"module name {args.name[:40]!r}{'...' if len(args.name) > 40 else ''}"
                           " is not a valid identifier; use letters, digits and underscores")
    if len(args.name) > MAX_NAME:  # it names the files <name>.v and <name>.json
        raise VerilogError(f"module name of {len(args.name)} characters is too long (at most "
                           f"{MAX_NAME})")
    if args.board:
        try:
            from vta.boards.project import write_project  # deferred: off vta --help
        except ImportError as e:
            raise VerilogError(f"board projects are unavailable ({e}); install the boards "
                               "package or drop --board") from None
        board = board_from_args(args)
        paths = write_project(board, board_config_from_args(args, board), out)
        for path in paths:
            print(path)
        return 0
    from vta.hw.verilog import describe_core, generate  # deferred: off vta --help

    options = core_options_from_args(args)
    text = generate(cfg, name=args.name, options=options)
    v_path, j_path = out / f"{args.name}.v", out / f"{args.name}.json"
    desc = describe_core(cfg, name=args.name, options=options)
    # both files or neither, and no empty directory left when they cannot be written
    with output_dir(out), atomic_paths() as stage:
        stage(v_path, "Verilog file").write_text(text)
        stage(j_path, "core description").write_text(json.dumps(desc, indent=2) + "\n")
    print(v_path)
    print(j_path)
    return 0
