"""The conv2d default knobs' tie rule (vta.compiler.topi.defaults.TIE): settings within TIE of
the fastest full-program cycles tie and the fewest instructions win, against the fastest alone
(TIE = 0), measured in the same run (issue 38: stride-2 convs no slower per MAC on fsim than
stride-1 ones; no network's VTA cycles or compile time worse by more than 2%).

For each network: the VTA layers' perf-model cycles, their instructions, the compile's CPU
seconds with an empty knob cache (a fresh VTA_CACHE_DIR per compile, best of two, alternately,
after a warm-up compile of each) and fsim's CPU seconds end to end (best of --repeat, the two
modules run alternately), with the tie rule and with TIE = 0; fsim's outputs (numpy host
kernels) are checked bit for bit against the int8 numpy reference. Where a network has 3x3
convs of stride 2 and 1 on VTA (ResNet-18): fsim's CPU picoseconds per MAC of each kind per
stage (bench_networks_resnet18's figure), for both variants in the same run.

    .venv/bin/python bench/bench_knob_tie.py [--nets resnet18,mobilenet_v1,dcgan] [--repeat 5]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from bench_networks_resnet18 import _layer_seconds, _stride_figures  # noqa: E402
from bench_networks_vta import layer_cycles  # noqa: E402
from record import write_record  # noqa: E402
from vta.compiler.graph import zoo  # noqa: E402
from vta.compiler.graph.executor import Executor  # noqa: E402
from vta.compiler.graph.int8_executor import run_quantized  # noqa: E402
from vta.compiler.graph.module import compile_graph  # noqa: E402
from vta.compiler.graph.onnx_frontend import from_onnx  # noqa: E402
from vta.compiler.topi import defaults  # noqa: E402
from vta.isa import Config  # noqa: E402
from vta.sim.blas import limit_blas_threads  # noqa: E402


def _compile(graph, cfg: Config, tie: float):  # noqa: ANN001, ANN202
    """Compile with ``defaults.TIE = tie``, an empty knob cache and none of the searches'
    in-memory results (in process, one worker: its CPU time is the compile's): (module, CPU s)."""
    old, cache = defaults.TIE, os.environ.get("VTA_CACHE_DIR")
    defaults.TIE = tie
    defaults._RANKED.clear()
    defaults._RECENT.clear()
    try:
        with tempfile.TemporaryDirectory() as d:
            os.environ["VTA_CACHE_DIR"] = d
            c0 = time.process_time()
            m = compile_graph(graph, cfg, jobs=1)
            return m, time.process_time() - c0
    finally:
        defaults.TIE = old
        if cache is None:
            os.environ.pop("VTA_CACHE_DIR", None)
        else:
            os.environ["VTA_CACHE_DIR"] = cache


def run_net(name: str, cfg: Config, repeat: int) -> tuple[dict, dict]:
    graph = from_onnx(zoo.build(name))
    x = {next(iter(graph.inputs)):
         np.random.default_rng(0).standard_normal(zoo.ZOO[name].input_shape())
         .astype(np.float32)}
    ties = (defaults.TIE, 0.0)
    for t in ties:  # the first compiles in a process also load and warm the kit
        _compile(graph, cfg, t)
    comp = {t: float("inf") for t in ties}
    mods = {}
    for _ in range(2):  # alternately, best of two each
        for t in ties:
            mods[t], c = _compile(graph, cfg, t)
            comp[t] = min(comp[t], c)
    res = {t: {"perf_mcycles": sum(layer_cycles(mods[t], x, "perf")[0].values()) / 1e6,
               "insns": sum(k.insns for k in mods[t].kernels.values()),
               "compile_cpu_s": comp[t]} for t in ties}
    exs = {t: Executor(mods[t], "fsim", host="numpy") for t in ties}  # numpy: the reference
    try:
        for t in ties:
            out = exs[t].run(x)
            want = run_quantized(mods[t].graph, x)
            res[t]["fsim_bit_exact"] = all(np.array_equal(out[o], want[o]) for o in graph.outputs)
            res[t]["fsim_cpu_s"] = float("inf")
        layer_s: dict = {t: {} for t in ties}
        for _ in range(repeat):  # alternately, so that both see the same machine load
            for t in ties:
                c0 = time.process_time()
                exs[t].run(x)
                res[t]["fsim_cpu_s"] = min(res[t]["fsim_cpu_s"], time.process_time() - c0)
                for k, v in _layer_seconds(exs[t], x, 1).items():
                    layer_s[t][k] = min(layer_s[t].get(k, float("inf")), v)
        for t in ties:
            # (none where no stage has 3x3 convs of both strides on VTA)
            with contextlib.suppress(ZeroDivisionError):
                res[t]["fsim_conv_ps_per_mac"] = _stride_figures(mods[t], layer_s[t])
    finally:
        for ex in exs.values():
            ex.close()
    f, r = res[ties[0]], res[ties[1]]
    for k in ("perf_mcycles", "insns", "compile_cpu_s", "fsim_cpu_s"):
        f[f"{k.removesuffix('_s').removesuffix('_mcycles')}_ratio"] = f[k] / r[k]
    print(f"{name}: perf {f['perf_mcycles']:.3f} M cycles vs {r['perf_mcycles']:.3f} M "
          f"with TIE=0 ({f['perf_ratio']:.4f}x); {f['insns']} vs {r['insns']} instructions "
          f"({f['insns_ratio']:.3f}x); compile {f['compile_cpu_s']:.2f} vs "
          f"{r['compile_cpu_s']:.2f} s CPU ({f['compile_cpu_ratio']:.3f}x); fsim "
          f"{f['fsim_cpu_s'] * 1e3:.1f} vs {r['fsim_cpu_s'] * 1e3:.1f} ms CPU "
          f"({f['fsim_cpu_ratio']:.3f}x); bit-exact {f['fsim_bit_exact']} / "
          f"{r['fsim_bit_exact']}", flush=True)
    if "fsim_conv_ps_per_mac" in f:
        a, b = f["fsim_conv_ps_per_mac"], r["fsim_conv_ps_per_mac"]
        print(f"  fsim per MAC, 3x3 stride-2 / stride-1 convs of the same stages: "
              f"{a['stride2']:.0f}/{a['stride1']:.0f} ps ({a['ratio']:.2f}) vs "
              f"{b['stride2']:.0f}/{b['stride1']:.0f} ps ({b['ratio']:.2f}) with TIE=0", flush=True)
    return f, r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="resnet18,mobilenet_v1,dcgan")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    limit_blas_threads(1)
    cfg = Config()
    fig: dict = {"tie": defaults.TIE}
    ref: dict = {}
    for name in args.nets.split(","):
        fig[name], ref[name] = run_net(name, cfg, args.repeat)
    write_record("bench_knob_tie", fig, ref, params=vars(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
