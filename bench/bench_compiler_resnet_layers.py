"""ResNet-18 conv layers C2-C12 (TVM paper, Table 2) compiled with the default schedules.

For each layer: cycles and GEMM utilisation (ideal GEMM cycles / measured cycles) with and without
virtual threads (latency hiding), on the cycle-level backend chosen by --backend:
"tsim" (Verilator RTL, if vta.hw.tsim and verilator are available), "perf" (the calibrated
performance model vta.sim.perf), or "auto" (tsim if available, else perf). The reference is the
GEMM core's peak (BATCH x BLOCK_IN x BLOCK_OUT MACs per cycle) and, for latency hiding, the same
layer without virtual threads measured in the same run.

Roofline: a layer is compute-bound when its ideal GEMM cycles (MACs / peak) exceed the cycles
the 64-bit memory port needs to move its tensors once (input + weights + output bytes at 8 bytes
per cycle); the goal (>= 88% of peak with virtual threads) is judged on those layers. The
"ceiling" column is the best utilisation the core allows: besides the GEMM micro-ops, every
output entry needs a GEMM reset, the two-operand bias ADD (one cycle: its src, the bias entry,
repeats along the tile, so the compute module reads it once) and one pass per chain of the
immediate ALU steps (shift, multiply, round, shift, min, max: one chain through the stages
around the core's ALU; vta.isa.fusion), so ceiling = ideal / max(GEMM + reset + epilogue
cycles, memory cycles).

    .venv/bin/python bench/bench_compiler_resnet_layers.py [--layers C2,C6] [--check]
"""

from __future__ import annotations

import argparse
import datetime
import time

import numpy as np
from record import write_record
from vta import runtime as rt
from vta.compiler import topi
from vta.isa import AluInsn, Config
from vta.isa.fusion import alu_chains
from vta.isa.layout import AluOp

#: name: (H, W, IC, OC, K, S) from the TVM paper's Table 2.
LAYERS = {
    "C2": (56, 56, 64, 64, 3, 1), "C3": (56, 56, 64, 64, 1, 1),
    "C4": (56, 56, 64, 128, 3, 2), "C5": (56, 56, 64, 128, 1, 2),
    "C6": (28, 28, 128, 128, 3, 1), "C7": (28, 28, 128, 256, 3, 2),
    "C8": (28, 28, 128, 256, 1, 2), "C9": (14, 14, 256, 256, 3, 1),
    "C10": (14, 14, 256, 512, 3, 2), "C11": (14, 14, 256, 512, 1, 2),
    "C12": (7, 7, 512, 512, 3, 1),
}


#: bytes per cycle of the memory port (tsim's default PYNQ-like 64-bit port at one word/cycle)
PORT_BYTES_PER_CYCLE = 8.0
#: the default compile's epilogue of ResNet-18's layer1.0.conv1 (calibrated scales, fused Relu):
#: + bias, >> 5, * 1526, + 2**14, >> 15, clip to [0, 127]
EPILOGUE = {"bias": True, "shift": 5, "mul": 1526, "shift2": 15, "clip": (0, 127)}
#: ... its operations with an immediate, in program order
EPILOGUE_IMM_OPS = (AluOp.SHR, AluOp.MUL, AluOp.ADD, AluOp.SHR, AluOp.MIN, AluOp.MAX)


def epilogue_cycles() -> int:
    """Compute cycles of that epilogue per accumulator entry: the two-operand bias ADD (1: the
    bias entry is read once per row of the tile) and one per ALU chain of the operations with
    an immediate (vta.isa.fusion)."""
    steps = [AluInsn(alu_opcode=op, use_imm=1, imm=1, uop_bgn=0, uop_end=1, iter_out=1,
                     iter_in=1) for op in EPILOGUE_IMM_OPS]
    return 1 + sum(1 for n in alu_chains(steps).values() if n)


EPILOGUE_CYCLES = epilogue_cycles()
#: the goal: utilisation with virtual threads on the compute-bound layers
GOAL = 0.88


