"""The VTA assembler and disassembler: a readable text form of the instruction stream.

One instruction per line: a mnemonic, then ``field=value`` pairs with TVM's field names and bare
flag words for the one-bit fields. ``#`` or ``;`` starts a comment. The full format, with
examples, is in ``docs/asm.md``::

    load.inp  sram_base=0 dram_base=0x40 y_size=1 x_size=16 x_stride=16 push_next
    gemm      reset uop_bgn=0 uop_end=1 iter_out=1 iter_in=1 pop_prev
    alu.shr   uop_bgn=0 uop_end=1 iter_out=1 iter_in=1 use_imm imm=-2
    finish

>>> from vta.isa import Config
>>> cfg = Config()
>>> data = assemble_bytes("load.inp dram_base=4 y_size=1 x_size=2 x_stride=2\\nfinish", cfg)
>>> assemble_bytes(disassemble(data, cfg), cfg) == data
True

The same parser reads micro-op buffers (``uop dst_idx=.. src_idx=.. wgt_idx=..``, see
:func:`assemble_uops`), and :func:`to_jsonl` / :func:`from_jsonl` give a JSON-lines form with one
object per instruction and TVM's field names.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .config import Config
from .deps import DEP_FLAGS, MODULE_FLAGS
from .errors import AsmError, DecodeError, EncodeError
from .fileio import JSON_MAX_DEPTH, json_depth
from .insn import (
    AluInsn,
    FinishInsn,
    GemmInsn,
    Insn,
    MemInsn,
    Uop,
    decode_program,
    decode_uop,
    encode_program,
    encode_uop,
    encode_uops,
)
from .layout import INSN_BYTES, UOP_BYTES, AluOp, Field, Layout, MemType, Opcode

#: Short flag words and the one-bit fields they set.
FLAG_ALIASES = {
    "pop_prev": "pop_prev_dep",
    "pop_next": "pop_next_dep",
    "push_prev": "push_prev_dep",
    "push_next": "push_next_dep",
    "reset": "reset_reg",
}
_SHORT_FLAG = {v: k for k, v in FLAG_ALIASES.items()}

#: Fields whose value may also be written as a name (memory_type=inp, alu_opcode=add).
_ENUM_FIELDS: dict[str, type[MemType] | type[AluOp]] = {
    "memory_type": MemType, "alu_opcode": AluOp}

# Fields the disassembler always prints (the others only when non-zero).
_ALWAYS_SHOWN = frozenset({"sram_base", "dram_base", "y_size", "x_size", "x_stride",
                           "uop_bgn", "uop_end", "iter_out", "iter_in"})

_NUMBER_RE = re.compile(
    r"[+-]?(?:0[xX](?:_?[0-9a-fA-F])+|0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|[0-9](?:_?[0-9])*)\Z")
_MNEMONIC_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VALUE_RE = re.compile(r"[^\s=#;]+")
_NUMBER_HELP = "a number (decimal like 42 or -3, hex like 0x2a, binary like 0b101)"


@dataclass(frozen=True)
class _Spec:
    """What a mnemonic means: the class it builds and the fields its name fixes."""

    cls: type
    fixed: dict[str, int] = field(default_factory=dict)
    layout: str = ""           # attribute of Layouts
    required: tuple[str, ...] = ()
    defaults: dict[str, int] = field(default_factory=dict)


def _build_specs() -> dict[str, _Spec]:
    specs: dict[str, _Spec] = {}
    for m in MemType:
        specs[f"load.{m.name.lower()}"] = _Spec(
            MemInsn, {"opcode": Opcode.LOAD, "memory_type": m}, "mem")
    specs["load"] = _Spec(MemInsn, {"opcode": Opcode.LOAD}, "mem", required=("memory_type",))
    specs["store"] = _Spec(MemInsn, {"opcode": Opcode.STORE}, "mem",
                           defaults={"memory_type": MemType.OUT})
    for m in MemType:
        specs[f"store.{m.name.lower()}"] = _Spec(
            MemInsn, {"opcode": Opcode.STORE, "memory_type": m}, "mem")
    specs["gemm"] = _Spec(GemmInsn, {"opcode": Opcode.GEMM}, "gemm")
    for op in AluOp:
        specs[f"alu.{op.name.lower()}"] = _Spec(
            AluInsn, {"opcode": Opcode.ALU, "alu_opcode": op}, "alu")
    specs["alu"] = _Spec(AluInsn, {"opcode": Opcode.ALU}, "alu", required=("alu_opcode",))
    specs["finish"] = _Spec(FinishInsn, {"opcode": Opcode.FINISH}, "finish")
    return specs


#: Every instruction mnemonic (lower case; the assembler ignores case).
SPECS = _build_specs()
MNEMONICS = tuple(SPECS)
_UOP_MNEMONIC = "uop"


# ------------------------------------------------------------------------- lexing
@dataclass(frozen=True)
class _Item:
    """One ``name`` or ``name=value`` item of a line, with 1-based columns."""

    name: str
    col: int
    value: str | None = None
    value_col: int = 0


@dataclass(frozen=True)
class _Line:
    mnemonic: str
    col: int
    items: tuple[_Item, ...]


def _strip_comment(text: str) -> str:
    cut = [i for i in (text.find("#"), text.find(";")) if i >= 0]
    return text[:min(cut)] if cut else text


def _lex(text: str, err: Callable[[str, int], AsmError]) -> _Line | None:
    """Split one line into a mnemonic and its items; None for a blank or comment line."""
    code = _strip_comment(text)
    n = len(code)
    pos = len(code) - len(code.lstrip())
    if pos >= n:
        return None
    m = _MNEMONIC_RE.match(code, pos)
    if not m:
        raise err(f"expected a mnemonic ({', '.join(_mnemonic_summary())}), "
                  f"found {code[pos:].split()[0]!r}", pos + 1)
    mnemonic, mcol = m.group(), pos + 1
    pos = m.end()
    if pos < n and not code[pos].isspace():
        raise err(f"expected a space after the mnemonic {mnemonic!r}, found {code[pos]!r}",
                  pos + 1)
    items = []
    while True:
        while pos < n and code[pos].isspace():
            pos += 1
        if pos >= n:
            break
        m = _NAME_RE.match(code, pos)
        if not m:
            raise err(f"expected a field (name=value) or a flag word, found "
                      f"{code[pos:].split()[0]!r}", pos + 1)
        name, ncol = m.group(), pos + 1
        pos = m.end()
        look = pos
        while look < n and code[look].isspace():
            look += 1
        if look < n and code[look] == "=":
            pos = look + 1
            while pos < n and code[pos].isspace():
                pos += 1
            vm = _VALUE_RE.match(code, pos)
            if not vm:
                found = repr(code[pos]) if pos < n else "the end of the line"
                raise err(f"expected a value after '{name}=', found {found}", pos + 1)
            items.append(_Item(name, ncol, vm.group(), pos + 1))
            pos = vm.end()
        else:
            if pos < n and not code[pos].isspace():
                raise err(f"expected '=' or a space after {name!r}, found {code[pos]!r}",
                          pos + 1)
            items.append(_Item(name, ncol))
    return _Line(mnemonic, mcol, tuple(items))


def _mnemonic_summary() -> list[str]:
    return ["load.inp|wgt|uop|acc", "store", "gemm", "alu.min|max|add|shr|mul", "finish"]


def parse_number(text: str) -> int | None:
    """An integer in decimal, hex (0x), binary (0b) or octal (0o), optionally signed; else None."""
    if not _NUMBER_RE.match(text):
        return None
    return int(text.replace("_", ""), 0) if not _is_decimal(text) else int(text.replace("_", ""))


def _is_decimal(text: str) -> bool:
    t = text.lstrip("+-")
    return not (len(t) > 1 and t[0] == "0" and t[1] in "xXbBoO")


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word.lower(), list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


# ------------------------------------------------------------------------ parsing
def _field_values(line: _Line, fields: dict[str, Field], kind: str,
                  err: Callable[[str, int], AsmError],
                  fixed: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Resolve the items of a line against ``fields`` (name -> Field); value and column each."""
    seen: dict[str, tuple[int, int]] = {}
    for it in line.items:
        key = it.name.lower()
        fname = FLAG_ALIASES.get(key, key)
        if fname in fixed:
            raise err(f"{fname} is already set by the mnemonic {line.mnemonic.lower()!r}; "
                      f"remove {it.name!r}", it.col)
        if fname not in fields:
            names = sorted(fields) + sorted(a for a, f in FLAG_ALIASES.items() if f in fields)
            raise err(f"{kind} has no field {it.name!r}{_suggest(key, names)} "
                      f"(fields: {', '.join(_field_list(fields))})", it.col)
        if fname in seen:
            raise err(f"{fname} is given twice (first at column {seen[fname][1]})", it.col)
        f = fields[fname]
        if it.value is None:
            if f.width != 1:
                raise err(f"{it.name} needs a value: write {it.name}=N", it.col + len(it.name))
            seen[fname] = (1, it.col)
            continue
        value = parse_number(it.value)
        if value is None and fname in _ENUM_FIELDS:
            enum = _ENUM_FIELDS[fname]
            member = enum.__members__.get(it.value.upper())
            if member is None:
                names = ", ".join(m.name.lower() for m in enum)
                hint = _suggest(it.value, [m.name.lower() for m in enum])
                raise err(f"bad {fname} {it.value!r}: expected one of {names} or a number "
                          f"0..{f.max}{hint}", it.value_col)
            value = int(member)
        if value is None:
            raise err(f"bad value {it.value!r} for {fname}: expected {_NUMBER_HELP}",
                      it.value_col)
        try:
            f.check(value)
        except EncodeError as e:
            raise err(str(e), it.value_col) from None
        seen[fname] = (value, it.col)
    return seen


