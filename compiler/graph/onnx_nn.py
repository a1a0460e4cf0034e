"""ONNX converters of the matrix products, normalisations, pooling, reductions, softmax and
attention (registered with their op: :func:`.onnx_converter.converts`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ops.kernels import ceil_mode_extra
from .onnx_converter import Attrs, Converter, Ins, converts, static_reshape


def _as_2d(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs,
           conv2d: Callable[..., None]) -> None:
    """A 1-D window op (Conv, MaxPool, AveragePool over [N, C, L]) as the 2-D one of height 1
    on :meth:`Converter.as2d`'s tensor; a 1-D weight [O, I, K] becomes [O, I, 1, K]."""
    a = dict(a)
    for key in ("kernel_shape", "strides", "dilations"):
        if key in a:
            a[key] = [1, *a[key]]
    if "pads" in a:
        a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    ins = [c.as2d(ins[0]), *ins[1:]]
    if len(ins) > 1 and ins[1] in c.params and c.params[ins[1]].ndim == 3:
        c.params[f"{name}.weight2d"] = c.params[ins[1]][:, :, None, :]
        ins[1] = f"{name}.weight2d"
    conv2d(c, name, ins, [f"{outs[0]}.as2d", *outs[1:]], a)
    c.from2d(name, f"{outs[0]}.as2d", outs[0])


