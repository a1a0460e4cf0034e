"""Pre-quantized QDQ models (onnxruntime.quantization.quantize_static): imported with their
own scales, run int8 on VTA (fsim) bit-exact against the int8 reference, close to onnxruntime's
own execution of the QDQ model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from vta.compiler.graph.errors import UnsupportedOpError
from vta.compiler.graph.executor import Executor
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.module import compile_graph
from vta.compiler.graph.onnx_frontend import from_onnx
from vta.compiler.graph.options import CompileOptions
from vta.compiler.graph.quant_error import agreement
from vta.compiler.graph.reference import run_float
from vta.isa import Config

from .conftest import onnx_model, run_ort

pytestmark = pytest.mark.sim


def _float_model() -> onnx.ModelProto:
    """conv-relu, conv-relu, residual add, global pool, classifier."""
    rng = np.random.default_rng(0)
    inits = {"w1": rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.3,
             "b1": rng.standard_normal(16).astype(np.float32) * 0.1,
             "w2": rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1,
             "b2": rng.standard_normal(16).astype(np.float32) * 0.1,
             "fc": rng.standard_normal((10, 16)).astype(np.float32) * 0.3,
             "fcb": rng.standard_normal(10).astype(np.float32) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ar"], name="r1"),
             helper.make_node("Conv", ["ar", "w2", "b2"], ["b"], name="c2", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["b"], ["br"], name="r2"),
             helper.make_node("Add", ["ar", "br"], ["s"], name="add"),
             helper.make_node("GlobalAveragePool", ["s"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], name="fc", transB=1)]
    return onnx_model(nodes, {"x": [1, 3, 16, 16]}, {"y": [1, 10]}, inits)


def _quantize_static(tmp_path, model: onnx.ModelProto, shape: tuple[int, ...], *,
                     fmt: str = "QDQ", **options) -> onnx.ModelProto:
    """``model`` quantized by onnxruntime.quantization.quantize_static (``fmt``: QDQ or
    QOperator) on 8 standard-normal inputs of ``shape``."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    name = model.graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self.it = iter([{name: rng.standard_normal(shape).astype(np.float32)}
                            for _ in range(8)])

        def get_next(self):  # noqa: ANN202
            return next(self.it, None)

    onnx.save(model, tmp_path / "f.onnx")
    quantize_static(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), Reader(),
                    quant_format=QuantFormat[fmt], **options)
    return onnx.load(str(tmp_path / "q.onnx"))


def _quantize(tmp_path, symmetric: bool, fmt: str = "QDQ"
              ) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    from onnxruntime.quantization import QuantType

    fm = _float_model()
    return fm, _quantize_static(tmp_path, fm, (1, 3, 16, 16), fmt=fmt, per_channel=True,
                                activation_type=QuantType.QInt8,
                                weight_type=QuantType.QInt8,
                                extra_options={"ActivationSymmetric": symmetric})


