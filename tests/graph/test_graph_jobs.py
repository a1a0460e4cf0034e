"""``vta compile --jobs N`` / ``compile_graph(jobs=N)``: the default-knob searches and the
recordings in N forked workers give the same module, byte for byte, as in-process (N=1); each
knob cache entry is searched once; bad N is a one-line error; Ctrl-C (or SIGTERM) stops the
compile and its workers at once. The search accounting compiles with ``fuse=False``: a layer
with a residual add fused in is timed (its conv's knobs, shrunk when they do not fit; never
searched) by its own worker job, ``_fused_choice`` (tests/graph/test_graph_fuse.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest
from vta.cli.cmd_compile import search_progress
from vta.cli.main import main
from vta.compiler.graph import module as gm
from vta.compiler.graph import zoo
from vta.compiler.graph.errors import InputError
from vta.compiler.graph.options import CompileOptions
from vta.compiler.topi import defaults
from vta.isa import Config

from .conftest import SMALL


def _files(d: Path) -> dict[str, bytes]:
    """Every file of a module directory; the manifest without its compile time, and without
    the digest (one sha256 of the other files, the compile time included)."""
    out = {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
           if p.is_file()}
    assert json.loads(out.pop("digest.json"))["kind"] == "vta-module"
    man = json.loads(out.pop("manifest.json"))
    assert man.pop("compile_seconds") > 0
    out["manifest.json"] = json.dumps(man, sort_keys=True).encode()
    return out


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v1", "dcgan"])
def test_module_is_the_same_for_every_jobs(name, tmp_path, monkeypatch, capsys) -> None:
    """Cold knob caches with --jobs 1 and --jobs 2, then a warm one with --jobs 2: the same
    files (programs, constants, plan, manifest: knobs and cycles of every layer)."""
    model = tmp_path / f"{name}.onnx"
    onnx.save(zoo.build(name, **SMALL[name]), str(model))
    mods = {}
    for tag, jobs, cache in (("j1", 1, "c1"), ("j2", 2, "c2"), ("j2warm", 2, "c1")):
        monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path / cache))
        assert main(["compile", str(model), "-o", str(tmp_path / tag), "--jobs",
                     str(jobs)]) == 0, capsys.readouterr().err
        mods[tag] = _files(tmp_path / tag)
    assert mods["j1"].keys() == mods["j2"].keys()
    for f in mods["j1"]:
        assert mods["j2"][f] == mods["j1"][f], f
        assert mods["j2warm"][f] == mods["j1"][f], f
    man = json.loads(mods["j1"]["manifest.json"])
    assert sum(k["knob_source"] == "default" for k in man["kernels"].values()) >= 4
    # both cold caches hold the same entries (the workers wrote theirs)
    entries = [sorted(p.read_text() for p in (tmp_path / c / "knobs").glob("*.json"))
               for c in ("c1", "c2")]
    assert entries[0] == entries[1] and entries[0]


def test_each_cache_entry_is_searched_once(small_models, tmp_path, monkeypatch) -> None:
    """Layers whose workloads differ only in their epilogue's immediates (ResNet's repeated
    blocks) read one cache entry: it is searched once, and a warm compile searches nothing."""
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path))
    searched = []
    real = gm._search

    def counting(task):  # noqa: ANN001, ANN202
        searched.append(task[0])
        return real(task)

    monkeypatch.setattr(gm, "_search", counting)
    g = small_models["resnet18"][1]
    m = gm.compile_graph(g, Config(), CompileOptions(fuse=False), jobs=1)
    entries = len(list((tmp_path / "knobs").glob("*.json")))
    assert len(searched) == entries
    works = {gm.replace(k, node="") for k in _layers(m, g)}
    assert len(works) > entries  # some workloads shared an entry
    searched.clear()
    gm.compile_graph(g, Config(), CompileOptions(fuse=False), jobs=1)
    assert searched == []


def _kernels(m) -> dict:  # noqa: ANN001
    return {k: (v.program, v.knobs, v.cycles, v.knob_source) for k, v in m.kernels.items()}


def _entries(d: Path) -> list[str]:
    return sorted(p.read_text() for p in (d / "knobs").glob("*.json"))


def _watch_workers(monkeypatch) -> list[tuple[str, str, int]]:  # noqa: ANN001
    """What the compile gives its workers: ("map" or "start", job, item count), in order."""
    from vta.compiler.graph.workers import Workers

    calls: list[tuple[str, str, int]] = []
    for how in ("map", "start"):
        real = getattr(Workers, how)

        def watched(self, fn, items, *a, _real=real, _how=how):  # noqa: ANN001, ANN202
            items = list(items)
            calls.append((_how, fn.__name__, len(items)))
            return _real(self, fn, items, *a)

        monkeypatch.setattr(Workers, how, watched)
    return calls


def test_searches_run_ahead_of_quantization(small_models, tmp_path, monkeypatch) -> None:
    """With workers, the conv and dense layers' knob searches start before quantization,
    from the float graph's layers: on a cold cache every conv/dense entry the quantized graph
    reads was searched ahead (the element-wise layers' are searched after), and the module
    and the cache entries are those of an in-process compile, which searches each entry as it
    meets it."""
    g = small_models["resnet18"][1]
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path / "j1"))
    ref = gm.compile_graph(g, Config(), CompileOptions(fuse=False), jobs=1)
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path / "j2"))
    calls = _watch_workers(monkeypatch)
    m = gm.compile_graph(g, Config(), CompileOptions(fuse=False), jobs=2)
    assert _kernels(m) == _kernels(ref)
    assert _entries(tmp_path / "j2") == _entries(tmp_path / "j1")
    templates = [json.loads(json.loads(e)["key"])["workload"]["template"]
                 for e in _entries(tmp_path / "j1")]
    convs = sum(t in ("conv2d", "dense") for t in templates)
    assert calls[0] == ("start", "_search_unstored", convs) and 0 < convs < len(templates)
    assert sum(n for _, fn, n in calls if fn == "_search") == len(templates) - convs


def test_a_missed_guess_is_searched_after_quantization(small_models, tmp_path,
                                                       monkeypatch) -> None:
    """When the guessed epilogues are wrong (here: power-of-two scales guessed for a
    fixed-point quantization, so no guessed entry is read), the needed entries are searched
    after quantization, the guesses leave no entry in the cache, and the module is the same."""
    g = small_models["mobilenet_v1"][1]
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path / "j1"))
    ref = gm.compile_graph(g, Config(), CompileOptions(fuse=False), jobs=1)
    real = gm._search_ahead

    def wrong(og, cfg, o, *a):  # noqa: ANN001, ANN002, ANN202
        return real(og, cfg, dataclasses.replace(o, pow2=not o.pow2), *a)  # pow2 flipped

    monkeypatch.setattr(gm, "_search_ahead", wrong)
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path / "j2"))
    calls = _watch_workers(monkeypatch)
    m = gm.compile_graph(g, Config(), CompileOptions(fuse=False), jobs=2)
    assert _kernels(m) == _kernels(ref)
    assert _entries(tmp_path / "j2") == _entries(tmp_path / "j1")
    ahead = sum(n for _, fn, n in calls if fn == "_search_unstored")
    after = sum(n for _, fn, n in calls if fn == "_search")
    assert ahead > 0 and after == len(_entries(tmp_path / "j1"))


def test_a_failing_guess_does_not_stop_the_compile(small_models, tmp_path,
                                                   monkeypatch) -> None:
    """The guess of the workloads to search ahead may fail on a graph it does not foresee:
    the compile then searches after quantization, with the same module."""
    g = small_models["resnet18"][1]
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path / "j1"))
    ref = gm.compile_graph(g, Config(), CompileOptions(fuse=False), jobs=1)

    def broken(*a):  # noqa: ANN002, ANN202
        raise ValueError("a graph the guess does not foresee")

    monkeypatch.setattr(gm, "_expected_workloads", broken)
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path / "j2"))
    calls = _watch_workers(monkeypatch)
    assert _kernels(gm.compile_graph(g, Config(), CompileOptions(fuse=False), jobs=2)) == \
        _kernels(ref)
    assert sum(n for _, fn, n in calls if fn == "_search_unstored") == 0
    assert sum(n for _, fn, n in calls if fn == "_search") == len(_entries(tmp_path / "j1"))


def _layers(m, g):  # noqa: ANN001, ANN202
    from vta.compiler.graph.lowering import plan_node

    return [plan_node(m.graph.node(n), m.shapes, m.graph.params, Config())
            for n, k in m.kernels.items() if k.knob_source == "default"]


def test_probe_reads_the_cache_without_searching(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path))
    from vta.compiler.topi import Epilogue

    cfg = Config()
    epi = Epilogue(bias=True, shift=8, clip=(-128, 127))

    def choose():  # noqa: ANN202
        return defaults.dense_default(1, 4, 4, cfg, epi)

    key, ch = defaults.probe(choose)
    assert ch is None and key and not list(tmp_path.rglob("*.json"))
    full = choose()
    key2, ch2 = defaults.probe(choose)
    assert key2 == key and ch2 is not None and ch2.cached
    assert (ch2.knobs, ch2.cycles) == (full.knobs, full.cycles)


@pytest.mark.parametrize("bad", ["0", "-1", "1.5", "two"])
def test_bad_jobs_is_a_one_line_error(bad, tmp_path, capsys) -> None:
    rc = main(["compile", "missing.onnx", "-o", str(tmp_path / "m"), "--jobs", bad])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "--jobs" in err and bad in err, err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_compile_graph_rejects_bad_jobs(small_models, bad) -> None:
    with pytest.raises(InputError, match="jobs must be a positive integer"):
        gm.compile_graph(small_models["resnet18"][1], Config(), jobs=bad)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_and_after_a_while() -> None:
    quick, slow, pipe = _Tty(), _Tty(), io.StringIO()
    for stream, after in ((quick, 60.0), (slow, 0.0), (pipe, 0.0)):
        show = search_progress(stream, after)
        for k in range(4):
            show(k, 3)
    assert quick.getvalue() == "" and pipe.getvalue() == ""
    assert slow.getvalue() == ("\rdefault knobs: 1/3 workloads\rdefault knobs: 2/3 workloads"
                               "\rdefault knobs: 3/3 workloads\n")


#: ``vta compile --jobs 2`` whose workers, once in a knob search, write a marker file named
#: by their pid into the folder ``argv[1]`` and wait there until they are stopped: the test
#: signals a compile that cannot have finished.
_BLOCKED_COMPILE = """
import os, sys, threading
from pathlib import Path
from vta.compiler.topi import defaults

marks = Path(sys.argv[1])

def search_unstored(choose):
    (marks / f"{os.getpid()}.tmp").write_text("")
    os.replace(marks / f"{os.getpid()}.tmp", marks / str(os.getpid()))
    threading.Event().wait()  # until killed

defaults.search_unstored = search_unstored
from vta.cli.main import entry
sys.argv = ["vta", "compile", *sys.argv[2:], "--jobs", "2"]
entry()
"""


def _blocked_compile(tmp_path: Path, workers: int) -> tuple[subprocess.Popen, list[int]]:
    """A compile of ResNet-18 with its workers blocked in their searches (in a session of
    its own); returns it once ``workers`` of them are there, with their pids."""
    model, marks = tmp_path / "r.onnx", tmp_path / "marks"
    onnx.save(zoo.build("resnet18"), str(model))
    marks.mkdir()
    env = dict(os.environ, VTA_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-c", _BLOCKED_COMPILE, str(marks), str(model),
                             "-o", str(tmp_path / "m")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    end = time.monotonic() + 300  # a guard against a hang, not a wait for the work
    while len(pids := [int(p.name) for p in marks.iterdir() if p.name.isdigit()]) < workers:
        if proc.poll() is not None or time.monotonic() > end:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no {workers} blocked workers: {proc.communicate()}")
        time.sleep(0.05)
    return proc, pids


def _gone(pid: int) -> bool:
    """The process has exited (reaped, or a zombie waiting for its parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_stops_the_compile_and_its_workers(sig, status, tmp_path) -> None:
    """A signal to the whole process group (as Ctrl-C in a terminal) while a worker searches:
    the compile ends at once, one line, no module, no worker left."""
    proc, workers = _blocked_compile(tmp_path, 1)
    os.killpg(proc.pid, sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("vta compile did not stop within 60 s of the signal")
    assert proc.returncode == status, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "m").exists()
    assert all(_gone(w) for w in workers), workers  # reaped by the compile


@pytest.mark.slow
def test_workers_die_with_a_killed_compile(tmp_path) -> None:
    """SIGKILL of the compile alone (nothing can clean up): its two workers, blocked on a
    search, are killed by the kernel with it instead of waiting forever."""
    proc, workers = _blocked_compile(tmp_path, 2)
    proc.kill()
    proc.wait()  # (not communicate: surviving workers would hold its pipes open)
    proc.stdout.close()
    proc.stderr.close()
    end = time.monotonic() + 60  # a guard: the kernel kills them at once
    while not all(_gone(w) for w in workers):
        if time.monotonic() > end:
            for w in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w, signal.SIGKILL)
            pytest.fail("the workers outlived their compile")
        time.sleep(0.05)


def _compile_in_a_pool_worker(onnx_bytes: bytes) -> int:
    from vta.compiler.graph.onnx_frontend import from_onnx

    m = gm.compile_graph(from_onnx(onnx.load_from_string(onnx_bytes)), Config(), jobs=2)
    return len(m.kernels)


def test_a_compile_inside_a_pool_worker_runs_in_process(small_models, tmp_path,
                                                        monkeypatch) -> None:
    """A daemonic process (a multiprocessing pool's worker) may not fork workers: compile_graph
    there searches in-process, with the same result."""
    import multiprocessing as mp

    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path))
    model, g = small_models["mobilenet_v1"]
    with mp.get_context("fork").Pool(1) as pool:
        n = pool.apply(_compile_in_a_pool_worker, (model.SerializeToString(),))
    assert n == len(gm.compile_graph(g, Config(), jobs=1).kernels) > 0


