"""AutoVTA benchmark: the best configuration under a board's budget against the default 1x16x16
config on ResNet-18's VTA cycles (goal: >= 3x on ZCU104 and Ultra96-V2, 2.5x on PYNQ-Z1), and
the resource model's error against yosys synthesis (goal <= 15%).

Both references are measured in the same run: the default configuration's cycles come from the
same performance model on the same lowered layers, and the model's error is the leave-one-out
error over the synthesized calibration set (each report predicted by a model fitted to the
others), plus the error of the fitted model on every other cached report of the board.

    .venv/bin/python bench/bench_autovta.py [--trials N] [--exhaustive] [--synth]
        [--image-size N] [--board pynq-z1] [--skip-search]

``--synth`` synthesizes the missing calibration points first (yosys; minutes each, cached in
the user cache). Without it, the cached reports are used and the missing ones are listed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from record import write_record

#: The issues' goals: this many times fewer ResNet-18 cycles than the default config.
GOALS = {"zcu104": 3.0, "ultra96-v2": 3.0}
DEFAULT_GOAL = 2.5


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="pynq-z1")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--image-size", type=int, default=None)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--exhaustive", action="store_true",
                    help="evaluate every point of the space that fits (grid search)")
    ap.add_argument("--synth", action="store_true",
                    help="synthesize the missing calibration configurations (slow)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--skip-search", action="store_true",
                    help="only the resource model's error (no search)")
    args = ap.parse_args(argv)

    from vta.boards import get_board
    from vta.isa import Config
    from vta.tune.autovta.calibration import calibration_points, synthesis_samples
    from vta.tune.autovta.explore import explore
    from vta.tune.autovta.network import load_network
    from vta.tune.autovta.resources import KINDS, ResourceModel
    from vta.tune.autovta.synthcache import cache_dir, hw_hash
    from vta.tune.progress import ProgressBar

    board = get_board(args.board)
    goal = GOALS.get(board.name, DEFAULT_GOAL)
    out: dict = {"board": board.name, "model": args.model, "goal": goal}

    # ------------------------------------------------------------ resource model vs synthesis
    print(f"== resource model against yosys ({board.title}, {board.fam.synth.split()[0]})")
    samples, missing = synthesis_samples(board.name, calibration_points(), synth=args.synth,
                                         progress=lambda m: print("  " + m, flush=True))
    model = ResourceModel.for_board(board)
    if len(samples) >= 2:
        err = model.calibrate(samples)
        print(f"  {len(samples)} synthesized configurations ({model.calibration_method}):")
        for (cfg, used), e in zip(samples, model.errors(samples)):
            print(f"    {cfg.batch}x{cfg.block_in}x{cfg.block_out} bus{cfg.bus_width}: "
                  + "  ".join(f"{k} {used[k]:>7g} ({100 * e[k]:+.1f}% fit)" for k in KINDS))
        print("  mean relative error: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in err.items())
              + "   (goal <= 15%)")
        out["calibration"] = {"samples": len(samples), "method": model.calibration_method,
                              "error": err, "coefficients": model.to_json()}
    else:
        print(f"  only {len(samples)} synthesis report(s) cached: run with --synth")
    if missing:
        print(f"  not synthesized yet: {', '.join(missing)}")
        out["missing"] = missing
    # other cached reports of this board (e.g. finalists): out-of-sample checks
    seen = {(json.dumps(c.params, sort_keys=True), c.bus_width) for c, _ in samples}
    extra = []
    for f in sorted((cache_dir("synth")).glob(f"{board.name}-*.json")):
        e = json.loads(f.read_text())
        if (json.dumps(e["config"], sort_keys=True), e["bus_width"]) in seen:
            continue
        if e.get("hw_hash") != hw_hash():  # made from older hardware sources
            continue
        cfg = Config(**e["config"], BUS_WIDTH=e["bus_width"])
        est = model.estimate(cfg)
        rel = {k: (est[k] - e["used"][k]) / max(e["used"][k], 1) for k in KINDS}
        extra.append(rel)
        print(f"  held out {cfg.batch}x{cfg.block_in}x{cfg.block_out} bus{e['bus_width']}: "
              + ", ".join(f"{k} {100 * v:+.1f}%" for k, v in rel.items()))
    if extra:
        out["held_out_error"] = {k: sum(abs(r[k]) for r in extra) / len(extra) for k in KINDS}

    if args.skip_search:
        write_record("bench_autovta", out, None, params=vars(args))
        return 0
    # ------------------------------------------------------------ best config vs the default
    print(f"\n== {args.model} VTA cycles under {board.title}'s budget "
          f"(LUT {board.budget.lut:g}, FF {board.budget.ff:g}, BRAM {board.budget.bram:g}, "
          f"DSP {board.budget.dsp:g})")
    t0 = time.perf_counter()
    kw = {"image_size": args.image_size} if args.image_size else {}
    base = Config()  # the data widths the search keeps (int8 x int8 -> int32)
    net = load_network(args.model, base, **kw)
    print(f"  {net.name}: {len(net.layers)} VTA layers, {net.macs / 1e9:.2f} GMAC "
          f"(loaded in {time.perf_counter() - t0:.1f} s)")
    bar = ProgressBar(args.trials, "  search")
    res = explore(board, net, base=base, n_trial=10**6 if args.exhaustive else args.trials,
                  model=model, tuner="grid" if args.exhaustive else "auto", jobs=args.jobs,
                  progress=bar)
    bar.close()
    ref, best = res.reference, res.best
    print(f"  space: {res.space_size} points, {res.fitting_size} fit the budget by the model; "
          f"{len(res.points)} evaluated with {res.tuner} in {res.seconds:.0f} s")
    for label, p in (("default", ref), ("best", best)):
        if p is None:
            continue
        r = p.resources
        print(f"  {label:8} {p.key:<40} {p.cycles:>12,} cycles   LUT {r['lut']:>6.0f} "
              f"FF {r['ff']:>6.0f} BRAM {r['bram']:>5.1f} DSP {r['dsp']:>4.0f} "
              f"fits={p.fits}")
    if best is not None and ref.cycles:
        print(f"  speedup: {ref.cycles / best.cycles:.2f}x fewer cycles than the default "
              f"(goal >= {goal:g}x)")
        out.update(reference=ref.to_json(), best=best.to_json(),
                   speedup=ref.cycles / best.cycles, evaluated=len(res.points),
                   fitting=res.fitting_size, tuner=res.tuner)
        out["ceiling"] = ceiling(res, net, model, board, goal)
    write_record("bench_autovta", out, {"default": out.get("reference")}, params=vars(args))
    return 0


def ceiling(res, net, model, board, goal: float) -> dict:
    """The most any fitting core can gain: the network's MACs at the largest GEMM core that
    fits (by the resource model), perfectly utilised, against the default's cycles; and what
    the next larger GEMM shapes would need."""
    from vta.isa import Config
    from vta.isa.errors import ConfigError
    from vta.tune.autovta.resources import KINDS

    fitting = [p for p in res.points if p.fits]
    macs = max(p.cand.cfg.macs_per_cycle for p in fitting)
    bound = net.macs / macs
    ref = res.reference
    print(f"  ceiling: the largest fitting GEMM core has {macs} MACs/cycle; at 100% "
          f"utilisation {net.name} takes >= {bound:,.0f} cycles, at most "
          f"{ref.cycles / bound:.2f}x fewer than the default")
    goal_macs = net.macs / (ref.cycles / goal)
    shape = 1 << (int(goal_macs) - 1).bit_length()  # GEMM cores come in powers of two
    print(f"  {goal:g}x needs >= {goal_macs:,.0f} MACs/cycle even at 100% utilisation: a core of "
          f">= {shape} MACs ({shape // 2} MACs would give at most "
          f"{ref.cycles * shape / 2 / net.macs:.2f}x)")
    need = {}
    base = ref.cand.cfg.params
    top = max(p.cand.cfg.LOG_BLOCK for p in fitting)
    for lb, lk in ((1, top), (0, top + 1)):
        try:
            cfg = Config(**{**base, "LOG_BATCH": lb, "LOG_BLOCK": lk},
                         BUS_WIDTH=ref.cand.bus_width)
        except ConfigError:
            continue
        est = model.estimate(cfg)
        over = [f"{k.upper()} {est[k]:,.0f}/{board.budget.as_dict()[k]:,.0f}" for k in KINDS
                if est[k] > board.budget.as_dict()[k]]
        need[f"{cfg.batch}x{cfg.block_in}x{cfg.block_out}"] = est
        print(f"    {cfg.batch}x{cfg.block_in}x{cfg.block_out} ({cfg.macs_per_cycle} MACs): "
              f"{'fits' if not over else 'over budget: ' + ', '.join(over)}")
    return {"macs_per_cycle": macs, "goal_macs_per_cycle": goal_macs, "compute_bound_cycles": bound,
            "max_speedup": ref.cycles / bound, "larger_cores": need}



if __name__ == "__main__":
    sys.exit(main())
