"""The tuners against spaces whose optimum is found by exhaustive enumeration in the test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from vta.tune import (
    GridTuner,
    Measurer,
    RandomTuner,
    SpaceError,
    Task,
    TuningLog,
    XGBTuner,
    template,
)
from vta.tune.space import _factorizations


def synthetic_cost(tx: tuple[int, int], ty: tuple[int, int], unroll: int, vec: int) -> float:
    # a bumpy landscape with interactions, minimum at a non-trivial point
    a, b = math.log2(tx[1]), math.log2(ty[1])
    return (1000.0 + 40 * (a - 3) ** 2 + 25 * (b - 2) ** 2 + 30 * abs(a - b - 1) * (unroll + 1)
            + 15 * (math.log2(vec) - 2) ** 2 + 10 * ((unroll - 2) ** 2) + 5 * (a * vec % 3))


@template("test.synthetic")
def synthetic(cfg, n: int):
    cfg.define_split("tile_x", n)
    cfg.define_split("tile_y", n)
    cfg.define_knob("unroll", [0, 1, 2, 3])
    cfg.define_knob("vec", [1, 2, 4, 8])
    # a constraint: the two inner tiles together must not exceed 64 elements
    cfg.add_constraint(lambda e: e["tile_x"][1] * e["tile_y"][1] <= 64)
    return synthetic_cost(cfg["tile_x"], cfg["tile_y"], cfg["unroll"], cfg["vec"])


@template("test.flaky")
def flaky(cfg, n: int):
    cfg.define_knob("k", list(range(n)))
    k = cfg["k"]
    if k % 5 == 1:
        raise RuntimeError("cannot build this one")
    if k % 5 == 2:
        return float("nan")
    return 100.0 + (k - 18) ** 2


def exhaustive_best(task: Task) -> float:
    return min(task.instantiate(task.space.get(i)) for i in task.space.valid_indices())


@pytest.mark.unit
def test_factorizations_are_complete() -> None:
    f = _factorizations(12, 2, None)
    assert sorted(f) == [(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)]
    assert all(math.prod(t) == 24 for t in _factorizations(24, 3, None))
    assert len(_factorizations(24, 3, None)) == 30  # 24 = 2^3 * 3: C(5,2) * C(3,2)


@pytest.mark.unit
def test_space_indexing_round_trip() -> None:
    task = Task.create("test.synthetic", (64,))
    assert len(task.space) == 7 * 7 * 4 * 4
    for i in (0, 1, 57, len(task.space) - 1):
        e = task.space.get(i)
        assert task.space.from_values(e.values).index == i
    assert sum(1 for _ in task.space.neighbours(5)) == 6 + 6 + 3 + 3
    with pytest.raises(SpaceError, match="outside the space"):
        task.space.get(len(task.space))


@pytest.mark.unit
def test_grid_finds_exhaustive_optimum() -> None:
    task = Task.create("test.synthetic", (64,))
    res = GridTuner(task).tune(10_000, Measurer("value"), batch_size=64)
    assert res.trials == len(task.space.valid_indices())
    assert res.best_cost == pytest.approx(exhaustive_best(task))


@pytest.mark.unit
def test_xgb_tuner_finds_known_optimum_with_few_trials() -> None:
    task = Task.create("test.synthetic", (64,))
    optimum = exhaustive_best(task)
    n_valid = len(task.space.valid_indices())
    res = XGBTuner(task, seed=1).tune(160, Measurer("value"), batch_size=16)
    assert res.best_cost == pytest.approx(optimum)
    assert res.trials <= 160 < n_valid
    # every measured configuration satisfies the constraint
    assert all(task.space.is_valid(i) for i, _, _ in res.history)
    assert len({i for i, _, _ in res.history}) == res.trials  # never measures twice


@pytest.mark.unit
def test_random_tuner_visits_each_config_once() -> None:
    task = Task.create("test.synthetic", (16,))
    valid = set(task.space.valid_indices())
    res = RandomTuner(task, seed=3).tune(10_000, Measurer("value"), batch_size=8)
    seen = [i for i, _, _ in res.history]
    assert len(seen) == len(set(seen)) and set(seen) == valid


@pytest.mark.unit
def test_invalid_candidates_do_not_stop_tuning(tmp_path) -> None:
    task = Task.create("test.flaky", (40,))
    log = TuningLog(tmp_path / "flaky.jsonl")
    res = RandomTuner(task, seed=0).tune(40, Measurer("value"), batch_size=7, log=log)
    kinds = [k for _, _, k in res.history]
    assert res.trials == 40
    assert kinds.count("build") == 8 and kinds.count("run") == 8 and kinds.count("ok") == 24
    assert res.best_cost == 100.0 and task.space.get(res.best_index)["k"] == 18
    assert len(TuningLog(tmp_path / "flaky.jsonl").records) == 40


@pytest.mark.unit
def test_early_stopping_stops() -> None:
    task = Task.create("test.synthetic", (64,))
    res = RandomTuner(task, seed=0).tune(10_000, Measurer("value"), batch_size=4,
                                         early_stopping=12)
    best_at = next(n for n, c in enumerate(res.best_curve(), 1) if c == res.best_cost)
    assert res.trials - best_at < 12 + 4
    assert res.trials < len(task.space.valid_indices())


@pytest.mark.unit
def test_cost_model_ranks_a_learnable_function() -> None:
    from vta.tune.cost_model import XGBoostCostModel

    rng = np.random.default_rng(0)
    feats = rng.uniform(0, 4, size=(300, 3))
    cost = 1 + (feats[:, 0] - 2) ** 2 + feats[:, 1]
    model = XGBoostCostModel(lambda i: feats[i])
    train = list(range(200))
    model.fit(train, list(cost[train]))
    test = np.arange(200, 300)
    pred = model.predict(list(test))
    # higher score = lower cost: rank correlation must be strongly negative
    rc = np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort(cost[test])))[0, 1]
    assert rc < -0.8


@template("test.sleepy")
def sleepy(cfg, n: int):
    cfg.define_knob("k", list(range(n)))
    if cfg["k"] == 2:
        import time

        time.sleep(60)  # a measurement that hangs
    return 100.0 + cfg["k"]


@pytest.mark.unit
def test_a_hanging_measurement_times_out_and_its_worker_is_killed() -> None:
    """With worker processes, a measurement past the timeout is a "timeout" result; the pool is
    replaced and the hung worker killed; the next batch measures on the new pool."""
    import multiprocessing as mp

    from vta.tune import close_executor, make_executor

    task = Task.create("test.sleepy", (4,))
    before = set(mp.active_children())
    ex = make_executor(2)
    measurer = Measurer("value", executor=ex, timeout=3.0)
    try:
        out = measurer.measure(task, [0, 1, 2, 3])
        assert [(r.cost, r.kind) for r in out] == [(100.0, "ok"), (101.0, "ok"),
                                                   (None, "timeout"), (103.0, "ok")]
        assert measurer.executor is not ex
        assert set(mp.active_children()) <= before  # the old pool's workers: gone
        assert [r.cost for r in measurer.measure(task, [1, 3])] == [101.0, 103.0]
    finally:
        close_executor(measurer.executor)


@pytest.mark.unit
def test_a_fresh_process_has_every_kit_template() -> None:
    """The template registry (vta.tune.task) loads nothing itself: a process that imports only
    it (a worker, a log read back) still has the kit's templates, which the vta.tune package
    imports; compared with the names the template modules' decorators carry in their source."""
    import ast
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    declared = []
    for src in (root / "tune" / "vta_tasks.py", root / "tune" / "autovta" / "template.py"):
        tree = ast.parse(src.read_text())
        consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                  and isinstance(n.value, ast.Constant) for t in n.targets
                  if isinstance(t, ast.Name)}
        for fn in ast.walk(tree):
            for d in getattr(fn, "decorator_list", ()):
                if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "template":
                    arg = d.args[0]
                    declared.append(arg.value if isinstance(arg, ast.Constant)
                                    else consts[arg.id])
    code = "from vta.tune.task import _TEMPLATES\nprint(' '.join(sorted(_TEMPLATES)))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert len(declared) == 7 and "autovta.hw" in declared
    assert out == sorted(declared)
