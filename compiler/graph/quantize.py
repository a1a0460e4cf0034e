"""int8 quantization with power-of-two scales, and the int8 reference (the bit-exact spec).

A quantized tensor holds int8 values ``q`` standing for ``q * 2**-exp``; VTA rescales only by
shifts, so every scale is a power of two. The rules (what VTA and the CPU int kernels compute):

- ``QConv`` / ``QDense``: ``acc = int32(sum(x * w) + bias)`` with int8 ``x``, ``w`` and an int32
  ``bias`` that already holds the rounding term ``2**(shift-1)``; ``out = clip(acc >> shift, lo,
  hi)`` with an arithmetic shift (a negative shift is a left shift); ``lo``/``hi`` also carry a
  fused Relu/Clip.
- ``QAdd``: both inputs shifted left to the finer exponent, added in int32, then rounded
  (``(v + 2**(k-1)) >> k``) to the output exponent and clipped.
- ``QAvgPool``/``QGlobalAvgPool``: exact window sum, ``round_half_up(sum * 2**d / count)``.
- ``QMaxPool``, ``QRelu``, ``QClip``, shapes and copies: exact on int8 (exponent unchanged).
- ``Quantize``: ``clip(rint(x * 2**exp), -128, 127)``; ``Dequantize``: ``q * 2**-exp``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import ops
from .errors import InputError
from .ir import Graph, Node
from .reference import FLOAT_KERNELS, run_float

QMIN, QMAX = -128, 127

#: Ops that run on int8 tensors when their input is quantized (exponent unchanged).
_PASSTHROUGH = {"Flatten", "Reshape", "Identity", "Resize", "Dilate", "Pad", "Transpose",
                "Slice", "Gather", "GlobalMaxPool"}


def exponent_for(max_abs: float, bits: int = 8) -> int:
    """The largest ``e`` with ``max_abs * 2**e <= 2**(bits-1) - 1`` (0 for an all-zero tensor)."""
    if not np.isfinite(max_abs) or max_abs <= 0:
        return 0
    return int(math.floor(math.log2(((1 << (bits - 1)) - 1) / max_abs)))


def quantize_array(x: np.ndarray, exp: int) -> np.ndarray:
    return np.clip(np.rint(x.astype(np.float64) * 2.0 ** exp), QMIN, QMAX).astype(np.int8)


def dequantize_array(q: np.ndarray, exp: int) -> np.ndarray:
    return (q.astype(np.float32) * np.float32(2.0 ** -exp)).astype(np.float32)


def round_shift(v: np.ndarray, k: int) -> np.ndarray:
    """``v * 2**-k`` rounded half up (``k > 0``), or exactly shifted left (``k <= 0``)."""
    v = v.astype(np.int64)
    if k > 0:
        return (v + (1 << (k - 1))) >> k
    return v << -k


def wrap_int32(v: np.ndarray) -> np.ndarray:
    return ((v.astype(np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int64)


def shift_clip(acc: np.ndarray, shift: int | list[int], lo: int, hi: int) -> np.ndarray:
    """The VTA epilogue: arithmetic shift right (left if negative), then clip to [lo, hi].
    ``shift`` is one amount, or one per output channel (axis 1)."""
    acc = wrap_int32(acc)
    if isinstance(shift, list | tuple | np.ndarray):
        sh = np.asarray(shift, np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
        acc = np.where(sh >= 0, acc >> np.maximum(sh, 0), wrap_int32(acc << np.maximum(-sh, 0)))
    else:
        acc = acc >> shift if shift >= 0 else wrap_int32(acc << -shift)
    return np.clip(acc, lo, hi).astype(np.int8)


# ------------------------------------------------------------------ int kernels
def _qconv(n: Node, a: list[Any]) -> list[np.ndarray]:
    acc = ops.conv2d(a[0], a[1], None, strides=n.attrs["strides"], pads=n.attrs["pads"],
                     dilations=n.attrs["dilations"], group=n.attrs["group"])
    acc = acc + a[2].astype(np.int64)[None, :, None, None]
    return [shift_clip(acc, n.attrs["shift"], n.attrs["lo"], n.attrs["hi"])]


def _qdense(n: Node, a: list[Any]) -> list[np.ndarray]:
    acc = np.rint(a[0].astype(np.float64) @ a[1].astype(np.float64).T).astype(np.int64)
    acc = acc + a[2].astype(np.int64)
    return [shift_clip(acc, n.attrs["shift"], n.attrs["lo"], n.attrs["hi"])]


def _qadd(n: Node, a: list[Any]) -> list[np.ndarray]:
    s = (a[0].astype(np.int64) << n.attrs["shift_a"]) + (a[1].astype(np.int64)
                                                         << n.attrs["shift_b"])
    return [np.clip(round_shift(s, n.attrs["shift"]), n.attrs["lo"], n.attrs["hi"])
            .astype(np.int8)]


def _qavg(n: Node, a: list[Any]) -> list[np.ndarray]:
    x = a[0]
    if n.op == "QGlobalAveragePool":
        s = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
        cnt = np.int64(x.shape[2] * x.shape[3])
    else:
        s, cnt = ops.pool_sum_count(x, n.attrs["kernel_shape"], n.attrs["strides"],
                                    n.attrs["pads"], n.attrs["count_include_pad"],
                                    n.attrs.get("ceil_extra"))
    d = n.attrs["shift"]  # out_exp - in_exp
    num = s * (1 << max(d, 0))
    den = cnt * (1 << max(-d, 0))
    return [np.clip((2 * num + den) // (2 * den), QMIN, QMAX).astype(np.int8)]


def _qconcat(n: Node, a: list[Any]) -> list[np.ndarray]:
    parts = [np.clip(round_shift(x, k), QMIN, QMAX) for x, k in zip(a, n.attrs["shifts"])]
    return [np.concatenate(parts, axis=n.attrs["axis"]).astype(np.int8)]


def _qpad(n: Node, a: list[Any]) -> list[np.ndarray]:
    pads = n.attrs["pads"]
    r = a[0].ndim
    width = [(pads[i], pads[i + r]) for i in range(r)]
    if n.attrs["mode"] == "constant":
        return [np.pad(a[0], width, constant_values=n.attrs["qvalue"])]
    return [np.pad(a[0], width, mode=n.attrs["mode"])]


INT_KERNELS = {
    "QConv": _qconv,
    "QDense": _qdense,
    "QAdd": _qadd,
    "QAveragePool": _qavg,
    "QGlobalAveragePool": _qavg,
    "QMaxPool": lambda n, a: [ops.max_pool(a[0], n.attrs["kernel_shape"], n.attrs["strides"],
                                           n.attrs["pads"])],
    "QClip": lambda n, a: [np.clip(a[0], n.attrs["lo"], n.attrs["hi"]).astype(np.int8)],
    "QConcat": _qconcat,
    "QPad": _qpad,
    "Quantize": lambda n, a: [quantize_array(a[0], n.attrs["exp"])],
    "Dequantize": lambda n, a: [dequantize_array(a[0], n.attrs["exp"])],
}


def kernel_for(op: str):  # noqa: ANN201 - a Kernel
    return INT_KERNELS.get(op) or FLOAT_KERNELS[op]


# ---------------------------------------------------------------- calibration
@dataclass
class QuantInfo:
    """Per-layer quantization record (manifest and report)."""

    node: str
    op: str
    in_exp: int | None = None
    w_exp: int | None = None
    out_exp: int | None = None
    shift: int | None = None
    rel_error: float | None = None
    float_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class QuantResult:
    graph: Graph
    exps: dict[str, int]
    layers: list[QuantInfo] = field(default_factory=list)


def calibrate(g: Graph, samples: Sequence[Mapping[str, np.ndarray]], percentile: float = 100.0
              ) -> dict[str, float]:
    """Max |value| of every tensor over the calibration samples (float execution)."""
    amax: dict[str, float] = {}
    for feeds in samples:
        env = run_float(g, feeds, keep=True)
        for k, v in env.items():
            if k in g.params or not isinstance(v, np.ndarray) or v.dtype.kind != "f":
                continue
            a = np.abs(v)
            m = float(np.percentile(a, percentile)) if percentile < 100 else float(a.max())
            amax[k] = max(amax.get(k, 0.0), m)
    return amax


def synthetic_samples(g: Graph, count: int = 4, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Standard-normal inputs (what the zoo's image inputs expect) when no data is given."""
    rng = np.random.default_rng(seed)
    return [{k: rng.standard_normal(v.shape).astype(np.float32) for k, v in g.inputs.items()}
            for _ in range(count)]


