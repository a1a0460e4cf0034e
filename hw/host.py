"""The host register block: an AXI4-Lite slave with 32-bit registers (see :mod:`vta.hw.regs`)."""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .regs import CONTROL_FINISHED, CONTROL_LAUNCH, REGISTER_MAP

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
    inputs. ``launch`` pulses when the host writes 1 to control bit 0 while not ``running``.
    Control reads back bit 0 = ``running``, bit 1 = ``finished``. A write is accepted when its
    address and data are both valid; responses are always OKAY.
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
        with m.If(accept):
            m.d.sync += bvalid.eq(1)
            for name, reg in (("insn_addr", self.insn_addr), ("insn_count", self.insn_count)):
                with m.If(waddr == REGISTER_MAP[name] >> 2):
                    m.d.sync += reg.eq((reg & ~byte_mask) | (bus.wdata & byte_mask))
            with m.If((waddr == REGISTER_MAP["control"] >> 2) & bus.wstrb[0]
                      & (bus.wdata & CONTROL_LAUNCH).any() & ~self.running):
                m.d.comb += self.launch.eq(1)
        # ---- reads
        rvalid = Signal()
        rdata = Signal(32)
        m.d.comb += [bus.rvalid.eq(rvalid), bus.rdata.eq(rdata), bus.rresp.eq(0),
                     bus.arready.eq(~rvalid)]
        with m.If(rvalid & bus.rready):
            m.d.sync += rvalid.eq(0)
        with m.If(bus.arvalid & ~rvalid):
            m.d.sync += rvalid.eq(1)
            with m.Switch(bus.araddr[2:]):
                with m.Case(REGISTER_MAP["control"] >> 2):
                    m.d.sync += rdata.eq(Cat(self.running, self.finished))
                with m.Case(REGISTER_MAP["insn_addr"] >> 2):
                    m.d.sync += rdata.eq(self.insn_addr)
                with m.Case(REGISTER_MAP["insn_count"] >> 2):
                    m.d.sync += rdata.eq(self.insn_count)
                for name in self.readonly:
                    with m.Case(REGISTER_MAP[name] >> 2):
                        m.d.sync += rdata.eq(getattr(self, f"ro_{name}"))
                with m.Default():
                    m.d.sync += rdata.eq(0)
        assert CONTROL_FINISHED == 2  # bit 1 of Cat(running, finished)
        return m
