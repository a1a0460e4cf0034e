"""The compute module's instruction sequencer: the pop/run/push life cycle
(:func:`~vta.hw.sequencer.instruction_sequencer`) with ALU chains gathered
(:class:`~vta.hw.chain_gather.ChainGather`)."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from vta.isa import Config
from vta.isa.layout import Opcode

from .chain_gather import ChainGather, chain_layout
from .queues import TokenPopSignature, TokenPushSignature
from .sequencer import ModuleStatusSignature, instruction_sequencer

__all__ = ["ComputeSequencer"]


class ComputeSequencer(wiring.Component):
    """Takes instructions from ``queue`` into ``insn`` (a register), pops their tokens, starts
    them (``go``, one cycle), waits until they are done, then pushes their tokens.

    ``work_busy``: the started instruction still runs (a DMA reader, the loop issuer, a LOAD
    ACC waiting for the pipeline); ``pipe_busy``: micro-ops are in the pipeline. An
    instruction that pushes a token, FINISH and an ALU chain are done only once the pipeline
    is empty too (a chain's results are written after the interlock's reach: the next
    instruction starts on an empty pipeline). ``chain`` describes the chain ``insn`` heads
    (:func:`~vta.hw.chain_gather.chain_layout`); ``status`` is the sequencer's part of the
    module status.
    """

    def __init__(self, cfg: Config, *, insn_layout: data.Layout) -> None:
        self.cfg, self.insn_layout = cfg, insn_layout
        super().__init__({
            "queue": In(stream.Signature(insn_layout)),
            "pop_prev": Out(TokenPopSignature()), "pop_next": Out(TokenPopSignature()),
            "push_prev": Out(TokenPushSignature()), "push_next": Out(TokenPushSignature()),
            "clear": In(1), "work_busy": In(1), "pipe_busy": In(1),
            "insn": Out(insn_layout), "go": Out(1),
            "chain": Out(chain_layout(cfg)),
            "status": Out(ModuleStatusSignature()),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        insn, queue = self.insn, self.queue
        m.submodules.chain_gather = gather = ChainGather(self.cfg, insn_layout=self.insn_layout)
        m.d.comb += [gather.insn.eq(insn), gather.queue.eq(queue.payload),
                     gather.queue_valid.eq(queue.valid),
                     gather.new.eq(queue.valid & queue.ready & ~gather.absorb),
                     self.chain.eq(gather.chain)]
        take = gather.take
        with m.If(gather.absorb):
            m.d.sync += [insn.mem.push_prev_dep.eq(insn.mem.push_prev_dep | take.push_prev),
                         insn.mem.push_next_dep.eq(insn.mem.push_next_dep | take.push_next)]
            with m.If(take.alu):  # after a head in PRE: the ALU runs this member
                m.d.sync += [insn.alu.alu_opcode.eq(take.op), insn.alu.imm.eq(take.imm)]
        need_drain = (insn.mem.push_prev_dep | insn.mem.push_next_dep
                      | (insn.mem.opcode == Opcode.FINISH) | gather.chain.fused)
        go = instruction_sequencer(
            m, insn_stream=queue, insn=insn,
            pops=[(insn.mem.pop_prev_dep, self.pop_prev), (insn.mem.pop_next_dep, self.pop_next)],
            pushes=[(insn.mem.push_prev_dep, self.push_prev),
                    (insn.mem.push_next_dep, self.push_next)],
            exec_busy=self.work_busy | (need_drain & self.pipe_busy), status=self.status,
            clear=self.clear, gather=(gather.head, gather.joins, gather.absorb),
            done_inc=gather.chain.length)
        m.d.comb += self.go.eq(go)
        return m
