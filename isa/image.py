"""Program images and run results: the contract shared by every simulator backend.

A program image is the raw instruction stream (16 bytes per instruction, ending with FINISH); a
DRAM image is the device memory with physical byte address 0 at offset 0. Every backend (fsim, rtl,
tsim, perf) returns a :class:`RunResult`: the whole DRAM image after FINISH (same length as the
input), its :class:`~vta.isa.stats.RunStats`, and optionally Chrome trace events.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import Config
from .errors import FileError, ProgramError
from .fileio import read_bytes, write_atomic
from .insn import FinishInsn, Insn, decode_program, encode_program
from .layout import INSN_BYTES
from .stats import RunStats


@dataclass
class RunResult:
    """What a backend returns: DRAM after FINISH, statistics, optional trace events."""

    dram: np.ndarray
    stats: RunStats
    trace: list[dict[str, Any]] | None = None


def as_program_bytes(program: bytes | bytearray | Sequence[Insn], cfg: Config) -> bytes:
    """Accept an encoded stream or a list of instructions; return the encoded stream."""
    if isinstance(program, bytes | bytearray | memoryview):
        return bytes(program)
    return encode_program(program, cfg)


def check_program(program: bytes, cfg: Config) -> list[Insn]:
    """Decode a program image and check its framing: non-empty, ends with FINISH."""
    if not program:
        raise ProgramError("the program is empty (it must end with FINISH)")
    insns = decode_program(program, cfg)
    if not isinstance(insns[-1], FinishInsn):
        raise ProgramError(
            f"the program does not end with FINISH (last of {len(insns)} instructions is "
            f"{type(insns[-1]).__name__})")
    return insns


def as_dram(dram: bytes | bytearray | np.ndarray) -> np.ndarray:
    """A private uint8 copy of a DRAM image."""
    if isinstance(dram, np.ndarray):
        return np.array(dram, dtype=np.uint8, copy=True).reshape(-1)
    return np.frombuffer(bytes(dram), dtype=np.uint8).copy()


def read_program(path: str | Path, cfg: Config) -> bytes:
    data = read_bytes(path, "program")
    if len(data) % INSN_BYTES:
        raise FileError(
            f"program {path} is {len(data)} bytes, not a multiple of {INSN_BYTES} "
            f"(is it an instruction stream?)")
    return data


def read_dram(path: str | Path) -> np.ndarray:
    return np.frombuffer(read_bytes(path, "DRAM image"), dtype=np.uint8).copy()


def write_stats(path: str | Path, stats: RunStats) -> None:
    write_atomic(path, json.dumps(stats.to_json(), indent=2, sort_keys=True) + "\n",
                 "statistics file")


def write_trace(path: str | Path, events: list[dict[str, Any]]) -> None:
    """Chrome trace-event JSON (opens in Perfetto or chrome://tracing)."""
    write_atomic(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}) + "\n",
                 "trace file")