def _conv(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    w = c.const("Conv", name, ins[1], "the weight")
    if w.ndim == 3 and len(c.shape(ins[0])) == 3:
        _as_2d(c, name, ins, outs, a, _conv)
        return
    if w.ndim != 4:
        raise c.fail("Conv", name, f"only 1-D and 2-D convolutions are supported (weight rank "
                                   f"{w.ndim})")
    kernel = list(a.get("kernel_shape", w.shape[2:]))
    if kernel != list(w.shape[2:]):
        raise c.fail("Conv", name, f"kernel_shape {kernel} is not its weight's {list(w.shape[2:])}")
    strides, pads, dil = c.spatial("Conv", name, a, kernel, ins[0])
    if len(ins) > 2 and ins[2]:
        c.const("Conv", name, ins[2], "the bias")
    c.emit("Conv", name, [i for i in ins if i], outs[:1], strides=strides, pads=pads,
           dilations=dil, group=int(a.get("group", 1)))


def _conv_t(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    w = c.const("ConvTranspose", name, ins[1], "the weight")
    if w.ndim != 4:
        raise c.fail("ConvTranspose", name, "only 2-D transposed convolution is supported")
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise c.fail("ConvTranspose", name, f"auto_pad={a['auto_pad']} is not supported")
    kernel = list(a.get("kernel_shape", w.shape[2:]))
    strides, pads, dil = c.spatial("ConvTranspose", name, a, kernel, ins[0])
    c.emit("ConvTranspose", name, [i for i in ins if i], outs[:1], strides=strides, pads=pads,
           dilations=dil, group=int(a.get("group", 1)),
           output_padding=list(a.get("output_padding", [0, 0])))


def _gemm(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    ta, tb = int(a.get("transA", 0)), int(a.get("transB", 0))
    b = c.params.get(ins[1])
    bias = c.params.get(ins[2]) if len(ins) > 2 and ins[2] else None
    has_c = len(ins) > 2 and bool(ins[2])
    if not ta and b is not None and b.ndim == 2 and (not has_c or bias is not None):
        w = b if tb else b.T
        if alpha != 1.0:
            w = w * alpha
        wname = f"{name}.weight"
        # one copy at most (VGG's 25088x4096 weight is 411 MB)
        c.params[wname] = np.ascontiguousarray(w, dtype=np.float32)
        dins = [ins[0], wname]
        if bias is not None:
            n_out = w.shape[0]
            bb = np.broadcast_to(bias.astype(np.float32) * beta, (1, n_out)).reshape(n_out)
            c.params[f"{name}.bias"] = np.ascontiguousarray(bb)
            dins.append(f"{name}.bias")
        c.emit("Dense", name, dins, outs[:1])
        return
    c.emit("Gemm", name, [i for i in ins if i], outs[:1], alpha=alpha, beta=beta,
           transA=ta, transB=tb)


def _matmul(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    """A constant 2-D right operand makes a Dense layer; a rank > 2 left operand is flattened
    to rows around it (one Dense over all rows, as a 1x1 convolution would be)."""
    b = c.params.get(ins[1])
    xs = c.shape(ins[0])
    if b is None or b.ndim != 2 or ins[0] in c.params or len(xs) < 2:
        c.emit("MatMul", name, ins, outs[:1])
        return
    wname = f"{name}.weight"
    c.params[wname] = np.ascontiguousarray(b.T.astype(np.float32))
    if len(xs) == 2:
        c.emit("Dense", name, [ins[0], wname], outs[:1])
        return
    rows, flat = f"{name}.rows", f"{name}.rows_out"
    c.emit("Reshape", f"{name}.flatten", [ins[0]], [rows], shape=[math.prod(xs[:-1]), xs[-1]],
           allowzero=0)
    c.emit("Dense", name, [rows, wname], [flat])
    c.emit("Reshape", f"{name}.unflatten", [flat], outs[:1], shape=[*xs[:-1], b.shape[1]],
           allowzero=0)


def _global_pool(op: str) -> Callable[..., None]:
    """Global pooling over H, W of [N, C, H, W], or over L of [N, C, L] (as the 2-D pool of
    height 1 on :meth:`Converter.as2d`'s tensor)."""
    def conv(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        rank = len(c.shape(ins[0]))
        if rank not in (3, 4):
            raise c.fail(op, name, f"only 1-D and 2-D global pooling is supported (input rank "
                                   f"{rank})")
        if rank == 3:
            c.as2d(ins[0])  # then emitted on that view
        c.emit_viewed(op, name, ins[:1], outs[0])
    return conv


def _bn(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if a.get("training_mode", 0):
        raise c.fail("BatchNormalization", name, "training_mode=1 is not supported "
                                                 "(export the model in eval mode)")
    if a.get("spatial", 1) != 1:
        raise c.fail("BatchNormalization", name, "spatial=0 is not supported")
    if c.extra_outputs_used(outs):
        raise c.fail("BatchNormalization", name, "only the first output (inference) is "
                                                 "supported")
    for k, what in zip(range(1, 5), ("scale", "bias", "mean", "var")):
        c.const("BatchNormalization", name, ins[k], what)
    c.emit("BatchNormalization", name, ins[:5], outs[:1], epsilon=float(a.get("epsilon", 1e-5)))


def _layernorm(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if c.extra_outputs_used(outs):
        raise c.fail("LayerNormalization", name, "only the first output (Y) is supported")
    rank = len(c.shape(ins[0]))
    axis = c.axis(int(a.get("axis", -1)), rank)
    c.emit("LayerNormalization", name, [i for i in ins[:3] if i], outs[:1],
           axes=list(range(axis, rank)), epsilon=float(a.get("epsilon", 1e-5)))


def _pool(op: str) -> Callable[..., None]:
    def conv(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        if "kernel_shape" not in a:
            raise c.fail(op, name, "kernel_shape is required")
        if len(a["kernel_shape"]) == 1 and len(c.shape(ins[0])) == 3:
            _as_2d(c, name, ins, outs, a, conv)
            return
        kernel = list(a["kernel_shape"])
        strides, pads, dil = c.spatial(op, name, a, kernel, ins[0])
        if dil != [1, 1]:
            raise c.fail(op, name, f"dilations={dil} are not supported (only 1)")
        if a.get("storage_order", 0):
            raise c.fail(op, name, "storage_order=1 is not supported")
        if c.extra_outputs_used(outs):
            raise c.fail(op, name, "the Indices output is not supported")
        extra = [0, 0]
        if a.get("ceil_mode", 0):  # as extra padding at the end (never counted by the mean)
            extra = [ceil_mode_extra(size, k, s, pads[i], pads[i + 2])
                     for i, (size, k, s) in enumerate(zip(c.shape(ins[0])[2:], kernel,
                                                          strides))]
            pads = [pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1]]
        attrs: dict[str, Any] = {}
        if op == "AveragePool":
            attrs["count_include_pad"] = bool(a.get("count_include_pad", 0))
            if any(extra):
                attrs["ceil_extra"] = extra
        c.emit(op, name, ins[:1], outs[:1], kernel_shape=kernel, strides=strides, pads=pads,
               **attrs)
    return conv


def _reduce_axes(c: Converter, op: str, name: str, ins: Ins, a: Attrs) -> list[int]:
    rank = len(c.shape(ins[0]))
    if "axes" in a:
        axes = list(a["axes"])
    elif len(ins) > 1 and ins[1]:
        axes = [int(v) for v in c.const(op, name, ins[1], "axes").reshape(-1)]
    else:
        axes = []
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return []
        axes = list(range(rank))
    return sorted(c.axis(int(v), rank) for v in axes)


def _reduce(op: str, global_op: str) -> Callable[..., None]:
    """ReduceMean / ReduceMax; over H and W of an NCHW tensor it is global pooling."""
    def conv(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        axes = _reduce_axes(c, op, name, ins, a)
        keep = bool(a.get("keepdims", 1))
        xs = c.shape(ins[0])
        if not axes:
            c.forward(ins[0], outs[0])
        elif len(xs) == 4 and axes == [2, 3]:
            if keep:
                c.emit(global_op, name, ins[:1], outs[:1])
            else:
                mid = f"{name}.pooled"
                c.emit(global_op, name, ins[:1], [mid])
                c.emit("Reshape", f"{name}.squeeze", [mid], outs[:1], shape=list(xs[:2]),
                       allowzero=0)
        else:
            c.emit(op, name, ins[:1], outs[:1], axes=axes, keepdims=keep)
    return conv


_ATTENTION_ATTRS = {"is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode",
                    "scale", "softcap", "softmax_precision"}


def _attention(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    """ONNX ``Attention`` (opset 23: what the dynamo exporter writes for
    ``F.scaled_dot_product_attention`` from opset 23 on) as the ops it stands for:
    ``softmax(Q·Kᵀ·scale (+ softcap) + mask + causal mask)·V``, 4-D ``[B, H, S, D]`` inputs or
    3-D ``[B, S, H·D]`` ones with ``q_num_heads``; no KV cache, as many K/V heads as Q heads."""
    for key in a:
        if key not in _ATTENTION_ATTRS:
            raise c.fail("Attention", name, f"attribute {key!r} is not supported")
    if len(ins) > 4 and any(ins[4:]):
        raise c.fail("Attention", name, "a KV cache (past_key, past_value, nonpad_kv_seqlen) "
                                        "is not supported")
    if c.extra_outputs_used(outs):
        raise c.fail("Attention", name, "only the first output (Y) is supported")
    q, k, v = ins[:3]
    rank = len(c.shape(q))
    heads = int(a.get("q_num_heads", 0))
    if rank == 3:
        if not heads or int(a.get("kv_num_heads", heads)) != heads:
            raise c.fail("Attention", name, "3-D inputs need q_num_heads equal to kv_num_heads")
        q, k, v = (_split_heads(c, f"{name}.{t}", x, heads) for t, x in zip("qkv", (q, k, v)))
    elif rank != 4:
        raise c.fail("Attention", name, f"inputs of rank {rank} are not supported (3 or 4)")
    if c.shape(q)[1] != c.shape(k)[1] or c.shape(k)[1] != c.shape(v)[1]:
        raise c.fail("Attention", name, "grouped K/V heads (fewer than Q's) are not supported")
    sq, skv = c.shape(q)[2], c.shape(k)[2]
    scale = float(a.get("scale", 1.0 / math.sqrt(c.shape(q)[3])))
    c.emit("Transpose", f"{name}.kt", [k], [f"{name}.kt"], perm=[0, 1, 3, 2])
    c.emit("MatMul", f"{name}.qk", [q, f"{name}.kt"], [f"{name}.qk"])
    c.params[f"{name}.scale"] = np.asarray(scale, np.float32)
    x = f"{name}.scores"
    c.emit("Mul", x, [f"{name}.qk", f"{name}.scale"], [x])
    softcap = float(a.get("softcap", 0.0))
    if softcap > 0:
        c.params[f"{name}.softcap"] = np.asarray(softcap, np.float32)
        c.emit("Div", f"{name}.capped", [x, f"{name}.softcap"], [f"{name}.capped"])
        c.emit("Tanh", f"{name}.tanh", [f"{name}.capped"], [f"{name}.tanh"])
        x = f"{name}.soft"
        c.emit("Mul", x, [f"{name}.tanh", f"{name}.softcap"], [x])
    mask = ins[3] if len(ins) > 3 and ins[3] else None
    if mask is not None:
        if c.shape(mask)[-1] != skv:
            raise c.fail("Attention", name, f"a mask of {c.shape(mask)[-1]} keys for {skv} "
                                            f"keys is not supported")
        if c.dtype(mask) == "bool":
            c.params[f"{name}.zero"] = np.zeros((), np.float32)
            c.params[f"{name}.ninf"] = np.full((), -np.inf, np.float32)
            c.emit("Where", f"{name}.bias", [mask, f"{name}.zero", f"{name}.ninf"],
                   [f"{name}.bias"])
            mask = f"{name}.bias"
        c.emit("Add", f"{name}.masked", [x, mask], [f"{name}.masked"])
        x = f"{name}.masked"
    if int(a.get("is_causal", 0)):
        allowed = np.arange(skv)[None, :] <= np.arange(sq)[:, None]
        c.params[f"{name}.causal"] = np.where(allowed, 0, -np.inf).astype(np.float32)
        c.emit("Add", f"{name}.causal_masked", [x, f"{name}.causal"],
               [f"{name}.causal_masked"])
        x = f"{name}.causal_masked"
    c.emit("Softmax", f"{name}.softmax", [x], [f"{name}.probs"], axis=-1, legacy=False)
    if rank == 4:
        c.emit("MatMul", name, [f"{name}.probs", v], outs[:1])
        return
    c.emit("MatMul", name, [f"{name}.probs", v], [f"{name}.heads"])
    c.emit("Transpose", f"{name}.merge", [f"{name}.heads"], [f"{name}.merged"],
           perm=[0, 2, 1, 3])
    b, s, h, d = c.shape(f"{name}.merged")
    static_reshape(c, f"{name}.unheads", f"{name}.merged", outs[0], [b, s, h * d])


def _split_heads(c: Converter, name: str, x: str, heads: int) -> str:
    """``[B, S, H·D]`` -> ``[B, H, S, D]``."""
    b, s, hd = c.shape(x)
    static_reshape(c, f"{name}.heads", x, f"{name}.heads", [b, s, heads, hd // heads])
    c.emit("Transpose", f"{name}.split", [f"{name}.heads"], [f"{name}.split"],
           perm=[0, 2, 1, 3])
    return f"{name}.split"


def _softmax(op: str) -> Callable[..., None]:
    def conv(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        legacy = c.opset < 13
        c.emit(op, name, ins[:1], outs[:1], axis=int(a.get("axis", 1 if legacy else -1)),
               legacy=legacy)
    return conv


converts("Conv", _conv)


converts("ConvTranspose", _conv_t)


converts("Gemm", _gemm)


converts("MatMul", _matmul)


converts("GlobalAveragePool", _global_pool("GlobalAveragePool"))


converts("GlobalMaxPool", _global_pool("GlobalMaxPool"))


converts("BatchNormalization", _bn)


converts("LayerNormalization", _layernorm)


converts("MaxPool", _pool("MaxPool"))


converts("AveragePool", _pool("AveragePool"))


converts("ReduceMean", _reduce("ReduceMean", "GlobalAveragePool"))


converts("ReduceMax", _reduce("ReduceMax", "GlobalMaxPool"))


converts("Softmax", _softmax("Softmax"))


converts("LogSoftmax", _softmax("LogSoftmax"))


converts("Attention", _attention)
