"""Hypothesis round trips: random field values of every instruction kind and the micro-op, over
random valid Configs; encode/decode, asm/disasm and JSON lines, all at the byte level."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vta.isa import (
    PARAMS,
    AluInsn,
    Config,
    ConfigError,
    FinishInsn,
    GemmInsn,
    Insn,
    MemInsn,
    Opcode,
    Uop,
    decode,
    decode_program,
    decode_uop,
    encode,
    encode_program,
    encode_uop,
    encode_uops,
)
from vta.isa.asm import (
    assemble,
    assemble_bytes,
    assemble_uops_bytes,
    decode_uops,
    disassemble,
    disassemble_uops,
    from_jsonl,
    to_jsonl,
)

pytestmark = pytest.mark.unit

ROUND_TRIP = settings(max_examples=200, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])

# Ranges a little wider than the accepted ones, so rejection is exercised too.
_PARAM_RANGES = {
    "LOG_INP_WIDTH": (3, 4), "LOG_WGT_WIDTH": (3, 4), "LOG_ACC_WIDTH": (4, 5),
    "LOG_BATCH": (0, 3), "LOG_BLOCK": (1, 6), "LOG_UOP_BUFF_SIZE": (2, 20),
    "LOG_INP_BUFF_SIZE": (4, 22), "LOG_WGT_BUFF_SIZE": (4, 22), "LOG_ACC_BUFF_SIZE": (4, 22),
}


def _try_config(params: dict[str, int]) -> Config | None:
    try:
        return Config(**params)
    except ConfigError:
        return None


@st.composite
def _params(draw) -> dict[str, int]:
    """The nine parameters, buffer sizes drawn as (element size) x (a depth of 2^-1 .. 2^15) so
    that most draws are valid; the few whose layouts overflow are rejected by Config."""
    p = {k: draw(st.integers(*_PARAM_RANGES[k]))
         for k in ("LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH", "LOG_BATCH", "LOG_BLOCK")}
    elem_log = {  # log2 of the element size in bytes
        "UOP": 2,
        "INP": p["LOG_BATCH"] + p["LOG_BLOCK"] + p["LOG_INP_WIDTH"] - 3,
        "WGT": 2 * p["LOG_BLOCK"] + p["LOG_WGT_WIDTH"] - 3,
        "ACC": p["LOG_BATCH"] + p["LOG_BLOCK"] + p["LOG_ACC_WIDTH"] - 3,
    }
    for buf, e in elem_log.items():
        p[f"LOG_{buf}_BUFF_SIZE"] = e + draw(st.integers(-1, 15))
    return p


#: Random valid configurations: draw the nine parameters, keep those Config accepts; the two
#: presets are always among the candidates.
configs = st.one_of(
    st.sampled_from([Config(), Config.preset("small")]),
    _params().map(_try_config).filter(lambda c: c is not None),
)


def _field_values(draw, layout, skip=("opcode",)) -> dict[str, int]:
    return {f.name: draw(st.integers(f.min, f.max)) for f in layout.fields if f.name not in skip}


@st.composite
def insns(draw, cfg: Config) -> Insn:
    """Any instruction with every field drawn over its whole range (memory_type and
    alu_opcode over all 3-bit values, including the unnamed ones)."""
    kind = draw(st.sampled_from(["load", "store", "gemm", "alu", "finish"]))
    lay = cfg.layouts
    if kind in ("load", "store"):
        op = Opcode.LOAD if kind == "load" else Opcode.STORE
        return MemInsn(opcode=op, **_field_values(draw, lay.mem))
    if kind == "gemm":
        return GemmInsn(**_field_values(draw, lay.gemm))
    if kind == "alu":
        return AluInsn(**_field_values(draw, lay.alu))
    return FinishInsn(**_field_values(draw, lay.finish))


@st.composite
def config_and_program(draw, max_size: int = 8) -> tuple[Config, list[Insn]]:
    cfg = draw(configs)
    return cfg, draw(st.lists(insns(cfg), min_size=1, max_size=max_size))


@st.composite
def config_and_uops(draw) -> tuple[Config, list[Uop]]:
    cfg = draw(configs)
    f = cfg.layouts.uop
    uop = st.builds(Uop, st.integers(0, f["dst_idx"].max), st.integers(0, f["src_idx"].max),
                    st.integers(0, f["wgt_idx"].max))
    return cfg, draw(st.lists(uop, min_size=1, max_size=8))


@ROUND_TRIP
@given(config_and_program())
def test_encode_decode_round_trip(cp) -> None:
    cfg, program = cp
    for insn in program:
        data = encode(insn, cfg)
        assert len(data) == 16
        assert decode(data, cfg) == insn
    data = encode_program(program, cfg)
    assert decode_program(data, cfg) == program
    assert encode_program(decode_program(data, cfg), cfg) == data


@ROUND_TRIP
@given(config_and_program())
def test_asm_disasm_round_trip_bytes(cp) -> None:
    cfg, program = cp
    data = encode_program(program, cfg)
    text = disassemble(data, cfg)
    assert text.count("\n") == len(program)
    assert assemble_bytes(text, cfg) == data
    assert assemble(text, cfg) == program
    # the listing form with index comments assembles to the same bytes
    assert assemble_bytes(disassemble(data, cfg, index=True), cfg) == data


@ROUND_TRIP
@given(config_and_program())
def test_jsonl_round_trip_bytes(cp) -> None:
    cfg, program = cp
    data = encode_program(program, cfg)
    jsonl = to_jsonl(data, cfg)
    assert len(jsonl.splitlines()) == len(program)
    assert encode_program(from_jsonl(jsonl, cfg), cfg) == data


@ROUND_TRIP
@given(configs, st.data())
def test_random_words_with_reserved_bits(cfg: Config, data) -> None:
    """Any 128-bit word with a valid opcode decodes; re-encoding keeps exactly the bits that
    belong to fields, and the disassembly reproduces those bits."""
    opcode = data.draw(st.sampled_from([0, 1, 2, 3, 4]))
    word = (data.draw(st.integers(0, (1 << 128) - 1)) & ~0x7) | opcode
    raw = word.to_bytes(16, "little")
    lay = cfg.layouts.for_opcode(opcode)
    field_mask = 0
    for f in lay.fields:
        field_mask |= f.mask << f.offset
    insn = decode(raw, cfg)
    assert int.from_bytes(encode(insn, cfg), "little") == word & field_mask
    assert assemble_bytes(disassemble(raw, cfg), cfg) == (word & field_mask).to_bytes(16, "little")


@ROUND_TRIP
@given(config_and_uops())
def test_uop_round_trips(cu) -> None:
    cfg, uops = cu
    data = encode_uops(uops, cfg)
    assert len(data) == 4 * len(uops)
    assert decode_uops(data, cfg) == uops
    for u in uops:
        assert decode_uop(encode_uop(u, cfg), cfg) == u
    assert assemble_uops_bytes(disassemble_uops(data, cfg), cfg) == data


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({p: st.integers(*_PARAM_RANGES[p]) for p in PARAMS}))
def test_valid_configs_are_self_consistent(params: dict[str, int]) -> None:
    """Whatever Config accepts: each buffer's depth times its element size is its byte size, and
    every layout fits its word; whatever it rejects is a ConfigError naming a parameter."""
    try:
        cfg = Config(**params)
    except ConfigError as e:
        assert any(p in str(e) for p in PARAMS), str(e)
        return
    for buf in ("uop", "inp", "wgt", "acc"):
        size = 1 << params[f"LOG_{buf.upper()}_BUFF_SIZE"]
        assert getattr(cfg, f"{buf}_depth") * getattr(cfg, f"{buf}_elem_bytes") == size
    lay = cfg.layouts
    for layout in (lay.mem, lay.gemm, lay.alu, lay.finish):
        assert max(f.offset + f.width for f in layout.fields) <= 128
        assert all(f.offset // 64 == (f.offset + f.width - 1) // 64 for f in layout.fields)
    assert sum(f.width for f in lay.uop.fields) <= 32
