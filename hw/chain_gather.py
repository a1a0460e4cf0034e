"""ALU chains' gathering (:mod:`vta.isa.fusion`): which instructions after an ALU join it.

:class:`ChainGather` watches the instruction the compute sequencer holds and the head of the
compute queue (registered: the sequencer looks at it a cycle after the queue presents it and
takes it a cycle later, :data:`~vta.hw.sequencer.GATHER_CYCLES`), and records, per member the
sequencer takes, the stage it runs in.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for
from vta.isa import Config
from vta.isa.fusion import ALU, ALU_CHAIN, MAX_STAGE_SHIFT, PRE, STAGES, TAIL_STAGES
from vta.isa.layout import AluOp, Opcode

from .pipeline import reg

__all__ = ["ChainGather", "chain_layout", "take_layout"]


def chain_layout(cfg: Config) -> data.StructLayout:
    """The chain an instruction heads: ``length`` (members), ``fused`` (``length`` > 1),
    ``pre_imm`` (PRE's shift, 0 while no member takes it) and per tail stage its ``imm`` (0
    while no member takes it), ``take`` and ``is_max`` (``stages``)."""
    imm = signed(cfg.layouts.alu["imm"].width)
    stage = data.StructLayout({"imm": imm, "take": 1, "is_max": 1})
    return data.StructLayout({"length": range(ALU_CHAIN + 1), "fused": 1, "pre_imm": imm,
                              "stages": data.ArrayLayout(stage, len(TAIL_STAGES))})


def take_layout(cfg: Config) -> data.StructLayout:
    """What taking the member the sequencer looked at writes into the chain's instruction:
    its token pushes (``push_prev``, ``push_next``) and, when it takes the ALU (``alu``), its
    operation (``op``, ``imm``)."""
    return data.StructLayout({"alu": 1, "op": 3, "imm": signed(cfg.layouts.alu["imm"].width),
                              "push_prev": 1, "push_next": 1})


def _stage_shift(imm):
    """Whether a SHR by ``imm`` fits a stage outside the ALU (``vta.isa.fusion.stage_fits``:
    0 to :data:`~vta.isa.fusion.MAX_STAGE_SHIFT`)."""
    return imm[bits_for(MAX_STAGE_SHIFT):] == 0


class ChainGather(wiring.Component):
    """An ALU instruction with an immediate, no token to push and one micro-op whose loops
    visit distinct accumulator entries (``iter_in`` = 1 or ``dst_factor_in`` = 1, and
    ``iter_out`` = 1 or ``dst_factor_out`` >= ``iter_in``) heads a chain (``head``), in the PRE
    stage if it is a right shift, else in the ALU; each next instruction of the queue that is
    an ALU with an immediate over the same loops and micro-op, pops no token, follows a member
    that pushes none and has a stage after the previous member's that runs its operation
    joins it (``joins``), in the first such stage. The chain runs as one instruction whose
    micro-ops pass through PRE, the ALU and the tail; its last member's token pushes are the
    chain's. A member that takes the ALU after a head in PRE becomes the instruction's
    operation, the head's shift PRE's.

    Inputs: ``insn`` (the sequencer's instruction register), ``queue``/``queue_valid`` (the
    compute queue's head), ``new`` (the sequencer takes a new instruction), ``absorb`` (it
    takes the member it looked at). Outputs: ``head``, ``joins``, ``chain``
    (:func:`chain_layout`) and ``take`` (:func:`take_layout`: what ``absorb`` writes into
    ``insn``, which the sequencer owns).
    """

    def __init__(self, cfg: Config, *, insn_layout: data.Layout) -> None:
        self.cfg = cfg
        super().__init__({
            "insn": In(insn_layout), "queue": In(insn_layout), "queue_valid": In(1),
            "new": In(1), "absorb": In(1),
            "head": Out(1), "joins": Out(1),
            "chain": Out(chain_layout(cfg)), "take": Out(take_layout(cfg)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        g, a = self.insn.gemm, self.insn.alu
        nxt = reg(m, self.queue, "queue_head")
        nxt_valid = reg(m, self.queue_valid, "queue_head_valid")
        ng, na = nxt.gemm, nxt.alu
        chain = Signal(chain_layout(self.cfg), init={"length": 1}, name="chain")
        nxt_stage = Signal(range(len(STAGES) + 1), name="chain_next_stage")
        is_open = Signal(name="chain_open")
        fits = self._fits(m, chain.length, nxt_stage, na)
        m.d.comb += [
            self.head.eq((self.insn.mem.opcode == Opcode.ALU) & a.use_imm
                         & ~self.insn.mem.push_prev_dep & ~self.insn.mem.push_next_dep
                         & (g.uop_end == g.uop_bgn + 1) & (g.iter_out != 0) & (g.iter_in != 0)
                         & ((g.iter_in == 1) | (a.dst_factor_in == 1))
                         & ((g.iter_out == 1) | (a.dst_factor_out >= g.iter_in))),
            self.joins.eq(nxt_valid & is_open & Cat(*fits.values()).any()
                          & (nxt.mem.opcode == Opcode.ALU)
                          & na.use_imm & ~nxt.mem.pop_prev_dep & ~nxt.mem.pop_next_dep
                          & (ng.uop_bgn == g.uop_bgn) & (ng.uop_end == g.uop_end)
                          & (ng.iter_out == g.iter_out) & (ng.iter_in == g.iter_in)
                          & (na.dst_factor_out == a.dst_factor_out)
                          & (na.dst_factor_in == a.dst_factor_in)),
            self.chain.eq(chain),
            self.chain.fused.eq(chain.length > 1),
        ]
        with m.If(self.new):
            m.d.sync += [chain.length.eq(1), is_open.eq(1), chain.pre_imm.eq(0)]
            for st in chain.stages:
                m.d.sync += [st.imm.eq(0), st.take.eq(0)]
        # the sequencer takes a member the cycle after it looked at it: what the take writes
        # comes from registers
        take = self.take
        look_fits = {k: reg(m, v, f"look_{k}_fits") for k, v in fits.items()}
        m.d.sync += [take.op.eq(na.alu_opcode), take.imm.eq(na.imm),
                     take.push_prev.eq(nxt.mem.push_prev_dep),
                     take.push_next.eq(nxt.mem.push_next_dep)]
        m.d.comb += take.alu.eq(look_fits[ALU])
        with m.If(self.absorb):
            m.d.sync += chain.length.eq(chain.length + 1)
            with m.If(take.push_prev | take.push_next):
                m.d.sync += is_open.eq(0)
            for k, fit in look_fits.items():  # the first stage that fits
                with (m.If if k == ALU else m.Elif)(fit):
                    m.d.sync += nxt_stage.eq(k + 1)
                    if k == ALU:  # after a head in PRE: the ALU runs this member
                        m.d.sync += chain.pre_imm.eq(a.imm)
                    else:
                        st = chain.stages[k - ALU - 1]
                        m.d.sync += [st.imm.eq(take.imm), st.take.eq(1),
                                     st.is_max.eq(take.op == AluOp.MAX)]
        return m

    def _fits(self, m: Module, length, nxt_stage, na) -> dict:
        """Per stage from the ALU on, whether the queue's head may take it: the first stage
        the next member may take is after the head's (PRE for a right shift, else the ALU;
        from the instruction register) until a member joined, then after the last member's;
        a SHR outside the ALU shifts right by at most MAX_STAGE_SHIFT (``stage_fits``)."""
        a = self.insn.alu
        op = na.alu_opcode
        right = _stage_shift(na.imm)
        head_in_pre = (a.alu_opcode == AluOp.SHR) & _stage_shift(a.imm)
        first = Signal.like(nxt_stage, name="chain_first_free")
        m.d.comb += first.eq(Mux(length == 1, Mux(head_in_pre, PRE + 1, ALU + 1), nxt_stage))
        fits = {k: Signal(name=f"stage_{k}_fits") for k in range(ALU, len(STAGES))}
        for k, sig in fits.items():
            runs = Cat(*(op == o for o in sorted(STAGES[k]))).any()
            m.d.comb += sig.eq((first <= k) & runs
                               & (right if k != ALU and AluOp.SHR in STAGES[k] else 1))
        return fits