def load_samples(g: Graph, paths: Iterable[str]) -> list[dict[str, np.ndarray]]:
    """Calibration inputs from .npy files: one array of the input shape, or a stack of them."""
    from .executor import load_npy

    (name, info), = g.inputs.items() if len(g.inputs) == 1 else (_multi_input(g),)
    out = []
    for p in paths:
        x = load_npy(p)
        if tuple(x.shape) == tuple(info.shape):
            batch = [x]
        elif tuple(x.shape[1:]) == tuple(info.shape):
            batch = list(x)
        else:
            raise InputError(f"calibration file {p} has shape {list(x.shape)}; expected "
                             f"{list(info.shape)} or [K, {', '.join(map(str, info.shape))}]")
        out += [{name: b.astype(np.float32)} for b in batch]
    return out


def _multi_input(g: Graph) -> tuple[str, Any]:
    raise InputError(f"calibration from files supports single-input models; this one has "
                     f"{len(g.inputs)} ({', '.join(g.inputs)})")


def first_conv(g: Graph) -> str | None:
    for n in g.nodes:
        if n.op == "Conv":
            return n.name
    return None


def quantize_graph(g: Graph, samples: Sequence[Mapping[str, np.ndarray]], *,
                   float_layers: Iterable[str] = (), keep_first_float: bool = True,
                   percentile: float = 100.0, per_channel: bool = False) -> QuantResult:
    """Turn an optimized float graph into a mixed int8/float graph (see the module doc)."""
    float_layers = set(float_layers)
    names = {n.name for n in g.nodes}
    unknown = float_layers - names
    if unknown:
        raise InputError(f"--float-layer {', '.join(sorted(unknown))}: no such layer; layers "
                         f"are named like {', '.join(list(names)[:4])}, ...")
    amax = calibrate(g, samples, percentile)
    first = first_conv(g) if keep_first_float else None
    exps: dict[str, int] = {}  # exponent of every int8 tensor
    params = dict(g.params)
    nodes: list[Node] = []
    layers: list[QuantInfo] = []
    qcache: dict[str, str] = {}

    def as_int(t: str) -> str:
        if t in exps:
            return t
        if t not in qcache:
            q = f"{t}.q"
            e = exponent_for(amax.get(t, 0.0))
            nodes.append(Node("Quantize", f"{t}.quantize", [t], [q], {"exp": e}))
            exps[q] = e
            qcache[t] = q
        return qcache[t]

    deq: dict[str, str] = {}

    def as_float(t: str) -> str:
        if t not in exps:
            return t
        if t not in deq:
            f = f"{t}.f"
            nodes.append(Node("Dequantize", f"{t}.dequantize", [t], [f], {"exp": exps[t]}))
            deq[t] = f
        return deq[t]

    def out_exp(n: Node) -> int:
        return exponent_for(amax.get(n.outputs[0], 0.0))

    def act_bounds(n: Node, e: int) -> tuple[int, int]:
        lo, hi = QMIN, QMAX
        if n.attrs.get("activation"):
            if n.attrs["act_min"] is not None:
                lo = max(QMIN, min(QMAX, int(np.rint(n.attrs["act_min"] * 2.0 ** e))))
            if n.attrs["act_max"] is not None:
                hi = min(QMAX, max(QMIN, int(np.rint(n.attrs["act_max"] * 2.0 ** e))))
        return lo, hi

    for n in g.nodes:
        acts = [i for i in n.inputs if i and i not in params]
        info = QuantInfo(n.name, n.op)
        reason = None
        if n.name in float_layers:
            reason = "named float by the user"
        elif n.name == first:
            reason = "first convolution"
        if n.op in ("Conv", "Dense") and reason is None and len(acts) == 1:
            x = as_int(n.inputs[0])
            e_in = exps[x]
            w = params[n.inputs[1]]
            e_o = out_exp(n)
            if per_channel:  # one exponent (and shift) per output channel
                wmax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
                e_wc = np.array([exponent_for(float(v)) for v in wmax], np.int64)
                if len(set(e_wc.tolist())) == 1:
                    e_wc = e_wc[:1]
            else:
                e_wc = np.array([exponent_for(float(np.abs(w).max()))], np.int64)
            shifts = e_in + e_wc - e_o
            b = params[n.inputs[2]] if len(n.inputs) > 2 else np.zeros(w.shape[0], np.float32)
            bq = np.rint(b.astype(np.float64) * 2.0 ** (e_in + e_wc)).astype(np.int64)
            bq += np.where(shifts > 0, np.left_shift(1, np.maximum(shifts - 1, 0)), 0)
            lo, hi = act_bounds(n, e_o)
            wname, bname = f"{n.name}.wq", f"{n.name}.bq"
            wscale = 2.0 ** e_wc.reshape((-1,) + (1,) * (w.ndim - 1))
            params[wname] = np.clip(np.rint(w.astype(np.float64) * wscale), QMIN,
                                    QMAX).astype(np.int8)
            if len(e_wc) == 1:
                e_w, shift = int(e_wc[0]), int(shifts[0])
            else:
                e_w, shift = [int(v) for v in e_wc], [int(v) for v in shifts]
            params[bname] = np.clip(bq, -(1 << 31), (1 << 31) - 1).astype(np.int32)
            attrs = {k: v for k, v in n.attrs.items() if k not in ("act_min", "act_max")}
            attrs.update(shift=shift, lo=lo, hi=hi, in_exp=e_in, w_exp=e_w, out_exp=e_o)
            nodes.append(Node("Q" + n.op, n.name, [x, wname, bname], list(n.outputs), attrs))
            exps[n.outputs[0]] = e_o
            info.in_exp, info.w_exp, info.out_exp, info.shift = e_in, e_w, e_o, shift
        elif reason is None and acts and len(acts) == len(n.inputs) and \
                any(a in exps or a in qcache for a in acts) and n.op in _INT_CAPABLE:
            _INT_CAPABLE[n.op](n, [as_int(a) for a in acts], exps, out_exp, act_bounds,
                               nodes, info)
        else:
            nodes.append(Node(n.op, n.name, [as_float(i) if i else i for i in n.inputs],
                              list(n.outputs), dict(n.attrs)))
            info.float_reason = reason or ("no int8 kernel" if n.op not in _INT_CAPABLE
                                           and n.op not in ("Conv", "Dense")
                                           else "float input")
        layers.append(info)
    for o in g.outputs:
        if o not in exps:
            continue
        # the int8 tensor gets a distinct name; the graph output stays float under its name
        inner = f"{o}.int8"
        for m in nodes:
            m.inputs = [inner if i == o else i for i in m.inputs]
            m.outputs = [inner if t == o else t for t in m.outputs]
        exps[inner] = exps.pop(o)
        nodes.append(Node("Dequantize", f"{o}.dequantize", [inner], [o], {"exp": exps[inner]}))
    qg = Graph(nodes, dict(g.inputs), list(g.outputs), params, g.name)
    qg.verify()
    qg.remove_unused()
    return QuantResult(qg, exps, layers)


