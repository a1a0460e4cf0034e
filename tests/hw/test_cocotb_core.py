"""cocotb 2.x + Icarus on the core's generated Verilog: whole programs against fsim.

The Verilog is built once per configuration; each test launches the simulator once and runs a
batch of programs (reset between them) with the testbench in ``tests/hw/cocotb/tb_vta_core.py``:
random token-correct programs from :func:`vta.sim.progen.random_program` under random memory
latency and backpressure, and a tiled matmul from :mod:`vta.sim.programs`. Every DRAM image is
compared with :func:`vta.sim.fsim.run` byte for byte.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from vta.isa import Config

from ..conftest import require_tool

TB_DIR = Path(__file__).parent / "cocotb"
#: Random programs per CI run on Icarus, small config: the slow batch plus the quick one (the
#: Amaranth-simulator share is in test_harness_rtl.py; together more than 200).
N_RANDOM_SMALL = int(os.environ.get("VTA_COCOTB_PROGRAMS", "152"))
N_RANDOM_QUICK = 8

pytestmark = pytest.mark.cocotb


def require_iverilog() -> None:
    require_tool("iverilog", "vvp")


def fsim_expect(program: bytes, dram: np.ndarray, cfg: Config) -> np.ndarray:
    from vta.sim import fsim

    return np.asarray(fsim.run(program, dram, cfg).dram, dtype=np.uint8)


def job(name: str, program: bytes, dram: np.ndarray, cfg: Config, *, latency: int = 4,
        stall: float = 0.0, seed: int = 0, max_cycles: int = 200_000) -> dict:
    dram = np.asarray(dram, dtype=np.uint8)
    return {"name": name, "program": bytes(program), "dram": dram.tobytes(),
            "expect": fsim_expect(program, dram, cfg).tobytes(), "latency": latency,
            "stall": stall, "seed": seed, "max_cycles": max_cycles}


class IcarusCore:
    """The core's Verilog built once with Icarus; :meth:`run` launches one batch of jobs."""

    def __init__(self, cfg: Config, build_dir: Path, bus_width: int = 64) -> None:
        from cocotb_tools.runner import get_runner
        from vta.hw.verilog import generate

        self.build_dir = build_dir
        src = build_dir / "vta_core.v"
        src.write_text(generate(cfg.with_bus_width(bus_width), name="vta_core"))
        self.runner = get_runner("icarus")
        # -g2005: Icarus then runs yosys' `reg x = 0` initialisers as time-0 events, which
        # wake the `always @*` blocks; with the runner's default -g2012 they stay X.
        self.runner.build(sources=[src], hdl_toplevel="vta_core", build_dir=build_dir,
                          timescale=("1ns", "1ps"), always=True, build_args=["-g2005"])
        self.runs = 0

    def run(self, jobs: list[dict], monkeypatch: pytest.MonkeyPatch) -> list[dict]:
        self.runs += 1
        test_dir = self.build_dir / f"run{self.runs}"
        test_dir.mkdir()
        jobs_file, results_file = test_dir / "jobs.pkl", test_dir / "results.json"
        jobs_file.write_bytes(pickle.dumps(jobs))
        monkeypatch.syspath_prepend(str(TB_DIR))
        # the runner exits on a failed cocotb test; the results file says which job failed
        with contextlib.suppress(SystemExit):
            self.runner.test(test_module="tb_vta_core", hdl_toplevel="vta_core",
                             test_dir=test_dir, timescale=("1ns", "1ps"),
                             extra_env={"VTA_TB_JOBS": str(jobs_file),
                                        "VTA_TB_RESULTS": str(results_file)})
        assert results_file.exists(), f"the cocotb run wrote no results (see {test_dir})"
        results = json.loads(results_file.read_text())
        bad = [r for r in results if not r["ok"]]
        assert len(results) == len(jobs), f"stopped after {len(results)} jobs: {results[-1]}"
        assert not bad, f"{len(bad)} of {len(jobs)} programs differ from fsim: {bad[:3]}"
        return results


@pytest.fixture(scope="module")
def icarus_small(small_cfg, tmp_path_factory):
    require_iverilog()
    return IcarusCore(small_cfg, tmp_path_factory.mktemp("icarus_small"))


def matmul_jobs(cfg: Config, m: int, n: int, k: int, seed: int) -> list[dict]:
    """Single- and double-buffered tiled matmuls, also checked against numpy."""
    from vta.sim.programs import matmul_program

    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, k))
    b = rng.integers(-128, 128, (n, k))
    jobs = []
    for db in (False, True):
        mm = matmul_program(cfg, m, n, k, a=a, b=b, double_buffer=db)
        jb = job(f"matmul {m}x{n}x{k} double_buffer={db}", mm.program, mm.dram, cfg,
                 latency=6, stall=0.2, seed=seed)
        expect = np.frombuffer(jb["expect"], np.uint8)
        assert (mm.read_c(expect) == mm.plan.reference(a, b)).all()  # fsim agrees with numpy
        jobs.append(jb)
    return jobs


def random_jobs(cfg: Config, n: int, first_seed: int) -> list[dict]:
    from vta.sim.progen import random_program

    rng = np.random.default_rng(first_seed)
    jobs = []
    for k in range(n):
        program, dram = random_program(cfg, first_seed + k)
        jobs.append(job(f"random seed {first_seed + k}", program, dram, cfg,
                        latency=int(rng.integers(1, 12)), stall=float(rng.choice([0, 0.2, 0.5])),
                        seed=k))
    return jobs


def test_matmul_and_random_programs_small_config(icarus_small, small_cfg, monkeypatch):
    jobs = matmul_jobs(small_cfg, 8, 12, 16, seed=1) + random_jobs(small_cfg, N_RANDOM_QUICK,
                                                                   50_000)
    results = icarus_small.run(jobs, monkeypatch)
    assert all(r["cycles"] > 0 for r in results)


@pytest.mark.slow
def test_random_programs_small_config(icarus_small, small_cfg, monkeypatch):
    """Many random programs in one simulator launch, with varied latency and backpressure."""
    icarus_small.run(random_jobs(small_cfg, N_RANDOM_SMALL, 10_000), monkeypatch)


@pytest.mark.slow
def test_default_config_programs(cfg, tmp_path_factory, monkeypatch):
    """The default 1x16x16 core: a matmul (both buffering schemes) and random programs."""
    require_iverilog()
    core = IcarusCore(cfg, tmp_path_factory.mktemp("icarus_default"))
    core.run(matmul_jobs(cfg, 4, 32, 48, seed=2) + random_jobs(cfg, 3, 60_000), monkeypatch)
