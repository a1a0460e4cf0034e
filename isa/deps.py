"""The three modules and the four dependency-token queues between them (ARCHITECTURE.md).

Every layer takes these facts from here: which modules exist (in TVM's stage order), which
dependency flags each may set, and which token queue a flag of a module pops or pushes.
"prev"/"next" are relative to the module: load's next is compute; compute's prev is load and its
next is store; store's prev is compute.

>>> queue_of("compute", "pop_prev_dep").name
'load->compute'
>>> [q.short for q in TOKEN_QUEUES]
['l2c', 'c2l', 'c2s', 's2c']
"""

from __future__ import annotations

from dataclasses import dataclass

#: Which module executes an instruction.
LOAD_MODULE, COMPUTE_MODULE, STORE_MODULE = "load", "compute", "store"
#: The modules in TVM's stage order (its stage numbers are the index + 1).
MODULES = (LOAD_MODULE, COMPUTE_MODULE, STORE_MODULE)

#: The four one-bit dependency flags of every instruction, in field order.
DEP_FLAGS = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")
POP_FLAGS = DEP_FLAGS[:2]
PUSH_FLAGS = DEP_FLAGS[2:]

#: Each module's neighbours (None where it has none).
PREV = {LOAD_MODULE: None, COMPUTE_MODULE: LOAD_MODULE, STORE_MODULE: COMPUTE_MODULE}
NEXT = {LOAD_MODULE: COMPUTE_MODULE, COMPUTE_MODULE: STORE_MODULE, STORE_MODULE: None}


@dataclass(frozen=True)
class TokenQueue:
    """The token queue from module ``src`` to module ``dst``."""

    src: str
    dst: str

    @property
    def name(self) -> str:
        """``"load->compute"`` (used in messages, statistics and the runtime's API)."""
        return f"{self.src}->{self.dst}"

    @property
    def short(self) -> str:
        """``"l2c"`` (the hardware's register and signal names)."""
        return f"{self.src[0]}2{self.dst[0]}"

    @property
    def push_flag(self) -> str:
        """The flag the producer (``src``) sets to push into this queue."""
        return "push_next_dep" if NEXT[self.src] == self.dst else "push_prev_dep"

    @property
    def pop_flag(self) -> str:
        """The flag the consumer (``dst``) sets to pop from this queue."""
        return "pop_prev_dep" if PREV[self.dst] == self.src else "pop_next_dep"


#: The four queues, in the order of the hardware's token registers.
TOKEN_QUEUES = tuple(TokenQueue(a, b) for a, b in (
    (LOAD_MODULE, COMPUTE_MODULE), (COMPUTE_MODULE, LOAD_MODULE),
    (COMPUTE_MODULE, STORE_MODULE), (STORE_MODULE, COMPUTE_MODULE)))
#: Their names, ``"<from>-><to>"``.
TOKEN_QUEUE_NAMES = tuple(q.name for q in TOKEN_QUEUES)

#: module -> {flag: the token queue it pops or pushes}; a flag missing here is invalid there.
MODULE_QUEUES: dict[str, dict[str, TokenQueue]] = {m: {} for m in MODULES}
for _q in TOKEN_QUEUES:
    MODULE_QUEUES[_q.src][_q.push_flag] = _q
    MODULE_QUEUES[_q.dst][_q.pop_flag] = _q
MODULE_QUEUES = {m: {f: q[f] for f in DEP_FLAGS if f in q} for m, q in MODULE_QUEUES.items()}
#: module -> the dependency flags it may set.
MODULE_FLAGS = {m: tuple(q) for m, q in MODULE_QUEUES.items()}


def queue_of(module: str, flag: str) -> TokenQueue | None:
    """The token queue that ``flag`` of an instruction of ``module`` pops or pushes (None when
    the module has no neighbour on that side)."""
    return MODULE_QUEUES[module].get(flag)


def queue_between(src: str, dst: str) -> TokenQueue | None:
    """The token queue from ``src`` to ``dst`` (None when there is none: load and store)."""
    for q in TOKEN_QUEUES:
        if q.src == src and q.dst == dst:
            return q
    return None


__all__ = ["LOAD_MODULE", "COMPUTE_MODULE", "STORE_MODULE", "MODULES", "DEP_FLAGS", "POP_FLAGS",
           "PUSH_FLAGS", "PREV", "NEXT", "TokenQueue", "TOKEN_QUEUES", "TOKEN_QUEUE_NAMES",
           "MODULE_QUEUES", "MODULE_FLAGS", "queue_of", "queue_between"]
