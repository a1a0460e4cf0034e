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
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vta.isa.errors import FileError
from vta.isa.fileio import kit_version


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
    def from_json(cls, d: dict[str, Any]) -> LogRecord:
        r = d["result"]
        return cls(d["workload"], d.get("task", {}), d["config"], r.get("cost"), r.get("error"),
                   r.get("kind", "ok" if r.get("error") is None else "error"),
                   float(r.get("elapsed", 0.0)), d.get("tuner", ""), int(d.get("trial", 0)),
                   float(d.get("time", 0.0)), d.get("version", ""))


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
    try:
        with open(path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)
    except OSError as e:
        raise FileError(f"cannot open tuning log {path}: {e.strerror or e}") from None


def best_record(records: Iterable[LogRecord]) -> LogRecord | None:
    ok = [r for r in records if r.ok]
    return min(ok, key=lambda r: r.cost) if ok else None


def iter_log(path: str | Path) -> Iterator[LogRecord]:
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise FileError(f"tuning log {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise FileError(f"cannot read tuning log {p}: {e}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            yield LogRecord.from_json(d)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            if n == len(lines):  # a line cut short by a crash: ignore it
                return
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
