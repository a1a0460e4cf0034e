"""Quantized element-wise operators on VTA's ALU: int8 in, int8 out.

Each operator reads its int8 inputs in the packed activation layout (the layout the conv and
dense templates read and write), viewed as ``(T, 1, BATCH, BLOCK)`` tiles: the layout of an
element-wise op does not matter, so a whole NCHWnc tensor is one run of ``T`` tiles. The
accumulator holds int32 only, and VTA has no widening load, so an input reaches it through the
GEMM core: a product with the identity matrix (a 1 x BLOCK x BLOCK int8 constant operand), one
GEMM micro-op per tile, which keeps the DRAM traffic at one byte per element. The ALU then
runs the op's integer rule (:mod:`vta.compiler.ops.int8_kernels` defines each one; the numpy
kernels there are the specification this file is tested against bit for bit):

- ``add`` (``QAdd``, a residual add with both inputs rescaled): ``clip(rshift(a * ma + b * mb,
  k), lo, hi)``: MUL by an immediate per input, the two-operand ADD, the rounding shift, MAX,
  MIN;
- ``clip`` (``QClip``, ReLU / ReLU6 / Clip after a non-conv op): MAX, MIN;
- ``leaky_relu`` (``QLeakyRelu`` with ``0 <= alpha <= 1``): ``max(x, rshift(x * m, k))``, equal
  to the reference's ``max(x, 0) + rshift(min(x, 0) * m, k)`` for such alphas (the input is
  loaded twice: one copy is scaled, then the two-operand MAX);
- ``hard_sigmoid`` (``QHardSigmoid``): ``clip(rshift(x * m + bias, k), 0, one)``;
- ``hard_swish`` (``QHardSwish``): the hard sigmoid ``h`` as above, then the two-operand MUL
  ``x * h`` and ``clip(rshift(x * h * m2, k2), -128, 127)``.

``rshift(v, k) = (v + 2**(k-1)) >> k`` is the rounding shift of :mod:`vta.compiler.topi.alu`
(shared with the conv2d/dense epilogue; a shift beyond the 16-bit immediate's reach runs in two
SHRs).

Knobs: ``tile`` (tiles per step) and ``nthread`` (virtual threads, so loads, ALU work and
stores of consecutive steps overlap); :func:`elementwise_default` ranks the settings that fit
by vta.sim.perf.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from vta.isa import Config

from .. import ops, te
from ..env import Env
from ..errors import ScheduleError
from ..te.tensor import Tensor
from .alu import fits_imm, rshift
from .defaults import Choice, _cached, program_cycles
from .vta import Operator, dma_load, place_alu_stages

#: Operators and the attributes each one takes (all ints; see the module doc).
OPS: dict[str, tuple[str, ...]] = {
    "add": ("mul_a", "mul_b", "shift", "lo", "hi"),
    "clip": ("lo", "hi"),
    "leaky_relu": ("mul", "shift"),
    "hard_sigmoid": ("mul", "bias", "shift", "one"),
    "hard_swish": ("mul", "bias", "shift", "one", "mul2", "shift2"),
}


@dataclass(frozen=True)
class Spec:
    """One quantized element-wise operator: its kind and integer attributes."""

    kind: str
    attrs: tuple[tuple[str, int], ...]

    @classmethod
    def make(cls, kind: str, **attrs: int) -> Spec:
        if kind not in OPS:
            raise ScheduleError(f"unknown element-wise op {kind!r}; choose one of "
                                f"{', '.join(OPS)}")
        missing = set(OPS[kind]) - set(attrs)
        if missing:
            raise ScheduleError(f"element-wise {kind} needs {', '.join(sorted(missing))}")
        spec = cls(kind, tuple((k, int(attrs[k])) for k in OPS[kind]))
        spec.check()
        return spec

    def __getitem__(self, key: str) -> int:
        return dict(self.attrs)[key]

    @property
    def n_inputs(self) -> int:
        return 2 if self.kind == "add" else 1

    @property
    def copies(self) -> int:
        """Accumulator copies of the input(s) the ALU program needs."""
        return 1 if self.kind in ("clip", "hard_sigmoid") else 2

    def check(self) -> None:
        """Every immediate fits the ALU's 16-bit field (a ScheduleError names the one that
        does not: the op then runs on the CPU)."""
        a = dict(self.attrs)
        imms = {k: a[k] for k in ("mul_a", "mul_b", "mul", "mul2", "lo", "hi", "one")
                if k in a}
        if "bias" in a:
            imms["bias"] = a["bias"]
        for k, v in imms.items():
            if not fits_imm(v):
                raise ScheduleError(f"element-wise {self.kind}: {k} = {v} does not fit the "
                                    "ALU's 16-bit immediate")
        for k in ("shift", "shift2"):
            if k in a and not 0 <= a[k] <= 31:
                raise ScheduleError(f"element-wise {self.kind}: {k} = {a[k]} is not a shift "
                                    "of 0..31")
        if self.kind == "leaky_relu" and not 0 <= a["mul"] <= (1 << a["shift"]):
            raise ScheduleError("element-wise leaky_relu: alpha outside [0, 1] is not "
                                "max(x, alpha x)")


def _alu_stages(spec: Spec, acc: list[Tensor]) -> list[Tensor]:
    """The ALU stages of ``spec`` over the accumulator copies ``acc`` (the last one is the
    result). A stage is one chain the ALU pass lowers in place; a two-operand op reads an
    earlier stage."""
    a = dict(spec.attrs)
    shape = acc[0].shape

    def stage(fn: Callable[..., Any], name: str) -> Tensor:
        return te.compute(shape, fn, name=name)

    if spec.kind == "add":
        x, y = acc
        yb = stage(lambda *i: y(*i) * a["mul_b"], "ew_mul_b")
        out = stage(lambda *i: te.clip(rshift(x(*i) * a["mul_a"] + yb(*i), a["shift"]),
                                       a["lo"], a["hi"]), "ew_add")
        return [yb, out]
    x = acc[0]
    if spec.kind == "clip":
        return [stage(lambda *i: te.clip(x(*i), a["lo"], a["hi"]), "ew_clip")]
    if spec.kind == "leaky_relu":
        xs = stage(lambda *i: rshift(acc[1](*i) * a["mul"], a["shift"]), "ew_scaled")
        return [xs, stage(lambda *i: te.max(x(*i), xs(*i)), "ew_leaky")]
    h = stage(lambda *i: te.clip(rshift(x(*i) * a["mul"], a["shift"], a["bias"]), 0,
                                 a["one"]), "ew_hsig")
    if spec.kind == "hard_sigmoid":
        return [h]
    out = stage(lambda *i: te.clip(rshift(acc[1](*i) * h(*i) * a["mul2"], a["shift2"]),
                                   -128, 127), "ew_hswish")
    return [h, out]


def elementwise_valid(knobs: Mapping[str, int], tiles: int, spec: Spec, cfg: Config) -> bool:
    """Whether ``knobs`` divide the ``tiles`` and fit the buffers (threads double them)."""
    t, nt = knobs["tile"], knobs["nthread"]
    return (tiles % t == 0 and (tiles // t) % nt == 0
            and nt * t * spec.n_inputs <= cfg.inp_depth
            and nt * t * spec.copies <= cfg.acc_depth
            and nt <= cfg.wgt_depth)


def _widen(env: Env, src: Tensor, eye: Tensor, oshape: tuple[int, ...], name: str) -> Tensor:
    """``src`` (int8 tiles) times the identity: the input in the accumulator (int32)."""
    rk = te.reduce_axis((0, 1), name=f"{name}_ko")
    rt = te.reduce_axis((0, src.shape[-1]), name=f"{name}_ki")
    return te.compute(oshape, lambda t, o, bt, ot: te.sum(
        src[t, rk, bt, rt].astype(env.acc_dtype) * eye[o, rk, ot, rt].astype(env.acc_dtype),
        axis=[rk, rt]), name=name)


def elementwise_int8(spec: Spec, tiles: int, *, config: Config,
                     knobs: Mapping[str, int] | None = None,
                     target: str | None = "fsim") -> Operator:
    """The operator of ``spec`` over ``tiles`` packed int8 tiles: arguments are the input(s)
    ``(tiles, 1, BATCH, BLOCK)`` int8, the identity ``(1, 1, BLOCK, BLOCK)`` int8
    (:func:`identity_weight`) and the output like the inputs. ``knobs=None``: the default
    (:func:`elementwise_default`)."""
    cfg = config
    env = Env(cfg)
    if env.BLOCK_IN != env.BLOCK_OUT:
        raise ScheduleError("element-wise ops need BLOCK_IN == BLOCK_OUT")
    kn = dict(knobs) if knobs else elementwise_default(spec, tiles, cfg).knobs
    if not elementwise_valid(kn, tiles, spec, cfg):
        raise ScheduleError(f"element-wise {spec.kind}: knobs {kn} do not divide {tiles} "
                            "tiles or do not fit the buffers")
    shape = (tiles, 1, env.BATCH, env.BLOCK_IN)
    ins = [te.placeholder(shape, name=f"x{k}", dtype=env.inp_dtype)
           for k in range(spec.n_inputs)]
    eye = te.placeholder((1, 1, env.BLOCK_OUT, env.BLOCK_IN), name="eye", dtype=env.wgt_dtype)
    bufs = [te.compute(shape, lambda *i, x=x: x(*i), name=f"{x.name}_buf") for x in ins]
    eye_buf = te.compute(eye.shape, lambda *i: eye(*i), name="eye_buf")
    oshape = (tiles, 1, env.BATCH, env.BLOCK_OUT)
    srcs = bufs if spec.n_inputs == spec.copies else bufs * spec.copies
    acc = [_widen(env, src, eye_buf, oshape, f"acc{k}") for k, src in enumerate(srcs)]
    stages = _alu_stages(spec, acc)
    last = stages[-1]
    res = te.compute(oshape, lambda *i: last(*i).astype(env.out_dtype), name="res")
    s = te.create_schedule(res.op)
    t, o, bt, ot = s[res].op.axis
    t_out, t_inn = s[res].split(t, factor=kn["tile"])
    if kn["nthread"] > 1:
        tx, t_out = s[res].split(t_out, nparts=kn["nthread"])
        s[res].bind(tx, te.thread_axis("cthread"))
    dma_load(s, env, res, t_out, env.inp_scope, bufs)
    dma_load(s, env, res, t_out, env.wgt_scope, [eye_buf])
    for g in acc:
        s[g].compute_at(s[res], t_out)
        s[g].set_scope(env.acc_scope)
        gt, go, gbt, got = s[g].op.axis
        rk, rt = s[g].op.reduce_axis
        s[g].reorder(rk, gt, go, gbt, got, rt)
        s[g].tensorize(gbt, env.gemm)
    place_alu_stages(s, env, res, t_out, stages)
    s[res].pragma(t_inn, env.dma_copy)
    return Operator(f"ew_{spec.kind}", s, ins + [eye, res], kn, cfg, oshape,
                    info={"spec": spec},
                    build_opts={"init_in_first_iteration": True}).built(target)


def identity_weight(cfg: Config) -> np.ndarray:
    """The ``(1, 1, BLOCK_OUT, BLOCK_IN)`` int8 identity the GEMM widens inputs with."""
    return np.eye(cfg.block_out, cfg.block_in, dtype=np.int8).reshape(1, 1, cfg.block_out,
                                                                       cfg.block_in)


def elementwise_knob_space(tiles: int) -> dict[str, list[int]]:
    return {"tile": [d for d in range(1, tiles + 1) if tiles % d == 0], "nthread": [1, 2]}


def elementwise_default(spec: Spec, tiles: int, cfg: Config, threads: bool = True) -> Any:
    """The default knobs: the fastest by vta.sim.perf among the largest few tiles that fit,
    with one and (``threads``) two virtual threads (a
    :class:`vta.compiler.topi.defaults.Choice`), cached like the other templates' defaults
    (per workload, configuration and kit version in the user cache)."""
    wl = {"template": "elementwise", "op": spec.kind, "attrs": dict(spec.attrs),
          "tiles": tiles, "threads": threads}
    return _cached(wl, cfg, lambda: _search(spec, tiles, cfg, threads))


def _search(spec: Spec, tiles: int, cfg: Config, threads: bool) -> Any:
    space = elementwise_knob_space(tiles)
    best: Choice | None = None
    n = 0
    for nt in space["nthread"] if threads else [1]:
        fits = [t for t in space["tile"]
                if elementwise_valid({"tile": t, "nthread": nt}, tiles, spec, cfg)]
        for t in sorted(fits, reverse=True)[:2]:
            kn = {"tile": t, "nthread": nt}
            cycles, _ = program_cycles(elementwise_int8(spec, tiles, config=cfg, knobs=kn,
                                                        target=None))
            n += 1
            if best is None or cycles < best.cycles:
                best = Choice(kn, cycles, n)
    if best is None:
        raise ScheduleError(f"element-wise {spec.kind}: no tile of {tiles} fits the buffers")
    return Choice(best.knobs, best.cycles, n)


def elementwise_reference(spec: Spec, *xs: np.ndarray) -> np.ndarray:
    """The int8 result of ``spec`` (numpy: the int8 kernel of the op the registry runs as
    ``spec.kind`` on the ALU, the graph's int8 reference)."""
    op = ops.op_for_alu_kind(spec.kind)
    return op.int_kernel(ops.Call(op.name, dict(spec.attrs)), list(xs))[0]


__all__ = ["OPS", "Spec", "elementwise_int8", "elementwise_valid", "elementwise_default",
           "elementwise_knob_space", "elementwise_reference", "identity_weight"]
