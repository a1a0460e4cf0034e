"""Schedule tuning on ResNet-18's conv workloads: XGBoost tuner against random search.

For each layer the whole valid knob space is measured once on the performance model (cached in
the user cache directory, so reruns are quick); the exhaustive optimum is the reference. A
configuration whose build and simulation take more than ``--cpu-limit`` CPU seconds is recorded
as a timeout (an invalid measurement, the same for every tuner), as a tuner's measurement
timeout would. Then each tuner is replayed over that table for several seeds and the number of
trials it needs to come within 5% of the optimum is counted:

* ``random``: uniform sampling without replacement;
* ``xgb``: the XGBoost ranking model + simulated annealing, learning from this workload alone;
* ``xgb+tl``: the same, with transfer learning: its model is pre-trained on earlier logs of the
  *other* layers (leave-one-out: never the layer being tuned), so its first batch is already
  model-ranked. A layer's "earlier log" is a random sample of ``--prior`` of its measured
  configurations (seed-dependent), standing in for a previous tuning session.

Printed: trials per tuner (median over seeds), the median ratio xgb / random over workloads
(goal <= 25%), and ResNet-18's VTA conv cycles with the tuned against the default schedules.

    .venv/bin/python bench/bench_tune_resnet.py [--layers all|C9,C11,C12] [--seeds 11] [--jobs 2]
        [--tune-rest 48] [--tsim C12]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from record import write_record
from vta.isa import Config
from vta.isa.fileio import user_cache_dir, write_atomic
from vta.tune import Measurer, MeasureResult, RandomTuner, XGBTuner
from vta.tune.progress import ProgressBar
from vta.tune.vta_tasks import (
    RESNET18_LAYERS,
    default_knobs_cost,
    measure_perf,
    resnet18_task,
)

#: How often each conv shape occurs in ResNet-18 (C3, a 1x1 64->64 conv, is not in it).
RESNET18_COUNT = {"C2": 4, "C3": 0, "C4": 1, "C5": 1, "C6": 3, "C7": 1, "C8": 1, "C9": 3,
                  "C10": 1, "C11": 1, "C12": 3}
#: Bump when what a cached table means changes.
TABLE_VERSION = "v2"


def cache_dir() -> Path:
    d = user_cache_dir("tune-bench")
    d.mkdir(parents=True, exist_ok=True)
    return d


class _CpuLimit(BaseException):
    """Raised in a worker when a measurement exceeds its CPU budget (not an Exception, so the
    measurement's own error handling does not swallow it)."""


def _measure_one(task_json: dict, index: int, cpu_limit: float) -> MeasureResult:
    """Build and simulate one configuration in a worker, with a CPU-time budget."""
    import signal

    from vta.tune.measure import evaluate

    armed = [True]

    def on_limit(signum, frame):  # noqa: ANN001
        if armed[0]:
            raise _CpuLimit

    timeout = MeasureResult(index, None, "timeout", f"over {cpu_limit:g} CPU seconds")
    old = signal.signal(signal.SIGPROF, on_limit)
    try:
        try:
            signal.setitimer(signal.ITIMER_PROF, cpu_limit)
            return evaluate(task_json, index, "perf", {})
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_PROF, 0)
    except _CpuLimit:  # also when the limit hits between the measurement and disarming
        return timeout
    finally:
        signal.signal(signal.SIGPROF, old)


def _perf_params() -> dict:
    from vta.sim.perf import DEFAULT_PARAMS, params_dict

    return params_dict(DEFAULT_PARAMS)


def table_key(task, cpu_limit: float, *, with_params: bool = False) -> str:
    """The cache key of a layer's table: workload, space and CPU limit. The performance model's
    constants are recorded beside the table (they change while the model is calibrated; a
    table measured with other constants is still a valid landscape to replay tuners on, and
    the cycles printed at the end are re-measured with the current model)."""
    key = TABLE_VERSION + task.key + task.space.describe() + f"{cpu_limit:g}"
    if with_params:  # the earlier key, which included the constants
        key += json.dumps(_perf_params(), sort_keys=True)
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def _load(path: Path) -> dict[int, float | None]:
    return {int(k): v for k, v in json.loads(path.read_text()).items()}


