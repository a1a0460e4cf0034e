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


@pytest.mark.unit
@pytest.mark.parametrize("special,needle", [("fifo", "is a FIFO (named pipe)"),
                                            ("/dev/zero", "is a character device"),
                                            ("dir", "is a directory")])
def test_read_refuses_what_is_not_a_regular_file(tmp_path, special: str, needle: str) -> None:
    """A FIFO with no writer would block the read forever, /dev/zero would never end it."""
    from vta.isa.fileio import check_input_file, read_text

    path = {"fifo": tmp_path / "f", "dir": tmp_path}.get(special, special)
    if special == "fifo":
        os.mkfifo(path)
    for read in (read_bytes, read_text, check_input_file):
        with pytest.raises(FileError) as e:
            read(path, "config file")
        assert str(e.value).startswith(f"config file {path} {needle}")


@pytest.mark.unit
def test_read_limit(tmp_path) -> None:
    from vta.isa.fileio import SMALL_INPUT, large_input_limit, read_text

    p = tmp_path / "c.json"
    p.write_bytes(b"x" * 100)
    assert read_bytes(p, "config", limit=100) == b"x" * 100
    with pytest.raises(FileError, match=r"config .* is 101 bytes, more than the 100 bytes a "
                                        r"config may have"):
        p.write_bytes(b"x" * 101)
        read_bytes(p, "config", limit=100)
    with open(p, "wb") as f:
        f.truncate(SMALL_INPUT + 1)  # sparse
    with pytest.raises(FileError, match="16.0 MiB, more than the 16 MiB"):
        read_text(p, "config")
    assert large_input_limit() >= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2


@pytest.mark.unit
def test_json_nesting_limit() -> None:
    import json

    from vta.isa.fileio import json_depth, loads_json

    assert json_depth('{"a": [1, {"b": "[[[[{{"}], "c": "\\"[["}') == 3
    assert json_depth("") == json_depth("7") == 0
    ok = "[" * 64 + "]" * 64
    assert loads_json(ok, "x") == json.loads(ok)
    with pytest.raises(FileError, match="x: JSON nested 65 levels deep, more than the 64"):
        loads_json("[" * 65 + "]" * 65, "x")
    with pytest.raises(FileError, match="nested 100000 levels"):  # json.loads: RecursionError
        loads_json("[" * 100000, "x")


@pytest.mark.parametrize("fail", [RuntimeError, KeyboardInterrupt])
def test_a_failed_output_directory_leaves_no_parent_it_made(tmp_path, fail) -> None:
    """`vta compile -o a/b/mod` that fails (an error, Ctrl-C) leaves neither the module nor the
    parents it made; a parent that existed, and one something else was written into, stay."""
    from vta.isa.fileio import atomic_dir

    with pytest.raises(fail), atomic_dir(tmp_path / "a" / "b" / "mod") as d:
        (d / "manifest.json").write_text("{}")
        raise fail()
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "a").mkdir()
    with pytest.raises(fail), atomic_dir(tmp_path / "a" / "b" / "mod") as d:
        (tmp_path / "a" / "mine.txt").write_text("mine")
        raise fail()
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["mine.txt"]
    with atomic_dir(tmp_path / "c" / "mod") as d:
        (d / "f").write_text("x")
    assert (tmp_path / "c" / "mod" / "f").read_text() == "x"
