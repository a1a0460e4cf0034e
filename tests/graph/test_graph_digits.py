"""Accuracy on a trained network (bench/bench_digits.py at a smaller scale): a CNN trained on
scikit-learn's digits loses at most 0.5 point of accuracy as VTA int8 on fsim, against
onnxruntime running the float model on the same held-out images."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.sim, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


def test_trained_cnn_int8_accuracy_within_half_a_point() -> None:
    import bench_digits

    r = bench_digits.evaluate(epochs=6, test_images=360, calib=16)
    assert r["float_accuracy"] >= 90.0, r  # the network did learn
    assert r["drop_points"] <= bench_digits.GOAL_DROP, r
    assert r["vta_share"] >= 0.9, r
