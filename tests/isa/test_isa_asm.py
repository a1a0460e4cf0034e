"""The assembler text format (docs/asm.md): syntax, defaults, flags, errors, warnings, the
disassembler's canonical form, JSON lines and micro-op files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from vta.isa import (
    AluInsn,
    AluOp,
    AsmError,
    Config,
    FinishInsn,
    GemmInsn,
    MemInsn,
    MemType,
    Opcode,
    Uop,
    encode,
    encode_program,
    encode_uops,
)
from vta.isa.asm import (
    MNEMONICS,
    assemble,
    assemble_bytes,
    assemble_uops,
    disassemble,
    disassemble_uops,
    from_jsonl,
    parse_number,
    to_jsonl,
)

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs" / "asm.md"


# ------------------------------------------------------------------------ syntax
def test_every_kind_with_defaults(cfg: Config) -> None:
    text = """
    load.uop
    load.wgt sram_base=1
    load.inp dram_base=2
    load.acc y_size=3
    store x_size=4
    store.acc x_stride=5
    gemm uop_end=6
    alu.min iter_in=7
    alu.max
    alu.add
    alu.shr
    alu.mul
    finish
    """
    assert assemble(text, cfg) == [
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP),
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.WGT, sram_base=1),
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, dram_base=2),
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.ACC, y_size=3),
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, x_size=4),
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.ACC, x_stride=5),
        GemmInsn(uop_end=6),
        AluInsn(alu_opcode=AluOp.MIN, iter_in=7),
        AluInsn(alu_opcode=AluOp.MAX),
        AluInsn(alu_opcode=AluOp.ADD),
        AluInsn(alu_opcode=AluOp.SHR),
        AluInsn(alu_opcode=AluOp.MUL),
        FinishInsn(),
    ]


def test_comments_blank_lines_case_spaces(cfg: Config) -> None:
    text = ("# a comment line\n"
            "\n"
            "   ; another\n"
            "LOAD.INP  SRAM_BASE = 0x10 Dram_Base=  0b101\tx_size =1_024 ; trailing\n"
            "Gemm Reset  # reset the accumulators\n"
            "finish#no space needed\n")
    assert assemble(text, cfg) == [
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, sram_base=16, dram_base=5,
                x_size=1024),
        GemmInsn(reset_reg=1),
        FinishInsn(),
    ]


def test_crlf_and_bom(cfg: Config) -> None:
    assert assemble("\ufeffgemm reset\r\nfinish\r\n", cfg) == [GemmInsn(reset_reg=1),
                                                                FinishInsn()]
    with pytest.raises(AsmError) as e:
        assemble("\ufefffinish\r\ngemm x=1\r\n", cfg)
    assert (e.value.line, e.value.col) == (2, 6)


@pytest.mark.parametrize("text,value", [
    ("42", 42), ("-3", -3), ("+7", 7), ("0x2a", 42), ("0X2A", 42), ("-0x10", -16),
    ("0b101", 5), ("0o17", 15), ("1_000", 1000), ("007", 7), ("0", 0),
])
def test_numbers(text: str, value: int) -> None:
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["0x", "1.5", "1e3", "x10", "--1", "0xg", "1__0", "_1", ""])
def test_not_numbers(text: str) -> None:
    assert parse_number(text) is None


def test_flags_in_every_form(cfg: Config) -> None:
    want = GemmInsn(pop_prev_dep=1, pop_next_dep=1, push_prev_dep=1, push_next_dep=1,
                    reset_reg=1)
    assert assemble("gemm pop_prev pop_next push_prev push_next reset", cfg) == [want]
    assert assemble("gemm pop_prev_dep pop_next_dep push_prev_dep push_next_dep reset_reg",
                    cfg) == [want]
    assert assemble("gemm pop_prev=1 pop_next_dep=1 push_prev=0x1 push_next=1 reset_reg=1",
                    cfg) == [want]
    assert assemble("gemm reset=0 pop_prev=0", cfg) == [GemmInsn()]
    assert assemble("alu.add use_imm imm=-1", cfg) == [
        AluInsn(alu_opcode=AluOp.ADD, use_imm=1, imm=-1)]


def test_explicit_enums_on_bare_mnemonics(cfg: Config) -> None:
    assert assemble("load memory_type=inp\nload memory_type=7\nstore memory_type=Acc\n"
                    "alu alu_opcode=shr\nalu alu_opcode=6", cfg) == [
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP),
        MemInsn(opcode=Opcode.LOAD, memory_type=7),
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.ACC),
        AluInsn(alu_opcode=AluOp.SHR),
        AluInsn(alu_opcode=6),
    ]


def test_field_limits_follow_the_config(cfg: Config, small_cfg: Config) -> None:
    # uop_bgn is log2(uop depth) bits: 13 at the default, 8 for the small preset
    assert assemble("gemm uop_bgn=8191", cfg) == [GemmInsn(uop_bgn=8191)]
    with pytest.raises(AsmError, match=r"uop_bgn=8191 does not fit its 8-bit field "
                                       r"\(range 0..255\)"):
        assemble("gemm uop_bgn=8191", small_cfg)
    assert assemble("alu.add use_imm imm=-32768\nalu.add use_imm imm=32767", cfg)[1].imm == 32767


# ------------------------------------------------------------------------ errors
def _err(text: str, cfg: Config, filename: str = "prog.s") -> AsmError:
    with pytest.raises(AsmError) as e:
        assemble(text, cfg, filename=filename)
    return e.value


@pytest.mark.parametrize("text,line,col,needles", [
    # unknown mnemonic, with a suggestion and the list
    ("finish\nlod.inp x_size=1", 2, 1, ["unknown mnemonic 'lod.inp'", "did you mean 'load.inp'",
                                        "load.wgt", "alu.shr", "finish"]),
    ("  jump", 1, 3, ["unknown mnemonic 'jump'", "expected one of"]),
    # a field the instruction does not have: names the instruction and its fields
    ("gemm uop_bgn=0 x_size=1", 1, 16, ["gemm has no field 'x_size'", "uop_bgn=",
                                        "wgt_factor_in="]),
    ("alu.add wgt_factor_in=1", 1, 9, ["alu.add has no field 'wgt_factor_in'", "use_imm"]),
    ("finish sram_base=0", 1, 8, ["finish has no field 'sram_base'", "pop_prev"]),
    ("gemm rest", 1, 6, ["no field 'rest'", "did you mean 'reset'"]),
    # bad numbers: column of the value
    ("load.inp sram_base=0x1g", 1, 20, ["bad value '0x1g' for sram_base", "expected a number"]),
    ("load.inp sram_base=1.5", 1, 20, ["bad value '1.5'"]),
    ("gemm iter_in=ten", 1, 14, ["bad value 'ten' for iter_in"]),
    # out of range: names field, width, value
    ("load.inp sram_base=70000", 1, 20, ["sram_base=70000", "16-bit field", "0..65535"]),
    ("load.inp dram_base=-1", 1, 20, ["dram_base=-1", "32-bit field"]),
    ("load.inp y_pad_0=16", 1, 18, ["y_pad_0=16", "4-bit field", "0..15"]),
    ("alu.add use_imm imm=40000", 1, 21, ["imm=40000", "16-bit signed field",
                                          "-32768..32767"]),
    ("alu.add imm=0xffff", 1, 13, ["imm=65535", "16-bit signed field"]),
    ("gemm iter_out=16384", 1, 15, ["iter_out=16384", "14-bit field"]),
    ("gemm reset=2", 1, 12, ["reset_reg=2", "1-bit field"]),
    # duplicates, including a flag and its field name
    ("load.inp sram_base=1 sram_base=2", 1, 22, ["sram_base is given twice",
                                                 "first at column 10"]),
    ("gemm reset reset_reg=1", 1, 12, ["reset_reg is given twice", "first at column 6"]),
    ("finish push_next push_next", 1, 18, ["push_next_dep is given twice"]),
    # values where none/one is expected
    ("gemm uop_bgn", 1, 13, ["uop_bgn needs a value: write uop_bgn=N"]),
    ("gemm uop_bgn=", 1, 14, ["expected a value after 'uop_bgn='", "end of the line"]),
    ("gemm uop_bgn= # c", 1, 15, ["expected a value after 'uop_bgn='"]),
    ("gemm iter_in=1=2", 1, 15, ["expected a field (name=value) or a flag word", "'=2'"]),
    # memory type and ALU operation
    ("load x_size=1", 1, 1, ["load needs memory_type=", "load.inp"]),
    ("alu use_imm", 1, 1, ["alu needs alu_opcode=", "alu.add"]),
    ("load.inp memory_type=inp", 1, 10, ["memory_type is already set by the mnemonic "
                                         "'load.inp'"]),
    ("alu.mul alu_opcode=4", 1, 9, ["alu_opcode is already set"]),
    ("load memory_type=foo", 1, 18, ["bad memory_type 'foo'", "uop, wgt, inp, acc, out",
                                     "0..7"]),
    ("load memory_type=8", 1, 18, ["memory_type=8", "3-bit field"]),
    ("alu alu_opcode=sub", 1, 16, ["bad alu_opcode 'sub'", "min, max, add, shr, mul"]),
    # lexical
    ("load.inp, x_size=1", 1, 9, ["expected a space after the mnemonic 'load.inp'"]),
    ("=5", 1, 1, ["expected a mnemonic"]),
    ("gemm uop_bgn:1", 1, 13, ["expected '=' or a space after 'uop_bgn'"]),
    ("gemm 5", 1, 6, ["expected a field (name=value) or a flag word, found '5'"]),
    # a micro-op line in a program
    ("uop dst_idx=1", 1, 1, ["'uop' lines belong in a micro-op file"]),
])
def test_errors_have_position_and_say_what_was_expected(cfg: Config, text: str, line: int,
                                                        col: int, needles: list[str]) -> None:
    e = _err(text, cfg)
    assert (e.file, e.line, e.col) == ("prog.s", line, col)
    msg = str(e)
    assert msg.startswith(f"prog.s:{line}:{col}: ") and "\n" not in msg
    for n in needles:
        assert n in e.reason, (n, e.reason)


def test_error_on_a_later_line_after_valid_ones(cfg: Config) -> None:
    text = "# header\nload.inp x_size=1\n\n   gemm uop_end=1 bogus=3\nfinish\n"
    e = _err(text, cfg, filename="k.s")
    assert str(e).startswith("k.s:4:19: gemm has no field 'bogus'")


def test_mnemonic_list_is_complete() -> None:
    for m in ("load.inp", "load.wgt", "load.uop", "load.acc", "store", "gemm", "alu.min",
              "alu.max", "alu.add", "alu.shr", "alu.mul", "finish"):
        assert m in MNEMONICS


# ------------------------------------------------------------------------ warnings
def test_missing_finish_is_only_a_warning(cfg: Config) -> None:
    warnings: list[str] = []
    insns = assemble("load.inp x_size=1\n", cfg, filename="a.s", warn=warnings.append)
    assert len(insns) == 1
    assert warnings == ["a.s:1: the program does not end with finish (vta sim needs one)"]
    assert assemble("load.inp x_size=1\n", cfg) == insns  # no callback: silent


def test_other_warnings(cfg: Config) -> None:
    warnings: list[str] = []
    text = ("load.inp pop_prev\n"          # the load module has no previous module
            "store push_next\n"            # the store module has no next module
            "alu.add imm=3\n"              # imm without use_imm
            "gemm pop_prev pop_next push_prev push_next\n"   # compute: all four are fine
            "finish\n"
            "finish\n")                    # after finish
    assemble(text, cfg, filename="w.s", warn=warnings.append)
    assert len(warnings) == 4, warnings
    assert warnings[0].startswith("w.s:1: pop_prev on load.inp")
    assert warnings[1].startswith("w.s:2: push_next on store")
    assert warnings[2].startswith("w.s:3: alu.add has imm=3 but no use_imm")
    assert warnings[3].startswith("w.s:5: FINISH is followed by 1 more")


# ------------------------------------------------------------------------ disassembler
def test_canonical_disassembly(cfg: Config) -> None:
    """The documented canonical form: main fields always, others when non-zero, flags last."""
    insns = [
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.WGT, dram_base=4, y_size=1, x_size=16,
                x_stride=16, x_pad_1=3, push_next_dep=1),
        GemmInsn(reset_reg=1, uop_end=1, iter_out=1, iter_in=1, pop_prev_dep=1),
        AluInsn(alu_opcode=AluOp.SHR, uop_end=1, iter_out=1, iter_in=1, use_imm=1, imm=0,
                dst_factor_in=1),
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, dram_base=32, pop_prev_dep=1),
        MemInsn(opcode=Opcode.LOAD, memory_type=6),
        AluInsn(alu_opcode=7),
        FinishInsn(pop_next_dep=1),
    ]
    want = (
        "load.wgt  sram_base=0 dram_base=4 y_size=1 x_size=16 x_stride=16 x_pad_1=3 push_next\n"
        "gemm      reset uop_bgn=0 uop_end=1 iter_out=1 iter_in=1 pop_prev\n"
        "alu.shr   uop_bgn=0 uop_end=1 iter_out=1 iter_in=1 dst_factor_in=1 use_imm imm=0\n"
        "store     sram_base=0 dram_base=32 y_size=0 x_size=0 x_stride=0 pop_prev\n"
        "load      memory_type=6 sram_base=0 dram_base=0 y_size=0 x_size=0 x_stride=0\n"
        "alu       uop_bgn=0 uop_end=0 iter_out=0 iter_in=0 alu_opcode=7\n"
        "finish    pop_next\n")
    assert disassemble(insns, cfg) == want
    assert disassemble(encode_program(insns, cfg), cfg) == want
    indexed = disassemble(insns, cfg, index=True).splitlines()
    assert [re.search(r"# (\d+)$", s).group(1) for s in indexed] == [str(i) for i in range(7)]


def test_reserved_bits_are_noted(cfg: Config) -> None:
    good = encode(FinishInsn(), cfg)
    bad = (int.from_bytes(good, "little") | 1 << 100).to_bytes(16, "little")
    text = disassemble(good + bad, cfg)
    assert "reserved bits 0x10000000000000000000000000 set" in text.splitlines()[1]
    assert assemble_bytes(text, cfg) == good + good


def test_docs_example_assembles(cfg: Config) -> None:
    doc = DOCS.read_text()
    block = re.search(r"```\w*\n(# C\[1x16\].*?)```", doc, re.S).group(1)
    warnings: list[str] = []
    data = assemble_bytes(block, cfg, filename="asm.md", warn=warnings.append)
    assert warnings == []
    assert len(data) == 8 * 16
    # store: opcode 1, pop_prev, push_prev, memory_type OUT, dram_base 32, y/x size 1, stride 1
    store = 1 | 1 << 3 | 1 << 5 | 4 << 7 | 32 << 26 | 1 << 64 | 1 << 80 | 1 << 96
    assert data[6 * 16:7 * 16] == store.to_bytes(16, "little")
    assert assemble_bytes(disassemble(data, cfg), cfg) == data


# ------------------------------------------------------------------------ JSON lines
def test_jsonl_uses_tvm_names(cfg: Config) -> None:
    insns = assemble("load.inp dram_base=64 x_size=16 push_next\nalu.shr use_imm imm=-2\n"
                     "load memory_type=5\nfinish", cfg)
    objs = [json.loads(s) for s in to_jsonl(insns, cfg).splitlines()]
    assert objs[0] == {"opcode": "LOAD", "pop_prev_dep": 0, "pop_next_dep": 0,
                       "push_prev_dep": 0, "push_next_dep": 1, "memory_type": "INP",
                       "sram_base": 0, "dram_base": 64, "y_size": 0, "x_size": 16,
                       "x_stride": 0, "y_pad_0": 0, "y_pad_1": 0, "x_pad_0": 0, "x_pad_1": 0}
    assert objs[1]["opcode"] == "ALU" and objs[1]["alu_opcode"] == "SHR"
    assert objs[1]["imm"] == -2 and objs[1]["use_imm"] == 1
    assert objs[2]["memory_type"] == 5
    assert objs[3] == {"opcode": "FINISH", "pop_prev_dep": 0, "pop_next_dep": 0,
                       "push_prev_dep": 0, "push_next_dep": 0}
    assert from_jsonl(to_jsonl(insns, cfg), cfg) == insns


def test_jsonl_accepts_numbers_and_defaults(cfg: Config) -> None:
    text = '{"opcode": 1, "memory_type": 4, "x_size": 2}\n\n{"opcode": "gemm", "reset_reg": 1}\n'
    assert from_jsonl(text, cfg) == [
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, x_size=2), GemmInsn(reset_reg=1)]


@pytest.mark.parametrize("text,line,col,needle", [
    ('{"opcode": "FINISH"}\n{"opcode": "LOAD",}', 2, 19, "not valid JSON"),
    ('[1, 2]', 1, 1, "expected a JSON object per line, got list"),
    ('{"x_size": 1}', 1, 1, 'missing "opcode"'),
    ('{"opcode": "JUMP"}', 1, 2, "bad opcode 'JUMP'"),
    ('{"opcode": 6}', 1, 2, "bad opcode 6"),
    ('{"opcode": "GEMM", "x_size": 1}', 1, 20, "GEMM has no field 'x_size'"),
    ('{"opcode": "LOAD", "sram_base": 65536}', 1, 20, "sram_base=65536 does not fit its 16-bit"),
    ('{"opcode": "LOAD", "sram_base": "5"}', 1, 20, "sram_base must be an integer, not '5'"),
    ('{"opcode": "LOAD", "memory_type": "XYZ"}', 1, 20, "bad memory_type 'XYZ'"),
])
def test_jsonl_errors(cfg: Config, text: str, line: int, col: int, needle: str) -> None:
    with pytest.raises(AsmError) as e:
        from_jsonl(text, cfg, filename="p.jsonl")
    assert (e.value.file, e.value.line, e.value.col) == ("p.jsonl", line, col)
    assert needle in e.value.reason


# ------------------------------------------------------------------------ micro-ops
def test_uop_text(cfg: Config, small_cfg: Config) -> None:
    text = "# two micro-ops\nuop dst_idx=1 src_idx=0x20 wgt_idx=3\nUOP\n"
    assert assemble_uops(text, cfg) == [Uop(1, 32, 3), Uop(0, 0, 0)]
    data = encode_uops([Uop(1, 32, 3), Uop(0, 0, 0)], cfg)
    assert data[:4] == (1 | 32 << 11 | 3 << 22).to_bytes(4, "little")
    assert disassemble_uops(data, cfg) == (
        "uop dst_idx=1 src_idx=32 wgt_idx=3\nuop dst_idx=0 src_idx=0 wgt_idx=0\n")
    with pytest.raises(AsmError, match=r"u\.s:1:13: dst_idx=128 does not fit its 7-bit"):
        assemble_uops("uop dst_idx=128", small_cfg, filename="u.s")
    with pytest.raises(AsmError, match=r"1:1: expected 'uop', found 'gemm' \(instructions "):
        assemble_uops("gemm", cfg)
    with pytest.raises(AsmError, match=r"1:5: uop has no field 'dst'; did you mean 'dst_idx'"):
        assemble_uops("uop dst=1", cfg)
