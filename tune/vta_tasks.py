"""Tuning templates for the compiler's VTA operators, their measurers and cost-model features.

Templates: ``vta.conv2d``, ``vta.group_conv2d`` (grouped and depthwise convs: the conv2d
template with groups of whole channel tiles), ``vta.conv2d_transpose``, ``vta.dense`` and
``vta.matmul`` (a batched product of two activations: attention's Q·Kᵀ and softmax·V) over
the knobs of
:mod:`vta.compiler.topi` (tile_b, tile_h, tile_w, tile_ci, tile_co, oc_nthread, h_nthread; up to
2 x 2 = four virtual threads), and ``vta.elementwise`` (the ALU's int8 element-wise ops: tile,
nthread), with configurations that overflow a scratchpad filtered out before anything is built.
Each builds the operator `vta compile` builds for such a layer, so tuned cycles are the
module's. A network's tasks come from the layers the compiler plans (:func:`tasks_from_model`).
Measurers: ``perf`` (the cycle-approximate model, fast) and ``tsim`` (Verilator, cycle-accurate;
also checks the output against numpy and records a wrong result as invalid). Features: the
lowered loop IR's loops (extent, nesting) and per-buffer DMA traffic, plus the knobs, plus
shape-independent ones (re-load factors, buffer occupancy, work per launch, arithmetic
intensity) that let a model trained on one workload rank another's (transfer learning).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from vta import runtime as rt
from vta.compiler.build import lower_vta
from vta.compiler.graph.lowering import LayerError, VtaLayer, plan_node
from vta.compiler.graph.module import compile_graph
from vta.compiler.graph.onnx_frontend import load_onnx
from vta.compiler.graph.options import LOWERED_OPS, CompileOptions
from vta.compiler.tir import stmt as S
from vta.compiler.topi import (
    conv2d_knob_space,
    conv2d_packed,
    conv2d_reference,
    conv2d_valid,
    dense_knob_space,
    dense_packed,
    dense_reference,
    dense_valid,
)
from vta.compiler.topi import conv_transpose as ct
from vta.compiler.topi.conv_transpose import conv2d_transpose_reference, packed_phase_kernel
from vta.compiler.topi.defaults import program_cycles
from vta.compiler.topi.elementwise import (
    Spec,
    elementwise_int8,
    elementwise_knob_space,
    elementwise_reference,
    elementwise_valid,
    identity_weight,
)
from vta.compiler.topi.matmul import (
    matmul_knob_space,
    matmul_packed,
    matmul_reference,
    matmul_valid,
    packed_tiles,
)
from vta.compiler.topi.pack import ceil_div
from vta.isa import Config
from vta.isa.config import DEFAULT_BUS_WIDTH
from vta.isa.errors import VTAError
from vta.isa.stats import RunStats

from .log import best_per_workload
from .measure import WrongResult, register_measurer
from .space import SpaceError
from .task import Task, features, template
from .workload_registry import Workload, WorkloadError, register_workload

#: A quantized layer's epilogue as `vta compile` builds it by default (calibrated scales): bias
#: added on the ALU, shift, fixed-point multiply, rounding shift, clip. The same ALU passes
#: (their cost does not depend on the values), so a tuned program is the module's program.
#: Modules compiled with --pow2-scales skip the multiply and the rounding shift.
EPILOGUE = {"bias": True, "shift": 5, "mul": 1449, "shift2": 15, "clip": (0, 127)}


def _cfg(params: dict[str, int]) -> Config:
    return Config(**params)


def _task_config(cfg: Config) -> dict[str, int]:
    """The configuration in a task's arguments: TVM's nine parameters, and ``BUS_WIDTH`` when
    it is not 64 (a 128-bit core's tasks are measured on it; the 64-bit tasks, and the tuning
    logs that name them, keep their workload keys)."""
    if cfg.bus_width == DEFAULT_BUS_WIDTH:
        return cfg.params
    return {**cfg.params, "BUS_WIDTH": cfg.bus_width}


@template("vta.conv2d")
def conv2d_template(cfg, n: int, ci: int, h: int, w: int, co: int, kh: int, kw: int, sh: int,
                    sw: int, ph: int, pw: int, config: dict[str, int]):
    """Packed conv2d; shapes in tiles (n/BATCH, ci/BLOCK_IN, co/BLOCK_OUT)."""
    hw = _cfg(config)
    data_shape = (n, ci, h, w, hw.batch, hw.block_in)
    kernel_shape = (co, ci, kh, kw, hw.block_out, hw.block_in)
    for name, cands in conv2d_knob_space(data_shape, kernel_shape, (sh, sw), (ph, pw)).items():
        cfg.define_knob(name, cands)
    cfg.add_constraint(lambda e: conv2d_valid(dict(e.values), data_shape, kernel_shape,
                                              (sh, sw), (ph, pw), hw))
    if not hasattr(cfg, "index"):  # definition mode: nothing to build
        return None
    return conv2d_packed(data_shape, kernel_shape, strides=(sh, sw), padding=(ph, pw),
                         knobs=dict(cfg.values), config=hw, target=None, **EPILOGUE)


@template("vta.group_conv2d")
def group_conv2d_template(cfg, n: int, ci: int, h: int, w: int, co: int, kh: int, kw: int,
                          sh: int, sw: int, ph: int, pw: int, groups: int,
                          config: dict[str, int]):
    """Packed group conv2d over ``groups`` groups of whole channel tiles (shapes in tiles); a
    depthwise conv is the one with one input and one output tile per group (its kernel packed
    block-diagonal, vta.compiler.topi.pack.depthwise_to_group_kernel)."""
    hw = _cfg(config)
    data_shape = (n, ci, h, w, hw.batch, hw.block_in)
    kernel_shape = (co, ci // groups, kh, kw, hw.block_out, hw.block_in)
    for name, cands in conv2d_knob_space(data_shape, kernel_shape, (sh, sw), (ph, pw)).items():
        cfg.define_knob(name, cands)
    cfg.add_constraint(lambda e: conv2d_valid(dict(e.values), data_shape, kernel_shape,
                                              (sh, sw), (ph, pw), hw, groups=groups))
    if not hasattr(cfg, "index"):
        return None
    return conv2d_packed(data_shape, kernel_shape, strides=(sh, sw), padding=(ph, pw),
                         groups=groups, knobs=dict(cfg.values), config=hw, target=None,
                         **EPILOGUE)


@template("vta.dense")
def dense_template(cfg, n: int, k: int, m: int, config: dict[str, int]):
    """Packed dense; shapes in tiles (n/BATCH, k/BLOCK_IN, m/BLOCK_OUT)."""
    hw = _cfg(config)
    for name, cands in dense_knob_space(n, k, m).items():
        cfg.define_knob(name, cands)
    cfg.add_constraint(lambda e: dense_valid(dict(e.values), n, k, m, hw))
    if not hasattr(cfg, "index"):
        return None
    return dense_packed((n, k, hw.batch, hw.block_in), (m, k, hw.block_out, hw.block_in),
                        knobs=dict(cfg.values), config=hw, target=None, **EPILOGUE)


#: A QMatMul's epilogue as `vta compile` builds it (vta.compiler.graph.quantize.matmul_requant:
#: no bias, no first shift, a fixed-point multiply and its rounding shift, clip).
MATMUL_EPILOGUE = {"shift": 0, "mul": 1449, "shift2": 20, "clip": (-128, 127)}


@template("vta.matmul")
def matmul_template(cfg, g: int, n: int, k: int, m: int, config: dict[str, int]):
    """Packed batched product of two int8 activations (vta.compiler.topi.matmul): ``g``
    products of (n, k) x (k, m) tiles, the second operand in weight layout."""
    hw = _cfg(config)
    for name, cands in matmul_knob_space(g, n, k, m).items():
        cfg.define_knob(name, cands)
    cfg.add_constraint(lambda e: matmul_valid(dict(e.values), g, n, k, m, hw))
    if not hasattr(cfg, "index"):
        return None
    return _matmul_op(g, n, k, m, hw, dict(cfg.values))


def _matmul_op(g: int, n: int, k: int, m: int, hw: Config, knobs: dict[str, int] | None
               ) -> Any:
    return matmul_packed((g, n, k, hw.batch, hw.block_in), (g, m, k, hw.block_out, hw.block_in),
                         config=hw, knobs=knobs, target=None, **MATMUL_EPILOGUE)


def _transpose_layer(n: int, ci: int, h: int, w: int, co: int, kh: int, kw: int, sh: int,
                     sw: int, pads: Sequence[int]) -> Any:
    """The compiler's conv2d_transpose layer of a workload (tiles; ``pads``: the equivalent
    conv's top, left, bottom, right padding) with the default epilogue."""
    epi = {k: v for k, v in EPILOGUE.items() if k != "bias"}
    return VtaLayer("", "conv2d_transpose", (n, ci, h, w), (co, ci, kh, kw), strides=(sh, sw),
                    padding=tuple(pads), **epi)


