"""Whole-core tests of the Amaranth RTL: programs against the functional simulator, the host
register block over AXI4-Lite, Verilog generation (linted with Verilator) and ``vta verilog``."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator
from vta.hw.core import VTACore
from vta.hw.regs import CORE_ID, REGISTER_MAP
from vta.isa import Config
from vta.isa.insn import FinishInsn, GemmInsn, MemInsn, encode_program
from vta.isa.layout import MemType, Opcode

from ..conftest import require_tool


def _fsim(program, dram, cfg):
    from vta.sim import fsim

    return fsim.run(program, dram, cfg)


@pytest.mark.sim
@pytest.mark.parametrize("bus_width", [64, 128])
def test_matmul_matches_fsim(small_cfg: Config, bus_width: int) -> None:
    from vta.hw.simulate import run_program
    from vta.sim.programs import matmul_program

    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (8, 12), dtype=np.int8)
    b = rng.integers(-128, 128, (8, 12), dtype=np.int8)
    mm = matmul_program(small_cfg, 8, 8, 12, a=a, b=b)
    got = run_program(mm.program, mm.dram, small_cfg.with_bus_width(bus_width), mem_stall=0.2)
    np.testing.assert_array_equal(got.dram, _fsim(mm.program, mm.dram, small_cfg).dram)
    c = a.astype(np.int32) @ b.astype(np.int32).T
    np.testing.assert_array_equal(mm.read_c(got.dram), c.astype(np.int8))


@pytest.mark.sim
@pytest.mark.parametrize("options", [{}, {"replicate_control": True},
                                     {"replicate_control": True, "replicate_operands": True},
                                     {"pack_multipliers": True},
                                     {"replicate_control": True, "dsp_registers": True},
                                     pytest.param({"pack_multipliers": True,
                                                   "replicate_control": True,
                                                   "replicate_operands": True},
                                                  marks=pytest.mark.slow)],
                         ids=["plain", "control", "control+operands", "packed",
                              "control+dsp", "packed+control+operands"])
def test_random_programs_match_fsim(small_cfg: Config, options: dict) -> None:
    """Token-correct random programs (every LOAD/STORE/GEMM/ALU feature) on one core, also
    on the hardware variants (per-lane control copies; the extra GEMM operand stage; two
    products per multiplier; the multipliers' own registers, their behavioural model)."""
    from vta.hw.simulate import run_programs
    from vta.sim.progen import random_program

    jobs = [random_program(small_cfg, seed, n_insns=30) for seed in range(100, 104)]
    results = run_programs(jobs, small_cfg, mem_stall=0.25, seed=3,
                           options=options)
    for (program, dram), res in zip(jobs, results):
        np.testing.assert_array_equal(res.dram, _fsim(program, dram, small_cfg).dram)


#: Configurations unlike the presets: batch > 1 with elements wider than a 64-bit bus, 16-bit
#: inputs and weights, 16-bit accumulators with 2x2 blocks and 4-byte weights.
VARIANTS = {
    "batch2": dict(LOG_BATCH=1, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=10, LOG_INP_BUFF_SIZE=10,
                   LOG_WGT_BUFF_SIZE=11, LOG_ACC_BUFF_SIZE=12),
    "int16": dict(LOG_INP_WIDTH=4, LOG_WGT_WIDTH=4, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=10,
                  LOG_INP_BUFF_SIZE=10, LOG_WGT_BUFF_SIZE=10, LOG_ACC_BUFF_SIZE=11),
    "acc16": dict(LOG_ACC_WIDTH=4, LOG_BLOCK=1, LOG_BATCH=2, LOG_UOP_BUFF_SIZE=9,
                  LOG_INP_BUFF_SIZE=9, LOG_WGT_BUFF_SIZE=8, LOG_ACC_BUFF_SIZE=10),
}


@pytest.mark.sim
@pytest.mark.parametrize("variant,bus_width,options", [
    ("batch2", 64, None), ("int16", 128, None), ("acc16", 64, None),
    pytest.param("batch2", 64, {"pack_multipliers": True}, marks=pytest.mark.slow),
    pytest.param("int16", 128, {"pack_multipliers": True}, marks=pytest.mark.slow)],
    ids=["batch2", "int16", "acc16", "batch2-packed", "int16-packed"])
def test_config_variants_match_fsim(variant: str, bus_width: int, options) -> None:
    """Configurations unlike the presets, also with two products per multiplier (batch rows
    sharing the packed weights; 16-bit operands packed 32 bits apart)."""
    from vta.hw.simulate import run_programs
    from vta.sim.progen import random_program

    cfg = Config(**VARIANTS[variant])
    jobs = [random_program(cfg, seed, n_insns=24) for seed in (1, 2)]
    results = run_programs(jobs, cfg.with_bus_width(bus_width), mem_stall=0.2, options=options)
    for (program, dram), res in zip(jobs, results):
        np.testing.assert_array_equal(res.dram, _fsim(program, dram, cfg).dram)


@pytest.mark.sim
@pytest.mark.slow
def test_default_config_program_matches_fsim(cfg: Config) -> None:
    from vta.hw.simulate import run_program
    from vta.sim.progen import random_program

    program, dram = random_program(cfg, 7, n_insns=20)
    got = run_program(program, dram, cfg.with_bus_width(128))
    np.testing.assert_array_equal(got.dram, _fsim(program, dram, cfg).dram)


# --------------------------------------------------------------------------- host registers
def _noop_program(cfg: Config) -> bytes:
    nop_load = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, x_size=0, push_next_dep=1)
    gemm = GemmInsn(pop_prev_dep=1, uop_bgn=0, uop_end=1, iter_out=0, iter_in=0,
                    push_next_dep=1)
    nop_store = MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, x_size=0, pop_prev_dep=1,
                        push_prev_dep=1)
    return encode_program([nop_load, gemm, nop_store, FinishInsn(pop_next_dep=1)], cfg)


