"""The TVM-slides example: an int8 matrix multiply tensorized onto VTA's GEMM, then with virtual
threads for latency hiding. Ported from TVM's VTA tutorials by changing the imports.

    .venv/bin/python examples/matmul_tensorize.py [--preset small] [--size 64]

Prints the loop IR of both schedules, checks both against numpy on the functional simulator
(and under every module ordering with the race checker) and compares instruction counts.
"""

from __future__ import annotations

import argparse

import numpy as np
from vta.compiler import Env, build, lower_vta, te
from vta.isa import Config


def matmul(env: Env, m: int, n: int, k: int, *, bo_tile: int, co_tile: int, ko_tile: int,
           virtual_threads: int = 1):
    """C[M, N] = A[M, K] . B[N, K]^T on packed tiles, int8 x int8 -> int32 -> int8."""
    # tensor expressions (TVM spelling) ------------------------------------------------
    A = te.placeholder((m, k, env.BATCH, env.BLOCK_IN), name="A", dtype=env.inp_dtype)
    B = te.placeholder((n, k, env.BLOCK_OUT, env.BLOCK_IN), name="B", dtype=env.wgt_dtype)
    A_buf = te.compute(A.shape, lambda *i: A(*i), "A_buf")
    B_buf = te.compute(B.shape, lambda *i: B(*i), "B_buf")
    ko = te.reduce_axis((0, k), name="ko")
    ki = te.reduce_axis((0, env.BLOCK_IN), name="ki")
    C_buf = te.compute(
        (m, n, env.BATCH, env.BLOCK_OUT),
        lambda bo, co, bi, ci: te.sum(
            A_buf[bo, ko, bi, ki].astype(env.acc_dtype)
            * B_buf[co, ko, ci, ki].astype(env.acc_dtype), axis=[ko, ki]),
        name="C_buf")
    C_shr = te.compute(C_buf.shape, lambda *i: te.clip(C_buf(*i) >> 6, -127, 127), name="C_shr")
    C = te.compute(C_buf.shape, lambda *i: C_shr(*i).astype(env.inp_dtype), name="C")

    # schedule ---------------------------------------------------------------------------
    s = te.create_schedule(C.op)
    s[A_buf].set_scope(env.inp_scope)
    s[B_buf].set_scope(env.wgt_scope)
    s[C_buf].set_scope(env.acc_scope)
    s[C_shr].set_scope(env.acc_scope)
    bo, co, bi, ci = s[C].op.axis
    bo_o, bo_i = s[C].split(bo, factor=bo_tile)
    co_o, co_i = s[C].split(co, factor=co_tile)
    s[C].reorder(bo_o, co_o, bo_i, co_i, bi, ci)
    if virtual_threads > 1:
        tx, co_o = s[C].split(co_o, nparts=virtual_threads)
        s[C].reorder(tx, bo_o)
        s[C].bind(tx, te.thread_axis("cthread"))
    s[C_buf].compute_at(s[C], co_o)
    s[C_shr].compute_at(s[C], co_o)
    cbo, cco, cbi, cci = s[C_buf].op.axis
    ko_o, ko_i = s[C_buf].split(ko, factor=ko_tile)
    s[C_buf].reorder(ko_o, cbo, cco, ko_i, cbi, cci, ki)
    s[A_buf].compute_at(s[C_buf], ko_o)
    s[B_buf].compute_at(s[C_buf], ko_o)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    s[C_shr].pragma(s[C_shr].op.axis[0], env.alu)
    s[C].pragma(bo_i, env.dma_copy)
    s[C_buf].tensorize(cbi, env.gemm)
    return s, [A, B, C]


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    acc = np.einsum("mkbi,nkoi->mnbo", a.astype(np.int64), b.astype(np.int64)).astype(np.int32)
    return np.clip(acc >> 6, -127, 127).astype(np.int8)


def run(cfg: Config, size: int, *, show_ir: bool = True, race_check: bool = True) -> dict:
    env = Env(cfg)
    m = size // env.BATCH
    n = size // env.BLOCK_OUT
    k = size // env.BLOCK_IN
    rng = np.random.default_rng(42)
    a = rng.integers(-128, 128, (m, k, env.BATCH, env.BLOCK_IN), dtype=np.int8)
    b = rng.integers(-128, 128, (n, k, env.BLOCK_OUT, env.BLOCK_IN), dtype=np.int8)
    ref = reference(a, b)
    results = {}
    for vt in (1, 2):
        tiles = dict(bo_tile=min(m, 2), co_tile=max(1, n // 4), ko_tile=max(1, k // 2))
        s, args = matmul(env, m, n, k, virtual_threads=vt, **tiles)
        if show_ir:
            print(f"--- loop IR, {vt} virtual thread(s) ---")
            print(lower_vta(s, args, cfg, "matmul"))
        f = build(s, args, target="fsim", config=cfg, name="matmul")
        c = np.zeros(ref.shape, np.int8)
        stats = f(a, b, c)
        ok = bool(np.array_equal(c, ref))
        if race_check:
            ok = ok and bool(np.array_equal(f.check_races(a, b, c)[0], ref))
        results[vt] = {"ok": ok, "insns": stats.insn_count, "gemm_uops": stats.gemm_uops}
        print(f"{vt} virtual thread(s): {'OK' if ok else 'MISMATCH'}, "
              f"{stats.insn_count} instructions, {stats.gemm_uops} GEMM micro-ops")
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default=None, help="configuration preset (default: PYNQ)")
    ap.add_argument("--size", type=int, default=64, help="matrix size (multiple of BLOCK)")
    ap.add_argument("--quiet", action="store_true", help="do not print the IR")
    args = ap.parse_args(argv)
    cfg = Config.preset(args.preset) if args.preset else Config()
    res = run(cfg, args.size, show_ir=not args.quiet)
    return 0 if all(r["ok"] for r in res.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
