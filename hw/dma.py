"""2D strided DMA engines between the memory port and the on-chip scratchpads.

:class:`DMARead` executes the data movement of a LOAD (any memory type): ``y_pad_0 + y_size +
y_pad_1`` rows of ``x_pad_0 + x_size + x_pad_1`` SRAM entries written consecutively from
``sram_base``, data row ``y`` read from DRAM element ``dram_base + y * x_stride``, padding written
as zeros. :class:`DMAWrite` executes a STORE: OUT-buffer entries (the accumulators already
narrowed to the output width by compute) read consecutively from ``sram_base`` and written to
DRAM element ``dram_base + y * x_stride + x`` with byte strobes.

Element sizes and the bus width are powers of two and element addresses are element-aligned, so
an element either spans ``elem/bus`` whole beats (written into the scratchpad one beat-wide slice
at a time through the write port's granularity) or sits in one of ``bus/elem`` slots of a beat.
A transfer with ``x_size == 0`` does nothing.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .axi import BurstSplitter, rdata_layout, req_layout, wdata_layout

__all__ = ["DMARead", "DMAWrite"]


def _transfer_cmd(m: Module, splitter: BurstSplitter, p) -> None:
    m.d.comb += [
        splitter.cmd.payload.dram_base.eq(p.dram_base),
        splitter.cmd.payload.y_size.eq(p.y_size),
        splitter.cmd.payload.x_size.eq(p.x_size),
        splitter.cmd.payload.x_stride.eq(p.x_stride),
    ]


class DMARead(wiring.Component):
    """LOAD data movement: DRAM -> one scratchpad, with zero padding.

    ``cmd`` takes the memory-instruction view (``vta.hw.decode`` ``mem`` layout) and is ready
    only when the engine is idle; ``busy`` stays high until the last SRAM write.
    ``mem_wait`` is high in cycles where the engine waits for read data.

    Timing: an accepted command is latched, its row/column bounds are computed in the next
    cycle (one setup cycle), then one SRAM entry (or one beat of a wide entry) is written per
    cycle. Whether the current entry is padding is kept in two flags updated by equality tests
    of the row/column counters against bounds precomputed at setup, and the SRAM write port is
    driven from registers (each write lands one cycle after its read beat was taken). The
    read-data ``ready`` comes from registers only (the current entry's slot in its beat and an
    "end of the row's data" flag, both updated one entry ahead): it feeds the read arbiter's
    next-owner logic and the memory's read FIFO in the same cycle.
    """

    def __init__(self, *, mem_layout: data.Layout, elem_bytes: int, bus_bytes: int,
                 addr_width: int) -> None:
        self.elem_bytes, self.bus_bytes, self.addr_width = elem_bytes, bus_bytes, addr_width
        self.chunks = max(1, elem_bytes // bus_bytes)  # beats per element
        self.slots = max(1, bus_bytes // elem_bytes)  # elements per beat
        granularity = bus_bytes * 8 if self.chunks > 1 else None
        super().__init__({
            "cmd": In(stream.Signature(mem_layout)),
            "req": Out(stream.Signature(req_layout())),
            "rdata": In(stream.Signature(rdata_layout(bus_bytes))),
            "sram": In(WritePort.Signature(addr_width=addr_width, shape=elem_bytes * 8,
                                           granularity=granularity)),
            "busy": Out(1),
            "mem_wait": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.splitter = splitter = BurstSplitter(
            elem_bytes=self.elem_bytes, bus_bytes=self.bus_bytes)
        wiring.connect(m, wiring.flipped(self.req), splitter.req)
        r = _ReadRegs(self)
        m.d.comb += self.busy.eq(r.setup | r.active | splitter.busy | r.wr_any)
        self._command(m, r, splitter)
        self._sram_write(m, r)
        self._walk(m, r)
        return m

    def _command(self, m: Module, r: _ReadRegs, splitter: BurstSplitter) -> None:
        """Latch a command, start its bursts, and compute its bounds in the setup cycle."""
        p = self.cmd.payload
        _transfer_cmd(m, splitter, p)
        m.d.comb += self.cmd.ready.eq(~self.busy)
        with m.If(~self.busy):  # latched in every idle cycle (no enable from ``valid``)
            m.d.sync += [
                r.sram_base.eq(p.sram_base), r.y_pad_0.eq(p.y_pad_0), r.y_pad_1.eq(p.y_pad_1),
                r.x_pad_0.eq(p.x_pad_0), r.x_pad_1.eq(p.x_pad_1), r.y_size.eq(p.y_size),
                r.x_size.eq(p.x_size), r.x_stride.eq(p.x_stride[:r.sbits]),
                r.dram_low.eq(p.dram_base[:r.sbits]),
            ]
        with m.If(self.cmd.valid & self.cmd.ready & (p.x_size != 0)):
            m.d.comb += splitter.cmd.valid.eq(1)
            m.d.sync += r.setup.eq(1)
        # active, data_row and data_col through their next-state values, from which two
        # flags are registered as well: ``take`` (the current entry is data, read from memory)
        # and ``pad`` (it is padding). The advance decision is then one gate after flip-flops
        # and the memory's valid.
        m.d.comb += [r.nxt_active.eq(r.active), r.nxt_row.eq(r.data_row),
                     r.nxt_col.eq(r.data_col)]
        m.d.sync += [r.active.eq(r.nxt_active), r.data_row.eq(r.nxt_row),
                     r.data_col.eq(r.nxt_col),
                     r.take.eq(r.nxt_active & r.nxt_row & r.nxt_col),
                     r.pad.eq(r.nxt_active & ~(r.nxt_row & r.nxt_col))]
        with m.If(r.setup):
            y_pad_0, y_size, x_pad_0, x_size = r.y_pad_0, r.y_size, r.x_pad_0, r.x_size
            n_rows = y_pad_0 + y_size + r.y_pad_1
            n_cols = x_pad_0 + x_size + r.x_pad_1
            m.d.comb += [r.nxt_active.eq(n_rows != 0),
                         r.nxt_row.eq((y_pad_0 == 0) & (y_size != 0)),
                         r.nxt_col.eq(x_pad_0 == 0)]
            m.d.sync += [
                r.setup.eq(0), r.sram_addr.eq(r.sram_base),
                r.rows_left.eq(n_rows), r.cols.eq(n_cols), r.cols_left.eq(n_cols), r.row.eq(0),
                r.col.eq(0), r.row_last.eq(n_rows == 1), r.col_last.eq(n_cols == 1),
                r.cols_one.eq(n_cols == 1),
                r.y0_m1.eq(y_pad_0 - 1), r.yend_m1.eq(y_pad_0 + y_size - 1),
                r.x0_m1.eq(x_pad_0 - 1),
                r.y_has.eq(y_size != 0), r.x0_zero.eq(x_pad_0 == 0),
                r.row_slot.eq(r.dram_low), r.slot.eq(r.dram_low), r.chunk.eq(0),
                r.xend_m2.eq(x_pad_0 + x_size - 2),
                r.col_end.eq((x_pad_0 == 0) & (x_size == 1)),
                r.col_end_at0.eq((x_pad_0 == 0) & (x_size == 1)),
            ]

    def _sram_write(self, m: Module, r: _ReadRegs) -> None:
        """The registered SRAM write: a read beat's element (or slice), or zero padding."""
        m.d.comb += [self.sram.addr.eq(r.wr_addr), self.sram.en.eq(r.wr_en)]
        if self.chunks > 1:
            m.d.comb += self.sram.data.eq(Cat(*([r.wr_data] * self.chunks)))
        else:
            m.d.comb += self.sram.data.eq(r.wr_data)
        m.d.sync += [r.wr_en.eq(0), r.wr_any.eq(0), r.wr_addr.eq(r.sram_addr)]

        with m.If(r.take):
            beat = self.rdata.payload.data
            if self.chunks > 1:
                m.d.comb += self.rdata.ready.eq(1)
                with m.If(self.rdata.valid):
                    m.d.sync += [r.wr_data.eq(beat), r.wr_en.eq(1 << r.chunk), r.wr_any.eq(1),
                                 r.chunk.eq(r.chunk + 1)]
                    with m.If(r.chunk == self.chunks - 1):
                        m.d.sync += r.chunk.eq(0)
                        m.d.comb += r.advance.eq(1)
            else:
                m.d.comb += [
                    self.rdata.ready.eq((r.slot == self.slots - 1) | r.col_end),
                    r.advance.eq(self.rdata.valid),
                ]
                with m.If(self.rdata.valid):
                    m.d.sync += [r.wr_data.eq(beat.word_select(r.slot, self.elem_bytes * 8)),
                                 r.wr_en.eq(-1), r.wr_any.eq(1)]
            m.d.comb += self.mem_wait.eq(~self.rdata.valid)
        with m.If(r.pad):
            m.d.comb += r.advance.eq(1)
            m.d.sync += [r.wr_data.eq(0), r.wr_en.eq(-1), r.wr_any.eq(1)]

    @staticmethod
    def _walk(m: Module, r: _ReadRegs) -> None:
        """Step the row/column position (and the data/padding flags) after each entry."""
        sbits = r.sbits
        with m.If(r.advance):
            m.d.sync += r.sram_addr.eq(r.sram_addr + 1)
            with m.If(r.col_last):
                m.d.sync += [r.col.eq(0), r.cols_left.eq(r.cols), r.col_last.eq(r.cols_one),
                             r.col_end.eq(r.col_end_at0), r.row.eq(r.row + 1),
                             r.rows_left.eq(r.rows_left - 1), r.row_last.eq(r.rows_left == 2)]
                m.d.comb += [r.nxt_col.eq(r.x0_zero),
                             r.nxt_row.eq(Mux(r.row == r.yend_m1, 0,
                                              Mux((r.row == r.y0_m1) & r.y_has, 1, r.data_row)))]
                next_row_slot = Mux(r.data_row, r.row_slot + r.x_stride, r.row_slot)[:sbits]
                m.d.sync += [r.row_slot.eq(next_row_slot), r.slot.eq(next_row_slot)]
                with m.If(r.row_last):
                    m.d.comb += r.nxt_active.eq(0)
            with m.Else():
                m.d.sync += [r.col.eq(r.col + 1), r.cols_left.eq(r.cols_left - 1),
                             r.col_last.eq(r.cols_left == 2), r.col_end.eq(r.col == r.xend_m2)]
                m.d.comb += r.nxt_col.eq(Mux(r.col_end, 0, Mux(r.col == r.x0_m1, 1, r.data_col)))
                with m.If(r.data_col):
                    m.d.sync += r.slot.eq(r.slot + 1)