@template("vta.conv2d_transpose")
def conv2d_transpose_template(cfg, n: int, ci: int, h: int, w: int, co: int, kh: int, kw: int,
                              sh: int, sw: int, pt: int, pl: int, pb: int, pr: int,
                              config: dict[str, int]):
    """Packed conv2d_transpose as `vta compile` lowers it (output phases as sub-kernel convs,
    vta.compiler.topi.conv_transpose); shapes in tiles, padding the equivalent conv's."""
    hw = _cfg(config)
    layer = _transpose_layer(n, ci, h, w, co, kh, kw, sh, sw, (pt, pl, pb, pr))
    py, px = layer.phases()
    data6 = (n, ci, h, w, hw.batch, hw.block_in)
    for name, cands in ct.knob_space(data6, co, py, px).items():
        cfg.define_knob(name, cands)
    cfg.add_constraint(lambda e: ct.valid(dict(e.values), co, py, px, hw))
    if not hasattr(cfg, "index"):
        return None
    return layer.operator(hw, dict(cfg.values))


@template("vta.elementwise")
def elementwise_template(cfg, kind: str, attrs: Sequence[Sequence[Any]], tiles: int,
                         config: dict[str, int]):
    """An int8 element-wise op on the ALU (vta.compiler.topi.elementwise): ``attrs`` its
    integer attributes as (name, value) pairs, over ``tiles`` packed tiles."""
    hw = _cfg(config)
    spec = Spec.make(kind, **{str(k): int(v) for k, v in attrs})
    for name, cands in elementwise_knob_space(tiles).items():
        cfg.define_knob(name, cands)
    cfg.add_constraint(lambda e: elementwise_valid(dict(e.values), tiles, spec, hw))
    if not hasattr(cfg, "index"):
        return None
    return elementwise_int8(spec, tiles, config=hw, knobs=dict(cfg.values), target=None)


