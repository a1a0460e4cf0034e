"""Synthesis reports: cell accounting per family (hand-counted), the log and checkpoint parsers,
the DSP budget, and real yosys runs on a small design of known content for every family."""


import dataclasses
import json
from pathlib import Path

import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from vta.boards import Resources, get_board, get_family
from vta.boards.synth import (
    MemoryInfo,
    SynthReport,
    _choose_soft,
    _memory_mapping,
    _scan_checkpoint,
    count_resources,
    scratchpads,
    synthesize,
)


# --------------------------------------------------------------------------- accounting
@pytest.mark.unit
def test_xilinx_cells_count_as_the_datasheet_units() -> None:
    cells = {"LUT6": 10, "LUT3": 5, "LUT1": 1, "MUXF7": 4, "CARRY4": 3, "SRLC32E": 2,
             "RAM64M": 3, "FDRE": 7, "FDSE": 1, "RAMB18E1": 3, "RAMB36E1": 1, "DSP48E1": 2}
    # LUTs: 10 + 5 + 1 + 2 SRLs + 3 RAM64M x 4; block RAM: 1 + 3 halves
    assert count_resources("xc7", cells) == Resources(lut=30, ff=8, bram=2.5, dsp=2)


@pytest.mark.unit
def test_ecp5_and_intel_cells() -> None:
    ecp5 = {"LUT4": 100, "CCU2C": 10, "TRELLIS_FF": 50, "DP16KD": 3, "MULT18X18D": 4,
            "PFUMX": 9, "L6MUX21": 2}
    assert count_resources("ecp5", ecp5) == Resources(lut=120, ff=50, bram=3, dsp=4)
    intel = {"MISTRAL_ALUT6": 10, "MISTRAL_ALUT4": 5, "MISTRAL_ALUT_ARITH": 4,
             "MISTRAL_FF": 30, "MISTRAL_M10K": 2, "MISTRAL_MUL9X9": 4, "MISTRAL_MUL27X27": 1}
    # ALMs: 10 + (5 + 4) / 2 = 14.5 -> 15; DSP blocks: 4/3 + 1 = 2.33 -> 3
    assert count_resources("cyclonev", intel) == Resources(lut=15, ff=30, bram=2, dsp=3)


@pytest.mark.unit
def test_dsp_cost_and_budget_split() -> None:
    xc7, xcup, ecp5 = get_family("xc7"), get_family("xcup"), get_family("ecp5")
    assert xc7.dsp_cost(8, 8) == 1 and xc7.dsp_cost(32, 32) == 4
    # a signed 26-bit operand needs two DSP48E1s (25-bit port) but one DSP48E2 (27-bit port)
    assert xc7.dsp_cost(26, 8) == 2 and xcup.dsp_cost(26, 8) == 1
    assert ecp5.dsp_cost(8, 8) == 1 and ecp5.dsp_cost(32, 32) == 4
    assert get_family("cyclonev").dsp_cost(8, 8) == pytest.approx(1 / 3)
    muls = [(f"m{i}", 8, 8) for i in range(10)] + [("big0", 32, 32), ("big1", 32, 32)]
    assert _choose_soft("xc7", muls, 100) == []
    soft = _choose_soft("xc7", muls, 12)  # 10 + 8 needed: six small ones go to logic
    assert len(soft) == 6 and all(n.startswith("m") for n in soft)


@pytest.mark.unit
def test_checkpoint_and_log_parsers() -> None:
    il = (
        "module \\top\n"
        "  cell $mul \\vta_mul_0\n    parameter \\A_SIGNED 1\n    parameter \\A_WIDTH 8\n"
        "    parameter \\B_WIDTH 8\n    parameter \\Y_WIDTH 16\n    connect \\A \\a\n  end\n"
        "  cell $mem_v2 \\compute.acc_mem\n    parameter \\MEMID \"\\\\compute.acc_mem\"\n"
        "    parameter \\WIDTH 128\n    parameter \\OFFSET 0\n    parameter \\SIZE 128\n"
        "    parameter \\ABITS 7\n    parameter \\RD_PORTS 3\n"
        "    connect \\RD_DATA \\x\n  end\nend\n")
    muls, mems, read_ports = _scan_checkpoint(il)
    assert muls == [("vta_mul_0", 8, 8)]
    assert mems == [("compute.acc_mem", 128, 128)]
    assert read_ports == {"compute.acc_mem": 3}
    assert scratchpads(mems + [("fifo.storage", 128, 255)]) == {"compute.acc_mem"}
    assert scratchpads([("a", 32, 512), ("b", 8, 16)]) == {"a"}  # no VTA names: by size
    log = ("mapping memory top.compute.acc_mem via $__XILINX_BLOCKRAM_SDP_\n"
           "mapping memory top.fifo via $__XILINX_LUTRAM_SDP_\n")
    assert _memory_mapping("xc7", log) == {
        "compute.acc_mem": ("block RAM", "$__XILINX_BLOCKRAM_SDP_"),
        "fifo": ("LUT RAM", "$__XILINX_LUTRAM_SDP_")}
    intel_log = ("Processing top.spad:\n  Checking rule #1 for bram type $__MISTRAL_M10K\n"
                 "    Mapping to bram type $__MISTRAL_M10K (variant 1):\n"
                 "Processing top.q:\n    Mapping to bram type $__MISTRAL_MLAB (variant 1):\n")
    assert _memory_mapping("cyclonev", intel_log) == {
        "spad": ("block RAM", "$__MISTRAL_M10K"), "q": ("LUT RAM", "$__MISTRAL_MLAB")}


