"""The shared harness pieces (vta.hw.harness) and ``vta sim --backend rtl`` from the command line.

References: fsim's own statistics, hand-built samples and register values, fsim's DRAM image.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from vta.hw.harness import (
    PROGRAM_ALIGN,
    describe_deadlock,
    place_program,
    spans_from_samples,
)
from vta.isa import FinishInsn, GemmInsn, MemInsn, MemType, Opcode
from vta.isa.insn import decode_program
from vta.isa.stats import RunStats, program_stats

STAT_KEYS = ("insn_count", "insns_per_opcode", "insns_per_module", "gemm_uops", "alu_uops",
             "gemm_useful_uops", "bytes_loaded", "bytes_stored")


@pytest.mark.unit
def test_program_stats_agree_with_fsim(small_cfg):
    from vta.sim import fsim
    from vta.sim.progen import random_program

    for seed in range(15):
        program, dram = random_program(small_cfg, seed)
        ref = fsim.run(program, dram, small_cfg).stats
        mine = program_stats(decode_program(program, small_cfg), small_cfg, backend="fsim")
        assert {k: getattr(mine, k) for k in STAT_KEYS} == \
            {k: getattr(ref, k) for k in STAT_KEYS}, seed


@pytest.mark.unit
@pytest.mark.parametrize("n", [0, 1, 4095, 4096, 10_000])
def test_program_is_placed_after_the_image(n):
    dram = np.arange(n, dtype=np.uint8)
    program = bytes(range(48))
    img = place_program(dram, program)
    assert img.insn_addr >= n and img.insn_addr % PROGRAM_ALIGN == 0
    assert img.insn_count == 3 and img.user_bytes == n
    assert (img.mem[:n] == dram).all()
    assert img.mem[img.insn_addr:img.insn_addr + 48].tobytes() == program
    assert len(img.mem) % PROGRAM_ALIGN == 0
    assert (img.user_dram() == dram).all()


def _insns():
    return [
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, x_size=1, y_size=1, x_stride=1),
        GemmInsn(uop_end=1, iter_out=1, iter_in=1, pop_prev_dep=1),
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, x_size=1, y_size=1, x_stride=1,
                pop_prev_dep=1),
        FinishInsn(),
    ]


@pytest.mark.unit
def test_deadlock_message_names_modules_and_empty_queues():
    regs = {"states": (2 << 8) | (2 << 12), "load_done": 1, "compute_done": 0, "store_done": 0,
            "tokens_l2c": 0, "tokens_c2l": 0, "tokens_c2s": 0, "tokens_s2c": 0, "fetched": 4}
    msg = describe_deadlock(regs, _insns(), 5000)
    assert msg.startswith("deadlock: no progress for 5000 cycles")
    assert "compute stuck at instruction 1 (GEMM) waiting for a token on load->compute" in msg
    assert "store stuck at instruction 2 (STORE) waiting for a token on compute->store" in msg
    assert "load stuck" not in msg  # load finished its only instruction


@pytest.mark.unit
def test_spans_from_samples():
    insns = _insns()
    # load: busy 2..5 (done at 5); compute: waits 3..6, runs 6..9, done at 9, FINISH 9..10
    samples = [
        (2, 0x0030, 0, 0, 0), (3, 0x0230, 0, 0, 0), (5, 0x0200, 1, 0, 0),
        (6, 0x0300, 1, 0, 0), (9, 0x0300, 1, 1, 0), (10, 0x0000, 1, 2, 0),
    ]
    spans = spans_from_samples(samples, insns)
    got = {(s.module, s.index): (s.start, s.run_start, s.end) for s in spans}
    assert got == {("load", 0): (2, 2, 5), ("compute", 1): (3, 6, 9),
                   ("compute", 3): (9, 9, 10)}


@pytest.mark.sim
def test_cli_sim_backend_rtl_matches_fsim(tmp_path, small_cfg):
    from vta.cli.main import main
    from vta.sim import fsim
    from vta.sim.progen import random_program

    program, dram = random_program(small_cfg, 77)
    (tmp_path / "p.bin").write_bytes(program)
    (tmp_path / "d.bin").write_bytes(dram.tobytes())
    rc = main(["sim", str(tmp_path / "p.bin"), "--dram", str(tmp_path / "d.bin"),
               "-o", str(tmp_path / "out.bin"), "--preset", "small", "--backend", "rtl",
               "--stats", str(tmp_path / "s.json"), "--trace", str(tmp_path / "t.json"), "-q"])
    assert rc == 0
    out = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.uint8)
    assert (out == fsim.run(program, dram, small_cfg).dram).all()
    stats = RunStats.from_json(json.loads((tmp_path / "s.json").read_text()))
    assert stats.backend == "rtl" and stats.cycles > 0
    trace = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    names = {e["args"]["name"] for e in trace if e.get("name") == "thread_name"}
    assert names == {"load", "compute", "store"}
