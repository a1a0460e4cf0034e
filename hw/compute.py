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
brought and nothing wrote it since (``_src_reuse``): they then read only ``dst``, at full
rate (a bias added to a tile). GEMM ``reset_reg`` micro-ops read nothing; an ALU
instruction ignores ``reset_reg`` and performs its operation (as TVM's simulator and HLS core).

Consecutive GEMM (or ALU) instructions follow each other without draining the pipeline; an
instruction that pushes a token, FINISH, LOAD ACC and a switch between GEMM and ALU wait until
the pipeline is empty.

ALU chains (:mod:`vta.isa.fusion`, the rule). A run of ALU instructions with an immediate over
the same loops and one micro-op whose iterations visit distinct accumulator entries (a
requantization epilogue: shift, multiply, round, shift, min, max) runs as ONE pass of the
loops: the sequencer takes the followers from the queue (``_chain_gather``: the head into P
if it shifts right, else into the ALU, each next one into the first stage after the previous
member's that runs its operation; a follower that pops a token starts a new instruction, one
that pushes ends the chain) and each micro-op goes through E1, P (the shift, by 0 when no
member took it), E2/E3 (the ALU, with its member's operation), the tail's stages C1..C4 (a
register, a :class:`~vta.hw.alu.TailLane` per lane; a stage no member took passes the value
on), then W. The chain's results are written after the interlock's reach, so the next
instruction starts on an empty pipeline (:data:`CHAIN_DRAIN`). Programs are TVM's: the same
instructions run one by one elsewhere with the same results.

Every accumulator write (GEMM/ALU results and LOAD ACC data, with the same byte-lane
granularity) also writes the OUT buffer with each lane truncated to ``out_width`` bits; STORE
reads the OUT buffer.

Structure: ``Compute.elaborate`` builds the parts in pipeline order, one method each, handing
the signals a later part uses on by name: the sequencer and DMA readers (``_control``, which
instantiates S0, the :class:`~vta.hw.loop_issuer.LoopIssuer` component), LOAD UOP/ACC and FINISH
(``_loads``), S1/S2 (``_front_end``), R (``_read_stage``), the GEMM lanes
(``_gemm_datapath``, with the :class:`~vta.hw.gemm.GemmLane` components) and accumulate
(``_gemm_accumulate``), the ALU (``_alu_pipe``, with the :class:`~vta.hw.alu.AluLane`
components) and W (``_write_back``: the :class:`~vta.hw.write_back.WriteBack` component, the
accumulator/OUT buffer writes and the write history the hazards above are forwarded from).
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for
from vta.isa import Config
from vta.isa.fusion import ALU, ALU_CHAIN, MAX_STAGE_SHIFT, PRE, STAGES, TAIL_STAGES
from vta.isa.layout import UOP_BITS, AluOp, MemType, Opcode

from .alu import AluLane, TailLane
from .axi import rdata_layout, req_layout
from .decode import uop_layout
from .dma import DMARead
from .gemm import GemmLane, GemmPair
from .loop_issuer import BASES, LoopIssuer
from .options import REPLICA_ATTR, CoreOptions
from .queues import TokenPopSignature, TokenPushSignature
from .regs import MODULE_STATES
from .sequencer import GATHER_CYCLES, ModuleStatusSignature, instruction_sequencer
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


def _lanes(value, count: int, width: int, *, is_signed: bool = True) -> list:
    lanes = [value.word_select(k, width) for k in range(count)]
    return [lane.as_signed() if is_signed else lane for lane in lanes]


def _reg(m: Module, value, name: str, *, en=None, replica: bool = False) -> Signal:
    """A register of ``value`` (same shape), loaded every cycle or when ``en``; ``replica``
    marks it as a deliberate copy (:data:`REPLICA_ATTR`)."""
    attrs = {REPLICA_ATTR: 1} if replica else {}
    r = Signal.like(value, name=name, attrs=attrs) if isinstance(value, Signal) else \
        Signal(value.shape(), name=name, attrs=attrs)
    if en is None:
        m.d.sync += r.eq(value)
    else:
        with m.If(en):
            m.d.sync += r.eq(value)
    return r


def _copies(m: Module, value, name: str, n: int, *, en=None, replicate: bool) -> list:
    """``n`` registers of ``value`` (one per datapath lane) when ``replicate``, else one register
    ``n`` times: a control signal that steers every bit of the datapath then drives each lane
    from a flip-flop of its own instead of one net across the whole datapath."""
    if not replicate or n == 1:
        return [_reg(m, value, name, en=en)] * n
    return [_reg(m, value, f"{name}_l{k}", en=en, replica=True) for k in range(n)]


class Compute(wiring.Component):
    """Executes LOAD UOP/ACC, GEMM, ALU and FINISH.

    Token queues: pops load->compute ("prev") and store->compute ("next"), pushes
    compute->load ("prev") and compute->store ("next"). ``finish`` is set when FINISH executes
    (cleared by ``clear``). ``gemm_uop``/``alu_uop`` pulse once per micro-op iteration.
    ``acc_rd`` is a plain (not transparent) read port; ``out_wr`` writes the OUT buffer
    (``acc_depth`` entries of ``batch * block_out * out_width`` bits).

    ``options`` (:class:`~vta.hw.options.CoreOptions`) selects the variants: per-lane copies
    of the control registers (``replicate_control``) and a GEMM stage C between D and M in
    which every multiplier loads a private copy of its operands (``replicate_operands``);
    output columns that share their multipliers in pairs (``pack_multipliers``,
    :class:`~vta.hw.gemm.GemmPair`).
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
        """The parts in pipeline order; each builds its stages and hands the signals later parts
        use on through ``net``."""
        m = Module()
        net = SimpleNamespace()
        for part in (self._control, self._loads, self._front_end, self._read_stage,
                     self._gemm_datapath, self._gemm_accumulate, self._alu_pipe,
                     self._write_back):
            part(m, net)
        return m

    def _control(self, m: Module, net: SimpleNamespace) -> None:
        """The instruction sequencer, the two DMA readers and the loop issuer (S0)."""
        cfg, W = self.cfg, self.bus_bytes
        aw = cfg.acc_width
        lanes = cfg.batch * cfg.block_out
        acc_bits = cfg.acc_elem_bytes * 8
        mem_layout = self.insn_layout["mem"].shape
        m.submodules.uop_mem = uop_mem = _uop_memory(cfg)
        uop_wr = uop_mem.write_port()
        uop_rd = uop_mem.read_port()
        m.submodules.uop_dma = uop_dma = DMARead(
            mem_layout=mem_layout, elem_bytes=cfg.uop_elem_bytes, bus_bytes=W,
            addr_width=cfg.log_uop_depth)
        m.submodules.acc_dma = acc_dma = DMARead(
            mem_layout=mem_layout, elem_bytes=cfg.acc_elem_bytes, bus_bytes=W,
            addr_width=cfg.log_acc_depth)
        wiring.connect(m, uop_dma.sram, uop_wr)

        insn = Signal(self.insn_layout)
        opcode = insn.mem.opcode
        m.submodules.issuer = issuer = LoopIssuer(cfg, insn_layout=self.insn_layout)
        running = issuer.running  # the loop counters are issuing micro-ops
        pending = issuer.pending  # a GEMM/ALU waits for the other kind to leave the pipeline
        is_uop_load = Signal()
        m.d.comb += is_uop_load.eq(insn.mem.memory_type == MemType.UOP)

        # ------------------------------------------------------------ sequencing
        adv = Signal()  # S0, S1 and R advance (low while an ALU micro-op stalls in R)
        pipe_busy = Signal()  # any micro-op in S1 .. W
        load_pending = Signal()  # a LOAD ACC waits for the pipeline to drain
        need_drain = Signal()
        exec_busy = Signal()
        chain = self._chain_gather(m, insn)
        m.d.comb += [
            # (a chain's results are written after the interlock's reach: the next
            # instruction starts on an empty pipeline)
            need_drain.eq(insn.mem.push_prev_dep | insn.mem.push_next_dep
                          | (opcode == Opcode.FINISH) | chain.fused),
            exec_busy.eq(uop_dma.busy | acc_dma.busy | running | pending | load_pending
                         | (need_drain & pipe_busy)),
        ]
        seq_status = ModuleStatusSignature().create()
        go = instruction_sequencer(
            m, insn_stream=self.insn, insn=insn,
            pops=[(insn.mem.pop_prev_dep, self.pop_prev), (insn.mem.pop_next_dep, self.pop_next)],
            pushes=[(insn.mem.push_prev_dep, self.push_prev),
                    (insn.mem.push_next_dep, self.push_next)],
            exec_busy=exec_busy, status=seq_status, clear=self.clear,
            gather=(chain.head, chain.joins, chain.absorb),
            done_inc=chain.length)
        seq_state = seq_status.state
        in_run = Signal()
        m.d.comb += [
            in_run.eq(seq_state == MODULE_STATES["run"]),
            self.status.busy.eq(seq_status.busy), self.status.token_wait.eq(seq_status.token_wait),
            self.status.done.eq(seq_status.done),
        ]

        net.__dict__.update(chain=chain)
        net.__dict__.update(acc_bits=acc_bits, acc_dma=acc_dma, adv=adv, aw=aw, cfg=cfg, go=go,
                            in_run=in_run, insn=insn, issuer=issuer, lanes=lanes, opcode=opcode,
                            pending=pending, pipe_busy=pipe_busy, running=running,
                            seq_state=seq_state, uop_rd=uop_rd, uop_dma=uop_dma,
                            load_pending=load_pending, is_uop_load=is_uop_load)

    def _chain_gather(self, m: Module, insn) -> SimpleNamespace:
        """ALU chains (:mod:`vta.isa.fusion`): an ALU instruction with an immediate, no token
        to push and one micro-op whose loops visit distinct accumulator entries (``iter_in`` =
        1 or ``dst_factor_in`` = 1, and ``iter_out`` = 1 or ``dst_factor_out`` >= ``iter_in``)
        heads a chain, in the PRE stage if it is a right shift, else in the ALU; each next
        instruction of the queue that is an ALU with an immediate over the same loops and
        micro-op, pops no token, follows a member that pushes none and has a stage after the
        previous member's that runs its operation joins it, in the first such stage. The
        chain runs as one instruction whose micro-ops pass through PRE, the ALU and the tail;
        its last member's token pushes are the chain's. A member that takes the ALU after a
        head in PRE becomes the instruction's operation (``insn``'s opcode and immediate), the
        head's shift PRE's.

        Returns ``head``, ``joins`` and ``absorb`` (for the sequencer), ``length`` (members),
        ``fused`` (``length`` > 1), ``pre_imm`` (PRE's shift, 0 while no member takes it) and
        per tail stage its ``imm`` (0 while no member takes it), ``take`` and ``is_max``
        (``stages``)."""
        cfg = self.cfg
        g, a = insn.gemm, insn.alu
        # the queue's head, registered every cycle (GATHER_CYCLES: the sequencer looks at it a
        # cycle after the queue presents it, and takes it a cycle later)
        nxt = _reg(m, self.insn.payload, "queue_head")
        nxt_valid = _reg(m, self.insn.valid, "queue_head_valid")
        ng, na = nxt.gemm, nxt.alu
        imm_w = cfg.layouts.alu["imm"].width
        length = Signal(range(ALU_CHAIN + 1), name="chain_length", init=1)
        nxt_stage = Signal(range(len(STAGES) + 1), name="chain_next_stage")
        is_open = Signal(name="chain_open")
        head = Signal(name="chain_head")
        joins = Signal(name="chain_joins")
        absorb = Signal(name="chain_absorb")
        fused = Signal(name="chain_fused")
        pre_imm = Signal(signed(imm_w), name="pre_imm")
        stages = [SimpleNamespace(imm=Signal(signed(imm_w), name=f"tail_{k}_imm"),
                                  take=Signal(name=f"tail_{k}_take"),
                                  is_max=Signal(name=f"tail_{k}_max"))
                  for k in range(len(TAIL_STAGES))]
        # the stages after PRE that could take the next instruction (stage_fits: a SHR
        # outside the ALU shifts right by at most MAX_STAGE_SHIFT)
        op = na.alu_opcode
        right = _stage_shift(na.imm)
        # the first stage the next member may take: after the head's (PRE for a right shift,
        # else the ALU; from the instruction register) until a member joined, then after the
        # last member's
        head_in_pre = (a.alu_opcode == AluOp.SHR) & _stage_shift(a.imm)
        first = Signal.like(nxt_stage, name="chain_first_free")
        m.d.comb += first.eq(Mux(length == 1, Mux(head_in_pre, PRE + 1, ALU + 1), nxt_stage))
        fits = {k: Signal(name=f"stage_{k}_fits") for k in range(ALU, len(STAGES))}
        for k, sig in fits.items():
            runs = Cat(*(op == o for o in sorted(STAGES[k]))).any()
            m.d.comb += sig.eq((first <= k) & runs
                               & (right if k != ALU and AluOp.SHR in STAGES[k] else 1))
        m.d.comb += [
            head.eq((insn.mem.opcode == Opcode.ALU) & a.use_imm & ~insn.mem.push_prev_dep
                    & ~insn.mem.push_next_dep & (g.uop_end == g.uop_bgn + 1)
                    & (g.iter_out != 0) & (g.iter_in != 0)
                    & ((g.iter_in == 1) | (a.dst_factor_in == 1))
                    & ((g.iter_out == 1) | (a.dst_factor_out >= g.iter_in))),
            joins.eq(nxt_valid & is_open & Cat(*fits.values()).any()
                     & (nxt.mem.opcode == Opcode.ALU)
                     & na.use_imm & ~nxt.mem.pop_prev_dep & ~nxt.mem.pop_next_dep
                     & (ng.uop_bgn == g.uop_bgn) & (ng.uop_end == g.uop_end)
                     & (ng.iter_out == g.iter_out) & (ng.iter_in == g.iter_in)
                     & (na.dst_factor_out == a.dst_factor_out)
                     & (na.dst_factor_in == a.dst_factor_in)),
            fused.eq(length > 1),
        ]
        with m.If(self.insn.valid & self.insn.ready & ~absorb):  # a new instruction
            m.d.sync += [length.eq(1), is_open.eq(1), pre_imm.eq(0)]
            for st in stages:
                m.d.sync += [st.imm.eq(0), st.take.eq(0)]
        # the sequencer takes a member the cycle after it looked at it: what the take writes
        # comes from registers
        look = SimpleNamespace(fits={k: _reg(m, v, f"look_{k}_fits") for k, v in fits.items()},
                               op=_reg(m, op, "look_op"), imm=_reg(m, na.imm, "look_imm"),
                               push_prev=_reg(m, nxt.mem.push_prev_dep, "look_push_prev"),
                               push_next=_reg(m, nxt.mem.push_next_dep, "look_push_next"))
        with m.If(absorb):
            m.d.sync += length.eq(length + 1)
            with m.If(look.push_prev | look.push_next):
                m.d.sync += is_open.eq(0)
            m.d.sync += [insn.mem.push_prev_dep.eq(insn.mem.push_prev_dep | look.push_prev),
                         insn.mem.push_next_dep.eq(insn.mem.push_next_dep | look.push_next)]
            for k, fit in look.fits.items():  # the first stage that fits
                with (m.If if k == ALU else m.Elif)(fit):
                    m.d.sync += nxt_stage.eq(k + 1)
                    if k == ALU:  # after a head in PRE: the ALU runs this member
                        m.d.sync += [pre_imm.eq(a.imm), a.alu_opcode.eq(look.op),
                                     a.imm.eq(look.imm)]
                    else:
                        st = stages[k - ALU - 1]
                        m.d.sync += [st.imm.eq(look.imm), st.take.eq(1),
                                     st.is_max.eq(look.op == AluOp.MAX)]
        return SimpleNamespace(head=head, joins=joins, absorb=absorb, length=length, fused=fused,
                               pre_imm=pre_imm, stages=stages)

    def _loads(self, m: Module, net: SimpleNamespace) -> None:
        """LOAD UOP and LOAD ACC through the two DMA readers, and FINISH."""
        go, opcode, insn, load_pending = net.go, net.opcode, net.insn, net.load_pending
        uop_dma, acc_dma, is_uop_load = net.uop_dma, net.acc_dma, net.is_uop_load
        # LOAD UOP / LOAD ACC (LOAD ACC shares the accumulator write port: it starts once the
        # GEMM/ALU pipeline is empty)
        load_go = Signal()
        load_ok = Signal()
        m.d.comb += [load_go.eq((go & (opcode == Opcode.LOAD)) | load_pending),
                     load_ok.eq(is_uop_load | ~net.pipe_busy)]
        with m.If(load_go & ~load_ok):
            m.d.sync += load_pending.eq(1)
        with m.Else():
            m.d.sync += load_pending.eq(0)
        for dma, sel in ((uop_dma, is_uop_load), (acc_dma, ~is_uop_load)):
            m.d.comb += [dma.cmd.payload.eq(insn.mem),
                         dma.cmd.valid.eq(load_go & load_ok & sel)]
        with m.If(is_uop_load):
            wiring.connect(m, uop_dma.req, wiring.flipped(self.req))
            m.d.comb += [uop_dma.rdata.payload.eq(self.rdata.payload),
                         uop_dma.rdata.valid.eq(self.rdata.valid),
                         self.rdata.ready.eq(uop_dma.rdata.ready)]
        with m.Else():
            wiring.connect(m, acc_dma.req, wiring.flipped(self.req))
            m.d.comb += [acc_dma.rdata.payload.eq(self.rdata.payload),
                         acc_dma.rdata.valid.eq(self.rdata.valid),
                         self.rdata.ready.eq(acc_dma.rdata.ready)]
        m.d.comb += self.status.mem_wait.eq(uop_dma.mem_wait | acc_dma.mem_wait)

        # FINISH
        with m.If(self.clear):
            m.d.sync += self.finish.eq(0)
        with m.Elif(go & (opcode == Opcode.FINISH)):
            m.d.sync += self.finish.eq(1)

    def _front_end(self, m: Module, net: SimpleNamespace) -> None:
        """S0 -> S1 (micro-op read) -> S2 (addresses) -> R."""
        # ------------------------------------------------------------ S0: loop counters
        issuer, opcode = net.issuer, net.opcode
        m.d.comb += [issuer.insn.eq(net.insn), issuer.adv.eq(net.adv),
                     issuer.chain.eq(net.chain.fused),
                     issuer.pipe_busy.eq(net.pipe_busy),
                     issuer.start.eq(net.go & ((opcode == Opcode.GEMM) | (opcode == Opcode.ALU)))]
        ctrl = net.issuer.ctrl  # of the instruction being issued
        base = {k: getattr(net.issuer, f"{k}_base") for k in BASES}
        aw_acc, aw_inp, aw_wgt = net.cfg.log_acc_depth, net.cfg.log_inp_depth, net.cfg.log_wgt_depth
        aw_src = max(aw_acc, aw_inp)
        ctrl_layout = ctrl.shape()

        s1_valid = Signal()
        s1_ctrl = Signal(ctrl_layout)
        s1_base = {k: Signal(len(v), name=f"s1_{k}_base") for k, v in base.items()}
        m.d.comb += [net.uop_rd.addr.eq(net.issuer.uop_addr), net.uop_rd.en.eq(net.adv)]
        with m.If(net.adv):
            m.d.sync += [s1_valid.eq(net.running), s1_ctrl.eq(ctrl)]
            for k in base:
                m.d.sync += s1_base[k].eq(base[k])

        # ------------------------------------------------------------ S1: micro-op register
        s2_valid = Signal()
        s2_ctrl = Signal(ctrl_layout)
        s2_uop = Signal(UOP_BITS)
        s2_base = {k: Signal(len(v), name=f"s2_{k}_base") for k, v in base.items()}
        with m.If(net.adv):
            m.d.sync += [s2_valid.eq(s1_valid), s2_ctrl.eq(s1_ctrl), s2_uop.eq(net.uop_rd.data)]
            for k in base:
                m.d.sync += s2_base[k].eq(s1_base[k])

        # ------------------------------------------------------------ S2: addresses
        uop = data.View(uop_layout(net.cfg), s2_uop)
        r_valid = Signal()
        r_ctrl = Signal(ctrl_layout)
        r_dst = Signal(aw_acc)
        r_src = Signal(aw_src)
        r_wgt = Signal(aw_wgt)
        r_alu_read = Signal()  # an ALU micro-op in R that reads the accumulator
        r_two = Signal()  # ... and reads two operands
        s2_dst, s2_src = Signal(aw_acc), Signal(aw_src)
        s2_alu_read = Signal()
        m.d.comb += [s2_dst.eq(uop.dst_idx + s2_base["dst"]),
                     s2_src.eq(uop.src_idx + s2_base["src"]),
                     s2_alu_read.eq(s2_valid & s2_ctrl.alu)]
        with m.If(net.adv):
            m.d.sync += [
                r_valid.eq(s2_valid), r_ctrl.eq(s2_ctrl), r_dst.eq(s2_dst), r_src.eq(s2_src),
                r_wgt.eq(uop.wgt_idx + s2_base["wgt"]),
                r_alu_read.eq(s2_alu_read), r_two.eq(s2_alu_read & ~s2_ctrl.use_imm),
            ]

        net.__dict__.update(aw_acc=aw_acc, ctrl_layout=ctrl_layout, r_alu_read=r_alu_read,
                            r_ctrl=r_ctrl, r_dst=r_dst, r_src=r_src, r_two=r_two, r_valid=r_valid,
                            r_wgt=r_wgt, s1_valid=s1_valid, s2_alu_read=s2_alu_read,
                            s2_ctrl=s2_ctrl, s2_dst=s2_dst, s2_src=s2_src, s2_valid=s2_valid)

    def _read_stage(self, m: Module, net: SimpleNamespace) -> None:
        """Stage W with its write history (the :class:`~vta.hw.write_back.WriteBack`
        component, whose inputs :meth:`_write_back` connects) and stage R: the scratchpad
        reads."""
        cfg = net.cfg
        m.submodules.write_back = wb = WriteBack(
            lanes=net.lanes, acc_width=net.aw, out_width=cfg.out_width, addr_width=net.aw_acc,
            acc_granularity=self.acc_granularity,
            out_granularity=out_granularity(cfg, self.bus_bytes))
        acc_q = Signal(net.acc_bits)
        m.d.sync += acc_q.eq(self.acc_rd.data)

        # ------------------------------------------------------------ R
        r_gemm = Signal()
        phase = Signal()  # second read cycle of a two-operand ALU micro-op
        stall = Signal()
        m.d.comb += [
            r_gemm.eq(net.r_valid & ~net.r_ctrl.alu),
            net.adv.eq(~stall),
            self.inp_rd.addr.eq(net.r_src), self.inp_rd.en.eq(1),
            self.wgt_rd.addr.eq(net.r_wgt), self.wgt_rd.en.eq(1),
        ]
        alu_rd_addr = Signal(net.aw_acc)
        m.d.comb += alu_rd_addr.eq(Mux(phase, net.r_src, net.r_dst))

        net.__dict__.update(acc_q=acc_q, alu_rd_addr=alu_rd_addr, phase=phase, r_gemm=r_gemm,
                            stall=stall, wb=wb)

    def _gemm_datapath(self, m: Module, net: SimpleNamespace) -> None:
        """GEMM stages D (C), M, T1, T2: the products and adder tree of each lane."""
        # ------------------------------------------------------------ GEMM: M, T1, T2, A
        B, BI, BO = net.cfg.batch, net.cfg.block_in, net.cfg.block_out
        rep = self.options.replicate_control
        stage_c = self.options.replicate_operands

        def lane_regs(value, name: str, *, same=None) -> list:
            """Per-lane copies of a register of ``value``; without replication ``same`` (an
            existing register of ``value``) when given."""
            if same is not None and not rep:
                return [same] * net.lanes
            return _copies(m, value, name, net.lanes, replicate=rep)

        def lane_map(value_of, name: str) -> list:
            """Per-lane registers of ``value_of(lane)`` (built from per-lane copies); one
            register for all lanes without replication (then the copies are one register)."""
            if not rep or net.lanes == 1:
                return [_reg(m, value_of(0), name)] * net.lanes
            return [_reg(m, value_of(k), f"{name}_l{k}", replica=True) for k in range(net.lanes)]

        def stage(name: str, valid, reset, dst) -> tuple:
            """A GEMM pipeline stage's control registers loaded from the previous stage's:
            valid, its per-lane copies (load enables of the lanes' datapath registers), reset
            and dst."""
            v = _reg(m, valid, f"{name}_valid")
            return (v, lane_regs(valid, f"{name}_valid", same=v),
                    _reg(m, reset, f"{name}_reset"), _reg(m, dst, f"{name}_dst"))

        # D: the block RAM outputs, registered
        d_valid, d_valids, d_reset, d_dst = stage("d", net.r_gemm & net.adv, net.r_ctrl.reset,
                                                  net.r_dst)
        # (the wide datapath registers load only for a valid micro-op: less switching, and a
        # much faster Verilator model)
        x = _lanes(_reg(m, self.inp_rd.data, "inp_q", en=d_valid), B * BI, net.cfg.inp_width)
        wgt_bits = BI * net.cfg.wgt_width
        wv = [w for n in range(BO) for w in _lanes(
            _reg(m, self.wgt_rd.data[n * wgt_bits:(n + 1) * wgt_bits], f"wgt_q_{n}",
                 en=d_valids[n]), BI, net.cfg.wgt_width)]
        pre_valid, pre_valids, pre_reset, pre_dst = d_valid, d_valids, d_reset, d_dst
        if stage_c:  # C: a private copy of both operands per multiplier
            pre_valid, pre_valids, pre_reset, pre_dst = stage("c", d_valid, d_reset, d_dst)
        m_valid, m_valids, m_reset, m_dst = stage("m", pre_valid, pre_reset, pre_dst)

        t1_valid, t1_valids, t1_reset, t1_dst = stage("t1", m_valid, m_reset, m_dst)
        t2_valid, t2_valids, t2_reset, t2_dst = stage("t2", t1_valid, t1_reset, t1_dst)
        # a reset micro-op sums nothing into nothing: its sums and accumulator data registers
        # load zero (a flip-flop's synchronous reset, not a multiplexer in A)
        t2_zero = lane_regs(t1_valid & t1_reset, "t2_zero")
        sums = []
        widths = dict(block_in=BI, inp_width=net.cfg.inp_width, wgt_width=net.cfg.wgt_width,
                      operand_stage=stage_c)
        # packed: output columns (2j, 2j + 1) share their multipliers (an odd last one not)
        paired = BO - BO % 2 if self.options.pack_multipliers else 0
        for b in range(B):
            for n in range(0, paired, 2):
                k_lane = b * BO + n
                m.submodules[f"gemm_pair_{b}_{n}"] = pair = GemmPair(**widths, name=(b, n))
                m.d.comb += [pair.x[k].eq(x[b * BI + k]) for k in range(BI)]
                m.d.comb += [pair.w0[k].eq(wv[n * BI + k]) for k in range(BI)]
                m.d.comb += [pair.w1[k].eq(wv[(n + 1) * BI + k]) for k in range(BI)]
                m.d.comb += [pair.en_c.eq(pre_valids[k_lane]), pair.en_m.eq(m_valids[k_lane])]
                for j in range(2):
                    m.d.comb += [pair.en_t1[j].eq(t1_valids[k_lane + j]),
                                 pair.en_t2[j].eq(t2_valids[k_lane + j]),
                                 pair.zero[j].eq(t2_zero[k_lane + j])]
                sums += [pair.sum[0], pair.sum[1]]
            for n in range(paired, BO):
                k_lane = b * BO + n
                m.submodules[f"gemm_lane_{b}_{n}"] = lane = GemmLane(**widths, name=(b, n))
                m.d.comb += [lane.x[k].eq(x[b * BI + k]) for k in range(BI)]
                m.d.comb += [lane.w[k].eq(wv[n * BI + k]) for k in range(BI)]
                m.d.comb += [lane.en_c.eq(pre_valids[k_lane]), lane.en_m.eq(m_valids[k_lane]),
                             lane.en_t1.eq(t1_valids[k_lane]), lane.en_t2.eq(t2_valids[k_lane]),
                             lane.zero.eq(t2_zero[k_lane])]
                sums.append(lane.sum)
        for k in range(net.lanes):
            with m.If(t2_zero[k]):
                m.d.sync += net.acc_q.word_select(k, net.aw).eq(0)
        net.__dict__.update(d_valid=d_valid, lane_map=lane_map, lane_regs=lane_regs,
                            m_valid=m_valid, pre_valid=pre_valid, sums=sums, t1_dst=t1_dst,
                            t1_valid=t1_valid, t2_dst=t2_dst, t2_reset=t2_reset, t2_valid=t2_valid)

    def _gemm_accumulate(self, m: Module, net: SimpleNamespace) -> None:
        """GEMM stage A: forwarding from W and w1, and the accumulate."""
        a_valid = _reg(m, net.t2_valid, "a_valid")
        a_valids = net.lane_regs(net.t2_valid, "a_valid", same=a_valid)
        a_dst = _reg(m, net.t2_dst, "a_dst")
        wb = net.wb
        w_l, w1_l, w2_l, acc_l = (_lanes(v, net.lanes, net.aw)
                                  for v in (wb.w.result, wb.w1.result, wb.w2_result, net.acc_q))
        # Forwarding into A, decided ahead: in T1 whether the micro-ops that will be in W and
        # w1 during T2 (now in A and W) write this dst; in T2 their result (then in W or w1,
        # the newer first) goes into fw_q, and whether the one that will be in W during A (now
        # in A) writes it into sel_w. A then picks one of three registers (W, fw_q, acc_q).
        # A reset micro-op forwards nothing (its acc_q and sum are zero).
        t2_fw1 = net.lane_regs(a_valid & (a_dst == net.t1_dst), "t2_fw1")  # W during T2
        t2_fw2 = net.lane_regs(wb.w.valid & (wb.w.dst == net.t1_dst), "t2_fw2")  # w1 during T2
        fw_q = [_reg(m, Mux(t2_fw1[k], w_l[k], w1_l[k]), f"fw_q_{k}") for k in range(net.lanes)]
        use_fw = net.lane_map(lambda k: (t2_fw1[k] | t2_fw2[k]) & ~net.t2_reset, "use_fw")
        sel_w = net.lane_regs(a_valid & (a_dst == net.t2_dst) & ~net.t2_reset, "sel_w")
        gemm_l = []
        for k in range(net.lanes):
            now = Mux(sel_w[k], w_l[k], Mux(use_fw[k], fw_q[k], acc_l[k]))
            gemm_l.append((now + net.sums[k])[:net.aw])

        # the accumulator read port: GEMM reads dst in T1, the ALU in R (never both: GEMM and
        # ALU micro-ops are never in the pipeline together)
        m.d.comb += [self.acc_rd.addr.eq(Mux(net.t1_valid, net.t1_dst, net.alu_rd_addr)),
                     self.acc_rd.en.eq(1)]

        net.__dict__.update(a_dst=a_dst, a_valid=a_valid, a_valids=a_valids, acc_l=acc_l,
                            gemm_l=gemm_l, w1_l=w1_l, w2_l=w2_l, w_l=w_l)

    def _alu_pipe(self, m: Module, net: SimpleNamespace) -> None:
        """ALU stages RD, E1, E2, E3 with the interlock and forwarding."""
        # ------------------------------------------------------------ ALU: E1, E2, E3
        rd_valid = Signal()  # RD: the micro-op whose (last) read was issued a cycle ago
        rd_ctrl = Signal(net.ctrl_layout)
        rd_dst = Signal(net.aw_acc)
        rd_src = Signal(net.aw_acc)
        e1_valid = Signal()
        e1_ctrl = Signal(net.ctrl_layout)
        e1_dst = Signal(net.aw_acc)
        e1_src = Signal(net.aw_acc)
        e2_valid = Signal()
        e2_dst = Signal(net.aw_acc)
        e3_valid = Signal()
        e3_chain = Signal()  # the micro-op in E3 goes on through the chain stages
        e3_wb = Signal()  # ... else W takes it in the next cycle
        e3_dst = Signal(net.aw_acc)
        # interlock: an ALU micro-op in R waits while one ahead would write what it reads
        # too late to be forwarded (see the module docstring): hit_rd while the micro-op in RD
        # writes its dst (or, two-operand, its src), hit_e1 while the one in E1 writes its dst.
        # Both are registers, computed a cycle ahead from what R, RD and E1 will then hold (R:
        # the micro-op now in S2 if R advances, else the same; RD: the one now in R if it
        # advances, else a bubble; E1: the one now in RD), so ``adv`` -- the enable of the whole
        # front end -- is one gate after flip-flops.
        hit_rd = Signal()
        hit_e1 = Signal()
        s2_two = net.s2_alu_read & ~net.s2_ctrl.use_imm
        m.d.sync += [
            hit_rd.eq(net.adv & net.r_valid & net.r_ctrl.alu
                      & ((net.r_dst == net.s2_dst)
                         | (s2_two & (net.r_dst == net.s2_src[:net.aw_acc])))),
            hit_e1.eq(rd_valid & Mux(net.adv, rd_dst == net.s2_dst, rd_dst == net.r_dst)),
        ]
        r_reuse, r_port_src = self._src_reuse(m, net, s2_two)
        r_two = net.r_two & ~r_reuse  # reads its src through the port
        m.d.comb += net.stall.eq(net.r_alu_read & ~net.phase & (r_two | hit_rd | hit_e1))
        # a two-operand micro-op: phase 0 reads dst (stalled), phase 1 reads src (advances)
        m.d.sync += net.phase.eq(r_two & ~net.phase & ~hit_rd)
        rd_reuse, rd_port, e1_port = Signal(), Signal(), Signal()
        m.d.sync += [
            rd_valid.eq(net.r_valid & net.r_ctrl.alu & net.adv), rd_ctrl.eq(net.r_ctrl),
            rd_dst.eq(net.r_dst), rd_src.eq(net.r_src[:net.aw_acc]),
            rd_reuse.eq(r_reuse), rd_port.eq(r_port_src & net.adv),
            e1_valid.eq(rd_valid), e1_ctrl.eq(rd_ctrl), e1_dst.eq(rd_dst), e1_src.eq(rd_src),
            e1_port.eq(rd_port),
        ]
        # a two-operand micro-op's dst arrives in acc_q in its RD cycle, src in its E1 cycle.
        # The forwarding selects are registered one cycle ahead: in a stage's next cycle W
        # holds what is now in E3 (E1..W never stall), w1 what is now in W, w2 what is in w1.
        def selects(addr, name):
            return (net.lane_regs(e3_wb & (e3_dst == addr), f"{name}_w"),
                    net.lane_regs(net.wb.w.valid & (net.wb.w.dst == addr), f"{name}_w1"),
                    net.lane_regs(net.wb.w1.valid & (net.wb.w1.dst == addr), f"{name}_w2"))

        def pick(sel, k: int, value):
            return Mux(sel[0][k], net.w_l[k],
                       Mux(sel[1][k], net.w1_l[k], Mux(sel[2][k], net.w2_l[k], value)))

        sel_rd = selects(net.r_dst, "sel_rd")
        dst_hold = [_reg(m, pick(sel_rd, k, net.acc_l[k]), f"dst_hold_{k}")
                    for k in range(net.lanes)]
        # a two-operand micro-op in E1 (its dst is in dst_hold, its src in acc_q)
        two = net.lane_regs(~rd_ctrl.use_imm & ~rd_reuse, "two")
        reuse = net.lane_regs(rd_reuse, "reuse")
        sel_a = selects(rd_dst, "sel_a")
        sel_b = selects(rd_src, "sel_b")
        e1_valids = net.lane_regs(rd_valid, "e1_valid", same=e1_valid)
        # PRE, for a chain's micro-ops only (one cycle between E1 and E2): the chain's first
        # right shift (vta.isa.fusion.PRE; by 0 when no member took it). A chain's micro-ops
        # follow every other micro-op in flight, so E1 and PRE never hand E2 one each in a
        # cycle.
        e1_chain = e1_valid & e1_ctrl.chain
        p_valid = _reg(m, e1_chain, "p_valid")
        p_valids = net.lane_regs(e1_chain, "p_valid", same=p_valid)
        p_ctrl = _reg(m, e1_ctrl, "p_ctrl", en=e1_chain)
        p_dst = _reg(m, e1_dst, "p_dst", en=e1_chain)
        to_e2 = Signal(name="to_e2")  # a micro-op enters E2 (from E1, or from PRE)
        in_ctrl = Signal(net.ctrl_layout, name="e2_in_ctrl")
        m.d.comb += [to_e2.eq((e1_valid & ~e1_ctrl.chain) | p_valid),
                     in_ctrl.eq(Mux(p_valid, p_ctrl.as_value(), e1_ctrl.as_value()))]
        e2_loads = [e1_valids[k] | p_valids[k] for k in range(net.lanes)]
        imm_ext = Signal(signed(net.aw))
        m.d.comb += imm_ext.eq(in_ctrl.imm)
        e2_valids = net.lane_regs(to_e2, "e2_valid", same=e2_valid)
        e2_ctrl = _reg(m, in_ctrl, "e2_ctrl")
        m.d.sync += [e2_valid.eq(to_e2), e2_dst.eq(Mux(p_valid, p_dst, e1_dst))]
        a_e1 = [pick(sel_a, k, Mux(two[k], dst_hold[k], net.acc_l[k])) for k in range(net.lanes)]
        e2_a = []
        for k in range(net.lanes):
            m.submodules[f"pre_lane_{k}"] = pre = TailLane(
                net.aw, STAGES[PRE], len(net.chain.pre_imm), max_shift=MAX_STAGE_SHIFT)
            m.d.comb += [pre.a.eq(a_e1[k]), pre.imm.eq(net.chain.pre_imm),
                         pre.en.eq(e1_valids[k])]
            e2_a.append(_reg(m, Mux(p_valids[k], pre.result, a_e1[k]), f"e2_a_{k}",
                             en=e2_loads[k]))
        # the src operand a port read brings is kept for the two-operand micro-ops after it
        # that read the same entry (_src_reuse)
        src_l = [pick(sel_b, k, net.acc_l[k]) for k in range(net.lanes)]
        src_keep = [_reg(m, src_l[k], f"src_keep_{k}", en=e1_valid & e1_port)
                    for k in range(net.lanes)]
        e2_b = [_reg(m, Mux(reuse[k] & ~p_valids[k], src_keep[k],
                            Mux(two[k] & ~p_valids[k], src_l[k], imm_ext)),
                     f"e2_b_{k}", en=e2_loads[k]) for k in range(net.lanes)]
        m.d.sync += [e3_valid.eq(e2_valid), e3_dst.eq(e2_dst), e3_chain.eq(e2_ctrl.chain)]
        m.d.comb += e3_wb.eq(e3_valid & ~e3_chain)
        e3_ops = net.lane_regs(e2_ctrl.op, "e3_op")
        e3_is_mul = net.lane_regs(e2_ctrl.op == AluOp.MUL, "e3_is_mul")
        alu_l = []
        for k in range(net.lanes):
            m.submodules[f"alu_lane_{k}"] = lane = AluLane(net.aw)
            m.d.comb += [lane.a.eq(e2_a[k]), lane.b.eq(e2_b[k]), lane.en.eq(e2_valids[k]),
                         lane.op.eq(e3_ops[k]), lane.is_mul.eq(e3_is_mul[k])]
            alu_l.append(lane.result)

        chain_out, chain_valids = self._alu_chain(m, net, e3_valid & e3_chain, e3_dst, alu_l)
        net.__dict__.update(alu_l=alu_l, e1_valid=e1_valid, p_valid=p_valid, e1_ctrl=e1_ctrl,
                            e2_valid=e2_valid, e3_dst=e3_dst, e3_valid=e3_valid, e3_wb=e3_wb,
                            rd_valid=rd_valid,
                            chain_out=chain_out, chain_valids=chain_valids)

    def _src_reuse(self, m: Module, net: SimpleNamespace, s2_two) -> tuple:
        """Two-operand ALU micro-ops at one per cycle when their src repeats (a bias or a
        per-channel operand added to every entry of a tile): the micro-op that reads its src
        through the port keeps the value (``src_keep``, loaded in its E1 with the forwarded
        data), and a later micro-op whose src is that entry takes it instead of a second read,
        so it reads only dst, like an immediate. The entry is tracked in R, in program order:
        a micro-op leaving R that writes it (the reader itself included) ends the reuse, as do
        a GEMM micro-op and LOAD ACC. ``r_reuse`` is registered a cycle ahead from what R will
        hold, like the interlock. Returns (``r_reuse``, ``r_port_src``: the micro-op in R
        reads its src through the port)."""
        aw = net.aw_acc
        r_reuse, r_port_src = Signal(name="r_reuse"), Signal(name="r_port_src")
        addr = Signal(aw, name="src_keep_addr")
        ok = Signal(name="src_keep_ok")
        r_src = net.r_src[:aw]
        r_alu = net.r_valid & net.r_ctrl.alu
        m.d.comb += r_port_src.eq(r_alu & net.r_two & ~r_reuse)
        # the kept entry once the micro-op in R has left it
        addr_next = Mux(r_port_src, r_src, addr)
        ok_next = Mux(r_port_src, net.r_dst != r_src, ok & ~(r_alu & (net.r_dst == addr)))
        flush = (net.r_valid & ~net.r_ctrl.alu) | net.acc_dma.busy
        with m.If(flush):
            m.d.sync += [ok.eq(0), r_reuse.eq(0)]
        with m.Elif(net.adv):
            m.d.sync += [addr.eq(addr_next), ok.eq(ok_next),
                         r_reuse.eq(s2_two & ok_next & (net.s2_src[:aw] == addr_next))]
        return r_reuse, r_port_src

    def _alu_chain(self, m: Module, net: SimpleNamespace, valid, dst, values: list) -> tuple:
        """The ALU tail after E3, two cycles per stage: a register of the previous stage's
        result, then a :class:`~vta.hw.alu.TailLane` per lane applying the operation of the
        member that took the stage (passing the value on if none did). Every chain micro-op
        goes through all of them. Returns (valid, dst, result lanes) of the last stage and the
        stages' valid registers."""
        chain, aw = net.chain, net.aw
        valids = []
        for k, (ops, st) in enumerate(zip(TAIL_STAGES, chain.stages, strict=True), start=1):
            p_valid = _reg(m, valid, f"c{k}_valid")
            p_dst = _reg(m, dst, f"c{k}_dst")
            p_vals = [_reg(m, v, f"c{k}_a_{j}", en=valid) for j, v in enumerate(values)]
            results = []
            for j, v in enumerate(p_vals):
                m.submodules[f"tail_{k}_lane_{j}"] = lane = TailLane(
                    aw, ops, len(st.imm), max_shift=MAX_STAGE_SHIFT)
                m.d.comb += [lane.a.eq(v), lane.imm.eq(st.imm), lane.en.eq(p_valid),
                             lane.take.eq(st.take), lane.is_max.eq(st.is_max)]
                results.append(lane.result)
            valid, dst = _reg(m, p_valid, f"c{k}_q_valid"), _reg(m, p_dst, f"c{k}_q_dst")
            values = results
            valids += [p_valid, valid]
        return SimpleNamespace(valid=valid, dst=dst, values=values), valids

    def _write_back(self, m: Module, net: SimpleNamespace) -> None:
        """Stage W's inputs (GEMM from A, ALU from E3, LOAD ACC from its DMA reader) and
        ports, and the module state."""
        wb = net.wb
        # (a chain's last stage and E3 never hold a micro-op for W in one cycle: the chain's
        # micro-ops come after every other ALU micro-op in flight and take longer)
        out = net.chain_out
        m.d.comb += [wb.gemm_valid.eq(net.a_valid), wb.gemm_dst.eq(net.a_dst),
                     wb.alu_valid.eq(net.e3_wb | out.valid),
                     wb.alu_dst.eq(Mux(out.valid, out.dst, net.e3_dst)),
                     wb.load_busy.eq(net.acc_dma.busy)]
        for k in range(net.lanes):
            m.d.comb += [wb.gemm_lane[k].eq(net.a_valids[k]), wb.gemm_result[k].eq(net.gemm_l[k]),
                         wb.alu_result[k].eq(Mux(out.valid, out.values[k], net.alu_l[k]))]
        wiring.connect(m, net.acc_dma.sram, wb.load)
        wiring.connect(m, wb.acc_wr, wiring.flipped(self.acc_wr))
        wiring.connect(m, wb.out_wr, wiring.flipped(self.out_wr))
        # ALU micro-op iterations: a chain's micro-op is one of each member's
        m.d.comb += [self.gemm_uop.eq(net.m_valid),
                     self.alu_uop.eq(Mux(net.e1_valid,
                                         Mux(net.e1_ctrl.chain, net.chain.length, 1), 0))]
        stages = ("s1", "s2", "r", "d", "pre", "m", "t1", "t2", "a", "rd", "e1", "p", "e2", "e3")
        m.d.comb += net.pipe_busy.eq(Cat(wb.w.valid, *net.chain_valids,
                                         *(getattr(net, f"{s}_valid") for s in stages)).any())

        # report "drain" while micro-ops leave the pipeline
        m.d.comb += self.status.state.eq(Mux(
            net.in_run & ~net.running & ~net.pending & net.pipe_busy, MODULE_STATES["drain"],
            net.seq_state))




def _stage_shift(imm):
    """Whether a SHR by ``imm`` fits a stage outside the ALU (``vta.isa.fusion.stage_fits``:
    0 to :data:`~vta.isa.fusion.MAX_STAGE_SHIFT`)."""
    return imm[bits_for(MAX_STAGE_SHIFT):] == 0


def _uop_memory(cfg: Config):
    from amaranth.lib.memory import Memory

    return Memory(shape=UOP_BITS, depth=cfg.uop_depth, init=[])
