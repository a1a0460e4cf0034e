"""The first convolution's default (issue #21): it stays float on the CPU while it holds less
than FIRST_CONV_FLOAT_SHARE of the network's MACs; a heavier one is int8 on VTA;
``--quantize-first`` quantizes it always and ``--float-layer`` keeps any layer float. Where it
is quantized, VTA's result on fsim equals the int8 reference bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper
from vta.cli.main import main
from vta.compiler.graph.calibration import synthetic_samples
from vta.compiler.graph.executor import Executor
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.module import compile_graph
from vta.compiler.graph.onnx_frontend import from_onnx
from vta.compiler.graph.options import CompileOptions
from vta.compiler.graph.passes import optimize
from vta.compiler.graph.quantize import FIRST_CONV_FLOAT_SHARE, float_first_conv, quantize_graph
from vta.isa import Config

from .conftest import onnx_model, rand_input, run_ort

pytestmark = pytest.mark.sim

#: an image of 3 channels, 16x16: stem 3 -> 8 (3x3, pad 1), body 8 -> BODY (3x3, pad 1), a
#: classifier of 10; MACs by hand (every output pixel sees all 9 taps: zero padding counts)
STEM_MACS = 16 * 16 * 8 * 3 * 9


def body_macs(body: int) -> int:
    return 16 * 16 * body * 8 * 9 + body * 10


def stem_model(body: int):
    """image -> stem conv -> Relu -> body conv -> Relu -> global pool -> dense."""
    rng = np.random.default_rng(body)

    def w(*s):  # noqa: ANN002, ANN202
        return (rng.standard_normal(s) * np.sqrt(2 / np.prod(s[1:]))).astype(np.float32)

    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="stem", pads=[1] * 4),
             helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], name="body", pads=[1] * 4),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("GlobalAveragePool", ["r1"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)]
    inits = {"w0": w(8, 3, 3, 3), "b0": w(8) * 0.1, "w1": w(body, 8, 3, 3),
             "b1": w(body) * 0.1, "wf": w(10, body), "bf": w(10) * 0.1}
    return onnx_model(nodes, {"x": [1, 3, 16, 16]}, {"y": [1, 10]}, inits)


#: body widths with the stem under / over the threshold (checked against the hand count)
LIGHT, HEAVY = 32, 4


def test_threshold_on_hand_counted_macs() -> None:
    light = STEM_MACS / (STEM_MACS + body_macs(LIGHT))
    heavy = STEM_MACS / (STEM_MACS + body_macs(HEAVY))
    assert light < FIRST_CONV_FLOAT_SHARE < heavy  # 8.6% and 42.8%
    assert float_first_conv(optimize(from_onnx(stem_model(LIGHT)))) == "stem"
    assert float_first_conv(optimize(from_onnx(stem_model(HEAVY)))) is None


def _quantized_ops(body: int, **kw) -> tuple[dict[str, str], dict[str, str | None]]:
    og = optimize(from_onnx(stem_model(body)))
    qr = quantize_graph(og, synthetic_samples(og, 2), **kw)
    return ({n.name: n.op for n in qr.graph.nodes},
            {i.node: i.float_reason for i in qr.layers})


def test_policy_which_layers_are_int8() -> None:
    ops, why = _quantized_ops(LIGHT)
    assert (ops["stem"], ops["body"], ops["fc"]) == ("Conv", "QConv", "QDense")
    assert why["stem"] == f"first convolution, under {FIRST_CONV_FLOAT_SHARE:.0%} of the MACs"
    ops, why = _quantized_ops(LIGHT, keep_first_float=False)  # --quantize-first
    assert (ops["stem"], why["stem"]) == ("QConv", None)
    ops, why = _quantized_ops(HEAVY)
    assert (ops["stem"], ops["body"], ops["fc"]) == ("QConv", "QConv", "QDense")
    ops, why = _quantized_ops(HEAVY, float_layers=["stem"])  # the way back
    assert (ops["stem"], why["stem"]) == ("Conv", "named by --float-layer")
    # a graph without convolutions: nothing to keep
    og = optimize(from_onnx(onnx_model(
        [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)], {"x": [1, 16]},
        {"y": [1, 4]}, {"w": np.ones((4, 16), np.float32)})))
    assert float_first_conv(og) is None


@pytest.mark.parametrize("body, quantize_first", [(HEAVY, False), (LIGHT, True)],
                         ids=["heavy-default", "light-quantize-first"])
def test_quantized_first_conv_on_vta_bit_exact(body: int, quantize_first: bool) -> None:
    """The first conv on VTA (3 input channels padded to a block): fsim equals the int8
    reference bit for bit, and the result stays close to onnxruntime's float output."""
    model = stem_model(body)
    g = from_onnx(model)
    m = compile_graph(g, Config(), CompileOptions(keep_first_float=not quantize_first))
    assert m.partition["stem"] == m.partition["body"] == m.partition["fc"] == "vta"
    assert m.macs["stem"] == STEM_MACS
    assert not [n for n in m.notes if n.startswith("fallback: stem ")]
    for seed in (3, 4):
        x = rand_input(g, seed)
        with Executor(m, "fsim", host="numpy") as ex:
            out = ex.run(x)["y"]
        np.testing.assert_array_equal(out, run_quantized(m.graph, x)["y"])
        (ref,) = run_ort(model, x)
        a, b = ref.ravel().astype(np.float64), out.ravel().astype(np.float64)
        assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) >= 0.99


def test_light_first_conv_stays_on_the_cpu() -> None:
    m = compile_graph(from_onnx(stem_model(LIGHT)), Config())
    assert m.partition["stem"] == "cpu" and m.partition["body"] == "vta"
    assert (f"fallback: stem (Conv) runs on the CPU (float, first convolution, under "
            f"{FIRST_CONV_FLOAT_SHARE:.0%} of the MACs)") in m.notes


def test_cli_summary_and_options(tmp_path, capsys) -> None:
    import onnx

    onnx.save(stem_model(LIGHT), tmp_path / "light.onnx")
    onnx.save(stem_model(HEAVY), tmp_path / "heavy.onnx")
    share = f"{FIRST_CONV_FLOAT_SHARE:.0%}"
    assert main(["compile", "--help"]) == 0
    assert f"under {share}" in " ".join(capsys.readouterr().out.split())
    total = STEM_MACS + body_macs(LIGHT)
    assert main(["compile", str(tmp_path / "light.onnx"), "-o", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert f"float, first convolution, under {share} of the MACs: 1 " \
           f"({STEM_MACS / total * 100:.1f}% of MACs): stem" in out
    assert main(["compile", str(tmp_path / "light.onnx"), "-o", str(tmp_path / "b"),
                 "--quantize-first"]) == 0
    assert "3 layers on VTA: 100.0% of" in capsys.readouterr().out
    assert main(["compile", str(tmp_path / "heavy.onnx"), "-o", str(tmp_path / "c")]) == 0
    assert "3 layers on VTA: 100.0% of" in capsys.readouterr().out
    assert main(["compile", str(tmp_path / "heavy.onnx"), "-o", str(tmp_path / "d"),
                 "--float-layer", "stem"]) == 0
    assert "float, named by --float-layer: 1" in capsys.readouterr().out
    parts = {d: json.loads((tmp_path / d / "manifest.json").read_text())["partition"]["stem"]
             for d in "abcd"}
    assert parts == {"a": "cpu", "b": "vta", "c": "vta", "d": "cpu"}
