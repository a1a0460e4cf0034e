"""The performance model against tsim: training and held-out error, error on a configuration it
was not fitted on, speed, and (with --calibrate) a fit of its constants.

Programs: matmul tiles (single- and double-buffered), random token-correct programs and compiler
conv layers (bench/perf_samples.py; tsim cycles cached). The constants (vta.sim.perf.FITTED) are
fitted on the even-numbered samples of the default configuration (``--calibrate`` refits them
there); the report gives the error on those (training), on the odd-numbered ones (held out) and
on every sample of ``--other-preset`` (not fitted at all). Speed: a 1024^3 matmul on the model
against tsim, both timed in this run. Goal: within 10% of tsim's cycles, at least 100x faster.
Writes a record under bench/results/.

    .venv/bin/python bench/bench_perf_model.py [--calibrate] [--quick] [--other-preset small]
        [--no-speed]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from perf_samples import collect  # noqa: E402
from record import write_record  # noqa: E402
from vta.isa import Config, decode_program  # noqa: E402
from vta.sim.perf import DEFAULT_PARAMS, FITTED, PerfModel, calibrate  # noqa: E402


def errors(model: PerfModel, decoded: list) -> tuple[list[float], float]:
    """Signed relative error of each sample (printed) and the model's seconds in total."""
    print(f"\n{'program':<40}{'tsim':>10}{'perf':>10}{'error':>8}")
    errs, t_perf = [], 0.0
    for name, insns, cyc in decoded:
        t0 = time.perf_counter()
        est = model.run(insns).cycles
        t_perf += time.perf_counter() - t0
        errs.append((est - cyc) / cyc)
        print(f"{name:<40}{cyc:>10,}{est:>10,}{(est - cyc) / cyc:>+8.1%}")
    return errs, t_perf


def stats(errs: list[float]) -> dict[str, float]:
    a = [abs(e) for e in errs]
    return {"samples": len(a), "mean_abs_pct": 100 * sum(a) / len(a), "max_abs_pct": 100 * max(a)}


def speed(cfg: Config, params: object) -> dict[str, float]:
    """Seconds of the model and of tsim on a 1024^3 matmul (one run each)."""
    from vta.hw import tsim
    from vta.isa.image import as_program_bytes
    from vta.sim.programs import matmul_program

    prog, dram, _ = matmul_program(cfg, 1024, 1024, 1024, double_buffer=True)
    insns = decode_program(as_program_bytes(prog, cfg), cfg)
    t0 = time.perf_counter()
    est = PerfModel(cfg, params).run(insns).cycles
    t_perf = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = tsim.run_program(prog, dram, cfg)
    t_tsim = time.perf_counter() - t0
    out = {"perf_ms": 1e3 * t_perf, "tsim_s": t_tsim, "speedup": t_tsim / t_perf,
           "perf_cycles": int(est), "tsim_cycles": r.stats.cycles}
    print(f"\n1024^3 matmul: perf model {out['perf_ms']:.0f} ms, tsim {t_tsim:.1f} s "
          f"({out['speedup']:.0f}x faster); cycles {est:,} vs {out['tsim_cycles']:,}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibrate", action="store_true",
                    help="refit the constants on the even-numbered samples first")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--preset", default=None, help="the fitted configuration (default: PYNQ)")
    ap.add_argument("--other-preset", default="small",
                    help="a configuration the model was not fitted on ('' to skip)")
    ap.add_argument("--no-speed", action="store_true", help="skip the 1024^3 speed run")
    args = ap.parse_args()
    cfg = Config.preset(args.preset) if args.preset else Config()
    samples = collect(cfg, quick=args.quick)
    decoded = [(name, decode_program(prog, cfg), cyc) for name, prog, cyc in samples]
    params = DEFAULT_PARAMS
    if args.calibrate:
        train = [(insns, cyc) for k, (_, insns, cyc) in enumerate(decoded) if k % 2 == 0]
        params, err = calibrate(train, cfg, params, rounds=4)
        print(f"calibrated on {len(train)} samples (mean error {err:.1%}):")
        for k in FITTED:
            print(f"  {k:<16} {getattr(params, k):g}")
    errs, t_perf = errors(PerfModel(cfg, params), decoded)
    fig = {"training": stats(errs[0::2]), "held_out": stats(errs[1::2])}
    ref = {"tsim_cycles": {name: cyc for name, _, cyc in decoded}}
    total = sum(c for _, _, c in decoded)
    fig["sim_mcycles_per_s"] = total / t_perf / 1e6
    if args.other_preset:
        ocfg = Config.preset(args.other_preset)
        odec = [(n, decode_program(p, ocfg), c) for n, p, c in collect(ocfg, quick=args.quick)]
        oerrs, _ = errors(PerfModel(ocfg, params), odec)
        fig["other_config"] = {"preset": args.other_preset, **stats(oerrs)}
        ref["other_tsim_cycles"] = {n: c for n, _, c in odec}
    for k in ("training", "held_out", "other_config"):
        if k in fig:
            print(f"{k:13} mean |error| {fig[k]['mean_abs_pct']:.1f}%, max "
                  f"{fig[k]['max_abs_pct']:.1f}% over {fig[k]['samples']} programs (goal <= 10%)")
    print(f"perf model: {fig['sim_mcycles_per_s']:.1f} M simulated cycles per second")
    if not args.no_speed:
        fig["speed"] = speed(cfg, params)
    if args.calibrate:
        print("\nparameters:", asdict(params))
    write_record("bench_perf_model", fig, ref,
                 params={"calibrate": args.calibrate, "quick": args.quick,
                         "preset": args.preset or "default", "other_preset": args.other_preset,
                         "perf_params": asdict(params)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
