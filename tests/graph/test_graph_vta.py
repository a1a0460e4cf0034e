"""VTA execution on the functional simulator: bit-exact against the int8 reference."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler.graph.executor import Executor
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.ir import Graph, Node, TensorInfo
from vta.compiler.graph.module import compile_graph
from vta.compiler.graph.options import CompileOptions
from vta.isa import Config

from .conftest import rand_input

pytestmark = pytest.mark.sim

#: A configuration with tiny buffers: forces input-channel chunks, row tiles and single
#: output blocks per GEMM (inp 256, wgt 64, acc 128 entries).
TINY = Config(LOG_INP_BUFF_SIZE=12, LOG_WGT_BUFF_SIZE=14, LOG_ACC_BUFF_SIZE=13)


def conv_graph(c: int, o: int, h: int, w: int, k: int, *, n: int = 1, stride=(1, 1),
               pads=(1, 1, 1, 1), dil=(1, 1), relu: bool = True, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    params = {"w": (rng.standard_normal((o, c, k, k)) * np.sqrt(2 / (c * k * k)))
              .astype(np.float32), "b": rng.standard_normal(o).astype(np.float32) * 0.1}
    attrs = {"strides": list(stride), "pads": list(pads), "dilations": list(dil), "group": 1}
    if relu:
        attrs.update(activation="relu", act_min=0.0, act_max=None)
    return Graph([Node("Conv", "conv", ["x", "w", "b"], ["y"], attrs)],
                 {"x": TensorInfo((n, c, h, w))}, ["y"], params, "conv")


def run_both(g: Graph, cfg: Config, *, seed: int = 1, arena_base: int = 0):
    m = compile_graph(g, cfg, CompileOptions(keep_first_float=False))
    x = rand_input(g, seed)
    ref = run_quantized(m.graph, x, keep=True)
    with Executor(m, "fsim", arena_base=arena_base) as ex:
        out = ex.run(x)
        rep = ex.last_report
    return m, ref, out, rep


CASES = {
    "3x3_pad_stride2_odd_channels": dict(c=5, o=20, h=7, w=9, k=3, stride=(2, 2),
                                         pads=(1, 0, 2, 1)),
    "1x1_no_relu": dict(c=32, o=48, h=5, w=6, k=1, pads=(0, 0, 0, 0), relu=False),
    "dilated": dict(c=16, o=16, h=9, w=9, k=3, dil=(2, 2), pads=(2, 2, 2, 2)),
    "7x7_stride2": dict(c=3, o=16, h=20, w=20, k=7, stride=(2, 2), pads=(3, 3, 3, 3)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_conv_layer_bit_exact(case: str) -> None:
    m, ref, out, rep = run_both(conv_graph(**CASES[case]), Config())
    (layer,) = [r for r in rep.layers if r.op == "QConv"]
    assert layer.where == "fsim"
    np.testing.assert_array_equal(out["y"], ref["y"])
    # and the quantized output is not trivial (mostly zero)
    q = ref["y.int8"]
    assert np.count_nonzero(q) > q.size // 4


def test_tiny_buffers_force_input_channel_and_row_tiles() -> None:
    g = conv_graph(c=128, o=40, h=12, w=12, k=3)
    m, ref, out, _ = run_both(g, TINY)
    kn = m.kernels["conv"].knobs
    # 8 input-channel blocks and 12 output rows cannot be on chip at once
    assert kn["tile_ci"] < 8 and kn["tile_h"] * kn["tile_w"] < 12 * 12
    np.testing.assert_array_equal(out["y"], ref["y"])


def test_small_preset_and_batch(small_cfg) -> None:
    g = conv_graph(c=6, o=10, h=6, w=5, k=3, n=3)
    for cfg in (small_cfg, Config(LOG_BATCH=1)):
        m, ref, out, _ = run_both(g, cfg)
        np.testing.assert_array_equal(out["y"], ref["y"])


def test_relocated_arena_gives_same_result() -> None:
    g = conv_graph(c=16, o=32, h=8, w=8, k=3)
    _, ref, out0, _ = run_both(g, Config())
    _, _, out1, _ = run_both(g, Config(), arena_base=1 << 16)
    np.testing.assert_array_equal(out0["y"], ref["y"])
    np.testing.assert_array_equal(out1["y"], ref["y"])


@pytest.mark.parametrize("name, per_channel, pow2", [
    ("resnet18", False, False), ("resnet18", True, True), ("dcgan", False, False),
    ("mobilenet_v1", False, False), ("mobilenet_v1", True, False)])
def test_network_bit_exact_on_fsim(small_models, name: str, per_channel: bool, pow2: bool
                                   ) -> None:
    """Per-tensor and per-channel fixed-point multipliers (a vector MUL), and power-of-two
    shifts: VTA on fsim gives the int8 reference's bits."""
    _, g = small_models[name]
    m = compile_graph(g, Config(), CompileOptions(per_channel=per_channel, pow2=pow2))
    muls = [n.attrs["mul"] for n in m.graph.nodes if n.op == "QConv"]
    if pow2:
        assert muls and all(v == 1 for v in muls)
    elif per_channel:
        assert any(isinstance(v, list) for v in muls)
    else:
        assert muls and all(isinstance(v, int) and v > 1 for v in muls)
    x = rand_input(g, 3)
    ref = run_quantized(m.graph, x)[g.outputs[0]]
    with Executor(m, "fsim", host="numpy") as ex:  # LLVM host kernels: test_graph_host.py
        out = ex.run(x)[g.outputs[0]]
        rep = ex.last_report
    np.testing.assert_array_equal(out, ref)
    on_vta = {r.node for r in rep.layers if r.where == "fsim"}
    if name == "mobilenet_v1":
        # pointwise convs, the classifier, and every depthwise conv (block-diagonal group
        # convs), the first one's 8 channels a partial 16-channel block
        dw = {n.name for n in m.graph.nodes if n.op == "QConv" and n.attrs["group"] > 1}
        assert "dw1" in dw and dw <= on_vta
        assert len(on_vta) == 13 + 1 + len(dw)
    else:
        # ResNet-18's first conv (6.5% of the MACs) stays float; DCGAN's (a transposed conv
        # from the noise vector, 23% at this size) is int8 on VTA with the other four
        # (a residual add in its conv's epilogue is one layer with it: vta.compiler.graph.fuse)
        fused = sum("residual" in n.attrs for n in m.graph.nodes)
        assert len(on_vta) == {"resnet18": 20 + 8 - fused, "dcgan": 5}[name]
    # every residual add (QAdd, both inputs rescaled) runs on VTA: on the ALU or fused
    assert {n.name for n in m.graph.nodes if n.op == "QAdd" or "residual" in n.attrs} <= on_vta
    # the whole-CPU run of the same module gives the same bits
    with Executor(m, "cpu", host="numpy") as ex:
        np.testing.assert_array_equal(ex.run(x)[g.outputs[0]], ref)


