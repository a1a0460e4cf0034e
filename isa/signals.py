"""Signals while a command runs: Ctrl-C, SIGTERM and SIGHUP raised as exceptions, and a check
for long loops that none of them was lost.

:func:`signals_raise` makes SIGINT raise ``KeyboardInterrupt`` and SIGTERM / SIGHUP raise
:class:`Terminated` (a ``KeyboardInterrupt``), so that every ``finally`` and ``except
BaseException`` on the way out runs: temporary files and folders are removed, tools are
stopped, a tuning log keeps its completed batches. Python raises a handler's exception in
whatever code runs at that moment; when that is a ``__del__`` method or a weakref callback
(Amaranth's elaboration runs many), Python prints "Exception ignored" and drops it, and the
command would go on. Every signal is therefore also noted, and a long loop (the RTL
simulation's) calls :func:`raise_if_signalled`, which raises it again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

#: Terminating signals other than Ctrl-C.
TERMINATING = (signal.SIGTERM, signal.SIGHUP)

#: Signals received while :func:`signals_raise` is active, in order.
_received: list[int] = []


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _exception(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def _raise(signum: int, frame: object) -> None:
    _received.append(signum)
    if signum != signal.SIGINT:
        # a second terminating signal while cleaning up is ignored: the cleanup finishes
        # (SIGKILL still works)
        for sig in TERMINATING:
            signal.signal(sig, signal.SIG_IGN)
    raise _exception(signum)


def raise_if_signalled() -> None:
    """Raise the first signal received while :func:`signals_raise` is active, if there was
    one (its exception was lost if the caller still runs); cheap enough for an inner loop."""
    if _received:
        raise _exception(_received[0])


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """Inside the block, SIGINT raises ``KeyboardInterrupt`` and SIGTERM / SIGHUP raise
    :class:`Terminated` (only the main thread can install handlers; elsewhere, as in some
    test runners, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    saved = {sig: signal.signal(sig, _raise) for sig in (signal.SIGINT, *TERMINATING)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        _received.clear()


def _defaults_in_child() -> None:
    """A forked child (a worker of ``vta compile/tune/explore --jobs N``) starts with the
    default handlers and no noted signal: it dies of SIGTERM, its parent does the cleaning
    up (workers that must not see Ctrl-C ignore SIGINT themselves)."""
    _received.clear()
    if signal.getsignal(signal.SIGINT) is _raise:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in TERMINATING:
        if signal.getsignal(sig) is _raise:
            signal.signal(sig, signal.SIG_DFL)


os.register_at_fork(after_in_child=_defaults_in_child)

__all__ = ["TERMINATING", "Terminated", "raise_if_signalled", "signals_raise"]
