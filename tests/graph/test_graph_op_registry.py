"""One op registry (vta.compiler.ops): an op declared in one place (one ``register`` call) is
imported from ONNX, shape-inferred, run by the float reference, quantized around, partitioned,
summarised and counted; and no module outside the registry keeps its own table of ops."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from vta.compiler import ops
from vta.compiler.graph.errors import UnsupportedOpError
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.module import compile_graph
from vta.compiler.graph.onnx_frontend import from_onnx
from vta.compiler.graph.options import CompileOptions
from vta.compiler.graph.reference import infer_shapes, run_float
from vta.compiler.graph.summary import compile_summary
from vta.isa import Config

from .conftest import onnx_model, rand_input

ROOT = Path(__file__).resolve().parents[2]
#: The kit's packages (tests, benchmarks and examples sit beside).
KIT = ("isa", "sim", "hw", "runtime", "boards", "compiler", "tune", "cli")
REGISTRY = ROOT / "compiler" / "ops"


def _softsign(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.abs(x))


@pytest.fixture
def softsign():  # noqa: ANN201 - the registered op
    """ONNX's Softsign, which the kit does not implement, declared in ONE place."""
    op = ops.register(ops.Op(
        "Softsign", elementwise=True, unary=True, pattern=ops.INJECTIVE,
        float_kernel=lambda n, a: [_softsign(a[0]).astype(np.float32)],
        shape=lambda n, s: s[0],
        macs=lambda n, shapes, params: int(np.prod(shapes[n.outputs[0]])),
        onnx=lambda c, name, ins, outs, a: c.emit("Softsign", name, ins[:1], outs[:1])))
    yield op
    ops.unregister("Softsign")


def _model():  # noqa: ANN202 - an onnx ModelProto
    from onnx import helper

    rng = np.random.default_rng(5)
    w = (rng.standard_normal((16, 16, 3, 3)) * 0.2).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="c0", pads=[1] * 4),
             helper.make_node("Softsign", ["c0"], ["s"], name="soft"),
             helper.make_node("Conv", ["s", "w1", "b1"], ["y"], name="c1", pads=[1] * 4)]
    inits = {"w0": w, "b0": np.zeros(16, np.float32), "w1": w[::-1].copy(),
             "b1": np.full(16, 0.1, np.float32)}
    return onnx_model(nodes, {"x": [1, 16, 6, 6]}, {"y": [1, 16, 6, 6]}, inits)


@pytest.mark.unit
def test_an_undeclared_op_is_refused() -> None:
    with pytest.raises(UnsupportedOpError, match="unsupported op type Softsign"):
        from_onnx(_model())


@pytest.mark.sim
def test_an_op_declared_once_runs_through_the_compiler(softsign) -> None:
    g = from_onnx(_model())
    assert [n.op for n in g.nodes] == ["Conv", "Softsign", "Conv"]
    assert infer_shapes(g)["s"] == (1, 16, 6, 6)
    feeds = rand_input(g)
    env = run_float(g, feeds, keep=True)
    np.testing.assert_allclose(env["s"], _softsign(env["c0"]), rtol=1e-6)

    m = compile_graph(g, Config(), CompileOptions(keep_first_float=False),
                      samples=[rand_input(g, s) for s in range(3)])
    kinds = {n.name: n.op for n in m.graph.nodes}
    # quantized around: the convs are int8 on VTA, the new op runs in float on the CPU
    assert kinds["c0"] == kinds["c1"] == "QConv" and kinds["soft"] == "Softsign"
    assert m.partition["c0"] == m.partition["c1"] == "vta" and m.partition["soft"] == "cpu"
    q = run_quantized(m.graph, feeds, keep=True)
    # its float kernel ran on the dequantized int8 conv output
    deq = q[m.graph.node("soft").inputs[0]]
    np.testing.assert_allclose(q["s"], _softsign(deq), rtol=1e-6)
    # summarised with its reason, and its MACs counted by its own rule (one per element)
    assert "fallback: soft (Softsign) runs on the CPU (float, no int8 kernel)" in m.notes
    assert "float, no int8 kernel" in compile_summary(m, "out")
    assert m.macs["soft"] == 16 * 6 * 6


def _op_strings(node: ast.AST, names: frozenset[str]) -> list[str]:
    """The op names among a set or dict literal's constant strings (its keys for a dict)."""
    elts = node.keys if isinstance(node, ast.Dict) else node.elts
    return [e.value for e in elts if isinstance(e, ast.Constant) and e.value in names]


def op_tables(source: str, names: frozenset[str]) -> list[int]:
    """Lines of the set, dict, tuple and list literals that name three or more ops."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Set, ast.Dict, ast.Tuple, ast.List)) and \
                len(_op_strings(node, names)) >= 3:
            found.append(node.lineno)
    return found


@pytest.mark.unit
def test_no_op_table_outside_the_registry() -> None:
    names = ops.names(lambda o: True)
    bad = []
    for pkg in KIT:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path.is_relative_to(REGISTRY):
                continue
            bad += [f"{path.relative_to(ROOT)}:{line}"
                    for line in op_tables(path.read_text(), names)]
    assert not bad, ("tables of ops outside vta.compiler.ops (derive them from the "
                     "registry):\n" + "\n".join(bad))


@pytest.mark.unit
@pytest.mark.parametrize(("source", "tables"), [
    ('T = frozenset({"Conv", "Relu", "Add"})', [1]),
    ('T = {"Conv": 1, "Relu": 2, "Add": 3}', [1]),
    ('for op in ("Conv", "Relu", "Add"):\n    pass', [1]),
    ('T = {"Conv", "Relu"}', []),
    ('T = {"conv": 1, "relu": 2, "add": 3}', []),
])
def test_the_op_table_scan(source: str, tables: list[int]) -> None:
    """The scan finds literals naming three or more ops (and only those)."""
    assert op_tables(source, ops.names(lambda o: True)) == tables
