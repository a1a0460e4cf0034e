"""Bit layouts of the 128-bit instructions and the 32-bit micro-op, computed from a Config.

This is the ISA's single source of truth: the encoder, the decoder, the functional simulator and
the RTL decoder (``vta.hw``) all take field positions from these tables.

Fields are placed LSB first in TVM's order. As with C ``uint64_t`` bit-fields, a field never
straddles bit 64: a field that would is moved to start at bit 64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from typing import Protocol

import numpy as np

from .deps import DEP_FLAGS
from .errors import ConfigError, EncodeError


class Depths(Protocol):
    """What the layouts read of a Config (which imports this module): the log2 buffer depths
    that size the address fields (and its LOG_*_BUFF_SIZE parameters, for messages)."""

    log_uop_depth: int
    log_inp_depth: int
    log_wgt_depth: int
    log_acc_depth: int


INSN_BITS = 128
INSN_BYTES = 16
UOP_BITS = 32
UOP_BYTES = 4
ITER_BITS = 14
IMM_BITS = 16


class Opcode(IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemType(IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4


class AluOp(IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3
    MUL = 4


@dataclass(frozen=True)
class Field:
    """One bit field: ``width`` bits starting at bit ``offset`` (LSB first)."""

    name: str
    offset: int
    width: int
    signed: bool = False

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    @property
    def min(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    @property
    def end(self) -> int:
        """One past the highest bit."""
        return self.offset + self.width

    def check(self, value: int, *, what: str = "") -> int:
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int):
            try:
                value = int(value)  # numpy integers
            except (TypeError, ValueError):
                raise EncodeError(f"{what}{self.name} must be an integer, not {value!r}") from None
        if not self.min <= value <= self.max:
            kind = "signed " if self.signed else ""
            raise EncodeError(
                f"{what}{self.name}={value} does not fit its {self.width}-bit {kind}field "
                f"(range {self.min}..{self.max})")
        return value

    def insert(self, word: int, value: int) -> int:
        return word | ((value & self.mask) << self.offset)

    def extract(self, word: int) -> int:
        v = (word >> self.offset) & self.mask
        if self.signed and v >> (self.width - 1):
            v -= 1 << self.width
        return v


@dataclass(frozen=True)
class Layout:
    """The fields of one instruction kind (or of the micro-op)."""

    name: str
    bits: int
    fields: tuple[Field, ...]

    def __getitem__(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def __contains__(self, name: str) -> bool:
        return any(f.name == name for f in self.fields)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def used_bits(self) -> int:
        return max(f.end for f in self.fields)

    def pack(self, values: Mapping[str, int], *, what: str = "") -> int:
        """Pack field values into an integer; every field of the layout must be given."""
        word = 0
        for f in self.fields:
            word = f.insert(word, f.check(values[f.name], what=what))
        return word

    def unpack(self, word: int) -> dict[str, int]:
        return {f.name: f.extract(word) for f in self.fields}

    # ------------------------------------------------------------- vectorised (columns)
    @property
    def words(self) -> int:
        """64-bit words per encoded value (a field never straddles a word)."""
        return -(-self.bits // 64)

    def pack_columns(self, columns: Mapping[str, Sequence[int] | np.ndarray], n: int, *,
                     what: Callable[[int], str] = lambda row: "") -> np.ndarray:
        """Vectorised :meth:`pack`: ``n`` rows of field values (one sequence or array per
        field; a field not given is 0) -> an ``(n, words)`` uint64 array, least significant
        word first. A value that does not fit raises EncodeError prefixed by ``what(row)``.
        The given fields are converted, checked and shifted as one (fields, n) matrix: a
        handful of numpy calls per layout, not per field (programs are often short)."""
        out = np.zeros((n, self.words), np.uint64)
        given = [k for k, f in enumerate(self.fields) if columns.get(f.name) is not None]
        if not given:
            return out
        vec = self._vec
        v = _checked_columns([self.fields[k] for k in given],
                             [columns[self.fields[k].name] for k in given],
                             vec.lo[given], vec.hi[given], what)
        shifted = (v & vec.pack_mask[given]).astype(np.uint64) << vec.shift[given]
        word = vec.word[given]
        for w in range(self.words):
            sel = word == w
            if sel.any():
                out[:, w] |= np.bitwise_or.reduce(shifted[sel], axis=0)
        return out

    def unpack_columns(self, words: np.ndarray) -> dict[str, np.ndarray]:
        """Vectorised :meth:`unpack`: an ``(n, words)`` uint64 array -> field name -> int64
        array (signed fields sign-extended), every field extracted by one set of numpy calls
        over a (fields, n) matrix."""
        words = np.asarray(words, dtype=np.uint64).reshape(len(words), -1)
        vec = self._vec
        v = ((words.T[vec.word] >> vec.shift) & vec.unpack_mask).astype(np.int64)
        for k in vec.signed:
            w = self.fields[k].width
            v[k] = np.where(v[k] >> (w - 1), v[k] - (1 << w), v[k])
        return {f.name: v[k] for k, f in enumerate(self.fields)}

    @cached_property
    def _vec(self) -> _Vectors:
        return _Vectors.of(self.fields)


@dataclass(frozen=True, eq=False)
class _Vectors:
    """Per-field constants of a layout as column vectors ``(fields, 1)`` for the vectorised
    encoder and decoder: 64-bit word, shift in it, masks, value range; the signed fields."""

    word: np.ndarray
    shift: np.ndarray
    pack_mask: np.ndarray
    unpack_mask: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    signed: tuple[int, ...]

    @staticmethod
    def of(fields: Sequence[Field]) -> _Vectors:
        def col(values: list[int], dtype: type) -> np.ndarray:
            return np.array(values, dtype=dtype).reshape(-1, 1)

        return _Vectors(
            word=np.array([f.offset // 64 for f in fields], dtype=np.intp),
            shift=col([f.offset % 64 for f in fields], np.uint64),
            pack_mask=col([f.mask for f in fields], np.int64),
            unpack_mask=col([f.mask for f in fields], np.uint64),
            lo=col([f.min for f in fields], np.int64), hi=col([f.max for f in fields], np.int64),
            signed=tuple(k for k, f in enumerate(fields) if f.signed))


def _checked_columns(fields: Sequence[Field], cols: Sequence[Sequence[int] | np.ndarray],
                     lo: np.ndarray, hi: np.ndarray, what: Callable[[int], str]) -> np.ndarray:
    """The columns ``cols`` of ``fields`` as one int64 ``(fields, n)`` matrix after the check
    of :meth:`Field.check`: when one value does not convert or fit, the columns are checked
    one by one in field order (:func:`_checked_column`: its message on the first field and
    row that fails)."""
    try:
        v = np.array(cols, dtype=np.int64)
    except (OverflowError, ValueError, TypeError):  # not integers, or beyond 64 bits
        v = None
    if v is not None and v.ndim == 2 and not ((v < lo) | (v > hi)).any():
        return v
    return np.array([_checked_column(f, c, what) for f, c in zip(fields, cols)])


def _checked_column(f: Field, col: Sequence[int] | np.ndarray,
                    what: Callable[[int], str]) -> np.ndarray:
    """``col`` as int64 after the check of :meth:`Field.check` (its message, prefixed by
    ``what(row)``, on the first row that fails)."""
    try:
        v = np.asarray(col, dtype=np.int64)
    except (OverflowError, ValueError, TypeError):  # not integers, or beyond 64 bits
        v = None
    rows: Iterable[int]
    if v is None:
        rows = range(len(col))
    else:
        bad = (v < f.min) | (v > f.max)
        if not bad.any():
            return v
        rows = (int(np.argmax(bad)),)
    checked = []
    for row in rows:
        try:
            checked.append(f.check(col[row]))
        except EncodeError as e:
            raise EncodeError(f"{what(row)}{e}") from None
    return np.asarray(checked, dtype=np.int64)  # every value converted by Field.check


@dataclass(frozen=True)
class Layouts:
    """All layouts of one Config."""

    mem: Layout
    gemm: Layout
    alu: Layout
    finish: Layout
    uop: Layout

    def for_opcode(self, opcode: int) -> Layout:
        if opcode in (Opcode.LOAD, Opcode.STORE):
            return self.mem
        return {Opcode.GEMM: self.gemm, Opcode.ALU: self.alu, Opcode.FINISH: self.finish}[opcode]

    def table(self) -> dict[str, list[dict[str, int | str | bool]]]:
        """A JSON-friendly description (used by ``vta config show --layout`` and hw docs)."""
        return {
            lay.name: [{"name": f.name, "lsb": f.offset, "msb": f.end - 1, "width": f.width,
                        "signed": f.signed} for f in lay.fields]
            for lay in (self.mem, self.gemm, self.alu, self.finish, self.uop)
        }


COMMON = (("opcode", 3),) + tuple((flag, 1) for flag in DEP_FLAGS)


def _place(name: str, specs, bits: int, unit: int) -> Layout:
    fields: list[Field] = []
    pos = 0
    for spec in specs:
        fname, width = spec[0], spec[1]
        signed = len(spec) > 2 and spec[2]
        if width <= 0:
            raise ConfigError(f"{name} field {fname} would be {width} bits wide")
        if pos // unit != (pos + width - 1) // unit:  # would straddle a storage unit
            pos = (pos // unit + 1) * unit
        fields.append(Field(fname, pos, width, signed))
        pos += width
    if pos > bits:
        if unit >= bits:  # one storage unit: the straddle rule moved nothing that fitted
            pos = sum(f.width for f in fields)
        detail = ", ".join(f"{f.name}:{f.width}" for f in fields)
        raise ConfigError(
            f"the {name} layout needs {pos} bits but has {bits} ({detail})")
    return Layout(name, bits, tuple(fields))


def _depth_origin(cfg: Depths) -> str:
    """Which parameters set the address-field widths (for layout overflow messages)."""
    return ", ".join(
        f"{buf} {getattr(cfg, f'log_{buf}_depth')} bits ("
        f"LOG_{buf.upper()}_BUFF_SIZE={getattr(cfg, f'LOG_{buf.upper()}_BUFF_SIZE')})"
        for buf in ("uop", "inp", "wgt", "acc"))


def build_layouts(cfg: Depths) -> Layouts:
    """Compute every layout for ``cfg`` (raises ConfigError when a field no longer fits).

    When layouts overflow, the one error names every layout that does not fit and the
    parameters that set the widths of its address fields.
    """
    # zero-depth buffers still need one address bit in the fields
    u, i, w, a = (max(d, 1) for d in (cfg.log_uop_depth, cfg.log_inp_depth,
                                      cfg.log_wgt_depth, cfg.log_acc_depth))
    loop_head = (("reset_reg", 1), ("uop_bgn", u), ("uop_end", u + 1),
                 ("iter_out", ITER_BITS), ("iter_in", ITER_BITS))
    specs = {
        "mem": ("memory instruction", COMMON + (
            ("memory_type", 3), ("sram_base", 16), ("dram_base", 32), ("y_size", 16),
            ("x_size", 16), ("x_stride", 16), ("y_pad_0", 4), ("y_pad_1", 4),
            ("x_pad_0", 4), ("x_pad_1", 4)), INSN_BITS, 64),
        "gemm": ("GEMM instruction", COMMON + loop_head + (
            ("dst_factor_out", a), ("dst_factor_in", a), ("src_factor_out", i),
            ("src_factor_in", i), ("wgt_factor_out", w), ("wgt_factor_in", w)), INSN_BITS, 64),
        "alu": ("ALU instruction", COMMON + loop_head + (
            ("dst_factor_out", a), ("dst_factor_in", a), ("src_factor_out", a),
            ("src_factor_in", a), ("alu_opcode", 3), ("use_imm", 1), ("imm", IMM_BITS, True)),
            INSN_BITS, 64),
        "finish": ("FINISH instruction", COMMON, INSN_BITS, 64),
        "uop": ("micro-op", (("dst_idx", a), ("src_idx", max(a, i)), ("wgt_idx", w)),
                UOP_BITS, 32),
    }
    built: dict[str, Layout] = {}
    errors: list[str] = []
    for key, spec in specs.items():
        try:
            built[key] = _place(*spec)
        except ConfigError as e:
            errors.append(str(e))
    if errors:
        raise ConfigError(f"{'; '.join(errors)}; the index widths come from "
                          f"{_depth_origin(cfg)}: reduce those buffer sizes (LOG_*_BUFF_SIZE) "
                          f"or raise LOG_BLOCK/LOG_BATCH")
    return Layouts(**built)


#: Depth of each of the four dependency-token queues (fsim models overflow; the RTL matches).
TOKEN_QUEUE_DEPTH = 256
#: Depth of each module's instruction queue behind fetch (fetch stalls when one is full).
INSN_QUEUE_DEPTH = 256
