"""AutoVTA's design space and resource model against hand-computed counts."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import pytest
from vta.isa import Config
from vta.isa.errors import ConfigError
from vta.tune.autovta.resources import (
    FAMILY_FITS,
    ResourceModel,
    buffer_brams,
    dsp_ceiling,
    features,
    multipliers,
    soft_multipliers,
)
from vta.tune.autovta.space import DEFAULT_RANGES, candidate_from_values, hardware_space


@pytest.mark.unit
def test_bram_packing_by_hand() -> None:
    # 2048 x 128 bits: RAMB36 1024x36 -> 4 wide x 2 deep = 8 (512x72: 2 x 4 = 8)
    assert buffer_brams(2048, 128, "xc7") == 8
    # 1024 x 2048 bits: RAMB36 1024x36 -> 57 x 1 = 57 (512x72 would need 29x2 = 58)
    assert buffer_brams(1024, 2048, "xc7") == 57
    # 8192 x 32 bits: RAMB36 8192x4 -> 8 x 1 = 8
    assert buffer_brams(8192, 32, "xc7") == 8
    # 256 x 32 bits: one RAMB18 (512x36) = 0.5; 1024 x 256 bits: RAMB36 1024x36 -> 8 (yosys
    # tiles memories larger than one RAMB18 with RAMB36 only, not with 15 RAMB18s)
    assert buffer_brams(256, 32, "xc7") == 0.5
    assert buffer_brams(1024, 256, "xc7") == 8
    # ECP5 EBR (18 Kb): 2048 x 9 -> ceil(128/9) = 15 x 1 = 15 (512x36 would need 4x4 = 16)
    assert buffer_brams(2048, 128, "ecp5") == 15


@pytest.mark.unit
def test_small_core_bram_and_dsp_by_hand() -> None:
    # The small preset (1x4x4): uop 256x32 (0.5), inp 256x32 (0.5), wgt 64x128 (2 RAMB36 at
    # 512x72), acc 128x128 (2 at 512x72), out 128x32 (0.5), three 255x128 instruction queues
    # (3 x 2): 11.5 RAMB36. yosys on this core gives 11.5.
    small = Config.preset("small")
    m = ResourceModel(family="xc7", dsp_budget=220)
    est = m.estimate(small)
    assert est["bram"] == 11.5
    # 16 GEMM 8x8 multipliers (1 DSP each), 4 ALU lanes of three 16x16 partial products
    # (1 DSP each): 16 + 12 = 28 DSP48E1 (what yosys reports).
    assert est["dsp"] == 28
    # 1x8x8 with 8/8/32/32 KiB buffers (the ULX3S's 1x8x8 build): uop 2048x32 (2), inp 1024x64
    # (2), wgt 512x512 (8 at 512x72), acc 1024x256 (8 at 1024x36), out 1024x64 (2 at 1024x36),
    # queues 6 -> 28; DSP: 64 + 8 x 3 = 88
    ulx = Config(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=13, LOG_WGT_BUFF_SIZE=15,
                 LOG_ACC_BUFF_SIZE=15)
    assert (m.estimate(ulx)["bram"], m.estimate(ulx)["dsp"]) == (28, 88)
    # (the ALU chains' stages around the ALU have no multipliers)
    assert multipliers(small) == [(8, 8, 16), (16, 16, 12)]


@pytest.mark.unit
def test_soft_multipliers_follow_the_dsp_budget_by_hand() -> None:
    # Default 1x16x16 under PYNQ-Z1's 220 DSPs. Synthesis estimates 256 (8x8) + 16 x 3
    # (16x16 ALU partial products) = 304 DSPs and moves the smallest multipliers to logic:
    # 84 of the 8x8 ones -> 220 DSP cells.
    used, soft, bits = soft_multipliers(Config(), "xc7", 220)
    assert (used, soft, bits) == (220, 84, 84 * 64)
    assert soft_multipliers(Config(), "xc7", None) == (256 + 48, 0, 0)
    # ... and cost 134 LUTs each (the measured lone 8x8 multiplier)
    with_budget = ResourceModel(dsp_budget=220).estimate(Config())["lut"]
    without = ResourceModel(dsp_budget=None).estimate(Config())["lut"]
    assert with_budget - without == pytest.approx(84 * 134)


@pytest.mark.unit
def test_packed_multipliers_count_one_dsp_per_pair_by_hand() -> None:
    # Packed, the small preset's 16 GEMM products take 8 multipliers of 8 x 25 bits (one
    # DSP48E1 each) beside the 12 ALU partial products: 20 DSPs; the default 1x16x16 core
    # takes 128 + 48 = 176 of PYNQ-Z1's 220, none in logic (unpacked: 84 in logic).
    small = Config.preset("small")
    assert multipliers(small, packed=True) == [(8, 25, 8), (16, 16, 12)]
    assert soft_multipliers(Config(), "xc7", 220, packed=True) == (128 + 48, 0, 0)
    assert soft_multipliers(Config(), "xcup", 360, packed=True) == (128 + 48, 0, 0)
    # on ECP5 a 25 x 8 product takes two MULT18X18D: packing saves nothing there
    assert soft_multipliers(small, "ecp5", None, packed=True) == \
        soft_multipliers(small, "ecp5", None)
    pynq = ResourceModel.for_board("pynq-z1")
    assert pynq.packed and not ResourceModel.for_board("ulx3s-85f").packed
    assert not ResourceModel.for_board("de10-nano").packed
    assert pynq.estimate(small)["dsp"] == 20
    assert pynq.estimate(Config())["dsp"] == 176
    # LUTs: no soft multipliers, plus the packing fabric per packed multiplier
    plain = ResourceModel(dsp_budget=None).estimate(Config())["lut"]
    assert pynq.estimate(Config())["lut"] - plain == pytest.approx(
        128 * (563 - 256) / 16)
    assert ResourceModel.from_json(pynq.to_json()).packed


@pytest.mark.unit
def test_dsp_ceiling_by_hand() -> None:
    """The largest square GEMM core whose multipliers all fit the DSPs, by hand: PYNQ-Z1 (220)
    holds 2x8x8 unpacked (128 + 48 = 176; 1x16x16 needs 256 + 48 = 304) and 1x16x16 packed
    (128 + 48; 2x16x16 needs 256 + 96 = 352); the ZCU104 (1,728) 1x32x32 unpacked (1,024 +
    96) and 2x32x32 packed (1,024 + 192; 1x64x64 needs 2,048 + 192); ECP5 gains nothing."""
    base = Config()
    assert dsp_ceiling("xc7", 220, base) == (2, 8)
    assert dsp_ceiling("xc7", 220, base, packed=True) == (1, 16)
    assert dsp_ceiling("xcup", 1728, base) == (1, 32)
    assert dsp_ceiling("xcup", 1728, base, packed=True) == (2, 32)
    assert dsp_ceiling("ecp5", 156, base) == dsp_ceiling("ecp5", 156, base, packed=True) \
        == (1, 8)
    assert dsp_ceiling("xc7", 10, base) == (1, 2)  # 4 + 6
    assert dsp_ceiling("xc7", 9, base) is None


@pytest.mark.unit
def test_space_only_valid_configs() -> None:
    ranges = {k: v[::2] if len(v) > 2 else v for k, v in DEFAULT_RANGES.items()}
    ranges["bus_width"] = (64,)
    space = hardware_space(ranges, base=Config())
    valid = set(space.valid_indices())
    assert 0 < len(valid) < len(space)  # some combinations break the 32-bit micro-op
    # an independent enumeration: Config itself is the judge of validity
    names = list(ranges)
    count = 0
    for combo in itertools.product(*ranges.values()):
        values = dict(zip(names, combo))
        try:
            candidate_from_values(values, Config())
        except ConfigError:
            assert space.from_values(values).index not in valid
            continue
        count += 1
        assert space.from_values(values).index in valid
    assert count == len(valid)


def _some_configs() -> list[Config]:
    """A spread of valid configurations (every LOG_BATCH x LOG_BLOCK, two buffer sets)."""
    out = []
    for b, k in itertools.product((0, 1, 2), (2, 3, 4, 5)):
        for sizes in ((12, 13, 14, 15), (13, 15, 16, 17)):
            with contextlib.suppress(ConfigError):
                out.append(Config(LOG_BATCH=b, LOG_BLOCK=k, **dict(zip(
                    ("LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE",
                     "LOG_ACC_BUFF_SIZE"), sizes))))
    assert len(out) >= 12
    return out


@pytest.mark.unit
def test_calibration_recovers_a_linear_truth() -> None:
    truth = ResourceModel(lut_coef=np.array([1000.0, 50, 20, 40]),
                          ff_coef=np.array([2000.0, 5, 30, 30]), dsp_budget=220)
    cfgs = _some_configs() + [Config.preset("small"), Config()]
    assert len({(c.batch, c.block) for c in cfgs}) >= 3
    samples = [(c.with_bus_width(bw), truth.estimate(c.with_bus_width(bw))) for c in cfgs
               for bw in (64, 128)]
    model = ResourceModel(dsp_budget=220)
    err = model.calibrate(samples)
    assert model.calibration_method == "leave-one-out"
    assert err["lut"] < 1e-6 and err["ff"] < 1e-6 and err["bram"] == 0 and err["dsp"] == 0
    c = Config(LOG_BLOCK=4, LOG_BATCH=1)
    assert model.estimate(c)["lut"] == pytest.approx(truth.estimate(c)["lut"])
    assert features(c).shape == model.lut_coef.shape
    wide = c.with_bus_width(128)  # the bus is the configuration's: 8 more bus bytes
    assert features(wide)[3] - features(c)[3] == 8
    assert model.estimate(wide)["lut"] - model.estimate(c)["lut"] == pytest.approx(8 * 40)


@pytest.mark.unit
def test_calibration_error_is_out_of_sample() -> None:
    # A truth the features cannot express (a quadratic term): the leave-one-out error must be
    # larger than the in-sample residual of the final fit.
    cfgs = _some_configs()
    samples = [(c, {"lut": 3000.0 + 0.02 * c.macs_per_cycle ** 2, "ff": 5000.0,
                        "bram": 0.0, "dsp": 0.0}) for c in cfgs]
    model = ResourceModel(dsp_budget=None)
    err = model.calibrate(samples)
    insample = np.mean([abs(model.estimate(c)["lut"] - r["lut"]) / r["lut"]
                        for c, r in samples])
    assert err["lut"] > insample


@pytest.mark.unit
def test_model_json_round_trip() -> None:
    m = ResourceModel(family="xc7", dsp_budget=220.0)
    m.calibrate([(Config.preset("small"), {"lut": 6587, "ff": 3531, "bram": 15, "dsp": 29})])
    m2 = ResourceModel.from_json(m.to_json())
    for c in (Config(), Config.preset("small")):
        assert m2.estimate(c.with_bus_width(128)) == m.estimate(c.with_bus_width(128))
    assert m2.calibration_error == m.calibration_error


@pytest.mark.unit
@pytest.mark.parametrize(("board", "params", "want"), [
    ("pynq-z1", {}, {"bram": 116, "dsp": 176, "ff": 18143.5, "lut": 28177.56}),
    ("zcu104", {"LOG_BATCH": 1, "LOG_BLOCK": 5},
     {"bram": 173, "dsp": 1216, "ff": 69553.34, "lut": 128394.68}),
    ("ulx3s-85f", {"LOG_BLOCK": 2, "LOG_UOP_BUFF_SIZE": 10, "LOG_INP_BUFF_SIZE": 10,
                   "LOG_WGT_BUFF_SIZE": 10, "LOG_ACC_BUFF_SIZE": 11},
     {"bram": 23, "dsp": 28, "ff": 7698.7, "lut": 8633.56}),
    ("de10-nano", {}, {"bram": 492, "dsp": 110, "ff": 18143.5, "lut": 25721.56}),
])
def test_estimates_unchanged_by_family_facts_in_the_registry(
        board: str, params: dict[str, int], want: dict[str, float]) -> None:
    """The estimates of the model before its FPGA family facts (block-RAM shapes, DSP operand
    widths, soft and packed multiplier LUTs) moved to vta.boards.registry, 2026-12-02, with
    the xc7 coefficients every family had then (the facts are the subject here, not a
    family's own fit)."""
    from vta.boards import get_board

    b = get_board(board)
    m = ResourceModel.for_board(b.name)
    m.lut_coef, m.ff_coef = np.array(FAMILY_FITS["xc7"].lut), np.array(FAMILY_FITS["xc7"].ff)
    got = m.estimate(Config(**params, BUS_WIDTH=b.bus_width))
    assert got == pytest.approx(want, abs=0.01)