def _compile_programs(onnx_bytes: bytes) -> dict[str, bytes]:
    from vta.compiler.graph.onnx_frontend import from_onnx

    m = gm.compile_graph(from_onnx(onnx.load_from_string(onnx_bytes)), Config(), jobs=1)
    return {k: v.program for k, v in m.kernels.items()}


def test_two_compiles_share_one_cache(small_models, tmp_path, monkeypatch) -> None:
    """Two compiles at once on one cold knob cache (each writes its entries atomically): the
    same programs, every entry whole and readable, and a third compile searches nothing."""
    import multiprocessing as mp

    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path))
    model = small_models["resnet18"][0].SerializeToString()
    with mp.get_context("fork").Pool(2) as pool:
        a, b = pool.map(_compile_programs, [model, model])
    assert a == b and a
    entries = list((tmp_path / "knobs").glob("*.json"))
    assert entries and all(json.loads(p.read_text())["knobs"] for p in entries)
    assert not list((tmp_path / "knobs").glob(".*"))  # no temporary file left
    searched = []
    monkeypatch.setattr(gm, "_search", lambda task: searched.append(task) or ("", ""))
    assert _compile_programs(model) == a and searched == []


def _frozen(_: int) -> tuple[int, int]:
    import gc

    return os.getpid(), gc.get_freeze_count()


