"""A deliberately simple reference interpreter for VTA programs, written from ARCHITECTURE.md.

Plain Python integers and loops, one micro-op and one element at a time, instructions in program
order (tokens are ignored: a token-correct program must give the sequential result). It shares no
code with vta.sim.fsim: the tests check fsim against it.
"""

from __future__ import annotations

import numpy as np
from vta.isa import AluInsn, Config, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, decode_program


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class RefMachine:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
        self.uop = [0] * cfg.uop_depth
        self.inp = [[[0] * bi for _ in range(b)] for _ in range(cfg.inp_depth)]
        self.wgt = [[[0] * bi for _ in range(bo)] for _ in range(cfg.wgt_depth)]
        self.acc = [[[0] * bo for _ in range(b)] for _ in range(cfg.acc_depth)]

    # element <-> bytes
    def _read_elem(self, dram: bytearray, mt: int, index: int):
        c = self.cfg
        if mt == MemType.UOP:
            return int.from_bytes(dram[index * 4:index * 4 + 4], "little")
        rows, cols, bits = {MemType.INP: (c.batch, c.block_in, c.inp_width),
                            MemType.WGT: (c.block_out, c.block_in, c.wgt_width),
                            MemType.ACC: (c.batch, c.block_out, c.acc_width)}[mt]
        nbytes = bits // 8
        base = index * rows * cols * nbytes
        out = []
        for r in range(rows):
            row = []
            for k in range(cols):
                at = base + (r * cols + k) * nbytes
                row.append(_signed(int.from_bytes(dram[at:at + nbytes], "little"), bits))
            out.append(row)
        return out

    def _zero(self, mt: int):
        c = self.cfg
        if mt == MemType.UOP:
            return 0
        rows, cols = {MemType.INP: (c.batch, c.block_in), MemType.WGT: (c.block_out, c.block_in),
                      MemType.ACC: (c.batch, c.block_out)}[mt]
        return [[0] * cols for _ in range(rows)]

    def run(self, program: bytes, dram: bytearray) -> None:
        for insn in decode_program(program, self.cfg):
            if isinstance(insn, FinishInsn):
                return
            if isinstance(insn, MemInsn) and insn.opcode == Opcode.LOAD:
                self.load(insn, dram)
            elif isinstance(insn, MemInsn):
                self.store(insn, dram)
            elif isinstance(insn, GemmInsn):
                self.gemm(insn)
            elif isinstance(insn, AluInsn):
                self.alu(insn)

    def load(self, insn: MemInsn, dram: bytearray) -> None:
        if insn.x_size == 0:
            return
        mt = insn.memory_type
        buf = {MemType.UOP: self.uop, MemType.INP: self.inp, MemType.WGT: self.wgt,
               MemType.ACC: self.acc}[mt]
        width = insn.x_pad_0 + insn.x_size + insn.x_pad_1
        rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
        for r in range(rows):
            for c in range(width):
                y, x = r - insn.y_pad_0, c - insn.x_pad_0
                if 0 <= y < insn.y_size and 0 <= x < insn.x_size:
                    val = self._read_elem(dram, mt, insn.dram_base + y * insn.x_stride + x)
                else:
                    val = self._zero(mt)
                buf[insn.sram_base + r * width + c] = val

    def store(self, insn: MemInsn, dram: bytearray) -> None:
        c = self.cfg
        nbytes = c.out_width // 8
        for y in range(insn.y_size):
            for x in range(insn.x_size):
                entry = self.acc[insn.sram_base + y * insn.x_size + x]
                at = (insn.dram_base + y * insn.x_stride + x) * c.out_elem_bytes
                for b in range(c.batch):
                    for o in range(c.block_out):
                        v = entry[b][o] & ((1 << c.out_width) - 1)
                        pos = at + (b * c.block_out + o) * nbytes
                        dram[pos:pos + nbytes] = v.to_bytes(nbytes, "little")

    def _uop(self, k: int) -> tuple[int, int, int]:
        f = self.cfg.layouts.uop
        w = self.uop[k]
        return tuple(f[name].extract(w) for name in ("dst_idx", "src_idx", "wgt_idx"))

    def gemm(self, insn: GemmInsn) -> None:
        c = self.cfg
        for o in range(insn.iter_out):
            for i in range(insn.iter_in):
                for k in range(insn.uop_bgn, insn.uop_end):
                    d0, s0, w0 = self._uop(k)
                    d = d0 + o * insn.dst_factor_out + i * insn.dst_factor_in
                    s = s0 + o * insn.src_factor_out + i * insn.src_factor_in
                    w = w0 + o * insn.wgt_factor_out + i * insn.wgt_factor_in
                    for b in range(c.batch):
                        for n in range(c.block_out):
                            if insn.reset_reg:
                                self.acc[d][b][n] = 0
                                continue
                            total = self.acc[d][b][n]
                            for j in range(c.block_in):
                                total += self.inp[s][b][j] * self.wgt[w][n][j]
                            self.acc[d][b][n] = _signed(total, c.acc_width)

    def alu(self, insn: AluInsn) -> None:
        c = self.cfg
        bits = c.acc_width
        for o in range(insn.iter_out):
            for i in range(insn.iter_in):
                for k in range(insn.uop_bgn, insn.uop_end):
                    d0, s0, _ = self._uop(k)
                    d = d0 + o * insn.dst_factor_out + i * insn.dst_factor_in
                    s = s0 + o * insn.src_factor_out + i * insn.src_factor_in
                    for b in range(c.batch):
                        for n in range(c.block_out):
                            # reset_reg is ignored by the ALU (TVM's sim_driver.cc)
                            a = self.acc[d][b][n]
                            v = insn.imm if insn.use_imm else self.acc[s][b][n]
                            op = insn.alu_opcode
                            if op == 0:
                                r = min(a, v)
                            elif op == 1:
                                r = max(a, v)
                            elif op == 2:
                                r = a + v
                            elif op == 3:
                                # shifting left by >= the width leaves 0 after wrapping;
                                # cap it to keep the Python integer small
                                r = a >> v if v >= 0 else a << min(-v, bits)
                            else:
                                r = a * v
                            self.acc[d][b][n] = _signed(r, bits)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"uop": np.array(self.uop, np.uint32), "inp": np.array(self.inp),
                "wgt": np.array(self.wgt), "acc": np.array(self.acc)}