# ------------------------------------------------------------------------------ measurers
def _inputs(op: Any, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for t in op.args[:-1]:
        dt = np.dtype(t.dtype)
        lo, hi = (-128, 128) if dt.itemsize == 1 else (-1000, 1000)
        arrays.append(rng.integers(lo, hi, t.shape, dtype=dt))
    return arrays


def _fresh_device(op: Any, target: str) -> Any:
    """A new device per measurement: a warm micro-op cache left by an earlier candidate
    would make costs depend on measurement order."""
    nbytes = sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize for t in op.args)
    return rt.open(target, op.cfg, arena_size=max(1 << 20, 4 * nbytes + (1 << 20)))


def measure_perf(op: Any, **_: Any) -> float:
    """Cycles of the operator's recorded program on vta.sim.perf (cold start): the same
    lowering, recording and estimate as the compiler's default knobs and a module's layers."""
    return program_cycles(op)[0]


def measure_tsim(op: Any, **_: Any) -> float:
    """Cycles on the Verilator model; a result that differs from numpy is a WrongResult."""
    return float(_run_checked(op, "tsim").cycles)


def measure_fsim(op: Any, **_: Any) -> float:
    """GEMM + ALU micro-ops on the functional simulator (it has no cycles); a result that
    differs from numpy is a WrongResult."""
    stats = _run_checked(op, "fsim")
    return float(stats.gemm_uops + stats.alu_uops)


def _run_checked(op: Any, target: str) -> RunStats:
    """Run the operator on ``target`` with random inputs, compare with numpy, return stats."""
    op.build(target, device=_fresh_device(op, target))
    ins, ref = _checked_case(op)
    out = np.zeros(op.out_shape, np.dtype(op.out_dtype))
    stats = op.module(*ins, out)
    out = out.reshape(ref.shape)  # conv2d_transpose: its phase-major layout is the same memory
    if not np.array_equal(out, ref):
        raise WrongResult(f"{int((out != ref).sum())} output elements differ from numpy")
    return stats


def _checked_case(op: Any) -> tuple[list[np.ndarray], np.ndarray]:
    """Random operands of an operator and its numpy result."""
    ins = _inputs(op)
    if op.name.startswith("ew_"):  # the element-wise template: operands, identity, output
        ins[-1] = identity_weight(op.cfg)
        return ins, elementwise_reference(op.info["spec"], *ins[:-1])
    epi = op.info.get("epilogue")
    if op.name == "matmul_packed":
        return ins, matmul_reference(ins[0], ins[1], epi)
    bias = ins[2] if epi.bias else None
    if op.name == "conv2d_transpose_packed":
        return _transpose_case(op, ins, epi, bias)
    if op.name.startswith("conv2d"):
        ref = conv2d_reference(ins[0], ins[1], op.info["strides"], op.info["padding"], epi,
                               bias=bias, groups=op.info["groups"])
    else:
        ref = dense_reference(ins[0], ins[1], epi, bias=bias)
    return ins, ref


def _transpose_case(op: Any, ins: list[np.ndarray], epi: Any, bias: np.ndarray | None
                    ) -> tuple[list[np.ndarray], np.ndarray]:
    """conv2d_transpose: a random transposed-conv kernel, its phase kernel as the operand."""
    py, px = op.info["phases"]
    data = ins[0]
    n, ci, h, w, _, bi = data.shape
    co, bo = op.info["shape"][1], op.info["shape"][5]
    kernel = np.random.default_rng(1).integers(-128, 128, (ci, co, py.kernel, px.kernel, bi, bo),
                                               dtype=np.int8)
    ins[1] = packed_phase_kernel(kernel, py, px)
    pads = [(p.size - 1) * p.stride + p.kernel - p.pad - p.out for p in (py, px)]
    ref = conv2d_transpose_reference(data, kernel, (py.stride, px.stride),
                                     (py.pad, px.pad, pads[0], pads[1]), epi, bias=bias)
    return ins, ref


