"""The host register block: an AXI4-Lite slave with 32-bit registers (see :mod:`vta.hw.regs`)."""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .regs import CONTROL_ERROR, CONTROL_FINISHED, CONTROL_LAUNCH, REGISTER_MAP

__all__ = ["AXILiteSignature", "HostRegisters", "AXIL_ADDR_BITS"]

AXIL_ADDR_BITS = 16


class AXILiteSignature(wiring.Signature):
    """An AXI4-Lite bus (32-bit data) from the master's side."""

    def __init__(self, addr_bits: int = AXIL_ADDR_BITS) -> None:
        super().__init__({
            "awaddr": Out(addr_bits), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_bits), "arvalid": Out(1), "arready": In(1),
            "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })


class HostRegisters(wiring.Component):
    """AXI4-Lite register file: control, instruction address/count and read-only inputs.

    ``readonly`` names the read-only registers of :data:`REGISTER_MAP` fed by ``ro_<name>``
    inputs. ``launch`` pulses (one cycle after the write is accepted) when the host writes 1 to
    control bit 0 while neither ``running`` nor ``error``. Control reads back bit 0 =
    ``running``, bit 1 = ``finished``, bit 2 = ``error`` (an AXI error response stopped the
    core). A write is accepted when its address and data are both valid; responses are
    always OKAY.

    Timing: reads are pipelined over two cycles (the accepted address selects one of eight
    registers in each group of eight into a register, the next cycle picks the group), so
    ``rvalid`` rises two cycles after ``arvalid & arready``; ``arready`` is low while a read is
    in flight. ``launch`` comes from a register, so its large fan-out (every counter and queue
    of the core clears at launch) starts at a flip-flop.
    """

    def __init__(self, readonly: Sequence[str]) -> None:
        for name in readonly:
            if name not in REGISTER_MAP:
                raise ValueError(f"Unknown register {name!r}")
        self.readonly = tuple(readonly)
        super().__init__({
            "bus": In(AXILiteSignature()),
            "launch": Out(1),
            "running": In(1),
            "finished": In(1),
            "error": In(1),
            "insn_addr": Out(32),
            "insn_count": Out(32),
            **{f"ro_{name}": In(32) for name in self.readonly},
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        bus = self.bus
        # ---- writes
        bvalid = Signal()
        m.d.comb += [bus.bvalid.eq(bvalid), bus.bresp.eq(0)]
        accept = Signal()
        m.d.comb += [accept.eq(bus.awvalid & bus.wvalid & ~bvalid),
                     bus.awready.eq(accept), bus.wready.eq(accept)]
        with m.If(bvalid & bus.bready):
            m.d.sync += bvalid.eq(0)
        waddr = bus.awaddr[2:]
        byte_mask = Cat(*(bit.replicate(8) for bit in bus.wstrb))
        launch = Signal()
        m.d.comb += self.launch.eq(launch)
        m.d.sync += launch.eq(0)
        with m.If(accept):
            m.d.sync += bvalid.eq(1)
            for name, reg in (("insn_addr", self.insn_addr), ("insn_count", self.insn_count)):
                with m.If(waddr == REGISTER_MAP[name] >> 2):
                    m.d.sync += reg.eq((reg & ~byte_mask) | (bus.wdata & byte_mask))
            with m.If((waddr == REGISTER_MAP["control"] >> 2) & bus.wstrb[0]
                      & (bus.wdata & CONTROL_LAUNCH).any() & ~self.running & ~launch
                      & ~self.error):
                m.d.sync += launch.eq(1)
        # ---- reads: stage 1 selects within groups of eight registers, stage 2 the group
        values: dict[int, object] = {
            REGISTER_MAP["control"] >> 2: Cat(self.running, self.finished, self.error),
            REGISTER_MAP["insn_addr"] >> 2: self.insn_addr,
            REGISTER_MAP["insn_count"] >> 2: self.insn_count,
        }
        for name in self.readonly:
            values[REGISTER_MAP[name] >> 2] = getattr(self, f"ro_{name}")
        n_groups = (max(values) >> 3) + 1
        groups = [Signal(32, name=f"rd_group{g}") for g in range(n_groups)]
        group_sel = Signal(range(n_groups))
        hit = Signal()  # the address is inside the register window
        stage1 = Signal()
        rvalid = Signal()
        rdata = Signal(32)
        index = bus.araddr[2:]
        m.d.comb += [bus.rvalid.eq(rvalid), bus.rdata.eq(rdata), bus.rresp.eq(0),
                     bus.arready.eq(~stage1 & ~rvalid)]
        with m.If(rvalid & bus.rready):
            m.d.sync += rvalid.eq(0)
        m.d.sync += stage1.eq(bus.arvalid & bus.arready)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [group_sel.eq(index[3:]), hit.eq(index[3:] < n_groups)]
            for g, reg in enumerate(groups):
                with m.Switch(index[:3]):
                    for k in range(8):
                        if (g << 3) + k in values:
                            with m.Case(k):
                                m.d.sync += reg.eq(values[(g << 3) + k])
                    with m.Default():
                        m.d.sync += reg.eq(0)
        with m.If(stage1):
            m.d.sync += [rvalid.eq(1), rdata.eq(0)]
            with m.If(hit), m.Switch(group_sel):
                for g, reg in enumerate(groups):
                    with m.Case(g):
                        m.d.sync += rdata.eq(reg)
        assert (CONTROL_FINISHED, CONTROL_ERROR) == (2, 4)  # Cat(running, finished, error)
        return m
