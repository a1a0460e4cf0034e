"""The static checks of a program every backend runs before it starts (fsim, rtl, tsim, perf).

:func:`check_insns` rejects, with a :class:`~vta.isa.errors.ProgramError` naming the instruction,
the field and the buffer, what no backend may run: a LOAD/STORE whose SRAM range is beyond its
buffer or whose DRAM range is beyond the DRAM image, a bad memory_type or alu_opcode, a micro-op
range beyond the micro-op buffer, a dependency flag the module does not have, FINISH anywhere but
last. One function, so that every backend rejects exactly the same programs with the same message
(docs/fsim.md, "Checks").
"""

from __future__ import annotations

from collections.abc import Sequence

from .config import Config
from .deps import DEP_FLAGS, MODULE_QUEUES
from .errors import ProgramError
from .insn import (
    COMPUTE_MODULE,
    LOAD_MEM_TYPES,
    LOAD_MODULE,
    STORE_MODULE,
    AluInsn,
    FinishInsn,
    GemmInsn,
    Insn,
    MemInsn,
)
from .layout import AluOp, MemType, Opcode

#: module -> {dependency flag: token queue "<from>-><to>"}; a flag missing here is invalid there.
DEP_QUEUES = {m: {f: q.name for f, q in qs.items()} for m, qs in MODULE_QUEUES.items()}

SRAM_NAMES = {MemType.UOP: "uop", MemType.WGT: "wgt", MemType.INP: "inp", MemType.ACC: "acc",
              MemType.OUT: "acc"}


def insn_name(insn: Insn) -> str:
    """A short disassembly-like name: ``LOAD INP``, ``GEMM``, ``ALU ADD``, ``STORE``, ``FINISH``."""
    if isinstance(insn, MemInsn):
        op = "STORE" if insn.opcode == Opcode.STORE else "LOAD"
        mt = MemType(insn.memory_type).name if insn.memory_type in MemType._value2member_map_ \
            else f"memory_type={insn.memory_type}"
        return f"{op} {mt}"
    if isinstance(insn, AluInsn):
        op = AluOp(insn.alu_opcode).name if insn.alu_opcode in AluOp._value2member_map_ \
            else f"alu_opcode={insn.alu_opcode}"
        return f"ALU {op}"
    if isinstance(insn, GemmInsn):
        return "GEMM"
    return "FINISH"


class Where:
    """"instruction N (NAME)", formatted only when an error message needs it."""

    __slots__ = ("n", "insn")

    def __init__(self, n: int, insn: Insn) -> None:
        self.n, self.insn = n, insn

    def __format__(self, spec: str) -> str:
        return f"instruction {self.n} ({insn_name(self.insn)})"


#: Default bound on the micro-op iterations of one GEMM or ALU instruction
#: (``iter_out * iter_in * (uop_end - uop_bgn)``), the same on every backend: fsim builds index
#: arrays of that length (about 100 bytes per micro-op with its plans), so it keeps one instruction
#: below ~0.5 GiB there, and on the cycle-level backends it is a few million cycles. The largest
#: instruction the compiler emits is far smaller (its tiles fit the on-chip buffers).
MAX_UOPS_PER_INSN = 1 << 22


def check_work(insns: Sequence[Insn], max_uops: int = MAX_UOPS_PER_INSN,
               backend: str = "the simulator") -> None:
    """Reject, before anything runs, a GEMM or ALU instruction with more than ``max_uops``
    micro-op iterations, naming it and the bound (``backend`` says whose bound it is)."""
    if max_uops < 1:
        raise ProgramError(f"max_uops must be at least 1, not {max_uops}")
    for n, insn in enumerate(insns):
        if isinstance(insn, GemmInsn | AluInsn):
            uops = max(insn.uop_end - insn.uop_bgn, 0) * insn.iter_out * insn.iter_in
            if uops > max_uops:
                raise ProgramError(
                    f"{Where(n, insn)}: iter_out={insn.iter_out} x iter_in={insn.iter_in} x "
                    f"{insn.uop_end - insn.uop_bgn} micro-ops = {uops} micro-op iterations, "
                    f"beyond {backend}'s bound of {max_uops} per instruction (option "
                    f"max_uops); split the loop into several instructions")


def check_insns(insns: Sequence[Insn], cfg: Config, dram_bytes: int,
                dram_start: int = 0) -> list[str]:
    """Check every instruction against ``cfg`` and a ``dram_bytes``-byte DRAM image; returns the
    module that executes each one. Raises :class:`ProgramError` for the first bad one.
    ``dram_start`` > 0 (a board device, whose arena sits at a physical address): only bytes
    ``dram_start .. dram_bytes - 1`` are the program's, the memory below is someone else's."""
    count = len(insns)
    return [check_insn(n, insn, cfg, count, dram_bytes, dram_start)
            for n, insn in enumerate(insns)]


