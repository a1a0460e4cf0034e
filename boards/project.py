"""``write_project``: the core Verilog, the board's top wrapper and its project files.

Per flow:

- Vivado (PYNQ-Z1, Ultra96-V2, ZCU104): ``vta_core.v``, ``vta_top.v`` (AXI interfaces with
  Vivado attributes), ``build_vivado.tcl`` (block design, address map, bitstream).
- Quartus (DE10-Nano): ``vta_core.v``, ``vta_top.v``, ``vta_hw.tcl`` (Platform Designer
  component), ``vta_qsys.tcl`` (adds VTA to the GHRD system), ``build_quartus.sh``.
- Open (ULX3S-85F): ``vta_core.v``, ``vta_ulx3s_top.v`` (PLL, serial bridge, on-chip memory),
  ``ulx3s.lpf`` and ``build_ulx3s.sh`` (yosys, nextpnr-ecp5, ecppack).

Every project also has ``vta_config.json`` and ``board.json`` (the board, its register base,
the files). The files are written into a temporary directory beside ``out_dir`` and moved in
only when all of them exist, so a failure leaves no half-written project.
"""

from __future__ import annotations

import json
from pathlib import Path

from vta.isa import Config
from vta.isa.errors import FileError
from vta.isa.fileio import atomic_dir, write_atomic

from .core import generate_core
from .quartus import build_script, component_tcl, qsys_tcl
from .registry import Board, BoardError, get_board
from .vivado import vivado_tcl
from .wrapper import core_ports, top_wrapper

#: Size of the ULX3S on-chip device memory (KiB) in emitted projects.
ULX3S_RAM_KIB = 64


def project_files(board: str | Board, cfg: Config | None = None, *,
                  core_verilog: str | None = None,
                  ram_kib: int = ULX3S_RAM_KIB) -> dict[str, str]:
    """File name -> text of the board's project (nothing written)."""
    board = get_board(board)
    cfg = cfg or board.default_config
    board.check_bus(cfg)
    core = core_verilog if core_verilog is not None else generate_core(cfg, board)
    ports = core_ports(core, "vta_core")
    files: dict[str, str] = {"vta_core.v": core}
    if board.flow == "vivado":
        files["vta_top.v"] = top_wrapper(board, ports)
        files["build_vivado.tcl"] = vivado_tcl(board, ["vta_core.v", "vta_top.v"])
    elif board.flow == "quartus":
        files["vta_top.v"] = top_wrapper(board, ports)
        widths = {name: w for name, (_, w) in ports.items()}
        files["vta_hw.tcl"] = component_tcl(board, ["vta_core.v", "vta_top.v"], widths)
        files["vta_qsys.tcl"] = qsys_tcl(board)
        files["build_quartus.sh"] = build_script(board, ["vta_core.v", "vta_top.v"])
    elif board.flow == "open":
        from . import openflow  # deferred: amaranth (openflow's ULX3S top), only for the open flow

        files["vta_ulx3s_top.v"] = openflow.top_verilog(board, cfg, ram_kib=ram_kib)
        files["ulx3s.lpf"] = openflow.LPF
        files["build_ulx3s.sh"] = openflow.build_script(board)
    else:  # pragma: no cover - the registry only has these flows
        raise BoardError(f"board {board.name} has an unknown flow {board.flow!r}")
    files["vta_config.json"] = cfg.to_json()
    files["board.json"] = json.dumps({
        **board.describe(), "config": cfg.params, "files": sorted(files) + ["board.json"],
        "top": "vta_ulx3s_top" if board.flow == "open" else "vta_top",
    }, indent=2) + "\n"
    return files


def write_project(board_name: str | Board, cfg: Config | None, out_dir: str | Path, *,
                  core_verilog: str | None = None) -> list[Path]:
    """Write the core, the board's top wrapper and its project files into ``out_dir``.

    Returns the written paths. ``cfg=None`` uses the board's default configuration. Existing
    files of the same names are replaced; other files in ``out_dir`` are left alone.
    """
    board = get_board(board_name)
    files = project_files(board, cfg, core_verilog=core_verilog)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FileError(f"output directory {out} exists and is not a directory")
    if out.is_dir():  # replace the project's files (each atomically), keep the others
        for name, text in files.items():
            write_atomic(out / name, text, "project file")
            _mark_executable(out / name)
    else:  # the whole directory at once (missing parents made: `-o build/pynq`)
        with atomic_dir(out, "board project") as tmp:
            for name, text in files.items():
                (tmp / name).write_text(text)
                _mark_executable(tmp / name)
    return [out / name for name in files]


def _mark_executable(path: Path) -> None:
    if path.suffix == ".sh":
        path.chmod(0o755)
