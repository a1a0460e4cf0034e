"""The open ECP5 flow to a bitstream, with its Fmax.

The slow test builds the ULX3S-85F's own core (the 1x4x4 config) in the board's top (PLL, serial
bridge, a 16 KiB device memory) through yosys, nextpnr-ecp5 and ecppack, at half the board's
clock with nextpnr's fast effort (about four CPU minutes). ``bench/bench_boards_synth.py``
builds the same design at the board's clock with the timing effort and several seeds.
"""

import json

import pytest
from vta.cli.main import main
from vta.isa.errors import VTAError

#: The ECP5 bitstream preamble (ECP5 sysCONFIG guide), after the comment header.
ECP5_PREAMBLE = b"\xff\xff\xbd\xb3"


@pytest.mark.synth
@pytest.mark.slow
def test_open_flow_builds_the_board_core_to_a_bitstream(tmp_path, capsys) -> None:
    from vta.boards import get_board

    board = get_board("ulx3s-85f")
    cfg = board.default_config
    out = tmp_path / "build"
    report = tmp_path / "build.json"
    rc = main(["build", "--board", board.name, "-o", str(out), "--ram-kib", "16",
               "--clock", "50", "--effort", "fast", "--json", str(report), "-q"])
    text = capsys.readouterr().out
    r = json.loads(report.read_text())
    # the board's core closes 90 MHz with the timing effort: half of it is met with margin
    assert rc == 0, text
    assert r["target_mhz"] == 50 and r["timing_met"] and r["achieved_mhz"] >= 50
    assert f"Fmax {r['achieved_mhz']:.1f} MHz against the 50 MHz target: timing met" in text
    assert r["seed"] == 1 and r["effort"] == "fast" and r["synth"]["config"] == cfg.params
    bit = (out / "vta_ulx3s.bit").read_bytes()
    assert len(bit) > 100_000 and ECP5_PREAMBLE in bit[:4096]

    # What nextpnr placed is what yosys mapped, and both are what the design needs by hand:
    util, res = r["utilization"], r["synth"]["resources"]
    assert util["EHXPLLL"]["used"] == 1 and util["TRELLIS_COMB"]["used"] > 5_000
    # multipliers: 1x4x4 GEMM (16) + 4 ALU lanes of three 16x16 partial products (12)
    macs = cfg.batch * cfg.block_in * cfg.block_out
    alu_partial_products = 3 * cfg.batch * cfg.block_out
    assert util["MULT18X18D"]["used"] == res["dsp"]["used"] == macs + alu_partial_products == 28
    # block RAM (DP16KD, 512x36 or 2048x9): device memory 16 KiB / 2 KiB = 8; scratchpads: acc
    # 128x128 (4), wgt 64x128 (4), uop 256x32 (1), inp 256x32 (1), out 128x32 (1); three
    # 255x128 instruction queues (4 each)
    assert util["DP16KD"]["used"] == res["bram"]["used"] == 8 + 4 + 4 + 1 + 1 + 1 + 3 * 4
    assert not r["synth"]["problems"]
    assert all(m["mapped"] == "block RAM" for m in r["synth"]["memories"] if m["scratchpad"])

    assert (out / "nextpnr.log").exists() and (out / "yosys.log").exists()
    assert not [p for p in out.iterdir() if p.name.startswith("vta-build-")]
    # the critical path in the report is the one nextpnr logs for the main clock
    cp = r["critical_path"]
    logged = [line for line in (out / "nextpnr.log").read_text().splitlines()
              if "ns logic," in line]
    assert cp["clock"] == "por_clk" and f"{cp['logic_ns']:.2f} ns logic" in logged[0]
    # ... and it sets the Fmax (one period; the report rounds both to 0.01)
    assert cp["delay_ns"] == pytest.approx(1000 / r["achieved_mhz"], abs=0.02)
    assert "critical path:" in text


def _step(kind: str, delay: float, src: str, dst: str) -> dict:
    return {"type": kind, "delay": delay, "from": {"cell": src, "loc": [1, 2]},
            "to": {"cell": dst, "loc": [3, 4]}}


