"""SIGTERM / SIGINT during a command leave no temporary file or folder and no partial output.

Each test starts the real ``vta`` in a subprocess, waits until the command's temporary output
exists (so the signal lands mid-work, deterministically), signals it and checks the directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
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


class _Lines:
    """A process's stderr read line by line in a thread: ``wait_for(prefix)`` returns when a
    line starting with ``prefix`` has come (an event of the command, not a time)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stderr:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self.lines.append(None)  # end of output
            self._cond.notify_all()

    def wait_for(self, prefix: str, limit: float = 300.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: any(ln is None or ln.startswith(prefix)
                                                   for ln in self.lines), timeout=limit):
                pytest.fail(f"no line starting with {prefix!r} within {limit:.0f} s")
            if None in self.lines and not any(ln and ln.startswith(prefix) for ln in self.lines):
                pytest.fail(f"the command ended before a line {prefix!r}: {self.text()}")

    def text(self) -> str:
        self._thread.join(timeout=60)
        return "".join(ln for ln in self.lines if ln is not None)


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_during_rtl_sim_leaves_no_vcd_and_no_output(tmp_path: Path, sig: int,
                                                           status: int) -> None:
    """The signal lands once the simulation prints its first progress line (it is then in
    its cycle loop, which also raises a signal whose exception Python dropped inside a
    ``__del__``): the command stops, one line, nothing left."""
    from vta.cli.main import main

    (tmp_path / "long.s").write_text(LONG_PROGRAM)
    assert main(["asm", str(tmp_path / "long.s"), "-o", str(tmp_path / "long.bin")]) == 0
    (tmp_path / "d.bin").write_bytes(bytes(4096))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vta.cli.main", "sim", "long.bin", "--dram", "d.bin", "-o",
         "o.bin", "--backend", "rtl", "--vcd", "w.vcd", "--stats", "s.json", "--max-cycles",
         "1000000000", "--opt", "progress=0.01"], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    err = _Lines(proc)
    err.wait_for("rtl: ")
    assert any(tmp_path.glob(".w.vcd.*"))  # the waveform is being written
    proc.send_signal(sig)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the command did not stop within 60 s of the signal")
    assert proc.returncode == status, err.text()
    lines = [ln for ln in err.text().splitlines() if not ln.startswith("rtl: ")]
    assert len(lines) == 1 and lines[0].startswith("vta sim: ") and "Traceback" not in lines[0], \
        err.text()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["d.bin", "long.bin", "long.s"], left


@pytest.mark.slow
def test_a_signal_whose_exception_was_dropped_still_stops_the_rtl_sim(tmp_path: Path) -> None:
    """A Ctrl-C raised inside a ``__del__`` is printed and dropped by Python; the simulation's
    cycle loop raises it again (here the handler runs, as it may, while an object is
    finalized: the command must still stop with one line and leave nothing)."""
    from vta.cli.main import main

    (tmp_path / "long.s").write_text(LONG_PROGRAM)
    assert main(["asm", str(tmp_path / "long.s"), "-o", str(tmp_path / "long.bin")]) == 0
    (tmp_path / "d.bin").write_bytes(bytes(4096))
    proc = _start("""
        import os, signal, sys
        from vta.hw import simulate

        class Finalized:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGINT)  # its KeyboardInterrupt is dropped here
                for _ in range(1000):  # (the handler runs between bytecodes)
                    pass

        real = simulate._run_job

        async def run_job(*args, **kwargs):
            Finalized()
            print("dropped", file=sys.stderr, flush=True)
            return await real(*args, **kwargs)

        simulate._run_job = run_job
        from vta.cli.main import entry
        sys.argv = ["vta", "sim", "long.bin", "--dram", "d.bin", "-o", "o.bin", "--backend",
                    "rtl", "--vcd", "w.vcd", "--max-cycles", "1000000000"]
        entry()
    """, tmp_path)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the simulation went on after its dropped Ctrl-C")
    assert proc.returncode == 130, err
    assert "Exception ignored" in err and "dropped" in err, err  # Python did drop it
    assert err.splitlines()[-1] == "vta sim: interrupted", err
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


