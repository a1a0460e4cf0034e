"""int8 quantization: the spec's integer rules, calibration and agreement with float."""

from __future__ import annotations

import math

import numpy as np
import pytest
from vta.compiler.graph.calibration import CALIBRATIONS, calibrate, load_samples, synthetic_samples
from vta.compiler.graph.errors import InputError
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.ir import Graph, Node, TensorInfo
from vta.compiler.graph.passes import optimize
from vta.compiler.graph.quant_error import layer_errors
from vta.compiler.graph.quantize import quantize_graph, requant_params
from vta.compiler.graph.reference import run_float
from vta.compiler.ops.int8 import (
    dequantize_array,
    exponent_for,
    quantize_array,
    requantize,
    rescale,
    shr,
    wrap_int32,
)

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
    np.testing.assert_array_equal(quantize_array(x, 2.0 ** -2), [2, -1, 8, 40, -40, 0])
    np.testing.assert_array_equal(quantize_array(x, 2.0 ** -5), [16, -8, 64, 127, -128, 0])
    np.testing.assert_array_equal(quantize_array(x, 0.1), [5, -3, 20, 100, -100, 0])


def test_requantize_is_arithmetic_shift_then_clip() -> None:
    acc = np.array([1000, -1000, -1, 7, 40000, -40000, 2**31 - 1])
    # arithmetic shift floors toward -inf: -1000 >> 3 = -125, -1 >> 3 = -1
    np.testing.assert_array_equal(requantize(acc, 3, -128, 127),
                                  [125, -125, -1, 0, 127, -128, 127])
    np.testing.assert_array_equal(requantize(acc, 3, 0, 100), [100, 0, 0, 0, 100, 0, 100])
    # a negative shift is a left shift (int32 wrap-around before the clip)
    np.testing.assert_array_equal(requantize(np.array([3, -3, 2**30]), -2, -128, 127),
                                  [12, -12, 0])


def test_wrap_int32_and_shr_wrap_like_int32_registers() -> None:
    """wrap_int32 keeps the low 32 bits (hand-computed values and the modular definition);
    shr by one amount equals shr by that amount per channel."""
    edge = np.array([2**31, 2**31 - 1, -2**31, -2**31 - 1, 2**32 + 5, -2**32 - 5, 2**63 - 1,
                     -2**63, 0, -1], np.int64)
    np.testing.assert_array_equal(wrap_int32(edge), [-2**31, 2**31 - 1, -2**31, 2**31 - 1, 5,
                                                     -5, -1, 0, 0, -1])
    v = np.random.default_rng(0).integers(-2**62, 2**62, 4096)
    np.testing.assert_array_equal(wrap_int32(v), (v + 2**31) % 2**32 - 2**31)
    acc = np.random.default_rng(1).integers(-2**31, 2**31, (2, 3, 4, 4))
    for k in (-33, -4, 0, 3, 31, 40):
        per_channel = shr(acc, np.full((1, 3, 1, 1), k))
        np.testing.assert_array_equal(shr(acc, k), per_channel)
        want = (acc >> min(k, 31)) if k >= 0 else (acc << min(-k, 32))
        np.testing.assert_array_equal(per_channel, (want + 2**31) % 2**32 - 2**31)


