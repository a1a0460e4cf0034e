"""The generated Vivado and Platform Designer scripts run in tclsh against models of the vendor
commands (tests/boards/tclmodel/*.tcl): each model knows the pin, interface and address-segment
names of the IPs the scripts use, takes the VTA wrapper's ports from the generated Verilog, and
fails like the vendor tool on a pattern that matches nothing, an unknown property, an
unconnected required pin, a clock-frequency mismatch or overlapping addresses. The address map
the model builds is then checked against each board's documented windows.

No vendor tool runs here: what this checks and what it cannot is listed in docs/boards.md.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from vta.boards import all_boards, get_board
from vta.boards.project import write_project
from vta.hw.regs import CELL_NAME
from vta.isa import Config

from ..conftest import require_tool

MODELS = Path(__file__).resolve().parent / "tclmodel"
VIVADO_BOARDS = [b.name for b in all_boards() if b.flow == "vivado"]

#: AXI signals a block-design interface of each protocol must have (Vivado's aximm bus).
AXI_REQUIRED = {
    "AXI4LITE": {"AWADDR", "AWVALID", "AWREADY", "WDATA", "WSTRB", "WVALID", "WREADY", "BRESP",
                 "BVALID", "BREADY", "ARADDR", "ARVALID", "ARREADY", "RDATA", "RRESP", "RVALID",
                 "RREADY"},
}
AXI_REQUIRED["AXI4"] = AXI_REQUIRED["AXI4LITE"] | {"AWLEN", "AWSIZE", "AWBURST", "WLAST",
                                                   "ARLEN", "ARSIZE", "ARBURST", "RLAST"}


class ModelFailure(AssertionError):
    """The vendor-command model rejected a script."""


def tclsh() -> str:
    return require_tool("tclsh")  # (Debian's tcl; make tools installs it)


_PORT = re.compile(r"((?:\s*\(\*[^*]*\*\)\s*)*)\s*(input|output)\s+wire\s+(?:\[(\d+):0\]\s*)?"
                   r"(\w+)\s*[,)]")
_ATTR = re.compile(r'\(\*\s*(\w+)\s*=\s*"([^"]*)"\s*\*\)')


def _params(text: str) -> dict[str, str]:
    return dict(p.strip().split(" ", 1) for p in text.split(",") if p.strip())


def module_reference(verilog: str, module: str = "vta_top") -> str:
    """The Tcl description (pins, interfaces, clock, declared FREQ_HZ) Vivado would infer for
    ``module`` of the generated Verilog from its ports and X_INTERFACE_* attributes."""
    head = verilog[verilog.index(f"module {module} ("):]
    head = head[:head.index(");")]
    pins: dict[str, tuple[str, str]] = {}
    intf: dict[str, dict] = {}
    clock, freq, busif = None, [], set()
    for attrs, d, _msb, name in _PORT.findall(head + ")"):
        a = dict(_ATTR.findall(attrs))
        d = "in" if d == "input" else "out"
        info = a.get("X_INTERFACE_INFO", "")
        params = _params(a.get("X_INTERFACE_PARAMETER", ""))
        if "FREQ_HZ" in params:
            freq.append((name, int(params["FREQ_HZ"])))
        if ":interface:aximm:" in info:
            _, bus, logical = info.split()
            ent = intf.setdefault(bus, {"signals": {}, "params": {}})
            ent["signals"][logical] = (d, name)
            ent["params"].update(params)
            continue
        kind = "data"
        if ":signal:clock:" in info:
            kind, clock = "clk", name
            busif = set(params.get("ASSOCIATED_BUSIF", "").split(":"))
        elif ":signal:reset:" in info:
            kind = "rst"
        elif ":signal:interrupt:" in info:
            kind = "intr"
        pins[name] = (d, kind)
    if clock is None:
        raise ModelFailure(f"{module} has no port with a clock X_INTERFACE_INFO")
    out_intf = []
    for bus, ent in intf.items():
        proto = ent["params"].get("PROTOCOL", "AXI4")
        missing = AXI_REQUIRED[proto] - set(ent["signals"])
        if missing:
            raise ModelFailure(f"interface {bus} ({proto}) lacks {sorted(missing)}")
        if bus not in busif:
            raise ModelFailure(f"interface {bus} is not associated with clock {clock}")
        mode = "master" if ent["signals"]["AWADDR"][0] == "out" else "slave"
        width = int(ent["params"].get("ADDR_WIDTH", 32))
        out_intf.append(f"{bus} {{mode {mode} addr_width {width}}}")
    pin_text = " ".join(f"{n} {{dir {d} kind {k}}}" for n, (d, k) in pins.items())
    freq_text = " ".join(f"{n} {hz}" for n, hz in freq)
    return (f"module {module} clock {clock} pins {{{pin_text}}} intf {{{' '.join(out_intf)}}} "
            f"freq_hz {{{freq_text}}}")


def run_model(model: str, project: Path, driver: str) -> list[list[str]]:
    """Run ``driver`` (Tcl) in ``project`` after sourcing the model; return the report lines."""
    report = project / "model_report.txt"
    report.unlink(missing_ok=True)
    script = project / "model_driver.tcl"
    script.write_text(f"source {{{MODELS / model}}}\n{driver}\n")
    env = {**os.environ, "VTA_TCL_MODEL_REPORT": str(report)}
    res = subprocess.run([tclsh(), str(script)], capture_output=True, text=True, cwd=project,
                         env=env, timeout=60)
    if res.returncode != 0:
        raise ModelFailure((res.stderr.strip().splitlines() or ["(no message)"])[0])
    return [line.split() for line in report.read_text().splitlines()]


def run_vivado(project: Path, *, board_parts: str = "") -> list[list[str]]:
    ref = module_reference((project / "vta_top.v").read_text())
    return run_model("vivado_model.tcl", project,
                     f"set ::vta_ref {{{ref}}}\nset ::board_parts {{{board_parts}}}\n"
                     f"source {{{project / 'build_vivado.tcl'}}}")


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> dict[str, Path]:
    """Every board's project for the small config (the Tcl does not depend on the config)."""
    from vta.hw.verilog import generate

    cfg = Config.preset("small")
    cores = {w: generate(cfg.with_bus_width(w)) for w in (64, 128)}
    root = tmp_path_factory.mktemp("tclmodel")
    out = {}
    for b in all_boards():
        if b.flow in ("vivado", "quartus"):
            out[b.name] = root / b.name
            write_project(b, cfg.with_bus_width(b.bus_width), out[b.name],
                          core_verilog=cores[b.bus_width])
    return out


