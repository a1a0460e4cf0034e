"""Project emission for every board: the files, their contents (part, register base, clock,
bus width), Tcl that parses, atomic writes, and a Verilator lint of all emitted Verilog."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from vta.boards import BoardError, all_boards, get_board
from vta.boards.project import write_project
from vta.boards.wrapper import check_core_ports, core_ports
from vta.isa import Config

from ..conftest import require_tool

BOARDS = [b.name for b in all_boards()]
FILES = {
    "vivado": {"vta_core.v", "vta_top.v", "build_vivado.tcl"},
    "quartus": {"vta_core.v", "vta_top.v", "vta_hw.tcl", "vta_qsys.tcl", "build_quartus.sh"},
    "open": {"vta_core.v", "vta_ulx3s_top.v", "ulx3s.lpf", "build_ulx3s.sh"},
}


@pytest.fixture(scope="module")
def cores(small_cfg: Config) -> dict[int, str]:
    """The real core's Verilog for the small config, per bus width (generated once)."""
    from vta.hw.verilog import generate

    return {w: generate(small_cfg.with_bus_width(w)) for w in (64, 128)}


@pytest.fixture(scope="module")
def projects(tmp_path_factory, cores, small_cfg) -> dict[str, object]:
    root = tmp_path_factory.mktemp("projects")
    out = {}
    for name in BOARDS:
        b = get_board(name)
        out[name] = root / name
        write_project(name, small_cfg.with_bus_width(b.bus_width), out[name],
                      core_verilog=cores[b.bus_width])
    return out


@pytest.mark.unit
@pytest.mark.parametrize("name", BOARDS)
def test_project_files_and_contents(projects, small_cfg, name: str) -> None:
    b = get_board(name)
    d = projects[name]
    files = {p.name for p in d.iterdir()}
    assert files == FILES[b.flow] | {"vta_config.json", "board.json"}
    # the configuration written is the project's, its bus the board's memory port
    assert Config.from_json(d / "vta_config.json") == small_cfg.with_bus_width(b.bus_width)
    meta = json.loads((d / "board.json").read_text())
    assert meta["part"] == b.part and set(meta["files"]) == files
    core = (d / "vta_core.v").read_text()
    ports = core_ports(core)
    assert ports["m_axi_rdata"] == ("input", b.bus_width)
    base = f"{b.reg_base:08X}"
    if b.flow == "vivado":
        tcl = (d / "build_vivado.tcl").read_text()
        assert f"-part {b.part}" in tcl and f"-offset 0x{base}" in tcl
        assert "write_bitstream" in tcl and b.extra["ps_slave"].split("_")[-1] in tcl
        top = (d / "vta_top.v").read_text()
        assert f"DATA_WIDTH {b.bus_width}" in top
        assert "FREQ_HZ" not in top  # the PS's real clock propagates (ZynqMP: 187.5 for 200)
    elif b.flow == "quartus":
        qsys = (d / "vta_qsys.tcl").read_text()
        assert "F2S_Width {2}" in qsys and "hps_0.f2h_axi_slave" in qsys
        lw = b.reg_base - 0xFF20_0000
        assert lw == 0x20000
        assert f"baseAddress \\\n    {{0x{lw:08x}}}" in qsys
        hw = (d / "vta_hw.tcl").read_text()
        assert f"add_interface_port m_axi_gmem m_axi_gmem_wdata wdata Output {b.bus_width}" in hw
        assert b.part in (d / "build_quartus.sh").read_text()
    else:
        sh = (d / "build_ulx3s.sh").read_text()
        assert "--85k" in sh and "CABGA381" in sh and f"--freq {b.clock_mhz:g}" in sh
        lpf = (d / "ulx3s.lpf").read_text()
        assert 'LOCATE COMP "clk_25mhz" SITE "G2"' in lpf
        top = (d / "vta_ulx3s_top.v").read_text()
        assert "EHXPLLL" in top and "vta_core" in top


