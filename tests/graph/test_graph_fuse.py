"""Residual adds fused into the epilogue of the conv or dense layer that produces one operand
(vta.compiler.graph.fuse): the fused module's VTA results are the unfused graph's int8
reference, bit for bit (fsim; tsim on the small configuration), the summary names the fused
layers, ``fuse=False`` keeps the adds apart, and a tuning log's conv that got an add says so."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler.graph.executor import Executor
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.module import compile_graph, load_module
from vta.compiler.graph.options import CompileOptions
from vta.compiler.graph.summary import compile_summary
from vta.isa import Config

from ..conftest import require_tool
from .conftest import onnx_model, rand_input

pytestmark = pytest.mark.sim


def _residual_model():  # noqa: ANN202 - an onnx ModelProto
    """A block whose add joins a 3x3 conv and a 1x1 projection (two conv operands, other
    scales) with a ReLU after it, an identity block (the add reads the block's input), and two
    dense layers added."""
    from onnx import helper

    rng = np.random.default_rng(38)

    def w(*s):  # noqa: ANN002, ANN202
        return (rng.standard_normal(s) * np.sqrt(2 / np.prod(s[1:]))).astype(np.float32)

    conv = {"pads": [1] * 4}
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="c0", **conv),
        helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
        helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], name="c1", **conv),
        helper.make_node("Conv", ["x", "wp", "bp"], ["p"], name="proj"),
        helper.make_node("Add", ["c1", "p"], ["s1"], name="add1"),
        helper.make_node("Relu", ["s1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="c2", **conv),
        helper.make_node("Add", ["r1", "c2"], ["s2"], name="add2"),
        helper.make_node("GlobalAveragePool", ["s2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "wd1", "bd1"], ["d1"], name="fc1", transB=1),
        helper.make_node("Gemm", ["f", "wd2", "bd2"], ["d2"], name="fc2", transB=1),
        helper.make_node("Add", ["d1", "d2"], ["y"], name="add3"),
    ]
    inits = {"w0": w(16, 16, 3, 3), "b0": w(16) * 0.1, "w1": w(16, 16, 3, 3),
             "b1": w(16) * 0.1, "wp": w(16, 16, 1, 1) * 3, "bp": w(16) * 0.5,
             "w2": w(16, 16, 3, 3), "b2": w(16) * 0.1, "wd1": w(32, 16), "bd1": w(32) * 0.1,
             "wd2": w(32, 16) * 0.5, "bd2": w(32) * 0.1}
    return onnx_model(nodes, {"x": [1, 16, 8, 8]}, {"y": [1, 32]}, inits, opset=14)


def _compile(cfg: Config, tuned=None, **kw):  # noqa: ANN001, ANN003, ANN202
    from vta.compiler.graph.onnx_frontend import from_onnx

    g = from_onnx(_residual_model())
    samples = [rand_input(g, s) for s in range(4)]
    return g, compile_graph(g, cfg, CompileOptions(keep_first_float=False, **kw),
                            samples=samples, tuned=tuned, jobs=1)


@pytest.fixture(scope="module")
def modules():  # noqa: ANN201
    g, plain = _compile(Config(), fuse=False)
    return g, plain, _compile(Config())[1]


def test_every_add_is_fused_and_bit_exact_on_fsim(modules) -> None:
    g, plain, fused = modules
    assert [n.op for n in plain.graph.nodes].count("QAdd") == 3
    res = {n.name: n for n in fused.graph.nodes if "residual" in n.attrs}
    assert not [n for n in fused.graph.nodes if n.op == "QAdd"]
    assert len(res) == 3 and all(fused.partition[k] == "vta" for k in res)
    assert {fused.kernels[k].template for k in res} == {"conv2d", "dense"}
    # the projection's add: its other operand at another scale, a ReLU after it
    (add1,) = [n for k, n in res.items() if k.endswith("+add1")]
    r = add1.attrs["residual"]
    assert r["mul_a"] != r["mul_b"] and r["lo"] == 0
    assert add1.inputs[3] in ("c1", "p") and add1.outputs == plain.graph.node("add1").outputs
    for seed in (11, 12):
        x = rand_input(g, seed)
        want = run_quantized(plain.graph, x)["y"]  # the unfused graph's int8 reference
        np.testing.assert_array_equal(run_quantized(fused.graph, x)["y"], want)
        with Executor(fused, "fsim") as ex:
            np.testing.assert_array_equal(ex.run(x)["y"], want)
            assert {r.node for r in ex.last_report.layers if r.where == "fsim"} >= set(res)


def test_per_channel_requantization_then_the_add(modules) -> None:
    """Per-channel shift and multiplier vectors in the conv epilogue, then the fused add."""
    g, _, _ = modules
    _, plain = _compile(Config(), fuse=False, per_channel=True)
    _, fused = _compile(Config(), per_channel=True)
    res = [n for n in fused.graph.nodes if "residual" in n.attrs]
    assert res and any(isinstance(n.attrs["shift"], list) for n in res)
    x = rand_input(g, 15)
    with Executor(fused, "fsim") as ex:
        np.testing.assert_array_equal(ex.run(x)["y"], run_quantized(plain.graph, x)["y"])


def test_fused_layers_take_fewer_cycles(modules) -> None:
    _, plain, fused = modules
    assert sum(k.cycles for k in fused.kernels.values()) < \
        sum(k.cycles for k in plain.kernels.values())
    for name, k in fused.kernels.items():
        if "+" in name:
            conv, add = name.split("+")
            assert k.cycles < plain.kernels[conv].cycles + plain.kernels[add].cycles


def test_summary_names_the_fused_layers(modules) -> None:
    _, plain, fused = modules
    s = compile_summary(fused, "out")
    names = [n.name for n in fused.graph.nodes if "residual" in n.attrs]
    assert f"of which 3 with the residual add fused into the epilogue: {', '.join(names)}" in s
    assert "residual add fused" not in compile_summary(plain, "out")


def test_module_round_trip(modules, tmp_path) -> None:  # noqa: ANN001
    g, plain, fused = modules
    m = load_module(fused.save(tmp_path / "m"))
    x = rand_input(g, 13)
    with Executor(m, "fsim") as ex:
        np.testing.assert_array_equal(ex.run(x)["y"], run_quantized(plain.graph, x)["y"])


def test_tuning_log_of_a_fused_conv_says_so_in_one_line(modules) -> None:
    """A log that tuned the conv now fused with its add: the fused layer is another workload
    (its knobs are the log's for the conv, timed by the performance model)."""
    _, plain, _ = modules
    conv = next(n for n in plain.graph.nodes if n.name == "c2")
    knobs = plain.kernels["c2"].knobs

    def tuned(layer):  # noqa: ANN001, ANN202
        return (knobs, 1234.0) if layer.node == conv.name else None

    _, m = _compile(Config(), tuned=tuned)
    notes = [n for n in m.notes if n.startswith("tuning log:")]
    assert len(notes) == 1 and "1 tuned layer(s) (c2) got their residual add fused" in notes[0]
    assert "--no-fuse" in notes[0] and "\n" not in notes[0]
    assert m.kernels["c2+add2"].knobs == knobs


@pytest.mark.tsim
def test_fused_module_on_tsim_small_config() -> None:
    require_tool("verilator")
    g, plain = _compile(Config.preset("small"), fuse=False)
    _, fused = _compile(Config.preset("small"))
    assert any("residual" in n.attrs for n in fused.graph.nodes)
    x = rand_input(g, 14)
    with Executor(fused, "tsim", host="numpy") as ex:
        np.testing.assert_array_equal(ex.run(x)["y"], run_quantized(plain.graph, x)["y"])
