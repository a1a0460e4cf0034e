"""Activation x activation products on VTA (vta.compiler.topi.matmul): batched int8 (G, N, K)
x (G, K, M) with the second operand in weight layout, against numpy's matmul of the unpacked
operands and the graph's int8 requantization; on fsim (race-checked), on the Amaranth RTL
(small configuration) and on tsim; the requantization the quantizer picks for it."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler.errors import ScheduleError
from vta.compiler.graph.quantize import matmul_requant
from vta.compiler.ops.int8 import requantize
from vta.compiler.topi import defaults
from vta.compiler.topi.matmul import (
    matmul_packed,
    matmul_reference,
    pack_operands,
    unpack_output,
)
from vta.compiler.topi.vta import dense_operator
from vta.isa import Config

from ..conftest import require_tool

pytestmark = pytest.mark.sim

RNG = np.random.default_rng(37)


def _case(g: int, n: int, k: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    return (RNG.integers(-128, 128, (g, n, k), dtype=np.int8),
            RNG.integers(-128, 128, (g, k, m), dtype=np.int8))


def _expected(a: np.ndarray, b: np.ndarray, shift: int, mul: int, shift2: int) -> np.ndarray:
    """numpy's product of the unpacked operands (int64, exact), requantized as the graph's
    int8 reference does."""
    acc = np.matmul(a.astype(np.int64), b.astype(np.int64))
    return requantize(acc, shift, -128, 127, mul, shift2)


def _run(cfg: Config, a: np.ndarray, b: np.ndarray, target: str, knobs: dict | None = None,
         shift: int = 0, mul: int = 300, shift2: int = 15) -> tuple[np.ndarray, object]:
    d, w = pack_operands(a, b, cfg)
    op = matmul_packed(d.shape, w.shape, config=cfg, shift=shift, mul=mul, shift2=shift2,
                       knobs=knobs, target=target)
    out = op(d, w)
    np.testing.assert_array_equal(out, matmul_reference(d, w, op.info["epilogue"]))
    return unpack_output(out, a.shape[1], b.shape[2]), op


@pytest.mark.parametrize("shape, knobs", [
    ((2, 17, 16, 17), None),  # a ViT block's Q·Kᵀ: 17 tokens (a partial tile), 2 heads
    ((2, 17, 17, 16), None),  # its softmax·V: the reduction over a partial tile
    ((3, 8, 48, 60), {"tile_b": 4, "tile_ci": 3, "tile_co": 1, "oc_nthread": 2}),
    ((1, 5, 32, 64), {"tile_b": 5, "tile_ci": 1, "tile_co": 2, "oc_nthread": 2}),
])
def test_matches_numpy_on_fsim(shape: tuple[int, ...], knobs: dict | None) -> None:
    cfg = Config()
    a, b = _case(*shape)
    out, op = _run(cfg, a, b, "fsim", knobs)
    np.testing.assert_array_equal(out, _expected(a, b, 0, 300, 15))
    d, w = pack_operands(a, b, cfg)
    np.testing.assert_array_equal(unpack_output(op.check_races(d, w), shape[1], shape[3]), out)


def test_first_shift_and_large_rounding_shift() -> None:
    """A truncating first shift (the fallback requantization) and a rounding shift beyond
    the ALU's 16-bit immediate (two SHRs)."""
    a, b = _case(2, 4, 32, 16)
    out, _ = _run(Config(), a, b, "fsim", shift=3, mul=20000, shift2=22)
    np.testing.assert_array_equal(out, _expected(a, b, 3, 20000, 22))


