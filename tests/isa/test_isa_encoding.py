"""Encode/decode against the bit positions documented in ARCHITECTURE.md.

Every expected word here is built by hand from the documented bit ranges (``value << lsb``), not
from ``vta.isa.layout``, so a wrong layout table cannot agree with itself.
"""

from __future__ import annotations

import pytest
from vta.isa import (
    AluInsn,
    AluOp,
    Config,
    DecodeError,
    EncodeError,
    FinishInsn,
    GemmInsn,
    MemInsn,
    MemType,
    Opcode,
    Uop,
    decode,
    decode_program,
    decode_uop,
    encode,
    encode_program,
    encode_uop,
    encode_uops,
)
from vta.isa.asm import assemble_bytes

pytestmark = pytest.mark.unit

# Default-config bit ranges from ARCHITECTURE.md, as (msb, lsb).
COMMON = {"pop_prev_dep": (3, 3), "pop_next_dep": (4, 4), "push_prev_dep": (5, 5),
          "push_next_dep": (6, 6)}
MEM = {**COMMON, "memory_type": (9, 7), "sram_base": (25, 10), "dram_base": (57, 26),
       "y_size": (79, 64), "x_size": (95, 80), "x_stride": (111, 96), "y_pad_0": (115, 112),
       "y_pad_1": (119, 116), "x_pad_0": (123, 120), "x_pad_1": (127, 124)}
LOOP = {**COMMON, "reset_reg": (7, 7), "uop_bgn": (20, 8), "uop_end": (34, 21),
        "iter_out": (48, 35), "iter_in": (62, 49), "dst_factor_out": (74, 64),
        "dst_factor_in": (85, 75)}
GEMM = {**LOOP, "src_factor_out": (96, 86), "src_factor_in": (107, 97),
        "wgt_factor_out": (117, 108), "wgt_factor_in": (127, 118)}
ALU = {**LOOP, "src_factor_out": (96, 86), "src_factor_in": (107, 97),
       "alu_opcode": (110, 108), "use_imm": (111, 111), "imm": (127, 112)}
UOP = {"dst_idx": (10, 0), "src_idx": (21, 11), "wgt_idx": (31, 22)}


def ones(msb: int, lsb: int) -> int:
    """All ones in bits msb..lsb."""
    return ((1 << (msb - lsb + 1)) - 1) << lsb


def make(kind: str, **vals: int):
    if kind in ("load", "store"):
        op = Opcode.LOAD if kind == "load" else Opcode.STORE
        return MemInsn(opcode=op, **vals)
    return {"gemm": GemmInsn, "alu": AluInsn, "finish": FinishInsn}[kind](**vals)


OPCODE = {"load": 0, "store": 1, "gemm": 2, "finish": 3, "alu": 4}
TABLES = {"load": MEM, "store": MEM, "gemm": GEMM, "alu": ALU, "finish": COMMON}


@pytest.mark.parametrize("kind,name,msb,lsb", [
    (k, n, msb, lsb) for k, t in TABLES.items() for n, (msb, lsb) in t.items()])
def test_each_field_at_its_documented_bits(cfg: Config, kind: str, name: str,
                                           msb: int, lsb: int) -> None:
    """A field at its maximum lands exactly on its documented bits (position and width)."""
    width = msb - lsb + 1
    value = -1 if name == "imm" else (1 << width) - 1  # imm is signed: all ones is -1
    vals = {name: value}
    if kind == "alu" and name != "alu_opcode":
        vals["alu_opcode"] = 0
    if kind in ("load", "store") and name != "memory_type":
        vals["memory_type"] = 0
    word = OPCODE[kind] | ones(msb, lsb)
    data = encode(make(kind, **vals), cfg)
    assert data == word.to_bytes(16, "little")
    back = decode(word.to_bytes(16, "little"), cfg)
    assert getattr(back, name) == value