def exhaustive(task, jobs: int, cpu_limit: float, label: str = "") -> dict[int, float | None]:
    """Cost of every valid configuration (None: invalid or over the CPU limit). Progress is
    kept in a partial file, so an interrupted run continues where it stopped."""
    import concurrent.futures as cf
    import multiprocessing as mp

    path = cache_dir() / (table_key(task, cpu_limit) + ".json")
    params = path.with_suffix(".params.json")
    legacy = cache_dir() / (table_key(task, cpu_limit, with_params=True) + ".json")
    if not path.exists() and legacy.exists():  # measured with today's constants
        write_atomic(params, json.dumps(_perf_params(), sort_keys=True))
        write_atomic(path, legacy.read_bytes())
    if path.exists():
        if params.exists() and json.loads(params.read_text()) != _perf_params():
            print(f"  {label}: table measured with other perf-model constants "
                  f"({params.name})", file=sys.stderr)
        return _load(path)
    part = path.with_suffix(".partial.json")
    table: dict[int, float | None] = {}
    if part.exists():
        table = _load(part)
    elif legacy.with_suffix(".partial.json").exists():
        table = _load(legacy.with_suffix(".partial.json"))
    valid = task.space.valid_indices()
    todo = [i for i in valid if i not in table]
    bar = ProgressBar(len(valid), f"  {label} measure {len(valid)} configs")
    tj = task.to_json()
    last_save = time.monotonic()
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork")) as ex:
        futs = [ex.submit(_measure_one, tj, i, cpu_limit) for i in todo]
        for f in cf.as_completed(futs):
            try:
                r = f.result()
            except (Exception, _CpuLimit):  # noqa: BLE001 - a failed worker: a timeout too
                r = MeasureResult(todo[futs.index(f)], None, "timeout", "worker failed")
            table[r.index] = r.cost if r.ok else None
            bar.update(len(table))
            if time.monotonic() - last_save > 30:
                write_atomic(part, json.dumps(table).encode())
                last_save = time.monotonic()
    bar.close()
    write_atomic(params, json.dumps(_perf_params(), sort_keys=True))
    write_atomic(path, json.dumps(table).encode())
    part.unlink(missing_ok=True)
    return table


def feature_table(task, indices: list[int], cpu_limit: float) -> dict[int, np.ndarray]:
    """The tuner's features (knobs, IR and relative features) of every valid configuration,
    cached beside the cost table (lowering is cheap: no code generation, no simulation)."""
    from vta.tune.task import task_features
    from vta.tune.vta_tasks import N_FEATURES

    path = cache_dir() / (table_key(task, cpu_limit) + f".feat{N_FEATURES}.npz")
    if path.exists():
        z = np.load(path)
        return dict(zip(z["index"].tolist(), z["feat"]))
    feats = np.stack([task_features(task, i) for i in indices])
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, index=np.array(indices), feat=feats)
    tmp.replace(path)
    return dict(zip(indices, feats))


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


@dataclass
class Layer:
    name: str
    task: object
    table: dict[int, float | None]
    feats: dict[int, np.ndarray]

    @property
    def best(self) -> float:
        return min(c for c in self.table.values() if c is not None)


def prior_groups(layers: list[Layer], exclude: str, per_layer: int, seed: int,
                 columns: slice) -> list[tuple[np.ndarray, list[float | None]]]:
    """Leave-one-out transfer data: of every OTHER layer, a seed-dependent random sample of
    ``per_layer`` measured configurations (an earlier tuning log of that layer)."""
    out = []
    for k, lay in enumerate(layers):
        if lay.name == exclude:
            continue
        rng = np.random.default_rng([seed, k, 7])
        idx = sorted(lay.table)
        pick = rng.choice(len(idx), size=min(per_layer, len(idx)), replace=False)
        sel = [idx[j] for j in pick]
        out.append((np.stack([lay.feats[i][columns] for i in sel]),
                    [lay.table[i] for i in sel]))
    return out


