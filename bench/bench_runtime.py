"""Command-queue overhead: instructions generated per second, and the share the runtime adds to
the functional simulator's time on a matmul driven through the runtime (goal <= 10%).

Reference (measured in the same run): the very same instruction streams, pre-encoded, run directly
on ``vta.sim.fsim.FunctionalSim`` with the same DRAM images. Times are process CPU times (best of
``--repeat``), since the machine may be shared.

    .venv/bin/python bench/bench_runtime.py [--rows 256] [--k 16] [--n 16] [--repeat 7]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import vta.runtime as rt
from record import write_record
from vta.isa import Config
from vta.sim.fsim import FunctionalSim


def emit_matmul(cq: rt.CommandQueue, A: rt.DeviceBuffer, W: rt.DeviceBuffer, C: rt.DeviceBuffer,
                m: int, n: int, k: int) -> None:
    """One row tile per iteration, double-buffered input and accumulator, TVM-style tokens;
    GEMM, then requantize (shift right, clip) with three ALU ops, then store."""
    cq.dep_push("compute", "load")
    cq.dep_push("compute", "load")
    cq.load_buffer_2d(W, 0, n * k, 1, n * k, dst_sram_index=0, dst_memory_type="wgt")
    for i in range(m):
        b = i % 2
        cq.dep_pop("compute", "load")
        cq.load_buffer_2d(A, i * k, k, 1, k, dst_sram_index=b * k, dst_memory_type="inp")
        cq.dep_push("load", "compute")
        cq.dep_pop("load", "compute")
        if i >= 2:
            cq.dep_pop("store", "compute")
        cq.push_gemm(cq.kernel(("reset", b, n), lambda kr, b=b: _reset(kr, b, n)))
        cq.push_gemm(cq.kernel(("gemm", b, n, k), lambda kr, b=b: _gemm(kr, b, n, k)))
        for op, imm in (("shr", 8), ("max", -128), ("min", 127)):
            cq.push_alu(cq.kernel((op, b, n, imm),
                                  lambda kr, b=b, op=op, imm=imm: _alu(kr, b, n, op, imm)))
        cq.dep_push("compute", "load")
        cq.dep_push("compute", "store")
        cq.dep_pop("compute", "store")
        cq.store_buffer_2d(b * n, "out", C, i * n, n, 1, n)
        cq.dep_push("store", "compute")


def _reset(kr: rt.UopKernel, b: int, n: int) -> None:
    with kr.loop(n, dst_factor=1):
        kr.push("gemm", True, b * n, 0, 0)


def _gemm(kr: rt.UopKernel, b: int, n: int, k: int) -> None:
    with kr.loop(k, dst_factor=0, src_factor=1, wgt_factor=1):
        for j in range(n):
            kr.push("gemm", False, b * n + j, b * k, j * k)


def _alu(kr: rt.UopKernel, b: int, n: int, op: str, imm: int) -> None:
    with kr.loop(n, dst_factor=1, src_factor=1):
        kr.push("alu", False, b * n, b * n, alu_opcode=op, use_imm=True, imm=imm)


class TimedFsim(rt.FsimDevice):
    """fsim that can keep the programs it runs (with their starting DRAM image) and measures the
    CPU time of the simulator itself."""

    def __init__(self, cfg: Config, **kw) -> None:
        super().__init__(cfg, **kw)
        self.captured: list[tuple[bytes, np.ndarray]] = []
        self.capture = False
        self.sim_seconds = 0.0

    def _execute(self, program, timeout):
        if self.capture:
            self.captured.append((program, self.dram.copy()))
        t0 = time.process_time()
        try:
            return super()._execute(program, timeout)
        finally:
            self.sim_seconds += time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=256, help="row tiles (M / batch)")
    ap.add_argument("--k", type=int, default=16, help="reduction tiles (K / block_in)")
    ap.add_argument("--n", type=int, default=16, help="column tiles (N / block_out)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    cfg = Config()
    m, n, k = args.rows, args.n, args.k
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (m, k, cfg.batch, cfg.block_in), dtype=np.int8)
    w = rng.integers(-128, 128, (n, k, cfg.block_out, cfg.block_in), dtype=np.int8)
    print(f"matmul {m * cfg.batch}x{k * cfg.block_in} @ {k * cfg.block_in}x{n * cfg.block_out} "
          f"int8, config {cfg.batch}x{cfg.block_in}x{cfg.block_out}")

    # 1. pure generation speed (record mode: no device)
    best_gen, n_insns = float("inf"), 0
    for _ in range(args.repeat):
        arena = rt.Arena(cfg, 1 << 24)
        A0 = arena.alloc(a.nbytes, mem_type="inp")
        W0 = arena.alloc(w.nbytes, mem_type="wgt")
        C0 = arena.alloc(m * n * cfg.out_elem_bytes, mem_type="out")
        rq = rt.CommandQueue.recorder(cfg, arena)
        t0 = time.process_time()
        emit_matmul(rq, A0, W0, C0, m, n, k)
        rec = rq.record()
        best_gen = min(best_gen, time.process_time() - t0)
        n_insns = rec.insn_count
    print(f"generation: {n_insns} instructions in {best_gen * 1e3:.1f} ms = "
          f"{n_insns / best_gen:,.0f} instructions/s ({best_gen / n_insns * 1e6:.2f} us each)")

    # 2. through the runtime on fsim vs the same programs straight on FunctionalSim
    def runtime_pass(capture: bool) -> tuple[float, TimedFsim, rt.CommandQueue, rt.DeviceBuffer]:
        dev = TimedFsim(cfg, arena_size=1 << 24)
        dev.capture = capture
        A = dev.array(a, mem_type="inp")
        W = dev.array(w, mem_type="wgt")
        C = dev.alloc(m * n * cfg.out_elem_bytes, mem_type="out")
        cq = dev.command_queue()
        t0 = time.process_time()
        emit_matmul(cq, A, W, C, m, n, k)
        cq.synchronize()
        return time.process_time() - t0, dev, cq, C

    _, dev, cq, C = runtime_pass(capture=True)  # untimed: programs for the reference, check
    acc = np.einsum("ikbx,jkox->ijbo", a.astype(np.int32), w.astype(np.int32))
    want = np.clip(acc >> 8, -128, 127).astype(np.int8)
    assert np.array_equal(C.numpy(np.int8, want.shape), want), "result differs from numpy"
    best_rt, best_ref, best_sim = float("inf"), float("inf"), float("inf")
    for _ in range(args.repeat):
        total, tdev, _, _ = runtime_pass(capture=False)
        best_rt = min(best_rt, total)
        best_sim = min(best_sim, tdev.sim_seconds)
        sim = FunctionalSim(cfg)
        runs = [(p, d.copy()) for p, d in dev.captured]
        t0 = time.process_time()
        for program, dram in runs:
            sim.run(program, dram)
        best_ref = min(best_ref, time.process_time() - t0)
    added = best_rt - best_ref
    print(f"fsim alone (reference): {best_ref * 1e3:.1f} ms CPU for the same "
          f"{cq.stats.insns} instructions ({cq.stats.programs} program(s))")
    print(f"through the runtime:    {best_rt * 1e3:.1f} ms CPU (fsim inside it: "
          f"{best_sim * 1e3:.1f} ms)")
    print(f"runtime share added to fsim's time: {added / best_ref * 100:.1f}% (goal <= 10%)")
    write_record("bench_runtime", {"generation_ms": best_gen * 1e3, "runtime_ms": best_rt * 1e3,
                                   "added_pct": added / best_ref * 100},
                 {"fsim_alone_ms": best_ref * 1e3}, params=vars(args))


if __name__ == "__main__":
    main()