#: ``vta tune --jobs 2`` whose measurements, once running in a worker, write a marker file
#: named by the worker's pid into the folder ``argv[1]`` and wait there until stopped.
_BLOCKED_TUNE = """
import os, sys, threading
from pathlib import Path
from vta.tune import measure

marks = Path(sys.argv[1])

def evaluate(*args):
    (marks / f"{os.getpid()}.tmp").write_text("")
    os.replace(marks / f"{os.getpid()}.tmp", marks / str(os.getpid()))
    threading.Event().wait()  # until stopped

measure.evaluate = evaluate
from vta.cli.main import entry
sys.argv = ["vta", "tune", "--workload", "conv2d:H=14,W=14,CI=64,CO=64,K=3,S=1,P=1",
            "--tuner", "random", "--trials", "8", "--jobs", "2", "--log", "t.jsonl"]
entry()
"""


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_to_tune_jobs_is_one_line_and_leaves_no_worker(tmp_path: Path, sig: int,
                                                              status: int) -> None:
    """Ctrl-C in a terminal (the signal goes to the whole process group) while both workers
    measure: one line, no worker traceback, no worker left."""
    marks = tmp_path / "marks"
    marks.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _BLOCKED_TUNE, str(marks)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    _wait_for(proc, lambda: sum(p.name.isdigit() for p in marks.iterdir()) == 2,
              "two measuring workers", limit=300)
    workers = [int(p.name) for p in marks.iterdir() if p.name.isdigit()]
    os.killpg(proc.pid, sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("vta tune did not stop within 60 s of the signal")
    assert proc.returncode == status, err
    assert len(err.splitlines()) == 1 and err.startswith("vta tune: "), err
    assert not [w for w in workers if _alive(w)], workers


def _children(pid: int) -> list[int]:
    """The live children of ``pid`` (all its threads')."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


@pytest.mark.synth
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_during_synthesis_leaves_no_tool_and_no_temporary_folder(tmp_path: Path,
                                                                       sig: int) -> None:
    """A signal to ``vta synth`` while yosys (YoWASP) runs: the tool is stopped, and neither
    its ``yowasp_*`` folder nor the command's work folder stays in TMPDIR (before, the
    SIGKILLed tool left its folder behind)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vta.cli.main", "synth", "--board", "ulx3s-85f", "--preset",
         "small", "-q", "--json", "r.json"], cwd=tmp_path, env=dict(os.environ, TMPDIR=str(tmp)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(proc, lambda: any(tmp.rglob("yowasp_*")), "yowasp temporary folder",
              limit=300)
    tools = _children(proc.pid)
    assert tools
    rc, err = _finish(proc, sig)
    assert rc == 128 + sig, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert sorted(tmp.rglob("*")) == [], sorted(tmp.rglob("*"))
    assert not (tmp_path / "r.json").exists()
    assert all(not Path(f"/proc/{t}").exists() for t in tools), tools  # reaped by vta synth


def _with_env(entry: str) -> list[int]:
    """Live processes whose environment holds ``entry`` (KEY=VALUE): a command's
    descendants, even those its exit left to init."""
    out = []
    for d in Path("/proc").iterdir():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, PermissionError):
            if d.name.isdigit() and entry.encode() in (d / "environ").read_bytes().split(b"\0") \
                    and _alive(int(d.name)):
                out.append(int(d.name))
    return out


def _names(pids: list[int]) -> list[str]:
    out = []
    for p in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            out.append(Path(f"/proc/{p}/comm").read_text().strip())
    return out


def _alive(pid: int) -> bool:
    """Running (not exited: gone, or a zombie waiting for its parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.tsim
@pytest.mark.slow
def test_sigterm_during_a_tsim_build_stops_its_compilers(tmp_path: Path) -> None:
    """SIGTERM to ``vta sim --backend tsim`` while Verilator's make runs the C++ compiler
    (a cold build cache): the whole build (verilator, make, g++) stops with the command
    (before, they ran on for about 15 s), and no build folder stays in the cache."""
    from vta.cli.main import main

    (tmp_path / "f.s").write_text("finish\n")
    assert main(["asm", str(tmp_path / "f.s"), "-o", str(tmp_path / "f.bin")]) == 0
    (tmp_path / "d.bin").write_bytes(bytes(4096))
    cache = tmp_path / "cache"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vta.cli.main", "sim", "f.bin", "--dram", "d.bin", "-o",
         "o.bin", "--backend", "tsim", "--preset", "small"], cwd=tmp_path,
        env=dict(os.environ, VTA_CACHE_DIR=str(cache)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)

    mark = f"VTA_CACHE_DIR={cache}"  # what the command and each of its tools inherit

    def compiling() -> bool:  # make has built an object file and runs the compiler again
        return any(cache.rglob("obj/*.o")) and "cc1plus" in _names(_with_env(mark))

    _wait_for(proc, compiling, "C++ compiler of the tsim build", limit=300)
    rc, err = _finish(proc, signal.SIGTERM)
    assert rc == 143, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    # all SIGKILLed (the build's group at once) before vta sim removed its folder and exited
    assert _names(_with_env(mark)) == []
    assert not any(p.name.startswith(".") and p.is_dir() for p in (cache / "tsim").rglob("*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "d.bin", "f.bin", "f.s"]
