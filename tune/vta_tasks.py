"""Tuning templates for the compiler's VTA operators, their measurers and cost-model features.

Templates: ``vta.conv2d`` and ``vta.dense`` over the knobs of :mod:`vta.compiler.topi`
(tile_b, tile_h, tile_w, tile_ci, tile_co, oc_nthread, h_nthread; up to 2 x 2 = four virtual
threads), with configurations that overflow a scratchpad filtered out before anything is built.
Measurers: ``perf`` (the cycle-approximate model, fast) and ``tsim`` (Verilator, cycle-accurate;
also checks the output against numpy and records a wrong result as invalid). Features: the
lowered loop IR's loops (extent, nesting) and per-buffer DMA traffic, plus the knobs, plus
shape-independent ones (re-load factors, buffer occupancy, work per launch, arithmetic
intensity) that let a model trained on one workload rank another's (transfer learning).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa import Config
from vta.isa.stats import RunStats

from .measure import WrongResult, register_measurer
from .task import Task, features, template
from .workloads import Workload, WorkloadError, register_workload

#: A quantized layer's epilogue as `vta compile` builds it by default (calibrated scales): bias
#: added on the ALU, shift, fixed-point multiply, rounding shift, clip. The same ALU passes
#: (their cost does not depend on the values), so a tuned program is the module's program.
#: Modules compiled with --pow2-scales skip the multiply and the rounding shift.
EPILOGUE = {"bias": True, "shift": 5, "mul": 1449, "shift2": 15, "clip": (0, 127)}


def _cfg(params: dict[str, int]) -> Config:
    return Config(**params)


@template("vta.conv2d")
def conv2d_template(cfg, n: int, ci: int, h: int, w: int, co: int, kh: int, kw: int, sh: int,
                    sw: int, ph: int, pw: int, config: dict[str, int]):
    """Packed conv2d; shapes in tiles (n/BATCH, ci/BLOCK_IN, co/BLOCK_OUT)."""
    from vta.compiler.topi import conv2d_knob_space, conv2d_packed, conv2d_valid

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


@template("vta.dense")
def dense_template(cfg, n: int, k: int, m: int, config: dict[str, int]):
    """Packed dense; shapes in tiles (n/BATCH, k/BLOCK_IN, m/BLOCK_OUT)."""
    from vta.compiler.topi import dense_knob_space, dense_packed, dense_valid

    hw = _cfg(config)
    for name, cands in dense_knob_space(n, k, m).items():
        cfg.define_knob(name, cands)
    cfg.add_constraint(lambda e: dense_valid(dict(e.values), n, k, m, hw))
    if not hasattr(cfg, "index"):
        return None
    return dense_packed((n, k, hw.batch, hw.block_in), (m, k, hw.block_out, hw.block_in),
                        knobs=dict(cfg.values), config=hw, target=None, **EPILOGUE)


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
    from vta import runtime as rt

    nbytes = sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize for t in op.args)
    return rt.open(target, op.cfg, arena_size=max(1 << 20, 4 * nbytes + (1 << 20)))


def measure_perf(op: Any, **_: Any) -> float:
    """Cycles of the operator's recorded program on vta.sim.perf (cold start): the same
    lowering, recording and estimate as the compiler's default knobs and a module's layers."""
    from vta.compiler.topi.defaults import program_cycles

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
    from vta.compiler.topi import conv2d_reference, dense_reference

    op.build(target, device=_fresh_device(op, target))
    ins = _inputs(op)
    out = np.zeros(op.out_shape, np.dtype(op.out_dtype))
    stats = op.module(*ins, out)
    epi = op.info.get("epilogue")
    bias = ins[2] if epi.bias else None
    if op.name.startswith("conv2d"):
        ref = conv2d_reference(ins[0], ins[1], op.info["strides"], op.info["padding"], epi,
                               bias=bias)
    else:
        ref = dense_reference(ins[0], ins[1], epi, bias=bias)
    if not np.array_equal(out, ref):
        raise WrongResult(f"{int((out != ref).sum())} output elements differ from numpy")
    return stats


register_measurer("perf", measure_perf)
register_measurer("tsim", measure_tsim)
register_measurer("fsim", measure_fsim)


# ------------------------------------------------------------------------------ features
MAX_LOOPS = 8


def ir_features(func: Any) -> np.ndarray:
    """TVM-paper-style features of a lowered VTA function: the first loops' extents and
    nesting, and per memory scope the DMA elements moved, DMA count and reuse."""
    from vta.compiler.tir import stmt as S

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
    from vta.compiler.tir import stmt as S

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
    from vta.compiler.build import lower_vta
    from vta.isa.errors import VTAError

    try:
        op = task.instantiate(entity)
        func = lower_vta(op.sch, op.args, op.cfg, op.name)
        return np.concatenate([ir_features(func), relative_features(func, op.args, op.cfg)])
    except VTAError:
        return np.full(N_FEATURES, np.nan)


features("vta.conv2d")(_op_features)
features("vta.dense")(_op_features)


# ------------------------------------------------------------------------------ workloads
def _conv_args(v: dict[str, int], cfg: Config) -> tuple[Any, ...]:
    for key, block in (("N", cfg.batch), ("CI", cfg.block_in), ("CO", cfg.block_out)):
        if v[key] % block:
            raise WorkloadError(f"conv2d: {key}={v[key]} is not a multiple of {block} at this "
                                "config (pad the channels first)")
    return (v["N"] // cfg.batch, v["CI"] // cfg.block_in, v["H"], v["W"],
            v["CO"] // cfg.block_out, v["K"], v["K"], v["S"], v["S"], v["P"], v["P"],
            cfg.params)


def _dense_args(v: dict[str, int], cfg: Config) -> tuple[Any, ...]:
    for key, block in (("N", cfg.batch), ("K", cfg.block_in), ("M", cfg.block_out)):
        if v[key] % block:
            raise WorkloadError(f"dense: {key}={v[key]} is not a multiple of {block}")
    return (v["N"] // cfg.batch, v["K"] // cfg.block_in, v["M"] // cfg.block_out, cfg.params)


register_workload(Workload(
    "conv2d", "vta.conv2d",
    (("N", 1), ("H", 56), ("W", 56), ("CI", 64), ("CO", 64), ("K", 3), ("S", 1), ("P", 1)),
    "packed int8 conv2d with shift/relu/clip epilogue", _conv_args))
register_workload(Workload(
    "dense", "vta.dense", (("N", 16), ("K", 512), ("M", 1024)),
    "packed int8 dense with shift/relu/clip epilogue", _dense_args))

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


def _pad(c: int, b: int) -> int:
    return -(-c // b) * b


def conv_task(attrs: dict[str, Any], x_shape: Sequence[int], w_shape: Sequence[int],
              cfg: Config) -> Task | None:
    """The ``vta.conv2d`` task of a graph conv layer (None if the template cannot express it:
    groups, dilation, asymmetric padding or strides, non-square kernels, a transposed conv)."""
    pads, strides = attrs.get("pads", [0, 0, 0, 0]), attrs.get("strides", [1, 1])
    if (attrs.get("group", 1) != 1 or list(attrs.get("dilations", [1, 1])) != [1, 1]
            or list(attrs.get("input_strides", [1, 1])) != [1, 1]
            or pads[0] != pads[2] or pads[1] != pads[3] or pads[0] != pads[1]
            or strides[0] != strides[1] or w_shape[2] != w_shape[3]):
        return None
    v = {"N": _pad(x_shape[0], cfg.batch), "H": x_shape[2], "W": x_shape[3],
         "CI": _pad(w_shape[1], cfg.block_in), "CO": _pad(w_shape[0], cfg.block_out),
         "K": w_shape[2], "S": strides[0], "P": pads[0]}
    if v["H"] != v["W"]:
        return None
    return Task.create("vta.conv2d", _conv_args(v, cfg))


def tasks_from_model(path: str | Path, cfg: Config) -> list[Task]:
    """One task per distinct VTA workload (conv2d with group 1, dense) of an ONNX model; the
    first conv stays on the CPU as in the compiled module."""
    from vta.compiler.graph.onnx_frontend import load_onnx
    from vta.compiler.graph.passes import optimize
    from vta.compiler.graph.reference import infer_shapes

    g = optimize(load_onnx(path))
    shapes = infer_shapes(g)
    tasks: dict[str, Task] = {}
    first = True
    for n in g.nodes:
        t = None
        if n.op == "Conv" and n.attrs.get("group", 1) == 1:
            if first:
                first = False
                continue
            t = conv_task(n.attrs, shapes[n.inputs[0]], g.params[n.inputs[1]].shape, cfg)
        elif n.op == "Dense":
            xs, w = shapes[n.inputs[0]], g.params[n.inputs[1]].shape
            v = {"N": _pad(xs[0], cfg.batch), "K": _pad(w[1], cfg.block_in),
                 "M": _pad(w[0], cfg.block_out)}
            t = Task.create("vta.dense", _dense_args(v, cfg))
        if t is not None:
            tasks.setdefault(t.key, t)
    if not tasks:
        raise WorkloadError(f"{path}: no VTA workload (conv2d or dense) to tune")
    return list(tasks.values())


def layer_task(layer: Any, cfg: Config) -> Task | None:
    """The tuning task of a compiled VTA layer (vta.compiler.graph.lowering.VtaLayer), None
    when no template expresses it (groups, dilation, asymmetric padding)."""
    if layer.template == "dense":
        (n, k), (m, _) = layer.data, layer.kernel
        return Task.create("vta.dense", (n, k, m, cfg.params))
    if layer.template != "conv2d":
        return None
    pt, pl, pb, pr = layer.padding
    if layer.groups != 1 or layer.dilation != (1, 1) or pt != pb or pl != pr:
        return None
    n, ci, h, w = layer.data
    co, _, kh, kw = layer.kernel
    return Task.create("vta.conv2d", (n, ci, h, w, co, kh, kw, *layer.strides, pt, pl,
                                      cfg.params))


def tuning_lookup(log_path: str | Path, cfg: Config
                  ) -> Callable[[Any], tuple[dict[str, int], float] | None]:
    """What ``vta compile --tuning-log`` gives the compiler: layer -> (best knobs, measured
    cycles) of its workload in the log, or None when the log has not tuned it."""
    from .log import best_per_workload

    best = best_per_workload(log_path)

    def lookup(layer: Any) -> tuple[dict[str, int], float] | None:
        t = layer_task(layer, cfg)
        rec = best.get(t.key) if t is not None else None
        if rec is None:
            return None
        return dict(rec.config["values"]), float(rec.cost)

    return lookup


def default_knobs_cost(task: Task, measurer: str = "perf") -> float:
    """The cost of the compiler's default schedule for a task (the baseline tuning beats)."""
    from vta.compiler.topi import conv2d_packed, dense_packed

    a = task.args
    hw = _cfg(a[-1])
    if task.name == "vta.conv2d":
        n, ci, h, w, co, kh, kw, sh, sw, ph, pw, _ = a
        op = conv2d_packed((n, ci, h, w, hw.batch, hw.block_in),
                           (co, ci, kh, kw, hw.block_out, hw.block_in), strides=(sh, sw),
                           padding=(ph, pw), config=hw, target=None, **EPILOGUE)
    else:
        n, k, m, _ = a
        op = dense_packed((n, k, hw.batch, hw.block_in), (m, k, hw.block_out, hw.block_in),
                          config=hw, target=None, **EPILOGUE)
    return {"perf": measure_perf, "tsim": measure_tsim}[measurer](op)


def knob_values(entity: Any) -> dict[str, Any]:
    return dict(entity.values)


__all__ = ["N_FEATURES", "N_RELATIVE", "RESNET18_LAYERS",
           "resnet18_task", "tasks_from_model", "conv_task", "layer_task", "tuning_lookup",
           "ir_features", "relative_features",
           "measure_perf", "measure_tsim", "default_knobs_cost", "knob_values"]