def _field_list(fields: dict[str, Field]) -> list[str]:
    return [_SHORT_FLAG.get(n, n) if f.width == 1 else f"{n}=" for n, f in fields.items()]


def _user_fields(layout: Layout, fixed: dict[str, int]) -> dict[str, Field]:
    return {f.name: f for f in layout.fields if f.name != "opcode" and f.name not in fixed}


class _Parser:
    """Shared line-by-line driver for instruction and micro-op text."""

    def __init__(self, text: str, cfg: Config, filename: str):
        self.text, self.cfg, self.filename = text, cfg, filename

    def lines(self):
        text = self.text[1:] if self.text.startswith("\ufeff") else self.text  # a UTF-8 BOM
        for lineno, raw in enumerate(text.splitlines(), start=1):
            err = self._err_factory(lineno)
            line = _lex(raw, err)
            if line is not None:
                yield lineno, line, err

    def _err_factory(self, lineno: int) -> Callable[[str, int], AsmError]:
        def err(message: str, col: int) -> AsmError:
            return AsmError(message, file=self.filename, line=lineno, col=col)
        return err


def _parse_insn(line: _Line, cfg: Config, err: Callable[[str, int], AsmError]) -> Insn:
    key = line.mnemonic.lower()
    spec = SPECS.get(key)
    if spec is None:
        if key == _UOP_MNEMONIC:
            raise err("'uop' lines belong in a micro-op file: assemble it with "
                      "assemble_uops (vta asm --uops)", line.col)
        raise err(f"unknown mnemonic {line.mnemonic!r}{_suggest(key, MNEMONICS)} "
                  f"(expected one of {', '.join(MNEMONICS)})", line.col)
    layout = getattr(cfg.layouts, spec.layout)
    fields = _user_fields(layout, spec.fixed)
    seen = _field_values(line, fields, key, err, spec.fixed)
    for req in spec.required:
        if req not in seen:
            enum = _ENUM_FIELDS[req]
            forms = ", ".join(f"{key}.{m.name.lower()}" for m in enum)
            raise err(f"{key} needs {req}=: write one of {forms} or give {req}=N", line.col)
    values = {**spec.defaults, **{k: v for k, (v, _) in seen.items()}}
    values.update({k: int(v) for k, v in spec.fixed.items() if k != "opcode" or
                   spec.cls is MemInsn})
    return spec.cls(**values)


