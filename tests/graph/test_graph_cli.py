"""The `vta zoo`, `vta compile` and `vta run` commands, and their error handling."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper
from vta.cli.main import main

from .conftest import onnx_model

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A zoo model, an input and its compiled module (built once for the module)."""
    d = tmp_path_factory.mktemp("cli")
    assert main(["zoo", "resnet18", "--image-size", "32", "--num-classes", "10",
                 "-o", str(d / "r.onnx")]) == 0
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(d / "x.npy", x)
    np.save(d / "calib.npy", np.random.default_rng(1).standard_normal((2, 1, 3, 32, 32))
            .astype(np.float32))
    assert main(["compile", str(d / "r.onnx"), "-o", str(d / "mod"), "--calib",
                 str(d / "calib.npy"), "--report"]) == 0
    return d


def one_line_error(capsys, argv: list[str], *needles: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"vta {argv[0]}: error: "), err
    for n in needles:
        assert n in err, err
    return err


def test_zoo_list_and_write(tmp_path, capsys) -> None:
    assert main(["zoo", "--list"]) == 0
    out = capsys.readouterr().out
    assert "resnet18" in out and "mobilenet_v1" in out and "dcgan" in out
    assert main(["zoo", "dcgan", "-o", str(tmp_path / "g.onnx")]) == 0
    import onnx

    m = onnx.load(str(tmp_path / "g.onnx"))
    assert sum(n.op_type == "ConvTranspose" for n in m.graph.node) == 5
    one_line_error(capsys, ["zoo", "vgg", "-o", str(tmp_path / "v.onnx")], "vgg", "resnet18")


def test_compile_writes_module(work, capsys) -> None:
    d = work / "mod"
    m = json.loads((d / "manifest.json").read_text())
    assert m["format"] == "vta-module" and m["config"]["LOG_BLOCK"] == 4
    assert m["inputs"] == {"input": {"shape": [1, 3, 32, 32], "dtype": "float32"}}
    assert m["outputs"]["fc.out"]["shape"] == [1, 10]
    # 20 conv/dense layers and the 8 residual adds: each in the epilogue of the conv that
    # makes one of its operands where that is faster (vta.compiler.graph.fuse), else on the ALU
    fused = [n for n in m["graph"]["nodes"] if "residual" in n["attrs"]]
    ew = sum(k["template"] == "elementwise" for k in m["kernels"].values())
    assert fused and len(fused) + ew == 8
    assert sum(v == "vta" for v in m["partition"].values()) == 28 - len(fused)
    assert len(m["kernels"]) == 28 - len(fused) and all(
        (d / k["program"]).stat().st_size % 16 == 0 for k in m["kernels"].values())
    assert {"scales", "layers"} <= set(m["quantization"])
    plan = json.loads((d / "plan.json").read_text())
    assert plan["size"] >= (d / "const.bin").stat().st_size
    assert not [p for p in work.iterdir() if p.name.startswith(".mod")]  # no temp left


def test_run_fsim_cpu_and_float(work, capsys) -> None:
    d = work
    capsys.readouterr()
    assert main(["run", str(d / "mod"), "--input", str(d / "x.npy"), "--target", "fsim",
                 "-o", str(d / "y_fsim.npy"), "--report"]) == 0
    rep = capsys.readouterr().out
    assert "layer1.0.conv1" in rep and "fsim" in rep and "MMACs" in rep and "util" in rep
    assert main(["run", str(d / "mod"), "--input", str(d / "x.npy"), "--target", "cpu",
                 "-o", str(d / "y_cpu.npy")]) == 0
    assert main(["run", str(d / "r.onnx"), "--input", str(d / "x.npy"), "--target", "cpu",
                 "-o", str(d / "y_float.npy")]) == 0
    a, b, f = (np.load(d / f"y_{k}.npy") for k in ("fsim", "cpu", "float"))
    np.testing.assert_array_equal(a, b)
    assert a.shape == f.shape == (1, 10) and a.dtype == np.float32
    assert float(a.ravel() @ f.ravel() / np.linalg.norm(a) / np.linalg.norm(f)) > 0.98


