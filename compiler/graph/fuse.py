"""Graph-level fusion on VTA: a residual add in the epilogue of the layer that produces one of
its operands.

A ``QAdd`` of two int8 tensors of one shape (its rescale and clip, a fused Relu/Clip
included), one of them the output of a ``QConv`` or ``QDense`` that nothing else reads,
becomes one node: that layer with the add's attributes as its ``residual`` attribute and the
add's other operand as its fourth input, named ``<layer>+<add>`` (its ``fused`` attribute
names the two), at the add's place in the graph (the layer's inputs are all computed by then).
Its int8 rule is the layer's, then the add's on that int8 result
(:mod:`vta.compiler.ops.int8_kernels`), so the fused graph computes the
same bits as the unfused one. On VTA the add runs while the layer's result is still in the
accumulator (:mod:`vta.compiler.topi.residual`), so neither that result nor the add's own
program goes through DRAM.

:func:`candidates` finds the pairs; the compile (:mod:`vta.compiler.graph.module`) times each
fused layer on the performance model and keeps, per add, the fusion that saves most cycles
against the two layers it replaces, if any (:func:`choose`); :func:`apply` rewrites the
graph. ``vta compile --no-fuse`` keeps them
apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .ir import Graph, Node

#: Layers whose epilogue takes a residual add.
EPILOGUE_OPS = ("QConv", "QDense")
#: Element-wise ops fused into such an epilogue.
FUSED_OPS = ("QAdd",)


@dataclass(frozen=True)
class Fusion:
    """A layer and the add fused into its epilogue, and the node that replaces both."""

    layer: str
    add: str
    tensor: str  #: the layer's output, which the fused node no longer writes
    node: Node


def candidates(g: Graph, on_vta: Iterable[str]) -> list[Fusion]:
    """Every way an add of ``g`` can be fused into the epilogue of the layer producing one of
    its operands, both on VTA (``on_vta``: node names): that layer's output has no other
    reader and is no graph output, the other operand is another tensor (of the same shape:
    :func:`vta.compiler.graph.lowering.plan_alu` has checked that for an add on VTA), and the
    layer is not a transposed conv. An add whose two operands are such layers' outputs has two
    candidates; the compile keeps at most one fusion per add (:func:`choose`)."""
    vta = set(on_vta)
    readers: dict[str, int] = {}
    for n in g.nodes:
        for i in n.inputs:
            readers[i] = readers.get(i, 0) + 1
    made = {o: n for n in g.nodes for o in n.outputs}
    out: list[Fusion] = []
    for n in g.nodes:
        if n.op not in FUSED_OPS or n.name not in vta or len(n.inputs) != 2 or \
                n.inputs[0] == n.inputs[1]:
            continue
        for k, t in enumerate(n.inputs):
            p = made.get(t)
            if p is not None and _fusable(p, t, g, vta, readers):
                out.append(Fusion(p.name, n.name, t, fused_node(p, n, k)))
    return out


def choose(saved: Sequence[tuple[Fusion, float]]) -> list[Fusion]:
    """Of the candidates and the cycles each saves, the one that saves most per add (ties: the
    first), where it saves any."""
    best: dict[str, tuple[Fusion, float]] = {}
    for f, s in saved:
        if s > 0 and (f.add not in best or s > best[f.add][1]):
            best[f.add] = (f, s)
    return [f for f, _ in best.values()]


def _fusable(p: Node, t: str, g: Graph, vta: set[str], readers: dict[str, int]) -> bool:
    return (p.op in EPILOGUE_OPS and p.name in vta and readers.get(t) == 1
            and t not in g.outputs and "residual" not in p.attrs and len(p.inputs) == 3
            and list(p.attrs.get("input_strides", [1, 1])) == [1, 1])


def fused_node(layer: Node, add: Node, k: int) -> Node:
    """``layer`` with ``add`` (whose operand ``k`` is the layer's output) in its epilogue."""
    a = add.attrs
    ma, mb = (a["mul_a"], a["mul_b"]) if k == 0 else (a["mul_b"], a["mul_a"])
    residual = {"mul_a": int(ma), "mul_b": int(mb), "shift": int(a["shift"]),
                "lo": int(a["lo"]), "hi": int(a["hi"])}
    return Node(layer.op, f"{layer.name}+{add.name}", [*layer.inputs, add.inputs[1 - k]],
                list(add.outputs), {**layer.attrs, "residual": residual,
                                    "fused": [layer.name, add.name]})


def apply(g: Graph, fusions: Sequence[Fusion]) -> Graph:
    """``g`` with each fusion's node in place of its add, and its layer removed."""
    if not fusions:
        return g
    at = {f.add: f.node for f in fusions}
    gone = {f.layer for f in fusions}
    nodes = [at.get(n.name, n) for n in g.nodes if n.name not in gone]
    return Graph(nodes, dict(g.inputs), list(g.outputs), g.params, g.name)


__all__ = ["EPILOGUE_OPS", "FUSED_OPS", "Fusion", "candidates", "choose", "fused_node", "apply"]
