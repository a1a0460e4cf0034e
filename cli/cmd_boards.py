"""``vta boards``: list the FPGA boards the kit targets and their resource budgets."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("boards", help="list the supported FPGA boards",
                       description="List the FPGA boards: device, the GEMM core of the "
                                   "board's default configuration, clock target, memory port "
                                   "width, register base, resource budget and flow.")
    p.add_argument("name", nargs="?", help="show only this board")
    p.add_argument("--json", action="store_true", help="machine-readable JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vta.boards import all_boards, get_board  # deferred: off vta --help

    boards = [get_board(args.name)] if args.name else all_boards()
    if args.json:
        print(json.dumps([b.describe() for b in boards], indent=2))
        return 0
    head = ("board", "part", "core", "MHz", "bus", "reg base", "LUT", "FF", "BRAM", "DSP", "flow")
    rows = []
    for b in boards:
        u = b.fam.units
        bud = b.budget
        cfg = b.default_config
        core = f"{cfg.batch}x{cfg.block_in}x{cfg.block_out}"
        rows.append((b.name, b.part, core, f"{b.clock_mhz:g}", str(b.bus_width),
                     f"0x{b.reg_base:08X}",
                     f"{int(bud.lut)} {u['lut']}", f"{int(bud.ff)}",
                     f"{int(bud.bram)} {u['bram']}", f"{int(bud.dsp)} {u['dsp']}", b.flow))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if args.name:
        b = boards[0]
        cfg = b.default_config
        print(f"\n{b.title}: {b.notes}")
        print(f"default config: {cfg.batch}x{cfg.block_in}x{cfg.block_out} GEMM, "
              + ", ".join(f"{k}={v}" for k, v in cfg.params.items()))
        if b.fam.estimate_note:
            print(f"synthesis: {b.fam.estimate_note}")
    return 0
