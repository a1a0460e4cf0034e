"""The compute pipeline's ALU back end (:mod:`vta.hw.compute`): stages RD, E1, (PRE,) E2, E3
and, for ALU chains, the tail C1..C4, with the interlock and forwarding of the module
docstring.

An ALU micro-op issues its accumulator read(s) in R; ``use_imm`` micro-ops read ``dst`` and run
at one per cycle, stalling R (``stall``) while the micro-op in RD or E1 writes that entry;
two-operand micro-ops read ``dst`` and then ``src`` through the same port in two consecutive
cycles, unless their ``src`` is the one the last such read brought and nothing wrote it since
(:meth:`AluPipe._src_reuse`). RD registers the data, E1 forwards from the write history into
the operands, E2/E3 are the :class:`~vta.hw.alu.AluLane`\\s; a chain's micro-ops pass PRE
between E1 and E2 and the tail after E3 (:class:`~vta.hw.alu.TailLane`\\s).
"""

from __future__ import annotations

from typing import NamedTuple

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from vta.isa import Config
from vta.isa.fusion import ALU_CHAIN, MAX_STAGE_SHIFT, PRE, STAGES, TAIL_STAGES
from vta.isa.layout import AluOp

from .alu import AluLane, TailLane
from .chain_gather import chain_layout
from .options import CoreOptions
from .pipeline import LaneRegs, ctrl_layout, lanes, reg, uop_layout_in_flight
from .write_back import WriteHistorySignature

__all__ = ["AluPipe"]


def _held_layout(cfg: Config) -> data.StructLayout:
    """A micro-op in RD or E1: its instruction's ``ctrl``, ``dst``, ``src``, whether it takes
    its src from the kept one (``reuse``) and whether its read of src went through the port
    (``port``)."""
    aw = cfg.log_acc_depth
    return data.StructLayout({"valid": 1, "ctrl": ctrl_layout(cfg), "dst": aw, "src": aw,
                              "reuse": 1, "port": 1})


class _E2(NamedTuple):
    """Stage E2's control registers and the control entering it (``in_ctrl``)."""

    valid: object
    valids: list
    ctrl: object
    dst: object
    in_ctrl: object


