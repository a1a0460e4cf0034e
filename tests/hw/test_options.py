"""CoreOptions: parsing of a board's core options and what each variant changes."""

from __future__ import annotations

import pytest
from vta.boards.registry import all_boards
from vta.hw.options import CoreOptions
from vta.isa.errors import ConfigError

pytestmark = pytest.mark.unit


def test_default_is_the_plain_core() -> None:
    assert CoreOptions.coerce(None) == CoreOptions() == CoreOptions.from_dict({})
    assert CoreOptions().as_dict() == {}
    assert CoreOptions().extra_gemm_latency == 0


def test_round_trip_and_latency() -> None:
    opts = CoreOptions.from_dict({"replicate_control": True, "replicate_operands": True})
    assert CoreOptions.from_dict(opts.as_dict()) == opts
    assert opts.extra_gemm_latency == 1  # the operand stage
    assert CoreOptions(replicate_control=True).extra_gemm_latency == 0
    assert CoreOptions.coerce(opts) is opts
    dsp = CoreOptions.from_names("dsp_registers, replicate_control")
    assert dsp.extra_gemm_latency == 1 and dsp.operand_stage  # the DSPs' operand registers
    assert CoreOptions.from_dict(dsp.as_dict()) == dsp


@pytest.mark.parametrize("other", ["replicate_operands", "pack_multipliers"])
def test_dsp_registers_exclude_the_other_gemm_variants(other: str) -> None:
    with pytest.raises(ConfigError, match=f"dsp_registers excludes {other}"):
        CoreOptions.from_names(f"dsp_registers,{other}")


@pytest.mark.parametrize("bad, needle", [({"replicate_everything": True}, "replicate_everything"),
                                         ({"replicate_control": 1}, "true or false")])
def test_bad_options_name_the_problem(bad: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        CoreOptions.from_dict(bad)


@pytest.mark.parametrize("board", [b.name for b in all_boards()])
def test_every_board_options_parse(board: str) -> None:
    from vta.boards.registry import get_board

    b = get_board(board)
    assert CoreOptions.from_dict(b.core_options).as_dict() == b.core_options
