"""S0 of the compute pipeline: the loop counters that issue a GEMM/ALU's micro-op iterations.

:class:`LoopIssuer` loads a GEMM or ALU instruction's loop fields while it is idle, then issues one
micro-op iteration per cycle in which ``adv`` is high, in the order of ARCHITECTURE.md
(``o < iter_out``, ``i < iter_in``, ``u`` in ``[uop_bgn, uop_end)``): ``uop_addr`` is the micro-op
to read and ``dst_base``/``src_base``/``wgt_base`` the loop offsets ``o * factor_out +
i * factor_in`` added to its indices. An instruction of the other kind (GEMM after ALU or back)
waits (``pending``) until ``pipe_busy`` falls: GEMM and ALU micro-ops are never in the pipeline
together.
"""

from __future__ import annotations

from typing import NamedTuple

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from vta.isa import Config
from vta.isa.layout import Opcode

from .pipeline import BASES, base_widths, ctrl_layout

__all__ = ["LoopIssuer"]


class _Loops(NamedTuple):
    """The loop registers: per loop what is left and whether it is at its last iteration,
    the micro-op address ``u``, and what the inner loops restart from."""

    u: Signal
    u_left: Signal
    u_last: Signal
    i_left: Signal
    i_last: Signal
    o_left: Signal
    o_last: Signal
    uop_bgn: Signal
    uop_n: Signal
    uop_n_one: Signal
    iter_in: Signal
    iter_in_one: Signal