class AluPipe(wiring.Component):
    """ALU micro-ops from stage R (``r``; ``s2`` is the one that enters R next) to their
    results.

    ``stall`` holds S0 .. R (the interlock); ``acc_read_addr`` is the accumulator address R
    reads and ``acc`` its data two cycles later (RD); ``history`` is stage W's
    :class:`~vta.hw.write_back.WriteHistorySignature`; ``chain`` the chain the instruction
    heads (:func:`~vta.hw.chain_gather.chain_layout`); ``load_busy``: LOAD ACC writes the
    accumulator (the kept src is stale). Results go to stage W: ``valid``, ``dst``,
    ``result`` lanes. ``uops`` counts the micro-op iterations leaving E1 (a chain's micro-op is
    one of each member's); ``busy``: a micro-op is in RD .. the tail."""

    def __init__(self, cfg: Config, *, options: CoreOptions) -> None:
        self.cfg, self.options = cfg, options
        self.lanes, aw, addr = cfg.batch * cfg.block_out, cfg.acc_width, cfg.log_acc_depth
        flight = uop_layout_in_flight(cfg)
        super().__init__({
            "s2": In(flight), "r": In(flight), "stall": Out(1),
            "acc_read_addr": Out(addr), "acc": In(self.lanes * aw),
            "history": In(WriteHistorySignature(lanes=self.lanes, acc_width=aw,
                                                addr_width=addr)),
            "chain": In(chain_layout(cfg)), "load_busy": In(1),
            "valid": Out(1), "dst": Out(addr), "result": Out(aw).array(self.lanes),
            "uops": Out(range(ALU_CHAIN + 1)), "busy": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        aw = self.cfg.acc_width
        lane_regs = LaneRegs(m, self.lanes, replicate=self.options.replicate_control)
        # E3: the micro-op goes on through the chain's tail, else W takes it next cycle (e3_wb)
        e3 = Signal(data.StructLayout({"valid": 1, "chain": 1, "dst": self.cfg.log_acc_depth}),
                    name="e3")
        e3_wb = Signal(name="e3_wb")
        rd, e1 = self._issue(m)
        e2_a, e2_b, e2, p_valid = self._operands(m, lane_regs, rd, e1, e3, e3_wb)
        m.d.sync += [e3.valid.eq(e2.valid), e3.dst.eq(e2.dst), e3.chain.eq(e2.ctrl.chain)]
        m.d.comb += e3_wb.eq(e3.valid & ~e3.chain)
        e3_ops = lane_regs(e2.ctrl.op, "e3_op")
        e3_is_mul = lane_regs(e2.ctrl.op == AluOp.MUL, "e3_is_mul")
        alu_l = []
        for k in range(self.lanes):
            m.submodules[f"alu_lane_{k}"] = lane = AluLane(aw)
            m.d.comb += [lane.a.eq(e2_a[k]), lane.b.eq(e2_b[k]), lane.en.eq(e2.valids[k]),
                         lane.op.eq(e3_ops[k]), lane.is_mul.eq(e3_is_mul[k])]
            alu_l.append(lane.result)
        out, tail_valids = self._tail(m, e3.valid & e3.chain, e3.dst, alu_l)
        # (a chain's last stage and E3 never hold a micro-op for W in one cycle: the chain's
        # micro-ops come after every other ALU micro-op in flight and take longer)
        m.d.comb += [self.valid.eq(e3_wb | out["valid"]),
                     self.dst.eq(Mux(out["valid"], out["dst"], e3.dst)),
                     self.uops.eq(Mux(e1.valid, Mux(e1.ctrl.chain, self.chain.length, 1), 0)),
                     self.busy.eq(Cat(rd.valid, e1.valid, p_valid, e2.valid, e3.valid,
                                      *tail_valids).any())]
        m.d.comb += [self.result[k].eq(Mux(out["valid"], out["values"][k], alu_l[k]))
                     for k in range(self.lanes)]
        return m

    def _issue(self, m: Module) -> tuple:
        """The interlock in R and the registers of RD and E1; returns (``rd``, ``e1``).

        An ALU micro-op in R waits while one ahead would write what it reads too late to be
        forwarded: ``hit_rd`` while the micro-op in RD writes its dst (or, two-operand, its
        src), ``hit_e1`` while the one in E1 writes its dst. Both are registers, computed a
        cycle ahead from what R, RD and E1 will then hold (R: the micro-op now in S2 if R
        advances, else the same; RD: the one now in R if it advances, else a bubble; E1: the
        one now in RD), so ``stall`` -- the enable of the whole front end -- is one gate after
        flip-flops."""
        aw = self.cfg.log_acc_depth
        r, s2 = self.r, self.s2
        adv = Signal(name="adv")
        phase = Signal(name="phase")  # second read cycle of a two-operand ALU micro-op
        rd = Signal(_held_layout(self.cfg), name="rd")  # its (last) read was issued a cycle ago
        e1 = Signal(_held_layout(self.cfg), name="e1")
        hit_rd, hit_e1 = Signal(name="hit_rd"), Signal(name="hit_e1")
        m.d.comb += adv.eq(~self.stall)
        m.d.sync += [
            hit_rd.eq(adv & r.valid & r.ctrl.alu
                      & ((r.dst == s2.dst) | (s2.two & (r.dst == s2.src[:aw])))),
            hit_e1.eq(rd.valid & Mux(adv, rd.dst == s2.dst, rd.dst == r.dst)),
        ]
        r_reuse, r_port_src = self._src_reuse(m, adv)
        r_two = r.two & ~r_reuse  # reads its src through the port
        m.d.comb += self.stall.eq(r.alu_read & ~phase & (r_two | hit_rd | hit_e1))
        # a two-operand micro-op: phase 0 reads dst (stalled), phase 1 reads src (advances)
        m.d.sync += phase.eq(r_two & ~phase & ~hit_rd)
        m.d.comb += self.acc_read_addr.eq(Mux(phase, r.src, r.dst))
        m.d.sync += [
            rd.valid.eq(r.valid & r.ctrl.alu & adv), rd.ctrl.eq(r.ctrl),
            rd.dst.eq(r.dst), rd.src.eq(r.src[:aw]),
            rd.reuse.eq(r_reuse), rd.port.eq(r_port_src & adv),
            e1.valid.eq(rd.valid), e1.ctrl.eq(rd.ctrl), e1.dst.eq(rd.dst), e1.src.eq(rd.src),
            e1.port.eq(rd.port),
        ]
        return rd, e1

    def _src_reuse(self, m: Module, adv) -> tuple:
        """Two-operand ALU micro-ops at one per cycle when their src repeats (a bias or a
        per-channel operand added to every entry of a tile): the micro-op that reads its src
        through the port keeps the value (``src_keep``, loaded in its E1 with the forwarded
        data), and a later micro-op whose src is that entry takes it instead of a second read,
        so it reads only dst, like an immediate. The entry is tracked in R, in program order:
        a micro-op leaving R that writes it (the reader itself included) ends the reuse, as do
        a GEMM micro-op and LOAD ACC. ``r_reuse`` is registered a cycle ahead from what R will
        hold, like the interlock. Returns (``r_reuse``, ``r_port_src``: the micro-op in R
        reads its src through the port)."""
        aw = self.cfg.log_acc_depth
        r, s2 = self.r, self.s2
        r_reuse, r_port_src = Signal(name="r_reuse"), Signal(name="r_port_src")
        addr = Signal(aw, name="src_keep_addr")
        ok = Signal(name="src_keep_ok")
        r_src = r.src[:aw]
        r_alu = r.valid & r.ctrl.alu
        m.d.comb += r_port_src.eq(r_alu & r.two & ~r_reuse)
        # the kept entry once the micro-op in R has left it
        addr_next = Mux(r_port_src, r_src, addr)
        ok_next = Mux(r_port_src, r.dst != r_src, ok & ~(r_alu & (r.dst == addr)))
        flush = (r.valid & ~r.ctrl.alu) | self.load_busy
        with m.If(flush):
            m.d.sync += [ok.eq(0), r_reuse.eq(0)]
        with m.Elif(adv):
            m.d.sync += [addr.eq(addr_next), ok.eq(ok_next),
                         r_reuse.eq(s2.two & ok_next & (s2.src[:aw] == addr_next))]
        return r_reuse, r_port_src

    def _operands(self, m: Module, lane_regs: LaneRegs, rd, e1, e3, e3_wb) -> tuple:
        """E1's forwarding into the operands, PRE (a chain's first right shift, by 0 when no
        member took it) and E2's operand registers. Returns E2's ``a`` and ``b`` lanes, its
        control (``valid``, per-lane ``valids``, ``ctrl``, ``dst``) and PRE's valid."""
        n, aw, hist = self.lanes, self.cfg.acc_width, self.history
        w_l, w1_l, w2_l, acc_l = (lanes(v, n, aw) for v in (
            hist.w.result, hist.w1.result, hist.w2_result, self.acc))

        # a two-operand micro-op's dst arrives in acc_q in its RD cycle, src in its E1 cycle.
        # The forwarding selects are registered one cycle ahead: in a stage's next cycle W
        # holds what is now in E3 (E1..W never stall), w1 what is now in W, w2 what is in w1.
        def selects(addr, name):
            return (lane_regs(e3_wb & (e3.dst == addr), f"{name}_w"),
                    lane_regs(hist.w.valid & (hist.w.dst == addr), f"{name}_w1"),
                    lane_regs(hist.w1.valid & (hist.w1.dst == addr), f"{name}_w2"))

        def pick(sel, k: int, value):
            return Mux(sel[0][k], w_l[k], Mux(sel[1][k], w1_l[k], Mux(sel[2][k], w2_l[k], value)))

        sel_rd = selects(self.r.dst, "sel_rd")
        dst_hold = [reg(m, pick(sel_rd, k, acc_l[k]), f"dst_hold_{k}") for k in range(n)]
        # a two-operand micro-op in E1 (its dst is in dst_hold, its src in acc_q)
        two = lane_regs(~rd.ctrl.use_imm & ~rd.reuse, "two")
        reuse = lane_regs(rd.reuse, "reuse")
        sel_a, sel_b = selects(rd.dst, "sel_a"), selects(rd.src, "sel_b")
        e1_valids = lane_regs(rd.valid, "e1_valid", same=e1.valid)
        a_e1 = [pick(sel_a, k, Mux(two[k], dst_hold[k], acc_l[k])) for k in range(n)]
        e2, p_valid, p_valids = self._pre(m, lane_regs, e1)
        e2_loads = [e1_valids[k] | p_valids[k] for k in range(n)]
        imm_ext = Signal(signed(aw))
        m.d.comb += imm_ext.eq(e2.in_ctrl.imm)
        e2_a = []
        for k in range(n):
            m.submodules[f"pre_lane_{k}"] = pre = TailLane(
                aw, STAGES[PRE], len(self.chain.pre_imm), max_shift=MAX_STAGE_SHIFT)
            m.d.comb += [pre.a.eq(a_e1[k]), pre.imm.eq(self.chain.pre_imm),
                         pre.en.eq(e1_valids[k])]
            e2_a.append(reg(m, Mux(p_valids[k], pre.result, a_e1[k]), f"e2_a_{k}",
                            en=e2_loads[k]))
        # the src operand a port read brings is kept for the two-operand micro-ops after it
        # that read the same entry (_src_reuse)
        src_l = [pick(sel_b, k, acc_l[k]) for k in range(n)]
        src_keep = [reg(m, src_l[k], f"src_keep_{k}", en=e1.valid & e1.port) for k in range(n)]
        e2_b = [reg(m, Mux(reuse[k] & ~p_valids[k], src_keep[k],
                           Mux(two[k] & ~p_valids[k], src_l[k], imm_ext)),
                    f"e2_b_{k}", en=e2_loads[k]) for k in range(n)]
        return e2_a, e2_b, e2, p_valid

    def _pre(self, m: Module, lane_regs: LaneRegs, e1) -> tuple:
        """PRE's control registers, for a chain's micro-ops only (one cycle between E1 and E2),
        and E2's. A chain's micro-ops follow every other micro-op in flight, so E1 and PRE
        never hand E2 one each in a cycle. Returns E2 (``valid``, ``valids``, ``ctrl``, ``dst``
        and ``in_ctrl``, the control entering it), PRE's valid and its per-lane copies."""
        e1_chain = e1.valid & e1.ctrl.chain
        p_valid = reg(m, e1_chain, "p_valid")
        p_valids = lane_regs(e1_chain, "p_valid", same=p_valid)
        p_ctrl = reg(m, e1.ctrl, "p_ctrl", en=e1_chain)
        p_dst = reg(m, e1.dst, "p_dst", en=e1_chain)
        to_e2 = Signal(name="to_e2")  # a micro-op enters E2 (from E1, or from PRE)
        in_ctrl = Signal(ctrl_layout(self.cfg), name="e2_in_ctrl")
        m.d.comb += [to_e2.eq((e1.valid & ~e1.ctrl.chain) | p_valid),
                     in_ctrl.eq(Mux(p_valid, p_ctrl.as_value(), e1.ctrl.as_value()))]
        e2_valid = reg(m, to_e2, "e2_valid")
        e2 = _E2(valid=e2_valid, valids=lane_regs(to_e2, "e2_valid", same=e2_valid),
                 ctrl=reg(m, in_ctrl, "e2_ctrl"),
                 dst=reg(m, Mux(p_valid, p_dst, e1.dst), "e2_dst"), in_ctrl=in_ctrl)
        return e2, p_valid, p_valids

    def _tail(self, m: Module, valid, dst, values: list) -> tuple:
        """The ALU tail after E3, two cycles per stage: a register of the previous stage's
        result, then a :class:`~vta.hw.alu.TailLane` per lane applying the operation of the
        member that took the stage (passing the value on if none did). Every chain micro-op
        goes through all of them. Returns the last stage's ``valid``, ``dst`` and ``values``
        and the stages' valid registers."""
        aw, chain = self.cfg.acc_width, self.chain
        valids = []
        for k, ops in enumerate(TAIL_STAGES, start=1):
            st = chain.stages[k - 1]
            p_valid = reg(m, valid, f"c{k}_valid")
            p_dst = reg(m, dst, f"c{k}_dst")
            p_vals = [reg(m, v, f"c{k}_a_{j}", en=valid) for j, v in enumerate(values)]
            results = []
            for j, v in enumerate(p_vals):
                m.submodules[f"tail_{k}_lane_{j}"] = lane = TailLane(
                    aw, ops, len(st.imm), max_shift=MAX_STAGE_SHIFT)
                m.d.comb += [lane.a.eq(v), lane.imm.eq(st.imm), lane.en.eq(p_valid),
                             lane.take.eq(st.take), lane.is_max.eq(st.is_max)]
                results.append(lane.result)
            valid, dst = reg(m, p_valid, f"c{k}_q_valid"), reg(m, p_dst, f"c{k}_q_dst")
            values = results
            valids += [p_valid, valid]
        return {"valid": valid, "dst": dst, "values": values}, valids