def test_run_onnx_on_fsim_compiles_on_the_fly(work, capsys) -> None:
    assert main(["run", str(work / "r.onnx"), "--input", str(work / "x.npy"),
                 "--target", "fsim", "-o", str(work / "y2.npy")]) == 0
    assert np.load(work / "y2.npy").shape == (1, 10)


def test_run_writes_every_output_to_npz(tmp_path, capsys) -> None:
    """A model with two outputs: `-o Y.npz` holds both under their names (the float run equal
    to onnxruntime, the int8 module's close to it); `-o Y.npy` holds the first, with a note."""
    from .conftest import run_ort

    rng = np.random.default_rng(0)
    inits = {"w1": rng.normal(0, 0.3, (16, 3, 3, 3)).astype(np.float32),
             "w2": rng.normal(0, 0.2, (16, 16, 3, 3)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["feat"]),
             helper.make_node("Conv", ["feat", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c2"], ["pooled"])]
    model = onnx_model(nodes, {"x": [1, 3, 16, 16]}, {"pooled": None, "feat": None}, inits)
    p = tmp_path / "two.onnx"
    p.write_bytes(model.SerializeToString())
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    refs = dict(zip(("pooled", "feat"), run_ort(model, {"x": x})))
    assert main(["run", str(p), "--input", str(tmp_path / "x.npy"), "--target", "cpu",
                 "-o", str(tmp_path / "f.npz")]) == 0
    with np.load(tmp_path / "f.npz") as f:
        assert sorted(f.files) == ["feat", "pooled"]
        for name, ref in refs.items():
            np.testing.assert_allclose(f[name], ref, rtol=1e-5, atol=1e-5)
    assert main(["compile", str(p), "-o", str(tmp_path / "mod")]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "mod"), "--input", str(tmp_path / "x.npy"),
                 "-o", str(tmp_path / "q.npz")]) == 0
    assert main(["run", str(tmp_path / "mod"), "--input", str(tmp_path / "x.npy"),
                 "-o", str(tmp_path / "q.npy")]) == 0
    assert "holds the first of the model's 2 outputs (pooled)" in capsys.readouterr().err
    with np.load(tmp_path / "q.npz") as q:
        for name, ref in refs.items():
            y = q[name]
            assert y.shape == ref.shape
            assert float(y.ravel() @ ref.ravel() / np.linalg.norm(y) / np.linalg.norm(ref)) \
                > 0.99, name
        np.testing.assert_array_equal(np.load(tmp_path / "q.npy"), q["pooled"])


def test_a_model_of_two_inputs_takes_npz_files(tmp_path, capsys) -> None:
    """An RGB + depth model: `vta compile --calib` and `vta run --input` take .npz files with an
    array (or a stack) per input name; the float run equals onnxruntime, the int8 module is
    close to it; a .npy or a misnamed array is a one-line error."""
    from .conftest import run_ort

    rng = np.random.default_rng(0)
    inits = {"wa": rng.normal(0, 0.3, (16, 3, 3, 3)).astype(np.float32),
             "wb": rng.normal(0, 0.3, (16, 1, 3, 3)).astype(np.float32),
             "wc": rng.normal(0, 0.2, (16, 16, 3, 3)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["rgb", "wa"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("Conv", ["depth", "wb"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["b"], ["br"]),
             helper.make_node("Add", ["ar", "br"], ["s"]),
             helper.make_node("Conv", ["s", "wc"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c"], ["y"])]
    model = onnx_model(nodes, {"rgb": [1, 3, 16, 16], "depth": [1, 1, 16, 16]}, {"y": None},
                       inits)
    p = tmp_path / "two.onnx"
    p.write_bytes(model.SerializeToString())
    x = {"rgb": rng.standard_normal((1, 3, 16, 16)).astype(np.float32),
         "depth": rng.standard_normal((1, 1, 16, 16)).astype(np.float32)}
    np.savez(tmp_path / "x.npz", **x)
    np.savez(tmp_path / "calib.npz",
             rgb=rng.standard_normal((3, 1, 3, 16, 16)).astype(np.float32),
             depth=rng.standard_normal((3, 1, 1, 16, 16)).astype(np.float32))
    (ref,) = run_ort(model, x)
    assert main(["run", str(p), "--input", str(tmp_path / "x.npz"), "--target", "cpu",
                 "-o", str(tmp_path / "f.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "f.npy"), ref, rtol=1e-5, atol=1e-6)
    assert main(["compile", str(p), "-o", str(tmp_path / "mod"), "--calib",
                 str(tmp_path / "calib.npz")]) == 0
    assert main(["run", str(tmp_path / "mod"), "--input", str(tmp_path / "x.npz"),
                 "-o", str(tmp_path / "q.npy")]) == 0
    y = np.load(tmp_path / "q.npy")
    assert float(y.ravel() @ ref.ravel() / np.linalg.norm(y) / np.linalg.norm(ref)) > 0.99
    np.save(tmp_path / "rgb.npy", x["rgb"])
    capsys.readouterr()
    one_line_error(capsys, ["run", str(tmp_path / "mod"), "--input", str(tmp_path / "rgb.npy")],
                   "the model has 2 inputs (rgb, depth); give them in one .npz file")
    np.savez(tmp_path / "bad.npz", rgb=x["rgb"], dept=x["depth"])
    one_line_error(capsys, ["compile", str(p), "-o", str(tmp_path / "m2"), "--calib",
                            str(tmp_path / "bad.npz")], "has no array 'depth'")


@pytest.mark.parametrize("batch", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_run_a_batch_equals_single_runs(work, tmp_path, capsys, batch: int) -> None:
    """An input stack [B, *input shape] (.npy, or .npz per input name) runs B images in one
    process: its output [B, *output shape] holds, row by row, what B single runs write (the
    compiled module on fsim, the ONNX model on the CPU)."""
    xs = np.random.default_rng(batch).standard_normal((batch, 1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "xs.npy", xs)
    np.savez(tmp_path / "xs.npz", input=xs)
    for model, target in ((work / "mod", "fsim"), (work / "r.onnx", "cpu")):
        singles = []
        for b in range(batch):
            np.save(tmp_path / "x1.npy", xs[b])
            assert main(["run", str(model), "--input", str(tmp_path / "x1.npy"), "--target",
                         target, "-o", str(tmp_path / "y1.npy")]) == 0
            singles.append(np.load(tmp_path / "y1.npy"))
        for name in ("xs.npy", "xs.npz"):
            assert main(["run", str(model), "--input", str(tmp_path / name), "--target",
                         target, "-o", str(tmp_path / "ys.npy"), "--report"]) == 0
            ys = np.load(tmp_path / "ys.npy")
            assert ys.shape == (batch, *singles[0].shape) == (batch, 1, 10)
            assert np.array_equal(ys, np.stack(singles)), (model, name)
            report = capsys.readouterr().out
            assert "total: " in report
    capsys.readouterr()


def test_bad_batches_are_one_line_errors(work, tmp_path, capsys, monkeypatch) -> None:
    from vta.compiler.graph import inputs

    mod = str(work / "mod")
    np.save(tmp_path / "bad.npy", np.zeros((2, 1, 3, 16, 16), np.float32))
    one_line_error(capsys, ["run", mod, "--input", str(tmp_path / "bad.npy")],
                   "shape [2, 1, 3, 16, 16]", "[B, 1, 3, 32, 32]")
    np.save(tmp_path / "empty.npy", np.zeros((0, 1, 3, 32, 32), np.float32))
    one_line_error(capsys, ["run", mod, "--input", str(tmp_path / "empty.npy")],
                   "shape [0, 1, 3, 32, 32]")
    np.save(tmp_path / "three.npy", np.zeros((3, 1, 3, 32, 32), np.float32))
    monkeypatch.setattr(inputs, "MAX_BATCH", 2)  # the bound, without a file of 4097 images
    one_line_error(capsys, ["run", mod, "--input", str(tmp_path / "three.npy")],
                   "3 images", "more than 2")


def test_bad_inputs_are_one_line_errors(work, tmp_path, capsys) -> None:
    mod, x = str(work / "mod"), str(work / "x.npy")
    np.save(tmp_path / "wrong_shape.npy", np.zeros((1, 3, 16, 16), np.float32))
    np.save(tmp_path / "wrong_dtype.npy", np.zeros((1, 3, 32, 32), np.float64))
    (tmp_path / "junk.npy").write_bytes(b"garbage")
    one_line_error(capsys, ["run", mod, "--input", str(tmp_path / "wrong_shape.npy")],
                   "shape [1, 3, 16, 16]", "[1, 3, 32, 32]")
    one_line_error(capsys, ["run", mod, "--input", str(tmp_path / "wrong_dtype.npy")],
                   "float64", "float32")
    one_line_error(capsys, ["run", mod, "--input", str(tmp_path / "missing.npy")],
                   "does not exist")
    one_line_error(capsys, ["run", mod, "--input", str(tmp_path / "junk.npy")], "not a .npy")
    one_line_error(capsys, ["run", str(tmp_path / "nomod"), "--input", x], "does not exist")
    one_line_error(capsys, ["run", mod, "--input", x, "--preset", "small"], "own configuration")
    one_line_error(capsys, ["compile", str(tmp_path / "none.onnx"), "-o", str(tmp_path / "o")],
                   "does not exist")
    assert not (tmp_path / "o").exists()


def test_bad_models_are_one_line_errors(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 20)
    one_line_error(capsys, ["compile", str(bad), "-o", str(tmp_path / "o")], "bad.onnx")
    m = onnx_model([helper.make_node("Relu", ["x"], ["r"], name="relu_node"),
                    helper.make_node("Einsum", ["r"], ["y"], name="einsum_node",
                                     equation="ij->ji")], {"x": [1, 4]}, {"y": None})
    p = tmp_path / "einsum.onnx"
    p.write_bytes(m.SerializeToString())
    one_line_error(capsys, ["compile", str(p), "-o", str(tmp_path / "o")], "Einsum",
                   "einsum_node", "supported")
    one_line_error(capsys, ["run", str(p), "--input", str(tmp_path / "x.npy")], "x.npy")
    assert not (tmp_path / "o").exists()


def test_corrupt_module_is_rejected(work, tmp_path, capsys) -> None:
    import shutil

    d = tmp_path / "mod"
    shutil.copytree(work / "mod", d)
    (d / "manifest.json").write_text("{not json")
    one_line_error(capsys, ["run", str(d), "--input", str(work / "x.npy")], "manifest.json")
    shutil.copytree(work / "mod", tmp_path / "mod2")
    (tmp_path / "mod2" / "const.bin").unlink()
    one_line_error(capsys, ["run", str(tmp_path / "mod2"), "--input", str(work / "x.npy")],
                   "recompile")


def test_compile_options(work, tmp_path, capsys) -> None:
    out = tmp_path / "m2"
    assert main(["compile", str(work / "r.onnx"), "-o", str(out), "--float-layer",
                 "layer4.1.conv2", "--cpu-layer", "layer1.0.conv1", "--preset", "small",
                 "--buffering", "single"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["config"]["LOG_BLOCK"] == 2
    # single buffering: default schedules without virtual threads
    assert {k["knobs"]["oc_nthread"] * k["knobs"]["h_nthread"] for k in m["kernels"].values()
            if k["template"] == "conv2d"} == {1}
    assert {k["knob_source"] for k in m["kernels"].values()} == {"default"}
    assert m["partition"]["layer1.0.conv1"] == "cpu" and m["partition"]["layer1.0.conv2"] == "vta"
    ops = {n["name"]: n["op"] for n in m["graph"]["nodes"]}
    assert ops["layer4.1.conv2"] == "Conv" and ops["layer4.1.conv1"] == "QConv"
    one_line_error(capsys, ["compile", str(work / "r.onnx"), "-o", str(out), "--float-layer",
                            "nope"], "nope")
    one_line_error(capsys, ["compile", str(work / "r.onnx"), "-o", str(out), "--board",
                            "no-such-board"], "no-such-board")
    from vta.boards import get_board

    board = get_board("ultra96-v2")
    assert main(["compile", str(work / "r.onnx"), "-o", str(out), "--board", board.name,
                 "--no-vta"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["config"] == board.default_config.to_dict()
    # the options record: every compile option, the board and --no-vta's empty op list included
    assert m["options"] == {"float_layers": [], "cpu_layers": [], "vta_ops": [],
                            "keep_first_float": True, "board": board.name, "threads": True,
                            "host": "llvm", "per_channel": False, "calibration": "mse",
                            "pow2": False, "bias_correction": False, "fuse": True}
    # recompiling over an existing module replaces it atomically
    assert main(["compile", str(work / "r.onnx"), "-o", str(out), "--no-vta"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert set(m["partition"].values()) == {"cpu"} and m["kernels"] == {}


def test_compile_bias_correction(work, tmp_path, capsys) -> None:
    """--bias-correction changes int32 biases only (same layers, weights and scales); VTA on
    fsim and the CPU kernels agree bit for bit on the module."""
    from vta.compiler.graph.module import load_module

    out = tmp_path / "bc"
    assert main(["compile", str(work / "r.onnx"), "-o", str(out), "--calib",
                 str(work / "calib.npy"), "--bias-correction"]) == 0
    a, b = load_module(work / "mod"), load_module(out)
    assert a.partition == b.partition and a.scales == b.scales
    convs = [n for n in b.graph.nodes if n.op in ("QConv", "QDense")]
    assert all(np.array_equal(a.graph.params[n.inputs[1]], b.graph.params[n.inputs[1]])
               for n in convs)
    changed = sum(not np.array_equal(a.graph.params[n.inputs[2]], b.graph.params[n.inputs[2]])
                  for n in convs)
    assert changed >= len(convs) // 2, (changed, len(convs))
    for t in ("fsim", "cpu"):
        assert main(["run", str(out), "--input", str(work / "x.npy"), "--target", t,
                     "-o", str(tmp_path / f"y_{t}.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y_fsim.npy"),
                                  np.load(tmp_path / "y_cpu.npy"))


def test_host_llvm_kernels(work, capsys) -> None:
    """CPU layers built by the operator compiler's LLVM backend by default: IR in the module,
    and the run agrees with the numpy host kernels (float reassociation may differ in last
    bits; tests/graph/test_graph_host.py checks each kernel); --host numpy stores none."""
    out = work / "mod_llvm"
    assert main(["compile", str(work / "r.onnx"), "-o", str(out)]) == 0
    m = json.loads((out / "manifest.json").read_text())
    nodes = {h["node"] for h in m["host_kernels"]}
    assert {"conv1", "maxpool", "maxpool.out.quantize", "avgpool"} <= nodes
    assert all("define" in (out / h["llvm_ir"]).read_text() for h in m["host_kernels"])
    assert main(["run", str(out), "--input", str(work / "x.npy"), "-o",
                 str(work / "y_llvm.npy")]) == 0
    assert main(["run", str(out), "--input", str(work / "x.npy"), "--host", "numpy", "-o",
                 str(work / "y_np.npy")]) == 0
    a, b = np.load(work / "y_llvm.npy").ravel(), np.load(work / "y_np.npy").ravel()
    assert float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) > 0.999
    assert main(["compile", str(work / "r.onnx"), "-o", str(out), "--host", "numpy"]) == 0
    assert json.loads((out / "manifest.json").read_text())["host_kernels"] == []


@pytest.mark.slow
def test_resnet18_demo_runs(capsys) -> None:
    """examples/resnet18_demo.py end to end (at 32x32 to stay quick)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "resnet18_demo.py"
    spec = importlib.util.spec_from_file_location("resnet18_demo", path)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert demo.main(["--image-size", "32"]) == 0
    out = capsys.readouterr().out
    assert "top-1 match" in out and "cosine similarity" in out and "layer1.0.conv1" in out


def _long_name_model():
    """Two convs with names longer than 28 characters (and a Softmax, which has no int8
    kernel)."""
    from onnx import helper

    rng = np.random.default_rng(2)
    long1 = "backbone.stage_three.block_seven.expand_conv"
    long2 = "backbone.stage_three.block_seven.project_conv"
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], name="stem", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w1"], ["b"], name=long1, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["b"], ["c"], name="relu"),
             helper.make_node("Conv", ["c", "w2"], ["d"], name=long2),
             helper.make_node("Softmax", ["d"], ["y"], name="softmax", axis=1)]
    inits = {"w0": rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.3,
             "w1": rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1,
             "w2": rng.standard_normal((16, 32, 1, 1)).astype(np.float32) * 0.1}
    return onnx_model(nodes, {"x": [1, 3, 8, 8]}, {"y": None}, inits), long1, long2


def test_compile_summary_fallback_notes_and_full_names(tmp_path, capsys) -> None:
    import onnx

    model, long1, long2 = _long_name_model()
    onnx.save(model, tmp_path / "m.onnx")
    assert main(["compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "mod"),
                 "--cpu-layer", long2, "--report", "--calibration", "max"]) == 0
    out = capsys.readouterr().out
    # the summary: VTA share of MACs, then the CPU layers grouped by reason with full names
    macs = {"stem": 16 * 27 * 64, long1: 32 * 144 * 64, long2: 16 * 32 * 64}
    share = macs[long1] / sum(macs.values()) * 100
    assert f"1 layers on VTA: {share:.1f}% of" in out
    assert f"int8, named by --cpu-layer: 1 ({macs[long2] / sum(macs.values()) * 100:.1f}% " \
           f"of MACs): {long2}" in out
    assert "float, first convolution, under 15% of the MACs: 1" in out  # stem: 7.8% of them
    assert "float, no int8 kernel: 1" in out
    # the report's rows carry the full names that --cpu-layer / --float-layer take
    rows = {line.split()[0] for line in out.splitlines() if line.startswith("backbone")}
    assert rows == {long1, long2}
    m = json.loads((tmp_path / "mod" / "manifest.json").read_text())
    notes = [n for n in m["notes"] if n.startswith("fallback: ")]
    assert {n.split()[1] for n in notes} == {"stem", long2, "softmax"}
    assert main(["run", str(tmp_path / "mod"), "--input", _save_x(tmp_path, [1, 3, 8, 8]),
                 "--report"]) == 0
    rep = capsys.readouterr().out
    assert any(line.startswith(long2 + " ") for line in rep.splitlines())


def _save_x(d, shape) -> str:
    p = d / "x.npy"
    np.save(p, np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    return str(p)


def _latency_figures(text: str) -> tuple[int, float, float, float]:
    import re

    m = re.search(r"VTA part: (\d+) cycles = ([\d.]+) ms at ([\d.]+) MHz .*?, ([\d.]+) frames/s",
                  text)
    assert m, text
    return int(m[1]), float(m[2]), float(m[3]), float(m[4])


def test_latency_at_the_boards_clock(work, tmp_path, capsys) -> None:
    """ms = cycles / clock and frames/s = 1000 / ms, at the clock of the board's registry
    entry; vta run on the perf target uses its own cycle counts, within 1% of the cycles the
    module recorded at compile time."""
    from vta.boards import get_board

    out = tmp_path / "mb"
    assert main(["compile", str(work / "r.onnx"), "-o", str(out), "--board", "zcu104",
                 "--report"]) == 0
    cyc, ms, mhz, fps = _latency_figures(capsys.readouterr().out)
    assert mhz == get_board("zcu104").clock_mhz and cyc > 0
    assert ms == pytest.approx(cyc / (mhz * 1e3), abs=1e-3)
    assert fps == pytest.approx(1e3 / ms, rel=1e-3)
    # vta run: the module's board by default, another with --board
    assert main(["run", str(out), "--input", str(work / "x.npy"), "--target", "perf",
                 "--report"]) == 0
    rep = capsys.readouterr().out
    assert "cycles counted by perf" in rep
    # the perf target counts the program at its place in the arena; the module records the
    # estimate made at compile time on scratch offsets: within 1%
    c_run, ms_run, mhz_run, _ = _latency_figures(rep)
    assert mhz_run == mhz and abs(c_run - cyc) <= 0.01 * cyc
    assert ms_run == pytest.approx(c_run / (mhz * 1e3), abs=1e-3)
    rj = tmp_path / "report.json"
    assert main(["run", str(out), "--input", str(work / "x.npy"), "--report", "--board",
                 "pynq-z1", "--report-json", str(rj)]) == 0
    text = capsys.readouterr().out
    c2, ms2, mhz2, _ = _latency_figures(text)
    assert (c2, mhz2) == (cyc, get_board("pynq-z1").clock_mhz)
    assert ms2 == pytest.approx(c2 / (mhz2 * 1e3), abs=1e-3)
    # the host part: the CPU layers' measured time on this machine, labelled so, and the sum
    import json
    import re

    cpu = [r for r in json.loads(rj.read_text())["layers"] if r["where"] == "cpu"]
    m = re.search(r"host part: ([\d.]+) ms for (\d+) CPU layers, measured on this machine's "
                  r"CPU \(not the board's ARM cores\); VTA part \+ host part = ([\d.]+) ms",
                  text)
    assert m, text
    host_ms = sum(r["seconds"] for r in cpu) * 1e3
    assert int(m[2]) == len(cpu) > 0 and float(m[1]) == pytest.approx(host_ms, abs=1e-3)
    assert float(m[3]) == pytest.approx(ms2 + host_ms, abs=2e-3)
    one_line_error(capsys, ["run", str(out), "--input", str(work / "x.npy"), "--report",
                            "--board", "no-such-board"], "no-such-board")


def test_latency_without_a_board_is_at_the_default_boards_clock(work, tmp_path,
                                                                  capsys) -> None:
    """A module compiled without --board: both reports give the cycles and the ms at the
    default board's clock, naming that board; the run on fsim quotes the recorded cycles."""
    from vta.boards import DEFAULT_BOARD, get_board

    out = tmp_path / "nb"
    assert main(["compile", str(work / "r.onnx"), "-o", str(out), "--report"]) == 0
    text = capsys.readouterr().out
    cyc, ms, mhz, _ = _latency_figures(text)
    assert f"({DEFAULT_BOARD}, the default board" in text and cyc > 0
    assert mhz == get_board(DEFAULT_BOARD).clock_mhz
    assert ms == pytest.approx(cyc / (mhz * 1e3), abs=1e-3)
    assert main(["run", str(out), "--input", str(work / "x.npy"), "--target", "fsim",
                 "--report"]) == 0
    rep = capsys.readouterr().out
    assert _latency_figures(rep)[:3] == (cyc, ms, mhz) and "the default board" in rep


def test_a_numbered_output_is_named_by_its_layer(tmp_path, capsys) -> None:
    """TorchScript numbers anonymous outputs ("19"): the summary names the output's index and
    the layer that makes it instead of a bare number."""
    import onnx

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], name="/conv/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["19"], name="/relu/Relu")]
    model = onnx_model(nodes, {"x": [1, 16, 8, 8]}, {"19": None},
                       {"w": rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1})
    onnx.save(model, tmp_path / "m.onnx")
    assert main(["compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "mod")]) == 0
    out = capsys.readouterr().out
    assert "calibration input (output 0 of /conv/Conv (" in out and "tensor 19)" in out
    assert "input (19)" not in out


def test_compile_elementwise_on_the_cpu(work, capsys) -> None:
    """``--elementwise cpu`` keeps the residual adds on the CPU (int8 host kernels), with the
    reason in the summary and the notes; the output bits are the same."""
    d = work
    capsys.readouterr()
    assert main(["compile", str(d / "r.onnx"), "-o", str(d / "mod_cpu_ew"), "--calib",
                 str(d / "calib.npy"), "--elementwise", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "int8, element-wise ops on the CPU (--elementwise cpu): 8" in out
    assert "element-wise on VTA's ALU" not in out
    m = json.loads((d / "mod_cpu_ew" / "manifest.json").read_text())
    assert sum(v == "vta" for v in m["partition"].values()) == 20
    assert m["partition"]["layer1.0.add"] == "cpu"
    assert main(["run", str(d / "mod_cpu_ew"), "--input", str(d / "x.npy"), "--target",
                 "fsim", "-o", str(d / "y_cpu_ew.npy"), "--host", "numpy"]) == 0
    assert main(["run", str(d / "mod"), "--input", str(d / "x.npy"), "--target", "fsim",
                 "-o", str(d / "y_vta_ew.npy"), "--host", "numpy"]) == 0
    np.testing.assert_array_equal(np.load(d / "y_cpu_ew.npy"), np.load(d / "y_vta_ew.npy"))
