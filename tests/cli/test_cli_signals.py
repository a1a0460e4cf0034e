"""SIGTERM / SIGINT during a command leave no temporary file or folder and no partial output.

Each test starts the real ``vta`` in a subprocess, waits until the command's temporary output
exists (so the signal lands mid-work, deterministically), signals it and checks the directory.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.sim

#: A GEMM of 4M micro-ops (the largest instruction every backend accepts, 2^22 iterations): the
#: RTL simulation runs for hours unless stopped.
LONG_PROGRAM = """\
load.uop sram_base=0 dram_base=0 y_size=1 x_size=1 x_stride=1
gemm reset uop_bgn=0 uop_end=1 iter_out=2048 iter_in=2048
finish
"""


def _start(code: str, cwd: Path) -> subprocess.Popen:
    """``code`` in a fresh interpreter (it ends by calling the console script's entry())."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(proc: subprocess.Popen, found, what: str, limit: float = 60.0) -> None:
    end = time.monotonic() + limit
    while not found():
        if proc.poll() is not None:
            pytest.fail(f"the command ended (exit {proc.returncode}) before {what}: "
                        f"{proc.stderr.read()}")
        if time.monotonic() > end:
            proc.kill()
            pytest.fail(f"no {what} within {limit:.0f} s")
        time.sleep(0.02)


def _finish(proc: subprocess.Popen, sig: int) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the command did not stop within 60 s of the signal")
    return proc.returncode, err


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_during_rtl_sim_leaves_no_vcd_and_no_output(tmp_path: Path, sig: int,
                                                           status: int) -> None:
    from vta.cli.main import main

    (tmp_path / "long.s").write_text(LONG_PROGRAM)
    assert main(["asm", str(tmp_path / "long.s"), "-o", str(tmp_path / "long.bin")]) == 0
    (tmp_path / "d.bin").write_bytes(bytes(4096))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vta.cli.main", "sim", "long.bin", "--dram", "d.bin", "-o",
         "o.bin", "--backend", "rtl", "--vcd", "w.vcd", "--stats", "s.json", "--max-cycles",
         "1000000000"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(proc, lambda: any(tmp_path.glob(".w.vcd.*")), "temporary waveform")
    time.sleep(0.3)  # well inside the simulation
    rc, err = _finish(proc, sig)
    assert rc == status, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["d.bin", "long.bin", "long.s"], left


def test_sigterm_during_build_removes_its_temporary_folder(tmp_path: Path) -> None:
    """The build's work folder inside -o goes away, and -o itself when the build made it
    (synthesis is replaced by a wait, so that
    no tool runs: the signal lands in the flow's own code, as it would between tools)."""
    proc = _start("""
        import sys, time
        from vta.boards import openflow

        def synthesize(*args, **kwargs):
            time.sleep(120)

        openflow.synthesize = synthesize
        from vta.cli.main import entry
        sys.argv = ["vta", "build", "--board", "ulx3s-85f", "--preset", "small", "-q", "-o", "b"]
        entry()
    """, tmp_path)
    _wait_for(proc, lambda: (tmp_path / "b").is_dir() and any((tmp_path / "b").iterdir())
              and any((tmp_path / "b").glob("vta-build-*/vta_ulx3s_top.v")),
              "build folder with the generated top")
    rc, err = _finish(proc, signal.SIGTERM)
    assert rc == 143, err
    assert len(err.splitlines()) == 1 and "terminated" in err and "Traceback" not in err, err
    assert not (tmp_path / "b").exists()  # made by the build, empty: removed
