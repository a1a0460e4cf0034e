"""Graph passes: named Graph -> Graph functions, run in order by :func:`optimize`.

- ``fold_constants``: evaluate nodes whose inputs are all constants.
- ``fold_batchnorm``: BatchNormalization after Conv / ConvTranspose goes into its weights.
- ``lower_conv_transpose``: ConvTranspose -> Dilate (zero insertion, injective) + Conv.
- ``fuse_activations``: Relu / Clip after Conv, Dense or Add becomes the op's epilogue.
- :func:`fusion_groups`: operator fusion by the TVM paper's four categories.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import ops
from .ir import Graph, Node
from .reference import FLOAT_KERNELS

Pass = Callable[[Graph], Graph]


def fold_constants(g: Graph) -> Graph:
    """Replace every node whose inputs are all parameters by its (computed) output."""
    kept = []
    for n in g.nodes:
        if n.inputs and all((not i) or i in g.params for i in n.inputs) and n.op != "Identity":
            vals = FLOAT_KERNELS[n.op](n, [g.params[i] if i else None for i in n.inputs])
            for o, v in zip(n.outputs, vals):
                g.params[o] = np.asarray(v)
        else:
            kept.append(n)
    g.nodes = kept
    # an output that became constant keeps a producer so that it stays a graph tensor
    for o in g.outputs:
        if o in g.params:
            src = f"{o}.const"
            g.params[src] = g.params.pop(o)
            g.nodes.append(Node("Identity", f"{o}.identity", [src], [o]))
    return g.remove_unused()


def _single_consumer(g: Graph, tensor: str) -> Node | None:
    cons = g.consumers().get(tensor, [])
    if len(cons) != 1 or tensor in g.outputs:
        return None
    return cons[0]


def fold_batchnorm(g: Graph) -> Graph:
    """Conv/ConvTranspose followed by BatchNormalization: scale the weights, shift the bias."""
    prod = g.producers()
    drop: set[str] = set()
    rename: dict[str, str] = {}
    for bn in g.nodes:
        if bn.op != "BatchNormalization":
            continue
        src = prod.get(bn.inputs[0])
        if src is None or src.op not in ("Conv", "ConvTranspose") or src.attrs.get("activation"):
            continue
        if _single_consumer(g, src.outputs[0]) is not bn:
            continue
        gamma, beta, mean, var = (g.params[i].astype(np.float64) for i in bn.inputs[1:5])
        s = gamma / np.sqrt(var + bn.attrs["epsilon"])
        w = g.params[src.inputs[1]].astype(np.float64)
        if src.op == "Conv":
            w = w * s[:, None, None, None]
        else:  # ConvTranspose weight is (Cin, Cout/group, kh, kw)
            grp = src.attrs["group"]
            cin, og = w.shape[:2]
            w = (w.reshape(grp, cin // grp, og, *w.shape[2:])
                 * s.reshape(grp, 1, og, 1, 1)).reshape(w.shape)
        b = g.params[src.inputs[2]].astype(np.float64) if len(src.inputs) > 2 else 0.0
        b = (b - mean) * s + beta
        wname, bname = f"{src.name}.weight_bn", f"{src.name}.bias_bn"
        g.params[wname] = w.astype(np.float32)
        g.params[bname] = np.asarray(b, dtype=np.float32)
        src.inputs = [src.inputs[0], wname, bname]
        drop.add(bn.name)
        rename[src.outputs[0]] = bn.outputs[0]
    for n in g.nodes:
        n.outputs = [rename.get(o, o) for o in n.outputs]
    g.nodes = [n for n in g.nodes if n.name not in drop]
    return g.remove_unused()


def lower_conv_transpose(g: Graph) -> Graph:
    """ConvTranspose = zero insertion and padding (Dilate) + a stride-1 Conv of flipped weights."""
    out: list[Node] = []
    for n in g.nodes:
        if n.op != "ConvTranspose":
            out.append(n)
            continue
        w = g.params[n.inputs[1]]
        wc, pads = ops.conv_transpose_as_conv(
            w, group=n.attrs["group"], kernel=w.shape[2:], strides=n.attrs["strides"],
            pads=n.attrs["pads"], dilations=n.attrs["dilations"],
            output_padding=n.attrs["output_padding"])
        wname = f"{n.name}.weight_conv"
        g.params[wname] = wc
        mid = f"{n.name}.dilated"
        out.append(Node("Dilate", f"{n.name}.dilate", [n.inputs[0]], [mid],
                        {"strides": list(n.attrs["strides"]), "pads": pads}))
        attrs = {"strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": n.attrs["dilations"],
                 "group": n.attrs["group"]}
        for k in ("activation", "act_min", "act_max"):
            if k in n.attrs:
                attrs[k] = n.attrs[k]
        out.append(Node("Conv", n.name, [mid, wname] + n.inputs[2:], list(n.outputs), attrs))
    g.nodes = out
    return g.remove_unused()


def fuse_activations(g: Graph) -> Graph:
    """Relu/Clip whose input comes only from a Conv, Dense or Add: fold into its epilogue."""
    prod = g.producers()
    drop: set[str] = set()
    rename: dict[str, str] = {}
    for n in g.nodes:
        if n.op not in ("Relu", "Clip"):
            continue
        src = prod.get(n.inputs[0])
        if src is None or src.op not in ("Conv", "Dense", "Add", "ConvTranspose"):
            continue
        if src.attrs.get("activation") or _single_consumer(g, src.outputs[0]) is not n:
            continue
        if n.op == "Relu":
            lo, hi = 0.0, None
        else:
            lo, hi = n.attrs["min"], n.attrs["max"]
        src.attrs.update(activation=n.op.lower(), act_min=lo, act_max=hi)
        drop.add(n.name)
        rename[src.outputs[0]] = n.outputs[0]
    for n in g.nodes:
        n.outputs = [rename.get(o, o) for o in n.outputs]
    g.nodes = [n for n in g.nodes if n.name not in drop]
    return g


PIPELINE: list[tuple[str, Pass]] = [
    ("fold_constants", fold_constants),
    ("fold_batchnorm", fold_batchnorm),
    ("lower_conv_transpose", lower_conv_transpose),
    ("fuse_activations", fuse_activations),
]


def optimize(g: Graph, *, verify: bool = True) -> Graph:
    """Run :data:`PIPELINE` on a copy of ``g`` (verifying the IR between passes)."""
    g = g.copy()
    for _name, p in PIPELINE:
        g = p(g)
        if verify:
            g.verify()
    return g


# ------------------------------------------------------------------------ fusion
INJECTIVE, REDUCTION, OUT_FUSABLE, OPAQUE = ("injective", "reduction", "complex-out-fusable",
                                             "opaque")

#: TVM's operator pattern of every op (quantized ops share their float op's category).
OP_PATTERN = {
    "Add": INJECTIVE, "Mul": INJECTIVE, "Relu": INJECTIVE, "Clip": INJECTIVE,
    "Tanh": INJECTIVE, "Sigmoid": INJECTIVE, "Flatten": INJECTIVE, "Reshape": INJECTIVE,
    "Identity": INJECTIVE, "Pad": INJECTIVE, "Resize": INJECTIVE, "Dilate": INJECTIVE,
    "Concat": INJECTIVE, "BatchNormalization": INJECTIVE, "Quantize": INJECTIVE,
    "Dequantize": INJECTIVE,
    "GlobalAveragePool": REDUCTION,
    "Conv": OUT_FUSABLE, "ConvTranspose": OUT_FUSABLE, "Dense": OUT_FUSABLE,
    "Gemm": OUT_FUSABLE, "MatMul": OUT_FUSABLE, "MaxPool": OUT_FUSABLE,
    "AveragePool": OUT_FUSABLE,
    "Softmax": OPAQUE,
}


def pattern(op: str) -> str:
    return OP_PATTERN.get(op[1:] if op.startswith("Q") and op[1:] in OP_PATTERN else op, OPAQUE)


@dataclass
class FusionGroup:
    """Nodes executed as one kernel; ``master`` is the complex/reduction op, if any."""

    nodes: list[str]
    kind: str
    master: str | None = None
    members: list[str] = field(default_factory=list)


def fusion_groups(g: Graph) -> list[FusionGroup]:
    """TVM's rules: injective ops fuse together and into the output of a complex-out-fusable op
    (conv, dense, pool) or the input of a reduction; opaque ops stand alone. Fusion follows an
    edge only when the producer has that single consumer (so nothing is recomputed)."""
    prod = g.producers()
    group_of: dict[str, FusionGroup] = {}
    groups: list[FusionGroup] = []
    for n in g.nodes:
        pat = pattern(n.op)
        srcs = [prod[i] for i in n.inputs if i in prod]
        target: FusionGroup | None = None
        if pat in (INJECTIVE, REDUCTION) and srcs:
            for s in srcs:
                grp = group_of[s.name]
                if _single_consumer(g, s.outputs[0]) is not n:
                    continue
                if pat == INJECTIVE and grp.kind in (INJECTIVE, OUT_FUSABLE):
                    target = grp
                    break
                if pat == REDUCTION and grp.kind == INJECTIVE:
                    target = grp
                    break
        if target is None:
            target = FusionGroup([], pat, n.name if pat != INJECTIVE else None)
            groups.append(target)
        elif pat == REDUCTION:
            target.kind, target.master = REDUCTION, n.name
        target.nodes.append(n.name)
        group_of[n.name] = target
    return groups
