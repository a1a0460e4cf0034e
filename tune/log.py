"""Append-only JSON-lines tuning logs: crash-safe, resumable, queried for the best configuration.

Each line is one measurement::

    {"workload": "<task key>", "task": {...}, "config": {"index": 7, "values": {...}},
     "result": {"cost": 1234.0, "error": null, "kind": "ok", "elapsed": 0.01},
     "tuner": "xgb", "trial": 12, "time": 1700000000.0, "version": "0.1.0"}

Records of a batch are written with one ``write`` and ``fsync``; a killed run loses at most the
batch in flight, and a truncated last line is ignored when the log is read back.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vta.isa.errors import FileError
from vta.isa.fileio import (
    SMALL_INPUT,
    check_input_size,
    decode_text,
    kit_version,
    loads_json,
    read_bytes,
)


@dataclass
class LogRecord:
    workload: str
    task: dict[str, Any]
    config: dict[str, Any]
    cost: float | None
    error: str | None
    kind: str
    elapsed: float
    tuner: str = ""
    trial: int = 0
    time: float = 0.0
    version: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok" and self.cost is not None

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload, "task": self.task, "config": self.config,
                "result": {"cost": self.cost, "error": self.error, "kind": self.kind,
                           "elapsed": self.elapsed},
                "tuner": self.tuner, "trial": self.trial, "time": self.time or time.time(),
                "version": self.version or kit_version()}

    @classmethod
    def from_json(cls, d: Any) -> LogRecord:
        """The record of a parsed log line, every field typed and checked (a
        :class:`RecordError` naming the first bad one)."""
        if not isinstance(d, dict):
            raise RecordError(f"expected a JSON object, got {_kind(d)}")
        r = _field(d, "result", dict)
        config = _field(d, "config", dict)
        _field(config, "index", int, where="config.index")
        values = _field(config, "values", dict, where="config.values")
        for k, v in values.items():
            if not isinstance(v, _SCALARS) and not (
                    isinstance(v, list) and all(isinstance(x, _SCALARS) for x in v)):
                raise RecordError(f"config.values[{k!r}] is {_kind(v)}, not a knob value")
        cost = _field(r, "cost", (int, float), where="result.cost", optional=True)
        if cost is not None and not math.isfinite(cost):
            raise RecordError(f"result.cost is {cost}, not a finite number")
        error = _field(r, "error", str, where="result.error", optional=True)
        kind = _field(r, "kind", str, where="result.kind", optional=True)
        elapsed = _field(r, "elapsed", (int, float), where="result.elapsed", optional=True)
        return cls(_field(d, "workload", str), _field(d, "task", dict, optional=True) or {},
                   config, None if cost is None else float(cost), error,
                   kind or ("ok" if error is None else "error"), float(elapsed or 0.0),
                   _field(d, "tuner", str, optional=True) or "",
                   _field(d, "trial", int, optional=True) or 0,
                   float(_field(d, "time", (int, float), optional=True) or 0.0),
                   _field(d, "version", str, optional=True) or "")


class RecordError(FileError):
    """A tuning-log line that is not a record: a missing or mistyped field (:func:`iter_log`
    names the file and line)."""


_SCALARS = (int, float, str)
_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer",
               float: "a number", bool: "a boolean", type(None): "null"}


def _kind(v: Any) -> str:
    return _TYPE_NAMES.get(type(v), type(v).__name__)


def _field(d: dict[str, Any], key: str, types: type | tuple[type, ...], *,
           where: str | None = None, optional: bool = False) -> Any:
    """``d[key]``, which must be of ``types`` (a boolean is no number), or None when it is
    ``optional`` and missing or null."""
    where = where or key
    if key not in d or d[key] is None:
        if optional:
            return None
        raise RecordError(f"field {where!r} is missing")
    v = d[key]
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(v, bool) or not isinstance(v, types):
        want = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
        raise RecordError(f"field {where!r} is {_kind(v)} ({json.dumps(v)[:40]}), not {want}")
    return v


class TuningLog:
    """A log file opened for appending (``path=None``: in memory only)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self.records: list[LogRecord] = []
        if self.path is not None and self.path.exists():
            _cut_partial_tail(self.path)
            self.records = read_log(self.path)

    def append(self, records: Iterable[LogRecord]) -> None:
        records = list(records)
        self.records += records
        if self.path is None or not records:
            return
        text = "".join(json.dumps(r.to_json(), separators=(",", ":")) + "\n" for r in records)
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise FileError(f"cannot append to tuning log {self.path}: {e.strerror or e}") from None

    def for_workload(self, key: str) -> list[LogRecord]:
        return [r for r in self.records if r.workload == key]

    def measured_indices(self, key: str) -> set[int]:
        return {int(r.config["index"]) for r in self.for_workload(key)}

    def best(self, key: str) -> LogRecord | None:
        return best_record(self.for_workload(key))


def _cut_partial_tail(path: Path) -> None:
    """Drop an unterminated last line (a write cut short by a crash) so appends start clean."""
    data = read_bytes(path, "tuning log")
    if data and not data.endswith(b"\n"):
        try:
            os.truncate(path, data.rfind(b"\n") + 1)
        except OSError as e:
            raise FileError(f"cannot open tuning log {path}: {e.strerror or e}") from None


def best_record(records: Iterable[LogRecord]) -> LogRecord | None:
    ok = [r for r in records if r.ok]
    return min(ok, key=lambda r: r.cost) if ok else None


def iter_log(path: str | Path) -> Iterator[LogRecord]:
    """The records of a log file; a line that is not one is a FileError giving its number
    (except a last line cut short by a crash, which is ignored)."""
    p = Path(path)
    lines = decode_text(read_bytes(p, "tuning log"), p, "tuning log").splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            check_input_size(len(line), f"{p}:{n}", "tuning-log line", SMALL_INPUT)
            yield LogRecord.from_json(loads_json(line, f"{p}:{n}"))
        except (json.JSONDecodeError, RecordError) as e:
            if n == len(lines) and isinstance(e, json.JSONDecodeError):
                return  # a line cut short by a crash: ignore it
            raise FileError(f"{p}:{n}: not a tuning record ({e})") from None


def read_log(path: str | Path) -> list[LogRecord]:
    return list(iter_log(path))


def best_per_workload(path: str | Path) -> dict[str, LogRecord]:
    """The best valid record of each workload in a log (what `vta compile --tuning-log` applies)."""
    best: dict[str, LogRecord] = {}
    for r in iter_log(path):
        if r.ok and (r.workload not in best or r.cost < best[r.workload].cost):
            best[r.workload] = r
    return best
