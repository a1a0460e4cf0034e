"""Packed conv2d_transpose on VTA: one template, output phases interleaved in the accumulator.

A stride-``s`` transposed convolution is ``s*s`` small convolutions (sub-pixel decomposition):
output row ``y = s*qy + ry`` only meets the kernel rows ``t`` with ``t = ry + pad - s*d`` for an
input row ``qy + d``. Each phase ``(ry, rx)`` is a stride-1 convolution of the undilated input
with its own ``T x T`` sub-kernel (:class:`Phases`), so no multiply-accumulate meets a zero of
the stride dilation (when ``s`` divides the kernel size: otherwise the shorter phases are padded
with zero taps to ``T``).

The compute is one tensor expression over ``(N, CO, OH/s, s, OW/s, s, BATCH, BLOCK_OUT)``,
whose memory layout is exactly that of the ``(N, CO, OH, OW, ...)`` output: the GEMM writes
every phase of an output tile into its interleaved place in the accumulator, and one STORE a
row writes the tile. The sub-kernels are laid out as one ``(s*T) x (s*T)`` kernel (phase
``ry`` at rows ``ry*T ...``; :func:`phase_kernel` builds it from the transposed-conv weights on
the host). The input offset of a phase is ``c1 * ry`` rows: affine in the phase when the
padding lets it be (always for stride 2); otherwise it goes into the sub-kernel as zero taps.
The schedule is conv2d's (the same knobs; ``tile_h``/``tile_w`` count rows and columns of
phase outputs) and the program goes through the tir pass pipeline and VTA code generation like
every VTA layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from vta.isa import Config

from .. import te
from ..env import Env
from ..errors import ScheduleError
from ..schedule import Schedule
from . import defaults, nn
from .vta import (
    MAX_VIRTUAL_THREADS,
    Epilogue,
    Operator,
    _check_knobs,
    _divisors,
    bind_cthreads,
    pads4,
    place_accumulator,
    place_gemm,
)


@dataclass(frozen=True)
class Phases:
    """One spatial dimension of a transposed convolution split into its ``s`` output phases.

    Output ``y = s*q + r`` (``q < out/s``) reads the input rows ``q + base + c1*r + m`` of the
    padded input (``m < taps``) against kernel row ``r + pad - s*(off + c1*r + m)`` when that
    is within the kernel (a zero tap otherwise)."""

    size: int  #: input rows
    kernel: int
    stride: int
    pad: int  #: the transposed conv's padding at the start
    out: int  #: output rows (a multiple of the stride)
    off: int  #: input offset of phase 0 (relative to q)
    c1: int  #: input offset step from one phase to the next (0 or 1)
    taps: int  #: sub-kernel taps of every phase
    pad_lo: int  #: zero rows above the input
    pad_hi: int  #: zero rows below the input

    @classmethod
    def of(cls, size: int, kernel: int, stride: int, pad: int, out: int) -> Phases:
        s = stride
        if out < 1 or out % s:
            raise ScheduleError(f"conv2d_transpose: {out} output rows are not a multiple of the "
                                f"stride {s}")
        lo = [-((kernel - 1 - r - pad) // s) for r in range(s)]  # ceil((r+pad-k+1)/s)
        hi = [(r + pad) // s for r in range(s)]
        c1 = lo[1] - lo[0] if s > 1 else 0
        if c1 not in (0, 1) or any(lo[r] != lo[0] + c1 * r for r in range(s)):
            c1 = 0  # not affine in the phase: the offsets go into the sub-kernels
        off = min(lo[r] - c1 * r for r in range(s))
        taps = max(hi[r] - (off + c1 * r) for r in range(s)) + 1
        last = out // s - 1 + off + c1 * (s - 1) + taps - 1
        return cls(size, kernel, s, pad, out, off, c1, taps, max(0, -off),
                   max(0, last - (size - 1)))

    @property
    def base(self) -> int:
        return self.off + self.pad_lo

    def tap(self, r: int, m: int) -> int | None:
        """The kernel row of phase ``r``'s tap ``m`` (None: a zero tap)."""
        t = r + self.pad - self.stride * (self.off + self.c1 * r + m)
        return t if 0 <= t < self.kernel else None

    def real_taps(self) -> int:
        return sum(self.tap(r, m) is not None for r in range(self.stride)
                   for m in range(self.taps))


def transpose_out(size: int, kernel: int, stride: int, pad_lo: int, pad_hi: int,
                  output_padding: int = 0) -> int:
    return (size - 1) * stride + kernel - pad_lo - pad_hi + output_padding


