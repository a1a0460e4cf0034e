"""A compiled module carries a sha256 and a size per file; a damaged module is a one-line error
naming the file (it used to run: a truncated const.bin gave exit 0 and all-zero outputs)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from vta.cli.main import main

from .conftest import onnx_model

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory) -> Path:
    """A small conv + dense network compiled for the default config, and an input."""
    d = tmp_path_factory.mktemp("mod")
    rng = np.random.default_rng(0)
    inits = {"w": rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.2,
             "b": rng.standard_normal(32).astype(np.float32) * 0.1,
             "fw": rng.standard_normal((10, 32 * 8 * 8)).astype(np.float32) * 0.05,
             "fb": np.zeros(10, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    model = onnx_model(nodes, {"x": [1, 16, 8, 8]}, {"y": [1, 10]}, inits)
    (d / "m.onnx").write_bytes(model.SerializeToString())
    np.save(d / "x.npy", rng.standard_normal((1, 16, 8, 8)).astype(np.float32))
    assert main(["compile", str(d / "m.onnx"), "-o", str(d / "mod")]) == 0
    return d


def _run(d: Path, mod: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["run", str(mod), "--input", str(d / "x.npy"), "--target", "fsim", "-o",
               str(mod.parent / f"{mod.name}.y.npy")])
    return rc, capsys.readouterr().err.strip()


def test_manifest_lists_every_file_with_its_sha256(module_dir, capsys) -> None:
    mod = module_dir / "mod"
    files = json.loads((mod / "manifest.json").read_text())["files"]
    on_disk = {p.relative_to(mod).as_posix() for p in mod.rglob("*") if p.is_file()}
    assert set(files) == on_disk - {"manifest.json", "digest.json"}
    assert {"const.bin", "params.npz", "plan.json"} <= set(files)
    assert any(k.startswith("kernels/") for k in files)
    for rel, want in files.items():
        data = (mod / rel).read_bytes()
        assert want == {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    rc, err = _run(module_dir, mod, capsys)
    assert rc == 0, err
    assert np.abs(np.load(module_dir / "mod.y.npy")).max() > 0


def _damaged(module_dir: Path, name: str) -> Path:
    d = module_dir / name
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(module_dir / "mod", d)
    return d


@pytest.mark.parametrize("damage", ["truncate-const", "edit-kernel", "remove-params",
                                    "grow-plan"])
def test_damaged_module_is_a_one_line_error_naming_the_file(module_dir, damage, capsys) -> None:
    d = _damaged(module_dir, damage)
    if damage == "truncate-const":
        rel = "const.bin"
        data = (d / rel).read_bytes()
        (d / rel).write_bytes(data[:len(data) // 2])
        why = "truncated"
    elif damage == "edit-kernel":
        rel = sorted(p.relative_to(d).as_posix() for p in (d / "kernels").iterdir())[0]
        data = bytearray((d / rel).read_bytes())
        data[20] ^= 0x01  # same size, one bit flipped
        (d / rel).write_bytes(bytes(data))
        why = "modified"
    elif damage == "remove-params":
        rel = "params.npz"
        (d / rel).unlink()
        why = "missing"
    else:
        rel = "plan.json"
        (d / rel).write_text((d / rel).read_text() + " ")
        why = "damaged"
    rc, err = _run(module_dir, d, capsys)
    assert rc == 2 and "\n" not in err and err.startswith("vta run: error: "), err
    assert f"file {rel} is" in err and why in err and "recompile" in err
    assert not (module_dir / f"{damage}.y.npy").exists()


def test_manifest_round_trips_through_its_records(module_dir) -> None:
    from vta.compiler.graph.manifest import ModuleManifest
    from vta.compiler.graph.module import load_module

    text = (module_dir / "mod" / "manifest.json").read_text()
    man = ModuleManifest.from_json(json.loads(text))
    assert json.dumps(man.to_json(), indent=1) + "\n" == text  # the file, byte for byte
    assert ModuleManifest.from_json(json.loads(json.dumps(man.to_json()))) == man
    loaded = load_module(module_dir / "mod")
    assert man.config == loaded.cfg and set(man.kernels) == set(loaded.kernels)
    for name, rec in man.kernels.items():
        kern = loaded.kernels[name]
        assert (module_dir / "mod" / rec.program).read_bytes() == kern.program
        assert rec.insns == len(kern.program) // 16 and rec.knob_source == kern.knob_source
    assert [q.node for q in man.quantization.layers] == [q.node for q in loaded.layers]


def _edited(module_dir: Path, name: str, edit) -> Path:  # noqa: ANN001
    """A copy of the module with ``edit`` applied to its manifest and a new digest written
    (as a forger would: the digest holds, the manifest's fields are checked)."""
    from vta.compiler.graph.manifest import VERSION
    from vta.isa.digest import write_digest

    d = _damaged(module_dir, name)
    m = json.loads((d / "manifest.json").read_text())
    edit(m)
    (d / "manifest.json").write_text(json.dumps(m))
    write_digest(d, "vta-module", VERSION)
    return d


@pytest.mark.parametrize("case", ["missing-macs", "mistyped-knobs", "mistyped-config",
                                  "mistyped-options", "old-version", "unknown-field"])
def test_malformed_manifest_is_a_one_line_error_naming_the_field(module_dir, case,
                                                                 capsys) -> None:
    def edit(m: dict) -> None:
        kern = next(iter(m["kernels"].values()))
        if case == "missing-macs":
            del kern["macs"]
        elif case == "mistyped-knobs":
            kern["knobs"] = {"tile_h": "two"}
        elif case == "mistyped-config":
            m["config"] = [3, 3, 5]
        elif case == "mistyped-options":
            m["options"]["threads"] = "yes"
        elif case == "old-version":
            m["version"] = 1
        else:
            m["kernels_v3"] = {}

    name = next(iter(json.loads((module_dir / "mod" / "manifest.json").read_text())["kernels"]))
    want = {"missing-macs": f"field kernels.{name}.macs is missing",
            "mistyped-knobs": f"field kernels.{name}.knobs.tile_h must be an integer, not 'two'",
            "mistyped-config": "field config must be a JSON object, not [3, 3, 5]",
            "mistyped-options": "field options.threads must be true or false, not 'yes'",
            "old-version": "not a vta-module version 4 manifest",
            "unknown-field": "field kernels_v3 is not expected"}[case]
    d = _edited(module_dir, case, edit)
    rc, err = _run(module_dir, d, capsys)
    assert rc == 2 and "\n" not in err and err.startswith("vta run: error: "), err
    assert "manifest.json" in err and want in err and "recompile" in err, err


def test_run_report_json_round_trip(module_dir, tmp_path, capsys) -> None:
    from vta.compiler.graph.errors import InputError
    from vta.compiler.graph.executor import LayerRecord, RunReport

    out = tmp_path / "report.json"
    capsys.readouterr()
    assert main(["run", str(module_dir / "mod"), "--input", str(module_dir / "x.npy"),
                 "--target", "perf", "--report-json", str(out)]) == 0
    raw = json.loads(out.read_text())
    rep = RunReport.from_json(raw)
    assert rep.target == "perf" and rep.to_json() == raw
    man = json.loads((module_dir / "mod" / "manifest.json").read_text())
    on_vta = {r.node: r for r in rep.layers if r.where == "perf"}
    assert set(on_vta) == set(man["kernels"])
    for name, r in on_vta.items():  # perf counts each layer's cycles; the module recorded them
        assert r.cycles == pytest.approx(man["kernels"][name]["cycles"], rel=0.01)
        assert r.macs == man["kernels"][name]["macs"]
    assert RunReport.from_json(json.loads(json.dumps(rep.to_json()))) == rep
    rec = LayerRecord("c", "QConv", "fsim", 10, 0.5)
    assert LayerRecord.from_json(rec.to_json()) == rec and "cycles" not in rec.to_json()
    with pytest.raises(InputError, match=r"run report: field layers\[0\]\.macs must be an "
                                         r"integer, not '10'$"):
        RunReport.from_json({"target": "fsim", "layers": [{**rec.to_json(), "macs": "10"}]})
    with pytest.raises(InputError, match="run report: field target is missing"):
        RunReport.from_json({"layers": []})