@pytest.mark.parametrize("symmetric", [True, False])
def test_qdq_model_keeps_its_scales_and_matches_onnxruntime(tmp_path, symmetric: bool) -> None:
    fm, qm = _quantize(tmp_path, symmetric)
    g = from_onnx(qm)
    assert "FakeQuant" in {n.op for n in g.nodes}
    x = {"x": np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    # the imported graph in float computes what onnxruntime computes for the QDQ model as
    # written (its graph optimizations fuse the pairs into int8 kernels whose sums saturate on
    # CPUs without VNNI, see test_quantized_pytorch_export_runs_on_vta_with_its_scales)
    yq = run_ort(qm, x, optimize=False)[0]
    np.testing.assert_allclose(run_float(g, x)["y"], yq, atol=1e-5 * np.abs(yq).max())
    # the layers as quantized (their add fused into c2's epilogue: tests/graph/test_graph_fuse)
    m = compile_graph(g, Config(), CompileOptions(keep_first_float=False, per_channel=True,
                                                  fuse=False))
    inits = {i.name: numpy_helper.to_array(i) for i in qm.graph.initializer}
    for conv, w, t in (("c1", "w1", "ar"), ("c2", "w2", "br")):
        n = m.graph.node(conv)
        assert n.op == "QConv" and m.partition[conv] == "vta"
        # the int8 weights are onnxruntime's, and the output scale is its QDQ scale
        np.testing.assert_array_equal(m.graph.params[n.inputs[1]], inits[f"{w}_quantized"])
        s, z = float(inits[f"{t}_scale"]), int(inits[f"{t}_zero_point"])
        # symmetric: the same scale; asymmetric: the scale whose int8 covers the range
        expect = max((z + 128) * s / 128, (127 - z) * s / 127)
        assert n.attrs["out_scale"] == pytest.approx(expect, rel=1e-9)
        assert z != 0 or n.attrs["out_scale"] == s
    # the QDQ pairs the producers already satisfy are gone: conv, conv and add form one VTA
    # chain; left are the pair after the global pooling (it clips the pooled int8 tensor to
    # the QDQ's range) and the one at the output
    prod = m.graph.producers()
    for layer in ("c2", "add"):
        assert all(m.partition[prod[i].name] == "vta" for i in m.graph.node(layer).inputs
                   if i in prod), layer
    assert [n.name for n in m.graph.nodes if n.op == "QFakeQuant"] == [
        "g_DequantizeLinear", "y_DequantizeLinear"]
    with Executor(m, "fsim") as ex:
        y = ex.run(x)["y"]
    np.testing.assert_array_equal(y, run_quantized(m.graph, x)["y"])
    a = agreement(yq, y)
    assert a["top1"] and a["cosine"] > (0.9999 if symmetric else 0.999), a
    assert agreement(run_ort(fm, x)[0], y)["cosine"] > 0.999


def _exported(family: str) -> onnx.ModelProto:
    import warnings

    from .conftest import torch_families

    tm = torch_families()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return onnx.load_from_string(tm.export(tm.build(family, small=True),
                                               tm.input_size(family, True), dynamo=False,
                                               opset=17))


@pytest.mark.parametrize("family, activations, fmt, max_error", [
    ("resnet", "QUInt8", "QDQ", 0.1), ("mobilenet_v2", "QInt8", "QDQ", 0.1),
    ("resnet", "QUInt8", "QOperator", 0.1), ("mobilenet_v2", "QInt8", "QOperator", 0.1),
    ("yolo", "QUInt8", "QOperator", 0.2), ("shufflenet_v2", "QUInt8", "QOperator", 0.1)])
def test_quantized_pytorch_export_runs_on_vta_with_its_scales(tmp_path, family: str,
                                                              activations: str, fmt: str,
                                                              max_error: float) -> None:
    """A PyTorch export quantized by onnxruntime (QDQ, or QOperator: QLinearConv,
    com.microsoft QLinearAdd/QLinearConcat/QLinearLeakyRelu/QGemm/...; unsigned activations are
    its default): the float import computes what onnxruntime's run of the quantized model
    computes; every conv on VTA, with no QDQ pair (a CPU layer) between two VTA layers (those
    the producers already satisfy are dropped; YOLO's LeakyRelu changes the scale, which its
    ALU kernel does not do: a rescale follows it), bit-exact on fsim against the int8
    reference and close to onnxruntime."""
    from onnxruntime.quantization import QuantType

    fm = _exported(family)
    shape = tuple(d.dim_value for d in fm.graph.input[0].type.tensor_type.shape.dim)
    # 7-bit weights: onnxruntime's int8 kernels on x86 CPUs without VNNI (AVX2, AVX-512F) add
    # u8 x s8 products in pairs into int16 with saturation, so with full 8-bit weights its
    # result depends on the machine (its quantization guide: use reduce_range there); with
    # 7-bit weights no pair saturates and its run is the exact integer arithmetic
    qm = _quantize_static(tmp_path, fm, shape, fmt=fmt,
                          activation_type=QuantType[activations],
                          weight_type=QuantType.QInt8, reduce_range=True)
    assert ("QLinearConv" in {n.op_type for n in qm.graph.node}) == (fmt == "QOperator")
    g = from_onnx(qm)
    x = {"input": np.random.default_rng(5).standard_normal(shape).astype(np.float32)}
    (yq,) = run_ort(qm, x)[:1]
    np.testing.assert_allclose(run_float(g, x)[g.outputs[0]], yq, rtol=0,
                               atol=1e-5 * np.abs(yq).max())
    m = compile_graph(g, Config(), CompileOptions(keep_first_float=False))
    g, prod = m.graph, m.graph.producers()
    readers = {t: [n for n in g.nodes if t in n.inputs] for n in g.nodes for t in n.outputs}
    assert all(m.partition[n.name] == "vta" for n in g.nodes if n.op == "QConv")
    for n in g.nodes:
        if n.op == "QFakeQuant" and n.inputs[0] in prod:
            between = m.partition[prod[n.inputs[0]].name] == "vta" and readers[n.outputs[0]] \
                and all(m.partition.get(r.name) == "vta" for r in readers[n.outputs[0]])
            assert not between or (prod[n.inputs[0]].op == "QLeakyRelu"
                                   and n.attrs["rescale"] != [1, 0]), n.name
    with Executor(m, "fsim") as ex:
        y = ex.run(x)[g.outputs[0]]
    np.testing.assert_array_equal(y, run_quantized(g, x)[g.outputs[0]])
    a = agreement(yq, y)
    assert a["top1"] and a["cosine"] > 0.999, a
    # the report's error of each layer is against the value its QDQ pair stands for (the
    # exporter's Conv output, whose Relu onnxruntime dropped, is negative where the pair is 0:
    # 0.7 against it); an unsigned range's symmetric int8 scale has twice its step (YOLO's
    # neck: up to 0.1)
    errors = {i.node: i.rel_error for i in m.layers if i.op in ("Conv", "Add")}
    assert errors and all(e < max_error for e in errors.values()), errors


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_quantized_1d_network_runs_on_vta(tmp_path, fmt: str) -> None:
    """A 1-D CNN quantized by onnxruntime: its QDQ pairs (or QLinear ops) run on the 4-D views
    too, so the conv chain stays on VTA with no CPU layer between two VTA layers; bit-exact on
    fsim, close to onnxruntime."""
    import io
    import warnings

    import torch

    from .test_graph_torch_export import sequence_net

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(sequence_net(), (torch.randn(1, 8, 64),), buf, dynamo=False,
                          opset_version=17, input_names=["input"])
    qm = _quantize_static(tmp_path, onnx.load_from_string(buf.getvalue()), (1, 8, 64), fmt=fmt)
    g = from_onnx(qm)
    m = compile_graph(g, Config())
    vta = [n for n in m.graph.nodes if m.partition.get(n.name) == "vta"]
    assert len([n for n in vta if n.op in ("QConv", "QDense")]) == 6
    prod = m.graph.producers()
    for n in vta:  # no QDQ pair in front of a VTA layer; a conv reads a VTA layer's output
        srcs = [prod[i] for i in n.inputs if i in prod]
        assert not any(p.op == "QFakeQuant" for p in srcs), n.name
        assert n.op != "QConv" or all(m.partition.get(p.name) == "vta" or p.op in (
            "Quantize", "QMaxPool") for p in srcs), (n.name, [p.op for p in srcs])
    x = {"input": np.random.default_rng(5).standard_normal((1, 8, 64)).astype(np.float32)}
    with Executor(m, "fsim") as ex:
        y = ex.run(x)[g.outputs[0]]
    np.testing.assert_array_equal(y, run_quantized(m.graph, x)[g.outputs[0]])
    a = agreement(run_ort(qm, x)[0], y)
    assert a["top1"] and a["cosine"] > 0.999, a


@pytest.mark.parametrize("symmetric", [True, False])
def test_qoperator_model_keeps_its_weights_and_matches_onnxruntime(tmp_path,
                                                                   symmetric: bool) -> None:
    """The QOperator format of the same model: QLinearConv's int8 weights are onnxruntime's,
    and the module runs close to onnxruntime's integer kernels."""
    fm, qm = _quantize(tmp_path, symmetric, "QOperator")
    ops = {n.op_type for n in qm.graph.node}
    assert {"QLinearConv", "QLinearAdd", "QGemm"} <= ops
    g = from_onnx(qm)
    x = {"x": np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    (yq,) = run_ort(qm, x)
    np.testing.assert_allclose(run_float(g, x)["y"], yq, rtol=0, atol=1e-5 * np.abs(yq).max())
    m = compile_graph(g, Config(), CompileOptions(keep_first_float=False, per_channel=True))
    inits = {i.name: numpy_helper.to_array(i) for i in qm.graph.initializer}
    for conv, w in (("c1", "w1"), ("c2", "w2")):
        n = next(n for n in m.graph.nodes if n.op == "QConv" and n.name.startswith(conv))
        assert m.partition[n.name] == "vta"
        np.testing.assert_array_equal(m.graph.params[n.inputs[1]], inits[f"{w}_quantized"])
    with Executor(m, "fsim") as ex:
        y = ex.run(x)["y"]
    np.testing.assert_array_equal(y, run_quantized(m.graph, x)["y"])
    a = agreement(yq, y)
    assert a["top1"] and a["cosine"] > (0.9999 if symmetric else 0.999), a


def _qlinear_conv_model(tail: list, out_shape: list[int], extra: dict | None = None):
    """x -> QuantizeLinear -> QLinearConv (4 channels) -> ``tail`` (reads 'yq', makes 'pq')
    -> DequantizeLinear -> y."""
    from onnx import TensorProto

    rng = np.random.default_rng(0)
    inits = {"s": np.array(0.05, np.float32), "z": np.array(128, np.uint8),
             "w": rng.integers(-50, 50, (4, 3, 3, 3)).astype(np.int8),
             "ws": np.array(0.01, np.float32), "wz": np.array(0, np.int8), **(extra or {})}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
             helper.make_node("QLinearConv", ["xq", "s", "z", "w", "ws", "wz", "s", "z"],
                              ["yq"], name="conv", pads=[1, 1, 1, 1]),
             *tail,
             helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["y"], name="dq")]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_qoperator_shape_of_an_integer_activation_folds() -> None:
    """Shape of a QLinearConv's uint8 output is a constant (a Reshape target), and the Reshape
    moves its values: the import computes what onnxruntime computes, but where its integer
    requantization rounds the other way (one step of 0.05, on a few values)."""
    tail = [helper.make_node("Shape", ["yq"], ["shp"], name="shape"),
            helper.make_node("Slice", ["shp", "zero", "two", "zero"], ["nc"], name="nc"),
            helper.make_node("Concat", ["nc", "minus1"], ["target"], name="target", axis=0),
            helper.make_node("Reshape", ["yq", "target"], ["pq"], name="reshape")]
    m = _qlinear_conv_model(tail, [1, 4, 64], {"zero": np.array([0], np.int64),
                                                "two": np.array([2], np.int64),
                                                "minus1": np.array([-1], np.int64)})
    g = from_onnx(m)
    x = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    (ref,) = run_ort(m, x)
    y = run_float(g, x)["y"]
    assert y.shape == ref.shape == (1, 4, 64)
    diff = np.abs(y - ref)
    assert diff.max() <= 0.05 + 1e-6 and (diff > 1e-6).mean() < 0.01, diff.max()


