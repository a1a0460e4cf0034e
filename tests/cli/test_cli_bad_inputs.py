"""Every `vta` subcommand rejects a bad argument or output location before any work.

Each case runs the real entry point (``vta.cli.main.main``) in-process and asserts what a user
is promised for bad input: exit status 2, exactly one line on stderr that names the problem, no
traceback, and nothing written (the working directory is the same, file for file, afterwards).
The cases replay the inputs of issue #22 and more of each kind. Validation comes before work,
so every case is fast; the long commands (synth, build) are only asked for things that must
fail before their tools start.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from vta.cli.main import main

pytestmark = pytest.mark.unit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ULX3S = ["build", "--board", "ulx3s-85f", "--preset", "small", "-q"]
SYNTH = ["synth", "--board", "pynq-z1", "--preset", "small", "-q"]
TUNE = ["tune", "--workload", "conv2d:H=14,W=14,CI=64,CO=64,K=3,S=1,P=1", "--trials", "2",
        "--batch", "2"]
EXPLORE = ["explore", "--board", "pynq-z1", "--model", "{t}/tiny.onnx"]


def tiny_onnx(path: Path) -> None:
    """conv1 (3->16) -> relu1 -> conv2 (16->16) on a 1x3x16x16 input: compiles in a blink."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((16, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
    g = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 16])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """Inputs of every kind: assembler text, a program, a DRAM image, a config, a model, a
    compiled module (and a copy with a truncated params.npz), arrays with NaN and inf, a
    tuning log, a plain file and a non-empty directory where outputs do not belong."""
    t = tmp_path_factory.mktemp("bad")
    shutil.copyfile(EXAMPLES / "matmul.s", t / "m.s")
    assert main(["asm", str(t / "m.s"), "-o", str(t / "m.bin")]) == 0
    (t / "d.bin").write_bytes(bytes(1 << 16))
    (t / "d8.bin").write_bytes(bytes(8))  # too small for what m.bin reads
    from vta.isa import Config, FinishInsn, GemmInsn, encode_program

    huge = GemmInsn(uop_bgn=0, uop_end=1, iter_out=16383, iter_in=16383)  # 2^28 iterations
    (t / "huge.bin").write_bytes(encode_program([huge, FinishInsn()], Config()))
    assert main(["config", "write", "--preset", "small", "-o", str(t / "c.json")]) == 0
    bus128 = json.loads((t / "c.json").read_text()) | {"BUS_WIDTH": 128}
    (t / "c128.json").write_text(json.dumps(bus128))  # as `vta explore` writes a 128-bit point
    tiny_onnx(t / "tiny.onnx")
    assert main(["compile", str(t / "tiny.onnx"), "-o", str(t / "mod")]) == 0
    shutil.copytree(t / "mod", t / "trunc")
    shutil.copytree(t / "mod", t / "trunc-const")
    const = (t / "trunc-const" / "const.bin").read_bytes()
    (t / "trunc-const" / "const.bin").write_bytes(const[: len(const) // 2])
    params = (t / "trunc" / "params.npz").read_bytes()
    (t / "trunc" / "params.npz").write_bytes(params[: len(params) // 2])
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(t / "x.npy", x)
    x[0, 1, 2, 3] = np.nan
    np.save(t / "nan.npy", x)
    x[0, 1, 2, 3] = np.inf
    np.save(t / "inf.npy", x)
    np.savez(t / "inf.npz", x=x)
    clean = np.load(t / "x.npy")
    np.savez(t / "misnamed.npz", image=clean)
    np.savez(t / "extra.npz", x=clean, mask=np.zeros(3, np.float32))
    (t / "t.jsonl").write_text("")
    (t / "afile").write_text("not a directory\n")
    (t / "adir").mkdir()
    (t / "adir" / "keep.txt").write_text("someone's file\n")
    return t


def tree(d: Path) -> dict[str, bytes]:
    """Every file under ``d`` (hidden ones too) with its contents."""
    out = {}
    for root, dirs, files in os.walk(d):
        for name in dirs:
            out[os.path.relpath(os.path.join(root, name), d) + "/"] = b""
        for name in files:
            p = os.path.join(root, name)
            out[os.path.relpath(p, d)] = Path(p).read_bytes()
    return out


#: (argv with {t} for the work directory, text the error line must contain)
CASES: dict[str, tuple[list[str], str]] = {
    # --- vta asm / disasm / config write: output locations
    "asm-onto-its-input": (["asm", "{t}/m.s", "-o", "{t}/m.s"], "is also the input"),
    "asm-output-is-dir": (["asm", "{t}/m.s", "-o", "{t}/adir"], "is a directory"),
    "asm-missing-dir": (["asm", "{t}/m.s", "-o", "{t}/nodir/m.bin"], "does not exist"),
    "asm-parent-is-file": (["asm", "{t}/m.s", "-o", "{t}/afile/m.bin"], "not a directory"),
    "asm-unwritable-dir": (["asm", "{t}/m.s", "-o", "/proc/vta-m.bin"], "not writable"),
    "asm-empty-name": (["asm", "{t}/m.s", "-o", ""], "empty file name"),
    "disasm-onto-its-input": (["disasm", "{t}/m.bin", "-o", "{t}/m.bin"], "is also the input"),
    "disasm-output-is-dir": (["disasm", "{t}/m.bin", "-o", "{t}/adir"], "is a directory"),
    "config-write-onto-its-input": (["config", "write", "--config", "{t}/c.json", "-o",
                                     "{t}/c.json"], "is also the input"),
    "config-write-missing-dir": (["config", "write", "-o", "{t}/nodir/c.json"],
                                 "does not exist"),
    # --- vta sim: every output checked before the run, numbers bounded
    "sim-stats-missing-dir": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                               "--stats", "/nonexistent/s.json"], "/nonexistent"),
    "sim-trace-is-dir": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                          "--trace", "{t}/adir"], "trace file"),
    "sim-onto-dram": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/d.bin"],
                      "is also the input"),
    "sim-onto-program": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/m.bin"],
                         "is also the input"),
    "sim-stats-is-output": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                             "--stats", "{t}/o.bin"], "different names"),
    "sim-vcd-missing-dir": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                             "--backend", "rtl", "--vcd", "{t}/nodir/w.vcd"], "waveform file"),
    "sim-vcd-on-fsim": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                         "--vcd", "{t}/w.vcd"], "does not apply"),
    "sim-max-cycles-negative": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                                 "--backend", "rtl", "--max-cycles", "-5"], "--max-cycles"),
    "sim-max-cycles-zero": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                             "--backend", "rtl", "--max-cycles", "0"], "at least 1"),
    "sim-seed-negative": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                           "--seed", "-1"], "--seed"),
    "sim-opt-bypassing-vcd": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                               "--backend", "rtl", "--opt", "vcd=/nonexistent/w.vcd"],
                              "use --vcd"),
    "sim-opt-bypassing-max-cycles": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o",
                                      "{t}/o.bin", "--backend", "rtl", "--opt",
                                      "max_cycles=-5"], "use --max-cycles"),
    "sim-opt-bus-width": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                           "--backend", "tsim", "--opt", "bus_width=128"],
                          "the bus width is the configuration's; set \"BUS_WIDTH\": 128"),
    "sim-fsim-huge-gemm": (["sim", "{t}/huge.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin"],
                           "iter_out=16383 x iter_in=16383"),
    "sim-tsim-huge-gemm": (["sim", "{t}/huge.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                            "--backend", "tsim"], "beyond tsim's bound"),
    "sim-rtl-huge-gemm": (["sim", "{t}/huge.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                           "--backend", "rtl"], "beyond rtl's bound"),
    "sim-perf-with-output": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "--backend", "perf",
                              "-o", "{t}/o.bin"], "writes no OUT.bin"),
    "sim-tsim-vcd-missing-dir": (["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{t}/o.bin",
                                  "--backend", "tsim", "--vcd", "{t}/nodir/w.vcd"],
                                 "waveform file"),
    **{f"sim-{b}-past-the-image": (["sim", "{t}/m.bin", "--dram", "{t}/d8.bin", "-o",
                                    "{t}/o.bin", "--backend", b], "beyond the 8-byte DRAM image")
       for b in ("fsim", "rtl", "tsim")},
    "sim-perf-past-the-image": (["sim", "{t}/m.bin", "--dram", "{t}/d8.bin", "--backend",
                                 "perf"], "beyond the 8-byte DRAM image"),
    # --- vta verilog
    "verilog-output-is-file": (["verilog", "--preset", "small", "-o", "{t}/afile"],
                               "is a file"),
    "verilog-under-a-file": (["verilog", "--preset", "small", "-o", "{t}/afile/sub"],
                             "is a file, not a directory"),
    "verilog-board-output-is-file": (["verilog", "--board", "pynq-z1", "-o", "{t}/afile"],
                                     "is a file"),
    "verilog-bad-name": (["verilog", "--preset", "small", "--name", "no good", "-o",
                          "{t}/v"], "not a valid identifier"),
    "config-write-bus-width": (["config", "write", "--bus-width", "96", "-o", "{t}/c.json"],
                               "--bus-width"),
    "verilog-board-config-bus-not-the-boards": (["verilog", "--board", "pynq-z1", "--config",
                                                 "{t}/c128.json", "-o", "{t}/v"],
                                                "c128.json has a 128-bit bus (BUS_WIDTH) but "
                                                "board pynq-z1 has a 64-bit memory port"),
    # --- vta synth: before yosys starts
    "synth-workdir-is-file": ([*SYNTH, "--workdir", "{t}/afile"], "is a file"),
    "synth-json-missing-dir": ([*SYNTH, "--json", "{t}/nodir/r.json"], "does not exist"),
    "synth-json-is-dir": ([*SYNTH, "--json", "{t}/adir"], "is a directory"),
    "synth-json-is-workdir": ([*SYNTH, "--json", "{t}/w", "--workdir", "{t}/w"],
                              "different names"),
    "synth-unknown-board": (["synth", "--board", "nosuch", "-q"], "nosuch"),
    "synth-config-bus-not-the-boards": (["synth", "--board", "pynq-z1", "--config",
                                         "{t}/c128.json", "-q"],
                                        "pynq-z1 has a 64-bit memory port"),
    # --- vta build: before yosys starts
    "build-clock-negative": ([*ULX3S, "--clock", "-5", "-o", "{t}/b"], "--clock"),
    "build-clock-zero": ([*ULX3S, "--clock", "0", "-o", "{t}/b"], "above 0"),
    "build-clock-nan": ([*ULX3S, "--clock", "nan", "-o", "{t}/b"], "finite"),
    "build-clock-inf": ([*ULX3S, "--clock", "inf", "-o", "{t}/b"], "finite"),
    "build-clock-too-high": ([*ULX3S, "--clock", "5000", "-o", "{t}/b"], "at most 1000"),
    "build-ram-too-big": ([*ULX3S, "--ram-kib", "1048576", "-o", "{t}/b"], "1 to 256"),
    "build-ram-not-power-of-two": ([*ULX3S, "--ram-kib", "48", "-o", "{t}/b"], "power of two"),
    "build-ram-zero": ([*ULX3S, "--ram-kib", "0", "-o", "{t}/b"], "power of two"),
    "build-output-is-file": ([*ULX3S, "-o", "{t}/afile"], "is a file"),
    "build-output-under-file": ([*ULX3S, "-o", "{t}/afile/b"], "is a file"),
    "build-json-missing-dir": ([*ULX3S, "-o", "{t}/b", "--json", "{t}/nodir/r.json"],
                               "does not exist"),
    "build-json-is-dir": ([*ULX3S, "-o", "{t}/b", "--json", "{t}/adir"], "is a directory"),
    "build-json-is-output": ([*ULX3S, "-o", "{t}/b", "--json", "{t}/b"], "different names"),
    "build-seed-negative": ([*ULX3S, "--seed", "-1", "-o", "{t}/b"], "--seed"),
    "build-not-open-flow": (["build", "--board", "pynq-z1", "-o", "{t}/b"], "vta verilog"),
    "build-config-bus-not-the-boards": (["build", "--board", "ulx3s-85f", "--config",
                                         "{t}/c128.json", "-q", "-o", "{t}/b"],
                                        "c128.json has a 128-bit bus (BUS_WIDTH) but "
                                        "board ulx3s-85f has a 64-bit memory port"),
    # --- vta zoo
    "zoo-num-classes-negative": (["zoo", "resnet18", "-o", "{t}/z.onnx", "--num-classes",
                                  "-1"], "--num-classes"),
    "zoo-num-classes-zero": (["zoo", "resnet18", "-o", "{t}/z.onnx", "--num-classes", "0"],
                             "--num-classes"),
    "zoo-num-classes-huge": (["zoo", "resnet18", "-o", "{t}/z.onnx", "--num-classes",
                              "10000000"], "--num-classes"),
    "zoo-seed-negative": (["zoo", "resnet18", "-o", "{t}/z.onnx", "--seed", "-1"], "--seed"),
    "zoo-image-size-huge": (["zoo", "resnet18", "-o", "{t}/z.onnx", "--image-size", "100000"],
                            "--image-size"),
    "zoo-image-size-small": (["zoo", "mobilenet_v1", "-o", "{t}/z.onnx", "--image-size",
                              "16"], "32..1024"),
    "zoo-image-size-text": (["zoo", "resnet18", "-o", "{t}/z.onnx", "--image-size", "big"],
                            "an integer"),
    "zoo-output-is-dir": (["zoo", "dcgan", "-o", "{t}/adir"], "is a directory"),
    "zoo-missing-dir": (["zoo", "dcgan", "-o", "{t}/nodir/g.onnx"], "does not exist"),
    "zoo-unknown-model": (["zoo", "vgg", "-o", "{t}/v.onnx"], "vgg"),
    "zoo-dcgan-classes": (["zoo", "dcgan", "-o", "{t}/g.onnx", "--num-classes", "10"],
                          "takes no"),
    # --- vta compile
    "compile-onto-a-file": (["compile", "{t}/tiny.onnx", "-o", "{t}/afile"], "is a file"),
    "compile-onto-its-model": (["compile", "{t}/tiny.onnx", "-o", "{t}/tiny.onnx"],
                               "is a file"),
    "compile-read-only": (["compile", "{t}/tiny.onnx", "-o", "/proc/vta-mod"], "not writable"),
    "compile-onto-other-dir": (["compile", "{t}/tiny.onnx", "-o", "{t}/adir"],
                               "neither a compiled module nor empty"),
    "compile-unknown-cpu-layer": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--cpu-layer",
                                   "nosuch"], "--cpu-layer nosuch"),
    "compile-unknown-float-layer": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2",
                                     "--float-layer", "nosuch"], "--float-layer nosuch"),
    "compile-nan-calibration": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--calib",
                                 "{t}/nan.npy"], "NaN or infinite"),
    "compile-inf-calibration": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--calib",
                                 "{t}/inf.npy"], "inf.npy"),
    "compile-missing-model": (["compile", "{t}/none.onnx", "-o", "{t}/m2"], "does not exist"),
    "compile-missing-tuning-log": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--tuning-log",
                                    "{t}/none.jsonl"], "tuning log"),
    "compile-input-shape-not-int": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2",
                                     "--input-shape", "x=1,3,a,16"], "invalid input shape"),
    "compile-input-shape-twice": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--input-shape",
                                   "1,3,16,16", "--input-shape", "1,3,16,16"], "given twice"),
    "compile-input-shape-unknown-input": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2",
                                           "--input-shape", "image=1,3,16,16"],
                                          "no input named 'image' (its inputs: x)"),
    "compile-input-shape-disagrees": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2",
                                       "--input-shape", "x=1,3,32,32"],
                                      "dimension 2 is 16 in the model, not 32"),
    # --- vta run
    "run-nan-input": (["run", "{t}/mod", "--input", "{t}/nan.npy"], "NaN or infinite"),
    "run-npz-inf-input": (["run", "{t}/mod", "--input", "{t}/inf.npz"],
                          "inf.npz array 'x' holds 1 NaN or infinite"),
    "run-npz-misnamed": (["run", "{t}/mod", "--input", "{t}/misnamed.npz"],
                         "has no array 'x' (the model's inputs: x)"),
    "run-npz-extra-array": (["run", "{t}/mod", "--input", "{t}/extra.npz"],
                            "array 'mask' that is no input of the model"),
    "compile-npz-misnamed-calibration": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--calib",
                                          "{t}/misnamed.npz"], "has no array 'x'"),
    "run-inf-input-onnx": (["run", "{t}/tiny.onnx", "--target", "cpu", "--input",
                            "{t}/inf.npy"], "NaN or infinite"),
    "run-truncated-params": (["run", "{t}/trunc", "--input", "{t}/x.npy"],
                             "file params.npz is damaged"),
    "run-truncated-const": (["run", "{t}/trunc-const", "--input", "{t}/x.npy", "-o",
                             "{t}/y.npy"], "file const.bin is damaged"),
    "run-onto-its-input": (["run", "{t}/mod", "--input", "{t}/x.npy", "-o", "{t}/x.npy"],
                           "is also the input"),
    "run-output-is-dir": (["run", "{t}/mod", "--input", "{t}/x.npy", "-o", "{t}/adir"],
                          "is a directory"),
    "run-missing-dir": (["run", "{t}/mod", "--input", "{t}/x.npy", "-o", "{t}/nodir/y.npy"],
                        "does not exist"),
    # --- vta tune
    "tune-timeout-negative": ([*TUNE, "--timeout", "-1"], "--timeout"),
    "tune-timeout-zero": ([*TUNE, "--timeout", "0"], "above 0"),
    "tune-resume-without-log": ([*TUNE, "--resume"], "--log"),
    "tune-scheduler-no-port": ([*TUNE, "--scheduler", "notanaddress"], "HOST:PORT"),
    "tune-scheduler-bad-port": ([*TUNE, "--scheduler", "tcp://host:99999"], "HOST:PORT"),
    "tune-input-shape-without-model": ([*TUNE, "--input-shape", "1,3,8,8"], "give the model"),
    "tune-trials-zero": ([*TUNE, "--trials", "0"], "--trials"),
    "tune-batch-zero": ([*TUNE, "--batch", "0"], "--batch"),
    "tune-jobs-zero": ([*TUNE, "--jobs", "0"], "--jobs"),
    "tune-early-stopping-zero": ([*TUNE, "--early-stopping", "0"], "--early-stopping"),
    "tune-seed-negative": ([*TUNE, "--seed", "-2"], "--seed"),
    "tune-measure-unknown": ([*TUNE, "--measure", "gpu"], "--measure"),
    "tune-log-is-dir": ([*TUNE, "--log", "{t}/adir"], "is a directory"),
    "tune-log-missing-dir": ([*TUNE, "--log", "{t}/nodir/t.jsonl"], "does not exist"),
    "tune-output-without-plot": ([*TUNE, "-o", "{t}/p.png"], "--plot"),
    "tune-plot-onto-its-log": (["tune", "--plot", "{t}/t.jsonl", "-o", "{t}/t.jsonl"],
                               "is also the input"),
    "tune-plot-output-is-dir": (["tune", "--plot", "{t}/t.jsonl", "-o", "{t}/adir"],
                                "is a directory"),
    # --- vta explore
    "explore-input-shape-of-zoo-model": (["explore", "--board", "pynq-z1", "--model",
                                          "resnet18", "--input-shape", "1,3,64,64", "-o",
                                          "{t}/e"], "--image-size"),
    "explore-range-out-of-bounds": ([*EXPLORE, "--range", "LOG_BLOCK=99", "-o", "{t}/e"],
                                    "LOG_BLOCK=99"),
    "explore-range-bus-width": ([*EXPLORE, "--range", "bus_width=32", "-o", "{t}/e"],
                                "bus_width 32"),
    "explore-range-not-int": ([*EXPLORE, "--range", "LOG_BATCH=a", "-o", "{t}/e"],
                              "integers"),
    "explore-timeout-negative": ([*EXPLORE, "--timeout", "-1", "-o", "{t}/e"], "--timeout"),
    "explore-budget-zero": ([*EXPLORE, "--budget", "0", "-o", "{t}/e"], "--budget"),
    "explore-jobs-zero": ([*EXPLORE, "--jobs", "0", "-o", "{t}/e"], "--jobs"),
    "explore-scheduler": ([*EXPLORE, "--scheduler", "notanaddress", "-o", "{t}/e"],
                          "HOST:PORT"),
    "explore-image-size": ([*EXPLORE, "--image-size", "100000", "-o", "{t}/e"],
                           "--image-size"),
    "explore-finalists-negative": ([*EXPLORE, "--synth-finalists", "-1", "-o", "{t}/e"],
                                   "--synth-finalists"),
    "explore-missing-model": (["explore", "--board", "pynq-z1", "--model", "{t}/none.onnx",
                               "-o", "{t}/e"], "does not exist"),
    "explore-unknown-model": (["explore", "--board", "pynq-z1", "--model", "resnet99", "-o",
                               "{t}/e"], "unknown model"),
    "explore-unknown-board": ([*EXPLORE, "--board", "nosuch", "-o", "{t}/e"], "nosuch"),
    "explore-output-is-file": ([*EXPLORE, "-o", "{t}/afile"], "is a file"),
    "explore-onto-other-dir": ([*EXPLORE, "-o", "{t}/adir"],
                               "neither an exploration output nor empty"),
}


