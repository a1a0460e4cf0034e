"""Fuzzing the promise on bad input (issue #35): mutants of a valid ONNX model, a compiled
module, a tuning log and an assembler file go through the CLI, which must either succeed or exit
2 with one line on stderr naming a problem: no traceback, no other status, no hang, and nothing
written on failure.

The mutations are structured (an attribute, a dimension, a weight value, a JSON field, a
token) and raw (bytes flipped, cut, inserted); integer values stay small enough that a mutant
that is valid compiles in a second or two (the huge values have their own cases in
tests/cli/test_cli_untrusted_inputs.py). The default run takes about a minute in all; the
``slow`` variants run ten times the examples. Under ``CI=true`` the examples are derandomized
and no example database is kept. A module's mutants are of two kinds: damaged (a file's bytes
changed, the digest left as it was: refused before anything is read) and forged (a manifest
field or a host kernel's IR changed and every checksum rewritten, as a forger would: what the
module then says is checked, and it runs or is refused in one line).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_cli_bad_inputs import EXAMPLES, tiny_onnx
from .test_cli_trust import _resign
from .test_cli_untrusted_inputs import run_main

pytestmark = pytest.mark.unit

_CI = os.environ.get("CI", "").lower() == "true"


def fuzz_settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=_CI,
                    database=None if _CI else settings.default.database,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Path:
    """The valid inputs mutated: tiny.onnx, a tuning log of its conv2 workload (two records),
    examples/matmul.s."""
    from vta.isa import Config
    from vta.tune import vta_tasks  # noqa: F401 - registers the vta.* templates
    from vta.tune.log import LogRecord
    from vta.tune.task import Task

    d = tmp_path_factory.mktemp("seeds")
    tiny_onnx(d / "tiny.onnx")
    task = Task.create("vta.conv2d", (1, 1, 16, 16, 1, 3, 3, 1, 1, 1, 1, Config().params))
    valid = [i for i in range(len(task.space)) if task.space.is_valid(i)][:2]
    lines = [json.dumps(LogRecord(task.key, task.to_json(), task.space.get(i).to_json(),
                                  1000.0 - k, None, "ok", 0.1).to_json())
             for k, i in enumerate(valid)]
    (d / "log.jsonl").write_text("\n".join(lines) + "\n")
    (d / "m.s").write_text((EXAMPLES / "matmul.s").read_text())
    from vta.cli.main import main

    np.save(d / "x.npy", np.random.default_rng(0).standard_normal((1, 3, 16, 16))
            .astype(np.float32))
    assert main(["compile", str(d / "tiny.onnx"), "-o", str(d / "mod"), "-j", "1"]) == 0
    return d


# ------------------------------------------------------------------------ the promise
def check_promise(argv: list[str], out: Path, workdir: Path) -> int:
    """Run ``vta argv``: status 0, or 2 with one error line, no traceback, and then neither
    ``out`` nor any temporary file beside it."""
    import contextlib
    import io

    before = sorted(p.name for p in workdir.iterdir())
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = run_main(argv, timeout=180.0)
    text = err.getvalue()
    assert "Traceback" not in text, text
    if rc == 0:
        return rc
    assert rc == 2, (rc, text)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"vta {argv[0]}: error: "), text
    assert not out.exists(), f"{out} left behind after: {lines[0]}"
    assert sorted(p.name for p in workdir.iterdir()) == before, lines[0]
    return rc


def _raw(data: bytes, draw: Callable) -> bytes:
    """``data`` with a few bytes flipped, a cut, or bytes inserted."""
    kind = draw(st.sampled_from(["flip", "cut", "insert"]))
    pos = draw(st.integers(0, max(len(data) - 1, 0)))
    if kind == "cut":
        return data[:pos]
    if kind == "insert":
        return data[:pos] + draw(st.binary(min_size=1, max_size=16)) + data[pos:]
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 8))):
        b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 255))
    return bytes(b)


# ------------------------------------------------------------------------ ONNX models
_SMALL = st.integers(-3, 40)


def _mutate_model(raw: bytes, draw: Callable) -> bytes:
    import onnx
    from onnx import helper, numpy_helper

    if draw(st.booleans()):
        return _raw(raw, draw)
    m = onnx.load_model_from_string(raw)
    g = m.graph
    what = draw(st.sampled_from(["attr", "weight-value", "weight-dims", "input-dims",
                                 "drop-node", "rewire"]))
    if what == "attr":
        node = g.node[draw(st.sampled_from([0, 2]))]
        name = draw(st.sampled_from(["pads", "strides", "dilations", "group", "kernel_shape"]))
        n = {"pads": 4, "group": 0}.get(name, 2)
        n = draw(st.sampled_from([n, n, 1, 3])) if n else 0
        value = draw(_SMALL) if name == "group" else draw(st.lists(_SMALL, min_size=n,
                                                                  max_size=n))
        keep = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend([*keep, helper.make_attribute(name, value)])
    elif what in ("weight-value", "weight-dims"):
        k = draw(st.sampled_from([0, 1]))
        w = numpy_helper.to_array(g.initializer[k]).copy()
        if what == "weight-value":
            w.reshape(-1)[draw(st.integers(0, w.size - 1))] = draw(st.sampled_from(
                [np.nan, np.inf, -np.inf, 3e38, -1e30, 0.0]))
        else:
            shape = list(w.shape)
            shape[draw(st.integers(0, 3))] = draw(st.integers(0, 40))
            w = np.resize(w, shape).astype(np.float32)
        g.initializer[k].CopyFrom(numpy_helper.from_array(w, g.initializer[k].name))
    elif what == "input-dims":
        dim = g.input[0].type.tensor_type.shape.dim[draw(st.integers(0, 3))]
        dim.dim_value = draw(st.integers(0, 64))
    elif what == "drop-node":
        del g.node[draw(st.integers(0, len(g.node) - 1))]
    else:
        node = g.node[draw(st.integers(0, len(g.node) - 1))]
        node.input[0] = draw(st.sampled_from(["x", "c1", "r1", "y", "w1", "w2", "nosuch"]))
    return m.SerializeToString()


def _fuzz_model(seeds: Path, data: st.DataObject) -> None:
    mutant = _mutate_model((seeds / "tiny.onnx").read_bytes(), data.draw)
    with tempfile.TemporaryDirectory() as d:
        wd = Path(d)
        (wd / "m.onnx").write_bytes(mutant)
        out = wd / "mod"
        check_promise(["compile", str(wd / "m.onnx"), "-o", str(out), "-j", "1"], out, wd)


@fuzz_settings(12)
@given(data=st.data())
def test_fuzz_onnx_model(seeds: Path, data: st.DataObject) -> None:
    _fuzz_model(seeds, data)


@pytest.mark.slow
@fuzz_settings(120)
@given(data=st.data())
def test_fuzz_onnx_model_long(seeds: Path, data: st.DataObject) -> None:
    _fuzz_model(seeds, data)


# ------------------------------------------------------------------------ compiled modules
def _mutate_manifest(m: dict, draw: Callable) -> None:
    """One field of the manifest (at any depth) replaced by an arbitrary JSON value."""
    node: Any = m
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return
        key = draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, (dict, list)) and child and draw(st.booleans()):
            node = child
            continue
        node[key] = draw(_JSON)
        return


def _fuzz_module(seeds: Path, data: st.DataObject) -> None:
    import shutil

    with tempfile.TemporaryDirectory() as d:
        wd = Path(d)
        mod = wd / "mod"
        shutil.copytree(seeds / "mod", mod)
        kind = data.draw(st.sampled_from(["damaged", "forged manifest", "forged kernel"]))
        if kind == "damaged":
            f = data.draw(st.sampled_from(sorted(p for p in mod.rglob("*") if p.is_file())))
            f.write_bytes(_raw(f.read_bytes(), data.draw))
        elif kind == "forged manifest":
            m = json.loads((mod / "manifest.json").read_text())
            _mutate_manifest(m, data.draw)
            _resign(mod, m)
        else:
            lls = sorted(mod.rglob("*.ll"))
            if not lls:
                return
            f = data.draw(st.sampled_from(lls))
            f.write_bytes(_raw(f.read_bytes(), data.draw))
            _resign(mod)
        out = wd / "y.npy"
        check_promise(["run", str(mod), "--input", str(seeds / "x.npy"), "--target", "fsim",
                       "-o", str(out)], out, wd)


def test_a_forged_field_name_with_line_breaks_is_still_one_line(seeds: Path) -> None:
    """The fuzzer's first find: a manifest key holding a line break and a control character
    was echoed into the error, which then took two lines."""
    import shutil

    with tempfile.TemporaryDirectory() as d:
        wd = Path(d)
        shutil.copytree(seeds / "mod", wd / "mod")
        m = json.loads((wd / "mod" / "manifest.json").read_text())
        m["inputs"] = {"\x1e\nx": None}
        _resign(wd / "mod", m)
        assert check_promise(["run", str(wd / "mod"), "--input", str(seeds / "x.npy"), "-o",
                              str(wd / "y.npy")], wd / "y.npy", wd) == 2


@fuzz_settings(15)
@given(data=st.data())
def test_fuzz_module(seeds: Path, data: st.DataObject) -> None:
    _fuzz_module(seeds, data)


@pytest.mark.slow
@fuzz_settings(150)
@given(data=st.data())
def test_fuzz_module_long(seeds: Path, data: st.DataObject) -> None:
    _fuzz_module(seeds, data)


# ------------------------------------------------------------------------ tuning logs
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) |
                     st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=3) |
                     st.dictionaries(st.text(max_size=6), kids, max_size=3), max_leaves=8)


def _mutate_record(rec: dict, draw: Callable) -> None:
    """Replace, delete or add one field somewhere in the record."""
    node = rec
    while True:
        keys = list(node)
        key = draw(st.sampled_from(keys))
        if isinstance(node[key], dict) and node[key] and draw(st.booleans()):
            node = node[key]
            continue
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            node[key] = draw(_JSON)
        elif action == "delete":
            del node[key]
        else:
            node[draw(st.sampled_from(["bogus", "tile_h", "values", "cost"]))] = draw(_JSON)
        return


def _fuzz_log(seeds: Path, data: st.DataObject) -> None:
    lines = (seeds / "log.jsonl").read_text().splitlines()
    if data.draw(st.booleans()):
        k = data.draw(st.integers(0, len(lines) - 1))
        rec = json.loads(lines[k])
        _mutate_record(rec, data.draw)
        lines[k] = json.dumps(rec)
        text = ("\n".join(lines) + "\n").encode()
    else:
        text = _raw(("\n".join(lines) + "\n").encode(), data.draw)
    with tempfile.TemporaryDirectory() as d:
        wd = Path(d)
        (wd / "t.jsonl").write_bytes(text)
        out = wd / "mod"
        check_promise(["compile", str(seeds / "tiny.onnx"), "-o", str(out), "-j", "1",
                       "--tuning-log", str(wd / "t.jsonl")], out, wd)


@fuzz_settings(12)
@given(data=st.data())
def test_fuzz_tuning_log(seeds: Path, data: st.DataObject) -> None:
    _fuzz_log(seeds, data)


@pytest.mark.slow
@fuzz_settings(120)
@given(data=st.data())
def test_fuzz_tuning_log_long(seeds: Path, data: st.DataObject) -> None:
    _fuzz_log(seeds, data)


# ------------------------------------------------------------------------ assembler files
_TOKENS = st.sampled_from(["load.inp", "gemm", "alu", "store", "finish", "reset", "x_size=",
                           "iter_out=16383", "sram_base=-1", "dram_base=99999999999",
                           "uop_end=0", "push_next", "pop_prev", "=", "#", "\t", "{", "\\x00",
                           "imm=70000", "alu.max", "1e9", ".word"])


def _fuzz_asm(seeds: Path, data: st.DataObject) -> None:
    text = (seeds / "m.s").read_text()
    if data.draw(st.booleans()):
        words = text.split(" ")
        for _ in range(data.draw(st.integers(1, 4))):
            words[data.draw(st.integers(0, len(words) - 1))] = data.draw(
                _TOKENS | st.integers(-2**33, 2**33).map(str) | st.text(max_size=6))
        raw = " ".join(words).encode("utf-8", "surrogatepass")
    else:
        raw = _raw(text.encode(), data.draw)
    with tempfile.TemporaryDirectory() as d:
        wd = Path(d)
        (wd / "m.s").write_bytes(raw)
        out = wd / "m.bin"
        if check_promise(["asm", str(wd / "m.s"), "-o", str(out)], out, wd) == 0:
            check_promise(["disasm", str(out), "-o", str(wd / "m.txt")], wd / "m.txt", wd)


@fuzz_settings(150)
@given(data=st.data())
def test_fuzz_asm(seeds: Path, data: st.DataObject) -> None:
    _fuzz_asm(seeds, data)


@pytest.mark.slow
@fuzz_settings(1500)
@given(data=st.data())
def test_fuzz_asm_long(seeds: Path, data: st.DataObject) -> None:
    _fuzz_asm(seeds, data)
