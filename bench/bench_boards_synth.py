"""Resource use and clock speed of the VTA core on the boards, with the open tools.

1. The default (PYNQ, 1x16x16) config synthesized for the PYNQ-Z1 (yosys synth_xilinx) with
   the board's core (two GEMM products per DSP48E1, vta.hw.packed): the LUT/FF/BRAM/DSP table
   against the XC7Z020's budget, packed pairs and multipliers built from logic. Goal: fits, no
   multiplier in logic, LUTs <= 55 %. References measured in the same run: the small (1x4x4)
   config on the same board, so the ratios show how the core scales (time and LUTs, default /
   small), and with ``--unpacked`` also the default config without packing (``--core-options
   ''``: one product per multiplier), so the ratios show what packing saves.
2. The ULX3S-85F's own config (1x4x4; ``--preset NAME`` or ``--config FILE`` for another)
   through the whole open flow (yosys, nextpnr-ecp5, ecppack) at the board's clock (90 MHz;
   ``--clock 100`` for issue #39's target) with the board's core options: the achieved Fmax
   (goal: >= 100 MHz on every seed; the core reached 94.5 MHz at a 90 MHz target, its GEMM
   multiplier path the limit, docs/boards.md). The Fmax moves by a few percent from one
   placement seed to the next, so
   ``--seeds 1,2,3`` places and routes once per seed (one synthesis each; ``--jobs 2``: two
   at once) and reports every figure, the worst, the median and the best; a seed whose tools
   fail or run past their limit (an hour) counts as 0 MHz, with its error in the record.
3. The ZCU104's AutoVTA winner (1x32x32, 128-bit bus, packed multipliers; ``--only zcu104``)
   synthesized for the xczu7ev (yosys ``synth_xilinx -family xcup``): LUT/FF/BRAM/DSP against
   the board's budget, and against the resource model's estimate computed in the same run
   (the model is not fitted to this core). An hour or more on a loaded machine.
4. The synthesis, place-and-route and total times of each step.

    .venv/bin/python bench/bench_boards_synth.py [--only pynq|ecp5|zcu104] [--unpacked]
        [--preset NAME | --config F] [--seeds LIST] [--jobs N] [--clock MHZ]
        [--effort timing|fast]

This takes tens of minutes to hours on one core; the parts can run as separate processes
(``--only pynq``, ``--only ecp5``, ``--only zcu104``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from record import write_record


def _progress(quiet: bool):
    def show(line: str) -> None:
        if not quiet:
            print("   ", line, file=sys.stderr, flush=True)
    return show


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("pynq", "ecp5", "zcu104"),
                    help="run only the PYNQ-Z1 synthesis, the ULX3S open flow or the ZCU104 "
                         "AutoVTA winner's synthesis")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--preset", metavar="NAME",
                       help="ECP5 part: a built-in config to build instead of the board's own "
                            "1x4x4")
    which.add_argument("--config", metavar="FILE",
                       help="ECP5 part: a vta_config.json to build instead (a 1x8x8 core does "
                            "not reach 100 MHz, and on the current core does not finish "
                            "routing within an hour even at --clock 50)")
    ap.add_argument("--seeds", default="1", metavar="LIST",
                    help="ECP5 part: comma-separated nextpnr placement seeds (default: 1)")
    ap.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="ECP5 part: seeds placed and routed at once (default: 1)")
    ap.add_argument("--clock", type=float, default=None, metavar="MHZ",
                    help="ECP5 part: nextpnr's clock target (default: the board's clock)")
    ap.add_argument("--effort", choices=("timing", "fast"), default="timing",
                    help="ECP5 part: nextpnr options, as for 'vta build --effort'")
    ap.add_argument("--unpacked", action="store_true",
                    help="PYNQ part: also synthesize the default config without packed "
                         "multipliers (one more synthesis of the default config)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    args = ap.parse_args()
    try:
        args.seeds = [int(x) for x in args.seeds.split(",")]
    except ValueError:
        ap.error(f"--seeds: a comma-separated list of integers, not {args.seeds!r}")
    args.cfg = None  # the ECP5 part's config; None: the board's own
    if args.config or args.preset:
        from vta.cli.common import config_from_args
        from vta.isa import VTAError

        try:
            args.cfg = config_from_args(args)
        except VTAError as e:
            ap.error(str(e))

    figures: dict = {}
    if args.only in (None, "pynq"):
        figures.update(_pynq(args))
    if args.only in (None, "ecp5"):
        figures.update(_ecp5(args))
    if args.only in (None, "zcu104"):
        figures.update(_zcu104(args))
    write_record("bench_boards_synth", figures, None,
                 params={k: v for k, v in vars(args).items() if k != "cfg"})
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
    met = big.fits and big.soft_multipliers == 0 and lut_pct <= 55
    print(f"goal: fits, no multiplier in logic and LUTs <= 55 %: fits={big.fits}, "
          f"{big.soft_multipliers} in logic, LUTs {lut_pct:.1f} % -> "
          f"{'MET' if met else 'NOT MET'}")
    print(f"default / small: synthesis time {big_s / small_s:.1f}x ({big_s:.0f} s / "
          f"{small_s:.0f} s), LUTs {big.used.lut / max(small.used.lut, 1):.1f}x, "
          f"MACs/cycle {Config().macs_per_cycle // Config.preset('small').macs_per_cycle}x")
    figures["pynq_default"] = {**big.to_dict(), "wall_s": round(big_s, 1), "goal_met": met}

    if args.unpacked:
        print("\n== default config (1x16x16) on PYNQ-Z1 without packing: the in-run reference")
        plain = dataclasses.replace(pynq, core_options={})
        t = time.monotonic()
        ref = synth_core(plain, Config(), progress=_progress(args.quiet))
        ref_s = time.monotonic() - t
        print(ref.table())
        print(f"packed / unpacked: LUTs {big.used.lut / max(ref.used.lut, 1):.2f}x "
              f"({big.used.lut:g} / {ref.used.lut:g}), DSP48E1 {big.used.dsp:g} / "
              f"{ref.used.dsp:g}, multipliers in logic {big.soft_multipliers} / "
              f"{ref.soft_multipliers}")
        figures["pynq_default_unpacked"] = {**ref.to_dict(), "wall_s": round(ref_s, 1)}
    return figures


def _ecp5(args: argparse.Namespace) -> dict:
    import statistics

    from vta.boards import get_board
    from vta.boards.openflow import build_bitstream
    from vta.boards.tools import ToolError

    ulx = get_board("ulx3s-85f")
    cfg = args.cfg or ulx.default_config
    shape = f"{cfg.batch}x{cfg.block_in}x{cfg.block_out}"

    def one_seed(seed: int) -> dict:
        """Place and route for one seed (one synthesis each): its figures, or an Fmax of 0
        with the error when the tools fail or run past their limit."""
        print(f"\n== ULX3S-85F, {shape} config, seed {seed}: yosys + nextpnr-ecp5 + ecppack"
              f"{ulx.options_note}", flush=True)
        show = _progress(args.quiet)
        with tempfile.TemporaryDirectory(prefix="vta-bench-ecp5-") as tmp:
            t = time.monotonic()
            try:
                res = build_bitstream(ulx, cfg, Path(tmp),
                                      progress=lambda line: show(f"[seed {seed}] {line}"),
                                      clock_mhz=args.clock, seed=seed, effort=args.effort)
            except ToolError as e:  # e.g. routing past the tool limit: an Fmax of 0, go on
                print(f"seed {seed}: {e}", flush=True)
                return {"seed": seed, "achieved_mhz": 0.0, "timing_met": False,
                        "error": str(e), "wall_s": round(time.monotonic() - t, 1)}
            total = time.monotonic() - t
            size = res.bitstream.stat().st_size
        print(f"[seed {seed}] {res.summary()}\n[seed {seed}] bitstream {size} bytes; "
              f"total {total:.0f} s", flush=True)
        return {**res.to_dict(), "seed": seed, "bitstream_bytes": size,
                "wall_s": round(total, 1)}

    # the seeds are independent tool runs: --jobs of them at once (each nextpnr is one thread)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(one_seed, args.seeds))
    fmax = [r["achieved_mhz"] for r in runs]
    best, median = max(fmax), statistics.median(fmax)
    print(f"\n== ULX3S-85F {shape} ({args.effort} effort): Fmax per seed "
          + ", ".join(f"{r['seed']}: " + (f"{r['achieved_mhz']:.1f} MHz" if "error" not in r
                                         else "failed (0)") for r in runs)
          + f"; median {median:.1f}, best {best:.1f} MHz; timing met on "
          + f"{sum(r['timing_met'] for r in runs)} of {len(runs)} at the target")
    worst = min(fmax)
    print(f"goal: Fmax >= 100 MHz on every seed: worst {worst:.1f} MHz -> "
          f"{'MET' if worst >= 100 else 'NOT MET'} ({worst / 100:.2f}x the goal; "
          f"{sum(f >= 100 for f in fmax)} of {len(fmax)} seeds reach it, median "
          f"{median / 100:.2f}x)")
    return {"ulx3s": {"config": shape, "effort": args.effort, "core_options": ulx.core_options,
                      "runs": runs, "median_mhz": median, "best_mhz": best,
                      "worst_mhz": worst, "goal_met": worst >= 100}}


#: The ZCU104's AutoVTA winner (docs/autovta.md, record bench_autovta-20261125T223714Z): a
#: 1x32x32 GEMM, 8 KiB micro-op, 128 KiB input, 256 KiB weight and 128 KiB accumulator
#: buffers, on the board's 128-bit bus.
ZCU104_WINNER = {"LOG_BATCH": 0, "LOG_BLOCK": 5, "LOG_UOP_BUFF_SIZE": 13,
                 "LOG_INP_BUFF_SIZE": 17, "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17}

#: yosys's limit for the ZCU104 winner: its synthesis takes an hour or more on a loaded
#: machine, past synth_core's default hour.
ZCU104_TIMEOUT_S = 4 * 3600.0


def _zcu104(args: argparse.Namespace) -> dict:
    from vta.boards import get_board
    from vta.boards.synth import synth_core
    from vta.isa import Config
    from vta.tune.autovta.resources import KINDS, ResourceModel

    zcu = get_board("zcu104")
    cfg = Config(**ZCU104_WINNER).with_bus_width(zcu.bus_width)
    print(f"\n== ZCU104 AutoVTA winner ({cfg.batch}x{cfg.block_in}x{cfg.block_out}, "
          f"{zcu.bus_width}-bit bus{zcu.options_note}), yosys {zcu.fam.synth.split()[0]}")
    t = time.monotonic()
    rep = synth_core(zcu, cfg, progress=_progress(args.quiet), timeout=ZCU104_TIMEOUT_S)
    wall = time.monotonic() - t
    print(rep.table())
    # the reference, computed in the same run: the resource model's estimate (not fitted
    # to this core, so its error here is a held-out one)
    model = ResourceModel.for_board(zcu)
    est = model.estimate(cfg)
    used = rep.used.as_dict()
    ratio = {k: used[k] / max(est[k], 1.0) for k in KINDS}
    print(f"yosys / resource model ({model.source}): "
          + ", ".join(f"{k} {used[k]:g} / {est[k]:.0f} = {ratio[k]:.3f}x" for k in KINDS))
    return {"zcu104_winner": {**rep.to_dict(), "wall_s": round(wall, 1),
                              "model_estimate": est, "model_source": model.source,
                              "yosys_over_model": ratio}}


if __name__ == "__main__":
    sys.exit(main())
