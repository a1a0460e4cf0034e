"""Issue #35: a module, a log and a model are data (no code runs from them) and nothing the
user owns is removed or replaced.

Grouped by family, each case runs the real entry point (``vta.cli.main.main``) and asserts, for
bad input, what tests/cli/test_cli_bad_inputs.py asserts: exit status 2, one line on stderr
naming the problem, no traceback, and nothing written or left behind.

Device nodes are made with ``os.mknod`` in a temporary directory (a copy of /dev/null, major 1
minor 3, and of /dev/full, minor 7): no test points a code path that could rename at the real
/dev/null.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from vta.cli.main import main

from .test_cli_bad_inputs import tree, work  # noqa: F401 - the shared inputs (a fixture)

pytestmark = pytest.mark.unit

NULL, FULL = os.makedev(1, 3), os.makedev(1, 7)


def one_line_error(argv: list[str], capsys, needle: str) -> str:  # noqa: ANN001
    """Run ``argv``; assert exit 2, one line on stderr naming ``needle``, no traceback."""
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, (rc, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vta {argv[0]}"), err
    assert "error" in lines[0] and needle in lines[0], err
    assert "Traceback" not in err
    return lines[0]


# ------------------------------------------------------------------ file outputs onto nodes
#: (argv with {t} for the inputs and {o} for the output under test)
FILE_OUTPUTS: dict[str, list[str]] = {
    "asm": ["asm", "{t}/m.s", "-o", "{o}"],
    "disasm": ["disasm", "{t}/m.bin", "-o", "{o}"],
    "config-write": ["config", "write", "--preset", "small", "-o", "{o}"],
    "sim": ["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{o}"],
    "sim-stats": ["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{n}/o.bin",
                  "--stats", "{o}"],
    "run": ["run", "{t}/mod", "--input", "{t}/x.npy", "--target", "cpu", "-o", "{o}"],
    "run-report-json": ["run", "{t}/mod", "--input", "{t}/x.npy", "--target", "cpu", "-o",
                        "{n}/y.npy", "--report-json", "{o}"],
}


def _node(d: Path, kind: str) -> Path:
    p = d / kind
    if kind in ("null", "full"):
        os.mknod(p, stat.S_IFCHR | 0o666, NULL if kind == "null" else FULL)
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "block":
        os.mknod(p, stat.S_IFBLK | 0o600, os.makedev(7, 200))  # a loop device number
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
    return p


def _argv(case: str, t: Path, out: Path, spare: Path) -> list[str]:
    return [a.replace("{t}", str(t)).replace("{o}", str(out)).replace("{n}", str(spare))
            for a in FILE_OUTPUTS[case]]


@pytest.mark.parametrize("case", sorted(FILE_OUTPUTS))
def test_a_character_device_output_is_written_in_place(case: str, work: Path,  # noqa: F811
                                                       tmp_path: Path, capsys) -> None:
    dev = _node(tmp_path, "null")
    spare = tmp_path / "spare"
    spare.mkdir()
    capsys.readouterr()
    assert main(_argv(case, work, dev, spare)) == 0, capsys.readouterr().err
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and os.lstat(dev).st_rdev == NULL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "spare"]  # no temporary


@pytest.mark.parametrize("case", sorted(FILE_OUTPUTS))
def test_a_full_device_output_is_a_one_line_error(case: str, work: Path,  # noqa: F811
                                                  tmp_path: Path, capsys) -> None:
    dev = _node(tmp_path, "full")
    spare = tmp_path / "spare"
    spare.mkdir()
    one_line_error(_argv(case, work, dev, spare), capsys, "No space left on device")
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and os.lstat(dev).st_rdev == FULL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "spare"]


@pytest.mark.parametrize("kind", ["fifo", "block", "socket"])
@pytest.mark.parametrize("case", sorted(FILE_OUTPUTS))
def test_a_fifo_block_device_or_socket_output_is_refused(case: str, kind: str,
                                                         work: Path,  # noqa: F811
                                                         tmp_path: Path, capsys) -> None:
    node = _node(tmp_path, kind)
    spare = tmp_path / "spare"
    spare.mkdir()
    before = tree(work)
    mode = os.lstat(node).st_mode
    one_line_error(_argv(case, work, node, spare), capsys, "not a regular file")
    assert os.lstat(node).st_mode == mode  # still the node, never renamed over
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([kind, "spare"])
    assert not any(spare.iterdir()) and tree(work) == before


def test_a_symbolic_link_output_replaces_its_target_not_the_link(work: Path,  # noqa: F811
                                                                 tmp_path: Path) -> None:
    target = tmp_path / "real.bin"
    target.write_bytes(b"old")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    assert main(["asm", str(work / "m.s"), "-o", str(link)]) == 0
    assert link.is_symlink() and target.read_bytes() == (work / "m.bin").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.bin", "real.bin"]


def test_write_atomic_writes_a_device_in_place_and_refuses_a_fifo(tmp_path: Path) -> None:
    from vta.isa.errors import FileError
    from vta.isa.fileio import atomic_path, write_atomic

    dev = _node(tmp_path, "null")
    write_atomic(dev, b"data")
    with atomic_path(dev) as p:
        assert p == dev  # a writer that wants a name writes the device itself
    with pytest.raises(FileError, match="No space left on device"):
        write_atomic(_node(tmp_path, "full"), b"data")
    with pytest.raises(FileError, match="is a FIFO"):
        write_atomic(_node(tmp_path, "fifo"), b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "full", "null"]
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
