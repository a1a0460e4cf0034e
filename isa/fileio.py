"""File helpers shared by every layer: clear errors on read, atomic writes (no half-written
output)."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
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


@functools.cache
def kit_version() -> str:
    """The installed kit's version: part of every user-cache key and tuning-log record (read
    once: the package metadata lookup costs about a millisecond)."""
    try:
        from importlib.metadata import version

        return version("vta-kit")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0+unknown"


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


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """Read a whole file; a missing or unreadable file is a FileError naming it."""
    p = Path(path)
    with _reading(p, what):
        return p.read_bytes()


def check_input_file(path: str | Path, what: str = "file") -> Path:
    """Fail now (the FileError :func:`read_bytes` would give) if ``path`` cannot be read, for
    an input that is only read after long work."""
    p = Path(path)
    with _reading(p, what), open(p, "rb"):
        pass
    return p


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
    not be one of ``inputs`` (writing it would destroy an input). Nothing is created."""
    p = Path(path)
    if not str(path):
        raise FileError(f"{what}: empty file name")
    if p.is_dir():
        raise FileError(f"{what} {p} is a directory; give a file name")
    parent = _parent(p)
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


@contextlib.contextmanager
def output_dir(path: str | Path, what: str = "output directory") -> Iterator[Path]:
    """:func:`make_output_dir` for a block that writes into the directory: when the block
    raises (an error, a full disk, a signal), the directories it made (``path`` and missing
    parents) are removed again if they are still empty, so a failed command leaves no empty
    output directory behind."""
    p = Path(path)
    made = [d for d in (p, *p.parents) if not d.exists()]
    make_output_dir(p, what)
    try:
        yield p
    except BaseException:
        for d in made:  # deepest first; a directory something was written into stays
            try:
                d.rmdir()
            except OSError:
                break
        raise


@contextlib.contextmanager
def atomic_path(path: str | Path, what: str = "output file") -> Iterator[Path]:
    """A temporary file name beside ``path`` (same directory and suffix) for a writer that
    wants a file name (a waveform dumper, a tool); it becomes ``path`` when the block ends
    normally and is removed when it raises (also on KeyboardInterrupt or a terminating
    signal that the CLI turns into one): all or nothing."""
    p = Path(path)
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
    parents of ``path`` are made."""
    out = Path(path)
    _check_replaceable(out, what, replaceable)
    parent = make_output_dir(_parent(out), f"directory of the {what}")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as e:
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
        if isinstance(e, OSError):
            raise FileError(f"cannot write {what} {out}: {e.strerror or e}") from None
        raise
