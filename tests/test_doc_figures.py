"""Figures quoted in README.md and docs/ against the benchmark records under bench/results/.

A quoted figure is followed by a marker naming its record and key,
``7.99<!-- figure bench_perf_model figures.training.mean_abs_pct -->``; the number just before
the marker must equal the latest record's value rounded to the decimals the text shows (and
``bench/record.py`` is the one writer every benchmark uses).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!--\s*figure\s+(\S+)\s+(\S+)\s*-->")
NUMBER = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)\s*(?:\*\*)?\s*[%x×]?\s*(?:\*\*)?\s*$")

pytestmark = pytest.mark.unit


def _record_module():  # noqa: ANN202 - the bench/record.py module
    spec = importlib.util.spec_from_file_location("bench_record", ROOT / "bench" / "record.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _markers() -> list[tuple[str, int, str, str, str]]:
    """(file, line, text before the marker, record, key) of every marker in the docs."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for k, line in enumerate(path.read_text().splitlines(), 1):
            for m in MARKER.finditer(line):
                out.append((path.name, k, line[:m.start()], m.group(1), m.group(2)))
    return out


def test_quoted_figures_match_their_latest_record() -> None:
    rec = _record_module()
    found = _markers()
    assert {r for *_, r, _ in found} >= {"bench_perf_model", "bench_compiler_cpu", "bench_autovta"}
    for name, line, before, bench, key in found:
        where = f"{name}:{line} ({bench} {key})"
        latest = rec.latest(bench)
        assert latest is not None, f"{where}: no record bench/results/{bench}-*.json"
        value = rec.lookup(latest, key)
        m = NUMBER.search(before)
        assert m is not None, f"{where}: no number right before the marker"
        text = m.group(1).replace(",", "")
        decimals = len(text.split(".")[1]) if "." in text else 0
        assert float(text) == round(float(value), decimals), \
            f"{where}: the text says {text}, the record {value}"


def test_every_benchmark_writes_its_record_with_the_one_writer() -> None:
    scripts = sorted((ROOT / "bench").glob("bench_*.py"))
    assert scripts
    for p in scripts:
        src = p.read_text()
        assert "from record import write_record" in src and "write_record(" in src, p.name
        assert "args.json" not in src, f"{p.name}: figures go into the record, not --json"


def test_record_writer_round_trip(tmp_path) -> None:
    rec = _record_module()
    path = rec.write_record("bench_x", {"a": {"b": 1.25}}, {"numpy_ms": 2.0},
                            params={"repeat": 3}, results=tmp_path)
    rec.write_record("bench_x_other", {"a": {"b": 9}}, None, results=tmp_path)
    r = rec.latest("bench_x", tmp_path)
    assert path.exists() and rec.lookup(r, "figures.a.b") == 1.25
    assert r["reference"] == {"numpy_ms": 2.0} and r["params"] == {"repeat": 3}
    assert {"commit", "date", "machine", "dirty"} <= set(r) and r["machine"]["cores"] >= 1
    with pytest.raises(KeyError):
        rec.lookup(r, "figures.a.c")