@pytest.mark.parametrize("per_channel", [False, True])
def test_weights_quantized_a_chunk_at_a_time_equal_the_whole_tensor_formula(
        monkeypatch: pytest.MonkeyPatch, per_channel: bool) -> None:
    """quantize_weights over chunks of output channels (a chunk of 2.5 rows here) gives
    clip(rint(w / s)) of the whole tensor, s = max |w| / 127 (per tensor or per channel), and
    the per-channel sums of q and |q|."""
    from vta.compiler.graph import quantize as qm

    monkeypatch.setattr(qm, "_WEIGHT_CHUNK", 45)
    w = np.random.default_rng(2).standard_normal((7, 2, 3, 3)).astype(np.float32)
    w[3] *= 9.0
    q, s, qsum, qabs = qm.quantize_weights(w, per_channel, False)
    m = np.abs(w.reshape(7, -1)).max(axis=1).astype(np.float64)
    s_ref = m / 127 if per_channel else np.full(7, m.max() / 127)
    np.testing.assert_array_equal(s, s_ref)
    q_ref = np.clip(np.rint(w / s_ref.astype(np.float32)[:, None, None, None]), -128, 127)
    np.testing.assert_array_equal(q, q_ref.astype(np.int8))
    np.testing.assert_array_equal(qsum, q_ref.reshape(7, -1).sum(axis=1))
    np.testing.assert_array_equal(qabs, np.abs(q_ref).reshape(7, -1).sum(axis=1))


def test_requantize_fixed_point_steps_by_hand() -> None:
    acc = np.array([1000, -1000, 77, -77, 2**30])
    # >> 2, * 300, + 2^9, >> 10: 250*300 = 75000 -> (75000 + 512) >> 10 = 73
    got = requantize(acc, 2, -128, 127, mul=300, shift2=10)
    # 77 >> 2 = 19, 19 * 300 = 5700 -> 6212 >> 10 = 6; -77 >> 2 = -20 -> -5488 >> 10 = -6
    np.testing.assert_array_equal(got[:4], [73, -73, 6, -6])
    # 2^30 >> 2 = 2^28; * 300 wraps in int32 before the clip (VTA's accumulator)
    v = ((2**28 * 300 + 2**31) % 2**32) - 2**31
    assert got[4] == np.clip((v + 512) >> 10, -128, 127)


def test_rescale_rounds_half_up() -> None:
    v = np.array([5, 6, 7, -5, -6, -7, 4])
    np.testing.assert_array_equal(rescale(v, 1, 2), [1, 2, 2, -1, -1, -2, 1])
    np.testing.assert_array_equal(rescale(v, 3, 0), v * 3)


