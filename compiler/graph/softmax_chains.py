"""Attention softmax chains: the Softmax of attention scores and the masks added to them
before it, found in a float graph so that the quantizer can run the whole chain as one int8
``QSoftmax`` (int8 scores plus one float bias) between the two attention products.

A chain, read from the Softmax back to its scores (the ``root``):

- ``Add(scores, bias)``: an additive mask or bias (Hugging Face's ``(1 - mask) * finfo.min``,
  Swin's relative-position bias and shifted-window mask), any tensor that no attention
  product feeds;
- ``Where(cond, fill, scores)`` / ``Where(cond, scores, fill)`` with a scalar constant
  ``fill`` of ``-inf`` or below :data:`MASK_FILL` (a causal or padding mask): the same as
  adding ``Where(cond, fill, 0)`` (exactly, in float32: ``x + fill == fill`` there).

Each tensor between the root and the Softmax has one reader; the Softmax normalises the last
axis and only attention products read its output (through shape ops).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import ops
from .ir import Graph, Node

#: A Where's scalar fill at or below this masks (``finfo(float32).min``, ``-inf``).
MASK_FILL = -1e30


@dataclass
class Chain:
    """A Softmax, its scores (``root``) and the nodes between, nearest the Softmax first."""

    softmax: Node
    root: str
    #: ``(node, scores input index)`` of each Add / Where between root and Softmax
    steps: list[tuple[Node, int]] = field(default_factory=list)


def _scored(g: Graph) -> set[str]:
    """The tensors that an attention product (a MatMul of two activations) feeds."""
    out: set[str] = set()
    for n in g.nodes:
        acts = [i for i in n.inputs if i and i not in g.params]
        if (ops.has(n.op, "activation_product") and len(acts) == 2) or out.intersection(acts):
            out.update(n.outputs)
    return out


def _fill(g: Graph, t: str) -> bool:
    v = g.params.get(t)
    return v is not None and np.size(v) == 1 and float(np.asarray(v).ravel()[0]) <= MASK_FILL


def _step(g: Graph, p: Node, scored: set[str]) -> int | None:
    """The index of the scores input of ``p`` when ``p`` adds a mask to them, else None."""
    ins = p.inputs
    if p.op == "Add" and len(ins) == 2 and not p.attrs.get("activation"):
        side = [k for k in (0, 1) if ins[k] in scored]
        return side[0] if len(side) == 1 else None
    if p.op == "Where" and len(ins) == 3 and ins[0] not in scored:
        if _fill(g, ins[1]) and ins[2] in scored:
            return 2
        if _fill(g, ins[2]) and ins[1] in scored:
            return 1
    return None


def _read_by_products(g: Graph, t: str, readers: Mapping[str, list[Node]]) -> bool:
    """Whether only attention products read ``t`` (through shape ops)."""
    if t in g.outputs or not readers.get(t):
        return False
    return all(ops.has(r.op, "activation_product") or
               (ops.has(r.op, "moves") and _read_by_products(g, r.outputs[0], readers))
               for r in readers[t])


def softmax_chains(g: Graph, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Chain]:
    """The attention softmax chains of ``g`` by Softmax node name (see the module doc)."""
    scored = _scored(g)
    prod, readers = g.producers(), g.consumers()
    out = {}
    for n in g.nodes:
        if n.op != "Softmax" or n.inputs[0] not in scored or n.inputs[0] not in shapes:
            continue
        if n.attrs.get("axis") not in (-1, len(shapes[n.inputs[0]]) - 1) \
                or not _read_by_products(g, n.outputs[0], readers):
            continue
        chain = Chain(n, n.inputs[0])
        while chain.root not in g.outputs and len(readers.get(chain.root, [])) == 1:
            p = prod.get(chain.root)
            k = _step(g, p, scored) if p is not None else None
            if k is None:
                break
            chain.steps.append((p, k))
            chain.root = p.inputs[k]
        out[n.name] = chain
    return out
