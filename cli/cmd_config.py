"""``vta config show``: print a configuration's parameters, derived sizes and ISA layout;
``vta config write``: write one as vta_config.json (``--bus-width`` sets its ``BUS_WIDTH``)."""

from __future__ import annotations

import argparse
import json

from vta.isa.config import BUS_WIDTHS
from vta.isa.fileio import write_atomic

from .common import add_config_args, check_outputs, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show a hardware configuration",
                       description="Inspect a VTA configuration (TVM's vta_config.json format).")
    csub = p.add_subparsers(dest="config_cmd", metavar="ACTION", required=True)
    show = csub.add_parser("show", help="parameters, derived sizes and instruction layouts",
                           description="Print a configuration's parameters and derived sizes.")
    add_config_args(show)
    show.add_argument("--json", action="store_true", help="machine-readable JSON")
    show.add_argument("--layout", action="store_true",
                      help="also print the bit layout of every instruction field")
    show.set_defaults(func=run_show)
    write = csub.add_parser("write", help="write a configuration as vta_config.json",
                            description="Write a preset or a config file in TVM's JSON format.")
    add_config_args(write)
    write.add_argument("--bus-width", type=int, choices=BUS_WIDTHS, default=None,
                       help="the core's AXI memory bus in bits (the file's BUS_WIDTH key; "
                            "default: the configuration's, 64 unless it says otherwise)")
    write.add_argument("-o", "--output", required=True, metavar="FILE")
    write.set_defaults(func=run_write)


def run_show(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    info = cfg.describe()
    if args.layout or args.json:
        info["layout"] = cfg.layouts.table()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print("parameters:")
    for k, v in info["params"].items():
        print(f"  {k:<18} {v}")
    d = info["derived"]
    print("derived:")
    print(f"  GEMM core          {d['batch']}x{d['block_in']}x{d['block_out']} "
          f"({d['macs_per_cycle']} MACs/cycle), int{d['inp_width']} x int{d['wgt_width']} "
          f"-> int{d['acc_width']}")
    for buf in ("uop", "inp", "wgt", "acc"):
        print(f"  {buf} buffer         {d[buf + '_depth']:>6} entries x "
              f"{d[buf + '_elem_bytes']:>4} B = {d[buf + '_depth'] * d[buf + '_elem_bytes']} B")
    print(f"  out element        {d['out_elem_bytes']} B")
    if args.layout:
        for name, flds in info["layout"].items():
            print(f"{name}:")
            for f in flds:
                sign = " signed" if f["signed"] else ""
                print(f"  [{f['msb']:>3}:{f['lsb']:>3}] {f['name']}{sign}")
    return 0


def run_write(args: argparse.Namespace) -> int:
    check_outputs({"configuration file": args.output}, inputs=(args.config,))
    cfg = config_from_args(args)
    if args.bus_width is not None:
        cfg = cfg.with_bus_width(args.bus_width)
    write_atomic(args.output, cfg.to_json(), "configuration file")
    return 0
