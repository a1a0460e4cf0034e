"""Reusable async helpers for amaranth.sim testbenches of the core's components.

- :func:`stream_put` / :func:`stream_get`: one transfer on a ``lib.stream`` interface;
- :class:`ReadResponder`: serves the internal burst request/read-data streams of a DMA client
  (``vta.hw.axi.req_layout``/``rdata_layout``) from a numpy byte array;
- :class:`WriteResponder`: takes the internal AW/W/B streams of the store path and writes the
  enabled bytes into a numpy byte array, checking burst lengths and boundaries.

Both responders are cycle-level (one beat per cycle at most), can insert a first-beat latency
and seeded random stalls, and are added with ``sim.add_testbench(r.run, background=True)``.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["stream_put", "stream_get", "split_bursts", "ReadResponder", "WriteResponder"]


async def stream_put(ctx: Any, stream: Any, payload: Any) -> None:
    """Send one payload on ``stream`` (the testbench drives valid/payload).

    ``payload`` may be a plain integer even when the stream's payload is a ``data.View``.
    """
    ctx.set(stream.valid, 1)
    target = stream.payload
    if isinstance(payload, int) and hasattr(target, "as_value"):
        target = target.as_value()
    ctx.set(target, payload)
    await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def stream_get(ctx: Any, stream: Any) -> Any:
    """Receive one payload from ``stream`` (the testbench drives ready)."""
    ctx.set(stream.ready, 1)
    (payload,) = await ctx.tick().sample(stream.payload).until(stream.valid)
    ctx.set(stream.ready, 0)
    return payload


async def split_bursts(ctx: Any, splitter: Any, cmd: tuple[int, int, int, int],
                       ready: Callable[[], int] = lambda: 1) -> list[tuple[int, int]]:
    """Give a burst splitter one transfer ``(dram_base, y_size, x_size, x_stride)`` and collect
    its bursts as ``(byte address, beats)`` until it is idle; ``ready()`` drives the request
    stream's ready each cycle (back-pressure)."""
    base, ys, xs, stride = cmd
    await stream_put(ctx, splitter.cmd, {"dram_base": base, "y_size": ys, "x_size": xs,
                                         "x_stride": stride})
    got = []
    while True:
        rdy = ready()
        ctx.set(splitter.req.ready, rdy)
        _, _, busy, valid, payload = await ctx.tick().sample(
            splitter.busy, splitter.req.valid, splitter.req.payload)
        if valid and rdy:
            got.append((int(payload.addr), int(payload.len) + 1))
        if not busy and not valid:
            break
    ctx.set(splitter.req.ready, 0)
    return got


def _check_burst(addr: int, length: int, bus_bytes: int) -> None:
    if addr % bus_bytes:
        raise AssertionError(f"burst address {addr:#x} is not bus-aligned")
    if not 1 <= length <= 16:
        raise AssertionError(f"burst of {length} beats")
    if addr // 4096 != (addr + length * bus_bytes - 1) // 4096:
        raise AssertionError(f"burst at {addr:#x} of {length} beats crosses 4 KiB")


class ReadResponder:
    """A memory for one request/read-data stream pair, reading from ``mem`` (uint8)."""

    def __init__(self, mem: np.ndarray, req: Any, rdata: Any, *, bus_bytes: int,
                 latency: int = 2, stall: float = 0.0, seed: int = 0) -> None:
        self.mem, self.req, self.rdata, self.bus_bytes = mem, req, rdata, bus_bytes
        self.latency, self.stall, self.rng = latency, stall, random.Random(seed)
        self.bursts: list[tuple[int, int]] = []
        self.beats = 0
        self._req_ready = True

    def _word(self, addr: int) -> int:
        return int.from_bytes(self.mem[addr:addr + self.bus_bytes].tobytes(), "little")

    async def run(self, ctx: Any) -> None:
        pending: deque[list[int]] = deque()  # [addr, beats left, cycle ready]
        cycle = 0
        rvalid = 0
        ctx.set(self.req.ready, 1)
        async for _clk, _rst, req_valid, req_payload, rready in ctx.tick().sample(
                self.req.valid, self.req.payload, self.rdata.ready):
            cycle += 1
            if req_valid and self._req_ready:
                addr, length = int(req_payload.addr), int(req_payload.len) + 1
                _check_burst(addr, length, self.bus_bytes)
                self.bursts.append((addr, length))
                pending.append([addr, length, cycle + self.latency])
            if rvalid and rready:
                self.beats += 1
                burst = pending[0]
                burst[0] += self.bus_bytes
                burst[1] -= 1
                if burst[1] == 0:
                    pending.popleft()
            self._req_ready = self.rng.random() >= self.stall
            ctx.set(self.req.ready, self._req_ready)
            if pending and pending[0][2] <= cycle and self.rng.random() >= self.stall:
                addr, left, _ = pending[0]
                ctx.set(self.rdata.payload.data, self._word(addr))
                ctx.set(self.rdata.payload.last, left == 1)
                rvalid = 1
            else:
                rvalid = 0
            ctx.set(self.rdata.valid, rvalid)


class WriteResponder:
    """A memory for the AW/W/B streams of the store path, writing into ``mem`` (uint8)."""

    def __init__(self, mem: np.ndarray, aw: Any, w: Any, b: Any, *, bus_bytes: int,
                 stall: float = 0.0, seed: int = 0) -> None:
        self.mem, self.aw, self.w, self.b, self.bus_bytes = mem, aw, w, b, bus_bytes
        self.stall, self.rng = stall, random.Random(seed)
        self.bursts: list[tuple[int, int]] = []
        self.beats = 0

    async def run(self, ctx: Any) -> None:
        bursts: deque[list[int]] = deque()  # [addr, beats left]
        responses = 0
        aw_ready = w_ready = bvalid = 0
        async for _clk, _rst, aw_valid, aw_payload, w_valid, w_payload, bready in \
                ctx.tick().sample(self.aw.valid, self.aw.payload, self.w.valid, self.w.payload,
                                  self.b.ready):
            if aw_valid and aw_ready:
                addr, length = int(aw_payload.addr), int(aw_payload.len) + 1
                _check_burst(addr, length, self.bus_bytes)
                self.bursts.append((addr, length))
                bursts.append([addr, length])
            if w_valid and w_ready:
                if not bursts:
                    raise AssertionError("write data before its address")
                burst = bursts[0]
                data, strb = int(w_payload.data), int(w_payload.strb)
                for k in range(self.bus_bytes):
                    if strb >> k & 1:
                        self.mem[burst[0] + k] = (data >> (8 * k)) & 0xFF
                burst[0] += self.bus_bytes
                burst[1] -= 1
                self.beats += 1
                if bool(w_payload.last) != (burst[1] == 0):
                    raise AssertionError(f"wlast={int(w_payload.last)} with {burst[1]} beats left")
                if burst[1] == 0:
                    bursts.popleft()
                    responses += 1
            if bvalid and bready:
                responses -= 1
            aw_ready = int(self.rng.random() >= self.stall)
            w_ready = int(self.rng.random() >= self.stall)
            bvalid = int(responses > 0)
            ctx.set(self.aw.ready, aw_ready)
            ctx.set(self.w.ready, w_ready)
            ctx.set(self.b.valid, bvalid)