def test_load_with_distinct_values(cfg: Config) -> None:
    vals = dict(memory_type=2, sram_base=0x1234, dram_base=0xDEADBEEF, y_size=7, x_size=0x1F0,
                x_stride=0x8001, y_pad_0=1, y_pad_1=2, x_pad_0=3, x_pad_1=15,
                pop_next_dep=1, push_next_dep=1)
    word = (0 | 1 << 4 | 1 << 6 | 2 << 7 | 0x1234 << 10 | 0xDEADBEEF << 26 | 7 << 64
            | 0x1F0 << 80 | 0x8001 << 96 | 1 << 112 | 2 << 116 | 3 << 120 | 15 << 124)
    insn = MemInsn(opcode=Opcode.LOAD, **vals)
    assert encode(insn, cfg) == word.to_bytes(16, "little")
    assert decode(word.to_bytes(16, "little"), cfg) == insn
    text = ("load.inp sram_base=0x1234 dram_base=0xDEADBEEF y_size=7 x_size=0x1f0 "
            "x_stride=0x8001 y_pad_0=1 y_pad_1=2 x_pad_0=3 x_pad_1=15 pop_next push_next")
    assert assemble_bytes(text, cfg) == word.to_bytes(16, "little")


def test_store_gemm_alu_finish_with_distinct_values(cfg: Config) -> None:
    store = 1 | 1 << 3 | 1 << 5 | 4 << 7 | 5 << 10 | 100 << 26 | 1 << 64 | 16 << 80 | 16 << 96
    gemm = (2 | 1 << 3 | 1 << 7 | 3 << 8 | 9 << 21 | 4 << 35 | 5 << 49 | 6 << 64 | 7 << 75
            | 8 << 86 | 9 << 97 | 10 << 108 | 11 << 118)
    alu = (4 | 1 << 6 | 2 << 8 | 3 << 21 | 1 << 35 | 2 << 49 | 1 << 64 | 2 << 75 | 3 << 86
           | 4 << 97 | 3 << 108 | 1 << 111 | (-3 & 0xFFFF) << 112)
    finish = 3 | 1 << 4
    want = b"".join(w.to_bytes(16, "little") for w in (store, gemm, alu, finish))
    insns = [
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, sram_base=5, dram_base=100,
                y_size=1, x_size=16, x_stride=16, pop_prev_dep=1, push_prev_dep=1),
        GemmInsn(pop_prev_dep=1, reset_reg=1, uop_bgn=3, uop_end=9, iter_out=4, iter_in=5,
                 dst_factor_out=6, dst_factor_in=7, src_factor_out=8, src_factor_in=9,
                 wgt_factor_out=10, wgt_factor_in=11),
        AluInsn(push_next_dep=1, uop_bgn=2, uop_end=3, iter_out=1, iter_in=2, dst_factor_out=1,
                dst_factor_in=2, src_factor_out=3, src_factor_in=4, alu_opcode=AluOp.SHR,
                use_imm=1, imm=-3),
        FinishInsn(pop_next_dep=1),
    ]
    assert encode_program(insns, cfg) == want
    assert decode_program(want, cfg) == insns
    text = """
        store pop_prev push_prev sram_base=5 dram_base=100 y_size=1 x_size=16 x_stride=16
        gemm pop_prev reset uop_bgn=3 uop_end=9 iter_out=4 iter_in=5 dst_factor_out=6
             dst_factor_in=7 src_factor_out=8 src_factor_in=9 wgt_factor_out=10 wgt_factor_in=11
        alu.shr push_next uop_bgn=2 uop_end=3 iter_out=1 iter_in=2 dst_factor_out=1
             dst_factor_in=2 src_factor_out=3 src_factor_in=4 use_imm imm=-3
        finish pop_next
    """.replace("\n             ", " ")
    assert assemble_bytes(text, cfg) == want


def test_bytes_are_little_endian(cfg: Config) -> None:
    data = encode(MemInsn(opcode=Opcode.STORE, x_stride=0xABCD), cfg)
    assert data[0] == 0x01            # opcode in the low bits of byte 0
    assert data[12:14] == b"\xcd\xab"  # x_stride at bits 96..111 = bytes 12..13, LSB first
    assert data[14:] == b"\x00\x00"