register_measurer("perf", measure_perf)
register_measurer("tsim", measure_tsim)
register_measurer("fsim", measure_fsim)


# ------------------------------------------------------------------------------ features
MAX_LOOPS = 8


def ir_features(func: Any) -> np.ndarray:
    """TVM-paper-style features of a lowered VTA function: the first loops' extents and
    nesting, and per memory scope the DMA elements moved, DMA count and reuse."""
    loops: list[tuple[int, int]] = []
    traffic: dict[str, list[float]] = {k: [0.0, 0.0] for k in ("inp", "wgt", "acc", "out")}
    compute = [0.0, 0.0, 0.0]  # gemm kernel launches, gemm micro-ops, alu micro-ops

    def scope_key(buf: Any) -> str:
        s = getattr(buf, "scope", "")
        for k in ("inp", "wgt", "acc"):
            if k in s:
                return k
        return "out"

    def walk(node: Any, depth: int, trips: float) -> None:
        if node is None:
            return
        if isinstance(node, S.For):
            if len(loops) < MAX_LOOPS:
                loops.append((node.extent, depth))
            walk(node.body, depth + 1, trips * node.extent)
        elif isinstance(node, S.Seq):
            for st in node.stmts:
                walk(st, depth, trips)
        elif isinstance(node, S.Dma):
            key = "out" if node.direction == "store" else scope_key(node.sram)
            traffic[key][0] += trips * node.y_size * node.x_size
            traffic[key][1] += trips
        elif isinstance(node, S.UopKernel):
            n = math.prod(lp.extent for lp in node.loops)
            inner = sum(1 for _ in _leaves(node.body, S))
            is_gemm = any(isinstance(x, S.Gemm) for x in _leaves(node.body, S))
            if is_gemm:
                compute[0] += trips
                compute[1] += trips * n * inner
            else:
                compute[2] += trips * n * inner
        else:
            for attr in ("body", "then", "else_"):
                walk(getattr(node, attr, None), depth, trips)

    walk(func.body, 0, 1.0)
    loops += [(1, 0)] * (MAX_LOOPS - len(loops))
    f = [v for e, d in loops for v in (math.log2(max(e, 1)), float(d))]
    for k in ("inp", "wgt", "acc", "out"):
        elems, count = traffic[k]
        f += [math.log2(1 + elems), math.log2(1 + count), math.log2(1 + elems / max(count, 1))]
    f += [math.log2(1 + c) for c in compute]
    return np.array(f)


def _leaves(node: Any, S: Any):
    if isinstance(node, S.Seq):
        for st in node.stmts:
            yield from _leaves(st, S)
    elif node is not None:
        yield node


def _uop_count(node: Any, S: Any) -> int:
    if isinstance(node, S.For):
        return node.extent * _uop_count(node.body, S)
    if isinstance(node, S.Seq):
        return sum(_uop_count(st, S) for st in node.stmts)
    return 1 if node is not None else 0


def relative_features(func: Any, args: Sequence[Any], cfg: Config) -> np.ndarray:
    """Shape-independent features of a lowered VTA function, which transfer between workloads
    of one template (e.g. across ResNet's layers): per memory scope the DMA traffic relative to
    the tensor's size (log2 of the re-load factor) and the on-chip buffer's occupancy; the
    micro-ops per GEMM launch, the launches and DMAs relative to the total work, the compute per
    loaded byte (arithmetic intensity), per launch and overall, and the virtual threads."""
    moved = {"inp": 0.0, "wgt": 0.0, "out": 0.0}
    dmas = {"inp": 0.0, "wgt": 0.0, "out": 0.0}
    alloc = {S.INP_SCOPE: 0, S.WGT_SCOPE: 0, S.ACC_SCOPE: 0}
    gemm = [0.0, 0.0]  # launches, micro-op iterations
    uop_words = [0.0]
    threads: set[Any] = set()

    def walk(node: Any, trips: float) -> None:
        if node is None:
            return
        if isinstance(node, S.For):
            walk(node.body, trips * node.extent)
        elif isinstance(node, S.Seq):
            for st in node.stmts:
                walk(st, trips)
        elif isinstance(node, S.Allocate):
            sc = getattr(node.buffer, "scope", "")
            if sc in alloc:
                alloc[sc] += math.prod(node.buffer.shape[:-2]) if len(node.buffer.shape) > 2 \
                    else 1
            walk(node.body, trips)
        elif isinstance(node, S.Dma):
            sc = getattr(node.sram, "scope", "")
            key = ("out" if node.direction == "store" else
                   "inp" if sc == S.INP_SCOPE else "wgt" if sc == S.WGT_SCOPE else None)
            if key is not None:
                moved[key] += trips * node.y_size * node.x_size
                dmas[key] += trips
        elif isinstance(node, S.UopKernel):
            threads.add(node.thread)
            n_uops = _uop_count(node.body, S)
            if any(isinstance(x, S.Gemm) for x in S.walk(node.body)):
                gemm[0] += trips
                gemm[1] += trips * math.prod(lp.extent for lp in node.loops) * n_uops
            uop_words[0] += trips * n_uops
        else:
            for attr in ("body", "then", "else_"):
                walk(getattr(node, attr, None), trips)

    walk(func.body, 1.0)
    size = {k: float(math.prod(t.shape[:-2])) for k, t in zip(("inp", "wgt"), args[:2])}
    size["out"] = float(math.prod(args[-1].shape[:-2]))
    work = max(gemm[1], 1.0)
    lg = math.log2
    f = [lg(max(moved[k], 1.0) / size[k]) for k in ("inp", "wgt", "out")]
    f += [alloc[S.INP_SCOPE] / cfg.inp_depth, alloc[S.WGT_SCOPE] / cfg.wgt_depth,
          alloc[S.ACC_SCOPE] / cfg.acc_depth]
    launches = max(gemm[0], 1.0)
    f += [lg(work / launches), lg(launches / work) + lg(size["out"]), lg(launches)
          - lg(size["out"])]
    f += [lg((dmas["inp"] + dmas["wgt"]) / launches + 1), lg(uop_words[0] / work + 1e-9)]
    loaded = moved["inp"] * cfg.inp_elem_bytes + moved["wgt"] * cfg.wgt_elem_bytes
    f += [lg(work / max(loaded, 1.0)), lg((work / launches) / max(loaded / launches, 1.0))]
    f += [float(len(threads - {None}) or 1)]
    return np.array(f)


