"""``vta explore``: AutoVTA, search the accelerator's parameters under a board's budget."""

from __future__ import annotations

import argparse
import sys

from vta.isa import Config
from vta.isa.config import check_param
from vta.isa.errors import ConfigError
from vta.isa.fileio import check_output_dir

from .common import (
    ZOO_IMAGE_SIZE,
    add_input_shape_arg,
    image_size_int,
    input_shapes_from_args,
    int_range,
    positive_int,
    positive_seconds,
    scheduler_address,
    seed_int,
)

EPILOG = """\
examples:
  vta explore --board pynq-z1 --model resnet18 --budget 200 -o explore-pynq
  vta explore --board ultra96-v2 --model net.onnx --budget 400 --jobs 2 -o out
  vta explore --board pynq-z1 --model resnet18 --image-size 64 --range LOG_BLOCK=3,4 -o out
  vta explore --board pynq-z1 --budget 300 --scheduler tcp://10.0.0.5:8786 -o out
  vta explore --board pynq-z1 --calibrate --synth-finalists 2 -o out   (synthesis: slow)

DIR gets explore.json (every evaluated point, the Pareto front, the best point with its bus
width, the board default as reference), pareto.png and vta_config.json (the best configuration,
for `vta verilog --config`).
"""

KNOBS = ("LOG_BATCH", "LOG_BLOCK", "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE",
         "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE", "bus_width")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explore", help="AutoVTA: search GEMM shape, buffers and bus width under a board's budget",
        description="Search the accelerator's own parameters (LOG_BATCH, LOG_BLOCK, the four "
                    "buffer sizes, the bus width) for a network and a board: resources from a "
                    "calibrated analytic model, cycles from the performance model on the "
                    "network's VTA layers (memory: one bus word per cycle, at most the "
                    "board's port width); exhaustive for small spaces, else XGBoost + "
                    "simulated annealing; reports the Pareto front of cycles against "
                    "LUT/DSP/BRAM.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--board", required=True, metavar="B", help="target board (see vta boards)")
    p.add_argument("--model", default="resnet18", metavar="resnet18|MODEL.onnx",
                   help="target network: a zoo model or an ONNX file (default resnet18)")
    p.add_argument("--image-size", type=image_size_int, metavar="N",
                   help="input size of a zoo image classifier, "
                        f"{ZOO_IMAGE_SIZE[0]}..{ZOO_IMAGE_SIZE[1]} (default 224)")
    add_input_shape_arg(p)
    p.add_argument("--budget", type=positive_int, default=200, metavar="N",
                   help="evaluations, at least 1 (default 200); the space is searched "
                        "exhaustively when it has at most N points that fit")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="output directory (made when it does not exist; an existing one must "
                        "be an earlier exploration's or empty)")
    p.add_argument("--range", action="append", default=[], metavar="KNOB=V1,V2,...",
                   help=f"candidate values of a knob ({', '.join(KNOBS)}); repeatable")
    p.add_argument("--tuner", choices=["auto", "grid", "xgb", "random"], default="auto",
                   help="search strategy (default auto: grid when the space is small)")
    p.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                   help="local worker processes (default 1)")
    p.add_argument("--scheduler", type=scheduler_address, metavar="HOST:PORT",
                   help="evaluate on a Dask distributed cluster (e.g. tcp://host:8786)")
    p.add_argument("--seed", type=seed_int, default=0, help="search seed, 0 .. 2**32-1")
    p.add_argument("--calibrate", action="store_true",
                   help="synthesize the calibration configurations for this board (yosys, "
                        "minutes each, cached) and fit the resource model before searching")
    p.add_argument("--synth-finalists", type=int_range(0), default=0, metavar="K",
                   help="check the K best Pareto points by real synthesis (cached; slow)")
    p.add_argument("--tsim-finalists", type=int_range(0), default=0, metavar="K",
                   help="run a small program on tsim for the K best Pareto points")
    p.add_argument("--timeout", type=positive_seconds, default=600.0, metavar="S",
                   help="seconds allowed per batch of evaluations, above 0 (default 600)")
    p.set_defaults(func=run)


def _parse_ranges(specs: list[str]) -> dict[str, list[int]]:
    """``KNOB=V1,V2`` overrides of the default knob ranges."""
    from vta.tune.autovta.explore import ExploreError  # deferred: off vta --help

    out: dict[str, list[int]] = {}
    for spec in specs:
        name, sep, vals = spec.partition("=")
        name = name.strip()
        if not sep or name not in KNOBS:
            raise ExploreError(f"--range {spec!r}: expected KNOB=V1,V2,... with KNOB one of "
                               f"{', '.join(KNOBS)}")
        try:
            values = sorted({int(v) for v in vals.split(",") if v.strip()})
        except ValueError:
            raise ExploreError(f"--range {spec!r}: values must be integers") from None
        if not values:
            raise ExploreError(f"--range {spec!r}: give at least one value")
        for v in values:
            if name == "bus_width":
                if v not in (64, 128):
                    raise ExploreError(f"--range {spec!r}: bus_width {v} is not 64 or 128")
                continue
            try:
                check_param(name, v)
            except ConfigError as e:
                raise ExploreError(f"--range {spec!r}: {e}") from None
        out[name] = values
    return out


