"""Stage W of the compute pipeline (:mod:`vta.hw.compute`): the accumulator and OUT buffer
writes, and the write history that forwards results to back-to-back micro-ops.

A GEMM micro-op leaves its accumulate stage A, an ALU micro-op its stage E3; never both in one
cycle (GEMM and ALU micro-ops are never in the pipeline together), so one register stage ``W``
takes either. W writes the accumulator and, with each lane truncated to ``out_width`` bits, the
OUT buffer that STORE reads. While LOAD ACC's DMA reader is busy (the pipeline is then empty) its
writes take both ports instead, with the same byte enables.

The accumulator's read port is not transparent and its data is registered before use, so a
read issued in cycle ``t`` returns the memory as of ``t - 1`` and is used in ``t + 2``: the
writes of ``t``, ``t + 1`` and ``t + 2`` have to be forwarded. They are the history this block
keeps: ``w`` (the write of this cycle), ``w1`` (the previous one) and ``w2_result`` (the one
before). The consumers (GEMM stage A, ALU stage E1) register their forwarding selects a cycle
ahead from ``w`` and ``w1``'s ``valid``/``dst`` and pick ``result``\\s lane by lane.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

__all__ = ["WriteBack", "WriteHistorySignature"]


def _narrow(value, lanes: int, acc_width: int, out_width: int):
    """Each ``acc_width``-bit lane of ``value`` truncated to its low ``out_width`` bits."""
    return Cat(*(value.word_select(k, acc_width)[:out_width] for k in range(lanes)))


class WriteHistorySignature(wiring.Signature):
    """The write history the pipes forward results from, as :class:`WriteBack` drives it:
    ``w`` (this cycle's write) and ``w1`` (the previous one), each ``valid``, ``dst`` and
    ``result``, and ``w2_result`` (the result written before ``w1``'s)."""

    def __init__(self, *, lanes: int, acc_width: int, addr_width: int) -> None:
        acc_bits = lanes * acc_width
        entry = data.StructLayout({"valid": 1, "dst": addr_width, "result": acc_bits})
        super().__init__({"w": Out(entry), "w1": Out(entry), "w2_result": Out(acc_bits)})


class WriteBack(wiring.Component):
    """Stage W. Inputs: the GEMM result (``gemm_valid``, ``gemm_dst``, ``gemm_result`` lanes;
    ``gemm_lane[k]`` is a per-lane copy of ``gemm_valid`` that picks lane ``k``'s source), the
    ALU result (``alu_*``), and LOAD ACC's writes (``load``, while ``load_busy``). Outputs: the
    accumulator and OUT buffer write ports (``acc_wr``, ``out_wr``) and the write history
    (``history``, a :class:`WriteHistorySignature`).

    ``acc_granularity``/``out_granularity``: the write ports' granularity in bits (``None``: the
    whole entry), as LOAD ACC writes an entry wider than the bus one bus word at a time.
    """

    def __init__(self, *, lanes: int, acc_width: int, out_width: int, addr_width: int,
                 acc_granularity: int | None = None,
                 out_granularity: int | None = None) -> None:
        if lanes < 1 or out_width > acc_width:
            self._MustUse__silence = True  # never built: no "created but never used" warning
            raise TypeError(f"WriteBack needs lanes >= 1 and out_width <= acc_width, not "
                            f"lanes={lanes!r}, out_width={out_width!r}, acc_width={acc_width!r}")
        self.lanes, self.acc_width, self.out_width = lanes, acc_width, out_width
        acc_bits = lanes * acc_width
        acc_port = WritePort.Signature(addr_width=addr_width, shape=acc_bits,
                                       granularity=acc_granularity)
        super().__init__({
            "gemm_valid": In(1), "gemm_dst": In(addr_width),
            "gemm_lane": In(1).array(lanes), "gemm_result": In(acc_width).array(lanes),
            "alu_valid": In(1), "alu_dst": In(addr_width),
            "alu_result": In(acc_width).array(lanes),
            "load": Out(acc_port), "load_busy": In(1),
            "acc_wr": In(acc_port),
            "out_wr": In(WritePort.Signature(addr_width=addr_width, shape=lanes * out_width,
                                             granularity=out_granularity)),
            "history": Out(WriteHistorySignature(lanes=lanes, acc_width=acc_width,
                                                 addr_width=addr_width)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        w, w1 = self.history.w, self.history.w1
        m.d.sync += [
            w.valid.eq(self.gemm_valid | self.alu_valid),
            w.dst.eq(Mux(self.gemm_valid, self.gemm_dst, self.alu_dst)),
            w.result.eq(Cat(*(Mux(self.gemm_lane[k], self.gemm_result[k], self.alu_result[k])
                              for k in range(self.lanes)))),
            w1.eq(w),
            self.history.w2_result.eq(w1.result),
        ]
        with m.If(self.load_busy):
            wiring.connect(m, wiring.flipped(self.load), wiring.flipped(self.acc_wr))
        with m.Else():
            m.d.comb += [self.acc_wr.addr.eq(w.dst), self.acc_wr.data.eq(w.result),
                         self.acc_wr.en.eq(Mux(w.valid, -1, 0))]
        # the OUT buffer mirrors every accumulator write, lanes narrowed, same byte enables
        m.d.comb += [self.out_wr.addr.eq(self.acc_wr.addr),
                     self.out_wr.data.eq(_narrow(self.acc_wr.data, self.lanes, self.acc_width,
                                                 self.out_width)),
                     self.out_wr.en.eq(self.acc_wr.en)]
        return m
