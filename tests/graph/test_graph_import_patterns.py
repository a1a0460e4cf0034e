"""onnx.helper graphs of the exact patterns the exporters write, imported and checked against
onnxruntime: constants forwarded through Identity, Shape/Gather/Unsqueeze/Concat/Reshape
chains, ceil-mode and count_include_pad pooling, spatial reductions, the activations, layout
ops, LayerNorm, MatMul/Gemm, Pad, Resize; and the one-line error for what is not supported."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from vta.compiler.graph.errors import ModelError, UnsupportedOpError
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.module import compile_graph
from vta.compiler.graph.onnx_frontend import from_onnx
from vta.compiler.graph.options import CompileOptions
from vta.compiler.graph.passes import optimize
from vta.compiler.graph.reference import infer_shapes, run_float
from vta.isa import Config

from .conftest import assert_close_rel, run_ort

pytestmark = pytest.mark.unit
R = np.random.default_rng(7)


def w(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


def i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


def mk(op: str, ins: list[str], out: str = "y", name: str | None = None, **attrs):
    return helper.make_node(op, ins, [out], name=name or f"{op.lower()}_{out}", **attrs)


def const(out: str, value: np.ndarray):
    return helper.make_node("Constant", [], [out], name=f"c_{out}",
                            value=helper.make_tensor(out, {np.dtype(np.int64): TensorProto.INT64,
                                                           np.dtype(np.float32):
                                                           TensorProto.FLOAT}[value.dtype],
                                                     value.shape, value.reshape(-1).tolist()))


def shape_chain(x: str, idx: int, out: str, opset: int) -> list:
    """Shape(x) -> Gather(idx) -> Unsqueeze(0): the exporter's ``x.size(idx)``."""
    nodes = [mk("Shape", [x], f"{out}_s"), const(f"{out}_i", np.array(idx, np.int64)),
             mk("Gather", [f"{out}_s", f"{out}_i"], f"{out}_g", axis=0)]
    if opset >= 13:
        nodes += [const(f"{out}_ax", i64(0)), mk("Unsqueeze", [f"{out}_g", f"{out}_ax"], out)]
    else:
        nodes.append(mk("Unsqueeze", [f"{out}_g"], out, axes=[0]))
    return nodes


def shuffle_nodes(opset: int) -> list:
    """ShuffleNet v2's channel_shuffle(x, 2) as the TorchScript exporter writes it."""
    nodes = shape_chain("x", 0, "b", opset) + shape_chain("x", 2, "h", opset)
    nodes += shape_chain("x", 3, "w", opset) + shape_chain("x", 1, "c", opset)
    nodes += [const("two", i64(2)), mk("Div", ["c", "two"], "cg"),
              mk("Concat", ["b", "two", "cg", "h", "w"], "s5", axis=0),
              mk("Reshape", ["x", "s5"], "r5"),
              mk("Transpose", ["r5"], "t5", perm=[0, 2, 1, 3, 4]),
              const("m1", i64(-1)),
              mk("Concat", ["b", "m1", "h", "w"], "s4", axis=0),
              mk("Reshape", ["t5", "s4"], "y")]
    return nodes


