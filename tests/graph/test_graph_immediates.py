"""One recording per layer shape (vta.compiler.graph.immediates): a program patched with
another layer's requantization immediates equals that layer's own full recording."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from vta.compiler.graph import module
from vta.compiler.graph.immediates import immediates, patched, shape_key
from vta.compiler.graph.lowering import AluLayer, MatmulLayer, Recorded, VtaLayer
from vta.compiler.graph.workers import Workers
from vta.compiler.topi.elementwise import Spec
from vta.isa import Config

CFG = Config()

DENSE = VtaLayer("d", "dense", (2, 2), (3, 2), shift=2, mul=21000, shift2=14)
#: the rounding shift beyond one immediate: SHR, ADD, SHR (vta.compiler.topi.alu.rshift)
DENSE_SPLIT = VtaLayer("d", "dense", (2, 2), (3, 2), mul=21000, shift2=18, clip=(-100, 90))
CONV = VtaLayer("c", "conv2d", (1, 1, 4, 4), (2, 1, 3, 3), padding=(1, 1, 1, 1), shift=5)
MATMUL = MatmulLayer("m", 2, 1, 1, 2, mul=20000, shift2=13)


def _add(**kw: int) -> AluLayer:
    attrs = {"mul_a": 30000, "mul_b": 7000, "shift": 15, "lo": -128, "hi": 127, **kw}
    return AluLayer("a", Spec.make("add", **attrs), 4)


#: (the recorded layer, a layer of the same shape with one immediate changed)
CASES = [
    (DENSE, replace(DENSE, shift=3)),
    (DENSE, replace(DENSE, mul=17001)),
    (DENSE, replace(DENSE, shift2=12)),
    (DENSE, replace(DENSE, clip=(-100, 127))),
    (DENSE, replace(DENSE, clip=(-128, 100))),
    (DENSE, replace(DENSE, shift=7, mul=300, shift2=9, clip=(-1, 5))),
    (DENSE_SPLIT, replace(DENSE_SPLIT, shift2=20)),
    (CONV, replace(CONV, shift=9)),
    (CONV, replace(CONV, clip=(-5, 127))),
    (MATMUL, replace(MATMUL, mul=123)),
    (MATMUL, replace(MATMUL, shift2=3)),
    (MATMUL, replace(MATMUL, clip=(-7, 77))),
    (_add(), _add(mul_a=29000)),
    (_add(), _add(mul_b=5000)),
    (_add(), _add(shift=14)),
    (_add(), _add(lo=-5)),
    (_add(), _add(hi=50)),
]


def _knobs(layer: Any) -> dict[str, int]:
    return dict(layer.default(CFG).knobs)


def _recording(layer: Any, knobs: dict[str, int]) -> Recorded:
    r = module._record((layer, knobs, CFG))
    assert isinstance(r, Recorded), r
    return r


@pytest.mark.parametrize("old,new", CASES, ids=[f"{a.template}-{k}" for k, (a, _) in
                                                 enumerate(CASES)])
def test_patched_program_equals_full_recording(old: Any, new: Any) -> None:
    assert shape_key(old) == shape_key(new)
    knobs = _knobs(old)
    a, b = _recording(old, knobs), _recording(new, knobs)
    assert a.rec.program != b.rec.program  # the immediates are in the program
    p = patched(a, immediates(old), immediates(new))
    assert p is not None
    assert p.rec.program == b.rec.program
    assert (p.rec.uops, p.rec.relocations, p.offsets, p.sizes) == \
        (b.rec.uops, b.rec.relocations, b.offsets, b.sizes)


def test_shape_key_separates_what_changes_the_program() -> None:
    assert shape_key(DENSE) != shape_key(replace(DENSE, mul=1))  # no MUL, no rounding
    assert shape_key(DENSE) != shape_key(replace(DENSE, shift=0))  # no SHR
    assert shape_key(DENSE) != shape_key(replace(DENSE, shift2=18))  # rounding in two SHRs
    assert shape_key(DENSE) != shape_key(replace(DENSE, kernel=(4, 2)))
    assert shape_key(_add()) != shape_key(_add(mul_a=1))  # x * 1 may be simplified away
    assert shape_key(_add()) != shape_key(_add(lo=3))  # another sign
    clip = AluLayer("c", Spec.make("clip", lo=-3, hi=3), 4)
    assert immediates(clip) is None and shape_key(clip) is None


def test_patch_refused_where_one_value_maps_to_two() -> None:
    old = replace(DENSE, shift=7, shift2=7)
    new = replace(DENSE, shift=7, shift2=8)
    assert shape_key(old) == shape_key(new)
    a = _recording(old, _knobs(old))
    assert patched(a, immediates(old), immediates(new)) is None
    # an immediate of the program (the clip's -128) the list does not explain
    assert patched(a, immediates(old)[:-2], immediates(new)[:-2]) is None


def test_record_by_shape_equals_recording_each(monkeypatch: pytest.MonkeyPatch) -> None:
    knobs = _knobs(DENSE)
    key = tuple(sorted(knobs.items()))
    first = replace(DENSE, shift=7, shift2=7)
    works = [first, replace(DENSE, shift=7, shift2=8),  # 7 -> 7 and 8: recorded in full
             replace(first, mul=300, clip=(-9, 9)),  # patched
             replace(DENSE, mul=1)]  # another shape: recorded
    todo = [(replace(w, node=""), key) for w in works]
    full = {t: _recording(t[0], knobs) for t in todo}
    calls = []
    record = module._record
    monkeypatch.setattr(module, "_record", lambda task: calls.append(task) or record(task))
    recorded: dict = {}
    with Workers(1) as workers:
        module._record_by_shape(todo, recorded, CFG, workers)
    assert [c[0] for c in calls] == [todo[0][0], todo[3][0], todo[1][0]]
    assert set(recorded) == set(todo)
    for t in todo:
        assert (recorded[t].rec.program, recorded[t].rec.uops) == \
            (full[t].rec.program, full[t].rec.uops)