def check_insn(n: int, insn: Insn, cfg: Config, count: int, dram_bytes: int,
               dram_start: int = 0) -> str:
    """Static checks of instruction ``n`` of ``count``; returns the module that executes it."""
    where = Where(n, insn)
    if isinstance(insn, FinishInsn):
        if n != count - 1:
            raise ProgramError(f"{where}: FINISH must be the last instruction (of {count})")
        module = COMPUTE_MODULE
    elif isinstance(insn, MemInsn):
        module = _check_mem(where, insn, cfg, dram_bytes, dram_start)
    else:
        module = COMPUTE_MODULE
        if insn.uop_end < insn.uop_bgn:
            raise ProgramError(f"{where}: uop_end={insn.uop_end} is below "
                               f"uop_bgn={insn.uop_bgn}")
        if insn.uop_end > cfg.uop_depth:
            raise ProgramError(f"{where}: uop_end={insn.uop_end} is beyond the uop buffer "
                               f"(depth {cfg.uop_depth})")
        if isinstance(insn, AluInsn) and insn.alu_opcode not in AluOp._value2member_map_:
            raise ProgramError(f"{where}: invalid alu_opcode {insn.alu_opcode} (valid: "
                               f"{', '.join(f'{o.name}={o.value}' for o in AluOp)})")
    allowed = DEP_QUEUES[module]
    for flag in DEP_FLAGS:
        if getattr(insn, flag) and flag not in allowed:
            other = "previous" if "prev" in flag else "next"
            raise ProgramError(f"{where}: sets {flag} but the {module} module has no "
                               f"{other} module (valid flags for {module}: "
                               f"{', '.join(allowed)})")
    return module


def _check_mem(where: Where, insn: MemInsn, cfg: Config, dram_bytes: int,
               dram_start: int) -> str:
    mt = insn.memory_type
    if insn.opcode == Opcode.STORE:
        if mt != MemType.OUT:
            raise ProgramError(f"{where}: STORE needs memory_type OUT (4), not {mt}")
        module = STORE_MODULE
    else:
        if mt not in (MemType.UOP, MemType.WGT, MemType.INP, MemType.ACC):
            hint = (" (TVM's memory type 5, an 8-bit accumulator load, is not supported: load "
                    "ACC)" if mt == 5 else "")
            raise ProgramError(f"{where}: LOAD needs memory_type UOP, WGT, INP or ACC "
                               f"(0-3), not {mt}{hint}")
        module = LOAD_MODULE if mt in LOAD_MEM_TYPES else COMPUTE_MODULE
    if insn.x_size == 0:
        return module  # a no-op that only moves tokens
    mt = MemType(mt)
    buf, depth = SRAM_NAMES[mt], cfg.depth(mt)
    if insn.opcode == Opcode.STORE:
        entries = insn.y_size * insn.x_size
    else:
        entries = ((insn.y_pad_0 + insn.y_size + insn.y_pad_1)
                   * (insn.x_pad_0 + insn.x_size + insn.x_pad_1))
    if entries and insn.sram_base + entries > depth:
        raise ProgramError(
            f"{where}: sram_base={insn.sram_base} + {entries} entries reaches {buf} index "
            f"{insn.sram_base + entries - 1}, beyond the {buf} buffer (depth {depth})")
    if insn.y_size:
        eb = cfg.elem_bytes(mt)
        first = insn.dram_base * eb
        end = (insn.dram_base + (insn.y_size - 1) * insn.x_stride + insn.x_size) * eb
        if end > dram_bytes or first < dram_start:
            image = (f"beyond the {dram_bytes}-byte DRAM image" if not dram_start else
                     f"outside the device's DRAM arena {dram_start:#x}..{dram_bytes - 1:#x}")
            raise ProgramError(
                f"{where}: DRAM bytes {first:#x}..{end - 1:#x} (dram_base={insn.dram_base}, "
                f"y_size={insn.y_size}, x_size={insn.x_size}, x_stride={insn.x_stride}, "
                f"{eb}-byte elements) are {image}")
    return module


__all__ = ["MAX_UOPS_PER_INSN", "check_work", "check_insns", "check_insn", "insn_name", "Where",
           "DEP_QUEUES", "SRAM_NAMES"]
