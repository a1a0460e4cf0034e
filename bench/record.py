"""The one record writer of the benchmarks: a JSON file per run under bench/results/.

Every benchmark ends with ``write_record(name, figures, reference, params=...)``; the record
holds the figures, the reference measured in the same run, the commit, the date and the
machine. A figure quoted in README.md or docs/ carries a marker naming its record and key,

    ... in **28** ms<!-- figure bench_perf_model figures.speed.perf_ms --> ...

and tests/test_doc_figures.py checks it against the latest record of that benchmark (to the
precision the document shows). ``python bench/record.py`` lists the latest record of each
benchmark.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vta.isa.fileio import write_atomic

RESULTS = Path(__file__).resolve().parent / "results"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=RESULTS.parent, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine() -> dict[str, Any]:
    """Where the figures were measured: CPU model, cores, OS, Python."""
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "system": platform.platform(),
            "python": platform.python_version(), "node": platform.node()}


def write_record(bench: str, figures: dict[str, Any], reference: dict[str, Any] | None = None,
                 *, params: dict[str, Any] | None = None, results: Path | None = None
                 ) -> Path:
    """Write ``bench/results/<bench>-<UTC time>.json`` (atomically) and return its path.

    ``figures``: what the benchmark measured (nested dicts of numbers/strings, in the units
    the documents quote); ``reference``: the reference measured in the same run (e.g. numpy's
    time, tsim's cycles), or None where the figure is its own reference (a count);
    ``params``: the command-line settings of the run.
    """
    now = datetime.now(UTC)
    rec = {"bench": bench, "figures": figures, "reference": reference, "params": params or {},
           "commit": _git("rev-parse", "HEAD"), "dirty": bool(_git("status", "--porcelain",
                                                                    "--untracked-files=no")),
           "date": now.isoformat(timespec="seconds"), "machine": machine(),
           "argv": sys.argv[1:]}
    out = results or RESULTS
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{bench}-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    write_atomic(path, json.dumps(rec, indent=1, default=_plain) + "\n", "bench record")
    print(f"record: {path}")
    return path


def _plain(x: Any) -> Any:
    """numpy scalars and arrays, paths and dataclass-likes as JSON values."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "to_json"):
        return x.to_json()
    return str(x)


def latest(bench: str, results: Path | None = None) -> dict[str, Any] | None:
    """The newest record of ``bench`` (by the date in its name), or None."""
    files = sorted((results or RESULTS).glob(f"{bench}-*.json"))
    files = [f for f in files if f.name[len(bench) + 1:len(bench) + 2].isdigit()]
    return json.loads(files[-1].read_text()) if files else None


def lookup(record: dict[str, Any], key: str) -> Any:
    """The value at a dotted ``key`` (``figures.speed.perf_ms``) of a record; a dictionary key
    may itself contain dots (``figures.host_ops.resnet18:maxpool.out.quantize.ratio``)."""
    v: Any = record
    parts = key.split(".")
    while parts:
        if isinstance(v, list) and parts[0].isdigit() and int(parts[0]) < len(v):
            v, parts = v[int(parts[0])], parts[1:]
            continue
        for j in range(len(parts), 0, -1):  # the longest dotted name that is a key
            name = ".".join(parts[:j])
            if isinstance(v, dict) and name in v:
                v, parts = v[name], parts[j:]
                break
        else:
            raise KeyError(f"{record.get('bench')}: no {key!r} (stops at {parts[0]!r})")
    return v


if __name__ == "__main__":
    names = sorted({p.name.rsplit("-", 1)[0] for p in RESULTS.glob("*.json")})
    for name in names:
        r = latest(name)
        print(f"{name:34} {r['date']}  {r['commit'][:10]}{' (dirty)' if r['dirty'] else ''}")
