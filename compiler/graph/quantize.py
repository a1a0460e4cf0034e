"""The quantizer: rewrites a float graph into int8 ops with calibrated scales.

Calibration is :mod:`.calibration`, offset groups :mod:`.offsets`, the int8 arithmetic and
kernels :mod:`vta.compiler.ops.int8` / :mod:`vta.compiler.ops.int8_kernels`, their executor
:mod:`.int8_executor` and the error metrics :mod:`.quant_error`; what they compute:

A quantized tensor holds int8 values ``q`` standing for ``q * scale`` (symmetric, one float
``scale`` per tensor), or ``(q + offset) * scale`` for a tensor that only convolutions read,
directly or through max pooling, shape ops and concatenations (:func:`offset_groups`: a
Relu/Clip conv output and what those ops make of it, offset 128 and one scale per group, or a
CPU float op's output over its calibrated [min, max]; the readers fold ``offset * sum(w)`` into
their bias, and a padded reader gets a ``QPad`` of ``-offset`` before it, VTA padding with 0).
Weights' rounding may have its mean folded into the bias (``bias_correction``, see
:func:`weight_error_mean`). Scales come from
calibration (:data:`CALIBRATIONS`: max, percentile or
mse over float runs of the calibration inputs), from a QDQ model's own QuantizeLinear /
DequantizeLinear pairs (``FakeQuant`` nodes), or are rounded to powers of two
(``pow2=True``: requantization is then a shift alone). Weights get one scale per tensor or per
output channel (max |w| / 127).

Every integer rule below uses only what the VTA ALU does on int32 accumulators that wrap
(ADD, MAX, MIN, SHR by an amount, MUL by a 16-bit signed immediate or by another entry), so
the numpy kernels here are the specification VTA's results are checked against bit for bit:

- ``QConv`` / ``QDense``: ``acc = wrap(sum(x * w) + bias)`` with int8 ``x``, ``w`` and an int32
  ``bias`` holding the rounding term ``2**(shift-1)``; then ``acc = acc >> shift`` (per channel
  or one amount; negative: left shift); when ``mul`` is not 1 the fixed-point multiplier
  follows: ``acc = wrap(acc * mul)``, ``acc = wrap(acc + 2**(shift2-1)) >> shift2``; finally
  ``clip(acc, lo, hi)`` (``lo``/``hi`` also carry a fused Relu/Clip). :func:`requant_params`
  picks ``shift``/``mul``/``shift2`` so that no step overflows int32 for any int8 input.
- ``QMatMul`` (a product of two int8 activations, batched: attention's Q·Kᵀ and softmax·V):
  the same without a bias, ``acc = a @ b``; :func:`matmul_requant` picks ``shift`` 0 where
  the multiplier can then keep the worst-case accumulator within int32 (nothing to round).
- ``rescale(q, m, k) = (q * m + 2**(k-1)) >> k`` (no rounding term when ``k == 0``):
  ``QAdd`` is ``clip(rescale'(a * ma + b * mb), lo, hi)`` with one shared ``k``; ``QConcat``
  rescales each input to the output scale; ``QLeakyRelu`` keeps the scale and maps negative
  values to ``rescale(q, m_alpha, k)``; ``QHardSigmoid`` is ``clip(rescale(q * m + b), 0, hi)``
  and ``QHardSwish`` multiplies that by ``q`` and rescales once more.
- ``QAvgPool``/``QGlobalAvgPool``: exact window sum ``s``, ``round_half_up(s * m / (count *
  2**k))``.
- ``QMaxPool``, ``QClip``, shapes and copies: exact on int8 (scale unchanged).
- ``QPad``: constant pad by ``qvalue``.
- ``QLut``: a float element-wise function of one int8 input (GELU, Sigmoid, Tanh, SiLU:
  :data:`TABLE_OPS`) as a table of its 256 int8 results, ``table[q + 128]``; each entry is
  the float function of the value ``q`` stands for, quantized at the output's scale (and
  offset): the output's rounding is its only error.
- ``QSoftmax``: an attention Softmax with the masks added before it
  (:mod:`.softmax_chains`) on int8 scores: ``e = table[max(z) - z]`` of an exp table, ``z``
  the scores plus the float mask in steps of their scale, then ``round(e / sum(e))`` at the
  output's scale in [0, 127] (:func:`vta.compiler.ops.int8_kernels.qsoftmax`). A ``Mul`` or
  ``Div`` of an int8 tensor by a positive scalar is its scale (an ``Identity``).
- ``QLayerNorm``: a LayerNorm of an int8 input read by int8 layers: the row's deviations
  ``d = C x - sum(x)`` (integer), one float64 multiplier per row from ``sum(d**2)``, then
  ``(((d r) >> k) g + b) >> LN_SHIFT`` with gamma and beta as int32 at the output's scale
  (:func:`vta.compiler.ops.int8_kernels.qlayernorm`).
- ``Quantize``: ``clip(rint(x / scale) - offset, -128, 127)``; ``Dequantize``: ``(q + offset)
  * scale`` (``offset`` 0 unless given).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import ops
from ..ops import node_macs
from ..ops.int8 import (
    LN_FRAC,
    LN_SHIFT,
    MUL_BITS,
    OFFSET,
    QMAX,
    QMIN,
    SOFTMAX_TABLE_MAX,
    TABLE_OPS,
    UMAX,
    exp_table,
    fixed_point,
    quantize_array,
    scale_for,
)
from .calibration import CALIBRATIONS, calibrate, lossy_rows, qdq_ranges
from .errors import InputError, QuantizationError
from .ir import Graph, Node
from .offsets import carry_offset, offset_groups
from .quant_info import QuantInfo, QuantResult
from .reference import infer_shapes
from .softmax_chains import Chain, softmax_chains

#: The first convolution stays float on the CPU while it holds less than this share of the
#: network's MACs (:func:`float_first_conv`); a heavier one (ShuffleNet v2's 7x7 stem: 24%) is
#: quantized and runs on VTA. Its input, an image of 3 channels, pads to a whole channel block
#: on VTA (16 on the default config): there the light first convs of ResNet, MobileNet, VGG...
#: would run at 7-16% of the GEMM peak (ResNet-18's: 6.5% of the MACs, +35% VTA cycles by
#: vta.sim.perf at 224x224) and lose some accuracy (an int8 input). ``vta compile
#: --quantize-first`` quantizes it always; ``--float-layer NAME`` keeps any layer float.
FIRST_CONV_FLOAT_SHARE = 0.15

#: Bits of a conv/dense requantization multiplier (see :func:`requant_params`).
REQUANT_BITS = 11


def requant_params(r: np.ndarray, bound: np.ndarray, pow2: bool
                   ) -> tuple[list[int], list[int], int]:
    """Per output channel: SHR amount and multiplier, and the one final shift, that apply the
    real factor ``r[c]`` to an accumulator bounded by ``bound[c]`` (``|acc + bias| <= bound``).

    The final shift's rounding term ``2**(shift2-1)`` is an ALU immediate (16-bit signed), so
    ``shift2 <= 15``; the multiplier keeps :data:`REQUANT_BITS` bits, which balances its own
    rounding against the first shift's (each about 1/32 of an output step). ``shift2`` (and
    with it the multiplier's bits) drops below 15 only when ``(bound >> shift) * mul`` could
    leave int32, i.e. for accumulators far beyond the int8 output range. Power-of-two factors
    (``pow2``) need the shift alone (``mul == 1``)."""
    if pow2:
        return [int(round(-math.log2(v))) for v in r], [1] * len(r), 0
    e = [math.floor(math.log2(v)) if v > 0 else 0 for v in r]
    for s2 in range(15, -1, -1):
        # one step of acc >> s1 is mul * 2**-s2 < 2**(bits - s2) output steps: at most 1/16
        bits = max(1, min(REQUANT_BITS, s2 - 4))
        s1 = [bits - 1 - s2 - ev for ev in e]
        mul = [int(round(float(v) * 2.0 ** (a + s2))) for v, a in zip(r, s1)]
        if all(_fits(int(b), a, m, s2) for b, a, m in zip(bound, s1, mul)):
            return s1, mul, s2
    raise QuantizationError(f"no requantization of factor {float(np.max(r)):.3g} keeps an "
                            f"accumulator of {int(np.max(bound))} within int32")


def _fits(bound: int, s1: int, m: int, s2: int) -> bool:
    """``acc >> s1``, times ``m``, plus the rounding term stay within int32 for |acc| <=
    bound (with the first shift's own rounding term in the bias)."""
    v = (bound + (1 << s1 >> 1)) >> s1 if s1 >= 0 else bound << -s1
    return v < 1 << 31 and (v + 1) * m + (1 << s2 >> 1) < 1 << 31


def float_first_conv(g: Graph) -> str | None:
    """The first convolution when it stays float by default: while it holds less than
    :data:`FIRST_CONV_FLOAT_SHARE` of the MACs of the graph's conv and dense layers."""
    convs = [n for n in g.nodes if n.op == "Conv"]
    if not convs:
        return None
    shapes = infer_shapes(g)
    total = sum(node_macs(n, shapes, g.params) for n in g.nodes if n.op in ("Conv", "Dense"))
    first = convs[0]
    return first.name if node_macs(first, shapes, g.params) < FIRST_CONV_FLOAT_SHARE * total \
        else None


#: Weights quantized at a time by :func:`quantize_weights` (4 MB of float32: the passes over
#: a chunk stay in cache; VGG's 25088x4096 matrix would take a 400 MB temporary per pass)
_WEIGHT_CHUNK = 1 << 20


def _row_chunks(rows: int, cols: int) -> list[slice]:
    """Slices of a few rows of a ``rows`` x ``cols`` weight matrix, :data:`_WEIGHT_CHUNK`
    values each (at least one row)."""
    step = max(1, _WEIGHT_CHUNK // max(1, cols))
    return [slice(r, min(rows, r + step)) for r in range(0, rows, step)]


def quantize_weights(w: np.ndarray, per_channel: bool, pow2: bool
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """int8 weights ``clip(rint(w / s))`` (``s``: max |w| / 127 over the tensor, or over each
    output channel with ``per_channel``), the scales (one per output channel), and per output
    channel the sums of the int8 weights and of their absolute values. A few output channels
    at a time, float32 (the division rounds as it does on the whole tensor)."""
    o = w.shape[0]
    w2 = np.asarray(w, np.float32).reshape(o, -1)
    chunks = _row_chunks(o, w2.shape[1])
    wmax = np.empty(o, np.float64)
    for c in chunks:
        wmax[c] = np.maximum(w2[c].max(axis=1), -w2[c].min(axis=1))
    if not per_channel:
        wmax[:] = wmax.max()
    s_w = np.array([scale_for(float(v), pow2) for v in wmax])
    s32 = s_w.astype(np.float32)[:, None]
    wq = np.empty(w2.shape, np.int8)
    wsum, wabs = np.empty(o, np.int64), np.empty(o, np.int64)
    buf = np.empty((chunks[0].stop if chunks else 0, w2.shape[1]), np.float32)  # a chunk
    for c in chunks:
        f = buf[:c.stop - c.start]
        np.divide(w2[c], s32[c], out=f)
        np.rint(f, out=f)
        np.clip(f, QMIN, QMAX, out=f)
        q = wq[c]
        q[...] = f
        wsum[c] = q.sum(axis=1, dtype=np.int64)
        wabs[c] = np.abs(q, dtype=np.int16).sum(axis=1, dtype=np.int64)
    return wq.reshape(w.shape), s_w, wsum, wabs


def weight_error_mean(n: Node, w: np.ndarray, wq: np.ndarray, s_w: np.ndarray, mean: np.ndarray,
                    shape: tuple[int, ...]) -> np.ndarray:
    """Per output channel of a Conv/Dense node, the mean of the error its int8 weights make,
    ``E[(w - wq * s_w) . x]`` over the calibration inputs: ``mean`` is the mean of each input
    channel, ``shape`` the input's shape. Added to the float bias, it removes the systematic
    part of the weight rounding (empirical bias correction, Nagel et al. 2019, "Data-Free
    Quantization"); the int8 rule is unchanged (one more term in the int32 bias). A padded
    convolution's border outputs see fewer input pixels: each tap counts for the share of the
    output positions where it falls inside the input. A transposed convolution (zeros
    between the input pixels) gets none. A few output channels at a time (see
    :data:`_WEIGHT_CHUNK`)."""
    o = w.shape[0]
    a = n.attrs
    group = a.get("group", 1) if n.op == "Conv" else 1
    if n.op == "Dense":
        taps = np.ones(1)
    elif max(a.get("input_strides") or [1]) > 1:
        return np.zeros(o)
    else:
        kh, kw = w.shape[2:]
        pads = a["pads"]
        fh, fw = (_tap_share(shape[2 + d], (kh, kw)[d], a["strides"][d], pads[d], pads[d + 2],
                             a["dilations"][d]) for d in range(2))
        taps = np.outer(fh, fw).ravel()
    # what one unit of each weight adds to the output's mean, per group: (group, weights/row)
    u = (mean.reshape(group, -1)[:, :, None] * taps[None, None, :]).reshape(group, -1)
    w2, q2 = w.reshape(o, -1), wq.reshape(o, -1)
    out = np.empty(o, np.float64)
    for rows in _row_chunks(o, w2.shape[1]):
        # the difference first, in float64: both products are far larger than it
        dw = w2[rows].astype(np.float64) - q2[rows].astype(np.float64) * s_w[rows, None]
        if group == 1:  # one row of u: a matrix-vector product
            out[rows] = dw @ u[0]
        else:
            out[rows] = np.einsum("ok,ok->o", dw, u[np.arange(rows.start, rows.stop)
                                                    // (o // group)])
    return out


def _tap_share(size: int, k: int, stride: int, p0: int, p1: int, dil: int) -> np.ndarray:
    """For each tap of a kernel of ``k`` along one axis: the share of the output positions at
    which it reads an input pixel (not padding)."""
    out = (size + p0 + p1 - dil * (k - 1) - 1) // stride + 1
    pos = np.arange(out)[:, None] * stride - p0 + np.arange(k)[None, :] * dil
    return ((pos >= 0) & (pos < size)).mean(axis=0)


class _Quantizer:
    """State of one :func:`quantize_graph` run (scales of int8 tensors, emitted nodes)."""

    def __init__(self, g: Graph, amax: dict[str, float], pow2: bool, per_channel: bool,
                 ranges: dict[str, tuple[float, float]]):
        self.g, self.amax, self.pow2, self.per_channel = g, amax, pow2, per_channel
        self.ranges = ranges
        self.params = dict(g.params)
        self.scales: dict[str, float] = {}
        self.nodes: list[Node] = []
        self.qcache: dict[str, str] = {}
        self.deq: dict[str, str] = {}
        #: int8 tensors stored with an offset: ``x = scale * (q + OFFSET)`` (see :meth:`conv`)
        self.offsets: dict[str, int] = {}
        self.unsigned: set[str] = set()
        self.lows: dict[str, float] = {}
        #: per-channel means of Conv/Dense inputs, with their shapes (see :func:`weight_error_mean`)
        self.means: dict[str, tuple[np.ndarray, tuple[int, ...]]] = {}
        self._shapes: Mapping[str, tuple[int, ...]] | None = None

    def shapes(self) -> Mapping[str, tuple[int, ...]]:
        """Every tensor's shape in the float graph (inferred once, when first asked)."""
        if self._shapes is None:
            self._shapes = infer_shapes(self.g)
        return self._shapes

    def tensor_scale(self, t: str) -> float:
        if t in self.ranges:  # int8 reaches -128: a symmetric int8 QDQ keeps its scale
            lo, hi = self.ranges[t]
            return scale_for(max(-lo * QMAX / -QMIN, hi, 0.0), self.pow2)
        return scale_for(self.amax.get(t, 0.0), self.pow2)

    def out_scale(self, t: str) -> float:
        """The scale of an int8 output: 255 steps over the threshold for an offset tensor
        (an exact half with power-of-two scales)."""
        s = self.tensor_scale(t)
        if t in self.unsigned:
            return s * 0.5 if self.pow2 else s * QMAX / UMAX
        return s

    def as_int(self, t: str) -> str:
        if t in self.scales:
            return t
        if t not in self.qcache:
            q = f"{t}.q"
            s = self.tensor_scale(t)
            attrs: dict[str, Any] = {"scale": s}
            if t in self.unsigned:  # a float layer's output that only convs read
                s, off = self.asymmetric(t)
                attrs.update(scale=s, offset=off)
                self.offsets[q] = off
            self.nodes.append(Node("Quantize", f"{t}.quantize", [t], [q], attrs))
            self.scales[q] = s
            self.qcache[t] = q
        return self.qcache[t]

    def asymmetric(self, t: str) -> tuple[float, int]:
        """Scale and offset spreading a float tensor's range ``[min(low, 0), threshold]``
        over the 256 int8 values (offset :data:`OFFSET` for a non-negative tensor)."""
        lo = min(self.lows.get(t, 0.0), 0.0)
        hi = max(self.amax.get(t, 0.0), -lo)
        if self.pow2:  # only non-negative tensors have an offset (see offset_groups)
            return scale_for(hi, True) * 0.5, OFFSET
        if hi - lo <= 0:
            return 1.0, 0
        s = (hi - lo) / UMAX
        return s, int(round(lo / s)) - QMIN

    def as_float(self, t: str) -> str:
        if t not in self.scales:
            return t
        if t not in self.deq:
            f = f"{t}.f"
            attrs: dict[str, Any] = {"scale": self.scales[t]}
            if t in self.offsets:  # only when a conv reading it failed to quantize
                attrs["offset"] = self.offsets[t]
            self.nodes.append(Node("Dequantize", f"{t}.dequantize", [t], [f], attrs))
            self.deq[t] = f
        return self.deq[t]

    def bounds(self, n: Node, s: float, top: int = QMAX) -> tuple[int, int]:
        """int8 bounds of a fused activation (Relu, Clip) and of a QDQ range at scale ``s``
        (``top``: the largest value, :data:`UMAX` for an unsigned output before its offset)."""
        lo, hi = QMIN, top
        if n.attrs.get("activation"):
            if n.attrs["act_min"] is not None:
                lo = max(QMIN, min(top, int(np.rint(n.attrs["act_min"] / s))))
            if n.attrs["act_max"] is not None:
                hi = min(top, max(QMIN, int(np.rint(n.attrs["act_max"] / s))))
        if n.outputs[0] in self.ranges:
            rlo, rhi = self.ranges[n.outputs[0]]
            lo = max(lo, min(QMAX, int(np.rint(rlo / s))))
            hi = min(hi, max(QMIN, int(np.rint(rhi / s))))
        return lo, hi

    def conv(self, n: Node, info: QuantInfo) -> None:
        x = self.as_int(n.inputs[0])
        s_in = self.scales[x]
        w = self.params[n.inputs[1]]
        unsigned = n.outputs[0] in self.unsigned
        s_o = self.out_scale(n.outputs[0])
        wq, s_w, wsum, wabs = quantize_weights(w, self.per_channel, self.pow2)
        b = self.params[n.inputs[2]] if len(n.inputs) > 2 else np.zeros(w.shape[0])
        if n.inputs[0] in self.means:
            b = b + weight_error_mean(n, w, wq, s_w, *self.means[n.inputs[0]])
        bq = np.rint(b.astype(np.float64) / (s_in * s_w)).astype(np.int64)
        attrs = {k: v for k, v in n.attrs.items() if k not in ("act_min", "act_max")}
        if x in self.offsets:  # sum(w * (q + off)): the offset's part is a constant per channel
            bq += self.offsets[x] * wsum
            x = self.pad_offset(n, x, attrs)
        r = s_in * s_w / s_o
        bound = wabs * 128 + np.abs(bq) \
            + (np.ceil((OFFSET + 1) / r).astype(np.int64) if unsigned else 0)
        shift, mul, shift2 = requant_params(r, bound, self.pow2)
        bq += np.array([1 << (k - 1) if k > 0 else 0 for k in shift], np.int64)
        lo, hi = self.bounds(n, s_o, UMAX if unsigned else QMAX)
        if unsigned:  # subtract OFFSET from the output: OFFSET / r accumulator steps
            bq -= np.array([round(OFFSET * 2.0 ** (a + shift2) / m)
                            for a, m in zip(shift, mul)], np.int64)
            lo, hi = max(QMIN, lo - OFFSET), min(QMAX, hi - OFFSET)
            self.offsets[n.outputs[0]] = OFFSET
        wname, bname = f"{n.name}.wq", f"{n.name}.bq"
        self.params[wname] = wq
        self.params[bname] = np.clip(bq, -(1 << 31), (1 << 31) - 1).astype(np.int32)
        attrs.update(shift=shift[0] if len(set(shift)) == 1 else shift,
                     mul=mul[0] if len(set(mul)) == 1 else mul,
                     shift2=shift2, lo=lo, hi=hi, in_scale=s_in, out_scale=s_o,
                     w_scale=[float(v) for v in s_w] if self.per_channel else float(s_w[0]))
        self.nodes.append(Node("Q" + n.op, n.name, [x, wname, bname], list(n.outputs), attrs))
        self.scales[n.outputs[0]] = s_o
        info.in_scale, info.w_scale, info.out_scale = s_in, attrs["w_scale"], s_o
        info.shift, info.mul, info.shift2 = attrs["shift"], attrs["mul"], shift2

    def pad_offset(self, n: Node, x: str, attrs: dict[str, Any]) -> str:
        """A padded conv of an offset tensor: VTA pads with 0, which stands for ``OFFSET *
        scale`` there; an explicit ``QPad`` writes the value standing for 0 and the conv runs
        unpadded. Returns the conv's input."""
        t, left, b, r = attrs.get("pads", (0, 0, 0, 0))
        if not any((t, left, b, r)):
            return x
        out = f"{x}.pad{t}{left}{b}{r}"
        if out not in self.scales:
            self.nodes.append(Node("QPad", f"{out}.pad", [x], [out], {
                "pads": [0, 0, t, left, 0, 0, b, r], "mode": "constant", "value": 0.0,
                "qvalue": -self.offsets[x], "conversion": True}))
            self.scales[out], self.offsets[out] = self.scales[x], self.offsets[x]
        attrs["pads"] = [0, 0, 0, 0]
        return out

    def emit(self, op: str, n: Node, ins: list[str], attrs: dict[str, Any], s_out: float,
             info: QuantInfo) -> None:
        self.nodes.append(Node(op, n.name, ins, list(n.outputs), attrs))
        self.scales[n.outputs[0]] = s_out
        info.in_scale, info.out_scale = self.scales[ins[0]], s_out


def _q_add(q: _Quantizer, n: Node, ins: list[str], info: QuantInfo) -> None:
    sa, sb, so = q.scales[ins[0]], q.scales[ins[1]], q.tensor_scale(n.outputs[0])
    # one shared shift: the larger ratio gets the multiplier's full 15 bits
    _, k = fixed_point(max(sa, sb) / so)
    ma, mb = (int(round(s / so * 2.0 ** k)) for s in (sa, sb))
    lo, hi = q.bounds(n, so)
    q.emit("QAdd", n, ins, {"mul_a": ma, "mul_b": mb, "shift": k, "lo": lo, "hi": hi}, so, info)
    info.mul, info.shift = [ma, mb], k


def matmul_requant(r: float, k: int) -> tuple[int, int, int]:
    """``(shift, mul, shift2)`` applying the real factor ``r`` to the accumulator of an int8
    product over ``k`` terms (``|acc| <= 128 * 128 * k``) with no bias to round the first
    shift: no first shift and the most precise multiplier whose product stays within int32,
    else :func:`requant_params`' (its first shift then truncates)."""
    bound = 128 * 128 * k
    for s2 in range(30, -1, -1):
        m = int(round(r * 2.0 ** s2))
        if 0 < m < 1 << MUL_BITS and _fits(bound, 0, m, s2):
            return 0, m, s2
    s1, mul, s2 = requant_params(np.array([r]), np.array([bound]), False)
    return s1[0], mul[0], s2


def _q_matmul(q: _Quantizer, n: Node, ins: list[str], info: QuantInfo) -> None:
    """A product of two int8 activations (``QMatMul``): ``requant(a @ b)``, no bias."""
    sa, sb, so = q.scales[ins[0]], q.scales[ins[1]], q.tensor_scale(n.outputs[0])
    k = q.shapes()[n.inputs[0]][-1]
    shift, mul, shift2 = matmul_requant(sa * sb / so, k)
    lo, hi = q.bounds(n, so)
    q.emit("QMatMul", n, ins, {"shift": shift, "mul": mul, "shift2": shift2, "lo": lo,
                               "hi": hi}, so, info)
    info.shift, info.mul, info.shift2 = shift, mul, shift2


def _scalar_factor(q: _Quantizer, n: Node) -> float | None:
    """The factor of a Mul or Div of an int8 tensor by a positive scalar constant (attention's
    ``1/sqrt(d)``), else None: its output is the same int8 values at the scale times that
    factor. Not for an offset tensor, an offset group's member or a QDQ-fixed output."""
    if n.op not in ("Mul", "Div") or len(n.inputs) != 2 or n.outputs[0] in q.unsigned \
            or n.outputs[0] in q.ranges:
        return None
    k = 1 if n.inputs[1] in q.params else 0
    x, c = n.inputs[1 - k], q.params.get(n.inputs[k])
    if c is None or np.size(c) != 1 or (n.op == "Div" and k == 0) or x not in q.scales \
            or x in q.offsets:
        return None
    v = float(np.asarray(c).ravel()[0])
    if not (np.isfinite(v) and v > 0):
        return None
    return v if n.op == "Mul" else 1.0 / v


def _q_scale(q: _Quantizer, n: Node, x: str, info: QuantInfo) -> None:
    """A scalar factor (:func:`_scalar_factor`) folded into the scale: an ``Identity``."""
    q.emit("Identity", n, [x], {}, q.scales[x] * _scalar_factor(q, n), info)


def _bias_node(q: _Quantizer, op: str, name: str, ins: list[str], out: str) -> str:
    """A float node of a softmax's bias; computed now when its inputs are constants."""
    if all(i in q.params for i in ins):
        q.params[out] = ops.get(op).float_kernel(Node(op, name, ins, [out], {}),
                                                 [q.params[i] for i in ins])[0]
    else:
        q.nodes.append(Node(op, name, [q.as_float(i) for i in ins], [out], {}))
    return out


def _mask_bias(q: _Quantizer, p: Node, k: int) -> str:
    """The float bias that mask step ``p`` (scores at input ``k``) adds to the scores: the
    other operand of an Add; ``Where(cond, fill, 0)`` for a Where filling ``fill``."""
    if p.op == "Add":
        return q.as_float(p.inputs[1 - k])
    zero = f"{p.name}.zero"
    q.params[zero] = np.zeros((), np.float32)
    cond, fill = p.inputs[0], p.inputs[3 - k]
    ins = [cond, fill, zero] if k == 2 else [cond, zero, fill]
    return _bias_node(q, "Where", f"{p.name}.mask", ins, f"{p.outputs[0]}.bias")


def _q_softmax(q: _Quantizer, chain: Chain, info: QuantInfo) -> str | None:
    """An attention softmax chain (:mod:`.softmax_chains`) as one ``QSoftmax`` of its int8
    scores and the sum of its masks (a float bias), 7-bit output ``[0, 127]`` at the
    calibrated scale; or why it stays float."""
    x, n = chain.root, chain.softmax
    if x not in q.scales or x in q.offsets:
        return "its scores are not int8"
    table = exp_table(q.scales[x])
    if table is None:
        return (f"its scores' scale {q.scales[x]:.3g} needs an exp table over "
                f"{SOFTMAX_TABLE_MAX} entries")
    bias = None
    for p, k in reversed(chain.steps):
        b = _mask_bias(q, p, k)
        bias = b if bias is None else _bias_node(q, "Add", f"{p.name}.bias", [bias, b],
                                                 f"{p.outputs[0]}.bias_sum")
    so = q.tensor_scale(n.outputs[0])
    mul, shift = fixed_point(1.0 / so)
    q.emit("QSoftmax", n, [x] if bias is None else [x, bias],
           {"axis": -1, "scale": q.scales[x], "table": table, "mul": mul, "shift": shift},
           so, info)
    return None


def _int8_readers(g: Graph, t: str, readers: Mapping[str, list[Node]]) -> bool:
    """Whether every reader of ``t`` reads int8 (a VTA layer: Conv, Dense; a residual Add; an
    attention product, through shape ops and selections such as a class token's Gather)."""
    if t in g.outputs or not readers.get(t):
        return False
    return all(ops.has(r.op, "vta_layer") or r.op == "Add" or ops.has(r.op, "activation_product")
               or ((ops.has(r.op, "moves") or ops.has(r.op, "selecting"))
                   and _int8_readers(g, r.outputs[0], readers))
               for r in readers[t])


def _layernorm_int8(q: _Quantizer, n: Node, readers: Mapping[str, list[Node]]) -> bool:
    """Whether LayerNorm ``n`` runs as ``QLayerNorm``: its input is int8 (the calibration
    rule keeps a lossy residual stream float, see :func:`lossy_rows`), it normalises the last
    axis with constant gamma/beta, and int8 layers read its output."""
    if n.op != "LayerNormalization" or n.inputs[0] not in q.scales \
            or not all(i in q.params for i in n.inputs[1:] if i):
        return False
    rank = len(q.shapes()[n.inputs[0]])
    return list(n.attrs["axes"]) in ([-1], [rank - 1]) \
        and _int8_readers(q.g, n.outputs[0], readers)


def _q_layernorm(q: _Quantizer, n: Node, info: QuantInfo) -> None:
    """``QLayerNorm``: gamma and beta as int32 at the output's scale (and offset), see
    :func:`vta.compiler.ops.int8_kernels.qlayernorm`."""
    x, out = n.inputs[0], n.outputs[0]
    c = q.shapes()[x][-1]
    s_in = q.scales[x]
    s_out, off = q.asymmetric(out) if out in q.unsigned else (q.tensor_scale(out), 0)
    gamma = q.params[n.inputs[1]].astype(np.float64).reshape(-1)
    beta = q.params[n.inputs[2]].astype(np.float64).reshape(-1) \
        if len(n.inputs) > 2 and n.inputs[2] else np.zeros(c)
    gq = np.rint(np.broadcast_to(gamma, (c,)) / s_out * 2.0 ** (LN_SHIFT - LN_FRAC))
    bq = np.rint(np.broadcast_to(beta, (c,)) / s_out * 2.0 ** LN_SHIFT) \
        + (1 << (LN_SHIFT - 1)) - off * (1 << LN_SHIFT)
    lim = (1 << 31) - 1
    q.params[f"{n.name}.gq"] = np.clip(gq, -lim, lim).astype(np.int32)
    q.params[f"{n.name}.bq"] = np.clip(bq, -lim, lim).astype(np.int32)
    eps_c2 = float(n.attrs["epsilon"]) / (s_in * s_in) * c * c
    q.emit("QLayerNorm", n, [x, f"{n.name}.gq", f"{n.name}.bq"],
           {"axis": -1, "eps_c2": eps_c2}, s_out, info)
    if out in q.unsigned:  # an offset group's source (its offset may round to 0)
        q.offsets[out] = off


def _q_same(op: str):  # noqa: ANN202
    def conv(q: _Quantizer, n: Node, ins: list[str], info: QuantInfo) -> None:
        s = q.scales[ins[0]]
        attrs = dict(n.attrs)
        if op == "QClip":
            lo = QMIN if n.attrs["min"] is None else int(np.rint(n.attrs["min"] / s))
            hi = QMAX if n.attrs["max"] is None else int(np.rint(n.attrs["max"] / s))
            attrs = {"lo": max(QMIN, min(QMAX, lo)), "hi": min(QMAX, max(QMIN, hi))}
        elif op == "QPad":
            attrs["qvalue"] = int(np.clip(np.rint(n.attrs["value"] / s), QMIN, QMAX))
        elif op == "QLeakyRelu":
            m, k = fixed_point(float(n.attrs["alpha"]))
            attrs = {"alpha": n.attrs["alpha"], "mul": m, "shift": k}
        q.emit(op, n, ins, attrs, s, info)
    return conv


def _q_hard(q: _Quantizer, n: Node, ins: list[str], info: QuantInfo) -> None:
    """HardSigmoid (``clip(alpha x + beta, 0, 1)``) and HardSwish (``x * hardsigmoid(x)`` with
    alpha 1/6, beta 1/2). The sigmoid part is computed at scale 1/``one``; its bias must fit
    the ALU's 16-bit ADD immediate, which bounds the shift."""
    s = q.scales[ins[0]]
    alpha, beta = (n.attrs.get("alpha", 0.2), n.attrs.get("beta", 0.5)) \
        if n.op == "HardSigmoid" else (1 / 6, 0.5)
    one = QMAX
    k = 0
    for kk in range(24, -1, -1):  # the largest shift whose multiplier and bias fit 16 bits
        m = int(round(alpha * s * one * 2.0 ** kk))
        bias = int(round(beta * one * 2.0 ** kk)) + (1 << kk >> 1)
        if m < 1 << MUL_BITS and abs(bias) < 1 << MUL_BITS:
            k = kk
            break
    m = int(round(alpha * s * one * 2.0 ** k))
    attrs = {"mul": m, "bias": int(round(beta * one * 2.0 ** k)), "shift": k, "one": one}
    if n.op == "HardSigmoid":
        q.emit("QHardSigmoid", n, ins, attrs, 1.0 / one, info)
        return
    so = q.tensor_scale(n.outputs[0])
    m2, k2 = fixed_point(s / (one * so))
    attrs.update(mul2=m2, shift2=k2)
    q.emit("QHardSwish", n, ins, attrs, so, info)


def _q_avg(q: _Quantizer, n: Node, ins: list[str], info: QuantInfo) -> None:
    so = q.tensor_scale(n.outputs[0])
    m, k = fixed_point(q.scales[ins[0]] / so)
    q.emit("Q" + n.op, n, ins, dict(n.attrs, mul=m, shift=k), so, info)


def _q_concat(q: _Quantizer, n: Node, ins: list[str], info: QuantInfo) -> None:
    so = q.out_scale(n.outputs[0])
    if n.outputs[0] in q.unsigned and len({(q.scales[i], q.offsets.get(i)) for i in ins}) == 1:
        so = q.scales[ins[0]]  # a carrier of an offset group: its source's scale
    resc = [[1, 0] if q.scales[i] == so else list(fixed_point(q.scales[i] / so)) for i in ins]
    q.emit("QConcat", n, ins, {"axis": n.attrs["axis"], "rescale": resc}, so, info)


def _q_fakequant(q: _Quantizer, n: Node, ins: list[str], info: QuantInfo) -> None:
    """A QDQ pair on an int8 tensor: a rescale when its producer kept another scale (shape
    ops, max pooling), then the clip to the QDQ's integer range."""
    so = q.tensor_scale(n.outputs[0])
    si = q.scales[ins[0]]
    resc = [1, 0] if si == so else list(fixed_point(si / so))
    lo, hi = q.bounds(n, so)
    q.emit("QFakeQuant", n, ins, {"rescale": resc, "lo": lo, "hi": hi}, so, info)


def _q_relu(q: _Quantizer, n: Node, ins: list[str], info: QuantInfo) -> None:
    _q_same("QClip")(q, Node("Clip", n.name, n.inputs, n.outputs, {"min": 0.0, "max": None}),
                     ins, info)


ops.attach("FakeQuant", quantize=_q_fakequant)
ops.attach("Add", quantize=_q_add)
ops.attach("MatMul", quantize=_q_matmul)
ops.attach("Relu", quantize=_q_relu)
ops.attach("Clip", quantize=_q_same("QClip"))
ops.attach("MaxPool", quantize=_q_same("QMaxPool"))
ops.attach("LeakyRelu", quantize=_q_same("QLeakyRelu"))
ops.attach("HardSigmoid", quantize=_q_hard)
ops.attach("HardSwish", quantize=_q_hard)
ops.attach("AveragePool", quantize=_q_avg)
ops.attach("GlobalAveragePool", quantize=_q_avg)
ops.attach("Concat", quantize=_q_concat)
ops.attach("Pad", quantize=_q_same("QPad"))


def _q_table(q: _Quantizer, n: Node, ins: list[str], info: QuantInfo) -> None:
    """``QLut``: the float op of each of the 256 int8 input values, quantized at the output's
    scale (an offset tensor's asymmetric scale and offset, see :func:`offset_groups`)."""
    s_in, off_in = q.scales[ins[0]], q.offsets.get(ins[0], 0)
    out = n.outputs[0]
    if out in q.unsigned:
        s_out, off = q.asymmetric(out)
    else:
        s_out, off = q.tensor_scale(out), 0
    x = ((np.arange(QMIN, QMAX + 1) + off_in) * s_in).astype(np.float32)
    y = ops.get(n.op).float_kernel(n, [x])[0]
    table = quantize_array(y, s_out, off)
    q.emit("QLut", n, ins, {"op": n.op, "table": [int(v) for v in table]}, s_out, info)
    if off:
        q.offsets[out] = off


for _op in TABLE_OPS:
    ops.attach(_op, quantize=_q_table)


def _read_as_int8(g: Graph, t: str, readers: Mapping[str, list[Node]]) -> bool:
    """Whether tensor ``t`` would be quantized anyway: read only by Conv/Dense layers, through
    shape ops (a table op's output that a float op or the graph's output reads stays float:
    its table would round it once more)."""
    if t in g.outputs or not readers.get(t):
        return False
    return all(r.op in ("Conv", "Dense") or (ops.has(r.op, "moves") and r.op != "Concat"
                                             and _read_as_int8(g, r.outputs[0], readers))
               for r in readers[t])


def _int_rule(op: str):  # noqa: ANN202 - a quantizer rule or None
    """The quantizer's rewrite of ``op`` into int8 ops: its own, or for an op that runs on
    int8 tensors at its input's scale (``int8_passthrough``), the same op on int8."""
    o = ops.get(op)
    if o is None or not o.int8_capable:
        return None
    return o.quantize or _q_same(op)


def quantize_graph(g: Graph, samples: Sequence[Mapping[str, np.ndarray]], *,
                   float_layers: Iterable[str] = (), keep_first_float: bool = True,
                   calibration: str = CALIBRATIONS[0], per_channel: bool = False,
                   pow2: bool = False, bias_correction: bool = False) -> QuantResult:
    """Turn an optimized float graph into a mixed int8/float graph (see the module doc).
    Conv/Dense layers become int8 except those named in ``float_layers`` and, with
    ``keep_first_float``, the first convolution while it is light (:func:`float_first_conv`;
    ``False`` quantizes it whatever its share)."""
    float_layers = set(float_layers)
    names = {n.name for n in g.nodes}
    unknown = float_layers - names
    if unknown:
        raise InputError(f"--float-layer {', '.join(sorted(unknown))}: no such layer; layers "
                         f"are named like {', '.join(list(names)[:4])}, ...")
    first = float_first_conv(g) if keep_first_float else None
    ranges = qdq_ranges(g)
    groups = offset_groups(g, float_layers | {first}, set(ranges), not pow2)
    unsigned = set().union(*groups)
    lows: dict[str, float] = {}
    fenv: dict[str, np.ndarray] = {}
    means: dict[str, tuple[np.ndarray, tuple[int, ...]]] = {}
    rows: dict[str, float] = {}
    th = calibrate(g, samples, calibration, unsigned, lows, fenv,
                   means if bias_correction else None, rows)
    for grp in groups:  # one scale per group: the largest threshold
        top = max(th.get(t, 0.0) for t in grp)
        th.update((t, top) for t in grp)
    lossy = lossy_rows(th, rows)
    readers = g.consumers()
    q = _Quantizer(g, th, pow2, per_channel, ranges)
    q.unsigned, q.lows, q.means = unsigned, lows, means
    layers: list[QuantInfo] = []
    chains = softmax_chains(g, q.shapes())
    masks = {p.name for c in chains.values() for p, _ in c.steps}
    for n in g.nodes:
        if n.name in masks:
            continue  # emitted with its softmax (below)
        acts = [i for i in n.inputs if i and i not in q.params]
        info = QuantInfo(n.name, n.op)
        reason = None
        if n.name in chains:
            reason = _q_softmax(q, chains[n.name], info)
            if reason is None:
                layers.append(info)
                continue
            for p, _ in reversed(chains[n.name].steps):  # the masks in float after all
                layers.append(_emit_float(q, p, fenv, reason))
        if n.name in float_layers:
            reason = "named by --float-layer"
        elif any(th.get(t) == np.inf for t in [*acts, *n.outputs]):
            reason = "infinite values (an attention mask of -inf)"
        elif n.name == first:
            reason = f"first convolution, under {FIRST_CONV_FLOAT_SHARE:.0%} of the MACs"
        elif n.op not in ("Conv", "Dense") and n.outputs[0] in lossy:
            reason = (f"a LayerNorm reads it and one int8 scale would leave "
                      f"{lossy[n.outputs[0]]:.0%} error on its smallest token")
        elif n.op in TABLE_OPS and not _read_as_int8(g, n.outputs[0], readers):
            reason = "read in float (an int8 table would round its output once more)"
        if n.op in ("Conv", "Dense") and reason is None and len(acts) == 1:
            try:
                q.conv(n, info)
            except QuantizationError as e:
                reason = str(e)
        if info.in_scale is not None:
            pass  # quantized above
        elif reason is None and len(acts) == 1 and _scalar_factor(q, n) is not None:
            _q_scale(q, n, acts[0], info)
        elif reason is None and _layernorm_int8(q, n, readers):
            _q_layernorm(q, n, info)
        elif reason is None and acts and len(acts) == len(n.inputs) and _int_rule(n.op) and \
                (any(a in q.scales or a in q.qcache for a in acts)
                 or ops.has(n.op, "activation_product")):
            ins = [q.as_int(a) for a in acts]
            _int_rule(n.op)(q, n, ins, info)
            if n.outputs[0] in unsigned and n.op not in TABLE_OPS:  # a carrier
                carry_offset(q, n, ins)
        else:
            info = _emit_float(q, n, fenv, reason)
        layers.append(info)
    nodes, layers = _drop_identity_requants(q, layers, set(g.outputs))
    scales = q.scales
    for o in g.outputs:
        if o not in scales:
            continue
        # the int8 tensor gets a distinct name; the graph output stays float under its name
        inner = f"{o}.int8"
        for m in nodes:
            m.inputs = [inner if i == o else i for i in m.inputs]
            m.outputs = [inner if t == o else t for t in m.outputs]
        scales[inner] = scales.pop(o)
        nodes.append(Node("Dequantize", f"{o}.dequantize", [inner], [o],
                          {"scale": scales[inner]}))
    qg = Graph(nodes, dict(g.inputs), list(g.outputs), q.params, g.name)
    qg.verify()
    qg.remove_unused()
    return QuantResult(qg, scales, layers, dict(q.offsets), fenv or None)


def _emit_float(q: _Quantizer, n: Node, fenv: Mapping[str, Any], reason: str | None
                ) -> QuantInfo:
    """Node ``n`` as it is, on float inputs (a ``Dequantize`` of an int8 one), and why."""
    q.nodes.append(Node(n.op, n.name, [q.as_float(i) if i else i for i in n.inputs],
                        list(n.outputs), dict(n.attrs)))
    out = fenv.get(n.outputs[0])
    if reason is None and isinstance(out, np.ndarray) and out.dtype.kind in "biu":
        reason = "integer or boolean values (ids, masks)"
    info = QuantInfo(n.name, n.op)
    info.float_reason = reason or ("no int8 kernel" if _int_rule(n.op) is None
                                   and n.op not in ("Conv", "Dense") else "float input")
    return info


def _drop_identity_requants(q: _Quantizer, layers: list[QuantInfo],
                            outputs: set[str]) -> tuple[list[Node], list[QuantInfo]]:
    """Drop the ``QFakeQuant`` nodes that change nothing: a QDQ pair on a tensor its producer
    already wrote at the QDQ's scale (rescale 1) and inside the QDQ's integer range (the
    tensor's range: its producer's clip, through ops that select values). A pre-quantized
    model has one on nearly every tensor; kept, each would be a CPU layer between two VTA
    layers. Readers read the producer's tensor instead. Returns the nodes and the layers left."""
    span: dict[str, tuple[int, int]] = {}  # int8 tensor -> the range its values lie in
    alias: dict[str, str] = {}
    nodes, dropped = [], set()
    for n in q.nodes:
        n.inputs = [alias.get(i, i) for i in n.inputs]
        x = n.inputs[0] if n.inputs else ""
        out = n.outputs[0]
        if n.op == "QFakeQuant" and n.attrs["rescale"] == [1, 0] and out not in outputs \
                and x not in q.offsets and x in span \
                and n.attrs["lo"] <= span[x][0] and span[x][1] <= n.attrs["hi"]:
            alias[out] = x
            dropped.add(n.name)
            del q.scales[out]
            continue
        if ops.has(n.op, "clipped"):  # its output lies in its lo/hi
            span[out] = (n.attrs["lo"], n.attrs["hi"])
        elif ops.has(n.op, "selecting") and x in span:  # some of its input's values
            span[out] = span[x]
        nodes.append(n)
    return nodes, [info for info in layers if info.node not in dropped]

