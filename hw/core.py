"""The VTA core top: fetch, the three execution modules, queues, scratchpads, AXI ports.

Block diagram (see hw/README.md)::

    AXI4-Lite --> HostRegisters --launch--> Fetch --insn--> [load q] --> Load ----+
                                              |          [compute q] --> Compute -+-- tokens
                                              |          [store q] --> Store -----+
    m_axi AR/R <-- ReadArbiter <-- fetch, compute (uop/acc), load (inp/wgt)
    m_axi AW/W/B <-- Store
    scratchpads: inp, wgt (load writes, compute reads), acc (compute writes and reads, one read
                 port), out (compute writes with every acc write, narrowed; store reads),
                 uop (inside compute)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, fifo, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2
from vta.isa import MODULES, TOKEN_QUEUES, Config
from vta.isa.layout import INSN_BITS, INSN_QUEUE_DEPTH, TOKEN_QUEUE_DEPTH

from .axi import AxiErrorMonitor, ReadArbiter
from .compute import Compute, out_granularity
from .decode import insn_layouts
from .fetch import Fetch
from .host import AXILiteSignature, HostRegisters
from .load import Load
from .options import CoreOptions
from .queues import TokenQueue
from .regs import CORE_ID, REGISTER_MAP
from .store import Store

__all__ = ["VTACore", "DEBUG_LAYOUT"]

DEBUG_LAYOUT = data.StructLayout({"states": 16, "load_done": 32, "compute_done": 32,
                                  "store_done": 32})

_AXIL = [(name, member.flow, member.shape) for name, member in
         AXILiteSignature().flip().members.items()]

#: Read-only registers the core feeds into the register block (everything but control,
#: insn_addr and insn_count).
READONLY_REGS = tuple(n for n in REGISTER_MAP if n not in ("control", "insn_addr",
                                                            "insn_count"))


class VTACore(wiring.Component):
    """The VTA core for one :class:`~vta.isa.Config` and a 64- or 128-bit memory bus.

    All ports are flat signals (``s_axil_*``, ``m_axi_*``, ``interrupt``) so the generated
    Verilog keeps their names; the clock domain is ``sync`` (``clk``/``rst``).
    ``options`` (:class:`~vta.hw.options.CoreOptions`, or a dict of them) selects hardware
    variants that shorten the critical path on some FPGAs without changing the results.
    """

    def __init__(self, cfg: Config, *,
                 options: CoreOptions | Mapping[str, Any] | None = None) -> None:
        if not isinstance(cfg, Config):
            self._MustUse__silence = True  # never built: no "created but never used" warning
            raise TypeError(f"Configuration must be a vta.isa.Config, not {cfg!r}")
        self.cfg = cfg
        self.options = CoreOptions.coerce(options)
        self.bus_width = W = cfg.bus_width  # the memory bus: the configuration's BUS_WIDTH
        self.bus_bytes = cfg.bus_bytes
        members: dict[str, object] = {}
        for name, flow, shape in _AXIL:
            members[f"s_axil_{name}"] = flow(shape)
        members.update({
            "m_axi_araddr": Out(32), "m_axi_arlen": Out(8), "m_axi_arsize": Out(3),
            "m_axi_arburst": Out(2), "m_axi_arvalid": Out(1), "m_axi_arready": In(1),
            "m_axi_rdata": In(W), "m_axi_rresp": In(2), "m_axi_rlast": In(1),
            "m_axi_rvalid": In(1), "m_axi_rready": Out(1),
            "m_axi_awaddr": Out(32), "m_axi_awlen": Out(8), "m_axi_awsize": Out(3),
            "m_axi_awburst": Out(2), "m_axi_awvalid": Out(1), "m_axi_awready": In(1),
            "m_axi_wdata": Out(W), "m_axi_wstrb": Out(W // 8), "m_axi_wlast": Out(1),
            "m_axi_wvalid": Out(1), "m_axi_wready": In(1),
            "m_axi_bresp": In(2), "m_axi_bvalid": In(1), "m_axi_bready": Out(1),
            "interrupt": Out(1),
        })
        super().__init__(members)
        #: Per-cycle debug state for simulation harnesses (not a port): the ``states`` register
        #: and the per-module completed-instruction counters.
        self.debug = Signal(DEBUG_LAYOUT, name="debug")

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, Wb = self.cfg, self.bus_bytes
        lays = insn_layouts(cfg)
        m.submodules.regs = regs = HostRegisters(READONLY_REGS)
        m.submodules.fetch = fetch = Fetch(insn_layout=lays.insn, bus_bytes=Wb)
        m.submodules.load = load = Load(cfg, insn_layout=lays.insn, bus_bytes=Wb)
        m.submodules.compute = compute = Compute(cfg, insn_layout=lays.insn, bus_bytes=Wb,
                                                 options=self.options)
        m.submodules.store = store = Store(cfg, insn_layout=lays.insn, bus_bytes=Wb)
        m.submodules.arbiter = arb = ReadArbiter(clients=3, bus_bytes=Wb)
        m.submodules.axi_errors = axi_err = AxiErrorMonitor()
        blocks = {"load": load, "compute": compute, "store": store}

        self._connect_host(m, regs)
        insn_q = self._insn_queues(m, fetch, blocks)
        tokens = self._token_queues(m, blocks)
        running, finished, clear = self._run_control(m, regs, fetch, blocks, insn_q, tokens,
                                                     axi_err)
        self._scratchpads(m, load, compute, store)
        for k, client in enumerate((fetch, compute, load)):
            wiring.connect(m, client.req, arb.req[k])
            wiring.connect(m, arb.rdata[k], client.rdata)
        self._connect_axi(m, arb, store, axi_err)
        ro = self._status(fetch, blocks, insn_q, tokens, axi_err, running, finished)
        ro.update(self._event_counters(m, blocks, running, clear))
        for name in READONLY_REGS:
            m.d.comb += getattr(regs, f"ro_{name}").eq(ro[name])
        m.d.comb += [self.debug.states.eq(ro["states"]), self.debug.load_done.eq(ro["load_done"]),
                     self.debug.compute_done.eq(ro["compute_done"]),
                     self.debug.store_done.eq(ro["store_done"])]
        return m

    def _connect_host(self, m: Module, regs: HostRegisters) -> None:
        """The flat ``s_axil_*`` ports to the register block's AXI4-Lite interface."""
        for name, flow, _ in _AXIL:
            port, inner = getattr(self, f"s_axil_{name}"), getattr(regs.bus, name)
            if flow == In:
                m.d.comb += inner.eq(port)
            else:
                m.d.comb += port.eq(inner)

    @staticmethod
    def _insn_queues(m: Module, fetch: Fetch, blocks: dict) -> dict[str, fifo.SyncFIFOBuffered]:
        """One instruction FIFO per module, between fetch and the module."""
        insn_q = {}
        for name in MODULES:
            q = insn_q[name] = m.submodules[f"{name}_queue"] = fifo.SyncFIFOBuffered(
                width=INSN_BITS, depth=INSN_QUEUE_DEPTH)
            src, dst = getattr(fetch, f"{name}_q"), blocks[name].insn
            m.d.comb += [q.w_data.eq(src.payload), q.w_en.eq(src.valid), src.ready.eq(q.w_rdy),
                         dst.payload.eq(q.r_data), dst.valid.eq(q.r_rdy), q.r_en.eq(dst.ready)]
        return insn_q

    @staticmethod
    def _token_queues(m: Module, blocks: dict) -> dict:
        """The dependency-token queues between the modules.

        (a module's token ports are named after its flags: push_next_dep -> push_next)
        """
        queues = {}
        for q in TOKEN_QUEUES:
            tq = queues[q] = m.submodules[f"tokens_{q.short}"] = TokenQueue(TOKEN_QUEUE_DEPTH)
            wiring.connect(m, getattr(blocks[q.src], q.push_flag.removesuffix("_dep")),
                           tq.producer)
            wiring.connect(m, getattr(blocks[q.dst], q.pop_flag.removesuffix("_dep")),
                           tq.consumer)
        return queues

    def _run_control(self, m: Module, regs: HostRegisters, fetch: Fetch, blocks: dict,
                     insn_q: dict, tokens: dict, axi_err: AxiErrorMonitor
                     ) -> tuple[Signal, Signal, Signal]:
        """Launch, the running/finished flags and the interrupt; returns them and ``clear``."""
        running = Signal()
        finished = Signal()
        clear = Signal()
        load, compute, store = blocks["load"], blocks["compute"], blocks["store"]
        # (the host sees running drop in the cycle the error is latched)
        m.d.comb += [clear.eq(regs.launch), regs.running.eq(running & ~axi_err.error),
                     regs.finished.eq(finished), regs.error.eq(axi_err.error),
                     self.interrupt.eq(finished | axi_err.error)]
        for mod in blocks.values():
            m.d.comb += mod.clear.eq(clear)
        for q in tokens.values():
            m.d.comb += q.clear.eq(clear)

        all_done = Signal()
        m.d.comb += all_done.eq(
            compute.finish & ~fetch.busy & ~load.status.busy & ~store.status.busy
            & ~compute.status.busy & ~insn_q["load"].r_rdy & ~insn_q["store"].r_rdy
            & ~insn_q["compute"].r_rdy)
        with m.If(regs.launch):
            m.d.sync += [running.eq(1), finished.eq(0)]
        with m.Elif(running & axi_err.error):
            # an AXI error response stops the core: no new read burst (the arbiter halts), the
            # host sees control bit 2 and axi_error / axi_error_addr, launch is ignored until
            # reset (bursts already issued complete, their data is not trusted)
            m.d.sync += running.eq(0)
        with m.Elif(running & all_done):
            m.d.sync += [running.eq(0), finished.eq(1)]
        m.d.comb += [fetch.start.eq(regs.launch), fetch.insn_addr.eq(regs.insn_addr),
                     fetch.insn_count.eq(regs.insn_count)]
        return running, finished, clear

    def _scratchpads(self, m: Module, load: Load, compute: Compute, store: Store) -> None:
        """The inp, wgt, acc and out scratchpads and their ports."""
        cfg, Wb = self.cfg, self.bus_bytes
        inp_gran = Wb * 8 if cfg.inp_elem_bytes > Wb else None
        wgt_gran = Wb * 8 if cfg.wgt_elem_bytes > Wb else None
        acc_gran = Wb * 8 if cfg.acc_elem_bytes > Wb else None
        m.submodules.inp_mem = inp_mem = Memory(shape=cfg.inp_elem_bytes * 8,
                                                depth=cfg.inp_depth, init=[])
        m.submodules.wgt_mem = wgt_mem = Memory(shape=cfg.wgt_elem_bytes * 8,
                                                depth=cfg.wgt_depth, init=[])
        m.submodules.acc_mem = acc_mem = Memory(shape=cfg.acc_elem_bytes * 8,
                                                depth=cfg.acc_depth, init=[])
        wiring.connect(m, load.inp_sram, inp_mem.write_port(granularity=inp_gran))
        wiring.connect(m, load.wgt_sram, wgt_mem.write_port(granularity=wgt_gran))
        wiring.connect(m, compute.inp_rd, inp_mem.read_port())
        wiring.connect(m, compute.wgt_rd, wgt_mem.read_port())
        acc_wr = acc_mem.write_port(granularity=acc_gran)
        wiring.connect(m, compute.acc_wr, acc_wr)
        wiring.connect(m, compute.acc_rd, acc_mem.read_port())  # compute forwards in-flight writes
        # the OUT buffer: every accumulator write, lanes narrowed to the output width
        m.submodules.out_mem = out_mem = Memory(shape=cfg.out_elem_bytes * 8,
                                                depth=cfg.acc_depth, init=[])
        wiring.connect(m, compute.out_wr,
                       out_mem.write_port(granularity=out_granularity(cfg, Wb)))
        wiring.connect(m, store.out_rd, out_mem.read_port())

    def _connect_axi(self, m: Module, arb: ReadArbiter, store: Store,
                     axi_err: AxiErrorMonitor) -> None:
        """The flat ``m_axi_*`` ports: reads from the arbiter, writes from store, both watched
        by the error monitor."""
        log_w = ceil_log2(self.bus_bytes)
        m.d.comb += [
            self.m_axi_araddr.eq(arb.ar.payload.addr), self.m_axi_arlen.eq(arb.ar.payload.len),
            self.m_axi_arsize.eq(log_w), self.m_axi_arburst.eq(1),
            self.m_axi_arvalid.eq(arb.ar.valid), arb.ar.ready.eq(self.m_axi_arready),
            arb.r.payload.data.eq(self.m_axi_rdata), arb.r.payload.last.eq(self.m_axi_rlast),
            arb.r.valid.eq(self.m_axi_rvalid), self.m_axi_rready.eq(arb.r.ready),
            self.m_axi_awaddr.eq(store.aw.payload.addr), self.m_axi_awlen.eq(store.aw.payload.len),
            self.m_axi_awsize.eq(log_w), self.m_axi_awburst.eq(1),
            self.m_axi_awvalid.eq(store.aw.valid), store.aw.ready.eq(self.m_axi_awready),
            self.m_axi_wdata.eq(store.w.payload.data), self.m_axi_wstrb.eq(store.w.payload.strb),
            self.m_axi_wlast.eq(store.w.payload.last), self.m_axi_wvalid.eq(store.w.valid),
            store.w.ready.eq(self.m_axi_wready),
            store.b.valid.eq(self.m_axi_bvalid), self.m_axi_bready.eq(store.b.ready),
            arb.halt.eq(axi_err.error),
            axi_err.ar_done.eq(self.m_axi_arvalid & self.m_axi_arready),
            axi_err.araddr.eq(self.m_axi_araddr),
            axi_err.r_done.eq(self.m_axi_rvalid & self.m_axi_rready),
            axi_err.rlast.eq(self.m_axi_rlast), axi_err.rresp.eq(self.m_axi_rresp),
            axi_err.aw_done.eq(self.m_axi_awvalid & self.m_axi_awready),
            axi_err.awaddr.eq(self.m_axi_awaddr),
            axi_err.b_done.eq(self.m_axi_bvalid & self.m_axi_bready),
            axi_err.bresp.eq(self.m_axi_bresp),
        ]

    def _status(self, fetch: Fetch, blocks: dict, insn_q: dict, tokens: dict,
                axi_err: AxiErrorMonitor, running: Signal, finished: Signal) -> dict[str, Any]:
        """The read-only registers that show the core's state (no counters)."""
        cfg = self.cfg
        load, compute, store = blocks["load"], blocks["compute"], blocks["store"]
        return {
            "id": Const(CORE_ID, 32),
            "hw_config": Const(cfg.LOG_INP_WIDTH | cfg.LOG_WGT_WIDTH << 4
                               | cfg.LOG_ACC_WIDTH << 8 | cfg.LOG_BATCH << 12
                               | cfg.LOG_BLOCK << 16 | self.bus_bytes << 20, 32),
            "status": Cat(fetch.busy, load.status.busy, compute.status.busy, store.status.busy,
                          running, finished, compute.finish, axi_err.error),
            "axi_error": Cat(axi_err.error, axi_err.write, axi_err.resp),
            "axi_error_addr": axi_err.addr,
            "fetched": fetch.fetched,
            "load_done": load.status.done, "compute_done": compute.status.done,
            "store_done": store.status.done,
            **{f"tokens_{q.short}": tq.count for q, tq in tokens.items()},
            "queue_load": insn_q["load"].level, "queue_compute": insn_q["compute"].level,
            "queue_store": insn_q["store"].level,
            "states": Cat(fetch.state, load.status.state, compute.status.state,
                          store.status.state),
        }

    def _event_counters(self, m: Module, blocks: dict, running: Signal,
                        clear: Signal) -> dict[str, Signal]:
        """The 32-bit performance counters, cleared at launch, counting while running."""
        load, compute, store = blocks["load"], blocks["compute"], blocks["store"]
        strobes = store.w.payload.strb
        events: dict[str, object] = {
            "cycles": Const(1),
            "load_busy": load.status.busy, "compute_busy": compute.status.busy,
            "store_busy": store.status.busy,
            "load_token_wait": load.status.token_wait,
            "compute_token_wait": compute.status.token_wait,
            "store_token_wait": store.status.token_wait,
            "load_mem_wait": load.status.mem_wait, "compute_mem_wait": compute.status.mem_wait,
            "store_mem_wait": store.status.mem_wait,
            "gemm_uops": compute.gemm_uop, "alu_uops": compute.alu_uop,
            # (Mux, not a product with a 1-bit value: no multiplier cell for synthesis to map)
            "bytes_read": Mux(self.m_axi_rvalid & self.m_axi_rready, self.bus_bytes, 0),
            "bytes_written": Mux(self.m_axi_wvalid & self.m_axi_wready, _popcount(strobes), 0),
        }
        counters = {}
        for name, inc in events.items():
            # Events are registered before the counters' adders: they come from all over the
            # core (and from the memory's ready signals), so each 32-bit carry chain starts at
            # a flip-flop. A count lands a cycle late, which the host cannot see: in the last
            # running cycle every module is idle (`all_done`), so only `cycles` (from the
            # `running` flip-flop, not delayed) counts there.
            counter = Signal(32, name=f"count_{name}")
            if isinstance(inc, Const):
                event = Mux(running, inc, 0)
            else:
                event = Signal(len(Value.cast(inc)), name=f"event_{name}")
                m.d.sync += event.eq(Mux(running & ~clear, inc, 0))
            with m.If(clear):
                m.d.sync += counter.eq(0)
            with m.Else():
                m.d.sync += counter.eq(counter + event)
            counters[name] = counter
        return counters


def _popcount(value) -> object:
    total = Const(0, 1)
    for k in range(len(value)):
        total = total + value[k]
    return total
