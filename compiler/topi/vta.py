"""VTA operators on packed layouts: compute, default schedule and tunable knobs.

Layouts (TVM VTA's): data NCHWnc = (N/BATCH, C/BLOCK_IN, H, W, BATCH, BLOCK_IN) int8; kernel
OIHWoi = (O/BLOCK_OUT, I/BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN) int8; output
(N/BATCH, O/BLOCK_OUT, OH, OW, BATCH, BLOCK_OUT) int8 after the epilogue
(``+ bias``, ``>> shift``, ``clip``). Accumulation is int32; the STORE keeps the low 8 bits, so
clip to [-128, 127] to saturate.

Knobs (as TVM's VTA schedules): ``tile_b``, ``tile_co``, ``tile_ci``, ``tile_h``, ``tile_w``
(tile sizes in packed units), ``oc_nthread`` and ``h_nthread`` (virtual threads over output
channels / rows). :func:`vta.compiler.topi.operators.conv2d_knobs` gives a default that fits
the buffers and :func:`conv2d_knob_space` the candidate values a tuner may try.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from vta.isa import Config

from .. import te
from ..build import build
from ..env import Env
from ..errors import ScheduleError
from ..schedule import Schedule
from ..te.tensor import IterVar, Tensor
from . import nn
from .alu import MAX_ROUND_SHIFT, rshift
from .residual import Residual, ResidualTensors, residual_compute, residual_entries

KNOB_NAMES = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")


@dataclass
class Epilogue:
    """Element-wise work on the accumulator before the STORE (each step one ALU pass)."""

    bias: bool = False
    shift: int = 0
    relu: bool = False
    clip: tuple[int, int] | None = None
    #: shift right by a per-output-channel amount (an int32 operand shaped like the bias,
    #: loaded into the accumulator; a negative amount shifts left), after ``shift``
    shift_vector: bool = False
    #: fixed-point requantization after the shifts: ``x * mul`` (an immediate, or with
    #: ``mul_vector`` a per-output-channel operand like the shift vector), then the rounding
    #: shift ``(x + 2**(shift2-1)) >> shift2`` (vta.compiler.graph.quantize.requantize;
    #: on the ALU :func:`vta.compiler.topi.alu.rshift`)
    mul: int = 1
    mul_vector: bool = False
    shift2: int = 0
    #: a residual add fused after the clip (:mod:`vta.compiler.topi.residual`): one more
    #: int8 operand, shaped like the output, and the identity weight that widens it
    residual: Residual | None = None

    @property
    def multiplies(self) -> bool:
        return self.mul_vector or self.mul != 1

    def compute(self, env: Env, acc: Tensor, vec: tuple[int, ...]) -> EpilogueTensors:
        """The epilogue after the accumulator ``acc``: its per-output-channel int32 operands
        (shaped ``vec``: ``(1, C/BLOCK_OUT, 1, ..., BATCH, BLOCK_OUT)``), their copies in the
        accumulator, one ALU stage a step (``res_{step}``) and the int8 result ``res``."""
        want = (("bias", self.bias), ("shift", self.shift_vector), ("mul", self.mul_vector))
        ops = {k: te.placeholder(vec, name=k, dtype=env.acc_dtype) for k, on in want if on}
        bufs = {k: te.compute(vec, lambda *i, t=t: t(*i), name=f"{k}_buf")
                for k, t in ops.items()}
        stages = self._stages(acc, bufs)
        rt = None
        if self.residual is not None:
            rt = residual_compute(env, self.residual, stages[-1] if stages else acc)
            stages += rt.stages
        last = stages[-1] if stages else acc
        res = te.compute(acc.shape, lambda *i: last(*i).astype(env.out_dtype), name="res")
        return EpilogueTensors(list(ops.values()), list(bufs.values()), stages, res, rt)

    def _stages(self, acc: Tensor, bufs: dict[str, Tensor]) -> list[Tensor]:
        def per_channel(v: Tensor) -> Callable[[tuple], Any]:
            # broadcast over all but the output-channel tile and the tile itself
            return lambda i: v(*[0, i[1]] + [0] * (len(i) - 4) + [i[-2], i[-1]])

        steps: list[tuple[str, Callable[[Any, tuple], Any]]] = []
        if self.bias:
            b = per_channel(bufs["bias"])
            steps.append(("bias", lambda x, i: x + b(i)))
        if self.shift_vector:
            sv = per_channel(bufs["shift"])
            steps.append(("vshr", lambda x, i: x >> sv(i)))
        if self.shift:
            steps.append(("shr", lambda x, i: x >> self.shift))
        if self.mul_vector:
            mv = per_channel(bufs["mul"])
            steps.append(("vmul", lambda x, i: x * mv(i)))
        elif self.mul != 1:
            steps.append(("mul", lambda x, i: x * self.mul))
        if self.multiplies and self.shift2:
            steps.append(("rshr2", lambda x, i: rshift(x, self.shift2)))
        if self.relu:
            steps.append(("relu", lambda x, i: te.max(x, 0)))
        if self.clip is not None:
            lo, hi = self.clip
            steps.append(("clip", lambda x, i: te.clip(x, lo, hi)))
        stages: list[Tensor] = []
        cur = acc
        for step, fn in steps:
            cur = te.compute(acc.shape, lambda *i, prev=cur, fn=fn: fn(prev(*i), i),
                             name=f"res_{step}")
            stages.append(cur)
        return stages

    def reference(self, acc: np.ndarray, bias: np.ndarray | None,
                  shift_vec: np.ndarray | None = None, mul_vec: np.ndarray | None = None,
                  residual: np.ndarray | None = None) -> np.ndarray:
        """The int8 result (``residual``: the fused add's other operand)."""
        y = self._reference(acc, bias, shift_vec, mul_vec)
        return y if self.residual is None else self.residual.reference(y, residual)

    def _reference(self, acc: np.ndarray, bias: np.ndarray | None,
                   shift_vec: np.ndarray | None, mul_vec: np.ndarray | None) -> np.ndarray:
        x = acc.astype(np.int64)
        if self.bias:
            x = x + bias
        x = x.astype(np.int32).astype(np.int64)
        if self.shift_vector:
            sv = np.asarray(shift_vec, np.int64)
            x = np.where(sv >= 0, x >> np.maximum(sv, 0), _wrap32(x << np.maximum(-sv, 0)))
        if self.shift:
            x = x >> self.shift if self.shift > 0 else _wrap32(x << -self.shift)
        if self.multiplies:
            x = _wrap32(x * (np.asarray(mul_vec, np.int64) if self.mul_vector else self.mul))
            if self.shift2:
                # one ADD of the rounding term wraps; beyond the 16-bit immediate the rounding
                # runs in two SHRs (vta.compiler.topi.alu.rshift), exact without a wrap
                r = x + (1 << (self.shift2 - 1))
                x = (_wrap32(r) if self.shift2 <= MAX_ROUND_SHIFT else r) >> self.shift2
        if self.relu:
            x = np.maximum(x, 0)
        if self.clip is not None:
            x = np.clip(x, *self.clip)
        return x.astype(np.int32).astype(np.int8)


@dataclass
class EpilogueTensors:
    """An :class:`Epilogue` as tensors: its int32 ``operands`` (placeholders, in the operator's
    argument order), their copies in the accumulator (``bufs``, each loaded by DMA), its ALU
    ``stages`` and the int8 result ``res``."""

    operands: list[Tensor]
    bufs: list[Tensor]
    stages: list[Tensor]
    res: Tensor
    residual: ResidualTensors | None = None

    def arguments(self, data: Tensor, kernel: Tensor) -> list[Tensor]:
        """The operator's arguments: ``data``, the fused add's operand, ``kernel``, the
        per-channel operands, the fused add's identity weight, the result."""
        r = self.residual
        return [data, *([r.operand] if r else []), kernel, *self.operands,
                *([r.eye] if r else []), self.res]


#: A template's knobs: given, or a function of its epilogue giving them (the default knobs'
#: search, called once the shapes are checked).
Knobs = dict[str, int] | Callable[[Epilogue], dict[str, int]]


def _wrap32(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)


@dataclass
class Operator:
    """A scheduled operator: schedule, arguments, knobs; compile with :meth:`build`."""

    name: str
    sch: Schedule
    args: list[Tensor]
    knobs: dict[str, int]
    cfg: Config
    out_shape: tuple[int, ...]
    out_dtype: str = "int8"
    info: dict[str, Any] = field(default_factory=dict)
    #: default options of :func:`vta.compiler.build` for this operator (``build`` overrides)
    build_opts: dict[str, Any] = field(default_factory=dict)
    _module: Any = None

    def build(self, target: str = "fsim", **kw: Any) -> Any:
        opts = {**self.build_opts, **kw}
        self._module = build(self.sch, self.args, target, self.cfg, self.name, **opts)
        return self._module

    def built(self, target: str | None) -> Operator:
        """This operator, built for ``target`` (left unbuilt for ``None``: for tuners)."""
        if target is not None:
            self.build(target)
        return self

    @property
    def module(self) -> Any:
        if self._module is None:
            self.build()
        return self._module

    def __call__(self, *inputs: np.ndarray) -> np.ndarray:
        out = np.zeros(self.out_shape, np.dtype(self.out_dtype))
        self.module(*inputs, out)
        return out

    def check_races(self, *inputs: np.ndarray) -> np.ndarray:
        out = np.zeros(self.out_shape, np.dtype(self.out_dtype))
        return self.module.check_races(*inputs, out)[0]


# ------------------------------------------------------------------------- knobs
def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def pads4(padding: Sequence[int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from ``(ph, pw)`` (symmetric) or four values."""
    if len(padding) == 2:
        return (padding[0], padding[1], padding[0], padding[1])
    if len(padding) == 4:
        return tuple(int(p) for p in padding)  # type: ignore[return-value]
    raise ScheduleError(f"padding must have 2 or 4 values, not {tuple(padding)}")


def conv2d_out_hw(h: int, w: int, kh: int, kw: int, strides: Sequence[int],
                  padding: Sequence[int], dilation: Sequence[int] = (1, 1)) -> tuple[int, int]:
    pt, pl, pb, pr = pads4(padding)
    oh = (h + pt + pb - dilation[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + pl + pr - dilation[1] * (kw - 1) - 1) // strides[1] + 1
    return oh, ow


def conv2d_knob_space(data_shape: Sequence[int], kernel_shape: Sequence[int],
                      strides: Sequence[int] = (1, 1), padding: Sequence[int] = (0, 0),
                      dilation: Sequence[int] = (1, 1)) -> dict[str, list[int]]:
    """Candidate values of each knob (divisors of the tiled extents)."""
    n, ci, h, w = data_shape[:4]
    co, ci2, kh, kw = kernel_shape[:4]
    oh, ow = conv2d_out_hw(h, w, kh, kw, strides, padding, dilation)
    return {"tile_b": _divisors(n), "tile_h": _divisors(oh), "tile_w": _divisors(ow),
            "tile_ci": _divisors(ci2), "tile_co": _divisors(co), "oc_nthread": [1, 2],
            "h_nthread": [1, 2]}


def conv2d_fits(knobs: dict[str, int], kernel_shape: Sequence[int], strides: Sequence[int],
                cfg: Config, dilation: Sequence[int] = (1, 1), groups: int = 1,
                residual: bool = False) -> bool:
    """Whether a knob setting fits the on-chip buffers (threads double the buffers). In a
    depthwise-style group conv (one output tile per group) the input tile follows the output
    tile: a step holds ``tile_co`` groups' input tiles."""
    kh, kw = kernel_shape[2:4]
    nt = knobs["oc_nthread"] * knobs["h_nthread"]
    ih = (knobs["tile_h"] - 1) * strides[0] + dilation[0] * (kh - 1) + 1
    iw = (knobs["tile_w"] - 1) * strides[1] + dilation[1] * (kw - 1) + 1
    opg = kernel_shape[0] // groups
    tci = knobs["tile_ci"] * (max(1, knobs["tile_co"] // opg) if groups > 1 else 1)
    inp = knobs["tile_b"] * tci * ih * iw
    wgt = knobs["tile_co"] * knobs["tile_ci"] * kh * kw
    acc = knobs["tile_b"] * knobs["tile_co"] * knobs["tile_h"] * knobs["tile_w"]
    uops = knobs["tile_b"] * knobs["tile_w"] * (knobs["tile_ci"] * kh * kw + 4)
    if residual:  # a fused add's operand: its input tile and its widened copy
        inp += residual_entries(knobs)
        acc += residual_entries(knobs)
        uops += knobs["tile_b"] * knobs["tile_w"] * 4
    return (nt * inp <= cfg.inp_depth and nt * wgt <= cfg.wgt_depth
            and nt * acc + 2 * knobs["tile_co"] * nt <= cfg.acc_depth
            and uops * nt <= cfg.uop_depth)


#: Virtual threads a conv2d configuration may use in all (oc_nthread x h_nthread).
MAX_VIRTUAL_THREADS = 4


def conv2d_valid(k: dict[str, int], data_shape: Sequence[int], kernel_shape: Sequence[int],
                 strides: Sequence[int], padding: Sequence[int], cfg: Config,
                 dilation: Sequence[int] = (1, 1), groups: int = 1,
                 residual: bool = False) -> bool:
    """Whether a knob setting is a valid schedule: it fits, the threads divide their loops,
    and a group conv's output tile lies within one group (or covers whole one-tile groups)."""
    oh, _ = conv2d_out_hw(data_shape[2], data_shape[3], kernel_shape[2], kernel_shape[3],
                          strides, padding, dilation)
    co = kernel_shape[0]
    opg = co // groups
    if groups > 1 and opg > 1 and opg % k["tile_co"]:
        return False  # an output tile within one group: its input tiles are that group's
    return (conv2d_fits(k, kernel_shape, strides, cfg, dilation, groups, residual)
            and (oh // k["tile_h"]) % k["h_nthread"] == 0
            and (co // k["tile_co"]) % k["oc_nthread"] == 0
            and k["h_nthread"] * k["oc_nthread"] <= MAX_VIRTUAL_THREADS)


# ------------------------------------------------------------------------- conv2d
def conv2d_packed_compute(env: Env, data_shape: Sequence[int], kernel_shape: Sequence[int],
                          strides: Sequence[int], padding: Sequence[int], epilogue: Epilogue,
                          name: str = "conv2d", groups: int = 1,
                          dilation: Sequence[int] = (1, 1)) -> dict[str, Any]:
    n, ci, h, w, bb, bi = data_shape
    co, ci2, kh, kw, bo, bi2 = kernel_shape
    if (bb, bi, bo, bi2) != (env.BATCH, env.BLOCK_IN, env.BLOCK_OUT, env.BLOCK_IN) or \
            ci2 * groups != ci or co % groups:
        raise ScheduleError(f"{name}: data {tuple(data_shape)} / kernel {tuple(kernel_shape)} "
                            f"with {groups} group(s) are not packed for {env} (use pack_nchw / "
                            "pack_oihw; every group needs whole BLOCK channel tiles)")
    opg = co // groups  # output tiles per group
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = pads4(padding)
    oh, ow = conv2d_out_hw(h, w, kh, kw, strides, padding, dilation)
    if oh < 1 or ow < 1:
        raise ScheduleError(f"{name}: the padded input is smaller than the kernel")
    data = te.placeholder(tuple(data_shape), name="data", dtype=env.inp_dtype)
    kernel = te.placeholder(tuple(kernel_shape), name="kernel", dtype=env.wgt_dtype)
    data_buf = nn.pad(data, (0, 0, pt, pl, 0, 0), (0, 0, pb, pr, 0, 0), name="data_buf")
    kernel_buf = te.compute(kernel.shape, lambda *i: kernel(*i), name="kernel_buf")
    ric = te.reduce_axis((0, ci2), name="ic")
    rdy = te.reduce_axis((0, kh), name="dy")
    rdx = te.reduce_axis((0, kw), name="dx")
    rit = te.reduce_axis((0, env.BLOCK_IN), name="ic_tns")
    oshape = (n, co, oh, ow, env.BATCH, env.BLOCK_OUT)
    res_conv = te.compute(
        oshape,
        lambda b, o, y, x, bt, ot: te.sum(
            data_buf[b, (o // opg) * ci2 + ric if groups > 1 else ric, y * sh + rdy * dh,
                     x * sw + rdx * dw, bt, rit].astype(env.acc_dtype)
            * kernel_buf[o, ric, rdy, rdx, ot, rit].astype(env.acc_dtype),
            axis=[ric, rdy, rdx, rit]),
        name="res_conv")
    epi = epilogue.compute(env, res_conv, (1, co, 1, 1, env.BATCH, env.BLOCK_OUT))
    return {"data": data, "kernel": kernel, "data_buf": data_buf, "kernel_buf": kernel_buf,
            "res_conv": res_conv, "epi": epi, "res": epi.res, "reduce": (ric, rdy, rdx, rit),
            "oshape": oshape}


def bind_cthreads(s: Schedule, res: Tensor, first: IterVar,
                  splits: Sequence[tuple[IterVar, int]]) -> list[IterVar]:
    """Virtual threads of a packed GEMM schedule: each ``(axis, n)`` with ``n > 1`` (in
    order) splits ``n`` parts off the output loop ``axis``, moves them before ``first`` (the
    outermost loop) and binds them to a ``cthread``. Returns each axis's inner loop (the axis
    itself where ``n`` is 1)."""
    inner = []
    for axis, n in splits:
        if n > 1:
            th, axis = s[res].split(axis, nparts=n)
            s[res].reorder(th, first)
            s[res].bind(th, te.thread_axis("cthread"))
        inner.append(axis)
    return inner


def place_accumulator(s: Schedule, env: Env, res: Tensor, at: IterVar, acc: Tensor,
                      epi: EpilogueTensors) -> None:
    """Under the output tile loop ``at`` of ``res``: the GEMM accumulator ``acc`` and the
    epilogue's ALU stages in the accumulator scratchpad, and the epilogue's per-channel
    operands loaded there by DMA, one LOAD ACC of tile_co entries each."""
    s[acc].compute_at(s[res], at)
    s[acc].set_scope(env.acc_scope)
    r = epi.residual
    if r is not None:  # the fused add's operand: LOAD INP, widened by an identity GEMM
        dma_load(s, env, res, at, env.inp_scope, [r.operand_buf])
        dma_load(s, env, res, at, env.wgt_scope, [r.eye_buf])
        s[r.wide].compute_at(s[res], at)
        s[r.wide].set_scope(env.acc_scope)
        rk, rt = s[r.wide].op.reduce_axis
        s[r.wide].reorder(rk, *s[r.wide].op.axis, rt)
        s[r.wide].tensorize(s[r.wide].op.axis[-2], env.gemm)
    place_alu_stages(s, env, res, at, epi.stages)
    dma_load(s, env, res, at, env.acc_scope, epi.bufs)


def place_alu_stages(s: Schedule, env: Env, res: Tensor, at: IterVar,
                     stages: Sequence[Tensor]) -> None:
    """The ALU ``stages`` under the loop ``at`` of ``res``, in the accumulator scratchpad."""
    for st in stages:
        s[st].compute_at(s[res], at)
        s[st].set_scope(env.acc_scope)
        s[st].pragma(s[st].op.axis[0], env.alu)


def dma_load(s: Schedule, env: Env, stage: Tensor, at: IterVar, scope: str,
             bufs: Sequence[Tensor | None]) -> None:
    """Each of ``bufs`` (``None`` where absent) loaded by DMA into the ``scope`` scratchpad
    under the loop ``at`` of ``stage``."""
    for buf in bufs:
        if buf is not None:
            s[buf].compute_at(s[stage], at)
            s[buf].set_scope(scope)
            s[buf].pragma(s[buf].op.axis[0], env.dma_copy)


def place_gemm(s: Schedule, env: Env, gemm: Tensor, at: IterVar, inp: Tensor, wgt: Tensor,
               tensor_axis: IterVar) -> None:
    """The GEMM stage ``gemm`` tensorized from ``tensor_axis`` on, its input and weight tiles
    (``inp``, ``wgt``) loaded by DMA under its reduction loop ``at``."""
    dma_load(s, env, gemm, at, env.inp_scope, [inp])
    dma_load(s, env, gemm, at, env.wgt_scope, [wgt])
    s[gemm].tensorize(tensor_axis, env.gemm)


def conv2d_packed_schedule(env: Env, t: dict[str, Any], knobs: dict[str, int]) -> Schedule:
    """TVM's VTA conv2d schedule: output tiles, virtual threads, DMA, tensorized GEMM, ALU."""
    res, res_conv = t["res"], t["res_conv"]
    s = te.create_schedule(res.op)
    b, oc, y, x, b_tns, oc_tns = s[res].op.axis
    b_out, b_inn = s[res].split(b, factor=knobs["tile_b"])
    oc_out, oc_inn = s[res].split(oc, factor=knobs["tile_co"])
    y_out, y_inn = s[res].split(y, factor=knobs["tile_h"])
    x_out, x_inn = s[res].split(x, factor=knobs["tile_w"])
    s[res].reorder(b_out, oc_out, y_out, x_out, b_inn, oc_inn, y_inn, x_inn, b_tns, oc_tns)
    bind_cthreads(s, res, b_out, [(y_out, knobs.get("h_nthread", 1)),
                                   (oc_out, knobs.get("oc_nthread", 1))])
    place_accumulator(s, env, res, x_out, res_conv, t["epi"])
    cb, co_, cy, cx, cbt, cot = s[res_conv].op.axis
    ic, dy, dx, ic_tns = t["reduce"]
    ic_out, ic_inn = s[res_conv].split(ic, factor=knobs["tile_ci"])
    s[res_conv].reorder(ic_out, co_, cy, ic_inn, dy, dx, cb, cx, cbt, cot, ic_tns)
    place_gemm(s, env, res_conv, ic_out, t["data_buf"], t["kernel_buf"], cbt)
    s[res].pragma(b_inn, env.dma_copy)
    return s


def conv2d_operator(data_shape: Sequence[int], kernel_shape: Sequence[int], *,
                    config: Config, strides: Sequence[int] = (1, 1),
                    padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1),
                    shift: int = 0, relu: bool = False, clip: tuple[int, int] | None = None,
                    bias: bool = False, shift_vector: bool = False,
                    knobs: Knobs, target: str | None = "fsim",
                    groups: int = 1, mul: int = 1, mul_vector: bool = False, shift2: int = 0,
                    residual: Residual | None = None) -> Operator:
    """Packed int8 conv2d with an int32 accumulator and a fused epilogue.

    Call the result on ``(data, kernel[, bias][, shift])`` numpy arrays; it returns the packed
    int8 output. ``padding``: (ph, pw) or (top, left, bottom, right). ``shift_vector`` adds a
    per-channel shift operand shaped like the bias; ``mul``/``mul_vector``/``shift2`` the
    fixed-point requantization (see :class:`Epilogue`; a vector is one more such operand).
    ``residual`` fuses a residual add (:mod:`vta.compiler.topi.residual`): the arguments are
    then ``(data, other, kernel, bias..., eye)``.
    ``knobs``: the knobs, or a function of the epilogue giving them (after the shapes are
    checked; :func:`vta.compiler.topi.operators.conv2d_packed` passes the default knobs'
    search, ranked by vta.sim.perf, cached). ``target=None`` returns the
    operator unbuilt (for tuners). ``groups`` > 1 makes a group convolution over channel tiles
    (see :func:`vta.compiler.topi.operators.group_conv2d_packed`).
    """
    env = Env(config)
    epi = Epilogue(bias, shift, relu, clip, shift_vector, mul, mul_vector, shift2, residual)
    t = conv2d_packed_compute(env, data_shape, kernel_shape, tuple(strides), tuple(padding), epi,
                              groups=groups, dilation=tuple(dilation))
    k = dict(knobs(epi) if callable(knobs) else knobs)
    _check_knobs(k)
    opg = kernel_shape[0] // groups
    if groups > 1 and opg > 1 and opg % k["tile_co"]:
        raise ScheduleError(f"group conv2d: tile_co={k['tile_co']} must divide the {opg} output "
                            "tiles per group")
    s = conv2d_packed_schedule(env, t, k)
    args = t["epi"].arguments(t["data"], t["kernel"])
    # the GEMM reset goes into the first reduction step, after that step's loads: a thread's
    # next tile then starts with its loads, not with a reset that waits for its last store
    return Operator("conv2d_packed", s, args, k, config, t["oshape"],
                    info={"epilogue": epi, "strides": tuple(strides), "padding": tuple(padding),
                          "dilation": tuple(dilation), "groups": groups},
                    build_opts={"init_in_first_iteration": True}).built(target)


def _check_knobs(k: dict[str, int]) -> None:
    for name in KNOB_NAMES:
        if name not in k:
            k.setdefault(name, 1)
    unknown = set(k) - set(KNOB_NAMES)
    if unknown:
        raise ScheduleError(f"unknown knob(s) {', '.join(sorted(unknown))}; knobs are "
                            f"{', '.join(KNOB_NAMES)}")


def conv2d_acc_reference(data: np.ndarray, kernel: np.ndarray, strides: Sequence[int],
                         padding: Sequence[int], groups: int = 1,
                         dilation: Sequence[int] = (1, 1)) -> np.ndarray:
    """Packed-layout numpy conv2d accumulator (int32, wrap-around like the hardware)."""
    if groups > 1:
        cig = kernel.shape[1]
        opg = kernel.shape[0] // groups
        return np.concatenate(
            [conv2d_acc_reference(data[:, g * cig:(g + 1) * cig],
                                  kernel[g * opg:(g + 1) * opg], strides, padding, 1, dilation)
             for g in range(groups)], axis=1)
    n, ci, h, w, bb, bi = data.shape
    co, _, kh, kw, bo, _ = kernel.shape
    pt, pl, pb, pr = pads4(padding)
    sh, sw = strides
    dh, dw = dilation
    d = np.pad(data.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr), (0, 0), (0, 0)))
    oh, ow = conv2d_out_hw(h, w, kh, kw, strides, padding, dilation)
    acc = np.zeros((n, co, oh, ow, bb, bo), np.int64)
    k64 = kernel.astype(np.int64)
    for dy in range(kh):
        for dx in range(kw):
            y0, x0 = dy * dh, dx * dw
            win = d[:, :, y0:y0 + sh * (oh - 1) + 1:sh, x0:x0 + sw * (ow - 1) + 1:sw]
            acc += np.einsum("ncyxbi,kcoi->nkyxbo", win, k64[:, :, dy, dx])
    return acc.astype(np.int32)


def conv2d_reference(data: np.ndarray, kernel: np.ndarray, strides: Sequence[int],
                     padding: Sequence[int], epilogue: Epilogue,
                     bias: np.ndarray | None = None, groups: int = 1) -> np.ndarray:
    """Packed-layout numpy reference: the accumulator, then the epilogue (int8 result)."""
    return epilogue.reference(conv2d_acc_reference(data, kernel, strides, padding, groups),
                              bias)


# ------------------------------------------------------------------------- dense
def dense_operator(data_shape: Sequence[int], weight_shape: Sequence[int], *, config: Config,
                   shift: int = 0, relu: bool = False, clip: tuple[int, int] | None = None,
                   bias: bool = False, shift_vector: bool = False,
                   knobs: Knobs, target: str | None = "fsim",
                   mul: int = 1, mul_vector: bool = False, shift2: int = 0,
                   residual: Residual | None = None) -> Operator:
    """Packed int8 dense: data (N/BATCH, K/BLOCK_IN, BATCH, BLOCK_IN), weight
    (M/BLOCK_OUT, K/BLOCK_IN, BLOCK_OUT, BLOCK_IN) -> (N/BATCH, M/BLOCK_OUT, BATCH, BLOCK_OUT).
    With ``bias`` (and ``shift_vector``) the operator takes int32 (1, M/BLOCK_OUT, BATCH,
    BLOCK_OUT) operands (:func:`~vta.compiler.topi.pack.pack_bias` then
    ``reshape(1, -1, BATCH, BLOCK_OUT)``).

    Knobs: tile_b, tile_co (output tiles per step), tile_ci (reduction tiles per load),
    oc_nthread (virtual threads), or a function of the epilogue giving them (after the shapes
    are checked; :func:`vta.compiler.topi.operators.dense_packed` passes the default knobs').
    ``residual``: a fused residual add, as in :func:`conv2d_operator`.
    """
    env = Env(config)
    n, k, bb, bi = data_shape
    m, k2, bo, bi2 = weight_shape
    if k != k2 or (bb, bi, bo, bi2) != (env.BATCH, env.BLOCK_IN, env.BLOCK_OUT, env.BLOCK_IN):
        raise ScheduleError(f"dense: {tuple(data_shape)} x {tuple(weight_shape)} are not packed "
                            f"for {env}")
    epi = Epilogue(bias, shift, relu, clip, shift_vector, mul, mul_vector, shift2, residual)
    kn = {"tile_b": 1, "tile_co": 1, "tile_ci": 1, "oc_nthread": 1}
    kn.update(knobs(epi) if callable(knobs) else knobs)
    s, args, oshape = gemm_packed(env, data_shape, weight_shape, epi, kn)
    return Operator("dense_packed", s, args, kn, config, oshape, info={"epilogue": epi},
                    build_opts={"init_in_first_iteration": True}).built(target)


def gemm_packed(env: Env, data_shape: Sequence[int], weight_shape: Sequence[int],
                epi: Epilogue, kn: dict[str, int]
                ) -> tuple[Schedule, list[Tensor], tuple[int, ...]]:
    """The packed GEMM of dense and of matmul, declared and scheduled once: data
    ([G,] N, K, BATCH, BLOCK_IN) x weight ([G,] M, K, BLOCK_OUT, BLOCK_IN) -> ([G,] N, M,
    BATCH, BLOCK_OUT) with ``epi``, shapes checked by the caller. A leading group axis ``G``
    (matmul's flattened batch and heads) is the outermost loop, not tiled: each group loads
    its own weight tiles. Returns the schedule, the arguments and the output shape."""
    grouped = len(data_shape) == 5
    n, k = data_shape[-4], data_shape[-3]
    m = weight_shape[-4]
    data = te.placeholder(tuple(data_shape), name="data", dtype=env.inp_dtype)
    weight = te.placeholder(tuple(weight_shape), name="weight", dtype=env.wgt_dtype)
    data_buf = te.compute(data.shape, lambda *i: data(*i), name="data_buf")
    weight_buf = te.compute(weight.shape, lambda *i: weight(*i), name="weight_buf")
    rk = te.reduce_axis((0, k), name="k_o")
    rt = te.reduce_axis((0, env.BLOCK_IN), name="k_i")

    def product(g: tuple, b: Any, o: Any, bt: Any, ot: Any) -> Any:
        return te.sum(data_buf[(*g, b, rk, bt, rt)].astype(env.acc_dtype)
                      * weight_buf[(*g, o, rk, ot, rt)].astype(env.acc_dtype), axis=[rk, rt])
    oshape = (*data_shape[:-4], n, m, env.BATCH, env.BLOCK_OUT)
    res_gem = te.compute(oshape, (lambda gg, b, o, bt, ot: product((gg,), b, o, bt, ot))
                         if grouped else (lambda b, o, bt, ot: product((), b, o, bt, ot)),
                         name="res_gem")
    et = epi.compute(env, res_gem, (1, m, env.BATCH, env.BLOCK_OUT))
    res = et.res
    s = te.create_schedule(res.op)
    *group, b, o, bt, ot = s[res].op.axis
    b_out, b_inn = s[res].split(b, factor=kn["tile_b"])
    o_out, o_inn = s[res].split(o, factor=kn["tile_co"])
    s[res].reorder(*group, b_out, o_out, b_inn, o_inn, bt, ot)
    (o_out,) = bind_cthreads(s, res, (*group, b_out)[0], [(o_out, kn["oc_nthread"])])
    place_accumulator(s, env, res, o_out, res_gem, et)
    *_, gb, go, gbt, got = s[res_gem].op.axis
    k_out, k_inn = s[res_gem].split(rk, factor=kn["tile_ci"])
    s[res_gem].reorder(k_out, go, k_inn, gb, gbt, got, rt)
    place_gemm(s, env, res_gem, k_out, data_buf, weight_buf, gbt)
    s[res].pragma(s[res].leaf_iter_vars[-4], env.dma_copy)
    return s, et.arguments(data, weight), oshape


def dense_knob_space(n: int, k: int, m: int) -> dict[str, list[int]]:
    """Candidate values of the dense knobs (shapes in tiles)."""
    return {"tile_b": _divisors(n), "tile_ci": _divisors(k), "tile_co": _divisors(m),
            "oc_nthread": [1, 2]}


def dense_valid(v: dict[str, int], n: int, k: int, m: int, cfg: Config,
                residual: bool = False) -> bool:
    """Whether dense knobs divide the layer and fit the buffers (threads double them; a
    fused add's operand takes an input and an accumulator tile more)."""
    nt = v["oc_nthread"]
    extra = v["tile_b"] * v["tile_co"] if residual else 0
    return (n % v["tile_b"] == 0 and k % v["tile_ci"] == 0 and m % v["tile_co"] == 0
            and (m // v["tile_co"]) % nt == 0
            and nt * (v["tile_b"] * v["tile_ci"] + extra) <= cfg.inp_depth
            and nt * v["tile_co"] * v["tile_ci"] <= cfg.wgt_depth
            and nt * (v["tile_b"] * v["tile_co"] + extra) + 2 * nt * v["tile_co"]
            <= cfg.acc_depth
            and v["tile_b"] * (v["tile_ci"] + 4 + (4 if residual else 0)) * nt <= cfg.uop_depth)


def dense_reference(data: np.ndarray, weight: np.ndarray, epilogue: Epilogue,
                    bias: np.ndarray | None = None) -> np.ndarray:
    acc = np.einsum("nkbi,mkoi->nmbo", data.astype(np.int64), weight.astype(np.int64))
    return epilogue.reference(acc.astype(np.int32), bias)


# ------------------------------------------------------------------------- element-wise
_EW_OPS = ("add", "min", "max", "relu", "clip", "shr", "shl", "add_imm", "mul_imm")


def elementwise_packed(op: str, shape: Sequence[int], *, imm: int = 0,
                       lo: int = -128, hi: int = 127, tile: int | None = None,
                       config: Config, target: str | None = "fsim") -> Operator:
    """Element-wise ALU operators on packed int32 tiles (N, C, ..., BATCH, BLOCK_OUT) -> int8.

    ``op``: add/min/max (two inputs), relu, clip (lo, hi), shr/shl/add_imm/mul_imm (``imm``).
    The result is stored as int8 (low 8 bits; use clip to saturate).
    """
    if op not in _EW_OPS:
        raise ScheduleError(f"unknown element-wise op {op!r}; choose one of {', '.join(_EW_OPS)}")
    cfg = config
    env = Env(cfg)
    shape = tuple(shape)
    if shape[-2:] != (env.BATCH, env.BLOCK_OUT):
        raise ScheduleError(f"{op}: shape {shape} must end with the accumulator tile "
                            f"({env.BATCH}, {env.BLOCK_OUT})")
    a = te.placeholder(shape, name="a", dtype=env.acc_dtype)
    b = te.placeholder(shape, name="b", dtype=env.acc_dtype) if op in ("add", "min", "max") \
        else None
    a_buf = te.compute(shape, lambda *i: a(*i), name="a_buf")
    b_buf = te.compute(shape, lambda *i: b(*i), name="b_buf") if b is not None else None
    fn = {
        "add": lambda *i: a_buf(*i) + b_buf(*i),
        "min": lambda *i: te.min(a_buf(*i), b_buf(*i)),
        "max": lambda *i: te.max(a_buf(*i), b_buf(*i)),
        "relu": lambda *i: te.max(a_buf(*i), 0),
        "clip": lambda *i: te.clip(a_buf(*i), lo, hi),
        "shr": lambda *i: a_buf(*i) >> imm,
        "shl": lambda *i: a_buf(*i) << imm,
        "add_imm": lambda *i: a_buf(*i) + imm,
        "mul_imm": lambda *i: a_buf(*i) * imm,
    }[op]
    r = te.compute(shape, fn, name="res_alu")
    res = te.compute(shape, lambda *i: r(*i).astype(env.out_dtype), name="res")
    s = te.create_schedule(res.op)
    if len(shape) < 3:
        raise ScheduleError(f"{op}: shape {shape} needs at least one dimension before the tile")
    n_bufs = 2 if b is not None else 1
    if tile is None:
        tile = max(d for d in _divisors(shape[-3]) if d * n_bufs <= cfg.acc_depth // 2)
    ax = s[res].op.axis
    outer, inner = s[res].split(ax[-3], factor=tile)
    dma_load(s, env, res, outer, env.acc_scope, (a_buf, b_buf))
    place_alu_stages(s, env, res, outer, [r])
    s[res].pragma(inner, env.dma_copy)
    args = [a] + ([b] if b is not None else []) + [res]
    return Operator(f"alu_{op}", s, args, {"tile": tile}, cfg, shape).built(target)


__all__ = [
    "Operator", "Epilogue", "KNOB_NAMES", "Knobs", "conv2d_operator",
    "conv2d_packed_compute", "conv2d_packed_schedule", "conv2d_knob_space",
    "conv2d_fits", "conv2d_valid", "conv2d_out_hw", "pads4", "MAX_VIRTUAL_THREADS",
    "dense_knob_space", "dense_valid", "conv2d_reference", "conv2d_acc_reference",
    "dense_operator", "dense_reference", "elementwise_packed",
]
