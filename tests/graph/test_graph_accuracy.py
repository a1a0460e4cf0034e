"""int8 accuracy on MobileNet/EfficientNet-style blocks against onnxruntime float: the
offset (unsigned / asymmetric) storage of tensors only convolutions read, and the calibration
of graph outputs."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler.graph.calibration import OUTPUT_HEADROOM, calibrate, synthetic_samples
from vta.compiler.graph.executor import Executor
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.module import compile_graph
from vta.compiler.graph.offsets import offset_tensors
from vta.compiler.graph.onnx_frontend import from_onnx
from vta.compiler.graph.options import CompileOptions
from vta.compiler.graph.passes import optimize
from vta.compiler.graph.quant_error import agreement
from vta.compiler.graph.quantize import quantize_graph
from vta.compiler.ops import kernels as ops
from vta.isa import Config

from .conftest import onnx_model, rand_input, run_ort

pytestmark = pytest.mark.unit


def _settled(rng: np.random.Generator, x: np.ndarray, o: int, k: int, group: int, stride: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights and bias of a conv whose output channels have mean 0 and variance 1 on ``x``
    (a batch norm whose statistics were re-estimated, folded), and that output."""
    c = x.shape[1]
    w = rng.uniform(-1, 1, (o, c // group, k, k)).astype(np.float32)
    y = ops.conv2d(x, w, None, strides=[stride] * 2, pads=[k // 2] * 4, dilations=[1, 1],
                   group=group)
    mean, std = y.mean(axis=(0, 2, 3)), y.std(axis=(0, 2, 3)) + 1e-6
    w = (w / std[:, None, None, None]).astype(np.float32)
    b = (-mean / std).astype(np.float32)
    return w, b, (y - mean[None, :, None, None]) / std[None, :, None, None]


def mobile_chain(blocks: int = 5, silu: bool = False, size: int = 32, seed: int = 0,
                 classes: int = 64):
    """A MobileNet v1 (ReLU6) or EfficientNet (SiLU) style chain of depthwise and pointwise
    convolutions with settled batch norms, global pooling and a classifier."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 3, size, size)).astype(np.float32)
    nodes, inits = [], {}
    t, ch = "x", 16
    layers = [(ch, 3, 1, 2)] + [spec for _ in range(blocks)
                                for spec in ((ch, 3, ch, 1), (ch, 1, 1, 1))]
    for i, (o, k, group, stride) in enumerate(layers):
        w, b, y = _settled(rng, x, o, k, group, stride)
        inits[f"w{i}"], inits[f"b{i}"] = w, b
        nodes.append(helper.make_node("Conv", [t, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}",
                                      pads=[k // 2] * 4, strides=[stride] * 2, group=group))
        if silu:
            nodes += [helper.make_node("Sigmoid", [f"c{i}"], [f"s{i}"], name=f"sig{i}"),
                      helper.make_node("Mul", [f"c{i}", f"s{i}"], [f"a{i}"], name=f"silu{i}")]
            x = y / (1 + np.exp(-y))
        else:
            nodes.append(helper.make_node("Clip", [f"c{i}", "zero", "six"], [f"a{i}"],
                                          name=f"relu6_{i}"))
            x = np.clip(y, 0, 6)
        t = f"a{i}"
    inits.update(zero=np.array(0, np.float32), six=np.array(6, np.float32),
                 wf=rng.uniform(-1, 1, (classes, ch)).astype(np.float32) / 4)
    nodes += [helper.make_node("GlobalAveragePool", [t], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["f"], name="flat"),
              helper.make_node("Gemm", ["f", "wf"], ["y"], name="fc", transB=1)]
    return onnx_model(nodes, {"x": [1, 3, size, size]}, {"y": [1, classes], t: None}, inits)


def _feature_cosine(model, seeds=range(100, 106)) -> float:
    """Mean cosine over ``seeds`` of the int8 chain's last activation (the second output)
    against onnxruntime's float one: the error the chain accumulates. The first conv stays
    float (--float-layer): the chain's storage is the subject, not its int8 input."""
    g = optimize(from_onnx(model))
    qr = quantize_graph(g, synthetic_samples(g, 4), float_layers=["conv0"])
    out = []
    for s in seeds:
        x = rand_input(g, s)
        out.append(agreement(run_ort(model, x)[1], run_quantized(qr.graph, x)[g.outputs[1]])
                   ["cosine"])
    return float(np.mean(out))


def test_mobilenet_chain_close_to_onnxruntime() -> None:
    """Depthwise/pointwise ReLU6 chain: each conv output is read by the next conv only, so it
    is stored unsigned (twice the steps of a signed int8 scale). Signed storage: 0.9912."""
    assert _feature_cosine(mobile_chain()) >= 0.994


def test_efficientnet_chain_close_to_onnxruntime() -> None:
    """SiLU runs float on the CPU; its output (>= -0.28) is quantized over its calibrated
    [min, max] for the next conv. Symmetric storage: 0.9785."""
    assert _feature_cosine(mobile_chain(silu=True)) >= 0.982


def test_offset_storage_in_the_graph() -> None:
    """Which tensors get an offset, and how the readers fold it: the bias absorbs
    ``offset * sum(w)``, a padded reader gets an explicit QPad of the value standing for 0."""
    g = optimize(from_onnx(mobile_chain(blocks=1)))
    chosen = offset_tensors(g, set(), set())
    prod = g.producers()
    assert chosen and all(prod[t].op == "Conv" for t in chosen)
    assert not chosen & set(g.outputs)
    # the last pointwise conv's output is read by global pooling: signed
    last = [n for n in g.nodes if n.op == "Conv"][-1]
    assert last.outputs[0] not in chosen
    qr = quantize_graph(g, synthetic_samples(g, 2))
    pads = [n for n in qr.graph.nodes if n.op == "QPad"]
    assert pads and all(n.attrs["qvalue"] == -qr.offsets[n.inputs[0]] for n in pads)
    for n in qr.graph.nodes:
        if n.op == "QConv" and n.inputs[0] in qr.offsets:
            assert n.attrs["pads"] == [0, 0, 0, 0] or not any(n.attrs["pads"])
    # dequantized with their offsets, the int8 tensors follow float
    from vta.compiler.graph.quant_error import layer_errors

    layer_errors(g, qr, rand_input(g, 3))
    errs = [i.rel_error for i in qr.layers if i.rel_error is not None]
    assert errs and max(errs) < 0.05, errs


def test_outputs_and_small_tensors_keep_their_maximum() -> None:
    """mse calibration would clip the largest logits (tying them: top-1 lost); outputs keep
    max times the headroom, tensors of few values (pooled vectors) keep max."""
    g = optimize(from_onnx(mobile_chain(blocks=1)))
    s = synthetic_samples(g, 2)
    from vta.compiler.graph.reference import run_float

    env = [run_float(g, x, keep=True) for x in s]
    th = calibrate(g, s, "mse")
    out = g.outputs[0]
    assert th[out] == pytest.approx(OUTPUT_HEADROOM * max(np.abs(e[out]).max() for e in env))
    pooled = [n.outputs[0] for n in g.nodes if n.op == "GlobalAveragePool"][0]
    assert th[pooled] == pytest.approx(max(np.abs(e[pooled]).max() for e in env))


def detector_head(seed: int = 0):
    """A conv block, then a detector's head: 1x1 conv -> Reshape -> Transpose -> Sigmoid."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    c, o, hw = 16, 12, 16
    inits = {"w0": rng.uniform(-1, 1, (c, c, 3, 3)).astype(np.float32) / 12,
             "w1": rng.uniform(-1, 1, (o, c, 1, 1)).astype(np.float32) / 4,
             "b1": np.zeros(o, np.float32), "shape": np.array([1, 3, 4, hw, hw], np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], name="conv0", pads=[1] * 4),
             helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["head"], name="head"),
             helper.make_node("Reshape", ["head", "shape"], ["boxes"], name="reshape"),
             helper.make_node("Transpose", ["boxes"], ["t"], name="permute",
                              perm=[0, 1, 3, 4, 2]),
             helper.make_node("Sigmoid", ["t"], ["y"], name="sigmoid")]
    return onnx_model(nodes, {"x": [1, c, hw, hw]}, {"y": [1, 3, hw, hw, 4]}, inits)


def _hot_input(seed: int) -> dict[str, np.ndarray]:
    """An input to :func:`detector_head` with three hot pixels: the head's largest values are
    rare outliers (the boxes that matter) far above the bulk of its values."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 16, 16, 16)).astype(np.float32) * 0.5
    for _ in range(3):
        x[0, :, rng.integers(16), rng.integers(16)] += 6.0
    return {"x": x}


def test_values_reaching_an_output_through_order_keeping_ops_keep_their_maximum() -> None:
    """The head's output reaches the graph output through Reshape, Transpose and Sigmoid: it
    is calibrated like an output (max times the headroom, not mse, which would clip its
    outliers and tie the best boxes); a tensor inside the network keeps mse."""
    from vta.compiler.graph.calibration import output_sources
    from vta.compiler.graph.reference import run_float

    g = optimize(from_onnx(detector_head()))
    head = next(n.outputs[0] for n in g.nodes if n.name == "head")
    inner = next(n.inputs[0] for n in g.nodes if n.name == "head")
    assert {head, g.outputs[0]} <= output_sources(g) and inner not in output_sources(g)
    s = [_hot_input(k) for k in range(4)]
    env = [run_float(g, x, keep=True) for x in s]
    th = calibrate(g, s, "mse")
    assert th[head] == pytest.approx(OUTPUT_HEADROOM * max(np.abs(e[head]).max() for e in env))
    assert th[inner] < max(np.abs(e[inner]).max() for e in env)  # mse clips inside


def _assert_fsim_equals_int8_reference(m, x: dict) -> None:  # noqa: ANN001 - a CompiledModule
    """The module's output "y" on fsim (the CPU nodes by the numpy kernels) equals the numpy
    int8 reference of its quantized graph, bit for bit."""
    ref = run_quantized(m.graph, x)["y"]
    with Executor(m, "fsim", host="numpy") as ex:
        out = ex.run(x)["y"]
    np.testing.assert_array_equal(out, ref)


@pytest.mark.sim
def test_offset_tensors_bit_exact_on_fsim() -> None:
    """VTA runs the folded biases and the unsigned epilogues; the CPU runs the QPads."""
    g = from_onnx(mobile_chain(blocks=2, size=16))
    m = compile_graph(g, Config())
    assert any(n.op == "QPad" for n in m.graph.nodes)
    assert not [note for note in m.notes if "QPad" in note]  # a conversion, not a fallback
    assert sum(m.partition[n.name] == "vta" for n in m.graph.nodes if n.op == "QConv") >= 4
    _assert_fsim_equals_int8_reference(m, rand_input(g, 5))


def test_transposed_and_dense_padded_convs_read_signed_tensors() -> None:
    """A transposed conv (a conv with input_strides) inserts zeros between pixels, which in an
    offset tensor would stand for ``offset * scale``: its input keeps no offset. Nor does the
    input of a padded dense conv (it would need a CPU QPad); an unpadded one folds it."""
    from vta.compiler.graph.ir import Graph, Node, TensorInfo

    rng = np.random.default_rng(0)
    conv = {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "group": 1}
    relu = dict(conv, activation="relu", act_min=0.0, act_max=None)
    params = {f"w{i}": rng.standard_normal((8, 8, 3, 3)).astype(np.float32) for i in range(3)}
    params["w2"] = params["w2"][:, :, :1, :1].copy()
    g = Graph([Node("Conv", "c0", ["x", "w0"], ["a"], relu),
               Node("Conv", "up", ["a", "w1"], ["b"], dict(relu, input_strides=[2, 2])),
               Node("Conv", "c2", ["b", "w2"], ["y"], dict(conv, pads=[0, 0, 0, 0]))],
              {"x": TensorInfo((1, 8, 6, 6))}, ["y"], params)
    assert offset_tensors(g, set(), set()) == {"b"}
    g.nodes[2].attrs["pads"] = [1, 1, 1, 1]
    g.params["w2"] = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    assert offset_tensors(g, set(), set()) == set()
    g.nodes[2].attrs["pads"] = [0, 0, 0, 0]
    g.params["w2"] = params["w2"]
    qr = quantize_graph(g, synthetic_samples(g, 2), keep_first_float=False)
    assert "a" not in qr.offsets and "b" in qr.offsets
    x = rand_input(g, 1)
    from vta.compiler.graph.reference import run_float

    assert agreement(run_float(g, x)["y"], run_quantized(qr.graph, x)["y"])["cosine"] > 0.98


@pytest.mark.parametrize("attrs, shape", [
    ({"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "group": 1}, (4, 6, 7, 7)),
    ({"strides": [2, 2], "pads": [1, 0, 2, 1], "dilations": [1, 1], "group": 1}, (4, 6, 7, 8)),
    ({"strides": [1, 1], "pads": [2, 2, 2, 2], "dilations": [2, 2], "group": 6}, (6, 1, 3, 3)),
    ({"strides": [2, 1], "pads": [0, 1, 1, 0], "dilations": [1, 1], "group": 2}, (4, 3, 3, 2)),
])
def test_weight_error_mean_is_the_mean_output_of_the_weight_error(attrs: dict, shape) -> None:
    """Per output channel, the mean over the output positions of the convolution of the
    weights' rounding error with an image whose channels hold their mean (numpy's float
    convolution, padding included)."""
    from vta.compiler.graph.ir import Node
    from vta.compiler.graph.quantize import quantize_weights, weight_error_mean

    rng = np.random.default_rng(3)
    w = rng.standard_normal(shape).astype(np.float32)
    wq, s_w, _, _ = quantize_weights(w, False, False)
    mean = rng.uniform(0.2, 1.5, 6)
    x_shape = (1, 6, 9, 11)
    n = Node("Conv", "c", ["x", "w"], ["y"], attrs)
    got = weight_error_mean(n, w, wq, s_w, mean, x_shape)
    dw = w.astype(np.float64) - wq.astype(np.float64) * s_w[:, None, None, None]
    img = np.broadcast_to(mean[None, :, None, None], x_shape).astype(np.float64)
    ref = ops.conv2d(img, dw, None, strides=attrs["strides"], pads=attrs["pads"],
                     dilations=attrs["dilations"], group=attrs["group"],
                     acc_dtype=np.float64).mean(axis=(0, 2, 3))
    assert np.abs(ref).max() > 1e-4  # the rounding error has a mean to correct
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-9)  # ops.conv2d writes float32
    dense = Node("Dense", "d", ["x", "w"], ["y"], {})
    w2 = w.reshape(shape[0], -1)[:, :6].copy()
    wq2, s2, _, _ = quantize_weights(w2, True, False)
    np.testing.assert_allclose(weight_error_mean(dense, w2, wq2, s2, mean, (1, 6)),
                               (w2 - wq2 * s2[:, None].astype(np.float64)) @ mean, rtol=1e-9)


def _positive_conv_graph():
    """One 3x3 conv of a never-negative input (mean 1): its weights' rounding error has a
    mean in the output; and its calibration inputs."""
    from vta.compiler.graph.ir import Graph, Node, TensorInfo

    rng = np.random.default_rng(7)
    attrs = {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "group": 1}
    params = {"w": rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1,
              "b": np.zeros(16, np.float32)}
    g = Graph([Node("Conv", "c", ["x", "w", "b"], ["y"], attrs)],
              {"x": TensorInfo((1, 16, 12, 12))}, ["y"], params)
    samples = [{"x": np.abs(rng.standard_normal((1, 16, 12, 12))).astype(np.float32) * 1.25}
               for _ in range(4)]
    return g, samples


def test_bias_correction_removes_the_mean_error_of_the_weights() -> None:
    """Against numpy float on the calibration inputs: the int8 conv's mean error per output
    channel (the systematic part) shrinks several times; the outputs' error as a whole does
    not grow."""
    from vta.compiler.graph.reference import run_float

    g, samples = _positive_conv_graph()
    errs = {}
    for bc in (False, True):
        qr = quantize_graph(g, samples, keep_first_float=False, bias_correction=bc)
        s = qr.scales["y.int8"]
        d = np.stack([run_quantized(qr.graph, x)["y"] - run_float(g, x)["y"] for x in samples])
        errs[bc] = (np.abs(d.mean(axis=(0, 1, 3, 4))).max() / s, np.sqrt((d ** 2).mean()) / s)
    assert errs[False][0] > 0.15  # the mean error of the weights' rounding, in output steps
    assert errs[True][0] < errs[False][0] / 4
    assert errs[True][1] <= errs[False][1]


@pytest.mark.sim
def test_bias_correction_bit_exact_on_fsim() -> None:
    """The correction is one more term in the int32 bias: VTA's results stay the int8
    reference's bit for bit."""
    g = from_onnx(mobile_chain(blocks=2, size=16))
    m = compile_graph(g, Config(), CompileOptions(bias_correction=True))
    _assert_fsim_equals_int8_reference(m, rand_input(g, 5))


def inception_chain(blocks: int = 3, size: int = 16, seed: int = 0, classes: int = 32):
    """Inception-style blocks: two 1x1 Relu convs from the same input, concatenated, then a
    3x3 stride-1 max pool that the next block reads; global pooling and a classifier."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 3, size, size)).astype(np.float32)
    w, b, y = _settled(rng, x, 16, 3, 1, 1)
    inits = {"w0": w, "b0": b}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="conv0", pads=[1] * 4),
             helper.make_node("Relu", ["c0"], ["t0"], name="relu0")]
    x, t = np.maximum(y, 0), "t0"
    for i in range(1, blocks + 1):
        parts = []
        for br in "ab":
            w, b, y = _settled(rng, x, 8, 1, 1, 1)
            inits[f"w{i}{br}"], inits[f"b{i}{br}"] = w, b
            nodes += [helper.make_node("Conv", [t, f"w{i}{br}", f"b{i}{br}"], [f"c{i}{br}"],
                                       name=f"conv{i}{br}"),
                      helper.make_node("Relu", [f"c{i}{br}"], [f"r{i}{br}"], name=f"relu{i}{br}")]
            parts.append(np.maximum(y, 0))
        nodes += [helper.make_node("Concat", [f"r{i}a", f"r{i}b"], [f"cat{i}"], name=f"cat{i}",
                                   axis=1),
                  helper.make_node("MaxPool", [f"cat{i}"], [f"p{i}"], name=f"pool{i}",
                                   kernel_shape=[3, 3], pads=[1] * 4)]
        x = ops.max_pool(np.concatenate(parts, axis=1), [3, 3], [1, 1], [1] * 4)
        t = f"p{i}"
    inits["wf"] = rng.uniform(-1, 1, (classes, 16)).astype(np.float32) / 4
    nodes += [helper.make_node("GlobalAveragePool", [t], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["f"], name="flat"),
              helper.make_node("Gemm", ["f", "wf"], ["y"], name="fc", transB=1)]
    return onnx_model(nodes, {"x": [1, 3, size, size]}, {"y": [1, classes], t: None}, inits)


def test_concatenations_and_pools_of_relu_outputs_share_an_offset() -> None:
    """The Relu conv outputs a concatenation joins, the concatenation and the max pool of it
    that only convs read form one group: one scale (the largest threshold, 255 steps), offset
    128 throughout, the concatenation a plain copy; the last block, read by global pooling,
    stays signed."""
    from vta.compiler.graph.offsets import offset_groups

    g = optimize(from_onnx(inception_chain()))
    prod = g.producers()
    groups = offset_groups(g, set(), set())
    joined = [grp for grp in groups if len(grp) > 1]
    assert len(joined) == 2
    for grp in joined:
        assert sorted(prod[t].op for t in grp) == ["Concat", "Conv", "Conv", "MaxPool"]
    assert not any("p3" in grp or "cat3" in grp for grp in groups)
    qr = quantize_graph(g, synthetic_samples(g, 2), float_layers=["conv0"])
    for grp in joined:
        assert {qr.offsets.get(t) for t in grp} == {128}
        assert len({qr.scales[t] for t in grp}) == 1
    cats = [n for n in qr.graph.nodes if n.op == "QConcat"]
    assert len(cats) == 3 and all(n.attrs["rescale"] == [[1, 0], [1, 0]] for n in cats[:2])
    assert "cat3" not in qr.offsets and "p3" not in qr.offsets


def test_inception_chain_close_to_onnxruntime() -> None:
    """Offset storage of the concatenations' groups (all 256 int8 steps over [0, max]): the
    int8 chain's last activation against onnxruntime's float one, mean over inputs. Signed
    storage of the groups: 0.9973."""
    model = inception_chain(blocks=4)
    g = optimize(from_onnx(model))
    qr = quantize_graph(g, synthetic_samples(g, 4), float_layers=["conv0"])
    cos = [agreement(run_ort(model, x)[1], run_quantized(qr.graph, x)[g.outputs[1]])["cosine"]
           for x in (rand_input(g, s) for s in range(100, 106))]
    assert float(np.mean(cos)) >= 0.998


@pytest.mark.sim
def test_offset_groups_bit_exact_on_fsim() -> None:
    """VTA's convs write the offset group's tensors; the CPU copies and pools them."""
    g = from_onnx(inception_chain(size=16))
    m = compile_graph(g, Config())
    # a Relu conv writing an offset tensor clips to [0 - 128, 255 - 128]
    assert m.graph.node("conv1a").attrs["lo"] == -128 and m.partition["conv1a"] == "vta"
    _assert_fsim_equals_int8_reference(m, rand_input(g, 5))


def test_offset_group_of_a_graph_input_stays_signed() -> None:
    """A max pool of the graph's input, read by a conv: the input is quantized symmetric by
    its Quantize, so the pool's output (one group with it) stays symmetric too."""
    from vta.compiler.graph.ir import Graph, Node, TensorInfo
    from vta.compiler.graph.offsets import offset_groups
    from vta.compiler.graph.reference import run_float

    rng = np.random.default_rng(0)
    conv = {"strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1], "group": 1}
    g = Graph([Node("MaxPool", "pool", ["x"], ["p"], {"kernel_shape": [2, 2], "strides": [2, 2],
                                                     "pads": [0, 0, 0, 0]}),
               Node("Conv", "c", ["p", "w"], ["y"], conv)],
              {"x": TensorInfo((1, 8, 8, 8))}, ["y"],
              {"w": rng.standard_normal((8, 8, 1, 1)).astype(np.float32)})
    assert offset_groups(g, set(), set()) == []
    qr = quantize_graph(g, synthetic_samples(g, 2), keep_first_float=False)
    assert not qr.offsets
    x = rand_input(g, 1)
    assert agreement(run_float(g, x)["y"], run_quantized(qr.graph, x)["y"])["cosine"] > 0.99
