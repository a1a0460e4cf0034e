"""The memory port: internal burst streams, the burst splitter and the read arbiter.

Inside the core every DMA client talks to memory with three small typed streams:

- a request stream (:func:`req_layout`): ``addr`` (bus-aligned byte address) and ``len``
  (beats - 1, at most 15), one per AXI burst;
- a read-data stream (:func:`rdata_layout`): ``data`` and ``last``;
- for the single writer (store) a write-data stream (:func:`wdata_layout`): ``data``, ``strb``,
  ``last``, and a bare response stream.

:class:`BurstSplitter` turns a 2D strided element transfer into bursts that never cross a
16-beat-aligned boundary (hence never a 4 KiB boundary); :class:`ReadArbiter` shares the AXI read
channels between several clients, remembering the owner of every outstanding burst so read data
goes back to it in order. :class:`vta.hw.core.VTACore` flattens these onto the ``m_axi_*`` ports.
:class:`AxiErrorMonitor` watches the AXI responses and latches the first SLVERR/DECERR with the
address of its burst.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

__all__ = ["req_layout", "rdata_layout", "wdata_layout", "BurstSplitter", "ReadArbiter",
           "AxiErrorMonitor", "MAX_BURST"]

#: Longest burst issued (AXI3-compatible).
MAX_BURST = 16
ADDR_BITS = 32


def req_layout() -> data.StructLayout:
    return data.StructLayout({"addr": ADDR_BITS, "len": 4})


def rdata_layout(bus_bytes: int) -> data.StructLayout:
    return data.StructLayout({"data": bus_bytes * 8, "last": 1})


def wdata_layout(bus_bytes: int) -> data.StructLayout:
    return data.StructLayout({"data": bus_bytes * 8, "strb": bus_bytes, "last": 1})


def transfer_layout(size_bits: int = 16) -> data.StructLayout:
    """A 2D element transfer: ``y_size`` rows of ``x_size`` elements, row ``y`` at element
    ``dram_base + y * x_stride``."""
    return data.StructLayout({"dram_base": 32, "y_size": size_bits, "x_size": size_bits,
                              "x_stride": size_bits})


class BurstSplitter(wiring.Component):
    """Split a 2D strided element transfer into AXI bursts.

    Elements are ``elem_bytes`` wide (a power of two) at element addresses; each row's bytes are
    covered by bus-aligned bursts of at most :data:`MAX_BURST` beats that do not cross a
    16-beat-aligned boundary. ``busy`` is high from the accepted command until the last burst is
    handed out. Rows of zero elements issue nothing.

    Timing: the request stream comes from registers. Per row one cycle computes the row's first
    and last beat (one adder: ``row + x_size - 1``; beats are shifts of element addresses, as
    both sizes are powers of two), then one burst per cycle follows; a burst's length is 4-bit
    arithmetic on the low beat bits, and "last burst of the row" is a register (the row's burst
    count, from the low bits of its first element in the same cycle, counted down).
    """

    def __init__(self, *, elem_bytes: int, bus_bytes: int, size_bits: int = 16) -> None:
        if elem_bytes & (elem_bytes - 1) or bus_bytes & (bus_bytes - 1):
            self._MustUse__silence = True
            raise ValueError(f"Element and bus sizes must be powers of two, not "
                             f"{elem_bytes!r} and {bus_bytes!r}")
        self.elem_bytes, self.bus_bytes, self.size_bits = elem_bytes, bus_bytes, size_bits
        super().__init__({
            "cmd": In(stream.Signature(transfer_layout(size_bits))),
            "req": Out(stream.Signature(req_layout())),
            "busy": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        log_e, log_w = ceil_log2(self.elem_bytes), ceil_log2(self.bus_bytes)
        log_b = ceil_log2(MAX_BURST)
        elem_bits = ADDR_BITS + 2  # element addresses (a row may end past 2**32 elements)
        beat_bits = elem_bits + max(0, log_e - log_w)

        def beat_of(elem, *, last: bool):
            """The bus beat holding the first (or last) byte of element ``elem``."""
            if log_e >= log_w:
                sh = log_e - log_w
                low = (1 << sh) - 1 if last else 0
                return Cat(Const(low, sh), elem) if sh else elem
            return elem >> (log_w - log_e)

        row_elem = Signal(elem_bits)  # element address of the next row
        row_last = Signal(elem_bits)  # element address of the current row's last element
        y_left = Signal(self.size_bits)  # rows after the current one
        x_size_m1 = Signal(self.size_bits)
        x_stride = Signal(self.size_bits)
        cur = Signal(beat_bits)  # beat address of the next burst
        last = Signal(beat_bits)
        m.d.comb += last.eq(beat_of(row_last, last=True))

        out_valid = Signal()
        out_addr = Signal(ADDR_BITS)
        out_len = Signal(log_b)
        m.d.comb += [self.req.valid.eq(out_valid), self.req.payload.addr.eq(out_addr),
                     self.req.payload.len.eq(out_len)]
        with m.If(self.req.ready):
            m.d.sync += out_valid.eq(0)

        # "the next burst is the row's last" is a register: the row's burst count minus one
        # is computed in ROW from the low bits of the row's first element (a 16-beat block
        # holds 2**log_kb elements; element addresses are element-aligned, so the count does
        # not depend on the higher address bits) and counted down per burst
        log_kb = log_b + log_w - log_e
        if log_kb > 0:
            n_bursts_m1 = (row_elem[:log_kb] + x_size_m1) >> log_kb
        elif log_kb == 0:
            n_bursts_m1 = x_size_m1
        else:  # an element spans 2**-log_kb blocks
            n_bursts_m1 = (x_size_m1 << -log_kb) + ((1 << -log_kb) - 1)
        bursts_left = Signal(self.size_bits + max(0, -log_kb) + 1)
        same_block = Signal()  # the next burst ends the row (bursts_left == 0)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [self.cmd.ready.eq(1), self.busy.eq(out_valid)]
                # latched in every idle cycle (no enable from ``valid``: a short path)
                p = self.cmd.payload
                m.d.sync += [row_elem.eq(p.dram_base), y_left.eq(p.y_size - 1),
                             x_size_m1.eq(p.x_size - 1), x_stride.eq(p.x_stride)]
                with m.If(self.cmd.valid & (p.y_size != 0) & (p.x_size != 0)):
                    m.next = "ROW"
            with m.State("ROW"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [cur.eq(beat_of(row_elem, last=False)),
                             row_last.eq(row_elem + x_size_m1),
                             row_elem.eq(row_elem + x_stride),
                             bursts_left.eq(n_bursts_m1), same_block.eq(n_bursts_m1 == 0)]
                m.next = "BURST"
            with m.State("BURST"):
                m.d.comb += self.busy.eq(1)
                with m.If(~out_valid | self.req.ready):
                    m.d.sync += [
                        out_valid.eq(1), out_addr.eq(cur << log_w),
                        out_len.eq(Mux(same_block, last[:log_b] - cur[:log_b], ~cur[:log_b])),
                        cur.eq(Cat(Const(0, log_b), cur[log_b:] + 1)),
                        bursts_left.eq(bursts_left - 1), same_block.eq(bursts_left == 1),
                    ]
                    with m.If(same_block):
                        m.d.sync += y_left.eq(y_left - 1)
                        with m.If(y_left == 0):
                            m.next = "IDLE"
                        with m.Else():
                            m.next = "ROW"
        return m


class ReadArbiter(wiring.Component):
    """Share one AXI read channel pair between ``clients`` request/data stream pairs.

    Requests are granted by fixed priority (client 0 first) into a register stage, so the AR
    payload is stable until accepted. The owner of each accepted burst is queued (up to
    ``max_outstanding``); read beats go to the owner at the head and ``last`` retires it.
    A client must be able to take every beat it asked for. While ``halt`` is high no new
    request is granted (a request already in the register stage stays valid until accepted).
    """

    def __init__(self, *, clients: int, bus_bytes: int, max_outstanding: int = 4) -> None:
        self.clients, self.bus_bytes, self.max_outstanding = clients, bus_bytes, max_outstanding
        super().__init__({
            "req": In(stream.Signature(req_layout())).array(clients),
            "rdata": Out(stream.Signature(rdata_layout(bus_bytes))).array(clients),
            "ar": Out(stream.Signature(req_layout())),
            "r": In(stream.Signature(rdata_layout(bus_bytes))),
            "outstanding": Out(range(max_outstanding + 1)),
            "halt": In(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        n, depth = self.clients, self.max_outstanding
        id_bits = max(1, ceil_log2(n))
        ptr_bits = max(1, ceil_log2(depth))
        owners = [Signal(id_bits, name=f"owner{k}") for k in range(depth)]
        head = Signal(ptr_bits)
        tail = Signal(ptr_bits)
        level = Signal(range(depth + 1))
        m.d.comb += self.outstanding.eq(level)

        ar_valid = Signal()
        ar_payload = Signal(req_layout())
        m.d.comb += [self.ar.valid.eq(ar_valid), self.ar.payload.eq(ar_payload)]

        # grant: the register stage can take a request when empty or being emptied, and the
        # owner queue has room (counting the request sitting in the register)
        take = Signal()
        m.d.comb += take.eq((~ar_valid | self.ar.ready) & (level < depth) & ~self.halt)
        push = Signal()
        pop = Signal()
        granted = Signal(id_bits)
        with m.If(ar_valid & self.ar.ready):
            m.d.sync += ar_valid.eq(0)
        for k in reversed(range(n)):
            with m.If(self.req[k].valid):
                m.d.comb += granted.eq(k)
        any_valid = Signal()
        m.d.comb += any_valid.eq(_any(r.valid for r in self.req))
        for k in range(n):
            lower = _any(self.req[j].valid for j in range(k))
            m.d.comb += self.req[k].ready.eq(take & ~lower)
        with m.If(take & any_valid):
            m.d.comb += push.eq(1)
            m.d.sync += ar_valid.eq(1)
            for k in reversed(range(n)):
                with m.If(self.req[k].valid):
                    m.d.sync += ar_payload.eq(self.req[k].payload)
            for k in range(depth):
                with m.If(tail == k):
                    m.d.sync += owners[k].eq(granted)
            m.d.sync += tail.eq(Mux(tail == depth - 1, 0, tail + 1))

        # read data is routed to the owner of the oldest burst; the level counts bursts whose
        # request left the arbiter, so beats can never arrive for an empty queue. The owner at
        # the head is kept one-hot in registers (head_is[k]: a burst is outstanding and the
        # oldest belongs to client k), computed from the queue's next state, so routing a
        # beat is one AND gate after the memory's valid.
        head_is = Signal(n)
        for k in range(n):
            m.d.comb += [
                self.rdata[k].payload.eq(self.r.payload),
                self.rdata[k].valid.eq(self.r.valid & head_is[k]),
            ]
        m.d.comb += self.r.ready.eq(_any(head_is[k] & self.rdata[k].ready for k in range(n)))
        with m.If(self.r.valid & self.r.ready & self.r.payload.last):
            m.d.comb += pop.eq(1)
        head_next = Signal(ptr_bits)  # the head after a pop
        m.d.comb += head_next.eq(Mux(head == depth - 1, 0, head + 1))
        m.d.sync += [head.eq(Mux(pop, head_next, head)), level.eq(level + push - pop)]

        def owner_onehot(ptr, only_new) -> object:
            """head_is for the head pointer ``ptr``: none when the queue empties; the request
            granted now when it lands at the head of an empty queue; else the queued owner."""
            owner = Signal(id_bits)
            for k in range(depth):
                with m.If(ptr == k):
                    m.d.comb += owner.eq(owners[k])
            with m.If(only_new):
                m.d.comb += owner.eq(granted)
            return Mux(only_new & ~push, 0, Const(1, n) << owner)

        # both outcomes are computed from registers and the grant; the pop (late: it depends
        # on the clients' ready and the memory's last) only selects between them
        m.d.sync += head_is.eq(Mux(pop, owner_onehot(head_next, level == 1),
                                   owner_onehot(head, level == 0)))
        return m


class _AddressQueue(wiring.Component):
    """The start addresses of the bursts in flight on one direction, oldest first: pushed at
    the address handshake, popped at the burst's last response. ``depth`` must be at least the
    number of bursts the master keeps outstanding (the core's read arbiter and store DMA keep
    at most 4); a push into a full queue is dropped."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        super().__init__({"push": In(1), "addr": In(ADDR_BITS), "pop": In(1),
                          "head": Out(ADDR_BITS)})

    def elaborate(self, platform) -> Module:
        m = Module()
        slots = [Signal(ADDR_BITS, name=f"slot{k}") for k in range(self.depth)]
        rd = Signal(range(self.depth))
        wr = Signal(range(self.depth))
        level = Signal(range(self.depth + 1))
        push = Signal()
        pop = Signal()
        m.d.comb += [push.eq(self.push & (level < self.depth)), pop.eq(self.pop & (level > 0))]
        with m.If(push):
            for k in range(self.depth):
                with m.If(wr == k):
                    m.d.sync += slots[k].eq(self.addr)
            m.d.sync += wr.eq(Mux(wr == self.depth - 1, 0, wr + 1))
        with m.If(pop):
            m.d.sync += rd.eq(Mux(rd == self.depth - 1, 0, rd + 1))
        m.d.sync += level.eq(level + push - pop)
        for k in range(self.depth):
            with m.If(rd == k):
                m.d.comb += self.head.eq(slots[k])
        return m