def run(args: argparse.Namespace) -> int:
    from vta.boards import get_board  # deferred: off vta --help
    from vta.tune.autovta.calibration import calibrated_model  # deferred: off vta --help
    from vta.tune.autovta.explore import explore  # deferred: off vta --help
    from vta.tune.autovta.finalists import (  # deferred: off vta --help
        synth_finalists,
        tsim_finalists,
    )
    from vta.tune.autovta.network import check_model, load_network  # deferred: off vta --help
    from vta.tune.autovta.report import (  # deferred: off vta --help
        is_explore_output_or_empty,
        write_outputs,
    )
    from vta.tune.progress import ProgressBar  # deferred: off vta --help

    board = get_board(args.board)
    ranges = _parse_ranges(args.range)
    check_output_dir(args.output, "exploration output", replaceable=is_explore_output_or_empty,
                     inputs=(args.model,))
    zoo_kw = {"image_size": args.image_size} if args.image_size else {}
    input_shapes = input_shapes_from_args(args)
    check_model(args.model, zoo_kw, input_shapes)
    if args.scheduler:  # a wrong address is an error now, not after loading the network
        from vta.tune.measure import check_scheduler  # deferred: off vta --help

        check_scheduler(args.scheduler)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    say(f"loading {args.model} (the first time compiles and quantizes it once; cached)")
    base = Config()  # the parameters the search keeps: the default int8 x int8 -> int32 widths
    net = load_network(args.model, base, input_shapes=input_shapes, **zoo_kw)
    say(f"{net.name}: {len(net.layers)} VTA layers, {net.macs / 1e9:.2f} GMAC"
        + (f"; on the CPU: {', '.join(net.cpu_layers)}" if net.cpu_layers else ""))
    model, notes = calibrated_model(board, synth=args.calibrate, progress=say)
    err = model.calibration_error
    if err:
        say("resource model: " + model.source + "; calibration error "
            + ", ".join(f"{k} {100 * v:.1f}%" for k, v in err.items()))
    bar = ProgressBar(args.budget, f"explore {board.name}")

    def progress(info: dict) -> None:
        bar.total = max(1, info["n_trial"])  # the space may hold fewer points than --budget
        bar(info)

    res = explore(board, net, base=base, n_trial=args.budget, model=model, ranges=ranges,
                  jobs=args.jobs, scheduler=args.scheduler, seed=args.seed, tuner=args.tuner,
                  timeout=args.timeout, progress=progress)
    bar.update(len(res.points), "done", force=True)
    bar.close()
    res.notes = notes + res.notes
    if args.synth_finalists > 0:
        synth_finalists(res, args.synth_finalists, progress=say)
    if args.tsim_finalists > 0:
        _, why = tsim_finalists(res, args.tsim_finalists, progress=say)
        if why:
            res.notes.append(f"tsim check skipped: {why}")
    out = write_outputs(res, args.output)
    _summary(res)
    print(f"wrote {out}/explore.json, {out}/pareto.png"
          + (f", {out}/vta_config.json" if res.best is not None else ""))
    return 0 if res.best is not None else 1


def _summary(res) -> None:  # noqa: ANN001 - an ExploreResult
    ref, best = res.reference, res.best
    print(f"{res.network.name} on {res.board}: {len(res.points)} points evaluated "
          f"({res.tuner}; {res.fitting_size} of {res.space_size} fit the budget by the model)")
    print(f"  {'':9} {'config':<44} {'cycles':>12} {'LUT':>7} {'FF':>7} {'BRAM':>6} {'DSP':>5}")
    rows = [("default", ref)] + ([("best", best)] if best is not None else [])
    for label, p in rows:
        r = p.resources
        cyc = f"{p.cycles:,}" if p.cycles else "-"
        print(f"  {label:9} {p.key:<44} {cyc:>12} {r['lut']:>7.0f} {r['ff']:>7.0f} "
              f"{r['bram']:>6.1f} {r['dsp']:>5.0f}")
    if res.speedup:
        print(f"  speedup of the best over the default: {res.speedup:.2f}x; "
              f"Pareto front: {len(res.pareto)} points")
    ceil = res.dsp_ceilings()
    shapes = {k: "none" if v is None else f"{v['batch']}x{v['block']}x{v['block']} "
              f"({v['macs_per_cycle']} MACs)" for k, v in ceil.items() if k != "packed"}
    print(f"  DSP ceiling (the largest GEMM with every multiplier in a DSP): "
          f"{shapes['with_packing']} with packed multipliers, {shapes['without_packing']} "
          f"without; this board's core {'packs' if ceil['packed'] else 'does not pack'}")
    for p in res.points:
        if p.synth:
            s = p.synth
            print(f"  synthesis of {p.key}: {s['used']} fits={s['fits']} "
                  f"model error {s['model_error']}")
        if p.tsim:
            print(f"  tsim of {p.key}: {p.tsim}")
    for n in res.notes:
        print(f"  note: {n}")
