"""Element-wise int8 ops on VTA's ALU inside networks: a residual add with rescaled inputs
(ResNet, MobileNet v2), LeakyRelu (YOLO), HardSwish / HardSigmoid (MobileNet v3) and a Clip
that follows no conv. VTA on fsim gives the int8 reference's bits; the int8 network stays
close to onnxruntime's float result."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler.graph.executor import Executor
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.module import compile_graph
from vta.compiler.graph.options import CompileOptions
from vta.compiler.graph.summary import compile_summary
from vta.isa import Config

from .conftest import onnx_model, rand_input, run_ort

pytestmark = pytest.mark.sim

#: node -> the int8 op it becomes; every one runs on VTA's ALU
ALU_NODES = {"leaky": "QLeakyRelu", "res": "QAdd", "hswish": "QHardSwish", "clip6": "QClip",
             "hsig": "QHardSigmoid", "out_add": "QAdd"}


def _blocks_model():  # noqa: ANN202 - an onnx ModelProto
    from onnx import helper

    rng = np.random.default_rng(3)

    def w(*s):  # noqa: ANN002, ANN202
        return (rng.standard_normal(s) * np.sqrt(2 / np.prod(s[1:]))).astype(np.float32)

    conv = {"pads": [1] * 4}
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="c0", **conv),
        helper.make_node("LeakyRelu", ["c0"], ["l0"], name="leaky", alpha=0.1),
        helper.make_node("Conv", ["l0", "w1", "b1"], ["c1"], name="c1", **conv),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="c2", **conv),
        helper.make_node("Add", ["c2", "l0"], ["s"], name="res"),
        helper.make_node("Relu", ["s"], ["rs"], name="relu_res"),
        helper.make_node("Conv", ["rs", "w3", "b3"], ["c3"], name="c3"),
        helper.make_node("HardSwish", ["c3"], ["h3"], name="hswish"),
        helper.make_node("MaxPool", ["h3"], ["m"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Clip", ["m", "zero", "six"], ["m6"], name="clip6"),
        helper.make_node("Conv", ["m6", "w4", "b4"], ["c4"], name="c4"),
        helper.make_node("HardSigmoid", ["c4"], ["g4"], name="hsig", alpha=0.2, beta=0.5),
        helper.make_node("Add", ["g4", "m6"], ["y"], name="out_add"),
    ]
    inits = {"w0": w(16, 8, 3, 3), "b0": w(16) * 0.1, "w1": w(16, 16, 3, 3),
             "b1": w(16) * 0.1, "w2": w(16, 16, 3, 3), "b2": w(16) * 0.1,
             "w3": w(32, 16, 1, 1), "b3": w(32) * 0.3, "w4": w(32, 32, 1, 1),
             "b4": w(32) * 0.3, "zero": np.array(0, np.float32),
             "six": np.array(6, np.float32)}
    return onnx_model(nodes, {"x": [1, 8, 12, 12]}, {"y": [1, 32, 6, 6]}, inits, opset=14)


@pytest.fixture(scope="module")
def compiled():  # noqa: ANN201
    from vta.compiler.graph.onnx_frontend import from_onnx

    model = _blocks_model()
    g = from_onnx(model)
    samples = [rand_input(g, s) for s in range(4)]
    # the element-wise layers on their own (the residual add fused into its conv's epilogue:
    # tests/graph/test_graph_fuse.py)
    return model, g, compile_graph(g, Config(), CompileOptions(keep_first_float=False,
                                                               fuse=False), samples=samples)


def test_alu_ops_run_on_vta_bit_exact(compiled) -> None:
    _, g, m = compiled
    ops = {n.name: n.op for n in m.graph.nodes}
    assert {k: ops[k] for k in ALU_NODES} == ALU_NODES
    assert all(m.partition[k] == "vta" for k in ALU_NODES)
    assert {m.kernels[k].template for k in ALU_NODES} == {"elementwise"}
    # the residual add rescales both inputs (two multipliers) and carries the fused Relu
    res = m.graph.node("res").attrs
    assert res["mul_a"] != res["mul_b"] and res["lo"] == 0
    # nothing but the graph's own float boundary runs on the CPU
    assert {n.op for n in m.graph.nodes if m.partition[n.name] == "cpu"} <= \
        {"Quantize", "Dequantize", "QMaxPool"}
    for seed in (11, 12):
        x = rand_input(g, seed)
        ref = run_quantized(m.graph, x)["y"]
        with Executor(m, "fsim") as ex:
            out = ex.run(x)["y"]
            rep = ex.last_report
        np.testing.assert_array_equal(out, ref)
        assert {r.node for r in rep.layers if r.where == "fsim"} >= set(ALU_NODES)


def test_int8_blocks_close_to_onnxruntime_float(compiled) -> None:
    """Each ALU op's int8 output against the float tensor (relative error), and the network's
    output against onnxruntime: a wrong rule (a HardSwish without its product, a LeakyRelu
    without its slope, an add without the rescale) breaks both bounds."""
    model, g, m = compiled
    errs = {i.node: i.rel_error for i in m.layers if i.node in ALU_NODES}
    assert all(e is not None and e < 0.06 for e in errs.values()), errs
    x = rand_input(g, 21)
    with Executor(m, "fsim") as ex:
        out = ex.run(x)["y"].ravel().astype(np.float64)
    f = run_ort(model, x)[0].ravel().astype(np.float64)
    cos = f @ out / np.linalg.norm(f) / np.linalg.norm(out)
    assert cos > 0.999, cos  # measured 0.9997; with LeakyRelu as a Relu: 0.998


def test_summary_names_the_alu_ops(compiled) -> None:
    _, _, m = compiled
    s = compile_summary(m, "out")
    assert "of which 6 element-wise on VTA's ALU (int8): QAdd 2, QClip 1, QHardSigmoid 1, " \
        "QHardSwish 1, QLeakyRelu 1" in s
    cpu_line = next(ln for ln in s.splitlines() if "no VTA kernel" in ln)
    assert cpu_line.endswith(": pool")  # max pooling stays on the CPU; no ALU op does


def test_cpu_layer_keeps_an_alu_op_on_the_cpu_with_its_reason() -> None:
    from vta.compiler.graph.onnx_frontend import from_onnx

    g = from_onnx(_blocks_model())
    m = compile_graph(g, Config(), CompileOptions(keep_first_float=False, cpu_layers=["res"]))
    assert m.partition["res"] == "cpu" and m.partition["hswish"] == "vta"
    assert any(n.startswith("fallback: res (QAdd)") and "--cpu-layer" in n for n in m.notes)
    x = rand_input(g, 5)
    with Executor(m, "fsim") as ex:
        np.testing.assert_array_equal(ex.run(x)["y"], run_quantized(m.graph, x)["y"])
    off = compile_graph(g, Config(), CompileOptions(keep_first_float=False, vta_ops=()))
    assert any("res (QAdd) runs on the CPU (int8, VTA disabled" in n for n in off.notes)