def phase_kernel(kernel: np.ndarray, py: Phases, px: Phases) -> np.ndarray:
    """The sub-kernels of every phase as one ``(s*T) x (s*T)`` kernel: axes 2 and 3 of
    ``kernel`` (the transposed conv's rows and columns, not flipped) are replaced; the others
    stay (unpacked (CI, CO, KH, KW) or packed (CI/BI, CO/BO, KH, KW, BI, BO))."""
    sh, th, sw, tw = py.stride, py.taps, px.stride, px.taps
    out = np.zeros((*kernel.shape[:2], sh * th, sw * tw, *kernel.shape[4:]), kernel.dtype)
    for r in range(sh):
        for m in range(th):
            ty = py.tap(r, m)
            if ty is None:
                continue
            for rx in range(sw):
                for mx in range(tw):
                    tx = px.tap(rx, mx)
                    if tx is not None:
                        out[:, :, r * th + m, rx * tw + mx] = kernel[:, :, ty, tx]
    return out


def packed_phase_kernel(kernel: np.ndarray, py: Phases, px: Phases) -> np.ndarray:
    """(CI/BI, CO/BO, KH, KW, BI, BO) transposed-conv weights -> the operator's kernel operand
    (CO/BO, CI/BI, s*T, s*T, BO, BI)."""
    return np.ascontiguousarray(phase_kernel(kernel, py, px).transpose(1, 0, 2, 3, 5, 4))


class PhasedOperator(Operator):
    """The operator computes (N, CO, OH/s, s, OW/s, s, BATCH, BLOCK_OUT), the same memory as
    the (N, CO, OH, OW, BATCH, BLOCK_OUT) output it returns."""

    def __call__(self, *inputs: np.ndarray) -> np.ndarray:
        return super().__call__(*inputs).reshape(self.info["shape"])

    def check_races(self, *inputs: np.ndarray) -> np.ndarray:
        return super().check_races(*inputs).reshape(self.info["shape"])


def _compute(env: Env, data_shape: Sequence[int], co: int, py: Phases, px: Phases,
             epilogue: Epilogue) -> dict[str, Any]:
    n, ci = data_shape[:2]
    sh, sw = py.stride, px.stride
    qh, qw = py.out // sh, px.out // sw
    data = te.placeholder(tuple(data_shape), name="data", dtype=env.inp_dtype)
    kshape = (co, ci, sh * py.taps, sw * px.taps, env.BLOCK_OUT, env.BLOCK_IN)
    kernel = te.placeholder(kshape, name="kernel", dtype=env.wgt_dtype)
    data_buf = nn.pad(data, (0, 0, py.pad_lo, px.pad_lo, 0, 0),
                      (0, 0, py.pad_hi, px.pad_hi, 0, 0), name="data_buf")
    kernel_buf = te.compute(kshape, lambda *i: kernel(*i), name="kernel_buf")
    ric = te.reduce_axis((0, ci), name="ic")
    rdy = te.reduce_axis((0, py.taps), name="dy")
    rdx = te.reduce_axis((0, px.taps), name="dx")
    rit = te.reduce_axis((0, env.BLOCK_IN), name="ic_tns")
    oshape = (n, co, qh, sh, qw, sw, env.BATCH, env.BLOCK_OUT)
    res_conv = te.compute(
        oshape,
        lambda b, o, qy, ry, qx, rx, bt, ot: te.sum(
            data_buf[b, ric, qy + py.base + py.c1 * ry + rdy, qx + px.base + px.c1 * rx + rdx,
                     bt, rit].astype(env.acc_dtype)
            * kernel_buf[o, ric, ry * py.taps + rdy, rx * px.taps + rdx, ot,
                         rit].astype(env.acc_dtype),
            axis=[ric, rdy, rdx, rit]),
        name="res_conv")
    epi = epilogue.compute(env, res_conv, (1, co, 1, 1, 1, 1, env.BATCH, env.BLOCK_OUT))
    return {"data": data, "kernel": kernel, "data_buf": data_buf, "kernel_buf": kernel_buf,
            "res_conv": res_conv, "epi": epi, "res": epi.res, "reduce": (ric, rdy, rdx, rit)}