class _ReadRegs:
    """The state of :class:`DMARead`: the latched command, the bounds computed at setup, the
    row/column position with its flags, and the registered SRAM write."""

    def __init__(self, dma: DMARead) -> None:
        self.sbits = sbits = ceil_log2(dma.slots)
        # the command, latched
        self.sram_base = Signal(16)
        self.y_pad_0, self.y_pad_1 = Signal(4), Signal(4)
        self.x_pad_0, self.x_pad_1 = Signal(4), Signal(4)
        self.y_size = Signal(16)
        self.x_size = Signal(16)
        self.x_stride = Signal(sbits)  # only its low bits matter (slot of each row's first elem)
        self.dram_low = Signal(sbits)
        self.setup = Signal()
        self.active = Signal()
        # bounds, computed in the setup cycle (17-bit row/column indices)
        self.cols = Signal(17)
        self.y0_m1, self.yend_m1, self.x0_m1 = Signal(17), Signal(17), Signal(17)
        self.y_has = Signal()
        self.x0_zero = Signal()
        # position
        self.sram_addr = Signal(16)
        self.rows_left = Signal(17)
        self.cols_left = Signal(17)
        self.row_last = Signal()  # rows_left == 1 (flags kept with the counters: the row-end
        self.col_last = Signal()  # decision is then one register, not a 17-bit comparison)
        self.cols_one = Signal()  # cols == 1
        self.row = Signal(17)  # row index r
        self.col = Signal(17)  # column index c
        self.data_row = Signal()  # row r holds data (not padding)
        self.data_col = Signal()  # column c holds data
        self.row_slot = Signal(sbits)  # slot of the row's first data element in its beat
        self.slot = Signal(sbits)  # slot of the current data element in its beat
        self.col_end = Signal()  # the current entry is the last data entry of its row
        self.col_end_at0 = Signal()  # ... for c == 0
        self.xend_m2 = Signal(17)  # col_end of the next entry of a row: c == xend_m2
        self.chunk = Signal(range(dma.chunks))
        # next-state values and the flags registered from them
        self.nxt_active, self.nxt_row, self.nxt_col = Signal(), Signal(), Signal()
        self.take, self.pad = Signal(), Signal()
        self.advance = Signal()
        # the SRAM write, registered
        self.wr_addr = Signal(16)
        self.wr_data = Signal(dma.bus_bytes * 8 if dma.chunks > 1 else dma.elem_bytes * 8)
        self.wr_en = Signal(len(dma.sram.en))
        self.wr_any = Signal()  # a write is in the registers (wr_en != 0)