@pytest.mark.sim
def test_host_registers_and_launch(small_cfg: Config) -> None:
    """AXI4-Lite reads/writes (with byte strobes), launch/finished, counters that stop."""
    from vta.hw.axi_model import AxiMemory
    from vta.hw.axi_sim import AxiLiteHost, axi_memory_testbench

    program = _noop_program(small_cfg)
    mem = np.zeros(0x2000, np.uint8)
    mem[0x1000:0x1000 + len(program)] = np.frombuffer(program, np.uint8)
    core = VTACore(small_cfg)
    top = Module()
    top.domains.sync = ClockDomain("sync")
    top.submodules.core = core
    memory = AxiMemory(mem, bus_bytes=8, latency=3)
    host = AxiLiteHost(core)
    r = REGISTER_MAP
    seen: dict[str, int] = {}

    async def bench(ctx) -> None:
        assert await host.read(ctx, r["id"]) == CORE_ID
        hw = await host.read(ctx, r["hw_config"])
        assert (hw >> 16 & 0xF, hw >> 20 & 0xFF) == (small_cfg.LOG_BLOCK, 8)
        assert await host.read(ctx, r["control"]) == 0
        await host.write(ctx, r["insn_addr"], 0xDEADBEEF)
        await host.write(ctx, r["insn_addr"], 0x00001000, strb=0b0011)  # low half only
        assert await host.read(ctx, r["insn_addr"]) == 0xDEAD1000
        await host.write(ctx, r["insn_addr"], 0x1000)
        await host.write(ctx, r["insn_count"], 4)
        await host.write(ctx, r["cycles"], 1234)  # read-only: ignored
        assert await host.read(ctx, r["cycles"]) == 0
        await host.write(ctx, r["control"], 1)
        for _ in range(200):
            if await host.read(ctx, r["control"]) & 2:
                break
        else:
            raise AssertionError("the core did not finish")
        for name in ("cycles", "fetched", "load_done", "compute_done", "store_done", "status",
                     "tokens_l2c", "queue_compute", "bytes_read", "bytes_written"):
            seen[name] = await host.read(ctx, r[name])
        seen["cycles_again"] = await host.read(ctx, r["cycles"])
        assert await host.read(ctx, r["control"]) == 2  # finished, not running

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(axi_memory_testbench(core, memory), background=True)
    sim.add_testbench(bench)
    sim.run()
    assert seen["fetched"] == 4
    assert (seen["load_done"], seen["compute_done"], seen["store_done"]) == (1, 2, 1)
    assert 10 < seen["cycles"] == seen["cycles_again"] < 200
    assert seen["status"] == 0b1100000  # finished + FINISH executed, nothing busy
    assert seen["tokens_l2c"] == seen["queue_compute"] == 0
    assert seen["bytes_read"] == 64 and seen["bytes_written"] == 0


