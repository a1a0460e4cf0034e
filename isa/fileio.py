"""File helpers shared by every layer: clear errors on read, atomic writes (no half-written
output)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .errors import FileError


def user_cache_dir(*parts: str) -> Path:
    """The kit's user cache: ``$VTA_CACHE_DIR``, else ``$XDG_CACHE_HOME/vta-kit``, else
    ``~/.cache/vta-kit``; with ``parts`` a subdirectory of it (not created here)."""
    if os.environ.get("VTA_CACHE_DIR"):
        base = Path(os.environ["VTA_CACHE_DIR"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vta-kit"
    return base.joinpath(*parts)


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """Read a whole file; a missing or unreadable file is a FileError naming it."""
    p = Path(path)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise FileError(f"{what} {p} does not exist") from None
    except IsADirectoryError:
        raise FileError(f"{what} {p} is a directory, not a file") from None
    except OSError as e:
        raise FileError(f"cannot read {what} {p}: {e.strerror or e}") from None


def read_text(path: str | Path, what: str = "file") -> str:
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileError(f"{what} {path} is not UTF-8 text (byte {e.start})") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, data: bytes | str, what: str = "output file") -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: all or nothing."""
    p = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise FileError(f"cannot write {what} {p}: directory {parent} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=parent)
    except OSError as e:
        raise FileError(f"cannot write {what} {p}: {e.strerror or e}") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give what open() would
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise FileError(f"cannot write {what} {p}: {e.strerror or e}") from None
        raise
