"""Transfer learning, warm-up batches, target stop, epsilon-greedy batches, four virtual threads
and the shape-independent IR features."""

from __future__ import annotations

import math

import numpy as np
import pytest
from vta.isa import Config
from vta.tune import LogRecord, Measurer, RandomTuner, Task, TuningLog, XGBTuner, template
from vta.tune.sa import diverse_batch


@template("test.bowl")
def bowl(cfg, n: int):
    """A 2-D bowl whose minimum sits at the same RELATIVE place (3/8, 5/8) for every n."""
    cfg.define_knob("a", list(range(n)))
    cfg.define_knob("b", list(range(n)))
    return 10.0 + (cfg["a"] / n - 0.375) ** 2 * 400 + (cfg["b"] / n - 0.625) ** 2 * 400


def _bowl_features(task: Task, i: int) -> np.ndarray:
    # relative knob positions: what transfers between sizes
    e = task.space.get(i)
    n = task.args[0]
    return np.array([e["a"] / n, e["b"] / n])


def _records(path, n: int, trials: int, seed: int) -> list[LogRecord]:
    task = Task.create("test.bowl", (n,))
    RandomTuner(task, seed=seed).tune(trials, Measurer("value"), batch_size=8,
                                      log=TuningLog(path))
    return [r for r in TuningLog(path).records if r.workload == task.key]


@pytest.mark.unit
def test_transfer_uses_only_other_workloads_one_group_each(tmp_path) -> None:
    log = tmp_path / "bowl.jsonl"
    r16 = _records(log, 16, 40, 1)
    r24 = _records(log, 24, 40, 2)
    own = _records(log, 32, 10, 3)
    t32 = Task.create("test.bowl", (32,))
    tuner = XGBTuner(t32, seed=0, feature_fn=_bowl_features)
    # add_prior featurizes each record in its own workload's space with the same function
    used = tuner.add_prior(r16 + r24 + own)
    assert used == len(r16) + len(r24)  # the tuned workload's own records are left out
    assert len(tuner.model._priors) == 2  # one ranking group per earlier workload
    assert tuner.model.n_prior == used
    # each record is featurized in its own workload's space: (a / 16, b / 16) for the first
    t16 = Task.create("test.bowl", (16,))
    v = t16.space.get(r16[0].config["index"]).values
    assert tuner.model._priors[0][0][0].tolist() == pytest.approx([v["a"] / 16, v["b"] / 16])


@pytest.mark.unit
def test_transfer_ranks_the_first_batch(tmp_path) -> None:
    """Primed with other sizes' measurements, the model's very first (warm-up) batch lands
    near the optimum of an unseen size; without a prior the first batch is random."""
    rng = np.random.default_rng(0)
    priors = []
    for n in (16, 24, 40):
        t = Task.create("test.bowl", (n,))
        idx = rng.choice(len(t.space), 60, replace=False)
        priors.append((np.stack([_bowl_features(t, int(i)) for i in idx]),
                       [t.instantiate(t.space.get(int(i))) for i in idx]))
    t32 = Task.create("test.bowl", (32,))
    optimum = min(t32.instantiate(e) for e in t32.space)
    assert optimum == 10.0  # a = 12, b = 20
    firsts = []
    for seed in range(5):
        tuner = XGBTuner(t32, seed=seed, feature_fn=_bowl_features,
                         epsilon=0.0)
        assert tuner.add_prior_groups(priors) == 180 and tuner.model.fitted
        res = tuner.tune(64, Measurer("value"), batch_size=8, target=optimum * 1.05)
        first = [c for _, c, _ in res.history[:2]]
        firsts.append(min(first))
        assert res.best_cost <= optimum * 1.05
    # the space's median cost is ~ 10 + 2 * 400 * (1/4)^2 = 60: a random pick is far off
    assert max(firsts) <= optimum * 1.2


@pytest.mark.unit
def test_warmup_batches_and_target_stop() -> None:
    t = Task.create("test.bowl", (32,))
    sizes = []

    class Counting(Measurer):
        def measure(self, task, indices):
            sizes.append(len(indices))
            return super().measure(task, indices)

    tuner = XGBTuner(t, seed=0, feature_fn=_bowl_features, warmup=(1, 2, 4))
    res = tuner.tune(40, Counting("value"), batch_size=8)
    assert sizes[:5] == [1, 2, 4, 8, 8] and res.trials == 40
    # with a target the tuner stops after the batch that reaches it
    res = XGBTuner(t, seed=0, feature_fn=_bowl_features).tune(
        1024, Measurer("value"), batch_size=8, target=10.0)
    assert res.best_cost == 10.0 and res.trials < 1024
    assert min(c for _, c, _ in res.history[:-8]) > 10.0 or res.trials <= 8


