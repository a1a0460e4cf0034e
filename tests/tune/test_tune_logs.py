"""Tuning logs: crash safety, resume, best-per-workload; the process-pool and Dask executors."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from vta.isa.errors import FileError
from vta.tune import (
    Measurer,
    RandomTuner,
    Task,
    TuningLog,
    XGBTuner,
    best_per_workload,
    close_executor,
    make_executor,
    read_log,
    template,
)


@template("test.quadratic")
def quadratic(cfg, n: int):
    cfg.define_knob("a", list(range(n)))
    cfg.define_knob("b", list(range(n)))
    return 10.0 + (cfg["a"] - 3) ** 2 + (cfg["b"] - 5) ** 2


SLOW_TEMPLATE = textwrap.dedent("""
    import time
    from vta.tune import template

    @template("test.slow")
    def slow(cfg, n):
        cfg.define_knob("a", list(range(n)))
        time.sleep(0.05)
        return 1.0 + cfg["a"]
""")

DRIVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import slowtemplate  # noqa: F401 - registers the template
    from vta.tune import Measurer, RandomTuner, Task, TuningLog
    task = Task.create("test.slow", (200,))
    RandomTuner(task, seed=0).tune(200, Measurer("value"), batch_size=5, log=TuningLog(sys.argv[2]))
""")


@pytest.mark.unit
def test_killed_run_resumes_without_remeasuring(tmp_path) -> None:
    (tmp_path / "slowtemplate.py").write_text(SLOW_TEMPLATE)
    log_path = tmp_path / "run.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path), str(log_path)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if log_path.exists() and len(log_path.read_text().splitlines()) >= 15:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # simulate a crash in the middle of a write as well
    with open(log_path, "a") as f:
        f.write('{"workload": "x", "config": {"ind')
    before = read_log(log_path)
    assert 15 <= len(before) < 200 and len(before) % 5 == 0  # whole batches only

    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("slowtemplate")  # registers the template here too
        task = Task.create("test.slow", (200,))
        log = TuningLog(log_path)
        tuner = RandomTuner(task, seed=1)
        measured = []
        orig = Measurer.measure

        class Spy(Measurer):
            def measure(self, task, indices):
                measured.extend(indices)
                return orig(self, task, indices)

        res = tuner.tune(len(before) + 10, Spy("value"), batch_size=5, log=log)
    finally:
        sys.path.remove(str(tmp_path))
    old = {int(r.config["index"]) for r in before}
    assert len(measured) == 10 and not old & set(measured)
    assert res.trials == len(before) + 10
    assert res.best_cost == min(r.cost for r in read_log_lenient(log_path))


def read_log_lenient(path):
    return [r for r in read_log(path) if r.ok]


@pytest.mark.unit
def test_corrupt_line_in_the_middle_is_an_error(tmp_path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text('not json\n{"workload": "w"}\n')
    with pytest.raises(FileError, match="bad.jsonl:1"):
        read_log(p)
    with pytest.raises(FileError, match="does not exist"):
        read_log(tmp_path / "missing.jsonl")


@pytest.mark.unit
def test_best_per_workload_and_transfer(tmp_path) -> None:
    p = tmp_path / "q.jsonl"
    for n in (8, 9):
        task = Task.create("test.quadratic", (n,))
        RandomTuner(task, seed=n).tune(30, Measurer("value"), batch_size=10, log=TuningLog(p))
    best = best_per_workload(p)
    assert len(best) == 2
    for key, rec in best.items():
        n = json.loads(key)[1][0]
        ok = [r.cost for r in read_log(p) if r.workload == key and r.ok]
        assert rec.cost == min(ok)
        task = Task.create("test.quadratic", (n,))
        assert task.instantiate(task.space.get(rec.config["index"])) == rec.cost
    # transfer: a model primed with the 8x8 records ranks the 9x9 space before any measurement;
    # each record is featurized in its own (8x8) space, where its index means (a, b)
    t9 = Task.create("test.quadratic", (9,))
    tuner = XGBTuner(t9, seed=0)
    prior = [r for r in read_log(p) if json.loads(r.workload)[1][0] == 8]
    assert tuner.add_prior(prior) == len(prior)
    t8 = Task.create("test.quadratic", (8,))
    r0 = prior[0]
    vals = t8.space.get(r0.config["index"]).values
    # one ranking group per earlier workload, and the model is fitted before any measurement
    assert len(tuner.model._priors) == 1
    assert tuner.model._priors[0][0][0].tolist() == [vals["a"], vals["b"]]
    assert tuner.model.fitted
    scores = tuner.model.predict(list(range(len(t9.space))))
    best_guess = t9.space.get(int(np.argmax(scores))).values
    assert abs(best_guess["a"] - 3) + abs(best_guess["b"] - 5) <= 2  # near the true optimum


@pytest.mark.unit
def test_process_pool_executor() -> None:
    task = Task.create("test.quadratic", (6,))
    ex = make_executor(jobs=2)
    try:
        res = XGBTuner(task, seed=0).tune(36, Measurer("value", executor=ex), batch_size=12)
    finally:
        close_executor(ex)
    assert res.trials == 36 and res.best_cost == 10.0  # a=3, b=5: the exhaustive minimum


@pytest.mark.unit
def test_dask_local_cluster_on_loopback() -> None:
    import distributed  # a dev dependency

    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1")
        ex = make_executor(scheduler=cluster.scheduler_address)
        try:
            task = Task.create("test.quadratic", (6,))
            res = RandomTuner(task, seed=0).tune(36, Measurer("value", executor=ex),
                                                 batch_size=9)
        finally:
            close_executor(ex)
    assert res.trials == 36 and res.best_cost == 10.0
