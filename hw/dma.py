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

        ebits = self.elem_bytes * 8
        sbits = ceil_log2(self.slots)
        # the command, latched
        sram_base = Signal(16)
        y_pad_0, y_pad_1, x_pad_0, x_pad_1 = (Signal(4) for _ in range(4))
        y_size = Signal(16)
        x_size = Signal(16)
        x_stride = Signal(sbits)  # only its low bits matter (slot of each row's first element)
        dram_low = Signal(sbits)
        setup = Signal()
        active = Signal()
        # bounds, computed in the setup cycle (17-bit row/column indices)
        cols = Signal(17)
        y0_m1, yend_m1, x0_m1 = (Signal(17) for _ in range(3))
        y_has = Signal()
        x0_zero = Signal()
        # position
        sram_addr = Signal(16)
        rows_left = Signal(17)
        cols_left = Signal(17)
        row_last = Signal()  # rows_left == 1 (flags kept with the counters: the row-end
        col_last = Signal()  # decision is then one register, not a 17-bit comparison)
        cols_one = Signal()  # cols == 1
        r = Signal(17)
        c = Signal(17)
        data_row = Signal()  # row r holds data (not padding)
        data_col = Signal()  # column c holds data
        row_slot = Signal(sbits)  # slot of the row's first data element in its beat
        slot = Signal(sbits)  # slot of the current data element in its beat
        col_end = Signal()  # the current entry is the last data entry of its row
        col_end_at0 = Signal()  # ... for c == 0
        xend_m2 = Signal(17)  # col_end of the next entry of a row: c == xend_m2
        chunk = Signal(range(self.chunks))
        # the SRAM write, registered
        wr_addr = Signal(16)
        wr_data = Signal(self.bus_bytes * 8 if self.chunks > 1 else ebits)
        wr_en = Signal(len(self.sram.en))

        wr_any = Signal()  # a write is in the registers (wr_en != 0)
        m.d.comb += self.busy.eq(setup | active | splitter.busy | wr_any)
        p = self.cmd.payload
        _transfer_cmd(m, splitter, p)
        m.d.comb += self.cmd.ready.eq(~self.busy)
        with m.If(~self.busy):  # latched in every idle cycle (no enable from ``valid``)
            m.d.sync += [
                sram_base.eq(p.sram_base), y_pad_0.eq(p.y_pad_0), y_pad_1.eq(p.y_pad_1),
                x_pad_0.eq(p.x_pad_0), x_pad_1.eq(p.x_pad_1), y_size.eq(p.y_size),
                x_size.eq(p.x_size), x_stride.eq(p.x_stride[:sbits]),
                dram_low.eq(p.dram_base[:sbits]),
            ]
        with m.If(self.cmd.valid & self.cmd.ready & (p.x_size != 0)):
            m.d.comb += splitter.cmd.valid.eq(1)
            m.d.sync += setup.eq(1)
        # active, data_row and data_col through their next-state values, from which two
        # flags are registered as well: ``take`` (the current entry is data, read from memory)
        # and ``pad`` (it is padding). The advance decision is then one gate after flip-flops
        # and the memory's valid.
        nxt_active, nxt_row, nxt_col = Signal(), Signal(), Signal()
        take, pad = Signal(), Signal()
        m.d.comb += [nxt_active.eq(active), nxt_row.eq(data_row), nxt_col.eq(data_col)]
        m.d.sync += [active.eq(nxt_active), data_row.eq(nxt_row), data_col.eq(nxt_col),
                     take.eq(nxt_active & nxt_row & nxt_col),
                     pad.eq(nxt_active & ~(nxt_row & nxt_col))]
        with m.If(setup):
            n_rows = y_pad_0 + y_size + y_pad_1
            n_cols = x_pad_0 + x_size + x_pad_1
            m.d.comb += [nxt_active.eq(n_rows != 0),
                         nxt_row.eq((y_pad_0 == 0) & (y_size != 0)),
                         nxt_col.eq(x_pad_0 == 0)]
            m.d.sync += [
                setup.eq(0), sram_addr.eq(sram_base),
                rows_left.eq(n_rows), cols.eq(n_cols), cols_left.eq(n_cols), r.eq(0), c.eq(0),
                row_last.eq(n_rows == 1), col_last.eq(n_cols == 1), cols_one.eq(n_cols == 1),
                y0_m1.eq(y_pad_0 - 1), yend_m1.eq(y_pad_0 + y_size - 1),
                x0_m1.eq(x_pad_0 - 1),
                y_has.eq(y_size != 0), x0_zero.eq(x_pad_0 == 0),
                row_slot.eq(dram_low), slot.eq(dram_low), chunk.eq(0),
                xend_m2.eq(x_pad_0 + x_size - 2),
                col_end.eq((x_pad_0 == 0) & (x_size == 1)),
                col_end_at0.eq((x_pad_0 == 0) & (x_size == 1)),
            ]

        m.d.comb += [self.sram.addr.eq(wr_addr), self.sram.en.eq(wr_en)]
        if self.chunks > 1:
            m.d.comb += self.sram.data.eq(Cat(*([wr_data] * self.chunks)))
        else:
            m.d.comb += self.sram.data.eq(wr_data)
        m.d.sync += [wr_en.eq(0), wr_any.eq(0), wr_addr.eq(sram_addr)]

        advance = Signal()
        with m.If(take):
            beat = self.rdata.payload.data
            if self.chunks > 1:
                m.d.comb += self.rdata.ready.eq(1)
                with m.If(self.rdata.valid):
                    m.d.sync += [wr_data.eq(beat), wr_en.eq(1 << chunk), wr_any.eq(1),
                                 chunk.eq(chunk + 1)]
                    with m.If(chunk == self.chunks - 1):
                        m.d.sync += chunk.eq(0)
                        m.d.comb += advance.eq(1)
            else:
                m.d.comb += [
                    self.rdata.ready.eq((slot == self.slots - 1) | col_end),
                    advance.eq(self.rdata.valid),
                ]
                with m.If(self.rdata.valid):
                    m.d.sync += [wr_data.eq(beat.word_select(slot, ebits)), wr_en.eq(-1),
                                 wr_any.eq(1)]
            m.d.comb += self.mem_wait.eq(~self.rdata.valid)
        with m.If(pad):
            m.d.comb += advance.eq(1)
            m.d.sync += [wr_data.eq(0), wr_en.eq(-1), wr_any.eq(1)]

        with m.If(advance):
            m.d.sync += sram_addr.eq(sram_addr + 1)
            with m.If(col_last):
                m.d.sync += [c.eq(0), cols_left.eq(cols), col_last.eq(cols_one),
                             col_end.eq(col_end_at0), r.eq(r + 1),
                             rows_left.eq(rows_left - 1), row_last.eq(rows_left == 2)]
                m.d.comb += [nxt_col.eq(x0_zero),
                             nxt_row.eq(Mux(r == yend_m1, 0,
                                            Mux((r == y0_m1) & y_has, 1, data_row)))]
                next_row_slot = Mux(data_row, row_slot + x_stride, row_slot)[:sbits]
                m.d.sync += [row_slot.eq(next_row_slot), slot.eq(next_row_slot)]
                with m.If(row_last):
                    m.d.comb += nxt_active.eq(0)
            with m.Else():
                m.d.sync += [c.eq(c + 1), cols_left.eq(cols_left - 1), col_last.eq(cols_left == 2),
                             col_end.eq(c == xend_m2)]
                m.d.comb += nxt_col.eq(Mux(col_end, 0, Mux(c == x0_m1, 1, data_col)))
                with m.If(data_col):
                    m.d.sync += slot.eq(slot + 1)
        return m


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
        W, E = self.bus_bytes, self.elem_bytes
        m.submodules.splitter = splitter = BurstSplitter(elem_bytes=E, bus_bytes=W)
        p = self.cmd.payload
        _transfer_cmd(m, splitter, p)

        # ---- element reader: OUT entries in order, held on the read port while not taken
        rows_left = Signal(16)  # rows with elements left to read (no x * y multiplier)
        sram_addr = Signal(16)
        x_size = Signal(16)
        x_stride = Signal(16)
        x = Signal(16)  # column of the next element to read
        row_elem = Signal(32)
        e_valid = Signal()  # the read port output holds an element not yet taken
        e_ready = Signal()
        e_slot = Signal(range(self.slots))
        e_last = Signal()  # last element of its row

        # ---- burst bookkeeping
        ob = self.max_outstanding
        lens = [Signal(4, name=f"burst_len{k}") for k in range(ob)]
        lhead = Signal(range(ob))
        ltail = Signal(range(ob))
        llevel = Signal(range(ob + 1))
        bpending = Signal(range(2 * ob + 2))  # bursts issued but not yet answered

        busy = Signal()
        m.d.comb += self.busy.eq(busy | splitter.busy)
        m.d.comb += self.cmd.ready.eq(~busy & ~splitter.busy)
        with m.If(self.cmd.valid & self.cmd.ready & (p.x_size != 0) & (p.y_size != 0)):
            m.d.comb += splitter.cmd.valid.eq(1)
            m.d.sync += [
                busy.eq(1), rows_left.eq(p.y_size), sram_addr.eq(p.sram_base),
                x_size.eq(p.x_size), x_stride.eq(p.x_stride), x.eq(0),
                row_elem.eq(p.dram_base),
            ]

        # AW: a burst goes out together with its length into the length queue
        m.d.comb += [
            self.aw.payload.eq(splitter.req.payload),
            self.aw.valid.eq(splitter.req.valid & (llevel < ob)),
            splitter.req.ready.eq(self.aw.ready & (llevel < ob)),
        ]
        lpush = Signal()
        lpop = Signal()
        with m.If(self.aw.valid & self.aw.ready):
            m.d.comb += lpush.eq(1)
            for k in range(ob):
                with m.If(ltail == k):
                    m.d.sync += lens[k].eq(splitter.req.payload.len)
            m.d.sync += ltail.eq(Mux(ltail == ob - 1, 0, ltail + 1))
        m.d.sync += llevel.eq(llevel + lpush - lpop)

        m.d.comb += self.b.ready.eq(1)
        got_b = Signal()
        m.d.comb += got_b.eq(self.b.valid)
        m.d.sync += bpending.eq(bpending + lpush - got_b)

        # element reader
        advance = Signal()
        m.d.comb += [advance.eq(~e_valid | e_ready), self.sram.addr.eq(sram_addr),
                     # the read port holds its data while not enabled (en's init is 1)
                     self.sram.en.eq(advance & busy & (rows_left != 0))]
        with m.If(advance):
            with m.If(busy & (rows_left != 0)):
                m.d.sync += [
                    e_valid.eq(1), sram_addr.eq(sram_addr + 1),
                    e_last.eq(x == x_size - 1),
                    e_slot.eq((row_elem + x)[:ceil_log2(self.slots)] if self.slots > 1 else 0),
                    x.eq(x + 1),
                ]
                with m.If(x == x_size - 1):
                    m.d.sync += [x.eq(0), row_elem.eq(row_elem + x_stride),
                                 rows_left.eq(rows_left - 1)]
            with m.Else():
                m.d.sync += e_valid.eq(0)

        elem = self.sram.data

        # W: beats of the current burst, wlast on its final beat
        beats_left = Signal(5)  # beats remaining in the burst at the head of the queue
        in_burst = Signal()
        head_len = Signal(4)
        for k in range(ob):
            with m.If(lhead == k):
                m.d.comb += head_len.eq(lens[k])
        can_send = Signal()
        m.d.comb += can_send.eq(in_burst | (llevel != 0))
        cur_left = Signal(5)
        m.d.comb += cur_left.eq(Mux(in_burst, beats_left, head_len + 1))
        m.d.comb += self.w.payload.last.eq(cur_left == 1)
        w_fire = Signal()
        m.d.comb += w_fire.eq(self.w.valid & self.w.ready)
        with m.If(w_fire):
            with m.If(cur_left == 1):
                m.d.sync += in_burst.eq(0)
                m.d.comb += lpop.eq(1)
                m.d.sync += lhead.eq(Mux(lhead == ob - 1, 0, lhead + 1))
            with m.Else():
                m.d.sync += [in_burst.eq(1), beats_left.eq(cur_left - 1)]

        if self.chunks > 1:
            chunk = Signal(range(self.chunks))
            m.d.comb += [
                self.w.payload.data.eq(elem.word_select(chunk, W * 8)),
                self.w.payload.strb.eq(-1),
                self.w.valid.eq(e_valid & can_send),
            ]
            with m.If(w_fire):
                m.d.sync += chunk.eq(chunk + 1)
                with m.If(chunk == self.chunks - 1):
                    m.d.sync += chunk.eq(0)
                    m.d.comb += e_ready.eq(1)
        else:
            # pack elements into a beat; the beat is sent when its last slot (or the row's last
            # element) has been placed
            wbuf = Signal(W * 8)
            wstrb = Signal(W)
            wfull = Signal()
            m.d.comb += [
                self.w.payload.data.eq(wbuf), self.w.payload.strb.eq(wstrb),
                self.w.valid.eq(wfull & can_send),
            ]
            empty_next = Signal()
            m.d.comb += empty_next.eq(~wfull | w_fire)
            with m.If(w_fire):
                m.d.sync += [wfull.eq(0), wstrb.eq(0), wbuf.eq(0)]
            m.d.comb += e_ready.eq(empty_next)
            with m.If(e_valid & empty_next):
                placed = Signal(W * 8)
                strb = Signal(W)
                m.d.comb += [
                    placed.eq(elem << (e_slot * (E * 8))),
                    strb.eq(Const((1 << E) - 1, W) << (e_slot * E)),
                ]
                base_buf = Mux(wfull, 0, wbuf)
                base_strb = Mux(wfull, 0, wstrb)
                m.d.sync += [wbuf.eq(base_buf | placed), wstrb.eq(base_strb | strb)]
                with m.If(e_last | (e_slot == self.slots - 1)):
                    m.d.sync += wfull.eq(1)

        # done: every element read and sent, every burst answered
        sending = Signal()
        if self.chunks > 1:
            m.d.comb += sending.eq(e_valid)
        else:
            m.d.comb += sending.eq(e_valid | wfull)
        with m.If(busy & (rows_left == 0) & ~sending & ~splitter.busy & (bpending == 0)
                  & (llevel == 0)):
            m.d.sync += busy.eq(0)
        m.d.comb += self.mem_wait.eq((self.w.valid & ~self.w.ready)
                                     | (self.aw.valid & ~self.aw.ready)
                                     | (busy & (rows_left == 0) & ~sending & (bpending != 0)))
        return m
