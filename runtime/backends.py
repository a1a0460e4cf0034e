"""The backend registry: every place where VTA code runs, described once.

The runtime (:func:`vta.runtime.open`), the CLI (``vta sim``), the compiler's build and the graph
executor read their lists of backends here; no other module spells a list of backend names.

>>> from vta.runtime.backends import get, names
>>> names("simulator", "estimator")
('fsim', 'rtl', 'tsim', 'perf')
>>> get("perf").computes_data
False

Kinds: ``simulator`` (computes data), ``estimator`` (cycle estimates, no data), ``cpu`` (the
host's LLVM JIT), ``board`` (a physical board driven by the runtime) and ``virtual`` (a board's
generated top under Verilator, opened as ``virtual:BOARD`` through the platform plugins; the
board names are those of :mod:`vta.boards.registry`, which the runtime may not import).
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("simulator", "estimator", "cpu", "board", "virtual")


@dataclass(frozen=True)
class Backend:
    """One backend: its name, kind, whether it computes data, the external tool it needs, how
    the runtime opens it (``device``: (module, class)) and how ``vta sim`` runs a program image
    on it (``program``: (module, function), the ``fsim.run`` contract), and its default DRAM
    arena in bytes (None: the device's own memory); ``about`` says what it is, for help texts."""

    name: str
    kind: str
    about: str
    computes_data: bool = True
    tool: str | None = None
    device: tuple[str, str] | None = None
    program: tuple[str, str] | None = None
    arena: int | None = None
    aliases: tuple[str, ...] = ()


_MB = 1 << 20
_DEV = "vta.runtime.device"
REGISTRY: dict[str, Backend] = {b.name: b for b in (
    Backend("cpu", "cpu", "the host CPU (LLVM JIT)", aliases=("llvm",)),
    Backend("fsim", "simulator", "functional golden model", device=(_DEV, "FsimDevice"),
            program=("vta.sim.fsim", "run"), arena=64 * _MB),
    Backend("rtl", "simulator", "Amaranth/Verilog simulation", device=(_DEV, "RtlDevice"),
            program=("vta.hw.simulate", "run_program"), arena=1 * _MB),
    Backend("tsim", "simulator", "Verilator", tool="verilator", device=(_DEV, "TsimDevice"),
            program=("vta.hw.tsim", "run_program"), arena=4 * _MB),
    Backend("perf", "estimator", "cycle model", computes_data=False,
            device=(_DEV, "PerfDevice"), program=("vta.sim.perf", "run_program"),
            arena=64 * _MB),
    Backend("pynq", "board", "PYNQ-Z1/Z2 board", device=("vta.runtime.pynq", "PynqDevice"),
            arena=64 * _MB),
    Backend("de10-nano", "board", "DE10-Nano board",
            device=("vta.runtime.de10nano", "De10NanoDevice"), arena=64 * _MB),
    # its arena is the board's device memory, less the instruction area
    Backend("ulx3s", "board", "ULX3S board over a serial port",
            device=("vta.runtime.ulx3s", "Ulx3sDevice")),
    Backend("virtual", "virtual", "a board's generated top under Verilator", tool="verilator",
            arena=4 * _MB),
)}


def get(name: str) -> Backend | None:
    """The backend called ``name`` (or one of its aliases), or None."""
    for b in REGISTRY.values():
        if name == b.name or name in b.aliases:
            return b
    return None


def names(*kinds: str, aliases: bool = False) -> tuple[str, ...]:
    """The names of the backends of the given kinds (all kinds if none), in registry order;
    with ``aliases=True`` each backend's aliases follow its name."""
    return tuple(n for b in REGISTRY.values() if not kinds or b.kind in kinds
                 for n in (b.name, *(b.aliases if aliases else ())))


def devices() -> tuple[str, ...]:
    """The backends :func:`vta.runtime.open` opens by name."""
    return tuple(b.name for b in REGISTRY.values() if b.device)


def programs() -> tuple[str, ...]:
    """The backends that run a program image (``vta sim --backend``)."""
    return tuple(b.name for b in REGISTRY.values() if b.program)


def module_targets() -> tuple[str, ...]:
    """The targets a compiled graph module runs on by name (the graph executor's, ``vta run
    --target``): the CPU, the simulators and the performance model; boards run one as
    "virtual:BOARD"."""
    return names("cpu", "simulator", "estimator")


def described(names: tuple[str, ...]) -> str:
    """"fsim (functional golden model), rtl (...)": backends named with what they are."""
    return ", ".join(f"{n} ({REGISTRY[n].about})" for n in names)


__all__ = ["Backend", "KINDS", "REGISTRY", "get", "names", "devices", "programs",
           "module_targets", "described"]