def test_workers_leave_the_inherited_heap_to_the_permanent_generation() -> None:
    """A forked worker freezes what it inherited (its collections then skip the parent's
    heap); the parent's own collector is left as it was."""
    import gc

    from vta.compiler.graph.workers import Workers

    before = gc.get_freeze_count()
    with Workers(2) as w:
        got = w.map(_frozen, range(4))
    assert all(pid != os.getpid() and n > 1000 for pid, n in got), got
    assert gc.get_freeze_count() == before


def _die_on_three(x: int) -> int:
    if x == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would
    return x * x


def test_a_killed_worker_is_a_one_line_error_not_a_hang() -> None:
    """A worker killed from outside ends the map with a WorkerError (one line, naming what
    happened and what to do) within seconds; the items before it were computed by the pool."""
    from vta.compiler.graph.workers import WorkerError, Workers
    from vta.isa.errors import VTAError

    assert issubclass(WorkerError, VTAError)
    t0 = time.monotonic()
    with pytest.raises(WorkerError, match="worker process died.*--jobs 1") as e, Workers(2) as w:
        w.map(_die_on_three, range(8))
    assert "\n" not in str(e.value)
    assert time.monotonic() - t0 < 30
    with Workers(2) as w:  # a new pool works again
        assert w.map(_die_on_three, [0, 1, 2, 4]) == [0, 1, 4, 16]
