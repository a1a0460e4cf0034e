"""GEMM/ALU/load/store sequences through the runtime on the functional simulator, against numpy."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import vta.runtime as rt
from vta.isa import Config, FileError, MemType, decode_program
from vta.sim import fsim

pytestmark = pytest.mark.sim


class RaceCheckedFsim(rt.FsimDevice):
    """fsim that runs every program under several scheduling orders, each starting from the same
    SRAM state, and insists on identical DRAM results (a missing token shows up as a
    difference); it keeps the programs it ran."""

    ORDERS = (("load-first", None), ("store-first", None), ("random", 1), ("random", 2),
              ("compute-first", None))

    def __init__(self, cfg: Config, **kw: Any) -> None:
        super().__init__(cfg, **kw)
        self.programs: list[bytes] = []

    def _execute(self, program: bytes, timeout: float | None) -> dict[str, Any]:
        self.programs.append(program)
        results = []
        for order, seed in self.ORDERS:
            sim = fsim.FunctionalSim(self.cfg, order=order, seed=seed)
            for name in ("uop", "inp", "wgt", "acc"):
                getattr(sim, name)[...] = getattr(self.sim, name)
            dram = self.dram.copy()
            stats = sim.run(program, dram)
            results.append((order, seed, dram))
        for order, seed, dram in results[:-1]:
            assert np.array_equal(dram, results[-1][2]), f"race: {order} {seed} differs"
        for name in ("uop", "inp", "wgt", "acc"):  # adopt the compute-first end state
            getattr(self.sim, name)[...] = getattr(sim, name)
        self.dram[:] = results[-1][2]
        return stats


class NoSramFsim(RaceCheckedFsim):
    """The same, for a device that loses its SRAM between runs (like rtl and tsim)."""

    keeps_sram = False

    def _execute(self, program: bytes, timeout: float | None) -> dict[str, Any]:
        self.sim.reset()
        return super()._execute(program, timeout)


@pytest.mark.parametrize("preset,m,n,k,shift", [("small", 5, 4, 3, 5), ("default", 3, 2, 2, 8)])
def test_matmul_matches_numpy(matmul_case, preset: str, m: int, n: int, k: int,
                              shift: int) -> None:
    cfg = Config.preset(preset) if preset != "default" else Config()
    case = matmul_case(cfg, m, n, k, shift=shift, seed=m)
    dev = rt.open("fsim", cfg, arena_size=1 << 20)
    A, W, C = case.buffers(dev)
    cq = dev.command_queue()
    case.emit(cq, A, W, C)
    stats = cq.synchronize()
    np.testing.assert_array_equal(case.result(C), case.reference())
    assert stats.insns_per_opcode["GEMM"] == 2 * m
    assert stats.gemm_uops == m * (n + n * k)


def test_tokens_are_race_free_and_auto_flush_carries_them(small_cfg: Config,
                                                          matmul_case) -> None:
    case = matmul_case(small_cfg, 9, 3, 2, shift=3, seed=1)
    dev = RaceCheckedFsim(small_cfg, arena_size=1 << 18)
    A, W, C = case.buffers(dev)
    cq = dev.command_queue(max_insns=40)  # forces several automatic flushes mid-pipeline
    case.emit(cq, A, W, C)
    cq.synchronize()
    np.testing.assert_array_equal(case.result(C), case.reference())
    assert cq.stats.auto_flushes >= 2 and len(dev.programs) == cq.stats.programs
    assert all(len(p) // 16 <= 40 for p in dev.programs)
    # tokens outstanding at a cut (two free input buffers) were re-pushed in the next program
    second = decode_program(dev.programs[1], small_cfg)
    assert second[0].module == "compute" and second[0].push_prev_dep


def test_force_serial_gives_the_same_result(small_cfg: Config, matmul_case) -> None:
    case = matmul_case(small_cfg, 4, 2, 2, shift=2, seed=2)
    dev = RaceCheckedFsim(small_cfg, arena_size=1 << 18)
    A, W, C = case.buffers(dev)
    cq = dev.command_queue(force_serial=True)
    case.emit(cq, A, W, C)
    cq.synchronize()
    np.testing.assert_array_equal(case.result(C), case.reference())
    prog = decode_program(dev.programs[0], small_cfg)
    # serial: every stage change is a token hand-over
    changes = sum(a.module != b.module for a, b in zip(prog[:-1], prog[1:]))
    pushes = sum(i.push_prev_dep + i.push_next_dep for i in prog)
    assert pushes == changes


def test_kernel_cache_survives_synchronize_on_fsim(small_cfg: Config, matmul_case) -> None:
    case = matmul_case(small_cfg, 2, 2, 2, seed=3)
    dev = rt.open("fsim", small_cfg, arena_size=1 << 18)
    A, W, C = case.buffers(dev)
    cq = dev.command_queue()
    case.emit(cq, A, W, C)
    first = cq.synchronize()
    misses = cq.stats.uop_misses
    C.copyfrom(np.zeros(C.nbytes, np.uint8))
    case.emit(cq, A, W, C)
    second = cq.synchronize()
    np.testing.assert_array_equal(case.result(C), case.reference())
    assert first.bytes_loaded["UOP"] > 0
    assert second.bytes_loaded["UOP"] == 0          # all kernels resident: no LOAD UOP
    assert cq.stats.uop_misses == misses and cq.stats.uop_hits > 0


def test_kernel_cache_invalidated_on_devices_without_sram(small_cfg: Config,
                                                         matmul_case) -> None:
    case = matmul_case(small_cfg, 6, 2, 2, seed=4)
    dev = NoSramFsim(small_cfg, arena_size=1 << 18)
    A, W, C = case.buffers(dev)
    cq = dev.command_queue()
    for _ in range(2):
        C.copyfrom(np.zeros(C.nbytes, np.uint8))
        case.emit(cq, A, W, C)
        cq.synchronize()
        np.testing.assert_array_equal(case.result(C), case.reference())
    assert cq.tokens == {q: 0 for q in cq.tokens}  # synchronize leaves no token behind
    loads = [sum(i.opcode == 0 and i.memory_type == MemType.UOP and i.x_size > 0
                 for i in decode_program(p, small_cfg)) for p in dev.programs]
    assert loads[0] == loads[1] > 0


def test_lru_eviction_reloads_kernels_correctly(small_cfg: Config) -> None:
    """Three 100-micro-op kernels in a 256-entry micro-op buffer: the third evicts the first,
    which is loaded again when reused; results stay right."""
    cfg = small_cfg
    assert cfg.uop_depth == 256
    dev = rt.open("fsim", cfg, arena_size=1 << 18)
    rng = np.random.default_rng(5)
    acc0 = rng.integers(-1000, 1000, (100, cfg.batch, cfg.block_out), dtype=np.int32)
    D = dev.array(acc0, mem_type="acc")
    O = dev.alloc(100 * cfg.out_elem_bytes, mem_type="out")
    cq = dev.command_queue()
    cq.load_buffer_2d(D, 0, 100, 1, 100, dst_sram_index=0, dst_memory_type="acc")
    kernels = []
    for imm in (1, 2, 3):
        k = cq.kernel()
        for d in range(100):
            k.push("alu", False, d, imm, alu_opcode="add", use_imm=True, imm=imm)  # src unused
        kernels.append(k)
    expect = acc0.copy()
    for k, imm in zip(kernels + [kernels[0]], (1, 2, 3, 1)):
        cq.push_alu(k)
        expect += imm
    assert cq.stats.uop_misses == 4 and cq.stats.uop_evictions >= 1
    assert kernels[1].key in cq.uop_cache and kernels[2].key not in cq.uop_cache or \
        kernels[0].key in cq.uop_cache
    cq.dep_push("compute", "store")
    cq.dep_pop("compute", "store")
    cq.store_buffer_2d(0, "out", O, 0, 100, 1, 100)
    cq.synchronize()
    np.testing.assert_array_equal(O.numpy(np.int8, acc0.shape), expect.astype(np.int8))


def test_load_acc_with_padding_and_alu_register_ops(small_cfg: Config) -> None:
    cfg = small_cfg
    B, BO = cfg.batch, cfg.block_out
    dev = rt.open("fsim", cfg, arena_size=1 << 18)
    rng = np.random.default_rng(6)
    rows, cols, stride = 3, 4, 6                      # a 3x4 window of a 3x6 tile matrix
    src = rng.integers(-50, 50, (rows, stride, B, BO), dtype=np.int32)
    D = dev.array(src, mem_type="acc")
    O = dev.alloc(64 * cfg.out_elem_bytes, mem_type="out")
    cq = dev.command_queue()
    # padded block: 1 row above, 2 below, 1 column left, 1 right -> 6 x 6 entries from 0
    cq.load_buffer_2d(D, 1, cols, rows, stride, x_pad_before=1, y_pad_before=1, x_pad_after=1,
                      y_pad_after=2, dst_sram_index=0, dst_memory_type="acc")
    padded = np.zeros((6, 6, B, BO), np.int64)
    padded[1:4, 1:5] = src[:, 1:5]
    flat = padded.reshape(36, B, BO)
    # acc[i] = acc[i] * acc[i + 6] for the first 30 entries (register operand, MUL)
    k = cq.kernel()
    with k.loop(30, dst_factor=1, src_factor=1):
        k.push("alu", False, 0, 6, alu_opcode="mul")
    cq.push_alu(k)
    want = flat.copy()
    for i in range(30):  # sequential semantics: acc[i+6] is read before it is overwritten
        want[i] = want[i] * want[i + 6]
    # then acc[i] = max(acc[i], acc[35 - i]) for 10 entries via two micro-ops per iteration
    k2 = cq.kernel()
    with k2.loop(5, dst_factor=2, src_factor=0):
        k2.push("alu", False, 0, 35, alu_opcode="max")
        k2.push("alu", False, 1, 34, alu_opcode="max")
    cq.push_alu(k2)
    for i in range(5):
        want[2 * i] = np.maximum(want[2 * i], want[35])
        want[2 * i + 1] = np.maximum(want[2 * i + 1], want[34])
    cq.dep_push("compute", "store")
    cq.dep_pop("compute", "store")
    cq.store_buffer_2d(0, "out", O, 0, 36, 1, 36)
    cq.synchronize()
    np.testing.assert_array_equal(O.numpy(np.int8, (36, B, BO)), want.astype(np.int8))


def test_reordering_separates_back_to_back_writes(small_cfg: Config) -> None:
    cfg = small_cfg
    dev = rt.open("fsim", cfg, arena_size=1 << 18)
    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, (4, cfg.batch, cfg.block_in), dtype=np.int8)
    w = rng.integers(-128, 128, (4, cfg.block_out, cfg.block_in), dtype=np.int8)
    A, W = dev.array(a, mem_type="inp"), dev.array(w, mem_type="wgt")
    O = dev.alloc(2 * cfg.out_elem_bytes, mem_type="out")
    cq = dev.command_queue(hazards="error")  # a remaining hazard would raise
    cq.load_buffer_2d(A, 0, 4, 1, 4, dst_sram_index=0, dst_memory_type="inp")
    cq.load_buffer_2d(W, 0, 4, 1, 4, dst_sram_index=0, dst_memory_type="wgt")
    cq.dep_push("load", "compute")
    cq.dep_pop("load", "compute")
    z = cq.kernel()
    z.push("gemm", True, 0, 0, 0)
    z.push("gemm", True, 1, 0, 0)
    cq.push_gemm(z)
    k = cq.kernel()
    for d in (0, 1):        # program order: 0, 0, 0, 0, 1, 1, 1, 1 (back-to-back writes)
        for j in range(4):
            k.push("gemm", False, d, j, (j + d) % 4)
    cq.push_gemm(k)
    assert k.reordered and not k.notes
    dsts = [u[0] for u in k.uops]
    assert all(x != y for x, y in zip(dsts[:-1], dsts[1:]))
    cq.dep_push("compute", "store")
    cq.dep_pop("compute", "store")
    cq.store_buffer_2d(0, "out", O, 0, 2, 1, 2)
    cq.synchronize()
    ref = np.stack([sum(a[j].astype(np.int32) @ w[(j + d) % 4].astype(np.int32).T
                        for j in range(4)) for d in (0, 1)])
    np.testing.assert_array_equal(O.numpy(np.int8, ref.shape), ref.astype(np.int8))


def test_record_relocate_replay(small_cfg: Config, matmul_case, tmp_path) -> None:
    case = matmul_case(small_cfg, 3, 2, 2, shift=4, seed=8)
    # record against a standalone arena at base 0 (the compiler's static memory plan)
    plan = rt.Arena(small_cfg, 1 << 16)
    A0, W0, C0 = (plan.alloc(case.a.nbytes, mem_type="inp"),
                  plan.alloc(case.w.nbytes, mem_type="wgt"),
                  plan.alloc(case.m * case.n * small_cfg.out_elem_bytes, mem_type="out"))
    rq = rt.CommandQueue.recorder(small_cfg, plan)
    case.emit(rq, A0, W0, C0)
    rec = rq.record()
    assert rec.uops and rec.relocations and rec.stats.gemm == 2 * case.m
    path = tmp_path / "mm.vtarec"
    rec.save(path)
    rec2 = rt.RecordedProgram.load(path)
    assert rec2.program == rec.program and rec2.relocations == rec.relocations
    assert rec2.stats == rec.stats and rec2.stats.insns == rec.insn_count
    header = json.dumps({"config": small_cfg.to_dict(), "insn_bytes": 0, "uop_bytes": 0,
                         "relocations": [], "stats": {"insns": "3"}}).encode()
    with pytest.raises(FileError, match=r"x.vtarec has a corrupt header: recorded program "
                                           r"header: field insns must be an integer, not '3'"):
        rt.RecordedProgram.from_bytes(b"VTAREC1\n" + len(header).to_bytes(4, "little") + header,
                                      source="x.vtarec")
    # replay on a device whose arena starts elsewhere, with the tensors at the same offsets
    dev = rt.open("fsim", small_cfg, arena_size=1 << 16, arena_base=3 * 4096)
    A, W, C = case.buffers(dev)
    assert (A.offset, W.offset, C.offset) == (A0.offset, W0.offset, C0.offset)
    for _ in range(2):  # twice: the micro-op cache must not assume the recording's kernels
        C.copyfrom(np.zeros(C.nbytes, np.uint8))
        rec2.run(dev)
        np.testing.assert_array_equal(case.result(C), case.reference())
    # the relocated stream on the first arena differs only in dram_base fields
    moved = decode_program(rec.relocate(3 * 4096, 3 * 4096 + 8192), small_cfg)
    orig = decode_program(rec.program, small_cfg)
    for r in rec.relocations:
        assert moved[r.index].dram_base != orig[r.index].dram_base
    strip = [{k: v for k, v in i.to_dict().items() if k != "dram_base"} for i in orig]
    assert strip == [{k: v for k, v in i.to_dict().items() if k != "dram_base"} for i in moved]
    with pytest.raises(rt.QueueError, match="not a multiple of its element size"):
        rec.relocate(8, 0)  # weights are 16-byte elements in this configuration


def test_strided_store_writes_only_its_window(small_cfg: Config) -> None:
    cfg = small_cfg
    B, BO = cfg.batch, cfg.block_out
    dev = rt.open("fsim", cfg, arena_size=1 << 16)
    acc = np.random.default_rng(9).integers(-300, 300, (12, B, BO), dtype=np.int32)
    D = dev.array(acc, mem_type="acc")
    O = dev.alloc(4 * 8 * cfg.out_elem_bytes, mem_type="out")   # a 4 x 8 output matrix
    O.copyfrom(np.full(O.nbytes, 0x5A, np.uint8))
    cq = dev.command_queue()
    cq.load_buffer_2d(D, 0, 12, 1, 12, dst_sram_index=3, dst_memory_type="acc")
    cq.dep_push("compute", "store")
    cq.dep_pop("compute", "store")
    cq.store_buffer_2d(3, "out", O, 9, 4, 3, 8)   # 3 rows of 4 at row 1, column 1
    cq.synchronize()
    want = np.full((4, 8, B, BO), 0x5A, np.uint8).view(np.int8)
    want[1:4, 1:5] = acc.reshape(3, 4, B, BO).astype(np.int8)
    np.testing.assert_array_equal(O.numpy(np.int8, (4, 8, B, BO)), want)


def test_dumps_show_the_program_and_kernels(small_cfg: Config, matmul_case) -> None:
    import io

    case = matmul_case(small_cfg, 2, 2, 2, seed=10)
    dev = rt.open("fsim", small_cfg, arena_size=1 << 16)
    A, W, C = case.buffers(dev)
    out = io.StringIO()
    cq = dev.command_queue(dump_insn=True, dump_uop=True, out=out)
    case.emit(cq, A, W, C)
    listing = cq.dump_insns()
    lines = [ln for ln in listing.splitlines() if ln.strip()]
    assert len(lines) == cq.pending
    assert sum(ln.startswith("gemm") for ln in lines) == 4
    assert sum(ln.startswith("store") for ln in lines) == 2
    cq.synchronize()
    text = out.getvalue()
    assert "finish" in text and text.count("uop dst_idx=") >= 2 + 2 * 2
    assert "micro-op buffer" in cq.dump_uops()                 # resident kernels
    k = cq.kernel(("gemm", 0))
    assert cq.dump_uops(k).count("uop ") == k.size


def test_perf_device_estimates_without_computing(small_cfg: Config, matmul_case) -> None:
    case = matmul_case(small_cfg, 3, 2, 2, seed=11)
    dev = rt.open("perf", small_cfg, arena_size=1 << 16)
    assert not dev.computes_results
    A, W, C = case.buffers(dev)
    cq = dev.command_queue()
    case.emit(cq, A, W, C)
    stats = cq.synchronize()
    assert stats.backend == "perf" and stats.cycles > 0
    assert not C.numpy().any()   # no data computed
    # the same program on fsim: each module runs the same number of instructions
    fdev = rt.open("fsim", small_cfg, arena_size=1 << 16)
    fq = fdev.command_queue()
    case.emit(fq, *case.buffers(fdev))
    fstats = fq.synchronize()
    for module, n in fstats.insns_per_module.items():
        assert stats.modules[module].insns == n


def test_interleaved_queues_cannot_use_stale_kernels(small_cfg: Config) -> None:
    dev = rt.open("fsim", small_cfg, arena_size=1 << 16)
    a, b = dev.command_queue(), dev.command_queue()
    k = a.kernel()
    k.push("gemm", True, 0, 0, 0)
    a.push_gemm(k)
    a.synchronize()                 # k is now resident
    a.push_gemm(k)                  # a cache hit: the program relies on the micro-op buffer
    other = b.kernel()
    other.push("gemm", True, 1, 0, 0)
    b.push_gemm(other)
    b.synchronize()                 # another program ran in between
    with pytest.raises(rt.QueueError, match="another program ran on the device"):
        a.synchronize()
    a.push_gemm(k)                  # the queue is usable again and reloads what it needs
    assert a.synchronize().bytes_loaded["UOP"] == 4  # one micro-op loaded again