@pytest.mark.unit
@pytest.mark.parametrize("name", BOARDS)
def test_tcl_scripts_are_complete_tcl(projects, name: str) -> None:
    """Every Tcl script has balanced braces, brackets and quotes (Tcl's own ``info complete``)."""
    tclsh = require_tool("tclsh")
    for tcl in projects[name].glob("*.tcl"):
        probe = f"set f [open {{{tcl}}}]; puts [info complete [read $f]]"
        out = subprocess.run([tclsh], input=probe, capture_output=True, text=True, timeout=30)
        assert out.stdout.strip() == "1", f"{tcl.name} is not complete Tcl"


@pytest.mark.unit
@pytest.mark.parametrize("name", ["de10-nano", "ulx3s-85f"])
def test_shell_scripts_parse(projects, name: str) -> None:
    for script in projects[name].glob("*.sh"):
        out = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True,
                             timeout=30)
        assert out.returncode == 0, out.stderr
        assert script.stat().st_mode & 0o100


@pytest.mark.parametrize("name", BOARDS)
def test_verilator_lint_has_no_errors(projects, name: str) -> None:
    require_tool("verilator")
    from vta.boards.lint import lint_project

    res = lint_project(projects[name])
    assert res.errors == [], "\n".join(res.errors[:10])


def test_verilator_lint_reports_errors(projects, tmp_path) -> None:
    """The lint check can fail: a wrapper that connects a port the core does not have."""
    require_tool("verilator")
    from vta.boards.lint import lint_project

    bad = tmp_path / "bad"
    shutil.copytree(projects["pynq-z1"], bad)
    top = (bad / "vta_top.v").read_text().replace(".interrupt(interrupt)", ".irq(interrupt)")
    (bad / "vta_top.v").write_text(top)
    res = lint_project(bad)
    assert res.errors and any("irq" in e for e in res.errors)


@pytest.mark.unit
def test_wrapper_rejects_a_core_without_the_contract_ports(cores) -> None:
    ports = core_ports(cores[64])
    check_core_ports(ports, 64)
    with pytest.raises(BoardError, match="m_axi_wlast"):
        check_core_ports({k: v for k, v in ports.items() if k != "m_axi_wlast"}, 64)
    with pytest.raises(BoardError, match="m_axi_rdata"):
        check_core_ports(ports, 128)


@pytest.mark.unit
def test_write_is_atomic(tmp_path, cores, small_cfg) -> None:
    out = tmp_path / "proj"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "vta_top.v").write_text("old")
    paths = write_project("pynq-z1", small_cfg, out, core_verilog=cores[64])
    assert (out / "notes.txt").read_text() == "mine"
    assert "module vta_top" in (out / "vta_top.v").read_text()
    assert all(p.exists() for p in paths)
    # A core that breaks the port contract: nothing is written, no temporary left behind.
    broken = cores[128].replace("m_axi_wlast", "m_axi_wlost")
    with pytest.raises(BoardError, match="m_axi_wl"):
        write_project("zcu104", small_cfg.with_bus_width(128), tmp_path / "new",
                      core_verilog=broken)
    # a core whose bus is not the board's memory port: refused before anything is written
    with pytest.raises(BoardError, match="64-bit bus .* zcu104 has a 128-bit memory port"):
        write_project("zcu104", small_cfg, tmp_path / "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]


@pytest.mark.unit
def test_verilog_board_uses_the_board_default_config(tmp_path) -> None:
    """`vta verilog --board ulx3s-85f` without --config builds the board's own (1x4x4) core;
    --preset replaces it."""
    from vta.boards import get_board
    from vta.cli.main import main
    from vta.isa import Config

    assert main(["verilog", "--board", "ulx3s-85f", "-o", str(tmp_path / "p")]) == 0
    written = Config.from_json(tmp_path / "p" / "vta_config.json")
    assert written == get_board("ulx3s-85f").default_config and written.block == 4
    assert main(["verilog", "--board", "ulx3s-85f", "--preset", "default",
                 "-o", str(tmp_path / "q")]) == 0
    assert Config.from_json(tmp_path / "q" / "vta_config.json") == Config.preset("default")


@pytest.mark.unit
def test_board_commands_take_core_options(tmp_path, capsys) -> None:
    """``--core-options`` replaces the board's variants in the generated core (here the
    operand registers in front of the multipliers, which the ULX3S does not build by default);
    bad names are one-line errors of every board command, before any tool runs."""
    from vta.cli.main import main

    assert main(["verilog", "--board", "ulx3s-85f", "--preset", "small",
                 "-o", str(tmp_path / "p")]) == 0
    assert "inp_c_0_0_0" not in (tmp_path / "p" / "vta_core.v").read_text()
    assert main(["verilog", "--board", "ulx3s-85f", "--preset", "small", "--core-options",
                 "replicate_operands", "-o", str(tmp_path / "q")]) == 0
    assert "inp_c_0_0_0" in (tmp_path / "q" / "vta_core.v").read_text()
    capsys.readouterr()
    for cmd in (["synth", "--board", "pynq-z1"], ["build", "--board", "ulx3s-85f", "-o",
                                                  str(tmp_path / "b")]):
        assert main([*cmd, "--preset", "small", "--core-options", "fast_please"]) == 2
        err = capsys.readouterr().err
        assert "fast_please" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "b").exists()


