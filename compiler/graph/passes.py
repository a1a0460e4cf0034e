"""Graph passes: named Graph -> Graph functions, run in order by :func:`optimize`.

- ``fold_constants``: evaluate nodes whose inputs are all constants.
- ``fuse_layernorm``, ``fuse_gelu``, ``fuse_gates``: the exporters' decomposed LayerNorm
  (opset < 17), erf GELU, ``x * Sigmoid(x)`` (SiLU) and ``x * HardSigmoid(x)`` (HardSwish)
  become single ops.
- ``fold_dense_bias``: MatMul + Add (a Linear layer's export) becomes one Dense with a bias.
- ``dense_rows_to_conv``, ``cancel_transposes``, ``drop_identities``: a Dense over an NHWC
  tensor's rows becomes a 1x1 Conv between transposes, and inverse transposes (through
  element-wise ops) and Identity nodes go.
- ``fold_channel_shuffle``: Reshape-Transpose-Reshape channel shuffles become one Gather.
- ``merge_reshapes``: a Reshape of a Reshape or Flatten reshapes the first one's input; one
  that restores its input's shape goes.
- ``fold_batchnorm``: BatchNormalization after Conv / ConvTranspose goes into its weights.
- ``lower_conv_transpose``: ConvTranspose -> a Conv of flipped weights over the input with
  ``stride - 1`` zeros between pixels (its ``input_strides``), which VTA runs as the
  conv2d_transpose template (no zero is inserted or multiplied).
- ``fuse_activations``: Relu / Clip after Conv, Dense or Add becomes the op's epilogue.
- :func:`fusion_groups`: operator fusion by the TVM paper's four categories.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import ops
from ..ops import INJECTIVE, OPAQUE, OUT_FUSABLE, REDUCTION
from ..ops.kernels import conv_transpose_as_conv
from .ir import Graph, Node
from .reference import infer_shapes
from .validate import check_finite

Pass = Callable[[Graph], Graph]


def fold_constants(g: Graph) -> Graph:
    """Replace every node whose inputs are all parameters by its (computed) output."""
    kept = []
    for n in g.nodes:
        if n.inputs and all((not i) or i in g.params for i in n.inputs) and n.op != "Identity":
            vals = ops.get(n.op).float_kernel(n, [g.params[i] if i else None for i in n.inputs])
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


def _single_consumer(g: Graph, cons: dict[str, list[Node]], tensor: str) -> Node | None:
    """The one node reading ``tensor`` (``cons``: ``g.consumers()``, computed once a pass; the
    passes below change no activation's readers while they ask), None when it is not one or
    ``tensor`` is a graph output."""
    readers = cons.get(tensor, [])
    if len(readers) != 1 or tensor in g.outputs:
        return None
    return readers[0]


def fold_batchnorm(g: Graph) -> Graph:
    """Conv/ConvTranspose followed by BatchNormalization: scale the weights, shift the bias."""
    prod, cons = g.producers(), g.consumers()
    drop: set[str] = set()
    rename: dict[str, str] = {}
    for bn in g.nodes:
        if bn.op != "BatchNormalization":
            continue
        src = prod.get(bn.inputs[0])
        if src is None or src.op not in ("Conv", "ConvTranspose") or src.attrs.get("activation"):
            continue
        if _single_consumer(g, cons, src.outputs[0]) is not bn:
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
        what = f"{g.name}: batch-norm {bn.name!r} folded into {src.op} {src.name!r}"
        check_finite(w, f"{what}: its weight {src.inputs[1]!r}")
        check_finite(b, f"{what}: its bias")
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
    """ConvTranspose = a stride-1 Conv of flipped weights over the input with ``strides - 1``
    zeros between its pixels (``input_strides``) and the equivalent padding."""
    out: list[Node] = []
    for n in g.nodes:
        if n.op != "ConvTranspose":
            out.append(n)
            continue
        w = g.params[n.inputs[1]]
        wc, pads = conv_transpose_as_conv(
            w, group=n.attrs["group"], kernel=w.shape[2:], strides=n.attrs["strides"],
            pads=n.attrs["pads"], dilations=n.attrs["dilations"],
            output_padding=n.attrs["output_padding"])
        wname = f"{n.name}.weight_conv"
        g.params[wname] = wc
        attrs = {"strides": [1, 1], "pads": pads, "dilations": n.attrs["dilations"],
                 "group": n.attrs["group"], "input_strides": list(n.attrs["strides"])}
        for k in ("activation", "act_min", "act_max"):
            if k in n.attrs:
                attrs[k] = n.attrs[k]
        out.append(Node("Conv", n.name, [n.inputs[0], wname] + n.inputs[2:], list(n.outputs),
                        attrs))
    g.nodes = out
    return g.remove_unused()


def fuse_activations(g: Graph) -> Graph:
    """Relu/Clip whose input comes only from a Conv, Dense or Add: fold into its epilogue."""
    prod, cons = g.producers(), g.consumers()
    drop: set[str] = set()
    rename: dict[str, str] = {}
    for n in g.nodes:
        if n.op not in ("Relu", "Clip"):
            continue
        src = prod.get(n.inputs[0])
        if src is None or not ops.has(src.op, "fuses_activation"):
            continue
        if src.attrs.get("activation") or _single_consumer(g, cons, src.outputs[0]) is not n:
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


# ------------------------------------------------------------- exporter patterns
class _Rewriter:
    """Pattern matching over a graph: producers, consumers and constants, and the rewrite of a
    matched chain into one node (which takes the name of the chain's last node)."""

    def __init__(self, g: Graph):
        self.g = g
        self.prod = g.producers()
        self.cons = g.consumers()
        self.drop: set[str] = set()
        self.replace: dict[str, Node] = {}

    def only_consumer(self, tensor: str) -> Node | None:
        c = self.cons.get(tensor, [])
        return c[0] if len(c) == 1 and tensor not in self.g.outputs else None

    def producer(self, tensor: str, op: str) -> Node | None:
        n = self.prod.get(tensor)
        return n if n is not None and n.op == op and n.name not in self.drop else None

    def scalar(self, tensor: str) -> float | None:
        v = self.g.params.get(tensor)
        return float(v.reshape(-1)[0]) if v is not None and v.size == 1 else None

    def other(self, n: Node, tensor: str) -> str | None:
        """The other input of a binary node ``n`` one of whose inputs is ``tensor``."""
        if len(n.inputs) != 2 or tensor not in n.inputs:
            return None
        return n.inputs[1] if n.inputs[0] == tensor else n.inputs[0]

    def rewrite(self, chain: list[Node], new: Node) -> None:
        """``new`` replaces ``chain`` (each but the last with that single consumer)."""
        if any(n.name in self.drop for n in chain):
            return
        for n in chain[:-1]:
            self.drop.add(n.name)
        self.replace[chain[-1].name] = new
        self.drop.add(chain[-1].name)

    def apply(self) -> Graph:
        out = []
        for n in self.g.nodes:
            if n.name in self.replace:
                out.append(self.replace[n.name])
            elif n.name not in self.drop:
                out.append(n)
        self.g.nodes = out
        return self.g.remove_unused()


def fuse_gates(g: Graph) -> Graph:
    """``x * Sigmoid(x)`` is SiLU; ``x * HardSigmoid(x)`` (alpha 1/6, beta 1/2) is HardSwish."""
    r = _Rewriter(g)
    for mul in list(g.nodes):
        if mul.op != "Mul":
            continue
        for gate_t in mul.inputs:
            gate = r.prod.get(gate_t)
            if gate is None or r.only_consumer(gate_t) is not mul or \
                    r.other(mul, gate_t) != gate.inputs[0]:
                continue
            if gate.op == "Sigmoid":
                op = "Silu"
            elif gate.op == "HardSigmoid" and abs(gate.attrs["alpha"] - 1 / 6) < 1e-6 \
                    and abs(gate.attrs["beta"] - 0.5) < 1e-6:
                op = "HardSwish"
            else:
                continue
            r.rewrite([gate, mul], Node(op, mul.name, [gate.inputs[0]], list(mul.outputs)))
            break
    return r.apply()


def fuse_gelu(g: Graph) -> Graph:
    """The exporters' erf form of GELU, ``x * (erf(x / sqrt 2) + 1) * 0.5`` (the products in
    any order), becomes one Gelu."""
    r = _Rewriter(g)
    for erf in list(g.nodes):
        if erf.op != "Erf":
            continue
        scale = r.prod.get(erf.inputs[0])
        if scale is None or scale.op not in ("Div", "Mul") or \
                r.only_consumer(scale.outputs[0]) is not erf:
            continue
        x, k = scale.inputs
        want = math.sqrt(2) if scale.op == "Div" else 1 / math.sqrt(2)
        if r.scalar(k) is None or abs(r.scalar(k) - want) > 1e-4:
            continue
        add = r.only_consumer(erf.outputs[0])
        one = r.other(add, erf.outputs[0]) if add is not None and add.op == "Add" else None
        if one is None or r.scalar(one) != 1.0:
            continue
        chain = _gelu_products(r, [scale, erf, add], x)
        if chain is None:
            continue
        r.rewrite(chain, Node("Gelu", chain[-1].name, [x], list(chain[-1].outputs),
                              {"approximate": "none"}))
    return r.apply()


def _gelu_products(r: _Rewriter, chain: list[Node], x: str) -> list[Node] | None:
    """The chain extended by the products with ``x`` and 0.5 after ``erf + 1`` (in any order
    and association: ``x * (e * 0.5)``, ``(x * e) * 0.5``, ``(x * 0.5) * e``), or None."""
    cur = chain[-1].outputs[0]
    factors: list[str] = []
    while sorted(factors) != ["half", "x"] and len(factors) < 2:
        m = r.only_consumer(cur)
        if m is None or m.op != "Mul":
            return None
        o = r.other(m, cur)
        h = r.prod.get(o)
        if o == x:
            factors.append("x")
        elif r.scalar(o) == 0.5:
            factors.append("half")
        elif h is not None and h.op == "Mul" and r.only_consumer(o) is m and \
                r.other(h, x) is not None and r.scalar(r.other(h, x)) == 0.5:
            factors += ["x", "half"]
            chain.insert(0, h)
        else:
            return None
        chain.append(m)
        cur = m.outputs[0]
    return chain if sorted(factors) == ["half", "x"] else None


def fuse_layernorm(g: Graph) -> Graph:
    """The opset < 17 export of LayerNorm (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt,
    Div, then Mul scale, Add bias) becomes one LayerNormalization over the trailing axes."""
    r = _Rewriter(g)
    shapes: dict[str, tuple[int, ...]] | None = None
    for mean in list(g.nodes):
        if mean.op != "ReduceMean" or not mean.attrs["keepdims"]:
            continue
        if shapes is None:
            shapes = infer_shapes(g)
        axes = mean.attrs["axes"]
        if axes != list(range(axes[0], len(shapes[mean.inputs[0]]))):
            continue  # LayerNormalization normalises the trailing axes
        x = mean.inputs[0]
        subs = [c for c in r.cons.get(mean.outputs[0], []) if c.op == "Sub"
                and c.inputs == [x, mean.outputs[0]]]
        if len(subs) != 1 or len(r.cons[mean.outputs[0]]) != 1:
            continue
        sub = subs[0]
        d = sub.outputs[0]
        users = r.cons.get(d, [])
        pow_ = next((u for u in users if u.op == "Pow" and u.inputs[0] == d
                     and r.scalar(u.inputs[1]) == 2.0), None)
        div = next((u for u in users if u.op == "Div" and u.inputs[0] == d), None)
        if pow_ is None or div is None or len(users) != 2:
            continue
        var = r.only_consumer(pow_.outputs[0])
        if var is None or var.op != "ReduceMean" or var.attrs != mean.attrs:
            continue
        add = r.only_consumer(var.outputs[0])
        eps = r.scalar(r.other(add, var.outputs[0]) or "") if add is not None and \
            add.op == "Add" else None
        sqrt = r.only_consumer(add.outputs[0]) if eps is not None else None
        if sqrt is None or sqrt.op != "Sqrt" or div.inputs[1] != sqrt.outputs[0] or \
                r.only_consumer(sqrt.outputs[0]) is not div:
            continue
        chain = [mean, sub, pow_, var, add, sqrt, div]
        ins = [x]
        mul = r.only_consumer(div.outputs[0])
        scale = r.other(mul, div.outputs[0]) if mul is not None and mul.op == "Mul" else None
        if scale in g.params:
            chain.append(mul)
            ins.append(scale)
            bias_add = r.only_consumer(mul.outputs[0])
            bias = r.other(bias_add, mul.outputs[0]) if bias_add is not None and \
                bias_add.op == "Add" else None
            if bias in g.params:
                chain.append(bias_add)
                ins.append(bias)
        if len(ins) == 1:
            one = f"{chain[-1].name}.ones"
            g.params[one] = np.ones(1, np.float32)
            ins.append(one)
        r.rewrite(chain, Node("LayerNormalization", chain[-1].name, ins,
                              list(chain[-1].outputs), {"axes": axes, "epsilon": eps}))
    return r.apply()


def fold_dense_bias(g: Graph) -> Graph:
    """A bias added after a Dense layer without one (MatMul + Add, possibly through the
    Reshape that restores a rank > 2 operand's shape) becomes the Dense layer's bias."""
    r = _Rewriter(g)
    for add in list(g.nodes):
        if add.op != "Add" or add.attrs.get("activation"):
            continue
        for t in add.inputs:
            b = r.other(add, t)
            if b not in g.params or r.only_consumer(t) is not add:
                continue
            src = r.prod.get(t)
            chain = []
            if src is not None and src.op == "Reshape" and \
                    r.only_consumer(src.inputs[0]) is src:
                chain.append(src)
                src = r.prod.get(src.inputs[0])
            if src is None or src.op != "Dense" or len(src.inputs) != 2:
                continue
            n_out = g.params[src.inputs[1]].shape[0]
            bias = g.params[b]
            if bias.size != n_out or (bias.ndim and bias.shape[-1] != n_out) or \
                    (chain and chain[0].attrs["shape"][-1] != n_out):
                continue
            last = chain[0] if chain else src
            if {add.name, src.name, last.name} & r.drop:
                continue
            bname = f"{src.name}.bias"
            g.params[bname] = bias.reshape(-1).astype(np.float32)
            src.inputs = [*src.inputs, bname]
            r.drop |= {add.name, last.name}  # last now produces the sum
            r.replace[last.name] = Node(last.op, last.name, list(last.inputs),
                                        list(add.outputs), dict(last.attrs))
            break
    return r.apply()


def dense_rows_to_conv(g: Graph) -> Graph:
    """A Dense layer over the rows of an NHWC tensor (a Linear layer on ``x.permute(0, 2, 3,
    1)``, as ConvNeXt writes its pointwise layers) is a 1x1 convolution between transposes to
    NCHW and back: VTA runs convolutions, and the transposes cancel (:func:`cancel_transposes`)."""
    r = _Rewriter(g)
    shapes: dict[str, tuple[int, ...]] | None = None
    for d in list(g.nodes):
        pre = r.producer(d.inputs[0], "Reshape") if d.op == "Dense" else None
        post = r.only_consumer(d.outputs[0])
        if pre is None or r.only_consumer(pre.outputs[0]) is not d or post is None or \
                post.op != "Reshape" or d.attrs.get("activation"):
            continue
        if shapes is None:
            shapes = infer_shapes(g)
        xs = shapes[pre.inputs[0]]
        o = g.params[d.inputs[1]].shape[0]
        if len(xs) != 4 or list(post.attrs["shape"]) != [*xs[:3], o]:
            continue
        wname = f"{d.name}.weight_1x1"
        g.params[wname] = g.params[d.inputs[1]].reshape(o, -1, 1, 1)
        nchw, conv_out = f"{d.name}.nchw", f"{d.name}.conv"
        r.drop |= {pre.name, d.name, post.name}
        r.replace[pre.name] = Node("Transpose", f"{d.name}.to_nchw", [pre.inputs[0]], [nchw],
                                   {"perm": [0, 3, 1, 2]})
        r.replace[d.name] = Node("Conv", d.name, [nchw, wname, *d.inputs[2:]], [conv_out],
                                 {"strides": [1, 1], "pads": [0, 0, 0, 0],
                                  "dilations": [1, 1], "group": 1})
        r.replace[post.name] = Node("Transpose", f"{d.name}.to_nhwc", [conv_out],
                                    list(post.outputs), {"perm": [0, 2, 3, 1]})
    return r.apply()


def _commutes(n: Node) -> bool:
    """``n`` commutes with a transpose (LayerNorm's axes and parameters are permuted)."""
    return (ops.has(n.op, "unary") and len(n.inputs) == 1) or n.op == "LayerNormalization"


def _untranspose_layernorm(g: Graph, n: Node, perm: list[int]) -> None:
    """LayerNorm of ``x.transpose(perm)`` -> LayerNorm of ``x``: axes and parameters mapped."""
    inv = [perm.index(k) for k in range(len(perm))]
    n.attrs = dict(n.attrs, axes=sorted(perm[k] for k in n.attrs["axes"]))
    for k, p in enumerate(n.inputs[1:], start=1):
        v = g.params[p]
        full = v.reshape((1,) * (len(perm) - v.ndim) + v.shape)
        name = f"{p}.{n.name}.transposed"
        g.params[name] = np.ascontiguousarray(full.transpose(inv))
        n.inputs[k] = name


def cancel_transposes(g: Graph) -> Graph:
    """A transpose followed (through element-wise ops and LayerNorms) by its inverse: both go
    (ConvNeXt's NHWC blocks become NCHW: channel LayerNorm, 1x1 convs, GELU)."""
    r = _Rewriter(g)
    for t2 in list(g.nodes):
        if t2.op != "Transpose" or t2.name in r.drop:
            continue
        chain: list[Node] = []
        t1 = r.prod.get(t2.inputs[0])
        while t1 is not None and _commutes(t1) and all(i in g.params for i in t1.inputs[1:]) \
                and r.only_consumer(t1.outputs[0]) is (chain[0] if chain else t2):
            chain.insert(0, t1)
            t1 = r.prod.get(t1.inputs[0])
        if t1 is None or t1.op != "Transpose" or t1.name in r.drop or \
                r.only_consumer(t1.outputs[0]) is not (chain[0] if chain else t2):
            continue
        p1, p2 = t1.attrs["perm"], t2.attrs["perm"]
        if len(p1) != len(p2) or [p1[p] for p in p2] != list(range(len(p1))):
            continue
        r.drop |= {t1.name, t2.name}
        if chain:
            chain[0].inputs = [t1.inputs[0], *chain[0].inputs[1:]]
            chain[-1].outputs = list(t2.outputs)
            for n in chain:
                if n.op == "LayerNormalization":
                    _untranspose_layernorm(g, n, p1)
        else:
            r.replace[t2.name] = Node("Identity", t2.name, [t1.inputs[0]], list(t2.outputs))
    return r.apply()


def fold_channel_shuffle(g: Graph) -> Graph:
    """ShuffleNet's channel shuffle, Reshape (N, C, H, W) -> (N, g, C/g, H, W), Transpose of
    the two group axes, Reshape back, is one channel permutation: a Gather on axis 1."""
    r = _Rewriter(g)
    shapes: dict[str, tuple[int, ...]] | None = None
    for t in list(g.nodes):
        if t.op != "Transpose" or t.attrs["perm"] != [0, 2, 1, 3, 4]:
            continue
        pre, post = r.producer(t.inputs[0], "Reshape"), r.only_consumer(t.outputs[0])
        if pre is None or r.only_consumer(pre.outputs[0]) is not t or post is None or \
                post.op != "Reshape":
            continue
        if shapes is None:
            shapes = infer_shapes(g)
        xs = shapes[pre.inputs[0]]
        n, grp, cg, h, w = pre.attrs["shape"]
        if len(xs) != 4 or tuple(xs) != (n, grp * cg, h, w) or \
                list(post.attrs["shape"]) != list(xs):
            continue
        j = np.arange(grp * cg)
        perm = ((j % grp) * cg + j // grp).tolist()
        r.rewrite([pre, t, post], Node("Gather", post.name, [pre.inputs[0]], list(post.outputs),
                                       {"axis": 1, "indices": perm}))
    return r.apply()


def drop_identities(g: Graph) -> Graph:
    """Identity nodes go (their consumers read the source) unless they produce a graph
    output."""
    alias: dict[str, str] = {}
    kept = []
    for n in g.nodes:
        n.inputs = [alias.get(i, i) for i in n.inputs]
        if n.op == "Identity" and n.outputs[0] not in g.outputs:
            alias[n.outputs[0]] = n.inputs[0]
        else:
            kept.append(n)
    g.nodes = kept
    return g.remove_unused()


def merge_reshapes(g: Graph) -> Graph:
    """A Reshape to a static shape (or a Flatten) of a tensor that only it reads, made by a
    Reshape or Flatten, reshapes that one's input instead (a 1-D network's 2-D view reshaped
    back and then again: see ``onnx_frontend``); a Reshape to its input's own shape goes
    (unless it makes a graph output). Shapes are static, so the values are the same."""
    shapes = infer_shapes(g)
    r = _Rewriter(g)
    alias: dict[str, str] = {}
    for n in g.nodes:
        n.inputs = [alias.get(i, i) for i in n.inputs]
        if n.op not in ("Reshape", "Flatten") or (
                n.op == "Reshape" and not all(int(d) > 0 for d in n.attrs["shape"])):
            continue
        src = r.prod.get(n.inputs[0])
        if src is not None and src.op in ("Reshape", "Flatten") and \
                r.only_consumer(n.inputs[0]) is n:
            n.op, n.attrs = "Reshape", {"shape": list(shapes[n.outputs[0]]), "allowzero": 0}
            n.inputs = [src.inputs[0]]
        if n.op != "Reshape":
            continue
        if tuple(shapes[n.inputs[0]]) == tuple(n.attrs["shape"]) and \
                n.outputs[0] not in g.outputs:
            alias[n.outputs[0]] = n.inputs[0]
    g.nodes = [n for n in g.nodes if n.outputs[0] not in alias]
    return g.remove_unused()


PIPELINE: list[tuple[str, Pass]] = [
    ("fold_constants", fold_constants),
    ("fuse_layernorm", fuse_layernorm),
    ("fuse_gelu", fuse_gelu),
    ("fuse_gates", fuse_gates),
    ("fold_dense_bias", fold_dense_bias),
    ("dense_rows_to_conv", dense_rows_to_conv),
    ("cancel_transposes", cancel_transposes),
    ("fold_channel_shuffle", fold_channel_shuffle),
    ("drop_identities", drop_identities),
    ("merge_reshapes", merge_reshapes),
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
def pattern(op: str) -> str:
    """TVM's operator pattern of ``op`` (a quantized op shares its float op's)."""
    o = ops.get(op[1:]) if op.startswith("Q") else None
    o = o or ops.get(op)
    return o.pattern if o is not None else OPAQUE


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
    prod, cons = g.producers(), g.consumers()
    group_of: dict[str, FusionGroup] = {}
    groups: list[FusionGroup] = []
    for n in g.nodes:
        pat = pattern(n.op)
        srcs = [prod[i] for i in n.inputs if i in prod]
        target: FusionGroup | None = None
        if pat in (INJECTIVE, REDUCTION) and srcs:
            for s in srcs:
                grp = group_of[s.name]
                if _single_consumer(g, cons, s.outputs[0]) is not n:
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
