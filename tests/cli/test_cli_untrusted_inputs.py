"""Inputs are data: bounded, validated, and never a silent wrong answer (issue #35, items 4-5).

Each family replays the issue's cases with the promise of tests/cli/test_cli_bad_inputs.py
(its helpers): exit status 2, one line on stderr naming the problem, no traceback, nothing
written. Families: special files (FIFOs, devices, empty and oversized files) as any input; JSON
nested deeper than 64 levels; tuning-log records with missing or mistyped fields or unknown
knobs; models onnxruntime rejects (group and channels, pads, dilations, strides), non-finite
weights, tensors too large to allocate; all-zero calibration data. Then the user cache: a
damaged host-kernel object or knob-cache entry is rebuilt, not trusted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from vta.cli.main import main
from vta.compiler.graph.manifest import FORMAT, VERSION
from vta.isa.digest import write_digest

from .test_cli_bad_inputs import assert_one_line_error, tiny_onnx, tree, work  # noqa: F401 - work is a fixture

pytestmark = pytest.mark.unit


def conv_model(path: Path, *, w2: np.ndarray | None = None, conv2: dict | None = None,
               xshape: tuple[int, ...] = (1, 3, 16, 16), w1: np.ndarray | None = None,
               bn: bool = False, external: tuple[int, ...] | None = None) -> None:
    """tiny_onnx's conv1 -> (batch-norm) -> relu -> conv2 with its parts replaced:
    ``w2``/``w1`` the weights, ``conv2`` conv2's attributes, ``xshape`` the input's shape,
    ``bn`` a batch-norm of scale 10 and variance 1e-3 after conv1, ``external`` conv2's
    weight stored in a sparse file beside the model claiming these dims."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((16, 3, 3, 3)).astype(np.float32) if w1 is None else w1
    w2 = rng.standard_normal((16, 16, 3, 3)).astype(np.float32) if w2 is None else w2
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1])]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]
    act = "c1"
    if bn:
        stats = {"s": np.full(16, 10.0), "b": np.zeros(16), "mu": np.zeros(16),
                 "var": np.full(16, 1e-3)}
        inits += [numpy_helper.from_array(v.astype(np.float32), k) for k, v in stats.items()]
        nodes.append(helper.make_node("BatchNormalization", ["c1", *stats], ["c1b"],
                                      name="bn1"))
        act = "c1b"
    nodes += [helper.make_node("Relu", [act], ["r1"], name="relu1"),
              helper.make_node("Conv", ["r1", "w2"], ["y"], name="conv2",
                               **({"pads": [1, 1, 1, 1]} | (conv2 or {})))]
    if external is not None:
        n = int(np.prod(external)) * 4
        with open(path.parent / "w2.bin", "wb") as f:
            f.truncate(n)  # sparse: no disk space taken
        t = onnx.TensorProto(name="w2", data_type=TensorProto.FLOAT, dims=list(external),
                             data_location=TensorProto.EXTERNAL)
        for k, v in {"location": "w2.bin", "offset": "0", "length": str(n)}.items():
            t.external_data.add(key=k, value=v)
        inits[1] = t
    g = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xshape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())


def op_model(path: Path, op: str, consts: dict[str, np.ndarray], **attrs) -> None:
    """x [1, 3, 16, 16] -> ``op`` (x and the constants ``consts`` as its inputs) -> Add x -> y:
    a constant-only ``op`` (no x among its inputs) is folded at import."""
    from onnx import TensorProto, helper, numpy_helper

    names = list(consts)
    ins = names if attrs.pop("folded", False) else ["x", *names]
    nodes = [helper.make_node(op, ins, ["t"], name=op.lower(), **attrs),
             helper.make_node("Add", ["x", "t"], ["y"], name="add")]
    g = helper.make_graph(
        nodes, "one", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())


#: model file name -> op_model's arguments: ops whose output size comes from values
OP_MODELS = {
    "pad-huge": ("Pad", {"pads": np.array([0, 0, 100000, 100000] * 2, np.int64)}),
    "resize-huge": ("Resize", {"roi": np.zeros(0, np.float32),
                               "scales": np.array([1, 1, 10000, 10000], np.float32)}),
    "constant-of-shape-huge": ("ConstantOfShape", {"shape": np.array([3, 30000, 30000],
                                                                     np.int64)},
                               {"folded": True}),
    "expand-huge": ("Expand", {"one": np.ones(1, np.float32),
                               "shape": np.array([100000, 100000], np.int64)},
                    {"folded": True}),
}


