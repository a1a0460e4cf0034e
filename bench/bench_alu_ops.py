"""Element-wise int8 ops on VTA's ALU against the same ops on the CPU, in one run.

For each network (zoo, default config): the module compiled with its element-wise int8 ops
(residual adds, clips, LeakyRelu, HardSigmoid, HardSwish) on VTA, and the same module with
them on the CPU (``vta_ops`` = conv and dense only; the reference). Per configuration: the
VTA layers' perf-model cycles (vta.sim.perf), the element-wise layers' share of them and their
time at the board's clock, and the wall time of those ops' LLVM host kernels when they run on
the CPU (this machine, one thread). With ``--check`` the VTA run on fsim is compared with the
int8 reference bit for bit; with ``--tsim`` each element-wise layer's operator (its module
knobs, random int8 inputs) also runs on tsim (Verilator RTL), whose cycles check the perf
model's. Writes its record with bench/record.py.

    .venv/bin/python bench/bench_alu_ops.py [--nets resnet18] [--board pynq-z1] [--check]
        [--tsim]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402

import numpy as np  # noqa: E402
from record import write_record  # noqa: E402
from vta.boards import get_board  # noqa: E402
from vta.compiler.graph import zoo  # noqa: E402
from vta.compiler.graph.executor import Executor  # noqa: E402
from vta.compiler.graph.int8_executor import run_quantized  # noqa: E402
from vta.compiler.graph.module import compile_graph  # noqa: E402
from vta.compiler.graph.onnx_frontend import from_onnx  # noqa: E402
from vta.compiler.graph.options import VTA_OPS, CompileOptions  # noqa: E402
from vta.compiler.ops import alu_kind  # noqa: E402
from vta.isa import Config  # noqa: E402


def _best_seconds(module, x, target: str, repeat: int = 1) -> dict[str, float]:  # noqa: ANN001
    """Layer -> the best wall time of ``repeat`` runs (LLVM host kernels, the default)."""
    best: dict[str, float] = {}
    with Executor(module, target) as ex:
        for _ in range(repeat):
            ex.run(x)
            for r in ex.last_report.layers:
                best[r.node] = min(best.get(r.node, float("inf")), r.seconds)
    return best


def tsim_cycles(module, names: list[str]) -> int:  # noqa: ANN001
    """tsim cycles of the element-wise layers ``names``, each operator run on its own with
    the module's knobs (the outputs checked against the numpy rule)."""
    from vta.compiler.graph.lowering import plan_alu
    from vta.compiler.topi.elementwise import elementwise_reference, identity_weight

    cfg, total = module.cfg, 0
    rng = np.random.default_rng(1)
    for k in names:
        layer = plan_alu(module.graph.node(k), module.shapes, cfg)
        op = layer.operator(cfg, module.kernels[k].knobs)
        op.build("tsim")
        xs = [rng.integers(-128, 128, (layer.tiles, 1, cfg.batch, cfg.block), dtype=np.int8)
              for _ in range(layer.spec.n_inputs)]
        out = op(*xs, identity_weight(cfg))
        if not np.array_equal(out, elementwise_reference(layer.spec, *xs)):
            raise SystemExit(f"{k}: tsim result differs from the int8 rule")
        total += int(op.module.last_stats.cycles)
    return total


def run_net(name: str, cfg: Config, clock_mhz: float, check: bool, tsim: bool) -> dict:
    graph = from_onnx(zoo.build(name))
    x = {next(iter(graph.inputs)): np.random.default_rng(0)
         .standard_normal(zoo.ZOO[name].input_shape()).astype(np.float32)}
    on_vta = compile_graph(graph, cfg)
    on_cpu = compile_graph(graph, cfg, CompileOptions(vta_ops=VTA_OPS))
    ew = [n.name for n in on_vta.graph.nodes if alu_kind(n.op)]
    ew_vta = [k for k in ew if on_vta.partition[k] == "vta"]
    cyc = {k: k_.cycles for k, k_ in on_vta.kernels.items()}
    ew_cycles = sum(cyc[k] for k in ew_vta)
    secs = _best_seconds(on_cpu, x, "perf", repeat=3)
    host_ms = sum(secs[k] for k in ew) * 1e3
    rec = {"net": name, "elementwise_layers": len(ew), "on_vta": len(ew_vta),
           "ops": sorted({on_vta.graph.node(k).op for k in ew}),
           "vta_cycles": round(sum(cyc.values())), "elementwise_cycles": round(ew_cycles),
           "elementwise_vta_ms": round(ew_cycles / (clock_mhz * 1e3), 3),
           "vta_cycles_ops_on_cpu": round(sum(k.cycles for k in on_cpu.kernels.values())),
           "elementwise_host_ms": round(host_ms, 3)}
    if tsim:
        rec["elementwise_cycles_tsim"] = tsim_cycles(on_vta, ew_vta)
    if check:
        with Executor(on_vta, "fsim", host="numpy") as ex:  # numpy host ops: the reference
            out = ex.run(x)
        ref = run_quantized(on_vta.graph, x)
        rec["bit_exact_fsim"] = all(np.array_equal(out[o], ref[o]) for o in graph.outputs)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default="resnet18")
    ap.add_argument("--board", default="pynq-z1")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--tsim", action="store_true")
    args = ap.parse_args()
    cfg = Config()
    clock = get_board(args.board).clock_mhz
    figures, reference = {}, {}
    print(f"{'net':<14} {'ew ops':>6} {'on VTA':>6} {'VTA cycles':>11} {'ew cycles':>10} "
          f"{'ew ms @' + str(clock):>10} | {'VTA cyc (ew on CPU)':>19} {'ew host ms':>10}")
    for name in args.nets.split(","):
        r = run_net(name, cfg, clock, args.check, args.tsim)
        print(f"{name:<14} {r['elementwise_layers']:>6} {r['on_vta']:>6} {r['vta_cycles']:>11} "
              f"{r['elementwise_cycles']:>10} {r['elementwise_vta_ms']:>10} | "
              f"{r['vta_cycles_ops_on_cpu']:>19} {r['elementwise_host_ms']:>10}"
              + (f"  bit-exact {r['bit_exact_fsim']}" if "bit_exact_fsim" in r else "")
              + (f"  ew cycles on tsim {r['elementwise_cycles_tsim']}"
                 if "elementwise_cycles_tsim" in r else ""))
        refs = ("vta_cycles_ops_on_cpu", "elementwise_host_ms", "elementwise_cycles_tsim")
        figures[name] = {k: v for k, v in r.items() if k not in refs}
        reference[name] = {k: r[k] for k in refs if k in r}
    write_record("bench_alu_ops", figures, reference,
                 params={"nets": args.nets, "board": args.board, "clock_mhz": clock,
                         "check": args.check, "tsim": args.tsim})


if __name__ == "__main__":
    main()