class AxiErrorMonitor(wiring.Component):
    """Latches the first AXI error response (``rresp`` or ``bresp`` of SLVERR 2 or DECERR 3).

    The inputs are the AXI handshakes as the port sees them. ``error`` stays high until reset;
    ``write`` tells a write response from a read beat, ``resp`` keeps the code and ``addr`` the
    start address of the burst the response belongs to (responses come in order: one ID).
    """

    def __init__(self, *, max_outstanding: int = 4) -> None:
        self.max_outstanding = max_outstanding
        super().__init__({
            "ar_done": In(1), "araddr": In(ADDR_BITS),
            "r_done": In(1), "rlast": In(1), "rresp": In(2),
            "aw_done": In(1), "awaddr": In(ADDR_BITS),
            "b_done": In(1), "bresp": In(2),
            "error": Out(1), "write": Out(1), "resp": Out(2), "addr": Out(ADDR_BITS),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.reads = reads = _AddressQueue(self.max_outstanding)
        m.submodules.writes = writes = _AddressQueue(self.max_outstanding)
        m.d.comb += [
            reads.push.eq(self.ar_done), reads.addr.eq(self.araddr),
            reads.pop.eq(self.r_done & self.rlast),
            writes.push.eq(self.aw_done), writes.addr.eq(self.awaddr),
            writes.pop.eq(self.b_done),
        ]
        with m.If(~self.error):
            # (a read error wins when both come in the same cycle)
            with m.If(self.r_done & self.rresp[1]):
                m.d.sync += [self.error.eq(1), self.write.eq(0), self.resp.eq(self.rresp),
                             self.addr.eq(reads.head)]
            with m.Elif(self.b_done & self.bresp[1]):
                m.d.sync += [self.error.eq(1), self.write.eq(1), self.resp.eq(self.bresp),
                             self.addr.eq(writes.head)]
        return m


def _any(values) -> object:
    out = Const(0, 1)
    for v in values:
        out = out | v
    return out
