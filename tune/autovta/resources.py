"""A fast analytic resource model of the VTA core, calibrated against real synthesis.

Block RAM and DSP counts follow from the buffer shapes and the GEMM size (how the vendor tools pack
memories and multipliers); LUT and FF counts are linear in a few structural features (multipliers,
adder-tree bits, buffer port widths, bus width) with coefficients fitted by least squares to yosys
reports of several configurations (:meth:`ResourceModel.calibrate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from vta.isa import INSN_BITS, INSN_QUEUE_DEPTH, Config

#: Aspect ratios of one block RAM by family: (depth, width) configurations.
BRAM_SHAPES = {
    "xc7": ((32768, 1), (16384, 2), (8192, 4), (4096, 9), (2048, 18), (1024, 36), (512, 72)),
    "xcup": ((32768, 1), (16384, 2), (8192, 4), (4096, 9), (2048, 18), (1024, 36), (512, 72)),
    "ecp5": ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)),
    "cyclonev": ((8192, 1), (4096, 2), (2048, 4), (1024, 8), (512, 16), (256, 32)),
}


def buffer_brams(depth: int, width: int, family: str = "xc7") -> int:
    """Block RAMs for a ``depth`` x ``width``-bit memory: the best aspect ratio, tiled."""
    shapes = BRAM_SHAPES.get(family, BRAM_SHAPES["xc7"])
    return min(math.ceil(width / w) * math.ceil(depth / d) for d, w in shapes)


def memories(cfg: Config) -> dict[str, tuple[int, int]]:
    """(depth, width in bits) of every on-chip memory of the core."""
    return {
        "uop": (cfg.uop_depth, 32),
        "inp": (cfg.inp_depth, cfg.inp_elem_bytes * 8),
        "wgt": (cfg.wgt_depth, cfg.wgt_elem_bytes * 8),
        "acc": (cfg.acc_depth, cfg.acc_elem_bytes * 8),
        "out": (cfg.acc_depth, cfg.out_elem_bytes * 8),
        "insn_queues": (INSN_QUEUE_DEPTH, 3 * INSN_BITS),
    }


def features(cfg: Config, bus_width: int) -> np.ndarray:
    """Structural features the LUT/FF counts are linear in."""
    macs = cfg.macs_per_cycle
    adder_bits = cfg.batch * cfg.block_out * (cfg.block_in - 1) * (cfg.acc_width)
    alu_bits = cfg.batch * cfg.block_out * cfg.acc_width
    port_bits = sum(w for _, w in memories(cfg).values())
    return np.array([1.0, macs * cfg.inp_width * cfg.wgt_width / 64.0, adder_bits / 32.0,
                     alu_bits / 32.0, port_bits / 64.0, bus_width / 64.0])


@dataclass
class ResourceModel:
    """LUT/FF coefficients over :func:`features`; BRAM and DSP from structure."""

    family: str = "xc7"
    #: multipliers per DSP block (int8 x int8 fits one DSP48 / 18x18 multiplier)
    mults_per_dsp: float = 1.0
    #: whether multipliers go to DSP blocks at all (else LUTs; the LUT fit absorbs them)
    dsp_mults: bool = True
    lut_coef: np.ndarray = field(default_factory=lambda: np.array(
        [2500.0, 60.0, 30.0, 60.0, 8.0, 400.0]))
    ff_coef: np.ndarray = field(default_factory=lambda: np.array(
        [3000.0, 10.0, 35.0, 40.0, 6.0, 300.0]))
    calibration_error: dict[str, float] = field(default_factory=dict)

    def estimate(self, cfg: Config, bus_width: int = 64) -> dict[str, float]:
        f = features(cfg, bus_width)
        bram = sum(buffer_brams(d, w, self.family) for d, w in memories(cfg).values())
        dsp = math.ceil(cfg.macs_per_cycle / self.mults_per_dsp) if self.dsp_mults else 0
        return {"lut": float(max(0.0, f @ self.lut_coef)), "ff": float(max(0.0, f @ self.ff_coef)),
                "bram": float(bram), "dsp": float(dsp)}

    def calibrate(self, samples: Sequence[tuple[Config, int, dict[str, float]]]) -> dict[str, float]:
        """Fit LUT/FF coefficients to synthesis reports ``(cfg, bus_width, {lut, ff, ...})``;
        returns the mean relative error per resource (also kept in ``calibration_error``)."""
        x = np.stack([features(c, b) for c, b, _ in samples])
        for kind in ("lut", "ff"):
            y = np.array([r[kind] for _, _, r in samples], dtype=np.float64)
            # relative least squares: each sample weighted by 1/y
            w = 1.0 / np.maximum(y, 1.0)
            coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
            setattr(self, f"{kind}_coef", coef)
        err: dict[str, float] = {}
        for kind in ("lut", "ff", "bram", "dsp"):
            e = [abs(self.estimate(c, b)[kind] - r[kind]) / max(r[kind], 1.0)
                 for c, b, r in samples if kind in r]
            if e:
                err[kind] = float(np.mean(e))
        self.calibration_error = err
        return err

    def fits(self, estimate: dict[str, float], budget: dict[str, float]) -> bool:
        return all(estimate[k] <= budget[k] for k in ("lut", "ff", "bram", "dsp"))