@pytest.mark.parametrize("seed", range(5))
def test_requant_params_never_overflow_and_track_the_factor(seed: int) -> None:
    """At the accumulator's bounds the int32 steps equal exact int64 arithmetic (no wrap),
    and the result is within one step of acc * r."""
    rng = np.random.default_rng(seed)
    bound = (2 ** rng.uniform(8, 30, size=8)).astype(np.int64)
    # worst-case outputs from 16 to 65536 int8 steps (real layers: well below 2**16)
    r = 2.0 ** rng.uniform(4, 16, size=8) / bound
    shift, mul, shift2 = requant_params(r, bound, pow2=False)
    assert 0 <= shift2 <= 15 and all(0 < m < 2**15 for m in mul)  # 16-bit immediates
    for c in range(8):
        acc = np.array([-bound[c], -bound[c] // 3, 0, bound[c] // 7, bound[c]], np.int64)
        acc_b = acc + ((1 << shift[c] >> 1) if shift[c] > 0 else 0)  # the bias's rounding
        exact = shr(acc_b, shift[c]) * mul[c]
        assert np.abs(exact).max() + (1 << shift2 >> 1) < 2**31
        got = shr(wrap_int32(exact + (1 << shift2 >> 1)), shift2)  # requantize's last steps
        np.testing.assert_allclose(got, acc * r[c], atol=1 + np.abs(acc * r[c]).max() * 2**-9)


def test_pow2_scales_requantize_by_shift_alone() -> None:
    g = _tiny_conv_graph()
    qr = quantize_graph(g, synthetic_samples(g, 2), keep_first_float=False, pow2=True)
    for n in qr.graph.nodes:
        if n.op == "QConv":
            assert n.attrs["mul"] == 1 and n.attrs["shift2"] == 0
    for s in qr.scales.values():
        assert math.log2(s) == round(math.log2(s))


def test_calibration_methods() -> None:
    """max is the largest |value|; percentile clips the top 0.01%; mse's threshold has (close
    to) the least quantization error of any threshold."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 128, 128)).astype(np.float32)
    wide = rng.random(x.shape) < 0.001
    x[wide] *= 30
    g = Graph([Node("Relu", "r", ["x"], ["y"], {})], {"x": TensorInfo(x.shape)}, ["y"], {})
    th = {m: calibrate(g, [{"x": x}], m)["x"] for m in CALIBRATIONS}
    assert th["max"] == pytest.approx(float(np.abs(x).max()))
    assert th["percentile"] < th["max"]
    assert np.mean(np.abs(x) > th["percentile"]) <= 1.2e-4

    def err(t: float) -> float:
        return float(np.mean((dequantize_array(quantize_array(x, t / 127), t / 127) - x) ** 2))
    grid = np.linspace(th["max"] / 64, th["max"], 200)
    assert err(th["mse"]) <= 1.1 * min(err(t) for t in grid)
    with pytest.raises(InputError, match="calibration method 'kl'"):
        calibrate(g, [{"x": x}], "kl")


def test_calibration_of_a_reshaped_view_is_its_own() -> None:
    """A Reshape's output is a view of its input (the same values in the same order): it
    shares the input's histogram, and its threshold is the one calibrating it alone gives;
    a Transpose's (a copy, other values subsampled) is calibrated on its own values."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 8, 96, 96)).astype(np.float32) * 3
    x[rng.random(x.shape) < 0.002] *= 20
    g = Graph([Node("Relu", "r", ["x"], ["y"], {}),
               Node("Reshape", "s", ["y"], ["z"], {"shape": [1, 8, 9216], "allowzero": 0}),
               Node("Transpose", "t", ["z"], ["w"], {"perm": [0, 2, 1]}),
               Node("Relu", "r2", ["w"], ["out"], {})],
              {"x": TensorInfo(x.shape)}, ["out"], {})
    samples = [{"x": x}, {"x": x[:, ::-1].copy() * 0.5}]
    env = [run_float(g, s, keep=True) for s in samples]
    for m in ("mse", "percentile"):
        th = calibrate(g, samples, m)
        for t in ("y", "z", "w"):
            alone = Graph([Node("Relu", "r", ["a"], ["b"], {})],
                          {"a": TensorInfo(env[0][t].shape)}, ["b"], {})
            assert th[t] == calibrate(alone, [{"a": e[t]} for e in env], m)["a"], (m, t)
        assert th["y"] == th["z"]


@pytest.mark.parametrize("op,attrs", [("LeakyRelu", {"alpha": 0.1}),
                                      ("HardSigmoid", {"alpha": 0.2, "beta": 0.5}),
                                      ("HardSwish", {})])
def test_int8_activation_kernels_follow_float(op: str, attrs: dict) -> None:
    """The int8 kernels (ALU-expressible integer steps) stay within about one output step of
    the float op, and the block stays int8 (no Dequantize before the activation)."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((16, 8, 1, 1)).astype(np.float32) * 0.5
    conv = {"strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1], "group": 1}
    g = Graph([Node("Conv", "c", ["x", "w"], ["a"], conv), Node(op, "act", ["a"], ["y"], attrs)],
              {"x": TensorInfo((1, 8, 8, 8))}, ["y"], {"w": w})
    qr = quantize_graph(g, synthetic_samples(g, 2), keep_first_float=False)
    assert [n.op for n in qr.graph.nodes] == ["Quantize", "QConv", "Q" + op, "Dequantize"]
    x = rand_input(g, 3)
    env = run_quantized(qr.graph, x, keep=True)
    a = env["a"].astype(np.float64) * qr.scales["a"]  # the int8 input, dequantized
    fa = run_float(Graph([g.nodes[1]], {"a": TensorInfo(a.shape)}, ["y"], {}),
                   {"a": a.astype(np.float32)})["y"]
    step = qr.scales["y.int8"]
    assert np.abs(env["y"] - fa).max() <= 1.01 * step
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
    a = c2.attrs
    s1, mul, s2 = a["shift"], a["mul"], a["shift2"]
    assert isinstance(s1, int) and 0 < mul < 2**15 and 0 < s2 <= 15
    ref = ((ref >> s1) * mul + (1 << (s2 - 1))) >> s2
    np.testing.assert_array_equal(env["b"], np.clip(ref, 0, 127))
    # the multiplier carries in * w / out; the bias the rounding term and the scale in * w
    assert mul * 2.0 ** -(s1 + s2) == pytest.approx(
        a["in_scale"] * a["w_scale"] / a["out_scale"], rel=2**-10)
    np.testing.assert_array_equal(
        bq, np.rint(g.params["b2"].astype(np.float64) / (a["in_scale"] * a["w_scale"]))
        + (1 << (s1 - 1)))


def test_qadd_rescales_both_inputs() -> None:
    g = _tiny_conv_graph()
    samples = synthetic_samples(g, 2)
    qr = quantize_graph(g, samples, keep_first_float=False)
    add = qr.graph.node("add")
    env = run_quantized(qr.graph, samples[0], keep=True)
    a, b = env[add.inputs[0]].astype(np.int64), env[add.inputs[1]].astype(np.int64)
    sa, sb, so = qr.scales[add.inputs[0]], qr.scales[add.inputs[1]], qr.scales["y.int8"]
    ma, mb, k = add.attrs["mul_a"], add.attrs["mul_b"], add.attrs["shift"]
    assert max(ma, mb) < 2**15 and ma * 2.0 ** -k == pytest.approx(sa / so, rel=2**-13)
    assert mb * 2.0 ** -k == pytest.approx(sb / so, rel=2**-12)
    expect = np.clip((a * ma + b * mb + (1 << (k - 1))) >> k, -128, 127)
    np.testing.assert_array_equal(env["y.int8"], expect)


def test_first_conv_and_named_layers_stay_float(small_models) -> None:
    og = optimize(small_models["resnet18"][1])
    s = synthetic_samples(og, 1)
    qr = quantize_graph(og, s, float_layers=["layer2.0.conv1"])
    ops = {n.name: n.op for n in qr.graph.nodes}
    assert ops["conv1"] == "Conv" and ops["layer2.0.conv1"] == "Conv"
    assert ops["layer1.0.conv1"] == "QConv" and ops["fc"] == "QDense"
    reasons = {i.node: i.float_reason for i in qr.layers}
    assert reasons["conv1"] == "first convolution, under 15% of the MACs"  # 6.5% of them
    assert reasons["layer2.0.conv1"] == "named by --float-layer"
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


@pytest.mark.parametrize("group", [1, 2, 8])
def test_int8_conv2d_adds_an_integer_bias_exactly(group: int) -> None:
    """The int8 reference's convolution (im2col products, or depthwise sums) with an int32
    bias equals an int64 convolution written out with windows (sums beyond 2^24 included)."""
    from numpy.lib.stride_tricks import sliding_window_view
    from vta.compiler.ops import kernels as ops

    rng = np.random.default_rng(group)
    x = rng.integers(-128, 128, (1, 8, 9, 9), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 8 // group, 3, 3), dtype=np.int8)
    b = rng.integers(-(1 << 30), 1 << 30, 8).astype(np.int32)
    got = ops.conv2d(x, w, b, strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], group=group)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = sliding_window_view(xp, (3, 3), axis=(2, 3))  # N, C, OH, OW, KH, KW
    cg, og = 8 // group, 8 // group
    want = np.concatenate([np.einsum("nchwij,ocij->nohw", win[:, g * cg:(g + 1) * cg],
                                     w[g * og:(g + 1) * og].astype(np.int64))
                           for g in range(group)], axis=1) + b[None, :, None, None]
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
