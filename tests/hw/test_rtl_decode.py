"""The Amaranth views of the ISA (vta.hw.decode) agree with vta.isa's encoder field by field."""

from __future__ import annotations

import random

import pytest
from vta.hw.decode import insn_layouts
from vta.isa import Config
from vta.isa.insn import AluInsn, FinishInsn, GemmInsn, MemInsn, Uop, encode_uop, encode_word
from vta.isa.layout import Opcode

pytestmark = pytest.mark.unit


def _random_fields(rng: random.Random, layout, skip=("opcode",)) -> dict[str, int]:
    return {f.name: rng.randint(f.min, f.max) for f in layout.fields if f.name not in skip}


@pytest.mark.parametrize("preset", ["small", "default"])
def test_views_match_encoder(preset: str) -> None:
    cfg = Config.preset(preset)
    lays = insn_layouts(cfg)
    rng = random.Random(preset)
    for _ in range(200):
        kind = rng.choice(["load", "store", "gemm", "alu", "finish"])
        if kind in ("load", "store"):
            vals = _random_fields(rng, cfg.layouts.mem)
            insn = MemInsn(opcode=Opcode.LOAD if kind == "load" else Opcode.STORE, **vals)
            view = lays.insn.from_bits(encode_word(insn, cfg)).mem
        elif kind == "gemm":
            insn = GemmInsn(**_random_fields(rng, cfg.layouts.gemm))
            view = lays.insn.from_bits(encode_word(insn, cfg)).gemm
        elif kind == "alu":
            insn = AluInsn(**_random_fields(rng, cfg.layouts.alu))
            view = lays.insn.from_bits(encode_word(insn, cfg)).alu
        else:
            insn = FinishInsn(**_random_fields(rng, cfg.layouts.finish))
            view = lays.insn.from_bits(encode_word(insn, cfg)).finish
        for name, value in insn.values().items():
            assert getattr(view, name) == value, (kind, name)
    for _ in range(100):
        uop = Uop(**_random_fields(rng, cfg.layouts.uop, skip=()))
        view = lays.uop.from_bits(encode_uop(uop, cfg))
        assert (view.dst_idx, view.src_idx, view.wgt_idx) == (uop.dst_idx, uop.src_idx,
                                                               uop.wgt_idx)
