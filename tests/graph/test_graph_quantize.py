"""int8 quantization: the spec's integer rules, calibration and agreement with float."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler.graph.errors import InputError
from vta.compiler.graph.ir import Graph, Node, TensorInfo
from vta.compiler.graph.passes import optimize
from vta.compiler.graph.quantize import (
    exponent_for,
    layer_errors,
    load_samples,
    quantize_array,
    quantize_graph,
    round_shift,
    run_quantized,
    shift_clip,
    synthetic_samples,
)
from vta.compiler.graph.reference import run_float

from .conftest import rand_input

pytestmark = pytest.mark.unit


def test_exponent_is_largest_power_of_two_that_fits() -> None:
    assert exponent_for(1.0) == 6  # 127 / 1 -> 2^6 = 64 <= 127 < 128
    assert exponent_for(127.0) == 0 and exponent_for(128.0) == -1
    assert exponent_for(0.01) == 13  # 0.01 * 2^13 = 81.9; * 2^14 = 163.8
    assert exponent_for(0.0) == 0
    for m in (0.003, 0.7, 5.0, 300.0):
        e = exponent_for(m)
        assert m * 2.0 ** e <= 127 < m * 2.0 ** (e + 1)


def test_quantize_rounds_and_saturates() -> None:
    x = np.array([0.5, -0.26, 1.99, 10.0, -10.0, 0.0])
    np.testing.assert_array_equal(quantize_array(x, 2), [2, -1, 8, 40, -40, 0])
    np.testing.assert_array_equal(quantize_array(x, 5), [16, -8, 64, 127, -128, 0])


def test_shift_clip_is_arithmetic_shift_then_clip() -> None:
    acc = np.array([1000, -1000, -1, 7, 40000, -40000, 2**31 - 1])
    # arithmetic shift floors toward -inf: -1000 >> 3 = -125, -1 >> 3 = -1
    np.testing.assert_array_equal(shift_clip(acc, 3, -128, 127),
                                  [125, -125, -1, 0, 127, -128, 127])
    np.testing.assert_array_equal(shift_clip(acc, 3, 0, 100), [100, 0, 0, 0, 100, 0, 100])
    # a negative shift is a left shift (int32 wrap-around before the clip)
    np.testing.assert_array_equal(shift_clip(np.array([3, -3, 2**30]), -2, -128, 127),
                                  [12, -12, 0])


def test_round_shift_rounds_half_up() -> None:
    v = np.array([5, 6, 7, -5, -6, -7, 4])
    np.testing.assert_array_equal(round_shift(v, 2), [1, 2, 2, -1, -1, -2, 1])
    np.testing.assert_array_equal(round_shift(v, -1), v * 2)


def _tiny_conv_graph() -> Graph:
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((8, 4, 3, 3)).astype(np.float32) * 0.3,
              "b1": rng.standard_normal(8).astype(np.float32) * 0.1,
              "w2": rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2,
              "b2": rng.standard_normal(8).astype(np.float32) * 0.1}
    conv = {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "group": 1}
    nodes = [Node("Conv", "c1", ["x", "w1", "b1"], ["a"], dict(conv)),
             Node("Conv", "c2", ["a", "w2", "b2"], ["b"], dict(conv, activation="relu",
                                                               act_min=0.0, act_max=None)),
             Node("Add", "add", ["a", "b"], ["y"], {})]
    return Graph(nodes, {"x": TensorInfo((1, 4, 6, 6))}, ["y"], params)


def test_qconv_matches_hand_computed_integer_spec() -> None:
    g = _tiny_conv_graph()
    samples = synthetic_samples(g, 2)
    qr = quantize_graph(g, samples, keep_first_float=False)
    q = {n.name: n for n in qr.graph.nodes}
    c2 = q["c2"]
    assert c2.op == "QConv" and c2.attrs["lo"] == 0 and c2.attrs["hi"] == 127
    env = run_quantized(qr.graph, samples[0], keep=True)
    xq, wq, bq = env[c2.inputs[0]], qr.graph.params[c2.inputs[1]], qr.graph.params[c2.inputs[2]]
    assert xq.dtype == np.int8 and wq.dtype == np.int8 and bq.dtype == np.int32
    # direct loops over the definition: int32 sum of products + bias, >> shift, clip
    xp = np.pad(xq.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((1, 8, 6, 6), np.int64)
    for o in range(8):
        for i in range(6):
            for j in range(6):
                ref[0, o, i, j] = (xp[0, :, i:i + 3, j:j + 3] * wq[o]).sum() + bq[o]
    ref = np.clip(ref >> c2.attrs["shift"], 0, 127)
    np.testing.assert_array_equal(env["b"], ref)
    # the bias carries the rounding term and the scale 2^(in + w)
    e_in, e_w, sh = c2.attrs["in_exp"], c2.attrs["w_exp"], c2.attrs["shift"]
    assert sh == e_in + e_w - c2.attrs["out_exp"]
    np.testing.assert_array_equal(
        bq, np.rint(g.params["b2"].astype(np.float64) * 2.0 ** (e_in + e_w)) + (1 << (sh - 1)))


def test_qadd_aligns_exponents() -> None:
    g = _tiny_conv_graph()
    samples = synthetic_samples(g, 2)
    qr = quantize_graph(g, samples, keep_first_float=False)
    add = qr.graph.node("add")
    env = run_quantized(qr.graph, samples[0], keep=True)
    a, b = env[add.inputs[0]].astype(np.int64), env[add.inputs[1]].astype(np.int64)
    ea, eb, eo = qr.exps[add.inputs[0]], qr.exps[add.inputs[1]], qr.exps["y.int8"]
    e = max(ea, eb)
    s = (a << (e - ea)) + (b << (e - eb))
    k = e - eo
    expect = np.clip((s + (1 << (k - 1))) >> k if k > 0 else s << -k, -128, 127)
    np.testing.assert_array_equal(env["y.int8"], expect)


def test_first_conv_and_named_layers_stay_float(small_models) -> None:
    og = optimize(small_models["resnet18"][1])
    s = synthetic_samples(og, 1)
    qr = quantize_graph(og, s, float_layers=["layer2.0.conv1"])
    ops = {n.name: n.op for n in qr.graph.nodes}
    assert ops["conv1"] == "Conv" and ops["layer2.0.conv1"] == "Conv"
    assert ops["layer1.0.conv1"] == "QConv" and ops["fc"] == "QDense"
    reasons = {i.node: i.float_reason for i in qr.layers}
    assert reasons["conv1"] == "first convolution"
    assert reasons["layer2.0.conv1"] == "named float by the user"
    with pytest.raises(InputError, match="no-such-layer"):
        quantize_graph(og, s, float_layers=["no-such-layer"])


def test_calibrated_resnet_agrees_with_float(small_models) -> None:
    """Calibrated on 4 synthetic inputs, evaluated on 6 others: cosine and top-1."""
    og = optimize(small_models["resnet18"][1])
    qr = quantize_graph(og, synthetic_samples(og, 4, seed=0))
    cos, top1 = [], []
    for seed in range(100, 106):
        x = rand_input(og, seed)
        f = run_float(og, x)[og.outputs[0]].ravel()
        q = run_quantized(qr.graph, x)[og.outputs[0]].ravel()
        cos.append(float(f @ q / np.linalg.norm(f) / np.linalg.norm(q)))
        top1.append(int(f.argmax() == q.argmax()))
    assert min(cos) > 0.99, cos
    assert sum(top1) >= 5, top1
    layer_errors(og, qr, rand_input(og, 100))
    errs = [i.rel_error for i in qr.layers if i.rel_error is not None]
    assert len(errs) >= 25 and max(errs) < 0.15


def test_calibrated_dcgan_agrees_with_float(small_models) -> None:
    og = optimize(small_models["dcgan"][1])
    qr = quantize_graph(og, synthetic_samples(og, 4))
    x = rand_input(og, 9)
    f = run_float(og, x)[og.outputs[0]].ravel()
    q = run_quantized(qr.graph, x)[og.outputs[0]].ravel()
    assert f @ q / np.linalg.norm(f) / np.linalg.norm(q) > 0.99


def test_calibration_range_matters() -> None:
    """Calibrating on inputs 100x too small saturates: the error grows (the data is used)."""
    g = _tiny_conv_graph()
    good = synthetic_samples(g, 2)
    bad = [{"x": s["x"] * 0.01} for s in good]
    x = rand_input(g, 7)
    f = run_float(g, x)["y"]
    errs = []
    for samples in (good, bad):
        qr = quantize_graph(g, samples, keep_first_float=False)
        q = run_quantized(qr.graph, x)["y"]
        errs.append(np.linalg.norm(q - f) / np.linalg.norm(f))
    assert errs[0] < 0.1 < errs[1]


def test_load_samples_from_npy(tmp_path) -> None:
    g = _tiny_conv_graph()
    one = np.zeros((1, 4, 6, 6), np.float32)
    stack = np.ones((3, 1, 4, 6, 6), np.float32)
    np.save(tmp_path / "a.npy", one)
    np.save(tmp_path / "b.npy", stack)
    s = load_samples(g, [tmp_path / "a.npy", tmp_path / "b.npy"])
    assert len(s) == 4 and s[3]["x"].shape == (1, 4, 6, 6)
    np.save(tmp_path / "c.npy", np.zeros((2, 2), np.float32))
    with pytest.raises(InputError, match="c.npy has shape"):
        load_samples(g, [tmp_path / "c.npy"])