def _w2_with(value: float) -> np.ndarray:
    w = np.random.default_rng(1).standard_normal((16, 16, 3, 3)).astype(np.float32)
    w[3, 4, 1, 1] = value
    return w


#: model file name -> conv_model's arguments
MODELS = {
    "group3": {"conv2": {"group": 3}},
    "w7": {"w2": np.random.default_rng(2).standard_normal((16, 7, 3, 3)).astype(np.float32)},
    "negpads": {"conv2": {"pads": [-1, -1, -1, -1]}},
    "dil100": {"conv2": {"dilations": [100, 100]}},
    "dil0": {"conv2": {"dilations": [0, 1]}},
    "stride0": {"conv2": {"strides": [0, 0]}},
    "strideneg": {"conv2": {"strides": [-1, 1]}},
    "pads100000": {"conv2": {"pads": [100000] * 4}},
    "kernel5": {"conv2": {"kernel_shape": [5, 5]}},
    "nan": {"w2": _w2_with(np.nan)},
    "inf": {"w2": _w2_with(-np.inf)},
    "bn-overflow": {"w1": np.full((16, 3, 3, 3), 1e38, np.float32), "bn": True},
    "huge-input": {"xshape": (1, 3, 100000, 100000)},
    "activation-overflow": {"w1": np.full((16, 3, 3, 3), 3e38, np.float32)},
}


@pytest.fixture(scope="module")
def bad(tmp_path_factory, work: Path) -> Path:  # noqa: F811 - the imported fixture
    """Files that are inputs of the wrong kind: the models of :data:`MODELS`, nested JSON,
    damaged tuning logs, all-zero calibration data (the special files live in ``specials``)."""
    t = tmp_path_factory.mktemp("untrusted")
    for name, kw in MODELS.items():
        conv_model(t / f"{name}.onnx", **kw)
    import onnx

    m = onnx.load(str(t / "group3.onnx"))
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 1 << 62
    onnx.save(m, str(t / "dim-2-62.onnx"))
    m = onnx.load(str(t / "group3.onnx"))
    m.graph.initializer[1].dims[0] = 1 << 40  # 9216 bytes of data for 2^40 x 144 values
    onnx.save(m, str(t / "dims-not-the-data.onnx"))
    for name, (op, consts, *attrs) in OP_MODELS.items():
        op_model(t / f"{name}.onnx", op, consts, **(attrs[0] if attrs else {}))
    np.save(t / "zeros.npy", np.zeros((1, 3, 16, 16), np.float32))
    deep = "[" * 5000 + "]" * 5000
    (t / "deep.json").write_text(deep)
    (t / "deep.jsonl").write_text('{"opcode": "FINISH", "x": ' + deep + "}\n")
    (t / "deep-log.jsonl").write_text(deep + "\n" + deep + "\n")
    shutil.copytree(work / "mod", t / "deepmod")
    (t / "deepmod" / "manifest.json").write_text('{"a": ' + deep + "}")
    write_digest(t / "deepmod", FORMAT, VERSION)  # the digest holds: the manifest is read
    (t / "empty.bin").write_bytes(b"")
    _tuning_logs(t)
    return t


def _tuning_logs(t: Path) -> None:
    """A valid record of tiny.onnx's conv2 workload, and logs with one field broken each."""
    from vta.isa import Config
    from vta.tune import vta_tasks  # noqa: F401 - registers the vta.* templates
    from vta.tune.log import LogRecord
    from vta.tune.task import Task

    task = Task.create("vta.conv2d", (1, 1, 16, 16, 1, 3, 3, 1, 1, 1, 1, Config().params))
    index = next(i for i in range(len(task.space)) if task.space.is_valid(i))
    good = LogRecord(task.key, task.to_json(), task.space.get(index).to_json(), 1000.0, None,
                     "ok", 0.1).to_json()
    (t / "good.jsonl").write_text(json.dumps(good) + "\n")

    def broken(name: str, change) -> None:  # noqa: ANN001 - a function of the record
        rec = json.loads(json.dumps(good))
        change(rec)
        (t / f"{name}.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(rec) + "\n"
                                         + json.dumps(good) + "\n")

    broken("values-missing", lambda r: r["config"].pop("values"))
    broken("values-list", lambda r: r["config"].update(values=[1, 2]))
    broken("cost-text", lambda r: r["result"].update(cost="cheap"))
    broken("result-text", lambda r: r.update(result="fast"))
    broken("index-text", lambda r: r["config"].update(index="7"))
    # the best record (lowest cost) of its workload: the one the compiler applies
    broken("unknown-knob", lambda r: (r["config"]["values"].update(bogus=4),
                                      r["result"].update(cost=10.0)))


