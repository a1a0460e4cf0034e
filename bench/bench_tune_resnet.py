"""Schedule tuning on ResNet-18's conv workloads: XGBoost tuner against random search.

For each layer the whole valid knob space is measured once on the performance model (cached in
the user cache directory, so reruns are quick); the exhaustive optimum is the reference. Then
each tuner is replayed over that table for several seeds and the number of trials it needs to
come within 5% of the optimum is counted. Printed: trials per tuner (median over seeds), the
median ratio XGBoost / random over workloads (goal <= 25%), and the cycles of the default
schedules against the tuned ones.

    .venv/bin/python bench/bench_tune_resnet.py [--layers C9,C11,C12] [--seeds 5] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from vta.isa import Config
from vta.isa.fileio import user_cache_dir
from vta.tune import (
    Measurer,
    MeasureResult,
    RandomTuner,
    XGBTuner,
    close_executor,
    make_executor,
)
from vta.tune.progress import ProgressBar
from vta.tune.vta_tasks import RESNET18_LAYERS, default_knobs_cost, resnet18_task


def cache_dir() -> Path:
    d = user_cache_dir("tune-bench")
    d.mkdir(parents=True, exist_ok=True)
    return d


def exhaustive(task, jobs: int, timeout: float) -> dict[int, float | None]:
    """Cost of every valid configuration (None: invalid or over the time limit)."""
    import hashlib

    from vta.sim.perf import DEFAULT_PARAMS, params_dict

    # the costs depend on the workload and on the performance model's constants
    key = task.key + json.dumps(params_dict(DEFAULT_PARAMS), sort_keys=True)
    path = cache_dir() / (hashlib.sha1(key.encode()).hexdigest()[:16] + ".json")
    if path.exists():
        return {int(k): v for k, v in json.loads(path.read_text()).items()}
    valid = task.space.valid_indices()
    ex = make_executor(jobs)
    table: dict[int, float | None] = {}
    bar = ProgressBar(len(valid), f"  measure {len(valid)} configs")
    try:
        m = Measurer("perf", executor=ex, timeout=timeout)
        for k in range(0, len(valid), 4 * jobs):
            chunk = valid[k:k + 4 * jobs]
            m.timeout = timeout * len(chunk) / jobs
            for r in m.measure(task, chunk):
                table[r.index] = r.cost if r.ok else None
            bar.update(len(table))
    finally:
        close_executor(ex)
        bar.close()
    path.write_text(json.dumps(table))
    return table


class TableMeasurer(Measurer):
    """Replays measured costs (the same numbers the perf measurer gave)."""

    def __init__(self, table: dict[int, float | None]) -> None:
        super().__init__("table")
        self.table = table

    def measure(self, task, indices):
        out = []
        for i in indices:
            c = self.table.get(int(i))
            out.append(MeasureResult(int(i), c, "ok" if c is not None else "timeout"))
        return out


def trials_to_reach(tuner_cls, task, table, target: float, seed: int, batch: int) -> int:
    res = tuner_cls(task, seed=seed).tune(len(table), TableMeasurer(table), batch_size=batch,
                                          early_stopping=None)
    for n, best in enumerate(res.best_curve(), 1):
        if best <= target:
            return n
    return res.trials


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="C9,C11,C12")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=20.0,
                    help="seconds per measurement before it counts as invalid")
    args = ap.parse_args()
    cfg = Config()
    layers = list(RESNET18_LAYERS) if args.layers == "all" else args.layers.split(",")
    rows, ratios = [], []
    for layer in layers:
        task = resnet18_task(layer, cfg)
        t0 = time.perf_counter()
        print(f"{layer}: {len(task.space.valid_indices())} valid of {len(task.space)}",
              file=sys.stderr)
        table = exhaustive(task, args.jobs, args.timeout)
        ok = [c for c in table.values() if c is not None]
        best = min(ok)
        target = 1.05 * best
        res = {}
        for name, cls in (("random", RandomTuner), ("xgb", XGBTuner)):
            res[name] = statistics.median(
                trials_to_reach(cls, task, table, target, s, args.batch)
                for s in range(args.seeds))
        default = default_knobs_cost(task)
        ratio = res["xgb"] / res["random"]
        ratios.append(ratio)
        rows.append((layer, len(table), len(ok), best, default, res["random"], res["xgb"], ratio,
                     time.perf_counter() - t0))
    print(f"\n{'layer':<6}{'space':>7}{'valid':>7}{'optimum':>12}{'default':>12}"
          f"{'random':>9}{'xgb':>7}{'xgb/rnd':>9}")
    for layer, n, nok, best, default, r, x, ratio, _ in rows:
        print(f"{layer:<6}{n:>7}{nok:>7}{best:>12,.0f}{default:>12,.0f}{r:>9.0f}{x:>7.0f}"
              f"{ratio:>9.2f}")
    print(f"\ntrials to within 5% of the exhaustive optimum (median of {args.seeds} seeds)")
    print(f"median ratio xgb / random over workloads: {statistics.median(ratios):.2f} "
          f"(goal <= 0.25)")
    tuned = sum(r[3] for r in rows)
    default = sum(r[4] for r in rows)
    print(f"these layers' cycles: default schedules {default:,.0f}, tuned {tuned:,.0f} "
          f"({default / tuned:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
