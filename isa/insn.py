"""Instruction and micro-op objects with TVM's field names, and their binary encoding.

>>> from vta.isa import Config, MemInsn, Opcode, MemType, encode, decode
>>> cfg = Config()
>>> i = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, sram_base=0, dram_base=64,
...             y_size=1, x_size=4, x_stride=4)
>>> decode(encode(i, cfg), cfg) == i
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import ClassVar

import numpy as np

from .config import Config
from .deps import COMPUTE_MODULE, DEP_FLAGS, LOAD_MODULE, MODULES, STORE_MODULE
from .errors import DecodeError, EncodeError
from .layout import INSN_BYTES, AluOp, Layout, MemType, Opcode


@dataclass(frozen=True, kw_only=True)
class Insn:
    """Common prefix: the four dependency flags (the opcode is per subclass)."""

    pop_prev_dep: int = 0
    pop_next_dep: int = 0
    push_prev_dep: int = 0
    push_next_dep: int = 0

    layout_name: ClassVar[str] = ""

    @property
    def module(self) -> str:
        return COMPUTE_MODULE

    def layout(self, cfg: Config) -> Layout:
        return getattr(cfg.layouts, self.layout_name)

    def values(self) -> dict[str, int]:
        """Field name -> integer value, including the opcode."""
        d = {f.name: int(getattr(self, f.name)) for f in fields(self)}
        d["opcode"] = int(self.opcode)
        return d

    def to_dict(self) -> dict[str, int | str]:
        """TVM field names; opcode, memory_type and alu_opcode as names (for JSON)."""
        d: dict[str, int | str] = {"opcode": Opcode(self.opcode).name}
        for k, v in asdict(self).items():
            if k == "opcode":  # a dataclass field of MemInsn: keep the name set above
                continue
            if k == "memory_type":
                d[k] = MemType(v).name if v in MemType._value2member_map_ else int(v)
            elif k == "alu_opcode":
                d[k] = AluOp(v).name if v in AluOp._value2member_map_ else int(v)
            else:
                d[k] = int(v)
        return d

    @property
    def deps(self) -> tuple[int, int, int, int]:
        return tuple(int(getattr(self, f)) for f in DEP_FLAGS)  # type: ignore[return-value]


@dataclass(frozen=True, kw_only=True)
class MemInsn(Insn):
    """LOAD or STORE: a 2D strided DMA between DRAM and an SRAM buffer."""

    opcode: int = Opcode.LOAD
    memory_type: int = MemType.INP
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 0
    x_size: int = 0
    x_stride: int = 0
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0

    layout_name: ClassVar[str] = "mem"

    @property
    def module(self) -> str:
        if self.opcode == Opcode.STORE:
            return STORE_MODULE
        if self.memory_type in (MemType.INP, MemType.WGT):
            return LOAD_MODULE
        return COMPUTE_MODULE


@dataclass(frozen=True, kw_only=True)
class _LoopInsn(Insn):
    reset_reg: int = 0
    uop_bgn: int = 0
    uop_end: int = 0
    iter_out: int = 0
    iter_in: int = 0
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0


@dataclass(frozen=True, kw_only=True)
class GemmInsn(_LoopInsn):
    """GEMM: acc[dst] (+)= inp[src] x wgt[wgt]^T over two loops and a micro-op range."""

    wgt_factor_out: int = 0
    wgt_factor_in: int = 0

    opcode: ClassVar[int] = Opcode.GEMM
    layout_name: ClassVar[str] = "gemm"


@dataclass(frozen=True, kw_only=True)
class AluInsn(_LoopInsn):
    """ALU: acc[dst] = op(acc[dst], imm or acc[src]) over two loops and a micro-op range."""

    alu_opcode: int = AluOp.ADD
    use_imm: int = 0
    imm: int = 0

    opcode: ClassVar[int] = Opcode.ALU
    layout_name: ClassVar[str] = "alu"


@dataclass(frozen=True, kw_only=True)
class FinishInsn(Insn):
    """FINISH: the end of the program (the common prefix only)."""

    opcode: ClassVar[int] = Opcode.FINISH
    layout_name: ClassVar[str] = "finish"


def nop_insn(module: str) -> MemInsn:
    """A no-op of ``module``: an ``x_size=0`` LOAD INP (load), LOAD UOP (compute) or STORE
    (store), which only moves dependency tokens."""
    if module == LOAD_MODULE:
        return MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP)
    if module == STORE_MODULE:
        return MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT)
    return MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP)


_CLASS_OF = {Opcode.LOAD: MemInsn, Opcode.STORE: MemInsn, Opcode.GEMM: GemmInsn,
             Opcode.ALU: AluInsn, Opcode.FINISH: FinishInsn}


@dataclass(frozen=True)
class Uop:
    """A micro-op: the base indices into the accumulator, input and weight buffers."""

    dst_idx: int = 0
    src_idx: int = 0
    wgt_idx: int = 0


# ----------------------------------------------------------------------- encoding
def encode_word(insn: Insn, cfg: Config) -> int:
    """The instruction as a 128-bit integer."""
    what = f"{Opcode(insn.opcode).name if insn.opcode in Opcode._value2member_map_ else '?'} "
    return insn.layout(cfg).pack(insn.values(), what=what)


def encode(insn: Insn, cfg: Config) -> bytes:
    """16 little-endian bytes (TVM's in-memory layout)."""
    return encode_word(insn, cfg).to_bytes(INSN_BYTES, "little")


def decode_word(word: int, cfg: Config, *, index: int | None = None) -> Insn:
    opcode = word & 0x7
    if opcode not in _CLASS_OF:
        where = f"instruction {index}: " if index is not None else ""
        raise DecodeError(f"{where}invalid opcode {opcode} (valid: 0-4, "
                          f"{', '.join(f'{o.name}={o.value}' for o in Opcode)})")
    cls = _CLASS_OF[Opcode(opcode)]
    vals = getattr(cfg.layouts, cls.layout_name).unpack(word)
    if cls is not MemInsn:
        del vals["opcode"]
    return cls(**vals)


def decode(data: bytes, cfg: Config) -> Insn:
    if len(data) != INSN_BYTES:
        raise DecodeError(f"an instruction is {INSN_BYTES} bytes, got {len(data)}")
    return decode_word(int.from_bytes(data, "little"), cfg)


def encode_program(insns: Iterable[Insn], cfg: Config) -> bytes:
    out = bytearray()
    for n, insn in enumerate(insns):
        try:
            out += encode(insn, cfg)
        except EncodeError as e:
            raise EncodeError(f"instruction {n}: {e}") from None
    return bytes(out)


def decode_program(data: bytes, cfg: Config) -> list[Insn]:
    if len(data) % INSN_BYTES:
        raise DecodeError(
            f"an instruction stream is a multiple of {INSN_BYTES} bytes, got {len(data)} "
            f"({len(data) % INSN_BYTES} trailing bytes)")
    return [decode_word(int.from_bytes(data[k:k + INSN_BYTES], "little"), cfg, index=n)
            for n, k in enumerate(range(0, len(data), INSN_BYTES))]


def encode_uop(uop: Uop, cfg: Config) -> int:
    return cfg.layouts.uop.pack(
        {"dst_idx": uop.dst_idx, "src_idx": uop.src_idx, "wgt_idx": uop.wgt_idx},
        what="micro-op ")


def encode_uops(uops: Sequence[Uop], cfg: Config) -> bytes:
    """Micro-ops as little-endian 32-bit words."""
    words = np.array([encode_uop(u, cfg) for u in uops], dtype="<u4")
    return words.tobytes()


def decode_uop(word: int, cfg: Config) -> Uop:
    return Uop(**cfg.layouts.uop.unpack(int(word)))


def uop_fields(words: np.ndarray, cfg: Config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised micro-op decode: (dst_idx, src_idx, wgt_idx) arrays from uint32 words."""
    lay = cfg.layouts.uop
    w = np.asarray(words, dtype=np.uint32).astype(np.int64)
    return tuple((w >> f.offset) & f.mask for f in lay.fields)  # type: ignore[return-value]


def insn_class(opcode: int) -> type[Insn]:
    return _CLASS_OF[Opcode(opcode)]


__all__ = [
    "Insn", "MemInsn", "GemmInsn", "AluInsn", "FinishInsn", "Uop", "MODULES",
    "LOAD_MODULE", "COMPUTE_MODULE", "STORE_MODULE",
    "encode", "decode", "encode_word", "decode_word", "encode_program", "decode_program",
    "encode_uop", "encode_uops", "decode_uop", "uop_fields", "insn_class", "nop_insn",
]
