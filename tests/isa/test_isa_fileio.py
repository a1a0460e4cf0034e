"""write_atomic: all-or-nothing writes with the permissions a plain open() would give."""

from __future__ import annotations

import os

import pytest
from vta.isa.errors import FileError
from vta.isa.fileio import read_bytes, write_atomic


@pytest.mark.unit
def test_write_atomic_mode_and_content(tmp_path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "a.bin", b"\x01\x02")
        plain = tmp_path / "b.bin"
        plain.write_bytes(b"")
    finally:
        os.umask(old)
    assert read_bytes(tmp_path / "a.bin") == b"\x01\x02"
    assert (tmp_path / "a.bin").stat().st_mode & 0o777 == plain.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.unit
def test_write_atomic_missing_directory(tmp_path) -> None:
    with pytest.raises(FileError, match="directory .* does not exist"):
        write_atomic(tmp_path / "no" / "x.bin", b"")
    with pytest.raises(FileError, match="does not exist"):
        read_bytes(tmp_path / "nothing.bin")


@pytest.mark.unit
def test_user_cache_dir_precedence(tmp_path, monkeypatch) -> None:
    from pathlib import Path

    from vta.isa.fileio import user_cache_dir

    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path / "v"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert user_cache_dir("tsim") == tmp_path / "v" / "tsim"
    monkeypatch.delenv("VTA_CACHE_DIR")
    assert user_cache_dir("a", "b") == tmp_path / "x" / "vta-kit" / "a" / "b"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert user_cache_dir() == Path.home() / ".cache" / "vta-kit"
