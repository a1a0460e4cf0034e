"""Measuring candidate configurations on a ``concurrent.futures`` executor.

A measurement rebuilds the task from its name in the worker, instantiates the template with the
configuration and hands the result to a *measurer* registered by name ("value" for templates that
return their cost directly; the VTA measurers "perf" and "tsim" are registered by
:mod:`vta.tune.vta_tasks`). Build failures, run failures, wrong results and timeouts become
invalid measurements; they never stop the tuner.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vta.compiler.graph.workers import kill_pool, new_pool
from vta.isa.errors import VTAError

from .task import Task


class WrongResult(VTAError):
    """A candidate ran but produced a wrong result."""


class MeasureError(VTAError):
    """The measurement setup itself is wrong (unknown measurer, bad scheduler address)."""


@dataclass
class MeasureResult:
    index: int
    cost: float | None
    kind: str  # ok | build | run | wrong | timeout | invalid
    error: str | None = None
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


_MEASURERS: dict[str, Callable[..., float]] = {}


def register_measurer(name: str, fn: Callable[..., float]) -> None:
    """``fn(obj, **options) -> cost`` where ``obj`` is what the template returned."""
    _MEASURERS[name] = fn


def _value_measurer(obj: Any, **_: Any) -> float:
    return float(obj)


register_measurer("value", _value_measurer)


def _short(e: BaseException) -> str:
    msg = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {msg}"[:300]


def evaluate(task_json: dict[str, Any], index: int, measurer: str,
             options: dict[str, Any]) -> MeasureResult:
    """Build and measure one configuration (runs in a worker; never raises)."""
    t0 = time.perf_counter()
    try:
        task = Task.from_json(task_json)
        fn = _MEASURERS.get(measurer)  # looked up after the kit's template modules are imported
        if fn is None:
            return MeasureResult(index, None, "invalid", f"unknown measurer {measurer!r}")
        entity = task.space.get(index)
        if not task.space.is_valid(index):
            return MeasureResult(index, None, "invalid", "configuration violates a constraint")
        try:
            obj = task.instantiate(entity)
        except Exception as e:  # noqa: BLE001 - any build failure is a result
            return MeasureResult(index, None, "build", _short(e), time.perf_counter() - t0)
        try:
            cost = float(fn(obj, **options))
        except WrongResult as e:
            return MeasureResult(index, None, "wrong", _short(e), time.perf_counter() - t0)
        except Exception as e:  # noqa: BLE001
            return MeasureResult(index, None, "run", _short(e), time.perf_counter() - t0)
        if cost != cost or cost <= 0:  # NaN or non-positive
            return MeasureResult(index, None, "run", f"invalid cost {cost}")
        return MeasureResult(index, cost, "ok", None, time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001
        return MeasureResult(index, None, "run", _short(e) + " " + traceback.format_exc(limit=2),
                             time.perf_counter() - t0)


class InlineExecutor(cf.Executor):
    """Runs each submission immediately in the calling thread (``--jobs 1``)."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        fut: cf.Future = cf.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001
            fut.set_exception(e)
        return fut


#: Seconds allowed to connect to a Dask scheduler and complete the handshake.
SCHEDULER_TIMEOUT = 10


def check_scheduler(address: str) -> None:
    """A MeasureError (one line) unless a Dask scheduler at ``address`` completes Dask's
    handshake within :data:`SCHEDULER_TIMEOUT` (+ 5) seconds: distributed's ``Client``
    bounds the connection but not the handshake (a server that never answers hung it, one
    that answers garbage made it allocate exabytes). Commands call it before their long
    work."""
    try:
        from distributed.comm import connect  # deferred: dask (optional), --scheduler only
    except ImportError:
        raise MeasureError("--scheduler needs the 'distributed' package "
                           "(pip install 'dask[distributed]')") from None
    try:
        _handshake(address, connect)
    except (OSError, TimeoutError) as e:
        why = str(e) or f"no Dask handshake within {SCHEDULER_TIMEOUT + 5} s"
        raise MeasureError(f"cannot reach Dask scheduler {address}: {why}") from None
    except Exception as e:  # noqa: BLE001 - a server that is not a Dask scheduler: its
        # answer read as Dask messages can be anything (a 3 EiB frame length...)
        raise MeasureError(f"{address} did not answer as a Dask scheduler "
                           f"({type(e).__name__}); check the address and port") from None


