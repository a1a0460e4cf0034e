"""``vta compile``: an ONNX model -> a self-contained compiled module directory."""

from __future__ import annotations

import argparse

from .common import add_config_args, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="compile an ONNX model into a VTA module directory",
                       description="Import an ONNX model, quantize it to int8 (power-of-two "
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
    p.add_argument("--calib", nargs="+", metavar="X.npy", default=[],
                   help="calibration inputs (one input or a stack); default: 4 synthetic "
                        "standard-normal inputs")
    p.add_argument("--float-layer", action="append", default=[], metavar="NAME",
                   help="keep this layer in float on the CPU (repeatable)")
    p.add_argument("--cpu-layer", action="append", default=[], metavar="NAME",
                   help="run this int8 layer on the CPU instead of VTA (repeatable)")
    p.add_argument("--no-vta", action="store_true",
                   help="run every layer on the CPU (quantized all the same)")
    p.add_argument("--per-channel", action="store_true",
                   help="one weight exponent (and requantization shift) per output channel; "
                        "VTA applies the shifts as a vector ALU SHR")
    p.add_argument("--quantize-first", action="store_true",
                   help="quantize the first convolution too (default: it stays float)")
    p.add_argument("--buffering", choices=("auto", "single"), default="auto",
                   help="default schedules: auto picks the fewest cycles (vta.sim.perf) among "
                        "all knobs, virtual threads included; single keeps to one thread "
                        "(fewer, larger instructions: faster on fsim)")
    p.add_argument("--host", choices=("llvm", "numpy"), default="llvm",
                   help="CPU layers: llvm (default) stores the LLVM IR of their kernels built by "
                        "the operator compiler (host/*.ll; `vta run` JIT-compiles it); numpy "
                        "stores none (they run numpy kernels, the reference)")
    p.add_argument("--report", action="store_true",
                   help="print the per-layer quantization report")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vta.compiler.graph.module import VTA_OPS, compile_graph, is_module_or_empty
    from vta.compiler.graph.onnx_frontend import load_onnx
    from vta.compiler.graph.quantize import load_samples
    from vta.isa.errors import ConfigError
    from vta.isa.fileio import check_input_file, check_output_dir
    from vta.sim.blas import limit_blas_threads

    limit_blas_threads(1)
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
        from vta.tune.vta_tasks import tuning_lookup

        tuned = tuning_lookup(args.tuning_log, cfg)
    graph = load_onnx(args.model)
    samples = load_samples(graph, args.calib) if args.calib else []
    module = compile_graph(graph, cfg, samples=samples, float_layers=args.float_layer,
                           cpu_layers=args.cpu_layer, vta_ops=() if args.no_vta else VTA_OPS,
                           keep_first_float=not args.quantize_first, board=board,
                           threads=args.buffering == "auto", tuned=tuned,
                           host=args.host, per_channel=args.per_channel)
    if args.tuning_log:
        module.notes.append(f"tuning log {args.tuning_log}: tuned knobs compiled into "
                            f"{len(module.tuned_knobs)} VTA layer(s)")
    module.save(args.output)
    print(summary(module, args.output))
    if args.report:
        print(quant_report(module))
    return 0


def _board_config(name: str):  # -> Config
    from vta.isa.errors import ConfigError

    try:
        from vta.boards import get_board
    except ImportError as e:
        raise ConfigError(f"--board needs vta.boards, which is not available ({e}); use "
                          f"--config FILE instead") from None
    return get_board(name).default_config


def summary(m, out: str) -> str:  # noqa: ANN001
    vta = [k for k, v in m.partition.items() if v == "vta"]
    macs = sum(m.macs.values())
    vmacs = sum(m.macs.get(k, 0) for k in vta)
    lines = [f"compiled {m.graph.name} -> {out} in {m.compile_seconds:.2f} s",
             f"  {len(m.graph.nodes)} layers, {len(vta)} on VTA ({vmacs / max(macs, 1) * 100:.1f}%"
             f" of {macs / 1e9:.3f} GMACs), {sum(k.insns for k in m.kernels.values())} "
             f"instructions",
             f"  DRAM arena {m.plan.size / 2**20:.2f} MiB (constants "
             f"{m.plan.const_size / 2**20:.2f} MiB; activations "
             f"{(m.plan.size - m.plan.const_size) / 2**20:.2f} MiB, "
             f"{(m.plan.naive_size - m.plan.const_size) / 2**20:.2f} MiB without reuse)"]
    for o, a in m.agreement.items():
        lines.append(f"  int8 vs float on the first calibration input ({o}): cosine "
                     f"{a['cosine']:.4f}, top-1 {'match' if a['top1'] else 'MISMATCH'}")
    lines += [f"  note: {n}" for n in m.notes]
    return "\n".join(lines)


def quant_report(m) -> str:  # noqa: ANN001
    head = f"{'layer':<28} {'op':<18} {'where':<5} {'in':>4} {'w':>6} {'out':>4} {'shift':>6} " \
           f"{'rel.err':>8}"
    lines = [head, "-" * len(head)]
    for i in m.layers:
        def f(v):  # noqa: ANN001, ANN202
            if isinstance(v, list):  # per channel: the range
                return f"{min(v)}..{max(v)}"
            return "-" if v is None else str(v)
        err = "-" if i.rel_error is None else f"{i.rel_error:.4f}"
        where = m.partition.get(i.node, "cpu")
        tag = f"  (float: {i.float_reason})" if i.float_reason else ""
        lines.append(f"{i.node[:28]:<28} {i.op[:18]:<18} {where:<5} {f(i.in_exp):>4} "
                     f"{f(i.w_exp):>6} {f(i.out_exp):>4} {f(i.shift):>6} {err:>8}{tag}")
    lines.append("exponents: value = q * 2^-exp; rel.err = ||dequant(int8) - float|| / ||float||"
                 " on the first calibration input")
    return "\n".join(lines)