@pytest.mark.unit
def test_overflow_names_the_resource_and_the_excess() -> None:
    b = get_board("pynq-z1")
    r = SynthReport(board=b, top="t", used=Resources(lut=60000, ff=10, bram=150.5, dsp=3),
                    cells={}, memories=[MemoryInfo("inp_mem", 64, 2048, "logic",
                                                   scratchpad=True)],
                    multipliers=[], soft_multipliers=0, dsp_cells=3, seconds=1.0)
    assert not r.fits
    msg = r.overflow_message()
    assert "\n" not in msg and "PYNQ-Z1" in msg
    assert "LUT6 60000 of 53200 (over by 6800, 113%)" in msg
    assert "RAMB36 150.5 of 140 (over by 10.5, 108%)" in msg
    assert "DSP" not in msg
    d = r.to_dict()
    assert [o["resource"] for o in d["overflow"]] == ["lut", "bram"]
    assert d["resources"]["lut"]["percent"] == pytest.approx(100 * 60000 / 53200, abs=0.01)


# --------------------------------------------------------------------------- real yosys
class Demo(wiring.Component):
    """A registered 8x8 signed multiplier and a 512x32 memory: one DSP, one scratchpad."""

    a: In(8)
    b: In(8)
    p: Out(16)
    waddr: In(9)
    wdata: In(32)
    we: In(1)
    raddr: In(9)
    rdata: Out(32)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.spad = mem = Memory(shape=32, depth=512, init=[])
        wp, rp = mem.write_port(), mem.read_port()
        m.d.comb += [wp.addr.eq(self.waddr), wp.data.eq(self.wdata), wp.en.eq(self.we),
                     rp.addr.eq(self.raddr), self.rdata.eq(rp.data)]
        ra, rb, prod = Signal(signed(8)), Signal(signed(8)), Signal(signed(16))
        m.d.sync += [ra.eq(self.a), rb.eq(self.b), prod.eq(ra * rb), self.p.eq(prod)]
        return m


@pytest.fixture(scope="module")
def demo_v(tmp_path_factory) -> Path:
    from amaranth.back import verilog

    path = tmp_path_factory.mktemp("demo") / "demo.v"
    path.write_text(verilog.convert(Demo(), name="demo"))
    return path


_REPORTS: dict[str, SynthReport] = {}


def _demo_report(demo_v: Path, name: str) -> SynthReport:
    """The demo design synthesized for a board (once per test session)."""
    if name not in _REPORTS:
        _REPORTS[name] = synthesize(name, [demo_v], "demo")
    return _REPORTS[name]


@pytest.mark.synth
@pytest.mark.parametrize("name", ["pynq-z1", "ultra96-v2", "de10-nano", "ulx3s-85f"])
def test_demo_design_maps_memory_to_bram_and_multiplier_to_dsp(demo_v, name: str) -> None:
    r = _demo_report(demo_v, name)
    assert r.multipliers == [(8, 8)]
    assert [(m.name, m.depth, m.width, m.mapped) for m in r.memories] == \
        [("spad", 512, 32, "block RAM")]
    assert r.used.bram > 0 and r.used.dsp > 0 and r.dsp_cells == 1
    assert r.problems == [] and r.fits


@pytest.mark.synth
def test_dsp_budget_moves_multipliers_to_logic(demo_v) -> None:
    """With no DSPs in the budget the multiplier is built from LUTs, and the report says so."""
    b = get_board("ulx3s-85f")
    tiny = dataclasses.replace(b, budget=dataclasses.replace(b.budget, dsp=0))
    r = synthesize(tiny, [demo_v], "demo")
    full = _demo_report(demo_v, "ulx3s-85f")
    assert r.soft_multipliers == 1 and r.dsp_cells == 0 and r.used.dsp == 0
    assert r.used.lut > full.used.lut + 20  # an 8x8 multiplier's worth of LUTs
    assert r.problems == []


@pytest.mark.synth
def test_overflowing_design_fails_with_the_resource(demo_v) -> None:
    b = get_board("ulx3s-85f")
    tiny = dataclasses.replace(b, budget=dataclasses.replace(b.budget, bram=0.5))
    r = dataclasses.replace(_demo_report(demo_v, "ulx3s-85f"), board=tiny)
    assert not r.fits
    assert [k for k, _, _ in r.overflows()] == ["bram"]
    assert "EBR (DP16KD) 1 of 0.5 (over by 0.5" in r.overflow_message()


