"""Run statistics: what every backend (fsim, perf, rtl, tsim, a board) reports about a run.

:class:`RunStats` is the one statistics type. Every backend fills the program-level counts
(instructions per opcode and module, micro-op iterations, bytes per memory type); the
cycle-level backends (perf, rtl, tsim, boards) add ``cycles``, and the simulators of the RTL and
the performance model per-module busy / token-wait / memory-wait cycles (``modules``).
``vta sim --stats`` writes :meth:`RunStats.to_json`; :meth:`RunStats.from_json` reads it back.

>>> from vta.isa import Config, FinishInsn
>>> s = program_stats([FinishInsn()], Config(), backend="fsim")
>>> s.insn_count, s.insns_per_module["compute"], s.cycles
(1, 1, None)
>>> RunStats.from_json(s.to_json()) == s
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .config import Config
from .deps import MODULES
from .errors import FileError
from .insn import AluInsn, GemmInsn, Insn, MemInsn
from .layout import MemType, Opcode
from .records import JsonRecord

#: Memory types a LOAD moves (the keys of :attr:`RunStats.bytes_loaded`).
LOADED_TYPES = tuple(m.name for m in MemType if m != MemType.OUT)
OPCODE_NAMES = tuple(op.name for op in Opcode)
_LOADED_BY_VALUE = {m.value: m.name for m in MemType if m != MemType.OUT}


class StatsError(FileError):
    """A statistics record that is not what the kit writes (a missing or mistyped field)."""


@dataclass(frozen=True)
class ModuleCycles(JsonRecord):
    """One module's cycles in a cycle-level run."""

    error = StatsError
    what = "statistics"

    insns: int       #: instructions the module completed (counted by the timing model or RTL)
    busy: int        #: cycles with an instruction in progress, its token and memory waits included
    token_wait: int  #: cycles waiting for a dependency token
    mem_wait: int    #: cycles waiting for the memory port


@dataclass(frozen=True)
class AxiCounts(JsonRecord):
    """Bursts and beats the simulated AXI memory served (rtl, tsim)."""

    error = StatsError
    what = "statistics"

    read_bursts: int
    write_bursts: int
    read_beats: int
    write_beats: int


@dataclass(frozen=True)
class RunStats(JsonRecord):
    """The statistics of one run (see the module doc). Fields after ``bytes_stored`` are
    ``None`` where a backend does not measure them."""

    error = StatsError
    what = "statistics"
    derived = ("useful_macs", "gemm_utilization")

    backend: str                     #: fsim, perf, rtl, tsim or a board's device
    insn_count: int                  #: instructions run (FINISH included)
    insns_per_opcode: dict[str, int]  #: LOAD, STORE, GEMM, FINISH, ALU
    insns_per_module: dict[str, int]  #: load, compute, store
    gemm_uops: int                   #: GEMM micro-op iterations
    gemm_useful_uops: int            #: those that multiply-accumulate (not reset_reg)
    alu_uops: int                    #: ALU micro-op iterations
    macs_per_uop: int                #: MACs of one GEMM micro-op iteration (the configuration's)
    bytes_loaded: dict[str, int]     #: per memory type: UOP, WGT, INP, ACC
    bytes_stored: int
    cycles: int | None = None        #: from launch to FINISH
    bus_width: int | None = None     #: memory port width (bits) of a cycle-level model
    modules: dict[str, ModuleCycles] | None = None
    memory_port_busy: int | None = None  #: cycles the memory port moved data (perf)
    hw_counters: dict[str, int] | None = None  #: the core's counter registers (rtl, tsim)
    axi: AxiCounts | None = None
    seconds: float | None = None     #: wall-clock seconds of the run on the host

    def __post_init__(self) -> None:
        for name, want in (("insns_per_opcode", OPCODE_NAMES), ("insns_per_module", MODULES),
                           ("bytes_loaded", LOADED_TYPES)):
            _check_keys(name, getattr(self, name), want)
        if self.modules is not None:
            _check_keys("modules", self.modules, MODULES)

    @property
    def useful_macs(self) -> int:
        """Multiply-accumulates the GEMM core performed (reset iterations do none)."""
        return self.gemm_useful_uops * self.macs_per_uop

    @property
    def gemm_utilization(self) -> float | None:
        """Useful MACs / (cycles x peak MACs per cycle); None without cycles."""
        if self.cycles is None:
            return None
        return self.gemm_useful_uops / self.cycles if self.cycles else 0.0

    def replace(self, **changes: Any) -> RunStats:
        """A copy with ``changes`` (e.g. the cycles a board counted, the wall time)."""
        return replace(self, **changes)


def _check_keys(name: str, got: dict[str, Any], want: Sequence[str]) -> None:
    if set(got) != set(want):
        raise StatsError(f"statistics: field {name} must have the keys {', '.join(want)}, "
                         f"not {', '.join(map(str, got)) or 'none'}")


def uop_iterations(insn: GemmInsn | AluInsn) -> int:
    """Micro-op iterations of a GEMM or ALU instruction."""
    return max(insn.uop_end - insn.uop_bgn, 0) * insn.iter_out * insn.iter_in


#: Opcode names by value (``Opcode(v).name`` costs an enum lookup per instruction)
_OPCODE_NAME = {int(o): o.name for o in Opcode}


def program_stats(insns: Sequence[Insn], cfg: Config, *, backend: str,
                  **timing: Any) -> RunStats:
    """The statistics of running ``insns`` to FINISH, from the program alone (what a
    cycle-level backend counts besides time; fsim counts the same as it runs). ``timing``:
    the cycle-level fields (``cycles=``, ``modules=``, ...)."""
    per_opcode = dict.fromkeys(OPCODE_NAMES, 0)
    per_module = dict.fromkeys(MODULES, 0)
    loaded = dict.fromkeys(LOADED_TYPES, 0)
    stored = gemm = useful = alu = 0
    for insn in insns:
        per_opcode[_OPCODE_NAME[insn.opcode]] += 1
        per_module[insn.module] += 1
        if isinstance(insn, MemInsn):
            nbytes = insn.y_size * insn.x_size * cfg.elem_bytes(insn.memory_type)
            if insn.opcode == Opcode.STORE:
                stored += nbytes
            elif insn.memory_type in _LOADED_BY_VALUE:
                loaded[_LOADED_BY_VALUE[insn.memory_type]] += nbytes
        elif isinstance(insn, GemmInsn):
            n = uop_iterations(insn)
            gemm += n
            useful += 0 if insn.reset_reg else n
        elif isinstance(insn, AluInsn):
            alu += uop_iterations(insn)
    return RunStats(backend=backend, insn_count=len(insns), insns_per_opcode=per_opcode,
                    insns_per_module=per_module, gemm_uops=gemm, gemm_useful_uops=useful,
                    alu_uops=alu, macs_per_uop=cfg.macs_per_cycle, bytes_loaded=loaded,
                    bytes_stored=stored, **timing)


__all__ = ["RunStats", "ModuleCycles", "AxiCounts", "StatsError", "program_stats",
           "uop_iterations", "LOADED_TYPES", "OPCODE_NAMES"]
