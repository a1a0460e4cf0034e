"""One backend registry (vta.runtime.backends): every reader derives its list from it, and no
other module of the kit spells a list of backend names (an AST scan of the sources)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import vta.runtime as rt
from vta.compiler import Env, build
from vta.compiler.build import TARGETS as BUILD_TARGETS
from vta.compiler.build import VTA_TARGETS
from vta.compiler.errors import CodegenError
from vta.compiler.graph.executor import TARGETS as EXECUTOR_TARGETS
from vta.isa import Config
from vta.runtime import backends
from vta.runtime.regmodel import SimulatedBoard

from .compiler.test_compiler_passes import _tutorial_gemm

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("isa", "sim", "hw", "runtime", "boards", "compiler", "tune", "cli")
REGISTRY_FILE = Path("runtime/backends.py")
NAMES = set(backends.names(aliases=True))


def literal_lists(source: str, where: str) -> list[str]:
    """The list/tuple/set literals of two or more backend names in a module's source."""
    found = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            named = [e.value for e in node.elts
                     if isinstance(e, ast.Constant) and e.value in NAMES]
            if len(named) >= 2:
                found.append(f"{where}:{node.lineno}: {', '.join(named)}")
    return found


@pytest.mark.unit
def test_no_backend_list_outside_the_registry() -> None:
    bad = []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel != REGISTRY_FILE:
                bad += literal_lists(path.read_text(), str(rel))
    assert not bad, "backend lists outside vta.runtime.backends:\n" + "\n".join(bad)


@pytest.mark.unit
@pytest.mark.parametrize(("source", "count"), [
    ('TARGETS = ("fsim", "tsim", "rtl")', 1),
    ('if t in ["cpu", "llvm"]: pass', 1),
    ('S = {"pynq", "de10-nano"}', 1),
    ('X = ("fsim", "small")', 0),       # one backend name is not a list of backends
    ('X = ("load", "store", "compute")', 0),
])
def test_scan_sees_lists(source: str, count: int) -> None:
    """The scan finds the literals it should (and only those)."""
    assert len(literal_lists(source, "x.py")) == count


@pytest.mark.unit
def test_readers_derive_from_the_registry() -> None:
    assert backends.devices() == rt.TARGETS
    assert VTA_TARGETS == rt.TARGETS and set(BUILD_TARGETS) == set(VTA_TARGETS) | {"cpu", "llvm"}
    assert set(EXECUTOR_TARGETS) == {"cpu", "fsim", "rtl", "tsim", "perf"}
    assert set(backends.programs()) == {"fsim", "rtl", "tsim", "perf"}
    assert {b.name for b in backends.REGISTRY.values() if not b.computes_data} == {"perf"}
    assert all(b.kind in backends.KINDS for b in backends.REGISTRY.values())
    assert backends.get("llvm") is backends.REGISTRY["cpu"] and backends.get("gpu") is None


@pytest.mark.sim
def test_build_runs_on_a_de10_nano(small_cfg: Config) -> None:
    """The compiler's build takes the boards it used to refuse: a de10-nano module runs on the
    DE10-Nano device (over a register-level board model) and matches numpy."""
    s, args = _tutorial_gemm(Env(small_cfg))
    board = SimulatedBoard(small_cfg, mem_size=8 << 20)
    dev = rt.open("de10-nano", small_cfg, platform=board, arena_size=1 << 20)
    f = build(s, args, "de10-nano", small_cfg, device=dev)
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, args[0].shape, dtype=np.int8)
    b = rng.integers(-128, 128, args[1].shape, dtype=np.int8)
    c = np.zeros(args[2].shape, np.int8)
    f(a, b, c)
    ref = np.einsum("bkij,ckoj->bcio", a.astype(np.int32), b.astype(np.int32)).astype(np.int8)
    np.testing.assert_array_equal(c, ref)


@pytest.mark.unit
@pytest.mark.parametrize("target", ["de10-nano", "ulx3s"])
def test_build_accepts_every_board(small_cfg: Config, target: str) -> None:
    s, args = _tutorial_gemm(Env(small_cfg))
    assert build(s, args, target, small_cfg).target == target
    with pytest.raises(CodegenError, match="unknown target 'gpu'; choose one of .*ulx3s"):
        build(s, args, "gpu", small_cfg)
