"""The compute module: LOAD UOP/ACC, GEMM, ALU and FINISH.

GEMM and ALU share a front end that starts one micro-op iteration per cycle, then each has its
own pipelined back end; both write the accumulator (and its narrowed copy, the OUT buffer)
through one write stage ``W``. The accumulator scratchpad has ONE read port (not transparent: a
single block-RAM copy with no bypass logic around it), and every block-RAM output is registered
before any logic uses it:

====== ==================================================================================
stage  work
====== ==================================================================================
S0     loop counters (o, i, u; counting down) -> micro-op memory read address
S1     micro-op -> register
S2     micro-op fields + o*factor_out + i*factor_in -> registered dst/src/wgt addresses
R      inp/wgt read addresses (GEMM); accumulator read address(es) (ALU)
GEMM   D: inp/wgt data -> registers; M: products -> registers; T1: two adder-tree levels
       -> registers, accumulator read of ``dst``; T2: the remaining levels -> registers, the
       accumulator data -> register (``acc_q``); A: ``acc_q`` -> forward mux -> add -> W
ALU    RD: accumulator data -> ``acc_q``; E1: forward muxes -> operand registers; (P: chains
       only, the operand -> register -> right shift); E2: compare, sum, shift amount, MUL
       partial products -> registers; E3: shift, product sum, select; C1..C4: chains only,
       the tail, per stage a register, then its operation (two cycles)
W      result -> accumulator and OUT buffer write
====== ==================================================================================

Hazards. A read issued in cycle t returns the memory as of t - 1 and is used in t + 2, so the
writes of t, t + 1 and t + 2 are forwarded from W and its two delayed copies (w1, w2). GEMM never
stalls: its read is issued in T1, two cycles before the accumulate stage A, so back-to-back
micro-ops accumulating into one entry run at one per cycle (the micro-op one ahead is in W, two
ahead in w1, three ahead in w2). ALU micro-ops read in R: ``use_imm`` micro-ops read ``dst`` and
run at one per cycle, stalling R (an interlock) while the micro-op in RD or E1 writes that entry
(it would write after the last forwarding point, E1); two-operand micro-ops read ``dst`` and then
``src`` through the same port in two consecutive cycles (half rate) and stall only while the
micro-op in RD writes one of them, unless their ``src`` is the one the last such read
brought and nothing wrote it since (``AluPipe._src_reuse``): they then read only ``dst``, at full
rate (a bias added to a tile). GEMM ``reset_reg`` micro-ops read nothing; an ALU
instruction ignores ``reset_reg`` and performs its operation (as TVM's simulator and HLS core).

Consecutive GEMM (or ALU) instructions follow each other without draining the pipeline; an
instruction that pushes a token, FINISH, LOAD ACC and a switch between GEMM and ALU wait until
the pipeline is empty.

ALU chains (:mod:`vta.isa.fusion`, the rule). A run of ALU instructions with an immediate over
the same loops and one micro-op whose iterations visit distinct accumulator entries (a
requantization epilogue: shift, multiply, round, shift, min, max) runs as ONE pass of the
loops: the sequencer takes the followers from the queue
(:class:`~vta.hw.chain_gather.ChainGather`: the head into P if it shifts right, else into the
ALU, each next one into the first stage after the previous member's that runs its operation;
a follower that pops a token starts a new instruction, one that pushes ends the chain) and
each micro-op goes through E1, P (the shift, by 0 when no member took it), E2/E3 (the ALU, with
its member's operation), the tail's stages C1..C4 (a register, a :class:`~vta.hw.alu.TailLane`
per lane; a stage no member took passes the value on), then W. The chain's results are written
after the interlock's reach, so the next instruction starts on an empty pipeline
(:data:`CHAIN_DRAIN`). Programs are TVM's: the same
instructions run one by one elsewhere with the same results.

Every accumulator write (GEMM/ALU results and LOAD ACC data, with the same byte-lane
granularity) also writes the OUT buffer with each lane truncated to ``out_width`` bits; STORE
reads the OUT buffer.

Structure: ``Compute.elaborate`` connects the parts as a block diagram: the
:class:`~vta.hw.compute_sequencer.ComputeSequencer` (pop/run/push with the
:class:`~vta.hw.chain_gather.ChainGather`), the micro-op memory and the two DMA readers of
LOAD UOP/ACC, the :class:`~vta.hw.front_end.FrontEnd` (S0 with the
:class:`~vta.hw.loop_issuer.LoopIssuer`, S1, S2, R), the
:class:`~vta.hw.acc_read.AccReader` (the accumulator's one read port), the
:class:`~vta.hw.gemm_pipe.GemmPipe` (D .. A, with the :class:`~vta.hw.gemm.GemmLane`
components), the :class:`~vta.hw.alu_pipe.AluPipe` (RD .. E3 and the chain's tail, with the
:class:`~vta.hw.alu.AluLane` and :class:`~vta.hw.alu.TailLane` components) and the
:class:`~vta.hw.write_back.WriteBack` (W: the accumulator/OUT buffer writes and the write
history the hazards above are forwarded from).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory, ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from vta.isa import Config
from vta.isa.fusion import ALU_CHAIN, TAIL_STAGES
from vta.isa.layout import UOP_BITS, MemType, Opcode

from .acc_read import AccReader
from .alu_pipe import AluPipe
from .axi import rdata_layout, req_layout
from .compute_sequencer import ComputeSequencer
from .dma import DMARead
from .front_end import FrontEnd
from .gemm_pipe import GemmPipe
from .options import CoreOptions
from .queues import TokenPopSignature, TokenPushSignature
from .regs import MODULE_STATES
from .sequencer import GATHER_CYCLES, ModuleStatusSignature
from .write_back import WriteBack

__all__ = ["Compute", "out_granularity", "GEMM_DRAIN", "ALU_DRAIN", "CHAIN_DRAIN",
           "PIPELINE_TIMING"]

#: Cycles from a micro-op leaving S0 to its accumulator write (S1, S2, R, D, M, T1, T2, A, W).
GEMM_DRAIN = 9
#: The same for ALU micro-ops (S1, S2, R, RD, E1, E2, E3, W).
ALU_DRAIN = 8
#: The ALU drain of a chain's micro-ops: one more cycle for PRE and two per tail stage.
CHAIN_DRAIN = ALU_DRAIN + 1 + 2 * len(TAIL_STAGES)
#: The pipeline's timing under the names of the performance model's parameters
#: (``vta.sim.perf.PerfParams``; a test keeps its defaults equal to these): cycles per GEMM
#: micro-op, per ALU micro-op with an immediate and with two accumulator operands (one read
#: port), the drains before a token push and after a chain, and the cycles per member a chain
#: takes to gather.
PIPELINE_TIMING = {"gemm_ii": 1, "gemm_drain": GEMM_DRAIN, "alu_ii": 1, "alu2_ii": 2,
                   "alu_drain": ALU_DRAIN, "chain_drain": CHAIN_DRAIN,
                   "chain_gather": GATHER_CYCLES}


def out_granularity(cfg: Config, bus_bytes: int) -> int | None:
    """Write granularity (bits) of the OUT buffer that mirrors the accumulator's: LOAD ACC writes
    an accumulator element wider than the bus one bus word (``bus/acc_width`` lanes) at a time,
    which is ``bus/acc_width`` narrowed lanes of the OUT buffer."""
    if cfg.acc_elem_bytes <= bus_bytes:
        return None
    return bus_bytes * 8 // cfg.acc_width * cfg.out_width


class Compute(wiring.Component):
    """Executes LOAD UOP/ACC, GEMM, ALU and FINISH.

    Token queues: pops load->compute ("prev") and store->compute ("next"), pushes
    compute->load ("prev") and compute->store ("next"). ``finish`` is set when FINISH executes
    (cleared by ``clear``). ``gemm_uop``/``alu_uop`` pulse once per micro-op iteration.
    ``acc_rd`` is a plain (not transparent) read port; ``out_wr`` writes the OUT buffer
    (``acc_depth`` entries of ``batch * block_out * out_width`` bits).

    ``options`` (:class:`~vta.hw.options.CoreOptions`) selects the variants: per-lane copies
    of the control registers (``replicate_control``) and a GEMM stage C between D and M in
    which every multiplier loads a private copy of its operands (``replicate_operands``), or
    whose registers are the ECP5 multipliers' own (``dsp_registers``); output columns that
    share their multipliers in pairs (``pack_multipliers``, :class:`~vta.hw.gemm.GemmPair`).
    """

    def __init__(self, cfg: Config, *, insn_layout: data.Layout, bus_bytes: int,
                 options: CoreOptions | None = None) -> None:
        self.cfg, self.insn_layout, self.bus_bytes = cfg, insn_layout, bus_bytes
        self.options = options = CoreOptions.coerce(options)
        #: cycles from a GEMM micro-op leaving S0 to its accumulator write
        self.gemm_drain = GEMM_DRAIN + options.extra_gemm_latency
        acc_bits = cfg.acc_elem_bytes * 8
        #: the accumulator write port's granularity: LOAD ACC writes an entry wider than the
        #: bus one bus word at a time
        self.acc_granularity = acc_gran = bus_bytes * 8 if cfg.acc_elem_bytes > bus_bytes else None
        super().__init__({
            "insn": In(stream.Signature(insn_layout)),
            "pop_prev": Out(TokenPopSignature()),
            "pop_next": Out(TokenPopSignature()),
            "push_prev": Out(TokenPushSignature()),
            "push_next": Out(TokenPushSignature()),
            "req": Out(stream.Signature(req_layout())),
            "rdata": In(stream.Signature(rdata_layout(bus_bytes))),
            "inp_rd": In(ReadPort.Signature(addr_width=cfg.log_inp_depth,
                                            shape=cfg.inp_elem_bytes * 8)),
            "wgt_rd": In(ReadPort.Signature(addr_width=cfg.log_wgt_depth,
                                            shape=cfg.wgt_elem_bytes * 8)),
            "acc_rd": In(ReadPort.Signature(addr_width=cfg.log_acc_depth, shape=acc_bits)),
            "acc_wr": In(WritePort.Signature(addr_width=cfg.log_acc_depth, shape=acc_bits,
                                             granularity=acc_gran)),
            "out_wr": In(WritePort.Signature(addr_width=cfg.log_acc_depth,
                                             shape=cfg.out_elem_bytes * 8,
                                             granularity=out_granularity(cfg, bus_bytes))),
            "status": Out(ModuleStatusSignature()),
            "clear": In(1),
            "finish": Out(1),
            "gemm_uop": Out(1),
            "alu_uop": Out(range(ALU_CHAIN + 1)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, opts, layout = self.cfg, self.options, self.insn_layout
        lanes, aw, addr = cfg.batch * cfg.block_out, cfg.acc_width, cfg.log_acc_depth
        m.submodules.sequencer = seq = ComputeSequencer(cfg, insn_layout=layout)
        m.submodules.uop_mem = uop_mem = Memory(shape=UOP_BITS, depth=cfg.uop_depth, init=[])
        m.submodules.uop_dma = uop_dma = DMARead(
            mem_layout=layout["mem"].shape, elem_bytes=cfg.uop_elem_bytes,
            bus_bytes=self.bus_bytes, addr_width=cfg.log_uop_depth)
        m.submodules.acc_dma = acc_dma = DMARead(
            mem_layout=layout["mem"].shape, elem_bytes=cfg.acc_elem_bytes,
            bus_bytes=self.bus_bytes, addr_width=addr)
        m.submodules.front_end = front = FrontEnd(cfg, insn_layout=layout)
        m.submodules.acc_read = acc_read = AccReader(lanes=lanes, acc_width=aw, addr_width=addr)
        m.submodules.gemm = gemm = GemmPipe(cfg, options=opts)
        m.submodules.alu = alu = AluPipe(cfg, options=opts)
        m.submodules.write_back = wb = WriteBack(
            lanes=lanes, acc_width=aw, out_width=cfg.out_width, addr_width=addr,
            acc_granularity=self.acc_granularity,
            out_granularity=out_granularity(cfg, self.bus_bytes))
        pipe_busy = Signal()  # any micro-op in S1 .. W
        m.d.comb += pipe_busy.eq(front.busy | gemm.busy | alu.busy | wb.history.w.valid)

        # the sequencer, LOAD UOP/ACC and FINISH
        wiring.connect(m, wiring.flipped(self.insn), seq.queue)
        for name in ("pop_prev", "pop_next", "push_prev", "push_next"):
            wiring.connect(m, getattr(seq, name), wiring.flipped(getattr(self, name)))
        load_pending = self._loads(m, seq, uop_dma, acc_dma, pipe_busy)
        wiring.connect(m, uop_dma.sram, uop_mem.write_port())
        m.d.comb += [seq.clear.eq(self.clear), seq.pipe_busy.eq(pipe_busy),
                     seq.work_busy.eq(uop_dma.busy | acc_dma.busy | front.running
                                      | front.pending | load_pending)]

        # S0 .. R: the micro-ops; R stalls while the ALU's interlock holds it
        opcode = seq.insn.mem.opcode
        m.d.comb += [front.insn.eq(seq.insn), front.chain.eq(seq.chain.fused),
                     front.start.eq(seq.go & ((opcode == Opcode.GEMM) | (opcode == Opcode.ALU))),
                     front.pipe_busy.eq(pipe_busy), front.adv.eq(~alu.stall)]
        wiring.connect(m, front.uop_rd, uop_mem.read_port())

        # the GEMM and ALU pipes: the scratchpad reads, the write history they forward from
        m.d.comb += [gemm.r.eq(front.r), gemm.adv.eq(~alu.stall), gemm.acc.eq(acc_read.data),
                     alu.s2.eq(front.s2), alu.r.eq(front.r), alu.acc.eq(acc_read.data),
                     alu.chain.eq(seq.chain), alu.load_busy.eq(acc_dma.busy)]
        wiring.connect(m, gemm.inp_rd, wiring.flipped(self.inp_rd))
        wiring.connect(m, gemm.wgt_rd, wiring.flipped(self.wgt_rd))
        m.d.comb += [acc_read.gemm.eq(gemm.acc_read), acc_read.alu_addr.eq(alu.acc_read_addr)]
        m.d.comb += [acc_read.zero[k].eq(gemm.zero[k]) for k in range(lanes)]
        wiring.connect(m, acc_read.acc_rd, wiring.flipped(self.acc_rd))
        wiring.connect(m, wb.history, gemm.history, alu.history)

        # W: GEMM results from A, ALU results from E3 or the chain's tail, LOAD ACC's data
        m.d.comb += [wb.gemm_valid.eq(gemm.valid), wb.gemm_dst.eq(gemm.dst),
                     wb.alu_valid.eq(alu.valid), wb.alu_dst.eq(alu.dst),
                     wb.load_busy.eq(acc_dma.busy)]
        for k in range(lanes):
            m.d.comb += [wb.gemm_lane[k].eq(gemm.lane[k]), wb.gemm_result[k].eq(gemm.result[k]),
                         wb.alu_result[k].eq(alu.result[k])]
        wiring.connect(m, acc_dma.sram, wb.load)
        wiring.connect(m, wb.acc_wr, wiring.flipped(self.acc_wr))
        wiring.connect(m, wb.out_wr, wiring.flipped(self.out_wr))

        m.d.comb += [self.gemm_uop.eq(gemm.uop), self.alu_uop.eq(alu.uops)]
        self._status(m, seq, front, pipe_busy, uop_dma, acc_dma)
        return m

    def _loads(self, m: Module, seq: ComputeSequencer, uop_dma: DMARead, acc_dma: DMARead,
               pipe_busy) -> Signal:
        """LOAD UOP and LOAD ACC through the two DMA readers, and FINISH. LOAD ACC shares the
        accumulator write port: it starts once the GEMM/ALU pipeline is empty (returns
        ``load_pending``, high while it waits)."""
        insn, go = seq.insn, seq.go
        is_uop_load = Signal()
        load_pending = Signal()
        load_go = Signal()
        load_ok = Signal()
        m.d.comb += [is_uop_load.eq(insn.mem.memory_type == MemType.UOP),
                     load_go.eq((go & (insn.mem.opcode == Opcode.LOAD)) | load_pending),
                     load_ok.eq(is_uop_load | ~pipe_busy)]
        with m.If(load_go & ~load_ok):
            m.d.sync += load_pending.eq(1)
        with m.Else():
            m.d.sync += load_pending.eq(0)
        for dma, sel in ((uop_dma, is_uop_load), (acc_dma, ~is_uop_load)):
            m.d.comb += [dma.cmd.payload.eq(insn.mem),
                         dma.cmd.valid.eq(load_go & load_ok & sel)]
        with m.If(is_uop_load):
            self._memory_port(m, uop_dma)
        with m.Else():
            self._memory_port(m, acc_dma)
        with m.If(self.clear):
            m.d.sync += self.finish.eq(0)
        with m.Elif(go & (insn.mem.opcode == Opcode.FINISH)):
            m.d.sync += self.finish.eq(1)
        return load_pending

    def _memory_port(self, m: Module, dma: DMARead) -> None:
        """``dma`` takes the module's memory port (``req``, ``rdata``)."""
        wiring.connect(m, dma.req, wiring.flipped(self.req))
        m.d.comb += [dma.rdata.payload.eq(self.rdata.payload),
                     dma.rdata.valid.eq(self.rdata.valid),
                     self.rdata.ready.eq(dma.rdata.ready)]

    def _status(self, m: Module, seq: ComputeSequencer, front: FrontEnd, pipe_busy,
                uop_dma: DMARead, acc_dma: DMARead) -> None:
        """The module status: the sequencer's, "drain" while micro-ops leave the pipeline
        after the loops issued the last, and waiting for memory."""
        st = seq.status
        draining = ((st.state == MODULE_STATES["run"]) & ~front.running & ~front.pending
                    & pipe_busy)
        m.d.comb += [
            self.status.busy.eq(st.busy), self.status.token_wait.eq(st.token_wait),
            self.status.done.eq(st.done),
            self.status.state.eq(Mux(draining, MODULE_STATES["drain"], st.state)),
            self.status.mem_wait.eq(uop_dma.mem_wait | acc_dma.mem_wait),
        ]