def onnx_model(nodes, inputs: dict[str, list[int]], outputs: dict[str, None],
               inits: dict[str, np.ndarray] | None = None, opset: int = 13):
    """A model whose output shapes are declared as onnxruntime computes them (ONNX's own shape
    inference does not see through the Shape chains; the exporters write the shapes)."""
    from onnx import numpy_helper

    def build(shapes: dict[str, list[int]]):
        g = helper.make_graph(
            nodes, "t",
            [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
            [helper.make_tensor_value_info(k, TensorProto.FLOAT, shapes.get(k))
             for k in outputs],
            [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m

    feeds = {k: np.zeros(v, np.float32) for k, v in inputs.items()}
    try:
        res = run_ort(build({}), feeds)
    except Exception:  # noqa: BLE001 - invalid on purpose in some tests
        return build({k: [1] for k in outputs})
    return build({k: list(v.shape) for k, v in zip(outputs, res)})


X4 = {"x": [1, 8, 6, 5]}

# (id, nodes, inputs, initializers, opset)
CASES = [
    ("identity_forwarded_weights",
     [mk("Identity", ["w0"], "wi"), mk("Identity", ["wi"], "wii"), mk("Identity", ["b0"], "bi"),
      mk("Conv", ["x", "wii", "bi"], "c", pads=[1, 1, 1, 1]),
      mk("Identity", ["g0"], "gi"), mk("Identity", ["z0"], "zi"),
      mk("BatchNormalization", ["c", "gi", "zi", "zi", "gi"], "y")],
     X4, {"w0": w(4, 8, 3, 3), "b0": w(4), "g0": np.ones(4, np.float32),
          "z0": np.zeros(4, np.float32)}, 13),
    ("flatten_by_size", shape_chain("x", 0, "b", 11)
     + [const("m1", i64(-1)), mk("Concat", ["b", "m1"], "s", axis=0),
        mk("Reshape", ["x", "s"], "y")], X4, {}, 11),
    ("channel_shuffle_op11", shuffle_nodes(11), X4, {}, 11),
    ("channel_shuffle_op13", shuffle_nodes(13), X4, {}, 13),
    ("maxpool_ceil", [mk("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
     {"x": [1, 2, 8, 11]}, {}, 13),
    ("maxpool_ceil_pads", [mk("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], ceil_mode=1)], {"x": [1, 2, 8, 9]}, {}, 13),
    # the last window would start in the trailing padding: ONNX drops it
    ("maxpool_ceil_drop_last", [mk("MaxPool", ["x"], kernel_shape=[2, 2], strides=[2, 2],
                                   pads=[1, 1, 1, 1], ceil_mode=1)], {"x": [1, 1, 4, 5]}, {},
     13),
    ("avgpool_ceil_exclude", [mk("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2],
                                 pads=[1, 1, 1, 1], ceil_mode=1)], {"x": [1, 2, 8, 7]}, {}, 13),
    ("avgpool_ceil_include", [mk("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2],
                                 pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)],
     {"x": [1, 2, 8, 7]}, {}, 13),
    ("avgpool_include_pad", [mk("AveragePool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                count_include_pad=1)], X4, {}, 11),
    ("conv_same_upper", [mk("Conv", ["x", "k"], auto_pad="SAME_UPPER", strides=[2, 2])],
     X4, {"k": w(3, 8, 4, 4)}, 13),
    ("maxpool_same_lower", [mk("MaxPool", ["x"], kernel_shape=[2, 2], auto_pad="SAME_LOWER")],
     X4, {}, 13),
    ("reducemean_hw", [mk("ReduceMean", ["x"], axes=[-2, -1], keepdims=0)], X4, {}, 13),
    ("reducemean_hw_op18", [mk("ReduceMean", ["x", "a"], keepdims=1)], X4, {"a": i64(2, 3)},
     18),
    ("reducemax_hw", [mk("ReduceMax", ["x"], axes=[2, 3])], X4, {}, 13),
    ("reducemean_channels", [mk("ReduceMean", ["x"], axes=[1])], X4, {}, 13),
    ("hardswish", [mk("HardSwish", ["x"])], X4, {}, 14),
    ("hardsigmoid_swish", [mk("HardSigmoid", ["x"], "h", alpha=1 / 6, beta=0.5),
                           mk("Mul", ["x", "h"])], X4, {}, 11),
    ("silu", [mk("Sigmoid", ["x"], "s"), mk("Mul", ["x", "s"])], X4, {}, 13),
    ("gelu_op20", [mk("Gelu", ["x"])], X4, {}, 20),
    ("gelu_tanh_op20", [mk("Gelu", ["x"], approximate="tanh")], X4, {}, 20),
    ("gelu_erf_pattern", [mk("Div", ["x", "r2"], "d"), mk("Erf", ["d"], "e"),
                          mk("Add", ["e", "one"], "a"), mk("Mul", ["x", "a"], "m"),
                          mk("Mul", ["m", "half"])], X4,
     {"r2": f32(1.4142135), "one": f32(1.0), "half": f32(0.5)}, 13),
    ("tanh_clip_leaky", [mk("Tanh", ["x"], "t"), mk("Clip", ["t", "lo", "hi"], "c"),
                         mk("LeakyRelu", ["c"], alpha=0.1)], X4,
     {"lo": np.array(-0.5, np.float32), "hi": np.array(0.6, np.float32)}, 13),
    ("prelu", [mk("PRelu", ["x", "sl"])], X4, {"sl": w(8, 1, 1)}, 13),
    ("transpose_nhwc", [mk("Transpose", ["x"], perm=[0, 2, 3, 1])], X4, {}, 13),
    ("split_attr", [helper.make_node("Split", ["x"], ["p", "q"], name="sp", axis=1,
                                     split=[3, 5]), mk("Add", ["p", "p"], "y2"),
                    mk("Concat", ["q", "y2"], axis=1)], X4, {}, 11),
    ("split_input", [helper.make_node("Split", ["x", "s"], ["p", "q"], name="sp", axis=1),
                     mk("Concat", ["q", "p"], axis=1)], X4, {"s": i64(2, 6)}, 13),
    ("split_num_outputs", [helper.make_node("Split", ["x"], ["p", "q", "r"], name="sp", axis=3,
                                            num_outputs=3), mk("Concat", ["r", "p", "q"],
                                                               axis=3)],
     X4, {}, 18),
    ("slice_steps", [mk("Slice", ["x", "b", "e", "a", "s"])], X4,
     {"b": i64(1, -1), "e": i64(2**63 - 1, -(2**63)), "a": i64(2, 3), "s": i64(2, -2)}, 13),
    ("slice_channels", [mk("Slice", ["x", "b", "e", "a"])], X4,
     {"b": i64(3), "e": i64(7), "a": i64(1)}, 11),
    ("concat_neg_axis", [mk("Relu", ["x"], "r"), mk("Concat", ["x", "r"], axis=-3)], X4, {},
     13),
    ("unsqueeze_squeeze", [mk("Unsqueeze", ["x", "a"], "u"), mk("Squeeze", ["u", "a"])], X4,
     {"a": i64(2)}, 13),
    ("gather_activation", [mk("Gather", ["x", "i"], axis=1)], X4, {"i": i64(5, 0, -1)}, 13),
    ("cast_dropout", [helper.make_node("Cast", ["x"], ["c"], name="cast", to=1),
                      mk("Dropout", ["c"])], X4, {}, 13),
    ("layernorm_op17", [mk("LayerNormalization", ["t", "g", "b"], epsilon=1e-6),
                        mk("Transpose", ["x"], "t", perm=[0, 2, 3, 1])][::-1], X4,
     {"g": w(8), "b": w(8)}, 17),
    ("layernorm_decomposed", [mk("Transpose", ["x"], "t", perm=[0, 2, 3, 1]),
                              mk("ReduceMean", ["t"], "m", axes=[-1]),
                              mk("Sub", ["t", "m"], "d"), mk("Pow", ["d", "two"], "p"),
                              mk("ReduceMean", ["p"], "v", axes=[-1]),
                              mk("Add", ["v", "eps"], "ve"), mk("Sqrt", ["ve"], "sd"),
                              mk("Div", ["d", "sd"], "n"), mk("Mul", ["n", "g"], "ng"),
                              mk("Add", ["ng", "b"])], X4,
     {"two": f32(2.0), "eps": f32(1e-6), "g": w(8), "b": w(8)}, 13),
    ("softmax_last", [mk("Softmax", ["x"])], X4, {}, 13),
    ("logsoftmax_legacy", [mk("LogSoftmax", ["x"])], X4, {}, 11),
    ("mish_softplus_elu", [mk("Mish", ["x"], "m"), mk("Softplus", ["x"], "s"),
                           mk("Elu", ["s"], "e", alpha=0.7), mk("Add", ["m", "e"])], X4, {},
     18),
    ("max_min_variadic", [mk("Max", ["x", "z", "x"], "mx"), mk("Min", ["mx", "c"])],
     {"x": [1, 8, 6, 5], "z": [1, 8, 6, 5]}, {"c": f32(0.3)}, 13),
    ("expand_activation", [mk("GlobalAveragePool", ["x"], "g"), mk("Expand", ["g", "s"])], X4,
     {"s": i64(1, 1, 6, 5)}, 13),
    ("pad_axes_op18", [mk("Pad", ["x", "p", "v", "a"])], X4,
     {"p": i64(1, 2, 0, 3), "v": f32(0.5), "a": i64(-1, 2)}, 18),
    ("matmul_nhwc_bias", [mk("Transpose", ["x"], "t", perm=[0, 2, 3, 1]),
                          mk("MatMul", ["t", "k"], "mm"), mk("Add", ["bb", "mm"])], X4,
     {"k": w(8, 12), "bb": w(12)}, 13),
    ("nhwc_block", [mk("Transpose", ["x"], "t", perm=[0, 2, 3, 1]),
                    mk("LayerNormalization", ["t", "g", "b"], "n", epsilon=1e-6),
                    mk("MatMul", ["n", "k1"], "m1"), mk("Add", ["b1", "m1"], "a1"),
                    mk("Gelu", ["a1"], "ge"), mk("MatMul", ["ge", "k2"], "m2"),
                    mk("Add", ["m2", "b2"], "a2"), mk("Transpose", ["a2"], "t2", perm=[0, 3, 1, 2]),
                    mk("Mul", ["ls", "t2"], "s"), mk("Add", ["x", "s"])], X4,
     {"g": w(8), "b": w(8), "k1": w(8, 32), "b1": w(32), "k2": w(32, 8), "b2": w(8),
      "ls": w(8, 1, 1)}, 20),
    ("gemm_transposes", [mk("Gemm", ["k", "x"], transA=1, transB=1, alpha=0.5)],
     {"x": [5, 6]}, {"k": w(6, 4)}, 13),
    ("pad_edge", [mk("Pad", ["x", "p"], mode="edge")], X4, {"p": i64(0, 0, 1, 2, 0, 0, 2, 1)},
     13),
    ("resize_bilinear_half_pixel", [mk("Resize", ["x", "", "s"], mode="linear")], X4,
     {"s": f32(1, 1, 2, 2)}, 13),
    ("resize_bilinear_align", [mk("Resize", ["x", "", "", "z"], mode="linear",
                                  coordinate_transformation_mode="align_corners")], X4,
     {"z": i64(1, 8, 11, 7)}, 13),
    ("resize_bilinear_pytorch", [mk("Resize", ["x", "r", "s"], mode="linear",
                                    coordinate_transformation_mode="pytorch_half_pixel")], X4,
     {"r": np.zeros(0, np.float32), "s": f32(1, 1, 1.5, 3)}, 11),
    ("resize_nearest_sizes_from_shape",
     [mk("Shape", ["x"], "sh"), const("two4", i64(1, 1, 2, 2)),
      mk("Mul", ["sh", "two4"], "sz"), mk("Resize", ["x", "", "", "sz"], mode="nearest")],
     X4, {}, 13),
]


@pytest.mark.parametrize("nodes, inputs, inits, opset", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_pattern_matches_onnxruntime(nodes, inputs, inits, opset) -> None:
    model = onnx_model(nodes, inputs, {"y": None}, inits, opset)
    g = from_onnx(model)
    feeds = {k: R.standard_normal(s).astype(np.float32) for k, s in inputs.items()}
    (ref,) = run_ort(model, feeds)
    assert_close_rel(run_float(g, feeds)["y"], ref, 1e-5)
    og = optimize(g)
    assert_close_rel(run_float(og, feeds)["y"], ref, 1e-5)
    shapes = infer_shapes(og)
    assert shapes["y"] == ref.shape
    # no shape computation and no forwarding op is left on activations (an Identity only
    # where a forwarded tensor is the graph output)
    left = {n.op for n in g.nodes if n.outputs != ["y"] or n.op != "Identity"}
    assert not {"Shape", "Unsqueeze", "Squeeze", "Identity", "Constant", "Cast", "Dropout",
                "Split"} & left
    assert "Gather" not in left or inputs is X4 and "i" in inits


def structure(case: str) -> list[str]:
    nodes, inputs, inits, opset = next(c[1:] for c in CASES if c[0] == case)
    return [n.op for n in optimize(from_onnx(onnx_model(nodes, inputs, {"y": None}, inits,
                                                        opset))).nodes]


@pytest.mark.parametrize("case, ops", [
    ("identity_forwarded_weights", ["Conv"]),  # BN folded into the conv's constants
    ("flatten_by_size", ["Reshape"]),
    ("channel_shuffle_op11", ["Gather"]),  # one channel permutation
    ("channel_shuffle_op13", ["Gather"]),
    ("reducemean_hw", ["GlobalAveragePool", "Reshape"]),
    ("reducemean_hw_op18", ["GlobalAveragePool"]),
    ("reducemax_hw", ["GlobalMaxPool"]),
    ("hardsigmoid_swish", ["HardSwish"]),
    ("silu", ["Silu"]),
    ("gelu_erf_pattern", ["Gelu"]),
    ("layernorm_decomposed", ["Transpose", "LayerNormalization"]),
    ("matmul_nhwc_bias", ["Conv", "Transpose"]),  # the 1x1 conv's transposes cancel
    ("nhwc_block", ["LayerNormalization", "Conv", "Gelu", "Conv", "Mul", "Add"]),
    ("split_input", ["Slice", "Slice", "Concat"]),
    ("resize_nearest_sizes_from_shape", ["Resize"]),
])
def test_pattern_structure(case: str, ops: list[str]) -> None:
    assert structure(case) == ops


def test_static_shapes_of_folded_chains() -> None:
    nodes, inputs, inits, opset = next(c[1:] for c in CASES if c[0] == "channel_shuffle_op11")
    g = from_onnx(onnx_model(nodes, inputs, {"y": None}, inits, opset))
    assert [n.attrs["shape"] for n in g.nodes if n.op == "Reshape"] == [[1, 2, 4, 6, 5],
                                                                        [1, 8, 6, 5]]
    (shuffle,) = optimize(g).nodes
    assert shuffle.attrs == {"axis": 1, "indices": [0, 4, 1, 5, 2, 6, 3, 7]}


def test_ceil_mode_pooling_int8_on_fsim() -> None:
    """ceil-mode average pooling (the extension is never counted) in the int8 reference and on
    VTA around it: a conv, the pool, a conv."""
    nodes = [mk("Conv", ["x", "k1"], "c1", pads=[1, 1, 1, 1]), mk("Relu", ["c1"], "r1"),
             mk("AveragePool", ["r1"], "p", kernel_shape=[3, 3], strides=[2, 2],
                pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1),
             mk("MaxPool", ["p"], "q", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
             mk("Conv", ["q", "k2"], "y", pads=[1, 1, 1, 1])]
    model = onnx_model(nodes, {"x": [1, 16, 10, 10]}, {"y": None},
                       {"k1": w(16, 16, 3, 3) * 0.1, "k2": w(16, 16, 3, 3) * 0.1})
    g = from_onnx(model)
    x = {"x": R.standard_normal((1, 16, 10, 10)).astype(np.float32)}
    m = compile_graph(g, Config(), CompileOptions(keep_first_float=False), samples=[x])
    assert {n.op for n in m.graph.nodes} >= {"QConv", "QAveragePool", "QMaxPool"}
    from vta.compiler.graph.executor import Executor

    with Executor(m, "fsim") as ex:
        out = ex.run(x)["y"]
    np.testing.assert_array_equal(out, run_quantized(m.graph, x)["y"])
    (ref,) = run_ort(model, x)
    assert out.shape == ref.shape == (1, 16, 3, 3)
    a, b = ref.ravel().astype(np.float64), out.ravel().astype(np.float64)
    assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) >= 0.99


# ------------------------------------------------------------------------- errors
def one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_unsupported_op_on_activation_is_one_line() -> None:
    m = onnx_model([mk("Relu", ["x"], "r"),
                    helper.make_node("TopK", ["r", "k"], ["y", "yi"], name="topk_7")],
                   {"x": [2, 6]}, {"y": None}, {"k": i64(2)})
    with pytest.raises(UnsupportedOpError) as e:
        from_onnx(m)
    msg = one_line(e)
    assert "topk_7" in msg and "TopK" in msg


def test_unsupported_op_on_constants_is_folded() -> None:
    """Any standard op whose inputs are constant is evaluated at import (here TopK, Range,
    Where and Equal, none of which is imported on activations)."""
    nodes = [helper.make_node("TopK", ["v", "k"], ["tk", "ti"], name="topk"),
             mk("Range", ["z", "n", "one"], "rg"),
             mk("Equal", ["rg", "n"], "eq"), mk("Cast", ["rg"], "rgf", to=1),
             mk("Where", ["eq", "tk", "rgf"], "wh"), mk("Add", ["x", "wh"])]
    m = onnx_model(nodes, {"x": [3]}, {"y": None},
                   {"v": f32(3, 1, 2, 5, 4), "k": i64(3), "z": np.array(0, np.int64),
                    "n": np.array(3, np.int64), "one": np.array(1, np.int64)})
    g = from_onnx(m)
    assert [n.op for n in g.nodes] == ["Add"]
    x = {"x": f32(1, 2, 3)}
    np.testing.assert_allclose(run_float(g, x)["y"], run_ort(m, x)[0])


def test_other_domain_and_bad_shapes_are_one_line() -> None:
    n = helper.make_node("FusedConv", ["x"], ["y"], name="fc", domain="com.microsoft")
    g = helper.make_graph([n], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                   [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(UnsupportedOpError) as e:
        from_onnx(m)
    assert "fc" in one_line(e) and "com.microsoft::FusedConv" in one_line(e)
    m = onnx_model([mk("Reshape", ["x", "s"], name="bad_reshape")], {"x": [2, 3]},
                   {"y": None}, {"s": i64(4, 2)})
    with pytest.raises(ModelError) as e:
        from_onnx(m)
    assert "bad_reshape" in one_line(e) and "[4, 2]" in one_line(e)


def test_unused_nodes_and_outputs_are_not_imported() -> None:
    """A node nothing depends on is not imported (so an unsupported op there is no error), and
    an unused extra output (Dropout's mask, MaxPool's indices) is no error either; a used one
    is."""
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"], name="drop"),
             helper.make_node("MaxPool", ["d"], ["y", "idx"], name="pool",
                              kernel_shape=[2, 2]),
             helper.make_node("TopK", ["x", "k"], ["tv", "ti"], name="dead_topk")]
    m = onnx_model(nodes, {"x": [1, 2, 4, 4]}, {"y": None}, {"k": i64(1)})
    g = from_onnx(m)
    assert [n.op for n in g.nodes] == ["MaxPool"]
    x = {"x": R.standard_normal((1, 2, 4, 4)).astype(np.float32)}
    np.testing.assert_array_equal(run_float(g, x)["y"], run_ort(m, x)[0])
    m = onnx_model(nodes[:2] + [mk("Cast", ["idx"], "y2", to=1)], {"x": [1, 2, 4, 4]},
                   {"y": None, "y2": None})
    with pytest.raises(UnsupportedOpError, match="pool.*Indices"):
        from_onnx(m)
