"""Resource use and clock speed of the VTA core on the boards, with the open tools.

1. The default (PYNQ, 1x16x16) config synthesized for the PYNQ-Z1 (yosys synth_xilinx): the
   LUT/FF/BRAM/DSP table against the XC7Z020's budget. Goal: fits, LUTs <= 70 %.
   Reference measured in the same run: the small (1x4x4) config on the same board, so the
   ratios show how the core scales (time and LUTs, default / small).
2. The ULX3S-85F's default config (1x8x8) through the whole open flow (yosys, nextpnr-ecp5,
   ecppack): the achieved Fmax against the 100 MHz target (goal: >= 100 MHz).
3. The synthesis, place-and-route and total times of each step.

    .venv/bin/python bench/bench_boards_synth.py [--only pynq|ecp5] [--json OUT]

This takes tens of minutes on one core; the two parts can run as two processes
(``--only pynq`` and ``--only ecp5``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def _progress(quiet: bool):
    def show(line: str) -> None:
        if not quiet:
            print("   ", line, file=sys.stderr, flush=True)
    return show


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("pynq", "ecp5"),
                    help="run only the PYNQ-Z1 synthesis or only the ULX3S open flow")
    ap.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    args = ap.parse_args()

    figures: dict = {}
    if args.only != "ecp5":
        figures.update(_pynq(args))
    if args.only != "pynq":
        figures.update(_ecp5(args))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def _pynq(args: argparse.Namespace) -> dict:
    from vta.boards import get_board
    from vta.boards.synth import synth_core
    from vta.isa import Config

    figures: dict = {}
    pynq = get_board("pynq-z1")
    print("== small config (1x4x4) on PYNQ-Z1: the in-run reference")
    t = time.monotonic()
    small = synth_core(pynq, Config.preset("small"), progress=_progress(args.quiet))
    small_s = time.monotonic() - t
    print(small.table())
    figures["pynq_small"] = {**small.to_dict(), "wall_s": round(small_s, 1)}

    print("\n== default config (1x16x16) on PYNQ-Z1")
    t = time.monotonic()
    big = synth_core(pynq, Config(), progress=_progress(args.quiet))
    big_s = time.monotonic() - t
    print(big.table())
    lut_pct = big.percent("lut")
    print(f"goal: fits and LUTs <= 70 %: fits={big.fits}, LUTs {lut_pct:.1f} % -> "
          f"{'MET' if big.fits and lut_pct <= 70 else 'NOT MET'}")
    print(f"default / small: synthesis time {big_s / small_s:.1f}x ({big_s:.0f} s / "
          f"{small_s:.0f} s), LUTs {big.used.lut / max(small.used.lut, 1):.1f}x, "
          f"MACs/cycle {Config().macs_per_cycle // Config.preset('small').macs_per_cycle}x")
    figures["pynq_default"] = {**big.to_dict(), "wall_s": round(big_s, 1),
                               "goal_met": big.fits and lut_pct <= 70}

    return figures


def _ecp5(args: argparse.Namespace) -> dict:
    from vta.boards import get_board
    from vta.boards.openflow import build_bitstream

    figures: dict = {}
    ulx = get_board("ulx3s-85f")
    cfg = ulx.default_config
    print(f"\n== ULX3S-85F default config ({cfg.batch}x{cfg.block_in}x{cfg.block_out}) "
          "through yosys + nextpnr-ecp5 + ecppack")
    with tempfile.TemporaryDirectory(prefix="vta-bench-ecp5-") as tmp:
        t = time.monotonic()
        res = build_bitstream(ulx, cfg, Path(tmp), progress=_progress(args.quiet))
        total = time.monotonic() - t
        size = res.bitstream.stat().st_size
    print(res.summary())
    print(f"goal: Fmax >= 100 MHz: {res.achieved_mhz:.1f} MHz -> "
          f"{'MET' if res.achieved_mhz >= 100 else 'NOT MET'} "
          f"({res.achieved_mhz / res.target_mhz:.2f}x the target)")
    print(f"bitstream {size} bytes; total {total:.0f} s")
    figures["ulx3s_default"] = {**res.to_dict(), "bitstream_bytes": size,
                                "wall_s": round(total, 1)}
    return figures


if __name__ == "__main__":
    sys.exit(main())
