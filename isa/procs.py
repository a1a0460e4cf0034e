"""Child processes that leave nothing behind: workers that die with their parent, and tools
stopped politely, then for good.

- :func:`die_with_parent`: a forked worker asks the kernel for SIGKILL when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``), so a parent killed by SIGKILL or the out-of-memory killer
  leaves no worker blocked forever on its task queue.
- :func:`stop`: SIGTERM to a tool (or to its whole process group), time to clean up, then
  SIGKILL; the process is reaped.
- :func:`run_group`: a build command (a Verilator build: verilator, make, g++) in a process
  group of its own, stopped as a whole when the caller is interrupted.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

#: Seconds a tool has between SIGTERM and SIGKILL.
GRACE_SECONDS = 5.0

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In a forked child of process ``parent``: be killed (SIGKILL) when the parent dies.

    Linux only (elsewhere nothing changes). The kernel sends the signal when the *thread*
    that forked the child ends, so a pool must be made and grown from a thread that lives as
    long as the pool (the main thread, as the compile and the tuner do). A parent that died
    before the request was made leaves the child orphaned at once: it exits."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):  # not Linux
        return
    prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def stop(proc: subprocess.Popen, *, group: bool = False,
         grace: float = GRACE_SECONDS) -> None:
    """Stop ``proc`` (and, with ``group``, every process of its process group): SIGTERM, up
    to ``grace`` seconds to exit, then SIGKILL; the process is reaped before this returns."""
    try:
        _signal(proc, signal.SIGTERM, group)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    finally:  # (a second Ctrl-C during the grace time ends it)
        _signal(proc, signal.SIGKILL, group)  # (the group's other members too)
        proc.wait()


def _signal(proc: subprocess.Popen, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(proc.pid, sig)
        elif proc.returncode is None:
            proc.send_signal(sig)


def run_group(argv: Sequence[str], *, cwd: Path, capture: bool,
              grace: float = 2.0) -> subprocess.CompletedProcess:
    """``subprocess.run(argv)`` in a new process group; on any exception while it runs (a
    signal raised as ``KeyboardInterrupt``) the whole group is stopped (:func:`stop`) before
    the exception goes on, so no grandchild (make's compilers) outlives the caller's
    command."""
    pipe = subprocess.PIPE if capture else None
    proc = subprocess.Popen(list(argv), cwd=cwd, stdout=pipe, stderr=pipe, text=True,
                            process_group=0)
    try:
        out, err = proc.communicate()
    except BaseException:
        stop(proc, group=True, grace=grace)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


__all__ = ["GRACE_SECONDS", "die_with_parent", "run_group", "stop"]
