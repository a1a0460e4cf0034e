"""Benchmark: the functional simulator on a tiled int8 matmul against numpy's float64 matmul.

    .venv/bin/python bench/bench_fsim_matmul.py [--size 1024] [--repeat 3] [--threads 1]

Builds C = A @ B.T (M = N = K = size, int8) as a VTA instruction stream for the default config
(vta.sim.programs.matmul_program), runs it on fsim (a fresh simulator each time, best of
--repeat) and times numpy's float64 ``A @ B.T`` of the same shape in the same process (BLAS,
exact for int8 products). Prints both times, their ratio (the goal is fsim within 3x of numpy)
and the simulated micro-op rate. --threads sets the BLAS thread count for both sides (default 1:
stable figures on a shared machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from record import write_record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (best is kept)")
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS threads for both fsim and the numpy reference (default 1)")
    args = ap.parse_args(argv)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)  # must happen before numpy is imported

    import numpy as np
    from vta.isa import Config
    from vta.sim.fsim import FunctionalSim
    from vta.sim.programs import matmul_program

    cfg = Config()
    n = args.size
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (n, n), dtype=np.int64)
    b = rng.integers(-128, 128, (n, n), dtype=np.int64)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    want = (a @ b.T).astype(np.int32).astype(np.int8)

    ref = min(_time(lambda: af @ bf.T) for _ in range(args.repeat))
    print(f"matmul {n}x{n}x{n}, int8, default config "
          f"({cfg.batch}x{cfg.block_in}x{cfg.block_out} GEMM core), BLAS threads {args.threads}")
    print(f"  numpy float64 A @ B.T:  {ref * 1e3:8.1f} ms  (reference)")
    worst = 0.0
    fig: dict[str, dict] = {}
    for db in (False, True):
        t0 = time.perf_counter()
        mm = matmul_program(cfg, n, n, n, a=a, b=b, double_buffer=db)
        build = time.perf_counter() - t0
        best, stats, sim = float("inf"), None, None
        for _ in range(args.repeat):
            sim = FunctionalSim(cfg, blas_threads=args.threads)
            dram = mm.dram.copy()
            t0 = time.perf_counter()
            stats = sim.run(mm.program, dram)
            best = min(best, time.perf_counter() - t0)
            if not np.array_equal(mm.plan.read_c(dram), want):
                print("  ERROR: fsim result differs from numpy", file=sys.stderr)
                return 1
        uops = stats.gemm_uops + stats.alu_uops
        t = mm.plan.tiling
        label = "double-buffered" if db else "single-buffered"
        print(f"  fsim, {label:15}: {best * 1e3:8.1f} ms  ratio {best / ref:5.2f}x numpy  "
              f"({stats.insn_count} insns, tiles m{t.tm} n{t.tn} k{t.tk} elements, "
              f"{sim.fast_gemms} fast GEMMs, {uops / best / 1e6:6.1f} M micro-ops/s, "
              f"{2 * n ** 3 / best / 1e9:5.1f} GOP/s; program built in {build * 1e3:.0f} ms)")
        worst = max(worst, best / ref)
        fig[label] = {"ms": best * 1e3, "ratio_to_numpy": best / ref,
                      "insns": stats.insn_count, "muops_per_s": uops / best / 1e6}
    print(f"  goal: fsim within 3x of numpy -> {'met' if worst <= 3 else 'NOT met'} "
          f"(worst ratio {worst:.2f}x)")
    write_record("bench_fsim_matmul", {"n": n, **fig, "worst_ratio": worst},
                 {"numpy_float64_ms": ref * 1e3}, params=vars(args))
    return 0


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
