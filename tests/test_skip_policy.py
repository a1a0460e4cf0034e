"""The skip policy of tests/conftest.py: external tools may be missing outside CI (skip, saying
which), never under CI=true (fail); the kit's own tests do not skip at all, so no test file
skips by itself (every skip goes through conftest's require_tool / unavailable)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SKIPPING = """
import pytest
from conftest import require_tool


def test_needs_a_tool():
    require_tool("no-such-tool-vta-kit")


def test_skips_on_its_own():
    pytest.skip("some reason")


def test_runs():
    assert 1 + 1 == 2
"""


@pytest.fixture()
def session(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makepyfile(test_policy=SKIPPING)
    return pytester


@pytest.mark.unit
@pytest.mark.parametrize("ci", [None, "false", ""])
def test_outside_ci_a_missing_tool_skips_saying_which(session, monkeypatch, ci) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    result = session.runpytest_inprocess("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*no-such-tool-vta-kit is not installed*"])


@pytest.mark.unit
@pytest.mark.parametrize("ci", ["true", "TRUE"])
def test_under_ci_every_skip_fails(session, monkeypatch, ci) -> None:
    monkeypatch.setenv("CI", ci)
    result = session.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*no-such-tool-vta-kit is not installed*CI=true*",
                                 "*skipped under CI=true*some reason*"])


@pytest.mark.unit
def test_no_test_file_skips_by_itself() -> None:
    pattern = re.compile(r"pytest\.skip\(|importorskip\(|mark\.skip(if)?\b")
    offenders = [f"{p.relative_to(TESTS)}:{n}" for p in sorted(TESTS.rglob("*.py"))
                 if p.name != "conftest.py" and p != Path(__file__).resolve()
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if pattern.search(line)]
    assert not offenders, f"skip through tests/conftest.py (require_tool/unavailable): {offenders}"
