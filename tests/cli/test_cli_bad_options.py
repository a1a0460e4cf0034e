"""Option values that crashed or ran away (issue #35): each is a one-line error, exit status
2, and nothing written (the assertions of test_cli_bad_inputs.py)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from vta.cli.main import main

from .test_cli_bad_inputs import tree


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    t = tmp_path_factory.mktemp("bad_options")
    (t / "f.s").write_text("finish\n")
    assert main(["asm", str(t / "f.s"), "-o", str(t / "f.bin")]) == 0
    (t / "d.bin").write_bytes(bytes(4096))
    return t


def _one_line_error(argv: list[str], work: Path, capsys, needle: str) -> None:
    before = tree(work)
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, (rc, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vta {argv[0]}: error: "), err
    assert needle in lines[0] and "Traceback" not in err, err
    assert tree(work) == before  # no output, no temporary file


@pytest.mark.parametrize("opt, backend", [("token_queue_depth=abc", "fsim"),
                                          ("token_queue_depth=none", "fsim"),
                                          ("mem_stall=abc", "rtl")])
def test_sim_opt_of_the_wrong_type(opt: str, backend: str, work: Path, capsys) -> None:
    _one_line_error(["sim", f"{work}/f.bin", "--dram", f"{work}/d.bin", "-o", f"{work}/o.bin",
                     "--backend", backend, "--opt", opt], work, capsys, opt)


#: workload -> what the error names
WORKLOADS = {
    "conv2d:H=8,W=8,CI=16,CO=16,K=3,S=0,P=1": "S=0 must be at least 1",  # was: ZeroDivision
    "conv2d:H=8,W=8,CI=16,CO=16,K=0,S=1,P=0": "K=0 must be at least 1",
    "dense:N=16,K=0,M=16": "K=0 must be at least 1",
    "clip:N=1,C=0,H=8,W=8": "C=0 must be at least 1",
    "conv2d:H=2,W=2,CI=16,CO=16,K=7,S=1,P=0": "its output would be empty",
    # were: allocation until the machine's memory was gone (SIGTERM ignored meanwhile)
    "conv2d:H=100000,W=100000,CI=16,CO=16,K=3,S=1,P=1":
        "its input of 160000000000 values would take 596.0 GiB",
    "dense:N=16,K=65536,M=65536": "its weight of 4294967296 values would take 16 GiB",
    "conv2d_transpose:H=30000,W=30000,CI=16,CO=16,K=4,S=2,P=1":
        "more than the 1 GiB a tensor may have",
    "group_conv2d:H=8,W=8,CI=16,CO=16,K=3,S=1,P=1,G=0": "G=0 must be at least 1",
}


@pytest.mark.parametrize("spec", sorted(WORKLOADS))
def test_tune_workload_out_of_bounds(spec: str, work: Path, capsys) -> None:
    _one_line_error(["tune", "--workload", spec, "--trials", "1", "--log", f"{work}/t.jsonl"],
                    work, capsys, WORKLOADS[spec])


@contextlib.contextmanager
def _server(answer: Callable[[socket.socket], None]) -> Iterator[int]:
    """A TCP server on 127.0.0.1 (its port) that gives each connection to ``answer``."""
    srv = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                c, _ = srv.accept()
                conns.append(c)
                answer(c)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()
        for c in conns:
            c.close()


def _garbage(c: socket.socket) -> None:
    c.sendall(b"HTTP/1.1 200 OK\r\n\r\nnot a Dask scheduler\n" * 10)


@pytest.mark.parametrize("cmd", ["tune", "explore"])
def test_scheduler_that_is_not_dask(cmd: str, work: Path, capsys) -> None:
    """A server answering garbage: read as Dask frames it claimed a 3 EiB message
    ("Unable to allocate 3.07 EiB"); now one line naming the address."""
    with _server(_garbage) as port:
        argv = {"tune": ["tune", "--workload", "dense:N=1,K=16,M=16", "--trials", "1"],
                "explore": ["explore", "--board", "pynq-z1", "--model", "mobilenet_v1",
                            "--budget", "2", "-o", f"{work}/e"]}[cmd]
        _one_line_error([*argv, "--scheduler", f"tcp://127.0.0.1:{port}"], work, capsys,
                        "did not answer as a Dask scheduler")


@pytest.mark.slow
def test_scheduler_that_never_answers(work: Path, capsys) -> None:
    """A server that accepts and says nothing: the handshake is bounded (distributed's own
    timeout covers only the connection: this hung)."""
    with _server(lambda c: None) as port:
        _one_line_error(["tune", "--workload", "dense:N=1,K=16,M=16", "--trials", "1",
                         "--scheduler", f"tcp://127.0.0.1:{port}"], work, capsys,
                        "no Dask handshake within")


def test_verilog_name_too_long_makes_no_directory(tmp_path: Path, capsys) -> None:
    out = tmp_path / "a" / "v"
    rc = main(["verilog", "--name", "a" * 5000, "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "too long" in err, err
    assert len(err) < 200, err  # the name is not echoed in full
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_verilog_on_a_full_disk_leaves_no_empty_directory(tmp_path: Path) -> None:
    """Writing the Verilog fails (no space left: every write under the output directory
    fails as on a full disk): exit 2, one line, and neither the output directory nor the
    parents it made stay."""
    code = textwrap.dedent("""
        import errno, pathlib, sys
        out = pathlib.Path(sys.argv[1])
        real = pathlib.Path.write_text

        def write_text(self, *args, **kwargs):
            if out in self.parents:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(self, *args, **kwargs)

        pathlib.Path.write_text = write_text
        from vta.cli.main import entry
        sys.argv = ["vta", "verilog", "--preset", "small", "-o", sys.argv[1]]
        entry()
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a" / "b" / "v")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vta verilog: error: "), proc.stderr
    assert "No space left on device" in lines[0], proc.stderr
    assert list(tmp_path.iterdir()) == []
