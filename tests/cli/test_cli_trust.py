"""Issue #35: a module, a log and a model are data (no code runs from them) and nothing the
user owns is removed or replaced.

Grouped by family, each case runs the real entry point (``vta.cli.main.main``) and asserts, for
bad input, what tests/cli/test_cli_bad_inputs.py asserts: exit status 2, one line on stderr
naming the problem, no traceback, and nothing written or left behind.

Device nodes are made with ``os.mknod`` in a temporary directory (a copy of /dev/null, major 1
minor 3, and of /dev/full, minor 7): no test points a code path that could rename at the real
/dev/null.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from vta.cli.main import main

from .test_cli_bad_inputs import tree, work  # noqa: F401 - the shared inputs (a fixture)

pytestmark = pytest.mark.unit

NULL, FULL = os.makedev(1, 3), os.makedev(1, 7)


def one_line_error(argv: list[str], capsys, needle: str) -> str:  # noqa: ANN001
    """Run ``argv``; assert exit 2, one line on stderr naming ``needle``, no traceback."""
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, (rc, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vta {argv[0]}"), err
    assert "error" in lines[0] and needle in lines[0], err
    assert "Traceback" not in err
    return lines[0]


# ------------------------------------------------------------------ file outputs onto nodes
#: (argv with {t} for the inputs and {o} for the output under test)
FILE_OUTPUTS: dict[str, list[str]] = {
    "asm": ["asm", "{t}/m.s", "-o", "{o}"],
    "disasm": ["disasm", "{t}/m.bin", "-o", "{o}"],
    "config-write": ["config", "write", "--preset", "small", "-o", "{o}"],
    "sim": ["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{o}"],
    "sim-stats": ["sim", "{t}/m.bin", "--dram", "{t}/d.bin", "-o", "{n}/o.bin",
                  "--stats", "{o}"],
    "run": ["run", "{t}/mod", "--input", "{t}/x.npy", "--target", "cpu", "-o", "{o}"],
    "run-report-json": ["run", "{t}/mod", "--input", "{t}/x.npy", "--target", "cpu", "-o",
                        "{n}/y.npy", "--report-json", "{o}"],
    "tune-plot": ["tune", "--plot", "{l}", "-o", "{o}"],
}


@pytest.fixture(scope="module")
def tuning_log(tmp_path_factory) -> Path:
    """A log of four measurements of one workload (what `vta tune --plot` draws)."""
    import json

    p = tmp_path_factory.mktemp("log") / "t.jsonl"
    p.write_text("".join(json.dumps({
        "workload": "w", "task": {"name": "vta.dense", "args": []},
        "config": {"index": k, "values": {}}, "tuner": "random", "trial": k, "time": 1.0,
        "version": "0", "result": {"cost": 10.0 - k, "error": None, "kind": "ok",
                                   "elapsed": 0.1}}) + "\n" for k in range(4)))
    return p


def _node(d: Path, kind: str) -> Path:
    p = d / kind
    if kind in ("null", "full"):
        os.mknod(p, stat.S_IFCHR | 0o666, NULL if kind == "null" else FULL)
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "block":
        os.mknod(p, stat.S_IFBLK | 0o600, os.makedev(7, 200))  # a loop device number
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
    return p


def _argv(case: str, t: Path, out: Path, spare: Path, log: Path) -> list[str]:
    return [a.replace("{t}", str(t)).replace("{o}", str(out)).replace("{n}", str(spare))
            .replace("{l}", str(log)) for a in FILE_OUTPUTS[case]]


@pytest.mark.parametrize("case", sorted(FILE_OUTPUTS))
def test_a_character_device_output_is_written_in_place(case: str, work: Path,  # noqa: F811
                                                       tuning_log: Path, tmp_path: Path,
                                                       capsys) -> None:
    dev = _node(tmp_path, "null")
    spare = tmp_path / "spare"
    spare.mkdir()
    capsys.readouterr()
    assert main(_argv(case, work, dev, spare, tuning_log)) == 0, capsys.readouterr().err
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and os.lstat(dev).st_rdev == NULL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "spare"]  # no temporary


@pytest.mark.parametrize("case", sorted(FILE_OUTPUTS))
def test_a_full_device_output_is_a_one_line_error(case: str, work: Path,  # noqa: F811
                                                  tuning_log: Path, tmp_path: Path,
                                                  capsys) -> None:
    dev = _node(tmp_path, "full")
    spare = tmp_path / "spare"
    spare.mkdir()
    one_line_error(_argv(case, work, dev, spare, tuning_log), capsys, "No space left on device")
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and os.lstat(dev).st_rdev == FULL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "spare"]


@pytest.mark.parametrize("kind", ["fifo", "block", "socket"])
@pytest.mark.parametrize("case", sorted(FILE_OUTPUTS))
def test_a_fifo_block_device_or_socket_output_is_refused(case: str, kind: str,
                                                         work: Path,  # noqa: F811
                                                         tuning_log: Path, tmp_path: Path,
                                                         capsys) -> None:
    node = _node(tmp_path, kind)
    spare = tmp_path / "spare"
    spare.mkdir()
    before = tree(work)
    mode = os.lstat(node).st_mode
    one_line_error(_argv(case, work, node, spare, tuning_log), capsys, "not a regular file")
    assert os.lstat(node).st_mode == mode  # still the node, never renamed over
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([kind, "spare"])
    assert not any(spare.iterdir()) and tree(work) == before


def test_a_symbolic_link_output_replaces_its_target_not_the_link(work: Path,  # noqa: F811
                                                                 tmp_path: Path) -> None:
    target = tmp_path / "real.bin"
    target.write_bytes(b"old")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    assert main(["asm", str(work / "m.s"), "-o", str(link)]) == 0
    assert link.is_symlink() and target.read_bytes() == (work / "m.bin").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.bin", "real.bin"]


def test_write_atomic_writes_a_device_in_place_and_refuses_a_fifo(tmp_path: Path) -> None:
    from vta.isa.errors import FileError
    from vta.isa.fileio import atomic_path, write_atomic

    dev = _node(tmp_path, "null")
    write_atomic(dev, b"data")
    with atomic_path(dev) as p:
        assert p == dev  # a writer that wants a name writes the device itself
    with pytest.raises(FileError, match="No space left on device"):
        write_atomic(_node(tmp_path, "full"), b"data")
    with pytest.raises(FileError, match="is a FIFO"):
        write_atomic(_node(tmp_path, "fifo"), b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "full", "null"]
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)


# ------------------------------------------------------------------ a module is data
def _module(work: Path, tmp_path: Path, name: str = "m") -> Path:  # noqa: F811
    import shutil

    d = tmp_path / name
    shutil.copytree(work / "mod", d)
    return d


def _resign(d: Path, manifest: dict | None = None) -> None:
    """Rewrite the per-file checksums in the manifest and the digest, as a forger would: the
    checksums hold, what the module says is checked."""
    import hashlib
    import json

    from vta.compiler.graph.manifest import VERSION
    from vta.isa.digest import write_digest

    m = manifest if manifest is not None else json.loads((d / "manifest.json").read_text())
    if manifest is None:
        for rel in m["files"]:
            data = (d / rel).read_bytes()
            m["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (d / "manifest.json").write_text(json.dumps(m, indent=1) + "\n")
    write_digest(d, "vta-module", VERSION)


def _run_argv(d: Path, work: Path) -> list[str]:  # noqa: F811
    return ["run", str(d), "--input", str(work / "x.npy"), "--target", "fsim", "-o",
            str(d.parent / "y.npy")]


def _snapshot(d: Path) -> dict[str, bytes | int]:
    """:func:`tree` of ``d`` that opens regular files only (a FIFO is recorded by its mode:
    reading it would wait for a writer)."""
    out: dict[str, bytes | int] = {}
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            p = Path(root, name)
            mode = os.lstat(p).st_mode
            out[str(p.relative_to(d))] = p.read_bytes() if stat.S_ISREG(mode) else mode
    return out


def _refused(d: Path, work: Path, capsys, needle: str) -> str:  # noqa: ANN001, F811
    before = _snapshot(d.parent)
    line = one_line_error(_run_argv(d, work), capsys, needle)
    assert "recompile" in line, line
    assert _snapshot(d.parent) == before  # no output, nothing changed
    return line


def test_the_digest_covers_every_file_the_manifest_included(work: Path) -> None:  # noqa: F811
    import hashlib
    import json

    mod = work / "mod"
    dig = json.loads((mod / "digest.json").read_text())
    files = sorted(p.relative_to(mod).as_posix() for p in mod.rglob("*") if p.is_file())
    assert "manifest.json" in files and "digest.json" in files
    lines = "".join(f"{hashlib.sha256((mod / f).read_bytes()).hexdigest()}  {f}\n"
                    for f in files if f != "digest.json")
    assert dig == {"kind": "vta-module", "version": 4,
                   "sha256": hashlib.sha256(lines.encode()).hexdigest()}
    assert json.loads((mod / "manifest.json").read_text())["version"] == 4


def test_a_changed_manifest_field_is_a_digest_error(work: Path, tmp_path: Path,  # noqa: F811
                                                    capsys) -> None:
    import json

    d = _module(work, tmp_path)
    m = json.loads((d / "manifest.json").read_text())
    name = next(iter(m["quantization"]["scales"]))
    m["quantization"]["scales"][name] *= 2  # silently different outputs, before
    (d / "manifest.json").write_text(json.dumps(m, indent=1) + "\n")
    _refused(d, work, capsys, "manifest.json was modified")


@pytest.mark.parametrize("case", ["no-digest", "old-digest", "format-3", "unlisted-file",
                                  "symlink", "fifo-inside", "digest-of-another-kind"])
def test_a_module_that_does_not_verify_is_refused(case: str, work: Path,  # noqa: F811
                                                  tmp_path: Path, capsys) -> None:
    import json

    d = _module(work, tmp_path)
    if case == "no-digest":  # a module of format 2 (before the digest)
        m = json.loads((d / "manifest.json").read_text())
        (d / "manifest.json").write_text(json.dumps({**m, "version": 2}))
        (d / "digest.json").unlink()
        needle = "older version of the kit"
    elif case == "old-digest":
        dig = json.loads((d / "digest.json").read_text())
        (d / "digest.json").write_text(json.dumps({**dig, "version": 2}))
        needle = "version 2"
    elif case == "format-3":  # digest and manifest of format 3 (before the options record)
        m = json.loads((d / "manifest.json").read_text())
        m = {**m, "version": 3, "board": m["options"].get("board")}
        del m["options"]
        (d / "manifest.json").write_text(json.dumps(m, indent=1) + "\n")
        from vta.isa.digest import write_digest

        write_digest(d, "vta-module", 3)
        needle = "vta-module version 3, this kit reads version 4; recompile it"
    elif case == "unlisted-file":
        (d / "kernels" / "extra.bin").write_bytes(b"\0" * 16)
        needle = "kernels/extra.bin is not part of the module"
    elif case == "symlink":
        outside = tmp_path / "other_params.npz"
        (d / "params.npz").rename(outside)
        (d / "params.npz").symlink_to(outside)  # same bytes: followed, the digest holds
        needle = "params.npz is a symbolic link"
    elif case == "fifo-inside":  # never opened: hashing it would wait for a writer forever
        (d / "const.bin").unlink()
        os.mkfifo(d / "const.bin")
        needle = "const.bin is not a regular file"
    else:
        (d / "digest.json").write_text(json.dumps({"kind": "vta-explore", "version": 1,
                                                   "sha256": "0" * 64}))
        needle = "not the digest of a vta-module"
    _refused(d, work, capsys, needle)


#: manifest paths that leave the module (each re-signed, so that only the path check stops it)
ESCAPES = {
    "params-parent": ("params", "../other_params.npz"),
    "const-absolute": ("const_image", "{abs}"),
    "plan-dot-dot-inside": ("memory_plan", "kernels/../plan.json"),
    "kernel-program-outside": ("kernels.*.program", "../other.bin"),
    "llvm-ir-outside": ("host_kernels.0.llvm_ir", "../../other.ll"),
    "files-key-escaping": ("files", "../../etc/passwd"),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_a_manifest_path_outside_the_module_is_refused(case: str, work: Path,  # noqa: F811
                                                       tmp_path: Path, capsys) -> None:
    import json
    import shutil

    d = _module(work, tmp_path)
    shutil.copyfile(d / "params.npz", tmp_path / "other_params.npz")
    shutil.copyfile(d / "const.bin", tmp_path / "other.bin")
    m = json.loads((d / "manifest.json").read_text())
    field, value = ESCAPES[case]
    value = value.replace("{abs}", str(tmp_path / "other.bin"))
    if field == "files":
        m["files"][value] = m["files"]["const.bin"]
        needle = "file list"
    elif field.startswith("kernels."):
        next(iter(m["kernels"].values()))["program"] = value
        needle = "not a plain relative name"
    elif field.startswith("host_kernels."):
        m["host_kernels"][0]["llvm_ir"] = value
        needle = "not a plain relative name"
    else:
        m[field] = value
        needle = "not a plain relative name" if case != "const-absolute" else "const_image"
    _resign(d, m)
    _refused(d, work, capsys, needle)


def _forged_ll(d: Path, edit) -> None:  # noqa: ANN001
    """Edit the module's first host kernel and re-sign the module."""
    ll = sorted((d / "host").iterdir())[0]
    ll.write_text(edit(ll.read_text()))
    _resign(d)


