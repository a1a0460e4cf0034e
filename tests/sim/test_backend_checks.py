"""Every backend checks a program the same way before it runs, and every run is bounded.

References: fsim's error for the same program (word for word), numpy for the result of a huge
micro-op loop, hand-computed bounds. None of these runs needs verilator: the checks fire before
the tsim model is built.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import vta.runtime as rt
from vta.cli.main import main
from vta.isa import (
    AluInsn,
    Config,
    FinishInsn,
    GemmInsn,
    MemInsn,
    MemType,
    Opcode,
    Uop,
    encode_program,
    encode_uops,
)
from vta.isa.errors import FileError, ProgramError

pytestmark = pytest.mark.sim

BACKENDS = ("fsim", "rtl", "tsim", "perf")


def _run(backend: str, program: bytes, dram: np.ndarray, cfg: Config, **opts):
    if backend == "fsim":
        from vta.sim.fsim import run
    elif backend == "rtl":
        from vta.hw.simulate import run_program as run
    elif backend == "tsim":
        from vta.hw.tsim import run_program as run
    else:
        from vta.sim.perf import run_program as run
    return run(program, dram, cfg, **opts)


def _load_inp(cfg: Config, dram_base: int, **kw) -> bytes:
    """LOAD INP of ``x_size`` elements from ``dram_base``, then FINISH (token-correct)."""
    one = {"y_size": 1, "x_size": 1, "x_stride": 1} | kw
    return encode_program([
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, dram_base=dram_base,
                push_next_dep=1, **one),
        FinishInsn(pop_prev_dep=1),
    ], cfg)


def _fsim_error(program: bytes, dram: np.ndarray, cfg: Config) -> str:
    with pytest.raises(ProgramError) as e:
        _run("fsim", program, dram, cfg)
    return str(e.value)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["read-past-end", "row-past-end", "store-past-end"])
def test_every_backend_rejects_out_of_image_ranges_like_fsim(backend, case, small_cfg):
    cfg = small_cfg
    eb = cfg.inp_elem_bytes
    dram = np.zeros(8 * eb, np.uint8)  # 8 INP elements; the program page follows on rtl/tsim
    if case == "read-past-end":
        program = _load_inp(cfg, 8)  # element 8: the first byte after the image
    elif case == "row-past-end":
        program = _load_inp(cfg, 0, y_size=2, x_size=2, x_stride=7)  # row 1 ends at element 9
    else:
        program = encode_program([
            MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, dram_base=len(dram)
                    // cfg.out_elem_bytes, y_size=1, x_size=1, x_stride=1),
            FinishInsn(),
        ], cfg)
    want = _fsim_error(program, dram, cfg)
    assert f"beyond the {len(dram)}-byte DRAM image" in want
    t0 = time.perf_counter()
    with pytest.raises(ProgramError) as e:
        _run(backend, program, dram, cfg)
    assert str(e.value) == want
    assert time.perf_counter() - t0 < 5  # rejected before any simulation or build


@pytest.mark.parametrize("backend", BACKENDS)
def test_memory_type_5_is_rejected_by_every_backend_saying_what_it_is(backend, small_cfg):
    """TVM accepts memory type 5 (an 8-bit accumulator load); the kit does not implement it and
    says so (docs/fsim.md), identically on every backend."""
    program = encode_program([
        MemInsn(opcode=Opcode.LOAD, memory_type=5, y_size=1, x_size=1, x_stride=1),
        FinishInsn()], small_cfg)
    dram = np.zeros(256, np.uint8)
    want = _fsim_error(program, dram, small_cfg)
    assert want == ("instruction 0 (LOAD memory_type=5): LOAD needs memory_type UOP, WGT, INP "
                    "or ACC (0-3), not 5 (TVM's memory type 5, an 8-bit accumulator load, is "
                    "not supported: load ACC)")
    with pytest.raises(ProgramError) as e:
        _run(backend, program, dram, small_cfg)
    assert str(e.value) == want


@pytest.mark.parametrize("target", ["rtl", "perf", "fsim"])
def test_every_device_rejects_reads_past_its_arena(target, small_cfg):
    size = 1 << 14
    with rt.open(target, small_cfg, arena_size=size) as dev:
        eb = small_cfg.inp_elem_bytes
        with pytest.raises(ProgramError, match=f"beyond the {size}-byte DRAM image"):
            dev.run(_load_inp(small_cfg, size // eb))


def test_fsim_rejects_a_huge_instruction_at_once_naming_it_and_the_bound():
    cfg = Config()
    program = encode_program([
        GemmInsn(uop_bgn=0, uop_end=1, iter_out=16383, iter_in=16383), FinishInsn()], cfg)
    from vta.sim import fsim

    t0 = time.perf_counter()
    with pytest.raises(ProgramError) as e:
        fsim.run(program, np.zeros(64, np.uint8), cfg)
    assert time.perf_counter() - t0 < 2
    msg = str(e.value)
    assert msg.startswith("instruction 0 (GEMM): iter_out=16383 x iter_in=16383")
    assert f"{16383 * 16383} micro-op iterations" in msg
    assert f"bound of {fsim.MAX_UOPS_PER_INSN}" in msg and "\n" not in msg
    # the bound is an option; an ALU instruction is bounded the same way
    alu = encode_program([AluInsn(uop_end=2, iter_out=10, iter_in=10, use_imm=1, imm=1),
                          FinishInsn()], cfg)
    with pytest.raises(ProgramError, match="200 micro-op iterations, beyond fsim's bound of 199"):
        fsim.run(alu, np.zeros(64, np.uint8), cfg, max_uops=199)


@pytest.mark.parametrize("backend", ["rtl", "perf", "tsim"])
def test_every_backend_rejects_the_huge_instruction_at_once(backend):
    """The same work bound as fsim's, checked before anything is built or simulated (tsim took
    hours to reach its cycle bound on this program)."""
    import importlib

    from vta.isa.checks import MAX_UOPS_PER_INSN

    cfg = Config()
    program = encode_program([
        GemmInsn(uop_bgn=0, uop_end=1, iter_out=16383, iter_in=16383), FinishInsn()], cfg)
    mod, fn = {"rtl": ("vta.hw.simulate", "run_program"), "perf": ("vta.sim.perf", "run_program"),
               "tsim": ("vta.hw.tsim", "run_program")}[backend]
    run = getattr(importlib.import_module(mod), fn)
    t0 = time.perf_counter()
    with pytest.raises(ProgramError) as e:
        run(program, np.zeros(64, np.uint8), cfg)
    assert time.perf_counter() - t0 < 2
    msg = str(e.value)
    assert msg.startswith("instruction 0 (GEMM): iter_out=16383 x iter_in=16383")
    assert f"beyond {backend}'s bound of {MAX_UOPS_PER_INSN} per instruction" in msg
    with pytest.raises(ProgramError, match=f"beyond {backend}'s bound of 199"):
        alu = encode_program([AluInsn(uop_end=2, iter_out=10, iter_in=10, use_imm=1, imm=1),
                              FinishInsn()], cfg)
        run(alu, np.zeros(64, np.uint8), cfg, max_uops=199)


def test_fsim_huge_reuse_loop_runs_in_bounded_memory():
    """2^18 micro-ops on ONE accumulator entry (factors 0): exact, without gathering the
    operands once per micro-op (that took 2 KiB per micro-op, 32 GiB at 16383 x 1024)."""
    cfg = Config()
    rng = np.random.default_rng(0)
    inp = rng.integers(-128, 128, (cfg.batch, cfg.block_in), dtype=np.int8)
    wgt = rng.integers(-128, 128, (cfg.block_out, cfg.block_in), dtype=np.int8)
    dram = np.zeros(4096, np.uint8)
    dram[0:4] = np.frombuffer(encode_uops([Uop(0, 0, 0)], cfg), np.uint8)
    dram[1024:1024 + inp.nbytes] = inp.view(np.uint8).ravel()
    dram[2048:2048 + wgt.nbytes] = wgt.view(np.uint8).ravel()
    one = {"y_size": 1, "x_size": 1, "x_stride": 1}
    n_out, n_in = 512, 512
    program = encode_program([
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, **one),
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP,
                dram_base=1024 // cfg.inp_elem_bytes, **one),
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.WGT,
                dram_base=2048 // cfg.wgt_elem_bytes, push_next_dep=1, **one),
        GemmInsn(uop_end=1, iter_out=n_out, iter_in=n_in, pop_prev_dep=1, push_next_dep=1),
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, dram_base=3072 // cfg.out_elem_bytes,
                pop_prev_dep=1, push_prev_dep=1, **one),
        FinishInsn(pop_next_dep=1),
    ], cfg)
    from vta.sim import fsim

    tracemalloc.start()
    try:
        out = fsim.run(program, dram, cfg).dram
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    acc = (n_out * n_in * (inp.astype(np.int64) @ wgt.astype(np.int64).T))
    want = acc.astype(np.int32).astype(np.int8)  # wrap to 32 bits, then truncate to 8
    assert np.array_equal(out[3072:3072 + want.nbytes].view(np.int8).reshape(want.shape), want)
    assert peak < 160 << 20, f"peak {peak >> 20} MiB"


def test_fsim_alu_on_one_entry_runs_to_its_bound_then_is_rejected():
    """65535 ALU ADDs on one accumulator entry (sequential steps) run in about a second with the
    hand-computed result (grouping the steps used to be quadratic: minutes); 4x more is
    rejected at once, naming the instruction and the bound."""
    from vta.sim import fsim

    cfg = Config()
    n = fsim.MAX_ALU_ROUNDS
    one = {"y_size": 1, "x_size": 1, "x_stride": 1}
    dram = np.zeros(4096, np.uint8)
    dram[0:4] = np.frombuffer(encode_uops([Uop(0, 0, 0)], cfg), np.uint8)

    def program(iters: int) -> bytes:
        return encode_program([
            MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, **one),
            AluInsn(uop_end=1, iter_out=iters, iter_in=257, alu_opcode=2, use_imm=1, imm=3,
                    push_next_dep=1),
            MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, dram_base=1, pop_prev_dep=1,
                    push_prev_dep=1, **one),
            FinishInsn(pop_next_dep=1)], cfg)

    t0 = time.perf_counter()
    out = fsim.run(program(255), dram, cfg).dram  # 65535 steps
    assert time.perf_counter() - t0 < 20
    ob = cfg.out_elem_bytes
    assert (out[ob:2 * ob].view(np.int8) == -3).all()  # 3 x 65535 = 0x2FFFD: low byte -3
    t0 = time.perf_counter()
    with pytest.raises(ProgramError, match=f"instruction 1 \\(ALU ADD\\): its micro-ops need "
                                           f"{1020 * 257} sequential steps .* bound of {n} "):
        fsim.run(program(1020), dram, cfg)
    assert time.perf_counter() - t0 < 5


def test_default_cycle_bound_is_generous_and_overridable(small_cfg):
    from vta.hw.harness import BOUND_BASE, default_max_cycles, static_cycles
    from vta.hw.simulate import run_program
    from vta.isa import decode_program
    from vta.sim.programs import matmul_program

    mm = matmul_program(small_cfg, 8, 8, 16, dram_bytes=None)
    insns = decode_program(mm.program, small_cfg)
    cost = {"mem_latency": 8}
    r = run_program(mm.program, mm.dram, small_cfg, progress=None)
    # the real run needs far less than the static cost the bound is built from
    assert r.stats.cycles < static_cycles(insns, small_cfg, **cost)
    assert default_max_cycles(insns, small_cfg, **cost) == \
        BOUND_BASE + 16 * static_cycles(insns, small_cfg, **cost)
    # a huge GEMM has a bound that grows with its work (2 cycles per micro-op, 16x margin)
    huge = [GemmInsn(uop_end=1, iter_out=16383, iter_in=16383), FinishInsn()]
    assert default_max_cycles(huge, Config(), **cost) >= 32 * 16383 * 16383
    from vta.isa.errors import VTAError

    with pytest.raises(VTAError, match="max_cycles must be at least 1, not -5"):
        run_program(mm.program, mm.dram, small_cfg, max_cycles=-5)


def test_rtl_prints_progress_lines_on_stderr(small_cfg, capsys):
    from vta.hw.simulate import run_program
    from vta.sim.programs import matmul_program

    mm = matmul_program(small_cfg, 8, 8, 16, dram_bytes=None)
    r = run_program(mm.program, mm.dram, small_cfg, progress=0.0)
    assert np.array_equal(r.dram, _run("fsim", mm.program, mm.dram, small_cfg).dram)
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("rtl: ") and " cycles, " in line for line in lines)
    n = len(mm.program) // 16
    uops = r.stats.gemm_uops + r.stats.alu_uops
    assert f"of {n} instructions and " in lines[-1]
    assert f"of {uops:,} micro-ops done, " in lines[-1]


@pytest.mark.parametrize("backend", ["rtl", "tsim"])
def test_vcd_to_a_missing_directory_fails_before_simulating(backend, tmp_path, small_cfg):
    program = _load_inp(small_cfg, 0)
    dram = np.zeros(64, np.uint8)
    t0 = time.perf_counter()
    with pytest.raises(FileError, match="directory .*nosuch does not exist"):
        _run(backend, program, dram, small_cfg, vcd=str(tmp_path / "nosuch" / "w.vcd"))
    with pytest.raises(FileError, match="is a directory"):
        _run(backend, program, dram, small_cfg, vcd=str(tmp_path))
    assert time.perf_counter() - t0 < 5
    assert not (tmp_path / "nosuch").exists()


def test_device_with_bad_vcd_fails_at_open(tmp_path, small_cfg):
    with pytest.raises(FileError, match="does not exist"):
        rt.open("rtl", small_cfg, vcd=str(tmp_path / "nosuch" / "w.vcd"))


def _images(tmp: Path, cfg: Config) -> tuple[str, str]:
    from vta.sim.programs import matmul_program

    mm = matmul_program(cfg, 4, 4, 8, dram_bytes=None)
    (tmp / "p.bin").write_bytes(mm.program)
    (tmp / "d.bin").write_bytes(mm.dram.tobytes())
    return str(tmp / "p.bin"), str(tmp / "d.bin")


def test_cli_perf_writes_no_output_image(tmp_path, capsys):
    prog, dram = _images(tmp_path, Config.preset("small"))
    base = ["sim", prog, "--dram", dram, "--preset", "small", "--backend", "perf"]
    assert main([*base, "-o", str(tmp_path / "o.bin")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "perf backend" in err and "writes no OUT.bin" in err
    assert not (tmp_path / "o.bin").exists()
    assert main([*base, "--stats", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["cycles"] > 0
    assert not (tmp_path / "o.bin").exists()
    # the data backends still need -o
    assert main(["sim", prog, "--dram", dram, "--preset", "small"]) == 2
    assert "-o OUT.bin is required" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--backend", "rtl", "--vcd", "{tmp}/nosuch/w.vcd"],
                                  ["--backend", "tsim", "--vcd", "{tmp}/nosuch/w.vcd"],
                                  ["--backend", "rtl", "--max-cycles", "-5"]])
def test_cli_bad_run_bounds_are_one_line(argv, tmp_path, capsys):
    prog, dram = _images(tmp_path, Config.preset("small"))
    argv = [a.format(tmp=tmp_path) for a in argv]
    rc = main(["sim", prog, "--dram", dram, "--preset", "small", "-o",
               str(tmp_path / "o.bin"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "o.bin").exists()
