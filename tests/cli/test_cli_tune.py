"""`vta tune`: a workload tuned through the CLI, resumed from its log, plotted; bad input."""

from __future__ import annotations

import json

import pytest
from vta.cli.main import main

SPEC = "conv2d:H=8,W=8,CI=8,CO=8,K=3,S=1,P=1"


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.sim
def test_tune_resume_and_plot(tmp_path, capsys) -> None:
    log = tmp_path / "t.jsonl"
    args = ["tune", "--workload", SPEC, "--preset", "small", "--batch", "3", "--log", str(log),
            "--tuner", "random"]
    assert main([*args, "--trials", "6"]) == 0
    out = capsys.readouterr().out
    first = _records(log)
    assert len(first) == 6 and "best config" in out
    best = min(r["result"]["cost"] for r in first if r["result"]["cost"] is not None)
    assert f"{best:,.0f}" in out
    assert main([*args, "--trials", "9", "--resume"]) == 0
    err = capsys.readouterr().err
    assert "(resumed after 6 trials)" in err and " 3/3 " in err  # this run's trials only
    recs = _records(log)
    assert len(recs) == 9 and recs[:6] == first
    assert len({r["config"]["index"] for r in recs}) == 9  # resume re-measured nothing
    # a complete log: one line saying so, nothing measured or appended
    assert main([*args, "--trials", "9", "--resume"]) == 0
    cap = capsys.readouterr()
    assert cap.out.count("\n") == 1 and "already holds 9 trials" in cap.out and not cap.err
    assert _records(log) == recs
    # another conv workload with the XGBoost tuner: the log's records prime its cost model
    other = ["tune", "--workload", "conv2d:H=8,W=8,CI=8,CO=8,K=1,S=1,P=0", "--preset", "small",
             "--batch", "3", "--trials", "3", "--log", str(log)]
    assert main(other) == 0
    assert "primed with 9 records" in capsys.readouterr().err
    assert len(_records(log)) == 12
    png = tmp_path / "curve.png"
    assert main(["tune", "--plot", str(log), "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.unit
@pytest.mark.parametrize("argv, needle", [
    (["tune"], "give MODEL.onnx or --workload"),
    (["tune", "--plot", "nothing.jsonl"], "--plot needs -o"),
    (["tune", "--plot", "missing.jsonl", "-o", "x.png"], "does not exist"),
    (["tune", "--workload", "conv2d:CI=6", "--preset", "small"], "not a multiple of 4"),
    (["tune", "--workload", "nope"], "unknown workload"),
    (["tune", "--workload", SPEC, "--trials", "0"], "--trials: 0 is out of range (at least 1)"),
])
def test_tune_bad_input_is_one_line(tmp_path, monkeypatch, capsys, argv, needle) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vta tune: error: ") and needle in err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.sim
def test_tune_measure_fsim_counts_micro_ops(tmp_path, capsys) -> None:
    """`--measure fsim` (offered in --help) tunes: every candidate runs on fsim, is checked
    against numpy, and costs its GEMM + ALU micro-ops, the counts the perf model's own decoder
    gives for the same program."""
    import numpy as np
    from vta.isa import Config
    from vta.tune.vta_tasks import _fresh_device
    from vta.tune.workloads import parse_workload

    log = tmp_path / "f.jsonl"
    assert main(["tune", "--workload", SPEC, "--preset", "small", "--measure", "fsim",
                 "--tuner", "random", "--trials", "3", "--batch", "3", "--log", str(log)]) == 0
    recs = _records(log)
    assert len(recs) == 3 and all(r["result"]["kind"] == "ok" for r in recs), recs
    task = parse_workload(SPEC, Config.preset("small"))
    for r in recs:
        op = task.instantiate(task.space.get(r["config"]["index"]))
        op.build("perf", device=_fresh_device(op, "perf"))
        stats = op.module(*[np.zeros(t.shape, np.dtype(t.dtype)) for t in op.args])
        assert r["result"]["cost"] == stats.gemm_uops + stats.alu_uops


@pytest.mark.unit
def test_tune_says_when_no_trial_could_be_measured(tmp_path, monkeypatch, capsys) -> None:
    """Every measurement failing is exit status 1 with one error line naming the workload and
    the kind of failure (was: exit 1 and nothing said)."""
    from vta.tune import measure, vta_tasks  # noqa: F401 - registers the real measurers first

    def broken(op, **_):  # noqa: ANN001, ANN003, ANN202
        raise RuntimeError("the measuring device is unplugged")

    monkeypatch.setitem(measure._MEASURERS, "perf", broken)
    assert main(["tune", "--workload", SPEC, "--preset", "small", "--trials", "2", "--batch",
                 "2", "--tuner", "random"]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1, errors
    assert "vta.conv2d" in errors[0] and "all failed: run" in errors[0], errors
