"""Calibration: the float range of every tensor, from float runs of sample inputs (max,
percentile or mse of a histogram), from a QDQ model's own pairs, or from the inputs' files; and
synthetic samples when none are given."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import ops
from ..ops.int8 import QMAX, UMAX
from .errors import InputError, ModelError
from .inputs import batch_size, feeds_for, load_arrays
from .ir import Graph, Node
from .reference import infer_shapes, run_float

#: Calibration methods of :func:`calibrate` (``vta compile --calibration``); the first is the
#: default.
CALIBRATIONS = ("mse", "max", "percentile")


PERCENTILE = 99.99


_BINS = 2048


_SUBSAMPLE = 1 << 18


#: Margin on the calibrated range of the graph's outputs (see :func:`calibrate`).
OUTPUT_HEADROOM = 1.25


#: Fewest values per sample for which percentile/mse calibration clips (see :func:`calibrate`).
_HIST_MIN = 4096
#: Largest rounding error, relative to its own size, that one int8 scale may leave on the
#: smallest token of a tensor a LayerNormalization reads (see :func:`lossy_rows`).
ROW_ERROR = 0.01


def _float_tensors(g: Graph, env: Mapping[str, Any]) -> Iterable[tuple[str, np.ndarray]]:
    for k, v in env.items():
        if k not in g.params and isinstance(v, np.ndarray) and v.dtype.kind == "f":
            yield k, v


def _order_keeping(op: str) -> bool:
    """Whether ``op`` passes values on without changing their order: it moves them, or maps
    them by an increasing function (Sigmoid, Tanh; Softmax along its axis)."""
    return ops.has(op, "moves") or ops.has(op, "order_keeping")


def output_sources(g: Graph) -> set[str]:
    """The graph's outputs and every tensor whose values reach one only through
    order-keeping ops (:func:`_order_keeping`): where the largest values decide the result
    (top-1, the best box), so calibration must not clip them."""
    made = {t: n for n in g.nodes for t in n.outputs}
    found: set[str] = set()
    todo = list(g.outputs)
    while todo:
        t = todo.pop()
        if t in found:
            continue
        found.add(t)
        n = made.get(t)
        if n is not None and _order_keeping(n.op):
            todo.extend(i for i in n.inputs if i and i not in g.params)
    return found


def calibrate(g: Graph, samples: Sequence[Mapping[str, np.ndarray]], method: str = "mse",
              unsigned: Iterable[str] = (), lows: dict[str, float] | None = None,
              first: dict[str, np.ndarray] | None = None,
              means: dict[str, tuple[np.ndarray, tuple[int, ...]]] | None = None,
              rows: dict[str, float] | None = None) -> dict[str, float]:
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
    input's shape (see :func:`weight_error_mean`); ``rows`` (when given) the smallest root
    mean square of a row (a token) of every tensor a LayerNormalization reads, over the
    samples (see :func:`lossy_rows`)."""
    if method not in CALIBRATIONS:
        raise InputError(f"calibration method {method!r} is unknown; choose one of "
                         f"{', '.join(CALIBRATIONS)}")
    amax: dict[str, float] = {}
    kept: dict[str, list[np.ndarray]] = {}
    outputs = output_sources(g)
    producers = g.producers()
    readers = {n.inputs[0]: n.op for n in g.nodes if n.op in ("Conv", "Dense")} \
        if means is not None else {}
    normed = {n.inputs[0] for n in g.nodes if n.op == "LayerNormalization"} \
        if rows is not None else set()
    for j, feeds in enumerate(samples):
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            env = run_float(g, feeds, keep=True)
        if j == 0 and first is not None:
            first.update(env)
        for k in normed:
            v = env[k]
            if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size:
                r = float(np.sqrt(np.square(v, dtype=np.float64).mean(axis=-1)).min())
                rows[k] = min(rows.get(k, r), r)
        for k, op in readers.items():
            v = env[k]
            axes = tuple(a for a in range(v.ndim) if a != (1 if op == "Conv" else v.ndim - 1))
            m = v.mean(axis=axes, dtype=np.float64) / len(samples)
            means[k] = (means[k][0] + m if k in means else m, tuple(v.shape))
        seen: dict[tuple, tuple[bool, float, float, np.ndarray | None]] = {}
        for k, v in _float_tensors(g, env):
            key = _memory_key(v)
            if key in seen:  # a view of a tensor already read (a Reshape's): its very values
                finite, lo, peak, part = seen[key]
            else:
                finite = bool(not v.size or np.isfinite(v.max() - v.min()))
                lo = float(v.min()) if v.size and finite else 0.0
                # max |v| without a copy of |v|: the histogram takes |v| of the subsample alone
                peak = max(float(v.max()), -lo) if v.size and finite else 0.0
                part = None
            if amax.get(k) == np.inf and finite:
                continue  # -inf in another sample's mask (not in this one's: no padding)
            if not finite:
                if _made_non_finite(producers.get(k), env, g.params):
                    raise ModelError(f"tensor {k!r} holds NaN or infinite values in the float "
                                     f"run of calibration input {j + 1} (float32 overflows); "
                                     "the int8 path cannot represent them: check the model's "
                                     "weights")
                amax[k] = np.inf  # -inf of an attention mask: no int8 range (stays float)
                kept.pop(k, None)
                continue
            amax[k] = max(amax.get(k, 0.0), peak)
            if lows is not None and k in unsigned and v.size:
                lows[k] = min(lows.get(k, 0.0), lo)
            if method != "max" and v.size >= _HIST_MIN and k not in outputs:
                if part is None:
                    part = np.abs(v.ravel()[::max(1, v.size // _SUBSAMPLE)])
                kept.setdefault(k, []).append(part)
            if key is not None:
                seen[key] = (finite, lo, peak, part)
    out = dict(amax)
    for k in outputs:
        if k in out:
            out[k] *= OUTPUT_HEADROOM
    found: dict[tuple, float] = {}  # views of one tensor share their subsamples
    for k, parts in kept.items():
        if amax[k] > 0:
            steps = UMAX if k in unsigned else QMAX
            same = (tuple(map(id, parts)), amax[k], steps)
            if same not in found:
                h, _ = np.histogram(np.concatenate(parts), bins=_BINS, range=(0.0, amax[k]))
                found[same] = _percentile(h, amax[k]) if method == "percentile" else \
                    _mse(h, amax[k], steps)
            out[k] = found[same]
    return out


def _memory_key(v: np.ndarray) -> tuple | None:
    """Where a C-contiguous array's values lie (address, bytes, dtype): two arrays with the
    same key hold the same values in the same order (one is a reshaped view of the other);
    None for an array that is not C-contiguous."""
    if not v.flags.c_contiguous or not v.size:
        return None
    return (v.__array_interface__["data"][0], v.nbytes, v.dtype.str)


def lossy_rows(th: Mapping[str, float], rows: Mapping[str, float]) -> dict[str, float]:
    """Tensors a LayerNormalization reads (a transformer's residual stream) whose smallest
    row (token) would lose more than :data:`ROW_ERROR` of its size to int8 rounding at the
    tensor's one scale -> that relative error. LayerNorm rescales every token to unit size, so
    a token far smaller than the others (a ViT's class token in the first blocks: 1/12 of
    the typical token's size) keeps its whole relative error, and the head reads that token
    alone. Rounding to a step ``s`` leaves an error of ``s / sqrt(12)`` per value, against the
    row's root mean square ``rows[t]``."""
    out = {}
    for t, r in rows.items():
        err = th.get(t, 0.0) / QMAX / math.sqrt(12.0) / r if r > 0 else math.inf
        if err > ROW_ERROR and np.isfinite(th.get(t, 0.0)):
            out[t] = err
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
    clip = centres[None, :] - cands[:, None]
    np.maximum(clip, 0.0, out=clip)
    np.square(clip, out=clip)
    clip *= h[None, :]
    # values within a candidate: the (integer) count of the bins whose centre is at most it,
    # a prefix of the sorted centres
    within = np.concatenate([[0], np.cumsum(h)])[np.searchsorted(centres, cands, "right")]
    err = clip.sum(axis=1) + within * step ** 2 / 12
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


def index_bounds(g: Graph) -> dict[str, int]:
    """Integer graph inputs that index a table (a ``Take``'s indices, directly or through
    the registry's ``index_moving`` ops) -> the smallest size of the axes they index (the
    vocabulary)."""
    reach = {k: {k} for k, v in g.inputs.items() if np.dtype(v.dtype).kind in "iu"}
    out: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] | None = None
    for n in g.nodes:
        srcs = set().union(*(reach.get(i, set()) for i in n.inputs[:1]))
        if ops.has(n.op, "index_moving") and srcs:
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
