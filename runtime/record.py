"""Recorded programs: instruction streams with relocations, for ahead-of-time modules.

A recording queue (:meth:`CommandQueue.recorder`) produces a :class:`RecordedProgram`: the
instruction stream, the micro-op words it loads (its own "uop segment") and one
:class:`Relocation` per LOAD/STORE whose ``dram_base`` must be rebased. Data addresses are kept
relative to the arena's start (in elements of the instruction's memory type), micro-op addresses
relative to the uop segment, so the program runs against an arena at any base
(:meth:`RecordedProgram.relocate`, :meth:`RecordedProgram.run`).

File form (:meth:`to_bytes`): ``b"VTAREC1\\n"``, a 4-byte little-endian header length, a JSON
header (config, relocations, statistics, sizes), the program, the micro-op words.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vta.isa import Config
from vta.isa.errors import FileError
from vta.isa.fileio import loads_json, read_bytes, write_atomic
from vta.isa.layout import INSN_BYTES

from .counters import RecordStats
from .errors import QueueError
from .target import Target

if TYPE_CHECKING:
    from vta.isa.stats import RunStats


MAGIC = b"VTAREC1\n"


@dataclass(frozen=True)
class Relocation:
    """Instruction ``index`` reads/writes DRAM at element ``offset`` (of ``elem_bytes`` bytes)
    from the start of the arena (``kind="arena"``) or of the uop segment (``kind="uop"``)."""

    index: int
    kind: str
    elem_bytes: int
    offset: int

    def to_list(self) -> list[Any]:
        return [self.index, self.kind, self.elem_bytes, self.offset]


@dataclass
class RecordedProgram:
    """A relocatable program: ``program`` (ends with FINISH), ``relocations``, ``uops``."""

    cfg: Config
    program: bytes
    relocations: list[Relocation]
    uops: bytes = b""
    arena_base: int = 0
    stats: RecordStats | None = None

    @property
    def insn_count(self) -> int:
        return len(self.program) // INSN_BYTES

    def relocate(self, arena_base: int, uop_base: int | None = None) -> bytes:
        """The program with every relocated ``dram_base`` rebased: data against the arena
        starting at byte address ``arena_base``, micro-ops against ``uop_base``."""
        if self.uops and uop_base is None:
            raise QueueError("this program loads micro-ops: give uop_base (the byte address "
                             "where its micro-op words are placed)")
        fld = self.cfg.layouts.mem["dram_base"]
        clear = ~(fld.mask << fld.offset)
        out = bytearray(self.program)
        for r in self.relocations:
            base = arena_base if r.kind == "arena" else uop_base
            assert base is not None
            if base % r.elem_bytes:
                raise QueueError(
                    f"cannot relocate instruction {r.index} to base 0x{base:x}: not a multiple "
                    f"of its element size ({r.elem_bytes} B); align the arena to "
                    f"{r.elem_bytes} B")
            addr = base // r.elem_bytes + r.offset
            if addr > fld.mask:
                raise QueueError(f"instruction {r.index}: element address {addr} does not fit "
                                 f"{fld.width} bits after relocation")
            k = r.index * INSN_BYTES
            word = int.from_bytes(out[k:k + INSN_BYTES], "little")
            word = (word & clear) | (addr << fld.offset)
            out[k:k + INSN_BYTES] = word.to_bytes(INSN_BYTES, "little")
        return bytes(out)

    def run(self, device: Target, *, timeout: float | None = None) -> RunStats:
        """Relocate against ``device``'s arena and run; the uop segment is placed in the arena
        for the run and freed afterwards."""
        return device.run_recorded(self, timeout=timeout)

    # ------------------------------------------------------------------ files
    def to_bytes(self) -> bytes:
        header = {
            "config": self.cfg.to_dict(), "arena_base": self.arena_base,
            "insn_bytes": len(self.program), "uop_bytes": len(self.uops),
            "relocations": [r.to_list() for r in self.relocations],
            "stats": self.stats.to_json() if self.stats is not None else {},
        }
        hb = json.dumps(header, sort_keys=True).encode()
        return MAGIC + len(hb).to_bytes(4, "little") + hb + self.program + self.uops

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "recorded program") -> RecordedProgram:
        if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
            raise FileError(f"{source} is not a recorded VTA program (bad magic)")
        n = int.from_bytes(data[len(MAGIC):len(MAGIC) + 4], "little")
        start = len(MAGIC) + 4
        try:
            header = loads_json(data[start:start + n], source)
            cfg = Config.from_dict(header["config"], source=source)
            p0 = start + n
            p1 = p0 + int(header["insn_bytes"])
            p2 = p1 + int(header["uop_bytes"])
            relocs = [Relocation(int(i), str(k), int(e), int(o))
                      for i, k, e, o in header["relocations"]]
            stats = RecordStats.from_json(header["stats"]) if header.get("stats") else None
        except (ValueError, KeyError, TypeError, FileError) as e:
            raise FileError(f"{source} has a corrupt header: {e}") from None
        if p2 != len(data) or (p1 - p0) % INSN_BYTES:
            raise FileError(f"{source} is truncated or has trailing bytes "
                            f"({len(data)} B, expected {p2})")
        return cls(cfg, data[p0:p1], relocs, data[p1:p2], int(header.get("arena_base", 0)),
                   stats)

    def save(self, path: str | Path) -> None:
        write_atomic(path, self.to_bytes(), "recorded program")

    @classmethod
    def load(cls, path: str | Path) -> RecordedProgram:
        return cls.from_bytes(read_bytes(path, "recorded program"), source=str(path))


__all__ = ["RecordedProgram", "Relocation"]
