"""AutoVTA's resource model against a real yosys synthesis of a small core (slow)."""

from __future__ import annotations

import time

import pytest
from vta.boards import get_board
from vta.isa import Config
from vta.tune.autovta.calibration import calibrated_model
from vta.tune.autovta.resources import ResourceModel
from vta.tune.autovta.synthcache import cached_synthesis, synthesize


@pytest.mark.synth
@pytest.mark.slow
def test_small_core_synthesis_matches_the_structural_model(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path))
    cfg, board = Config.preset("small"), get_board("pynq-z1")
    assert cached_synthesis(board.name, cfg) is None
    entry = synthesize(board.name, cfg)
    assert not entry["cached"] and entry["report"]["problems"] == []
    used = entry["used"]
    # block RAM and DSP counts are structural (not fitted): they must be exact
    est = ResourceModel.for_board(board).estimate(cfg)
    assert (est["bram"], est["dsp"]) == (used["bram"], used["dsp"])
    # the report is cached under config + board + kit version, and reused
    t0 = time.monotonic()
    again = synthesize(board.name, cfg)
    assert again["cached"] and again["used"] == used and time.monotonic() - t0 < 5
    # a model calibrated on the cached report reproduces it (one sample: in-sample error)
    model, notes = calibrated_model(board, points=[cfg], min_samples=1)
    assert model.calibration_method == "in-sample" and not notes
    fit = model.estimate(cfg)
    assert fit["lut"] == pytest.approx(used["lut"], rel=0.02)
    assert fit["ff"] == pytest.approx(used["ff"], rel=0.02)
