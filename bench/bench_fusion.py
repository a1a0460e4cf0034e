"""Graph-level fusion on VTA (issue 38): each residual add in the epilogue of the conv or dense
layer that produces one of its operands (vta.compiler.graph.fuse), against the unfused compile
(``CompileOptions(fuse=False)``, ``vta compile --no-fuse``) measured in the same run.

For each network: compile CPU time, warm (one process, ``jobs=1``: the same module as with
workers; best of five, alternating) and cold (a fresh knob cache: every default-knob search
runs; a child process each, its workers' CPU counted), wall time on a shared machine measuring
its load; the VTA layers' cycles on the
performance model and (``--tsim``, Verilator RTL) on tsim, fused and unfused, and whether the
fused module's outputs are the unfused graph's int8 reference, bit for bit. Goal: ResNet-18's
whole VTA part (convs, dense and adds) <= 7.3M tsim cycles; no network's VTA cycles or compile
time worse by more than 2%. Writes its record with bench/record.py.

    .venv/bin/python bench/bench_fusion.py [--nets resnet18,mobilenet_v1,dcgan] [--tsim]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from bench_networks_vta import layer_cycles  # noqa: E402
from record import write_record  # noqa: E402
from vta.compiler.graph import zoo  # noqa: E402
from vta.compiler.graph.int8_executor import run_quantized  # noqa: E402
from vta.compiler.graph.module import compile_graph  # noqa: E402
from vta.compiler.graph.onnx_frontend import from_onnx  # noqa: E402
from vta.compiler.graph.options import CompileOptions  # noqa: E402
from vta.isa import Config  # noqa: E402

#: Compiles of each kind timed per network (the best counts).
REPEATS = 5


def _compile(graph, cfg: Config, fuse: bool):  # noqa: ANN001, ANN202
    """The module and its compile's CPU seconds (in this process: ``jobs=1``)."""
    t0 = time.process_time()
    m = compile_graph(graph, cfg, CompileOptions(fuse=fuse), jobs=1)
    return m, time.process_time() - t0


def _cold_compile(name: str, fuse: bool) -> float:
    """CPU seconds of a compile with an empty knob cache, in a child process (its in-memory
    caches empty too) with its worker processes, as a user's first ``vta compile`` runs."""
    with tempfile.TemporaryDirectory() as cache:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, __file__, "--cold", name] + ([] if fuse else
                                                                     ["--no-fuse"]),
                       check=True, env={**os.environ, "VTA_CACHE_DIR": cache})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def run_net(name: str, cfg: Config, tsim: bool) -> tuple[dict, dict]:
    cold = {fuse: _cold_compile(name, fuse) for fuse in (False, True)}
    graph = from_onnx(zoo.build(name))
    x = {next(iter(graph.inputs)):
         np.random.default_rng(0).standard_normal(zoo.ZOO[name].input_shape())
         .astype(np.float32)}
    compile_graph(graph, cfg)  # fills the knob cache: both compiles below read it
    best = {True: float("inf"), False: float("inf")}
    mods = {}
    for _ in range(REPEATS):
        for fuse in (False, True):
            mods[fuse], t = _compile(graph, cfg, fuse)
            best[fuse] = min(best[fuse], t)
    fused, plain = mods[True], mods[False]
    names = [n.name for n in fused.graph.nodes if "residual" in n.attrs]
    fig: dict = {"fused_layers": len(names), "compile_cpu_s": best[True]}
    ref: dict = {"compile_cpu_s": best[False]}
    fig["compile_ratio"] = best[True] / best[False]
    fig["cold_compile_cpu_s"], ref["cold_compile_cpu_s"] = cold[True], cold[False]
    fig["cold_compile_ratio"] = cold[True] / cold[False]
    targets = ["perf"] + (["tsim"] if tsim else [])
    want = run_quantized(plain.graph, x)  # the unfused graph's int8 reference
    for target in targets:
        cyc, out = {}, {}
        for fuse, m in mods.items():
            t0 = time.perf_counter()
            layers, out[fuse] = layer_cycles(m, x, target)
            cyc[fuse] = sum(layers.values())
            if fuse:
                fig[f"{target}_seconds"] = time.perf_counter() - t0
        fig[f"{target}_mcycles"], ref[f"{target}_mcycles"] = cyc[True] / 1e6, cyc[False] / 1e6
        fig[f"{target}_ratio"] = cyc[True] / cyc[False]
        if target != "perf":
            fig[f"{target}_bit_exact"] = all(np.array_equal(out[True][o], want[o])
                                             for o in graph.outputs)
    print(f"{name}: {len(names)} adds fused; compile {best[True]:.2f} s CPU vs unfused "
          f"{best[False]:.2f} s ({fig['compile_ratio']:.3f}x), cold {cold[True]:.2f} s vs "
          f"{cold[False]:.2f} s ({fig['cold_compile_ratio']:.3f}x); " + "; ".join(
              f"{t} {fig[f'{t}_mcycles']:.3f} M cycles vs unfused {ref[f'{t}_mcycles']:.3f} M "
              f"({fig[f'{t}_ratio']:.3f}x)" + (f", bit-exact: {fig[f'{t}_bit_exact']}"
                                              if t != "perf" else "") for t in targets),
          flush=True)
    return fig, ref


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="resnet18,mobilenet_v1,dcgan")
    ap.add_argument("--tsim", action="store_true")
    ap.add_argument("--cold", metavar="NET", help=argparse.SUPPRESS)  # one cold compile
    ap.add_argument("--no-fuse", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cold:
        compile_graph(from_onnx(zoo.build(args.cold)), Config(),
                      CompileOptions(fuse=not args.no_fuse))
        return 0
    cfg = Config()
    tsim = args.tsim and _have_verilator()
    if args.tsim and not tsim:
        print("tsim: skipped (verilator is not installed)")
    figs, refs = {}, {}
    for n in args.nets.split(","):
        figs[n], refs[n] = run_net(n, cfg, tsim)
    write_record("bench_fusion", figs, refs, params={"nets": args.nets, "tsim": args.tsim})
    return 0


def _have_verilator() -> bool:
    from vta.hw.verilator import ToolMissingError, find_verilator

    try:
        find_verilator()
    except ToolMissingError:
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
