"""The resource model of one FPGA family against yosys: fitted on some reports, measured on
others (held out).

For the Zynq UltraScale+ family (xcup; the ZCU104 and the Ultra96-V2) the cores of
``--fit`` and ``--held-out`` (``BxBIxBO/BUS`` with their buffers from the AutoVTA calibration
set, :data:`vta.tune.autovta.calibration.CALIBRATION_POINTS`) are synthesized for the board
with its core options (yosys ``synth_xilinx -family xcup``; cached in the user cache, so a
re-run reuses them), the model's LUT/FF coefficients are fitted on the ``--fit`` reports, and
its error is measured on the held-out ones (goal: LUTs within 5%). Reference, measured in the
same run on the same held-out reports: the model with the shipped xc7 coefficients (what
every family used before it had its own).

For each board of the family it then gives the largest GEMM of AutoVTA's space (square
blocks, batch 1 to 4) that fits the board by the fitted model and by the xc7 coefficients,
with the board's DSP budget and packing (``ceilings`` in the record).

The record holds every report's figures and the fitted coefficients (the data a shipped
per-family model is fitted to, :data:`vta.tune.autovta.resources.FAMILY_FITS`, with this
command as their source).

    .venv/bin/python bench/bench_resource_model.py [--board zcu104] [--fit LIST]
        [--held-out LIST] [--jobs N]

Each synthesis takes minutes (tens of minutes for a 1x16x16 or larger core).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from record import write_record

#: The fit and held-out sets: the cheapest points of the calibration set (a 1x4x4 on both
#: buses, 2x4x4, 1x8x8) to fit, a 1x8x8 on the other bus and a 2x8x8 to check.
FIT = "1x4x4/64,1x4x4/128,2x4x4/128,1x8x8/64"
HELD_OUT = "1x8x8/128,2x8x8/64"


def _points(text: str):
    """``BxBIxBO/BUS`` names -> (name, Config) of the calibration points they name (the
    Config carries the bus width)."""
    from vta.tune.autovta.calibration import calibration_points

    known = {f"{c.batch}x{c.block_in}x{c.block_out}/{c.bus_width}": c
             for c in calibration_points()}
    out = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        if name not in known:
            print(f"bench_resource_model: unknown point {name!r} "
                  f"(calibration points: {', '.join(known)})", file=sys.stderr)
            raise SystemExit(2)
        out.append((name, known[name]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="zcu104", help="a board of the family (default zcu104)")
    ap.add_argument("--fit", default=FIT, metavar="LIST", help=f"(default {FIT})")
    ap.add_argument("--held-out", default=HELD_OUT, metavar="LIST",
                    help=f"(default {HELD_OUT})")
    ap.add_argument("--jobs", type=int, default=1, help="syntheses at once (default 1)")
    args = ap.parse_args()

    import numpy as np
    from vta.boards import get_board
    from vta.tune.autovta.resources import FAMILY_FITS, KINDS, ResourceModel
    from vta.tune.autovta.synthcache import synthesize

    board = get_board(args.board)
    fit, held = _points(args.fit), _points(args.held_out)

    def one(point) -> dict:
        name, cfg = point
        print(f"  synthesizing {name} for {board.name} ({board.family}) ...", flush=True)
        t = time.monotonic()
        entry = synthesize(board.name, cfg)
        print(f"  {name}: " + ", ".join(f"{k} {entry['used'][k]:g}" for k in KINDS)
              + (" (cached)" if entry["cached"] else f" ({time.monotonic() - t:.0f} s)"),
              flush=True)
        return {"point": name, "config": cfg.params, "bus_width": cfg.bus_width,
                "used": {k: float(entry["used"][k]) for k in KINDS},
                "seconds": entry["seconds"], "date": entry["date"], "hw_hash": entry["hw_hash"]}

    print(f"== yosys reports ({board.title}, {board.fam.synth.split()[0]}, core options "
          f"{board.core_options or 'none'})")
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        reports = list(pool.map(one, fit + held))
    fit_r, held_r = reports[:len(fit)], reports[len(fit):]

    def samples(points, rs):
        return [(c, r["used"]) for (_, c), r in zip(points, rs)]

    model = ResourceModel.for_board(board)
    fitted = ResourceModel(board.family, model.dsp_budget, packed=model.packed)
    fitted.calibrate(samples(fit, fit_r))
    # the reference: xc7's shipped coefficients with this family's BRAM and DSP facts
    xc7 = FAMILY_FITS["xc7"]
    shipped_xc7 = ResourceModel(board.family, model.dsp_budget, np.array(xc7.lut),
                                np.array(xc7.ff), packed=model.packed)

    def held_errors(m: ResourceModel) -> list[dict]:
        return [{"point": r["point"], **e} for r, e in zip(held_r, m.errors(samples(held, held_r)))]

    out = {"board": board.name, "family": board.family, "fit": fit_r, "held_out": held_r,
           "coefficients": fitted.to_json()}
    print(f"\n== LUT/FF fitted on {len(fit_r)} reports; error on {len(held_r)} held-out reports")
    for label, m in (("fitted", fitted), ("xc7 coefficients (reference)", shipped_xc7)):
        errs = held_errors(m)
        for e in errs:
            print(f"  {label:30} {e['point']:>10}: "
                  + "  ".join(f"{k} {100 * e[k]:+.1f}%" for k in KINDS))
        mean = {k: sum(abs(e[k]) for e in errs) / len(errs) for k in KINDS}
        worst = {k: max(abs(e[k]) for e in errs) for k in KINDS}
        key = "held_out_error" if m is fitted else "reference_held_out_error"
        out[key] = {"per_point": errs, "mean": mean, "worst": worst}
    lut = out["held_out_error"]["worst"]["lut"]
    ref = out["reference_held_out_error"]["worst"]["lut"]
    out["goal_met"] = lut <= 0.05
    print(f"goal: LUTs within 5% on every held-out report: worst {100 * lut:.1f}% -> "
          f"{'MET' if lut <= 0.05 else 'NOT MET'} (xc7 coefficients: worst {100 * ref:.1f}%"
          + (f", {ref / lut:.1f}x the fitted model's)" if lut >= 1e-3 else ")"))
    out["ceilings"] = _ceilings(board.family, fitted, shipped_xc7)
    write_record("bench_resource_model", out,
                 {"xc7_coefficients": out["reference_held_out_error"]}, params=vars(args))
    return 0


def _largest_fitting(model, budget: dict) -> dict | None:
    """The GEMM shape of AutoVTA's space (square blocks, every batch) with the most MACs per
    cycle of which some point (buffers, bus) fits ``budget`` by ``model`` (fewer batch rows
    first on a tie), with that point's estimate; None when none fits."""
    import itertools

    from vta.isa import Config
    from vta.isa.errors import ConfigError
    from vta.tune.autovta.resources import KINDS
    from vta.tune.autovta.space import DEFAULT_RANGES as R

    best = None
    for lb, lk in itertools.product(R["LOG_BATCH"], R["LOG_BLOCK"]):
        for u, i, w, a, bw in itertools.product(
                R["LOG_UOP_BUFF_SIZE"], R["LOG_INP_BUFF_SIZE"], R["LOG_WGT_BUFF_SIZE"],
                R["LOG_ACC_BUFF_SIZE"], R["bus_width"]):
            try:
                cfg = Config(LOG_BATCH=lb, LOG_BLOCK=lk, LOG_UOP_BUFF_SIZE=u,
                             LOG_INP_BUFF_SIZE=i, LOG_WGT_BUFF_SIZE=w, LOG_ACC_BUFF_SIZE=a,
                             BUS_WIDTH=bw)
            except ConfigError:
                continue
            est = model.estimate(cfg)
            if all(est[k] <= budget[k] for k in KINDS):
                if best is None or cfg.macs_per_cycle > best["macs_per_cycle"]:
                    best = {"shape": f"{cfg.batch}x{cfg.block_in}x{cfg.block_out}",
                            "macs_per_cycle": cfg.macs_per_cycle, "estimate": est}
                break
    return best


def _ceilings(family: str, fitted, reference) -> dict:
    """Per board of ``family``: the largest GEMM of AutoVTA's space that fits the board by the
    fitted model and by the reference (xc7) coefficients, both with the board's DSP budget and
    packing."""
    from vta.boards.registry import all_boards
    from vta.tune.autovta.resources import ResourceModel

    out = {}
    print(f"\n== the largest GEMM of AutoVTA's space that fits each {family} board "
          "(square blocks, batch 1 to 4, some buffers and bus)")
    for b in (b for b in all_boards() if b.family == family):
        budget = b.budget.as_dict()
        row = {}
        for label, m in (("fitted", fitted), ("xc7", reference)):
            model = ResourceModel(family, float(b.budget.dsp), m.lut_coef, m.ff_coef,
                                  packed=m.packed)
            row[label] = _largest_fitting(model, budget)
        out[b.name] = row
        print(f"  {b.name:12} fitted: " + "; xc7 coefficients: ".join(
            f"{r['shape']} ({r['macs_per_cycle']} MACs/cycle, LUT {r['estimate']['lut']:,.0f}"
            f" of {budget['lut']:,.0f})" if r else "none" for r in row.values()))
    return out


if __name__ == "__main__":
    sys.exit(main())