def _q_add(n, ins, exps, out_exp, act_bounds, nodes, info):  # noqa: ANN001, ANN202
    ea, eb = exps[ins[0]], exps[ins[1]]
    e = max(ea, eb)
    eo = out_exp(n)
    lo, hi = act_bounds(n, eo)
    nodes.append(Node("QAdd", n.name, ins, list(n.outputs),
                      {"shift_a": e - ea, "shift_b": e - eb, "shift": e - eo, "lo": lo, "hi": hi,
                       "out_exp": eo}))
    exps[n.outputs[0]] = eo
    info.in_exp, info.out_exp, info.shift = e, eo, e - eo


def _q_same(op: str):  # noqa: ANN202
    def conv(n, ins, exps, out_exp, act_bounds, nodes, info):  # noqa: ANN001, ANN202
        e = exps[ins[0]]
        attrs = dict(n.attrs)
        if op == "QClip":
            lo = QMIN if n.attrs["min"] is None else int(np.rint(n.attrs["min"] * 2.0 ** e))
            hi = QMAX if n.attrs["max"] is None else int(np.rint(n.attrs["max"] * 2.0 ** e))
            attrs = {"lo": max(QMIN, min(QMAX, lo)), "hi": min(QMAX, max(QMIN, hi))}
        elif op == "QPad":
            attrs["qvalue"] = int(np.clip(np.rint(n.attrs["value"] * 2.0 ** e), QMIN, QMAX))
        nodes.append(Node(op, n.name, ins, list(n.outputs), attrs))
        exps[n.outputs[0]] = e
        info.in_exp = info.out_exp = e
    return conv