# ----------------------------------------------------------------------------- tests
import pytest  # noqa: E402
from vta.sim.fsim import FunctionalSim  # noqa: E402
from vta.sim.progen import random_program  # noqa: E402

CONFIGS = {
    "default": Config(),
    "small": Config.preset("small"),
    # batch 2, 16-bit inputs and accumulators (out width 16)
    "wide": Config(LOG_INP_WIDTH=4, LOG_WGT_WIDTH=3, LOG_ACC_WIDTH=4, LOG_BATCH=1, LOG_BLOCK=2,
                   LOG_UOP_BUFF_SIZE=10, LOG_INP_BUFF_SIZE=11, LOG_WGT_BUFF_SIZE=10,
                   LOG_ACC_BUFF_SIZE=11),
    # batch 4, 8x8 blocks
    "batch4": Config(LOG_BATCH=2, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=11, LOG_INP_BUFF_SIZE=12,
                     LOG_WGT_BUFF_SIZE=13, LOG_ACC_BUFF_SIZE=14),
}


def _compare(cfg: Config, program: bytes, dram: np.ndarray, **sim_opts) -> FunctionalSim:
    ref = RefMachine(cfg)
    ref_dram = bytearray(dram.tobytes())
    ref.run(program, ref_dram)
    sim = FunctionalSim(cfg, **sim_opts)
    out = dram.copy()
    sim.run(program, out)
    assert out.tobytes() == bytes(ref_dram), "DRAM differs from the reference interpreter"
    want = ref.arrays()
    for name in ("uop", "inp", "wgt", "acc"):
        got = getattr(sim, name)
        assert np.array_equal(got, want[name].reshape(got.shape)), f"{name} buffer differs"
    return sim


@pytest.mark.sim
@pytest.mark.parametrize("config", ["default", "small"])
@pytest.mark.parametrize("seed", range(10))
def test_fsim_matches_reference_on_random_programs(config: str, seed: int) -> None:
    cfg = CONFIGS[config]
    program, dram = random_program(cfg, seed, n_insns=40 if config == "default" else 60)
    _compare(cfg, program, dram)


@pytest.mark.sim
@pytest.mark.parametrize("config", ["wide", "batch4"])
@pytest.mark.parametrize("seed", range(4))
def test_fsim_matches_reference_on_other_configs(config: str, seed: int) -> None:
    cfg = CONFIGS[config]
    program, dram = random_program(cfg, 50 + seed, n_insns=40, dense_gemm_ratio=0.5)
    sim = _compare(cfg, program, dram)
    assert sim.acc.dtype.itemsize * 8 == cfg.acc_width


@pytest.mark.sim
@pytest.mark.parametrize("seed", range(4))
def test_fsim_general_path_matches_reference(small_cfg: Config, seed: int) -> None:
    program, dram = random_program(small_cfg, 100 + seed, n_insns=50, dense_gemm_ratio=0.6)
    _compare(small_cfg, program, dram, gemm_path="general")


@pytest.mark.sim
def test_fsim_random_programs_cover_every_kind(small_cfg: Config) -> None:
    """The generator really produces what the reference comparison is meant to cover."""
    from vta.isa import AluOp, decode_program

    seen: set[str] = set()
    for seed in range(12):
        program, _ = random_program(small_cfg, seed, n_insns=50)
        for insn in decode_program(program, small_cfg):
            if isinstance(insn, MemInsn):
                kind = f"{Opcode(insn.opcode).name} {MemType(insn.memory_type).name}"
                seen.add(kind)
                if insn.opcode == Opcode.LOAD and (insn.y_pad_0 or insn.x_pad_1):
                    seen.add("padding")
            elif isinstance(insn, AluInsn):
                seen.add(f"ALU {AluOp(insn.alu_opcode).name}{' imm' if insn.use_imm else ''}")
                if insn.use_imm and insn.imm < 0:
                    seen.add("negative imm")
            elif isinstance(insn, GemmInsn):
                seen.add("GEMM reset" if insn.reset_reg else "GEMM")
                if insn.iter_out > 1 and insn.iter_in > 1 and insn.uop_end - insn.uop_bgn > 1:
                    seen.add("GEMM both loops, several uops")
            if any(insn.deps):
                seen.add("tokens")
    want = {"LOAD UOP", "LOAD INP", "LOAD WGT", "LOAD ACC", "STORE OUT", "padding", "GEMM",
            "GEMM reset", "GEMM both loops, several uops", "negative imm", "tokens"}
    want |= {f"ALU {op.name}" for op in AluOp} | {f"ALU {op.name} imm" for op in AluOp}
    assert want <= seen, f"never generated: {sorted(want - seen)}"