@pytest.mark.parametrize("threads", [True, False])
@pytest.mark.parametrize("cfg_name, n, c, o, hw, k, stride", [
    ("tiny", 1, 128, 40, 12, 3, 1), ("tiny", 1, 24, 24, 9, 3, 2),
    ("default", 1, 64, 96, 14, 3, 1), ("default", 1, 256, 64, 7, 1, 1),
    ("small", 3, 6, 10, 6, 3, 1)])
def test_lowering_is_race_free_and_exact(cfg_name, n, c, o, hw, k, stride, threads) -> None:
    """A layer's recorded program, with and without virtual threads, gives the int8
    reference's bits under every scheduling order of the three modules."""
    cfg = {"tiny": TINY, "default": Config(), "small": Config.preset("small")}[cfg_name]
    g = conv_graph(c=c, o=o, h=hw, w=hw, k=k, n=n, stride=(stride, stride),
                   pads=(k // 2,) * 4, seed=c + o)
    m = compile_graph(g, cfg, CompileOptions(keep_first_float=False, threads=threads))
    kn = m.kernels["conv"].knobs
    assert threads or kn["oc_nthread"] * kn["h_nthread"] == 1
    assert m.kernels["conv"].knob_source == "default"
    _check_module_layer(m, "conv", rand_input(g, 5))


@pytest.mark.unit
def test_manifest_records_knobs_source_and_cycles(tmp_path) -> None:
    """Every VTA layer's knobs, their source and their perf-model cycles reach the manifest,
    and the cycles are the perf backend's for the module's own program."""
    import json

    from vta.compiler.graph.module import load_module

    g = conv_graph(c=32, o=32, h=10, w=10, k=3)
    m = compile_graph(g, Config(), CompileOptions(keep_first_float=False))
    m.save(tmp_path / "m")
    km = json.loads((tmp_path / "m" / "manifest.json").read_text())["kernels"]["conv"]
    assert km["knob_source"] == "default" and km["template"] == "conv2d"
    assert set(km["knobs"]) >= {"tile_h", "tile_w", "tile_ci", "tile_co"}
    m2 = load_module(tmp_path / "m")
    with Executor(m2, "perf") as ex:
        ex.run(rand_input(g, 1))
        rep = ex.last_report
    (layer,) = [r for r in rep.layers if r.node == "conv"]
    assert abs(layer.cycles - km["cycles"]) <= 0.01 * km["cycles"]


def test_run_lowers_nothing(small_models, monkeypatch) -> None:
    """`vta run` of a compiled module does no compiler work: any lowering, scheduling or
    code generation during the run raises."""
    import importlib

    from vta.compiler.codegen import vta as cg
    from vta.compiler.graph import lowering

    _, g = small_models["dcgan"]
    m = compile_graph(g, Config())
    x = rand_input(g, 4)
    ref = run_quantized(m.graph, x)[g.outputs[0]]

    def boom(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("lowering at run time")

    B = importlib.import_module("vta.compiler.build")
    for mod, name in ((B, "lower_vta"), (B, "lower"), (B, "record_func"), (cg, "emit"),
                      (cg, "commands"), (lowering, "record_layer"), (lowering, "plan_layer")):
        monkeypatch.setattr(mod, name, boom)
    from vta.compiler.topi import defaults

    monkeypatch.setattr(defaults, "search", boom)
    with Executor(m, "fsim", host="numpy") as ex:  # dcgan ends in a float tanh
        out = ex.run(x)[g.outputs[0]]
    np.testing.assert_array_equal(out, ref)


def _mixed_model():
    """A small network using the remaining int8 ops: Clip (relu6), Pad, AveragePool, Resize,
    Concat, MaxPool, a float Mul and Softmax after a Gemm."""
    from onnx import helper

    from .conftest import onnx_model

    rng = np.random.default_rng(5)

    def w(*s):  # noqa: ANN002, ANN202
        return (rng.standard_normal(s) * np.sqrt(2 / np.prod(s[1:]))).astype(np.float32)

    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], name="c0", pads=[1] * 4),
        helper.make_node("Conv", ["c0", "w1", "b1"], ["c1"], name="c1", pads=[1] * 4),
        helper.make_node("Clip", ["c1", "zero", "six"], ["r1"], name="relu6"),
        helper.make_node("Pad", ["r1", "pads"], ["p1"], name="pad"),
        helper.make_node("AveragePool", ["p1"], ["a1"], name="avg", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["a1", "w2"], ["c2"], name="c2", pads=[1] * 4),
        helper.make_node("Resize", ["c2", "", "scales"], ["u2"], name="up", mode="nearest"),
        helper.make_node("Concat", ["u2", "p1"], ["cat"], name="cat", axis=1),
        helper.make_node("MaxPool", ["cat"], ["m"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["m", "w3"], ["c3"], name="c3"),
        helper.make_node("Relu", ["c3"], ["r3"], name="relu3"),
        helper.make_node("GlobalAveragePool", ["r3"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["l"], name="fc", transB=1),
        helper.make_node("Mul", ["l", "t"], ["lt"], name="temp"),
        helper.make_node("Softmax", ["lt"], ["y"], name="softmax", axis=1),
    ]
    inits = {"w0": w(8, 3, 3, 3), "w1": w(20, 8, 3, 3), "b1": w(20) * 0.1,
             "zero": np.array(0, np.float32), "six": np.array(6, np.float32),
             "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "w2": w(12, 20, 3, 3),
             "scales": np.array([1, 1, 2, 2], np.float32), "w3": w(24, 32, 1, 1),
             "wf": w(10, 24), "bf": w(10) * 0.1, "t": np.array(2.0, np.float32)}
    return onnx_model(nodes, {"x": [1, 3, 16, 16]}, {"y": [1, 10]}, inits)


def test_mixed_int8_ops_bit_exact_and_close_to_float() -> None:
    from vta.compiler.graph.onnx_frontend import from_onnx
    from vta.compiler.graph.reference import run_float

    from .conftest import assert_close_rel, run_ort

    model = _mixed_model()
    g = from_onnx(model)
    x = rand_input(g, 11)
    assert_close_rel(run_float(g, x)["y"], run_ort(model, x)[0], 1e-5)
    m = compile_graph(g, Config())
    ops = {n.name: n.op for n in m.graph.nodes}
    assert "relu6" not in ops  # fused into c1's epilogue: clip at 0 and round(6 / scale)
    c1 = m.graph.node("c1")
    assert c1.attrs["lo"] == 0 and c1.attrs["hi"] == min(127, round(6 / c1.attrs["out_scale"]))
    expect = {"c0": "Conv", "c1": "QConv", "pad": "QPad", "avg": "QAveragePool", "up": "Resize",
              "cat": "QConcat", "pool": "QMaxPool", "gap": "QGlobalAveragePool",
              "fc": "QDense", "temp": "Identity", "softmax": "Softmax"}  # temp: a scale change
    assert {k: ops[k] for k in expect} == expect
    ref = run_quantized(m.graph, x)["y"]
    with Executor(m, "fsim", host="numpy") as ex:  # LLVM host kernels: test_graph_host.py
        out = ex.run(x)["y"]
    np.testing.assert_array_equal(out, ref)
    f = run_float(g, x)["y"].ravel()
    assert float(f @ out.ravel() / np.linalg.norm(f) / np.linalg.norm(out)) > 0.98


@pytest.mark.parametrize("cfg_name", ["default", "small"])
@pytest.mark.parametrize("c, o, group, stride", [(32, 32, 32, 2), (32, 64, 2, 1), (64, 64, 64, 1)])
def test_grouped_conv_on_vta_race_free(cfg_name, c, o, group, stride) -> None:
    """Grouped convs (whole channel blocks per group) and depthwise convs (as block-diagonal
    group convs): one concatenated program per layer, race-free and bit-exact."""
    cfg = Config() if cfg_name == "default" else Config.preset("small")
    rng = np.random.default_rng(c + o + group)
    params = {"w": (rng.standard_normal((o, c // group, 3, 3)) * 0.3).astype(np.float32),
              "b": rng.standard_normal(o).astype(np.float32) * 0.1}
    attrs = {"strides": [stride] * 2, "pads": [1] * 4, "dilations": [1, 1], "group": group,
             "activation": "relu", "act_min": 0.0, "act_max": None}
    g = Graph([Node("Conv", "conv", ["x", "w", "b"], ["y"], attrs)],
              {"x": TensorInfo((1, c, 9, 9))}, ["y"], params, "gconv")
    m = compile_graph(g, cfg, CompileOptions(keep_first_float=False))
    assert m.partition["conv"] == "vta"
    _check_module_layer(m, "conv", rand_input(g, 2))


def _check_module_layer(m, name: str, x) -> None:  # noqa: ANN001
    """Run one compiled layer's stream under every scheduling order (fsim.check_races) on a
    DRAM image built like the executor's; compare with the int8 reference."""
    from vta.compiler.topi.pack import pack_activation, unpack_activation
    from vta.sim import fsim

    cfg = m.cfg
    env = run_quantized(m.graph, x, keep=True)
    q = m.graph.node(name)
    dram = np.zeros(m.plan.size, np.uint8)
    dram[:len(m.const_image)] = np.frombuffer(m.const_image, np.uint8)
    xin = pack_activation(env[q.inputs[0]], cfg.batch, cfg.block).view(np.uint8).ravel()
    ib, ob = m.plan.buffers[q.inputs[0]], m.plan.buffers[q.outputs[0]]
    dram[ib.offset:ib.offset + xin.size] = xin
    res = fsim.check_races(m.kernels[name].program, dram, cfg, random_orders=2)
    shp = m.shapes[q.outputs[0]]
    nb = -(-shp[0] // cfg.batch)
    nbytes = nb * -(-shp[1] // cfg.block) * shp[2] * shp[3] * cfg.batch * cfg.block
    got = unpack_activation(res.dram[ob.offset:ob.offset + nbytes].view(np.int8).reshape(
        nb, -1, shp[2], shp[3], cfg.batch, cfg.block), shp[0], shp[1]).reshape(shp)
    np.testing.assert_array_equal(got, env[q.outputs[0]])
    assert np.count_nonzero(got) > got.size // 4


@pytest.mark.unit
def test_plan_layer_groups_and_partial_blocks() -> None:
    from vta.compiler.graph.lowering import LayerError, plan_layer

    attrs = {"strides": [1, 1], "pads": [1] * 4, "dilations": [1, 1], "shift": 3, "lo": -128,
             "hi": 127}

    def node(group: int) -> Node:
        return Node("QConv", "c", ["x", "w", "b"], ["y"], dict(attrs, group=group))

    with pytest.raises(LayerError, match="whole 16-channel blocks"):
        plan_layer(node(2), (1, 32, 8, 8), (48, 16, 3, 3), Config())
    dw = plan_layer(node(48), (1, 48, 8, 8), (48, 1, 3, 3), Config())
    assert dw.depthwise and dw.groups == 3 and dw.kernel == (3, 1, 3, 3)
    w = np.arange(48 * 9, dtype=np.float32).reshape(48, 1, 3, 3)
    wp = np.frombuffer(dw.constants(Config(), node(48), {"w": w, "b": np.zeros(48)})[0],
                       np.int8).reshape(3, 1, 3, 3, 16, 16)
    # block-diagonal: output channel j of block k only sees input channel j
    assert (wp[1, 0, :, :, 5, 5] == w[21, 0].astype(np.int8)).all()
    assert np.count_nonzero(wp[1]) == np.count_nonzero(w[16:32].astype(np.int8))
    # depthwise with a partial last block: 24 channels are 2 blocks, the padded lanes zero
    dw = plan_layer(node(24), (1, 24, 8, 8), (24, 1, 3, 3), Config())
    assert dw.depthwise and dw.groups == 2 and dw.data[1] == 2 and dw.kernel == (2, 1, 3, 3)
    wp = np.frombuffer(dw.constants(Config(), node(24), {"w": w[:24], "b": np.ones(24)})[0],
                       np.int8).reshape(2, 1, 3, 3, 16, 16)
    assert np.count_nonzero(wp[1]) == np.count_nonzero(w[16:24].astype(np.int8))
    assert (wp[1, 0, :, :, 7, 7] == w[23, 0].astype(np.int8)).all()
    with pytest.raises(LayerError, match="8 groups of 3 input channels"):
        plan_layer(node(8), (1, 24, 8, 8), (24, 3, 3, 3), Config())
    gc = plan_layer(node(2), (1, 64, 8, 8), (64, 32, 3, 3), Config())
    assert gc.groups == 2 and not gc.depthwise and gc.kernel == (4, 2, 3, 3)
    with pytest.raises(LayerError, match="pad"):
        plan_layer(Node("QConv", "c", ["x", "w", "b"], ["y"],
                        dict(attrs, group=1, pads=[16] * 4)), (1, 16, 8, 8), (16, 16, 3, 3),
                   Config())


def test_layer_that_does_not_fit_falls_back_with_a_note() -> None:
    """A conv whose padding the LOAD's 4-bit pad fields cannot express runs on the CPU, the
    reason in the module's notes, and the network stays bit-exact."""
    g = conv_graph(c=16, o=16, h=6, w=6, k=3, pads=(16, 16, 16, 16))
    m, ref, out, rep = run_both(g, Config())
    assert m.partition["conv"] == "cpu"
    assert any(n.startswith("fallback: conv (QConv) runs on the CPU (int8, does not fit VTA")
               and "pad" in n for n in m.notes)
    np.testing.assert_array_equal(out["y"], ref["y"])


@pytest.mark.parametrize("cfg_name", ["default", "tiny"])
def test_per_channel_shifts_on_vta(cfg_name) -> None:
    """Per-channel weight scales: VTA shifts and multiplies by vectors (ALU SHR and MUL with
    a per-lane amount)."""
    cfg = Config() if cfg_name == "default" else TINY
    g = conv_graph(c=40, o=36, h=9, w=9, k=3, seed=3)
    g.params["w"] = g.params["w"] * np.geomspace(0.05, 4, 36, dtype=np.float32)[:, None, None,
                                                                                None]
    m = compile_graph(g, cfg, CompileOptions(keep_first_float=False, per_channel=True))
    shift, mul = m.graph.node("conv").attrs["shift"], m.graph.node("conv").attrs["mul"]
    assert isinstance(shift, list) and len(set(shift)) > 3 and isinstance(mul, list)
    _check_module_layer(m, "conv", rand_input(g, 6))
    # the weights are far more accurate than with one exponent for all channels, and the
    # output (whose activation scale is still one per tensor) is no worse
    from vta.compiler.graph.reference import run_float

    x = rand_input(g, 7)
    f = run_float(g, x)["y"]
    errs, werrs = [], []
    for pc in (False, True):
        q = compile_graph(g, cfg, CompileOptions(keep_first_float=False, per_channel=pc)).graph
        errs.append(np.linalg.norm(run_quantized(q, x)["y"] - f))
        n = q.node("conv")
        sw = np.asarray(n.attrs["w_scale"], np.float64).reshape(-1, 1, 1, 1)
        d = (q.params[n.inputs[1]] * sw - g.params["w"]).reshape(36, -1)
        werrs.append(np.max(np.linalg.norm(d, axis=1)
                            / np.linalg.norm(g.params["w"].reshape(36, -1), axis=1)))
    # worst channel's relative weight error
    assert werrs[1] < 0.3 * werrs[0] and errs[1] <= errs[0]


@pytest.mark.tsim
def test_recorded_layers_on_tsim_small_config(small_cfg) -> None:
    """A compiled module's recorded programs on the Verilator RTL (small config): a plain, a
    strided, a depthwise conv and a dense layer give the int8 reference's bits, and each
    layer's tsim cycles are within 10% of the perf-model cycles the manifest records."""
    from ..conftest import require_tool

    require_tool("verilator")
    rng = np.random.default_rng(9)

    def w(*s):  # noqa: ANN002, ANN202
        return (rng.standard_normal(s) * np.sqrt(2 / np.prod(s[1:]))).astype(np.float32)

    relu = {"activation": "relu", "act_min": 0.0, "act_max": None}
    conv = {"pads": [1] * 4, "dilations": [1, 1]}
    nodes = [Node("Conv", "c1", ["x", "w1", "b1"], ["y1"],
                  dict(conv, strides=[1, 1], group=1, **relu)),
             Node("Conv", "c2", ["y1", "w2", "b2"], ["y2"],
                  dict(conv, strides=[2, 2], group=1, **relu)),
             Node("Conv", "dw", ["y2", "w3", "b3"], ["y3"],
                  dict(conv, strides=[1, 1], group=16, **relu)),
             Node("Flatten", "flat", ["y3"], ["f"], {"axis": 1}),
             Node("Dense", "fc", ["f", "wf", "bf"], ["y"], {})]
    params = {"w1": w(8, 4, 3, 3), "b1": w(8) * 0.1, "w2": w(16, 8, 3, 3), "b2": w(16) * 0.1,
              "w3": w(16, 1, 3, 3), "b3": w(16) * 0.1, "wf": w(10, 16 * 4 * 4),
              "bf": w(10) * 0.1}
    g = Graph(nodes, {"x": TensorInfo((1, 4, 8, 8))}, ["y"], params, "mini")
    x = rand_input(g, 2)
    # the fixed-point requantization (ALU MUL, rounding ADD, SHR): bit-exact on the RTL
    mfp = compile_graph(g, small_cfg, CompileOptions(keep_first_float=False, per_channel=True))
    assert any(isinstance(n.attrs.get("mul"), list) for n in mfp.graph.nodes)
    with Executor(mfp, "tsim") as ex:
        np.testing.assert_array_equal(ex.run(x)["y"], run_quantized(mfp.graph, x)["y"])
    # power-of-two scales (shift-only epilogues): bits, and cycles within 10% of the perf model
    # (with the multiplier's three extra ALU passes the model overestimates the tiny dense
    # layer by ~10%)
    m = compile_graph(g, small_cfg, CompileOptions(keep_first_float=False, pow2=True))
    assert {k for k, v in m.partition.items() if v == "vta"} == {"c1", "c2", "dw", "fc"}
    ref = run_quantized(m.graph, x)["y"]
    with Executor(m, "tsim") as ex:
        out = ex.run(x)["y"]
        rep = ex.last_report
    np.testing.assert_array_equal(out, ref)
    for r in rep.layers:
        if r.where == "tsim":
            est = m.kernels[r.node].cycles
            assert abs(r.cycles - est) <= 0.1 * r.cycles, (r.node, r.cycles, est)


def conv_transpose_graph(c: int, o: int, h: int, k: int, s: int, p: int, op: int = 0,
                         seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    params = {"w": (rng.standard_normal((c, o, k, k)) * np.sqrt(2 * s * s / (c * k * k)))
              .astype(np.float32), "b": rng.standard_normal(o).astype(np.float32) * 0.1}
    attrs = {"strides": [s, s], "pads": [p] * 4, "dilations": [1, 1], "group": 1,
             "output_padding": [op, op], "activation": "relu", "act_min": 0.0,
             "act_max": None}
    return Graph([Node("ConvTranspose", "convt", ["x", "w", "b"], ["y"], attrs)],
                 {"x": TensorInfo((1, c, h, h))}, ["y"], params, "convt")


@pytest.mark.parametrize("c, o, h, k, s, p, op", [
    (32, 16, 5, 4, 2, 1, 0), (16, 32, 4, 3, 2, 1, 1), (16, 16, 3, 4, 1, 0, 0),
    (16, 16, 4, 3, 3, 1, 2), (20, 12, 6, 4, 2, 2, 0)])
def test_conv_transpose_runs_the_phased_template(c, o, h, k, s, p, op) -> None:
    """A ConvTranspose is one VTA layer of the conv2d_transpose template (no CPU work): its
    recorded program gives the int8 reference's bits under every scheduling order, and when
    the stride divides the kernel (phase offsets affine) the GEMM runs exactly kernel**2 /
    stride**2 taps an output pixel, none on an inserted zero."""
    g = conv_transpose_graph(c, o, h, k, s, p, op, seed=c + k)
    m = compile_graph(g, Config(), CompileOptions(keep_first_float=False))
    # quantize, the layer on VTA, dequantize: no CPU op between (no zero insertion)
    assert [(n.op, m.partition[n.name]) for n in m.graph.nodes] == [
        ("Quantize", "cpu"), ("QConv", "vta"), ("Dequantize", "cpu")]
    # (a stride-1 transposed conv is a plain conv of the flipped kernel)
    assert m.kernels["convt"].template == ("conv2d" if s == 1 else "conv2d_transpose")
    _check_module_layer(m, "convt", rand_input(g, 7))
    _, _, oh, ow = m.shapes["y"]
    assert oh == (h - 1) * s + k - 2 * p + op
    # MACs: the taps that meet an input pixel (what the dilated conv would do, over stride**2)
    dense = oh * ow * -(-o // 16) * 16 * -(-c // 16) * 16 * k * k
    assert m.macs["convt"] <= dense // (s * s) + 2 * k * oh * ow * o * c
    if k % s == 0 and (s == 2 or p % s == 0):
        assert m.kernels["convt"].gemm_macs == dense // (s * s)


@pytest.mark.tsim
def test_conv_transpose_on_tsim_small_config(small_cfg) -> None:
    """The conv2d_transpose template's program on the Verilator RTL (small config): the int8
    reference's bits for a DCGAN-style k4 s2 p1 layer and a k3 s2 p1 output_padding 1 one."""
    from ..conftest import require_tool

    require_tool("verilator")
    for c, o, h, k, s, p, op in [(8, 4, 4, 4, 2, 1, 0), (4, 8, 3, 3, 2, 1, 1)]:
        g = conv_transpose_graph(c, o, h, k, s, p, op, seed=k)
        m = compile_graph(g, small_cfg, CompileOptions(keep_first_float=False))
        assert m.partition["convt"] == "vta"
        x = rand_input(g, 3)
        with Executor(m, "tsim") as ex:
            out = ex.run(x)["y"]
            rep = ex.last_report
        np.testing.assert_array_equal(out, run_quantized(m.graph, x)["y"])
        assert [r.where for r in rep.layers] == ["cpu", "tsim", "cpu"]


def test_conv_transpose_outside_the_template_runs_on_the_cpu() -> None:
    """An output that is not whole phase rows (k3 s2 p1 without output_padding: 2H - 1 rows)
    stays on the CPU with the reason in the module's notes, and gives the reference's bits."""
    g = conv_transpose_graph(16, 16, 4, 3, 2, 1, 0)
    m = compile_graph(g, Config(), CompileOptions(keep_first_float=False))
    assert m.partition["convt"] == "cpu" and m.shapes["y"][2:] == (7, 7)
    assert any("convt" in n and "multiple of the stride" in n for n in m.notes), m.notes
    x = rand_input(g, 2)
    with Executor(m, "fsim") as ex:
        np.testing.assert_array_equal(ex.run(x)["y"], run_quantized(m.graph, x)["y"])


@pytest.mark.parametrize("c, stride, per_channel", [(24, 1, False), (40, 2, False),
                                                    (24, 2, True), (40, 1, True)])
def test_depthwise_partial_channel_block_on_vta(c: int, stride: int, per_channel: bool
                                                ) -> None:
    """A depthwise conv whose channels are not whole 16-channel blocks (ShuffleNet's 116,
    MobileNet v3's 24/40/...) runs on VTA: its padded lanes (zero weights, bias and vectors)
    compute values no reader uses, and the pointwise conv after it is bit-exact too."""
    from onnx import helper
    from vta.compiler.graph.onnx_frontend import from_onnx

    from .conftest import onnx_model

    rng = np.random.default_rng(c + stride)
    nodes = [helper.make_node("Conv", ["x", "wd", "bd"], ["d"], name="dw", group=c,
                              pads=[1] * 4, strides=[stride] * 2, kernel_shape=[3, 3]),
             helper.make_node("Relu", ["d"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "wp", "bp"], ["y"], name="pw",
                              kernel_shape=[1, 1])]
    scale = np.geomspace(0.1, 2, c, dtype=np.float32)[:, None, None, None]
    inits = {"wd": (rng.standard_normal((c, 1, 3, 3)) * scale).astype(np.float32),
             "bd": (rng.standard_normal(c) * 0.1).astype(np.float32),
             "wp": (rng.standard_normal((20, c, 1, 1)) * np.sqrt(2 / c)).astype(np.float32),
             "bp": (rng.standard_normal(20) * 0.1).astype(np.float32)}
    g = from_onnx(onnx_model(nodes, {"x": [1, c, 9, 9]}, {"y": None}, inits))
    m = compile_graph(g, Config(), CompileOptions(keep_first_float=False, per_channel=per_channel))
    assert isinstance(m.graph.node("dw").attrs["shift"], list) == per_channel
    assert m.partition["dw"] == m.partition["pw"] == "vta"
    assert not [n for n in m.notes if n.startswith("fallback:")]
    x = rand_input(g, 4)
    ref = run_quantized(m.graph, x, keep=True)
    with Executor(m, "fsim", host="numpy") as ex:
        out = ex.run(x)
        rep = ex.last_report
    assert {r.node for r in rep.layers if r.op == "QConv"} == {"dw", "pw"}
    assert all(r.where == "fsim" for r in rep.layers if r.op == "QConv")
    np.testing.assert_array_equal(out["y"], ref["y"])
    _check_module_layer(m, "dw", x)  # race-free, bit-exact and not mostly zero
