"""The ``vta`` command: one entry point, one module per subcommand.

Each subcommand lives in ``vta.cli.cmd_<name>`` and defines ``register(subparsers)`` (which adds
its parser and sets ``func``) and keeps heavy imports inside its run function so that ``vta
--help`` stays fast. Every :class:`vta.isa.VTAError` (and every usage error) becomes a one-line
message and exit status 2. SIGTERM and SIGHUP are raised like Ctrl-C while a command runs
(:mod:`vta.isa.signals`), so its temporary files and folders are removed on the way out (exit
status 128 + the signal).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import signal
import sys
import warnings
from typing import NoReturn

from vta.isa import VTAError
from vta.isa.signals import Terminated, signals_raise

#: Subcommand modules, in the order ``vta --help`` lists them.
COMMANDS = [
    "config", "asm", "disasm", "sim",
    "verilog", "boards", "synth", "build",
    "compile", "run", "zoo",
    "tune", "explore",
]


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (``vta CMD: error: ...``) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n")


def one_line(message: str) -> str:
    """``message`` on one line: a line break or another control character in it (a name that
    a file gave, say) is written as its escape (``\\n``, ``\\x1e``)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(message))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="vta",
        description="VTA co-design kit: describe, generate, simulate, compile for and tune the "
                    "VTA deep-learning accelerator.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"vta.cli.cmd_{name}")
        except ModuleNotFoundError as e:
            if e.name == f"vta.cli.cmd_{name}":
                continue  # not built yet
            raise
        mod.register(sub)
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version  # deferred: ~120 ms, for the version only

        return version("vta-kit")
    except Exception:  # noqa: BLE001 - running from a source tree without metadata
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # a usage error (2, its line printed), --help or --version (0)
        return e.code if isinstance(e.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with signals_raise():
            rc = args.func(args)
    except VTAError as e:
        print(f"vta {args.command}: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except Terminated as e:
        name = signal.Signals(e.signum).name
        print(f"vta {args.command}: terminated by {name}", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print(f"vta {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return int(rc or 0)


def entry() -> None:
    """Console-script entry point."""
    rc = main()
    if rc:
        # the one-line error is out; objects dropped half-way (an Amaranth design interrupted
        # before simulation, a coroutine never started) must not add warnings at exit
        warnings.simplefilter("ignore")
    if rc > 128:  # stopped by a signal, its cleanup done: exit at once (see _exit_now)
        _exit_now(rc)
    sys.exit(rc)


def _exit_now(rc: int) -> NoReturn:
    """Exit without tearing the heap down: after an interrupted RTL simulation, freeing its
    millions of objects one by one took 6-10 s on a loaded machine, after the command had
    stopped and said so. The exit functions still run and the standard streams are flushed
    (every output was closed or removed on the way out)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(rc)


if __name__ == "__main__":
    entry()
