"""Shared fixtures: the two configurations every tier tests against."""

from __future__ import annotations

import shutil

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


def require_tool(name: str) -> str:
    """Skip (saying so) when an external tool such as iverilog or verilator is absent."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (make test installs it with apt-get as root)")
    return path