def trials_to_reach(kind: str, lay: Layer, seed: int, batch: int, columns: slice,
                    priors: list | None = None) -> int:
    """Trials the tuner needs until its best is within 5% of the exhaustive optimum."""
    target = 1.05 * lay.best
    if kind == "random":
        tuner = RandomTuner(lay.task, seed=seed)
    elif kind == "xgb-old":  # ablation: the tuner's earlier settings (no warm-up batches)
        tuner = XGBTuner(lay.task, seed=seed, feature_fn=lambda t, i: lay.feats[i][columns],
                         warmup=(), sa_iter=150, parallel_size=64)
    else:
        tuner = XGBTuner(lay.task, seed=seed, feature_fn=lambda t, i: lay.feats[i][columns])
        if priors:
            tuner.add_prior_groups(priors)
    res = tuner.tune(len(lay.table), TableMeasurer(lay.table), batch_size=batch,
                     target=target)
    for n, best in enumerate(res.best_curve(), 1):
        if best <= target:
            return n
    return res.trials


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="C12,C10,C11,C9,C7,C8",
                    help="comma-separated ResNet-18 layers, or 'all' (C2-C12)")
    ap.add_argument("--seeds", type=int, default=11)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prior", type=int, default=128,
                    help="configurations of each other layer the transfer model learns from")
    ap.add_argument("--features", choices=["all", "relative"], default="relative",
                    help="the model's features: knobs + IR + relative, or the relative ones only")
    ap.add_argument("--cpu-limit", type=float, default=2.0,
                    help="CPU seconds per measurement before it counts as a timeout")
    ap.add_argument("--ablation", action="store_true",
                    help="also replay the XGBoost tuner with its earlier settings")
    ap.add_argument("--tune-rest", type=int, default=0, metavar="N",
                    help="tune the ResNet-18 layers without a table for N trials (xgb+tl on "
                         "the perf model) for the network's tuned cycles")
    ap.add_argument("--tsim", default="",
                    help="layers whose default and tuned schedules are also run on tsim")
    args = ap.parse_args()
    cfg = Config()
    names = list(RESNET18_LAYERS) if args.layers == "all" else args.layers.split(",")
    layers: list[Layer] = []
    for name in names:
        task = resnet18_task(name, cfg)
        valid = task.space.valid_indices()
        print(f"{name}: {len(valid)} valid of {len(task.space)}", file=sys.stderr)
        table = exhaustive(task, args.jobs, args.cpu_limit, name)
        layers.append(Layer(name, task, table, feature_table(task, valid, args.cpu_limit)))
    from vta.tune.vta_tasks import N_RELATIVE

    width = len(next(iter(layers[0].feats.values())))
    columns = slice(0, width) if args.features == "all" else slice(width - N_RELATIVE, width)
    rows = []
    t_start = time.perf_counter()
    for lay in layers:
        res: dict[str, list[int]] = {"random": [], "xgb": [], "xgb+tl": []}
        for seed in range(args.seeds):
            res["random"].append(trials_to_reach("random", lay, seed, args.batch, columns))
            res["xgb"].append(trials_to_reach("xgb", lay, seed, args.batch, columns))
            if args.ablation:
                res.setdefault("xgb-old", []).append(
                    trials_to_reach("xgb-old", lay, seed, args.batch, columns))
            pri = prior_groups(layers, lay.name, args.prior, seed, columns)
            res["xgb+tl"].append(trials_to_reach("xgb", lay, seed, args.batch, columns, pri)
                                 if pri else -1)
        med = {k: statistics.median(v) for k, v in res.items()}
        ok = [c for c in lay.table.values() if c is not None]
        near = sum(c <= 1.05 * lay.best for c in ok)
        rows.append((lay, len(lay.table), len(ok), near, med, res))
        print(f"  {lay.name}: " + " ".join(f"{k} {v}" for k, v in res.items()), file=sys.stderr)
    print(f"\n{'layer':<6}{'valid':>7}{'timeout':>8}{'<=5%':>6}{'optimum':>11}"
          f"{'random':>8}{'xgb':>6}{'ratio':>7}{'xgb+tl':>8}{'ratio':>7}")
    ratios, ratios_tl = [], []
    for lay, n, nok, near, med, _ in rows:
        r, x, xt = med["random"], med["xgb"], med["xgb+tl"]
        ratios.append(x / r)
        tl = f"{xt:>8.1f}{xt / r:>7.2f}" if xt >= 0 else f"{'-':>8}{'-':>7}"
        if xt >= 0:
            ratios_tl.append(xt / r)
        print(f"{lay.name:<6}{n:>7}{n - nok:>8}{near:>6}{lay.best:>11,.0f}{r:>8.1f}{x:>6.1f}"
              f"{x / r:>7.2f}{tl}")
    print(f"\ntrials to come within 5% of the exhaustive optimum, median of {args.seeds} seeds "
          f"(batch {args.batch}; features: {args.features}; transfer: {args.prior} configs of "
          "each other layer)")
    print(f"median ratio xgb / random over {len(rows)} workloads: "
          f"{statistics.median(ratios):.2f} (goal <= 0.25)")
    if args.ablation:
        old = [statistics.median(r[5]["xgb-old"]) / r[4]["random"] for r in rows]
        print("ablation, xgb with the earlier settings (batch 8 from the start, SA 150 x 64): "
              + " ".join(f"{r[0].name} {statistics.median(r[5]['xgb-old']):.1f}" for r in rows)
              + f"; median ratio {statistics.median(old):.2f}")
    if ratios_tl:
        print(f"median ratio xgb+tl / random over {len(ratios_tl)} workloads: "
              f"{statistics.median(ratios_tl):.2f} (goal <= 0.25)")
    print(f"replay time {time.perf_counter() - t_start:.0f} s")
    net = print_resnet_cycles(layers, args, columns)
    fig = {"layers": {lay.name: {"valid": n, "optimum": lay.best, "trials_xgb": med["xgb"],
                                 "trials_xgb_tl": med["xgb+tl"]}
                      for lay, n, _, _, med, _ in rows},
           "median_ratio_xgb_random": statistics.median(ratios),
           "median_ratio_xgb_tl_random": statistics.median(ratios_tl) if ratios_tl else None,
           "resnet18": net}
    write_record("bench_tune_resnet", fig,
                 {"trials_random": {lay.name: med["random"] for lay, _, _, _, med, _ in rows},
                  "resnet18_default_cycles": net["default_cycles"]},
                 params=vars(args))
    return 0


