"""tsim: cycle-accurate simulation of the whole VTA core with Verilator (``--backend tsim``).

The core's Verilog (:func:`vta.hw.verilog.generate`) is compiled by Verilator together with a C++
harness (``harness.cpp``: a DRAM model behind the AXI4 master port with configurable latency and
bandwidth, an AXI4-Lite host driver, a watchdog) into a shared library driven through ctypes.
Builds are cached in ``$VTA_CACHE_DIR/tsim`` (else ``$XDG_CACHE_HOME/vta-kit/tsim``, else
``~/.cache/vta-kit/tsim``) under a hash of the Verilog, the harness and the build options, so a
design is compiled once (a few minutes for the default config) and reused until it changes.

>>> result = run_program(program, dram, Config.preset("small"))   # doctest: +SKIP
>>> result.stats.cycles, result.stats.gemm_utilization       # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa import Config
from vta.isa.checks import MAX_UOPS_PER_INSN, check_insns, check_work
from vta.isa.errors import VTAError
from vta.isa.fileio import user_cache_dir, write_atomic
from vta.isa.image import RunResult, as_dram, as_program_bytes, check_program
from vta.isa.insn import Insn
from vta.isa.procs import run_group
from vta.isa.stats import AxiCounts

from ..axi_model import AxiAccessError, AxiProtocolError
from ..harness import (
    COUNTER_REGS,
    DEBUG_REGS,
    DONE_REGS,
    PROGRESS_REGS,
    PROGRESS_SECONDS,
    CycleLimitError,
    check_vcd_path,
    chrome_trace,
    cycle_limit_error,
    deadlock_error,
    default_max_cycles,
    place_program,
    progress_line,
    run_stats,
    spans_from_samples,
)
from ..options import CoreOptions
from ..regs import CONTROL_LAUNCH, REGISTER_MAP
from ..verilator import ToolMissingError, find_verilator

#: PYNQ-Z1-like DRAM behind a 64-bit HP port at 100 MHz: ~32 cycles to the first read beat,
#: 8 bytes per cycle (800 MB/s) shared by reads and writes.
DEFAULT_MEM_LATENCY = 32
DEFAULT_MEM_WRITE_LATENCY = 16
DEFAULT_MEM_BANDWIDTH = 8.0
#: Cycles without progress before the watchdog declares a deadlock.
DEFAULT_IDLE_LIMIT = 100_000
#: Verilator (and C++) optimisation used for the cached builds.
VERILATOR_FLAGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert")
OPT_FAST = "-O2"
#: Cached models kept per cache directory (the oldest are deleted when a new one is built).
KEEP_BUILDS = 12
#: Cycles per call into the model between progress checks (at least 4 idle limits).
SLICE_CYCLES = 1 << 22

_FINISHED, _DEADLOCK, _CYCLE_LIMIT, _ERROR = 1, 2, 3, 4


class TsimBuildError(VTAError):
    """Verilator or the C++ compiler failed to build the tsim model."""


def cache_root() -> Path:
    """Where tsim builds are cached (honours $VTA_CACHE_DIR and $XDG_CACHE_HOME)."""
    return user_cache_dir("tsim")


def _harness_source() -> str:
    return resources.files("vta.hw.tsim").joinpath("harness.cpp").read_text()


def harness_headers() -> dict[str, str]:
    """The C++ headers shared by every harness (name -> text), for :func:`build_library`:
    ``axi_bus.h``, the AXI4 memory model and AXI4-Lite driver of tsim and the virtual boards."""
    return {"axi_bus.h": resources.files("vta.hw.tsim").joinpath("axi_bus.h").read_text()}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolMissingError(f"{name} is not installed; tsim needs it (apt-get install {name}, "
                               f"or use --backend rtl)")
    return path


def _verilator_version() -> str:
    return find_verilator().version


def _source_key(cfg: Config, vcd: bool, reset_stage: bool, options: CoreOptions) -> str:
    """A hash of everything the Verilog is generated from (the hw sources, Amaranth, the
    config, the core options): lets a cached build be found without regenerating the
    Verilog."""
    import amaranth  # deferred: amaranth, only to key the build cache

    h = hashlib.sha256()
    hw_dir = Path(__file__).resolve().parent.parent
    for path in sorted(hw_dir.rglob("*.py")):
        h.update(str(path.relative_to(hw_dir)).encode())
        h.update(path.read_bytes())
    for part in (amaranth.__version__, cfg.to_json(), str(cfg.bus_width), str(vcd),
                 str(reset_stage), json.dumps(options.as_dict(), sort_keys=True),
                 _harness_source(), *harness_headers().values(),
                 _verilator_version(), *VERILATOR_FLAGS, *_make_variables()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


@dataclass(frozen=True)
class Build:
    """A compiled tsim model: the shared library and what it was built from."""

    path: Path
    key: str
    bus_width: int
    vcd: bool


_LOCK = threading.Lock()
_LOADED: dict[Path, ctypes.CDLL] = {}


def build(cfg: Config, *, vcd: bool = False, verbose: bool = False,
          jobs: int = 1, reset_stage: bool = True,
          options: CoreOptions | Mapping[str, Any] | None = None) -> Build:
    """Compile (or find in the cache) the tsim model of ``cfg`` (its bus width included);
    returns the library path.

    ``options`` selects a hardware variant of the core (:class:`~vta.hw.options.CoreOptions`,
    or a dict of them; part of the cache key). ``reset_stage=False`` builds the core without
    the register on its reset input (:class:`vta.hw.probe.ProbedCore`): same cycles, about half
    the speed; for measuring it (``bench/bench_tsim.py``)."""
    from ..probe import generate  # deferred: amaranth, only to generate

    options = CoreOptions.coerce(options)
    root = cache_root()
    index = root / "index" / _source_key(cfg, vcd, reset_stage, options)
    if index.exists():
        key = index.read_text().strip()
        lib = root / key / "libvtatsim.so"
        if lib.exists():
            return Build(lib, key, cfg.bus_width, vcd)
    verilog = generate(cfg, name="vta_core", reset_stage=reset_stage, options=options)
    cflags = [f"-DBUS_BYTES={cfg.bus_bytes}"]
    if "debug_states" in verilog:
        cflags.append("-DHAVE_DEBUG_PORTS")
    lib = build_library({"vta_core.v": verilog, "harness.cpp": _harness_source(),
                         **harness_headers()},
                        top="vta_core", cflags=cflags, trace=vcd, verbose=verbose, jobs=jobs)
    _write_index(index, lib.parent.name)
    return Build(lib, lib.parent.name, cfg.bus_width, vcd)


def build_library(files: dict[str, str], *, top: str, cflags: list[str], trace: bool = False,
                  verbose: bool = False, jobs: int = 1) -> Path:
    """Verilate ``files`` (name -> text: Verilog sources, one C++ harness exporting a C ABI and
    the ``.h`` headers it includes, e.g. :func:`harness_headers`) with top module ``top`` into
    ``libvtatsim.so`` in the cache; returns its path.

    The cache key hashes the files, the flags and the Verilator version; a build happens once
    (under a lock, in a temporary directory renamed into place), also for parallel processes.
    tsim and the virtual boards (:mod:`vta.boards.virtual`) are built here.
    """
    root = cache_root()
    options = [*VERILATOR_FLAGS, *_make_variables(), f"top={top}", f"trace={trace}", *cflags]
    h = hashlib.sha256()
    for part in (*(f"{n}\0{t}" for n, t in sorted(files.items())), "\0".join(options),
                 _verilator_version()):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()[:20]
    final = root / key
    lib = final / "libvtatsim.so"
    if lib.exists():
        return lib
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TsimBuildError(f"cannot create the tsim cache directory {root}: "
                             f"{e.strerror or e}; set VTA_CACHE_DIR to a writable "
                             f"directory") from None
    import fcntl  # deferred: fcntl is POSIX-only, needed only to lock a build

    with open(root / f"{key}.lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        if lib.exists():  # another process built it while we waited
            return lib
        work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
        try:
            _compile(work, files, top=top, cflags=cflags, trace=trace, verbose=verbose,
                     jobs=jobs)
            (work / "KEY").write_text("\n".join(options) + "\n")
            if final.exists():
                shutil.rmtree(final)
            os.replace(work, final)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    _prune(root, keep=KEEP_BUILDS, current=final)
    return lib


def _prune(root: Path, *, keep: int, current: Path) -> None:
    """Delete the least recently built models beyond ``keep`` (never ``current``)."""
    builds = sorted((p for p in root.iterdir() if (p / "libvtatsim.so").exists()),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for old in builds[keep:]:
        if old != current:
            shutil.rmtree(old, ignore_errors=True)
            (root / f"{old.name}.lock").unlink(missing_ok=True)


def _write_index(index: Path, key: str) -> None:
    index.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(index, key + "\n", "tsim build index")


def _run(cmd: list[str], cwd: Path, verbose: bool, what: str) -> None:
    # in a process group of its own, stopped as a whole if the build is interrupted: make's
    # compilers die with the command instead of running on
    proc = run_group(cmd, cwd=cwd, capture=not verbose)
    if proc.returncode:
        tail = "\n".join(((proc.stderr or "") + (proc.stdout or "")).strip().splitlines()[-15:])
        raise TsimBuildError(f"{what} failed (exit {proc.returncode}) in {cwd}:\n{tail}")


def _make_variables() -> list[str]:
    """Variables for Verilator's makefile (``verilated.mk``). Besides the optimisation levels,
    ``CFG_CXXFLAGS_PCH_I``: the option that makes g++ include the precompiled header, which the
    PyPI wheel's ``verilated.mk`` leaves empty (it was configured on another machine), so that
    g++ takes the header for an input file ("Vx__pch.h.fast: linker input file not found");
    Verilator versions without precompiled headers (5.006) ignore it."""
    return [f"OPT_FAST={OPT_FAST}", "OPT_SLOW=-O0", "OPT_GLOBAL=-O2",
            "CFG_CXXFLAGS_PCH_I=-include"]


def _compile(work: Path, files: dict[str, str], *, top: str, cflags: list[str], trace: bool,
             verbose: bool, jobs: int) -> None:
    """Verilate and build ``files`` into ``work/libvtatsim.so``.

    ``--exe`` with ``-shared`` at link time makes Verilator's own makefile build the runtime and
    link everything into a shared library exporting only the harness's C ABI.
    """
    verilator = find_verilator().path
    _tool("g++")
    for name, text in files.items():
        (work / name).write_text(text)
    flags = ["-fPIC", "-fvisibility=hidden", "-std=c++17", *cflags]
    cmd = [verilator, "--cc", "--exe", "--build", *VERILATOR_FLAGS, "-Wno-fatal", "-Wno-lint",
           "-Wno-style", "-Wno-SYMRSVDWORD", "--top-module", top, "--prefix", f"V{top}",
           "--Mdir", "obj", "-j", str(jobs), "-CFLAGS", " ".join(flags),
           "-LDFLAGS", "-shared -Wl,-Bsymbolic -pthread", "-o", "libvtatsim.so",
           "-MAKEFLAGS", " ".join(_make_variables())]
    if trace:
        cmd.append("--trace")
    cmd += [name for name in files if not name.endswith(".h")]  # (headers are #included)
    _run(cmd, work, verbose, "verilator")
    os.replace(work / "obj" / "libvtatsim.so", work / "libvtatsim.so")
    shutil.rmtree(work / "obj", ignore_errors=True)


def _load(path: Path) -> ctypes.CDLL:
    with _LOCK:
        if path in _LOADED:
            return _LOADED[path]
        lib = ctypes.CDLL(str(path))
        vp, u32, u64, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
        sig = {
            "tsim_create": (vp, [ctypes.c_char_p]),
            "tsim_free": (None, [vp]),
            "tsim_bus_bytes": (i32, []),
            "tsim_has_trace_ports": (i32, []),
            "tsim_mem_alloc": (ctypes.POINTER(ctypes.c_uint8), [vp, u64, u64]),
            "tsim_config": (None, [vp, u32, u32, ctypes.c_double, ctypes.c_double, u64, u32,
                                   i32]),
            "tsim_reset": (i32, [vp, i32]),
            "tsim_reg_write": (i32, [vp, u32, u32]),
            "tsim_reg_read": (ctypes.c_int64, [vp, u32]),
            "tsim_cycle": (u64, [vp]),
            "tsim_error": (ctypes.c_char_p, [vp]),
            "tsim_run": (i32, [vp, u64, u64, ctypes.POINTER(u32), i32]),
            "tsim_sample_count": (u64, [vp]),
            "tsim_samples": (None, [vp, ctypes.POINTER(u64)]),
            "tsim_axi_stats": (None, [vp, ctypes.POINTER(u64)]),
        }
        for name, (res, args) in sig.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        _LOADED[path] = lib
        return lib


class TsimModel:
    """One instance of the compiled core plus harness (create, load memory, run, read back)."""

    def __init__(self, build_: Build, vcd: str | os.PathLike[str] | None = None) -> None:
        self.lib = _load(build_.path)
        self.bus_width = build_.bus_width
        self.handle = self.lib.tsim_create(os.fsencode(vcd) if vcd else None)
        self.mem_view: np.ndarray | None = None

    def close(self) -> None:
        if self.handle:
            self.lib.tsim_free(self.handle)
            self.handle = None

    def __enter__(self) -> TsimModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fail(self) -> None:
        msg = self.lib.tsim_error(self.handle).decode()
        kind, _, text = msg.partition(": ")
        if kind == "access":
            raise AxiAccessError(text)
        raise AxiProtocolError(text or msg)

    def load_memory(self, mem: np.ndarray, write_limit: int) -> None:
        ptr = self.lib.tsim_mem_alloc(self.handle, len(mem), write_limit)
        self.mem_view = np.ctypeslib.as_array(ptr, shape=(len(mem),))
        self.mem_view[:] = mem

    def configure(self, *, latency: int, write_latency: int, bandwidth: float | None,
                  stall: float, seed: int, max_outstanding: int = 8, trace: bool) -> None:
        self.lib.tsim_config(self.handle, latency, write_latency, float(bandwidth or 0.0),
                             float(stall), seed, max_outstanding, int(trace))

    def reset(self, cycles: int = 4) -> None:
        if self.lib.tsim_reset(self.handle, cycles):
            self._fail()

    def write(self, addr: int, value: int) -> None:
        if self.lib.tsim_reg_write(self.handle, addr, value & 0xFFFF_FFFF):
            self._fail()

    def read(self, addr: int) -> int:
        v = self.lib.tsim_reg_read(self.handle, addr)
        if v < 0:
            self._fail()
        return int(v)

    def read_regs(self, names: Sequence[str]) -> dict[str, int]:
        return {n: self.read(REGISTER_MAP[n]) for n in names}

    @property
    def cycle(self) -> int:
        return int(self.lib.tsim_cycle(self.handle))

    def run(self, *, max_cycles: int | None, idle_limit: int) -> int:
        addrs = (ctypes.c_uint32 * len(PROGRESS_REGS))(*(REGISTER_MAP[n] for n in PROGRESS_REGS))
        status = self.lib.tsim_run(self.handle, max_cycles or 0, idle_limit, addrs,
                                   len(PROGRESS_REGS))
        if status == _ERROR:
            self._fail()
        return status

    def samples(self) -> list[tuple[int, ...]]:
        """The debug-port samples recorded with ``trace=True`` (cycle, states, done x3)."""
        n = int(self.lib.tsim_sample_count(self.handle))
        buf = (ctypes.c_uint64 * (5 * n))()
        self.lib.tsim_samples(self.handle, buf)
        flat = list(buf)
        return [tuple(flat[5 * i:5 * i + 5]) for i in range(n)]

    def axi_stats(self) -> AxiCounts:
        buf = (ctypes.c_uint64 * 4)()
        self.lib.tsim_axi_stats(self.handle, buf)
        return AxiCounts(*(int(v) for v in buf))


def _run_bounded(model: TsimModel, bound: int, idle_limit: int, progress: float | None,
                 insns: Sequence[Insn]) -> int:
    """Run the model in slices of cycles until it finishes, deadlocks or reaches ``bound``
    cycles, with a progress line on stderr every ``progress`` seconds of a long run. A slice is
    several idle limits long, so the watchdog (restarted per slice) still sees a deadlock."""
    step = max(4 * idle_limit, SLICE_CYCLES)
    start, t0 = model.cycle, time.monotonic()
    next_line = t0 + (progress or 0.0)
    while True:
        left = bound - (model.cycle - start)
        if left <= 0:
            return _CYCLE_LIMIT
        status = model.run(max_cycles=min(step, left), idle_limit=idle_limit)
        if status != _CYCLE_LIMIT:
            return status
        now = time.monotonic()
        if progress is not None and now >= next_line:
            progress_line("tsim", model.cycle - start, bound, model.read_regs(DONE_REGS), insns,
                          now - t0)
            next_line = now + progress


def run_program(program: bytes | Sequence[Insn], dram: np.ndarray | bytes, cfg: Config, *,
                mem_latency: int = DEFAULT_MEM_LATENCY,
                mem_write_latency: int = DEFAULT_MEM_WRITE_LATENCY,
                mem_bandwidth: float | None = DEFAULT_MEM_BANDWIDTH, mem_stall: float = 0.0,
                seed: int = 0, idle_limit: int = DEFAULT_IDLE_LIMIT,
                max_cycles: int | None = None, trace: bool = False,
                vcd: str | os.PathLike[str] | None = None,
                progress: float | None = PROGRESS_SECONDS,
                max_uops: int = MAX_UOPS_PER_INSN, reset_stage: bool = True,
                options: CoreOptions | Mapping[str, Any] | None = None) -> RunResult:
    """Run ``program`` on the Verilator model of ``cfg``'s core (its bus width included);
    byte-identical to fsim.

    ``mem_latency`` cycles to the first read beat, ``mem_bandwidth`` bytes per cycle shared by
    reads and writes (``None``: one bus word per cycle), ``mem_stall`` random backpressure
    probability. ``idle_limit`` cycles without progress raise
    :class:`vta.isa.errors.DeadlockError` naming the stuck modules and queues; ``max_cycles``
    bounds the run (:class:`CycleLimitError`); without it the bound is
    :func:`~vta.hw.harness.default_max_cycles` of the program. A run longer than ``progress``
    seconds prints a progress line on stderr every ``progress`` seconds (``None``: never).
    ``vcd`` dumps waveforms to that file (a separate, cached ``--trace`` build; its directory
    must exist). The stats carry total cycles, per-module busy / token-wait /
    memory-wait cycles, GEMM utilisation and bytes moved. ``reset_stage`` and ``options`` (the
    core's hardware variant, :class:`~vta.hw.options.CoreOptions`): see :func:`build`.
    """
    program = as_program_bytes(program, cfg)
    insns = check_program(program, cfg)
    dram = as_dram(dram)
    check_insns(insns, cfg, len(dram))  # the same bounds as every backend
    check_work(insns, max_uops, "tsim")
    check_vcd_path(vcd)
    if max_cycles is not None and max_cycles < 1:
        raise VTAError(f"max_cycles must be at least 1, not {max_cycles}")
    bound = max_cycles if max_cycles is not None else default_max_cycles(
        insns, cfg, mem_latency=mem_latency, mem_bandwidth=mem_bandwidth, mem_stall=mem_stall)
    image = place_program(dram, program)
    b = build(cfg, vcd=vcd is not None, reset_stage=reset_stage, options=options)
    with TsimModel(b, vcd=vcd) as model:
        if trace and not model.lib.tsim_has_trace_ports():
            raise VTAError("this core has no debug_* trace ports; --trace needs a core that "
                           "exports them (see hw/README.md)")
        model.load_memory(image.mem, image.user_bytes)
        model.configure(latency=mem_latency, write_latency=mem_write_latency,
                        bandwidth=mem_bandwidth, stall=mem_stall, seed=seed, trace=trace)
        model.reset()
        model.write(REGISTER_MAP["insn_addr"], image.insn_addr)
        model.write(REGISTER_MAP["insn_count"], image.insn_count)
        model.write(REGISTER_MAP["control"], CONTROL_LAUNCH)
        start = model.cycle
        status = _run_bounded(model, bound, idle_limit, progress, insns)
        if status == _DEADLOCK:
            raise deadlock_error(model.read_regs(DEBUG_REGS), insns, idle_limit)
        if status == _CYCLE_LIMIT:
            raise cycle_limit_error(bound, max_cycles is None, "tsim")
        counters = model.read_regs(COUNTER_REGS)
        dram_out = image.mem[:0].copy()
        assert model.mem_view is not None
        dram_out = model.mem_view[:image.user_bytes].copy()
        events = None
        if trace:
            samples = [(c - start, *rest) for c, *rest in model.samples() if c >= start]
            events = chrome_trace(spans_from_samples(samples, insns), insns)
        axi = model.axi_stats()
    stats = run_stats(insns, cfg, counters, backend="tsim", axi=axi)
    return RunResult(dram=dram_out, stats=stats, trace=events)


__all__ = ["run_program", "build", "Build", "TsimModel", "cache_root", "TsimBuildError",
           "ToolMissingError", "DEFAULT_MEM_LATENCY", "DEFAULT_MEM_BANDWIDTH",
           "DEFAULT_IDLE_LIMIT", "CycleLimitError", "build_library", "harness_headers"]
