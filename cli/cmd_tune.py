"""``vta tune``: AutoTVM-style schedule tuning of VTA operators, and plots of tuning logs."""

from __future__ import annotations

import argparse
import sys

from vta.isa.errors import VTAError
from vta.runtime.backends import programs

from .common import (
    add_config_args,
    add_input_shape_arg,
    check_outputs,
    config_from_args,
    input_shapes_from_args,
    positive_int,
    positive_seconds,
    scheduler_address,
    seed_int,
)

#: The backends a tuning candidate is measured on (all program runners but rtl, too slow).
MEASURERS = tuple(b for b in programs() if b != "rtl")

EPILOG = """\
examples:
  vta tune --workload conv2d:H=14,W=14,CI=256,CO=256,K=3,S=1,P=1 --trials 200 --log t.jsonl
  vta tune --workload conv2d_transpose:H=8,W=8,CI=64,CO=32,K=4,S=2,P=1 --trials 50 --log t.jsonl
  vta tune --workload group_conv2d:H=14,W=14,CI=256,CO=256,K=3,S=1,P=1,G=256 --trials 50
  vta tune --workload matmul:G=3,N=197,K=64,M=197 --trials 50 --log attn.jsonl
  vta tune model.onnx --measure perf --trials 100 --log resnet.jsonl --jobs 2
  vta tune --plot t.jsonl -o curve.png
  vta tune --list
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune", help="tune operator schedules (XGBoost cost model + simulated annealing)",
        description="Search the schedule knobs of VTA operators. Each measured configuration is "
                    "appended to a JSON-lines log; `vta compile --tuning-log` applies the best.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", metavar="MODEL.onnx",
                   help="tune every VTA workload of this model (conv2d, grouped and "
                        "depthwise conv2d, conv2d_transpose, dense, matmul, element-wise ALU "
                        "layers)")
    add_input_shape_arg(p)
    p.add_argument("--workload", action="append", metavar="SPEC",
                   help="a single workload NAME:key=value,... (repeatable; see --list)")
    p.add_argument("--list", action="store_true", help="list the known workloads and exit")
    p.add_argument("--measure", choices=MEASURERS, default="perf",
                   help="how candidates are measured: perf model (fast, default), tsim "
                        "(cycle-accurate), fsim (checks results against numpy; costs are "
                        "GEMM + ALU micro-op counts)")
    p.add_argument("--tuner", choices=["xgb", "random", "grid"], default="xgb")
    p.add_argument("--trials", type=positive_int, default=200, metavar="N",
                   help="measurements per workload, at least 1 (default 200)")
    p.add_argument("--batch", type=positive_int, default=16, metavar="N",
                   help="configurations measured per batch, at least 1 (default 16)")
    p.add_argument("--early-stopping", type=positive_int, default=None, metavar="N",
                   help="stop a workload when the best has not improved for N trials")
    p.add_argument("--log", metavar="FILE", help="append-only JSON-lines tuning log")
    p.add_argument("--resume", action="store_true",
                   help="continue from the records already in --log (requires --log; "
                        "otherwise they are kept but tuning starts afresh)")
    p.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                   help="local worker processes (default 1)")
    p.add_argument("--scheduler", type=scheduler_address, metavar="HOST:PORT",
                   help="measure on a Dask distributed cluster (e.g. tcp://host:8786)")
    p.add_argument("--timeout", type=positive_seconds, default=120.0, metavar="S",
                   help="seconds allowed per batch before its pending candidates are "
                        "recorded as timeouts, above 0 (default 120)")
    p.add_argument("--seed", type=seed_int, default=0, help="search seed, 0 .. 2**32-1")
    p.add_argument("--plot", metavar="LOG", help="plot best-so-far against trials of a log")
    p.add_argument("-o", "--output", metavar="PNG", help="output of --plot")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.plot:
        from vta.tune.plot import plot_log  # deferred: off vta --help

        if not args.output:
            raise _usage("--plot needs -o PNG")
        check_outputs({"plot": args.output}, inputs=(args.plot,))
        n = plot_log(args.plot, args.output)
        print(f"wrote {args.output} ({n} curve{'s' if n != 1 else ''})")
        return 0

    from vta.tune.workloads import known_workloads, parse_workload  # deferred: off vta --help

    if args.list:
        for w in known_workloads().values():
            print(f"{w.usage():<70} {w.doc}")
        return 0
    if args.input_shape and not args.model:
        raise _usage("--input-shape sizes the inputs of MODEL.onnx: give the model")
    if args.resume and not args.log:
        raise _usage("--resume continues from a tuning log: give it with --log FILE")
    if args.output:
        raise _usage("-o is the output of --plot; the tuning records go to --log FILE")
    # the log is appended to as batches finish: its location is checked before any work
    check_outputs({"tuning log": args.log}, inputs=(args.model, args.config))
    cfg = config_from_args(args)
    tasks = []
    if args.model:
        from vta.tune.vta_tasks import tasks_from_model  # deferred: off vta --help

        tasks += tasks_from_model(args.model, cfg, input_shapes=input_shapes_from_args(args))
    for spec in args.workload or []:
        tasks.append(parse_workload(spec, cfg))
    if not tasks:
        raise _usage("give MODEL.onnx or --workload SPEC (or --plot LOG, --list)")

    from vta.tune import (  # deferred: off vta --help
        TUNERS,
        Measurer,
        TuningLog,
        close_executor,
        make_executor,
    )
    from vta.tune.progress import ProgressBar  # deferred: off vta --help

    log = TuningLog(args.log) if args.log else TuningLog(None)
    if args.log and not args.resume:  # keep the file; resume nothing, transfer from it
        prior, log.records = log.records, []
    else:
        prior = []
    resumed = {t.key: len(log.for_workload(t.key)) for t in tasks}
    if args.resume and all(n >= args.trials for n in resumed.values()):
        print(f"vta tune: {args.log} already holds {args.trials} trials of each of its "
              f"{len(tasks)} workload{'s' if len(tasks) != 1 else ''}: nothing to resume "
              "(raise --trials to tune further)")
        return 0
    ex = make_executor(args.jobs, args.scheduler)
    rows = []
    try:
        for n, task in enumerate(tasks, 1):
            before = resumed[task.key]  # trials the log already holds count, not show
            bar = ProgressBar(max(0, args.trials - before), f"[{n}/{len(tasks)}] {task.name}"
                              + (f" (resumed after {before} trials)" if before else ""))
            measurer = Measurer(args.measure, executor=ex, timeout=args.timeout,
                                config=cfg.to_dict())
            tuner = TUNERS[args.tuner](task, seed=args.seed)
            if args.tuner == "xgb" and args.log:  # transfer from other workloads in the log
                others = [r for r in prior + log.records if r.workload != task.key]
                if others and (used := tuner.add_prior(others)):
                    print(f"  cost model primed with {used} records of similar workloads",
                          file=sys.stderr)
            res = tuner.tune(args.trials, measurer, batch_size=args.batch, log=log,
                             early_stopping=args.early_stopping, progress=bar)
            bar.update(res.trials - before, f"best {res.best_cost}", force=True)
            bar.close()
            rows.append((task, res))
    finally:
        close_executor(ex)
    print(f"\n{'workload':<58} {'trials':>6} {'errors':>6} {'best cost':>12}  best config")
    for task, res in rows:
        errs = sum(1 for _, c, _ in res.history if c is None)
        best = f"{res.best_cost:,.0f}" if res.best_cost is not None else "-"
        print(f"{_short(task.key):<58} {res.trials:>6} {errs:>6} {best:>12}  {res.best_values}")
    failed = [(task, res) for task, res in rows if res.best_cost is None]
    for task, res in failed:  # tuning ran but found nothing: say so on one line each
        kinds = sorted({kind for _, _, kind in res.history})
        print(f"vta tune: error: no configuration of {task.name} could be measured "
              f"({res.trials} trials, all failed: {', '.join(kinds)}; the log or --jobs 1 "
              "shows why)", file=sys.stderr)
    return 1 if failed else 0


def _usage(msg: str) -> Exception:
    return VTAError(msg)


def _short(s: str, n: int = 58) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


