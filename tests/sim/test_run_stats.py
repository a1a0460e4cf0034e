"""RunStats, the one statistics type of every backend: JSON round trips, one-line errors on a
malformed record, and the same program's counts on fsim, perf, rtl and tsim.

References: fsim's counts (the golden model counts as it runs), hand-built records, and for the
counts of a program the instruction list itself.
"""

from __future__ import annotations

import json

import pytest
from vta.isa import Config, Opcode, VTAError, decode_program
from vta.isa.stats import AxiCounts, ModuleCycles, RunStats, StatsError, program_stats
from vta.sim import fsim
from vta.sim.perf import estimate
from vta.sim.programs import matmul_program

from ..conftest import require_tool

#: The counts of a program every backend reports identically.
PROGRAM_FIELDS = ("insn_count", "insns_per_opcode", "insns_per_module", "gemm_uops",
                  "gemm_useful_uops", "alu_uops", "macs_per_uop", "bytes_loaded", "bytes_stored")


def _full(cfg: Config) -> RunStats:
    """A record with every optional field set (as rtl/tsim fill them, plus seconds)."""
    mm = matmul_program(cfg, 8, 8, 8)
    base = program_stats(decode_program(mm.program, cfg), cfg, backend="tsim")
    modules = {m: ModuleCycles(insns=n, busy=10 * n + 1, token_wait=n, mem_wait=2 * n)
               for m, n in base.insns_per_module.items()}
    return base.replace(cycles=1234, bus_width=64, modules=modules, memory_port_busy=99,
                        hw_counters={"cycles": 1234, "bytes_read": 512}, seconds=0.25,
                        axi=AxiCounts(read_bursts=3, write_bursts=1, read_beats=40,
                                      write_beats=8))


def _round_trip(stats: RunStats) -> RunStats:
    return RunStats.from_json(json.loads(json.dumps(stats.to_json())))


@pytest.mark.unit
def test_json_round_trip(small_cfg: Config) -> None:
    mm = matmul_program(small_cfg, 8, 8, 8)
    for stats in (fsim.run(mm.program, mm.dram, small_cfg).stats,
                  estimate(mm.program, small_cfg), _full(small_cfg)):
        again = _round_trip(stats)
        assert again == stats and type(again.modules) is type(stats.modules)
        assert json.dumps(again.to_json(), sort_keys=True) == \
            json.dumps(stats.to_json(), sort_keys=True)


@pytest.mark.unit
def test_derived_values_are_written_and_computed(small_cfg: Config) -> None:
    s = _full(small_cfg)
    raw = s.to_json()
    assert raw["useful_macs"] == s.gemm_useful_uops * small_cfg.macs_per_cycle
    assert raw["gemm_utilization"] == s.gemm_useful_uops / 1234
    no_cycles = s.replace(cycles=None).to_json()
    assert "cycles" not in no_cycles and "gemm_utilization" not in no_cycles


def _error(raw: dict) -> str:
    with pytest.raises(StatsError) as e:
        RunStats.from_json(raw)
    msg = str(e.value)
    assert isinstance(e.value, VTAError) and "\n" not in msg
    return msg


@pytest.mark.unit
def test_from_json_names_the_bad_field(small_cfg: Config) -> None:
    good = _full(small_cfg).to_json()
    missing = dict(good)
    del missing["gemm_uops"]
    assert "field gemm_uops is missing" in _error(missing)
    assert "field cycles must be an integer, not 'many'" in _error({**good, "cycles": "many"})
    assert "field cycles must be an integer, not True" in _error({**good, "cycles": True})
    bad_module = json.loads(json.dumps(good))
    bad_module["modules"]["load"]["busy"] = 1.5
    assert "field modules.load.busy must be an integer, not 1.5" in _error(bad_module)
    del bad_module["modules"]["store"]
    bad_module["modules"]["load"]["busy"] = 1
    assert "field modules must have the keys load, compute, store" in _error(bad_module)
    assert "field bytes_loaded must be a JSON object, not [1, 2]" in \
        _error({**good, "bytes_loaded": [1, 2]})
    opcodes = {**good["insns_per_opcode"], "NOP": 1}
    assert "field insns_per_opcode must have the keys" in \
        _error({**good, "insns_per_opcode": opcodes})
    assert "field note is not expected" in _error({**good, "note": "an older file"})
    assert "the record must be a JSON object, not [1]" in _error([1])  # type: ignore[arg-type]


def _program(cfg: Config):
    mm = matmul_program(cfg, 8, 8, 8, double_buffer=True)
    ref = fsim.run(mm.program, mm.dram, cfg).stats
    insns = decode_program(mm.program, cfg)
    assert ref.insn_count == len(insns) and ref.cycles is None and ref.modules is None
    assert ref.insns_per_opcode["GEMM"] == sum(1 for i in insns if i.opcode == Opcode.GEMM)
    return mm, ref


def _agree(s: RunStats, ref: RunStats, backend: str) -> None:
    """``s`` (a cycle-level backend's) has fsim's counts, cycles, and modules that completed
    the instructions fsim gave them."""
    assert isinstance(s, RunStats) and s.backend == backend
    assert {f: getattr(s, f) for f in PROGRAM_FIELDS} == \
        {f: getattr(ref, f) for f in PROGRAM_FIELDS}, backend
    assert s.cycles > 0 and 0 < s.gemm_utilization <= 1, backend
    assert {m: c.insns for m, c in s.modules.items()} == ref.insns_per_module, backend
    assert _round_trip(s) == s
    if backend in ("rtl", "tsim"):  # the core's own counters
        hw = s.hw_counters
        assert hw["gemm_uops"] == ref.gemm_uops and hw["alu_uops"] == ref.alu_uops
        assert hw["bytes_written"] == ref.bytes_stored


@pytest.mark.sim
def test_fsim_perf_and_rtl_agree_on_the_program_counts(small_cfg: Config) -> None:
    from vta.hw.simulate import run_program

    mm, ref = _program(small_cfg)
    perf = estimate(mm.program, small_cfg)
    rtl = run_program(mm.program, mm.dram, small_cfg).stats
    _agree(perf, ref, "perf")
    _agree(rtl, ref, "rtl")


@pytest.mark.tsim
def test_tsim_agrees_on_the_program_counts(small_cfg: Config) -> None:
    require_tool("verilator")
    from vta.hw import tsim

    mm, ref = _program(small_cfg)
    _agree(tsim.run_program(mm.program, mm.dram, small_cfg).stats, ref, "tsim")
