"""The open ECP5 flow to a bitstream, with its Fmax.

The full small VTA core takes over ten CPU minutes through yosys and nextpnr, beyond this tier's
budget, so this test runs the flow on a reduced design: the real ULX3S top (PLL, serial bridge,
16 KiB device memory) around a stand-in with the VTA core's ports (one AXI4-Lite register, an
idle AXI master). ``bench/bench_boards_synth.py`` runs the real core through the same flow.
"""

import json

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from vta.cli.main import main

#: The ECP5 bitstream preamble (ECP5 sysCONFIG guide), after the comment header.
ECP5_PREAMBLE = b"\xff\xff\xbd\xb3"


class RegisterCore(wiring.Component):
    """A stand-in with :class:`vta.hw.core.VTACore`'s ports: one AXI4-Lite register (reads
    return it), ``interrupt`` = its bit 0, the AXI master idle."""

    def elaborate(self, platform) -> Module:
        m = Module()
        reg = Signal(32)
        take_w = self.s_axil_awvalid & self.s_axil_wvalid & ~self.s_axil_bvalid
        m.d.comb += [self.s_axil_awready.eq(take_w), self.s_axil_wready.eq(take_w),
                     self.s_axil_arready.eq(~self.s_axil_rvalid), self.interrupt.eq(reg[0])]
        with m.If(take_w):
            m.d.sync += [reg.eq(self.s_axil_wdata), self.s_axil_bvalid.eq(1)]
        with m.Elif(self.s_axil_bready):
            m.d.sync += self.s_axil_bvalid.eq(0)
        with m.If(self.s_axil_arvalid & self.s_axil_arready):
            m.d.sync += [self.s_axil_rdata.eq(reg), self.s_axil_rvalid.eq(1)]
        with m.Elif(self.s_axil_rready):
            m.d.sync += self.s_axil_rvalid.eq(0)
        return m


@pytest.mark.synth
@pytest.mark.slow
def test_open_flow_to_a_bitstream(tmp_path, small_cfg, monkeypatch, capsys) -> None:
    from amaranth.back import verilog
    from vta.boards import openflow
    from vta.hw.core import VTACore

    core = VTACore(small_cfg, bus_width=64)
    core._MustUse__silence = True
    stand_in = verilog.convert(RegisterCore(core.signature), name="vta_core", emit_src=False)
    real_build = openflow.build_bitstream

    def build_with_stand_in(*args, **kwargs):
        return real_build(*args, **kwargs, core_verilog=stand_in)

    monkeypatch.setattr(openflow, "build_bitstream", build_with_stand_in)
    out = tmp_path / "build"
    report = tmp_path / "build.json"
    rc = main(["build", "--board", "ulx3s-85f", "--preset", "small", "-o", str(out),
               "--ram-kib", "16", "--json", str(report), "--allow-timing-fail", "-q"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "against the 100 MHz target" in text
    bit = (out / "vta_ulx3s.bit").read_bytes()
    assert len(bit) > 10_000 and ECP5_PREAMBLE in bit[:4096]
    r = json.loads(report.read_text())
    assert r["target_mhz"] == 100 and r["achieved_mhz"] > 10
    assert r["timing_met"] == (r["achieved_mhz"] >= 100)
    util = r["utilization"]
    assert util["EHXPLLL"]["used"] == 1 and util["TRELLIS_COMB"]["used"] > 100
    # the 16 KiB device memory: 16 KiB / (2 KiB per EBR) = 8 EBRs; nextpnr agrees with yosys
    assert util["DP16KD"]["used"] == r["synth"]["resources"]["bram"]["used"] == 8
    assert (out / "nextpnr.log").exists() and (out / "yosys.log").exists()
    assert not [p for p in out.iterdir() if p.name.startswith("vta-build-")]
    # the critical path in the report is the one nextpnr logs for the main clock
    cp = r["critical_path"]
    logged = [line for line in (out / "nextpnr.log").read_text().splitlines()
              if "ns logic," in line]
    assert cp["clock"] == "por_clk" and f"{cp['logic_ns']:.2f} ns logic" in logged[0]
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
