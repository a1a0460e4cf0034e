"""``vta sim``: run a program image on a simulator backend (the program image contract).

``vta sim PROGRAM.bin --dram DRAM.bin -o OUT.bin [--backend NAME] [--stats S.json]
[--trace T.json] [--check-races]`` (NAME: a program runner of :mod:`vta.runtime.backends`).
OUT.bin is the whole DRAM image after FINISH, same length as DRAM.bin; the perf backend computes
no data and takes no ``-o``. Every backend is a function
``run_program(program, dram, cfg, **options) -> RunResult`` imported lazily; nothing is written
unless the run succeeds.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vta.isa import VTAError
from vta.isa.fileio import atomic_paths
from vta.isa.image import check_program, read_dram, read_program, write_stats, write_trace
from vta.isa.stats import RunStats
from vta.runtime import backends
from vta.runtime.backends import programs

from .common import add_config_args, check_outputs, config_from_args, positive_int, seed_int


class BackendError(VTAError):
    """A simulator backend that is not installed or does not accept an option."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim", help="run a program image on a simulator",
        description="Run a VTA instruction stream against a DRAM image and write the DRAM image "
                    f"after FINISH (same length). Backends: {backends.described(programs())}.")
    p.add_argument("program", metavar="PROGRAM.bin", help="instruction stream ending with FINISH")
    p.add_argument("--dram", required=True, metavar="DRAM.bin",
                   help="initial device memory (byte address 0 at offset 0)")
    p.add_argument("-o", "--output", metavar="OUT.bin",
                   help="DRAM image after FINISH (required, except with --backend perf, which "
                        "computes no data and writes none)")
    add_config_args(p)
    p.add_argument("--backend", choices=sorted(programs()), default="fsim",
                   help="simulator (default: fsim)")
    p.add_argument("--stats", metavar="STATS.json", help="write statistics as JSON")
    p.add_argument("--trace", metavar="TRACE.json",
                   help="write a Chrome trace (open in Perfetto or chrome://tracing)")
    p.add_argument("--check-races", action="store_true",
                   help="first run fsim under every scheduling order and fail if the results "
                        "differ (a missing dependency token)")
    p.add_argument("--order", choices=["load-first", "compute-first", "store-first", "random"],
                   help="fsim only: which ready module runs first (default: compute-first)")
    p.add_argument("--seed", type=seed_int,
                   help="random seed, 0 .. 2**32-1 (fsim: the random order; rtl/tsim: memory "
                        "stalls)")
    p.add_argument("--max-cycles", type=positive_int, metavar="N",
                   help="rtl/tsim: stop with an error after N cycles (N >= 1; default: 16 x the "
                        "program's static cost + 1M; long runs print a progress line on stderr)")
    p.add_argument("--vcd", metavar="FILE",
                   help="cycle-level backends: write a waveform (atomically: only a finished "
                        "run leaves one)")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="a backend-specific option passed as a keyword argument (repeatable; "
                        "e.g. --opt mem_stall=0.1 --opt mem_bandwidth=16 for rtl/tsim, "
                        "--opt token_queue_depth=16 for fsim; the bus width is the "
                        "configuration's BUS_WIDTH)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    p.set_defaults(func=run)


def load_backend(name: str):
    """The ``run_program`` function of a backend, or a BackendError saying why not."""
    if name not in programs():
        raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(programs())}")
    module, func = backends.REGISTRY[name].program
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise BackendError(f"backend {name} is not available: {e}") from None
    fn = getattr(mod, func, None)
    if fn is None:
        raise BackendError(f"backend {name} is not available: {module} has no {func}()")
    return fn


#: Backend keywords that have a command-line option of their own.
_OWN_OPTIONS = ("vcd", "max_cycles", "seed", "order", "trace", "check_races")


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """Backend options, passed only when given on the command line."""
    opts: dict[str, Any] = {}
    for item in args.opt:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise BackendError(f"--opt {item!r}: expected KEY=VALUE, e.g. --opt mem_stall=0.1")
        if key == "bus_width":
            raise BackendError(f"--opt {item!r}: the bus width is the configuration's; set "
                               "\"BUS_WIDTH\": 128 in the --config file")
        if key in _OWN_OPTIONS:  # those are checked (paths, bounds) through their own option
            raise BackendError(f"--opt {item!r}: use --{key.replace('_', '-')} instead")
        opts[key] = _parse_value(value.strip())
    if args.trace:
        opts["trace"] = True
    if args.seed is not None:
        opts["seed"] = args.seed
    if args.order is not None:
        if args.backend != "fsim":
            raise BackendError("--order applies to the fsim backend only")
        opts["order"] = args.order
    cycle_only = {"max_cycles": args.max_cycles, "vcd": args.vcd}
    for key, value in cycle_only.items():
        if value is not None:
            if args.backend == "fsim":
                raise BackendError(f"--{key.replace('_', '-')} does not apply to the fsim "
                                   f"backend (it has no cycles); use --backend rtl or tsim")
            opts[key] = value
    if args.check_races and args.backend == "fsim":
        opts["check_races"] = True
    return opts


