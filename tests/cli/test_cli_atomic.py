"""The one atomic-write family behind every CLI output (vta.isa.fileio): all or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from vta.isa.errors import FileError
from vta.isa.fileio import (
    atomic_dir,
    atomic_path,
    check_output_dir,
    check_output_file,
    write_atomic,
)

pytestmark = pytest.mark.unit


def test_atomic_path_renames_on_success_and_removes_on_failure(tmp_path: Path) -> None:
    out = tmp_path / "w.vcd"
    with atomic_path(out, "waveform") as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".vcd" and tmp != out
        tmp.write_text("$end\n")
        assert not out.exists()
    assert out.read_text() == "$end\n"
    with pytest.raises(KeyboardInterrupt), atomic_path(out, "waveform") as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt
    assert out.read_text() == "$end\n"  # the old file, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.vcd"]


def test_write_atomic_keeps_the_old_file_when_the_write_fails(tmp_path: Path) -> None:
    out = tmp_path / "o.bin"
    write_atomic(out, b"old")
    (tmp_path / "d").mkdir()
    with pytest.raises(FileError, match="(?i)is a directory"):
        write_atomic(tmp_path / "d", b"new")
    with pytest.raises(TypeError):
        write_atomic(out, 5)  # type: ignore[arg-type]
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "o.bin"]


def test_atomic_dir_replaces_only_a_whole_earlier_output(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "mod"
    with atomic_dir(out, "compiled module") as tmp:
        (tmp / "manifest.json").write_text("1")
    assert (out / "manifest.json").read_text() == "1"

    def is_module(d: Path) -> bool:
        return (d / "manifest.json").exists()

    with pytest.raises(RuntimeError), atomic_dir(out, "compiled module",
                                                 replaceable=is_module) as tmp:
        (tmp / "manifest.json").write_text("2")
        raise RuntimeError("a failure half-way")
    assert (out / "manifest.json").read_text() == "1"
    with atomic_dir(out, "compiled module", replaceable=is_module) as tmp:
        (tmp / "manifest.json").write_text("3")
    assert (out / "manifest.json").read_text() == "3"
    assert sorted(p.name for p in out.parent.iterdir()) == ["mod"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "mine.txt").write_text("x")
    with pytest.raises(FileError, match="neither a compiled module nor empty"), \
            atomic_dir(other, "compiled module", replaceable=is_module):
        pass
    assert sorted(p.name for p in other.iterdir()) == ["mine.txt"]


def test_checks_create_nothing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    check_output_dir(tmp_path / "new" / "deeper")
    check_output_file(tmp_path / "out.bin", inputs=[tmp_path / "f"])
    with pytest.raises(FileError, match="is a file, not a directory"):
        check_output_dir(tmp_path / "f" / "sub")
    with pytest.raises(FileError, match="is also the input"):
        check_output_file(tmp_path / "." / "f", inputs=[tmp_path / "f"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
