"""``vta compile``: an ONNX model -> a self-contained compiled module directory."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from vta.isa.errors import ConfigError
from vta.isa.fileio import check_input_file, check_output_dir

from .common import (
    add_config_args,
    add_input_shape_arg,
    board_clock_mhz,
    config_from_args,
    input_shapes_from_args,
    positive_int,
)

#: vta.compiler.graph.calibration.CALIBRATIONS (not imported here: `vta --help` stays fast)
CALIBRATIONS = ("mse", "max", "percentile")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="compile an ONNX model into a VTA module directory",
                       description="Import an ONNX model, quantize it to int8 (calibrated "
                                   "scales), partition it between VTA and the CPU, plan DRAM "
                                   "and write a module directory for `vta run`.")
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="the module directory (made when it does not exist; an existing one "
                        "must be an earlier module or empty, and is replaced atomically)")
    add_config_args(p)
    p.add_argument("--board", metavar="B", help="use a board's default configuration "
                                                "(see `vta boards`)")
    p.add_argument("--tuning-log", metavar="L",
                   help="a `vta tune` log: VTA layers whose workload it has tuned are compiled "
                        "with the best knobs found (the manifest records them and the cycles "
                        "they were measured at); the others get their template's default")
    add_input_shape_arg(p)
    p.add_argument("--calib", nargs="+", metavar="X.npy|X.npz", default=[],
                   help="calibration inputs: .npy files of one input or a stack of them "
                        "[K, *shape]; for a model of several inputs .npz files with an array "
                        "(or a stack) per input name; default: 4 synthetic standard-normal "
                        "inputs")
    p.add_argument("--float-layer", action="append", default=[], metavar="NAME",
                   help="keep this layer in float on the CPU (repeatable; `--report` lists "
                        "the full names)")
    p.add_argument("--cpu-layer", action="append", default=[], metavar="NAME",
                   help="run this int8 layer on the CPU instead of VTA (repeatable)")
    p.add_argument("--no-vta", action="store_true",
                   help="run every layer on the CPU (quantized all the same)")
    p.add_argument("--elementwise", choices=("vta", "cpu"), default="vta",
                   help="where the int8 element-wise ops run (residual adds with rescale, "
                        "Clip/ReLU6 not fused into a conv, LeakyRelu, HardSigmoid, HardSwish): "
                        "vta (default: on its ALU, the whole block stays on VTA) or cpu (int8 "
                        "host kernels; fewer VTA cycles, see docs/networks.md)")
    p.add_argument("--no-fuse", action="store_true",
                   help="keep each residual add a layer of its own; by default an add goes "
                        "into the epilogue of the conv or dense layer that makes one of its "
                        "operands, where the performance model finds that faster (same bits)")
    p.add_argument("--calibration", choices=CALIBRATIONS, default=CALIBRATIONS[0],
                   help="how each activation's int8 range is chosen from the calibration "
                        "runs: mse (default: the least quantization error), max, or "
                        "percentile (99.99th of |x|); graph outputs (and what reaches them "
                        "through shape ops, Sigmoid or Softmax) and tensors of few values "
                        "keep max; a QDQ model's own scales always win")
    p.add_argument("--per-channel", action="store_true",
                   help="one weight scale per output channel; VTA requantizes with vector "
                        "ALU SHR and MUL")
    p.add_argument("--bias-correction", action="store_true",
                   help="fold the mean error of each int8 conv/dense layer's rounded weights "
                        "(from the calibration inputs' channel means) into its int32 bias; "
                        "the int8 rule is unchanged (see docs/networks.md for when it helps)")
    p.add_argument("--pow2-scales", action="store_true",
                   help="round every scale to a power of two: requantization is a shift alone "
                        "(no fixed-point multiplier)")
    p.add_argument("--quantize-first", action="store_true",
                   help="quantize the first convolution (onto VTA) whatever its share of the "
                        "MACs; default: it stays float on the CPU while it holds under 15%% "
                        "of them (an image's 3 channels pad to a whole VTA block), and is "
                        "quantized above (--float-layer NAME keeps it float)")
    p.add_argument("--buffering", choices=("auto", "single"), default="auto",
                   help="default schedules: auto picks the fewest cycles (vta.sim.perf) among "
                        "all knobs, virtual threads included; single keeps to one thread "
                        "(fewer, larger instructions: faster on fsim)")
    p.add_argument("--host", choices=("llvm", "numpy"), default="llvm",
                   help="CPU layers: llvm (default) stores the LLVM IR of their kernels built by "
                        "the operator compiler (host/*.ll; `vta run` JIT-compiles it); numpy "
                        "stores none (they run numpy kernels, the reference)")
    p.add_argument("--jobs", "-j", type=positive_int, default=None, metavar="N",
                   help="worker processes for the default-knob searches of the workloads "
                        "whose knobs are not in the knob cache (with N > 1 those of the conv "
                        "and dense layers start while the model is quantized), and for "
                        "lowering the layers (default: the CPUs this process may use; 1: no "
                        "worker process). The module is the same for every N. A search taking "
                        "a while shows its progress on stderr when that is a terminal")
    p.add_argument("--report", action="store_true",
                   help="print the per-layer quantization report (full layer names) and the "
                        "VTA part's latency in ms and frames/s at the clock of --board (the "
                        "host part is measured by `vta run --report`)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vta.compiler.graph.calibration import load_samples  # deferred: off vta --help
    from vta.compiler.graph.module import (  # deferred: off vta --help
        compile_graph,
        is_module_or_empty,
    )
    from vta.compiler.graph.onnx_frontend import load_onnx  # deferred: off vta --help
    from vta.compiler.graph.summary import compile_summary  # deferred: off vta --help
    from vta.sim.blas import limit_blas_threads  # deferred: off vta --help

    limit_blas_threads(1)
    input_shapes = input_shapes_from_args(args)
    check_output_dir(args.output, "compiled module", replaceable=is_module_or_empty,
                     inputs=(args.model, args.config, args.tuning_log, *args.calib))
    if args.tuning_log:  # read after compiling: checked before
        check_input_file(args.tuning_log, "tuning log")
    board = None
    if args.board:
        if args.config or args.preset:
            raise ConfigError("give either --board or --config/--preset, not both")
        board = args.board
        cfg = _board_config(args.board)
    else:
        cfg = config_from_args(args)
    tuned = None
    if args.tuning_log:
        from vta.tune.vta_tasks import tuning_lookup  # deferred: off vta --help

        tuned = tuning_lookup(args.tuning_log, cfg)
    graph = load_onnx(args.model, input_shapes=input_shapes)
    samples = load_samples(graph, args.calib) if args.calib else []
    module = compile_graph(graph, cfg, compile_options(args, board), samples=samples,
                           tuned=tuned, jobs=args.jobs, progress=search_progress())
    if args.tuning_log:
        module.notes.append(f"tuning log {args.tuning_log}: tuned knobs compiled into "
                            f"{len(module.tuned_knobs)} VTA layer(s)")
    module.save(args.output)
    print(compile_summary(module, args.output))
    if args.report:
        print(quant_report(module))
        print(latency_line(module, board))
    return 0


def compile_options(args: argparse.Namespace, board: str | None):  # -> CompileOptions
    """The one options record of a compile, from its flags (the manifest records it)."""
    from vta.compiler.graph.options import (  # deferred: off vta --help
        LOWERED_OPS,
        VTA_OPS,
        CompileOptions,
    )

    return CompileOptions(
        float_layers=tuple(args.float_layer), cpu_layers=tuple(args.cpu_layer),
        vta_ops=() if args.no_vta else LOWERED_OPS if args.elementwise == "vta" else VTA_OPS,
        keep_first_float=not args.quantize_first, board=board,
        threads=args.buffering == "auto", host=args.host, per_channel=args.per_channel,
        calibration=args.calibration, pow2=args.pow2_scales,
        bias_correction=args.bias_correction, fuse=not args.no_fuse)


def search_progress(stream=None, after: float = 1.0) -> Callable[[int, int], None]:  # noqa: ANN001
    """``default knobs: K/N workloads`` on one stderr line, redrawn as searches finish
    (``K`` 0: they start): only when stderr is a terminal and they have taken ``after`` s."""
    stream = stream or sys.stderr
    tty = hasattr(stream, "isatty") and stream.isatty()
    t0 = time.monotonic()
    shown = False

    def show(k: int, total: int) -> None:
        nonlocal t0, shown
        if k == 0:
            t0 = time.monotonic()
            return
        if not tty or (not shown and (k >= total or time.monotonic() - t0 < after)):
            return
        shown = True
        stream.write(f"\rdefault knobs: {k}/{total} workloads" + ("\n" if k >= total else ""))
        stream.flush()
    return show


def _board_config(name: str):  # -> Config

    try:
        from vta.boards import get_board  # deferred: off vta --help
    except ImportError as e:
        raise ConfigError(f"--board needs vta.boards, which is not available ({e}); use "
                          f"--config FILE instead") from None
    return get_board(name).default_config


def quant_report(m) -> str:  # noqa: ANN001
    """Per layer (full names, as --float-layer/--cpu-layer take them): where it runs, its
    scales and requantization, and its error against float."""
    def f(v) -> str:  # noqa: ANN001
        if isinstance(v, list):  # per channel: the range
            return f"{_g(min(v))}..{_g(max(v))}"
        return "-" if v is None else _g(v)

    width = max([5] + [len(i.node) for i in m.layers])
    head = (f"{'layer':<{width}} {'op':<18} {'where':<5} {'in scale':>9} {'w scale':>19} "
            f"{'out scale':>9} {'requant':>24} {'rel.err':>8}")
    lines = [head, "-" * len(head)]
    # a layer and an add fused into one node (vta.compiler.graph.fuse) run where it runs
    into = {k: n.name for n in m.graph.nodes for k in n.attrs.get("fused", ())}
    for i in m.layers:
        err = "-" if i.rel_error is None else f"{i.rel_error:.4f}"
        where = m.partition.get(into.get(i.node, i.node), "cpu")
        tag = f"  (float: {i.float_reason})" if i.float_reason else ""
        if i.op == "Add" and isinstance(i.mul, list):  # a * ma + b * mb, rounded >> shift
            rq = f"*{i.mul[0]} + *{i.mul[1]} >>{i.shift}"
        else:
            rq = "-" if i.shift is None else (f">>{f(i.shift)}" + (
                f" *{f(i.mul)} >>{i.shift2}" if i.mul not in (None, 1) else ""))
        lines.append(f"{i.node:<{width}} {i.op[:18]:<18} {where:<5} {f(i.in_scale):>9} "
                     f"{f(i.w_scale):>19} {f(i.out_scale):>9} {rq:>24} {err:>8}{tag}")
    lines.append("value = q * scale; requant: >>shift, then *mul >>shift2 (fixed-point "
                 "multiplier, rounded); rel.err = ||dequant(int8) - float|| / ||float|| on the "
                 "first calibration input")
    return "\n".join(lines)


def _g(v) -> str:  # noqa: ANN001
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def latency_line(m, board: str | None) -> str:  # noqa: ANN001
    """The VTA part's latency at the board's clock (the module's recorded cycles)."""
    from vta.boards import DEFAULT_BOARD  # deferred: off vta --help
    from vta.compiler.graph.summary import kernel_cycles, latency  # deferred: off vta --help


    board = board or m.board
    lat = latency(kernel_cycles(m), board_clock_mhz(board or DEFAULT_BOARD),
                  "the module's recorded cycles: performance-model estimate")
    return lat.format(board or f"{DEFAULT_BOARD}, the default board; --board B for another")
