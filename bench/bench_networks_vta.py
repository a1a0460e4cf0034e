"""VTA cycles of the zoo networks (default config): the perf model against tsim, per layer.

For each network: compile time, the VTA layers' cycles on the performance model (vta.sim.perf)
and on tsim (Verilator RTL, the reference measured in the same run), the model's error against
tsim, the share of the GEMM peak of every VTA layer, the compute-bound floor (VTA MACs / MACs
per cycle) and the micro-op floor of the compiled programs (their GEMM and ALU micro-ops back to
back on the compute module: what the epilogue adds to the GEMM peak), in all and for the
conv/dense layers apart from the element-wise (ALU-only) ones. With ``--check`` the tsim
outputs are compared with the int8 numpy reference of the quantized graph. The tsim cycles of
the earlier separate instruction generator (vta_lower, deleted when every layer moved to the
topi templates) are printed beside, as constants with their date. Writes its record with
bench/record.py.

    .venv/bin/python bench/bench_networks_vta.py [--nets resnet18,mobilenet_v1,dcgan]
        [--no-tsim] [--check]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from record import write_record  # noqa: E402
from vta.compiler.graph import zoo  # noqa: E402
from vta.compiler.graph.executor import Executor  # noqa: E402
from vta.compiler.graph.int8_executor import run_quantized  # noqa: E402
from vta.compiler.graph.module import compile_graph  # noqa: E402
from vta.compiler.graph.onnx_frontend import from_onnx  # noqa: E402
from vta.isa import AluInsn, Config, GemmInsn, decode_program  # noqa: E402
from vta.isa.fusion import alu_chains  # noqa: E402
from vta.sim.perf import src_reads  # noqa: E402

#: tsim cycles of the VTA layers with the earlier instruction generator (vta_lower), measured
#: by this benchmark on 2026-11-25 at commit 6d5b636 (bit-exact), before it was deleted.
VTA_LOWER_TSIM = {"date": "2026-11-25", "commit": "6d5b636",
                  "cycles": {"resnet18": 7877594, "mobilenet_v1": 6239270, "dcgan": 2481706}}


def layer_cycles(module, x, target: str) -> tuple[dict[str, int], dict]:  # noqa: ANN001
    with Executor(module, target, host="numpy") as ex:  # numpy host ops: the reference
        out = ex.run(x)
        rep = ex.last_report
    return {r.node: int(r.cycles) for r in rep.layers if r.where != "cpu" and r.cycles}, out


def uop_cycles(program: bytes, cfg: Config) -> int:
    """Cycles the compute module's micro-ops take back to back: one per GEMM micro-op (resets
    included) and per ALU micro-op, one more per two-operand ALU micro-op that reads its src
    through the accumulator's one read port (vta.sim.perf.src_reads), and one per micro-op of
    an ALU chain for all its members (vta.isa.fusion). No schedule of this program on this
    hardware runs in fewer cycles."""
    insns = decode_program(program, cfg)
    chains = alu_chains(insns)
    total = 0
    for k, i in enumerate(insns):
        if isinstance(i, GemmInsn | AluInsn) and chains.get(k) != 0:
            total += i.iter_out * i.iter_in * max(0, i.uop_end - i.uop_bgn)
            if isinstance(i, AluInsn) and not i.use_imm:
                total += src_reads(i)
    return total


def run_net(name: str, cfg: Config, tsim: bool, check: bool) -> dict:
    model = zoo.build(name)
    graph = from_onnx(model)
    shape = zoo.ZOO[name].input_shape()
    x = {next(iter(graph.inputs)):
         np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    t0 = time.perf_counter()
    module = compile_graph(graph, cfg)
    t_compile = time.perf_counter() - t0
    vmacs = {k: module.macs[k] for k, v in module.partition.items() if v == "vta"}
    floor = sum(vmacs.values()) / cfg.macs_per_cycle
    uops = {k: uop_cycles(module.kernels[k].program, cfg) for k in vmacs if k in module.kernels}
    perf, _ = layer_cycles(module, x, "perf")
    rec = {"net": name, "compile_s": round(t_compile, 2), "vta_layers": len(vmacs),
           "floor_cycles": floor, "uop_cycles": sum(uops.values()),
           "perf_cycles": sum(perf.values()), "layers": {}}
    print(f"{name}: compile {t_compile:.2f} s, {len(vmacs)} VTA layers, floor "
          f"{floor / 1e6:.3f} M cycles (GEMM peak), {rec['uop_cycles'] / 1e6:.3f} M (micro-ops "
          f"back to back); perf model {sum(perf.values()) / 1e6:.3f} M", flush=True)
    ts: dict[str, int] = {}
    if tsim:
        t0 = time.perf_counter()
        ts, out = layer_cycles(module, x, "tsim")
        rec["tsim_cycles"] = sum(ts.values())
        rec["tsim_seconds"] = round(time.perf_counter() - t0, 1)
        err = (rec["perf_cycles"] - rec["tsim_cycles"]) / rec["tsim_cycles"]
        rec["perf_error"] = err
        msg = (f"  tsim {rec['tsim_cycles'] / 1e6:.3f} M cycles ({rec['tsim_seconds']} s); "
               f"perf model error {err * 100:+.1f}%; {floor / rec['tsim_cycles'] * 100:.1f}% of "
               f"peak")
        if check:
            ref = run_quantized(module.graph, x)
            ok = all(np.array_equal(out[o], ref[o]) for o in graph.outputs)
            rec["tsim_bit_exact"] = ok
            msg += f"; bit-exact with the int8 reference: {ok}"
        print(msg, flush=True)
    # the conv/dense layers (the GEMM templates: conv2d, its transpose, dense) apart from the
    # element-wise ones (ALU only)
    gemm = [k for k in vmacs if k in module.kernels
            and module.kernels[k].template != "elementwise"]
    rec["conv_dense"] = {"layers": len(gemm), "uop_cycles": sum(uops[k] for k in gemm),
                         "perf_cycles": sum(perf.get(k, 0) for k in gemm),
                         "tsim_cycles": sum(ts.get(k, 0) for k in gemm) if ts else None}
    cd = rec["conv_dense"]
    c_all = rec.get("tsim_cycles") or rec["perf_cycles"]
    c_cd = cd["tsim_cycles"] or cd["perf_cycles"]
    print(f"  {len(gemm)} conv/dense layers: {c_cd / 1e6:.3f} M cycles (micro-op floor "
          f"{cd['uop_cycles'] / 1e6:.3f} M); {len(vmacs) - len(gemm)} element-wise layers: "
          f"{(c_all - c_cd) / 1e6:.3f} M", flush=True)
    old = VTA_LOWER_TSIM["cycles"].get(name)
    if old and ts:
        print(f"  vta_lower ({VTA_LOWER_TSIM['date']}, conv/dense layers): {old / 1e6:.3f} M "
              f"cycles on tsim; the conv/dense layers now take {cd['tsim_cycles'] / old:.3f}x of "
              "it", flush=True)
    for k in vmacs:
        c = ts.get(k) or perf.get(k)
        knobs = module.kernels[k].knobs if k in module.kernels else None
        rec["layers"][k] = {"macs": vmacs[k], "perf": perf.get(k), "tsim": ts.get(k),
                            "uop_cycles": uops.get(k),
                            "util": vmacs[k] / cfg.macs_per_cycle / c if c else None,
                            "knobs": knobs}
        print(f"  {k[:34]:<34} {vmacs[k] / 1e6:9.2f} MMAC uops {uops.get(k) or 0:>9} perf "
              f"{perf.get(k) or 0:>9} tsim {ts.get(k) or 0:>9} util "
              f"{rec['layers'][k]['util'] or 0:6.1%}", flush=True)
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="resnet18,mobilenet_v1,dcgan")
    ap.add_argument("--no-tsim", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    cfg = Config()
    tsim = not args.no_tsim and shutil.which("verilator") is not None
    recs = {n: run_net(n, cfg, tsim, args.check) for n in args.nets.split(",")}
    fig = {n: {"perf_mcycles": r["perf_cycles"] / 1e6,
               "tsim_mcycles": r["tsim_cycles"] / 1e6 if "tsim_cycles" in r else None,
               "perf_error_pct": r["perf_error"] * 100 if "perf_error" in r else None,
               "peak_pct": r["floor_cycles"] / r["tsim_cycles"] * 100 if "tsim_cycles" in r
               else None, "compile_s": r["compile_s"], "bit_exact": r.get("tsim_bit_exact"),
               "conv_dense_tsim_mcycles": _mc(r["conv_dense"]["tsim_cycles"]),
               "conv_dense_perf_mcycles": _mc(r["conv_dense"]["perf_cycles"]),
               "elementwise_tsim_mcycles": _mc(r["tsim_cycles"] - r["conv_dense"]["tsim_cycles"])
               if "tsim_cycles" in r else None,
               "layers": r["layers"]} for n, r in recs.items()}
    ref = {n: {"tsim_cycles": r.get("tsim_cycles"), "floor_mcycles": r["floor_cycles"] / 1e6,
               "uop_mcycles": r["uop_cycles"] / 1e6,
               "conv_dense_uop_mcycles": r["conv_dense"]["uop_cycles"] / 1e6,
               "vta_lower_tsim_mcycles": VTA_LOWER_TSIM["cycles"].get(n, 0) / 1e6}
           for n, r in recs.items()}
    write_record("bench_networks_vta", fig, dict(ref, vta_lower=VTA_LOWER_TSIM),
                 params=vars(args))
    return 0


def _mc(cycles: int | None) -> float | None:
    return None if cycles is None else cycles / 1e6


if __name__ == "__main__":
    raise SystemExit(main())
