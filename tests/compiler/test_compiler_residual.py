"""A residual add fused into the conv2d / dense epilogue (vta.compiler.topi.residual): the
VTA result equals the graph's int8 kernels run one after the other (the conv's requantization
and clip, then ``QAdd`` on its int8 result and the other operand), on fsim (race-checked),
the Amaranth RTL and tsim."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler import topi
from vta.compiler.graph.ir import Node
from vta.compiler.ops import kernel_for
from vta.compiler.topi.elementwise import identity_weight
from vta.compiler.topi.residual import Residual, fitted_knobs
from vta.isa import Config
from vta.isa.errors import VTAError

from ..conftest import require_tool

pytestmark = pytest.mark.sim

RNG = np.random.default_rng(38)
#: the other operand at another scale (two multipliers) and a ReLU after the add (lo = 0)
RELU = Residual(mul_a=24435, mul_b=11587, shift=15, lo=0, hi=127)
#: a rounding shift beyond the 16-bit immediate (split in two SHRs), no ReLU
WIDE = Residual(mul_a=9000, mul_b=30000, shift=19, lo=-128, hi=127)


def _i8(shape: tuple[int, ...]) -> np.ndarray:
    x = RNG.integers(-128, 128, shape, dtype=np.int8)
    x.reshape(-1)[:3] = [-128, 127, 0]
    return x


def _qadd(r: Residual, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The graph's QAdd kernel (the int8 specification) on the layer's result ``x``."""
    n = Node("QAdd", "add", ["x", "y"], ["z"], {"mul_a": r.mul_a, "mul_b": r.mul_b,
                                                 "shift": r.shift, "lo": r.lo, "hi": r.hi})
    return kernel_for("QAdd")(n, [x, y])[0]


