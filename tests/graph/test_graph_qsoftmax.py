"""The int8 attention softmax (``QSoftmax``, issue 37): its numpy kernel against float softmax
of the values its int8 scores stand for, its LLVM kernel against the numpy one bit for bit on
random int8 scores under masks (additive float, ``-inf``, ``finfo.min``, rows masked
entirely), and the quantizer's chain (scale, mask, Softmax) as one node."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler.graph.host import host_kernel
from vta.compiler.graph.ir import Graph, Node, TensorInfo
from vta.compiler.graph.quantize import quantize_graph
from vta.compiler.graph.reference import run_float
from vta.compiler.ops import int8_kernels as ik
from vta.compiler.ops.int8 import exp_table, fixed_point
from vta.compiler.ops.registry import Call

LOWEST = float(np.finfo(np.float32).min)


def _node(scale: float, out_scale: float) -> Call:
    mul, shift = fixed_point(1.0 / out_scale)
    return Call("QSoftmax", {"table": exp_table(scale), "scale": scale, "mul": mul,
                             "shift": shift})


def _masks(rng: np.random.Generator, shape: tuple[int, ...], step: float = 0.0,
           spread: float = 2.0) -> np.ndarray:
    """A float bias: random values (whole multiples of ``step`` when given), some ``-inf`` and
    ``finfo.min`` keys, one row of each masked entirely."""
    b = rng.standard_normal(shape) * spread
    b = (np.rint(b / step) * step if step else b).astype(np.float32)
    b[rng.random(shape) < 0.2] = -np.inf
    b[rng.random(shape) < 0.1] = LOWEST
    if shape[-2] > 1:
        b[..., 0, :] = -np.inf
        b[..., 1, :] = LOWEST
    return b


def _float_softmax(x: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Softmax in float64 of ``x + b``; a row of ``-inf`` is 0 (PyTorch's attention)."""
    z = x.astype(np.float64) + (0 if b is None else b.astype(np.float64))
    z = np.maximum(z, np.finfo(np.float32).min)  # finfo.min + x rounds to finfo.min in float32
    z = np.where(np.broadcast_to(b, z.shape) == -np.inf, -np.inf, z) if b is not None else z
    m = z.max(axis=-1, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(m), m, 0))
    s = e.sum(axis=-1, keepdims=True)
    return np.where(s > 0, e / np.where(s > 0, s, 1), 0)


@pytest.mark.parametrize("scale", [0.02, 0.06, 0.2])
@pytest.mark.parametrize("masked", [False, True])
def test_numpy_kernel_against_float_softmax(scale: float, masked: bool) -> None:
    """Within one output step of float softmax of the values the int8 scores stand for plus
    a bias (here whole steps of the scores' scale: the kernel rounds a bias to those), at the
    output scale 1/127; rows masked by ``-inf`` entirely are
    0, rows masked by ``finfo.min`` entirely are uniform (as in float32)."""
    rng = np.random.default_rng(int(scale * 100) + masked)
    shape = (1, 3, 12, 20)
    x = rng.integers(-128, 128, shape).astype(np.int8)
    b = _masks(rng, (1, 1, 12, 20), scale) if masked else None
    out_scale = 1.0 / 127
    y = ik.qsoftmax(_node(scale, out_scale), [x] if b is None else [x, b])[0]
    want = _float_softmax(x.astype(np.float64) * scale, b) / out_scale
    assert y.dtype == np.int8 and y.min() >= 0
    assert np.abs(y - want).max() <= 1.0
    if masked:
        assert (y[..., 0, :] == 0).all()
        assert (y[..., 1, :] == round(127 / 20)).all()


@pytest.mark.parametrize("bias_shape", [None, (1, 1, 12, 20), (1, 1, 1, 20), (12, 20)])
def test_llvm_kernel_bit_exact(bias_shape: tuple[int, ...] | None) -> None:
    """The LLVM kernel (what ``--host llvm`` runs) equals the numpy kernel on random int8
    scores under masked and fully masked rows, for a bias of the scores' trailing axes."""
    rng = np.random.default_rng(7)
    shape = (1, 3, 12, 20)
    scale, out_scale = 0.045, 0.7 / 127
    n = _node(scale, out_scale)
    g_ins = ["x"] + (["b"] if bias_shape else [])
    node = Node("QSoftmax", "sm", g_ins, ["y"], dict(n.attrs))
    shapes = {"x": shape, "y": shape, **({"b": bias_shape} if bias_shape else {})}
    hk = host_kernel(node, shapes, {})
    assert hk is not None
    for trial in range(3):
        x = rng.integers(-128, 128, shape).astype(np.int8)
        ins = [x]
        if bias_shape:
            ins.append(_masks(rng, bias_shape, spread=2.0 * (trial + 1)))
        want = ik.qsoftmax(n, ins)[0]
        np.testing.assert_array_equal(hk(ins), want)


def test_bias_over_heads_takes_the_numpy_kernel() -> None:
    """A bias that varies over a leading axis the scores repeat has no LLVM kernel."""
    n = _node(0.05, 1 / 127)
    node = Node("QSoftmax", "sm", ["x", "b"], ["y"], dict(n.attrs))
    assert host_kernel(node, {"x": (2, 3, 4, 4), "b": (2, 1, 4, 4), "y": (2, 3, 4, 4)},
                       {}) is None


def test_quantizer_folds_scale_and_mask_into_one_node() -> None:
    """``softmax(Where(causal, (a @ b) / 4, -inf))`` read by ``@ v``: the division is the
    scores' scale (an ``Identity``), the Where a constant bias, one ``QSoftmax`` between the
    two ``QMatMul``; int8 close to the float graph."""
    rng = np.random.default_rng(3)
    t, d = 8, 16
    causal = np.tril(np.ones((t, t), bool))
    params = {"four": np.array(4.0, np.float32), "ninf": np.array(-np.inf, np.float32),
              "causal": causal}
    nodes = [Node("MatMul", "qk", ["q", "k"], ["s"]),
             Node("Div", "div", ["s", "four"], ["s4"]),
             Node("Where", "mask", ["causal", "s4", "ninf"], ["sm_in"]),
             Node("Softmax", "softmax", ["sm_in"], ["p"], {"axis": -1, "legacy": False}),
             Node("MatMul", "pv", ["p", "v"], ["y"])]
    inputs = {"q": TensorInfo((1, t, d)), "k": TensorInfo((1, d, t)), "v": TensorInfo((1, t, d))}
    g = Graph(nodes, inputs, ["y"], params, "attn")

    def sample() -> dict[str, np.ndarray]:
        return {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in inputs.items()}

    qr = quantize_graph(g, [sample() for _ in range(4)])
    ops_ = [n.op for n in qr.graph.nodes]
    assert ops_.count("QSoftmax") == 1 and ops_.count("QMatMul") == 2
    assert "Softmax" not in ops_ and "Where" not in ops_
    sm = next(n for n in qr.graph.nodes if n.op == "QSoftmax")
    assert qr.graph.node("div").op == "Identity"
    between = {n.op for n in qr.graph.nodes} - {"QMatMul", "QSoftmax", "Identity", "Quantize",
                                                "Dequantize"}
    assert not between
    assert [n.op for n in qr.graph.nodes if sm.inputs[0] in n.outputs] == ["Identity"]
    from vta.compiler.graph.int8_executor import run_quantized

    x = sample()
    want = run_float(g, x)["y"]
    got = run_quantized(qr.graph, x)["y"]
    cos = float((want * got).sum() / np.linalg.norm(want) / np.linalg.norm(got))
    assert cos >= 0.99