@pytest.mark.unit
def test_critical_path_summary_picks_the_longest_same_clock_path() -> None:
    from vta.boards.openflow import critical_path

    clk = "posedge $glbnet$clk"
    report = {"critical_paths": [
        {"from": clk, "to": clk, "path": [
            _step("clk-to-q", 0.5, "a", "a"), _step("routing", 2.0, "a", "lut"),
            _step("logic", 0.25, "lut", "lut"), _step("routing", 1.25, "lut", "b")]},
        # a longer path between the clock and an I/O: not a register-to-register path
        {"from": "<async>", "to": clk, "path": [_step("routing", 9.0, "io", "ff")]},
        {"from": clk, "to": clk, "path": [_step("clk-to-q", 0.5, "c", "c"),
                                          _step("routing", 1.0, "c", "d")]},
    ]}
    cp = critical_path(report)
    assert cp == {"clock": "clk", "from": "a @(1,2)", "to": "b @(3,4)", "delay_ns": 4.0,
                  "routing_ns": 3.25, "logic_ns": 0.75, "cells": 3}
    assert critical_path({"critical_paths": []}) == {}


@pytest.mark.unit
def test_place_and_route_efforts_are_what_the_cli_offers(tmp_path, capsys) -> None:
    """Each effort's options reach nextpnr; the CLI offers exactly the flow's efforts; an
    unknown effort is an error before any tool runs (nothing written)."""
    import argparse

    from vta.boards import BoardError, get_board
    from vta.boards.openflow import (
        DEFAULT_EFFORT,
        PNR_EFFORTS,
        _nextpnr_args,
        build_bitstream,
        build_script,
        pnr_options,
    )
    from vta.cli import cmd_build

    ulx = get_board("ulx3s-85f")
    timing = _nextpnr_args(ulx, 100.0, seed=3, effort="timing")
    assert timing[timing.index("--router") + 1] == "router1" and "--tmg-ripup" in timing
    assert timing[timing.index("--seed") + 1] == "3"
    fast = _nextpnr_args(ulx, 100.0, effort="fast")
    assert fast[fast.index("--router") + 1] == "router2" and "--tmg-ripup" not in fast
    # the shell script of 'vta verilog' runs nextpnr the way 'vta build' does by default
    assert " ".join(pnr_options(DEFAULT_EFFORT)) in build_script(ulx)

    sub = argparse.ArgumentParser().add_subparsers()
    cmd_build.register(sub)
    effort = next(a for a in sub.choices["build"]._actions if a.dest == "effort")
    assert set(effort.choices) == set(PNR_EFFORTS) and effort.default == DEFAULT_EFFORT

    with pytest.raises(BoardError, match="unknown place-and-route effort 'turbo'.*timing, fast"):
        build_bitstream(ulx, None, tmp_path / "out", effort="turbo")
    assert not (tmp_path / "out").exists()


@pytest.mark.unit
def test_place_and_route_progress_shows_the_routers_convergence() -> None:
    """Progress shows nextpnr's steps, router1's rows and rip-up passes (with the worst slack)
    and router2's iterations, not the placer's per-iteration lines (lines from real logs)."""
    from vta.boards.openflow import _PNR_PROGRESS

    shown = [
        "Info: Device utilisation:",
        "Info: Running main analytical placer, max placement attempts per cell = 66626196.",
        "Info: Max frequency for clock '$glbnet$por_clk': 79.43 MHz (FAIL at 100.00 MHz)",
        "Info: Routing 66523 arcs.",
        "Info:       1000 |      107        892 |  107   892 |     65647|       1.76       1.76|",
        "Info:     0 arcs ripped up due to negative slack WNS=0.00ns TNS=0.00ns.",
        "Info:     1843 arcs ripped up due to negative slack WNS=-1.27ns TNS=-212.40ns.",
        "Info:     iter=1 wires=255027 overused=18312 overuse=21811 archfail=NA",
        "Info:     iter=28 wires=267219 overused=0 overuse=0 archfail=0",
    ]
    hidden = [
        "Info:     at initial placer iter 0, wirelen = 5817",
        "Info:     at iteration #1, type ALL: wirelen solved = 5370, spread = 306283, legal = "
        "321223; time = 1.52s",
        "Info:     routing clock net $glbnet$por_clk using global 0",
        "Info: Setting up routing resources...",
    ]
    assert [line for line in shown if not _PNR_PROGRESS.search(line)] == []
    assert [line for line in hidden if _PNR_PROGRESS.search(line)] == []


