"""AutoVTA's design space and resource model against hand-computed block-RAM counts."""

from __future__ import annotations

import numpy as np
import pytest

from vta.isa import Config
from vta.tune.autovta.resources import ResourceModel, buffer_brams, features
from vta.tune.autovta.space import candidate_from_values, hardware_space


@pytest.mark.unit
def test_bram_packing_by_hand() -> None:
    # 2048 x 128 bits on RAMB36 (512x72 .. 32Kx1): 1024x36 -> 4 wide x 2 deep = 8
    assert buffer_brams(2048, 128, "xc7") == 8
    # 1024 x 2048 bits: 1024x36 -> ceil(2048/36)=57 x 1 = 57 (512x72 would need 29x2=58)
    assert buffer_brams(1024, 2048, "xc7") == 57
    # 8192 x 32 bits: 8192x4 -> 8 x 1 = 8
    assert buffer_brams(8192, 32, "xc7") == 8
    # ECP5 EBR (18 Kb): 2048 x 9 -> ceil(128/9)=15 x 1 = 15 (512x36 would need 4x4=16)
    assert buffer_brams(2048, 128, "ecp5") == 15


@pytest.mark.unit
def test_space_only_valid_configs() -> None:
    space = hardware_space()
    valid = space.valid_indices()
    assert 0 < len(valid) < len(space)  # some combinations break the 32-bit micro-op
    for i in valid[:: max(1, len(valid) // 50)]:
        cand = candidate_from_values(dict(space.get(i).values))
        assert cand.cfg.layouts.uop.used_bits <= 32
    bad = next(i for i in range(len(space)) if not space.is_valid(i))
    with pytest.raises(Exception, match="layout|LOG_"):
        candidate_from_values(dict(space.get(bad).values))


@pytest.mark.unit
def test_calibration_recovers_a_linear_truth() -> None:
    truth = ResourceModel(lut_coef=np.array([1000.0, 50, 20, 40, 5, 300]),
                          ff_coef=np.array([2000.0, 5, 30, 30, 4, 200]))
    space = hardware_space()
    valid = space.valid_indices()
    cfgs = [candidate_from_values(dict(space.get(i).values)).cfg for i in valid[::97]]
    cfgs.append(Config.preset("small"))
    assert len({(c.batch, c.block) for c in cfgs}) >= 3
    samples = [(c, bw, truth.estimate(c, bw)) for c in cfgs for bw in (64, 128)]
    model = ResourceModel()
    err = model.calibrate(samples)
    assert err["lut"] < 1e-6 and err["ff"] < 1e-6 and err["bram"] == 0
    c = Config(LOG_BLOCK=4, LOG_BATCH=1)
    assert model.estimate(c, 64)["lut"] == pytest.approx(truth.estimate(c, 64)["lut"])
    assert features(c, 64).shape == model.lut_coef.shape
