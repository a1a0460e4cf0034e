"""CPU (LLVM) operators for what VTA does not run: float conv2d, pooling, dense, softmax, ...

Each function declares the compute, applies a default schedule chosen for the LLVM vectoriser
(the innermost loop walks contiguous memory; reductions sit outside it, or use fast-math
reassociation), builds it and returns a :class:`CpuOp`: call it on numpy arrays, get the output.

>>> relu = relu_op((2, 8))                                     # doctest: +SKIP
>>> relu(np.array(...))                                        # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from .. import te
from ..build import build
from ..codegen.llvm import llvm_ir
from ..errors import CodegenError, ScheduleError
from ..lower import lower
from ..ops.int8 import DROP_BIAS, LN_BITS, LN_FRAC, LN_RMAX, LN_SHIFT, MASK_STEPS, QMAX
from ..schedule import Schedule
from ..te.tensor import Tensor
from ..tir.expr import Call, int_range, is_int
from . import nn


@dataclass
class CpuOp:
    """A CPU operator: ``op(*inputs) -> output`` (a new array). JIT-compiled on first use;
    :attr:`llvm_ir` alone needs no JIT (what a compiled network module stores)."""

    name: str
    sch: Schedule
    args: list[Tensor]
    out_shape: tuple[int, ...]
    out_dtype: str
    #: Options for the LLVM build (e.g. ``{"unroll": False}``).
    build_opts: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self._module: Any = None
        self._ir: str | None = None
        self._ins = [(tuple(t.shape), np.dtype(t.dtype)) for t in self.args[:-1]]
        self._out = (tuple(self.args[-1].shape), np.dtype(self.out_dtype))
        self._fast: Any = None

    @property
    def module(self) -> Any:
        """The JIT-compiled :class:`~vta.compiler.codegen.llvm.CpuModule` (built once)."""
        if self._module is None:
            self._module = build(self.sch, self.args, "cpu", name=self.name,
                                 **(self.build_opts or {}))
            self._fast = self._module.flat_entry
        return self._module

    def __call__(self, *inputs: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Run on ``inputs``; writes into ``out`` when given (C-contiguous, right size and
        dtype). Inputs of another dtype, layout or a same-size shape are converted first."""
        if out is None:
            out = np.empty(self.out_shape, self._out[1])
        fast = self._fast if self._module is not None else self.module.flat_entry
        if fast is not None and len(inputs) == len(self._ins) and fast(*inputs, out) == 0:
            return out  # checked (dtype, element count, layout) and run natively
        if len(inputs) != len(self._ins):
            raise CodegenError(f"{self.name} takes {len(self._ins)} input(s), got "
                               f"{len(inputs)}")
        ins = []  # the Python path: convert what the native check refused
        for k, (x, (shape, dt)) in enumerate(zip(inputs, self._ins)):
            a = np.ascontiguousarray(x, dtype=dt)
            if a.shape != shape:
                if a.size != prod(shape):
                    raise CodegenError(f"{self.name}: input {k} has shape {a.shape}, expected "
                                       f"{shape} ({prod(shape)} elements)")
                a = a.reshape(shape)
            ins.append(a)
        shape, dt = self._out
        if not (isinstance(out, np.ndarray) and out.dtype == dt and out.size == prod(shape)
                and out.flags.c_contiguous and out.flags.writeable):
            raise CodegenError(f"{self.name}: out must be a writable C-contiguous {dt} array "
                               f"of {prod(shape)} elements")
        self.module(*ins, out if out.shape == shape else out.reshape(shape))
        return out

    @property
    def llvm_ir(self) -> str:
        """The LLVM IR of the kernel, before optimisation (lowered here; no JIT)."""
        if self._module is not None:
            return self._module.llvm_ir
        if self._ir is None:
            self._ir = llvm_ir(lower(self.sch, self.args, self.name))
        return self._ir

    @property
    def params(self) -> list[tuple[str, tuple[int, ...], str]]:
        """``(name, shape, dtype)`` of each argument of the kernel (the output last)."""
        return [(t.name, tuple(t.shape), t.dtype) for t in self.args]


def _vec(s: Schedule, t: Tensor, width: int = 0) -> None:
    """Mark the innermost loop for vectorisation."""
    st = s[t]
    st.vectorize(st.leaf_iter_vars[-1])


# --------------------------------------------------------------------- element-wise
def add(shape: Sequence[int], dtype: str = "float32") -> CpuOp:
    """Element-wise a + b (vectorised; large arrays run at the memory bandwidth)."""
    n = prod(shape)
    a = te.placeholder((n,), dtype, "a")
    b = te.placeholder((n,), dtype, "b")
    c = te.compute((n,), lambda i: a[i] + b[i], name="add")
    s = te.create_schedule(c.op)
    _vec(s, c)
    return CpuOp("add", s, [a, b, c], tuple(shape), dtype)