@pytest.mark.unit
def test_a_failed_build_keeps_the_failing_tools_log(tmp_path, monkeypatch, small_cfg) -> None:
    """A tool that fails or runs out of time leaves its log (and the earlier tools' logs) in the
    output directory, named by the one-line error, and no bitstream and no temporary files."""
    from types import SimpleNamespace

    from vta.boards import openflow
    from vta.boards.tools import ToolError

    def synthesize(board, sources, top, *, workdir, **kw):
        workdir.mkdir()
        (workdir / "synth.log").write_text("yosys: mapped\n")
        return SimpleNamespace(seconds=1.0)

    def nextpnr_runs_out_of_time(name, args, *, cwd, log, what="", **kw):
        log.write_text("Info: Routing..\n")
        raise ToolError(f"{what} did not finish within 3600 s (log: {log})")

    monkeypatch.setattr(openflow, "synthesize", synthesize)
    monkeypatch.setattr(openflow, "run_tool", nextpnr_runs_out_of_time)
    out = tmp_path / "out"
    with pytest.raises(ToolError) as err:
        openflow.build_bitstream("ulx3s-85f", small_cfg, out,
                                 core_verilog="module vta_core(); endmodule\n")
    assert str(err.value) == ("nextpnr-ecp5 did not finish within 3600 s "
                              f"(log: {out / 'nextpnr.log'})")
    assert (out / "nextpnr.log").read_text() == "Info: Routing..\n"
    assert (out / "yosys.log").read_text() == "yosys: mapped\n"
    assert sorted(p.name for p in out.iterdir()) == ["digest.json", "nextpnr.log", "yosys.log"]
    # the kept logs are the kit's output (their digest holds): a second build may replace them
    with pytest.raises(ToolError):
        openflow.build_bitstream("ulx3s-85f", small_cfg, out,
                                 core_verilog="module vta_core(); endmodule\n")
    # a file of the user's in it: the directory is no longer the kit's, and nothing is touched
    (out / "notes.txt").write_text("mine\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(VTAError, match="neither a board build nor empty"):
        openflow.build_bitstream("ulx3s-85f", small_cfg, out,
                                 core_verilog="module vta_core(); endmodule\n")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.unit
def test_a_failed_synthesis_names_a_log_that_exists(tmp_path, monkeypatch) -> None:
    """In a temporary directory the error says how to keep the log; in a work directory it
    names the log there."""
    from vta.boards import synth
    from vta.boards.tools import ToolError

    def yosys_fails(name, args, *, cwd, log, **kw):
        log.write_text("ERROR: syntax error\n")
        raise ToolError(f"yosys failed (exit 1): ERROR: syntax error (log: {log})")

    monkeypatch.setattr(synth, "run_tool", yosys_fails)
    src = tmp_path / "top.v"
    src.write_text("module top(); endmodule\n")
    with pytest.raises(ToolError) as err:
        synth.synthesize("ulx3s-85f", [src], "top")
    assert str(err.value) == f"yosys failed (exit 1): ERROR: syntax error ({synth.KEEP_LOG_NOTE})"
    with pytest.raises(ToolError) as err:
        synth.synthesize("ulx3s-85f", [src], "top", workdir=tmp_path / "work")
    log = tmp_path / "work" / "pre.log"
    assert str(err.value).endswith(f"(log: {log})") and log.read_text() == "ERROR: syntax error\n"
    # the core's synthesis (vta synth) says the same
    with pytest.raises(ToolError) as err:
        synth.synth_core("ulx3s-85f")
    assert str(err.value) == f"yosys failed (exit 1): ERROR: syntax error ({synth.KEEP_LOG_NOTE})"