@pytest.fixture
def no_long_work(monkeypatch) -> None:
    """Synthesis, the open flow and the explorer's network loading fail the test at once if a
    case gets that far: its input must be rejected before."""
    from vta.boards import openflow, synth
    from vta.tune.autovta import network

    def started(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the long work started: the bad input was not caught before it")

    monkeypatch.setattr(openflow, "_build_in", started)
    monkeypatch.setattr(synth, "synth_core", started)
    monkeypatch.setattr(network, "load_network", started)


def assert_one_line_error(rc: int, err: str, argv: list[str], needle: str) -> None:
    """Exit status 2 and one line ``vta CMD: error: ...`` on stderr holding ``needle``."""
    assert rc == 2, (rc, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"vta {argv[0]}"), err
    assert "error" in lines[0] and needle in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_and_writes_nothing(case: str, work: Path, capsys,
                                                  no_long_work: None) -> None:
    argv, needle = CASES[case]
    argv = [a.replace("{t}", str(work)) for a in argv]
    before = tree(work)
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    assert_one_line_error(rc, err, argv, needle)
    assert tree(work) == before  # no output, no temporary file, no input changed


def test_readme_lines_make_their_output_directories(work: Path, tmp_path: Path,
                                                    capsys) -> None:
    """`vta verilog --board B -o build/B` (the README's line) and `vta compile -o a/b` make
    the missing parents; the files land there."""
    out = tmp_path / "build" / "ulx3s"
    assert main(["verilog", "--board", "ulx3s-85f", "--preset", "small", "-o", str(out)]) == 0
    assert (out / "vta_core.v").read_text().lstrip().startswith(("/*", "module", "//", "("))
    mod = tmp_path / "a" / "b" / "mod"
    assert main(["compile", str(work / "tiny.onnx"), "-o", str(mod)]) == 0
    assert (mod / "manifest.json").exists()
    leftovers = [p for p in tmp_path.rglob(".*")]
    assert leftovers == []


def test_zoo_summary_names_the_shapes_written(tmp_path: Path, capsys) -> None:
    import onnx

    out = tmp_path / "r.onnx"
    assert main(["zoo", "resnet18", "--image-size", "32", "--num-classes", "10", "-o",
                 str(out)]) == 0
    line = capsys.readouterr().out
    m = onnx.load(str(out))
    dims = [[d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in (m.graph.input[0], m.graph.output[0])]
    assert dims == [[1, 3, 32, 32], [1, 10]]
    assert "1x3x32x32" in line and "1x10" in line and "224" not in line and "1000" not in line


def test_sim_writes_all_outputs_or_none(work: Path, tmp_path: Path, monkeypatch,
                                        capsys) -> None:
    """An output that turns out unwritable after the run (its directory vanished meanwhile)
    leaves none of the others: they are staged and renamed together at the end."""
    from vta.cli import cmd_sim
    from vta.sim.fsim import run as fsim_run

    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()

    def backend(program, dram, cfg, **opts):  # noqa: ANN001, ANN202 - fsim, then the rug pull
        result = fsim_run(program, dram, cfg, **opts)
        stats_dir.rmdir()
        return result

    monkeypatch.setattr(cmd_sim, "load_backend", lambda name: backend)
    argv = ["sim", str(work / "m.bin"), "--dram", str(work / "d.bin"), "-o",
            str(tmp_path / "o.bin"), "--trace", str(tmp_path / "t.json"), "--stats",
            str(stats_dir / "s.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "statistics file" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # and with the directory there, all three are written, the image equal to fsim's own
    stats_dir.mkdir()
    monkeypatch.setattr(cmd_sim, "load_backend", lambda name: fsim_run)
    assert main(argv) == 0
    from vta.isa import Config
    from vta.isa.image import read_dram, read_program

    cfg = Config()
    ref = fsim_run(read_program(work / "m.bin", cfg), read_dram(work / "d.bin"), cfg)
    assert (tmp_path / "o.bin").read_bytes() == ref.dram.tobytes()
    assert (stats_dir / "s.json").exists() and (tmp_path / "t.json").exists()


@pytest.mark.parametrize("cmd", ["synth", "build", "verilog"])
def test_board_commands_build_the_config_files_bus(cmd: str, work: Path, tmp_path: Path,
                                                   monkeypatch) -> None:
    """A config file whose BUS_WIDTH is the board's goes to the hardware as read, the same way
    for every command that builds for a board (its bus agrees); the board default otherwise."""
    from vta.boards import get_board, openflow, project, synth
    from vta.isa import Config

    seen: list[Config] = []

    def capture(board, cfg, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append(cfg)
        raise SystemExit(0)  # stop before the tools: only the configuration is looked at

    monkeypatch.setattr(synth, "synth_core", capture)
    monkeypatch.setattr(openflow, "build_bitstream", capture)
    monkeypatch.setattr(project, "write_project", capture)
    board = {"synth": "ultra96-v2", "build": "ulx3s-85f", "verilog": "ultra96-v2"}[cmd]
    bus = get_board(board).bus_width
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps(json.loads((work / "c.json").read_text())
                                   | {"BUS_WIDTH": bus}))
    argv = [cmd, "--board", board, "--config", str(cfg_file), "-o", str(tmp_path / "o")]
    argv = [a for a in argv if cmd != "synth" or a not in ("-o", str(tmp_path / "o"))]
    with pytest.raises(SystemExit):
        main(argv)
    assert seen == [Config.from_json(cfg_file)] and seen[0].bus_width == bus
    with pytest.raises(SystemExit):
        main([a for a in argv if a not in ("--config", str(cfg_file))])
    assert seen[1] == get_board(board).default_config
