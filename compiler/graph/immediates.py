"""One recording per layer shape: layers that differ only in their requantization immediates
(shift, fixed-point multiplier, rounding shift, clip bounds; an element-wise add's two
multipliers) have the same program but for the ``imm`` field of some ALU instructions, so a
compile records one of them and patches the others' immediates into a copy
(:func:`patched`). A layer's immediates are listed in the order its template emits them
(:func:`immediates`); what decides the program's shape beside the workload and knobs is
which steps run and each value's class (:func:`shape_key`: its sign and whether it is one,
where the template or the simplifier may drop a step). A patch is refused (None: the layer
is recorded in full) where one value of the recorded layer would map to two, or where the
program carries an immediate the list does not explain."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import numpy as np
from vta.isa.insn import AluInsn, program_words

from ..topi.alu import rshift_steps
from .lowering import AluLayer, MatmulLayer, Recorded, VtaLayer

#: The fields of a conv/dense/matmul layer that only its immediates depend on.
_EPILOGUE = ("shift", "clip", "mul", "shift2")


def immediates(layer: Any) -> list[tuple[str, int]] | None:
    """The (step, immediate) pairs of a layer's ALU work in its template's order, or None for
    a layer whose program is not patched (a fused residual add, an element-wise op other
    than ``add``)."""
    if isinstance(layer, AluLayer):
        if layer.spec.kind != "add":
            return None
        a = dict(layer.spec.attrs)
        return [("mul_b", a["mul_b"]), ("mul_a", a["mul_a"]), *rshift_steps(a["shift"]),
                ("lo", a["lo"]), ("hi", a["hi"])]
    if isinstance(layer, VtaLayer) and layer.residual is not None:
        return None
    if not isinstance(layer, (VtaLayer, MatmulLayer)):
        return None
    mul_vector = getattr(layer, "mul_vector", False)
    out = [("shr", layer.shift)] * bool(layer.shift)
    if not mul_vector and layer.mul != 1:
        out.append(("mul", layer.mul))
    if (mul_vector or layer.mul != 1) and layer.shift2:
        out += rshift_steps(layer.shift2)
    return [*out, ("lo", layer.clip[0]), ("hi", layer.clip[1])]


def shape_key(layer: Any) -> tuple | None:
    """What a layer's program depends on but its immediates' values: the layer with them
    cleared, its steps and each value's class; None where :func:`immediates` is."""
    imms = immediates(layer)
    if imms is None:
        return None
    classes = tuple((step, (v > 0) - (v < 0), v == 1) for step, v in imms)
    if isinstance(layer, AluLayer):
        return (type(layer), layer.spec.kind, layer.tiles, layer.vectors, classes)
    cleared = replace(layer, node="", **{f.name: f.default for f in fields(layer)
                                        if f.name in _EPILOGUE})
    return (cleared, classes)


def patched(r: Recorded, old: list[tuple[str, int]], new: list[tuple[str, int]]
            ) -> Recorded | None:
    """The recording ``r`` of a layer with immediates ``old`` turned into that of a layer of
    the same :func:`shape_key` with immediates ``new``: every ALU immediate ``old[i]`` becomes
    ``new[i]``. None where one old value would become two new ones, or where an ALU
    immediate of the program is not among ``old``."""
    table: dict[int, int] = {}
    for (_, a), (_, b) in zip(old, new, strict=True):
        if table.setdefault(a, b) != b:
            return None
    cfg = r.rec.cfg
    words = program_words(r.rec.program).copy()
    alu = cfg.layouts.alu
    rows = np.nonzero(cfg.layouts.finish.unpack_columns(words)["opcode"] == AluInsn.opcode)[0]
    cols = alu.unpack_columns(words[rows])
    use = cols["use_imm"] == 1
    if not all(int(v) in table for v in np.unique(cols["imm"][use])):
        return None
    cols["imm"][use] = [table[int(v)] for v in cols["imm"][use]]
    words[rows] = alu.pack_columns(cols, len(rows))
    return Recorded(replace(r.rec, program=words.tobytes()), r.offsets, r.sizes)


__all__ = ["immediates", "shape_key", "patched"]
