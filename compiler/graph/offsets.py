"""Offset groups: the int8 tensors stored as ``q - OFFSET`` (a non-negative conv output and
what max pooling, shape ops and concatenations make of it, read only by convolutions), one
scale and offset per group."""

from __future__ import annotations

from typing import Any

from .. import ops
from ..ops.int8 import TABLE_OPS
from .errors import QuantizationError
from .ir import Graph, Node


def _carries_offset(op: str) -> bool:
    """Whether the int8 kernel of ``op`` carries an offset through unchanged (it moves, selects
    or takes the maximum of values, and a concatenation of inputs at its own scale copies
    them): tensors such ops join share one scale and offset (see :func:`offset_groups`)."""
    return ops.has(op, "moves") or ops.has(op, "selecting")


def carry_offset(q: Any, n: Node, ins: list[str]) -> None:
    """A carrier's output keeps its inputs' offset and scale (one group, one scale)."""
    t = n.outputs[0]
    off = q.offsets.get(ins[0])  # 0 for a symmetric range of an offset group's source
    if off is None or any(q.offsets.get(i) != off or q.scales[i] != q.scales[t] for i in ins):
        raise QuantizationError(f"{n.name}: the inputs of an offset group differ in scale or "
                                f"offset (an internal error)")
    q.offsets[t] = off


def offset_tensors(g: Graph, float_nodes: set[str | None], qdq: set[str],
                   asymmetric: bool = True) -> set[str]:
    """The tensors stored with an offset: the union of :func:`offset_groups`."""
    return set().union(*offset_groups(g, float_nodes, qdq, asymmetric))


def offset_groups(g: Graph, float_nodes: set[str | None], qdq: set[str],
                  asymmetric: bool = True) -> list[set[str]]:
    """The tensors stored with an offset (``x = scale * (q + offset)``, 256 steps over the
    tensor's range instead of 128 over ``[0, max]`` for a non-negative one), in groups that
    share one scale: tensors that max pooling, shape ops and concatenations
    (:func:`_carries_offset`) join. A group qualifies when every tensor in it is made by a
    Conv/Dense whose fused Relu/Clip keeps it non-negative (offset :data:`OFFSET`)
    or by a carrier, and every reader
    is a carrier or a Conv/Dense that reads it as its one activation input (folding the offset
    into its bias), unpadded or grouped (a padded one gets a ``QPad`` before it). The one
    tensor of a group not made by a carrier may also be made by an op without an int8 kernel
    (a ``Quantize`` on the CPU: SiLU, Sigmoid, Mul; a transformer's LayerNorm) or by an int8
    table (``QLut``: a transformer's GELU, whose values lie in [-0.17, max]), also through
    the reshape before its Dense; the offset comes from the calibrated minimum; not with
    power-of-two scales, ``asymmetric=False``. Graph outputs, QDQ-fixed tensors and tensors
    read by a layer kept float stay signed."""
    cons, prod = g.consumers(), g.producers()

    def carrier(n: Node) -> bool:
        return _carries_offset(n.op) and n.name not in float_nodes \
            and all(i and i not in g.params for i in n.inputs)

    def reads_only(n: Node, t: str) -> bool:
        acts = [i for i in n.inputs if i and i not in g.params]
        # a transposed conv (input_strides) inserts zeros, which would stand for the offset;
        # a padded reader needs a QPad on the CPU: worth it before a depthwise/grouped conv
        # (MobileNet, EfficientNet, RegNet), not before a dense one (ResNet, VGG and YOLO
        # stay free of CPU copies)
        return n.op in ("Conv", "Dense") and acts == [t] and n.inputs[0] == t \
            and n.name not in float_nodes and max(n.attrs.get("input_strides", [1])) == 1 \
            and (n.attrs.get("group", 1) > 1 or not any(n.attrs.get("pads", [0])))

    def made_ok(t: str, alone: bool) -> bool:
        n = prod.get(t)
        if n is None:
            return False
        if n.op in ("Conv", "Dense"):
            a = n.attrs
            return bool(a.get("activation")) and a.get("act_min") is not None \
                and a["act_min"] >= 0
        if carrier(n):
            return True
        return alone and asymmetric and (not ops.has(n.op, "int8_capable")
                                         or n.op in TABLE_OPS)

    root: dict[str, str] = {}

    def find(t: str) -> str:
        while root.get(t, t) != t:
            t = root[t]
        return t

    for n in g.nodes:
        if carrier(n):
            for i in n.inputs:
                root[find(i)] = find(n.outputs[0])
    groups: dict[str, set[str]] = {}
    for n in g.nodes:  # a carrier's inputs too: a graph input or a float op's output fails
        for t in (n.outputs[0], *(n.inputs if carrier(n) else ())):
            groups.setdefault(find(t), set()).add(t)
    out = []
    for grp in groups.values():
        if all(t not in g.outputs and t not in qdq and cons.get(t)
               and made_ok(t, _one_source(grp, prod, carrier))
               and all(carrier(c) or reads_only(c, t) for c in cons[t]) for t in grp):
            out.append(grp)
    return out


def _one_source(grp: set[str], prod: dict[str, Node], carrier: Any) -> bool:
    """Whether one tensor of ``grp`` alone is made by an op that is not a carrier."""
    return sum(1 for t in grp if t not in prod or not carrier(prod[t])) == 1
