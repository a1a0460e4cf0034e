"""One digest over a whole output directory (a compiled module, an exploration, a board
project or build): ``digest.json`` names the output's kind and format version and holds one
sha256 over every other file of the directory, its path included.

It is what a loader verifies before reading anything else, and what lets ``-o`` replace an
existing directory: only a directory whose digest holds (every file as the kit wrote it, none
added, none removed) is an earlier output of the kit. It protects against accidents,
truncation and edits; it is no signature (anyone can write a new digest), so a module must
still come from a trusted source.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import FileError, VTAError

#: The digest's file name, at the top of the directory.
DIGEST_FILE = "digest.json"
#: Bounds: a digest file is a few hundred bytes; an output holds a few hundred files.
_MAX_DIGEST_BYTES = 1 << 16
_MAX_FILES = 100_000


@dataclass(frozen=True)
class FileEntry:
    """One file of a directory: its sha256 and size."""

    sha256: str
    bytes: int


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def listing(d: Path, what: str, error: type[VTAError] = FileError) -> dict[str, FileEntry]:
    """Every file under ``d`` but the digest (POSIX relative path -> entry). A directory holds
    regular files and directories only: a symbolic link, a device, a FIFO or a socket in it is
    an ``error`` naming it (an output of the kit has none, and a loader follows no link)."""
    out: dict[str, FileEntry] = {}
    for root, dirs, files in os.walk(d):
        for name in sorted(dirs + files):
            p = Path(root, name)
            rel = p.relative_to(d).as_posix()
            mode = os.lstat(p).st_mode
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                raise error(f"{what} {d}: {rel} is {kind}; it holds regular files only")
            if rel == DIGEST_FILE:
                continue
            if len(out) >= _MAX_FILES:
                raise error(f"{what} {d} holds more than {_MAX_FILES} files")
            out[rel] = FileEntry(file_sha256(p), os.lstat(p).st_size)
    return out


def combined(files: Mapping[str, FileEntry]) -> str:
    """The directory's digest: the sha256 of ``sha256  path`` lines (as sha256sum prints
    them) of every file, sorted by path."""
    text = "".join(f"{files[rel].sha256}  {rel}\n" for rel in sorted(files))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_digest(d: Path, kind: str, version: int) -> None:
    """Write ``d``'s digest (after every other file of it)."""
    record = {"kind": kind, "version": version,
              "sha256": combined(listing(d, kind))}
    (d / DIGEST_FILE).write_text(json.dumps(record, indent=1) + "\n")


@dataclass(frozen=True)
class Verified:
    """What :func:`verify_digest` found: the digest's version, whether it holds, the files."""

    version: int
    holds: bool
    files: dict[str, FileEntry]


def read_digest(d: Path, kind: str, what: str,
                error: type[VTAError] = FileError) -> tuple[int, str]:
    """The format version and the sha256 of ``d``'s digest of ``kind`` (an ``error`` when
    there is none or it is not one of ``kind``)."""
    p = d / DIGEST_FILE
    try:
        if not stat.S_ISREG(os.lstat(p).st_mode):
            raise error(f"{what} {d}: {DIGEST_FILE} is not a regular file")
        with open(p, "rb") as f:
            data = f.read(_MAX_DIGEST_BYTES + 1)
    except FileNotFoundError:
        raise error(f"{what} {d} has no {DIGEST_FILE}") from None
    except OSError as e:
        raise error(f"cannot read {what} {d}/{DIGEST_FILE}: {e.strerror or e}") from None
    try:
        if len(data) > _MAX_DIGEST_BYTES:
            raise ValueError("too large")
        record = json.loads(data)
        ok = isinstance(record, dict) and record.get("kind") == kind and \
            type(record.get("version")) is int and isinstance(record.get("sha256"), str)
    except (ValueError, RecursionError):
        ok = False
    if not ok:
        raise error(f"{what} {d}: {DIGEST_FILE} is not the digest of a {kind}")
    return record["version"], record["sha256"]


def verify_digest(d: Path, kind: str, what: str,
                  error: type[VTAError] = FileError) -> Verified:
    """Read ``d``'s digest and hash every file: whether the digest holds, and the files. An
    ``error`` when ``d`` has no digest of ``kind`` or holds anything but regular files."""
    version, want = read_digest(d, kind, what, error)
    files = listing(d, what, error)
    return Verified(version, combined(files) == want, files)


def is_output(d: Path, kind: str, version: int) -> bool:
    """``d`` is wholly an earlier output of ``kind`` at format ``version``: its digest holds,
    so no file was added, removed or changed."""
    try:
        v = verify_digest(d, kind, kind)
    except (VTAError, OSError):
        return False
    return v.holds and v.version == version


def is_output_or_empty(d: Path, kind: str, version: int) -> bool:
    """What ``-o`` may replace: an earlier output of ``kind`` (:func:`is_output`) or an empty
    directory."""
    return not any(d.iterdir()) or is_output(d, kind, version)
