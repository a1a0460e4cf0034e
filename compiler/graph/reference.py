"""The float reference executor (each op's float kernel from :mod:`vta.compiler.ops`), and
shape and dtype inference.

This is the "cpu" target for float layers and the ground truth for calibration. Canonical
attributes come from :mod:`.onnx_frontend`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import ops
from .errors import InputError
from .ir import Graph, Node


def check_feeds(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs present, with the declared shape and dtype (a one-line InputError otherwise)."""
    out = {}
    for name, info in graph.inputs.items():
        if name not in feeds:
            raise InputError(f"missing input {name!r} (the model takes "
                             f"{', '.join(graph.inputs)})")
        x = np.asarray(feeds[name])
        if tuple(x.shape) != tuple(info.shape):
            raise InputError(f"input {name!r} has shape {list(x.shape)}, the model expects "
                             f"{list(info.shape)}")
        if str(x.dtype) != info.dtype:
            raise InputError(f"input {name!r} has dtype {x.dtype}, the model expects "
                             f"{info.dtype} (convert it with x.astype('{info.dtype}'))")
        out[name] = x
    return out


def run_float(graph: Graph, feeds: Mapping[str, np.ndarray], *, keep: bool = False,
              times: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    """Execute ``graph`` in float32; returns the outputs (every tensor when ``keep``)."""
    env: dict[str, Any] = dict(graph.params)
    env.update(check_feeds(graph, feeds))
    last_use = _last_use(graph) if not keep else {}
    for k, n in enumerate(graph.nodes):
        t0 = time.perf_counter()
        res = ops.get(n.op).float_kernel(n, [env[i] if i else None for i in n.inputs])
        if times is not None:
            times[n.name] = time.perf_counter() - t0
        for o, v in zip(n.outputs, res):
            env[o] = v
        if not keep:
            for i in n.inputs:
                if last_use.get(i) == k and i not in graph.params and i not in graph.outputs:
                    env.pop(i, None)
    if keep:
        return env
    return {o: env[o] for o in graph.outputs}


def _last_use(graph: Graph) -> dict[str, int]:
    last: dict[str, int] = {}
    for k, n in enumerate(graph.nodes):
        for i in n.inputs:
            last[i] = k
    return last


# ------------------------------------------------------------------ shape inference
Shape = tuple[int, ...]


def output_dtype(n: Node, in_dtypes: list[str | None]) -> str:
    """The dtype of node ``n``'s (first) output from its inputs' dtypes: float32 for the
    arithmetic ops, bool for comparisons and logic, the target of a Cast, the table's for a
    Take, the common type of a Where's values, and the input's for the ops that move values."""
    op = ops.get(n.op)
    if op is not None and op.boolean:
        return "bool"
    if n.op == "Cast":
        return str(np.dtype(n.attrs["to"]))
    if n.op == "Take":
        return in_dtypes[0] or "float32"
    if n.op == "Where":
        kinds = {np.dtype(d).kind for d in in_dtypes[1:] if d}
        return "float32" if "f" in kinds else str(np.result_type(*[d for d in in_dtypes[1:]
                                                                    if d]))
    if op is not None and op.shape is not None:
        return "float32"
    return in_dtypes[0] if in_dtypes and in_dtypes[0] else "float32"


def output_shape(n: Node, in_shapes: list[Shape | None],
                 params: Mapping[str, np.ndarray]) -> Shape:
    """The shape of node ``n``'s (first) output from its inputs' shapes."""
    op = ops.get(n.op)
    rule = op.shape if op is not None else None
    if rule is not None:
        return tuple(int(d) for d in rule(n, [s for s in in_shapes if s is not None]))
    args = [params[i] if i in params else (np.zeros(s, np.float32) if s is not None else None)
            for i, s in zip(n.inputs, in_shapes)]
    return tuple(np.shape(op.float_kernel(n, args)[0]))


def infer_shapes(graph: Graph) -> dict[str, tuple[int, ...]]:
    """Shapes of every tensor (graph inputs, parameters and node outputs)."""
    shapes: dict[str, Shape] = {k: tuple(v.shape) for k, v in graph.params.items()}
    shapes.update({k: tuple(v.shape) for k, v in graph.inputs.items()})
    for n in graph.nodes:
        out = output_shape(n, [shapes.get(i) if i else None for i in n.inputs], graph.params)
        shapes[n.outputs[0]] = out
    return shapes
