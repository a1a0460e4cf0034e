"""Quantized element-wise operators on VTA's ALU (vta.compiler.topi.elementwise): bit-exact
against the graph's int8 reference kernels (vta.compiler.graph.quantize), race-checked on fsim,
and on the RTL with the small configuration."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler.errors import ScheduleError
from vta.compiler.graph.ir import Node
from vta.compiler.ops import kernel_for
from vta.compiler.ops.int8 import fixed_point
from vta.compiler.topi.elementwise import (
    Spec,
    elementwise_default,
    elementwise_int8,
    identity_weight,
)
from vta.isa import Config
from vta.isa.errors import VTAError

pytestmark = pytest.mark.sim

RNG = np.random.default_rng(7)

#: Attributes as quantize.py makes them, with the edge cases of the lowering: a rounding
#: shift beyond the 16-bit immediate (> 15, split in two), no rounding (shift 0), a fused
#: ReLU's clip, alphas 0.1, 0.01 (shift 21) and 0 (ReLU), a hard sigmoid bias that takes its
#: own ADD (with the rounding term it leaves 16 bits).
SPECS = {
    "add_relu": ("add", dict(mul_a=16384, mul_b=11000, shift=15, lo=0, hi=127)),
    "add_shift_beyond_imm": ("add", dict(mul_a=9000, mul_b=30000, shift=19, lo=-128, hi=127)),
    "add_no_rounding": ("add", dict(mul_a=1, mul_b=1, shift=0, lo=-128, hi=127)),
    "relu6": ("clip", dict(lo=0, hi=96)),
    "leaky_0.1": ("leaky_relu", dict(zip(("mul", "shift"), fixed_point(0.1)))),
    "leaky_0.01": ("leaky_relu", dict(zip(("mul", "shift"), fixed_point(0.01)))),
    "leaky_0": ("leaky_relu", dict(mul=0, shift=0)),
    "hard_sigmoid": ("hard_sigmoid", dict(mul=1421, bias=32512, shift=9, one=127)),
    "hard_sigmoid_one_add": ("hard_sigmoid", dict(mul=700, bias=8128, shift=7, one=127)),
    "hard_swish": ("hard_swish", dict(mul=1421, bias=32512, shift=9, one=127, mul2=18000,
                                      shift2=22)),
}
KIND_OP = {"add": "QAdd", "clip": "QClip", "leaky_relu": "QLeakyRelu",
           "hard_sigmoid": "QHardSigmoid", "hard_swish": "QHardSwish"}


def _reference(spec: Spec, xs: list[np.ndarray]) -> np.ndarray:
    """The graph's int8 kernel of the op (the bit-exact specification)."""
    op = KIND_OP[spec.kind]
    n = Node(op, "n", [f"x{k}" for k in range(len(xs))], ["y"], dict(spec.attrs))
    return kernel_for(op)(n, xs)[0]


def _inputs(spec: Spec, tiles: int, cfg: Config) -> list[np.ndarray]:
    shape = (tiles, 1, cfg.batch, cfg.block_in)
    xs = [RNG.integers(-128, 128, shape, dtype=np.int8) for _ in range(spec.n_inputs)]
    xs[0].reshape(-1)[:4] = [-128, 127, 0, -1]  # the extremes of int8
    return xs


@pytest.mark.parametrize("cfg_name", ["default", "small"])
@pytest.mark.parametrize("case", list(SPECS))
def test_bit_exact_and_race_free(case: str, cfg_name: str) -> None:
    cfg = Config.preset(cfg_name)
    kind, attrs = SPECS[case]
    spec = Spec.make(kind, **attrs)
    tiles = 60
    xs = _inputs(spec, tiles, cfg)
    ref = _reference(spec, xs)
    assert len(np.unique(ref)) > 8  # not a degenerate (constant) result
    for knobs in (None, {"tile": 6, "nthread": 2}):
        op = elementwise_int8(spec, tiles, config=cfg, knobs=knobs)
        np.testing.assert_array_equal(op.check_races(*xs, identity_weight(cfg)), ref)


def test_default_knobs_fit_and_use_threads() -> None:
    """A large residual add (ResNet-18 layer1, 64 x 56 x 56): the default is ranked by the
    perf model, fits the buffers and overlaps steps with two virtual threads."""
    cfg = Config()
    spec = Spec.make("add", **SPECS["add_relu"][1])
    ch = elementwise_default(spec, 4 * 56 * 56, cfg)
    assert ch.knobs["nthread"] == 2 and ch.evaluated >= 2
    assert 2 * ch.knobs["tile"] * 2 <= cfg.acc_depth
    # the ALU work per tile: 2 widening GEMMs, MUL, MUL, ADD (two operands), ADD, SHR, MIN,
    # MAX; fewer cycles than that at one micro-op a cycle would mean work went missing
    assert ch.cycles > 4 * 56 * 56 * 9
    single = elementwise_default(spec, 4 * 56 * 56, cfg, threads=False)
    assert single.knobs["nthread"] == 1 and single.cycles > ch.cycles


def test_prime_tile_count() -> None:
    cfg = Config.preset("small")
    spec = Spec.make("clip", lo=-5, hi=7)
    xs = _inputs(spec, 13, cfg)
    op = elementwise_int8(spec, 13, config=cfg)
    np.testing.assert_array_equal(op(*xs, identity_weight(cfg)), _reference(spec, xs))


@pytest.mark.parametrize("kind, attrs, match", [
    ("add", dict(mul_a=40000, mul_b=1, shift=3, lo=0, hi=127), "mul_a = 40000"),
    ("hard_sigmoid", dict(mul=5, bias=-32769, shift=4, one=127), "bias = -32769"),
    ("leaky_relu", dict(mul=3, shift=1), r"alpha outside \[0, 1\]"),
    ("add", dict(mul_a=1, mul_b=1, shift=40, lo=0, hi=127), "shift = 40"),
    ("exp", {}, "unknown element-wise op"),
])
def test_inexpressible_ops_are_one_line_errors(kind: str, attrs: dict, match: str) -> None:
    with pytest.raises(ScheduleError, match=match) as e:
        Spec.make(kind, **attrs)
    assert isinstance(e.value, VTAError) and "\n" not in str(e.value)


def test_knobs_that_do_not_divide_are_refused() -> None:
    with pytest.raises(ScheduleError, match="do not divide"):
        elementwise_int8(Spec.make("clip", lo=0, hi=9), 10, config=Config(),
                         knobs={"tile": 3, "nthread": 1}, target=None)


@pytest.mark.parametrize("kind", ["add", "leaky_relu", "hard_swish"])
def test_on_rtl_small_config(small_cfg: Config, kind: str) -> None:
    """The recorded programs on the Amaranth RTL of the core (small config, two virtual
    threads): the two-operand ADD, MAX and MUL, the split rounding shift."""
    case = {"add": "add_shift_beyond_imm", "leaky_relu": "leaky_0.01",
            "hard_swish": "hard_swish"}[kind]
    spec = Spec.make(*SPECS[case][:1], **SPECS[case][1])
    xs = _inputs(spec, 4, small_cfg)
    op = elementwise_int8(spec, 4, config=small_cfg, knobs={"tile": 2, "nthread": 2},
                          target="rtl")
    np.testing.assert_array_equal(op(*xs, identity_weight(small_cfg)), _reference(spec, xs))
    assert op.module.last_stats.cycles > 0
