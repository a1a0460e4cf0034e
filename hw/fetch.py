"""Fetch: reads the instruction stream in bursts and routes each instruction to its module.

LOAD of INP or WGT goes to load, STORE to store, everything else (LOAD UOP/ACC, GEMM, ALU,
FINISH) to compute, in program order, stalling while the target queue is full. Fetched
instructions first land in a small buffer; a burst is only requested when the buffer has room
for all of it, so read data is always accepted at once and a stalled dispatch can never block
the shared read channel. Each instruction's destination is decoded as it enters the buffer and
stored with it, so dispatch is a multiplexer on registered bits.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2
from vta.isa.insn import LOAD_MEM_TYPES
from vta.isa.layout import INSN_BITS, INSN_BYTES, Opcode

from .axi import MAX_BURST, BurstSplitter, rdata_layout, req_layout

__all__ = ["Fetch"]


class Fetch(wiring.Component):
    """The instruction fetch unit.

    ``start`` (a pulse) begins fetching ``insn_count`` instructions from byte address
    ``insn_addr``. ``busy`` is high until the last instruction has been handed to its queue.
    """

    def __init__(self, *, insn_layout: data.Layout, bus_bytes: int) -> None:
        self.insn_layout, self.bus_bytes = insn_layout, bus_bytes
        self.beats_per_insn = max(1, INSN_BYTES // bus_bytes)
        burst_insns = MAX_BURST * bus_bytes // INSN_BYTES
        self.buffer_depth = 2 * burst_insns
        super().__init__({
            "start": In(1),
            "insn_addr": In(32),
            "insn_count": In(32),
            "req": Out(stream.Signature(req_layout())),
            "rdata": In(stream.Signature(rdata_layout(bus_bytes))),
            "load_q": Out(stream.Signature(insn_layout)),
            "compute_q": Out(stream.Signature(insn_layout)),
            "store_q": Out(stream.Signature(insn_layout)),
            "busy": Out(1),
            "fetched": Out(32),
            "state": Out(4),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        bpi = self.beats_per_insn
        m.submodules.splitter = splitter = BurstSplitter(
            elem_bytes=INSN_BYTES, bus_bytes=self.bus_bytes, size_bits=32)
        # each buffered instruction carries its destination (2 bits: to load, to store), decoded
        # as it is written, so dispatch needs no decoding after the buffer's output register
        m.submodules.buffer = buf = fifo.SyncFIFOBuffered(width=INSN_BITS + 2,
                                                          depth=self.buffer_depth)

        m.d.comb += [
            splitter.cmd.payload.dram_base.eq(self.insn_addr >> ceil_log2(INSN_BYTES)),
            splitter.cmd.payload.y_size.eq(1),
            splitter.cmd.payload.x_size.eq(self.insn_count),
            splitter.cmd.payload.x_stride.eq(0),
            splitter.cmd.valid.eq(self.start),
        ]

        # flow control: a burst is only requested when the buffer has room for it. ``room`` is
        # registered (computed from last cycle's level and beats in flight); a request in the
        # previous cycle is not in that figure yet, so none is made in the cycle right after one.
        # Read beats only move beats from "in flight" into the buffer, and the buffer only
        # drains, so the registered figure never overstates the room.
        inflight = Signal(range(MAX_BURST * 4 + 1))  # beats requested, not yet received
        room_q = Signal()
        fired_q = Signal()
        room = Signal()
        m.d.sync += room_q.eq(buf.level * bpi + inflight + MAX_BURST
                              <= self.buffer_depth * bpi)
        m.d.comb += room.eq(room_q & ~fired_q)
        m.d.comb += [
            self.req.payload.eq(splitter.req.payload),
            self.req.valid.eq(splitter.req.valid & room),
            splitter.req.ready.eq(self.req.ready & room),
        ]
        req_fire = Signal()
        beat_fire = Signal()
        m.d.comb += [
            req_fire.eq(self.req.valid & self.req.ready),
            beat_fire.eq(self.rdata.valid & self.rdata.ready),
        ]
        m.d.sync += [inflight.eq(inflight + Mux(req_fire, self.req.payload.len + 1, 0)
                                 - beat_fire),
                     fired_q.eq(req_fire)]

        self._assemble(m, buf, beat_fire)
        self._dispatch(m, buf)

        m.d.comb += self.busy.eq(splitter.busy | (inflight != 0) | buf.r_rdy)
        with m.If(splitter.busy):
            m.d.comb += self.state.eq(1)
        with m.Elif(inflight != 0):
            m.d.comb += self.state.eq(2)
        with m.Elif(buf.r_rdy):
            m.d.comb += self.state.eq(3)
        return m

    def _assemble(self, m: Module, buf, beat_fire) -> None:
        """Instructions from bus beats into the buffer (with their destination bits), and the
        ``fetched`` count."""
        bpi = self.beats_per_insn
        fetched = Signal(32)
        m.d.comb += self.fetched.eq(fetched)
        destination = self._destination
        if bpi == 1:
            word = self.rdata.payload.data[:INSN_BITS]
            m.d.comb += [
                buf.w_data.eq(Cat(word, destination(word))),
                buf.w_en.eq(self.rdata.valid),
                self.rdata.ready.eq(buf.w_rdy),
            ]
        else:
            parts = [Signal(self.bus_bytes * 8, name=f"part{k}") for k in range(bpi - 1)]
            part = Signal(range(bpi))
            word = Cat(*parts, self.rdata.payload.data)
            m.d.comb += [
                buf.w_data.eq(Cat(word, destination(word))),
                buf.w_en.eq(self.rdata.valid & (part == bpi - 1)),
                self.rdata.ready.eq((part != bpi - 1) | buf.w_rdy),
            ]
            with m.If(beat_fire):
                m.d.sync += part.eq(part + 1)
                for k in range(bpi - 1):
                    with m.If(part == k):
                        m.d.sync += parts[k].eq(self.rdata.payload.data)
                with m.If(part == bpi - 1):
                    m.d.sync += part.eq(0)
        with m.If(self.start):
            m.d.sync += fetched.eq(0)
        with m.Elif(buf.w_en & buf.w_rdy):
            m.d.sync += fetched.eq(fetched + 1)

    def _destination(self, word) -> object:
        """The 2 destination bits (to load, to store) of the instruction ``word``: the module
        that executes it (vta.isa.insn: LOAD of LOAD_MEM_TYPES to load, STORE to store)."""
        insn = data.View(self.insn_layout, word)
        opcode, mtype = insn.mem.opcode, insn.mem.memory_type
        data_load = Cat(*(mtype == t for t in sorted(LOAD_MEM_TYPES))).any()
        return Cat((opcode == Opcode.LOAD) & data_load, opcode == Opcode.STORE)

    def _dispatch(self, m: Module, buf) -> None:
        """Hand the buffered instructions, in order, to the queue of their module."""
        to_load = Signal()
        to_store = Signal()
        m.d.comb += [to_load.eq(buf.r_data[INSN_BITS]), to_store.eq(buf.r_data[INSN_BITS + 1])]
        for q in (self.load_q, self.compute_q, self.store_q):
            m.d.comb += q.payload.eq(buf.r_data[:INSN_BITS])
        with m.If(to_load):
            m.d.comb += [self.load_q.valid.eq(buf.r_rdy), buf.r_en.eq(self.load_q.ready)]
        with m.Elif(to_store):
            m.d.comb += [self.store_q.valid.eq(buf.r_rdy), buf.r_en.eq(self.store_q.ready)]
        with m.Else():
            m.d.comb += [self.compute_q.valid.eq(buf.r_rdy), buf.r_en.eq(self.compute_q.ready)]