@pytest.fixture(scope="module")
def specials(tmp_path_factory) -> Path:
    """Inputs no test reads back: a FIFO with no writer (opening it to read would block
    forever), a sparse file of 16 MiB + 1 byte, a model whose 2 GiB (sparse) external tensor
    claims 33M channels."""
    d = tmp_path_factory.mktemp("specials")
    os.mkfifo(d / "fifo")
    with open(d / "big.json", "wb") as f:
        f.truncate((16 << 20) + 1)
    (d / "ext").mkdir()
    conv_model(d / "ext" / "m.onnx", external=(33554432, 16, 1, 1))
    return d


#: argv with {t} (test_cli_bad_inputs' work directory), {b} (:func:`bad`), {f}
#: (:func:`specials`) and {s} (the input under test: a FIFO, /dev/zero)
INPUT_SLOTS: dict[str, list[str]] = {
    "config": ["config", "show", "--config", "{s}"],
    "asm-input": ["asm", "{s}", "-o", "{t}/o.bin"],
    "disasm-input": ["disasm", "{s}", "-o", "{t}/o.s"],
    "sim-program": ["sim", "{s}", "--dram", "{t}/d.bin", "-o", "{t}/o.bin"],
    "sim-dram": ["sim", "{t}/m.bin", "--dram", "{s}", "-o", "{t}/o.bin"],
    "compile-model": ["compile", "{s}", "-o", "{t}/m2"],
    "compile-tuning-log": ["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--tuning-log", "{s}"],
    "compile-calib": ["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--calib", "{s}"],
    "run-input": ["run", "{t}/mod", "--input", "{s}", "-o", "{t}/y.npy"],
    "run-onnx-input": ["run", "{t}/tiny.onnx", "--target", "cpu", "--input", "{s}"],
    "tune-plot": ["tune", "--plot", "{s}", "-o", "{t}/p.png"],
}