class DMAWrite(wiring.Component):
    """STORE data movement: OUT buffer -> DRAM.

    ``sram`` is a synchronous read port on the OUT buffer (elements of ``elem_bytes`` bytes, the
    same size in DRAM). The AXI write address, data and response channels are ``aw``, ``w`` and
    ``b``. ``busy`` stays high until the last write response has arrived.
    """

    def __init__(self, *, mem_layout: data.Layout, elem_bytes: int, bus_bytes: int,
                 addr_width: int, max_outstanding: int = 4) -> None:
        self.elem_bytes = elem_bytes
        self.bus_bytes, self.addr_width, self.max_outstanding = bus_bytes, addr_width, \
            max_outstanding
        self.chunks = max(1, self.elem_bytes // bus_bytes)
        self.slots = max(1, bus_bytes // self.elem_bytes)
        super().__init__({
            "cmd": In(stream.Signature(mem_layout)),
            "sram": In(ReadPort.Signature(addr_width=addr_width, shape=elem_bytes * 8)),
            "aw": Out(stream.Signature(req_layout())),
            "w": Out(stream.Signature(wdata_layout(bus_bytes))),
            "b": In(stream.Signature(0)),
            "busy": Out(1),
            "mem_wait": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.splitter = splitter = BurstSplitter(elem_bytes=self.elem_bytes,
                                                         bus_bytes=self.bus_bytes)
        p = self.cmd.payload
        _transfer_cmd(m, splitter, p)
        w = _WriteRegs(self)
        m.d.comb += self.busy.eq(w.busy | splitter.busy)
        m.d.comb += self.cmd.ready.eq(~w.busy & ~splitter.busy)
        with m.If(self.cmd.valid & self.cmd.ready & (p.x_size != 0) & (p.y_size != 0)):
            m.d.comb += splitter.cmd.valid.eq(1)
            m.d.sync += [
                w.busy.eq(1), w.rows_left.eq(p.y_size), w.sram_addr.eq(p.sram_base),
                w.x_size.eq(p.x_size), w.x_stride.eq(p.x_stride), w.x.eq(0),
                w.row_elem.eq(p.dram_base),
            ]
        self._bursts(m, w, splitter)
        self._element_reader(m, w)
        self._beats(m, w)
        if self.chunks > 1:
            self._send_slices(m, w)
        else:
            self._pack(m, w)
        self._done(m, w, splitter)
        return m

    def _bursts(self, m: Module, w: _WriteRegs, splitter: BurstSplitter) -> None:
        """AW: a burst goes out together with its length into the length queue; B: responses
        are counted against the bursts issued."""
        ob = self.max_outstanding
        m.d.comb += [
            self.aw.payload.eq(splitter.req.payload),
            self.aw.valid.eq(splitter.req.valid & (w.llevel < ob)),
            splitter.req.ready.eq(self.aw.ready & (w.llevel < ob)),
        ]
        with m.If(self.aw.valid & self.aw.ready):
            m.d.comb += w.lpush.eq(1)
            for k in range(ob):
                with m.If(w.ltail == k):
                    m.d.sync += w.lens[k].eq(splitter.req.payload.len)
            m.d.sync += w.ltail.eq(Mux(w.ltail == ob - 1, 0, w.ltail + 1))
        m.d.sync += w.llevel.eq(w.llevel + w.lpush - w.lpop)

        m.d.comb += self.b.ready.eq(1)
        got_b = Signal()
        m.d.comb += got_b.eq(self.b.valid)
        m.d.sync += w.bpending.eq(w.bpending + w.lpush - got_b)

    def _element_reader(self, m: Module, w: _WriteRegs) -> None:
        """OUT entries in order, held on the read port while not taken."""
        advance = Signal()
        m.d.comb += [advance.eq(~w.e_valid | w.e_ready), self.sram.addr.eq(w.sram_addr),
                     # the read port holds its data while not enabled (en's init is 1)
                     self.sram.en.eq(advance & w.busy & (w.rows_left != 0))]
        with m.If(advance):
            with m.If(w.busy & (w.rows_left != 0)):
                m.d.sync += [
                    w.e_valid.eq(1), w.sram_addr.eq(w.sram_addr + 1),
                    w.e_last.eq(w.x == w.x_size - 1),
                    w.e_slot.eq((w.row_elem + w.x)[:ceil_log2(self.slots)]
                                if self.slots > 1 else 0),
                    w.x.eq(w.x + 1),
                ]
                with m.If(w.x == w.x_size - 1):
                    m.d.sync += [w.x.eq(0), w.row_elem.eq(w.row_elem + w.x_stride),
                                 w.rows_left.eq(w.rows_left - 1)]
            with m.Else():
                m.d.sync += w.e_valid.eq(0)

    def _beats(self, m: Module, w: _WriteRegs) -> None:
        """W: beats of the burst at the head of the length queue, wlast on its final beat."""
        ob = self.max_outstanding
        beats_left = Signal(5)  # beats remaining in the burst at the head of the queue
        in_burst = Signal()
        head_len = Signal(4)
        for k in range(ob):
            with m.If(w.lhead == k):
                m.d.comb += head_len.eq(w.lens[k])
        m.d.comb += w.can_send.eq(in_burst | (w.llevel != 0))
        cur_left = Signal(5)
        m.d.comb += cur_left.eq(Mux(in_burst, beats_left, head_len + 1))
        m.d.comb += self.w.payload.last.eq(cur_left == 1)
        m.d.comb += w.w_fire.eq(self.w.valid & self.w.ready)
        with m.If(w.w_fire):
            with m.If(cur_left == 1):
                m.d.sync += in_burst.eq(0)
                m.d.comb += w.lpop.eq(1)
                m.d.sync += w.lhead.eq(Mux(w.lhead == ob - 1, 0, w.lhead + 1))
            with m.Else():
                m.d.sync += [in_burst.eq(1), beats_left.eq(cur_left - 1)]

    def _send_slices(self, m: Module, w: _WriteRegs) -> None:
        """An element wider than the bus goes out one beat-wide slice per beat."""
        chunk = Signal(range(self.chunks))
        m.d.comb += [
            self.w.payload.data.eq(self.sram.data.word_select(chunk, self.bus_bytes * 8)),
            self.w.payload.strb.eq(-1),
            self.w.valid.eq(w.e_valid & w.can_send),
        ]
        with m.If(w.w_fire):
            m.d.sync += chunk.eq(chunk + 1)
            with m.If(chunk == self.chunks - 1):
                m.d.sync += chunk.eq(0)
                m.d.comb += w.e_ready.eq(1)

    def _pack(self, m: Module, w: _WriteRegs) -> None:
        """Pack elements narrower than the bus into a beat; the beat is sent when its last
        slot (or the row's last element) has been placed."""
        W, E = self.bus_bytes, self.elem_bytes
        wbuf = Signal(W * 8)
        wstrb = Signal(W)
        m.d.comb += [
            self.w.payload.data.eq(wbuf), self.w.payload.strb.eq(wstrb),
            self.w.valid.eq(w.wfull & w.can_send),
        ]
        empty_next = Signal()
        m.d.comb += empty_next.eq(~w.wfull | w.w_fire)
        with m.If(w.w_fire):
            m.d.sync += [w.wfull.eq(0), wstrb.eq(0), wbuf.eq(0)]
        m.d.comb += w.e_ready.eq(empty_next)
        with m.If(w.e_valid & empty_next):
            placed = Signal(W * 8)
            strb = Signal(W)
            m.d.comb += [
                placed.eq(self.sram.data << (w.e_slot * (E * 8))),
                strb.eq(Const((1 << E) - 1, W) << (w.e_slot * E)),
            ]
            base_buf = Mux(w.wfull, 0, wbuf)
            base_strb = Mux(w.wfull, 0, wstrb)
            m.d.sync += [wbuf.eq(base_buf | placed), wstrb.eq(base_strb | strb)]
            with m.If(w.e_last | (w.e_slot == self.slots - 1)):
                m.d.sync += w.wfull.eq(1)

    def _done(self, m: Module, w: _WriteRegs, splitter: BurstSplitter) -> None:
        """Done: every element read and sent, every burst answered; and the memory wait flag."""
        sending = Signal()
        if self.chunks > 1:
            m.d.comb += sending.eq(w.e_valid)
        else:
            m.d.comb += sending.eq(w.e_valid | w.wfull)
        drained = w.busy & (w.rows_left == 0) & ~sending
        with m.If(drained & ~splitter.busy & (w.bpending == 0) & (w.llevel == 0)):
            m.d.sync += w.busy.eq(0)
        m.d.comb += self.mem_wait.eq((self.w.valid & ~self.w.ready)
                                     | (self.aw.valid & ~self.aw.ready)
                                     | (drained & (w.bpending != 0)))


class _WriteRegs:
    """The state :class:`DMAWrite`'s parts share: the element reader's position, the queue of
    issued burst lengths and the beat buffer's flags."""

    def __init__(self, dma: DMAWrite) -> None:
        self.busy = Signal()
        # element reader: OUT entries in order, held on the read port while not taken
        self.rows_left = Signal(16)  # rows with elements left to read (no x * y multiplier)
        self.sram_addr = Signal(16)
        self.x_size = Signal(16)
        self.x_stride = Signal(16)
        self.x = Signal(16)  # column of the next element to read
        self.row_elem = Signal(32)
        self.e_valid = Signal()  # the read port output holds an element not yet taken
        self.e_ready = Signal()
        self.e_slot = Signal(range(dma.slots))
        self.e_last = Signal()  # last element of its row
        # burst bookkeeping: the lengths of bursts issued on AW, not yet sent on W
        ob = dma.max_outstanding
        self.lens = [Signal(4, name=f"burst_len{k}") for k in range(ob)]
        self.lhead = Signal(range(ob))
        self.ltail = Signal(range(ob))
        self.llevel = Signal(range(ob + 1))
        self.lpush = Signal()
        self.lpop = Signal()
        self.bpending = Signal(range(2 * ob + 2))  # bursts issued but not yet answered
        # W
        self.can_send = Signal()  # a burst is open or its length is queued
        self.w_fire = Signal()
        self.wfull = Signal()  # (packing only) the beat buffer is ready to send