class LoopIssuer(wiring.Component):
    """The loop counters (S0). ``start``: the sequencer starts the GEMM/ALU in ``insn`` now;
    ``adv``: S0 advances this cycle; ``pipe_busy``: micro-ops are in S1 .. W; ``chain``: the ALU
    instruction heads an ALU chain (its micro-ops carry ``ctrl.chain``). ``running``:
    ``uop_addr``, ``ctrl`` and the bases describe a micro-op iteration to issue."""

    def __init__(self, cfg: Config, *, insn_layout: data.Layout) -> None:
        self.cfg = cfg
        widths = base_widths(cfg)
        super().__init__({
            "insn": In(insn_layout),
            "start": In(1),
            "adv": In(1),
            "pipe_busy": In(1),
            "chain": In(1),
            "running": Out(1),
            "pending": Out(1),
            "ctrl": Out(ctrl_layout(cfg)),
            "uop_addr": Out(cfg.layouts.gemm["uop_end"].width),
            **{f"{k}_base": Out(w) for k, w in widths.items()},
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        g, a = self.insn.gemm, self.insn.alu
        opcode = self.insn.mem.opcode
        running, pending, ctrl = self.running, self.pending, self.ctrl
        widths = base_widths(self.cfg)
        f = {f"{k}_{w}": Signal(widths[k], name=f"{k}_{w}")
             for k in BASES for w in ("fo", "fi")}
        base_o = {k: Signal(w, name=f"{k}_base_o") for k, w in widths.items()}
        base = {k: getattr(self, f"{k}_base") for k in BASES}
        uop_bgn = Signal(len(g.uop_end))
        uop_n = Signal(len(g.uop_end))  # micro-ops per inner iteration
        iter_in = Signal(len(g.iter_in))
        # the loops count down what is left (no adder and comparator chain from u through i
        # to o) ...
        u = self.uop_addr
        u_left = Signal(len(g.uop_end))
        i_left = Signal(len(g.iter_in))
        o_left = Signal(len(g.iter_out))
        # ... and whether each is at its last iteration, as flags updated with the counters
        # (the loop control is then independent of the counters' width)
        u_last, i_last, o_last = Signal(), Signal(), Signal()
        uop_n_one, iter_in_one = Signal(), Signal()
        last_alu = Signal()  # kind of the micro-ops last issued
        nonempty = Signal()
        pend_nonempty = Signal()
        start_kind = Signal()
        m.d.comb += start_kind.eq(opcode == Opcode.ALU)
        m.d.comb += nonempty.eq((g.iter_out != 0) & (g.iter_in != 0) & (g.uop_end > g.uop_bgn))
        # The loop registers load the instruction's fields in every cycle in which they are
        # idle (the sequencer starts a GEMM/ALU only then): their load enable comes from two
        # registers instead of the sequencer's decision logic.
        n_uops = (g.uop_end - g.uop_bgn)[:len(u_left)]
        with m.If(~running & ~pending):
            alu = opcode == Opcode.ALU
            m.d.sync += [
                ctrl.alu.eq(alu), ctrl.op.eq(a.alu_opcode), ctrl.use_imm.eq(a.use_imm),
                ctrl.imm.eq(a.imm), ctrl.reset.eq(g.reset_reg & ~alu),  # GEMM only
                ctrl.chain.eq(self.chain & alu),
                uop_bgn.eq(g.uop_bgn), uop_n.eq(n_uops), iter_in.eq(g.iter_in),
                u.eq(g.uop_bgn), u_left.eq(n_uops), i_left.eq(g.iter_in),
                o_left.eq(g.iter_out),
                u_last.eq(n_uops == 1), uop_n_one.eq(n_uops == 1),
                i_last.eq(g.iter_in == 1), iter_in_one.eq(g.iter_in == 1),
                o_last.eq(g.iter_out == 1),
                f["dst_fo"].eq(Mux(alu, a.dst_factor_out, g.dst_factor_out)),
                f["dst_fi"].eq(Mux(alu, a.dst_factor_in, g.dst_factor_in)),
                f["src_fo"].eq(Mux(alu, a.src_factor_out, g.src_factor_out)),
                f["src_fi"].eq(Mux(alu, a.src_factor_in, g.src_factor_in)),
                f["wgt_fo"].eq(g.wgt_factor_out), f["wgt_fi"].eq(g.wgt_factor_in),
            ]
            for k in base:
                m.d.sync += [base_o[k].eq(0), base[k].eq(0)]
        with m.If(self.start):
            # micro-ops of the other kind must leave the pipeline first
            with m.If(~self.pipe_busy | (start_kind == last_alu)):
                m.d.sync += [running.eq(nonempty), last_alu.eq(start_kind)]
            with m.Else():
                m.d.sync += [pending.eq(1), pend_nonempty.eq(nonempty)]
        with m.If(pending & ~self.pipe_busy):
            m.d.sync += [pending.eq(0), running.eq(pend_nonempty), last_alu.eq(ctrl.alu)]

        self._count(m, _Loops(u, u_left, u_last, i_left, i_last, o_left, o_last, uop_bgn, uop_n,
                              uop_n_one, iter_in, iter_in_one), base, base_o, f)
        return m

    def _count(self, m: Module, lp: _Loops, base: dict, base_o: dict, f: dict) -> None:
        """One micro-op iteration issued: the loops count on (``u`` innermost), the bases add
        the inner or outer factors, and the last iteration stops the issuer."""
        with m.If(self.running & self.adv):
            with m.If(~lp.u_last):
                m.d.sync += [lp.u.eq(lp.u + 1), lp.u_left.eq(lp.u_left - 1),
                             lp.u_last.eq(lp.u_left == 2)]
            with m.Else():
                m.d.sync += [lp.u.eq(lp.uop_bgn), lp.u_left.eq(lp.uop_n),
                             lp.u_last.eq(lp.uop_n_one)]
                with m.If(~lp.i_last):
                    m.d.sync += [lp.i_left.eq(lp.i_left - 1), lp.i_last.eq(lp.i_left == 2)]
                    for k in base:
                        m.d.sync += base[k].eq(base[k] + f[f"{k}_fi"])
                with m.Else():
                    m.d.sync += [lp.i_left.eq(lp.iter_in), lp.i_last.eq(lp.iter_in_one)]
                    with m.If(~lp.o_last):
                        m.d.sync += [lp.o_left.eq(lp.o_left - 1), lp.o_last.eq(lp.o_left == 2)]
                        for k in base:
                            m.d.sync += [base_o[k].eq(base_o[k] + f[f"{k}_fo"]),
                                         base[k].eq(base_o[k] + f[f"{k}_fo"])]
                    with m.Else():
                        m.d.sync += self.running.eq(0)
