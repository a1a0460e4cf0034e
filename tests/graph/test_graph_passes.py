"""Graph passes, fusion, layout packing and memory planning."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper
from vta.compiler.graph import passes
from vta.compiler.graph.ir import Graph, Node, TensorInfo
from vta.compiler.graph.onnx_frontend import from_onnx
from vta.compiler.graph.plan import Buffer, MemoryPlan, liveness, plan_memory
from vta.compiler.graph.reference import run_float
from vta.compiler.topi.pack import (
    pack_activation,
    pack_weight,
    unpack_activation,
    unpack_weight,
)

from .conftest import onnx_model, rand_input

pytestmark = pytest.mark.unit


def test_constant_folding_removes_constant_subgraph() -> None:
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = onnx_model([helper.make_node("Mul", ["a", "b"], ["ab"], name="m"),
                    helper.make_node("Relu", ["ab"], ["r"], name="r"),
                    helper.make_node("Add", ["x", "r"], ["y"], name="add")],
                   {"x": [2, 3]}, {"y": None}, {"a": c, "b": -c + 2})
    g = from_onnx(m)
    folded = passes.fold_constants(g.copy())
    assert [n.op for n in folded.nodes] == ["Add"]
    x = {"x": np.ones((2, 3), np.float32)}
    np.testing.assert_array_equal(run_float(folded, x)["y"], 1 + np.maximum(c * (2 - c), 0))


@pytest.mark.parametrize("name", ["resnet18", "dcgan"])
def test_optimize_folds_batchnorm_and_keeps_results(small_models, name: str) -> None:
    _, g = small_models[name]
    og = passes.optimize(g)
    assert not any(n.op == "BatchNormalization" for n in og.nodes)
    assert not any(n.op in ("ConvTranspose", "Relu") for n in og.nodes)
    x = rand_input(g, 5)
    ref = run_float(g, x)[g.outputs[0]]
    out = run_float(og, x)[g.outputs[0]]
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-4 * np.abs(ref).max())


def test_fuse_activations_only_single_consumer() -> None:
    w = np.ones((2, 2, 1, 1), np.float32)
    m = onnx_model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                    helper.make_node("Relu", ["c"], ["r"], name="relu"),
                    helper.make_node("Add", ["r", "c"], ["y"], name="add")],
                   {"x": [1, 2, 3, 3]}, {"y": None}, {"w": w})
    g = passes.fuse_activations(from_onnx(m))
    assert [n.op for n in g.nodes] == ["Conv", "Relu", "Add"]  # conv output used twice


def test_fusion_groups_follow_the_four_categories(small_models) -> None:
    og = passes.optimize(small_models["resnet18"][1])
    groups = passes.fusion_groups(og)
    by_node = {n: grp for grp in groups for n in grp.nodes}
    # every node in exactly one group, in order
    assert sorted(by_node) == sorted(n.name for n in og.nodes)
    # the residual add (injective) fuses into the conv (complex-out-fusable) producing it
    add = by_node["layer1.0.add"]
    assert add.kind == passes.OUT_FUSABLE and add.master == "layer1.0.conv2"
    # flatten (injective) after the global pool (a reduction) starts its own group, and
    # the dense layer does not absorb it (an out-fusable op only absorbs what follows it)
    assert by_node["avgpool"].kind == passes.REDUCTION
    assert by_node["flatten"] is not by_node["avgpool"] and by_node["flatten"] is not \
        by_node["fc"]
    # the first conv does not absorb the maxpool (complex-out-fusable is not injective)
    assert by_node["maxpool"] is not by_node["conv1"]
    mob = passes.optimize(small_models["mobilenet_v1"][1])
    soft = [g for g in passes.fusion_groups(mob) if "softmax" in g.nodes]
    assert soft[0].kind == passes.OPAQUE and soft[0].nodes == ["softmax"]


def test_reduction_absorbs_injective_producer() -> None:
    g = Graph([Node("Relu", "r", ["x"], ["a"]), Node("GlobalAveragePool", "gap", ["a"], ["y"])],
              {"x": TensorInfo((1, 2, 3, 3))}, ["y"])
    (grp,) = passes.fusion_groups(g)
    assert grp.kind == passes.REDUCTION and grp.master == "gap" and grp.nodes == ["r", "gap"]


# ---------------------------------------------------------------------- packing
@pytest.mark.parametrize("shape, b, c", [((1, 5, 3, 4), 1, 4), ((3, 16, 2, 2), 2, 16),
                                         ((2, 33, 1, 1), 1, 16)])
def test_pack_activation_roundtrip_and_padding(shape, b, c) -> None:
    x = np.random.default_rng(0).integers(-128, 128, shape, dtype=np.int8)
    p = pack_activation(x, b, c)
    n, ch, h, w = shape
    assert p.shape == (-(-n // b), -(-ch // c), h, w, b, c)
    np.testing.assert_array_equal(unpack_activation(p, n, ch), x)
    # element [n, ch, h, w] of NCHW is at [n//b, ch//c, h, w, n%b, ch%c]
    assert p[(n - 1) // b, (ch - 1) // c, h - 1, w - 1, (n - 1) % b, (ch - 1) % c] == \
        x[n - 1, ch - 1, h - 1, w - 1]
    # the padding is zero
    assert int(np.abs(p.astype(np.int64)).sum()) == int(np.abs(x.astype(np.int64)).sum())


def test_pack_weight_roundtrip() -> None:
    w = np.random.default_rng(1).integers(-128, 128, (20, 7, 3, 3), dtype=np.int8)
    p = pack_weight(w, 16, 4)
    assert p.shape == (2, 2, 3, 3, 16, 4)
    assert p[1, 1, 2, 0, 3, 2] == w[19, 6, 2, 0]
    np.testing.assert_array_equal(unpack_weight(p, 20, 7), w)


# --------------------------------------------------------------- memory planning
def _chain_graph(sizes_and_skips: list[tuple[int, int]]) -> tuple[Graph, dict[str, int]]:
    """A chain where node k also reads the output of node k - skip (residual-like edges)."""
    nodes, sizes = [], {"t0": 64}
    for k, (size, skip) in enumerate(sizes_and_skips, start=1):
        ins = [f"t{k - 1}"] + ([f"t{max(0, k - 1 - skip)}"] if skip else [])
        nodes.append(Node("Add" if skip else "Relu", f"n{k}", ins, [f"t{k}"]))
        sizes[f"t{k}"] = size
    g = Graph(nodes, {"t0": TensorInfo((16,))}, [f"t{len(nodes)}"])
    return g, sizes


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 4)), min_size=1, max_size=25))
def test_plan_never_overlaps_live_tensors(spec) -> None:
    g, sizes = _chain_graph(spec)
    plan = plan_memory(g, sizes, {"w": 1000})
    assert plan.overlaps() == []
    live = liveness(g)
    for t, b in plan.buffers.items():
        assert b.offset % 256 == 0 and b.offset + b.size <= plan.size
        if b.kind == "activation":
            assert (b.start, b.end) == live[t] and b.offset >= plan.const_size
    # brute force: at every step, the live buffers' byte ranges are disjoint
    for step in range(-1, len(g.nodes) + 1):
        used = np.zeros(plan.size, np.int8)
        for b in plan.buffers.values():
            if b.start <= step <= b.end:
                used[b.offset:b.offset + b.size] += 1
        assert used.max(initial=0) <= 1


def test_plan_reuses_memory(small_models) -> None:
    og = passes.optimize(small_models["resnet18"][1])
    from vta.compiler.graph.reference import infer_shapes

    shapes = infer_shapes(og)
    sizes = {t: int(np.prod(s)) * 4 for t, s in shapes.items() if t not in og.params}
    plan = plan_memory(og, sizes)
    assert plan.overlaps() == []
    assert plan.size < plan.naive_size / 3  # a chain of 30 layers reuses a few buffers
    offsets = [b.offset for b in plan.buffers.values()]
    assert len(set(offsets)) < len(offsets)  # some tensors share an offset


def test_overlap_check_detects_a_conflict() -> None:
    plan = MemoryPlan({"a": Buffer("a", 0, 512, 0, 3), "b": Buffer("b", 256, 512, 2, 5),
                       "c": Buffer("c", 0, 512, 4, 6)}, 1024)
    found = {frozenset(p) for p in plan.overlaps()}
    # a/b share bytes 256..511 during steps 2..3; b/c share them during 4..5; a/c never live
    # at the same time
    assert found == {frozenset("ab"), frozenset("bc")}


def test_merge_reshapes() -> None:
    """A chain of Reshapes back to the input's shape goes; Reshape -> Flatten becomes one
    Reshape; the results stay what the unmerged graph computes."""
    g = Graph([Node("Reshape", "r1", ["x"], ["a"], {"shape": [2, 3, 1, 4], "allowzero": 0}),
               Node("Reshape", "r2", ["a"], ["b"], {"shape": [2, 12], "allowzero": 0}),
               Node("Reshape", "r3", ["b"], ["c"], {"shape": [2, 3, 4], "allowzero": 0}),
               Node("Relu", "relu", ["c"], ["d"], {}),
               Node("Reshape", "r4", ["d"], ["e"], {"shape": [6, 4], "allowzero": 0}),
               Node("Flatten", "f", ["e"], ["y"], {"axis": 1}),
               Node("Reshape", "r5", ["d"], ["z"], {"shape": [24], "allowzero": 0})],
              {"x": TensorInfo((2, 3, 4), "float32")}, ["y", "z"], {})
    x = rand_input(g)
    ref = run_float(g.copy(), x)
    m = passes.merge_reshapes(g.copy())
    # r1 -> r2 -> r3 restores x's shape: all three go; r4 -> f is one Reshape of d
    assert [(n.op, n.inputs) for n in m.nodes] == [("Relu", ["x"]), ("Reshape", ["d"]),
                                                   ("Reshape", ["d"])]
    assert m.nodes[1].attrs["shape"] == [6, 4]
    out = run_float(m, x)
    for k in ("y", "z"):
        np.testing.assert_array_equal(out[k], ref[k])