def roofline(cfg: Config, name: str) -> dict:
    """Ideal GEMM cycles, memory cycles at the port's bandwidth and the core's ceiling."""
    h, w, ic, oc, k, s = LAYERS[name]
    pad = k // 2
    oh = (h + 2 * pad - k) // s + 1
    ow = (w + 2 * pad - k) // s + 1
    macs = oh * ow * oc * ic * k * k
    ideal = macs / cfg.macs_per_cycle
    dram = h * w * ic + oc * ic * k * k + oh * ow * oc  # int8 tensors, each moved once
    mem = dram / PORT_BYTES_PER_CYCLE
    entries = oh * ow * (oc // cfg.block_out) * cfg.batch  # accumulator entries (1 x BLOCK)
    uops = entries * (ic // cfg.block_in) * k * k + entries * (1 + EPILOGUE_CYCLES)
    return {"ideal": ideal, "mem": mem, "intensity": ideal / mem,
            "compute_bound": ideal >= mem, "ceiling": ideal / max(uops, mem)}


def pick_backend(name: str) -> str:
    if name != "auto":
        return name
    import shutil

    try:
        import vta.hw.tsim  # noqa: F401
    except ImportError:
        return "perf"
    return "tsim" if shutil.which("verilator") else "perf"


def run_layer(cfg: Config, name: str, backend: str, vt: bool, check: bool) -> dict:
    h, w, ic, oc, k, s = LAYERS[name]
    pad = k // 2
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    ds = (1, ic // bi, h, w, b, bi)
    ks = (oc // bo, ic // bi, k, k, bo, bi)
    knobs = topi.conv2d_knobs(ds, ks, (s, s), (pad, pad), cfg, virtual_threads=vt,
                              epilogue=topi.Epilogue(**EPILOGUE))
    t0 = time.perf_counter()
    op = topi.conv2d_packed(ds, ks, strides=(s, s), padding=(pad, pad), knobs=knobs,
                            config=cfg, target=None, **EPILOGUE)
    # a fresh device per measurement: no micro-kernels left resident by an earlier run
    op.build(backend, device=rt.open(backend, cfg, arena_size=8 << 20))
    rng = np.random.default_rng(0)
    d = rng.integers(-128, 128, ds, dtype=np.int8)
    kk = rng.integers(-128, 128, ks, dtype=np.int8)
    bias = rng.integers(-(1 << 16), 1 << 16, (1, oc // bo, 1, 1, b, bo), dtype=np.int32)
    out = np.zeros(op.out_shape, np.int8)
    stats = op.module(d, kk, bias, out)
    compile_s = time.perf_counter() - t0
    oh = (h + 2 * pad - k) // s + 1
    ow = (w + 2 * pad - k) // s + 1
    macs = oh * ow * oc * ic * k * k
    ideal = macs / cfg.macs_per_cycle
    cycles = stats.cycles
    res = {"layer": name, "vt": vt, "knobs": knobs, "cycles": cycles,
           "util": (ideal / cycles) if cycles else None,
           "insns": stats.insn_count, "gemm_uops": stats.gemm_uops, "seconds": compile_s}
    if check:
        fs = topi.conv2d_packed(ds, ks, strides=(s, s), padding=(pad, pad), knobs=knobs,
                                config=cfg, target="fsim", **EPILOGUE)
        ref = topi.conv2d_reference(d, kk, (s, s), (pad, pad), fs.info["epilogue"], bias)
        # the perf model computes no data: there only the fsim run is checked
        res["correct"] = bool(np.array_equal(fs(d, kk, bias), ref)
                              and (backend == "perf" or np.array_equal(out, ref)))
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="auto", choices=["auto", "tsim", "perf"])
    ap.add_argument("--layers", default=",".join(LAYERS), help="comma-separated, e.g. C2,C9")
    ap.add_argument("--check", action="store_true", help="also check results on fsim")
    args = ap.parse_args(argv)
    cfg = Config()
    backend = pick_backend(args.backend)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{now}; backend: {backend}; config 1x{cfg.block_in}x{cfg.block_out}, peak "
          f"{cfg.macs_per_cycle} MACs/cycle; utilisation = ideal GEMM cycles / cycles")
    print(f"roofline: compute-bound when ideal GEMM cycles >= tensor bytes / "
          f"{PORT_BYTES_PER_CYCLE:g} B/cycle (intensity = their ratio); ceiling = best "
          f"utilisation the core allows (GEMM + reset + {EPILOGUE_CYCLES} epilogue cycles per "
          "output entry, or memory)")
    hdr = (f"{'layer':6} {'cycles(vt=1)':>13} {'util':>6} {'cycles(vt=2)':>13} {'util':>6} "
           f"{'speedup':>7} {'insns':>7} {'bound':>12} {'ceiling':>7} {'goal':>5}  knobs (vt=2)")
    print(hdr)
    total = {False: 0, True: 0}
    judged: list[tuple[str, bool]] = []
    capped: list[str] = []
    layers: dict[str, dict] = {}
    for name in args.layers.split(","):
        try:
            r0 = run_layer(cfg, name, backend, False, args.check)
        except Exception as e:  # noqa: BLE001 - report and fall back to the model
            if args.backend != "auto" or backend != "tsim":
                raise
            print(f"tsim failed ({type(e).__name__}: {str(e).splitlines()[0][:120]}); "
                  "falling back to the perf model")
            backend = "perf"
            r0 = run_layer(cfg, name, backend, False, args.check)
        r1 = run_layer(cfg, name, backend, True, args.check)
        total[False] += r0["cycles"] or 0
        total[True] += r1["cycles"] or 0
        sp = r0["cycles"] / r1["cycles"] if r0["cycles"] and r1["cycles"] else float("nan")
        kn = r1["knobs"]
        ks = (f"h{kn['tile_h']} w{kn['tile_w']} ci{kn['tile_ci']} co{kn['tile_co']} "
              f"oc_nt{kn['oc_nthread']} h_nt{kn['h_nthread']}")
        chk = ""
        if args.check:
            chk = "  fsim " + ("OK" if r0["correct"] and r1["correct"] else "MISMATCH")
        rl = roofline(cfg, name)
        bound = f"{'compute' if rl['compute_bound'] else 'memory'} {rl['intensity']:.2f}"
        goal = "-"
        if rl["compute_bound"] and rl["ceiling"] < GOAL:
            goal = "cap"  # compute-bound, but the core's per-output work caps it below the goal
            capped.append(f"{name} ({r1['util']:.1%} of a {rl['ceiling']:.1%} ceiling)")
        elif rl["compute_bound"] and r1["util"] is not None:
            ok = r1["util"] >= GOAL
            judged.append((name, ok))
            goal = "met" if ok else "MISS"
        layers[name] = {"cycles_1thread": r0["cycles"], "util_1thread_pct": _pct(r0["util"]),
                        "cycles": r1["cycles"], "util_pct": _pct(r1["util"]),
                        "ceiling_pct": 100 * rl["ceiling"], "compute_bound": rl["compute_bound"],
                        "knobs": kn, "goal": goal}
        print(f"{name:6} {r0['cycles']:>13} {r0['util']:>6.1%} {r1['cycles']:>13} "
              f"{r1['util']:>6.1%} {sp:>7.2f} {r1['insns']:>7} {bound:>12} "
              f"{rl['ceiling']:>7.1%} {goal:>5}  {ks}{chk}", flush=True)
    print(f"total cycles: {total[False]} without, {total[True]} with virtual threads "
          f"({total[False] / max(total[True], 1):.2f}x)")
    met = [n for n, ok in judged if ok]
    missed = [n for n, ok in judged if not ok]
    print(f"goal (>= {GOAL:.0%} of peak with virtual threads on the compute-bound layers): met "
          f"on {len(met)}/{len(judged)}" + (f"; missed on {', '.join(missed)}" if missed else ""))
    if capped:
        print(f"compute-bound but capped below {GOAL:.0%} by the core (reset + epilogue ALU "
              f"cycles per output entry): {', '.join(capped)}")
    # reference: the ideal GEMM cycles of each layer (utilisation = ideal / cycles) and the
    # single-thread schedule, both from this run
    write_record("bench_compiler_resnet_layers",
                 {"backend": backend, "layers": layers, "total_cycles": total[True],
                  "goal_met": f"{len(met)}/{len(judged)}"},
                 {"total_cycles_1thread": total[False]},
                 params={"backend": args.backend, "layers": args.layers})
    return 0


def _pct(u: float | None) -> float | None:
    return None if u is None else 100 * u


if __name__ == "__main__":
    raise SystemExit(main())
