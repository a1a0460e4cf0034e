"""A fast analytic resource model of the VTA core, calibrated against real synthesis.

It follows the structure of :class:`vta.hw.core.VTACore`:

- Block RAM from the memories' shapes: the input, weight, micro-op and accumulator
  scratchpads, the OUT buffer (the accumulators narrowed to the output width, which STORE
  reads) — each one write and one read port, i.e. one simple-dual-port block-RAM copy — and
  the three 128-bit instruction queues. Each memory is tiled with the
  family's best block-RAM aspect ratio (a half-size block counts 0.5, as the board budgets do).
- DSP blocks from the multipliers: ``batch x block_out x block_in`` GEMM multipliers
  (inp x wgt bits; packed, half as many of inp x (inp + 2 wgt + 1) bits: one DSP48 per pair
  of products) and ``batch x block_out`` ALU multipliers (acc x acc bits, the MUL opcode;
  :func:`multipliers`), each costing what
  :meth:`vta.boards.registry.Family.dsp_cost` says. When they need more DSPs than the board has,
  synthesis builds the smallest ones from logic (:func:`soft_multipliers` mirrors
  :mod:`vta.boards.synth`), which then cost LUTs instead.
- LUTs and flip-flops linear in a few structural features (:func:`features`), with coefficients
  fitted by least squares to yosys reports (:meth:`ResourceModel.calibrate`), plus the LUTs of
  the multipliers built from logic (a measured constant per multiplier, the family's
  ``soft_mult_luts``) and, on a core with packed multipliers (``ResourceModel.packed``, the
  board's ``pack_multipliers`` core option), their fabric (``packed_pair_luts`` per multiplier).
  The family facts (block-RAM shapes, DSP operand widths, these LUT costs) are
  :class:`vta.boards.registry.Family`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from vta.boards import get_board
from vta.boards.registry import get_family
from vta.hw.options import CoreOptions
from vta.hw.packed import packed_width
from vta.isa import INSN_BITS, INSN_QUEUE_DEPTH, Config

KINDS = ("lut", "ff", "bram", "dsp")


def buffer_brams(depth: int, width: int, family: str = "xc7") -> float:
    """Block RAMs (budget units) for a ``depth`` x ``width``-bit memory as yosys maps it: one
    half block (0.5; Xilinx RAMB18) when it fits one, else the cheapest full-block aspect ratio
    of the family (:attr:`vta.boards.registry.Family.bram_shapes`), tiled."""
    fam = get_family(family)
    if any(depth <= d and width <= w for d, w in fam.bram_half_shapes):
        return 0.5
    return float(min(math.ceil(width / w) * math.ceil(depth / d) for d, w in fam.bram_shapes))


@dataclass(frozen=True)
class Memory:
    """One on-chip memory of the core."""

    name: str
    depth: int
    width: int
    read_ports: int = 1

    @property
    def bits(self) -> int:
        return self.depth * self.width


def memories(cfg: Config) -> list[Memory]:
    """The core's block-RAM memories (see the module docstring)."""
    q = INSN_QUEUE_DEPTH - 1  # amaranth's SyncFIFOBuffered keeps one entry in a register
    return [
        Memory("uop", cfg.uop_depth, 32),
        Memory("inp", cfg.inp_depth, cfg.inp_elem_bytes * 8),
        Memory("wgt", cfg.wgt_depth, cfg.wgt_elem_bytes * 8),
        Memory("acc", cfg.acc_depth, cfg.acc_elem_bytes * 8),
        Memory("out", cfg.acc_depth, cfg.out_elem_bytes * 8),
        *(Memory(f"{m}_queue", q, INSN_BITS) for m in ("load", "compute", "store")),
    ]


#: Multipliers outside the datapath, as yosys finds them in every core (address arithmetic):
#: (a bits, b bits, count). None since the STORE DMA counts rows instead of multiplying
#: ``x_size * y_size``.
FIXED_MULTIPLIERS: tuple[tuple[int, int, int], ...] = ()


def multipliers(cfg: Config, packed: bool = False) -> list[tuple[int, int, int]]:
    """(a bits, b bits, count) of the core's multipliers: GEMM (inp x wgt; ``packed``: pairs
    of output columns share one inp x :func:`~vta.hw.packed.packed_width` multiplier per input
    element, :mod:`vta.hw.packed`), the ALU's MUL (per lane, three half-width partial products
    of the acc-width operands; the ALU chains' stages around it have none) and the fixed
    address multipliers (:data:`FIXED_MULTIPLIERS`)."""
    return _multipliers(cfg.batch, cfg.block_in, cfg.block_out, cfg.inp_width, cfg.wgt_width,
                        cfg.acc_width, packed)


