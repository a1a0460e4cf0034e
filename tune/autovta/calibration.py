"""Calibrating the resource model against real yosys synthesis (cached on disk).

:data:`CALIBRATION_POINTS` is a handful of small-to-medium configurations spanning the features
of the model (GEMM shape, batch, buffer sizes, bus width); each synthesis takes minutes, so the
reports are cached (:mod:`vta.tune.autovta.synthcache`) and a calibration reuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vta.boards import get_board
from vta.isa import Config

from .resources import KINDS, ResourceModel
from .synthcache import cached_synthesis, synthesize

#: (config parameters, bus width): small to medium cores, cheapest first.
CALIBRATION_POINTS: tuple[tuple[dict[str, int], int], ...] = (
    (dict(LOG_BATCH=0, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=10, LOG_INP_BUFF_SIZE=10,
          LOG_WGT_BUFF_SIZE=10, LOG_ACC_BUFF_SIZE=11), 64),
    (dict(LOG_BATCH=0, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=13,
          LOG_WGT_BUFF_SIZE=15, LOG_ACC_BUFF_SIZE=15), 64),
    (dict(LOG_BATCH=1, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=12, LOG_INP_BUFF_SIZE=12,
          LOG_WGT_BUFF_SIZE=12, LOG_ACC_BUFF_SIZE=13), 128),
    (dict(LOG_BATCH=0, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=12, LOG_INP_BUFF_SIZE=14,
          LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16), 128),
    (dict(LOG_BATCH=1, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
          LOG_WGT_BUFF_SIZE=15, LOG_ACC_BUFF_SIZE=16), 64),
    (dict(LOG_BATCH=0, LOG_BLOCK=4), 64),
    (dict(LOG_BATCH=0, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=13,
          LOG_WGT_BUFF_SIZE=14, LOG_ACC_BUFF_SIZE=15), 128),
)


def calibration_points() -> list[Config]:
    return [Config(**p, BUS_WIDTH=bw) for p, bw in CALIBRATION_POINTS]


def synthesis_samples(board: str, points: Sequence[Config] | None = None, *,
                      synth: bool = False, progress: Callable[[str], None] | None = None
                      ) -> tuple[list[tuple[Config, dict[str, float]]], list[str]]:
    """(samples, missing): cached synthesis results of ``points`` for ``board`` as
    ``(cfg, used)``; with ``synth`` the missing ones are synthesized (minutes each)
    and cached. ``missing`` names the points without a report from the current hardware
    sources (a stale report, made from older sources, counts as missing)."""
    samples, missing = [], []
    pts = list(points) if points is not None else calibration_points()
    for k, cfg in enumerate(pts):
        bw = cfg.bus_width
        entry = cached_synthesis(board, cfg, allow_stale=True)
        stale = entry is not None and entry["stale"]
        if stale:
            entry = None
        if entry is None and synth:
            if progress:
                progress(f"[{k + 1}/{len(pts)}] synthesizing {cfg.batch}x{cfg.block_in}x"
                         f"{cfg.block_out} bus {bw} for {board} (minutes)")
            entry = synthesize(board, cfg, progress=None)
        if entry is None:
            missing.append(f"{cfg.batch}x{cfg.block_in}x{cfg.block_out} bus{bw}"
                           + (" (stale: synthesized from older hardware sources)" if stale
                              else ""))
            continue
        samples.append((cfg, {k2: float(entry["used"][k2]) for k2 in KINDS}))
    return samples, missing


def calibrated_model(board: Any, *, synth: bool = False,
                     points: Sequence[Config] | None = None,
                     progress: Callable[[str], None] | None = None,
                     min_samples: int = 3) -> tuple[ResourceModel, list[str]]:
    """The resource model for ``board`` calibrated on its cached synthesis reports (with
    ``synth``: synthesizing the missing calibration points first). With fewer than
    ``min_samples`` reports, the shipped coefficients are kept. Returns the model and notes."""
    b = get_board(board)
    model = ResourceModel.for_board(b)
    samples, missing = synthesis_samples(b.name, points, synth=synth, progress=progress)
    notes = []
    if len(samples) >= min_samples:
        model.calibrate(samples)
    else:
        notes.append(f"resource model: {len(samples)} synthesis report(s) cached for {b.name}; "
                     f"using the shipped coefficients ({model.source}); run with --calibrate "
                     f"to synthesize the calibration set")
    if missing and samples:
        notes.append(f"resource model: no synthesis yet for {', '.join(missing)}")
    return model, notes
