"""File helpers shared by every layer: clear errors on read, atomic writes (no half-written
output)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .errors import FileError


def user_cache_dir(*parts: str) -> Path:
    """The kit's user cache: ``$VTA_CACHE_DIR``, else ``$XDG_CACHE_HOME/vta-kit``, else
    ``~/.cache/vta-kit``; with ``parts`` a subdirectory of it (not created here)."""
    if os.environ.get("VTA_CACHE_DIR"):
        base = Path(os.environ["VTA_CACHE_DIR"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vta-kit"
    return base.joinpath(*parts)


@functools.cache
def kit_version() -> str:
    """The installed kit's version: part of every user-cache key and tuning-log record (read
    once: the package metadata lookup costs about a millisecond)."""
    try:
        from importlib.metadata import version  # deferred: ~120 ms, not loaded by vta --help

        return version("vta-kit")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0+unknown"


#: The read limit of a small input (a config, a manifest, an assembler or JSON file, a line of
#: a tuning log): what such a file holds is kilobytes; a bigger one is not one of them.
SMALL_INPUT = 16 << 20

#: The deepest nesting of arrays and objects a JSON input may have (the kit's own files nest a
#: few levels; Python's parser recurses and would fail with a traceback near 1000).
JSON_MAX_DEPTH = 64


@functools.cache
def large_input_limit() -> int:
    """The read limit of a large input (a model, an .npz/.npy array, a program, a DRAM image, a
    compiled module's files): half the machine's physical memory, so a read never fills it."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system: say 8 GiB
        phys = 8 << 30
    return max(phys // 2, 256 << 20)


def format_size(n: int) -> str:
    """``n`` bytes for a message: ``16 MiB``, ``7.8 GiB``, ``512 bytes``."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n} bytes"


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_regular(mode: int) -> str | None:
    """What a non-regular, non-directory file of mode ``mode`` is (None for a regular one)."""
    return next((kind for test, kind in _KINDS if test(mode)), None)


@contextlib.contextmanager
def _reading(p: Path, what: str) -> Iterator[None]:
    """Turn the OSError of reading ``p`` into a FileError naming it."""
    try:
        yield
    except FileNotFoundError:
        raise FileError(f"{what} {p} does not exist") from None
    except IsADirectoryError:
        raise FileError(f"{what} {p} is a directory, not a file") from None
    except OSError as e:
        raise FileError(f"cannot read {what} {p}: {e.strerror or e}") from None


def _check_regular(p: Path, mode: int, what: str) -> None:
    if stat.S_ISDIR(mode):
        raise FileError(f"{what} {p} is a directory, not a file")
    kind = _not_regular(mode)
    if kind is not None:
        raise FileError(f"{what} {p} is {kind}, not a regular file; give a file")


def _open_input(p: Path, what: str) -> int:
    """A descriptor of the regular file ``p``, opened without blocking (a FIFO or a device
    would block or read forever; they are refused before and after opening)."""
    with _reading(p, what):
        _check_regular(p, os.stat(p).st_mode, what)
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        _check_regular(p, os.fstat(fd).st_mode, what)  # replaced since the stat
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_input_size(size: int, p: str | Path, what: str, limit: int) -> None:
    """A FileError naming ``p`` if ``size`` bytes are more than a ``what`` may have."""
    if size > limit:
        article = "an" if what[:1] in "aeiou" else "a"
        raise FileError(f"{what} {p} is {format_size(size)}, more than the {format_size(limit)} "
                        f"{article} {what} may have")


def read_bytes(path: str | Path, what: str = "file", *, limit: int | None = None) -> bytes:
    """Read a whole regular file of at most ``limit`` bytes (default
    :func:`large_input_limit`; :data:`SMALL_INPUT` for configs and other small inputs); a
    missing, unreadable, non-regular (FIFO, device, socket) or too large file is a FileError
    naming it."""
    p = Path(path)
    limit = large_input_limit() if limit is None else limit
    fd = _open_input(p, what)
    with os.fdopen(fd, "rb") as f, _reading(p, what):
        check_input_size(os.fstat(fd).st_size, p, what, limit)
        data = f.read(limit + 1)
    check_input_size(len(data), p, what, limit)  # it grew while read
    return data


def read_stream(stream: TextIO, what: str, *, limit: int = SMALL_INPUT) -> str:
    """Read a text stream (standard input) of at most ``limit`` characters."""
    data = stream.read(limit + 1)
    check_input_size(len(data), "<stdin>", what, limit)
    return data


def check_input_file(path: str | Path, what: str = "file") -> Path:
    """Fail now (the FileError :func:`read_bytes` would give) if ``path`` cannot be read, for
    an input that is only read after long work."""
    p = Path(path)
    os.close(_open_input(p, what))
    return p


def read_text(path: str | Path, what: str = "file", *, limit: int = SMALL_INPUT) -> str:
    """Read a whole UTF-8 text file of at most ``limit`` bytes (as :func:`read_bytes`)."""
    return decode_text(read_bytes(path, what, limit=limit), path, what)


def decode_text(data: bytes, path: str | Path, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileError(f"{what} {path} is not UTF-8 text (byte {e.start})") from None


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def json_depth(text: str | bytes) -> int:
    """How deep arrays and objects nest in the JSON ``text`` (brackets inside strings do not
    count); linear time, no recursion."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    data = _JSON_STRING.sub(b"", data)
    b = np.frombuffer(data, dtype=np.uint8)
    step = np.isin(b, (0x5B, 0x7B)).astype(np.int64) - np.isin(b, (0x5D, 0x7D))
    return int(np.cumsum(step).max(initial=0))


def loads_json(text: str | bytes, where: str | Path, *, max_depth: int = JSON_MAX_DEPTH) -> Any:
    """``json.loads`` of an input, first refusing (a FileError naming ``where``) one that nests
    deeper than ``max_depth``; a syntax error stays a ``json.JSONDecodeError`` for the caller
    to place."""
    depth = json_depth(text)
    if depth > max_depth:
        raise FileError(f"{where}: JSON nested {depth} levels deep, more than the "
                        f"{max_depth} an input may have")
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise FileError(f"{where}: JSON nested too deeply") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _parent(p: Path) -> Path:
    return p.parent if str(p.parent) else Path(".")


def _probe_writable(directory: Path, what: str, p: Path) -> None:
    """Create and remove a file in ``directory``: the one test that also holds for root and
    read-only file systems (``os.access`` says yes to root everywhere)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".vta-probe-", dir=directory)
    except OSError as e:
        raise FileError(f"cannot write {what} {p}: directory {directory} is not writable "
                        f"({e.strerror or e})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _same_file(a: Path, b: str | Path) -> bool:
    try:
        return a.exists() and Path(b).exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_output_file(path: str | Path, what: str = "output file", *,
                      inputs: Iterable[str | Path | None] = ()) -> Path:
    """Fail now (a FileError naming ``path``) if :func:`write_atomic` could not write ``path``
    later: its directory must exist and be writable, ``path`` must not be a directory and must
    not be one of ``inputs`` (writing it would destroy an input). A character device must be
    writable (it is written in place); a FIFO, a block device or a socket is refused. Nothing
    is created."""
    p = Path(path)
    if not str(path):
        raise FileError(f"{what}: empty file name")
    if p.is_dir():
        raise FileError(f"{what} {p} is a directory; give a file name")
    if _special_output(p, what):
        if not os.access(p, os.W_OK):
            raise FileError(f"cannot write {what} {p}: permission denied")
        return p
    parent = _parent(_rename_target(p))
    if not parent.exists():
        raise FileError(f"cannot write {what} {p}: directory {parent} does not exist")
    if not parent.is_dir():
        raise FileError(f"cannot write {what} {p}: {parent} is not a directory")
    for src in inputs:
        if src is not None and str(src) != "-" and _same_file(p, src):
            raise FileError(f"{what} {p} is also the input {src}; writing it would destroy "
                            "the input, choose another name")
    _probe_writable(parent, what, p)
    return p


def check_output_dir(path: str | Path, what: str = "output directory", *,
                     inputs: Iterable[str | Path | None] = (),
                     replaceable: Callable[[Path], bool] | None = None) -> Path:
    """Fail now (a FileError naming ``path``) if ``path`` could not become a directory of
    outputs: it must be a writable directory or not exist yet below a writable directory (any
    missing parents are made by :func:`make_output_dir`), and must not be one of ``inputs``.
    With ``replaceable``, an existing directory must also pass it (as for :func:`atomic_dir`).
    Nothing is created."""
    p = Path(path)
    if not str(path):
        raise FileError(f"{what}: empty directory name")
    if p.exists() and not p.is_dir():
        raise FileError(f"{what} {p} exists and is a file, not a directory; choose a directory")
    if replaceable is not None:
        _check_replaceable(p, what, replaceable)
    for src in inputs:
        if src is not None and _same_file(p, src):
            raise FileError(f"{what} {p} is also the input {src}; choose another directory")
    existing = p
    while not existing.exists():
        existing = _parent(existing) if existing != _parent(existing) else Path(".")
    if not existing.is_dir():
        raise FileError(f"cannot make {what} {p}: {existing} is a file, not a directory")
    _probe_writable(existing, what, p)
    return p


def make_output_dir(path: str | Path, what: str = "output directory") -> Path:
    """Create ``path`` and its missing parents (after :func:`check_output_dir`)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FileError(f"cannot make {what} {p}: {e.strerror or e}") from None
    return p


#: What an output file may not be (refused: a rename would replace it, writing may block).
_REFUSED = {stat.S_ISFIFO: "a FIFO (named pipe)", stat.S_ISBLK: "a block device",
            stat.S_ISSOCK: "a socket"}


def _special_output(p: Path, what: str) -> bool:
    """True when ``p`` is a character device (/dev/null, a terminal: written in place, never
    renamed over); a FileError when it is a FIFO, a block device or a socket; False for a
    regular file or a name that does not exist yet (symbolic links followed)."""
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return False
    if stat.S_ISCHR(mode):
        return True
    for test, kind in _REFUSED.items():
        if test(mode):
            raise FileError(f"{what} {p} is {kind}, not a regular file; give a file name "
                            "(or a character device such as /dev/null)")
    return False


def _rename_target(p: Path) -> Path:
    """Where the temporary file is renamed to: ``p``, or the file a symbolic link ``p``
    points to (the link stays a link)."""
    return Path(os.path.realpath(p)) if p.is_symlink() else p


@contextlib.contextmanager
def output_dir(path: str | Path, what: str = "output directory") -> Iterator[Path]:
    """:func:`make_output_dir` for a block that writes into the directory: when the block
    raises (an error, a full disk, a signal), the directories it made (``path`` and missing
    parents) are removed again if they are still empty, so a failed command leaves no empty
    output directory behind."""
    p = Path(path)
    made = _missing_dirs(p)
    make_output_dir(p, what)
    try:
        yield p
    except BaseException:
        _remove_empty(made)
        raise


def _missing_dirs(p: Path) -> list[Path]:
    """``p`` and its parents that do not exist yet, deepest first (what making ``p`` makes)."""
    return [d for d in (p, *p.parents) if not d.exists()]


def _remove_empty(made: list[Path]) -> None:
    """Remove the directories of :func:`_missing_dirs` again, deepest first, while they are
    empty (a directory something was written into stays)."""
    for d in made:
        try:
            d.rmdir()
        except OSError:
            break


@contextlib.contextmanager
def atomic_path(path: str | Path, what: str = "output file") -> Iterator[Path]:
    """A temporary file name beside ``path`` (same directory and suffix) for a writer that
    wants a file name (a waveform dumper, a tool); it becomes ``path`` when the block ends
    normally and is removed when it raises (also on KeyboardInterrupt or a terminating
    signal that the CLI turns into one): all or nothing. A character device (/dev/null) is
    given as it is, to be written in place; a FIFO, a block device or a socket is refused
    (nothing is ever renamed over them); a symbolic link's target is replaced, not the link."""
    p = Path(path)
    if _special_output(p, what):
        try:
            yield p
        except OSError as e:
            raise FileError(f"cannot write {what} {p}: {e.strerror or e}") from None
        return
    p = _rename_target(p)
    parent = _parent(p)
    if not parent.is_dir():
        raise FileError(f"cannot write {what} {p}: directory {parent} does not exist")
    try:
        fd, name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=p.suffix, dir=parent)
    except OSError as e:
        raise FileError(f"cannot write {what} {p}: {e.strerror or e}") from None
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give what open() would
        yield tmp
        os.replace(tmp, p)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise FileError(f"cannot write {what} {p}: {e.strerror or e}") from None
        raise


@contextlib.contextmanager
def atomic_paths() -> Iterator[Callable[..., Path]]:
    """Several outputs written together: ``stage(path, what)`` gives a temporary name beside
    ``path`` (as :func:`atomic_path`); all of them are renamed into place when the block ends
    normally and all removed when it raises, so a late failure leaves none of them."""
    with contextlib.ExitStack() as stack:

        def stage(path: str | Path, what: str = "output file") -> Path:
            return stack.enter_context(atomic_path(path, what))

        yield stage


def write_atomic(path: str | Path, data: bytes | str, what: str = "output file") -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: all or nothing."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    with atomic_path(path, what) as tmp:
        tmp.write_bytes(data)


def _check_replaceable(out: Path, what: str, replaceable: Callable[[Path], bool]) -> None:
    if out.exists() and (not out.is_dir() or not replaceable(out)):
        article = "an" if what[:1] in "aeiou" else "a"
        raise FileError(f"{out} exists and is neither {article} {what} nor empty; choose "
                        "another -o")


@contextlib.contextmanager
def atomic_dir(path: str | Path, what: str = "output directory", *,
               replaceable: Callable[[Path], bool] = lambda d: not any(d.iterdir())
               ) -> Iterator[Path]:
    """A temporary directory beside ``path`` to fill; it becomes ``path`` when the block ends
    normally (an existing ``path`` is replaced only when ``replaceable(path)`` says it is an
    earlier output of the same kind; by default only an empty one) and is removed when the
    block raises, so ``path`` is either the old directory or the whole new one. Missing
    parents of ``path`` are made (and removed again, while empty, when the block raises)."""
    out = Path(path)
    _check_replaceable(out, what, replaceable)
    made = _missing_dirs(_parent(out))
    parent = make_output_dir(_parent(out), f"directory of the {what}")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as e:
        _remove_empty(made)
        raise FileError(f"cannot write {what} {out}: {e.strerror or e}") from None
    try:
        yield tmp
        tmp.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; give what mkdir() would
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=parent))
            os.replace(out, old / "d")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty(made)
        if isinstance(e, OSError):
            raise FileError(f"cannot write {what} {out}: {e.strerror or e}") from None
        raise