#: Length of :func:`relative_features`.
N_RELATIVE = 14
#: Length of :func:`ir_features`: loops (extent, depth), 4 scopes x 3, 3 compute counts.
N_IR = 2 * MAX_LOOPS + 4 * 3 + 3
#: Length of the IR part of a VTA configuration's features (:func:`ir_features` followed by
#: :func:`relative_features`).
N_FEATURES = N_IR + N_RELATIVE


def _op_features(task: Task, entity: Any) -> np.ndarray:
    """IR features of one configuration; NaN (missing, for XGBoost) when it does not lower."""
    try:
        op = task.instantiate(entity)
        func = lower_vta(op.sch, op.args, op.cfg, op.name, **op.build_opts)
        return np.concatenate([ir_features(func), relative_features(func, op.args, op.cfg)])
    except VTAError:
        return np.full(N_FEATURES, np.nan)


features("vta.conv2d")(_op_features)
features("vta.group_conv2d")(_op_features)
features("vta.dense")(_op_features)
features("vta.conv2d_transpose")(_op_features)
features("vta.elementwise")(_op_features)
features("vta.matmul")(_op_features)


# ------------------------------------------------------------------------------ workloads
def _conv_args(v: dict[str, int], cfg: Config) -> tuple[Any, ...]:
    for key, block in (("N", cfg.batch), ("CI", cfg.block_in), ("CO", cfg.block_out)):
        if v[key] % block:
            raise WorkloadError(f"conv2d: {key}={v[key]} is not a multiple of {block} at this "
                                "config (pad the channels first)")
    return (v["N"] // cfg.batch, v["CI"] // cfg.block_in, v["H"], v["W"],
            v["CO"] // cfg.block_out, v["K"], v["K"], v["S"], v["S"], v["P"], v["P"],
            _task_config(cfg))


