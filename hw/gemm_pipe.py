"""The compute pipeline's GEMM back end (:mod:`vta.hw.compute`): stages D (C), M, T1, T2 and A.

D registers the inp/wgt scratchpads' outputs; (C, with ``replicate_operands``: a private copy
of both operands per multiplier; with ``dsp_registers``: the DSP blocks' operand registers;)
M, T1 and T2 are the lanes' products and adder trees (:class:`~vta.hw.gemm.GemmLane`, or
:class:`~vta.hw.gemm.GemmPair` with ``pack_multipliers``); T1 reads the accumulator at
``dst``; A adds the sum to the accumulator entry, forwarded from the write history when one of
the three micro-ops ahead writes it.
"""

from __future__ import annotations

from typing import NamedTuple

from amaranth.hdl import Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out
from vta.isa import Config

from .gemm import GemmLane, GemmPair
from .options import CoreOptions
from .pipeline import LaneRegs, lanes, reg, uop_layout_in_flight
from .write_back import WriteHistorySignature

__all__ = ["GemmPipe"]


class _Stage(NamedTuple):
    """A GEMM stage's control registers: valid, its per-lane copies (load enables of the
    lanes' datapath registers), reset and dst."""

    valid: object
    valids: list
    reset: object
    dst: object


class GemmPipe(wiring.Component):
    """GEMM micro-ops from stage R (``r``, taken when ``adv``) to their results.

    ``inp_rd``/``wgt_rd`` read the scratchpads at R's addresses; ``acc_read`` asks for the
    accumulator entry ``addr`` (in T1, when ``valid``) and ``acc`` is its data two cycles later
    (in T2), whose lanes ``zero`` clears for a reset micro-op; ``history`` is stage W's
    :class:`~vta.hw.write_back.WriteHistorySignature`. Results leave A for stage W: ``valid``,
    ``dst``, ``result`` lanes and ``lane`` (per-lane copies of ``valid``). ``uop`` pulses once
    per micro-op; ``busy``: a micro-op is in D .. A."""

    def __init__(self, cfg: Config, *, options: CoreOptions) -> None:
        self.cfg, self.options = cfg, options
        self.lanes, aw, addr = cfg.batch * cfg.block_out, cfg.acc_width, cfg.log_acc_depth
        super().__init__({
            "r": In(uop_layout_in_flight(cfg)), "adv": In(1),
            "inp_rd": In(ReadPort.Signature(addr_width=cfg.log_inp_depth,
                                            shape=cfg.inp_elem_bytes * 8)),
            "wgt_rd": In(ReadPort.Signature(addr_width=cfg.log_wgt_depth,
                                            shape=cfg.wgt_elem_bytes * 8)),
            "acc_read": Out(data.StructLayout({"valid": 1, "addr": addr})),
            "acc": In(self.lanes * aw), "zero": Out(1).array(self.lanes),
            "history": In(WriteHistorySignature(lanes=self.lanes, acc_width=aw,
                                                addr_width=addr)),
            "valid": Out(1), "dst": Out(addr), "lane": Out(1).array(self.lanes),
            "result": Out(aw).array(self.lanes),
            "uop": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        lane_regs = LaneRegs(m, self.lanes, replicate=self.options.replicate_control)

        def stage(name: str, prev: _Stage) -> _Stage:
            """A stage's control registers, loaded from the previous stage's."""
            v = reg(m, prev.valid, f"{name}_valid")
            return _Stage(v, lane_regs(prev.valid, f"{name}_valid", same=v),
                          reg(m, prev.reset, f"{name}_reset"), reg(m, prev.dst, f"{name}_dst"))

        r = self.r
        m.d.comb += [self.inp_rd.addr.eq(r.src), self.inp_rd.en.eq(1),
                     self.wgt_rd.addr.eq(r.wgt), self.wgt_rd.en.eq(1)]
        d = stage("d", _Stage(r.valid & ~r.ctrl.alu & self.adv, [], r.ctrl.reset, r.dst))
        pre = stage("c", d) if self.options.operand_stage else d
        mul = stage("m", pre)
        t1 = stage("t1", mul)
        t2 = stage("t2", t1)
        # a reset micro-op sums nothing into nothing: its sums and accumulator data registers
        # load zero (a flip-flop's synchronous reset, not a multiplexer in A)
        t2_zero = lane_regs(t1.valid & t1.reset, "t2_zero")
        sums = self._products(m, d, pre.valids, mul.valids, t1.valids, t2.valids, t2_zero)
        a_valid = self._accumulate(m, lane_regs, t1, t2, sums)
        m.d.comb += [self.acc_read.valid.eq(t1.valid), self.acc_read.addr.eq(t1.dst),
                     self.uop.eq(mul.valid),
                     self.busy.eq(d.valid | pre.valid | mul.valid | t1.valid | t2.valid
                                  | a_valid)]
        m.d.comb += [self.zero[k].eq(t2_zero[k]) for k in range(self.lanes)]
        return m

    def _products(self, m: Module, d: _Stage, en_c: list, en_m: list, en_t1: list, en_t2: list,
                  zero: list) -> list:
        """D's operand registers and the lanes' dot products (M, T1, T2); returns the sums."""
        cfg = self.cfg
        B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
        # (the wide datapath registers load only for a valid micro-op: less switching, and a
        # much faster Verilator model)
        x = lanes(reg(m, self.inp_rd.data, "inp_q", en=d.valid), B * BI, cfg.inp_width)
        wgt_bits = BI * cfg.wgt_width
        wv = [w for n in range(BO) for w in lanes(
            reg(m, self.wgt_rd.data[n * wgt_bits:(n + 1) * wgt_bits], f"wgt_q_{n}",
                en=d.valids[n]), BI, cfg.wgt_width)]
        sums = []
        widths = dict(block_in=BI, inp_width=cfg.inp_width, wgt_width=cfg.wgt_width,
                      operand_stage=self.options.operand_stage)
        # packed: output columns (2j, 2j + 1) share their multipliers (an odd last one not)
        paired = BO - BO % 2 if self.options.pack_multipliers else 0
        for b in range(B):
            for n in range(0, paired, 2):
                k_lane = b * BO + n
                m.submodules[f"gemm_pair_{b}_{n}"] = pair = GemmPair(**widths, name=(b, n))
                m.d.comb += [pair.x[k].eq(x[b * BI + k]) for k in range(BI)]
                m.d.comb += [pair.w0[k].eq(wv[n * BI + k]) for k in range(BI)]
                m.d.comb += [pair.w1[k].eq(wv[(n + 1) * BI + k]) for k in range(BI)]
                m.d.comb += [pair.en_c.eq(en_c[k_lane]), pair.en_m.eq(en_m[k_lane])]
                for j in range(2):
                    m.d.comb += [pair.en_t1[j].eq(en_t1[k_lane + j]),
                                 pair.en_t2[j].eq(en_t2[k_lane + j]),
                                 pair.zero[j].eq(zero[k_lane + j])]
                sums += [pair.sum[0], pair.sum[1]]
            for n in range(paired, BO):
                k_lane = b * BO + n
                m.submodules[f"gemm_lane_{b}_{n}"] = lane = GemmLane(
                    **widths, dsp_registers=self.options.dsp_registers, name=(b, n))
                m.d.comb += [lane.x[k].eq(x[b * BI + k]) for k in range(BI)]
                m.d.comb += [lane.w[k].eq(wv[n * BI + k]) for k in range(BI)]
                m.d.comb += [lane.en_c.eq(en_c[k_lane]), lane.en_m.eq(en_m[k_lane]),
                             lane.en_t1.eq(en_t1[k_lane]), lane.en_t2.eq(en_t2[k_lane]),
                             lane.zero.eq(zero[k_lane])]
                sums.append(lane.sum)
        return sums

    def _accumulate(self, m: Module, lane_regs: LaneRegs, t1: _Stage, t2: _Stage,
                    sums: list):
        """Stage A: forwarding from the write history, and the accumulate. Returns A's valid
        register."""
        n, aw, hist = self.lanes, self.cfg.acc_width, self.history
        t1_dst, t2_valid, t2_reset, t2_dst = t1.dst, t2.valid, t2.reset, t2.dst
        a_valid = reg(m, t2_valid, "a_valid")
        a_valids = lane_regs(t2_valid, "a_valid", same=a_valid)
        a_dst = reg(m, t2_dst, "a_dst")
        w_l, w1_l, acc_l = (lanes(v, n, aw) for v in (hist.w.result, hist.w1.result, self.acc))
        # Forwarding into A, decided ahead: in T1 whether the micro-ops that will be in W and
        # w1 during T2 (now in A and W) write this dst; in T2 their result (then in W or w1,
        # the newer first) goes into fw_q, and whether the one that will be in W during A (now
        # in A) writes it into sel_w. A then picks one of three registers (W, fw_q, acc_q).
        # A reset micro-op forwards nothing (its acc_q and sum are zero).
        t2_fw1 = lane_regs(a_valid & (a_dst == t1_dst), "t2_fw1")  # W during T2
        t2_fw2 = lane_regs(hist.w.valid & (hist.w.dst == t1_dst), "t2_fw2")  # w1 during T2
        fw_q = [reg(m, Mux(t2_fw1[k], w_l[k], w1_l[k]), f"fw_q_{k}") for k in range(n)]
        use_fw = lane_regs.map(lambda k: (t2_fw1[k] | t2_fw2[k]) & ~t2_reset, "use_fw")
        sel_w = lane_regs(a_valid & (a_dst == t2_dst) & ~t2_reset, "sel_w")
        for k in range(n):
            now = Mux(sel_w[k], w_l[k], Mux(use_fw[k], fw_q[k], acc_l[k]))
            m.d.comb += [self.result[k].eq((now + sums[k])[:aw]), self.lane[k].eq(a_valids[k])]
        m.d.comb += [self.valid.eq(a_valid), self.dst.eq(a_dst)]
        return a_valid
