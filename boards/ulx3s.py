"""The ULX3S-85F top: VTA with an on-chip memory, reached over the board's USB serial port.

The ULX3S has no hard processor, so its top (:class:`UartSoC` inside :class:`ULX3STop`) gives
the host a small serial protocol instead:

- 115200 baud (``baud``), 8N1, on the FTDI port (``ftdi_txd`` in, ``ftdi_rxd`` out).
- Command ``0x01`` + 4 address bytes + 4 data bytes (little-endian): write a 32-bit word;
  answered with one byte ``0x01`` after the write completed.
- Command ``0x02`` + 4 address bytes: read a 32-bit word; answered with its 4 bytes.
- Addresses with bit 31 clear are the device memory (an on-chip RAM of ``ram_kib`` KiB at
  byte address 0, what VTA's AXI master sees as DRAM); addresses with bit 31 set are the VTA
  registers (``0x80000000`` + register offset, through the core's AXI4-Lite slave).

The device memory is a simple dual-port block RAM behind an AXI4 slave (INCR bursts, one beat
per cycle); the serial bridge takes its ports only while the AXI slave is idle. Each AXI
channel between the core and that memory goes through a register slice (:class:`RegisterSlice`:
one cycle more per channel, the same throughput), so no path crosses the die from one to the
other within a clock. The clock comes
from the 25 MHz board oscillator through an ECP5 PLL (:func:`pll_params`), reset from a
power-on counter held while the PLL is unlocked. LEDs: 0 interrupt (finished), 1 bridge busy,
7..2 a heartbeat.
"""


from importlib import resources
from types import SimpleNamespace

from amaranth.hdl import (
    Cat,
    ClockDomain,
    ClockSignal,
    Instance,
    Module,
    Mux,
    ResetSignal,
    Signal,
)
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2
from vta.hw.options import REPLICA_ATTR

from .registry import BoardError

#: Bit 31 of a bridge address selects the VTA registers; below is the device memory.
REG_WINDOW = 0x8000_0000
CMD_WRITE = 0x01
CMD_READ = 0x02


