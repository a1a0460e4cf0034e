"""``vta asm`` and ``vta disasm``: outputs, options, and exit status 2 with a one-line error for
every bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vta.cli.main import main

from ..conftest import unavailable

pytestmark = pytest.mark.unit

PROGRAM = """\
# a tiny program
load.inp  sram_base=2 dram_base=0x40 y_size=1 x_size=16 x_stride=16 push_next
gemm      reset uop_bgn=0 uop_end=1 iter_out=1 iter_in=1 pop_prev
finish    pop_next
"""
# hand-built from the ARCHITECTURE.md bit positions
WORDS = [
    0 | 1 << 6 | 2 << 7 | 2 << 10 | 0x40 << 26 | 1 << 64 | 16 << 80 | 16 << 96,
    2 | 1 << 3 | 1 << 7 | 1 << 21 | 1 << 35 | 1 << 49,
    3 | 1 << 4,
]
BINARY = b"".join(w.to_bytes(16, "little") for w in WORDS)
CANONICAL = """\
load.inp  sram_base=2 dram_base=64 y_size=1 x_size=16 x_stride=16 push_next
gemm      reset uop_bgn=0 uop_end=1 iter_out=1 iter_in=1 pop_prev
finish    pop_next
"""


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    p = tmp_path / "prog.s"
    p.write_text(PROGRAM)
    return p


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def one_line_error(err: str, command: str) -> str:
    assert err.startswith(f"vta {command}: error: "), err
    assert err.count("\n") == 1, err
    return err


# ------------------------------------------------------------------------ happy paths
def test_asm_then_disasm(tmp_path: Path, prog: Path, capsys) -> None:
    out = tmp_path / "prog.bin"
    rc, stdout, err = run(capsys, "asm", str(prog), "-o", str(out))
    assert (rc, stdout, err) == (0, "", "")
    assert out.read_bytes() == BINARY
    rc, stdout, err = run(capsys, "disasm", str(out))
    assert (rc, stdout, err) == (0, CANONICAL, "")
    rc, stdout, _ = run(capsys, "disasm", str(out), "--index")
    assert [s.rsplit("# ", 1)[1] for s in stdout.splitlines()] == ["0", "1", "2"]


def test_asm_from_stdin(tmp_path: Path, capsys, monkeypatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(PROGRAM))
    out = tmp_path / "p.bin"
    assert run(capsys, "asm", "-", "-o", str(out)) == (0, "", "")
    assert out.read_bytes() == BINARY
    monkeypatch.setattr(sys, "stdin", io.StringIO("finish\ngemm nope\n"))
    rc, _, err = run(capsys, "asm", "-", "-o", str(out))
    assert rc == 2 and "<stdin>:2:6: gemm has no field 'nope'" in one_line_error(err, "asm")


def test_disasm_json_and_back(tmp_path: Path, capsys) -> None:
    binary = tmp_path / "p.bin"
    binary.write_bytes(BINARY)
    rc, stdout, _ = run(capsys, "disasm", str(binary), "--json")
    assert rc == 0
    objs = [json.loads(s) for s in stdout.splitlines()]
    assert [o["opcode"] for o in objs] == ["LOAD", "GEMM", "FINISH"]
    assert objs[0]["memory_type"] == "INP" and objs[0]["dram_base"] == 64
    assert objs[0]["push_next_dep"] == 1 and objs[1]["reset_reg"] == 1
    assert objs[2]["pop_next_dep"] == 1
    # vta asm reads the JSON-lines form directly
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text(stdout)
    again = tmp_path / "again.bin"
    assert run(capsys, "asm", str(jsonl), "-o", str(again))[0] == 0
    assert again.read_bytes() == BINARY


def test_disasm_to_file(tmp_path: Path, capsys) -> None:
    binary = tmp_path / "p.bin"
    binary.write_bytes(BINARY)
    out = tmp_path / "p.s"
    assert run(capsys, "disasm", str(binary), "-o", str(out)) == (0, "", "")
    assert out.read_text() == CANONICAL


def test_uops_both_ways(tmp_path: Path, capsys) -> None:
    src = tmp_path / "u.s"
    src.write_text("uop dst_idx=1 src_idx=2 wgt_idx=3\nuop wgt_idx=1023\n")
    out = tmp_path / "u.bin"
    assert run(capsys, "asm", "--uops", str(src), "-o", str(out))[0] == 0
    assert out.read_bytes() == (1 | 2 << 11 | 3 << 22).to_bytes(4, "little") + (
        1023 << 22).to_bytes(4, "little")
    rc, stdout, _ = run(capsys, "disasm", "--uops", str(out))
    assert stdout == "uop dst_idx=1 src_idx=2 wgt_idx=3\nuop dst_idx=0 src_idx=0 wgt_idx=1023\n"
    rc, stdout, _ = run(capsys, "disasm", "--uops", "--json", str(out))
    assert json.loads(stdout.splitlines()[1]) == {"dst_idx": 0, "src_idx": 0, "wgt_idx": 1023}


def test_preset_changes_field_widths(tmp_path: Path, capsys) -> None:
    src = tmp_path / "p.s"
    src.write_text("gemm uop_bgn=255\nfinish\n")  # 8-bit uop_bgn in the small preset
    out = tmp_path / "p.bin"
    assert run(capsys, "asm", str(src), "-o", str(out), "--preset", "small")[0] == 0
    word = int.from_bytes(out.read_bytes()[:16], "little")
    assert word == 2 | 255 << 8
    src.write_text("gemm uop_bgn=256\nfinish\n")
    rc, _, err = run(capsys, "asm", str(src), "-o", str(out), "--preset", "small")
    assert rc == 2
    assert f"{src}:1:14: uop_bgn=256 does not fit its 8-bit field" in one_line_error(err, "asm")
    assert run(capsys, "asm", str(src), "-o", str(out))[0] == 0  # 13 bits by default


def test_config_file_option(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "c.json"
    assert run(capsys, "config", "write", "--preset", "small", "-o", str(cfg))[0] == 0
    src = tmp_path / "p.s"
    src.write_text("gemm uop_bgn=256\nfinish\n")
    rc, _, err = run(capsys, "asm", str(src), "-o", str(tmp_path / "o.bin"), "--config", str(cfg))
    assert rc == 2 and "8-bit field" in err


def test_warnings_go_to_stderr(tmp_path: Path, capsys) -> None:
    src = tmp_path / "nofinish.s"
    src.write_text("load.inp x_size=1\n")
    out = tmp_path / "o.bin"
    rc, stdout, err = run(capsys, "asm", str(src), "-o", str(out))
    assert rc == 0 and out.stat().st_size == 16
    assert err == f"vta asm: warning: {src}:1: the program does not end with finish " \
                  "(vta sim needs one)\n"
    assert run(capsys, "asm", "-q", str(src), "-o", str(out)) == (0, "", "")


def test_reserved_bits_warning(tmp_path: Path, capsys) -> None:
    binary = tmp_path / "r.bin"
    binary.write_bytes((3 | 1 << 120).to_bytes(16, "little"))
    rc, stdout, err = run(capsys, "disasm", str(binary))
    assert rc == 0 and stdout.startswith("finish")
    assert "instruction 0 has bits set outside every field" in err


# ------------------------------------------------------------------------ bad input
def test_asm_errors_leave_no_output(tmp_path: Path, capsys) -> None:
    src = tmp_path / "bad.s"
    src.write_text("load.inp x_size=1\ngemm uop_bgn=0 bogus=1\nfinish\n")
    out = tmp_path / "out.bin"
    out.write_bytes(b"previous")
    rc, stdout, err = run(capsys, "asm", str(src), "-o", str(out))
    assert rc == 2 and stdout == ""
    assert f"{src}:2:16: gemm has no field 'bogus'" in one_line_error(err, "asm")
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.s", "out.bin"]  # no temp files


@pytest.mark.parametrize("setup,argv_of,needle", [
    (None, lambda d: ["asm", str(d / "missing.s"), "-o", str(d / "o.bin")], "does not exist"),
    (None, lambda d: ["asm", str(d), "-o", str(d / "o.bin")], "is a directory"),
    (("latin1.s", b"gemm \xe9\n"), lambda d: ["asm", str(d / "latin1.s"), "-o", str(d / "o")],
     "not UTF-8 text"),
    (("p.s", b"finish\n"), lambda d: ["asm", str(d / "p.s"), "-o", str(d / "no" / "o.bin")],
     "directory"),
    (("p.s", b"finish\n"), lambda d: ["asm", str(d / "p.s"), "-o", str(d / "o"), "--preset",
                                      "nope"], "unknown preset 'nope'"),
    (("p.s", b"finish\n"), lambda d: ["asm", str(d / "p.s"), "-o", str(d / "o"), "--config",
                                      str(d / "none.json")], "none.json does not exist"),
    (("p.s", b'{"opcode": "LOAD", "x_size": -1}\n'),
     lambda d: ["asm", str(d / "p.s"), "-o", str(d / "o")], ":1:20: x_size=-1 does not fit"),
    (("u.s", b"gemm\n"), lambda d: ["asm", "--uops", str(d / "u.s"), "-o", str(d / "o")],
     "expected 'uop', found 'gemm'"),
    (None, lambda d: ["disasm", str(d / "missing.bin")], "does not exist"),
    (("odd.bin", bytes(20)), lambda d: ["disasm", str(d / "odd.bin")],
     "20 bytes, not a multiple of 16: not an instruction stream (use --uops"),
    (("odd.bin", bytes(6)), lambda d: ["disasm", "--uops", str(d / "odd.bin")],
     "6 bytes, not a multiple of 4: not a micro-op buffer"),
    (("op.bin", bytes(16) + (6).to_bytes(16, "little")), lambda d: ["disasm", str(d / "op.bin")],
     "instruction 1: invalid opcode 6"),
    (("op.bin", (7).to_bytes(16, "little")), lambda d: ["disasm", "--json", str(d / "op.bin")],
     "invalid opcode 7"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys, setup, argv_of,
                                      needle: str) -> None:
    if setup:
        (tmp_path / setup[0]).write_bytes(setup[1])
    argv = argv_of(tmp_path)
    rc, stdout, err = run(capsys, *argv)
    assert rc == 2 and stdout == ""
    assert needle in one_line_error(err, argv[0])


def test_usage_errors_exit_2(tmp_path: Path, capsys) -> None:
    for argv in (["asm", "x.s"], ["disasm"], ["asm", "x.s", "-o", "y", "--preset", "small",
                                               "--config", "c.json"]):
        assert main(argv) == 2
        assert "error:" in capsys.readouterr().err


# ------------------------------------------------------------------------ installed command
def test_installed_vta_command(tmp_path: Path, prog: Path) -> None:
    vta = Path(sys.executable).parent / "vta"
    if not vta.exists():
        unavailable(f"the vta console script is not installed next to {sys.executable} "
                    f"(pip install -e .)")
    out = tmp_path / "p.bin"
    r = subprocess.run([str(vta), "asm", str(prog), "-o", str(out)], capture_output=True,
                       text=True, timeout=60)
    assert (r.returncode, r.stderr) == (0, "")
    assert out.read_bytes() == BINARY
    r = subprocess.run([str(vta), "disasm", str(out)], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, CANONICAL)
    bad = tmp_path / "bad.s"
    bad.write_text("lod.inp\n")
    r = subprocess.run([str(vta), "asm", str(bad), "-o", str(out)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"vta asm: error: {bad}:1:1: unknown mnemonic 'lod.inp'; "
                               "did you mean 'load.inp'?")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
