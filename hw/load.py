"""The load module: LOAD INP and LOAD WGT into the input and weight scratchpads."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out
from vta.isa import Config
from vta.isa.layout import MemType

from .axi import rdata_layout, req_layout
from .dma import DMARead
from .queues import TokenPopSignature, TokenPushSignature
from .sequencer import ModuleStatusSignature, instruction_sequencer

__all__ = ["Load"]


class Load(wiring.Component):
    """Executes LOAD INP/WGT: pops from compute->load, pushes to load->compute (its "next")."""

    def __init__(self, cfg: Config, *, insn_layout: data.Layout, bus_bytes: int) -> None:
        self.cfg, self.insn_layout, self.bus_bytes = cfg, insn_layout, bus_bytes
        inp_gran = bus_bytes * 8 if cfg.inp_elem_bytes > bus_bytes else None
        wgt_gran = bus_bytes * 8 if cfg.wgt_elem_bytes > bus_bytes else None
        super().__init__({
            "insn": In(stream.Signature(insn_layout)),
            "pop_next": Out(TokenPopSignature()),
            "push_next": Out(TokenPushSignature()),
            "req": Out(stream.Signature(req_layout())),
            "rdata": In(stream.Signature(rdata_layout(bus_bytes))),
            "inp_sram": In(WritePort.Signature(addr_width=cfg.log_inp_depth,
                                               shape=cfg.inp_elem_bytes * 8,
                                               granularity=inp_gran)),
            "wgt_sram": In(WritePort.Signature(addr_width=cfg.log_wgt_depth,
                                               shape=cfg.wgt_elem_bytes * 8,
                                               granularity=wgt_gran)),
            "status": Out(ModuleStatusSignature()),
            "clear": In(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, W = self.cfg, self.bus_bytes
        mem_layout = self.insn_layout["mem"].shape
        m.submodules.inp_dma = inp = DMARead(mem_layout=mem_layout, elem_bytes=cfg.inp_elem_bytes,
                                             bus_bytes=W, addr_width=cfg.log_inp_depth)
        m.submodules.wgt_dma = wgt = DMARead(mem_layout=mem_layout, elem_bytes=cfg.wgt_elem_bytes,
                                             bus_bytes=W, addr_width=cfg.log_wgt_depth)
        wiring.connect(m, inp.sram, wiring.flipped(self.inp_sram))
        wiring.connect(m, wgt.sram, wiring.flipped(self.wgt_sram))

        insn = Signal(self.insn_layout)
        is_wgt = Signal()
        m.d.comb += is_wgt.eq(insn.mem.memory_type == MemType.WGT)
        exec_busy = Signal()
        m.d.comb += exec_busy.eq(inp.busy | wgt.busy)
        go = instruction_sequencer(
            m, insn_stream=self.insn, insn=insn, pops=[(insn.mem.pop_next_dep, self.pop_next)],
            pushes=[(insn.mem.push_next_dep, self.push_next)], exec_busy=exec_busy,
            status=self.status, clear=self.clear)
        for dma, sel in ((inp, ~is_wgt), (wgt, is_wgt)):
            m.d.comb += [dma.cmd.payload.eq(insn.mem), dma.cmd.valid.eq(go & sel)]
        # one engine runs at a time: merge their memory streams without a select signal. The
        # request streams come from registers (a valid request picks its payload); read data
        # goes to both engines, and only the running one takes it (an idle engine's ``ready``
        # is low and it ignores ``valid``).
        m.d.comb += [
            self.req.valid.eq(inp.req.valid | wgt.req.valid),
            self.req.payload.eq(Mux(wgt.req.valid, wgt.req.payload, inp.req.payload)),
            inp.req.ready.eq(self.req.ready), wgt.req.ready.eq(self.req.ready),
            self.rdata.ready.eq(inp.rdata.ready | wgt.rdata.ready),
        ]
        for dma in (inp, wgt):
            m.d.comb += [dma.rdata.payload.eq(self.rdata.payload),
                         dma.rdata.valid.eq(self.rdata.valid)]
        m.d.comb += self.status.mem_wait.eq(inp.mem_wait | wgt.mem_wait)
        return m