def test_a_host_kernel_calling_system_never_runs(work: Path, tmp_path: Path,  # noqa: F811
                                                 capsys) -> None:
    import llvmlite.binding as llvm

    d = _module(work, tmp_path)
    marker = tmp_path / "marker"
    cmd = f"touch {marker}"

    def evil(text: str) -> str:
        head, body = text.split("\n", 1)
        body = body.replace("entry:\n", "entry:\n  %vta_evil = call i32 @system(ptr @.cmd)\n",
                            1)
        return (f"{head}\n{body}\n@.cmd = private constant [{len(cmd) + 1} x i8] "
                f"c\"{cmd}\\00\"\ndeclare i32 @system(ptr)\n")

    _forged_ll(d, evil)
    ll = sorted((d / "host").iterdir())[0].read_text()
    assert "@system" in ll
    llvm.parse_assembly(ll.split("\n", 1)[1]).verify()  # a valid program that would run
    _refused(d, work, capsys, "is not the LLVM IR this kit emits")
    assert not marker.exists()


def test_a_wrong_out_shape_in_a_kernel_header_is_an_error(work: Path,  # noqa: F811
                                                          tmp_path: Path, capsys) -> None:
    import json

    d = _module(work, tmp_path)

    def grow(text: str) -> str:
        head, body = text.split("\n", 1)
        sig = json.loads(head.split(" ", 2)[2])
        sig["out_shape"] = [64, 3, 160, 160]  # a heap overflow, before
        return f"; vta-host-kernel {json.dumps(sig)}\n{body}"

    _forged_ll(d, grow)
    _refused(d, work, capsys, "is not the LLVM IR this kit emits")