def assemble(text: str, cfg: Config, *, filename: str = "<input>",
             warn: Callable[[str], None] | None = None) -> list[Insn]:
    """Assemble text into instructions (see the module docs and docs/asm.md).

    Raises :class:`AsmError` (with file, line and column) on the first error. ``warn``, if given,
    is called with a ``file:line: message`` string for each suspicious but valid construct: a
    missing FINISH, instructions after FINISH, a dependency flag the instruction's module does
    not have, an ``imm`` without ``use_imm``.
    """
    insns: list[Insn] = []
    linenos: list[int] = []
    for lineno, line, err in _Parser(text, cfg, filename).lines():
        insns.append(_parse_insn(line, cfg, err))
        linenos.append(lineno)
    if warn is not None:
        for lineno, message in lint(insns, linenos):
            warn(f"{filename}:{lineno}: {message}" if lineno else f"{filename}: {message}")
    return insns


def assemble_bytes(text: str, cfg: Config, *, filename: str = "<input>",
                   warn: Callable[[str], None] | None = None) -> bytes:
    """Assemble text into the binary instruction stream (16 little-endian bytes each)."""
    return encode_program(assemble(text, cfg, filename=filename, warn=warn), cfg)


def lint(insns: Sequence[Insn], linenos: Sequence[int] | None = None) -> list[tuple[int, str]]:
    """Warnings about valid but suspicious instructions: (line number or index, message)."""
    where = list(linenos) if linenos is not None else list(range(len(insns)))
    out: list[tuple[int, str]] = []
    for n, insn in enumerate(insns):
        name = mnemonic(insn)
        allowed = MODULE_FLAGS[insn.module]
        for dep in DEP_FLAGS:
            if getattr(insn, dep) and dep not in allowed:
                side = "previous" if "prev" in dep else "next"
                out.append((where[n], f"{_SHORT_FLAG[dep]} on {name}: the {insn.module} module "
                                      f"has no {side} module, so this flag has no partner"))
        if isinstance(insn, AluInsn) and insn.imm and not insn.use_imm:
            out.append((where[n], f"{name} has imm={insn.imm} but no use_imm flag, so the "
                                  "immediate is ignored"))
        if isinstance(insn, FinishInsn) and n != len(insns) - 1:
            out.append((where[n], f"FINISH is followed by {len(insns) - 1 - n} more "
                                  "instruction(s), which never run"))
    if not insns or not isinstance(insns[-1], FinishInsn):
        out.append((where[-1] if insns else 0,
                    "the program does not end with finish (vta sim needs one)"))
    return out


