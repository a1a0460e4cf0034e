"""The compute module: LOAD UOP/ACC, GEMM, ALU and FINISH.

GEMM and ALU share one pipeline that starts one micro-op iteration per cycle:

====== =========================================================================
stage  work
====== =========================================================================
0      loop counters (o, i, u) -> micro-op memory read address
1      micro-op fields + o*factor_out + i*factor_in -> acc/inp/wgt read addresses
2      read data -> GEMM dot products or ALU op -> result register
3      result -> accumulator write
====== =========================================================================

Back-to-back micro-ops that touch the same accumulator entry are handled by **forwarding**,
never by stalling: a read issued in stage 1 one cycle before the write of an older micro-op
(stage 3) takes the result register through a bypass in stage 2, and a read issued in the same
cycle as that write sees it because the accumulator read ports are transparent to the write
port. A GEMM/ALU instruction of N micro-op iterations therefore takes N + 3 cycles in the
pipeline; the next instruction starts after the pipeline has drained.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory, ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2
from vta.isa import Config
from vta.isa.layout import AluOp, MemType, Opcode

from .axi import rdata_layout, req_layout
from .decode import uop_layout
from .dma import DMARead
from .queues import TokenPopSignature, TokenPushSignature
from .regs import MODULE_STATES
from .sequencer import ModuleStatusSignature, instruction_sequencer

__all__ = ["Compute", "gemm_lanes", "alu_lane"]


def _lanes(value, count: int, width: int, *, is_signed: bool = True) -> list:
    lanes = [value.word_select(k, width) for k in range(count)]
    return [lane.as_signed() if is_signed else lane for lane in lanes]


def gemm_lanes(cfg: Config, acc, inp, wgt) -> list:
    """acc + inp x wgt^T, lane by lane (each lane ``acc_width`` bits, wrapping)."""
    B, BI, BO = cfg.batch, cfg.block_in, cfg.block_out
    a = _lanes(acc, B * BO, cfg.acc_width)
    x = _lanes(inp, B * BI, cfg.inp_width)
    w = _lanes(wgt, BO * BI, cfg.wgt_width)
    out = []
    for b in range(B):
        for o in range(BO):
            terms = [x[b * BI + k] * w[o * BI + k] for k in range(BI)]
            while len(terms) > 1:  # balanced adder tree
                terms = [terms[j] + terms[j + 1] if j + 1 < len(terms) else terms[j]
                         for j in range(0, len(terms), 2)]
            out.append((a[b * BO + o] + terms[0])[:cfg.acc_width])
    return out


def alu_lane(m: Module, cfg: Config, op, a, b) -> Signal:
    """One ALU lane: MIN/MAX (signed), ADD, SHR (negative amounts shift left), MUL, wrapping."""
    aw = cfg.acc_width
    res = Signal(aw)
    amt_bits = ceil_log2(aw + 1)
    neg = b < 0
    mag = Mux(neg, -b, b)  # |b| (as a wider signed value)
    amt = Signal(amt_bits)
    m.d.comb += amt.eq(Mux(mag > aw, aw, mag[:amt_bits]))
    with m.Switch(op):
        with m.Case(AluOp.MIN):
            m.d.comb += res.eq(Mux(a < b, a, b))
        with m.Case(AluOp.MAX):
            m.d.comb += res.eq(Mux(a > b, a, b))
        with m.Case(AluOp.ADD):
            m.d.comb += res.eq(a + b)
        with m.Case(AluOp.SHR):
            m.d.comb += res.eq(Mux(neg, (a << amt)[:aw], a >> amt))
        with m.Case(AluOp.MUL):
            m.d.comb += res.eq(a * b)
        with m.Default():
            m.d.comb += res.eq(a)
    return res


class Compute(wiring.Component):
    """Executes LOAD UOP/ACC, GEMM, ALU and FINISH.

    Token queues: pops load->compute ("prev") and store->compute ("next"), pushes
    compute->load ("prev") and compute->store ("next"). ``finish`` is set when FINISH executes
    (cleared by ``clear``). ``gemm_uop``/``alu_uop`` pulse once per micro-op iteration.
    """

    def __init__(self, cfg: Config, *, insn_layout: data.Layout, bus_bytes: int) -> None:
        self.cfg, self.insn_layout, self.bus_bytes = cfg, insn_layout, bus_bytes
        acc_bits = cfg.acc_elem_bytes * 8
        acc_gran = bus_bytes * 8 if cfg.acc_elem_bytes > bus_bytes else None
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
            "acc_rd_dst": In(ReadPort.Signature(addr_width=cfg.log_acc_depth, shape=acc_bits)),
            "acc_rd_src": In(ReadPort.Signature(addr_width=cfg.log_acc_depth, shape=acc_bits)),
            "acc_wr": In(WritePort.Signature(addr_width=cfg.log_acc_depth, shape=acc_bits,
                                             granularity=acc_gran)),
            "status": Out(ModuleStatusSignature()),
            "clear": In(1),
            "finish": Out(1),
            "gemm_uop": Out(1),
            "alu_uop": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, W = self.cfg, self.bus_bytes
        mem_layout = self.insn_layout["mem"].shape
        m.submodules.uop_mem = uop_mem = Memory(shape=32, depth=cfg.uop_depth, init=[])
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
        is_uop_load = Signal()
        m.d.comb += is_uop_load.eq(insn.mem.memory_type == MemType.UOP)

        # ------------------------------------------------------------ loop (stage 0)
        running = Signal()
        s1_valid, s2_valid, s3_valid = Signal(), Signal(), Signal()
        exec_busy = Signal()
        m.d.comb += exec_busy.eq(uop_dma.busy | acc_dma.busy | running | s1_valid | s2_valid
                                 | s3_valid)
        seq_status = ModuleStatusSignature().create()
        go = instruction_sequencer(
            m, insn_stream=self.insn, insn=insn,
            pops=[(insn.mem.pop_prev_dep, self.pop_prev), (insn.mem.pop_next_dep, self.pop_next)],
            pushes=[(insn.mem.push_prev_dep, self.push_prev),
                    (insn.mem.push_next_dep, self.push_next)],
            exec_busy=exec_busy, status=seq_status, clear=self.clear)
        seq_state = seq_status.state
        in_run = Signal()
        m.d.comb += [
            in_run.eq(seq_state == MODULE_STATES["run"]),
            self.status.busy.eq(seq_status.busy), self.status.token_wait.eq(seq_status.token_wait),
            self.status.done.eq(seq_status.done),
        ]

        # LOAD UOP / LOAD ACC
        for dma, sel in ((uop_dma, is_uop_load), (acc_dma, ~is_uop_load)):
            m.d.comb += [dma.cmd.payload.eq(insn.mem),
                         dma.cmd.valid.eq(go & (opcode == Opcode.LOAD) & sel)]
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

        # GEMM / ALU loop state
        g, a = insn.gemm, insn.alu
        is_alu = Signal()
        alu_op = Signal(3)
        use_imm = Signal()
        imm = Signal(signed(16))
        reset = Signal()
        uop_bgn = Signal(len(g.uop_end))
        uop_end = Signal(len(g.uop_end))
        iter_out = Signal(14)
        iter_in = Signal(14)
        aw_acc, aw_inp, aw_wgt = cfg.log_acc_depth, cfg.log_inp_depth, cfg.log_wgt_depth
        aw_src = max(aw_acc, aw_inp)
        f = {k: Signal(w, name=f"{k}") for k, w in (
            ("dst_fo", aw_acc), ("dst_fi", aw_acc), ("src_fo", aw_src), ("src_fi", aw_src),
            ("wgt_fo", aw_wgt), ("wgt_fi", aw_wgt))}
        base_o = {k: Signal(w, name=f"{k}_base_o") for k, w in (
            ("dst", aw_acc), ("src", aw_src), ("wgt", aw_wgt))}
        base = {k: Signal(w, name=f"{k}_base") for k, w in (
            ("dst", aw_acc), ("src", aw_src), ("wgt", aw_wgt))}
        u = Signal(len(g.uop_end))
        i = Signal(14)
        o = Signal(14)

        with m.If(go & ((opcode == Opcode.GEMM) | (opcode == Opcode.ALU))):
            alu = opcode == Opcode.ALU
            m.d.sync += [
                is_alu.eq(alu), alu_op.eq(a.alu_opcode), use_imm.eq(a.use_imm), imm.eq(a.imm),
                reset.eq(g.reset_reg), uop_bgn.eq(g.uop_bgn), uop_end.eq(g.uop_end),
                iter_out.eq(g.iter_out), iter_in.eq(g.iter_in),
                u.eq(g.uop_bgn), i.eq(0), o.eq(0),
                f["dst_fo"].eq(Mux(alu, a.dst_factor_out, g.dst_factor_out)),
                f["dst_fi"].eq(Mux(alu, a.dst_factor_in, g.dst_factor_in)),
                f["src_fo"].eq(Mux(alu, a.src_factor_out, g.src_factor_out)),
                f["src_fi"].eq(Mux(alu, a.src_factor_in, g.src_factor_in)),
                f["wgt_fo"].eq(g.wgt_factor_out), f["wgt_fi"].eq(g.wgt_factor_in),
                running.eq((g.iter_out != 0) & (g.iter_in != 0) & (g.uop_end > g.uop_bgn)),
            ]
            for k in base:
                m.d.sync += [base_o[k].eq(0), base[k].eq(0)]

        s1_base = {k: Signal(len(v), name=f"s1_{k}_base") for k, v in base.items()}
        m.d.comb += [uop_rd.addr.eq(u), uop_rd.en.eq(1)]
        m.d.sync += s1_valid.eq(running)
        for k in base:
            m.d.sync += s1_base[k].eq(base[k])
        with m.If(running):
            with m.If(u + 1 != uop_end):
                m.d.sync += u.eq(u + 1)
            with m.Else():
                m.d.sync += u.eq(uop_bgn)
                with m.If(i + 1 != iter_in):
                    m.d.sync += i.eq(i + 1)
                    for k in base:
                        m.d.sync += base[k].eq(base[k] + f[f"{k}_fi"])
                with m.Else():
                    m.d.sync += i.eq(0)
                    with m.If(o + 1 != iter_out):
                        m.d.sync += o.eq(o + 1)
                        for k in base:
                            m.d.sync += [base_o[k].eq(base_o[k] + f[f"{k}_fo"]),
                                         base[k].eq(base_o[k] + f[f"{k}_fo"])]
                    with m.Else():
                        m.d.sync += running.eq(0)

        # report "drain" while the last micro-ops of a GEMM/ALU leave the pipeline
        m.d.comb += self.status.state.eq(Mux(
            in_run & ~running & (s1_valid | s2_valid | s3_valid), MODULE_STATES["drain"],
            seq_state))

        # ------------------------------------------------------------ stage 1: addresses
        uop = data.View(uop_layout(cfg), uop_rd.data)
        dst = Signal(aw_acc)
        src = Signal(aw_src)
        wgt = Signal(aw_wgt)
        m.d.comb += [
            dst.eq(uop.dst_idx + s1_base["dst"]),
            src.eq(uop.src_idx + s1_base["src"]),
            wgt.eq(uop.wgt_idx + s1_base["wgt"]),
            self.acc_rd_dst.addr.eq(dst), self.acc_rd_dst.en.eq(1),
            self.acc_rd_src.addr.eq(src), self.acc_rd_src.en.eq(1),
            self.inp_rd.addr.eq(src), self.inp_rd.en.eq(1),
            self.wgt_rd.addr.eq(wgt), self.wgt_rd.en.eq(1),
        ]
        s2_dst = Signal(aw_acc)
        s2_src = Signal(aw_acc)
        m.d.sync += [s2_valid.eq(s1_valid), s2_dst.eq(dst), s2_src.eq(src)]

        # ------------------------------------------------------------ stage 2: execute
        acc_bits = cfg.acc_elem_bytes * 8
        s3_dst = Signal(aw_acc)
        s3_result = Signal(acc_bits)
        acc_dst = Signal(acc_bits)
        acc_src = Signal(acc_bits)
        m.d.comb += [
            acc_dst.eq(Mux(s3_valid & (s3_dst == s2_dst), s3_result, self.acc_rd_dst.data)),
            acc_src.eq(Mux(s3_valid & (s3_dst == s2_src), s3_result, self.acc_rd_src.data)),
        ]
        lanes = cfg.batch * cfg.block_out
        gemm_out = Cat(*gemm_lanes(cfg, acc_dst, self.inp_rd.data, self.wgt_rd.data))
        imm_ext = Signal(signed(cfg.acc_width))
        m.d.comb += imm_ext.eq(imm)
        a_lanes = _lanes(acc_dst, lanes, cfg.acc_width)
        b_lanes = _lanes(acc_src, lanes, cfg.acc_width)
        alu_out = Cat(*(alu_lane(m, cfg, alu_op, a_lanes[k], Mux(use_imm, imm_ext, b_lanes[k]))
                        for k in range(lanes)))
        result = Signal(acc_bits)
        with m.If(reset):  # GEMM and ALU alike (as the functional simulator)
            m.d.comb += result.eq(0)
        with m.Elif(is_alu):
            m.d.comb += result.eq(alu_out)
        with m.Else():
            m.d.comb += result.eq(gemm_out)
        m.d.sync += [s3_valid.eq(s2_valid), s3_dst.eq(s2_dst), s3_result.eq(result)]
        m.d.comb += [self.gemm_uop.eq(s2_valid & ~is_alu), self.alu_uop.eq(s2_valid & is_alu)]

        # ------------------------------------------------------------ stage 3: write back
        with m.If(acc_dma.busy):
            wiring.connect(m, acc_dma.sram, wiring.flipped(self.acc_wr))
        with m.Else():
            m.d.comb += [self.acc_wr.addr.eq(s3_dst), self.acc_wr.data.eq(s3_result),
                         self.acc_wr.en.eq(Mux(s3_valid, -1, 0))]
        return m
