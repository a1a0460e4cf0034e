"""Input files: the arrays a .npy or .npz file holds, fed to a model's inputs (one image, or a
batch of them) by ``vta run`` and as calibration samples."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa.fileio import read_bytes

from .errors import InputError


def load_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of an input file: a .npy file's array under the key ``""`` (a model's only
    input), a .npz file's under their names (one per model input). A one-line InputError when
    the file is missing or unreadable, or an array holds NaN or infinite values."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"input file {p} does not exist")
    raw = io.BytesIO(read_bytes(p, "input file"))
    try:
        data = np.load(raw, allow_pickle=False)
        if isinstance(data, np.ndarray):
            arrays = {"": data}
        else:
            with data:
                arrays = {k: data[k] for k in data.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise InputError(f"{p} is not a .npy or .npz array file "
                         f"({str(e).splitlines()[0]})") from None
    if not arrays:
        raise InputError(f"{p} holds no array")
    for name, x in arrays.items():
        if x.dtype.kind in "fc" and not np.isfinite(x).all():
            bad = int(x.size - np.isfinite(x).sum())
            what = f"{p} array {name!r}" if name else str(p)
            raise InputError(f"{what} holds {bad} NaN or infinite value(s) of {x.size}; give "
                             f"finite numbers")
    return arrays


def feeds_for(names: Iterable[str], arrays: dict[str, np.ndarray],
              source: str | Path) -> dict[str, np.ndarray]:
    """The model inputs ``names`` fed from :func:`load_arrays`' ``arrays`` (of file
    ``source``): a .npy array feeds a model of one input; a .npz file names every input."""
    names = list(names)
    if "" in arrays:
        if len(names) != 1:
            raise InputError(f"the model has {len(names)} inputs ({', '.join(names)}); give "
                             f"them in one .npz file, an array per input name "
                             f"(np.savez('x.npz', {names[0]}=...))")
        return {names[0]: arrays[""]}
    missing = [n for n in names if n not in arrays]
    extra = [k for k in arrays if k not in names]
    if missing or extra:
        what = f"has no array {missing[0]!r}" if missing else \
            f"has an array {extra[0]!r} that is no input of the model"
        raise InputError(f"{source} {what} (the model's inputs: {', '.join(names)})")
    return {n: arrays[n] for n in names}


#: The most images one input file may stack (``vta run``'s batches, calibration samples).
MAX_BATCH = 4096


def batch_size(inputs: Mapping[str, Any], feeds: Mapping[str, np.ndarray],
               what: str) -> int | None:
    """None when every array of ``feeds`` has its model input's shape (one image), B when each
    stacks B of them (``[B, *shape]``, the same B for every input); else a one-line InputError
    naming ``what`` (the file). ``inputs``: the graph's inputs (their ``shape``)."""
    counts = set()
    for name, x in feeds.items():
        shape = tuple(inputs[name].shape)
        if tuple(x.shape) == shape:
            counts.add(None)
        elif x.ndim == len(shape) + 1 and tuple(x.shape[1:]) == shape and x.shape[0] >= 1:
            counts.add(int(x.shape[0]))
        else:
            where = what + (f" array {name!r}" if len(feeds) > 1 else "")
            raise InputError(f"{where} has shape {list(x.shape)}; expected {list(shape)} or "
                             f"a stack of them [B, {', '.join(map(str, shape))}]")
    if len(counts) > 1:
        raise InputError(f"{what}: its arrays hold different numbers of images; stack the same "
                         f"number for every input")
    count = counts.pop() if counts else None
    if count is not None and count > MAX_BATCH:
        raise InputError(f"{what} stacks {count} images, more than {MAX_BATCH}; split it into "
                         f"several files")
    return count