# ------------------------------------------------------------------ disassembling
def mnemonic(insn: Insn) -> str:
    """The mnemonic the disassembler prints for ``insn`` (bare load/store/alu for odd values)."""
    if isinstance(insn, MemInsn):
        base = "store" if insn.opcode == Opcode.STORE else "load"
        if base == "store" and insn.memory_type == MemType.OUT:
            return "store"
        if insn.memory_type in MemType._value2member_map_:
            return f"{base}.{MemType(insn.memory_type).name.lower()}"
        return base
    if isinstance(insn, AluInsn):
        if insn.alu_opcode in AluOp._value2member_map_:
            return f"alu.{AluOp(insn.alu_opcode).name.lower()}"
        return "alu"
    if isinstance(insn, GemmInsn):
        return "gemm"
    return "finish"


def format_insn(insn: Insn, cfg: Config) -> str:
    """One instruction as a line of assembler text (without a newline)."""
    name = mnemonic(insn)
    spec = SPECS[name]
    layout: Layout = getattr(cfg.layouts, spec.layout)
    values = insn.values()
    parts: list[str] = []
    deps: list[str] = []
    for f in layout.fields:
        if f.name == "opcode" or f.name in spec.fixed:
            continue
        v = values[f.name]
        if f.name in spec.defaults and v == spec.defaults[f.name]:
            continue
        if f.name in DEP_FLAGS:
            if v:
                deps.append(_SHORT_FLAG[f.name])
        elif f.width == 1:
            if v:
                parts.append(_SHORT_FLAG.get(f.name, f.name))
        elif v or f.name in _ALWAYS_SHOWN or f.name in spec.required or (
                f.name == "imm" and values.get("use_imm")):
            parts.append(f"{f.name}={v}")
    return " ".join([f"{name:<9}"] + parts + deps).rstrip()


