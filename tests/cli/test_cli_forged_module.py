"""Forged modules, field by field (issue #35): every field of a compiled module's manifest, the
graph's nodes, inputs, attributes and parameters included, replaced in turn by a value of
another kind, with every checksum rewritten as a forger would. ``vta run`` then either runs or
refuses the module in one line (exit 2, nothing written): the manifest's graph is checked as a
whole when the module is loaded (types, names, definition before use, a kernel for every op,
shapes and arena buffers of the VTA layers), and a CPU kernel that fails on an edited
attribute names its node. The module has a VTA conv, an ALU add, an int8 max-pool, a dense,
and float CPU ops (sigmoid, pooling, flatten, softmax).

The default run replaces every field once (three values taken in turn); ``slow`` replaces each
with three of twelve values (taken in turn) and adds the node-level forgeries (reordered,
duplicated nodes, a missing attribute).
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .test_cli_fuzz import check_promise
from .test_cli_trust import _resign

pytestmark = pytest.mark.unit

_FEW = [None, "zz", [1]]
_ALL = [None, 7, -1, 2**40, "zz", "", [], [1], ["a"], {"a": 1}, 1.5, True]


def _rich_onnx(path: Path) -> None:
    """conv -> relu -> max-pool -> conv + skip add -> sigmoid -> global pool -> flatten ->
    dense -> softmax, on a 1x3x16x16 input."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name: str, *shape: int) -> Any:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32),
                                       name)

    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "p1"], ["a1"], name="add1"),
             helper.make_node("Sigmoid", ["a1"], ["s1"], name="sig1"),
             helper.make_node("GlobalAveragePool", ["s1"], ["g1"], name="gap"),
             helper.make_node("Flatten", ["g1"], ["f1"], name="flat"),
             helper.make_node("Gemm", ["f1", "w3", "b3"], ["d1"], name="fc", transB=1),
             helper.make_node("Softmax", ["d1"], ["y"], name="softmax", axis=1)]
    g = helper.make_graph(
        nodes, "rich", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        [init("w1", 16, 3, 3, 3), init("w2", 16, 16, 3, 3), init("w3", 16, 16), init("b3", 16)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.fixture(scope="module")
def rich(tmp_path_factory) -> Path:
    from vta.cli.main import main

    d = tmp_path_factory.mktemp("forged")
    _rich_onnx(d / "rich.onnx")
    np.save(d / "x.npy", np.random.default_rng(1).standard_normal((1, 3, 16, 16))
            .astype(np.float32))
    assert main(["compile", str(d / "rich.onnx"), "-o", str(d / "mod"), "-j", "1"]) == 0
    return d


def _leaves(node: Any, path: tuple = ()) -> Iterator[tuple]:
    """The path of every value in a JSON tree (containers included), the file list aside
    (its entries are the checksums a forger rewrites)."""
    if path:
        yield path
    if isinstance(node, dict):
        for k, v in node.items():
            if path or k != "files":
                yield from _leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, (*path, i))


def _replace(path: tuple, value: Any) -> Callable[[dict], None]:
    def edit(m: dict) -> None:
        node = m
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return edit


def _node_edits(m: dict) -> Iterator[tuple[str, Callable[[dict], None]]]:
    nodes = m["graph"]["nodes"]
    yield "nodes reversed", lambda f: f["graph"]["nodes"].reverse()
    yield "a node twice", lambda f: f["graph"]["nodes"].append(copy.deepcopy(nodes[1]))
    for k, n in enumerate(nodes):
        for a in n["attrs"]:
            yield (f"node {n['name']} without {a}",
                   lambda f, k=k, a=a: f["graph"]["nodes"][k]["attrs"].pop(a))


def _forgeries(m: dict, full: bool) -> list[tuple[str, Callable[[dict], None]]]:
    """Every field replaced by three of the values (``full``), or by one, taken in turn."""
    paths = list(_leaves(m))
    pairs = ([(p, _ALL[(k + j) % len(_ALL)]) for k, p in enumerate(paths) for j in (0, 4, 8)]
             if full else [(p, _FEW[k % len(_FEW)]) for k, p in enumerate(paths)])
    out = [(f"{'.'.join(map(str, p))} = {v!r}", _replace(p, v)) for p, v in pairs]
    return out + (list(_node_edits(m)) if full else [])


def _check_all(rich: Path, full: bool) -> None:
    m0 = json.loads((rich / "mod" / "manifest.json").read_text())
    forgeries = _forgeries(m0, full)
    assert len(forgeries) > 300  # every field of the graph and of the rest of the manifest
    refused = 0
    for what, edit in forgeries:
        with tempfile.TemporaryDirectory() as d:
            wd = Path(d)
            shutil.copytree(rich / "mod", wd / "mod")
            m = copy.deepcopy(m0)
            edit(m)
            _resign(wd / "mod", m)
            out = wd / "y.npy"
            try:
                rc = check_promise(["run", str(wd / "mod"), "--input", str(rich / "x.npy"),
                                    "--target", "fsim", "-o", str(out)], out, wd)
            except Exception as e:  # noqa: BLE001 - named with the forgery that raised it
                raise AssertionError(f"forged {what}: {type(e).__name__}: {e}") from e
            refused += rc == 2
    assert refused > len(forgeries) // 2  # most forgeries are found, not run


def test_every_forged_field_runs_or_is_one_line(rich: Path) -> None:
    _check_all(rich, full=False)


@pytest.mark.slow
def test_every_forged_field_runs_or_is_one_line_long(rich: Path) -> None:
    _check_all(rich, full=True)
