"""Coprocessor synchronisation: dependency tokens between the load, compute and store modules.

This pass runs on the command stream the VTA code generator produces by executing the host loops
(the stream is exactly what the hardware sees, so loop-carried dependencies are exact, across
iterations of every host loop). Each maximal run of commands of one module that is followed by a
consumer gets tokens:

* load -> compute (RAW), compute -> store (RAW), compute -> load (WAR), store -> compute (WAR).

When the producer commands and the consumer run have the same sequence of virtual-thread tags,
tokens are placed per thread (a push after thread t's last producer command, a pop before thread
t's first consumer command), so thread 1's loads overlap thread 0's compute; otherwise one push
after the last producer command and one pop before the first consumer command.

Commands may carry their footprint (the on-chip entries they touch, and for stores the DRAM
elements they write). With footprints known:

* :func:`group_threads` reorders each maximal run of one module's commands so every virtual
  thread's commands are contiguous (``G0 G1 A0 A1`` -> ``G0 A0 G1 A1``) when the commands it moves
  past each other touch disjoint entries. The lockstep interleave of the IR puts the end of one
  thread's reduction next to the other thread's, so both threads' epilogues and stores bunch up
  at every tile boundary; grouped, thread 0's store runs while thread 1 still computes.
* a load -> compute pop goes on the first consumer command that reads what the loads wrote
  (a GEMM reset or an ALU pass on other entries runs while the loads are in flight).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vta.isa.deps import COMPUTE_MODULE as COMPUTE
from vta.isa.deps import LOAD_MODULE as LOAD
from vta.isa.deps import MODULES, TOKEN_QUEUES
from vta.isa.deps import STORE_MODULE as STORE

#: (producer, consumer) pairs that need tokens: the token queues of vta.isa.deps, the RAW ones
#: (downstream) before the WAR ones, in which order the tokens are placed.
EDGES = tuple((q.src, q.dst) for q in sorted(
    TOKEN_QUEUES, key=lambda q: MODULES.index(q.src) > MODULES.index(q.dst)))


@dataclass
class Command:
    """One instruction-level command (a LOAD, STORE, GEMM or ALU) and its tokens."""

    module: str
    thread: Any
    issue: Any  # callable(queue) issuing the command
    what: str = ""
    pops: list[str] = field(default_factory=list)  # producer modules to pop from first
    pushes: list[str] = field(default_factory=list)  # consumer modules to push to after
    #: on-chip entries touched, as (scope, first, end) intervals; None: unknown (conflicts
    #: with everything)
    sram: tuple[tuple[str, int, int], ...] | None = None
    #: DRAM elements written (stores), as (buffer key, first, end) intervals
    dram_writes: tuple[tuple[Any, int, int], ...] = ()
    #: GEMM/ALU commands: (callable(queue) -> the runtime micro-kernel, micro-op count), so
    #: the code generator can load micro-kernels ahead (see codegen.vta.emit)
    kernel: tuple[Any, int] | None = None


def _overlap(a: tuple, b: tuple) -> bool:
    """Whether an interval of ``a`` meets one of ``b`` in the same space (plain loops, not a
    generator: called for every pair of commands the passes compare)."""
    for x in a:
        for y in b:
            if x[0] == y[0] and x[1] < y[2] and y[1] < x[2]:
                return True
    return False


def conflict(a: Command, b: Command) -> bool:
    """Whether two commands may touch the same on-chip entries or write the same DRAM."""
    if a.sram is None or b.sram is None:
        return True
    return _overlap(a.sram, b.sram) or _overlap(a.dram_writes, b.dram_writes)


def group_threads(cmds: list[Command]) -> list[Command]:
    """Make each virtual thread's commands contiguous within every run of one module's
    commands (threads in order of first appearance), where that only swaps commands of
    different threads with disjoint footprints. Returns the new list."""
    out: list[Command] = []
    i = 0
    while i < len(cmds):
        j = i + 1
        while j < len(cmds) and cmds[j].module == cmds[i].module:
            j += 1
        out.extend(_group_run(cmds[i:j]))
        i = j
    return out


def _group_run(run: list[Command]) -> list[Command]:
    if len(run) < 3 or any(c.thread is None for c in run):
        return run
    order: dict[Any, int] = {}
    for c in run:
        order.setdefault(c.thread, len(order))
    if len(order) < 2:
        return run
    if _moves_past_conflict(run, order):
        return run
    return sorted(run, key=lambda c: order[c.thread])  # stable: each thread keeps its order


def _moves_past_conflict(run: list[Command], order: dict[Any, int]) -> bool:
    """Whether grouping would move a command ``b`` before an earlier command ``a`` of a later
    thread (in ``order``) that :func:`conflict` with it. Per thread, the footprints of its
    commands seen so far are kept as one union (``a`` conflicts with ``b`` iff one of them
    has an unknown footprint or their intervals overlap), so this is linear in ``run``."""
    # per thread index: [commands seen, any unknown footprint, on-chip intervals, DRAM writes]
    seen: list[list[Any]] = [[0, False, set(), set()] for _ in order]
    for b in run:
        t = order[b.thread]
        for n, unknown, sram, dram in seen[t + 1:]:
            if n and (unknown or b.sram is None or _overlap(b.sram, sram)
                      or _overlap(b.dram_writes, dram)):
                return True
        mine = seen[t]
        mine[0] += 1
        if b.sram is None:
            mine[1] = True
        else:
            mine[2].update(b.sram)
            mine[3].update(b.dram_writes)
    return False


def insert_sync(cmds: list[Command]) -> list[Command]:
    """Set ``pops``/``pushes`` on the commands (in place) and return them."""
    if not cmds:
        return cmds
    runs: list[tuple[str, int, int]] = []  # (module, start, end)
    for k, c in enumerate(cmds):
        if runs and runs[-1][0] == c.module:
            runs[-1] = (c.module, runs[-1][1], k + 1)
        else:
            runs.append((c.module, k, k + 1))
    for prod, cons in EDGES:
        pending: list[int] = []  # producer command indices not yet consumed
        for mod, a, b in runs:
            if mod == prod:
                pending.extend(range(a, b))
            elif mod == cons and pending:
                _pair(cmds, pending, list(range(a, b)), prod, cons,
                      defer=(prod, cons) == (LOAD, COMPUTE))
                pending = []
    return cmds


def _groups(cmds: list[Command], idx: list[int]) -> dict[Any, list[int]]:
    g: dict[Any, list[int]] = {}
    for i in idx:
        g.setdefault(cmds[i].thread, []).append(i)
    return g


def _first_reader(cmds: list[Command], prod: list[int], cons: list[int]) -> int:
    """The first of ``cons`` that conflicts with any of ``prod`` (else the first)."""
    if any(cmds[p].sram is None for p in prod):
        return cons[0]  # an unknown footprint conflicts with everything
    sram, dram = _footprints(cmds, prod)
    for i in cons:
        c = cmds[i]
        if c.sram is None or _overlap(c.sram, sram) or _overlap(c.dram_writes, dram):
            return i
    return cons[0]


def _footprints(cmds: list[Command], idx: list[int]) -> tuple[tuple, tuple]:
    """The distinct on-chip intervals and DRAM writes of the commands ``idx`` with a known
    footprint (a command conflicts with one of them iff it overlaps one of these)."""
    sram: set = set()
    dram: set = set()
    for i in idx:
        c = cmds[i]
        if c.sram is not None:
            sram.update(c.sram)
            dram.update(c.dram_writes)
    return tuple(sram), tuple(dram)


def _cross_thread(cmds: list[Command], pg: dict[Any, list[int]], cg: dict[Any, list[int]]
                  ) -> bool:
    """Whether a consumer of one thread touches what a producer of another thread touched
    (known footprints only): then per-thread tokens would not order them."""
    prods = {t: _footprints(cmds, ps) for t, ps in pg.items()}
    for t, cs in cg.items():
        c_sram, c_dram = _footprints(cmds, cs)
        for t2, (p_sram, p_dram) in prods.items():
            if t2 != t and (_overlap(c_sram, p_sram) or _overlap(c_dram, p_dram)):
                return True
    return False


def _pair(cmds: list[Command], prod: list[int], cons: list[int], pm: str, cm: str,
          defer: bool = False) -> None:
    pg, cg = _groups(cmds, prod), _groups(cmds, cons)
    push_order = sorted(pg, key=lambda t: pg[t][-1])
    pop_order = sorted(cg, key=lambda t: cg[t][0])
    fine = None not in pg and push_order == pop_order and len(push_order) > 1 \
        and not _cross_thread(cmds, pg, cg)
    if fine:
        at = {t: _first_reader(cmds, pg[t], cg[t]) if defer else cg[t][0] for t in push_order}
        if [at[t] for t in push_order] != sorted(at.values()):
            at = {t: cg[t][0] for t in push_order}  # pops must stay in push order
        for t in push_order:
            cmds[pg[t][-1]].pushes.append(cm)
            cmds[at[t]].pops.append(pm)
    else:
        cmds[prod[-1]].pushes.append(cm)
        cmds[_first_reader(cmds, prod, cons) if defer else cons[0]].pops.append(pm)


def issue(cmds: list[Command], queue: Any) -> None:
    """Issue the commands to a runtime CommandQueue with their dependency tokens."""
    for c in cmds:
        for p in c.pops:
            queue.dep_pop(p, c.module)
        c.issue(queue)
        for p in c.pushes:
            queue.dep_push(c.module, p)


__all__ = ["Command", "insert_sync", "group_threads", "conflict", "issue", "EDGES", "LOAD",
           "COMPUTE", "STORE"]
