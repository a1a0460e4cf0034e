"""Dependency-token bookkeeping of one program, with the semantics of TVM's ``runtime.cc``.

Stages are TVM's numbers (1 load, 2 compute, 3 store: the index in :data:`vta.isa.MODULES`
plus one) or the module names. The :class:`TokenTracker` counts the tokens outstanding in each
of the four queues and the pops waiting to be set on the next instruction of a stage
(``dep_pop`` is lazy); it decides nothing about instructions, which the program builder emits.
"""

from __future__ import annotations

from vta.isa import MODULES, TOKEN_QUEUE_DEPTH, TOKEN_QUEUE_NAMES, TOKEN_QUEUES

from .errors import QueueError

LOAD_STAGE, COMPUTE_STAGE, STORE_STAGE = 1, 2, 3
STAGES = {m: k + 1 for k, m in enumerate(MODULES)}
STAGE_NAMES = {v: k for k, v in STAGES.items()}
QUEUE_NAMES = TOKEN_QUEUE_NAMES
#: (from stage, to stage) -> index of the token queue (the order of vta.isa.TOKEN_QUEUES)
QUEUE_INDEX = {(STAGES[q.src], STAGES[q.dst]): k for k, q in enumerate(TOKEN_QUEUES)}
L2C, C2L, C2S, S2C = (QUEUE_INDEX[(STAGES[q.src], STAGES[q.dst])] for q in TOKEN_QUEUES)

# (from, to) as given by a caller (names or numbers) -> stage numbers, for the valid pairs
_PAIRS = {(a, b): pair for a in STAGES for b in STAGES
          if (pair := (STAGES[a], STAGES[b])) in QUEUE_INDEX}
_PAIRS.update({pair: pair for pair in list(_PAIRS.values())})


def as_stage(value: str | int) -> int:
    """A stage number (1 load, 2 compute, 3 store) from its name or number."""
    if isinstance(value, str):
        s = STAGES.get(value.lower())
    else:
        s = int(value) if value in (1, 2, 3) else None
    if s is None:
        raise QueueError(f"unknown stage {value!r}; use 'load', 'compute' or 'store'")
    return s


def stage_pair(from_stage: str | int, to_stage: str | int) -> tuple[int, int]:
    """(from, to) as stage numbers; QueueError when no token queue links them."""
    pair = _PAIRS.get((from_stage, to_stage))
    if pair is not None:
        return pair
    frm, to = as_stage(from_stage), as_stage(to_stage)
    if (frm, to) not in QUEUE_INDEX:
        raise QueueError(
            f"no token queue from {STAGE_NAMES[frm]!r} to {STAGE_NAMES[to]!r}; the queues are "
            f"{', '.join(QUEUE_NAMES)}")
    return frm, to


def push_flag(frm: int, to: int) -> str:
    """The flag an instruction of stage ``frm`` sets to push a token to ``to``."""
    return TOKEN_QUEUES[QUEUE_INDEX[(frm, to)]].push_flag


def pop_flag(frm: int, to: int) -> str:
    """The flag an instruction of stage ``to`` sets to pop a token from ``frm``."""
    return TOKEN_QUEUES[QUEUE_INDEX[(frm, to)]].pop_flag


class TokenTracker:
    """Tokens outstanding per queue and pops pending per stage, for one program."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0, 0]
        # stage -> {pop flag: 1} to set on that stage's next instruction
        self._pending: dict[int, dict[str, int]] = {s: {} for s in STAGE_NAMES}

    def pushed(self, frm: int, to: int) -> None:
        """Count a token pushed from ``frm`` to ``to`` (QueueError beyond the queue's depth)."""
        q = QUEUE_INDEX[(frm, to)]
        self.counts[q] += 1
        if self.counts[q] > TOKEN_QUEUE_DEPTH:
            raise QueueError(
                f"{self.counts[q]} tokens outstanding in the {QUEUE_NAMES[q]} queue (depth "
                f"{TOKEN_QUEUE_DEPTH}): pop them (dep_pop) before pushing more")

    def check_pop(self, frm: int, to: int) -> None:
        """QueueError when a pop from ``frm`` to ``to`` has no token to take."""
        q = QUEUE_INDEX[(frm, to)]
        if self.counts[q] <= 0:
            raise QueueError(
                f"dep_pop({STAGE_NAMES[frm]!r}, {STAGE_NAMES[to]!r}) without a matching dep_push: "
                f"the {QUEUE_NAMES[q]} queue would be empty and the program would deadlock")

    def pop_pending(self, frm: int, to: int) -> bool:
        """Whether stage ``to`` already waits to set the pop flag for ``frm`` (then the pending
        pop must be committed on an instruction before this one is added)."""
        return pop_flag(frm, to) in self._pending[to]

    def add_pop(self, frm: int, to: int) -> None:
        """Stage ``to`` will pop a token from ``frm`` with its next instruction."""
        self._pending[to][pop_flag(frm, to)] = 1
        self.counts[QUEUE_INDEX[(frm, to)]] -= 1

    def has_pending(self, stage: int) -> bool:
        return bool(self._pending[stage])

    def take_pops(self, stage: int) -> dict[str, int]:
        """The pop flags for the next instruction of ``stage`` (and forget them)."""
        flags, self._pending[stage] = self._pending[stage], {}
        return flags

    def drain_insns(self) -> int:
        """At most how many instructions draining the outstanding tokens takes (see
        :meth:`ProgramBuilder.drain`), FINISH included."""
        t = self.counts
        return 3 + t[C2L] + t[C2S] + 2 + max(t[L2C], t[S2C]) + 2

    def by_name(self) -> dict[str, int]:
        return {QUEUE_NAMES[q]: n for q, n in enumerate(self.counts)}


__all__ = ["TokenTracker", "as_stage", "stage_pair", "push_flag", "pop_flag", "STAGES",
           "STAGE_NAMES", "QUEUE_NAMES", "QUEUE_INDEX", "LOAD_STAGE", "COMPUTE_STAGE",
           "STORE_STAGE", "L2C", "C2L", "C2S", "S2C"]
