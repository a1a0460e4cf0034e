"""The program under construction by a command queue: instructions as field rows, their stages,
dependency tokens, relocations and the micro-op segment of a recording.

Instructions are kept as ``(layout name, {field: value})`` rows and encoded once, by the ISA's
vectorised encoder (:func:`vta.isa.encode_rows`), when the program is finished. Token flags are
set on rows: ``push`` marks the last instruction of a stage (or a no-op of that stage), a pop is
set on the next instruction of its stage (see :class:`~vta.runtime.tokens.TokenTracker`).
"""

from __future__ import annotations

from vta.isa import DEP_FLAGS, Config, MemType, Opcode, encode_rows, nop_insn, words_to_bytes

from .counters import QueueStats
from .record import Relocation
from .tokens import (
    C2L,
    C2S,
    COMPUTE_STAGE,
    L2C,
    LOAD_STAGE,
    QUEUE_INDEX,
    S2C,
    STAGE_NAMES,
    STORE_STAGE,
    TokenTracker,
    pop_flag,
    push_flag,
)

Row = tuple[str, dict[str, int]]
#: The fields of a no-op (an x_size=0 LOAD/STORE that only moves tokens) per stage.
_NOOP = {s: nop_insn(m).values() for s, m in STAGE_NAMES.items()}
_FINISH: dict[str, int] = {"opcode": int(Opcode.FINISH)}


def mem_row(opcode: int, memory_type: int, **fields: int) -> Row:
    """A LOAD/STORE row."""
    return "mem", {"opcode": int(opcode), "memory_type": int(memory_type), **fields}


