"""Real exporter output: small PyTorch models of each family's characteristic blocks
(``SMALL`` of bench/torch_families.py, whose full-size families bench/bench_models.py runs),
exported by ``torch.onnx.export`` with the TorchScript exporter (opsets 11,
14, 17, 21) and the dynamo exporter (opsets 18 and its default), imported by the kit.

- float: the kit's reference execution of the imported graph (and of the optimized graph)
  against onnxruntime, every element within 1e-5 of the output's largest magnitude;
- int8: the module compiled for the default VTA configuration, run on fsim, against
  onnxruntime's float output: cosine similarity >= 0.99, and bit-exact with the int8 reference.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import pytest
from vta.cli.main import main
from vta.compiler.graph.executor import Executor
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.module import compile_graph
from vta.compiler.graph.onnx_frontend import from_onnx
from vta.compiler.graph.passes import optimize
from vta.compiler.graph.reference import run_float
from vta.isa import Config

from .conftest import assert_close_rel, run_ort, torch_families

tm = torch_families()

pytestmark = pytest.mark.sim

FAMILIES = list(tm.SMALL)
#: id: (dynamo, opset); None: the exporter's default opset; "ts12_unfolded": TorchScript
#: without constant folding (batch norms, Constant nodes, weights listed as inputs)
EXPORTS = {"ts11": (False, 11), "ts12_unfolded": (False, 12), "ts14": (False, 14),
           "ts17": (False, 17), "ts21": (False, 21), "dynamo": (True, None)}
#: families whose export changes with the opset (HardSwish, LayerNorm, GELU): also dynamo at 18
DYNAMO18 = ("mobilenet_v3", "convnext", "yolo")
COSINE = 0.99

_CACHE: dict[tuple[str, str], onnx.ModelProto] = {}


def exported(family: str, export: str) -> onnx.ModelProto:
    """The family's model exported once per session."""
    key = (family, export)
    if key not in _CACHE:
        import torch

        torch.set_num_threads(1)
        dynamo, opset = (True, 18) if export == "dynamo18" else EXPORTS[export]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = tm.export(tm.build(family, small=True), tm.input_size(family, True),
                             dynamo=dynamo, opset=opset, fold=export != "ts12_unfolded")
        _CACHE[key] = onnx.load_from_string(data)
    return _CACHE[key]


