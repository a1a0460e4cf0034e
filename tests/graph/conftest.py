"""Fixtures of the graph tests: small zoo models (built once per session) and ONNX helpers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from vta.compiler.graph import zoo
from vta.compiler.graph.onnx_frontend import from_onnx

SMALL = {
    "resnet18": {"image_size": 32, "num_classes": 100},
    "mobilenet_v1": {"image_size": 32, "width": 0.25, "num_classes": 100},
    "dcgan": {"ngf": 8, "nz": 32},
}


@pytest.fixture(scope="session")
def small_models() -> dict[str, Any]:
    """The zoo's networks at test size: name -> (onnx ModelProto, Graph)."""
    out = {}
    for name, kw in SMALL.items():
        m = zoo.build(name, **kw)
        out[name] = (m, from_onnx(m))
    return out


@pytest.fixture(scope="session", autouse=True)
def _single_thread_blas() -> None:
    """One BLAS thread: the machine's cores are shared by parallel test workers, and an
    oversubscribed multi-threaded OpenBLAS is many times slower on small matrices."""
    from vta.sim.blas import limit_blas_threads

    limit_blas_threads(1)


def torch_families() -> ModuleType:
    """bench/torch_families.py: the PyTorch models of the network families, one definition for
    the benchmark (full size) and the export tests (``small=True``)."""
    return bench_module("torch_families")


def bench_module(name: str) -> ModuleType:
    """The module ``bench/<name>.py``, loaded by path, since bench/ is a folder of scripts
    beside the tests, not a package."""
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "bench" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def rand_input(graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in graph.inputs.items()}


def onnx_model(nodes, inputs: dict[str, list[int]], outputs: dict[str, list[int] | None],
               inits: dict[str, np.ndarray] | None = None, opset: int = 13):
    """A one-graph ONNX model from helper nodes (float32 inputs; output shapes inferred by
    ONNX's shape inference when given as None)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    outs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) if v is not None
            else onnx.ValueInfoProto(name=k) for k, v in outputs.items()]
    g = helper.make_graph(
        nodes, "t",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
        outs, [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    try:
        return onnx.shape_inference.infer_shapes(m)
    except Exception:  # noqa: BLE001 - invalid on purpose in some tests
        return m


def run_ort(model, feeds: dict[str, np.ndarray], *, optimize: bool = True) -> list[np.ndarray]:
    """onnxruntime's outputs on one thread; ``optimize=False`` runs the graph as written (no
    fusion of QDQ pairs into its int8 kernels)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_close_rel(ours: np.ndarray, ref: np.ndarray, rel: float = 1e-4) -> None:
    """Every element within ``rel`` of the reference's largest magnitude (and the same shape)."""
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    scale = max(float(np.abs(ref).max()), 1e-30)
    err = float(np.abs(ours.astype(np.float64) - ref).max())
    assert err <= rel * scale, f"max error {err:.3g} > {rel} x {scale:.3g}"
