"""``vta sim``: the program image contract, outputs, and one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from vta.cli.main import main
from vta.isa import Config, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, encode_program
from vta.isa.stats import RunStats
from vta.sim.programs import matmul_program


@pytest.fixture()
def images(tmp_path: Path):
    cfg = Config.preset("small")
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (12, 20))
    b = rng.integers(-128, 128, (8, 20))
    mm = matmul_program(cfg, 12, 8, 20, a=a, b=b, dram_bytes=None)
    prog = tmp_path / "prog.bin"
    dram = tmp_path / "dram.bin"
    prog.write_bytes(mm.program)
    # a larger image than the program needs: OUT.bin keeps the length, the tail is untouched
    dram.write_bytes(mm.dram.tobytes() + bytes(range(200)))
    want = (a @ b.T).astype(np.int32).astype(np.int8)
    return tmp_path, mm, want


@pytest.mark.sim
def test_fsim_cli_runs_and_writes_everything(images, capsys) -> None:
    tmp, mm, want = images
    rc = main(["sim", str(tmp / "prog.bin"), "--dram", str(tmp / "dram.bin"), "-o",
               str(tmp / "out.bin"), "--preset", "small", "--stats", str(tmp / "s.json"),
               "--trace", str(tmp / "t.json"), "--check-races"])
    assert rc == 0
    out = np.frombuffer((tmp / "out.bin").read_bytes(), np.uint8)
    assert len(out) == len(mm.dram) + 200
    assert bytes(out[-200:]) == bytes(range(200))
    assert np.array_equal(mm.plan.read_c(out), want)
    stats = RunStats.from_json(json.loads((tmp / "s.json").read_text()))
    assert stats.backend == "fsim" and stats.insn_count == len(mm.program) // 16
    trace = json.loads((tmp / "t.json").read_text())
    assert {e["cat"] for e in trace["traceEvents"] if e["ph"] == "X"} == {"load", "compute",
                                                                         "store"}
    assert "fsim:" in capsys.readouterr().out


def _fails(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vta sim: error: "), err
    return err


@pytest.mark.sim
def test_fsim_cli_bad_inputs_exit_2_with_one_line(images, tmp_path: Path, capsys) -> None:
    tmp, _, _ = images
    prog, dram, out = str(tmp / "prog.bin"), str(tmp / "dram.bin"), str(tmp / "o.bin")
    small = ["--preset", "small"]
    assert "does not exist" in _fails(["sim", prog, "--dram", str(tmp / "x"), "-o", out]
                                      + small, capsys)
    (tmp / "odd.bin").write_bytes(b"\0" * 17)
    assert "not a multiple of 16" in _fails(["sim", str(tmp / "odd.bin"), "--dram", dram,
                                             "-o", out] + small, capsys)
    (tmp / "nofin.bin").write_bytes(encode_program([GemmInsn()], Config.preset("small")))
    assert "does not end with FINISH" in _fails(["sim", str(tmp / "nofin.bin"), "--dram", dram,
                                                 "-o", out] + small, capsys)
    (tmp / "tiny.bin").write_bytes(b"\0" * 8)
    assert "beyond the 8-byte DRAM image" in _fails(["sim", prog, "--dram",
                                                     str(tmp / "tiny.bin"), "-o", out] + small,
                                                    capsys)
    dead = encode_program([GemmInsn(pop_prev_dep=1), FinishInsn()], Config.preset("small"))
    (tmp / "dead.bin").write_bytes(dead)
    assert "deadlock" in _fails(["sim", str(tmp / "dead.bin"), "--dram", dram, "-o", out]
                                + small, capsys)
    assert "does not apply to the fsim backend" in _fails(
        ["sim", prog, "--dram", dram, "-o", out, "--max-cycles", "10"] + small, capsys)
    assert "does not accept an option" in _fails(
        ["sim", prog, "--dram", dram, "-o", out, "--opt", "bogus=1"] + small, capsys)
    assert "expected KEY=VALUE" in _fails(
        ["sim", prog, "--dram", dram, "-o", out, "--opt", "bogus"] + small, capsys)
    assert "gemm_path must be" in _fails(
        ["sim", prog, "--dram", dram, "-o", out, "--opt", "gemm_path=fast"] + small, capsys)
    assert "directory" in _fails(["sim", prog, "--dram", dram, "-o",
                                  str(tmp / "nodir" / "o.bin")] + small, capsys)
    assert not (tmp / "o.bin").exists()  # nothing half-written by the failures


@pytest.mark.sim
def test_fsim_cli_passes_backend_options(images, capsys) -> None:
    tmp, mm, want = images
    base = ["sim", str(tmp / "prog.bin"), "--dram", str(tmp / "dram.bin"), "--preset", "small"]
    assert main(base + ["-o", str(tmp / "a.bin"), "--order", "random", "--seed", "3",
                        "--opt", "gemm_path=general", "--opt", "insn_queue_depth=4"]) == 0
    assert np.array_equal(mm.plan.read_c(np.fromfile(tmp / "a.bin", np.uint8)), want)
    # two loads push before compute pops: a 1-deep token queue overflows under load-first,
    # so the option really reaches the simulator
    cfg = Config.preset("small")
    load = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, y_size=1, x_size=1, x_stride=1,
                   push_next_dep=1)
    (tmp / "two.bin").write_bytes(encode_program(
        [load, load, GemmInsn(pop_prev_dep=1), GemmInsn(pop_prev_dep=1), FinishInsn()], cfg))
    two = ["sim", str(tmp / "two.bin"), "--dram", str(tmp / "dram.bin"), "--preset", "small",
           "--order", "load-first", "-o", str(tmp / "b.bin")]
    assert main(two) == 0
    assert main(two + ["--opt", "token_queue_depth=1"]) == 2
    assert "full load->compute queue (depth 1)" in capsys.readouterr().err


@pytest.mark.sim
def test_fsim_cli_missing_backend_is_one_line(images, monkeypatch, capsys) -> None:
    from dataclasses import replace

    from vta.runtime import backends

    tmp, _, _ = images
    missing = replace(backends.REGISTRY["perf"], program=("vta.sim.no_such_module", "run_program"))
    monkeypatch.setitem(backends.REGISTRY, "perf", missing)
    err = _fails(["sim", str(tmp / "prog.bin"), "--dram", str(tmp / "dram.bin"),
                  "--stats", str(tmp / "s.json"), "--preset", "small", "--backend", "perf"],
                 capsys)
    assert "backend perf is not available" in err
    assert not (tmp / "s.json").exists()