def tune_layer(name: str, layers: list[Layer], args: argparse.Namespace, columns: slice
               ) -> tuple[float, int]:
    """Tune a layer that has no exhaustive table with the transfer-primed XGBoost tuner on the
    perf measurer for ``--tune-rest`` trials; returns (best cycles, trials)."""
    from vta.tune import close_executor, make_executor
    from vta.tune.task import task_features

    task = resnet18_task(name, Config())
    tuner = XGBTuner(task, seed=0, feature_fn=lambda t, i: task_features(t, i)[columns])
    tuner.add_prior_groups(prior_groups(layers, name, args.prior, 0, columns))
    ex = make_executor(args.jobs)
    try:
        m = CpuLimitedMeasurer(ex, args.cpu_limit)
        res = tuner.tune(args.tune_rest, m, batch_size=args.batch)
    finally:
        close_executor(ex)
    return res.best_cost, res.trials


class CpuLimitedMeasurer(Measurer):
    """The perf measurer with the tables' per-configuration CPU limit."""

    def __init__(self, executor, cpu_limit: float) -> None:
        super().__init__("perf", executor=executor)
        self.cpu_limit = cpu_limit

    def measure(self, task, indices):
        tj = task.to_json()
        futs = [self.executor.submit(_measure_one, tj, int(i), self.cpu_limit)
                for i in indices]
        out = []
        for i, f in zip(indices, futs):
            try:
                out.append(f.result())
            except (Exception, _CpuLimit):  # noqa: BLE001
                out.append(MeasureResult(int(i), None, "timeout", "worker failed"))
        return out


