"""`vta compile` time, cold (empty knob cache) and warm, of the zoo's ResNet-18 and of network
families exported by bench_models (VGG-11, MobileNet-v1, EfficientNet-B0, ...).

Each compile runs as its own process (``vta compile MODEL -o DIR --jobs N``) with a fresh
``VTA_CACHE_DIR`` for the cold run, then again with that cache for the warm one; the figures
are wall seconds and the CPU seconds of the process and its worker processes (user + system,
from ``os.wait4``), since the machine may be shared. The compiles run one after another (each
has the CPUs for its N workers). The reference, measured in the same run, is the same compiles
by another checkout's Python (``--baseline-python``, e.g. main's ``.venv/bin/python``; given
``--baseline-jobs`` when that checkout has the option). Goals
(issues 20, 21): ResNet-18 <= 30 s cold and <= 3 s warm; each family <= 10 s. The quality of
the default knobs is compared too: the VTA cycles (vta.sim.perf, from the manifests) of the
knobs each checkout's search chose, in all and per layer (layers where the new choice is
slower are counted), and whether both chose the same knobs.

    .venv/bin/python bench/bench_compile_time.py [--models resnet18,vgg11,mobilenet_v1]
        [--baseline-python /work/main/.venv/bin/python] [--jobs N] [--baseline-jobs N]
        [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from record import write_record  # noqa: E402

GOALS = {"resnet18": {"cold_s": 30.0, "warm_s": 3.0}, "vgg11": {"cold_s": 10.0},
         "mobilenet_v1": {"cold_s": 10.0}, "efficientnet_b0": {"cold_s": 10.0}}
_ENTRY = "import sys; from vta.cli.main import entry; sys.argv[0] = 'vta'; sys.exit(entry())"


def make_model(name: str, python: str, workdir: Path) -> Path:
    """The ONNX model: ResNet-18 from `vta zoo`; the others exported by bench_models
    (PyTorch, 224x224)."""
    path = workdir / f"{name}.onnx"
    if name == "resnet18":
        subprocess.run([python, "-c", _ENTRY, "zoo", "resnet18", "-o", str(path)], check=True,
                       capture_output=True)
    else:
        import bench_models

        bench_models.export(name, 224, path)
    return path


def compile_once(python: str, model: Path, out: Path, cache: Path,
                 jobs: int | None) -> dict[str, float]:
    """One `vta compile` process (``--jobs`` unless None): wall and CPU seconds (its own and
    its reaped worker processes')."""
    env = dict(os.environ, VTA_CACHE_DIR=str(cache), OPENBLAS_NUM_THREADS="1")
    argv = [python, "-c", _ENTRY, "compile", str(model), "-o", str(out)]
    argv += ["--jobs", str(jobs)] if jobs else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = p.communicate()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the compile and its workers
    if p.returncode != 0:
        raise SystemExit(f"vta compile {model.name} with {python} failed: "
                         f"{err.decode().strip()[-400:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def layer_knobs(module: Path) -> dict[str, Any]:
    """Per VTA layer: the knobs and their perf-model cycles (from the manifest)."""
    man = json.loads((module / "manifest.json").read_text())
    return {name: {"knobs": k["knobs"], "cycles": k["cycles"]}
            for name, k in man["kernels"].items()}


def compare(new: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The chosen knobs' cycles, new against baseline."""
    common = sorted(new.keys() & base.keys())
    nc = sum(new[k]["cycles"] for k in common)
    bc = sum(base[k]["cycles"] for k in common)
    return {"layers": len(common), "cycles": nc, "baseline_cycles": bc,
            "cycles_ratio": round(nc / bc, 5) if bc else None,
            "slower_layers": sum(new[k]["cycles"] > base[k]["cycles"] for k in common),
            "faster_layers": sum(new[k]["cycles"] < base[k]["cycles"] for k in common),
            "same_knobs": all(new[k]["knobs"] == base[k]["knobs"] for k in common)}


def chain(python: str, model: Path, workdir: Path, tag: str, jobs: int | None
          ) -> dict[str, Any]:
    """Cold then warm compile with one fresh knob cache."""
    cache = Path(tempfile.mkdtemp(prefix=f"cache-{tag}-", dir=workdir))
    out = workdir / f"{tag}.vtam"
    cold = compile_once(python, model, out, cache, jobs)
    warm = compile_once(python, model, out, cache, jobs)
    return {"cold": cold, "warm": warm, "knobs": layer_knobs(out)}


def fastest(tries: list[dict[str, Any]]) -> dict[str, Any]:
    """The fastest cold and the fastest warm compile (by wall time) of repeated chains."""
    return {"cold": min((t["cold"] for t in tries), key=lambda c: c["wall_s"]),
            "warm": min((t["warm"] for t in tries), key=lambda c: c["wall_s"]),
            "knobs": tries[0]["knobs"], "runs": len(tries)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,vgg11,mobilenet_v1")
    ap.add_argument("--baseline-python", default="/work/main/.venv/bin/python",
                    help="the Python of the checkout to compare against ('' to skip)")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                    help="vta compile --jobs N (default: the CPUs this process may use)")
    ap.add_argument("--baseline-jobs", type=int, default=0,
                    help="the baseline's vta compile --jobs (0: it has no such option)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="cold + warm chains per model and checkout; the fastest is kept")
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as td:
        wd = Path(td)
        paths = {m: make_model(m, sys.executable, wd) for m in models}
        runs = {(m, "new"): (sys.executable, args.jobs) for m in models}
        if args.baseline_python:
            runs.update({(m, "baseline"): (args.baseline_python, args.baseline_jobs or None)
                         for m in models})
        # one after another, alternating checkouts: each compile has the CPUs to itself; on
        # a shared machine the fastest of --repeat runs is the least disturbed one
        tries: dict[tuple[str, str], list[dict[str, Any]]] = {k: [] for k in runs}
        for r in range(args.repeat):
            for k, (py, jobs) in sorted(runs.items()):
                tries[k].append(chain(py, paths[k[0]], wd, f"{k[0]}-{k[1]}-{r}", jobs))
        res = {k: fastest(t) for k, t in tries.items()}
    figures, reference = {}, {}
    for m in models:
        new = res[(m, "new")]
        figures[m] = {"cold": new["cold"], "warm": new["warm"]}
        print(f"{m:16} cold {new['cold']['wall_s']:7.1f} s wall {new['cold']['cpu_s']:7.1f} s "
              f"CPU   warm {new['warm']['wall_s']:6.1f} s wall {new['warm']['cpu_s']:6.1f} s CPU"
              f"   goals {GOALS.get(m, {})}")
        if (m, "baseline") in res:
            base = res[(m, "baseline")]
            reference[m] = {"cold": base["cold"], "warm": base["warm"]}
            q = compare(new["knobs"], base["knobs"])
            figures[m]["knobs_vs_baseline"] = q
            for t in ("cold", "warm"):
                for u in ("wall", "cpu"):
                    figures[m][f"{t}_{u}_speedup"] = round(
                        base[t][f"{u}_s"] / max(new[t][f"{u}_s"], 1e-9), 2)
            print(f"{'baseline':16} cold {base['cold']['wall_s']:7.1f} s wall "
                  f"{base['cold']['cpu_s']:7.1f} s CPU   warm {base['warm']['wall_s']:6.1f} s "
                  f"wall {base['warm']['cpu_s']:6.1f} s CPU")
            sp = {k: v for k, v in figures[m].items() if k.endswith("_speedup")}
            print(f"{'':16} baseline / new: " + ", ".join(f"{k[:-8]} {v}x" for k, v in sp.items()))
            print(f"{'':16} chosen knobs: {q['cycles']:.0f} VTA cycles vs baseline "
                  f"{q['baseline_cycles']:.0f} ({q['cycles_ratio']}); {q['slower_layers']} of "
                  f"{q['layers']} layers slower, {q['faster_layers']} faster; same knobs: "
                  f"{q['same_knobs']}")
    path = write_record("bench_compile_time", figures, reference or None,
                        params={"models": models, "baseline_python": args.baseline_python,
                                "jobs": args.jobs, "baseline_jobs": args.baseline_jobs or None,
                                "cpus": len(os.sched_getaffinity(0)), "repeat": args.repeat,
                                "load_avg": [round(x, 2) for x in os.getloadavg()],
                                "goals": GOALS})
    print(f"record: {path}")


if __name__ == "__main__":
    main()