def image(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    return {inp.name: np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


FLOAT_CASES = [(f, e) for f in FAMILIES for e in EXPORTS] + [(f, "dynamo18") for f in DYNAMO18]


@pytest.mark.parametrize("family, export", FLOAT_CASES,
                         ids=[f"{f}-{e}" for f, e in FLOAT_CASES])
def test_float_matches_onnxruntime(family: str, export: str) -> None:
    model = exported(family, export)
    g = from_onnx(model)
    x = image(model)
    (ref,) = run_ort(model, x)
    assert_close_rel(run_float(g, x)[g.outputs[0]], ref, 1e-5)
    assert_close_rel(run_float(optimize(g), x)[g.outputs[0]], ref, 1e-5)


INT8_CASES = [(f, e) for f in FAMILIES for e in ("ts17", "dynamo")]


@pytest.mark.parametrize("family, export", INT8_CASES,
                         ids=[f"{f}-{e}" for f, e in INT8_CASES])
def test_int8_on_fsim_close_to_onnxruntime(family: str, export: str) -> None:
    model = exported(family, export)
    g = from_onnx(model)
    calib = [image(model, seed) for seed in range(1, 5)]
    m = compile_graph(g, Config(), samples=calib)
    x = image(model)
    with Executor(m, "fsim") as ex:
        out = ex.run(x)[g.outputs[0]]
        rep = ex.last_report
    assert any(r.where == "fsim" for r in rep.layers)
    np.testing.assert_array_equal(out, run_quantized(m.graph, x)[g.outputs[0]])
    (ref,) = run_ort(model, x)
    a, b = ref.ravel().astype(np.float64), out.ravel().astype(np.float64)
    assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) >= COSINE


# ------------------------------------------------------------- what the exporters write
def op_types(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node}


@pytest.mark.parametrize("family", ["vgg", "efficientnet", "densenet", "regnet"])
def test_identity_shared_weights_reach_vta(family: str) -> None:
    """The TorchScript exporter shares equal weights (zero biases, unit BN scales) through
    Identity nodes; every conv / dense layer still sees constants: all are int8 but a light
    first conv (kept float by default: VGG's, EfficientNet's and RegNet's hold 7-15% of these
    small models' MACs; DenseNet's 18% is quantized) and, grouped convs aside, run on VTA."""
    model = exported(family, "ts17")
    assert "Identity" in op_types(model)
    g = from_onnx(model)
    assert not any(n.op == "Identity" for n in g.nodes)
    m = compile_graph(g, Config(), samples=[image(model, 1)])
    layers = [n for n in m.graph.nodes if n.op in ("Conv", "Dense", "QConv", "QDense")]
    floats = [n.name for n in layers if not n.op.startswith("Q")]
    assert floats == ([] if family == "densenet" else [layers[0].name])
    grouped = [n.name for n in layers if n.attrs.get("group", 1) > 1
               and n.attrs["group"] < m.shapes[n.inputs[0]][1]]
    assert {k for k, v in m.partition.items() if v == "vta"} >= \
        {n.name for n in layers if n.name not in grouped + floats}


@pytest.mark.parametrize("export", ["ts11", "dynamo"])
def test_channel_shuffle_folds_to_static_shapes(export: str) -> None:
    model = exported("shufflenet_v2", export)
    if export == "ts11":  # b, c, h, w = x.size(); x.view(b, groups, c // groups, h, w)
        assert {"Shape", "Gather", "Div"} <= op_types(model)
    g = from_onnx(model)
    ops = [n.op for n in g.nodes]
    assert not {"Shape", "Gather", "Div", "Unsqueeze", "Split"} & set(ops)
    assert ops.count("Transpose") == 2 and ops.count("Slice") == 2  # chunk(2) -> two Slices
    shuffles = [n for n in g.nodes if n.op == "Reshape" and len(n.attrs["shape"]) == 5]
    assert [n.attrs["shape"] for n in shuffles] == [[1, 2, 16, 4, 4]] * 2
    ops = [n.op for n in optimize(g).nodes]  # each shuffle: one channel permutation
    assert ops.count("Gather") == 2 and "Transpose" not in ops


def test_ceil_mode_and_spatial_reductions() -> None:
    g = from_onnx(exported("squeezenet", "ts11"))
    pools = [n for n in g.nodes if n.op == "MaxPool"]
    # 16x16 -> ceil((16 - 3) / 2) + 1 = 8 windows (floor: 7): one extra row and column of
    # padding; then 8x8 -> 4 (floor: 3)
    assert [n.attrs["pads"] for n in pools] == [[0, 0, 1, 1], [0, 0, 1, 1]]
    for export in ("ts17", "dynamo"):
        g = from_onnx(exported("mnasnet", export))  # x.mean([2, 3])
        assert "ReduceMean" not in {n.op for n in g.nodes}
        assert "GlobalAveragePool" in {n.op for n in g.nodes}


@pytest.mark.parametrize("family, export, fused", [
    ("mobilenet_v3", "ts11", "HardSwish"), ("efficientnet", "ts17", "Silu"),
    ("efficientnet", "dynamo", "Silu"), ("convnext", "ts11", "Gelu"),
    ("convnext", "ts11", "LayerNormalization"), ("convnext", "dynamo18", "Gelu")])
def test_exported_patterns_fuse(family: str, export: str, fused: str) -> None:
    """Decomposed activations and LayerNorm (ReduceMean/Sub/Pow/Sqrt/Div, Erf GELU, x *
    Sigmoid(x), x * HardSigmoid(x)) become single ops; ConvNeXt's NHWC blocks become NCHW
    (channel LayerNorm, Linear layers as 1x1 convolutions with their bias, no Transpose)."""
    og = optimize(from_onnx(exported(family, export)))
    ops = [n.op for n in og.nodes]
    assert fused in ops
    assert not {"Erf", "Pow", "Sqrt", "Div", "ReduceMean", "HardSigmoid"} & set(ops) or \
        family == "mobilenet_v3"  # its squeeze-excitation gate stays a HardSigmoid
    if family == "convnext":
        pointwise = [n for n in og.nodes if n.op == "Conv" and len(n.inputs) == 3
                     and og.params[n.inputs[1]].shape[2:] == (1, 1)]
        assert len(pointwise) == 4 and "Transpose" not in ops and ops.count("Dense") == 1


def test_dynamo_layers_take_module_names() -> None:
    """The dynamo exporter names nodes node_Conv_109; layers take their PyTorch module path
    from their weight (what --float-layer and --cpu-layer name)."""
    model = exported("resnet", "dynamo")
    assert any(n.name.startswith("node_Conv") for n in model.graph.node)
    g = from_onnx(model)
    assert [n.name for n in g.nodes if n.op in ("Conv", "Dense")] == [
        "stem.0.0", "body.0.conv1.0", "body.0.conv2.0", "body.1.conv1.0", "body.1.conv2.0",
        "body.1.conv3.0", "body.1.down.0", "fc"]


@pytest.mark.parametrize("family, dynamo", [("shufflenet_v2", False), ("alexnet", False),
                                            ("yolo", False), ("convnext", True)])
def test_symbolic_batch_exports_compile_for_batch_1(family: str, dynamo: bool) -> None:
    """A symbolic batch dimension (dynamic_axes / dynamic_shapes) leaves Shape chains on the
    batch in the graph; they fold with the batch compiled as 1."""
    import torch

    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = onnx.load_from_string(tm.export(tm.build(family, small=True),
                                                tm.input_size(family, True), dynamo=dynamo,
                                                opset=None if dynamo else 13,
                                                dynamic_batch=True))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and "Shape" in op_types(model)
    g = from_onnx(model)
    assert "Shape" not in {n.op for n in g.nodes}
    x = {model.graph.input[0].name: np.random.default_rng(0).standard_normal(
        g.inputs[model.graph.input[0].name].shape).astype(np.float32)}
    (ref,) = run_ort(model, x)
    assert_close_rel(run_float(g, x)[g.outputs[0]], ref, 1e-5)


def dynamic_export(family: str, dynamo: bool) -> onnx.ModelProto:
    """The family exported with symbolic batch, height and width."""
    import torch

    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return onnx.load_from_string(tm.export(tm.build(family, small=True),
                                               tm.input_size(family, True), dynamo=dynamo,
                                               opset=None if dynamo else 17,
                                               dynamic_batch=True, dynamic_size=True))


@pytest.mark.parametrize("family, dynamo", [("resnet", False), ("yolo", True),
                                            ("shufflenet_v2", True), ("efficientnet", False)])
def test_symbolic_size_exports_import_at_the_given_shape(family: str, dynamo: bool) -> None:
    """Symbolic batch, height and width (dynamic_axes / dynamic_shapes): the input shape given
    at import sizes them, the exporters' Shape chains fold, and the graph computes what
    onnxruntime computes at that shape."""
    model = dynamic_export(family, dynamo)
    inp = model.graph.input[0]
    assert [bool(d.dim_param) for d in inp.type.tensor_type.shape.dim] == [True, False,
                                                                          True, True]
    shape = (2, 3, 64, 96)
    g = from_onnx(model, input_shapes={inp.name: shape})
    assert g.inputs[inp.name].shape == shape and "Shape" not in {n.op for n in g.nodes}
    x = {inp.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    (ref,) = run_ort(model, x)
    assert_close_rel(run_float(g, x)[g.outputs[0]], ref, 1e-5)


def test_vta_compile_and_run_at_a_given_input_shape(tmp_path) -> None:
    """`vta compile --input-shape` compiles a dynamic-size export for one shape (the module
    runs at it, int8 on fsim close to onnxruntime); `vta run MODEL.onnx` sizes the symbolic
    dimensions from its input file."""
    model = dynamic_export("resnet", False)
    p = tmp_path / "dyn.onnx"
    p.write_bytes(model.SerializeToString())
    x = np.random.default_rng(1).standard_normal((1, 3, 48, 80)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    (ref,) = run_ort(model, {"input": x})
    assert main(["compile", str(p), "-o", str(tmp_path / "mod"),
                 "--input-shape", "input=1,3,48,80"]) == 0
    for module in (tmp_path / "mod", p):
        out = tmp_path / "y.npy"
        assert main(["run", str(module), "--input", str(tmp_path / "x.npy"), "-o",
                     str(out)]) == 0
        y = np.load(out)
        assert y.shape == ref.shape == (1, 10) and cosine(y, ref) >= COSINE, module


def cli_compile_run(model: onnx.ModelProto, tmp_path) -> tuple[dict, np.ndarray, np.ndarray]:
    """`vta compile` then `vta run` (fsim) of an exported model: (manifest, output,
    onnxruntime's float output on the same input)."""
    p = tmp_path / "model.onnx"
    p.write_bytes(model.SerializeToString())
    x = image(model)
    np.save(tmp_path / "x.npy", next(iter(x.values())))
    assert main(["compile", str(p), "-o", str(tmp_path / "mod")]) == 0
    man = json.loads((tmp_path / "mod" / "manifest.json").read_text())
    assert main(["run", str(tmp_path / "mod"), "--input", str(tmp_path / "x.npy"), "-o",
                 str(tmp_path / "y.npy")]) == 0
    (ref,) = run_ort(model, x)
    return man, np.load(tmp_path / "y.npy"), ref


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def sequence_net():
    """A 1-D CNN (keyword spotting, ECG): Conv1d stem, a residual block, max pooling, a
    depthwise Conv1d, global pooling and a classifier, over an (8, 64) signal."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, ch: int) -> None:
            super().__init__()
            self.a = nn.Sequential(nn.Conv1d(ch, ch, 3, padding=1), nn.BatchNorm1d(ch),
                                   nn.ReLU(), nn.Conv1d(ch, ch, 3, padding=1),
                                   nn.BatchNorm1d(ch))

        def forward(self, x):  # noqa: ANN001, ANN202
            return torch.relu(x + self.a(x))

    torch.manual_seed(0)
    return nn.Sequential(nn.Conv1d(8, 32, 5, padding=2), nn.ReLU(), Block(32),
                         nn.MaxPool1d(2), nn.Conv1d(32, 32, 3, padding=2, dilation=2,
                                                    groups=32), nn.ReLU(),
                         nn.Conv1d(32, 64, 1), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
                         nn.Flatten(), nn.Linear(64, 6)).eval()


@pytest.mark.parametrize("dynamo", [False, True], ids=["ts17", "dynamo"])
def test_1d_convolution_networks_run_as_2d_on_vta(dynamo: bool) -> None:
    """Conv1d networks import as 2-D ones of height 1 (the ops between the convolutions run on
    the 4-D tensors, no reshape between two layers): float equal to onnxruntime; every conv and
    the classifier on VTA, bit-exact on fsim against the int8 reference and close to
    onnxruntime."""
    import io

    import torch

    torch.set_num_threads(1)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            model = torch.onnx.export(sequence_net(), (torch.randn(1, 8, 64),), dynamo=True,
                                      verbose=False).model_proto
        else:
            torch.onnx.export(sequence_net(), (torch.randn(1, 8, 64),), buf, dynamo=False,
                              opset_version=17, input_names=["input"])
            model = onnx.load_from_string(buf.getvalue())
    g = from_onnx(model)
    x = image(model)
    (ref,) = run_ort(model, x)
    assert_close_rel(run_float(g, x)[g.outputs[0]], ref, 1e-5)
    og = optimize(g)
    convs = [n for n in og.nodes if n.op == "Conv"]
    assert len(convs) == 5 and all(og.params[n.inputs[1]].ndim == 4 for n in convs)
    prod = og.producers()
    assert [prod[n.inputs[0]].op for n in convs[1:]] == ["Conv", "Conv", "MaxPool", "Conv"]
    m = compile_graph(g, Config(), samples=[image(model, seed) for seed in range(1, 5)])
    layers = [n.name for n in m.graph.nodes if n.op in ("QConv", "QDense")]
    assert len(layers) == 6 and all(m.partition[k] == "vta" for k in layers)
    with Executor(m, "fsim") as ex:
        out = ex.run(x)[g.outputs[0]]
    np.testing.assert_array_equal(out, run_quantized(m.graph, x)[g.outputs[0]])
    assert cosine(out, ref) >= COSINE


def test_vta_compile_and_run_exported_detector(tmp_path, capsys) -> None:
    """The command-line path: vta compile / vta run on a dynamo-exported YOLO-style model
    (LeakyRelu, Slice, Resize, Concat, PRelu, a 5-D permuted output)."""
    man, y, ref = cli_compile_run(exported("yolo", "dynamo"), tmp_path)
    assert sum(v == "vta" for v in man["partition"].values()) >= 6
    assert y.shape == ref.shape == (1, 3, 8, 8, 7)
    assert cosine(ref, y) >= COSINE


@pytest.mark.parametrize("export", ["ts17", "dynamo"])
def test_vta_compile_and_run_exported_densenet(tmp_path, export: str) -> None:
    """bench_models' path for DenseNet (whose 224x224 export once failed to import: batch-norm
    scales shared through Identity, pre-activation batch norms on concatenations, transitions):
    `vta compile` of either exporter's output puts every conv on VTA (the stem too: 18% of
    this small model's MACs); `vta run` on fsim is close to onnxruntime's float output."""
    model = exported("densenet", export)
    man, y, ref = cli_compile_run(model, tmp_path)
    convs = [n.name for n in from_onnx(model).nodes if n.op == "Conv"]
    assert len(convs) == 10  # stem, 2 x 2 dense layers of two convs, transition
    assert {k for k, v in man["partition"].items() if v == "vta"} >= set(convs)
    assert y.shape == ref.shape and cosine(ref, y) >= COSINE
