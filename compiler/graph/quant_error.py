"""Quantization error: how far a quantized graph's values are from the float graph's, per layer
and at the outputs."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .int8_executor import run_quantized
from .ir import Graph
from .quant_info import QuantResult
from .reference import run_float


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
