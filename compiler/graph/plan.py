"""Static DRAM memory planning: one arena, an offset per tensor, reuse by liveness.

Constants (packed weights, biases, micro-ops) get their own never-reused region at the start of
the arena; activations are placed by a greedy best-fit over their live intervals (a tensor is
live from the step that produces it to the last step that reads it; graph inputs from step -1,
graph outputs to the end). Two tensors share bytes only if their intervals do not overlap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .ir import Graph

ALIGN = 256  #: every buffer starts on a 256-byte boundary (a multiple of every element size)


def align_up(n: int, a: int = ALIGN) -> int:
    return -(-n // a) * a


@dataclass
class Buffer:
    name: str
    offset: int
    size: int
    start: int  #: first step at which it is live
    end: int  #: last step at which it is live (inclusive)
    kind: str = "activation"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class MemoryPlan:
    buffers: dict[str, Buffer] = field(default_factory=dict)
    size: int = 0  #: arena bytes
    const_size: int = 0
    naive_size: int = 0  #: bytes without reuse (every activation its own buffer)
    align: int = ALIGN

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "const_size": self.const_size, "naive_size": self.naive_size,
                "align": self.align,
                "buffers": {k: b.to_dict() for k, b in self.buffers.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MemoryPlan:
        return cls({k: Buffer(**b) for k, b in d["buffers"].items()}, d["size"],
                   d["const_size"], d["naive_size"], d.get("align", ALIGN))

    def overlaps(self) -> list[tuple[str, str]]:
        """Pairs of buffers that are live at the same time and share bytes (must be empty)."""
        bad = []
        bs = sorted(self.buffers.values(), key=lambda b: b.offset)
        for i, a in enumerate(bs):
            for b in bs[i + 1:]:
                if b.offset >= a.offset + a.size:
                    break
                if a.start <= b.end and b.start <= a.end:
                    bad.append((a.name, b.name))
        return bad


def liveness(g: Graph) -> dict[str, tuple[int, int]]:
    """Live interval (first step, last step) of every non-constant tensor."""
    iv: dict[str, list[int]] = {k: [-1, -1] for k in g.inputs}
    for k, n in enumerate(g.nodes):
        for o in n.outputs:
            iv[o] = [k, k]
        for i in n.inputs:
            if i in iv:
                iv[i][1] = max(iv[i][1], k)
    end = len(g.nodes)
    for o in g.outputs:
        if o in iv:
            iv[o][1] = end
    return {k: (a, b) for k, (a, b) in iv.items()}


def plan_memory(g: Graph, sizes: dict[str, int], consts: dict[str, int] | None = None, *,
                align: int = ALIGN) -> MemoryPlan:
    """Assign arena offsets: ``sizes`` are activation bytes, ``consts`` constant bytes; every
    buffer starts on an ``align``-byte boundary."""
    plan = MemoryPlan()
    plan.align = align
    off = 0
    for name, size in (consts or {}).items():
        plan.buffers[name] = Buffer(name, off, size, -1, len(g.nodes), "constant")
        off = align_up(off + size, align)
    plan.const_size = off
    live = liveness(g)
    placed: list[Buffer] = []
    order = sorted((t for t in live if t in sizes), key=lambda t: (live[t][0], -sizes[t]))
    for t in order:
        start, end = live[t]
        size = align_up(max(sizes[t], 1), align)
        # best fit among gaps left by buffers live at the same time
        busy = sorted((b.offset, b.offset + align_up(b.size, align)) for b in placed
                      if b.start <= end and start <= b.end)
        best, best_gap, cur = None, None, off
        for lo, hi in busy:
            if lo - cur >= size and (best_gap is None or lo - cur < best_gap):
                best, best_gap = cur, lo - cur
            cur = max(cur, hi)
        if best is None:
            best = cur
        buf = Buffer(t, best, sizes[t], start, end)
        placed.append(buf)
        plan.buffers[t] = buf
    plan.size = max([off] + [b.offset + align_up(b.size, align) for b in placed])
    plan.naive_size = off + sum(align_up(max(sizes[t], 1), align) for t in order)
    return plan
