"""Checking the search's finalists: real synthesis (cached) and a run on tsim.

The finalists are the Pareto points, fastest first. :func:`synth_finalists` synthesizes them
for the board and records the real resource counts, whether they fit and the model's error.
:func:`tsim_finalists` runs a small matmul program on the Verilator model of each finalist (when
Verilator is available), checks its memory image against the functional simulator, and compares
its cycles with the performance model's estimate of the same program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from vta.boards import get_board
from vta.hw import simulate, tsim
from vta.hw.verilator import ToolMissingError, find_verilator
from vta.sim import fsim
from vta.sim.perf import estimate
from vta.sim.programs import matmul_program

from . import synthcache
from .explore import ExploreResult, Point
from .network import port_params
from .resources import KINDS


def finalists(result: ExploreResult, k: int) -> list[Point]:
    """Up to ``k`` Pareto points, fastest first (the best point first)."""
    best = result.best
    front = [p for p in result.pareto if p is not best]
    return ([best] if best is not None else []) + front[: max(0, k - 1)] if k > 0 else []


def synth_finalists(result: ExploreResult, k: int,
                    progress: Callable[[str], None] | None = None) -> list[Point]:
    """Synthesize up to ``k`` finalists (cached); sets ``point.synth``."""
    done = []
    for n, p in enumerate(finalists(result, k), 1):
        if progress:
            progress(f"synthesizing finalist {n}/{k}: {p.key} (minutes; cached afterwards)")
        e = synthcache.synthesize(result.board, p.cand.cfg)
        used = e["used"]
        p.synth = {"used": used, "fits": all(used[r] <= result.budget[r] for r in KINDS),
                   "seconds": e["seconds"], "cached": e["cached"],
                   "model_error": {r: round((p.resources[r] - used[r]) / max(used[r], 1.0), 4)
                                   for r in KINDS},
                   "problems": e["report"].get("problems", [])}
        done.append(p)
    return done


def tsim_available() -> str | None:
    """None when tsim can run here (Verilator found), else why not."""
    try:
        find_verilator()
    except ToolMissingError as e:
        return str(e)
    return None


def check_program(cfg: Any, backend: str = "tsim",
                  port_width: int | None = None) -> dict[str, Any]:
    """Run a small matmul on ``backend`` (tsim or rtl) with ``cfg``'s core (its bus width
    included), compare with fsim; cycles vs the
    performance model with the same memory port (:func:`~.network.port_params`; tsim's
    memory moves as many bytes per cycle as the model's)."""
    m, n, kk = 2 * cfg.batch, 2 * cfg.block_out, 2 * cfg.block_in
    prog, dram, _plan = matmul_program(cfg, m, n, kk, seed=1)
    ref = fsim.run(prog, dram, cfg)
    params = port_params(cfg.bus_width, port_width)
    run_program = tsim.run_program if backend == "tsim" else simulate.run_program
    got = run_program(prog, dram, cfg, mem_bandwidth=params.bandwidth)
    model = estimate(prog, cfg, params=params).cycles
    cycles = got.stats.cycles
    return {"backend": backend, "program": f"matmul {m}x{n}x{kk}",
            "matches_fsim": bool(np.array_equal(np.asarray(got.dram), np.asarray(ref.dram))),
            "cycles": cycles, "perf_model_cycles": model,
            "perf_model_error": None if not cycles else round((model - cycles) / cycles, 4)}


def tsim_finalists(result: ExploreResult, k: int,
                   progress: Callable[[str], None] | None = None) -> tuple[list[Point], str | None]:
    """Run each of up to ``k`` finalists on tsim; sets ``point.tsim``. Returns the checked
    points and, when tsim is unavailable, why."""
    why = tsim_available()
    if why is not None:
        return [], why
    done = []
    for n, p in enumerate(finalists(result, k), 1):
        if progress:
            progress(f"tsim finalist {n}/{k}: {p.key} (the first build takes minutes)")
        try:
            p.tsim = check_program(p.cand.cfg, "tsim", get_board(result.board).bus_width)
        except Exception as e:  # noqa: BLE001 - a failing check is a reported result
            p.tsim = {"backend": "tsim", "error": f"{type(e).__name__}: {e}"[:300]}
        done.append(p)
    return done, None