def test_a_kernel_regenerated_from_forged_shapes_checks_its_arrays(work: Path,  # noqa: F811
                                                                   tmp_path: Path,
                                                                   capsys) -> None:
    """Shapes forged consistently (the manifest's and a kernel the kit emits for them): the
    load refuses them (a VTA layer's arena buffer cannot hold the larger tensor), and the
    kernel, which is the kit's, refuses arrays of other sizes instead of overrunning them."""
    import json

    import numpy as np
    from vta.compiler.graph.errors import ModuleError
    from vta.compiler.graph.host import host_kernel
    from vta.compiler.graph.module import load_module

    d = _module(work, tmp_path)
    mod = load_module(d)
    m = json.loads((d / "manifest.json").read_text())
    rec = m["host_kernels"][0]
    n = next(x for x in mod.graph.nodes if x.name == rec["node"])
    shapes = dict(mod.shapes)
    for t in (n.inputs[0], n.outputs[0]):  # an element-wise kernel: both twice as large
        shapes[t] = (2 * shapes[t][0], *shapes[t][1:])
        m["shapes"][t] = list(shapes[t])
    forged = host_kernel(n, shapes, mod.graph.params)
    (d / rec["llvm_ir"]).write_text(forged.text())
    (d / "manifest.json").write_text(json.dumps(m, indent=1) + "\n")
    _resign(d)
    _refused(d, work, capsys, "does not fit its arena buffer")
    x = np.zeros(mod.shapes[n.inputs[0]], np.float32)  # the size the true graph gives
    with pytest.raises(ModuleError, match="the module's shapes are not its graph's"):
        forged([x])


