"""The compute module's ALU chains: which consecutive ALU instructions run as one pass.

TVM's ALU applies one operation per pass over an instruction's loops, so a requantization
epilogue (shift, multiply, round, shift, min, max: six instructions with an immediate over the
same accumulator tile) passes over the tile six times. The kit's core puts narrow stages around
its ALU, each running only what an epilogue needs there (:data:`STAGES`): a right shift before
it, then the ALU itself (any operation), then a tail of round, shift and clip. A run of ALU
instructions with an immediate over the same loops and one micro-op whose iterations visit
distinct accumulator entries gives the same accumulators run instruction by instruction or
entry by entry (each entry meets the operations in program order and none is visited twice), so
the core runs such a run as ONE pass, a *chain*: each instruction in the first stage after the
previous one's that runs its operation (the first, the head, in the shift stage or the ALU);
stages no instruction takes pass the value on. A requantization epilogue is one chain.

This module is the rule's one statement: the RTL (:mod:`vta.hw.compute`) builds its stages and
the logic that gathers a chain from :data:`STAGES` and :data:`MAX_STAGE_SHIFT` (the hardware
form of :func:`stage_fits`), and the performance model (:mod:`vta.sim.perf`) and the
benchmarks count passes with :func:`alu_chains`. Programs
stay TVM's: they run the same, one pass per instruction, on any other VTA.
"""

from __future__ import annotations

from collections.abc import Sequence

from .deps import COMPUTE_MODULE
from .insn import AluInsn, FinishInsn, Insn
from .layout import AluOp

__all__ = ["STAGES", "PRE", "ALU", "MAX_STAGE_SHIFT", "TAIL_STAGES", "ALU_CHAIN", "stage_fits",
           "stage_of", "chain_head", "joins", "alu_chains"]

_MIN_MAX = frozenset({AluOp.MIN, AluOp.MAX})
#: The stages a chain's micro-ops pass through, in order, with the operations each runs with
#: an immediate: a right shift (PRE, the requantization's first shift), the ALU (ALU: any
#: operation), then the tail: add (a rounding term), right shift, and two stages of min/max
#: (the clip). A SHR outside the ALU shifts right by 0 to :data:`MAX_STAGE_SHIFT` only.
STAGES: tuple[frozenset[AluOp], ...] = (
    frozenset({AluOp.SHR}), frozenset(AluOp), frozenset({AluOp.ADD}), frozenset({AluOp.SHR}),
    _MIN_MAX, _MIN_MAX)
#: Largest amount of a SHR outside the ALU (a four-level shifter; a requantization's shifts are
#: at most 15: the rounding term ``2**(k-1)`` is a 16-bit immediate).
MAX_STAGE_SHIFT = 15
#: Indices of the shift before the ALU and of the ALU in :data:`STAGES`.
PRE, ALU = 0, 1
#: The stages after the ALU.
TAIL_STAGES = STAGES[ALU + 1:]
#: Most instructions one chain runs: one per stage.
ALU_CHAIN = len(STAGES)


def stage_fits(stage: int, op: int, imm: int) -> bool:
    """Whether :data:`STAGES` ``[stage]`` runs ``op`` with ``imm`` (a SHR outside the ALU:
    right shifts by at most :data:`MAX_STAGE_SHIFT`)."""
    return op in STAGES[stage] and (stage == ALU or op != AluOp.SHR
                                    or 0 <= imm <= MAX_STAGE_SHIFT)


def stage_of(op: int, imm: int, first: int) -> int | None:
    """The first stage at index ``first`` or later that runs ``op`` with ``imm``, or None (a
    head looks from 0, a later member from the stage after the previous member's)."""
    return next((k for k in range(first, len(STAGES)) if stage_fits(k, op, imm)), None)


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
    loops as ``head`` with an immediate and pops no token (which stage it takes is
    :func:`stage_of`'s)."""
    return (type(insn) is AluInsn and bool(insn.use_imm)
            and not (insn.pop_prev_dep or insn.pop_next_dep)
            and (insn.uop_bgn, insn.uop_end, insn.iter_out, insn.iter_in, insn.dst_factor_out,
                 insn.dst_factor_in)
            == (head.uop_bgn, head.uop_end, head.iter_out, head.iter_in, head.dst_factor_out,
                head.dst_factor_in))


def alu_chains(insns: Sequence[Insn]) -> dict[int, int]:
    """The chains of a program: index -> chain length for each instruction that heads one (1
    when nothing joined it), 0 for the later members. A chain takes each next compute
    instruction that :func:`joins` it and has a stage after the previous member's
    (:func:`stage_of`) while its last member pushed no token."""
    out: dict[int, int] = {}
    head: int | None = None
    stage, is_open = 0, False
    for k, insn in enumerate(insns):
        if type(insn) is not FinishInsn and insn.module != COMPUTE_MODULE:
            continue
        if head is not None and is_open and joins(insns[head], insn):
            at = stage_of(insn.alu_opcode, insn.imm, stage + 1)
            if at is not None:
                out[k], stage = 0, at
                out[head] += 1
                is_open = not (insn.push_prev_dep or insn.push_next_dep)
                continue
        head = None
        if chain_head(insn):  # (a head pushes no token)
            head, is_open, out[k] = k, True, 1
            stage = stage_of(insn.alu_opcode, insn.imm, PRE)
    return out
