"""Instruction and micro-op objects with TVM's field names, and their binary encoding.

>>> from vta.isa import Config, MemInsn, Opcode, MemType, encode, decode
>>> cfg = Config()
>>> i = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, sram_base=0, dram_base=64,
...             y_size=1, x_size=4, x_stride=4)
>>> decode(encode(i, cfg), cfg) == i
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import ClassVar

import numpy as np

from .config import Config
from .deps import COMPUTE_MODULE, DEP_FLAGS, LOAD_MODULE, MODULES, STORE_MODULE
from .errors import DecodeError
from .layout import COMMON, INSN_BYTES, AluOp, Layout, MemType, Opcode


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


#: The memory types the load module loads (LOAD UOP and LOAD ACC run on compute).
LOAD_MEM_TYPES = frozenset({MemType.INP, MemType.WGT})


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
        if self.memory_type in LOAD_MEM_TYPES:
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
# One encoder and one decoder, vectorised over columns of field values (Layout.pack_columns,
# Layout.unpack_columns); the single-instruction forms are the same path on one row.

def _op_name(opcode: int) -> str:
    return Opcode(opcode).name if opcode in Opcode._value2member_map_ else "?"


def encode_rows(rows: Sequence[tuple[str, Mapping[str, int]]], cfg: Config, *,
                numbered: bool = True) -> np.ndarray:
    """The vectorised encoder: one ``(layout name, {field: value})`` per instruction (a field
    not given is 0; ``opcode`` must be) -> an ``(n, 2)`` uint64 array of words, low word
    first. Every value is range-checked; an EncodeError names the instruction (its index when
    ``numbered``) and the field."""
    out = np.zeros((len(rows), INSN_BYTES // 8), np.uint64)
    groups: dict[str, list[int]] = {}
    for k, (name, _) in enumerate(rows):
        groups.setdefault(name, []).append(k)

    def what(idx: list[int]):
        def prefix(row: int) -> str:
            k = idx[row]
            head = f"instruction {k}: " if numbered else ""
            return f"{head}{_op_name(rows[k][1].get('opcode', -1))} "
        return prefix

    for name, idx in groups.items():
        lay: Layout = getattr(cfg.layouts, name)
        vals = [rows[k][1] for k in idx]
        cols = {f.name: [v.get(f.name, 0) for v in vals] for f in lay.fields}
        out[idx] = lay.pack_columns(cols, len(idx), what=what(idx))
    return out


def words_to_bytes(words: np.ndarray) -> bytes:
    """An ``(n, 2)`` uint64 array of instruction words -> the little-endian stream."""
    return np.ascontiguousarray(words, dtype="<u8").tobytes()


def encode_program(insns: Iterable[Insn], cfg: Config) -> bytes:
    """The instruction stream of ``insns`` (16 little-endian bytes each)."""
    return words_to_bytes(encode_rows([(i.layout_name, i.values()) for i in insns], cfg))


def encode(insn: Insn, cfg: Config) -> bytes:
    """16 little-endian bytes (TVM's in-memory layout)."""
    return words_to_bytes(encode_rows([(insn.layout_name, insn.values())], cfg, numbered=False))


def encode_word(insn: Insn, cfg: Config) -> int:
    """The instruction as a 128-bit integer."""
    return int.from_bytes(encode(insn, cfg), "little")


#: The instruction classes in decoding order, and each opcode's index among them (-1: not an
#: opcode; a table lookup per program instead of np.isin per class)
_DECODED = (MemInsn, GemmInsn, AluInsn, FinishInsn)
_KIND_OF_OPCODE = np.full(1 << dict(COMMON)["opcode"], -1, dtype=np.intp)
for _op, _cls in _CLASS_OF.items():
    _KIND_OF_OPCODE[_op] = _DECODED.index(_cls)


def decode_words(words: np.ndarray, cfg: Config, *, numbered: bool = True) -> list[Insn]:
    """The vectorised decoder: an ``(n, 2)`` uint64 array of words -> instructions. An invalid
    opcode is a DecodeError naming the instruction (its index when ``numbered``)."""
    words = np.asarray(words, dtype=np.uint64).reshape(-1, INSN_BYTES // 8)
    opcodes = cfg.layouts.finish.unpack_columns(words)["opcode"]
    kinds = _KIND_OF_OPCODE[opcodes]  # index into _DECODED, -1 for an invalid opcode
    valid = kinds >= 0
    if not valid.all():
        k = int(np.argmin(valid))
        where = f"instruction {k}: " if numbered else ""
        raise DecodeError(f"{where}invalid opcode {int(opcodes[k])} (valid: 0-4, "
                          f"{', '.join(f'{o.name}={o.value}' for o in Opcode)})")
    out: list[Insn | None] = [None] * len(words)
    for j, cls in enumerate(_DECODED):
        rows = np.flatnonzero(kinds == j)
        if rows.size == 0:
            continue
        cols = getattr(cfg.layouts, cls.layout_name).unpack_columns(words[rows])
        if cls is not MemInsn:
            del cols["opcode"]
        names = list(cols)
        lists = [cols[n].tolist() for n in names]
        for k, vals in zip(rows.tolist(), zip(*lists)):
            out[k] = _made(cls, zip(names, vals))
    return out  # type: ignore[return-value]


def _made(cls: type[Insn], items: Iterable[tuple[str, int]]) -> Insn:
    """``cls(**dict(items))`` for a layout's complete set of decoded fields, without the
    frozen dataclass's per-field ``__init__`` (decoding a program makes one per instruction;
    these classes have no ``__post_init__``)."""
    insn = object.__new__(cls)
    insn.__dict__.update(items)
    return insn


def program_words(data: bytes) -> np.ndarray:
    """An instruction stream as an ``(n, 2)`` uint64 array (low word first)."""
    if len(data) % INSN_BYTES:
        raise DecodeError(
            f"an instruction stream is a multiple of {INSN_BYTES} bytes, got {len(data)} "
            f"({len(data) % INSN_BYTES} trailing bytes)")
    return np.frombuffer(bytes(data), dtype="<u8").reshape(-1, INSN_BYTES // 8)


def decode_program(data: bytes, cfg: Config) -> list[Insn]:
    return decode_words(program_words(data), cfg)


def decode_word(word: int, cfg: Config, *, index: int | None = None) -> Insn:
    try:
        return decode_words(np.array([[word & (2**64 - 1), word >> 64]], np.uint64), cfg,
                            numbered=False)[0]
    except DecodeError as e:
        if index is None:
            raise
        raise DecodeError(f"instruction {index}: {e}") from None


def decode(data: bytes, cfg: Config) -> Insn:
    if len(data) != INSN_BYTES:
        raise DecodeError(f"an instruction is {INSN_BYTES} bytes, got {len(data)}")
    return decode_words(program_words(data), cfg, numbered=False)[0]


def _uop_column(uops: Sequence[Uop], name: str) -> list[int]:
    return [getattr(u, name) for u in uops]


def encode_uops(uops: Sequence[Uop], cfg: Config) -> bytes:
    """Micro-ops as little-endian 32-bit words."""
    lay = cfg.layouts.uop
    cols = {f.name: _uop_column(uops, f.name) for f in lay.fields}
    words = lay.pack_columns(cols, len(uops), what=lambda row: "micro-op ")
    return words[:, 0].astype("<u4").tobytes()


def encode_uop(uop: Uop, cfg: Config) -> int:
    return int.from_bytes(encode_uops([uop], cfg), "little")


def uop_fields(words: np.ndarray, cfg: Config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised micro-op decode: (dst_idx, src_idx, wgt_idx) arrays from uint32 words."""
    w = np.asarray(words, dtype=np.uint32).astype(np.uint64).reshape(-1, 1)
    cols = cfg.layouts.uop.unpack_columns(w)
    return cols["dst_idx"], cols["src_idx"], cols["wgt_idx"]


def decode_uop(word: int, cfg: Config) -> Uop:
    d, s, w = uop_fields(np.array([word]), cfg)
    return Uop(int(d[0]), int(s[0]), int(w[0]))


def insn_class(opcode: int) -> type[Insn]:
    return _CLASS_OF[Opcode(opcode)]


__all__ = [
    "Insn", "MemInsn", "GemmInsn", "AluInsn", "FinishInsn", "Uop", "MODULES",
    "LOAD_MODULE", "COMPUTE_MODULE", "STORE_MODULE",
    "encode", "decode", "encode_word", "decode_word", "encode_program", "decode_program",
    "encode_uop", "encode_uops", "decode_uop", "uop_fields", "insn_class", "nop_insn",
    "encode_rows", "decode_words", "program_words", "words_to_bytes", "LOAD_MEM_TYPES",
]
