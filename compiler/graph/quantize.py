"""int8 quantization with calibrated scales, and the int8 reference (the bit-exact spec).

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
- ``Quantize``: ``clip(rint(x / scale) - offset, -128, 127)``; ``Dequantize``: ``(q + offset)
  * scale`` (``offset`` 0 unless given).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import ops
from .errors import InputError, ModelError, QuantizationError
from .ir import Graph, Node
from .reference import FLOAT_KERNELS, infer_shapes, run_float

QMIN, QMAX = -128, 127
#: A tensor that is never negative (a conv's Relu/Clip output) and that only convs read is
#: stored as ``q - OFFSET`` with ``q`` in ``[0, UMAX]``: twice the steps of a signed scale.
OFFSET, UMAX = 128, 255
#: The first convolution stays float on the CPU while it holds less than this share of the
#: network's MACs (:func:`float_first_conv`); a heavier one (ShuffleNet v2's 7x7 stem: 24%) is
#: quantized and runs on VTA. Its input, an image of 3 channels, pads to a whole channel block
#: on VTA (16 on the default config): there the light first convs of ResNet, MobileNet, VGG...
#: would run at 7-16% of the GEMM peak (ResNet-18's: 6.5% of the MACs, +35% VTA cycles by
#: vta.sim.perf at 224x224) and lose some accuracy (an int8 input). ``vta compile
#: --quantize-first`` quantizes it always; ``--float-layer NAME`` keeps any layer float.
FIRST_CONV_FLOAT_SHARE = 0.15

#: Calibration methods of :func:`calibrate` (``vta compile --calibration``); the first is the
#: default.
CALIBRATIONS = ("mse", "max", "percentile")
PERCENTILE = 99.99
#: Bits of a fixed-point multiplier: the ALU's MUL immediate is 16-bit signed.
MUL_BITS = 15
#: Bits of a conv/dense requantization multiplier (see :func:`requant_params`).
REQUANT_BITS = 11
_BINS = 2048
_SUBSAMPLE = 1 << 18
#: Margin on the calibrated range of the graph's outputs (see :func:`calibrate`).
OUTPUT_HEADROOM = 1.25
#: Fewest values per sample for which percentile/mse calibration clips (see :func:`calibrate`).
_HIST_MIN = 4096

#: Ops that run on int8 tensors when their input is quantized (scale unchanged).
_PASSTHROUGH = {"Flatten", "Reshape", "Identity", "Resize", "Pad", "Transpose",
                "Slice", "Gather", "GlobalMaxPool"}


def exponent_for(max_abs: float, bits: int = 8) -> int:
    """The largest ``e`` with ``max_abs * 2**e <= 2**(bits-1) - 1`` (0 for an all-zero tensor)."""
    if not np.isfinite(max_abs) or max_abs <= 0:
        return 0
    return int(math.floor(math.log2(((1 << (bits - 1)) - 1) / max_abs)))


def scale_for(max_abs: float, pow2: bool = False) -> float:
    """The scale mapping ``[-max_abs, max_abs]`` onto int8 (a power of two with ``pow2``)."""
    if pow2:
        return 2.0 ** -exponent_for(max_abs)
    if not np.isfinite(max_abs) or max_abs <= 0:
        return 1.0
    return float(max_abs) / QMAX


def quantize_array(x: np.ndarray, scale: float | np.ndarray, offset: int = 0) -> np.ndarray:
    """``clip(rint(x / scale) - offset)`` to int8 (see :data:`OFFSET`)."""
    q = np.rint(x.astype(np.float64) / scale)
    return np.clip(q - offset if offset else q, QMIN, QMAX).astype(np.int8)


def dequantize_array(q: np.ndarray, scale: float, offset: int = 0) -> np.ndarray:
    return ((q.astype(np.float64) + offset) * scale).astype(np.float32)


def wrap_int32(v: np.ndarray) -> np.ndarray:
    """``v`` wrapped to int32 (two's complement, as int64): numpy's int64 -> int32 cast keeps
    the low 32 bits (``((v + 2**31) mod 2**32) - 2**31`` without an integer division)."""
    a = np.asarray(v)
    return (a if a.dtype == np.int64 else a.astype(np.int64)).astype(np.int32).astype(np.int64)


def shr(v: np.ndarray, k: int | np.ndarray) -> np.ndarray:
    """The ALU's SHR on int32: arithmetic right shift, a negative amount shifts left (wraps)."""
    k = np.asarray(k, np.int64)
    if k.ndim == 0:  # one amount: one shift
        return wrap_int32(v >> min(int(k), 31) if k >= 0 else v << min(-int(k), 32))
    return wrap_int32(np.where(k >= 0, v >> np.clip(k, 0, 31), v << np.clip(-k, 0, 32)))


def rescale(v: np.ndarray, m: int, k: int) -> np.ndarray:
    """``(v * m + 2**(k-1)) >> k`` in int64 (the callers keep it within int32)."""
    v = np.asarray(v).astype(np.int64) * int(m)
    return (v + (1 << (k - 1))) >> k if k > 0 else v


def fixed_point(r: float, bits: int = MUL_BITS, kmax: int = 30) -> tuple[int, int]:
    """``(m, k)`` with ``m * 2**-k ~= r``, ``0 < m < 2**bits`` and ``0 <= k <= kmax``."""
    if r <= 0:
        return 0, 0
    k = max(0, min(kmax, bits - 1 - math.floor(math.log2(r))))
    m = int(round(r * 2.0 ** k))
    while m >= 1 << bits and k > 0:
        k -= 1
        m = int(round(r * 2.0 ** k))
    return m, k


def requantize(acc: np.ndarray, shift: int | list[int], lo: int, hi: int, mul: int | list[int]
               = 1, shift2: int = 0) -> np.ndarray:
    """The VTA epilogue after the bias: SHR ``shift`` (one amount or one per output channel,
    axis 1), then (when ``mul`` is not 1) MUL ``mul``, ADD ``2**(shift2-1)``, SHR ``shift2``;
    then MAX ``lo``, MIN ``hi``. Every step wraps to int32."""
    acc = wrap_int32(acc)
    shape = (1, -1) + (1,) * (acc.ndim - 2)
    sh = np.asarray(shift, np.int64)
    acc = shr(acc, sh.reshape(shape) if sh.ndim else sh)
    m = np.asarray(mul, np.int64)
    if m.ndim or int(m) != 1:
        acc = wrap_int32(acc * (m.reshape(shape) if m.ndim else m))
        if shift2 > 0:
            acc = shr(wrap_int32(acc + (1 << (shift2 - 1))), shift2)
    return np.clip(acc, lo, hi).astype(np.int8)


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


# ------------------------------------------------------------------ int kernels
def _qconv(n: Node, a: list[Any]) -> list[np.ndarray]:
    acc = ops.conv2d(a[0], a[1], None, strides=n.attrs["strides"], pads=n.attrs["pads"],
                     dilations=n.attrs["dilations"], group=n.attrs["group"],
                     input_strides=n.attrs.get("input_strides"))
    acc = acc + a[2].astype(np.int64)[None, :, None, None]
    return [_requant(n, acc)]


def _requant(n: Node, acc: np.ndarray) -> np.ndarray:
    return requantize(acc, n.attrs["shift"], n.attrs["lo"], n.attrs["hi"],
                      n.attrs.get("mul", 1), n.attrs.get("shift2", 0))


def _qdense(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [_requant(n, ops.int8_matmul(a[0], a[1]) + a[2].astype(np.int64))]


def _qmatmul(n: Node, a: list[Any]) -> list[np.ndarray]:
    # int8 products summed in float64 are exact (|sum| < 2**53), and BLAS is fast
    acc = np.matmul(a[0].astype(np.float64), a[1].astype(np.float64)).astype(np.int64)
    return [_requant(n, acc)]


def _qadd(n: Node, a: list[Any]) -> list[np.ndarray]:
    s = a[0].astype(np.int64) * n.attrs["mul_a"] + a[1].astype(np.int64) * n.attrs["mul_b"]
    return [np.clip(rescale(s, 1, n.attrs["shift"]), n.attrs["lo"], n.attrs["hi"])
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
    num = s * n.attrs["mul"]
    den = cnt * (1 << n.attrs["shift"])
    return [np.clip((2 * num + den) // (2 * den), QMIN, QMAX).astype(np.int8)]


def _qconcat(n: Node, a: list[Any]) -> list[np.ndarray]:
    parts = [np.clip(rescale(x, m, k), QMIN, QMAX) for x, (m, k) in zip(a, n.attrs["rescale"])]
    return [np.concatenate(parts, axis=n.attrs["axis"]).astype(np.int8)]


def _qpad(n: Node, a: list[Any]) -> list[np.ndarray]:
    pads = n.attrs["pads"]
    r = a[0].ndim
    width = [(pads[i], pads[i + r]) for i in range(r)]
    if n.attrs["mode"] == "constant":
        return [np.pad(a[0], width, constant_values=n.attrs["qvalue"])]
    return [np.pad(a[0], width, mode=n.attrs["mode"])]


def _qleaky(n: Node, a: list[Any]) -> list[np.ndarray]:
    x = a[0].astype(np.int64)
    neg = rescale(np.minimum(x, 0), n.attrs["mul"], n.attrs["shift"])
    return [np.clip(np.maximum(x, 0) + neg, QMIN, QMAX).astype(np.int8)]


def _hsig_int(n: Node, x: np.ndarray) -> np.ndarray:
    v = x.astype(np.int64) * n.attrs["mul"] + n.attrs["bias"]
    return np.clip(rescale(v, 1, n.attrs["shift"]), 0, n.attrs["one"])


def _qhardswish(n: Node, a: list[Any]) -> list[np.ndarray]:
    h = _hsig_int(n, a[0])
    y = rescale(a[0].astype(np.int64) * h, n.attrs["mul2"], n.attrs["shift2"])
    return [np.clip(y, QMIN, QMAX).astype(np.int8)]


INT_KERNELS = {
    "QConv": _qconv,
    "QDense": _qdense,
    "QMatMul": _qmatmul,
    "QAdd": _qadd,
    "QAveragePool": _qavg,
    "QGlobalAveragePool": _qavg,
    "QMaxPool": lambda n, a: [ops.max_pool(a[0], n.attrs["kernel_shape"], n.attrs["strides"],
                                           n.attrs["pads"])],
    "QClip": lambda n, a: [np.clip(a[0], n.attrs["lo"], n.attrs["hi"]).astype(np.int8)],
    "QConcat": _qconcat,
    "QPad": _qpad,
    "QLeakyRelu": _qleaky,
    "QHardSigmoid": lambda n, a: [_hsig_int(n, a[0]).astype(np.int8)],
    "QHardSwish": _qhardswish,
    "QFakeQuant": lambda n, a: [np.clip(rescale(a[0], *n.attrs["rescale"]), n.attrs["lo"],
                                        n.attrs["hi"]).astype(np.int8)],
    "Quantize": lambda n, a: [quantize_array(a[0], n.attrs["scale"], n.attrs.get("offset", 0))],
    "Dequantize": lambda n, a: [dequantize_array(a[0], n.attrs["scale"],
                                                 n.attrs.get("offset", 0))],
}


def kernel_for(op: str):  # noqa: ANN201 - a Kernel
    return INT_KERNELS.get(op) or FLOAT_KERNELS[op]


# ---------------------------------------------------------------- calibration
@dataclass
class QuantInfo:
    """Per-layer quantization record (manifest and report)."""

    node: str
    op: str
    in_scale: float | None = None
    w_scale: float | list[float] | None = None
    out_scale: float | None = None
    shift: int | list[int] | None = None
    mul: int | list[int] | None = None
    shift2: int | None = None
    rel_error: float | None = None
    float_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class QuantResult:
    graph: Graph
    scales: dict[str, float]
    layers: list[QuantInfo] = field(default_factory=list)
    #: int8 tensors stored with an offset (``x = scale * (q + offset)``)
    offsets: dict[str, int] = field(default_factory=dict)
    #: every tensor of the float graph's run on the first calibration sample (calibration
    #: ran it; :func:`layer_errors` compares with it)
    float_env: dict[str, np.ndarray] | None = None


def _float_tensors(g: Graph, env: Mapping[str, Any]) -> Iterable[tuple[str, np.ndarray]]:
    for k, v in env.items():
        if k not in g.params and isinstance(v, np.ndarray) and v.dtype.kind == "f":
            yield k, v


#: Ops that only move values (shape ops and concatenation; ONNX's Squeeze/Unsqueeze import as
#: Reshape).
_MOVES = frozenset({"Reshape", "Flatten", "Transpose", "Identity", "Concat"})
#: Ops that pass values on without changing their order: moved, or mapped by an increasing
#: function (Sigmoid, Tanh; Softmax along its axis).
ORDER_KEEPING = _MOVES | {"Sigmoid", "Tanh", "Softmax", "LogSoftmax"}


def output_sources(g: Graph) -> set[str]:
    """The graph's outputs and every tensor whose values reach one only through
    :data:`ORDER_KEEPING` ops: where the largest values decide the result (top-1, the best
    box), so calibration must not clip them."""
    made = {t: n for n in g.nodes for t in n.outputs}
    found: set[str] = set()
    todo = list(g.outputs)
    while todo:
        t = todo.pop()
        if t in found:
            continue
        found.add(t)
        n = made.get(t)
        if n is not None and n.op in ORDER_KEEPING:
            todo.extend(i for i in n.inputs if i and i not in g.params)
    return found


def calibrate(g: Graph, samples: Sequence[Mapping[str, np.ndarray]], method: str = "mse",
              unsigned: Iterable[str] = (), lows: dict[str, float] | None = None,
              first: dict[str, np.ndarray] | None = None,
              means: dict[str, tuple[np.ndarray, tuple[int, ...]]] | None = None
              ) -> dict[str, float]:
    """The clipping threshold of every float tensor over the calibration samples.

    ``max``: the largest |value|; ``percentile``: the 99.99th percentile of |value|; ``mse``:
    the threshold whose int8 quantization (rounding and clipping) has the least mean squared
    error. The last two use a 2048-bin histogram of |value| over an even subsample of at most
    :data:`_SUBSAMPLE` values per tensor and sample (one float run per sample).

    Two kinds of tensor keep ``max`` whatever the method: the graph's outputs and the tensors
    whose values reach one only through order-keeping ops (:func:`output_sources`: a
    detector's head before its Reshape/Transpose/Sigmoid, logits before a Softmax), since
    clipping the largest values ties them and loses the top-1; and tensors of fewer than
    :data:`_HIST_MIN` values per sample (a pooled vector, a squeeze-excitation gate: too few
    values for a histogram, and each one scales a whole channel downstream). An output's range
    gets :data:`OUTPUT_HEADROOM` on top: its largest values are the ones that matter, and an
    input beyond the calibration samples would saturate them. A tensor holding an infinite
    (or NaN) value in any sample (an attention mask of ``-inf``) gets ``inf``: it has no int8
    range, and the layers that read or write it stay float. ``unsigned``: tensors stored with
    :data:`UMAX` steps (see :func:`offset_groups`), whose mse threshold weighs the finer
    rounding; ``lows`` (when given) receives the smallest value of each of them; ``first``
    (when given) every tensor of the first sample's float run; ``means`` (when given) the mean
    over the samples of each channel of every Conv/Dense node's activation input, with the
    input's shape (see :func:`weight_error_mean`)."""
    if method not in CALIBRATIONS:
        raise InputError(f"calibration method {method!r} is unknown; choose one of "
                         f"{', '.join(CALIBRATIONS)}")
    amax: dict[str, float] = {}
    kept: dict[str, list[np.ndarray]] = {}
    outputs = output_sources(g)
    producers = g.producers()
    readers = {n.inputs[0]: n.op for n in g.nodes if n.op in ("Conv", "Dense")} \
        if means is not None else {}
    for j, feeds in enumerate(samples):
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            env = run_float(g, feeds, keep=True)
        if j == 0 and first is not None:
            first.update(env)
        for k, op in readers.items():
            v = env[k]
            axes = tuple(a for a in range(v.ndim) if a != (1 if op == "Conv" else v.ndim - 1))
            m = v.mean(axis=axes, dtype=np.float64) / len(samples)
            means[k] = (means[k][0] + m if k in means else m, tuple(v.shape))
        for k, v in _float_tensors(g, env):
            if amax.get(k) == np.inf or (v.size and not np.isfinite(v.max() - v.min())):
                if _made_non_finite(producers.get(k), env, g.params):
                    raise ModelError(f"tensor {k!r} holds NaN or infinite values in the float "
                                     f"run of calibration input {j + 1} (float32 overflows); "
                                     "the int8 path cannot represent them: check the model's "
                                     "weights")
                amax[k] = np.inf  # -inf of an attention mask: no int8 range (stays float)
                kept.pop(k, None)
                continue
            lo = float(v.min()) if v.size else 0.0
            # max |v| without a copy of |v|: the histogram takes |v| of the subsample alone
            peak = max(float(v.max()), -lo) if v.size else 0.0
            amax[k] = max(amax.get(k, 0.0), peak)
            if lows is not None and k in unsigned and v.size:
                lows[k] = min(lows.get(k, 0.0), lo)
            if method != "max" and v.size >= _HIST_MIN and k not in outputs:
                kept.setdefault(k, []).append(np.abs(v.ravel()[::max(1, v.size // _SUBSAMPLE)]))
    out = dict(amax)
    for k in outputs:
        if k in out:
            out[k] *= OUTPUT_HEADROOM
    for k, parts in kept.items():
        if amax[k] > 0:
            h, _ = np.histogram(np.concatenate(parts), bins=_BINS, range=(0.0, amax[k]))
            out[k] = _percentile(h, amax[k]) if method == "percentile" else \
                _mse(h, amax[k], UMAX if k in unsigned else QMAX)
    return out


def _percentile(h: np.ndarray, top: float) -> float:
    c = np.cumsum(h)
    i = int(np.searchsorted(c, c[-1] * PERCENTILE / 100.0))
    return top * min(i + 1, len(h)) / len(h)


def _mse(h: np.ndarray, top: float, steps: int = QMAX) -> float:
    """The threshold with the least expected squared error among 128 candidates from 1/128 of
    ``top`` to ``top``: values beyond it are clipped (error: the distance, bin centres stand
    for their values); values within it are rounded (error: step**2 / 12)."""
    n = len(h)
    centres = (np.arange(n) + 0.5) * (top / n)
    cands = np.unique(np.geomspace(16, n, 128).astype(np.int64)) * (top / n)
    step = cands / steps
    clip = np.maximum(centres[None, :] - cands[:, None], 0.0)
    # values within a candidate: the (integer) count of the bins whose centre is at most it,
    # a prefix of the sorted centres
    within = np.concatenate([[0], np.cumsum(h)])[np.searchsorted(centres, cands, "right")]
    err = (clip ** 2 * h[None, :]).sum(axis=1) + within * step ** 2 / 12
    return float(cands[int(np.argmin(err))])


def synthetic_samples(g: Graph, count: int = 4, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Inputs when no data is given: standard-normal floats (what the zoo's image inputs
    expect); integer inputs that index a table (token, position, token-type ids) uniform
    below its size (:func:`index_bounds`); other integer and boolean inputs (attention masks)
    0/1, each row a run of ones then padding zeros (at least one 1)."""
    rng = np.random.default_rng(seed)
    bounds = index_bounds(g)
    return [{k: _synthetic(rng, v.shape, v.dtype, bounds.get(k)) for k, v in g.inputs.items()}
            for _ in range(count)]


def _synthetic(rng: np.random.Generator, shape: tuple[int, ...], dtype: str,
               bound: int | None) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if bound is not None:
        return rng.integers(0, bound, shape).astype(dtype)
    if not shape:
        return np.ones((), dtype)
    keep = rng.integers(1, shape[-1] + 1, (*shape[:-1], 1))  # ones, then padding
    return (np.arange(shape[-1]) < keep).astype(dtype)


#: Ops whose output values are their (first) input's values: an input reaching a table's
#: indices through them indexes it too.
_INDEX_MOVES = frozenset({"Reshape", "Flatten", "Transpose", "Identity", "Cast", "Slice",
                          "Expand", "Concat", "Gather"})


def index_bounds(g: Graph) -> dict[str, int]:
    """Integer graph inputs that index a table (a ``Take``'s indices, directly or through
    :data:`_INDEX_MOVES`) -> the smallest size of the axes they index (the vocabulary)."""
    reach = {k: {k} for k, v in g.inputs.items() if np.dtype(v.dtype).kind in "iu"}
    out: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] | None = None
    for n in g.nodes:
        srcs = set().union(*(reach.get(i, set()) for i in n.inputs[:1]))
        if n.op in _INDEX_MOVES and srcs:
            reach[n.outputs[0]] = srcs
        if n.op == "Take" and n.inputs[1] in reach:
            if shapes is None:
                shapes = infer_shapes(g)
            size = shapes[n.inputs[0]][n.attrs["axis"]]
            for k in reach[n.inputs[1]]:
                out[k] = min(out.get(k, size), size)
    return out


def _made_non_finite(node: Node | None, env: Mapping[str, Any],
                     params: Mapping[str, np.ndarray]) -> bool:
    """Whether ``node`` made a NaN or an infinity of finite inputs (float32 overflowed): a
    non-finite value that comes from one in an input (the ``-inf`` of an attention mask) is
    carried, not made."""
    if node is None:
        return False
    for i in node.inputs:
        x = env.get(i, params.get(i)) if i else None
        if isinstance(x, np.ndarray) and x.dtype.kind == "f" and not np.isfinite(x).all():
            return False
    return True


def load_samples(g: Graph, paths: Iterable[str]) -> list[dict[str, np.ndarray]]:
    """Calibration inputs from .npy files (a model of one input) or .npz files (an array per
    input name): each array of its input's shape (one sample) or a stack of them ``[K,
    *shape]`` (K samples, the same K for every input of a file). A float input whose samples
    are all zeros is an InputError: it would calibrate every scale to a default."""
    from .executor import batch_size, feeds_for, load_arrays

    out = []
    for p in paths:
        feeds = feeds_for(g.inputs, load_arrays(p), p)
        k = batch_size(g.inputs, feeds, f"calibration file {p}")
        feeds = {n: _as_input(g, p, n, x) for n, x in feeds.items()}
        if k is None:
            out.append(feeds)
        else:
            out += [{n: x[i] for n, x in feeds.items()} for i in range(k)]
    for name, info in g.inputs.items():
        if (np.dtype(info.dtype).kind == "f" and out
                and not any(np.any(s[name]) for s in out)):
            raise InputError(f"calibration input {name!r} is all zeros in "
                             f"{', '.join(map(str, paths))}: it gives no range to quantize "
                             "with (every scale would be a guess); give real inputs")
    return out


def _as_input(g: Graph, path: str, name: str, x: np.ndarray) -> np.ndarray:
    """A calibration array as its input's dtype: any numbers for a float input; integers (or
    booleans) of the same values for an integer or boolean input."""
    dtype = np.dtype(g.inputs[name].dtype)
    if dtype.kind == "f":
        return x.astype(dtype)
    if x.dtype.kind not in "biu" or (x.size and not np.array_equal(x.astype(dtype), x)):
        raise InputError(f"calibration file {path} array {name!r} is {x.dtype}; input "
                         f"{name!r} takes {dtype} values (token ids, masks): save integers")
    return x.astype(dtype)


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


def node_macs(n: Node, shapes: Mapping[str, tuple[int, ...]],
              params: Mapping[str, np.ndarray]) -> int:
    """Multiply-accumulates of a (float or int8) conv or dense node, and of a matrix product
    of two activations (``MatMul``, ``Gemm``, ``QMatMul``: Q·Kᵀ and softmax·V of attention);
    0 for other ops."""
    if n.op in ("MatMul", "Gemm", "QMatMul"):
        a = shapes[n.inputs[0]]
        k = a[0] if n.op == "Gemm" and n.attrs.get("transA") else a[-1]
        return int(np.prod(shapes[n.outputs[0]])) * int(k)
    if n.op in ("Conv", "QConv"):
        w = params[n.inputs[1]].shape
        st = n.attrs.get("input_strides", [1, 1])
        if list(st) == [1, 1]:
            return int(np.prod(shapes[n.outputs[0]])) * int(np.prod(w[1:]))
        # a transposed conv: only the taps that meet an input pixel (not an inserted zero)
        x, out, pads = shapes[n.inputs[0]], shapes[n.outputs[0]], n.attrs["pads"]
        taps = 1
        for d in range(2):
            z = np.arange(out[2 + d])[:, None] + np.arange(w[2 + d])[None, :] - pads[d]
            taps *= int(((z >= 0) & (z % st[d] == 0) & (z // st[d] < x[2 + d])).sum())
        return out[0] * out[1] * int(w[1]) * taps
    if n.op in ("Dense", "QDense"):
        w = params[n.inputs[1]].shape
        return int(np.prod(shapes[n.outputs[0]])) * int(w[1])
    return 0


def qdq_ranges(g: Graph) -> dict[str, tuple[float, float]]:
    """The float range ``(lo, hi)`` a QDQ model fixes for a tensor: both sides of every
    ``FakeQuant`` (QuantizeLinear + DequantizeLinear) node."""
    out: dict[str, tuple[float, float]] = {}
    prod = g.producers()
    for n in g.nodes:
        if n.op != "FakeQuant":
            continue
        a = n.attrs
        rng = ((a["qmin"] - a["zero_point"]) * a["scale"], (a["qmax"] - a["zero_point"])
               * a["scale"])
        out[n.outputs[0]] = rng
        src = prod.get(n.inputs[0])
        # the producer of a quantized tensor writes it at the QDQ scale directly
        if n.inputs[0] not in out and (src is None or src.op != "FakeQuant"):
            out[n.inputs[0]] = rng
    return out


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


#: Int8 ops whose inputs are quantized even when none of them is int8 yet: a matrix product
#: of two activations (its MACs are worth a Quantize on each side).
_PRODUCTS = frozenset({"MatMul"})
_INT_CAPABLE = {
    "FakeQuant": _q_fakequant,
    "Add": _q_add,
    "MatMul": _q_matmul,
    "Relu": lambda q, n, *r: _q_same("QClip")(
        q, Node("Clip", n.name, n.inputs, n.outputs, {"min": 0.0, "max": None}), *r),
    "Clip": _q_same("QClip"),
    "MaxPool": _q_same("QMaxPool"),
    "LeakyRelu": _q_same("QLeakyRelu"),
    "HardSigmoid": _q_hard,
    "HardSwish": _q_hard,
    "AveragePool": _q_avg,
    "GlobalAveragePool": _q_avg,
    "Concat": _q_concat,
    "Pad": _q_same("QPad"),
    **{op: _q_same(op) for op in _PASSTHROUGH if op != "Pad"},
}


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
    th = calibrate(g, samples, calibration, unsigned, lows, fenv,
                   means if bias_correction else None)
    for grp in groups:  # one scale per group: the largest threshold
        top = max(th.get(t, 0.0) for t in grp)
        th.update((t, top) for t in grp)
    q = _Quantizer(g, th, pow2, per_channel, ranges)
    q.unsigned, q.lows, q.means = unsigned, lows, means
    layers: list[QuantInfo] = []
    for n in g.nodes:
        acts = [i for i in n.inputs if i and i not in q.params]
        info = QuantInfo(n.name, n.op)
        reason = None
        if n.name in float_layers:
            reason = "named by --float-layer"
        elif any(th.get(t) == np.inf for t in [*acts, *n.outputs]):
            reason = "infinite values (an attention mask of -inf)"
        elif n.name == first:
            reason = f"first convolution, under {FIRST_CONV_FLOAT_SHARE:.0%} of the MACs"
        if n.op in ("Conv", "Dense") and reason is None and len(acts) == 1:
            try:
                q.conv(n, info)
            except QuantizationError as e:
                reason = str(e)
        if info.in_scale is not None:
            pass  # quantized above
        elif reason is None and acts and len(acts) == len(n.inputs) and \
                (any(a in q.scales or a in q.qcache for a in acts) or n.op in _PRODUCTS) \
                and n.op in _INT_CAPABLE:
            ins = [q.as_int(a) for a in acts]
            _INT_CAPABLE[n.op](q, n, ins, info)
            if n.outputs[0] in unsigned:  # a carrier (see offset_groups)
                _carry_offset(q, n, ins)
        else:
            q.nodes.append(Node(n.op, n.name, [q.as_float(i) if i else i for i in n.inputs],
                                list(n.outputs), dict(n.attrs)))
            out = fenv.get(n.outputs[0])
            if reason is None and isinstance(out, np.ndarray) and out.dtype.kind in "biu":
                reason = "integer or boolean values (ids, masks)"
            info.float_reason = reason or ("no int8 kernel" if n.op not in _INT_CAPABLE
                                           and n.op not in ("Conv", "Dense")
                                           else "float input")
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


#: int8 ops whose output is clipped to their ``lo``/``hi`` attributes.
_CLIPPED = frozenset({"QConv", "QConvTranspose", "QDense", "QMatMul", "QAdd", "QClip",
                      "QFakeQuant"})


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
        if n.op in _CLIPPED:
            span[out] = (n.attrs["lo"], n.attrs["hi"])
        elif n.op in _SELECTING and x in span:
            span[out] = span[x]
        nodes.append(n)
    return nodes, [info for info in layers if info.node not in dropped]


#: Ops whose int8 kernel carries an offset through unchanged (they move, select or take the
#: maximum of values, and a concatenation of inputs at its own scale copies them): tensors they
#: join share one scale and offset (see :func:`offset_groups`).
_CARRIERS = _MOVES | {"MaxPool", "Slice", "Gather", "GlobalMaxPool"}
#: The int8 ops whose output values are some of their one input's values: the carriers but
#: Concat (which may rescale its inputs), under their int8 names.
_SELECTING = frozenset("QMaxPool" if op == "MaxPool" else op for op in _CARRIERS - {"Concat"})


def _carry_offset(q: _Quantizer, n: Node, ins: list[str]) -> None:
    """A carrier's output keeps its inputs' offset and scale (one group, one scale)."""
    t = n.outputs[0]
    if any(q.offsets.get(i) != OFFSET or q.scales[i] != q.scales[t] for i in ins):
        raise QuantizationError(f"{n.name}: the inputs of an offset group differ in scale or "
                                f"offset (an internal error)")
    q.offsets[t] = OFFSET


def offset_tensors(g: Graph, float_nodes: set[str | None], qdq: set[str],
                   asymmetric: bool = True) -> set[str]:
    """The tensors stored with an offset: the union of :func:`offset_groups`."""
    return set().union(*offset_groups(g, float_nodes, qdq, asymmetric))


def offset_groups(g: Graph, float_nodes: set[str | None], qdq: set[str],
                  asymmetric: bool = True) -> list[set[str]]:
    """The tensors stored with an offset (``x = scale * (q + offset)``, 256 steps over the
    tensor's range instead of 128 over ``[0, max]`` for a non-negative one), in groups that
    share one scale: tensors that max pooling, shape ops and concatenations (:data:`_CARRIERS`)
    join. A group qualifies when every tensor in it is made by a Conv/Dense whose fused
    Relu/Clip keeps it non-negative (offset :data:`OFFSET`) or by a carrier, and every reader
    is a carrier or a Conv/Dense that reads it as its one activation input (folding the offset
    into its bias), unpadded or grouped (a padded one gets a ``QPad`` before it). A tensor
    alone may also be made by an op without an int8 kernel (a ``Quantize`` on the CPU: SiLU,
    Sigmoid, Mul; the offset comes from the calibrated minimum; not with power-of-two scales,
    ``asymmetric=False``). Graph outputs, QDQ-fixed tensors and tensors read by a layer kept
    float stay signed."""
    cons, prod = g.consumers(), g.producers()

    def carrier(n: Node) -> bool:
        return n.op in _CARRIERS and n.name not in float_nodes \
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
        return alone and asymmetric and n.op not in _INT_CAPABLE

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
               and made_ok(t, len(grp) == 1)
               and all(carrier(c) or reads_only(c, t) for c in cons[t]) for t in grp):
            out.append(grp)
    return out


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


def layer_errors(fg: Graph, qr: QuantResult, feeds: Mapping[str, np.ndarray],
                 qenv: Mapping[str, np.ndarray] | None = None,
                 fenv: Mapping[str, np.ndarray] | None = None
                 ) -> dict[str, dict[str, float | bool]]:
    """Fill ``rel_error`` (||deq(q) - f|| / ||f||) of every layer with an int8 output; return
    the graph outputs' :func:`agreement` with float. ``qenv``: every tensor of the quantized
    graph on ``feeds`` when the caller has run it already; ``fenv``: the same of the float
    graph (``qr.float_env`` when ``feeds`` is the first calibration sample)."""
    if fenv is None:
        fenv = run_float(fg, feeds, keep=True)
    if qenv is None:
        qenv = run_quantized(qr.graph, feeds, keep=True)
    # a tensor a QDQ pair reads stands for the pair's output (onnxruntime drops a Relu whose
    # clip the pair makes): that is the float value its int8 stands for
    qdq_value = {n.inputs[0]: n.outputs[0] for n in fg.nodes if n.op == "FakeQuant"}
    for info in qr.layers:
        n = fg.node(info.node)
        o = n.outputs[0]
        qo = o if o in qr.scales else (f"{o}.int8" if f"{o}.int8" in qr.scales else None)
        if qo is None or o not in fenv:
            continue
        f = fenv[qdq_value.get(o, o)].astype(np.float64)
        d = (qenv[qo].astype(np.float64) + qr.offsets.get(qo, 0)) * qr.scales[qo]
        den = np.linalg.norm(f)
        info.rel_error = float(np.linalg.norm(d - f) / den) if den > 0 else 0.0
    return {o: agreement(fenv[o], qenv[o]) for o in fg.outputs}