def _as_insns(program: bytes | bytearray | memoryview | Sequence[Insn], cfg: Config) -> list[Insn]:
    if isinstance(program, bytes | bytearray | memoryview):
        return decode_program(bytes(program), cfg)
    # Encode first: it checks every field, and decoding normalises the classes.
    return decode_program(encode_program(program, cfg), cfg)


def _field_mask(layout: Layout) -> int:
    mask = 0
    for f in layout.fields:
        mask |= f.mask << f.offset
    return mask


def reserved_bits(program: bytes, cfg: Config) -> list[tuple[int, int]]:
    """(index, mask) of instructions with bits set outside every field (the decoder drops them).

    Raises DecodeError for a stream that does not decode at all (length, opcode).
    """
    decode_program(program, cfg)  # framing and opcodes
    return _reserved(program, cfg)


def _reserved(program: bytes, cfg: Config) -> list[tuple[int, int]]:
    masks = {op: _field_mask(cfg.layouts.for_opcode(op)) for op in Opcode}
    out = []
    for n in range(len(program) // INSN_BYTES):
        word = int.from_bytes(program[n * INSN_BYTES:(n + 1) * INSN_BYTES], "little")
        extra = word & ~masks[Opcode(word & 0x7)]
        if extra:
            out.append((n, extra))
    return out


def disassemble(program: bytes | bytearray | Sequence[Insn], cfg: Config, *,
                index: bool = False) -> str:
    """Assembler text for an instruction stream or a list of instructions.

    ``assemble_bytes(disassemble(data, cfg), cfg) == data`` for every stream whose words have no
    bits set outside the fields (see :func:`reserved_bits`); such bits are noted in a comment.
    With ``index=True`` each line ends with ``# <instruction index>``.
    """
    insns = _as_insns(program, cfg)
    dropped = dict(_reserved(bytes(program), cfg)) if isinstance(
        program, bytes | bytearray | memoryview) else {}
    lines = [format_insn(i, cfg) for i in insns]
    if not index and not dropped:
        return "".join(line + "\n" for line in lines)
    width = max((len(s) for s in lines), default=0)
    out = []
    for n, s in enumerate(lines):
        notes = []
        if index:
            notes.append(str(n))
        if n in dropped:
            notes.append(f"reserved bits {dropped[n]:#x} set (not reproduced)")
        out.append(f"{s:<{width}}  # {'; '.join(notes)}" if notes else s)
    return "".join(line + "\n" for line in out)


# ------------------------------------------------------------------------- JSON lines
def to_jsonl(program: bytes | bytearray | Sequence[Insn], cfg: Config) -> str:
    """One JSON object per line with TVM's field names (opcode, memory_type, alu_opcode as names
    when they have one)."""
    return "".join(json.dumps(i.to_dict()) + "\n" for i in _as_insns(program, cfg))


def from_jsonl(text: str, cfg: Config, *, filename: str = "<input>") -> list[Insn]:
    """Read the :func:`to_jsonl` form back (blank lines are skipped; missing fields are 0)."""
    insns = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        depth = json_depth(raw)
        if depth > JSON_MAX_DEPTH:
            raise AsmError(f"JSON nested {depth} levels deep, more than the {JSON_MAX_DEPTH} "
                           "an instruction may have", file=filename, line=lineno, col=1)
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            raise AsmError(f"not valid JSON: {e.msg}", file=filename, line=lineno,
                           col=e.colno) from None
        insns.append(_insn_from_obj(obj, cfg, raw, filename, lineno))
    return insns


def _insn_from_obj(obj: object, cfg: Config, raw: str, filename: str, lineno: int) -> Insn:
    def err(message: str, key: str | None = None) -> AsmError:
        col = raw.find(f'"{key}"') + 1 if key else 1
        return AsmError(message, file=filename, line=lineno, col=max(col, 1))

    if not isinstance(obj, dict):
        raise err(f"expected a JSON object per line, got {type(obj).__name__}")
    if "opcode" not in obj:
        raise err("missing \"opcode\" (one of " + ", ".join(o.name for o in Opcode) + ")")
    values: dict[str, int] = {}
    for key, v in obj.items():
        enum = {"opcode": Opcode, **_ENUM_FIELDS}.get(key)
        if enum is not None and isinstance(v, str):
            member = enum.__members__.get(v.upper())
            if member is None:
                raise err(f"bad {key} {v!r}: expected one of "
                          f"{', '.join(m.name for m in enum)} or a number", key)
            v = int(member)
        if isinstance(v, bool) or not isinstance(v, int):
            raise err(f"{key} must be an integer, not {v!r}", key)
        values[key] = v
    opcode = values["opcode"]
    if opcode not in Opcode._value2member_map_:
        raise err(f"bad opcode {opcode}: expected one of "
                  f"{', '.join(f'{o.name}={o.value}' for o in Opcode)}", "opcode")
    layout = cfg.layouts.for_opcode(opcode)
    for key, v in values.items():
        if key not in layout:
            raise err(f"{Opcode(opcode).name} has no field {key!r} (fields: "
                      f"{', '.join(layout.names)})", key)
        try:
            layout[key].check(v)
        except EncodeError as e:
            raise err(str(e), key) from None
    full = {f.name: values.get(f.name, 0) for f in layout.fields}
    word = layout.pack(full)
    return decode_program(word.to_bytes(INSN_BYTES, "little"), cfg)[0]


# --------------------------------------------------------------------------- micro-ops
def assemble_uops(text: str, cfg: Config, *, filename: str = "<input>") -> list[Uop]:
    """Micro-op text, one ``uop dst_idx=N src_idx=N wgt_idx=N`` per line (omitted fields 0)."""
    uops = []
    fields = {f.name: f for f in cfg.layouts.uop.fields}
    for _lineno, line, err in _Parser(text, cfg, filename).lines():
        if line.mnemonic.lower() != _UOP_MNEMONIC:
            hint = (" (instructions belong in a program file: assemble it without --uops)"
                    if line.mnemonic.lower() in SPECS else "")
            raise err(f"expected 'uop', found {line.mnemonic!r}{hint}", line.col)
        seen = _field_values(line, fields, "uop", err, {})
        uops.append(Uop(**{k: v for k, (v, _) in seen.items()}))
    return uops


def assemble_uops_bytes(text: str, cfg: Config, *, filename: str = "<input>") -> bytes:
    """Micro-op text as a micro-op buffer image (32-bit little-endian words)."""
    return encode_uops(assemble_uops(text, cfg, filename=filename), cfg)


def decode_uops(data: bytes, cfg: Config) -> list[Uop]:
    """A micro-op buffer image (4 bytes per micro-op) as Uop objects."""
    if len(data) % UOP_BYTES:
        raise DecodeError(f"a micro-op buffer is a multiple of {UOP_BYTES} bytes, got "
                          f"{len(data)} ({len(data) % UOP_BYTES} trailing bytes)")
    words = np.frombuffer(bytes(data), dtype="<u4")
    return [decode_uop(int(w), cfg) for w in words]


def disassemble_uops(uops: bytes | bytearray | Sequence[Uop], cfg: Config, *,
                     index: bool = False) -> str:
    """Text for a micro-op buffer image or a list of micro-ops."""
    if isinstance(uops, bytes | bytearray | memoryview):
        data = bytes(uops)
        items = decode_uops(data, cfg)
        words = np.frombuffer(data, dtype="<u4")
    else:
        items = list(uops)
        words = np.array([encode_uop(u, cfg) for u in items], dtype=np.int64)
    lines = []
    used = (1 << cfg.layouts.uop.used_bits) - 1
    for n, (u, w) in enumerate(zip(items, words)):
        s = f"uop dst_idx={u.dst_idx} src_idx={u.src_idx} wgt_idx={u.wgt_idx}"
        notes = [str(n)] if index else []
        if int(w) & ~used:
            notes.append(f"reserved bits {int(w) & ~used & 0xFFFFFFFF:#x} set (not reproduced)")
        lines.append(f"{s}  # {'; '.join(notes)}" if notes else s)
    return "".join(line + "\n" for line in lines)


__all__ = [
    "assemble", "assemble_bytes", "disassemble", "format_insn", "mnemonic", "lint",
    "to_jsonl", "from_jsonl", "reserved_bits", "parse_number",
    "assemble_uops", "assemble_uops_bytes", "decode_uops", "disassemble_uops",
    "MNEMONICS", "FLAG_ALIASES",
]