# ------------------------------------------------------------------ a tuning log is data
def test_a_log_record_naming_a_module_never_imports_it(tmp_path: Path, monkeypatch,
                                                       capsys) -> None:
    """A record's task names a template of the kit's registry; its "module" (as earlier
    versions wrote) is never imported: not ``this`` (the Zen of Python), not a file on the
    path. ``vta tune --log`` reads every record of the log (transfer)."""
    import json
    import sys

    from vta.tune import Task, TaskError

    evil = tmp_path / "evil_template.py"
    marker = tmp_path / "imported"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for mod in ("this", "evil_template"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    record = {"config": {"index": 0, "values": {}}, "tuner": "xgb", "trial": 1, "time": 1.0,
              "version": "0", "result": {"cost": 1.0, "error": None, "kind": "ok",
                                         "elapsed": 0.1}}
    log = tmp_path / "t.jsonl"
    log.write_text("".join(json.dumps({**record, "workload": f"w{k}", "task": task}) + "\n"
                           for k, task in enumerate([
                               {"name": "zen", "args": [], "module": "this"},
                               {"name": "evil", "args": [], "module": "evil_template"},
                               {"name": "vta.dense", "args": [], "module": "evil_template"}])))
    capsys.readouterr()
    rc = main(["tune", "--workload", "dense:N=1,K=64,M=64", "--trials", "2", "--batch", "2",
               "--log", str(log)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "Beautiful is better than ugly" not in out + err
    assert "this" not in sys.modules and "evil_template" not in sys.modules
    assert not marker.exists()
    for task in ({"name": "zen", "args": [], "module": "this"},
                 {"name": "evil", "args": [], "module": "evil_template"}):
        with pytest.raises(TaskError, match="unknown tuning template"):
            Task.from_json(task)
    assert "this" not in sys.modules and not marker.exists()


# ------------------------------------------------------------------ -o never takes user files
def _users_dir(d: Path, stray: str) -> Path:
    """A directory of the user's with a stray file the kit's outputs also have."""
    d.mkdir()
    (d / stray).write_text("{}\n")
    (d / "thesis.tex").write_text("\\documentclass{article}\n")
    (d / "src").mkdir()
    (d / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    return d


@pytest.mark.parametrize("stray", ["manifest.json", "digest.json"])
def test_compile_onto_a_stray_manifest_directory_keeps_the_users_files(
        stray: str, work: Path, tmp_path: Path, capsys) -> None:  # noqa: F811
    proj = _users_dir(tmp_path / "proj", stray)
    before = tree(tmp_path)
    one_line_error(["compile", str(work / "tiny.onnx"), "-o", str(proj)], capsys,
                   "neither a compiled module nor empty")
    assert tree(tmp_path) == before


def test_recompiling_into_ones_own_module_needs_no_flag(work: Path, tmp_path: Path,  # noqa: F811
                                                        capsys) -> None:
    mod = _module(work, tmp_path)
    capsys.readouterr()
    assert main(["compile", str(work / "tiny.onnx"), "-o", str(mod)]) == 0
    assert main(_run_argv(mod, work)) == 0
    # a file of the user's added: no longer wholly the kit's output, and it survives
    (mod / "notes.txt").write_text("mine\n")
    before = tree(tmp_path)
    one_line_error(["compile", str(work / "tiny.onnx"), "-o", str(mod)], capsys,
                   "neither a compiled module nor empty")
    assert tree(tmp_path) == before


def test_explore_onto_a_stray_report_directory_keeps_the_users_files(
        work: Path, tmp_path: Path, capsys, monkeypatch) -> None:  # noqa: F811
    from vta.tune.autovta import network

    def started(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the exploration started: the output was not checked before")

    monkeypatch.setattr(network, "load_network", started)
    proj = _users_dir(tmp_path / "proj", "explore.json")
    before = tree(tmp_path)
    one_line_error(["explore", "--board", "pynq-z1", "--model", str(work / "tiny.onnx"), "-o",
                    str(proj)], capsys, "neither an exploration output nor empty")
    assert tree(tmp_path) == before


def test_an_exploration_output_is_replaceable_only_while_its_digest_holds(
        tmp_path: Path) -> None:
    from vta.isa.digest import write_digest
    from vta.tune.autovta.report import KIND, VERSION, is_explore_output_or_empty

    d = tmp_path / "exp"
    d.mkdir()
    assert is_explore_output_or_empty(d)
    (d / "explore.json").write_text("{}\n")
    (d / "pareto.png").write_bytes(b"\x89PNG")
    assert not is_explore_output_or_empty(d)  # no digest: not known to be the kit's
    write_digest(d, KIND, VERSION)
    assert is_explore_output_or_empty(d)
    (d / "thesis.tex").write_text("x")
    assert not is_explore_output_or_empty(d)


def test_build_onto_a_users_directory_is_refused_before_the_tools(
        tmp_path: Path, capsys, monkeypatch) -> None:
    from vta.boards import openflow

    def started(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the build started: the output was not checked before")

    monkeypatch.setattr(openflow, "_build_in", started)
    proj = _users_dir(tmp_path / "proj", "vta_ulx3s.bit")
    before = tree(tmp_path)
    one_line_error(["build", "--board", "ulx3s-85f", "--preset", "small", "-q", "-o",
                    str(proj)], capsys, "neither a board build nor empty")
    assert tree(tmp_path) == before