def _q_avg(n, ins, exps, out_exp, act_bounds, nodes, info):  # noqa: ANN001, ANN202
    e, eo = exps[ins[0]], out_exp(n)
    nodes.append(Node("Q" + n.op, n.name, ins, list(n.outputs),
                      dict(n.attrs, shift=eo - e, out_exp=eo)))
    exps[n.outputs[0]] = eo
    info.in_exp, info.out_exp = e, eo


def _q_concat(n, ins, exps, out_exp, act_bounds, nodes, info):  # noqa: ANN001, ANN202
    eo = out_exp(n)
    nodes.append(Node("QConcat", n.name, ins, list(n.outputs),
                      {"axis": n.attrs["axis"], "shifts": [exps[i] - eo for i in ins]}))
    exps[n.outputs[0]] = eo
    info.out_exp = eo


_INT_CAPABLE = {
    "Add": _q_add,
    "Relu": lambda n, *r: _q_same("QClip")(
        Node("Clip", n.name, n.inputs, n.outputs, {"min": 0.0, "max": None}), *r),
    "Clip": _q_same("QClip"),
    "MaxPool": _q_same("QMaxPool"),
    "AveragePool": _q_avg,
    "GlobalAveragePool": _q_avg,
    "Concat": _q_concat,
    "Pad": _q_same("QPad"),
    **{op: _q_same(op) for op in _PASSTHROUGH if op != "Pad"},
}


