"""The ``vta`` command: one entry point, one module per subcommand.

Each subcommand lives in ``vta.cli.cmd_<name>`` and defines ``register(subparsers)`` (which adds
its parser and sets ``func``) and keeps heavy imports inside its run function so that ``vta
--help`` stays fast. Every :class:`vta.isa.VTAError` (and every usage error) becomes a one-line
message and exit status 2. SIGTERM and SIGHUP are raised like Ctrl-C while a command runs, so
its temporary files and folders are removed on the way out (exit status 128 + the signal).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import NoReturn

from vta.isa import VTAError

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
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


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
        from importlib.metadata import version

        return version("vta-kit")
    except Exception:  # noqa: BLE001 - running from a source tree without metadata
        return "unknown"


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so that every ``finally`` and ``except
    BaseException`` on the way out runs: temporary files and folders are removed, tools are
    killed, a tuning log keeps its completed batches."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: object) -> None:
    # a second signal while cleaning up is ignored: the cleanup finishes (SIGKILL still works)
    for sig in _TERMINATING:
        signal.signal(sig, signal.SIG_IGN)
    raise Terminated(signum)


_TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def _default_signals_in_child() -> None:
    """Forked workers (vta tune --jobs N, vta explore --jobs N) die of SIGTERM as before: the
    parent does the cleaning up."""
    if signal.getsignal(signal.SIGTERM) is _raise_terminated:
        for sig in _TERMINATING:
            signal.signal(sig, signal.SIG_DFL)


os.register_at_fork(after_in_child=_default_signals_in_child)


@contextlib.contextmanager
def _terminating_signals_raise() -> Iterator[None]:
    """While the command runs, a terminating signal raises :class:`Terminated` (only the main
    thread can install handlers; elsewhere, as in some test runners, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, _raise_terminated) for sig in _TERMINATING}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


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
        with _terminating_signals_raise():
            rc = args.func(args)
    except VTAError as e:
        print(f"vta {args.command}: error: {e}", file=sys.stderr)
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
    sys.exit(rc)


if __name__ == "__main__":
    entry()