def _check_output_arg(args: argparse.Namespace) -> None:
    """-o is required for the data backends and refused for perf (it would be the input)."""
    if args.backend == "perf" and args.output:
        raise BackendError("the perf backend estimates cycles and computes no data, so it "
                           "writes no OUT.bin: drop -o (its figures go to --stats)")
    if args.backend != "perf" and not args.output:
        raise BackendError(f"-o OUT.bin is required with --backend {args.backend}")


def _internal(backend: str, e: Exception) -> BackendError:
    """A one-line BackendError for an unexpected exception (VTA_DEBUG=1 shows the original)."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return BackendError(f"backend {backend} failed with an internal error "
                        f"({type(e).__name__}: {first}); rerun with VTA_DEBUG=1 for the traceback "
                        f"and please report it")


def _parse_value(text: str) -> Any:
    """``--opt`` values: integers, floats, true/false/none, else the string itself."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for conv in (lambda s: int(s, 0), float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def run(args: argparse.Namespace) -> int:
    _check_output_arg(args)
    cfg = config_from_args(args)
    # every output location is checked before the (possibly long) run
    check_outputs({"output DRAM image": args.output, "statistics file": args.stats,
                   "trace file": args.trace, "waveform file": args.vcd},
                  inputs=(args.program, args.dram, args.config))
    program = read_program(args.program, cfg)
    check_program(program, cfg)
    dram = read_dram(args.dram)
    opts = _options(args)
    backend = load_backend(args.backend)
    if args.check_races and args.backend != "fsim":
        from vta.sim.fsim import check_races  # deferred: off vta --help

        check_races(program, dram, cfg)
    # every output is staged beside its target and renamed only when the run and every write
    # have succeeded: a failure or a signal leaves none of them
    with atomic_paths() as staged:
        if args.vcd:
            opts["vcd"] = str(staged(args.vcd, "waveform file"))
        result = _run_backend(backend, program, dram, cfg, opts, args)
        _write_outputs(result, len(dram), args, staged)
    if not args.quiet:
        print(_summary(result.stats, args))
    return 0


def _run_backend(backend: Any, program: Any, dram: Any, cfg: Any, opts: dict[str, Any],
                 args: argparse.Namespace) -> Any:
    """The backend's RunResult; its unexpected exceptions become one-line BackendErrors."""
    try:
        return backend(program, dram, cfg, **opts)
    except TypeError as e:
        if opts and "keyword argument" in str(e):
            raise BackendError(f"backend {args.backend} does not accept an option given: {e}") \
                from None
        if args.opt:  # an --opt value of the wrong type (a word where a number belongs)
            given = ", ".join(args.opt)
            raise BackendError(f"backend {args.backend} cannot use the value of --opt {given} "
                               f"({e})") from None
        raise
    except ValueError as e:  # an option value the backend rejects
        if args.opt or args.order:
            raise BackendError(f"backend {args.backend}: {e}") from None
        if os.environ.get("VTA_DEBUG"):
            raise
        raise _internal(args.backend, e) from None
    except VTAError:
        raise
    except Exception as e:  # noqa: BLE001 - a crash inside a backend: one line, not a traceback
        if os.environ.get("VTA_DEBUG"):
            raise
        raise _internal(args.backend, e) from None


def _write_outputs(result: Any, dram_len: int, args: argparse.Namespace,
                   staged: Callable[[str, str], Path]) -> None:
    """Write the outputs to their ``staged`` temporary names."""
    out = result.dram
    if len(out) != dram_len:
        raise BackendError(f"backend {args.backend} returned a {len(out)}-byte image for a "
                           f"{dram_len}-byte input (the contract is: same length)")
    if args.trace and result.trace is None:
        raise BackendError(f"backend {args.backend} produced no trace")
    if args.output:  # (perf writes none)
        staged(args.output, "output DRAM image").write_bytes(out.tobytes())
    if args.stats:
        write_stats(staged(args.stats, "statistics file"), result.stats)
    if args.trace:
        write_trace(staged(args.trace, "trace file"), result.trace or [])


def _summary(s: RunStats, args: argparse.Namespace) -> str:
    parts = [f"{s.insn_count} instructions", f"{s.gemm_uops} GEMM and {s.alu_uops} ALU micro-ops"]
    if s.cycles is not None:
        parts.append(f"{s.cycles} cycles" + (" (estimate)" if args.backend == "perf" else ""))
    wrote = f"; wrote {args.output}" if args.output else ""
    return f"{args.backend}: {', '.join(parts)}{wrote}"

