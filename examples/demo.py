"""The kit's demo (``make demo``): a VTA matmul program, simulated and checked against numpy.

1. Assembles examples/matmul.s (a hand-written, commented, double-buffered 16x32x64 int8 matmul
   with a requantising shift and clip) and its micro-ops examples/matmul_uops.s, lays out A and B
   in a DRAM image, runs it on the functional simulator under every scheduling order (a race
   check of its dependency tokens) and compares C with numpy.
2. Builds a larger tiled matmul with vta.sim.programs.matmul_program (256x256x256, double
   buffered), runs it, compares with numpy and times fsim against numpy's float64 matmul.
3. Prints the statistics of both runs.

Exits with status 1 if any result differs from numpy. Runs on the embedded default (PYNQ
1x16x16) configuration in a few seconds.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from vta.isa import Config
from vta.isa.asm import assemble_bytes, assemble_uops_bytes
from vta.isa.stats import RunStats
from vta.sim import fsim
from vta.sim.programs import matmul_program, pack_tiles, unpack_tiles

HERE = Path(__file__).resolve().parent

# the DRAM layout described at the top of matmul.s (byte addresses)
UOP_AT, A_AT, B_AT, C_AT, DRAM_BYTES = 0, 64, 1280, 3328, 4096
M, N, K = 16, 32, 64


def reference(a: np.ndarray, b: np.ndarray, shift: int, lo: int, hi: int) -> np.ndarray:
    acc = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32)
    return np.clip(acc >> shift, lo, hi).astype(np.int8)


def run_assembled(cfg: Config, rng: np.random.Generator) -> tuple[bool, RunStats]:
    program = assemble_bytes((HERE / "matmul.s").read_text(), cfg, filename="matmul.s")
    uops = assemble_uops_bytes((HERE / "matmul_uops.s").read_text(), cfg,
                               filename="matmul_uops.s")
    a = rng.integers(-128, 128, (M, K), dtype=np.int64)
    b = rng.integers(-128, 128, (N, K), dtype=np.int64)
    dram = np.zeros(DRAM_BYTES, np.uint8)
    dram[UOP_AT:UOP_AT + len(uops)] = np.frombuffer(uops, np.uint8)
    at = pack_tiles(a.astype(np.int8), cfg.batch, cfg.block_in).view(np.uint8).ravel()
    bt = pack_tiles(b.astype(np.int8), cfg.block_out, cfg.block_in).view(np.uint8).ravel()
    dram[A_AT:A_AT + at.size] = at
    dram[B_AT:B_AT + bt.size] = bt

    result = fsim.check_races(program, dram, cfg)  # every scheduling order, same result
    out = result.dram[C_AT:C_AT + M * N].view(np.int8)
    c = unpack_tiles(out.reshape(-1, cfg.batch, cfg.block_out), M, N)
    ok = bool(np.array_equal(c, reference(a, b, 6, 0, 127)))
    print(f"1. examples/matmul.s: {len(program) // 16} instructions, C[{M}x{N}] = "
          f"clip((A[{M}x{K}] . B[{N}x{K}]^T) >> 6, 0, 127): "
          f"{'matches numpy' if ok else 'DIFFERS FROM NUMPY'} (race check passed)")
    return ok, result.stats


def run_generated(cfg: Config, rng: np.random.Generator, n: int = 256) -> tuple[bool, RunStats]:
    a = rng.integers(-128, 128, (n, n), dtype=np.int64)
    b = rng.integers(-128, 128, (n, n), dtype=np.int64)
    mm = matmul_program(cfg, n, n, n, a=a, b=b, shift=8, clip=(-128, 127), double_buffer=True)
    t0 = time.perf_counter()
    result = fsim.run(mm.program, mm.dram, cfg)
    t_sim = time.perf_counter() - t0
    ok = bool(np.array_equal(mm.plan.read_c(result.dram), reference(a, b, 8, -128, 127)))
    t = mm.plan.tiling
    print(f"2. matmul_program {n}x{n}x{n}, double-buffered, tiles {t.tm}x{t.tn}x{t.tk} "
          f"elements: {len(mm.program) // 16} instructions: "
          f"{'matches numpy' if ok else 'DIFFERS FROM NUMPY'}; simulated in "
          f"{t_sim * 1e3:.1f} ms ({2 * n ** 3 / t_sim / 1e9:.1f} GOP/s; "
          f"bench/bench_fsim_matmul.py compares with numpy)")
    return ok, result.stats


def main() -> int:
    cfg = Config()
    d = cfg.describe()["derived"]
    print(f"VTA functional simulator demo, default config: {d['batch']}x{d['block_in']}x"
          f"{d['block_out']} int8 GEMM core, buffers inp {d['inp_depth']} wgt "
          f"{d['wgt_depth']} acc {d['acc_depth']} uop {d['uop_depth']} entries")
    rng = np.random.default_rng(2024)
    ok1, stats1 = run_assembled(cfg, rng)
    ok2, stats2 = run_generated(cfg, rng)
    for title, stats in (("statistics of 1", stats1), ("statistics of 2", stats2)):
        print(f"{title}:")
        print("  " + json.dumps(stats.to_json(), sort_keys=True).replace(", \"", ",\n  \""))
    if not (ok1 and ok2):
        print("demo FAILED: a result differs from numpy", file=sys.stderr)
        return 1
    print("demo OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
