"""``vta run``: execute a compiled module (or an ONNX model) on a target."""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from vta.isa.errors import ConfigError
from vta.isa.fileio import write_atomic
from vta.runtime.backends import module_targets

from .common import add_config_args, board_clock_mhz, check_outputs, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a compiled module or an ONNX model on an input",
                       description="Run a module directory from `vta compile` (VTA layers on "
                                   "the target, the rest on the CPU) or an ONNX model (float "
                                   "on --target cpu; compiled on the fly for VTA targets).")
    p.add_argument("module", metavar="DIR|MODEL.onnx")
    p.add_argument("--input", required=True, metavar="X.npy|X.npz",
                   help="the input tensor (.npy), or for a model of several inputs a .npz with "
                        "an array per input name; a stack of B inputs [B, *input shape] runs "
                        "B images in one process and writes outputs [B, *output shape]")
    p.add_argument("--target", default="fsim", type=_target, metavar="TARGET",
                   help=f"where VTA layers run: {', '.join(module_targets())} (default: fsim; "
                        "cpu runs everything on the host) or virtual:BOARD (the board's "
                        "generated top Verilog under Verilator, driven by the board's runtime "
                        "device; e.g. virtual:pynq-z1)")
    p.add_argument("-o", "--output", metavar="Y.npy|Y.npz",
                   help="write the output here: Y.npz holds every output of the model under "
                        "its name, Y.npy the first")
    p.add_argument("--host", choices=("llvm", "numpy"), default="llvm",
                   help="CPU layers: llvm (default) runs the module's LLVM kernels (host/*.ll, "
                        "JIT-compiled at load) where it has them; numpy runs the numpy kernels "
                        "(the reference)")
    p.add_argument("--report", action="store_true",
                   help="per layer: where it ran, MACs, time, cycles, utilisation; then the "
                        "VTA part in ms and frames/s at the board's clock and the host part "
                        "(the CPU layers) as measured on this machine's CPU")
    p.add_argument("--report-json", metavar="REPORT.json",
                   help="write the per-layer report (target, and per layer: where it ran, MACs, "
                        "seconds, cycles, GEMM MACs) as JSON")
    p.add_argument("--board", metavar="B",
                   help="the board whose clock --report uses (default: the module's board; "
                        "see `vta boards`)")
    add_config_args(p.add_argument_group("compiling an ONNX model on the fly"))
    p.set_defaults(func=run)


def _target(text: str) -> str:
    if text in module_targets() or (
            text.startswith("virtual:") and len(text) > len("virtual:")):
        return text
    raise argparse.ArgumentTypeError(f"invalid target {text!r}: choose "
                                     f"{', '.join(module_targets())} or virtual:BOARD")


def run(args: argparse.Namespace) -> int:
    from vta.compiler.graph.inputs import (  # deferred: off vta --help
        batch_size,
        feeds_for,
        load_arrays,
    )
    from vta.sim.blas import limit_blas_threads  # deferred: off vta --help

    limit_blas_threads(1)
    src = Path(args.module)
    check_outputs({"output file": args.output, "report file": args.report_json},
                  inputs=(args.module, args.input, args.config))
    if args.board:
        board_clock_mhz(args.board)  # an unknown board fails now, not after the run
    arrays = load_arrays(args.input)
    graph, module = _load_model(src, args, {k: x.shape for k, x in arrays.items()})
    feeds = feeds_for(graph.inputs, arrays, args.input)
    count = batch_size(graph.inputs, feeds, f"input file {args.input}")
    images = [feeds] if count is None else \
        [{name: x[b] for name, x in feeds.items()} for b in range(count)]
    if module is None and args.target == "cpu":
        from vta.compiler.graph.passes import optimize  # deferred: off vta --help

        fused = optimize(graph)  # BatchNormalization folded, activations fused (as onnxruntime)
        runs = [_run_cpu(fused, image) for image in images]
        cfg = config_from_args(args)
    else:
        if module is None:
            module = _compile(graph, src, args)
        runs = _run_module(module, images, args)
        cfg = module.cfg
    outs, report = runs[0] if count is None else _stacked(runs)
    _emit(args, graph, outs, report, cfg, module)
    return 0


def _stacked(runs: list) -> tuple[dict, object]:
    """The outputs of a batch's runs stacked ``[B, *shape]``, and one report whose times,
    cycles and MACs are the sums over the images."""
    from vta.compiler.graph.executor import RunReport  # deferred: off vta --help

    outs = {name: np.stack([o[name] for o, _ in runs]) for name in runs[0][0]}
    reports = [r for _, r in runs]
    layers = []
    for recs in zip(*(r.layers for r in reports)):
        first = recs[0]
        cycles = [r.cycles for r in recs]
        gemm = [r.gemm_macs for r in recs]
        layers.append(replace(first, macs=sum(r.macs for r in recs),
                              seconds=sum(r.seconds for r in recs),
                              cycles=None if None in cycles else sum(cycles),
                              gemm_macs=None if None in gemm else sum(gemm)))
    return outs, RunReport(reports[0].target, tuple(layers), sum(r.seconds for r in reports))


