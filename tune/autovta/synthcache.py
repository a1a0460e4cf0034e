"""Real synthesis of candidate cores, cached on disk (each yosys run takes minutes).

A report is stored as JSON in the user cache (``$VTA_CACHE_DIR/autovta/synth``, else
``$XDG_CACHE_HOME/vta-kit/autovta/synth``, else ``~/.cache/vta-kit/autovta/synth``) under a key
made of the configuration's parameters, the bus width, the board and the kit version. A hash of
the hardware and synthesis sources is stored with each report (``hw_hash``): a report made from
other sources (an older core) is *stale* and is neither reused by :func:`synthesize` nor used to
calibrate the resource model (:func:`cached_synthesis` returns None for it unless asked for
stale reports too).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from vta.boards import get_board
from vta.boards.synth import synthesize as yosys_synthesize
from vta.hw.verilog import generate
from vta.isa import Config
from vta.isa.errors import VTAError
from vta.isa.fileio import SMALL_INPUT, kit_version, loads_json, read_bytes, write_atomic

from .network import cache_dir

SYNTH_FORMAT = 1


#: Modules of vta.hw used only to simulate the core (testbenches, harnesses, memory models):
#: they do not decide the netlist, so editing them does not make synthesis reports stale.
SIMULATION_ONLY = frozenset({"testbench.py", "simulate.py", "harness.py", "axi_model.py",
                             "axi_sim.py", "probe.py"})


def hw_hash() -> str:
    """A short hash of the sources that decide the synthesized netlist (vta.hw without its
    simulation-only modules, boards.synth)."""
    h = hashlib.sha256()
    for pkg, pattern in (("vta.hw", "*.py"), ("vta.boards", "synth.py")):
        try:
            root = resources.files(pkg)
        except ModuleNotFoundError:
            continue
        for f in sorted(Path(str(root)).glob(pattern)):
            if pkg == "vta.hw" and f.name in SIMULATION_ONLY:
                continue
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def synth_key(board: str, cfg: Config) -> str:
    """The cache key of one (board, config) under this kit version (the bus width is a key of
    its own, as before it was the configuration's)."""
    key = {"board": board, "config": cfg.params, "bus_width": cfg.bus_width,
           "kit": kit_version(), "format": SYNTH_FORMAT}
    options = get_board(board).core_options
    if options:  # (only when set: the keys of boards without options stay what they were)
        key["core_options"] = options
    blob = json.dumps(key, sort_keys=True)
    p = cfg.params
    label = (f"{board}-b{p['LOG_BATCH']}k{p['LOG_BLOCK']}-u{p['LOG_UOP_BUFF_SIZE']}"
             f"i{p['LOG_INP_BUFF_SIZE']}w{p['LOG_WGT_BUFF_SIZE']}a{p['LOG_ACC_BUFF_SIZE']}"
             f"-bus{cfg.bus_width}")
    return f"{label}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def _path(board: str, cfg: Config) -> Path:
    return cache_dir("synth") / f"{synth_key(board, cfg)}.json"


def cached_synthesis(board: str, cfg: Config, *,
                     allow_stale: bool = False) -> dict[str, Any] | None:
    """The cached synthesis entry, or None when this point was never synthesized from the
    current hardware sources (with ``allow_stale``: from any sources; the entry's ``stale``
    says which)."""
    name = get_board(board).name
    p = _path(name, cfg)
    if not p.exists():
        return None
    try:
        entry = loads_json(read_bytes(p, "synthesis cache entry", limit=SMALL_INPUT), p)
        if entry.get("format") != SYNTH_FORMAT or "used" not in entry:
            return None
        entry["stale"] = entry.get("hw_hash") != hw_hash()
        if entry["stale"] and not allow_stale:
            return None
        return entry
    except (OSError, ValueError, VTAError):
        return None


def synthesize(board: str, cfg: Config, *,
               use_cache: bool = True, progress: Callable[[str], None] | None = None,
               timeout: float = 3600.0) -> dict[str, Any]:
    """Synthesize the core for ``cfg`` (its bus width included) with yosys for ``board``
    (cached); returns the entry:
    ``used`` ({lut, ff, bram, dsp} in the board's units), ``seconds``, ``report`` (the full
    :meth:`vta.boards.synth.SynthReport.to_dict`), ``cached`` (whether it came from the cache)."""
    b = get_board(board)
    if use_cache:
        entry = cached_synthesis(b.name, cfg)
        if entry is not None:
            return {**entry, "cached": True}

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vta-autovta-synth-") as tmp:
        src = Path(tmp) / "vta_core.v"
        src.write_text(generate(cfg, name="vta_core", options=b.core_options, family=b.family))
        rep = yosys_synthesize(b, [src], "vta_core", workdir=Path(tmp) / "work",
                               progress=progress, config=cfg, timeout=timeout)
    entry = {
        "format": SYNTH_FORMAT, "key": synth_key(b.name, cfg), "board": b.name,
        "family": b.family, "config": cfg.params, "bus_width": cfg.bus_width,
        "kit": kit_version(),
        "hw_hash": hw_hash(), "stale": False, "seconds": round(time.monotonic() - t0, 1),
        "used": rep.used.as_dict(), "report": rep.to_dict(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if use_cache:
        path = _path(b.name, cfg)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(entry, indent=1), "synthesis cache entry")
        except (OSError, VTAError):
            pass
    return {**entry, "cached": False}