@pytest.mark.synth
def test_missing_module_is_a_tool_error(tmp_path, demo_v) -> None:
    from vta.boards.tools import ToolError

    with pytest.raises(ToolError, match="yosys"):
        synthesize("pynq-z1", [demo_v], "no_such_top", workdir=tmp_path)


class Copies(wiring.Component):
    """One 8-bit register and two registered copies of it, each multiplied by its own input:
    the copies are identical logic, so yosys merges them unless they are marked replicas."""

    a: In(8)
    b0: In(8)
    b1: In(8)
    p0: Out(16)
    p1: Out(16)

    def __init__(self, replica: bool) -> None:
        self.replica = replica
        super().__init__()

    def elaborate(self, platform) -> Module:
        from vta.hw.options import REPLICA_ATTR

        m = Module()
        attrs = {REPLICA_ATTR: 1} if self.replica else {}
        q = Signal(8)
        c0, c1 = Signal(8, attrs=attrs), Signal(8, attrs=attrs)
        m.d.sync += [q.eq(self.a), c0.eq(q), c1.eq(q)]
        m.d.comb += [self.p0.eq(c0 * self.b0), self.p1.eq(c1 * self.b1)]
        return m


@pytest.mark.synth
@pytest.mark.parametrize("replica", [False, True])
def test_replica_registers_survive_synthesis(tmp_path, replica: bool) -> None:
    """Registers marked as replicas keep their own flip-flops (8 + 2 x 8); unmarked copies
    are merged into one (8 + 8)."""
    from amaranth.back import verilog

    src = tmp_path / "copies.v"
    src.write_text(verilog.convert(Copies(replica), name="copies"))
    r = synthesize("ulx3s-85f", [src], "copies", workdir=tmp_path / "work")
    assert r.cells["TRELLIS_FF"] == (24 if replica else 16)
    assert r.dsp_cells == 2


@pytest.mark.synth
@pytest.mark.parametrize("name", ["pynq-z1", pytest.param("ultra96-v2", marks=pytest.mark.slow)])
def test_packed_products_take_one_dsp_slice_each(tmp_path, name: str) -> None:
    """A GemmPair of block_in 4 (four 25x8 products of two int8 products each): the report
    counts four packed pairs, and yosys maps each to one DSP48 slice, none to logic (the
    fabric left is the weight decrements, the split and the adder trees)."""
    from amaranth.back import verilog
    from vta.hw.gemm import GemmPair

    src = tmp_path / "pair.v"
    pair = GemmPair(block_in=4, inp_width=8, wgt_width=8, operand_stage=False)
    src.write_text(verilog.convert(pair, name="pair"))
    r = synthesize(name, [src], "pair", workdir=tmp_path / "work")
    assert r.multipliers == [(25, 8)] * 4 and r.packed_pairs == 4
    assert r.dsp_cells == 4 and r.soft_multipliers == 0 and r.problems == []
    assert r.used.lut < 200  # four 8x8 multipliers in logic would take some 500
    assert r.to_dict()["multipliers"]["packed_pairs"] == 4
    assert "4 of them packed (two products each)" in r.table()


# --------------------------------------------------------------------------- the VTA core
@pytest.mark.synth
@pytest.mark.slow
def test_small_core_on_pynq_through_the_cli(tmp_path, small_cfg, capsys) -> None:
    """``vta synth`` of the small config: LUTs used, every scratchpad in block RAM, every GEMM
    multiplier in a DSP (the board packs two 8x8 products per multiplier: batch x block x
    block / 2 of them, 25x8)."""
    from vta.cli.main import main

    out = tmp_path / "r.json"
    assert main(["synth", "--board", "pynq-z1", "--preset", "small", "--json", str(out),
                 "-q"]) == 0
    table = capsys.readouterr().out
    assert "scratchpads in block RAM: 5/5" in table
    r = json.loads(out.read_text())
    assert r["config"] == small_cfg.params and r["fits"]
    assert r["resources"]["lut"]["used"] > 1000 and r["resources"]["ff"]["used"] > 500
    pads = [m["name"] for m in r["memories"] if m["scratchpad"]]
    for buf in ("inp", "wgt", "acc", "uop"):  # each of VTA's four buffers, once
        assert sum(buf in name for name in pads) == 1, pads
    assert all(m["mapped"] == "block RAM" for m in r["memories"] if m["scratchpad"])
    spad_bits = sum(small_cfg.depth(t) * small_cfg.elem_bytes(t) * 8 for t in range(4))
    assert r["resources"]["bram"]["used"] * 36 * 1024 >= spad_bits
    gemm = small_cfg.batch * small_cfg.block_in * small_cfg.block_out // 2
    assert r["core_options"] == {"pack_multipliers": True}
    assert r["multipliers"]["shapes"]["25x8"] == r["multipliers"]["packed_pairs"] == gemm
    assert "8x8" not in r["multipliers"]["shapes"]
    assert r["multipliers"]["dsp_cells"] >= gemm and r["resources"]["dsp"]["used"] >= gemm
    assert r["problems"] == []