def _load_model(src, args: argparse.Namespace, shapes: dict):  # noqa: ANN001, ANN202
    """(graph, module): a compiled module directory, or (graph, None) for an .onnx model, its
    inputs' symbolic dimensions sized by the input arrays' ``shapes`` (by input name; ``""``
    for a model's only input), or by their shapes less the first dimension (a batch) when
    those do not fit."""
    if src.is_dir():
        from vta.compiler.graph.module import load_module  # deferred: off vta --help

        if args.config or args.preset:
            raise ConfigError(f"{src} is a compiled module with its own configuration; "
                              f"--config/--preset only apply to an .onnx model (recompile the "
                              f"module with vta compile --config instead)")
        module = load_module(src)
        return module.graph, module
    from vta.compiler.graph.errors import ModelError  # deferred: off vta --help
    from vta.compiler.graph.onnx_frontend import load_onnx  # deferred: off vta --help

    try:
        return load_onnx(src, input_shapes=shapes), None
    except ModelError as e:  # perhaps a batch: [B, *input shape]
        if not all(len(s) > 1 for s in shapes.values()):
            raise
        try:
            return load_onnx(src, input_shapes={k: s[1:] for k, s in shapes.items()}), None
        except ModelError:
            raise e from None


def _run_cpu(graph, feeds: dict):  # noqa: ANN001, ANN202
    """(outputs, report) of the float reference on the host CPU, timed per layer."""
    from vta.compiler.graph.executor import LayerRecord, RunReport  # deferred: off vta --help
    from vta.compiler.graph.reference import infer_shapes, run_float  # deferred: off vta --help
    from vta.compiler.ops import node_macs  # deferred: off vta --help

    t0 = time.perf_counter()
    times: dict[str, float] = {}
    outs = run_float(graph, feeds, times=times)
    seconds = time.perf_counter() - t0
    shapes = infer_shapes(graph)
    report = RunReport("cpu", tuple(
        LayerRecord(n.name, n.op, "cpu", node_macs(n, shapes, graph.params), times[n.name])
        for n in graph.nodes), seconds)
    return outs, report


def _compile(graph, src, args: argparse.Namespace):  # noqa: ANN001, ANN202

    from vta.compiler.graph.module import compile_graph  # deferred: off vta --help
    from vta.compiler.graph.options import CompileOptions  # deferred: off vta --help

    print(f"compiling {src} for {args.target} (use `vta compile` to keep the module)",
          file=sys.stderr)
    return compile_graph(graph, config_from_args(args), CompileOptions(host=args.host))


def _run_module(module, images: list[dict], args: argparse.Namespace) -> list:  # noqa: ANN001
    """(outputs, report) of the compiled module on ``args.target`` for each image (the device
    is opened once)."""
    from vta.compiler.graph.executor import Executor, progress_printer  # deferred: off vta --help

    runs = []
    with Executor(module, args.target, progress=progress_printer(),
                  host=args.host) as ex:
        for feeds in images:
            outs = ex.run(feeds)
            runs.append((outs, ex.last_report))
    return runs


def _emit(args: argparse.Namespace, graph, outs: dict, report, cfg,
          module) -> None:  # noqa: ANN001
    """Write the output and report files, print the report or the outputs' first values."""
    if args.output:
        write_atomic(args.output, _output_bytes(args.output, graph.outputs, outs),
                     "output file")
    if args.report_json:
        write_atomic(args.report_json, json.dumps(report.to_json(), indent=1) + "\n",
                     "report file")
    if args.report:
        print(report.format(cfg))
        if module is not None and module.kernels:
            print(_latency(module, report, args.board))
    if not args.output and not args.report and not args.report_json:
        for name in graph.outputs:
            y = outs[name]
            print(f"output {name}: shape {list(y.shape)}, dtype {y.dtype}; first values "
                  f"{np.array2string(y.reshape(-1)[:8], precision=4)}")


def _output_bytes(path: str, names: list[str], outs: dict) -> bytes:
    """Every output by name (``.npz``), or the first (``.npy``; a note on stderr when there
    are more)."""
    buf = io.BytesIO()
    if path.lower().endswith(".npz"):
        np.savez(buf, **{name: outs[name] for name in names})
    else:
        np.save(buf, outs[names[0]])
        if len(names) > 1:
            print(f"note: {path} holds the first of the model's {len(names)} outputs "
                  f"({names[0]}); give -o Y.npz for all of them", file=sys.stderr)
    return buf.getvalue()


def _latency(module, report, board: str | None) -> str:  # noqa: ANN001
    """The VTA part at the board's clock: the target's own cycle counts when it has them
    (tsim, rtl, perf), the performance model's otherwise (fsim, cpu)."""
    from vta.boards import DEFAULT_BOARD  # deferred: off vta --help
    from vta.compiler.graph.summary import (  # deferred: off vta --help
        host_part,
        kernel_cycles,
        latency,
    )


    board = board or module.board
    shown = board or f"{DEFAULT_BOARD}, the default board; --board B for another"
    measured = {r.node: r.cycles for r in report.layers if r.cycles}
    if measured and len(measured) == len(module.kernels):
        cycles, source = measured, f"cycles counted by {report.target}"
    else:
        cycles = kernel_cycles(module)
        source = "the module's recorded cycles: performance-model estimate"
    lat = latency(cycles, board_clock_mhz(board or DEFAULT_BOARD), source)
    host = {r.node: r.seconds for r in report.layers if r.where == "cpu"}
    return lat.format(shown) + "\n" + host_part(host, lat)
