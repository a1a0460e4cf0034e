"""Worker processes of a compile (``vta compile --jobs N``): an ordered map over a pool of
forked processes, and a map started in the background (``start``: the compile searches knobs
while it quantizes).

The pool (a ``concurrent.futures.ProcessPoolExecutor``) is made on the first map of more
than one item, by ``fork`` (the workers inherit every module the parent has imported and
import nothing new), and is reused by later maps. Results come back in the items' order
whatever the order they finish in, so what a compile makes of them does not depend on N. The
workers ignore SIGINT: on Ctrl-C (or a terminating signal, which the CLI raises like it) the
parent gets the KeyboardInterrupt and kills them, so none is left behind; a parent killed
outright (SIGKILL) takes its workers with it (the kernel's parent-death signal). A worker
killed from outside (e.g. by the out-of-memory killer) ends the map with a one-line
:class:`WorkerError` instead of a wait for its result. Where ``fork`` does not exist, or in
a daemonic process (a worker of a multiprocessing pool, which may not have children), every
map runs in-process.
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import multiprocessing as mp
import os
import signal
import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, TypeVar

from vta.isa.errors import VTAError
from vta.isa.procs import die_with_parent

from .errors import InputError

T = TypeVar("T")
R = TypeVar("R")


def available_cpus() -> int:
    """The CPUs this process may run on (``os.sched_getaffinity``; else ``os.cpu_count``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_jobs(jobs: int | None) -> int:
    """``jobs`` as a worker count: None -> :func:`available_cpus`; anything but a positive
    integer is an InputError."""
    if jobs is None:
        return available_cpus()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs must be a positive integer (worker processes), not {jobs!r}")
    return jobs


class WorkerError(VTAError):
    """A worker process of a compile died before it returned its result."""


def _collect(results: Iterable[R], total: int, done: Callable[[int, int], None] | None
             ) -> list[R]:
    out: list[R] = []
    try:
        for r in results:
            out.append(r)
            if done is not None:
                done(len(out), total)
    except cf.BrokenExecutor:
        raise WorkerError("a compile worker process died before it returned its result "
                          "(killed from outside, e.g. out of memory?); run again, or with "
                          "--jobs 1") from None
    return out


def _init_worker(parent: int) -> None:
    """A forked worker ignores SIGINT (the parent stops it: no worker traceback on Ctrl-C),
    dies with its parent (:func:`~vta.isa.procs.die_with_parent`: a parent killed by SIGKILL
    leaves no worker blocked on its task queue) and moves every object it inherited to the
    collector's permanent generation (``gc.freeze``): its full collections then traverse
    what it makes, not the parent's whole heap again (a compile inside a process that
    imported PyTorch inherits ~170k objects, 70 ms a traversal)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)
    gc.freeze()


def new_pool(jobs: int) -> cf.ProcessPoolExecutor:
    """A pool of ``jobs`` forked worker processes (:func:`_init_worker`), for the compile's
    maps and for the tuner's measurements. Make it, and submit to it, from the main thread:
    its workers die with the thread that forked them."""
    return cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork"),
                                  initializer=_init_worker, initargs=(os.getpid(),))


class Workers:
    """``with Workers(jobs) as w: w.map(fn, items)``: ``fn`` (a module-level function, its
    items and results picklable) over ``items``; ``jobs`` 1 runs in-process."""

    def __init__(self, jobs: int) -> None:
        self.jobs = check_jobs(jobs)
        if "fork" not in mp.get_all_start_methods() or mp.current_process().daemon:
            self.jobs = 1  # no fork, or inside a pool's worker (which may have no children)
        self._pool: Any = None

    def map(self, fn: Callable[[T], R], items: Iterable[T],
            done: Callable[[int, int], None] | None = None) -> list[R]:
        """``[fn(x) for x in items]``; ``done(k, total)`` after each of them finishes."""
        items = list(items)
        if self.jobs == 1 or len(items) <= 1:
            return _collect(map(fn, items), len(items), done)
        return _collect(self._executor().map(fn, items), len(items), done)

    def start(self, fn: Callable[[T], R], items: Iterable[T],
              done: Callable[[int, int], None] | None = None) -> Callable[[], list[R]]:
        """Start ``[fn(x) for x in items]`` in the workers and return at once: calling the
        result waits for the list (the caller works meanwhile). ``done(k, total)`` after each
        item finishes, from the pool's own thread. Needs ``jobs`` > 1."""
        if self.jobs == 1:
            raise ValueError("Workers.start needs worker processes (jobs > 1)")
        futures = [self._executor().submit(fn, x) for x in items]
        if done is not None:
            count, lock = [0], threading.Lock()

            def finished(_: cf.Future) -> None:
                with lock:
                    count[0] += 1
                    done(count[0], len(futures))

            for f in futures:
                f.add_done_callback(finished)
        return lambda: _collect((f.result() for f in futures), len(futures), None)

    def _executor(self) -> Any:
        if self._pool is None:
            self._pool = new_pool(self.jobs)
        return self._pool  # an idle worker takes the next item

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        if exc_type is None:
            pool.shutdown(wait=True)
            return
        kill_pool(pool)  # an error or Ctrl-C: stop the workers at once


def kill_pool(pool: cf.ProcessPoolExecutor) -> int:
    """Stop a process pool at once: its pending work cancelled, its workers killed (the
    executor has no public kill before Python 3.14's ``terminate_workers``). Returns how many
    workers it had."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.kill()
    for p in procs:
        p.join()
    # the executor's thread sees its workers gone and closes its wake-up pipe: wait for it,
    # or the interpreter's exit may write to that pipe while it closes (Python 3.11 prints an
    # ignored OSError and its traceback after the one-line message)
    if manager is not None:
        manager.join(timeout=10)
    return len(procs)


__all__ = ["WorkerError", "Workers", "available_cpus", "check_jobs", "kill_pool", "new_pool"]
