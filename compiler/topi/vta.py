"""VTA operators on packed layouts: compute, default schedule and tunable knobs.

Layouts (TVM VTA's): data NCHWnc = (N/BATCH, C/BLOCK_IN, H, W, BATCH, BLOCK_IN) int8; kernel
OIHWoi = (O/BLOCK_OUT, I/BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN) int8; output
(N/BATCH, O/BLOCK_OUT, OH, OW, BATCH, BLOCK_OUT) int8 after the epilogue
(``+ bias``, ``>> shift``, ``clip``). Accumulation is int32; the STORE keeps the low 8 bits, so
clip to [-128, 127] to saturate.

Knobs (as TVM's VTA schedules): ``tile_b``, ``tile_co``, ``tile_ci``, ``tile_h``, ``tile_w``
(tile sizes in packed units), ``oc_nthread`` and ``h_nthread`` (virtual threads over output
channels / rows). :func:`conv2d_knobs` gives a default that fits the buffers and
:func:`conv2d_knob_space` the candidate values a tuner may try.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from vta.isa import Config

from .. import te
from ..build import build
from ..env import Env
from ..errors import ScheduleError
from ..schedule import Schedule
from ..te.tensor import Tensor
from . import nn

KNOB_NAMES = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")


@dataclass
class Epilogue:
    """Element-wise work on the accumulator before the STORE (each step one ALU pass)."""

    bias: bool = False
    shift: int = 0
    relu: bool = False
    clip: tuple[int, int] | None = None

    def apply(self, env: Env, acc: Tensor, bias: Tensor | None, name: str
              ) -> tuple[Tensor, list[Tensor]]:
        stages: list[Tensor] = []
        cur = acc
        if self.bias:
            assert bias is not None
            b = cur
            # bias is (1, C/BLOCK_OUT, 1, ..., BATCH, BLOCK_OUT): broadcast over all but the
            # output-channel tile and the tile itself
            def with_bias(*i):
                idx = [0, i[1]] + [0] * (len(i) - 4) + [i[-2], i[-1]]
                return b(*i) + bias(*idx)

            cur = te.compute(acc.shape, with_bias, name=f"{name}_bias")
            stages.append(cur)
        if self.shift:
            prev, sh = cur, self.shift
            cur = te.compute(acc.shape, lambda *i: prev(*i) >> sh, name=f"{name}_shr")
            stages.append(cur)
        if self.relu:
            prev = cur
            cur = te.compute(acc.shape, lambda *i: te.max(prev(*i), 0), name=f"{name}_relu")
            stages.append(cur)
        if self.clip is not None:
            lo, hi = self.clip
            prev = cur
            cur = te.compute(acc.shape, lambda *i: te.clip(prev(*i), lo, hi),
                             name=f"{name}_clip")
            stages.append(cur)
        return cur, stages

    def reference(self, acc: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        x = acc.astype(np.int64)
        if self.bias:
            x = x + bias
        x = x.astype(np.int32)
        if self.shift:
            x = x >> self.shift
        if self.relu:
            x = np.maximum(x, 0)
        if self.clip is not None:
            x = np.clip(x, *self.clip)
        return x.astype(np.int32).astype(np.int8)


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


def conv2d_knob_space(data_shape: Sequence[int], kernel_shape: Sequence[int],
                      strides: Sequence[int] = (1, 1), padding: Sequence[int] = (0, 0)
                      ) -> dict[str, list[int]]:
    """Candidate values of each knob (divisors of the tiled extents)."""
    n, ci, h, w = data_shape[:4]
    co, _, kh, kw = kernel_shape[:4]
    oh = (h + 2 * padding[0] - kh) // strides[0] + 1
    ow = (w + 2 * padding[1] - kw) // strides[1] + 1
    return {"tile_b": _divisors(n), "tile_h": _divisors(oh), "tile_w": _divisors(ow),
            "tile_ci": _divisors(ci), "tile_co": _divisors(co), "oc_nthread": [1, 2],
            "h_nthread": [1, 2]}


def conv2d_fits(knobs: dict[str, int], kernel_shape: Sequence[int], strides: Sequence[int],
                cfg: Config) -> bool:
    """Whether a knob setting fits the on-chip buffers (threads double the buffers)."""
    kh, kw = kernel_shape[2:4]
    nt = knobs["oc_nthread"] * knobs["h_nthread"]
    ih = (knobs["tile_h"] - 1) * strides[0] + kh
    iw = (knobs["tile_w"] - 1) * strides[1] + kw
    inp = knobs["tile_b"] * knobs["tile_ci"] * ih * iw
    wgt = knobs["tile_co"] * knobs["tile_ci"] * kh * kw
    acc = knobs["tile_b"] * knobs["tile_co"] * knobs["tile_h"] * knobs["tile_w"]
    uops = knobs["tile_b"] * knobs["tile_w"] * (knobs["tile_ci"] * kh * kw + 4)
    return (nt * inp <= cfg.inp_depth and nt * wgt <= cfg.wgt_depth
            and nt * acc <= cfg.acc_depth and uops * nt <= cfg.uop_depth)


#: Effective DRAM bytes per cycle and per-transfer overhead used to rank tilings (the PYNQ-like
#: 64-bit port of vta.sim.perf: 16-beat bursts with ~20 cycles of latency each).
_BYTES_PER_CYCLE = 3.5
_STEP_OVERHEAD = 60


def conv2d_cost(knobs: dict[str, int], data_shape: Sequence[int], kernel_shape: Sequence[int],
                strides: Sequence[int], padding: Sequence[int], cfg: Config) -> float:
    """A rough cycle estimate used to rank tilings: max(compute, DRAM traffic) plus the
    pipeline fill of every output tile and a per-step instruction overhead."""
    n, ci, h, w = data_shape[:4]
    co, _, kh, kw = kernel_shape[:4]
    oh = (h + 2 * padding[0] - kh) // strides[0] + 1
    ow = (w + 2 * padding[1] - kw) // strides[1] + 1
    th, tw, tci, tco = knobs["tile_h"], knobs["tile_w"], knobs["tile_ci"], knobs["tile_co"]
    ih = (th - 1) * strides[0] + kh
    iw = (tw - 1) * strides[1] + kw
    tiles = (oh // th) * (ow // tw) * (co // tco) * (n // knobs["tile_b"])
    steps = tiles * (ci // tci)
    inp_b, wgt_b, out_b = cfg.inp_elem_bytes, cfg.wgt_elem_bytes, cfg.out_elem_bytes
    data = steps * tci * ih * iw * inp_b * knobs["tile_b"]
    wgt = steps * tco * tci * kh * kw * wgt_b
    out = n * co * oh * ow * out_b
    compute = n * co * oh * ow * ci * kh * kw
    memory = (data + wgt + out) / _BYTES_PER_CYCLE
    step_load = (tci * ih * iw * inp_b + tco * tci * kh * kw * wgt_b) / _BYTES_PER_CYCLE
    fill = step_load + th * tw * tco * (out_b / _BYTES_PER_CYCLE + 3)
    return max(compute, memory) + tiles * fill / max(
        1, knobs["oc_nthread"] * knobs["h_nthread"]) + steps * _STEP_OVERHEAD


def conv2d_knobs(data_shape: Sequence[int], kernel_shape: Sequence[int],
                 strides: Sequence[int] = (1, 1), padding: Sequence[int] = (0, 0),
                 cfg: Config | None = None, *, virtual_threads: bool = True) -> dict[str, int]:
    """The default tiling: the fitting knob setting with the lowest :func:`conv2d_cost`
    (two virtual threads, over output channels or rows, when ``virtual_threads``)."""
    cfg = cfg or Config()
    space = conv2d_knob_space(data_shape, kernel_shape, strides, padding)
    co_tiles = kernel_shape[0]
    oh_n = space["tile_h"][-1]
    best = None
    threads = [(2, 1), (1, 2)] if virtual_threads else [(1, 1)]
    for oc_nt, h_nt in threads:
        for th in space["tile_h"]:
            if (oh_n // th) % h_nt:
                continue
            for tw in space["tile_w"]:
                for tco in space["tile_co"]:
                    if (co_tiles // tco) % oc_nt:
                        continue
                    for tci in space["tile_ci"]:
                        k = {"tile_b": 1, "tile_h": th, "tile_w": tw, "tile_ci": tci,
                             "tile_co": tco, "oc_nthread": oc_nt, "h_nthread": h_nt}
                        if not conv2d_fits(k, kernel_shape, strides, cfg):
                            continue
                        cost = conv2d_cost(k, data_shape, kernel_shape, strides, padding, cfg)
                        if best is None or cost < best[0]:
                            best = (cost, k)
    if best is None and virtual_threads:
        return conv2d_knobs(data_shape, kernel_shape, strides, padding, cfg,
                            virtual_threads=False)
    if best is None:
        raise ScheduleError(f"no conv2d tiling of {tuple(data_shape)} x {tuple(kernel_shape)} "
                            "fits the on-chip buffers of this configuration")
    return best[1]


# ------------------------------------------------------------------------- conv2d
def conv2d_packed_compute(env: Env, data_shape: Sequence[int], kernel_shape: Sequence[int],
                          strides: Sequence[int], padding: Sequence[int], epilogue: Epilogue,
                          name: str = "conv2d", groups: int = 1) -> dict[str, Any]:
    n, ci, h, w, bb, bi = data_shape
    co, ci2, kh, kw, bo, bi2 = kernel_shape
    if (bb, bi, bo, bi2) != (env.BATCH, env.BLOCK_IN, env.BLOCK_OUT, env.BLOCK_IN) or \
            ci2 * groups != ci or co % groups:
        raise ScheduleError(f"{name}: data {tuple(data_shape)} / kernel {tuple(kernel_shape)} "
                            f"with {groups} group(s) are not packed for {env} (use pack_nchw / "
                            "pack_oihw; every group needs whole BLOCK channel tiles)")
    opg = co // groups  # output tiles per group
    sh, sw = strides
    ph, pw = padding
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    data = te.placeholder(tuple(data_shape), name="data", dtype=env.inp_dtype)
    kernel = te.placeholder(tuple(kernel_shape), name="kernel", dtype=env.wgt_dtype)
    bias = te.placeholder((1, co, 1, 1, env.BATCH, env.BLOCK_OUT), name="bias",
                          dtype=env.acc_dtype) if epilogue.bias else None
    data_buf = nn.pad(data, (0, 0, ph, pw, 0, 0), name="data_buf")
    kernel_buf = te.compute(kernel.shape, lambda *i: kernel(*i), name="kernel_buf")
    ric = te.reduce_axis((0, ci2), name="ic")
    rdy = te.reduce_axis((0, kh), name="dy")
    rdx = te.reduce_axis((0, kw), name="dx")
    rit = te.reduce_axis((0, env.BLOCK_IN), name="ic_tns")
    oshape = (n, co, oh, ow, env.BATCH, env.BLOCK_OUT)
    res_conv = te.compute(
        oshape,
        lambda b, o, y, x, bt, ot: te.sum(
            data_buf[b, (o // opg) * ci2 + ric if groups > 1 else ric, y * sh + rdy,
                     x * sw + rdx, bt, rit].astype(env.acc_dtype)
            * kernel_buf[o, ric, rdy, rdx, ot, rit].astype(env.acc_dtype),
            axis=[ric, rdy, rdx, rit]),
        name="res_conv")
    bias_buf = None
    if bias is not None:
        bias_buf = te.compute(bias.shape, lambda *i: bias(*i), name="bias_buf")
    last, epi = epilogue.apply(env, res_conv, bias_buf, "res")
    res = te.compute(oshape, lambda *i: last(*i).astype(env.out_dtype), name="res")
    return {"data": data, "kernel": kernel, "bias": bias, "data_buf": data_buf,
            "kernel_buf": kernel_buf, "bias_buf": bias_buf, "res_conv": res_conv, "epi": epi,
            "res": res, "reduce": (ric, rdy, rdx, rit), "oshape": oshape}


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
    if knobs.get("h_nthread", 1) > 1:
        th, y_out = s[res].split(y_out, nparts=knobs["h_nthread"])
        s[res].reorder(th, b_out)
        s[res].bind(th, te.thread_axis("cthread"))
    if knobs.get("oc_nthread", 1) > 1:
        tx, oc_out = s[res].split(oc_out, nparts=knobs["oc_nthread"])
        s[res].reorder(tx, b_out)
        s[res].bind(tx, te.thread_axis("cthread"))
    s[res_conv].compute_at(s[res], x_out)
    s[res_conv].set_scope(env.acc_scope)
    for st in t["epi"]:
        s[st].compute_at(s[res], x_out)
        s[st].set_scope(env.acc_scope)
        s[st].pragma(s[st].op.axis[0], env.alu)
    if t["bias_buf"] is not None:
        s[t["bias_buf"]].compute_at(s[res], x_out)
        s[t["bias_buf"]].set_scope(env.acc_scope)
        s[t["bias_buf"]].pragma(s[t["bias_buf"]].op.axis[0], env.dma_copy)
    cb, co_, cy, cx, cbt, cot = s[res_conv].op.axis
    ic, dy, dx, ic_tns = t["reduce"]
    ic_out, ic_inn = s[res_conv].split(ic, factor=knobs["tile_ci"])
    s[res_conv].reorder(ic_out, co_, cy, ic_inn, dy, dx, cb, cx, cbt, cot, ic_tns)
    s[t["data_buf"]].compute_at(s[res_conv], ic_out)
    s[t["kernel_buf"]].compute_at(s[res_conv], ic_out)
    s[t["data_buf"]].set_scope(env.inp_scope)
    s[t["kernel_buf"]].set_scope(env.wgt_scope)
    s[t["data_buf"]].pragma(s[t["data_buf"]].op.axis[0], env.dma_copy)
    s[t["kernel_buf"]].pragma(s[t["kernel_buf"]].op.axis[0], env.dma_copy)
    s[res_conv].tensorize(cbt, env.gemm)
    s[res].pragma(b_inn, env.dma_copy)
    return s


def conv2d_packed(data_shape: Sequence[int], kernel_shape: Sequence[int], *,
                  strides: Sequence[int] = (1, 1), padding: Sequence[int] = (0, 0),
                  shift: int = 0, relu: bool = False, clip: tuple[int, int] | None = None,
                  bias: bool = False, knobs: dict[str, int] | None = None,
                  config: Config | None = None, target: str | None = "fsim",
                  groups: int = 1) -> Operator:
    """Packed int8 conv2d with an int32 accumulator and a fused epilogue.

    Call the result on ``(data, kernel[, bias])`` numpy arrays; it returns the packed int8
    output. ``target=None`` returns the operator unbuilt (for tuners). ``groups`` > 1 makes a
    group convolution over channel tiles (see :func:`group_conv2d_packed`).
    """
    cfg = config or Config()
    env = Env(cfg)
    epi = Epilogue(bias, shift, relu, clip)
    t = conv2d_packed_compute(env, data_shape, kernel_shape, tuple(strides), tuple(padding), epi,
                              groups=groups)
    if knobs:
        k = dict(knobs)
    else:
        full = (data_shape[0], kernel_shape[1]) + tuple(data_shape[2:])
        k = conv2d_knobs(full, kernel_shape, strides, padding, cfg)
        if groups > 1:
            opg = kernel_shape[0] // groups
            k["tile_co"] = opg if k["tile_co"] % opg else k["tile_co"]
            k = _fit_groups(k, kernel_shape, strides, cfg, opg)
    _check_knobs(k)
    opg = kernel_shape[0] // groups
    if groups > 1 and (k["tile_co"] % opg if opg == 1 else k["tile_co"] != opg):
        raise ScheduleError(f"group conv2d: tile_co={k['tile_co']} must equal the {opg} output "
                            "tile(s) per group")
    s = conv2d_packed_schedule(env, t, k)
    args = [t["data"], t["kernel"]] + ([t["bias"]] if bias else []) + [t["res"]]
    # the GEMM reset goes into the first reduction step, after that step's loads: a thread's
    # next tile then starts with its loads, not with a reset that waits for its last store
    op = Operator("conv2d_packed", s, args, k, cfg, t["oshape"],
                  info={"epilogue": epi, "strides": tuple(strides), "padding": tuple(padding)},
                  build_opts={"init_in_first_iteration": True})
    if target is not None:
        op.build(target)
    return op


def _fit_groups(k: dict[str, int], kernel_shape: Sequence[int], strides: Sequence[int],
                cfg: Config, opg: int) -> dict[str, int]:
    # in a group conv the input tile follows the output tile: tile_ci covers its groups
    co_tiles = kernel_shape[0]
    # one group per step when groups span several output tiles (its input tiles are then
    # fixed during the step); several depthwise-style groups (opg == 1) may share a step
    cands = [d for d in _divisors(co_tiles) if d % opg == 0] if opg == 1 else [opg]
    for tco in cands[::-1]:
        for nt in (2, 1):
            if (co_tiles // tco) % nt:
                continue
            cand = dict(k, tile_co=tco, tile_ci=kernel_shape[1], oc_nthread=nt, h_nthread=1)
            probe = dict(cand, tile_ci=kernel_shape[1] * max(1, tco // opg))
            if conv2d_fits(probe, kernel_shape, strides, cfg):
                return cand
    raise ScheduleError("no group conv2d tiling fits the on-chip buffers")


def group_conv2d_packed(data_shape: Sequence[int], kernel_shape: Sequence[int], groups: int,
                        **kw: Any) -> Operator:
    """Packed group convolution: ``groups`` groups of whole channel tiles; the kernel is
    (CO/BLOCK_OUT, CI/BLOCK_IN/groups, KH, KW, BLOCK_OUT, BLOCK_IN). Depthwise convolutions run
    as TVM VTA ran MobileNet: one group per channel tile with block-diagonal weight tiles
    (:func:`depthwise_to_group_kernel`)."""
    return conv2d_packed(data_shape, kernel_shape, groups=groups, **kw)


class TransposedConv:
    """conv2d_transpose as ``stride**2`` phase convolutions (zeros of the stride skipped).

    Output row ``y`` with ``(y + pad) % stride == r`` only meets kernel rows ``r, r + stride,
    ...``: each phase (ry, rx) is a stride-1 conv2d_packed of the undilated input with that
    sub-kernel (flipped), and the phases are interleaved into the output on the host.
    """

    def __init__(self, data_shape: Sequence[int], kernel_shape: Sequence[int],
                 strides: Sequence[int], padding: Sequence[int], epilogue: Epilogue,
                 config: Config, target: str | None, knobs: dict[str, int] | None):
        ci, co, kh, kw, bi, bo = kernel_shape
        n, ci2, h, w, bb, _ = data_shape
        sh, sw = strides
        ph, pw = padding
        if ci2 != ci:
            raise ScheduleError(f"conv2d_transpose: data has {ci2} channel tiles, kernel {ci}")
        if kh < sh or kw < sw:
            raise ScheduleError("conv2d_transpose: the kernel must be at least as large as the "
                                "stride")
        self.oh = (h - 1) * sh + kh - 2 * ph
        self.ow = (w - 1) * sw + kw - 2 * pw
        if self.oh < 1 or self.ow < 1:
            raise ScheduleError("conv2d_transpose: padding leaves no output")
        self.out_shape = (n, co, self.oh, self.ow, bb, bo)
        self.strides, self.padding, self.kernel_shape = (sh, sw), (ph, pw), kernel_shape
        self.epilogue, self.cfg = epilogue, config
        self.phases = []
        for ry in range(sh):
            for rx in range(sw):
                my, mx = -(-(kh - ry) // sh), -(-(kw - rx) // sw)
                qy = self._q_range(ry, ph, sh, self.oh)
                qx = self._q_range(rx, pw, sw, self.ow)
                if qy is None or qx is None:
                    continue
                op = conv2d_packed(data_shape, (co, ci, my, mx, bo, bi), strides=(1, 1),
                                   padding=(my - 1, mx - 1), bias=epilogue.bias,
                                   shift=epilogue.shift, relu=epilogue.relu,
                                   clip=epilogue.clip, knobs=knobs, config=config,
                                   target=target)
                self.phases.append((ry, rx, my, mx, qy, qx, op))
        self.info = {"epilogue": epilogue, "strides": self.strides, "padding": self.padding}
        self.name = "conv2d_transpose_packed"

    @staticmethod
    def _q_range(r: int, p: int, s: int, out: int) -> tuple[int, int] | None:
        lo = -((r - p) // s)  # ceil((p - r) / s)
        hi = (out + p - 1 - r) // s
        return (lo, hi) if hi >= lo else None

    def _sub_kernel(self, kernel: np.ndarray, ry: int, rx: int, my: int, mx: int
                    ) -> np.ndarray:
        sh, sw = self.strides
        rows = [ry + (my - 1 - m) * sh for m in range(my)]
        cols = [rx + (mx - 1 - m) * sw for m in range(mx)]
        sub = kernel[:, :, rows][:, :, :, cols]  # (CI, CO, my, mx, BI, BO)
        return np.ascontiguousarray(sub.transpose(1, 0, 2, 3, 5, 4))

    def _run(self, data: np.ndarray, kernel: np.ndarray, rest: tuple, race: bool
             ) -> np.ndarray:
        out = np.zeros(self.out_shape, np.int8)
        sh, sw = self.strides
        ph, pw = self.padding
        for ry, rx, my, mx, (qy0, qy1), (qx0, qx1), op in self.phases:
            g = self._sub_kernel(kernel, ry, rx, my, mx)
            res = op.check_races(data, g, *rest) if race else op(data, g, *rest)
            y0, x0 = qy0 * sh + ry - ph, qx0 * sw + rx - pw
            out[:, :, y0::sh, x0::sw][:, :, :qy1 - qy0 + 1, :qx1 - qx0 + 1] = \
                res[:, :, qy0:qy1 + 1, qx0:qx1 + 1]
        return out

    def __call__(self, data: np.ndarray, kernel: np.ndarray, *rest: np.ndarray) -> np.ndarray:
        return self._run(data, kernel, rest, False)

    def check_races(self, data: np.ndarray, kernel: np.ndarray, *rest: np.ndarray
                    ) -> np.ndarray:
        return self._run(data, kernel, rest, True)


def conv2d_transpose_packed(data_shape: Sequence[int], kernel_shape: Sequence[int], *,
                            strides: Sequence[int] = (1, 1), padding: Sequence[int] = (0, 0),
                            shift: int = 0, relu: bool = False,
                            clip: tuple[int, int] | None = None, bias: bool = False,
                            knobs: dict[str, int] | None = None, config: Config | None = None,
                            target: str | None = "fsim") -> TransposedConv:
    """Packed conv2d_transpose; kernel layout (CI/BI, CO/BO, KH, KW, BLOCK_IN, BLOCK_OUT).

    Runs as stride**2 phase convolutions that skip the zeros of the stride dilation
    (:class:`TransposedConv`); call it on ``(data, kernel[, bias])``.
    """
    return TransposedConv(data_shape, kernel_shape, strides, padding,
                          Epilogue(bias, shift, relu, clip), config or Config(), target, knobs)


def conv2d_transpose_reference(data: np.ndarray, kernel: np.ndarray, strides: Sequence[int],
                               padding: Sequence[int], epilogue: Epilogue) -> np.ndarray:
    """Scatter-form numpy reference of the packed conv2d_transpose."""
    n, ci, h, w, bb, bi = data.shape
    _, co, kh, kw, _, bo = kernel.shape
    sh, sw = strides
    ph, pw = padding
    full = np.zeros((n, co, (h - 1) * sh + kh, (w - 1) * sw + kw, bb, bo), np.int64)
    d = data.astype(np.int64)
    k = kernel.astype(np.int64)
    for y in range(kh):
        for x in range(kw):
            contrib = np.einsum("ncyxbi,cdio->ndyxbo", d, k[:, :, y, x])
            full[:, :, y:y + (h - 1) * sh + 1:sh, x:x + (w - 1) * sw + 1:sw] += contrib
    oh = (h - 1) * sh + kh - 2 * ph
    ow = (w - 1) * sw + kw - 2 * pw
    acc = full[:, :, ph:ph + oh, pw:pw + ow].astype(np.int32)
    return epilogue.reference(acc, None)


def _check_knobs(k: dict[str, int]) -> None:
    for name in KNOB_NAMES:
        if name not in k:
            k.setdefault(name, 1)
    unknown = set(k) - set(KNOB_NAMES)
    if unknown:
        raise ScheduleError(f"unknown knob(s) {', '.join(sorted(unknown))}; knobs are "
                            f"{', '.join(KNOB_NAMES)}")


def conv2d_acc_reference(data: np.ndarray, kernel: np.ndarray, strides: Sequence[int],
                         padding: Sequence[int], groups: int = 1) -> np.ndarray:
    """Packed-layout numpy conv2d accumulator (int32, wrap-around like the hardware)."""
    if groups > 1:
        cig = kernel.shape[1]
        opg = kernel.shape[0] // groups
        return np.concatenate(
            [conv2d_acc_reference(data[:, g * cig:(g + 1) * cig],
                                  kernel[g * opg:(g + 1) * opg], strides, padding)
             for g in range(groups)], axis=1)
    n, ci, h, w, bb, bi = data.shape
    co, _, kh, kw, bo, _ = kernel.shape
    ph, pw = padding
    sh, sw = strides
    d = np.pad(data.astype(np.int64), ((0, 0), (0, 0), (ph, ph), (pw, pw), (0, 0), (0, 0)))
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    acc = np.zeros((n, co, oh, ow, bb, bo), np.int64)
    k64 = kernel.astype(np.int64)
    for dy in range(kh):
        for dx in range(kw):
            win = d[:, :, dy:dy + sh * (oh - 1) + 1:sh, dx:dx + sw * (ow - 1) + 1:sw]
            acc += np.einsum("ncyxbi,kcoi->nkyxbo", win, k64[:, :, dy, dx])
    return acc.astype(np.int32)


def conv2d_reference(data: np.ndarray, kernel: np.ndarray, strides: Sequence[int],
                     padding: Sequence[int], epilogue: Epilogue,
                     bias: np.ndarray | None = None, groups: int = 1) -> np.ndarray:
    """Packed-layout numpy reference: the accumulator, then the epilogue (int8 result)."""
    return epilogue.reference(conv2d_acc_reference(data, kernel, strides, padding, groups),
                              bias)


# ------------------------------------------------------------------------- dense
def dense_packed(data_shape: Sequence[int], weight_shape: Sequence[int], *, shift: int = 0,
                 relu: bool = False, clip: tuple[int, int] | None = None, bias: bool = False,
                 knobs: dict[str, int] | None = None, config: Config | None = None,
                 target: str | None = "fsim") -> Operator:
    """Packed int8 dense: data (N/BATCH, K/BLOCK_IN, BATCH, BLOCK_IN), weight
    (M/BLOCK_OUT, K/BLOCK_IN, BLOCK_OUT, BLOCK_IN) -> (N/BATCH, M/BLOCK_OUT, BATCH, BLOCK_OUT).
    With ``bias`` the operator takes an int32 (1, M/BLOCK_OUT, BATCH, BLOCK_OUT) bias
    (:func:`~vta.compiler.topi.pack.pack_bias` then ``reshape(1, -1, BATCH, BLOCK_OUT)``).

    Knobs: tile_b, tile_co (output tiles per step), tile_ci (reduction tiles per load),
    oc_nthread (virtual threads).
    """
    cfg = config or Config()
    env = Env(cfg)
    n, k, bb, bi = data_shape
    m, k2, bo, bi2 = weight_shape
    if k != k2 or (bb, bi, bo, bi2) != (env.BATCH, env.BLOCK_IN, env.BLOCK_OUT, env.BLOCK_IN):
        raise ScheduleError(f"dense: {tuple(data_shape)} x {tuple(weight_shape)} are not packed "
                            f"for {env}")
    kn = {"tile_b": 1, "tile_co": 1, "tile_ci": 1, "oc_nthread": 1}
    if knobs is None:
        kn["tile_b"] = max(d for d in _divisors(n) if d <= 8)
        kn["tile_ci"] = max(d for d in _divisors(k) if d * kn["tile_b"] <= cfg.inp_depth // 2
                            and d <= 64)
        kn["oc_nthread"] = 2 if m % 2 == 0 else 1
        per = m // kn["oc_nthread"]
        kn["tile_co"] = max(d for d in _divisors(per)
                            if d * kn["tile_ci"] <= cfg.wgt_depth // 2 and d <= 64)
    else:
        kn.update(knobs)
    data = te.placeholder(tuple(data_shape), name="data", dtype=env.inp_dtype)
    weight = te.placeholder(tuple(weight_shape), name="weight", dtype=env.wgt_dtype)
    data_buf = te.compute(data.shape, lambda *i: data(*i), name="data_buf")
    weight_buf = te.compute(weight.shape, lambda *i: weight(*i), name="weight_buf")
    rk = te.reduce_axis((0, k), name="k_o")
    rt = te.reduce_axis((0, env.BLOCK_IN), name="k_i")
    oshape = (n, m, env.BATCH, env.BLOCK_OUT)
    res_gem = te.compute(oshape, lambda b, o, bt, ot: te.sum(
        data_buf[b, rk, bt, rt].astype(env.acc_dtype)
        * weight_buf[o, rk, ot, rt].astype(env.acc_dtype), axis=[rk, rt]), name="res_gem")
    epi = Epilogue(bias, shift, relu, clip)
    bias_t = te.placeholder((1, m, env.BATCH, env.BLOCK_OUT), name="bias",
                            dtype=env.acc_dtype) if bias else None
    bias_buf = te.compute(bias_t.shape, lambda *i: bias_t(*i), name="bias_buf") if bias \
        else None
    last, epi_stages = epi.apply(env, res_gem, bias_buf, "res")
    res = te.compute(oshape, lambda *i: last(*i).astype(env.out_dtype), name="res")
    s = te.create_schedule(res.op)
    b, o, bt, ot = s[res].op.axis
    b_out, b_inn = s[res].split(b, factor=kn["tile_b"])
    o_out, o_inn = s[res].split(o, factor=kn["tile_co"])
    s[res].reorder(b_out, o_out, b_inn, o_inn, bt, ot)
    if kn["oc_nthread"] > 1:
        tx, o_out = s[res].split(o_out, nparts=kn["oc_nthread"])
        s[res].reorder(tx, b_out)
        s[res].bind(tx, te.thread_axis("cthread"))
    s[res_gem].compute_at(s[res], o_out)
    s[res_gem].set_scope(env.acc_scope)
    for st in epi_stages:
        s[st].compute_at(s[res], o_out)
        s[st].set_scope(env.acc_scope)
        s[st].pragma(s[st].op.axis[0], env.alu)
    if bias_buf is not None:
        s[bias_buf].compute_at(s[res], o_out)
        s[bias_buf].set_scope(env.acc_scope)
        s[bias_buf].pragma(s[bias_buf].op.axis[0], env.dma_copy)
    gb, go, gbt, got = s[res_gem].op.axis
    k_out, k_inn = s[res_gem].split(rk, factor=kn["tile_ci"])
    s[res_gem].reorder(k_out, go, k_inn, gb, gbt, got, rt)
    s[data_buf].compute_at(s[res_gem], k_out)
    s[weight_buf].compute_at(s[res_gem], k_out)
    s[data_buf].set_scope(env.inp_scope)
    s[weight_buf].set_scope(env.wgt_scope)
    s[data_buf].pragma(s[data_buf].op.axis[0], env.dma_copy)
    s[weight_buf].pragma(s[weight_buf].op.axis[0], env.dma_copy)
    s[res_gem].tensorize(gbt, env.gemm)
    s[res].pragma(s[res].leaf_iter_vars[-4], env.dma_copy)
    args = [data, weight] + ([bias_t] if bias else []) + [res]
    op = Operator("dense_packed", s, args, kn, cfg, oshape, info={"epilogue": epi},
                  build_opts={"init_in_first_iteration": True})
    if target is not None:
        op.build(target)
    return op


def dense_reference(data: np.ndarray, weight: np.ndarray, epilogue: Epilogue,
                    bias: np.ndarray | None = None) -> np.ndarray:
    acc = np.einsum("nkbi,mkoi->nmbo", data.astype(np.int64), weight.astype(np.int64))
    return epilogue.reference(acc.astype(np.int32), bias)


# ------------------------------------------------------------------------- element-wise
_EW_OPS = ("add", "min", "max", "relu", "clip", "shr", "shl", "add_imm", "mul_imm")


def elementwise_packed(op: str, shape: Sequence[int], *, imm: int = 0,
                       lo: int = -128, hi: int = 127, tile: int | None = None,
                       config: Config | None = None, target: str | None = "fsim") -> Operator:
    """Element-wise ALU operators on packed int32 tiles (N, C, ..., BATCH, BLOCK_OUT) -> int8.

    ``op``: add/min/max (two inputs), relu, clip (lo, hi), shr/shl/add_imm/mul_imm (``imm``).
    The result is stored as int8 (low 8 bits; use clip to saturate).
    """
    if op not in _EW_OPS:
        raise ScheduleError(f"unknown element-wise op {op!r}; choose one of {', '.join(_EW_OPS)}")
    cfg = config or Config()
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
    for buf in (a_buf, b_buf):
        if buf is not None:
            s[buf].compute_at(s[res], outer)
            s[buf].set_scope(env.acc_scope)
            s[buf].pragma(s[buf].op.axis[0], env.dma_copy)
    s[r].compute_at(s[res], outer)
    s[r].set_scope(env.acc_scope)
    s[r].pragma(s[r].op.axis[0], env.alu)
    s[res].pragma(inner, env.dma_copy)
    args = [a] + ([b] if b is not None else []) + [res]
    op_ = Operator(f"alu_{op}", s, args, {"tile": tile}, cfg, shape)
    if target is not None:
        op_.build(target)
    return op_


__all__ = [
    "Operator", "Epilogue", "TransposedConv", "KNOB_NAMES", "conv2d_packed",
    "conv2d_packed_compute", "conv2d_packed_schedule", "conv2d_knobs", "conv2d_knob_space",
    "conv2d_fits", "conv2d_cost", "conv2d_reference", "conv2d_acc_reference",
    "group_conv2d_packed", "conv2d_transpose_packed", "conv2d_transpose_reference",
    "dense_packed", "dense_reference", "elementwise_packed",
]
