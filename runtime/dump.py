"""Instruction and micro-op dumps: the ISA's disassembler (vta.isa.asm) with a plain fallback."""

from __future__ import annotations

import numpy as np
from vta.isa import Config, decode_program, uop_fields
from vta.isa.layout import INSN_BYTES


def dump_insns(program: bytes, cfg: Config) -> str:
    """Assembler text of an instruction stream, one numbered line per instruction."""
    if not program:
        return ""
    try:
        from vta.isa.asm import disassemble
    except ImportError:  # pragma: no cover - the assembler ships with vta.isa
        return _fallback_insns(program, cfg)
    return disassemble(program, cfg, index=True)


def _fallback_insns(program: bytes, cfg: Config) -> str:
    lines = []
    for n, insn in enumerate(decode_program(program, cfg)):
        fields = " ".join(f"{k}={v}" for k, v in insn.to_dict().items() if k != "opcode" and v)
        lines.append(f"{n:5d}  {insn.to_dict()['opcode']:<7} {fields}")
    return "\n".join(lines) + "\n"


def dump_uops(data: bytes, cfg: Config) -> str:
    """Text of a micro-op buffer image (4 bytes per micro-op)."""
    try:
        from vta.isa.asm import disassemble_uops
    except ImportError:  # pragma: no cover
        dst, src, wgt = uop_fields(np.frombuffer(data, dtype="<u4"), cfg)
        return "".join(f"uop dst_idx={d} src_idx={s} wgt_idx={w}\n"
                       for d, s, w in zip(dst.tolist(), src.tolist(), wgt.tolist()))
    return disassemble_uops(data, cfg, index=True)


def count_insns(program: bytes) -> int:
    return len(program) // INSN_BYTES


__all__ = ["dump_insns", "dump_uops"]
