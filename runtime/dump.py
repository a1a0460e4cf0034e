"""Instruction and micro-op dumps: the ISA's disassembler (vta.isa.asm)."""

from __future__ import annotations

from vta.isa import Config
from vta.isa.asm import disassemble, disassemble_uops
from vta.isa.layout import INSN_BYTES


def dump_insns(program: bytes, cfg: Config) -> str:
    """Assembler text of an instruction stream, one numbered line per instruction."""
    if not program:
        return ""
    return disassemble(program, cfg, index=True)


def dump_uops(data: bytes, cfg: Config) -> str:
    """Text of a micro-op buffer image (4 bytes per micro-op)."""
    return disassemble_uops(data, cfg, index=True)


def count_insns(program: bytes) -> int:
    return len(program) // INSN_BYTES


__all__ = ["dump_insns", "dump_uops"]