CASES: dict[str, tuple[list[str], str]] = {
    **{f"fifo-as-{k}": ([a.replace("{s}", "{f}/fifo") for a in v], "is a FIFO")
       for k, v in INPUT_SLOTS.items()},
    **{f"dev-zero-as-{k}": ([a.replace("{s}", "/dev/zero") for a in v],
                            "/dev/zero is a character device")
       for k, v in INPUT_SLOTS.items()},
    # --- sizes of files
    "config-over-16-MiB": (["config", "show", "--config", "{f}/big.json"],
                           "more than the 16 MiB"),
    "asm-over-16-MiB": (["asm", "{f}/big.json", "-o", "{t}/o.bin"], "more than the 16 MiB"),
    "disasm-empty": (["disasm", "{b}/empty.bin", "-o", "{t}/o.s"], "empty.bin is empty"),
    # --- JSON nesting
    "deep-config": (["config", "show", "--config", "{b}/deep.json"], "nested 5000 levels"),
    "deep-asm-json": (["asm", "{b}/deep.jsonl", "-o", "{t}/o.bin"], "nested 5001 levels"),
    "deep-tuning-log": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--tuning-log",
                         "{b}/deep-log.jsonl"], "deep-log.jsonl:1: JSON nested 5000"),
    "deep-manifest": (["run", "{b}/deepmod", "--input", "{t}/x.npy"], "nested 5001 levels"),
    "deep-config-of-compile": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--config",
                                "{b}/deep.json"], "nested 5000 levels"),
    # --- tuning-log records: every field typed, the line number given
    "log-values-missing": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--tuning-log",
                            "{b}/values-missing.jsonl"], ":2: not a tuning record (field "
                                                         "'config.values' is missing"),
    "log-values-list": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--tuning-log",
                         "{b}/values-list.jsonl"], ":2: not a tuning record (field "
                                                   "'config.values' is a list"),
    "log-cost-text": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--tuning-log",
                       "{b}/cost-text.jsonl"], ":2: not a tuning record (field 'result.cost' "
                                               "is a string"),
    "log-result-text": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--tuning-log",
                         "{b}/result-text.jsonl"], ":2: not a tuning record (field 'result' "
                                                   "is a string"),
    "log-index-text": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--tuning-log",
                        "{b}/index-text.jsonl"], "field 'config.index' is a string"),
    "log-unknown-knob": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--tuning-log",
                          "{b}/unknown-knob.jsonl"], "unknown knob(s) bogus for vta.conv2d"),
    # --- models: as onnxruntime validates them
    "model-group-3-on-16-channels": (["compile", "{b}/group3.onnx", "-o", "{t}/m2"],
                                     "node 'conv2' (Conv): group=3 does not divide its 16"),
    "model-weight-of-7-channels": (["compile", "{b}/w7.onnx", "-o", "{t}/m2"],
                                   "its weight has 7 input channels per group; with group=1 "
                                   "the input needs 7 channels, not 16"),
    "model-negative-pads": (["compile", "{b}/negpads.onnx", "-o", "{t}/m2"],
                            "pads [-1, -1, -1, -1] must be four integers of at least 0"),
    "model-dilations-100": (["compile", "{b}/dil100.onnx", "-o", "{t}/m2"],
                            "dilation 100 spans 201, more than the padded input's 18"),
    "model-dilations-0": (["compile", "{b}/dil0.onnx", "-o", "{t}/m2"], "dilations [0, 1]"),
    "model-strides-0": (["compile", "{b}/stride0.onnx", "-o", "{t}/m2"], "strides [0, 0]"),
    "model-strides-negative": (["compile", "{b}/strideneg.onnx", "-o", "{t}/m2"],
                               "strides [-1, 1]"),
    "model-pads-100000": (["compile", "{b}/pads100000.onnx", "-o", "{t}/m2"],
                          "its output 1x16x200014x200014 would take 2.3 TiB, more than the "
                          "1 GiB"),
    "model-kernel-shape-not-the-weights": (["compile", "{b}/kernel5.onnx", "-o", "{t}/m2"],
                                           "kernel_shape [5, 5] is not its weight's [3, 3]"),
    "model-nan-weight": (["compile", "{b}/nan.onnx", "-o", "{t}/m2"],
                         "tensor 'w2' holds 1 NaN or infinite value(s) of 2304; the int8 path "
                         "cannot represent them"),
    "model-inf-weight": (["compile", "{b}/inf.onnx", "-o", "{t}/m2"],
                         "tensor 'w2' holds 1 NaN or infinite"),
    "model-nan-weight-run-on-cpu": (["run", "{b}/nan.onnx", "--target", "cpu", "--input",
                                     "{t}/x.npy"], "tensor 'w2' holds 1 NaN"),
    "model-overflow-when-batch-norm-folds": (["compile", "{b}/bn-overflow.onnx", "-o",
                                              "{t}/m2"],
                                             "batch-norm 'bn1' folded into Conv 'conv1': its "
                                             "weight 'w1' holds 3.15e+40, beyond float32"),
    "model-huge-input": (["compile", "{b}/huge-input.onnx", "-o", "{t}/m2"],
                         "node 'conv1' (Conv): its input 'x' 1x3x100000x100000 would take "
                         "111.8 GiB"),
    "model-external-tensor-of-33M-channels": (["compile", "{f}/ext/m.onnx", "-o", "{t}/m2"],
                                              "tensor 'w2' claims 33554432x16x1x1 values "
                                              "(2 GiB), more than the 1 GiB"),
    "model-activation-overflows-float32": (["compile", "{b}/activation-overflow.onnx", "-o",
                                            "{t}/m2"], "holds NaN or infinite values in the "
                                                       "float run of calibration input 1"),
    "model-input-dim-2-62": (["compile", "{b}/dim-2-62.onnx", "-o", "{t}/m2"],
                             "its input 'x' 1x3x4611686018427387904x16 would take"),
    "model-dims-not-the-data": (["compile", "{b}/dims-not-the-data.onnx", "-o", "{t}/m2"],
                                "raw_data size (9216 bytes) is too small for the declared "
                                "shape"),
    "model-pad-100000": (["compile", "{b}/pad-huge.onnx", "-o", "{t}/m2"],
                         "node 'pad' (Pad): its output 1x3x200016x200016 would take 447.1 GiB"),
    "model-resize-scale-10000": (["compile", "{b}/resize-huge.onnx", "-o", "{t}/m2"],
                                "node 'resize' (Resize): its output 1x3x160000x160000 would "
                                "take 286.1 GiB"),
    "model-constant-of-shape-huge": (["compile", "{b}/constant-of-shape-huge.onnx", "-o",
                                      "{t}/m2"], "node 'constantofshape' (ConstantOfShape) of "
                                                 "constant inputs would make 2700000000 values"),
    "model-expand-huge": (["compile", "{b}/expand-huge.onnx", "-o", "{t}/m2"],
                          "node 'expand' (Expand) of constant inputs would make 10000000000 "
                          "values"),
    # --- workloads on the command line: the same bound
    "workload-100000-squared": (["tune", "--workload", "conv2d:H=100000,W=100000,CI=64,CO=64,"
                                 "K=3,S=1,P=1", "--trials", "1"],
                                "its input of 640000000000 values would take 2.3 TiB"),
    "workload-dense-huge": (["tune", "--workload", "dense:N=16,K=1048576,M=1048576",
                             "--trials", "1"], "its weight of 1099511627776 values"),
    "workload-stride-0": (["tune", "--workload", "conv2d:S=0", "--trials", "1"],
                          "S=0 must be at least 1"),
    # --- calibration
    "calibration-all-zeros": (["compile", "{t}/tiny.onnx", "-o", "{t}/m2", "--calib",
                               "{b}/zeros.npy"], "calibration input 'x' is all zeros"),
}


