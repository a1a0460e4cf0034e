"""A cycle-level AXI4 memory model, independent of any simulator.

:class:`AxiMemory` is the slave side of an AXI4 port (the core's memory master): it is stepped once
per clock edge with the master's signal values sampled at that edge and returns the values it
drives during the next cycle. Thin adapters bind it to the Amaranth simulator
(:mod:`vta.hw.simulate`) and to cocotb testbenches, so every simulator of the core sees the same
memory behaviour:

- INCR bursts of 1 to 256 beats (the core uses up to 16), any ``*size`` up to the bus width, up to
  ``max_outstanding`` read and write bursts in flight, responses in order (single ID);
- byte strobes on writes (``wstrb``), ``wlast`` checked against ``awlen``;
- a configurable first-beat latency, an optional bandwidth limit (bytes per cycle, shared by reads
  and writes) and optional random backpressure (``stall`` probability on every ready/valid the
  model drives, never dropping a valid before its handshake);
- protocol checks (burst type, 4 KiB boundary, size) raising :class:`AxiProtocolError`, and bounds
  checks raising :class:`AxiAccessError` (a :class:`vta.isa.errors.ProgramError`): reads beyond the
  backing memory, writes of enabled bytes at or beyond ``write_limit``;
- or, with ``out_of_range="slverr"`` / ``"decerr"``, the bounds checks answer like a bus does: a
  read burst outside the memory returns zero data with that response on every beat, a write
  burst with an enabled byte outside it writes nothing and gets that write response.

Addresses are byte addresses; byte ``a`` of the address space is ``mem[a]``.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from vta.isa.errors import ProgramError

#: Master-driven signals of the AXI4 port (without prefix), sampled at every edge.
AXI_MASTER_OUTPUTS = (
    "araddr", "arlen", "arsize", "arburst", "arvalid", "rready",
    "awaddr", "awlen", "awsize", "awburst", "awvalid",
    "wdata", "wstrb", "wlast", "wvalid", "bready",
)
#: Slave-driven signals (what the memory model drives).
AXI_SLAVE_OUTPUTS = (
    "arready", "rdata", "rresp", "rlast", "rvalid",
    "awready", "wready", "bresp", "bvalid",
)

BURST_INCR = 1
PAGE = 4096
#: AXI response codes.
RESP_OKAY, RESP_SLVERR, RESP_DECERR = 0, 2, 3
_OUT_OF_RANGE = {"raise": None, "slverr": RESP_SLVERR, "decerr": RESP_DECERR}


class AxiProtocolError(RuntimeError):
    """The master broke an AXI4 rule (a hardware bug, not a user error)."""


class AxiAccessError(ProgramError):
    """The program made the core access memory outside the DRAM image."""


@dataclass
class _Burst:
    addr: int
    beats: int
    size: int  # bytes per beat
    ready: int  # first cycle the burst may move data
    beat: int = 0
    resp: int = 0  # the response of every beat (reads) or of the burst (writes)

    def beat_addr(self) -> int:
        if self.beat == 0:
            return self.addr
        return (self.addr & ~(self.size - 1)) + self.beat * self.size


@dataclass
class AxiStats:
    """Traffic counters of one memory model."""

    read_bursts: int = 0
    read_beats: int = 0
    write_bursts: int = 0
    write_beats: int = 0
    bytes_written: int = 0  # strobe-enabled bytes
    read_bytes_by_burst: list[int] = field(default_factory=list, repr=False)

    @property
    def bytes_read(self) -> int:
        return sum(self.read_bytes_by_burst)


class AxiMemory:
    """The slave end of an AXI4 port backed by a byte array; step it once per clock edge."""

    def __init__(self, mem: np.ndarray, *, bus_bytes: int, latency: int = 1,
                 write_latency: int = 1, bandwidth: float | None = None, stall: float = 0.0,
                 seed: int | None = 0, max_outstanding: int = 8,
                 write_limit: int | None = None, out_of_range: str = "raise") -> None:
        if bus_bytes not in (4, 8, 16, 32, 64):
            raise ValueError(f"bus_bytes must be a power of two from 4 to 64, not {bus_bytes!r}")
        if latency < 1 or write_latency < 1:
            raise ValueError(f"latencies must be at least 1 cycle, not {latency}/{write_latency}")
        if not 0.0 <= stall < 1.0:
            raise ValueError(f"stall must be a probability in [0, 1), not {stall!r}")
        if bandwidth is not None and bandwidth <= 0:
            raise ValueError(f"bandwidth must be positive (bytes per cycle), not {bandwidth!r}")
        if out_of_range not in _OUT_OF_RANGE:
            raise ValueError(f"out_of_range must be one of {', '.join(_OUT_OF_RANGE)}, "
                             f"not {out_of_range!r}")
        self.error_resp = _OUT_OF_RANGE[out_of_range]
        self.mem = mem
        self.bus_bytes = bus_bytes
        self.latency = latency
        self.write_latency = write_latency
        self.bandwidth = bandwidth
        self.stall = stall
        self.max_outstanding = max_outstanding
        self.write_limit = len(mem) if write_limit is None else write_limit
        self._rng = random.Random(seed)
        self.stats = AxiStats()
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Drop every burst in flight (the port's reset); memory contents are kept."""
        self.cycle = 0
        self.last_activity = 0
        self._reads: deque[_Burst] = deque()
        self._writes: deque[_Burst] = deque()
        self._bresp: deque[tuple[int, int]] = deque()  # (ready cycle, response)
        self._credit = float(self.bus_bytes)
        self.out: dict[str, int] = dict.fromkeys(AXI_SLAVE_OUTPUTS, 0)

    @property
    def busy(self) -> bool:
        """True while a burst or a write response is in flight."""
        return bool(self._reads or self._writes or self._bresp)

    def _go(self) -> bool:
        return not self.stall or self._rng.random() >= self.stall

    # ------------------------------------------------------------------ checks
    def _check_burst(self, kind: str, addr: int, length: int, size_log: int, burst: int) -> _Burst:
        size = 1 << size_log
        if burst != BURST_INCR:
            raise AxiProtocolError(f"{kind} burst at {addr:#x}: burst type {burst} (only INCR=1)")
        if size > self.bus_bytes:
            raise AxiProtocolError(
                f"{kind} burst at {addr:#x}: size {size} bytes exceeds the "
                f"{self.bus_bytes}-byte bus")
        beats = length + 1
        start = addr & ~(size - 1)
        end = start + beats * size  # one past the last byte
        if start // PAGE != (end - 1) // PAGE:
            raise AxiProtocolError(
                f"{kind} burst at {addr:#x} of {beats} x {size} bytes crosses a 4 KiB boundary")
        resp = RESP_OKAY
        if end > len(self.mem):
            if self.error_resp is None:
                raise AxiAccessError(
                    f"the core {'read' if kind == 'read' else 'wrote'} bytes "
                    f"{addr:#x}..{end - 1:#x}, beyond the {len(self.mem)}-byte memory (is a "
                    f"dram_base or size out of range?)")
            resp = self.error_resp
        return _Burst(addr, beats, size, self.cycle + (self.latency if kind == "read"
                                                       else 0), resp=resp)

    # ------------------------------------------------------------------ data
    def _read_word(self, addr: int) -> int:
        a = addr & ~(self.bus_bytes - 1)
        return int.from_bytes(self.mem[a:a + self.bus_bytes].tobytes(), "little")

    def _write_word(self, addr: int, data: int, strb: int) -> bool:
        """Write the enabled bytes; False when they are out of range (and answered with an
        error response instead)."""
        a = addr & ~(self.bus_bytes - 1)
        full = (1 << self.bus_bytes) - 1
        strb &= full
        if not strb:
            return True
        data_bytes = np.frombuffer(data.to_bytes(self.bus_bytes, "little"), dtype=np.uint8)
        highest = a + strb.bit_length() - 1
        if highest >= self.write_limit and self.error_resp is not None:
            return False
        if highest >= self.write_limit:
            raise AxiAccessError(
                f"the core wrote byte {highest:#x}, beyond the {self.write_limit}-byte DRAM image "
                f"(is a STORE's dram_base or size out of range?)")
        if strb == full:
            self.mem[a:a + self.bus_bytes] = data_bytes
        else:
            for i in range(self.bus_bytes):
                if strb >> i & 1:
                    self.mem[a + i] = data_bytes[i]
        self.stats.bytes_written += bin(strb).count("1")
        return True

    # ------------------------------------------------------------------ one edge
    def step(self, s: Mapping[str, int], *, rst: bool = False) -> dict[str, int]:
        """Advance one clock edge.

        ``s`` holds the master's signals (:data:`AXI_MASTER_OUTPUTS`) as sampled at the edge;
        together with :attr:`out` (what the model drove during the cycle) they decide which
        handshakes happened. Returns the new :attr:`out` for the next cycle.
        """
        if rst:
            self.reset()
            return self.out
        out = self.out
        # -- handshakes of the cycle that just ended
        if out["arready"] and s["arvalid"]:
            b = self._check_burst("read", s["araddr"], s["arlen"], s["arsize"], s["arburst"])
            self._reads.append(b)
            self.stats.read_bursts += 1
            self.stats.read_bytes_by_burst.append(b.beats * b.size)
            self.last_activity = self.cycle
        r_done = bool(out["rvalid"] and s["rready"])
        if r_done:
            head = self._reads[0]
            head.beat += 1
            self.stats.read_beats += 1
            if head.beat == head.beats:
                self._reads.popleft()
            self.last_activity = self.cycle
        if out["awready"] and s["awvalid"]:
            b = self._check_burst("write", s["awaddr"], s["awlen"], s["awsize"], s["awburst"])
            self._writes.append(b)
            self.stats.write_bursts += 1
            self.last_activity = self.cycle
        if out["wready"] and s["wvalid"]:
            head = self._writes[0]
            last = head.beat == head.beats - 1
            if bool(s["wlast"]) != last:
                raise AxiProtocolError(
                    f"write burst at {head.addr:#x}: wlast={s['wlast']} on beat {head.beat + 1} "
                    f"of {head.beats}")
            if head.resp or not self._write_word(head.beat_addr(), s["wdata"], s["wstrb"]):
                head.resp = self.error_resp
            if self.bandwidth is not None:
                self._credit -= self.bus_bytes
            head.beat += 1
            self.stats.write_beats += 1
            if last:
                self._writes.popleft()
                self._bresp.append((self.cycle + self.write_latency, head.resp))
            self.last_activity = self.cycle
        b_done = bool(out["bvalid"] and s["bready"])
        if b_done:
            self._bresp.popleft()
            self.last_activity = self.cycle
        # -- the next cycle
        self.cycle += 1
        cycle = self.cycle
        limited = self.bandwidth is not None
        if limited:
            self._credit = min(self._credit + self.bandwidth, float(self.bus_bytes))
        new = dict(out)
        new["arready"] = int(len(self._reads) < self.max_outstanding and self._go())
        new["awready"] = int(len(self._writes) < self.max_outstanding and self._go())
        if not out["rvalid"] or r_done:
            new["rvalid"] = 0
            if self._reads:
                head = self._reads[0]
                if (head.ready <= cycle and (not limited or self._credit >= self.bus_bytes)
                        and self._go()):
                    if limited:
                        self._credit -= self.bus_bytes
                    new["rvalid"] = 1
                    new["rdata"] = 0 if head.resp else self._read_word(head.beat_addr())
                    new["rlast"] = int(head.beat == head.beats - 1)
                    new["rresp"] = head.resp
        new["wready"] = int(bool(self._writes) and (not limited or self._credit >= self.bus_bytes)
                            and self._go())
        if not out["bvalid"] or b_done:
            new["bvalid"] = int(bool(self._bresp) and self._bresp[0][0] <= cycle and self._go())
            new["bresp"] = self._bresp[0][1] if new["bvalid"] else 0
        self.out = new
        return new


__all__ = ["AxiMemory", "AxiStats", "AxiProtocolError", "AxiAccessError", "RESP_OKAY",
           "RESP_SLVERR", "RESP_DECERR",
           "AXI_MASTER_OUTPUTS", "AXI_SLAVE_OUTPUTS"]
