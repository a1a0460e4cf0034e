"""Helpers for the runtime tests: a tiled, double-buffered matmul written against the command
queue (the way the compiler drives it) and its numpy reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import vta.runtime as rt
from vta.isa import Config


@dataclass
class MatmulCase:
    """C[i, j] = clip((sum_kk A[i, kk] . W[j, kk]^T) >> shift) for m x n output tiles."""

    cfg: Config
    m: int
    n: int
    k: int
    shift: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        c = self.cfg
        rng = np.random.default_rng(self.seed)
        self.a = rng.integers(-128, 128, (self.m, self.k, c.batch, c.block_in), dtype=np.int8)
        self.w = rng.integers(-128, 128, (self.n, self.k, c.block_out, c.block_in), dtype=np.int8)

    def reference(self) -> np.ndarray:
        acc = np.einsum("ikbx,jkox->ijbo", self.a.astype(np.int64), self.w.astype(np.int64))
        acc = acc.astype(np.int32)  # int32 wrap-around (not reached by these sizes)
        if self.shift:
            acc = np.minimum(np.maximum(acc >> self.shift, -128), 127)
        return acc.astype(np.int8)  # STORE keeps the low bits

    def buffers(self, dev: rt.Device) -> tuple[rt.DeviceBuffer, rt.DeviceBuffer,
                                                rt.DeviceBuffer]:
        A = dev.array(self.a, mem_type="inp")
        W = dev.array(self.w, mem_type="wgt")
        C = dev.alloc(self.m * self.n * self.cfg.out_elem_bytes, mem_type="out")
        return A, W, C

    def result(self, C: rt.DeviceBuffer) -> np.ndarray:
        c = self.cfg
        return C.numpy(np.int8, (self.m, self.n, c.batch, c.block_out))

    def emit(self, cq: rt.CommandQueue, A: rt.DeviceBuffer, W: rt.DeviceBuffer,
             C: rt.DeviceBuffer) -> None:
        """Row tile by row tile with two input and two accumulator buffers, TVM-style tokens."""
        m, n, k = self.m, self.n, self.k
        cq.dep_push("compute", "load")  # both input buffers start free
        cq.dep_push("compute", "load")
        cq.load_buffer_2d(W, 0, n * k, 1, n * k, dst_sram_index=0, dst_memory_type="wgt")
        for i in range(m):
            buf = i % 2
            cq.dep_pop("compute", "load")  # input buffer `buf` is free
            cq.load_buffer_2d(A, i * k, k, 1, k, dst_sram_index=buf * k, dst_memory_type="inp")
            cq.dep_push("load", "compute")
            cq.dep_pop("load", "compute")
            if i >= 2:
                cq.dep_pop("store", "compute")  # accumulator buffer `buf` was stored
            cq.push_gemm(cq.kernel(("reset", buf), lambda kr, b=buf: _reset(kr, b, n)))
            cq.push_gemm(cq.kernel(("gemm", buf), lambda kr, b=buf: _gemm(kr, b, n, k)))
            if self.shift:
                cq.push_alu(cq.kernel(("shr", buf, self.shift),
                                      lambda kr, b=buf: _alu(kr, b, n, "shr", self.shift)))
                cq.push_alu(cq.kernel(("max", buf), lambda kr, b=buf: _alu(kr, b, n, "max", -128)))
                cq.push_alu(cq.kernel(("min", buf), lambda kr, b=buf: _alu(kr, b, n, "min", 127)))
            cq.dep_push("compute", "load")  # input buffer `buf` may be overwritten
            cq.dep_push("compute", "store")
            cq.dep_pop("compute", "store")
            cq.store_buffer_2d(buf * n, "out", C, i * n, n, 1, n)
            cq.dep_push("store", "compute")


def _reset(k: rt.UopKernel, buf: int, n: int) -> None:
    with k.loop(n, dst_factor=1):
        k.push("gemm", reset=True, dst=buf * n, src=0, wgt=0)


def _gemm(kr: rt.UopKernel, buf: int, n: int, k: int) -> None:
    with kr.loop(k, dst_factor=0, src_factor=1, wgt_factor=1):
        for j in range(n):
            kr.push("gemm", reset=False, dst=buf * n + j, src=buf * k, wgt=j * k)


def _alu(kr: rt.UopKernel, buf: int, n: int, op: str, imm: int) -> None:
    with kr.loop(n, dst_factor=1, src_factor=1):
        kr.push("alu", reset=False, dst=buf * n, src=buf * n, alu_opcode=op, use_imm=True,
                imm=imm)


@pytest.fixture
def matmul_case():
    return MatmulCase