# --------------------------------------------------------------------------- PLL
def pll_params(fin_mhz: float, fout_mhz: float) -> dict[str, float]:
    """EHXPLLL dividers for ``fout_mhz`` from ``fin_mhz`` (the search ``ecppll`` does).

    Returns CLKI_DIV, CLKFB_DIV, CLKOP_DIV, CLKOP_CPHASE and the achieved ``fout``/``fvco``.
    The VCO runs in 400..800 MHz and the phase detector at 3.125..400 MHz; among the settings
    with the smallest frequency error the one with the VCO nearest 600 MHz wins. CLKOP_CPHASE
    (the output phase) is set to half the output divider; nothing in the top is timed against
    the 25 MHz input, so any phase works.
    """
    best: tuple[float, float] | None = None
    params: dict[str, float] = {}
    for clki in range(1, 129):
        pfd = fin_mhz / clki
        if not 3.125 <= pfd <= 400:
            continue
        for fb in range(1, 81):
            fout = pfd * fb
            for op in range(1, 129):
                fvco = fout * op
                if not 400 <= fvco <= 800:
                    continue
                key = (abs(fout - fout_mhz), abs(fvco - 600))
                if best is None or key < best:
                    best = key
                    params = {"CLKI_DIV": clki, "CLKFB_DIV": fb, "CLKOP_DIV": op,
                              "CLKOP_CPHASE": op // 2 - 1, "fout": fout, "fvco": fvco}
    if not params:
        raise BoardError(f"no ECP5 PLL setting makes {fout_mhz} MHz from {fin_mhz} MHz")
    return params


# --------------------------------------------------------------------------- UART
def uart_clocks_per_bit(clock_mhz: float, baud: int = 115200) -> int:
    """The serial bridge's clock cycles per bit at the PLL output the top gets for
    ``clock_mhz`` (from the 25 MHz oscillator)."""
    return round(pll_params(25.0, clock_mhz)["fout"] * 1e6 / baud)


def _uart_divisor(divisor: int) -> int:
    """A UART's clock cycles per bit, checked (at least 4)."""
    if divisor < 4:
        raise ValueError(f"UART divisor must be at least 4, not {divisor!r}")
    return divisor


class UartRx(wiring.Component):
    """8N1 receiver; ``divisor`` clock cycles per bit. ``valid`` pulses for one cycle."""

    rx: In(1, init=1)
    data: Out(8)
    valid: Out(1)

    def __init__(self, divisor: int) -> None:
        self.divisor = _uart_divisor(divisor)
        super().__init__()

    def elaborate(self, platform) -> Module:
        m = Module()
        rx = Signal(init=1)
        rx_meta = Signal(init=1)
        m.d.sync += [rx_meta.eq(self.rx), rx.eq(rx_meta)]
        timer = Signal(range(self.divisor * 3 // 2 + 1))
        bit = Signal(range(9))
        shift = Signal(8)
        m.d.sync += self.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"), m.If(~rx):
                # wait one and a half bits: to the middle of data bit 0
                m.d.sync += [timer.eq(self.divisor * 3 // 2 - 1), bit.eq(0)]
                m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [shift.eq((shift >> 1) | (rx << 7)), bit.eq(bit + 1),
                                 timer.eq(self.divisor - 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("STOP"):
                with m.If(timer == 0):
                    m.d.sync += [self.data.eq(shift), self.valid.eq(rx)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
        return m


class UartTx(wiring.Component):
    """8N1 transmitter: takes ``data`` when ``valid`` and ``ready``."""

    tx: Out(1, init=1)
    data: In(8)
    valid: In(1)
    ready: Out(1)

    def __init__(self, divisor: int) -> None:
        self.divisor = _uart_divisor(divisor)
        super().__init__()

    def elaborate(self, platform) -> Module:
        m = Module()
        timer = Signal(range(self.divisor))
        bits = Signal(range(11))
        shift = Signal(10, init=0x3FF)
        m.d.comb += [self.ready.eq(bits == 0), self.tx.eq(shift[0])]
        with m.If(bits == 0), m.If(self.valid):
            m.d.sync += [shift.eq((self.data << 1) | (1 << 9)), bits.eq(10),
                         timer.eq(self.divisor - 1)]
        with m.Elif(timer == 0):
            m.d.sync += [shift.eq((shift >> 1) | (1 << 9)), bits.eq(bits - 1),
                         timer.eq(self.divisor - 1)]
        with m.Else():
            m.d.sync += timer.eq(timer - 1)
        return m


# --------------------------------------------------------------------------- AXI RAM
class RegisterSlice(wiring.Component):
    """One AXI channel through registers (a two-entry skid buffer): ``o_valid``/``o_data``
    leave flip-flops, ``i_ready`` is a flip-flop, one transfer per cycle, one cycle of latency.
    Between the core and the device memory it cuts the paths that crossed the die in one cycle
    (the core's ready, combined through its read arbiter and DMA selection, into the memory's
    read FIFO; the memory's valid and ready into the core's arbiter and DMA state)."""

    def __init__(self, width: int) -> None:
        super().__init__({"i_valid": In(1), "i_ready": Out(1), "i_data": In(width),
                          "o_valid": Out(1), "o_ready": In(1), "o_data": Out(width)})

    def elaborate(self, platform) -> Module:
        m = Module()
        skid_valid = Signal()  # a transfer taken while the output was stalled
        skid_data = Signal.like(self.i_data)
        m.d.comb += self.i_ready.eq(~skid_valid)
        with m.If(self.o_ready | ~self.o_valid):  # the output register is free this cycle
            with m.If(skid_valid):
                m.d.sync += [self.o_data.eq(skid_data), self.o_valid.eq(1),
                             skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [self.o_data.eq(self.i_data), self.o_valid.eq(self.i_valid)]
        with m.Elif(self.i_valid & ~skid_valid):
            m.d.sync += [skid_data.eq(self.i_data), skid_valid.eq(1)]
        return m


#: The AXI channels between the core's master and the device memory: (valid, ready, payload
#: signals), and whether the core drives them (else the memory does).
AXI_CHANNELS = (("arvalid", "arready", ("araddr", "arlen"), True),
                ("rvalid", "rready", ("rdata", "rresp", "rlast"), False),
                ("awvalid", "awready", ("awaddr", "awlen"), True),
                ("wvalid", "wready", ("wdata", "wstrb", "wlast"), True),
                ("bvalid", "bready", ("bresp",), False))


class AxiRam(wiring.Component):
    """An AXI4 slave (INCR bursts, one beat per cycle) over a block RAM, plus a 32-bit side port
    for the serial bridge that is served only while no AXI burst is in flight.

    Timing: the RAM is split into bit slices as wide as one block RAM is at the RAM's depth
    (8192 x 2 for 64 KiB on a 64-bit bus, 2048 x 9 for 16 KiB, ...), so each slice is one block
    RAM and the read data needs no multiplexer. The read and write addresses are registers
    kept in one copy per group of :data:`SLICES_PER_ADDRESS` slices (the slices spread over the
    die's block-RAM rows; one address register for all of them was the design's slowest net),
    the read enable is constant and the block RAM output goes through two
    registers (block RAM outputs are slow on ECP5: the first register can sit next to the block
    RAM, the second anywhere). The write port is driven from registers (a
    write beat lands one cycle after it was accepted; the response follows the last write).
    Read data then goes through a small FIFO whose output is a register, so ``rdata``/``rvalid``
    leave flip-flops and ``rready`` only steers that FIFO; a read is issued only when the FIFO
    has room for it. A burst's first beat is valid four cycles after its address.
    """

    #: Read FIFO depth: enough for one beat per cycle with the registered room check.
    READ_FIFO_DEPTH = 6
    #: Block-RAM slices that share one copy of the read and the write address register.
    SLICES_PER_ADDRESS = 4

    def __init__(self, *, bus_width: int, ram_kib: int, init: bytes = b"") -> None:
        self.bus_width = bus_width
        self.bus_bytes = bus_width // 8
        self.depth = ram_kib * 1024 // self.bus_bytes
        self.abits = exact_log2(self.depth)
        self.off = exact_log2(self.bus_bytes)
        if len(init) > ram_kib * 1024:
            raise BoardError(f"the initial memory image ({len(init)} bytes) is larger than the "
                             f"{ram_kib} KiB device memory")
        padded = init + bytes(-len(init) % self.bus_bytes)
        self.init = [int.from_bytes(padded[i:i + self.bus_bytes], "little")
                     for i in range(0, len(padded), self.bus_bytes)]
        super().__init__({
            "araddr": In(32), "arlen": In(8), "arvalid": In(1), "arready": Out(1),
            "rdata": Out(bus_width), "rresp": Out(2), "rlast": Out(1), "rvalid": Out(1),
            "rready": In(1),
            "awaddr": In(32), "awlen": In(8), "awvalid": In(1), "awready": Out(1),
            "wdata": In(bus_width), "wstrb": In(self.bus_bytes), "wlast": In(1),
            "wvalid": In(1), "wready": Out(1),
            "bresp": Out(2), "bvalid": Out(1), "bready": In(1),
            # side port: 32-bit word access, byte address
            "side_addr": In(32), "side_wdata": In(32), "side_we": In(1), "side_re": In(1),
            "side_rdata": Out(32), "side_done": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        s = SimpleNamespace()  # the signals the parts below share
        self._slices(m, s)
        m.submodules.rfifo = s.rfifo = SyncFIFOBuffered(width=self.bus_width + 1,
                                                        depth=self.READ_FIFO_DEPTH)
        self._side_state(m, s)
        self._reads(m, s)
        self._writes(m, s)
        self._side_port(m, s)
        self._accept_bursts(m, s)
        return m

    def _slices(self, m: Module, s: SimpleNamespace) -> None:
        """The block-RAM slices, their address registers and write-port registers."""
        rp_data = Signal(self.bus_width)
        # slices as wide as one ECP5 block RAM is at this depth (16 Kib: 8192 x 2, 2048 x 9,
        # ...), so each slice is one block RAM and the read data needs no multiplexer
        sw = min(max(1, 16384 // self.depth), 32, self.bus_width)
        n_slices = self.bus_width // sw
        groups = -(-n_slices // self.SLICES_PER_ADDRESS)

        def copies(name: str) -> list[Signal]:
            """One address register per slice group (kept apart through synthesis)."""
            return [Signal(self.abits, name=f"{name}_{g}", attrs={REPLICA_ATTR: 1})
                    for g in range(groups)]

        r_addrs = copies("r_addr")  # read address: the burst's next beat, or the side port's
        wq_addrs = copies("wq_addr")  # write address of the beat in wq_*
        wq_data = Signal(self.bus_width)
        wq_en = Signal(self.bus_bytes)
        for k in range(n_slices):
            g = k // self.SLICES_PER_ADDRESS
            init = [w >> (sw * k) & ((1 << sw) - 1) for w in self.init]
            m.submodules[f"mem{k}"] = mem = Memory(shape=sw, depth=self.depth, init=init)
            lw = mem.write_port(granularity=8 if sw > 8 else None)
            lr = mem.read_port(transparent_for=())
            lanes = wq_en[sw * k // 8:(sw * (k + 1) + 7) // 8]
            m.d.comb += [lw.addr.eq(wq_addrs[g]), lw.data.eq(wq_data[sw * k:sw * (k + 1)]),
                         lw.en.eq(lanes), lr.addr.eq(r_addrs[g]), lr.en.eq(1),
                         rp_data[sw * k:sw * (k + 1)].eq(lr.data)]
        s.rp_data, s.r_addrs, s.wq_addrs, s.wq_data, s.wq_en = (rp_data, r_addrs, wq_addrs,
                                                                wq_data, wq_en)

    def _side_state(self, m: Module, s: SimpleNamespace) -> None:
        """Side port state (serial bridge): latched request, then two cycles on the RAM."""
        side_q = Signal()  # cycle 1: the side address is on the RAM
        side_q2 = Signal()  # cycle 2: read data at the RAM output
        side_q3 = Signal()  # cycle 3: read data in the first output register
        side_q4 = Signal()  # cycle 4: read data in the second output register
        side_word = Signal(self.abits)
        side_lane = Signal(max(1, self.off - 2))
        side_wdata = Signal(32)
        side_we = Signal()
        side_busy = Signal()
        m.d.comb += side_busy.eq(side_q | side_q2 | side_q3 | side_q4 | self.side_done)
        s.side_q, s.side_q2, s.side_q3, s.side_q4 = side_q, side_q2, side_q3, side_q4
        s.side_word, s.side_lane, s.side_wdata = side_word, side_lane, side_wdata
        s.side_we, s.side_busy = side_we, side_busy

    def _reads(self, m: Module, s: SimpleNamespace) -> None:
        """Reads: issue into the RAM, data into the FIFO, FIFO to the R channel."""
        depth, rfifo, r_addrs = self.READ_FIFO_DEPTH, s.rfifo, s.r_addrs
        r_left = Signal(9)      # beats still to read from the RAM
        r_busy = Signal()       # a burst is accepted and its last beat not yet handed out
        pipe = Signal()         # the RAM output holds a read issued last cycle
        pipe_last = Signal()
        pipe2 = Signal()        # the first output register holds a read issued 2 cycles ago
        pipe2_last = Signal()
        pipe3 = Signal()        # the second output register holds a read issued 3 cycles ago
        pipe3_last = Signal()
        rd_q = Signal(self.bus_width, reset_less=True)
        rd_q2 = Signal(self.bus_width, reset_less=True)
        # beats issued and not yet handed out (in the pipeline or the FIFO), as a counter
        used = Signal(range(depth + 1))
        r_more = Signal()       # r_left != 0
        issue = Signal()
        pop = Signal()
        m.d.comb += [issue.eq(r_busy & r_more & (used != depth)),
                     pop.eq(self.rvalid & self.rready)]
        m.d.sync += used.eq(used + issue - pop)
        with m.If(issue):
            m.d.sync += [r_left.eq(r_left - 1), r_more.eq(r_left != 1)]
            m.d.sync += [a.eq(a + 1) for a in r_addrs]
        m.d.sync += [pipe.eq(issue), pipe_last.eq(r_left == 1), pipe2.eq(pipe),
                     pipe2_last.eq(pipe_last), pipe3.eq(pipe2), pipe3_last.eq(pipe2_last),
                     rd_q.eq(s.rp_data), rd_q2.eq(rd_q)]
        m.d.comb += [rfifo.w_data.eq(Cat(rd_q2, pipe3_last)), rfifo.w_en.eq(pipe3),
                     self.rdata.eq(rfifo.r_data[:self.bus_width]),
                     self.rlast.eq(rfifo.r_data[-1]), self.rvalid.eq(rfifo.r_rdy),
                     rfifo.r_en.eq(self.rready), self.rresp.eq(0)]
        with m.If(self.rvalid & self.rready & self.rlast):
            m.d.sync += r_busy.eq(0)
        s.r_left, s.r_busy, s.r_more, s.rd_q2 = r_left, r_busy, r_more, rd_q2

    def _writes(self, m: Module, s: SimpleNamespace) -> None:
        """Writes: the write port is driven from registers."""
        w_addr = Signal(self.abits)
        w_busy = Signal()
        w_done = Signal()       # the last beat was accepted
        wq_last = Signal()
        m.d.comb += self.bresp.eq(0)
        m.d.sync += [s.wq_en.eq(0), wq_last.eq(0)]
        m.d.comb += self.wready.eq(w_busy & ~w_done)
        with m.If(self.wvalid & self.wready):
            m.d.sync += [w_addr.eq(w_addr + 1), s.wq_data.eq(self.wdata),
                         s.wq_en.eq(self.wstrb), wq_last.eq(self.wlast)]
            m.d.sync += [a.eq(w_addr) for a in s.wq_addrs]
            with m.If(self.wlast):
                m.d.sync += w_done.eq(1)
        with m.If(wq_last):  # the last beat is in the RAM at the end of this cycle
            m.d.sync += self.bvalid.eq(1)
        with m.If(self.bvalid & self.bready):
            m.d.sync += [self.bvalid.eq(0), w_busy.eq(0), w_done.eq(0)]
        s.w_addr, s.w_busy = w_addr, w_busy

    def _side_port(self, m: Module, s: SimpleNamespace) -> None:
        """The side port, only while no burst is in flight. The bridge holds its request until
        side_done; a registered copy of it (side_want) closes the burst channels, so their
        ready signals come from registers only (a burst accepted in the request's first cycle
        delays the side access until it is over)."""
        side_want = Signal()
        m.d.sync += side_want.eq(self.side_we | self.side_re)
        side_req = Signal()
        m.d.comb += side_req.eq(side_want & (self.side_we | self.side_re) & ~s.r_busy
                                & ~s.w_busy & ~s.side_busy)
        with m.If(side_req):
            m.d.sync += [s.side_q.eq(1), s.side_word.eq(self.side_addr[self.off:]),
                         s.side_wdata.eq(self.side_wdata), s.side_we.eq(self.side_we)]
            # the side port reads through the (idle) burst read address registers
            m.d.sync += [a.eq(self.side_addr[self.off:]) for a in s.r_addrs]
            if self.off > 2:
                m.d.sync += s.side_lane.eq(self.side_addr[2:self.off])
        with m.If(s.side_q):
            m.d.sync += [s.side_q.eq(0),
                         s.wq_data.eq(s.side_wdata.replicate(self.bus_width // 32))]
            m.d.sync += [a.eq(s.side_word) for a in s.wq_addrs]
            with m.If(s.side_we):
                for i in range(self.bus_bytes // 4):
                    with m.If(s.side_lane == i):
                        m.d.sync += s.wq_en[4 * i:4 * i + 4].eq(0xF)
        m.d.sync += [s.side_q2.eq(s.side_q), s.side_q3.eq(s.side_q2), s.side_q4.eq(s.side_q3),
                     self.side_done.eq(s.side_q4)]
        with m.If(s.side_q4):
            m.d.sync += self.side_rdata.eq(s.rd_q2.word_select(s.side_lane, 32)
                                           if self.off > 2 else s.rd_q2[:32])
        s.side_want = side_want

    def _accept_bursts(self, m: Module, s: SimpleNamespace) -> None:
        """Accepting bursts (never while the side port has the RAM)."""
        m.d.comb += [self.arready.eq(~s.r_busy & ~s.side_busy & ~s.side_want),
                     self.awready.eq(~s.w_busy & ~s.side_busy & ~s.side_want)]
        with m.If(self.arvalid & self.arready):
            m.d.sync += [s.r_left.eq(self.arlen + 1), s.r_more.eq(1), s.r_busy.eq(1)]
            m.d.sync += [a.eq(self.araddr[self.off:]) for a in s.r_addrs]
        with m.If(self.awvalid & self.awready):
            m.d.sync += [s.w_addr.eq(self.awaddr[self.off:]), s.w_busy.eq(1)]


# --------------------------------------------------------------------------- bridge + SoC
class UartSoC(wiring.Component):
    """The VTA core, the device memory and the serial bridge (one ``sync`` clock domain).

    ``core`` is an Amaranth component with the VTA core's flat ports (``s_axil_*``, ``m_axi_*``,
    ``interrupt``): the real :class:`vta.hw.core.VTACore` in simulation, a :class:`CoreInstance`
    of the separately generated ``vta_core`` module for the bitstream.
    """

    rx: In(1, init=1)
    tx: Out(1, init=1)
    interrupt: Out(1)
    busy: Out(1)

    def __init__(self, core: wiring.Component, *, bus_width: int, ram_kib: int,
                 uart_divisor: int, ram_init: bytes = b"") -> None:
        self.core = core
        self.ram_init = ram_init
        self.bus_width = bus_width
        self.ram_kib = ram_kib
        self.uart_divisor = uart_divisor
        super().__init__()

    def elaborate(self, platform) -> Module:
        m = Module()
        s = SimpleNamespace(core=self.core)  # the parts and signals shared below
        m.submodules.core = self.core
        self._parts(m, s)
        self._bridge_state(m, s)
        with m.FSM():
            self._receive_states(m, s)
            self._access_states(m, s)
            self._reply_states(m, s)
        return m

    def _parts(self, m: Module, s: SimpleNamespace) -> None:
        """The device memory and the UART, the core's AXI master wired to the memory."""
        core = s.core
        m.submodules.ram = ram = AxiRam(bus_width=self.bus_width, ram_kib=self.ram_kib,
                                        init=self.ram_init)
        m.submodules.urx = urx = UartRx(self.uart_divisor)
        m.submodules.utx = utx = UartTx(self.uart_divisor)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx), self.interrupt.eq(core.interrupt)]

        # core AXI master <-> RAM, each channel through a register slice
        for valid, ready, payload, from_core in AXI_CHANNELS:
            src = {p: getattr(core, f"m_axi_{p}") for p in (valid, ready, *payload)}
            dst = {p: getattr(ram, p) for p in (valid, ready, *payload)}
            if not from_core:
                src, dst = dst, src
            data = Cat(*(src[p] for p in payload))
            m.submodules[f"{valid.removesuffix('valid')}_slice"] = rs = RegisterSlice(len(data))
            m.d.comb += [rs.i_valid.eq(src[valid]), src[ready].eq(rs.i_ready),
                         rs.i_data.eq(data), dst[valid].eq(rs.o_valid),
                         rs.o_ready.eq(dst[ready]), Cat(*(dst[p] for p in payload)).eq(rs.o_data)]
        s.ram, s.urx, s.utx = ram, urx, utx

    def _bridge_state(self, m: Module, s: SimpleNamespace) -> None:
        """The bridge's command registers and its AXI-Lite requests to the core's registers."""
        core = s.core
        is_write = Signal()  # the command is CMD_WRITE (else CMD_READ)
        addr = Signal(32)
        data = Signal(32)
        count = Signal(4)
        m.d.comb += self.busy.eq(0)
        # the AXI-Lite requests to the core's registers come from flip-flops (valid set on
        # entering REG, cleared by its handshake); responses are always accepted (one request
        # is outstanding at a time and REG waits for its response)
        ar_valid, aw_valid, w_valid = Signal(), Signal(), Signal()
        m.d.comb += [core.s_axil_araddr.eq(addr), core.s_axil_awaddr.eq(addr),
                     core.s_axil_wdata.eq(data), core.s_axil_wstrb.eq(0xF),
                     core.s_axil_arvalid.eq(ar_valid), core.s_axil_awvalid.eq(aw_valid),
                     core.s_axil_wvalid.eq(w_valid), core.s_axil_rready.eq(1),
                     core.s_axil_bready.eq(1)]
        with m.If(ar_valid & core.s_axil_arready):
            m.d.sync += ar_valid.eq(0)
        with m.If(aw_valid & core.s_axil_awready):
            m.d.sync += aw_valid.eq(0)
        with m.If(w_valid & core.s_axil_wready):
            m.d.sync += w_valid.eq(0)
        s.is_write, s.addr, s.data, s.count = is_write, addr, data, count
        s.ar_valid, s.aw_valid, s.w_valid = ar_valid, aw_valid, w_valid

    def _receive_states(self, m: Module, s: SimpleNamespace) -> None:
        """CMD, ADDR, DATA: receive the command byte, the address and the write data."""
        urx, count = s.urx, s.count
        with m.State("CMD"), m.If(urx.valid & ((urx.data == CMD_WRITE) |
                                                 (urx.data == CMD_READ))):
            m.d.sync += [s.is_write.eq(urx.data == CMD_WRITE), count.eq(0)]
            m.next = "ADDR"
        with m.State("ADDR"), m.If(urx.valid):
            m.d.sync += [s.addr.eq(Cat(s.addr[8:], urx.data)),
                         count.eq(count + 1)]
            with m.If(count == 3):
                m.d.sync += count.eq(0)
                with m.If(s.is_write):
                    m.next = "DATA"
                with m.Else():
                    m.next = "ACCESS"
        with m.State("DATA"), m.If(urx.valid):
            m.d.sync += [s.data.eq(Cat(s.data[8:], urx.data)), count.eq(count + 1)]
            with m.If(count == 3):
                m.d.sync += count.eq(0)
                m.next = "ACCESS"

    def _access_states(self, m: Module, s: SimpleNamespace) -> None:
        """ACCESS, MEM, REG: the memory word through the RAM's side port, or a core register."""
        ram, core, is_write, data = s.ram, s.core, s.is_write, s.data
        is_reg = s.addr[31]
        with m.State("ACCESS"):
            m.d.comb += self.busy.eq(1)
            with m.If(is_reg):
                m.d.sync += [s.ar_valid.eq(~is_write), s.aw_valid.eq(is_write),
                             s.w_valid.eq(is_write)]
                m.next = "REG"
            with m.Else():
                m.next = "MEM"
        with m.State("MEM"):
            m.d.comb += [self.busy.eq(1), ram.side_addr.eq(s.addr), ram.side_wdata.eq(data),
                         ram.side_we.eq(is_write), ram.side_re.eq(~is_write)]
            with m.If(ram.side_done):
                with m.If(~is_write):
                    m.d.sync += data.eq(ram.side_rdata)
                m.next = "REPLY"
        with m.State("REG"):
            m.d.comb += self.busy.eq(1)
            with m.If(is_write & core.s_axil_bvalid):
                m.next = "REPLY"
            with m.If(~is_write & core.s_axil_rvalid):
                m.d.sync += data.eq(core.s_axil_rdata)
                m.next = "REPLY"

    def _reply_states(self, m: Module, s: SimpleNamespace) -> None:
        """REPLY, SEND: echo the write command, or send the four bytes read."""
        utx, count = s.utx, s.count
        with m.State("REPLY"):
            m.d.comb += self.busy.eq(1)
            m.d.sync += count.eq(0)
            m.next = "SEND"
        with m.State("SEND"):
            m.d.comb += self.busy.eq(1)
            m.d.comb += [utx.valid.eq(1),
                         utx.data.eq(Mux(s.is_write, CMD_WRITE,
                                         s.data.word_select(count[:2], 8)))]
            with m.If(utx.ready):
                m.d.sync += count.eq(count + 1)
                with m.If(s.is_write | (count == 3)):
                    m.next = "CMD"


class CoreInstance(wiring.Component):
    """The separately generated ``vta_core`` Verilog module, as an Amaranth component with the
    same flat ports as :class:`vta.hw.core.VTACore` (whose signature it copies)."""

    def __init__(self, signature: wiring.Signature, module: str = "vta_core") -> None:
        self.module = module
        super().__init__(signature)

    def elaborate(self, platform) -> Module:
        m = Module()
        ports = {"i_clk": ClockSignal("sync"), "i_rst": ResetSignal("sync")}
        for name, member in self.signature.members.items():
            prefix = "i_" if member.flow == In else "o_"
            ports[prefix + name] = getattr(self, name)
        m.submodules.vta = Instance(self.module, **ports)
        return m


class ULX3STop(wiring.Component):
    """The ULX3S-85F top level: PLL, power-on reset, :class:`UartSoC`, LEDs."""

    clk_25mhz: In(1)
    ftdi_txd: In(1)     # FPGA input (the FTDI chip's TXD)
    ftdi_rxd: Out(1)    # FPGA output
    led: Out(8)
    wifi_gpio0: Out(1)  # held high so the ESP32 does not reset the board

    def __init__(self, core_signature: wiring.Signature, *, clock_mhz: float,
                 bus_width: int, ram_kib: int = 64, baud: int = 115200) -> None:
        self.core_signature = core_signature
        self.pll = pll_params(25.0, clock_mhz)
        self.bus_width = bus_width
        self.ram_kib = ram_kib
        self.divisor = uart_clocks_per_bit(clock_mhz, baud)
        super().__init__()

    def elaborate(self, platform) -> Module:
        m = Module()
        m.domains.sync = cd = ClockDomain("sync")
        clk = Signal()
        locked = Signal()
        p = self.pll
        m.submodules.pll = Instance(
            "EHXPLLL",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=p["CLKI_DIV"], p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p["CLKOP_DIV"],
            p_CLKOP_CPHASE=p["CLKOP_CPHASE"], p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=p["CLKFB_DIV"],
            a_FREQUENCY_PIN_CLKI="25", a_FREQUENCY_PIN_CLKOP=f"{p['fout']:g}",
            i_RST=0, i_STDBY=0, i_CLKI=self.clk_25mhz, o_CLKOP=clk, i_CLKFB=clk,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0, o_LOCK=locked)
        por = Signal(8, init=255)
        rst = Signal(init=1)  # registered: the reset net (thousands of loads) starts at a FF
        m.domains.por = ClockDomain("por", reset_less=True)
        m.d.comb += [ClockSignal("por").eq(clk), cd.clk.eq(clk), cd.rst.eq(rst)]
        m.d.por += rst.eq(por != 0)
        with m.If(~locked):
            m.d.por += por.eq(255)
        with m.Elif(por != 0):
            m.d.por += por.eq(por - 1)
        m.submodules.soc = soc = UartSoC(CoreInstance(self.core_signature),
                                         bus_width=self.bus_width, ram_kib=self.ram_kib,
                                         uart_divisor=self.divisor)
        beat = Signal(32)
        m.d.sync += beat.eq(beat + 1)
        m.d.comb += [soc.rx.eq(self.ftdi_txd), self.ftdi_rxd.eq(soc.tx), self.wifi_gpio0.eq(1),
                     self.led.eq(soc.interrupt | (soc.busy << 1) | (beat[-6:] << 2))]
        return m


#: ULX3S pin constraints for the top's ports (from the ULX3S v3.x reference LPF).
LPF = """\
# ULX3S (v3.0.x) pins used by the VTA top, generated by vta.boards.
BLOCK RESETPATHS;
BLOCK ASYNCPATHS;
SYSCONFIG CONFIG_IOVOLTAGE=3.3 COMPRESS_CONFIG=ON MCCLK_FREQ=62 SLAVE_SPI_PORT=DISABLE \
MASTER_SPI_PORT=ENABLE SLAVE_PARALLEL_PORT=DISABLE;
LOCATE COMP "clk_25mhz" SITE "G2";
IOBUF PORT "clk_25mhz" PULLMODE=NONE IO_TYPE=LVCMOS33;
FREQUENCY PORT "clk_25mhz" 25 MHZ;
LOCATE COMP "ftdi_txd" SITE "M1";
IOBUF PORT "ftdi_txd" PULLMODE=UP IO_TYPE=LVCMOS33;
LOCATE COMP "ftdi_rxd" SITE "L4";
IOBUF PORT "ftdi_rxd" PULLMODE=UP IO_TYPE=LVCMOS33 DRIVE=4;
LOCATE COMP "wifi_gpio0" SITE "L2";
IOBUF PORT "wifi_gpio0" PULLMODE=UP IO_TYPE=LVCMOS33 DRIVE=4;
LOCATE COMP "led[0]" SITE "B2";
LOCATE COMP "led[1]" SITE "C2";
LOCATE COMP "led[2]" SITE "C1";
LOCATE COMP "led[3]" SITE "D2";
LOCATE COMP "led[4]" SITE "D1";
LOCATE COMP "led[5]" SITE "E2";
LOCATE COMP "led[6]" SITE "E1";
LOCATE COMP "led[7]" SITE "H3";
IOBUF PORT "led[0]" PULLMODE=NONE IO_TYPE=LVCMOS33 DRIVE=4;
IOBUF PORT "led[1]" PULLMODE=NONE IO_TYPE=LVCMOS33 DRIVE=4;
IOBUF PORT "led[2]" PULLMODE=NONE IO_TYPE=LVCMOS33 DRIVE=4;
IOBUF PORT "led[3]" PULLMODE=NONE IO_TYPE=LVCMOS33 DRIVE=4;
IOBUF PORT "led[4]" PULLMODE=NONE IO_TYPE=LVCMOS33 DRIVE=4;
IOBUF PORT "led[5]" PULLMODE=NONE IO_TYPE=LVCMOS33 DRIVE=4;
IOBUF PORT "led[6]" PULLMODE=NONE IO_TYPE=LVCMOS33 DRIVE=4;
IOBUF PORT "led[7]" PULLMODE=NONE IO_TYPE=LVCMOS33 DRIVE=4;
"""

#: Simulation models of the ECP5 primitives the ULX3S design instantiates, for Verilator (lint,
#: the virtual ULX3S) and Icarus (ecp5_models.v; yosys ships only blackboxes of them): the PLL
#: as a pass-through, and the MULT18X18D in the configuration of vta.hw.ecp5_mult, cycle-exact
#: (tests/hw/test_ecp5_mult.py).
ECP5_SIM_MODELS = resources.files("vta.boards").joinpath("ecp5_models.v").read_text()