class ProgramBuilder:
    """Rows, stages and tokens of one program (a segment between two synchronizes)."""

    def __init__(self, cfg: Config, stats: QueueStats | None = None) -> None:
        self.cfg = cfg
        #: counts the no-ops emitted (``noops``): the queue passes its statistics
        self.stats = stats if stats is not None else QueueStats()
        self.rows: list[Row] = []
        self.stages: list[int] = []
        self.tokens = TokenTracker()
        self.relocs: dict[int, Relocation] = {}
        self._last = [-1, -1, -1, -1]  # per stage: index of its last instruction
        self.uop_segment = bytearray()  # micro-op words a recording loads (its own segment)
        self._uop_offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self.rows)

    # ------------------------------------------------------------------ emission
    def emit(self, row: Row, stage: int) -> int:
        """Append an instruction of ``stage`` (taking the stage's pending pops); its index."""
        if self.tokens.has_pending(stage):
            row = (row[0], {**row[1], **self.tokens.take_pops(stage)})
        self.rows.append(row)
        self.stages.append(stage)
        idx = len(self.rows) - 1
        self._last[stage] = idx
        return idx

    def noop(self, stage: int) -> int:
        """A no-op of ``stage``: it only moves tokens."""
        self.stats.noops += 1
        return self.emit(("mem", dict(_NOOP[stage])), stage)

    # ------------------------------------------------------------------ tokens
    def push(self, frm: int, to: int) -> None:
        """Stage ``frm`` pushes a token to ``to``: the flag goes on its last instruction unless
        that one already pushes there (then on a no-op)."""
        self.commit_pop(frm)
        flag = push_flag(frm, to)
        last = self._last[frm]
        if last < 0 or self.rows[last][1].get(flag):
            last = self.noop(frm)
        self.rows[last][1][flag] = 1
        self.tokens.pushed(frm, to)

    def pop(self, frm: int, to: int) -> None:
        """Stage ``to`` pops a token from ``frm`` with its next instruction (lazy)."""
        if self.tokens.pop_pending(frm, to):
            self.commit_pop(to)
        self.tokens.add_pop(frm, to)

    def commit_pop(self, stage: int) -> None:
        """Set the stage's pending pops now, on a no-op."""
        if self.tokens.has_pending(stage):
            self.noop(stage)

    def repush(self, carry: list[int]) -> None:
        """Re-issue tokens that were outstanding when the previous program was cut."""
        for (frm, to), q in QUEUE_INDEX.items():
            for _ in range(carry[q]):
                self.push(frm, to)

    def drain(self) -> None:
        """Commit every pending pop and drain every outstanding token (so the program ends
        with empty token queues)."""
        for st in (LOAD_STAGE, COMPUTE_STAGE, STORE_STAGE):
            self.commit_pop(st)
        t = self.tokens.counts
        for _ in range(t[C2L]):
            self.pop(COMPUTE_STAGE, LOAD_STAGE)
            self.commit_pop(LOAD_STAGE)
        for _ in range(t[C2S]):
            self.pop(COMPUTE_STAGE, STORE_STAGE)
            self.commit_pop(STORE_STAGE)
        self.push(LOAD_STAGE, COMPUTE_STAGE)
        self.push(STORE_STAGE, COMPUTE_STAGE)
        while t[L2C] or t[S2C]:
            if t[L2C]:
                self.pop(LOAD_STAGE, COMPUTE_STAGE)
            if t[S2C]:
                self.pop(STORE_STAGE, COMPUTE_STAGE)
            self.commit_pop(COMPUTE_STAGE)

    # ------------------------------------------------------------------ relocation
    def relocate_arena(self, idx: int, elem_bytes: int, elem_offset: int) -> None:
        """Instruction ``idx`` addresses the arena at element ``elem_offset``."""
        self.relocs[idx] = Relocation(idx, "arena", elem_bytes, elem_offset)

    def uop_offset(self, key: bytes) -> int:
        """Where (in micro-op words) a kernel's micro-ops are in the recording's segment."""
        off = self._uop_offsets.get(key)
        if off is None:
            off = len(self.uop_segment) // 4
            self.uop_segment += key
            self._uop_offsets[key] = off
        return off

    def relocate_uops(self, idx: int, offset: int) -> None:
        self.relocs[idx] = Relocation(idx, "uop", 4, offset)

    # ------------------------------------------------------------------ output
    def finished(self) -> tuple[list[Row], dict[int, Relocation]]:
        """The rows with FINISH appended (FINISH carries no token flags)."""
        return [*self.rows, ("finish", dict(_FINISH))], self.relocs

    def serialized(self) -> tuple[list[Row], dict[int, Relocation]]:
        """The program rewritten so that every instruction waits for the previous one (its
        own token flags dropped), with FINISH; relocations follow their instructions."""
        rows: list[Row] = []
        stages: list[int] = []

        def add(row: Row, stage: int) -> None:
            if stages and {stages[-1], stage} == {LOAD_STAGE, STORE_STAGE}:
                add(("mem", dict(_NOOP[COMPUTE_STAGE])), COMPUTE_STAGE)
            fields = {k: v for k, v in row[1].items() if k not in DEP_FLAGS}
            rows.append((row[0], fields))
            stages.append(stage)
            if len(rows) > 1:
                _link(rows, stages, len(rows) - 2)

        relocs: dict[int, Relocation] = {}
        for i, (row, stage) in enumerate(zip(self.rows, self.stages)):
            add(row, stage)
            if i in self.relocs:
                r = self.relocs[i]
                relocs[len(rows) - 1] = Relocation(len(rows) - 1, r.kind, r.elem_bytes, r.offset)
        if not stages or stages[-1] != COMPUTE_STAGE:
            add(("mem", dict(_NOOP[COMPUTE_STAGE])), COMPUTE_STAGE)
        return [*rows, ("finish", dict(_FINISH))], relocs

    def encode(self, rows: list[Row] | None = None) -> bytes:
        """The instruction stream of ``rows`` (default: the instructions so far, unfinished)."""
        return words_to_bytes(encode_rows(self.rows if rows is None else rows, self.cfg))


def _link(rows: list[Row], stages: list[int], a: int) -> None:
    """Instruction ``a + 1`` waits for instruction ``a`` (a token between their stages)."""
    sa, sb = stages[a], stages[a + 1]
    if sa != sb:
        rows[a][1][push_flag(sa, sb)] = 1
        rows[a + 1][1][pop_flag(sa, sb)] = 1


def uop_load_row(sram_base: int, dram_base: int, n: int) -> Row:
    """LOAD UOP of ``n`` micro-ops."""
    return mem_row(Opcode.LOAD, MemType.UOP, sram_base=sram_base, dram_base=dram_base,
                   y_size=1, x_size=n, x_stride=n)


__all__ = ["ProgramBuilder", "Row", "mem_row", "uop_load_row"]
