"""The tiled int8 matmul program (vta.sim.programs) on fsim, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from vta.isa import Config, GemmInsn, decode_program
from vta.sim import fsim
from vta.sim.blas import exact_matmul
from vta.sim.fsim import FunctionalSim
from vta.sim.programs import Tiling, matmul_program, pack_tiles, unpack_tiles


def _numpy_matmul(a: np.ndarray, b: np.ndarray, shift: int = 0, clip=None) -> np.ndarray:
    """int32 A @ B.T, optional arithmetic shift and clip, then the low 8 bits."""
    acc = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32)
    if shift:
        acc = acc >> shift
    if clip is not None:
        acc = np.clip(acc, *clip)
    return acc.astype(np.int8)


SHAPES = [(1, 1, 1), (16, 16, 16), (37, 70, 300), (128, 48, 64), (5, 200, 33)]


@pytest.mark.sim
@pytest.mark.parametrize("preset", ["default", "small"])
@pytest.mark.parametrize("double_buffer", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fsim_matmul_matches_numpy(preset: str, double_buffer: bool, shape) -> None:
    cfg = Config.preset(preset)
    m, n, k = shape
    rng = np.random.default_rng(m * 1000 + n + k)
    a = rng.integers(-128, 128, (m, k))
    b = rng.integers(-128, 128, (n, k))
    mm = matmul_program(cfg, m, n, k, a=a, b=b, double_buffer=double_buffer)
    result = fsim.check_races(mm.program, mm.dram, cfg, random_orders=1)
    got = mm.plan.read_c(result.dram)
    assert got.dtype == np.int8 and got.shape == (m, n)
    assert np.array_equal(got, _numpy_matmul(a, b))


@pytest.mark.sim
@pytest.mark.parametrize("double_buffer", [False, True])
def test_fsim_matmul_on_wide_and_batched_configs(double_buffer: bool) -> None:
    """batch 2 with 16-bit inputs, accumulators and outputs; batch 4 with 8x8 blocks."""
    wide = Config(LOG_INP_WIDTH=4, LOG_WGT_WIDTH=3, LOG_ACC_WIDTH=4, LOG_BATCH=1, LOG_BLOCK=2,
                  LOG_UOP_BUFF_SIZE=10, LOG_INP_BUFF_SIZE=11, LOG_WGT_BUFF_SIZE=10,
                  LOG_ACC_BUFF_SIZE=11)
    batch4 = Config(LOG_BATCH=2, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=11, LOG_INP_BUFF_SIZE=12,
                    LOG_WGT_BUFF_SIZE=13, LOG_ACC_BUFF_SIZE=14)
    for cfg in (wide, batch4):
        rng = np.random.default_rng(cfg.batch)
        lim = 1 << (cfg.inp_width - 1)
        a = rng.integers(-lim, lim, (37, 50))
        b = rng.integers(-128, 128, (21, 50))
        mm = matmul_program(cfg, 37, 21, 50, a=a, b=b, double_buffer=double_buffer, shift=3)
        got = mm.plan.read_c(fsim.check_races(mm.program, mm.dram, cfg, random_orders=1).dram)
        acc_bits, out_bits = cfg.acc_width, cfg.out_width
        acc = (a @ b.T + 2 ** (acc_bits - 1)) % 2 ** acc_bits - 2 ** (acc_bits - 1)
        want = ((acc >> 3) + 2 ** (out_bits - 1)) % 2 ** out_bits - 2 ** (out_bits - 1)
        assert got.dtype.itemsize * 8 == out_bits
        assert np.array_equal(got, want)


@pytest.mark.sim
@pytest.mark.parametrize("shift, clip", [(0, (-128, 127)), (6, None), (7, (-100, 90)),
                                         (-1, None)])
def test_fsim_matmul_shift_and_clip(cfg: Config, shift: int, clip) -> None:
    rng = np.random.default_rng(shift + 10)
    a = rng.integers(-128, 128, (40, 64))
    b = rng.integers(-128, 128, (48, 64))
    mm = matmul_program(cfg, 40, 48, 64, a=a, b=b, shift=shift, clip=clip)
    got = mm.plan.read_c(fsim.run(mm.program, mm.dram, cfg).dram)
    if shift >= 0:
        want = _numpy_matmul(a, b, shift, clip)
    else:
        acc = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32)
        want = (acc.astype(np.int64) << -shift).astype(np.int32).astype(np.int8)
    assert np.array_equal(got, want)
    assert np.array_equal(mm.plan.reference(a, b), want)


@pytest.mark.sim
def test_fsim_matmul_int32_wraps(small_cfg: Config) -> None:
    """K large enough that A @ B.T overflows int32 before truncation: wrap-around, no saturation."""
    k = 256 * 520
    a = np.full((1, k), -128)
    b = np.full((4, k), -128)
    mm = matmul_program(small_cfg, 1, 4, k, a=a, b=b)
    assert 128 * 128 * k > 2**31
    sim = FunctionalSim(small_cfg)
    dram = mm.dram.copy()
    sim.run(mm.program, dram)
    got = mm.plan.read_c(dram)
    acc32 = np.int64(128 * 128 * k) % 2**32 - 2**32 * (np.int64(128 * 128 * k) % 2**32 >= 2**31)
    assert (sim.acc[:1, 0, :4] == acc32).all()  # the single output tile is still in SRAM
    assert (mm.plan.reference_acc(a, b) == acc32).all()
    want = np.int64(128 * 128 * k) % 2**32
    want = np.int8(np.int64(want) & 0xFF)
    assert (got == want).all()


@pytest.mark.sim
@pytest.mark.parametrize("double_buffer", [False, True])
def test_fsim_matmul_gemms_take_the_fast_path(cfg: Config, double_buffer: bool) -> None:
    mm = matmul_program(cfg, 256, 256, 512, double_buffer=double_buffer)
    sim = FunctionalSim(cfg)
    dram = mm.dram.copy()
    sim.run(mm.program, dram)
    gemms = [i for i in decode_program(mm.program, cfg) if isinstance(i, GemmInsn)]
    accumulating = sum(1 for g in gemms if not g.reset_reg)
    assert sim.fast_gemms == accumulating > 0
    general = FunctionalSim(cfg, gemm_path="general")
    dram2 = mm.dram.copy()
    general.run(mm.program, dram2)
    assert np.array_equal(dram, dram2)


@pytest.mark.sim
def test_fsim_deep_gemms_are_exact(cfg: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """GEMMs reducing over 3200 int8 columns (one product would pass float32's 2^24; fsim's
    products are sliced): the same result as numpy's int64 matmul and as the general path."""
    depths = []

    def spy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        depths.append(a.shape[1])
        return exact_matmul(a, b)

    monkeypatch.setattr(fsim, "exact_matmul", spy)
    rng = np.random.default_rng(5)
    k = 3200
    a = rng.choice([-128, 127, -5, 3], (20, k))
    b = rng.choice([-128, 127, 1], (40, k))
    a[0], b[0] = -128, -128  # 3199 * 2^14 + 1: odd beyond 2^24, so float32 would round it
    a[0, -1] = b[0, -1] = 1
    mm = matmul_program(cfg, 20, 40, k, a=a, b=b, tiling=Tiling(tm=8, tn=2, tk=k // 16))
    sim = FunctionalSim(cfg)
    dram = mm.dram.copy()
    sim.run(mm.program, dram)
    assert sim.fast_gemms > 0 and max(depths) == k
    assert np.array_equal(mm.plan.read_c(dram), _numpy_matmul(a, b))
    general = FunctionalSim(cfg, gemm_path="general")
    dram2 = mm.dram.copy()
    general.run(mm.program, dram2)
    assert np.array_equal(dram, dram2)


@pytest.mark.sim
def test_fsim_matmul_double_buffering_overlaps_loads_and_gemms(small_cfg: Config) -> None:
    """With double buffering the load module can run ahead of compute (fewer token waits)."""
    def max_lead(db: bool) -> int:
        mm = matmul_program(small_cfg, 32, 32, 64, double_buffer=db,
                            tiling=Tiling(tm=8, tn=4, tk=4))
        r = fsim.run(mm.program, mm.dram, small_cfg, order="load-first", trace=True)
        lead, best = 0, 0
        for e in r.trace:
            if e["ph"] != "X":
                continue
            lead = lead + 1 if e["cat"] == "load" else 0
            best = max(best, lead)
        return best

    assert max_lead(True) > max_lead(False)


@pytest.mark.unit
def test_fsim_tile_packing_round_trip() -> None:
    x = np.arange(7 * 10).reshape(7, 10)
    t = pack_tiles(x, 4, 4)
    assert t.shape == (2 * 3, 4, 4)
    assert np.array_equal(t[1], np.pad(x[0:4, 4:8], 0))  # tile (0, 1)
    assert np.array_equal(t[5][:3, :2], x[4:7, 8:10]) and not t[5][3:].any()
    assert np.array_equal(unpack_tiles(t, 7, 10), x)


@pytest.mark.unit
def test_fsim_matmul_rejects_bad_arguments(cfg: Config) -> None:
    with pytest.raises(ValueError, match="M must be a positive integer"):
        matmul_program(cfg, 0, 4, 4)
    with pytest.raises(ValueError, match="outside int8"):
        matmul_program(cfg, 2, 2, 2, a=np.full((2, 2), 200), b=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="needs 4096 inp entries"):
        matmul_program(cfg, 64, 64, 1024, tiling=Tiling(tm=64, tn=1, tk=64))
    with pytest.raises(ValueError, match="overlap"):
        matmul_program(cfg, 16, 16, 16, a_addr=0, b_addr=0)
