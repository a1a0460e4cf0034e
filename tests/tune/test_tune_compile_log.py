"""`vta compile --tuning-log`: tuned knobs reach the matching layers and change no result."""

from __future__ import annotations

import json

import numpy as np
import pytest
from vta.cli.main import main
from vta.isa import Config
from vta.tune import Measurer, RandomTuner, TuningLog


@pytest.mark.sim
@pytest.mark.parametrize(("model_name", "templates"), [
    ("resnet18", ("vta.conv2d", "vta.elementwise")),  # a conv and a residual add on the ALU
    ("dcgan", ("vta.conv2d_transpose",)),
    ("mobilenet", ("vta.group_conv2d",)),  # a depthwise conv (groups of one diagonal tile)
])
def test_tuning_log_applies_best_knobs(tmp_path, monkeypatch, model_name: str,
                                       templates: tuple[str, ...]) -> None:
    import onnx
    from vta.compiler.graph import zoo
    from vta.compiler.graph.module import load_module
    from vta.tune.vta_tasks import tasks_from_model

    cfg = Config.preset("small")
    model = tmp_path / f"{model_name}.onnx"
    if model_name == "resnet18":
        onnx.save(zoo.resnet18(image_size=32, num_classes=10), str(model))
        x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    elif model_name == "mobilenet":
        onnx.save(zoo.mobilenet_v1(image_size=32, num_classes=10, width=0.25), str(model))
        x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    else:
        onnx.save(zoo.dcgan_generator(nz=16, ngf=8), str(model))
        x = np.random.default_rng(0).standard_normal((1, 16, 1, 1)).astype(np.float32)
    tasks = tasks_from_model(model, cfg)
    log_path = tmp_path / "tune.jsonl"
    best = {}  # workload key -> (best knobs, measured cycles)
    for name in templates:
        task = next(t for t in tasks if t.name == name)
        res = RandomTuner(task, seed=0).tune(4, Measurer("perf"), batch_size=4,
                                             log=TuningLog(log_path))
        best[task.key] = (task.space.get(res.best_index).values, res.best_cost)

    np.save(tmp_path / "x.npy", x)
    want = _tuned_layers(model, cfg, best)
    outs = {}
    # the log's workloads as tuned: a residual add fused into its conv makes another workload
    # (tests/graph/test_graph_fuse.py: the compile says so in one line)
    keep = ["--no-fuse"] if model_name == "resnet18" else []
    for tag, extra in (("plain", keep), ("tuned", [*keep, "--tuning-log", str(log_path)])):
        mod = tmp_path / f"{tag}.vta"
        assert main(["compile", str(model), "--preset", "small", "-o", str(mod), *extra]) == 0
        if tag == "tuned":  # `vta run` of a tuned module does no compiler work
            _forbid_lowering(monkeypatch)
        assert main(["run", str(mod), "--input", str(tmp_path / "x.npy"), "--target", "fsim",
                     "-o", str(tmp_path / f"{tag}.npy")]) == 0
        outs[tag] = np.load(tmp_path / f"{tag}.npy")
        if tag == "tuned":
            _check_tuned_layers(load_module(mod), want, best, x)
    # a schedule changes how, not what: the int8 network computes the same bits
    assert np.array_equal(outs["plain"], outs["tuned"])


def _tuned_layers(model, cfg: Config, best: dict) -> dict[str, tuple]:  # noqa: ANN001
    """Layer -> (knobs, cycles) of every layer whose workload the log tuned."""
    from vta.tune.vta_tasks import layer_task, model_layers

    want = {}
    for layer in model_layers(model, cfg):
        t = layer_task(layer, cfg)
        if t is not None and t.key in best:
            want[layer.node] = best[t.key]
    return want


def _check_tuned_layers(m, want: dict, best: dict, x: np.ndarray) -> None:  # noqa: ANN001
    """Every layer of a tuned workload (and only those) carries that workload's best knobs and
    measured cycles in the manifest, and every tuned template is among them."""
    assert set(want) <= set(m.kernels)
    # a grouped or depthwise conv is the compiler's conv2d template with groups
    assert {m.kernels[n].template for n in want} == \
        {json.loads(k)[0].removeprefix("vta.").removeprefix("group_") for k in best}
    assert m.tuned_knobs == {n: k for n, (k, _) in want.items()}
    _check_tuned_cycles(m, {n: c for n, (_, c) in want.items()}, x)


def _forbid_lowering(monkeypatch) -> None:  # noqa: ANN001
    import importlib

    def boom(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("lowering during vta run")

    build = importlib.import_module("vta.compiler.build")
    from vta.compiler.codegen import vta as codegen
    from vta.compiler.graph import lowering
    from vta.compiler.topi import defaults

    for mod, name in ((build, "lower"), (build, "lower_vta"), (build, "record_func"),
                      (codegen, "emit"), (codegen, "commands"), (lowering, "record_layer"),
                      (lowering, "plan_layer"), (defaults, "search")):
        monkeypatch.setattr(mod, name, boom)


def _check_tuned_cycles(m, cycles: dict[str, float], x: np.ndarray) -> None:  # noqa: ANN001
    """The manifest carries the cycles `vta tune` measured, and running the module's own
    program on the perf backend reproduces them."""
    from vta.compiler.graph.executor import Executor

    tuned = [k for k in m.kernels.values() if k.knob_source == "tuning-log"]
    assert tuned and {k.node: k.cycles for k in tuned} == cycles
    with Executor(m, "perf") as ex:
        ex.run({next(iter(m.graph.inputs)): x})
        rep = ex.last_report
    got = {r.node: r.cycles for r in rep.layers}
    for k in tuned:
        assert got[k.node] == cycles[k.node], (k.node, got[k.node], cycles[k.node])


@pytest.mark.sim
def test_tuning_log_with_invalid_knobs_is_one_line_error(tmp_path, capsys) -> None:
    """A log whose best knobs are not a schedule of their workload (hand-edited, or from
    another kit) stops the compile with a one-line error and no module."""
    import onnx
    from vta.compiler.graph import zoo
    from vta.tune.vta_tasks import tasks_from_model

    cfg = Config.preset("small")
    model = tmp_path / "dcgan.onnx"
    onnx.save(zoo.dcgan_generator(nz=16, ngf=8), str(model))
    task = tasks_from_model(model, cfg)[0]
    log_path = tmp_path / "tune.jsonl"
    RandomTuner(task, seed=0).tune(1, Measurer("perf"), batch_size=1, log=TuningLog(log_path))
    rec = json.loads(log_path.read_text())
    rec["config"]["values"]["tile_co"] = 3  # 8 output-channel tiles: 3 divides none
    log_path.write_text(json.dumps(rec) + "\n")
    capsys.readouterr()
    out = tmp_path / "m.vta"
    assert main(["compile", str(model), "--preset", "small", "-o", str(out),
                 "--tuning-log", str(log_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a valid schedule of vta.conv2d_transpose" in err
    assert not out.exists()