def run_main(argv: list[str], timeout: float = 120.0) -> int:
    """``main(argv)`` in a thread that must finish within ``timeout`` seconds (a FIFO opened
    for reading would block it forever: the test then fails instead of hanging)."""
    rc: list[int] = []
    raised: list[BaseException] = []

    def target() -> None:
        try:
            rc.append(main(argv))
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            raised.append(e)

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), f"{argv} did not finish within {timeout} s (blocked on input?)"
    if raised:
        raise raised[0]
    return rc[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_untrusted_input_is_one_line_and_writes_nothing(case: str, work: Path,  # noqa: F811
                                                        bad: Path, specials: Path,
                                                        capsys) -> None:
    argv, needle = CASES[case]
    argv = [a.replace("{t}", str(work)).replace("{b}", str(bad)).replace("{f}", str(specials))
            for a in argv]
    before, before_bad = tree(work), tree(bad)
    capsys.readouterr()
    rc = run_main(argv)
    err = capsys.readouterr().err
    assert_one_line_error(rc, err, argv, needle)
    assert tree(work) == before and tree(bad) == before_bad


def test_a_good_tuning_log_still_compiles(work: Path, bad: Path, tmp_path: Path,  # noqa: F811
                                          capsys) -> None:
    """The record the damaged logs were made from is accepted and its knobs applied."""
    out = tmp_path / "m"
    assert main(["compile", str(work / "tiny.onnx"), "-o", str(out), "--tuning-log",
                 str(bad / "good.jsonl")]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    good = json.loads((bad / "good.jsonl").read_text())
    assert good["config"]["values"] in [k.get("knobs") for k in manifest["kernels"].values()]


def test_damaged_host_kernel_objects_are_rebuilt(work: Path, tmp_path: Path) -> None:  # noqa: F811
    """A truncated or garbage machine-code object in the user cache is detected (its sha256)
    and rebuilt: `vta run` gives the same output as with a fresh cache (before, the JIT loaded
    it and LLVM aborted with exit 134). Run as a subprocess: an abort would end pytest."""
    env = os.environ | {"VTA_CACHE_DIR": str(tmp_path / "cache")}

    def run(out: str) -> None:
        argv = [sys.executable, "-c", "import sys; from vta.cli.main import main; "
                "sys.exit(main(sys.argv[1:]))", "run", str(work / "mod"), "--input",
                str(work / "x.npy"), "-o", str(tmp_path / out)]
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr

    run("fresh.npy")
    objs = sorted((tmp_path / "cache").rglob("*.o"))
    assert len(objs) == 2  # quantize, dequantize
    objs[0].write_bytes(objs[0].read_bytes()[: 100])
    objs[1].write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    run("again.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "again.npy"),
                                  np.load(tmp_path / "fresh.npy"))
    from vta.compiler.codegen.llvm import _load

    assert all(_load(p) is not None for p in objs)  # rewritten whole
