"""The board registry and ``vta boards``: parts, budgets cross-checked against other datasheet
figures, default configurations that fit their boards, and clear errors."""

from __future__ import annotations

import json

import pytest
from vta.boards import BoardError, all_boards, get_board, get_family
from vta.cli.main import main

EXPECTED = {  # name: (part, bus width, family)
    "pynq-z1": ("xc7z020clg400-1", 64, "xc7"),
    "ultra96-v2": ("xczu3eg-sbva484-1-e", 128, "xcup"),
    "zcu104": ("xczu7ev-ffvc1156-2-e", 128, "xcup"),
    "de10-nano": ("5CSEBA6U23I7", 64, "cyclonev"),
    "ulx3s-85f": ("LFE5U-85F-6BG381C", 64, "ecp5"),
}

# Total block-RAM capacity in Kb from the datasheets' memory tables (not the block counts):
# Zynq-7020 4.9 Mb, ZU3EG 7.6 Mb, ZU7EV 11 Mb, Cyclone V SE A6 5,570 Kb, LFE5U-85 3,744 Kb.
BRAM_KBITS = {"pynq-z1": 4900, "ultra96-v2": 7600, "zcu104": 11000, "de10-nano": 5570,
              "ulx3s-85f": 3744}
BLOCK_KBITS = {"xc7": 36, "xcup": 36, "cyclonev": 10, "ecp5": 18}


@pytest.mark.unit
def test_registry_has_the_five_boards() -> None:
    assert [b.name for b in all_boards()] == list(EXPECTED)
    for name, (part, bus, family) in EXPECTED.items():
        b = get_board(name)
        assert (b.part, b.bus_width, b.family) == (part, bus, family)
    assert get_board("pynq-z1").clock_mhz == 100
    assert get_board("ulx3s-85f").flow == "open"
    assert {b.flow for b in all_boards()} == {"vivado", "quartus", "open"}


@pytest.mark.unit
@pytest.mark.parametrize("name", list(EXPECTED))
def test_bram_budget_matches_datasheet_capacity(name: str) -> None:
    b = get_board(name)
    kbits = b.budget.bram * BLOCK_KBITS[b.family]
    assert kbits == pytest.approx(BRAM_KBITS[name], rel=0.03)


@pytest.mark.unit
@pytest.mark.parametrize("name", list(EXPECTED))
def test_default_config_fits_its_board_memories_and_multipliers(name: str) -> None:
    """The scratchpads of the board's default config fit its block RAM; on the ULX3S-85F, whose
    config is chosen for it, the GEMM's multipliers also fit its 18x18 multipliers."""
    b = get_board(name)
    cfg = b.default_config
    spad_bits = sum(cfg.depth(t) * cfg.elem_bytes(t) * 8 for t in range(4))
    assert spad_bits <= b.budget.bram * BLOCK_KBITS[b.family] * 1024
    if b.family == "ecp5":
        assert cfg.macs_per_cycle <= b.budget.dsp


@pytest.mark.unit
def test_lookup_is_forgiving_and_errors_name_the_boards() -> None:
    assert get_board("PYNQ_Z1") is get_board("pynq-z1")
    with pytest.raises(BoardError) as e:
        get_board("arty")
    msg = str(e.value)
    assert "\n" not in msg and "'arty'" in msg
    for name in EXPECTED:
        assert name in msg


@pytest.mark.unit
def test_cli_lists_boards(capsys) -> None:
    assert main(["boards"]) == 0
    out = capsys.readouterr().out
    for name, (part, _, _) in EXPECTED.items():
        assert name in out and part in out
    # each row names the GEMM core the board builds by default
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["pynq-z1"][2] == "1x16x16" and rows["ulx3s-85f"][2] == "1x4x4"
    assert main(["boards", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in data] == list(EXPECTED)
    pynq = data[0]
    assert pynq["budget"] == {"lut": 53200, "ff": 106400, "bram": 140, "dsp": 220}
    assert pynq["reg_base"] == "0x43C00000" and pynq["bus_width"] == 64


@pytest.mark.unit
def test_cli_unknown_board_is_one_line_exit_2(capsys) -> None:
    assert main(["boards", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown board 'nope'" in err and "ulx3s-85f" in err


@pytest.mark.unit
def test_cli_build_refuses_vendor_boards(capsys, tmp_path) -> None:
    assert main(["build", "--board", "zcu104", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "vta verilog --board zcu104" in err and "Vivado" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.unit
def test_family_block_ram_bytes_bound_the_build_memory() -> None:
    """`vta build --ram-kib` tops out at the largest power of two of the device's block RAM:
    PYNQ-Z1 140 x 4 KiB = 560 KiB, ZCU104 312 x 4 KiB, DE10-Nano 557 x 1 KiB, ULX3S 208 x 2 KiB."""
    from vta.cli.cmd_build import max_ram_kib

    want = {"pynq-z1": 512, "ultra96-v2": 512, "zcu104": 1024, "de10-nano": 512,
            "ulx3s-85f": 256}
    assert {b.name: max_ram_kib(b) for b in all_boards()} == want


@pytest.mark.unit
def test_unknown_family_is_a_board_error() -> None:
    with pytest.raises(BoardError, match="unknown FPGA family 'xc9'"):
        get_family("xc9")