def test_second_operand_is_in_weight_layout() -> None:
    """A weight tile's row o holds column o of the second operand (hand-checked entries)."""
    cfg = Config()
    a, b = _case(1, 3, 20, 18)
    data, weight = pack_operands(a, b, cfg)
    assert weight.shape == (1, 2, 2, 16, 16) and data.shape == (1, 3, 2, 1, 16)
    assert weight[0, 1, 0, 1, 4] == b[0, 4, 17] and weight[0, 0, 1, 5, 3] == b[0, 19, 5]
    assert weight[0, 1, 1, 2, 7] == 0  # column 18 does not exist: zero padding
    assert data[0, 2, 1, 0, 3] == a[0, 2, 19] and data[0, 2, 1, 0, 4] == 0


def test_unknown_knob_is_refused() -> None:
    with pytest.raises(ScheduleError, match="unknown knob"):
        matmul_packed((1, 1, 1, 1, 16), (1, 1, 1, 16, 16), config=Config(),
                      knobs={"tile_h": 1}, target=None)


@pytest.mark.parametrize("r, k", [(0.0123, 16), (3e-5, 197), (0.9, 64), (7.5, 32)])
def test_requantization_fits_int32_and_is_close(r: float, k: int) -> None:
    """The factor's fixed-point form is within 0.1% of it (the worst case accumulator stays
    in int32), and the requantized extremes are the rounded real products (±1 step)."""
    shift, mul, shift2 = matmul_requant(r, k)
    assert abs(mul * 2.0 ** -(shift + shift2) - r) <= 1e-3 * r
    bound = 128 * 128 * k
    assert (bound >> max(shift, 0)) * mul + (1 << shift2 >> 1) < 1 << 31
    acc = np.array([-bound, -1000, 0, 999, bound - 1], np.int64)
    got = requantize(acc, shift, -128, 127, mul, shift2).astype(np.int64)
    want = np.clip(np.rint(acc * r), -128, 127)
    assert np.abs(got - want).max() <= 1


def test_on_rtl_small_config(small_cfg: Config) -> None:
    """One small product's recorded program on the Amaranth RTL of the core (small
    configuration, 4x4 tiles, two virtual threads): bit-exact with numpy."""
    a, b = _case(2, 3, 8, 8)
    out, op = _run(small_cfg, a, b, "rtl",
                   {"tile_b": 3, "tile_ci": 1, "tile_co": 1, "oc_nthread": 2})
    np.testing.assert_array_equal(out, _expected(a, b, 0, 300, 15))
    assert op.module.last_stats.cycles > 0


@pytest.mark.tsim
def test_on_tsim_small_config(small_cfg: Config) -> None:
    """The same on the Verilator model of the core."""
    require_tool("verilator")
    a, b = _case(2, 3, 8, 8)
    out, op = _run(small_cfg, a, b, "tsim",
                   {"tile_b": 3, "tile_ci": 1, "tile_co": 1, "oc_nthread": 2})
    np.testing.assert_array_equal(out, _expected(a, b, 0, 300, 15))
    assert op.module.last_stats.cycles > 0


@pytest.mark.parametrize("knobs", [{"tile_b": 1, "tile_co": 2, "tile_ci": 2, "oc_nthread": 2},
                                   {"tile_b": 2, "tile_co": 4, "tile_ci": 4, "oc_nthread": 1}])
def test_one_group_records_the_dense_program(knobs: dict) -> None:
    """Dense and matmul share one GEMM declaration (topi.vta.gemm_packed): a matmul of one
    group records the very program (instructions, micro-ops, relocations) of the dense layer
    of the same shapes, knobs and requantization."""
    cfg = Config()
    epi = {"shift": 6, "mul": 5, "shift2": 3}
    d = dense_operator((2, 4, 1, 16), (8, 4, 16, 16), config=cfg, knobs=knobs, target=None,
                       clip=(-128, 127), **epi)
    m = matmul_packed((1, 2, 4, 1, 16), (1, 8, 4, 16, 16), config=cfg, knobs=knobs,
                      target=None, **epi)
    a, b = defaults.recorded_program(d), defaults.recorded_program(m)
    assert a.insn_count > 4
    assert (a.program, a.uops, a.relocations) == (b.program, b.uops, b.relocations)