def fresh(projects: dict[str, Path], name: str, tmp_path: Path) -> Path:
    d = tmp_path / name
    shutil.copytree(projects[name], d)
    return d


def _segments(report: list[list[str]]) -> dict[tuple[str, str], tuple[int, int]]:
    return {(r[1], r[2]): (int(r[3], 0), int(r[4], 0)) for r in report if r[0] == "seg"}


# ---------------------------------------------------------------------------- Vivado
@pytest.mark.unit
@pytest.mark.parametrize("name", VIVADO_BOARDS)
def test_vivado_script_builds_the_documented_address_map(projects, tmp_path, name) -> None:
    b = get_board(name)
    report = run_vivado(fresh(projects, name, tmp_path))
    segs = _segments(report)
    # the registers: at the board's base, inside the PS master's documented window
    reg = segs[("ps/Data", f"{CELL_NAME}/s_axi_control/reg0")]
    lo, size = b.extra["reg_window"]
    assert reg == (b.reg_base, b.reg_span)
    assert lo <= reg[0] and reg[0] + reg[1] <= lo + size
    # the VTA master: exactly the low DDR segment, within its 32-bit reach
    master = {seg: v for (space, seg), v in segs.items() if space == f"{CELL_NAME}/m_axi_gmem"}
    assert master == {f"ps/{b.extra['ps_ddr_segment']}": b.extra["ddr_window"]}
    assert sum(master[f"ps/{b.extra['ps_ddr_segment']}"]) <= 1 << 32
    # one cell named as the PYNQ runtime looks it up
    cells = {r[1]: r[2] for r in report if r[0] == "cell"}
    assert cells[CELL_NAME] == "module"
    from vta.runtime.pynq import PynqDevice, PynqPlatform

    for cls in (PynqDevice, PynqPlatform):
        assert inspect.signature(cls).parameters["ip_name"].default == CELL_NAME
    # the interrupt reaches the PS
    irq = [r for r in report if r[0] == "irq"]
    assert len(irq) == 1 and f"{CELL_NAME}/interrupt" in irq[0]