def _conv(cfg: Config, r: Residual, knobs: dict[str, int], target: str, ci: int = 2,
          co: int = 2, hw: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """A 3x3 conv with the usual requantization and ``r`` fused: (VTA result, reference)."""
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    ds, ks = (1, ci, hw, hw, b, bi), (co, ci, 3, 3, bo, bi)
    op = topi.conv2d_packed(ds, ks, config=cfg, padding=(1, 1), bias=True, shift=5,
                            mul=1395, shift2=11, clip=(-128, 127), residual=r, knobs=knobs,
                            target=target)
    x, w = _i8(ds), _i8(ks)
    bias = RNG.integers(-3000, 3000, (1, co, 1, 1, b, bo)).astype(np.int32)
    y = _i8(op.out_shape)
    plain = topi.Epilogue(bias=True, shift=5, mul=1395, shift2=11, clip=(-128, 127))
    conv = plain.reference(topi.conv2d_acc_reference(x, w, (1, 1), (1, 1)), bias)
    args = (x, y, w, bias, identity_weight(cfg))
    out = op(*args)
    if target == "fsim":
        np.testing.assert_array_equal(op.check_races(*args), out)
    return out, _qadd(r, conv, y)


CONV_KNOBS = {"tile_b": 1, "tile_co": 1, "tile_h": 3, "tile_w": 6, "tile_ci": 1,
              "oc_nthread": 2, "h_nthread": 1}


@pytest.mark.parametrize("r", [RELU, WIDE], ids=["relu", "wide_shift"])
@pytest.mark.parametrize("cfg_name", ["default", "small"])
def test_conv2d_fused_add_bit_exact_on_fsim(r: Residual, cfg_name: str) -> None:
    out, ref = _conv(Config.preset(cfg_name), r, CONV_KNOBS, "fsim")
    np.testing.assert_array_equal(out, ref)
    assert (ref == 0).any() and (ref > 0).any()  # the ReLU / clip is exercised


def test_dense_fused_add_bit_exact_on_fsim(cfg: Config) -> None:
    n, k, m = 1, 4, 3
    ds, ws = (n, k, cfg.batch, cfg.block_in), (m, k, cfg.block_out, cfg.block_in)
    op = topi.dense_packed(ds, ws, config=cfg, bias=True, shift=6, clip=(-128, 127),
                           residual=RELU, knobs={"tile_b": 1, "tile_co": 1, "tile_ci": 2,
                                                 "oc_nthread": 1})
    x, w = _i8(ds), _i8(ws)
    bias = RNG.integers(-3000, 3000, (1, m, cfg.batch, cfg.block_out)).astype(np.int32)
    y = _i8(op.out_shape)
    plain = topi.Epilogue(bias=True, shift=6, clip=(-128, 127))
    ref = _qadd(RELU, topi.dense_reference(x, w, plain, bias), y)
    np.testing.assert_array_equal(op(x, y, w, bias, identity_weight(cfg)), ref)


def test_on_rtl_small_config(small_cfg: Config) -> None:
    """The fused program on the Amaranth RTL of the core (two virtual threads)."""
    out, ref = _conv(small_cfg, RELU, dict(CONV_KNOBS, tile_h=2, tile_w=4), "rtl", hw=4)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.tsim
def test_on_tsim_small_config(small_cfg: Config) -> None:
    require_tool("verilator")
    out, ref = _conv(small_cfg, WIDE, dict(CONV_KNOBS, tile_h=2, tile_w=4), "tsim", hw=4)
    np.testing.assert_array_equal(out, ref)


def test_buffers_count_the_fused_operand(cfg: Config) -> None:
    """A tile that fills the accumulator unfused does not fit with the add's operand."""
    ds, ks = (1, 4, 56, 56, 1, 16), (4, 4, 3, 3, 16, 16)
    k = {"tile_b": 1, "tile_co": 4, "tile_h": 14, "tile_w": 28, "tile_ci": 1,
         "oc_nthread": 1, "h_nthread": 1}
    assert topi.conv2d_valid(k, ds, ks, (1, 1), (1, 1), cfg)
    assert not topi.conv2d_valid(k, ds, ks, (1, 1), (1, 1), cfg, residual=True)


def test_fitted_knobs_shrink_a_layers_tiles_until_the_operand_fits(cfg: Config) -> None:
    """The fused layer's knobs: the unfused layer's when they fit, else one setting per tile
    knob the shrinking starts from (each knob cut to its next smaller divisor in turn), every
    one valid on the real template; the distinct settings by hand for ResNet-18's first
    stage (its unfused knobs: 2 x 14 x 28 entries per thread, 2 threads)."""
    ds, ks = (1, 4, 56, 56, 1, 16), (4, 4, 3, 3, 16, 16)
    k = {"tile_b": 1, "tile_co": 2, "tile_h": 14, "tile_w": 28, "tile_ci": 1,
         "oc_nthread": 2, "h_nthread": 1}

    def valid(kn: dict[str, int]) -> bool:
        return topi.conv2d_valid(kn, ds, ks, (1, 1), (1, 1), cfg, residual=True)

    assert topi.conv2d_valid(k, ds, ks, (1, 1), (1, 1), cfg) and not valid(k)
    got = fitted_knobs(k, valid)
    assert [(g["tile_co"], g["tile_h"], g["tile_w"]) for g in got] == \
        [(1, 14, 28), (2, 7, 28), (2, 14, 14)]
    assert all(valid(g) and {**g, "tile_co": 0, "tile_h": 0, "tile_w": 0}
               == {**k, "tile_co": 0, "tile_h": 0, "tile_w": 0} for g in got)
    fits = dict(k, tile_co=1)
    assert fitted_knobs(fits, valid) == [fits]
    assert fitted_knobs(k, lambda kn: False) == []
    # a prime tile goes to 1 in one step
    assert fitted_knobs({"tile_co": 7, "tile_b": 1}, lambda kn: kn["tile_co"] < 7) == \
        [{"tile_co": 1, "tile_b": 1}]


def test_immediates_out_of_range_are_one_line_errors() -> None:
    with pytest.raises(VTAError, match="mul_b = 40000 does not fit"):
        Residual(mul_a=1, mul_b=40000, shift=15)