def relu(shape: Sequence[int], dtype: str = "float32") -> CpuOp:
    n = prod(shape)
    a = te.placeholder((n,), dtype, "a")
    c = te.compute((n,), lambda i: te.max(a[i], te.const(0, dtype)), name="relu")
    s = te.create_schedule(c.op)
    _vec(s, c)
    return CpuOp("relu", s, [a, c], tuple(shape), dtype)


def tanh(shape: Sequence[int]) -> CpuOp:
    """float32 tanh as Eigen's rational approximation ``x p(x^2) / q(x^2)`` on x clamped to
    +-7.9053 (where float32 tanh is +-1): 11 multiply-adds and a division, vectorised;
    absolute error below 1e-6 of numpy's ``np.tanh``."""
    n = prod(shape)
    f32 = "float32"
    a = te.placeholder((n,), f32, "a")
    alpha = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
             5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
             4.89352455891786e-03)
    beta = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
            4.89352518554385e-03)

    def f(i):  # noqa: ANN001, ANN202 - an Expr builder
        x = te.clip(a[i], -7.90531110763549805, 7.90531110763549805)
        x2 = x * x
        p = te.const(alpha[0], f32)
        for c in alpha[1:]:
            p = p * x2 + te.const(c, f32)
        q = te.const(beta[0], f32)
        for c in beta[1:]:
            q = q * x2 + te.const(c, f32)
        return x * p / q
    c = te.compute((n,), f, name="tanh")
    s = te.create_schedule(c.op)
    _vec(s, c)
    # bound by multiply-adds and the division: 512-bit vectors where the CPU has them
    return CpuOp("tanh", s, [a, c], tuple(shape), f32, build_opts={"prefer_256_bit": False})


# --------------------------------------------------------------------- int8 (quantized)
def quantize(shape: Sequence[int], scale: float, offset: int = 0) -> CpuOp:
    """float32 -> int8 ``clip(rint(float64(x) / scale) - offset, -128, 127)``: numpy's
    ``quantize_array`` bit for bit (a float64 division, correctly rounded and not turned into a
    multiplication by the reciprocal; ``rint`` rounds half to even as ``np.rint`` does)."""
    n = prod(shape)
    x = te.placeholder((n,), "float32", "x")
    div = te.const(float(scale), "float64")

    def f(i):  # noqa: ANN001, ANN202 - an Expr builder
        q = Call("rint", [x[i].astype("float64") / div], "float64")
        if offset:
            q = q - te.const(float(offset), "float64")
        return te.clip(q, -128.0, 127.0).astype("int8")
    c = te.compute((n,), f, name="quantize")
    s = te.create_schedule(c.op)
    _vec(s, c)
    return CpuOp("quantize", s, [x, c], tuple(shape), "int8")


def lut(shape: Sequence[int]) -> CpuOp:
    """int8 -> int8 ``table[q + 128]``: a function of one int8 value as its 256 results (the
    table is the second argument; quantize's ``QLut``)."""
    n = prod(shape)
    q = te.placeholder((n,), "int8", "q")
    table = te.placeholder((256,), "int8", "table")
    c = te.compute((n,), lambda i: table[q[i].astype("int32") + 128], name="lut")
    s = te.create_schedule(c.op)
    _vec(s, c)
    return CpuOp("lut", s, [q, table, c], tuple(shape), "int8")


def dequantize(shape: Sequence[int], scale: float) -> CpuOp:
    """int8 -> float32 ``float32(float64(q) * scale)`` (numpy's ``dequantize_array`` bit for
    bit: one correctly rounded float64 product, then rounded to float32)."""
    n = prod(shape)
    q = te.placeholder((n,), "int8", "q")
    c = te.compute((n,), lambda i: (q[i].astype("float64") * te.const(float(scale), "float64"))
                   .astype("float32"), name="dequantize")
    s = te.create_schedule(c.op)
    _vec(s, c)
    return CpuOp("dequantize", s, [q, c], tuple(shape), "float32")


def _acc_type(max_abs: int) -> str:
    """The narrower of int32 / int64 that holds every value up to ``max_abs``."""
    return "int32" if max_abs < (1 << 31) else "int64"


def qadd(shape: Sequence[int], mul_a: int, mul_b: int, shift: int, lo: int,
         hi: int) -> CpuOp:
    """int8 ``clip((a * mul_a + b * mul_b + 2**(shift-1)) >> shift, lo, hi)`` (no rounding
    term and no shift when ``shift <= 0``): the fixed-point rescaling of quantize's ``QAdd``,
    exact in int32 (int64 when the multipliers need it)."""
    n = prod(shape)
    a = te.placeholder((n,), "int8", "a")
    b = te.placeholder((n,), "int8", "b")
    acc = _acc_type(128 * (abs(mul_a) + abs(mul_b)) + (1 << max(shift - 1, 0)))

    def f(i):  # noqa: ANN001, ANN202 - an Expr builder
        v = a[i].astype(acc) * mul_a + b[i].astype(acc) * mul_b
        if shift > 0:
            v = (v + (1 << (shift - 1))) >> shift
        return te.clip(v, lo, hi).astype("int8")
    c = te.compute((n,), f, name="qadd")
    s = te.create_schedule(c.op)
    _vec(s, c)
    return CpuOp("qadd", s, [a, b, c], tuple(shape), "int8")


