"""The store module: STORE of OUT-buffer entries (accumulators narrowed to the output width by
compute as they are written) to DRAM."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out
from vta.isa import Config

from .axi import req_layout, wdata_layout
from .dma import DMAWrite
from .queues import TokenPopSignature, TokenPushSignature
from .sequencer import ModuleStatusSignature, instruction_sequencer

__all__ = ["Store"]


class Store(wiring.Component):
    """Executes STORE: pops compute->store ("prev"), pushes store->compute ("prev")."""

    def __init__(self, cfg: Config, *, insn_layout: data.Layout, bus_bytes: int) -> None:
        self.cfg, self.insn_layout, self.bus_bytes = cfg, insn_layout, bus_bytes
        super().__init__({
            "insn": In(stream.Signature(insn_layout)),
            "pop_prev": Out(TokenPopSignature()),
            "push_prev": Out(TokenPushSignature()),
            "out_rd": In(ReadPort.Signature(addr_width=cfg.log_acc_depth,
                                            shape=cfg.out_elem_bytes * 8)),
            "aw": Out(stream.Signature(req_layout())),
            "w": Out(stream.Signature(wdata_layout(bus_bytes))),
            "b": In(stream.Signature(0)),
            "status": Out(ModuleStatusSignature()),
            "clear": In(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        m.submodules.dma = dma = DMAWrite(
            mem_layout=self.insn_layout["mem"].shape, elem_bytes=cfg.out_elem_bytes,
            bus_bytes=self.bus_bytes, addr_width=cfg.log_acc_depth)
        wiring.connect(m, dma.sram, wiring.flipped(self.out_rd))
        wiring.connect(m, dma.aw, wiring.flipped(self.aw))
        wiring.connect(m, dma.w, wiring.flipped(self.w))
        wiring.connect(m, dma.b, wiring.flipped(self.b))
        insn = Signal(self.insn_layout)
        go = instruction_sequencer(
            m, insn_stream=self.insn, insn=insn, pops=[(insn.mem.pop_prev_dep, self.pop_prev)],
            pushes=[(insn.mem.push_prev_dep, self.push_prev)], exec_busy=dma.busy,
            status=self.status, clear=self.clear)
        m.d.comb += [dma.cmd.payload.eq(insn.mem), dma.cmd.valid.eq(go)]
        m.d.comb += self.status.mem_wait.eq(dma.mem_wait)
        return m