def _schedule(env: Env, t: dict[str, Any], k: dict[str, int]) -> Schedule:
    """conv2d's schedule over the phase outputs: a tile of tile_h x tile_w phase positions
    holds every phase; the reduction runs over input-channel tiles, then the taps."""
    res, res_conv = t["res"], t["res_conv"]
    s = te.create_schedule(res.op)
    b, oc, qy, ry, qx, rx, b_tns, oc_tns = s[res].op.axis
    b_out, b_inn = s[res].split(b, factor=k["tile_b"])
    oc_out, oc_inn = s[res].split(oc, factor=k["tile_co"])
    y_out, y_inn = s[res].split(qy, factor=k["tile_h"])
    x_out, x_inn = s[res].split(qx, factor=k["tile_w"])
    s[res].reorder(b_out, oc_out, y_out, x_out, b_inn, oc_inn, y_inn, ry, x_inn, rx, b_tns,
                   oc_tns)
    bind_cthreads(s, res, b_out, [(y_out, k["h_nthread"]), (oc_out, k["oc_nthread"])])
    place_accumulator(s, env, res, x_out, res_conv, t["epi"])
    cb, co_, cqy, cry, cqx, crx, cbt, cot = s[res_conv].op.axis
    ic, dy, dx, ic_tns = t["reduce"]
    ic_out, ic_inn = s[res_conv].split(ic, factor=k["tile_ci"])
    s[res_conv].reorder(ic_out, co_, cqy, cry, ic_inn, dy, dx, cb, cqx, crx, cbt, cot, ic_tns)
    place_gemm(s, env, res_conv, ic_out, t["data_buf"], t["kernel_buf"], cbt)
    s[res].pragma(b_inn, env.dma_copy)
    return s


