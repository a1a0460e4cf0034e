"""The compute module's ALU tail: which consecutive ALU instructions run as one pass.

TVM's ALU applies one operation per pass over an instruction's loops, so a requantization
epilogue (shift, multiply, round, shift, min, max: six instructions with an immediate over the
same accumulator tile) passes over the tile six times. The kit's core has a short tail of ALU
stages after its ALU, each running only what an epilogue needs there (:data:`TAIL_STAGES`:
round, shift, clip; the multiply stays in the ALU, whose multipliers the core has anyway).
A run of ALU instructions with an immediate over the same loops and one micro-op whose
iterations visit distinct accumulator entries gives the same accumulators run instruction by
instruction or entry by entry (each entry meets the operations in program order and none is
visited twice), so the core runs such a run as ONE pass, a *chain*: its first instruction (the
head) in the ALU, each next one in the first tail stage after the previous member's that runs
its operation; stages no member takes pass the value on.

This module is the rule's one statement: the RTL (:mod:`vta.hw.compute`) builds its tail and
the logic that gathers a chain from :data:`TAIL_STAGES` and :func:`tail_op_fits`, and the
performance model (:mod:`vta.sim.perf`) and the benchmarks count passes with
:func:`alu_chains`. Programs stay TVM's: they run the same, one pass per instruction, on any
other VTA.
"""

from __future__ import annotations

from collections.abc import Sequence

from .deps import COMPUTE_MODULE
from .insn import AluInsn, FinishInsn, Insn
from .layout import AluOp

__all__ = ["TAIL_STAGES", "ALU_CHAIN", "tail_op_fits", "tail_stage", "chain_head", "joins",
           "alu_chains"]

#: The tail's stages in order, with the operations each runs with an immediate: add (a rounding
#: term), shift right, then two stages of min/max (the clip). SHR here shifts right only (a
#: non-negative immediate). A requantization by a fixed-point multiplier (shift, multiply,
#: round, shift, min, max) is two chains: the first shift, then the rest headed by the MUL.
TAIL_STAGES: tuple[frozenset[AluOp], ...] = (
    frozenset({AluOp.ADD}), frozenset({AluOp.SHR}),
    frozenset({AluOp.MIN, AluOp.MAX}), frozenset({AluOp.MIN, AluOp.MAX}))
#: Most instructions one chain runs: the head and one per tail stage.
ALU_CHAIN = 1 + len(TAIL_STAGES)


def tail_op_fits(op: int, imm: int) -> bool:
    """Whether a tail stage that runs ``op`` can take it with ``imm`` (SHR: right shifts
    only)."""
    return op != AluOp.SHR or imm >= 0


def tail_stage(op: int, imm: int, first: int) -> int | None:
    """The first tail stage at index ``first`` or later that runs ``op`` with ``imm``, or
    None."""
    if not tail_op_fits(op, imm):
        return None
    return next((k for k in range(first, len(TAIL_STAGES)) if op in TAIL_STAGES[k]), None)


def chain_head(insn: Insn) -> bool:
    """Whether ``insn`` can head a chain: an ALU with an immediate that pushes no token, with
    one micro-op whose loops visit distinct accumulator entries."""
    return (type(insn) is AluInsn and bool(insn.use_imm)
            and not (insn.push_prev_dep or insn.push_next_dep)
            and insn.uop_end == insn.uop_bgn + 1 and insn.iter_out > 0 and insn.iter_in > 0
            and (insn.iter_in == 1 or insn.dst_factor_in == 1)
            and (insn.iter_out == 1 or insn.dst_factor_out >= insn.iter_in))


def joins(head: AluInsn, insn: Insn) -> bool:
    """Whether ``insn`` (the compute instruction after a chain's last member) runs the same
    loops as ``head`` with an immediate and pops no token (where it goes in the tail is
    :func:`tail_stage`'s)."""
    return (type(insn) is AluInsn and bool(insn.use_imm)
            and not (insn.pop_prev_dep or insn.pop_next_dep)
            and (insn.uop_bgn, insn.uop_end, insn.iter_out, insn.iter_in, insn.dst_factor_out,
                 insn.dst_factor_in)
            == (head.uop_bgn, head.uop_end, head.iter_out, head.iter_in, head.dst_factor_out,
                head.dst_factor_in))


def alu_chains(insns: Sequence[Insn]) -> dict[int, int]:
    """The chains of a program: index -> chain length for each instruction that heads one (1
    when nothing joined it), 0 for the later members. A chain takes each next compute
    instruction that :func:`joins` it and has a tail stage after the previous member's
    (:func:`tail_stage`) while its last member pushed no token."""
    out: dict[int, int] = {}
    head: int | None = None
    stage, is_open = 0, False
    for k, insn in enumerate(insns):
        if type(insn) is not FinishInsn and insn.module != COMPUTE_MODULE:
            continue
        if head is not None and is_open and joins(insns[head], insn):
            at = tail_stage(insn.alu_opcode, insn.imm, stage)
            if at is not None:
                out[k], stage = 0, at + 1
                out[head] += 1
                is_open = not (insn.push_prev_dep or insn.push_next_dep)
                continue
        head = None
        if chain_head(insn):  # (a head pushes no token)
            head, stage, is_open, out[k] = k, 0, True, 1
    return out