@pytest.mark.unit
def test_zynqmp_clock_is_what_the_ps_makes_not_what_was_asked(projects, tmp_path) -> None:
    """Ultra96-V2 asks for 200 MHz; the PS makes 187.5 (1500 / 8) and every clock pin gets it."""
    report = run_vivado(fresh(projects, "ultra96-v2", tmp_path))
    clocks = {r[1]: float(r[2]) for r in report if r[0] == "clock"}
    assert clocks[f"{CELL_NAME}/clk"] == 187.5
    assert set(clocks.values()) == {187.5}


@pytest.mark.unit
@pytest.mark.parametrize("name", VIVADO_BOARDS)
def test_vivado_script_runs_with_the_board_part_installed(projects, tmp_path, name) -> None:
    b = get_board(name)
    report = run_vivado(fresh(projects, name, tmp_path), board_parts=b.extra["board_part"])
    assert any(r[0] == "seg" for r in report)


# The model rejects what Vivado rejects: each mutation re-creates one defect of issue #24.
VIVADO_MUTATIONS = [
    ("ultra96-v2", "build_vivado.tcl", "SAXIGP2/HP0_DDR_LOW]", "S_AXI_HP0_FPD/*DDR*]",
     "matches nothing"),
    ("zcu104", "build_vivado.tcl", "SAXIGP2/HP0_DDR_LOW]", "SAXIGP2/*DDR*]",
     "outside the apertures"),
    ("ultra96-v2", "vta_top.v", 'ASSOCIATED_RESET rst_n"',
     'ASSOCIATED_RESET rst_n, FREQ_HZ 200000000"', "does not match"),
    ("pynq-z1", "build_vivado.tcl", "[get_bd_pins ic_mem/aclk]", "",
     "ic_mem/aclk is not connected"),
    ("pynq-z1", "build_vivado.tcl", "CONFIG.PCW_USE_S_AXI_HP0 {1}", "CONFIG.PCW_USE_S_AXI_HP9 {1}",
     "no property CONFIG.PCW_USE_S_AXI_HP9"),
    ("pynq-z1", "build_vivado.tcl", "-offset 0x43C00000", "-offset 0x00000000",
     "outside the apertures"),
    ("zcu104", "build_vivado.tcl", "CONFIG.PSU__USE__M_AXI_GP1 {0}",
     "CONFIG.PSU__USE__M_AXI_GP1 {1}", "maxihpm1_fpd_aclk is not connected"),
]


@pytest.mark.unit
@pytest.mark.parametrize("name,file,old,new,message", VIVADO_MUTATIONS)
def test_vivado_model_rejects_defects(projects, tmp_path, name, file, old, new, message) -> None:
    d = fresh(projects, name, tmp_path)
    text = (d / file).read_text()
    assert old in text
    (d / file).write_text(text.replace(old, new))
    with pytest.raises(ModelFailure, match=re.escape(message)):
        run_vivado(d)