@pytest.mark.unit
def test_bus_width_is_validated(small_cfg: Config) -> None:
    """The bus is the configuration's BUS_WIDTH, which Config checks; the core takes it."""
    from vta.isa.errors import ConfigError

    for bad in (32, "64", True):
        with pytest.raises(ConfigError, match="is not a bus width; use 64 or 128"):
            small_cfg.with_bus_width(bad)
    assert VTACore(small_cfg.with_bus_width(128)).bus_width == 128
    assert VTACore(small_cfg).bus_width == 64
    with pytest.raises(TypeError):
        VTACore("small")


# --------------------------------------------------------------------------- Verilog
@pytest.mark.synth
@pytest.mark.parametrize("preset,bus_width,options", [
    ("small", 64, None), pytest.param("small", 128, None, marks=pytest.mark.slow),
    pytest.param("default", 64, None, marks=pytest.mark.slow),
    ("small", 64, {"replicate_control": True, "replicate_operands": True}),
    ("small", 64, {"pack_multipliers": True}), ("small", 64, {"dsp_registers": True})])
def test_verilog_lints_clean(preset: str, tmp_path, bus_width: int, options) -> None:
    verilator = require_tool("verilator")
    from vta.hw.verilog import generate

    text = generate(Config.preset(preset).with_bus_width(bus_width), name="vta_core",
                    options=options)
    for port in ("s_axil_awaddr", "m_axi_arlen", "m_axi_wstrb", "m_axi_bready", "interrupt"):
        assert f" {port}" in text
    path = tmp_path / "vta_core.v"
    path.write_text(text)
    res = subprocess.run([verilator, "--lint-only", "-Wno-fatal", "--top-module", "vta_core",
                          str(path)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "%Error" not in res.stderr
    # a combinational loop (even a false one between two fields of one signal) makes Verilator
    # settle the logic behind it by iteration in tsim
    assert "UNOPTFLAT" not in res.stderr, res.stderr[-3000:]


@pytest.mark.unit
def test_cli_verilog_writes_core_and_description(tmp_path) -> None:
    from vta.cli.main import main

    out = tmp_path / "out"
    cfg = tmp_path / "small128.json"  # the bus is the configuration's: BUS_WIDTH in its file
    assert main(["config", "write", "--preset", "small", "--bus-width", "128", "-o",
                 str(cfg)]) == 0
    assert json.loads(cfg.read_text())["BUS_WIDTH"] == 128
    assert main(["verilog", "--config", str(cfg), "-o", str(out)]) == 0
    text = (out / "vta_core.v").read_text()
    assert "module vta_core(" in text
    desc = json.loads((out / "vta_core.json").read_text())
    assert desc["bus_width"] == 128
    assert desc["config"]["LOG_BLOCK"] == 2 and desc["config"]["BUS_WIDTH"] == 128
    ports = {p["name"]: p for p in desc["ports"]}
    assert ports["m_axi_wdata"] == {"name": "m_axi_wdata", "dir": "output", "width": 128}
    assert ports["m_axi_rdata"]["dir"] == "input"
    assert {r["name"]: r["offset"] for r in desc["registers"]} == REGISTER_MAP


@pytest.mark.unit
def test_cli_verilog_errors(tmp_path, capsys) -> None:
    from vta.cli.main import main

    target = tmp_path / "file"
    target.write_text("x")
    assert main(["verilog", "--preset", "small", "-o", str(target)]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert main(["verilog", "--preset", "small", "--name", "bad-name", "-o",
                 str(tmp_path / "d")]) == 2
    assert not (tmp_path / "d").exists()


@pytest.mark.unit
def test_cli_verilog_core_options(tmp_path, capsys) -> None:
    """``--core-options`` builds the variant (its operand stage and replica registers are in
    the Verilog, the options in the description); unknown names are one-line errors."""
    from vta.cli.main import main

    plain, variant = tmp_path / "plain", tmp_path / "variant"
    assert main(["verilog", "--preset", "small", "-o", str(plain)]) == 0
    assert main(["verilog", "--preset", "small", "--core-options",
                 "replicate_operands, replicate_control", "-o", str(variant)]) == 0
    assert json.loads((plain / "vta_core.json").read_text())["core_options"] == {}
    assert json.loads((variant / "vta_core.json").read_text())["core_options"] == {
        "replicate_control": True, "replicate_operands": True}
    for out, present in ((plain, False), (variant, True)):
        text = (out / "vta_core.v").read_text()
        assert ("inp_c_0_0_0" in text) is present  # the operand copy of multiplier (0, 0, 0)
        assert ("vta_replica" in text) is present
    capsys.readouterr()
    assert main(["verilog", "--preset", "small", "--core-options", "replicate_all", "-o",
                 str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "replicate_all" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert not (tmp_path / "bad").exists()


@pytest.mark.unit
def test_cli_verilog_board_delegates(tmp_path, capsys) -> None:
    """``--board`` goes to vta.boards.project.write_project; bad boards are one-line errors."""
    from vta.cli.main import main

    assert main(["verilog", "--preset", "small", "--board", "no-such-board", "-o",
                 str(tmp_path / "x")]) == 2
    assert "no-such-board" in capsys.readouterr().err
    # the board's memory port is 128 bits; the small preset's bus 64: a one-line error
    assert main(["verilog", "--preset", "small", "--board", "ultra96-v2", "-o",
                 str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err
    assert ("preset small has a 64-bit bus (BUS_WIDTH) but board ultra96-v2 has a 128-bit "
            "memory port") in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "y").exists()


@pytest.mark.sim
def test_long_program_fills_the_instruction_queue(small_cfg: Config) -> None:
    """300 back-to-back ALU instructions overflow the 256-entry compute queue: fetch must stall
    and resume without losing or reordering anything."""
    from vta.hw.simulate import run_program
    from vta.isa.insn import AluInsn, Uop, encode_uops
    from vta.isa.layout import AluOp

    dram = np.zeros(1024, np.uint8)
    dram[:4] = np.frombuffer(encode_uops([Uop(0, 0, 0)], small_cfg), np.uint8)
    prog = [MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, sram_base=0, dram_base=0,
                    y_size=1, x_size=1, x_stride=1),
            GemmInsn(reset_reg=1, uop_bgn=0, uop_end=1, iter_out=1, iter_in=1)]
    # each ALU runs 16 iterations (~22 cycles) while fetch delivers an instruction every 2
    # cycles, so the compute queue is full long before fetch reaches the end
    prog += [AluInsn(alu_opcode=AluOp.ADD if k % 3 else AluOp.MUL, use_imm=1, imm=k % 7 - 3,
                     uop_bgn=0, uop_end=1, iter_out=1, iter_in=16) for k in range(300)]
    prog[-1] = AluInsn(alu_opcode=AluOp.ADD, use_imm=1, imm=5, uop_bgn=0, uop_end=1, iter_out=1,
                       iter_in=1, push_next_dep=1)
    prog += [MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, sram_base=0, dram_base=64,
                     y_size=1, x_size=1, x_stride=1, pop_prev_dep=1, push_prev_dep=1),
             FinishInsn(pop_next_dep=1)]
    program = encode_program(prog, small_cfg)
    res = run_program(program, dram, small_cfg)
    np.testing.assert_array_equal(res.dram, _fsim(program, dram, small_cfg).dram)
    assert res.stats.hw_counters["fetched"] == len(prog)
    assert res.stats.modules["compute"].insns == len(prog) - 1
    assert res.stats.cycles > 299 * 16 + 2 * 256  # the queue stayed full for a long while
