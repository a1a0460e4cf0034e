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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LOAD, COMPUTE, STORE = "load", "compute", "store"

#: (producer, consumer) pairs that need tokens.
EDGES = ((LOAD, COMPUTE), (COMPUTE, STORE), (COMPUTE, LOAD), (STORE, COMPUTE))


@dataclass
class Command:
    """One instruction-level command (a LOAD, STORE, GEMM or ALU) and its tokens."""

    module: str
    thread: Any
    issue: Any  # callable(queue) issuing the command
    what: str = ""
    pops: list[str] = field(default_factory=list)  # producer modules to pop from first
    pushes: list[str] = field(default_factory=list)  # consumer modules to push to after


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
                _pair(cmds, pending, list(range(a, b)), prod, cons)
                pending = []
    return cmds


def _groups(cmds: list[Command], idx: list[int]) -> dict[Any, list[int]]:
    g: dict[Any, list[int]] = {}
    for i in idx:
        g.setdefault(cmds[i].thread, []).append(i)
    return g


def _pair(cmds: list[Command], prod: list[int], cons: list[int], pm: str, cm: str) -> None:
    pg, cg = _groups(cmds, prod), _groups(cmds, cons)
    push_order = sorted(pg, key=lambda t: pg[t][-1])
    pop_order = sorted(cg, key=lambda t: cg[t][0])
    fine = None not in pg and push_order == pop_order and len(push_order) > 1
    if fine:
        for t in push_order:
            cmds[pg[t][-1]].pushes.append(cm)
            cmds[cg[t][0]].pops.append(pm)
    else:
        cmds[prod[-1]].pushes.append(cm)
        cmds[cons[0]].pops.append(pm)


def issue(cmds: list[Command], queue: Any) -> None:
    """Issue the commands to a runtime CommandQueue with their dependency tokens."""
    for c in cmds:
        for p in c.pops:
            queue.dep_pop(p, c.module)
        c.issue(queue)
        for p in c.pushes:
            queue.dep_push(c.module, p)


__all__ = ["Command", "insert_sync", "issue", "EDGES", "LOAD", "COMPUTE", "STORE"]
