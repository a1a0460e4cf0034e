"""`vta compile --tuning-log`: tuned knobs reach the matching layers and change no result."""

from __future__ import annotations

import numpy as np
import pytest
from vta.cli.main import main
from vta.isa import Config
from vta.tune import Measurer, RandomTuner, TuningLog


@pytest.mark.sim
def test_tuning_log_applies_best_knobs(tmp_path, monkeypatch) -> None:
    import onnx
    from vta.compiler.graph import zoo
    from vta.compiler.graph.module import load_module
    from vta.tune.vta_tasks import tasks_from_model

    cfg = Config.preset("small")
    model = tmp_path / "r18.onnx"
    onnx.save(zoo.resnet18(image_size=32, num_classes=10), str(model))
    conv = next(t for t in tasks_from_model(model, cfg) if t.name == "vta.conv2d")
    log_path = tmp_path / "tune.jsonl"
    res = RandomTuner(conv, seed=0).tune(4, Measurer("perf"), batch_size=4,
                                         log=TuningLog(log_path))
    best = conv.space.get(res.best_index).values

    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    outs = {}
    for tag, extra in (("plain", []), ("tuned", ["--tuning-log", str(log_path)])):
        mod = tmp_path / f"{tag}.vta"
        assert main(["compile", str(model), "--preset", "small", "-o", str(mod), *extra]) == 0
        if tag == "tuned":  # `vta run` of a tuned module does no compiler work
            _forbid_lowering(monkeypatch)
        assert main(["run", str(mod), "--input", str(tmp_path / "x.npy"), "--target", "fsim",
                     "-o", str(tmp_path / f"{tag}.npy")]) == 0
        outs[tag] = np.load(tmp_path / f"{tag}.npy")
        if tag == "tuned":
            m = load_module(mod)
            assert m.tuned_knobs, "no layer matched the tuned workload"
            assert all(k == best for k in m.tuned_knobs.values())
            _check_tuned_cycles(m, res.best_cost, x)
    # a schedule changes how, not what: the int8 network computes the same bits
    assert np.array_equal(outs["plain"], outs["tuned"])


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


def _check_tuned_cycles(m, best_cost: float, x: np.ndarray) -> None:  # noqa: ANN001
    """The manifest carries the cycles `vta tune` measured, and running the module's own
    program on the perf backend reproduces them."""
    from vta.compiler.graph.executor import Executor

    tuned = [k for k in m.kernels.values() if k.knob_source == "tuning-log"]
    assert tuned and all(k.cycles == best_cost for k in tuned)
    with Executor(m, "perf") as ex:
        ex.run({next(iter(m.graph.inputs)): x})
        rep = ex.last_report
    got = {r.node: r.cycles for r in rep.layers}
    for k in tuned:
        assert got[k.node] == best_cost, (k.node, got[k.node], best_cost)