def test_uop_bits(cfg: Config) -> None:
    for name, (msb, lsb) in UOP.items():
        value = (1 << (msb - lsb + 1)) - 1
        assert encode_uop(Uop(**{name: value}), cfg) == ones(msb, lsb)
        assert getattr(decode_uop(ones(msb, lsb), cfg), name) == value
    word = 5 | 700 << 11 | 1000 << 22
    assert encode_uop(Uop(5, 700, 1000), cfg) == word
    assert decode_uop(word, cfg) == Uop(5, 700, 1000)
    assert encode_uops([Uop(5, 700, 1000), Uop(1, 0, 0)], cfg) == (
        word.to_bytes(4, "little") + b"\x01\x00\x00\x00")


def test_small_preset_gemm_positions(small_cfg: Config) -> None:
    """The 64-bit straddle rule with other widths, computed by hand for the small preset.

    Small: uop depth 2^8, inp 2^8, wgt 2^6, acc 2^7. GEMM after the 7-bit prefix: reset [7],
    uop_bgn 8 bits [15:8], uop_end 9 [24:16], iter_out [38:25], iter_in [52:39],
    dst_factor_out 7 [59:53], dst_factor_in 7 would span 60..66, so it starts at 64 [70:64],
    src_factor_out 8 [78:71], src_factor_in [86:79], wgt_factor_out 6 [92:87], wgt_factor_in
    [98:93]. Micro-op: dst 7 [6:0], src max(7, 8) = 8 [14:7], wgt 6 [20:15].
    """
    pos = {"reset_reg": (7, 7), "uop_bgn": (15, 8), "uop_end": (24, 16), "iter_out": (38, 25),
           "iter_in": (52, 39), "dst_factor_out": (59, 53), "dst_factor_in": (70, 64),
           "src_factor_out": (78, 71), "src_factor_in": (86, 79),
           "wgt_factor_out": (92, 87), "wgt_factor_in": (98, 93)}
    for name, (msb, lsb) in pos.items():
        value = (1 << (msb - lsb + 1)) - 1
        assert encode(GemmInsn(**{name: value}), small_cfg) == (
            2 | ones(msb, lsb)).to_bytes(16, "little"), name
    with pytest.raises(EncodeError, match=r"dst_factor_in=128 does not fit its 7-bit field"):
        encode(GemmInsn(dst_factor_in=128), small_cfg)
    assert encode_uop(Uop(127, 255, 63), small_cfg) == ones(20, 0)
    assert encode_uop(Uop(0, 255, 0), small_cfg) == ones(14, 7)


@pytest.mark.parametrize("insn,field,width,value", [
    (MemInsn(sram_base=1 << 16), "sram_base", 16, 1 << 16),
    (MemInsn(dram_base=-1), "dram_base", 32, -1),
    (MemInsn(x_pad_1=16), "x_pad_1", 4, 16),
    (GemmInsn(uop_bgn=1 << 13), "uop_bgn", 13, 1 << 13),
    (GemmInsn(iter_in=1 << 14), "iter_in", 14, 1 << 14),
    (AluInsn(imm=32768), "imm", 16, 32768),
    (AluInsn(imm=-32769), "imm", 16, -32769),
    (FinishInsn(pop_prev_dep=2), "pop_prev_dep", 1, 2),
])
def test_out_of_range_names_field_width_value(cfg: Config, insn, field: str, width: int,
                                              value: int) -> None:
    with pytest.raises(EncodeError) as e:
        encode(insn, cfg)
    msg = str(e.value)
    assert f"{field}={value}" in msg and f"{width}-bit" in msg


def test_encode_program_names_the_instruction(cfg: Config) -> None:
    with pytest.raises(EncodeError, match=r"instruction 1: .*x_size=65536"):
        encode_program([FinishInsn(), MemInsn(x_size=65536)], cfg)


def test_decode_errors(cfg: Config) -> None:
    with pytest.raises(DecodeError, match="invalid opcode 5"):
        decode((5).to_bytes(16, "little"), cfg)
    with pytest.raises(DecodeError, match="instruction 1: invalid opcode 7"):
        decode_program(bytes(16) + (7).to_bytes(16, "little"), cfg)
    with pytest.raises(DecodeError, match="multiple of 16 bytes, got 17"):
        decode_program(bytes(17), cfg)
    with pytest.raises(DecodeError, match="16 bytes, got 15"):
        decode(bytes(15), cfg)
