"""Search economy of the default knobs: would fewer finalists or a smaller ranking budget choose
the same knobs?

Every distinct workload of the given families (ONNX exported by bench_models, 224x224; one knob
cache for all, so a workload two families share is searched once) is searched as a cold
``vta compile`` does (vta.compiler.topi.defaults.search, BUDGET ranked settings, FINALISTS timed
on the full program), with its ranking and timing calls recorded and memoized; the search is
then repeated with fewer finalists / a smaller budget on those memoized calls (new settings
only are evaluated). Per variant: workloads whose chosen knobs differ from today's, the chosen
knobs' full-program cycles summed over the workloads against today's (the reference, the same
run), the largest per-workload cycle increase, and the evaluations and seconds the variant's
search would have spent.

    .venv/bin/python bench/bench_knob_search.py [--families vgg11,mobilenet_v1] [--onnx-dir D]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from record import write_record  # noqa: E402

#: (finalists, budget) of each variant; the first is today's search
VARIANTS = [(4, 24), (3, 24), (2, 24), (1, 24), (2, 16), (1, 16), (4, 16), (2, 12)]


def _instrument(log: Path) -> None:
    """Wrap defaults.search: the real search, then the variants on memoized calls; one JSON
    line per workload appended to ``log`` (workers of a compile append too)."""
    from vta.compiler.topi import defaults
    from vta.isa.errors import VTAError

    real = defaults.search

    def search(space, valid, seed_keys, cost, budget=defaults.BUDGET, rank=None,  # noqa: ANN001
               finalists=defaults.FINALISTS, insns=None):  # noqa: ANN202
        calls: dict[tuple, tuple[str, Any, float]] = {}  # (kind, knobs) -> (outcome, value, s)

        def memo(kind: str, fn: Any) -> Any:
            def call(k: dict[str, int]) -> Any:
                key = (kind, tuple(sorted(k.items())))
                if key not in calls:
                    t0 = time.process_time()
                    try:
                        calls[key] = ("ok", fn(k), time.process_time() - t0)
                    except VTAError as e:
                        calls[key] = ("err", e, time.process_time() - t0)
                outcome, v, _ = calls[key]
                if outcome == "err":
                    raise v
                return v
            return call

        mcost = memo("cost", cost)
        mrank = memo("rank", rank) if rank is not None else None
        out = {}
        base = None
        for f, b in VARIANTS:
            used: set = set()

            def track(fn: Any, kind: str, used: set = used) -> Any:
                def g(k: dict[str, int]) -> Any:
                    used.add((kind, tuple(sorted(k.items()))))
                    return fn(k)
                return g

            ch = real(space, valid, seed_keys, track(mcost, "cost"), b,
                      track(mrank, "rank") if mrank else None, f, insns)
            secs = sum(calls[u][2] for u in used if u in calls)
            out[f"{f}/{b}"] = {"knobs": ch.knobs, "cycles": ch.cycles, "evaluations": len(used),
                               "seconds": round(secs, 4)}
            if base is None:
                base = ch
        with open(log, "a") as fh:  # one short line per write: appends do not interleave
            fh.write(json.dumps(out) + "\n")
        return base

    defaults.search = search


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ref = f"{VARIANTS[0][0]}/{VARIANTS[0][1]}"
    res = {}
    for f, b in VARIANTS:
        v = f"{f}/{b}"
        diff = [r for r in rows if r[v]["knobs"] != r[ref]["knobs"]]
        worse = [r[v]["cycles"] / r[ref]["cycles"] - 1 for r in rows]
        res[v] = {"finalists": f, "budget": b, "workloads": len(rows),
                  "other_knobs": len(diff),
                  "slower_workloads": sum(w > 1e-12 for w in worse),
                  "cycles": round(sum(r[v]["cycles"] for r in rows)),
                  "cycles_ratio": round(sum(r[v]["cycles"] for r in rows)
                                        / sum(r[ref]["cycles"] for r in rows), 6),
                  "max_slowdown": round(max(worse), 6),
                  "evaluations": sum(r[v]["evaluations"] for r in rows),
                  "search_cpu_s": round(sum(r[v]["seconds"] for r in rows), 2)}
    return res


def main() -> None:
    import bench_models
    import torch_families

    ap = argparse.ArgumentParser()
    ap.add_argument("--families", default=",".join(torch_families.FAMILIES))
    ap.add_argument("--onnx-dir", default="", help="take NAME.onnx from here when it exists")
    ap.add_argument("--jobs", type=int, default=None, help="compile_graph's worker processes")
    args = ap.parse_args()
    from vta.compiler.graph.module import compile_graph
    from vta.compiler.graph.onnx_frontend import load_onnx
    from vta.isa import Config

    with tempfile.TemporaryDirectory(prefix="bench-knobs-") as td:
        wd = Path(td)
        os.environ["VTA_CACHE_DIR"] = str(wd / "cache")
        log = wd / "searches.jsonl"
        _instrument(log)
        for name in args.families.split(","):
            path = Path(args.onnx_dir) / f"{name}.onnx" if args.onnx_dir else None
            if path is None or not path.exists():
                path = wd / f"{name}.onnx"
                bench_models.export(name, 224, path)
            t0 = time.perf_counter()
            compile_graph(load_onnx(path), Config(), jobs=args.jobs)
            n = len(log.read_text().splitlines()) if log.exists() else 0
            print(f"{name:20} compiled in {time.perf_counter() - t0:6.1f} s; {n} workloads "
                  f"searched so far", flush=True)
        rows = [json.loads(x) for x in log.read_text().splitlines()]
    res = summarize(rows)
    ref = f"{VARIANTS[0][0]}/{VARIANTS[0][1]}"
    for r in res.values():
        print(f"finalists {r['finalists']} budget {r['budget']:2}: {r['other_knobs']:3} of "
              f"{r['workloads']} workloads choose other knobs, {r['slower_workloads']} slower; "
              f"cycles {r['cycles_ratio']:.6f} x today's (max +{100 * r['max_slowdown']:.3f}% "
              f"on one workload); {r['evaluations']} evaluations, {r['search_cpu_s']} CPU s")
    figures = {v: r for v, r in res.items() if v != ref}
    path = write_record("bench_knob_search", figures, {ref: res[ref]},
                        params={"families": args.families.split(","), "variants": VARIANTS,
                                "size": 224, "config": "default (1x16x16)"})
    print(f"record: {path}")


if __name__ == "__main__":
    main()