def test_qoperator_integer_activation_into_a_float_op_is_a_one_line_error() -> None:
    """A Pad on a QLinearConv's uint8 output: named, with the way out (the QDQ format)."""
    from onnx import TensorProto

    rng = np.random.default_rng(0)
    inits = {"s": np.array(0.05, np.float32), "z": np.array(128, np.uint8),
             "w": rng.integers(-50, 50, (4, 3, 3, 3)).astype(np.int8),
             "ws": np.array(0.01, np.float32), "wz": np.array(0, np.int8),
             "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
             helper.make_node("QLinearConv", ["xq", "s", "z", "w", "ws", "wz", "s", "z"],
                              ["yq"], name="conv"),
             helper.make_node("Pad", ["yq", "pads"], ["pq"], name="pad"),
             helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["y"], name="dq")]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         [1, 4, 8, 8])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(UnsupportedOpError, match="'pad' \\(Pad\\): input 'yq' is an integer "
                                                 "activation .*QuantFormat.QDQ") as e:
        from_onnx(m)
    assert "\n" not in str(e.value)


def test_bad_qdq_is_a_one_line_error() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("DequantizeLinear", ["r", "s"], ["y"], name="dq")]
    m = onnx_model(nodes, {"x": [1, 4]}, {"y": [1, 4]}, {"s": np.array(0.1, np.float32)})
    with pytest.raises(UnsupportedOpError, match="'dq' .*neither a constant nor a "
                                                 "QuantizeLinear output"):
        from_onnx(m)
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q")
    dq = helper.make_node("DequantizeLinear", ["q", "s2", "z"], ["y"], name="dq2")
    m = onnx_model([q, dq], {"x": [1, 4]}, {"y": [1, 4]},
                   {"s": np.array(0.1, np.float32), "s2": np.array(0.2, np.float32),
                    "z": np.array(0, np.int8)})
    with pytest.raises(UnsupportedOpError, match="differs from its QuantizeLinear"):
        from_onnx(m)