def _multipliers(batch: int, block_in: int, block_out: int, inp_width: int, wgt_width: int,
                 acc_width: int, packed: bool) -> list[tuple[int, int, int]]:
    lanes = batch * block_out
    half = acc_width // 2
    gemm = [(inp_width, wgt_width, lanes * block_in)]
    if packed:
        pairs = batch * (block_out // 2) * block_in
        single = batch * (block_out % 2) * block_in
        gemm = [(inp_width, packed_width(inp_width, wgt_width), pairs),
                *([(inp_width, wgt_width, single)] if single else [])]
    return [*gemm, (half, half, 3 * lanes), *FIXED_MULTIPLIERS]


def dsp_cost(family: str, a: int, b: int) -> float:
    """DSP budget one ``a`` x ``b`` multiplier takes by the family's
    :meth:`~vta.boards.registry.Family.dsp_cost` (the estimate synthesis uses to decide which
    multipliers go to logic)."""
    return get_family(family).dsp_cost(a, b)


def dsp_cells(family: str, a: int, b: int) -> float:
    """DSPs one ``a`` x ``b`` multiplier really takes after mapping. On Xilinx parts a 1-bit
    operand is logic, and a product truncated to its operand width drops the high partial
    product (a 32x32 ALU multiply keeping 32 bits takes 3 DSP48s, not 4)."""
    if get_family(family).vendor == "xilinx":
        if min(a, b) <= 1:
            return 0.0
        full = dsp_cost(family, a, b)
        return full - 1 if a == b and a > 25 and full > 1 else full
    return dsp_cost(family, a, b)


def soft_multipliers(cfg: Config, family: str, dsp_budget: float | None,
                     packed: bool = False) -> tuple[float, int, int]:
    """(DSPs used, datapath multipliers built from logic, their a*b bits). Like
    :mod:`vta.boards.synth`, the smallest multipliers go to logic until the rest fit
    ``dsp_budget`` (None: no limit) by :func:`dsp_cost`; the DSPs used are counted with
    :func:`dsp_cells`. ``packed``: the GEMM's products two per multiplier."""
    muls = sorted(multipliers(cfg, packed), key=lambda m: m[0] * m[1])
    need = sum(n * dsp_cost(family, a, b) for a, b, n in muls)
    used = sum(n * dsp_cells(family, a, b) for a, b, n in muls)
    soft, soft_bits = 0, 0
    if dsp_budget is not None:
        for a, b, n in muls:
            c = dsp_cost(family, a, b)
            if need <= dsp_budget + 1e-9 or c <= 0:
                break
            k = min(n, math.ceil((need - dsp_budget) / c - 1e-9))
            need -= k * c
            used -= k * dsp_cells(family, a, b)
            if min(a, b) > 1:
                soft += k
                soft_bits += k * a * b
    return used, soft, soft_bits


def dsp_ceiling(family: str, dsp_budget: float, base: Config, packed: bool = False, *,
                log_batches: Sequence[int] = (0, 1, 2), log_blocks: Sequence[int] = range(1, 7)
                ) -> tuple[int, int] | None:
    """(batch, block) of the GEMM core with the most MACs per cycle (square blocks, ``base``'s
    data widths) whose multipliers all fit ``dsp_budget`` DSPs by :func:`dsp_cost`, none in
    logic (fewer batch rows first on a tie); None when not even the smallest fits.
    ``packed``: two GEMM products per multiplier. (Buffer sizes are not chosen here: they do
    not change the multipliers.)"""
    best: tuple[int, int] | None = None
    for batch in (1 << lb for lb in log_batches):
        for block in (1 << lk for lk in log_blocks):
            muls = _multipliers(batch, block, block, base.inp_width, base.wgt_width,
                                base.acc_width, packed)
            need = sum(n * dsp_cost(family, a, b) for a, b, n in muls)
            if need <= dsp_budget + 1e-9 and (
                    best is None or batch * block * block > best[0] * best[1] ** 2):
                best = (batch, block)
    return best


FEATURE_NAMES = ("const", "mac_lanes", "alu_lanes", "bus_bytes")

def features(cfg: Config) -> np.ndarray:
    """Structural features the LUT and FF counts are linear in (see :data:`FEATURE_NAMES`):
    GEMM multiply-accumulate lanes (adder trees, pipeline registers), ALU lanes (32-bit
    min/max/add/shift datapaths) and memory bus bytes (DMA datapaths)."""
    lanes = cfg.batch * cfg.block_out
    return np.array([1.0, float(cfg.macs_per_cycle), float(lanes), float(cfg.bus_bytes)])


@dataclass(frozen=True)
class FamilyFit:
    """The shipped LUT/FF coefficients of :func:`features` for one FPGA family, and how they
    were measured."""

    lut: tuple[float, ...]
    ff: tuple[float, ...]
    #: mean relative error per resource on the reports named by ``method``
    error: Mapping[str, float]
    samples: int
    method: str
    source: str
    #: the bench record under bench/results/ the fit comes from (None: before records)
    record: str | None = None


#: The shipped fits, one per calibrated family; a family without its own (cyclonev, ecp5)
#: uses xc7's.
#:
#: - xc7: the fit to the 6 PYNQ-Z1 (xc7z020) yosys reports of
#:   :data:`vta.tune.autovta.calibration.CALIBRATION_POINTS` (all but the default 1x16x16) of
#:   the pipelined core with the OUT buffer and the ALU chains' stages, 2026-11-26 (see
#:   docs/autovta.md; that fit predicted the default core's LUTs within 1.2%); its error is
#:   the leave-one-out error on those reports.
FAMILY_FITS: dict[str, FamilyFit] = {
    "xc7": FamilyFit(
        lut=(3729.4, 17.26, 1078.8, 39.10), ff=(4657.5, 11.24, 645.6, 34.87),
        error={"lut": 0.0158, "ff": 0.0108, "bram": 0.0077, "dsp": 0.0000},
        samples=6, method="leave-one-out", source="shipped xc7 calibration"),
}


def family_fit(family: str) -> tuple[FamilyFit, str]:
    """The shipped fit for ``family`` and its source (xc7's, said so, for a family without
    one of its own)."""
    if family in FAMILY_FITS:
        fit = FAMILY_FITS[family]
        return fit, fit.source
    return FAMILY_FITS["xc7"], f"shipped xc7 calibration (not calibrated for {family})"


@dataclass
class ResourceModel:
    """LUT/FF coefficients over :func:`features`; block RAM and DSPs from structure. The
    coefficients, their error and source left None default to the family's shipped fit
    (:data:`FAMILY_FITS`)."""

    family: str = "xc7"
    #: the board's DSP budget: multipliers beyond it are built from logic (None: no limit)
    dsp_budget: float | None = None
    lut_coef: np.ndarray | None = None
    ff_coef: np.ndarray | None = None
    #: mean relative error per resource of the last calibration (leave-one-out when possible)
    calibration_error: dict[str, float] | None = None
    #: where the coefficients come from
    source: str | None = None
    calibration_method: str | None = None
    calibration_samples: int | None = None
    #: the GEMM's products two per multiplier (the board's ``pack_multipliers`` core option)
    packed: bool = False

    def __post_init__(self) -> None:
        fit, source = family_fit(self.family)
        if self.lut_coef is None:
            self.lut_coef = np.array(fit.lut, dtype=np.float64)
        if self.ff_coef is None:
            self.ff_coef = np.array(fit.ff, dtype=np.float64)
        if self.calibration_error is None:
            self.calibration_error = dict(fit.error)
        if self.source is None:
            self.source = source
        if self.calibration_method is None:
            self.calibration_method = fit.method
        if self.calibration_samples is None:
            self.calibration_samples = fit.samples

    @classmethod
    def for_board(cls, board: Any) -> ResourceModel:
        """The model for a board (its family and DSP budget), shipped coefficients."""
        b = get_board(board)
        return cls(family=b.family, dsp_budget=float(b.budget.dsp),
                   packed=CoreOptions.from_dict(b.core_options).pack_multipliers)

    # ------------------------------------------------------------------ estimate
    def bram(self, cfg: Config) -> float:
        return float(sum(m.read_ports * buffer_brams(m.depth, m.width, self.family)
                         for m in memories(cfg)))

    def soft_luts(self, cfg: Config) -> float:
        """LUTs of the multipliers built from logic for lack of DSPs, and of the packed
        multipliers' fabric (the family's ``soft_mult_luts`` per 64 multiplier bits and
        ``packed_pair_luts`` per packed multiplier, :class:`vta.boards.registry.Family`)."""
        _, _, bits = soft_multipliers(cfg, self.family, self.dsp_budget, self.packed)
        pairs = cfg.batch * (cfg.block_out // 2) * cfg.block_in if self.packed else 0
        fam = get_family(self.family)
        return bits / 64.0 * fam.soft_mult_luts + pairs * fam.packed_pair_luts

    def estimate(self, cfg: Config) -> dict[str, float]:
        """{lut, ff, bram, dsp} of the core for ``cfg`` (its bus width included)."""
        f = features(cfg)
        dsp, _, _ = soft_multipliers(cfg, self.family, self.dsp_budget, self.packed)
        return {"lut": float(max(0.0, f @ self.lut_coef)) + self.soft_luts(cfg),
                "ff": float(max(0.0, f @ self.ff_coef)),
                "bram": self.bram(cfg), "dsp": float(math.ceil(dsp - 1e-9))}

    def fits(self, estimate: Mapping[str, float], budget: Mapping[str, float]) -> bool:
        return all(estimate[k] <= budget[k] for k in KINDS)

    # --------------------------------------------------------------- calibration
    def _fit(self, samples: Sequence[tuple[Config, Mapping[str, float]]]) -> None:
        x = np.stack([features(c) for c, _ in samples])
        for kind in ("lut", "ff"):
            y = np.array([r[kind] for _, r in samples], dtype=np.float64)
            if kind == "lut":  # the soft multipliers' LUTs are known, not fitted
                y = y - np.array([self.soft_luts(c) for c, _ in samples])
            # relative least squares (each sample weighted by 1/y), non-negative coefficients
            w = 1.0 / np.maximum(y, 1.0)
            setattr(self, f"{kind}_coef", _nnls(x * w[:, None], y * w))

    def calibrate(self, samples: Sequence[tuple[Config, Mapping[str, float]]]
                  ) -> dict[str, float]:
        """Fit the LUT/FF coefficients to synthesis reports ``(cfg, used)``.

        Returns the mean relative error per resource, also kept in ``calibration_error``: for
        LUT and FF it is the leave-one-out error (each sample predicted by a fit to the
        others) when there are more samples than features, else the in-sample error; block
        RAM and DSP are not fitted, so theirs is the plain error."""
        samples = list(samples)
        if not samples:
            raise ValueError("calibration needs at least one synthesis sample")
        err: dict[str, float] = {}
        nfeat = len(FEATURE_NAMES)
        loo = len(samples) > nfeat
        if loo:
            for kind in ("lut", "ff"):
                e = []
                for k, (c, r) in enumerate(samples):
                    sub = ResourceModel(self.family, self.dsp_budget, packed=self.packed)
                    sub._fit(samples[:k] + samples[k + 1:])
                    e.append(abs(sub.estimate(c)[kind] - r[kind]) / max(r[kind], 1.0))
                err[kind] = float(np.mean(e))
        self._fit(samples)
        for kind in KINDS:
            if kind in err:
                continue
            e = [abs(self.estimate(c)[kind] - r[kind]) / max(r[kind], 1.0)
                 for c, r in samples if kind in r]
            if e:
                err[kind] = float(np.mean(e))
        self.calibration_error = err
        self.calibration_method = "leave-one-out" if loo else "in-sample"
        self.calibration_samples = len(samples)
        self.source = f"calibrated on {len(samples)} synthesis reports ({self.family})"
        return err

    def errors(self, samples: Sequence[tuple[Config, Mapping[str, float]]]
               ) -> list[dict[str, float]]:
        """Relative error per resource of each sample (no fitting)."""
        out = []
        for c, r in samples:
            est = self.estimate(c)
            out.append({k: (est[k] - r[k]) / max(r[k], 1.0) for k in KINDS if k in r})
        return out

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "dsp_budget": self.dsp_budget,
                "features": list(FEATURE_NAMES), "lut_coef": [float(v) for v in self.lut_coef],
                "ff_coef": [float(v) for v in self.ff_coef],
                "calibration_error": dict(self.calibration_error),
                "calibration_method": self.calibration_method,
                "calibration_samples": self.calibration_samples, "source": self.source,
                "packed": self.packed}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ResourceModel:
        return cls(d.get("family", "xc7"), d.get("dsp_budget"),
                   np.array(d["lut_coef"], dtype=np.float64),
                   np.array(d["ff_coef"], dtype=np.float64),
                   dict(d.get("calibration_error", {})), d.get("source", ""),
                   d.get("calibration_method", ""), int(d.get("calibration_samples", 0)),
                   bool(d.get("packed", False)))


def _nnls(a: np.ndarray, b: np.ndarray, iters: int = 500) -> np.ndarray:
    """Non-negative least squares (projected coordinate descent; small problems only)."""
    x, *_ = np.linalg.lstsq(a, b, rcond=None)
    if np.all(x >= 0):
        return x
    x = np.maximum(x, 0.0)
    ata, atb = a.T @ a, a.T @ b
    for _ in range(iters):
        old = x.copy()
        for j in range(len(x)):
            if ata[j, j] <= 0:
                x[j] = 0.0
                continue
            r = atb[j] - ata[j] @ x + ata[j, j] * x[j]
            x[j] = max(0.0, r / ata[j, j])
        if np.max(np.abs(x - old)) <= 1e-12 * max(1.0, np.max(np.abs(x))):
            break
    return x