@pytest.mark.unit
def test_epsilon_greedy_share_of_random_picks() -> None:
    t = Task.create("test.bowl", (32,))
    ranked = list(range(0, 512))  # a "model ranking": indices with b in the lower half
    rng = np.random.default_rng(0)
    picks = [diverse_batch(t.space, ranked, 10, rng, epsilon=0.2) for _ in range(300)]
    off = sum(p >= 512 for batch in picks for p in batch)
    # each slot is random with probability 0.2; a random pick leaves the ranked half w.p. 1/2
    assert 0.06 < off / 3000 < 0.14
    assert all(len(b) == 10 and len(set(b)) == 10 for b in picks)
    assert not any(p >= 512 for b in (diverse_batch(t.space, ranked, 10, rng, epsilon=0.0)
                                      for _ in range(20)) for p in b)


@pytest.fixture(scope="module")
def small() -> Config:
    return Config.preset("small")


@pytest.mark.sim
def test_four_virtual_threads_are_in_the_space_change_the_program_and_are_exact(small) -> None:
    from vta.compiler.build import lower_vta
    from vta.compiler.topi import conv2d_packed, conv2d_reference
    from vta.tune.vta_tasks import EPILOGUE, ir_features, measure_perf
    from vta.tune.workloads import parse_workload

    task = parse_workload("conv2d:H=8,W=8,CI=8,CO=16,K=3,S=1,P=1", small)
    base = dict(tile_b=1, tile_h=4, tile_w=4, tile_ci=1, tile_co=1)
    two = task.space.from_values(dict(base, oc_nthread=2, h_nthread=1))
    four = task.space.from_values(dict(base, oc_nthread=2, h_nthread=2))
    assert task.space.is_valid(four.index) and task.space.is_valid(two.index)
    op2, op4 = task.instantiate(two), task.instantiate(four)
    f2 = ir_features(lower_vta(op2.sch, op2.args, op2.cfg, op2.name))
    f4 = ir_features(lower_vta(op4.sch, op4.args, op4.cfg, op4.name))
    assert not np.array_equal(f2, f4)  # a different program
    assert measure_perf(op2) != measure_perf(op4)
    rng = np.random.default_rng(5)
    data = rng.integers(-128, 128, (1, 2, 8, 8, 1, 4), dtype=np.int8)
    kernel = rng.integers(-128, 128, (4, 2, 3, 3, 4, 4), dtype=np.int8)
    bias = rng.integers(-1000, 1000, (1, 4, 1, 1, 1, 4), dtype=np.int32)
    op = conv2d_packed((1, 2, 8, 8, 1, 4), (4, 2, 3, 3, 4, 4), strides=(1, 1), padding=(1, 1),
                       knobs=dict(four.values), config=small, target="fsim", **EPILOGUE)
    ref = conv2d_reference(data, kernel, (1, 1), (1, 1), op.info["epilogue"], bias=bias)
    assert np.array_equal(op(data, kernel, bias), ref)


@pytest.mark.sim
def test_relative_features_are_reload_factors(small) -> None:
    """With the whole reduction in one step (tile_ci = CI), weights are loaded once per
    spatial output tile and outputs stored once: log2 re-load factors by hand."""
    from vta.compiler.build import lower_vta
    from vta.tune.vta_tasks import N_RELATIVE, relative_features
    from vta.tune.workloads import parse_workload

    checked = 0
    # (8, 8, 8) does not fit with the bias vector in the accumulator; (16, 4, 8) does
    for hw_, th, tw in ((8, 4, 8), (16, 4, 4), (16, 2, 16), (8, 8, 8), (16, 4, 8)):
        task = parse_workload(f"conv2d:H={hw_},W={hw_},CI=8,CO=8,K=3,S=1,P=1", small)
        e = task.space.from_values(dict(tile_b=1, tile_h=th, tile_w=tw, tile_ci=2, tile_co=2,
                                        oc_nthread=1, h_nthread=1))
        if not task.space.is_valid(e.index):
            continue
        checked += 1
        op = task.instantiate(e)
        f = relative_features(lower_vta(op.sch, op.args, op.cfg, op.name), op.args, small)
        assert len(f) == N_RELATIVE
        spatial_tiles = (hw_ // th) * (hw_ // tw)
        assert f[1] == pytest.approx(math.log2(spatial_tiles))  # weights
        assert f[2] == pytest.approx(0.0)  # every output stored once
        # input rows with the 3x3 halo: (th + 2) / th re-read per tile (padding not loaded)
        assert f[0] > 0 or spatial_tiles == 1
    assert checked >= 3
