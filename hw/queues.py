"""Dependency-token queues and the token ports of the three execution modules.

A token carries no data, so a queue is a counter of depth ``TOKEN_QUEUE_DEPTH``: ``push``
increments it (ignored when full; a module waits for ``ready`` before pushing), ``pop``
decrements it (only when ``avail``). A token pushed in cycle t can be popped in cycle t+1.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from vta.isa.layout import TOKEN_QUEUE_DEPTH

__all__ = ["TokenQueue", "TokenPopSignature", "TokenPushSignature"]


class TokenPopSignature(wiring.Signature):
    """The consumer's side of a token queue: ``avail`` (a token is there) and ``pop``."""

    def __init__(self) -> None:
        super().__init__({"pop": Out(1), "avail": In(1)})


class TokenPushSignature(wiring.Signature):
    """The producer's side of a token queue: ``ready`` (not full) and ``push``."""

    def __init__(self) -> None:
        super().__init__({"push": Out(1), "ready": In(1)})


class TokenQueue(wiring.Component):
    """A dependency-token queue (a saturating up/down counter).

    ``clear`` empties it (used at launch); ``count`` is the number of tokens held.
    """

    def __init__(self, depth: int = TOKEN_QUEUE_DEPTH) -> None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            self._MustUse__silence = True  # rejected: never elaborated
            if isinstance(depth, bool) or not isinstance(depth, int):
                raise TypeError(f"Token queue depth must be an integer, not {depth!r}")
            raise ValueError(f"Token queue depth must be at least 1, not {depth!r}")
        self.depth = depth
        super().__init__({
            "producer": In(TokenPushSignature()),
            "consumer": In(TokenPopSignature()),
            "clear": In(1),
            "count": Out(range(depth + 1)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        count = Signal(range(self.depth + 1))
        push = Signal()
        pop = Signal()
        m.d.comb += [
            self.count.eq(count),
            self.producer.ready.eq(count != self.depth),
            self.consumer.avail.eq(count != 0),
            push.eq(self.producer.push & (count != self.depth)),
            pop.eq(self.consumer.pop & (count != 0)),
        ]
        with m.If(self.clear):
            m.d.sync += count.eq(0)
        with m.Elif(push & ~pop):
            m.d.sync += count.eq(count + 1)
        with m.Elif(pop & ~push):
            m.d.sync += count.eq(count - 1)
        return m
