"""The performance model against tsim: error table, speed, and (with --calibrate) a fit of
its constants.

Programs: matmul tiles (single- and double-buffered), random token-correct programs and compiler
conv layers at the default config (bench/perf_samples.py; tsim cycles cached). Goal: within 10%
of tsim's total cycles and at least 100x faster.

    .venv/bin/python bench/bench_perf_model.py [--calibrate] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from perf_samples import collect  # noqa: E402
from vta.isa import Config, decode_program  # noqa: E402
from vta.sim.perf import DEFAULT_PARAMS, FITTED, PerfModel, calibrate  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibrate", action="store_true",
                    help="fit the constants on every other sample, report on the rest")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--preset", default=None, help="another configuration (default: PYNQ)")
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
    model = PerfModel(cfg, params)
    print(f"\n{'program':<40}{'tsim':>10}{'perf':>10}{'error':>8}")
    errs, t_perf = [], 0.0
    for name, insns, cyc in decoded:
        t0 = time.perf_counter()
        est = model.run(insns)["cycles"]
        t_perf += time.perf_counter() - t0
        errs.append(abs(est - cyc) / cyc)
        print(f"{name:<40}{cyc:>10,}{est:>10,}{(est - cyc) / cyc:>+8.1%}")
    total = sum(c for _, _, c in decoded)
    print(f"\nmean |error| {sum(errs) / len(errs):.1%}, max {max(errs):.1%} (goal <= 10%)")
    print(f"perf model: {total / t_perf / 1e6:.1f} M simulated cycles per second")
    if args.calibrate:
        print("\nparameters:", asdict(params))
    return 0


if __name__ == "__main__":
    sys.exit(main())
