"""The accumulator's one read port (:mod:`vta.hw.compute`), shared by the GEMM and ALU pipes:
GEMM reads ``dst`` in T1, the ALU in R (never both: GEMM and ALU micro-ops are never in the
pipeline together). The block RAM's output is registered (``data``) before either uses it."""

from __future__ import annotations

from amaranth.hdl import Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out

__all__ = ["AccReader"]


class AccReader(wiring.Component):
    """Reads ``acc_rd`` at ``gemm.addr`` while ``gemm.valid``, else at ``alu_addr``; ``data``
    is the read data, registered, with each lane ``k`` cleared instead while ``zero[k]`` (a
    GEMM reset micro-op's accumulator data is zero)."""

    def __init__(self, *, lanes: int, acc_width: int, addr_width: int) -> None:
        self.lanes, self.acc_width = lanes, acc_width
        super().__init__({
            "acc_rd": In(ReadPort.Signature(addr_width=addr_width, shape=lanes * acc_width)),
            "gemm": In(data.StructLayout({"valid": 1, "addr": addr_width})),
            "alu_addr": In(addr_width), "zero": In(1).array(lanes),
            "data": Out(lanes * acc_width),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += [self.acc_rd.addr.eq(Mux(self.gemm.valid, self.gemm.addr, self.alu_addr)),
                     self.acc_rd.en.eq(1)]
        m.d.sync += self.data.eq(self.acc_rd.data)
        for k in range(self.lanes):
            with m.If(self.zero[k]):
                m.d.sync += self.data.word_select(k, self.acc_width).eq(0)
        return m
