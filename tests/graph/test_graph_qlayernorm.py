"""The int8 LayerNorm (``QLayerNorm``, issue 37): its numpy kernel against float LayerNorm of
the values its int8 input stands for, its LLVM kernel against the numpy one bit for bit, and
the quantizer's rule (int8 in where the input is int8, int8 out with gamma/beta and an
offset)."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler.graph.host import host_kernel
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.ir import Graph, Node, TensorInfo
from vta.compiler.graph.quantize import quantize_graph
from vta.compiler.graph.reference import run_float
from vta.compiler.ops import int8_kernels as ik
from vta.compiler.ops.int8 import LN_FRAC, LN_SHIFT
from vta.compiler.ops.registry import Call


def _params(rng: np.random.Generator, c: int, s_out: float, off: int = 0):  # noqa: ANN202
    g = rng.standard_normal(c) * 0.5 + 1
    b = rng.standard_normal(c) * 0.3
    gq = np.rint(g / s_out * 2.0 ** (LN_SHIFT - LN_FRAC)).astype(np.int32)
    bq = (np.rint(b / s_out * 2.0 ** LN_SHIFT) + (1 << (LN_SHIFT - 1))
          - off * (1 << LN_SHIFT)).astype(np.int32)
    return g, b, gq, bq


@pytest.mark.parametrize("c, s_in", [(32, 0.05), (64, 0.01), (256, 0.2)])
def test_numpy_kernel_against_float_layernorm(c: int, s_in: float) -> None:
    """Within half an output step (and a hair: the fixed-point gamma) of float LayerNorm of
    the input's values, offset output included; a constant row gives beta."""
    rng = np.random.default_rng(c)
    x = rng.integers(-128, 128, (2, 7, c)).astype(np.int8)
    x[0, 0] = 9  # a constant row: its variance is eps alone
    s_out, off, eps = 4 / 255, -40, 1e-5
    g, b, gq, bq = _params(rng, c, s_out, off)
    n = Call("QLayerNorm", {"eps_c2": eps / s_in ** 2 * c * c})
    y = ik.qlayernorm(n, [x, gq, bq])[0]
    xf = x.astype(np.float64) * s_in
    ref = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + eps) * g + b
    want = np.clip(ref / s_out - off, -128, 127)
    assert np.abs(y - want).max() <= 0.52


@pytest.mark.parametrize("shape", [(1, 17, 32), (3, 5, 256)])
def test_llvm_kernel_bit_exact(shape: tuple[int, ...]) -> None:
    """The LLVM kernel (what ``--host llvm`` runs) equals the numpy kernel on random int8
    input, constant rows and extreme rows included."""
    rng = np.random.default_rng(5)
    c = shape[-1]
    n = Node("QLayerNorm", "ln", ["x", "g", "b"], ["y"], {"axis": -1, "eps_c2": 1e-5 / 0.03 ** 2
                                                          * c * c})
    _, _, gq, bq = _params(rng, c, 3 / 127)
    hk = host_kernel(n, {"x": shape, "y": shape, "g": (c,), "b": (c,)}, {})
    assert hk is not None
    for _ in range(3):
        x = rng.integers(-128, 128, shape).astype(np.int8)
        x[0, 0] = -128
        x[0, 1, : c // 2], x[0, 1, c // 2:] = -128, 127
        np.testing.assert_array_equal(hk([x, gq, bq]), ik.qlayernorm(Call("QLayerNorm", n.attrs),
                                                                     [x, gq, bq])[0])


def test_quantizer_runs_layernorm_on_int8_between_dense_layers() -> None:
    """``Dense -> LayerNorm -> Dense``: the LayerNorm reads the first Dense's int8 output and
    writes int8 (with an offset) for the second: no Dequantize/Quantize between them; int8
    close to the float graph."""
    rng = np.random.default_rng(2)
    c = 32
    params = {"w1": rng.standard_normal((c, c)).astype(np.float32) * 0.3,
              "w2": rng.standard_normal((c, c)).astype(np.float32) * 0.3,
              "gamma": (rng.standard_normal(c) * 0.3 + 1).astype(np.float32),
              "beta": (rng.standard_normal(c) * 0.2).astype(np.float32)}
    nodes = [Node("Dense", "fc1", ["x", "w1"], ["h"]),
             Node("LayerNormalization", "ln", ["h", "gamma", "beta"], ["hn"],
                  {"axes": [-1], "epsilon": 1e-5}),
             Node("Dense", "fc2", ["hn", "w2"], ["y"])]
    g = Graph(nodes, {"x": TensorInfo((8, c))}, ["y"], params, "ln")

    def sample() -> dict[str, np.ndarray]:
        return {"x": rng.standard_normal((8, c)).astype(np.float32)}

    qr = quantize_graph(g, [sample() for _ in range(4)])
    assert [n.op for n in qr.graph.nodes] == ["Quantize", "QDense", "QLayerNorm", "QDense",
                                              "Dequantize"]
    x = sample()
    want, got = run_float(g, x)["y"], run_quantized(qr.graph, x)["y"]
    cos = float((want * got).sum() / np.linalg.norm(want) / np.linalg.norm(got))
    assert cos >= 0.99