def run_quantized(g: Graph, feeds: Mapping[str, np.ndarray], *, keep: bool = False
                  ) -> dict[str, np.ndarray]:
    """The int8 reference: execute a quantized graph with numpy (bit-exact VTA spec)."""
    from .reference import check_feeds

    env: dict[str, Any] = dict(g.params)
    env.update(check_feeds(g, feeds))
    for n in g.nodes:
        res = kernel_for(n.op)(n, [env[i] if i else None for i in n.inputs])
        for o, v in zip(n.outputs, res):
            env[o] = v
    return env if keep else {o: env[o] for o in g.outputs}


def agreement(f: np.ndarray, q: np.ndarray) -> dict[str, float | bool]:
    """Cosine similarity and top-1 match of a quantized output against the float one."""
    a, b = f.reshape(-1).astype(np.float64), q.reshape(-1).astype(np.float64)
    den = np.linalg.norm(a) * np.linalg.norm(b)
    return {"cosine": float(a @ b / den) if den > 0 else float(np.array_equal(a, b)),
            "top1": bool(int(a.argmax()) == int(b.argmax()))}


def layer_errors(fg: Graph, qr: QuantResult, feeds: Mapping[str, np.ndarray]
                 ) -> dict[str, dict[str, float | bool]]:
    """Fill ``rel_error`` (||deq(q) - f|| / ||f||) of every layer with an int8 output; return
    the graph outputs' :func:`agreement` with float."""
    fenv = run_float(fg, feeds, keep=True)
    qenv = run_quantized(qr.graph, feeds, keep=True)
    for info in qr.layers:
        n = fg.node(info.node)
        o = n.outputs[0]
        qo = o if o in qr.exps else (f"{o}.int8" if f"{o}.int8" in qr.exps else None)
        if qo is None or o not in fenv:
            continue
        f = fenv[o].astype(np.float64)
        d = qenv[qo].astype(np.float64) * 2.0 ** -qr.exps[qo]
        den = np.linalg.norm(f)
        info.rel_error = float(np.linalg.norm(d - f) / den) if den > 0 else 0.0
    return {o: agreement(fenv[o], qenv[o]) for o in fg.outputs}
