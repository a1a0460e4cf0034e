"""The compute pipeline's front end (:mod:`vta.hw.compute`), shared by GEMM and ALU: S0 (the
loop counters, :class:`~vta.hw.loop_issuer.LoopIssuer`), S1 (the micro-op memory's output,
registered), S2 (the micro-op's indices plus the loop offsets) and R (the registered
addresses the scratchpads are read at)."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out
from vta.isa import Config
from vta.isa.layout import UOP_BITS

from .decode import uop_layout
from .loop_issuer import LoopIssuer
from .pipeline import BASES, ctrl_layout, uop_layout_in_flight

__all__ = ["FrontEnd"]


class FrontEnd(wiring.Component):
    """S0 .. R. ``start``, ``chain`` and ``pipe_busy`` go to the loop issuer with ``insn``
    (see :class:`~vta.hw.loop_issuer.LoopIssuer`), which reports ``running`` and ``pending``;
    every stage advances when ``adv`` (low while an ALU micro-op stalls in R). ``uop_rd``
    reads the micro-op memory. ``s2`` is the micro-op in S2 with its addresses (combinational),
    ``r`` the one in R (:func:`~vta.hw.pipeline.uop_layout_in_flight`); ``busy``: a micro-op is
    in S1, S2 or R."""

    def __init__(self, cfg: Config, *, insn_layout: data.Layout) -> None:
        self.cfg, self.insn_layout = cfg, insn_layout
        flight = uop_layout_in_flight(cfg)
        super().__init__({
            "insn": In(insn_layout), "start": In(1), "chain": In(1), "pipe_busy": In(1),
            "adv": In(1),
            "running": Out(1), "pending": Out(1),
            "uop_rd": In(ReadPort.Signature(addr_width=cfg.log_uop_depth, shape=UOP_BITS)),
            "s2": Out(flight), "r": Out(flight), "busy": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, adv = self.cfg, self.adv
        m.submodules.issuer = issuer = LoopIssuer(cfg, insn_layout=self.insn_layout)
        m.d.comb += [issuer.insn.eq(self.insn), issuer.adv.eq(adv), issuer.chain.eq(self.chain),
                     issuer.pipe_busy.eq(self.pipe_busy), issuer.start.eq(self.start),
                     self.running.eq(issuer.running), self.pending.eq(issuer.pending)]
        base = {k: getattr(issuer, f"{k}_base") for k in BASES}

        # S0 -> S1: the micro-op memory is read at the issuer's address
        s1_valid = Signal()
        s1_ctrl = Signal(ctrl_layout(cfg))
        s1_base = {k: Signal(len(v), name=f"s1_{k}_base") for k, v in base.items()}
        m.d.comb += [self.uop_rd.addr.eq(issuer.uop_addr), self.uop_rd.en.eq(adv)]
        with m.If(adv):
            m.d.sync += [s1_valid.eq(issuer.running), s1_ctrl.eq(issuer.ctrl)]
            for k in base:
                m.d.sync += s1_base[k].eq(base[k])

        # S1: the micro-op, registered
        s2_valid = Signal()
        s2_ctrl = Signal(ctrl_layout(cfg))
        s2_uop = Signal(UOP_BITS)
        s2_base = {k: Signal(len(v), name=f"s2_{k}_base") for k, v in base.items()}
        with m.If(adv):
            m.d.sync += [s2_valid.eq(s1_valid), s2_ctrl.eq(s1_ctrl), s2_uop.eq(self.uop_rd.data)]
            for k in base:
                m.d.sync += s2_base[k].eq(s1_base[k])

        # S2: the addresses
        uop = data.View(uop_layout(cfg), s2_uop)
        s2, r = self.s2, self.r
        # alu_read from its own signal, not read back from `s2`: a field of a port computed from
        # another field of it is a combinational loop to Verilator (UNOPTFLAT), which then
        # settles everything behind `s2` by iteration
        alu_read = Signal()
        m.d.comb += [alu_read.eq(s2_valid & s2_ctrl.alu),
                     s2.valid.eq(s2_valid), s2.ctrl.eq(s2_ctrl),
                     s2.dst.eq(uop.dst_idx + s2_base["dst"]),
                     s2.src.eq(uop.src_idx + s2_base["src"]),
                     s2.wgt.eq(uop.wgt_idx + s2_base["wgt"]),
                     s2.alu_read.eq(alu_read),
                     s2.two.eq(alu_read & ~s2_ctrl.use_imm)]
        with m.If(adv):
            m.d.sync += r.eq(s2)
        m.d.comb += self.busy.eq(s1_valid | s2_valid | r.valid)
        return m