def print_resnet_cycles(layers: list[Layer], args: argparse.Namespace, columns: slice) -> dict:
    """ResNet-18's VTA conv cycles on the perf model: compiler defaults against the tuned
    schedules (the exhaustive optimum, which the tuners reach, where a table exists; else what
    the transfer-primed XGBoost tuner finds in ``--tune-rest`` trials), weighted by how often
    each conv shape occurs in the network."""
    print(f"\n{'layer':<6}{'count':>6}{'default':>12}{'tuned':>12}{'speedup':>9}  tuned by")
    tot_d = tot_t = 0.0
    have = {x.name: x for x in layers}
    for name, n in RESNET18_COUNT.items():
        if not n or (name not in have and not args.tune_rest):
            continue
        task = have[name].task if name in have else resnet18_task(name, Config())
        d = default_knobs_cost(task)
        if name in have:
            # re-measured now: the table may predate a change of the compiler or the model
            lay = have[name]
            best = min((i for i, c in lay.table.items() if c is not None), key=lay.table.get)
            t = measure_perf(task.instantiate(task.space.get(best)))
            how = f"exhaustive optimum (table said {lay.best:,.0f})"
        else:
            t, trials = tune_layer(name, layers, args, columns)
            how = f"xgb+tl, {trials} trials"
        tot_d += n * d
        tot_t += n * t
        print(f"{name:<6}{n:>6}{d:>12,.0f}{t:>12,.0f}{d / t:>9.2f}  {how}", flush=True)
    missing = [k for k, n in RESNET18_COUNT.items() if n and k not in have and not args.tune_rest]
    print(f"ResNet-18 VTA convs (perf model, x occurrences): default {tot_d:,.0f} cycles, tuned "
          f"{tot_t:,.0f} ({tot_d / tot_t:.2f}x)"
          + (f"; layers left out: {', '.join(missing)}" if missing else ""))
    out = {"default_cycles": tot_d, "tuned_cycles": tot_t, "speedup": tot_d / tot_t,
           "left_out": missing}
    for name in filter(None, args.tsim.split(",")):
        lay = next((x for x in layers if x.name == name), None)
        if lay is None:
            continue
        from vta.tune.vta_tasks import measure_tsim

        best = min((i for i, c in lay.table.items() if c is not None), key=lay.table.get)
        t0 = time.perf_counter()
        tuned = measure_tsim(lay.task.instantiate(lay.task.space.get(best)))
        default = default_knobs_cost(lay.task, "tsim")
        print(f"{name} on tsim (outputs checked against numpy): default {default:,.0f} cycles, "
              f"tuned {tuned:,.0f} ({default / tuned:.2f}x; perf model said "
              f"{default_knobs_cost(lay.task) / lay.best:.2f}x) [{time.perf_counter() - t0:.0f} s]")
        out[f"tsim {name}"] = {"default_cycles": default, "tuned_cycles": tuned}
    return out


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--precompute":
    # internal: fill the cache for the given layers, one after the other
    jobs, limit = int(sys.argv[3]), float(sys.argv[4])
    for layer in sys.argv[2].split(","):
        t0 = time.perf_counter()
        tab = exhaustive(resnet18_task(layer, Config()), jobs, limit, layer)
        print(f"{layer}: {len(tab)} configs, {sum(v is None for v in tab.values())} timeouts, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    sys.exit(main())