@pytest.mark.unit
def test_only_the_operand_stage_adds_a_gemm_cycle() -> None:
    """Only a register stage in front of the multipliers (``replicate_operands`` in the
    fabric, ``dsp_registers`` inside ECP5's MULT18X18D) adds a GEMM pipeline cycle, and no
    board builds one by default yet (the fabric stage did not route better than the plain
    core at 100 MHz; the DSPs' registers are not measured yet: docs/boards.md)."""
    from vta.boards import all_boards, get_board
    from vta.hw.options import CoreOptions

    latency = {b.name: CoreOptions.from_dict(b.core_options).extra_gemm_latency
               for b in all_boards()}
    assert latency == {"pynq-z1": 0, "ultra96-v2": 0, "zcu104": 0, "de10-nano": 0,
                       "ulx3s-85f": 0}
    assert CoreOptions(dsp_registers=True).extra_gemm_latency == 1
    assert CoreOptions(replicate_operands=True).extra_gemm_latency == 1
    assert CoreOptions(replicate_control=True, pack_multipliers=True).extra_gemm_latency == 0
    assert get_board("ulx3s-85f").clock_mhz == 90.0


@pytest.mark.unit
def test_family_primitives_only_change_the_ecp5_core(small_cfg: Config) -> None:
    """Generated for its family, a board's core instantiates that family's primitives only on
    ECP5 with ``dsp_registers`` (16 MULT18X18D for the 1x4x4 GEMM, none in the simulation
    Verilog); every board's own core (the Xilinx and Intel ones included) is the simulation
    Verilog byte for byte."""
    from vta.hw.verilog import generate

    for board in all_boards():
        cfg = small_cfg.with_bus_width(board.bus_width)
        synth = generate(cfg, options=board.core_options, family=board.family)
        assert synth == generate(cfg, options=board.core_options), board.name
    ulx3s = get_board("ulx3s-85f")
    cfg, dsp = small_cfg.with_bus_width(ulx3s.bus_width), {"dsp_registers": True}
    assert generate(cfg, options=dsp, family="ecp5").count("MULT18X18D #(") == 16
    assert "MULT18X18D" not in generate(cfg, options=dsp)


@pytest.mark.unit
def test_xilinx_boards_pack_multipliers_by_default(tmp_path) -> None:
    """The Xilinx boards' core has packed multipliers (two GEMM products per DSP48), the ECP5
    and Cyclone V boards' not; ``--core-options ''`` builds the plain core."""
    from vta.boards import all_boards
    from vta.cli.main import main

    packing = {b.name: b.core_options.get("pack_multipliers", False) for b in all_boards()}
    assert packing == {"pynq-z1": True, "ultra96-v2": True, "zcu104": True,
                       "de10-nano": False, "ulx3s-85f": False}
    assert main(["verilog", "--board", "pynq-z1", "--preset", "small",
                 "-o", str(tmp_path / "p")]) == 0
    assert "vta_packed" in (tmp_path / "p" / "vta_core.v").read_text()
    assert main(["verilog", "--board", "pynq-z1", "--preset", "small", "--core-options", "",
                 "-o", str(tmp_path / "q")]) == 0
    assert "vta_packed" not in (tmp_path / "q" / "vta_core.v").read_text()