def qglobal_avg_pool2d(shape: Sequence[int], mul: int, shift: int) -> CpuOp:
    """int8 global average pooling: ``clip(floor((2 s mul + d) / (2 d)), -128, 127)`` with
    ``s`` the exact window sum and ``d = count * 2**shift``, i.e. ``round_half_up(s * mul /
    (count * 2**shift))`` (quantize's ``QGlobalAveragePool``; ``shift >= 0``)."""
    n, ch, h, w = shape
    cnt = h * w
    den = cnt << shift
    acc = _acc_type(2 * 128 * cnt * abs(mul) + 2 * den)
    x = te.placeholder((n, ch, cnt), "int8", "x")
    r = te.reduce_axis((0, cnt), "r")
    tot = te.compute((n, ch), lambda a, b: te.sum(x[a, b, r].astype(acc), axis=[r]),
                     name="qsum")
    out = te.compute((n, ch), lambda a, b: te.clip(
        (tot[a, b] * (2 * mul) + den) // (2 * den), -128, 127).astype("int8"),
        name="qgavg")
    s = te.create_schedule(out.op)
    return CpuOp("qglobal_avg_pool2d", s, [x, out], (n, ch, 1, 1), "int8",
                 build_opts={"unroll": False})


def pad2d(shape: Sequence[int], pads: Sequence[int], value: int | float = 0,
          dtype: str = "int8") -> CpuOp:
    """Constant pad of H and W by ``[top, left, bottom, right]`` (non-negative) with ``value``
    (the int8 ``QPad`` before a padded conv of an offset tensor)."""
    n, c, h, w = shape
    t, left, b, r = pads
    oh, ow = h + t + b, w + left + r
    x = te.placeholder(tuple(shape), dtype, "x")

    def f(a, ch, i, j):  # noqa: ANN001, ANN202 - an Expr builder
        y, z = i - t, j - left
        inside = te.all(y >= 0, y < h, z >= 0, z < w)
        return te.if_then_else(inside, x[a, ch, y, z], te.const(value, dtype))
    out = te.compute((n, c, oh, ow), f, name="pad2d")
    s = te.create_schedule(out.op)
    s[out].vectorize(s[out].op.axis[3])
    return CpuOp("pad2d", s, [x, out], (n, c, oh, ow), dtype)


# --------------------------------------------------------------------- pooling
def _pool(kind: str, shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
          padding: Sequence[int], dtype: str) -> CpuOp:
    n, c, h, w = shape
    kh, kw = kernel
    sh, sw = strides
    ph, pw = padding
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    x = te.placeholder(tuple(shape), dtype, "x")
    if is_int(dtype):  # integer max pooling pads with the type's minimum (avg: float only)
        fill: float | int = int_range(dtype)[0]
    else:
        fill = float("-inf") if kind == "max" else 0.0
    src = nn.pad(x, (0, 0, ph, pw), pad_value=fill, name="pad") if ph or pw else x
    ry = te.reduce_axis((0, kh), "ry")
    rx = te.reduce_axis((0, kw), "rx")
    red = te.max if kind == "max" else te.sum
    acc = te.compute((n, c, oh, ow), lambda a, b, i, j: red(
        src[a, b, i * sh + ry, j * sw + rx], axis=[ry, rx]), name=f"{kind}_pool")
    out = acc
    if kind == "avg":
        scale = 1.0 / (kh * kw)
        out = te.compute(acc.shape, lambda *i: acc(*i) * te.const(scale, dtype), name="avg")
    s = te.create_schedule(out.op)
    a, b, i, j = s[acc].op.axis
    s[acc].reorder(a, b, i, ry, rx, j)
    if out is not acc:
        s[acc].compute_at(s[out], s[out].op.axis[2])
    return CpuOp(f"{kind}_pool2d", s, [x, out], (n, c, oh, ow), dtype)


def max_pool2d(shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
               padding: Sequence[int] = (0, 0), dtype: str = "float32") -> CpuOp:
    """NCHW max pooling (padding with -inf, or the integer type's minimum)."""
    return _pool("max", shape, kernel, strides, padding, dtype)


def avg_pool2d(shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
               padding: Sequence[int] = (0, 0), dtype: str = "float32") -> CpuOp:
    """NCHW average pooling (zero padding counted, as count_include_pad=True)."""
    return _pool("avg", shape, kernel, strides, padding, dtype)


def global_avg_pool2d(shape: Sequence[int], dtype: str = "float32") -> CpuOp:
    n, c, h, w = shape
    x = te.placeholder((n, c, h * w), dtype, "x")
    r = te.reduce_axis((0, h * w), "r")
    acc = te.compute((n, c), lambda a, b: te.sum(x[a, b, r], axis=[r]), name="gsum")
    out = te.compute((n, c), lambda a, b: acc[a, b] * te.const(1.0 / (h * w), dtype),
                     name="gavg")
    s = te.create_schedule(out.op)
    # without LLVM's full unrolling of the short reduction, the vectoriser reduces each row
    # with contiguous vector loads instead of gathering across rows
    return CpuOp("global_avg_pool2d", s, [x, out], (n, c, 1, 1), dtype,
                 build_opts={"unroll": False})


# --------------------------------------------------------------------- dense / conv
def dense(batch: int, in_dim: int, out_dim: int, dtype: str = "float32",
          bias: bool = False) -> CpuOp:
    """y = x . W^T (+ b), W in (out, in) layout (ONNX Gemm with transB=1)."""
    x = te.placeholder((batch, in_dim), dtype, "x")
    wt = te.placeholder((out_dim, in_dim), dtype, "w")
    k = te.reduce_axis((0, in_dim), "k")
    y = te.compute((batch, out_dim), lambda i, j: te.sum(x[i, k] * wt[j, k], axis=[k]),
                   name="dense")
    out = y
    args = [x, wt]
    if bias:
        b = te.placeholder((out_dim,), dtype, "b")
        out = te.compute(y.shape, lambda i, j: y[i, j] + b[j], name="bias_add")
        args.append(b)
    s = te.create_schedule(out.op)
    i, j = s[y].op.axis
    jb = max(d for d in (8, 4, 2, 1) if out_dim % d == 0)
    jo, ji = s[y].split(j, factor=jb)
    s[y].reorder(i, jo, k, ji)
    s[y].unroll(ji)  # jb dot products share each x[i, k] load; LLVM vectorises over k
    if out is not y:
        s[y].compute_at(s[out], s[out].op.axis[0])
    return CpuOp("dense", s, args + [out], (batch, out_dim), dtype)


def conv2d(data_shape: Sequence[int], kernel_shape: Sequence[int],
           strides: Sequence[int] = (1, 1), padding: Sequence[int] = (0, 0),
           dtype: str = "float32", bias: bool = False, relu: bool = False,
           groups: int = 1, co_block: int = 4,
           requant: Requant | None = None) -> CpuOp:
    """NCHW conv2d (OIHW weights; ``groups`` for grouped/depthwise), optional bias/relu.

    Float, or int8 (``dtype="int8"``) with int32 accumulation and an int32 bias, then the
    ``requant = (shift, lo, hi, mul, shift2)`` epilogue of :func:`_requant` (``shift`` and
    ``mul`` one value or one per output channel, passed then as last int32 arguments): the VTA
    epilogue, exact (int32 wraps as the hardware does).

    Schedule: output rows of ``co_block`` channels; the (ci, dy, dx) reduction sits outside the
    vectorised output row, so every reduction step is one vector multiply-add per channel.
    """
    n, ci, h, w = data_shape
    co, cig, kh, kw = kernel_shape
    if ci % groups or co % groups or cig != ci // groups:
        raise ScheduleError(f"conv2d: {ci} input / {co} output channels, {groups} groups and "
                            f"a kernel with {cig} input channels do not agree")
    sh, sw = strides
    ph, pw = padding
    integer = is_int(dtype)
    if integer and requant is None:
        raise ScheduleError("conv2d: an integer conv2d needs requant=(shift, lo, hi, mul, "
                            "shift2)")
    if kh == kw == 1 and groups == 1 and ph == pw == 0 and not integer:
        return _conv2d_1x1(data_shape, kernel_shape, strides, dtype, bias, relu)
    if groups == 1 and not integer:
        return _conv2d_gemm(data_shape, kernel_shape, strides, padding, dtype, bias, relu)
    acc_t = "int32" if integer else dtype
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    x = te.placeholder(tuple(data_shape), dtype, "x")
    k = te.placeholder(tuple(kernel_shape), dtype, "w")
    src = nn.pad(x, (0, 0, ph, pw), name="pad") if ph or pw else x
    rc = te.reduce_axis((0, cig), "rc")
    ry = te.reduce_axis((0, kh), "ry")
    rx = te.reduce_axis((0, kw), "rx")
    opg = co // groups
    conv = te.compute((n, co, oh, ow), lambda a, o, i, j: te.sum(
        src[a, (o // opg) * cig + rc if groups > 1 else rc, i * sh + ry, j * sw + rx]
        .astype(acc_t) * k[o, rc, ry, rx].astype(acc_t), axis=[rc, ry, rx]), name="conv")
    out = conv
    args = [x, k]
    if bias:
        b = te.placeholder((co,), acc_t, "b")
        out = te.compute(conv.shape, lambda a, o, i, j: conv[a, o, i, j] + b[o], name="bias")
        args.append(b)
    if relu:
        prev = out
        out = te.compute(conv.shape, lambda *i: te.max(prev(*i), te.const(0, acc_t)),
                         name="relu")
    if requant is not None:
        out = _requant(out, requant, dtype, args)
    s = te.create_schedule(out.op)
    a, o, i, j = s[conv].op.axis
    cb = max(d for d in range(1, co_block + 1) if co % d == 0)
    if groups > 1:
        cb = 1
    oo, oi = s[conv].split(o, factor=cb)
    s[conv].reorder(a, oo, i, rc, ry, rx, oi, j)
    s[conv].unroll(oi)
    s[conv].vectorize(j)
    for st in (t for t in (out,) if t is not conv):
        s[st].vectorize(s[st].op.axis[3])
    if out is not conv:
        oa, oo2, oi2, oj2 = s[out].op.axis
        o_o, o_i = s[out].split(oo2, factor=cb)
        s[out].reorder(oa, o_o, oi2, o_i, oj2)
        s[conv].compute_at(s[out], oi2)
        for mid in s.stages:
            if mid.op is not out.op and mid.op is not conv.op and mid.name in ("bias",
                                                                               "relu"):
                mid.compute_inline()
    return CpuOp("conv2d", s, args + [out], (n, co, oh, ow), dtype)


#: ``(shift, lo, hi, mul, shift2)`` of an int8 conv2d's epilogue (see :func:`_requant`)
Requant = tuple[int | Sequence[int], int, int, int | Sequence[int], int]


def _per_channel(v: int | Sequence[int], name: str, args: list[Tensor]):  # noqa: ANN202
    """An index -> int32 Expr of one amount or of one per output channel (axis 1; then a last
    int32 argument of the kernel)."""
    if isinstance(v, int):
        return lambda i: te.const(v, "int32")
    t = te.placeholder((len(v),), "int32", name)
    args.append(t)
    return lambda i: t[i[1]]


def _requant(acc: Tensor, requant: Requant, dtype: str, args: list[Tensor]) -> Tensor:
    """The VTA epilogue of an NCHW int32 tensor, as quantize.requantize computes it: SHR
    ``shift`` (a negative amount shifts left), then, when ``mul`` is not 1, MUL ``mul`` and
    (``shift2 > 0``) ADD ``2**(shift2-1)``, SHR ``shift2``; then int8 ``clip(., lo, hi)``. Every
    step wraps in int32. A per-channel ``shift`` or ``mul`` becomes a last int32 argument (the
    shifts first)."""
    shift, lo, hi, mul, shift2 = requant
    zero = te.const(0, "int32")
    if isinstance(shift, int):
        def shifted(*i):  # noqa: ANN002, ANN202 - Expr builders
            return acc(*i) >> shift if shift >= 0 else acc(*i) << -shift
    else:
        sv = _per_channel(shift, "shift", args)

        def shifted(*i):  # noqa: ANN002, ANN202
            s = sv(i)
            return te.if_then_else(s >= zero, acc(*i) >> te.max(s, zero),
                                   acc(*i) << te.max(zero - s, zero))
    step = shifted
    if not isinstance(mul, int) or mul != 1:
        mv = _per_channel(mul, "mul", args)

        def step(*i):  # noqa: ANN002, ANN202
            v = shifted(*i) * mv(i)
            return (v + (1 << (shift2 - 1))) >> shift2 if shift2 > 0 else v
    return te.compute(acc.shape, lambda *i: te.clip(step(*i), lo, hi).astype(dtype),
                      name="requant")


def _conv2d_gemm(data_shape: Sequence[int], kernel_shape: Sequence[int],
                 strides: Sequence[int], padding: Sequence[int], dtype: str, bias: bool,
                 relu: bool, ob: int = 16, pb: int | None = None,
                 inline_pad: bool = False) -> CpuOp:
    """KxK conv2d as a register-blocked matrix product over im2col blocks: for each block of
    ``pb`` output pixels, the (C, KH, KW, pb) window block is gathered contiguously (it sits in
    the L1 cache), then every block of ``ob`` output channels accumulates ``ob x pb`` sums in
    registers over the C*KH*KW reduction. Pixels are blocks of an output row when the row
    divides into them (no index division), else blocks of the flattened output. The padded
    input is materialised once (the gather then needs no bounds selects).

    Block sizes: 16 channels x 8 pixels where the channels divide by 16; otherwise at least 128
    products per block (measured on AVX-512/AVX2 with LLVM 22: blocks of 64 or 96 products,
    e.g. 8 x 8, made the vectoriser produce code 5-8x slower)."""
    n, ci, h, w = data_shape
    co, _, kh, kw = kernel_shape
    sh, sw = strides
    ph, pw = padding
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    npix = oh * ow
    x = te.placeholder(tuple(data_shape), dtype, "x")
    k = te.placeholder(tuple(kernel_shape), dtype, "w")
    src = nn.pad(x, (0, 0, ph, pw), name="pad") if ph or pw else x
    ob = max(d for d in range(1, ob + 1) if co % d == 0)
    if pb is None:
        pb = 8 * -(-128 // (8 * ob))  # >= 128 products per block, whole 8-lane vectors
    rows = ow % pb == 0
    if rows:  # pixels (i, j): no division
        cols = te.compute((n, ci, kh, kw, oh, ow), lambda a, c, y, z, i, j: src[
            a, c, i * sh + y, j * sw + z], name="im2col")
        oshape: tuple[int, ...] = (n, co, oh, ow)
    else:
        pb = max(d for d in range(1, pb + 1) if npix % d == 0)
        cols = te.compute((n, ci, kh, kw, npix), lambda a, c, y, z, p: src[
            a, c, (p // ow) * sh + y, (p % ow) * sw + z], name="im2col")
        oshape = (n, co, npix)
    rc = te.reduce_axis((0, ci), "rc")
    ry = te.reduce_axis((0, kh), "ry")
    rx = te.reduce_axis((0, kw), "rx")
    conv = te.compute(oshape, lambda a, o, *p: te.sum(cols[(a, rc, ry, rx, *p)]
                                                      * k[o, rc, ry, rx], axis=[rc, ry, rx]),
                      name="conv")
    out, args = conv, [x, k]
    if bias:
        b = te.placeholder((co,), dtype, "b")
        args.append(b)
        out = te.compute(oshape, lambda a, o, *p: conv[(a, o, *p)] + b[o], name="bias")
    if relu:
        prev = out
        out = te.compute(oshape, lambda *i: te.max(prev(*i), te.const(0, dtype)), name="relu")
    s = te.create_schedule(out.op)
    if src is not x and inline_pad:
        s[src].compute_inline()
    ax = s[conv].op.axis
    oo, oi = s[conv].split(ax[1], factor=ob)
    po, pi = s[conv].split(ax[-1], factor=pb)
    s[conv].reorder(ax[0], *ax[2:-1], po, oo, rc, ry, rx, oi, pi)
    s[conv].unroll(oi)
    s[conv].vectorize(pi)
    s[cols].compute_at(s[conv], po)
    s[cols].vectorize(s[cols].op.axis[-1])
    if out is not conv:
        oax = s[out].op.axis
        opo, opi = s[out].split(oax[-1], factor=pb)
        s[out].reorder(oax[0], *oax[2:-1], opo, oax[1], opi)
        s[out].vectorize(opi)
        s[conv].compute_at(s[out], opo)
        for mid in s.stages:
            if mid.op is not out.op and mid.name in ("bias", "relu"):
                mid.compute_inline()
    return CpuOp("conv2d", s, args + [out], (n, co, oh, ow), dtype)


def _conv2d_1x1(data_shape: Sequence[int], kernel_shape: Sequence[int],
                strides: Sequence[int], dtype: str, bias: bool, relu: bool) -> CpuOp:
    """1x1 conv2d as a matrix product over the flattened output pixels: the (strided) input is
    first gathered into a contiguous (C, OH*OW) matrix, then each block of 8 output channels
    x 16 pixels accumulates in registers over the input channels (a register-blocked GEMM;
    the row-at-a-time schedule of :func:`conv2d` re-reads its accumulators every step)."""
    n, ci, h, w = data_shape
    co = kernel_shape[0]
    sh, sw = strides
    oh, ow = (h - 1) // sh + 1, (w - 1) // sw + 1
    npix = oh * ow
    k = te.placeholder(tuple(kernel_shape), dtype, "w")
    if sh == sw == 1:  # the input is already the (C, H*W) matrix (CpuOp passes any shape)
        x = te.placeholder((n, ci, h * w), dtype, "x")

        def src(a, c, p):  # noqa: ANN001, ANN202 - Expr builders
            return x[a, c, p]
        sub = None
    else:
        x = te.placeholder(tuple(data_shape), dtype, "x")
        sub = te.compute((n, ci, npix), lambda a, c, p: x[a, c, (p // ow) * sh, (p % ow) * sw],
                         name="gather")

        def src(a, c, p):  # noqa: ANN001, ANN202
            return sub[a, c, p]
    rc = te.reduce_axis((0, ci), "rc")
    conv = te.compute((n, co, npix), lambda a, o, p: te.sum(src(a, rc, p) * k[o, rc, 0, 0],
                                                            axis=[rc]), name="conv")
    out, args = conv, [x, k]
    if bias:
        b = te.placeholder((co,), dtype, "b")
        args.append(b)
        out = te.compute(conv.shape, lambda a, o, p: conv[a, o, p] + b[o], name="bias")
    if relu:
        prev = out
        out = te.compute(conv.shape, lambda *i: te.max(prev(*i), te.const(0, dtype)),
                         name="relu")
    s = te.create_schedule(out.op)
    ob = max(d for d in range(1, 9) if co % d == 0)
    pb = max(d for d in range(1, 17) if npix % d == 0)
    a, o, p = s[conv].op.axis
    oo, oi = s[conv].split(o, factor=ob)
    po, pi = s[conv].split(p, factor=pb)
    s[conv].reorder(a, oo, po, rc, oi, pi)
    s[conv].unroll(oi)
    s[conv].vectorize(pi)
    if out is not conv:
        a2, o2, p2 = s[out].op.axis
        oo2, oi2 = s[out].split(o2, factor=ob)
        po2, pi2 = s[out].split(p2, factor=pb)
        s[out].reorder(a2, oo2, po2, oi2, pi2)
        s[out].vectorize(pi2)
        s[conv].compute_at(s[out], po2)
        for mid in s.stages:
            if mid.op is not out.op and mid.name in ("bias", "relu"):
                mid.compute_inline()
    if sub is not None:
        s[sub].vectorize(s[sub].op.axis[2])
    return CpuOp("conv2d", s, args + [out], (n, co, oh, ow), dtype)


def fast_exp(x):  # noqa: ANN001, ANN201 - an Expr builder
    """exp(x) for float32 as vectorisable arithmetic: 2**n * p(r), n = floor(x log2 e + 1/2),
    r = x - n ln 2, p a degree-6 polynomial (relative error ~2e-7 on the softmax range)."""
    f32 = "float32"
    x = te.max(te.min(x, te.const(88.0, f32)), te.const(-87.0, f32))
    n = Call("floor", [x * te.const(1.4426950408889634, f32) + te.const(0.5, f32)], f32)
    r = x - n * te.const(0.6931471805599453, f32)
    p = te.const(1.0 / 720, f32)
    for c in (1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0):
        p = p * r + te.const(c, f32)
    scale = Call("reinterpret", [(n.astype("int32") + 127) << 23], f32)
    return p * scale


def softmax(shape: Sequence[int], dtype: str = "float32") -> CpuOp:
    """Softmax over the last axis (float32 uses :func:`fast_exp`, which vectorises)."""
    rows, cols = prod(shape[:-1]), shape[-1]
    x = te.placeholder((rows, cols), dtype, "x")
    r1 = te.reduce_axis((0, cols), "r1")
    mx = te.compute((rows,), lambda i: te.max(x[i, r1], axis=[r1]), name="mx")
    # a row of -inf alone (attention masked entirely) is 0, as the numpy kernel's: its
    # maximum counts as the lowest finite float (no inf - inf), and the output is selected
    lowest = te.const(float(np.finfo(np.dtype(dtype)).min), dtype)
    mxf = te.compute((rows,), lambda i: te.max(mx[i], lowest), name="mxf")
    expf = fast_exp if dtype == "float32" else te.exp
    ex = te.compute((rows, cols), lambda i, j: expf(x[i, j] - mxf[i]), name="ex")
    r2 = te.reduce_axis((0, cols), "r2")
    sm = te.compute((rows,), lambda i: te.sum(ex[i, r2], axis=[r2]), name="sm")
    out = te.compute((rows, cols), lambda i, j: te.if_then_else(
        mx[i] < lowest, te.const(0.0, dtype), ex[i, j] / sm[i]), name="softmax")
    s = te.create_schedule(out.op)
    row = s[out].op.axis[0]
    for t in (mx, mxf, ex, sm):  # one row at a time, in cache
        s[t].compute_at(s[out], row)
    return CpuOp("softmax", s, [x, out], tuple(shape), dtype)


def qsoftmax(shape: Sequence[int], table_len: int, scale: float, mul: int, shift: int,
             bias_shape: Sequence[int] | None = None) -> CpuOp:
    """int8 softmax over the last axis (quantize's ``QSoftmax``, the numpy kernel's rule bit
    for bit): arguments the int8 scores, the float32 bias when ``bias_shape`` is given (its
    rows repeat over the scores' leading rows: the trailing axes of the scores' shape), then
    the int32 exp table of ``table_len`` entries. Integer after the bias, whose steps are one
    float64 division and ``rint`` as numpy's."""
    rows, cols = prod(shape[:-1]), shape[-1]
    x = te.placeholder((rows, cols), "int8", "x")
    table = te.placeholder((table_len,), "int32", "table")
    args = [x]
    lowest = te.const(-(1 << 30), "int32")
    if bias_shape is None:
        zm = te.compute((rows, cols), lambda i, j: x[i, j].astype("int32"), name="zm")
    else:
        brows = prod(bias_shape) // cols
        b = te.placeholder((brows, cols), "float32", "bias")
        args.append(b)

        def z(i, j):  # noqa: ANN001, ANN202 - an Expr builder
            f = b[i % brows, j].astype("float64")
            steps = te.clip(Call("rint", [f / te.const(float(scale), "float64")], "float64"),
                            float(-2 * MASK_STEPS), float(2 * MASK_STEPS)).astype("int32")
            v = te.clip(x[i, j].astype("int32") + steps, -MASK_STEPS, MASK_STEPS)
            return te.if_then_else(f < te.const(-DROP_BIAS, "float64"), lowest, v)
        zm = te.compute((rows, cols), z, name="zm")
    r1 = te.reduce_axis((0, cols), "r1")
    mx = te.compute((rows,), lambda i: te.max(zm[i, r1], axis=[r1]), name="mx")

    def exp(i, j):  # noqa: ANN001, ANN202 - an Expr builder
        d = mx[i] - zm[i, j]
        keep = te.all(zm[i, j] > lowest, d < table_len)
        return te.if_then_else(keep, table[te.min(d, table_len - 1)],
                               te.const(0, "int32")).astype("int64")
    e = te.compute((rows, cols), exp, name="e")
    r2 = te.reduce_axis((0, cols), "r2")
    sm = te.compute((rows,), lambda i: te.sum(e[i, r2], axis=[r2]), name="sm")
    one = te.const(1 << shift, "int64")

    def out(i, j):  # noqa: ANN001, ANN202 - an Expr builder
        y = (e[i, j] * (2 * mul) + sm[i] * one) // te.max(sm[i] * (2 * one), 1)
        return te.if_then_else(sm[i] > 0, te.clip(y, 0, QMAX),
                               te.const(0, "int64")).astype("int8")
    c = te.compute((rows, cols), out, name="qsoftmax")
    s = te.create_schedule(c.op)
    row = s[c].op.axis[0]
    for t in (zm, mx, e, sm):  # one row at a time, in cache
        s[t].compute_at(s[c], row)
    return CpuOp("qsoftmax", s, [*args, table, c], tuple(shape), "int8")


def qlayernorm(shape: Sequence[int], eps_c2: float) -> CpuOp:
    """int8 LayerNorm over the last axis (quantize's ``QLayerNorm``, the numpy kernel's rule
    bit for bit): arguments the int8 input, the int32 gamma and beta at the output's scale.
    Integer but for the per-row multiplier (float64 division, addition, square root, division
    and ``rint``, single correctly rounded operations as numpy's)."""
    rows, c = prod(shape[:-1]), shape[-1]
    i64, f64 = "int64", "float64"
    x = te.placeholder((rows, c), "int8", "x")
    g = te.placeholder((c,), "int32", "gamma")
    b = te.placeholder((c,), "int32", "beta")
    r1 = te.reduce_axis((0, c), "r1")
    sm = te.compute((rows,), lambda i: te.sum(x[i, r1].astype(i64), axis=[r1]), name="sm")
    d = te.compute((rows, c), lambda i, j: x[i, j].astype(i64) * c - sm[i], name="d")
    r2 = te.reduce_axis((0, c), "r2")
    v = te.compute((rows,), lambda i: te.sum(d[i, r2] * d[i, r2], axis=[r2]), name="v")
    rr = te.compute((rows,), lambda i: te.min(Call("rint", [
        te.const(float(1 << LN_BITS), f64) / te.sqrt(v[i].astype(f64) / te.const(float(c), f64)
                                                     + te.const(float(eps_c2), f64))], f64),
        te.const(LN_RMAX, f64)).astype(i64), name="r")
    sh = LN_BITS - LN_FRAC

    def out(i, j):  # noqa: ANN001, ANN202 - an Expr builder
        z = (d[i, j] * rr[i] + te.const(1 << (sh - 1), i64)) >> te.const(sh, i64)
        y = (z * g[j].astype(i64) + b[j].astype(i64)) >> te.const(LN_SHIFT, i64)
        return te.clip(y, -128, QMAX).astype("int8")
    c_ = te.compute((rows, c), out, name="qlayernorm")
    s = te.create_schedule(c_.op)
    row = s[c_].op.axis[0]
    for t in (sm, d, v, rr):  # one row at a time, in cache
        s[t].compute_at(s[c_], row)
    return CpuOp("qlayernorm", s, [x, g, b, c_], tuple(shape), "int8")


__all__ = ["CpuOp", "fast_exp", "add", "relu", "tanh", "max_pool2d", "avg_pool2d",
           "global_avg_pool2d", "dense", "conv2d", "softmax", "quantize", "dequantize", "qadd",
           "qglobal_avg_pool2d", "qsoftmax", "qlayernorm"]