@pytest.mark.unit
def test_vivado_model_rejects_overlapping_segments(projects, tmp_path) -> None:
    d = fresh(projects, "pynq-z1", tmp_path)
    tcl = (d / "build_vivado.tcl").read_text()
    extra = ("assign_bd_address -offset 0x43C08000 -range 64K -target_address_space $ps_space "
             "[get_bd_addr_segs vta/s_axi_control/*] -force\nvalidate_bd_design")
    (d / "build_vivado.tcl").write_text(tcl.replace("validate_bd_design", extra, 1))
    with pytest.raises(ModelFailure, match="overlaps"):
        run_vivado(d)


# ---------------------------------------------------------------------------- Platform Designer
def run_qsys(project: Path) -> list[list[str]]:
    top = (project / "vta_top.v").read_text()
    ports = " ".join(f"{n} {{{'Input' if d == 'input' else 'Output'} {int(m) + 1 if m else 1}}}"
                     for _a, d, m, n in _PORT.findall(top[top.index("module vta_top ("):]))
    return run_model("qsys_model.tcl", project,
                     f"set ::vta_ports {{{ports}}}\n"
                     f"source {{{project / 'vta_hw.tcl'}}}\ncheck_component\n"
                     f"source {{{project / 'vta_qsys.tcl'}}}")


@pytest.mark.unit
def test_qsys_script_builds_the_documented_address_map(projects, tmp_path) -> None:
    b = get_board("de10-nano")
    report = run_qsys(fresh(projects, "de10-nano", tmp_path))
    lw_base, lw_size = b.extra["lw_bridge"]
    lw = {r[2]: (int(r[3], 0), int(r[4], 0)) for r in report
          if r[0] == "map" and r[1] == "hps_0.h2f_lw_axi_master"}
    vta = lw[f"{CELL_NAME}.s_axi_control"]
    assert lw_base + vta[0] == b.reg_base and vta[1] == b.reg_span
    assert vta[0] + vta[1] <= lw_size
    # the VTA master reaches DRAM through the FPGA-to-HPS bridge, whose ACP window the
    # runtime addresses (bridge address = acp_alias + physical address)
    master = {r[2]: int(r[3], 0) for r in report
              if r[0] == "map" and r[1] == f"{CELL_NAME}.m_axi_gmem"}
    assert master == {"hps_0.f2h_axi_slave": 0}
    irqs = {r[2]: int(r[3]) for r in report if r[0] == "irq"}
    assert irqs[f"{CELL_NAME}.irq"] == b.extra["irq"]
    assert ["bridge", "hps_0.f2h_axi_slave", str(b.bus_width)] in report


QSYS_MUTATIONS = [
    ("vta_qsys.tcl", "{0x00020000}", "{0x00000000}", "overlaps"),
    ("vta_qsys.tcl", "irqNumber {3}", "irqNumber {2}", "irq 2"),
    ("vta_qsys.tcl", "add_connection vta_pll.outclk0 hps_0.f2h_axi_clock\n", "",
     "hps_0.f2h_axi_clock is not connected"),
    ("vta_qsys.tcl", "F2S_Width {2}", "F2S_Width {0}", "hps_0 has no interface f2h_axi_"),
    ("vta_hw.tcl", "m_axi_gmem_wlast wlast Output 1", "m_axi_gmem_wlast wlast Output 2",
     "m_axi_gmem_wlast"),
    ("vta_qsys.tcl", "hps_0 LWH2F_Enable", "hps_0 LWH2F_Enabled", "LWH2F_Enabled"),
]


@pytest.mark.unit
@pytest.mark.parametrize("file,old,new,message", QSYS_MUTATIONS)
def test_qsys_model_rejects_defects(projects, tmp_path, file, old, new, message) -> None:
    d = fresh(projects, "de10-nano", tmp_path)
    text = (d / file).read_text()
    assert old in text
    (d / file).write_text(text.replace(old, new))
    with pytest.raises(ModelFailure, match=re.escape(message)):
        run_qsys(d)
