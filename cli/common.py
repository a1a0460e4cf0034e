"""Helpers shared by subcommands: config selection, bounded numeric options (argparse types)
and the check of every output location, which each command runs before any work."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any

from vta.isa import Config, preset_names
from vta.isa.errors import ConfigError, FileError
from vta.isa.fileio import check_output_dir, check_output_file


def add_config_args(p: argparse.ArgumentParser, *,
                    default: str = "default, the PYNQ 1x16x16 config") -> None:
    """``--config FILE`` (TVM's vta_config.json) or ``--preset NAME``; ``default`` says what
    the command uses without either (the Pynq config unless the command says otherwise)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--config", metavar="FILE", help="a vta_config.json (TVM's format)")
    g.add_argument("--preset", metavar="NAME",
                   help=f"a built-in configuration: {', '.join(preset_names())} "
                        f"(default: {default})")


def add_input_shape_arg(p: argparse.ArgumentParser) -> None:
    """``--input-shape [NAME=]D,D,...`` (repeatable): sizes for an ONNX model's symbolic input
    dimensions."""
    p.add_argument("--input-shape", type=input_shape, action="append", default=[],
                   metavar="[NAME=]D,D,...",
                   help="the shape of the ONNX model's input NAME (repeatable; NAME may be left "
                        "out when the model has one input): sizes for its symbolic dimensions "
                        "(an export with dynamic axes); its fixed ones must agree. Default: a "
                        "symbolic batch dimension is 1, any other is an error")


def input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``[NAME=]D,D,...`` -> (NAME or "", dims), dims positive integers."""
    name, _, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"invalid input shape {text!r}: give [NAME=]D,D,... "
                                         f"with positive integer dimensions (e.g. "
                                         f"input=1,3,224,224)")
    return name, shape


def input_shapes_from_args(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """``--input-shape`` by input name ("" for the unnamed one), one per input."""
    shapes = dict(args.input_shape)
    if len(shapes) < len(args.input_shape):
        raise ConfigError("--input-shape is given twice for one input")
    return shapes


#: What the board commands use without --config/--preset.
BOARD_DEFAULT = "the board's own configuration, see `vta boards`"


def config_from_args(args: argparse.Namespace) -> Config:
    if getattr(args, "config", None):
        return Config.from_json(args.config)
    if getattr(args, "preset", None):
        return Config.preset(args.preset)
    return Config()


def add_core_options_arg(p: argparse.ArgumentParser, *, board: bool = True) -> None:
    """``--core-options NAMES``: the hardware variants (vta.hw.options.CoreOptions)."""
    instead = " instead of the board's" if board else ""
    p.add_argument("--core-options", metavar="NAMES",
                   help=f"comma-separated hardware variants to build{instead}: "
                        "replicate_control, replicate_operands, pack_multipliers, dsp_registers "
                        "('' for none; "
                        "same results, see hw/README.md)")


def core_options_from_args(args: argparse.Namespace) -> dict[str, bool] | None:
    """The ``--core-options`` given (validated), or None when the option was not given."""
    names = getattr(args, "core_options", None)
    if names is None:
        return None
    from vta.hw.options import CoreOptions  # deferred: off vta --help

    return CoreOptions.from_names(names).as_dict()


def board_from_args(args: argparse.Namespace) -> Any:
    """``--board`` as a :class:`vta.boards.Board`, with ``--core-options`` applied."""
    from vta.boards import get_board  # deferred: off vta --help

    board = get_board(args.board)
    options = core_options_from_args(args)
    return board if options is None else dataclasses.replace(board, core_options=options)


def board_config_from_args(args: argparse.Namespace, board: Any) -> Config:
    """The configuration a board command builds: ``--config``/``--preset``, else the board's
    own. Every command that builds hardware for a board (verilog --board, synth, build) takes
    it from here: the configuration's bus width (``BUS_WIDTH``, 64 when a file has none) must
    be the board's memory port (:meth:`vta.boards.Board.check_bus`: a one-line error naming
    both otherwise)."""
    if not (getattr(args, "config", None) or getattr(args, "preset", None)):
        return board.default_config
    cfg = config_from_args(args)
    board.check_bus(cfg, args.config or f"preset {args.preset}")
    return cfg


# ------------------------------------------------------------------ bounded numeric options
# argparse ``type=`` functions: a value out of bounds is a one-line usage error (exit 2) that
# names the option, the value and the bounds, before the command does any work.

def _number(text: str, conv: Callable[[str], Any], kind: str) -> Any:
    try:
        value = conv(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {kind}, not {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, not {text!r}")
    return value


def int_range(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """An integer ``lo <= N <= hi`` (either bound may be None)."""

    def parse(text: str) -> int:
        value = _number(text, int, "an integer")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"{value} is out of range ({_bounds(lo, hi)})")
        return value

    parse.__name__ = "integer"
    return parse


def float_range(lo: float, hi: float | None = None) -> Callable[[str], float]:
    """A finite number ``lo < X <= hi`` (``lo`` excluded: durations, clocks)."""

    def parse(text: str) -> float:
        value = _number(text, float, "a number")
        if value <= lo or (hi is not None and value > hi):
            rng = f"above {lo:g}" + (f" and at most {hi:g}" if hi is not None else "")
            raise argparse.ArgumentTypeError(f"{text} is out of range ({rng})")
        return value

    parse.__name__ = "number"
    return parse


def _bounds(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f"{lo}..{hi}"
    return f"at least {lo}" if lo is not None else f"at most {hi}"


#: Positive integers and durations (counts, trials, cycles, seconds).
positive_int = int_range(1)
positive_seconds = float_range(0.0)
#: A seed: numpy's generators take 0 .. 2**32 - 1 (and so does every seeded tool here).
seed_int = int_range(0, 2**32 - 1)


def scheduler_address(text: str) -> str:
    """``--scheduler``: a Dask scheduler address ``[tcp://]HOST:PORT``."""
    rest = text.split("://", 1)[1] if "://" in text else text
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a scheduler address; expected HOST:PORT, e.g. tcp://10.0.0.5:8786")
    return text


# ------------------------------------------------------------------ output locations
def check_outputs(files: dict[str, str | None], *, dirs: dict[str, str | None] | None = None,
                  inputs: tuple[str | None, ...] = ()) -> None:
    """Check every output location before any work (a FileError naming the first bad one):
    ``files`` and ``dirs`` map what each is ("statistics file") to its path (None: not given).
    Each must be writable where it is, not a directory where a file goes (nor a file where a
    directory goes), not one of ``inputs``, and no two outputs may be the same path."""
    seen: dict[str, str] = {}
    given = [(w, p, False) for w, p in files.items() if p is not None] + \
            [(w, p, True) for w, p in (dirs or {}).items() if p is not None]
    for what, path, is_dir in given:
        key = os.path.realpath(path)
        if key in seen:
            raise FileError(f"{what} {path} is also the {seen[key]}; give them different names")
        seen[key] = what
        if is_dir:
            check_output_dir(path, what, inputs=inputs)
        else:
            check_output_file(path, what, inputs=inputs)


#: Zoo image classifiers (vta zoo, vta explore): input height/width and class count. Above
#: these the float model alone needs gigabytes (an input of 100000 x 100000 is 112 GiB).
ZOO_IMAGE_SIZE = (32, 1024)
ZOO_NUM_CLASSES = (1, 65536)
image_size_int = int_range(*ZOO_IMAGE_SIZE)
num_classes_int = int_range(*ZOO_NUM_CLASSES)


def board_clock_mhz(board: str) -> float:
    """The clock of a board of the registry (``vta boards``); an unknown board is a one-line
    error naming the known ones."""
    from vta.boards import get_board  # deferred: off vta --help

    return float(get_board(board).clock_mhz)
