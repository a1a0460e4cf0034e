"""tsim benchmark: simulation speed and GEMM utilisation with and without latency hiding.

Prints, for the default (PYNQ 1x16x16) configuration on tsim (Verilator, PYNQ-Z1-like memory:
32-cycle latency, 8 bytes/cycle):

1. simulated cycles per second of tsim, against the Amaranth-simulator backend measured on a
   short program in the same run (goal: >= 300k cycles/s);
2. a compute-bound M x N x K int8 matmul (default 1024^3; ``--size``) as a single-buffered
   instruction stream and as the double-buffered one (two interleaved virtual threads, loads of
   step s+1 overlapping the GEMM of step s): GEMM utilisation = useful MACs / (cycles x 256),
   goal >= 90% with overlap. Both results are checked against numpy.

Usage: ``.venv/bin/python bench/bench_tsim.py [--size 1024] [--quick]`` (the first run builds the
Verilator model, a few minutes; later runs use the cache).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from record import write_record
from vta.hw import tsim
from vta.isa import Config
from vta.sim.programs import matmul_program


def run_matmul(cfg: Config, size: int, *, double_buffer: bool, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (size, size), dtype=np.int64)
    b = rng.integers(-128, 128, (size, size), dtype=np.int64)
    t0 = time.perf_counter()
    mm = matmul_program(cfg, size, size, size, a=a, b=b, double_buffer=double_buffer)
    t_gen = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    r = tsim.run_program(mm.program, mm.dram, cfg)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ok = bool((mm.read_c(r.dram) == mm.plan.reference(a, b)).all())
    s = r.stats
    return {"cycles": s.cycles, "wall": wall, "cpu": cpu, "gen": t_gen,
            "util": s.gemm_utilization, "insns": s.insn_count, "ok": ok,
            "modules": s.modules, "read": s.hw_counters["bytes_read"],
            "written": s.hw_counters["bytes_written"]}


def amaranth_speed(cfg: Config) -> tuple[float, float]:
    """Cycles per wall / CPU second of the Amaranth-simulator backend on a small matmul
    (the reference; elaboration excluded by timing a second, identical run)."""
    from vta.hw.simulate import run_programs

    mm = matmul_program(cfg, 16, 32, 32, seed=2)
    jobs = [(mm.program, mm.dram)]
    t0, c0 = time.perf_counter(), time.process_time()
    one = run_programs(jobs, cfg, mem_latency=32)
    t1, c1 = time.perf_counter(), time.process_time()
    run_programs(jobs * 2, cfg, mem_latency=32)
    t2, c2 = time.perf_counter(), time.process_time()
    cycles = one[0].stats.cycles
    return cycles / ((t2 - t1) - (t1 - t0)), cycles / ((c2 - c1) - (c1 - c0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024, help="matmul M = N = K (default 1024)")
    ap.add_argument("--quick", action="store_true", help="size 256, no Amaranth reference")
    args = ap.parse_args()
    size = 256 if args.quick else args.size
    cfg = Config()
    t0 = time.perf_counter()
    build = tsim.build(cfg)
    print(f"tsim model: {build.path} (ready in {time.perf_counter() - t0:.1f} s)")

    results = {}
    for db in (False, True):
        r = run_matmul(cfg, size, double_buffer=db)
        results[db] = r
        name = "double-buffered" if db else "single-buffered"
        print(f"{size}^3 matmul, {name}: {r['insns']} instructions, {r['cycles']:,} cycles, "
              f"GEMM utilisation {100 * r['util']:.1f}%, {r['wall']:.1f} s wall "
              f"({r['cycles'] / r['wall'] / 1e3:.0f}k cycles/s), matches numpy: {r['ok']}")
        for m, v in r["modules"].items():
            print(f"    {m:8s} busy {v.busy:>10,}  token wait {v.token_wait:>10,}  "
                  f"memory wait {v.mem_wait:>10,}")
        print(f"    bytes read {r['read']:,}, written {r['written']:,}")
    single, double = results[False], results[True]
    print(f"latency hiding: utilisation {100 * single['util']:.1f}% -> "
          f"{100 * double['util']:.1f}% (goal >= 90%), speed-up "
          f"{single['cycles'] / double['cycles']:.2f}x")
    total_cycles = single["cycles"] + double["cycles"]
    total_wall = single["wall"] + double["wall"]
    total_cpu = single["cpu"] + double["cpu"]
    speed = total_cycles / total_wall
    print(f"tsim speed: {speed / 1e3:.0f}k simulated cycles per wall-clock second, "
          f"{total_cycles / total_cpu / 1e3:.0f}k per CPU second (goal >= 300k; the two differ "
          f"when other processes share the cores)")
    fig = {"size": size, "util_single_pct": 100 * single["util"],
           "util_double_pct": 100 * double["util"], "cycles_single": single["cycles"],
           "cycles_double": double["cycles"], "kcycles_per_wall_s": speed / 1e3,
           "kcycles_per_cpu_s": total_cycles / total_cpu / 1e3}
    ref = {"numpy_matches": bool(single["ok"] and double["ok"])}
    if not args.quick:
        ref_wall, ref_cpu = amaranth_speed(cfg)
        ref["amaranth_cycles_per_cpu_s"] = ref_cpu
        fig["speedup_vs_amaranth"] = total_cycles / total_cpu / ref_cpu
        print(f"Amaranth-simulator backend (same core, same run): {ref_wall:,.0f} cycles per "
              f"wall second, {ref_cpu:,.0f} per CPU second; tsim is "
              f"{total_cycles / total_cpu / ref_cpu:,.0f}x faster (CPU time)")
    write_record("bench_tsim", fig, ref, params=vars(args))


if __name__ == "__main__":
    main()