def _handshake(address: str, connect: Any) -> None:
    async def probe() -> None:
        # (connect's own timeout covers the connection, with its own message; this one
        # the handshake after it)
        comm = await asyncio.wait_for(connect(address, timeout=SCHEDULER_TIMEOUT),
                                      SCHEDULER_TIMEOUT + 5)
        await comm.close()

    failed: list[BaseException] = []

    def run() -> None:  # its own event loop, whatever the caller runs
        try:
            asyncio.run(probe())
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            failed.append(e)

    # a daemon thread: a Ctrl-C while it waits ends the command without waiting for it
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def make_executor(jobs: int = 1, scheduler: str | None = None) -> cf.Executor:
    """A local process pool (``jobs`` > 1), inline (1), or a Dask cluster at ``scheduler``."""
    if scheduler:
        try:
            from distributed import Client  # deferred: dask (optional), --scheduler only
        except ImportError:
            raise MeasureError("--scheduler needs the 'distributed' package "
                               "(pip install 'dask[distributed]')") from None
        check_scheduler(scheduler)
        try:
            client = Client(scheduler, timeout=SCHEDULER_TIMEOUT)
        except (OSError, TimeoutError) as e:
            raise MeasureError(f"cannot reach Dask scheduler {scheduler}: {e}") from None
        ex = client.get_executor()
        ex._vta_client = client  # type: ignore[attr-defined]  # keep it alive, close later
        return ex
    if jobs < 1:
        raise MeasureError(f"--jobs must be at least 1, not {jobs}")
    if jobs == 1:
        return InlineExecutor()

    return new_pool(jobs)  # its workers ignore Ctrl-C and die with this process


def close_executor(ex: cf.Executor) -> None:
    """Close an executor of :func:`make_executor`; a local pool's workers are killed at once
    (after an interrupt one may still be measuring: the command must not wait for it)."""
    client = getattr(ex, "_vta_client", None)
    if client is not None:
        ex.shutdown(wait=False)
        client.close()
    elif isinstance(ex, cf.ProcessPoolExecutor):
        kill_pool(ex)
    else:
        ex.shutdown(wait=False, cancel_futures=True)


class Measurer:
    """Measures batches of configurations of one task on an executor."""

    def __init__(self, measurer: str = "value", *, executor: cf.Executor | None = None,
                 timeout: float = 60.0, **options: Any) -> None:
        self.measurer = measurer
        self.executor = executor or InlineExecutor()
        self.timeout = timeout
        self.options = options

    def measure(self, task: Task, indices: Sequence[int]) -> list[MeasureResult]:
        tj = task.to_json()
        futs = [self.executor.submit(evaluate, tj, int(i), self.measurer, self.options)
                for i in indices]
        out = []
        deadline = time.monotonic() + self.timeout
        for i, f in zip(indices, futs):
            try:
                out.append(f.result(timeout=max(0.0, deadline - time.monotonic())))
            except cf.TimeoutError:
                f.cancel()
                out.append(MeasureResult(int(i), None, "timeout",
                                         f"no result within {self.timeout:g} s"))
            except Exception as e:  # noqa: BLE001 - a crashed worker is a result too
                out.append(MeasureResult(int(i), None, "run", _short(e)))
        if any(r.kind == "timeout" for r in out) and isinstance(self.executor,
                                                                 cf.ProcessPoolExecutor):
            self._restart_pool()
        return out

    def _restart_pool(self) -> None:
        workers = kill_pool(self.executor)
        self.executor = new_pool(max(1, workers))