# ------------------------------------------------------------------------- knobs
def knob_space(data_shape: Sequence[int], co: int, py: Phases, px: Phases
               ) -> dict[str, list[int]]:
    n, ci = data_shape[:2]
    return {"tile_b": _divisors(n), "tile_h": _divisors(py.out // py.stride),
            "tile_w": _divisors(px.out // px.stride), "tile_ci": _divisors(ci),
            "tile_co": _divisors(co), "oc_nthread": [1, 2], "h_nthread": [1, 2]}


def fits(k: dict[str, int], py: Phases, px: Phases, cfg: Config) -> bool:
    """Whether a knob setting fits the on-chip buffers (threads double them)."""
    nt = k["oc_nthread"] * k["h_nthread"]
    ih = k["tile_h"] + py.c1 * (py.stride - 1) + py.taps - 1
    iw = k["tile_w"] + px.c1 * (px.stride - 1) + px.taps - 1
    phases = py.stride * px.stride
    inp = k["tile_b"] * k["tile_ci"] * ih * iw
    wgt = k["tile_co"] * k["tile_ci"] * phases * py.taps * px.taps
    acc = k["tile_b"] * k["tile_co"] * k["tile_h"] * k["tile_w"] * phases
    uops = k["tile_b"] * k["tile_w"] * px.stride * (k["tile_ci"] * py.taps * px.taps + 4)
    return (nt * inp <= cfg.inp_depth and nt * wgt <= cfg.wgt_depth
            and nt * acc + 2 * k["tile_co"] * nt <= cfg.acc_depth and uops * nt <= cfg.uop_depth)


def valid(k: dict[str, int], co: int, py: Phases, px: Phases, cfg: Config) -> bool:
    return (fits(k, py, px, cfg) and (py.out // py.stride // k["tile_h"]) % k["h_nthread"] == 0
            and (co // k["tile_co"]) % k["oc_nthread"] == 0
            and k["h_nthread"] * k["oc_nthread"] <= MAX_VIRTUAL_THREADS)


def default_choice(data_shape: Sequence[int], co: int, py: Phases, px: Phases, cfg: Config,
                   epilogue: Epilogue, threads: bool = True) -> Any:
    """The best knobs of the space as ranked by vta.sim.perf (searched like conv2d's default,
    cached per workload in the user cache)."""
    space = knob_space(data_shape, co, py, px)
    if not threads:
        space["oc_nthread"] = space["h_nthread"] = [1]
    qw = px.out // px.stride

    def cost(k: dict[str, int]) -> float:
        op = conv2d_transpose_phased(data_shape, co, py, px, cfg, epilogue, k)
        return defaults.program_cycles(op)[0]

    def seed_key(k: dict[str, int]) -> tuple:
        return (k["tile_w"] == qw, k["tile_b"] * k["tile_co"] * k["tile_h"] * k["tile_w"],
                k["tile_ci"], k["tile_h"])

    wl = {"template": "conv2d_transpose", "data": list(data_shape[:4]), "co": co,
          "phases": [list(vars(p).values()) for p in (py, px)],
          "epilogue": defaults._epi_key(epilogue), "threads": threads}
    return defaults._cached(wl, cfg, lambda: defaults.search(
        space, lambda k: valid(k, co, py, px, cfg), (seed_key,), cost))


def conv2d_transpose_phased(data_shape: Sequence[int], co: int, py: Phases, px: Phases,
                            cfg: Config, epilogue: Epilogue,
                            knobs: dict[str, int] | None = None) -> Operator:
    """The template (unbuilt): data (N, CI, H, W, BATCH, BLOCK_IN) tiles, ``co`` output tiles;
    call it on ``(data, phase kernel[, vectors])`` (:func:`packed_phase_kernel`)."""
    env = Env(cfg)
    if tuple(data_shape[4:]) != (env.BATCH, env.BLOCK_IN):
        raise ScheduleError(f"conv2d_transpose: data {tuple(data_shape)} is not packed for {env}")
    if max(py.pad_lo, py.pad_hi, px.pad_lo, px.pad_hi) > 15:
        raise ScheduleError("conv2d_transpose: the input padding exceeds the 4-bit LOAD pad "
                            "fields")
    k = dict(knobs) if knobs else default_choice(data_shape, co, py, px, cfg, epilogue).knobs
    _check_knobs(k)
    t = _compute(env, data_shape, co, py, px, epilogue)
    s = _schedule(env, t, k)
    args = [t["data"], t["kernel"], *t["epi"].operands, t["res"]]
    n = data_shape[0]
    return PhasedOperator("conv2d_transpose_packed", s, args, k, cfg, t["res"].shape,
                          info={"epilogue": epilogue, "phases": (py, px),
                                "shape": (n, co, py.out, px.out, env.BATCH, env.BLOCK_OUT),
                                "macs": n * co * data_shape[1] * py.real_taps() * px.real_taps()
                                * (py.out // py.stride) * (px.out // px.stride)},
                          build_opts={"init_in_first_iteration": True})


def conv2d_transpose_packed(data_shape: Sequence[int], kernel_shape: Sequence[int], *,
                            config: Config, strides: Sequence[int] = (1, 1),
                            padding: Sequence[int] = (0, 0),
                            output_padding: Sequence[int] = (0, 0), shift: int = 0,
                            relu: bool = False, clip: tuple[int, int] | None = None,
                            bias: bool = False, knobs: dict[str, int] | None = None,
                            target: str | None = "fsim") -> Operator:
    """Packed conv2d_transpose; kernel layout (CI/BI, CO/BO, KH, KW, BLOCK_IN, BLOCK_OUT);
    ``padding`` (ph, pw) or (top, left, bottom, right). The output rows and columns must be
    multiples of the stride. Call the result on ``(data, packed_phase_kernel(kernel,
    *op.info["phases"])[, bias])``."""
    n, ci, h, w = data_shape[:4]
    ci2, co, kh, kw = kernel_shape[:4]
    if ci2 != ci:
        raise ScheduleError(f"conv2d_transpose: data has {ci} channel tiles, kernel {ci2}")
    pt, pl, pb, pr = pads4(padding)
    (sh, sw), (oph, opw) = strides, output_padding
    py = Phases.of(h, kh, sh, pt, transpose_out(h, kh, sh, pt, pb, oph))
    px = Phases.of(w, kw, sw, pl, transpose_out(w, kw, sw, pl, pr, opw))
    return conv2d_transpose_phased(data_shape, co, py, px, config,
                                   Epilogue(bias, shift, relu, clip), knobs).built(target)


def conv2d_transpose_reference(data: np.ndarray, kernel: np.ndarray, strides: Sequence[int],
                               padding: Sequence[int], epilogue: Epilogue,
                               output_padding: Sequence[int] = (0, 0),
                               bias: np.ndarray | None = None) -> np.ndarray:
    """Scatter-form numpy reference of the packed conv2d_transpose (kernel (CI/BI, CO/BO, KH,
    KW, BI, BO); ``bias`` as the operator's operand)."""
    n, ci, h, w, bb, bi = data.shape
    _, co, kh, kw, _, bo = kernel.shape
    sh, sw = strides
    pt, pl, pb, pr = pads4(padding)
    full = np.zeros((n, co, (h - 1) * sh + kh + output_padding[0],
                     (w - 1) * sw + kw + output_padding[1], bb, bo), np.int64)
    d = data.astype(np.int64)
    k = kernel.astype(np.int64)
    for y in range(kh):
        for x in range(kw):
            contrib = np.einsum("ncyxbi,cdio->ndyxbo", d, k[:, :, y, x])
            full[:, :, y:y + (h - 1) * sh + 1:sh, x:x + (w - 1) * sw + 1:sw] += contrib
    oh = transpose_out(h, kh, sh, pt, pb, output_padding[0])
    ow = transpose_out(w, kw, sw, pl, pr, output_padding[1])
    acc = full[:, :, pt:pt + oh, pl:pl + ow].astype(np.int32)
    if bias is not None:
        bias = bias.reshape(1, co, 1, 1, bb, bo)
    return epilogue.reference(acc, bias)


__all__ = ["Phases", "phase_kernel", "packed_phase_kernel", "transpose_out",
           "conv2d_transpose_phased", "conv2d_transpose_packed", "conv2d_transpose_reference"]