def _dense_args(v: dict[str, int], cfg: Config) -> tuple[Any, ...]:
    for key, block in (("N", cfg.batch), ("K", cfg.block_in), ("M", cfg.block_out)):
        if v[key] % block:
            raise WorkloadError(f"dense: {key}={v[key]} is not a multiple of {block}")
    return (v["N"] // cfg.batch, v["K"] // cfg.block_in, v["M"] // cfg.block_out, _task_config(cfg))


def _matmul_args(v: dict[str, int], cfg: Config) -> tuple[Any, ...]:
    """G products of (N, K) x (K, M) elements, in tiles (a partial tile is zero-padded, as
    `vta compile` pads a layer's)."""
    return (v["G"], *packed_tiles(v["G"], v["N"], v["K"], v["M"], cfg), _task_config(cfg))


def _matmul_tensors(v: dict[str, int]) -> dict[str, int]:
    g = v["G"]
    return {"input": g * v["N"] * v["K"], "weight": g * v["K"] * v["M"],
            "output": g * v["N"] * v["M"]}


def _conv_tensors(v: dict[str, int]) -> dict[str, int]:
    """Element counts of a (grouped: G) conv2d's tensors."""
    n, h, w, k, s, p = (v[x] for x in ("N", "H", "W", "K", "S", "P"))
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return {"input": n * v["CI"] * h * w, "weight": v["CO"] * v["CI"] * k * k // v.get("G", 1),
            "output": n * v["CO"] * max(oh, 0) * max(ow, 0)}


def _transpose_tensors(v: dict[str, int]) -> dict[str, int]:
    """Element counts of a conv2d_transpose's tensors (the zero-interleaved, padded input
    of the conv it runs as included)."""
    n, h, w, k, s, p = (v[x] for x in ("N", "H", "W", "K", "S", "P"))
    oh, ow = (h - 1) * s - 2 * p + k, (w - 1) * s - 2 * p + k
    q = max(k - 1 - p, 0)
    return {"input": n * v["CI"] * h * w, "weight": v["CO"] * v["CI"] * k * k,
            "interleaved input": n * v["CI"] * ((h - 1) * s + 1 + 2 * q)
            * ((w - 1) * s + 1 + 2 * q),
            "output": n * v["CO"] * max(oh, 0) * max(ow, 0)}


def _clip_tensors(v: dict[str, int]) -> dict[str, int]:
    return {"tensor": v["N"] * v["C"] * v["H"] * v["W"]}


def _dense_tensors(v: dict[str, int]) -> dict[str, int]:
    return {"input": v["N"] * v["K"], "weight": v["K"] * v["M"], "output": v["N"] * v["M"]}


register_workload(Workload(
    "conv2d", "vta.conv2d",
    (("N", 1), ("H", 56), ("W", 56), ("CI", 64), ("CO", 64), ("K", 3), ("S", 1), ("P", 1)),
    "packed int8 conv2d with shift/relu/clip epilogue", _conv_args, _conv_tensors,
    frozenset({"P"})))
def _group_conv_args(v: dict[str, int], cfg: Config) -> tuple[Any, ...]:
    """A group conv: CI/G input and CO/G output channels per group in whole channel tiles, or a
    depthwise conv (G = CI = CO), which runs as CI/BLOCK groups of one block-diagonal tile."""
    g, ci, co = v["G"], v["CI"], v["CO"]
    if v["N"] % cfg.batch:
        raise WorkloadError(f"group_conv2d: N={v['N']} is not a multiple of {cfg.batch}")
    if g < 1 or ci % g or co % g:
        raise WorkloadError(f"group_conv2d: G={g} does not divide CI={ci} and CO={co}")
    if g == 1:
        raise WorkloadError("group_conv2d: G=1 is a plain convolution (use the conv2d workload)")
    if (ci // g) % cfg.block_in == 0 and (co // g) % cfg.block_out == 0:
        tiles = g
    elif g == ci == co and ci % cfg.block == 0:
        tiles = ci // cfg.block  # depthwise: one block-diagonal kernel tile per group
    else:
        raise WorkloadError(f"group_conv2d: {g} groups of {ci // g} input / {co // g} output "
                            f"channels do not split into whole {cfg.block_in}/{cfg.block_out}"
                            f"-channel tiles (nor is it depthwise with CI=CO=G a multiple of "
                            f"{cfg.block})")
    return (v["N"] // cfg.batch, ci // cfg.block_in, v["H"], v["W"], co // cfg.block_out,
            v["K"], v["K"], v["S"], v["S"], v["P"], v["P"], tiles, _task_config(cfg))


def _transpose_args(v: dict[str, int], cfg: Config) -> tuple[Any, ...]:
    for key, block in (("N", cfg.batch), ("CI", cfg.block_in), ("CO", cfg.block_out)):
        if v[key] % block:
            raise WorkloadError(f"conv2d_transpose: {key}={v[key]} is not a multiple of "
                                f"{block} at this config (pad the channels first)")
    k, p = v["K"], v["P"]
    if not 0 <= p <= k - 1:
        raise WorkloadError(f"conv2d_transpose: padding P={p} is not within 0..K-1={k - 1}")
    q = k - 1 - p  # the equivalent conv's padding of the zero-interleaved input
    return (v["N"] // cfg.batch, v["CI"] // cfg.block_in, v["H"], v["W"],
            v["CO"] // cfg.block_out, k, k, v["S"], v["S"], q, q, q, q, _task_config(cfg))


def _clip_args(v: dict[str, int], cfg: Config) -> tuple[Any, ...]:
    tiles = ceil_div(v["N"], cfg.batch) * ceil_div(v["C"], cfg.block) * v["H"] * v["W"]
    return ("clip", [["lo", v["LO"]], ["hi", v["HI"]]], tiles, _task_config(cfg))


register_workload(Workload(
    "group_conv2d", "vta.group_conv2d",
    (("N", 1), ("H", 14), ("W", 14), ("CI", 64), ("CO", 64), ("K", 3), ("S", 1), ("P", 1),
     ("G", 64)),
    "packed int8 group conv (G groups of whole channel tiles; G=CI=CO: depthwise)",
    _group_conv_args, _conv_tensors, frozenset({"P"})))
register_workload(Workload(
    "conv2d_transpose", "vta.conv2d_transpose",
    (("N", 1), ("H", 8), ("W", 8), ("CI", 64), ("CO", 32), ("K", 4), ("S", 2), ("P", 1)),
    "packed int8 transposed conv (ONNX padding P), output phases as sub-kernel convs",
    _transpose_args, _transpose_tensors, frozenset({"P"})))
register_workload(Workload(
    "clip", "vta.elementwise", (("N", 1), ("C", 64), ("H", 14), ("W", 14), ("LO", 0),
                                ("HI", 127)),
    "int8 clip on the ALU (an element-wise layer not fused into a conv)", _clip_args,
    _clip_tensors, frozenset({"LO", "HI"})))
register_workload(Workload(
    "dense", "vta.dense", (("N", 16), ("K", 512), ("M", 1024)),
    "packed int8 dense with shift/relu/clip epilogue", _dense_args, _dense_tensors))
register_workload(Workload(
    "matmul", "vta.matmul", (("G", 3), ("N", 197), ("K", 64), ("M", 197)),
    "G int8 activation x activation products (N, K) x (K, M): attention's Q·Kᵀ (K: head "
    "size) and softmax·V (K: tokens), G = batch x heads", _matmul_args, _matmul_tensors))

#: ResNet-18's conv layers C2-C12 (TVM paper, Table 2), batch 1: H=W, CI, CO, K, S, P.
RESNET18_LAYERS = {
    "C2": (56, 64, 64, 3, 1, 1), "C3": (56, 64, 64, 1, 1, 0), "C4": (56, 64, 128, 3, 2, 1),
    "C5": (56, 64, 128, 1, 2, 0), "C6": (28, 128, 128, 3, 1, 1), "C7": (28, 128, 256, 3, 2, 1),
    "C8": (28, 128, 256, 1, 2, 0), "C9": (14, 256, 256, 3, 1, 1), "C10": (14, 256, 512, 3, 2, 1),
    "C11": (14, 256, 512, 1, 2, 0), "C12": (7, 512, 512, 3, 1, 1),
}


def resnet18_task(layer: str, cfg: Config) -> Task:
    hw_, ci, co, k, s, p = RESNET18_LAYERS[layer]
    v = {"N": 1, "H": hw_, "W": hw_, "CI": ci, "CO": co, "K": k, "S": s, "P": p}
    return Task.create("vta.conv2d", _conv_args(v, cfg))


def quantized_model(g: Any, cfg: Config) -> tuple[Any, dict[str, tuple[int, ...]]]:
    """The loaded model ``g`` (a :class:`vta.compiler.graph.ir.Graph`) as `vta compile`
    quantizes it for ``cfg`` (default quantization with synthetic calibration samples, a light
    first conv kept in float), nothing lowered: the quantized graph and every tensor's shape.
    The one extraction the tuning tasks (:func:`model_layers`) and AutoVTA's networks
    (:func:`vta.tune.autovta.network.extract_layers`) read their VTA layers from."""
    module = compile_graph(g, cfg, CompileOptions(vta_ops=()))
    return module.graph, {k: tuple(v) for k, v in module.shapes.items()}


def model_layers(path: str | Path, cfg: Config, *,
                 input_shapes: Mapping[str, Sequence[int]] | None = None) -> list[Any]:
    """The VTA layers `vta compile` plans for an ONNX model (:func:`quantized_model`;
    ``input_shapes`` as `vta compile --input-shape`): conv2d (plain, grouped, depthwise),
    conv2d_transpose, dense, matmul and element-wise ALU layers; layers that do not fit the
    configuration are left out (they run on the CPU)."""
    qg, shapes = quantized_model(load_onnx(path, input_shapes=input_shapes), cfg)
    layers = []
    for n in qg.nodes:
        if n.op in LOWERED_OPS:
            try:
                layers.append(plan_node(n, shapes, qg.params, cfg))
            except LayerError:
                continue
    return layers


def tasks_from_model(path: str | Path, cfg: Config, *,
                     input_shapes: Mapping[str, Sequence[int]] | None = None) -> list[Task]:
    """One task per distinct VTA workload of an ONNX model, from the layers `vta compile`
    plans (:func:`model_layers`): conv2d, group conv2d (grouped and depthwise),
    conv2d_transpose, dense and the int8
    element-wise ops on the ALU; a light first conv stays on the CPU as in the compiled module
    (vta.compiler.graph.quantize.float_first_conv)."""
    tasks: dict[str, Task] = {}
    for layer in model_layers(path, cfg, input_shapes=input_shapes):
        t = layer_task(layer, cfg)
        if t is not None:
            tasks.setdefault(t.key, t)
    if not tasks:
        raise WorkloadError(f"{path}: no VTA workload (conv2d, group conv2d, "
                            "conv2d_transpose, dense, matmul or element-wise) to tune")
    return list(tasks.values())


def layer_task(layer: Any, cfg: Config) -> Task | None:
    """The tuning task of a compiled VTA layer (vta.compiler.graph.lowering.VtaLayer or
    AluLayer), None when no template expresses it (dilation, asymmetric padding, a fused
    residual add)."""
    if getattr(layer, "residual", None) is not None:
        return None
    if layer.template == "elementwise":
        return Task.create("vta.elementwise", (layer.spec.kind, [list(a) for a in
                                                                  layer.spec.attrs],
                                               layer.tiles, _task_config(cfg)))
    if layer.template == "dense":
        (n, k), (m, _) = layer.data, layer.kernel
        return Task.create("vta.dense", (n, k, m, _task_config(cfg)))
    if layer.template == "matmul":
        return Task.create("vta.matmul", (layer.g, layer.n, layer.k, layer.m, _task_config(cfg)))
    n, ci, h, w = layer.data
    co, _, kh, kw = layer.kernel
    if layer.template == "conv2d_transpose":
        return Task.create("vta.conv2d_transpose", (n, ci, h, w, co, kh, kw, *layer.strides,
                                                    *layer.padding, _task_config(cfg)))
    if layer.template != "conv2d":
        return None
    pt, pl, pb, pr = layer.padding
    if layer.dilation != (1, 1) or pt != pb or pl != pr:
        return None
    if layer.groups != 1:  # grouped, or depthwise as groups of one block-diagonal tile
        return Task.create("vta.group_conv2d", (n, ci, h, w, co, kh, kw, *layer.strides, pt,
                                                pl, layer.groups, _task_config(cfg)))
    return Task.create("vta.conv2d", (n, ci, h, w, co, kh, kw, *layer.strides, pt, pl,
                                      _task_config(cfg)))


class TuningLogError(WorkloadError):
    """A tuning log whose best knobs are not a valid schedule of their workload."""


def tuning_lookup(log_path: str | Path, cfg: Config
                  ) -> Callable[[Any], tuple[dict[str, int], float] | None]:
    """What ``vta compile --tuning-log`` gives the compiler: layer -> (best knobs, measured
    cycles) of its workload in the log, or None when the log has not tuned it. Knobs outside
    the workload's space (a hand-edited or foreign log) are a :class:`TuningLogError`."""
    best = best_per_workload(log_path)

    def lookup(layer: Any) -> tuple[dict[str, int], float] | None:
        t = layer_task(layer, cfg)
        rec = best.get(t.key) if t is not None else None
        if rec is None:
            return None
        values = dict(rec.config["values"])
        unknown = sorted(set(values) - set(t.space.knobs))
        if unknown:
            raise TuningLogError(f"{log_path}: unknown knob(s) {', '.join(unknown)} for "
                                 f"{t.name} {list(t.args[:-1])} (its knobs: "
                                 f"{', '.join(t.space.knobs)})")
        try:
            ok = t.space.is_valid(t.space.from_values(values).index)
        except (SpaceError, KeyError):
            ok = False
        if not ok:
            raise TuningLogError(f"{log_path}: knobs {values} are not a valid schedule of "
                                 f"{t.name} {list(t.args[:-1])} at this configuration")
        return values, float(rec.cost)

    return lookup


def default_knobs_cost(task: Task, measurer: str = "perf") -> float:
    """The cost of the compiler's default schedule for a task (the baseline tuning beats)."""
    a = task.args
    hw = _cfg(a[-1])
    if task.name == "vta.conv2d":
        n, ci, h, w, co, kh, kw, sh, sw, ph, pw, _ = a
        op = conv2d_packed((n, ci, h, w, hw.batch, hw.block_in),
                           (co, ci, kh, kw, hw.block_out, hw.block_in), strides=(sh, sw),
                           padding=(ph, pw), config=hw, target=None, **EPILOGUE)
    elif task.name == "vta.group_conv2d":
        n, ci, h, w, co, kh, kw, sh, sw, ph, pw, g, _ = a
        op = conv2d_packed((n, ci, h, w, hw.batch, hw.block_in),
                           (co, ci // g, kh, kw, hw.block_out, hw.block_in), strides=(sh, sw),
                           padding=(ph, pw), groups=g, config=hw, target=None, **EPILOGUE)
    elif task.name == "vta.conv2d_transpose":
        op = _transpose_layer(*a[:9], a[9:13]).operator(hw, None)
    elif task.name == "vta.matmul":
        op = _matmul_op(*a[:4], hw, None)
    elif task.name == "vta.elementwise":
        spec = Spec.make(a[0], **{str(k): int(v) for k, v in a[1]})
        op = elementwise_int8(spec, a[2], config=hw, target=None)
    else:
        n, k, m, _ = a
        op = dense_packed((n, k, hw.batch, hw.block_in), (m, k, hw.block_out, hw.block_in),
                          config=hw, target=None, **EPILOGUE)
    return {"perf": measure_perf, "tsim": measure_tsim}[measurer](op)


def knob_values(entity: Any) -> dict[str, Any]:
    return dict(entity.values)


__all__ = ["N_FEATURES", "N_RELATIVE", "RESNET18_LAYERS", "TuningLogError",
           "resnet18_task", "tasks_from_model", "quantized_model", "model_layers", "layer_task",
           "tuning_lookup",
           "ir_features", "relative_features",
           "measure_perf", "measure_tsim", "default_knobs_cost", "knob_values"]
