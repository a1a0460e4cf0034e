"""AutoVTA's outputs: the JSON of every evaluated point, the Pareto plot and the best config.

:func:`write_outputs` builds the whole output directory in a temporary sibling directory and
renames it into place, so a run leaves either the complete directory or nothing.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from vta.isa.digest import is_output_or_empty, write_digest
from vta.isa.fileio import atomic_dir

from .explore import ExploreResult

REPORT = "explore.json"
PLOT = "pareto.png"
CONFIG = "vta_config.json"
#: The output's kind and format version in its digest (vta.isa.digest).
KIND, VERSION = "vta-explore", 1


def plot_pareto(result: ExploreResult) -> bytes:
    """A PNG: cycles against LUT, DSP and BRAM; every fitting point, the Pareto front, the
    board's default configuration and the best point."""
    import matplotlib  # deferred: matplotlib, only to draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: matplotlib, after its backend is set

    pts = result.measured
    front = result.pareto
    best = result.best
    ref = result.reference
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), sharey=True)
    for ax, kind in zip(axes, ("lut", "dsp", "bram")):
        ax.scatter([p.resources[kind] for p in pts], [p.cycles / 1e6 for p in pts], s=12,
                   color="0.7", label="evaluated (fits)")
        if front:
            fr = sorted(front, key=lambda p: p.resources[kind])
            ax.scatter([p.resources[kind] for p in fr], [p.cycles / 1e6 for p in fr], s=22,
                       color="tab:blue", label="Pareto front (cycles, LUT, DSP, BRAM)")
        if ref.cycles:
            ax.scatter([ref.resources[kind]], [ref.cycles / 1e6], marker="s", s=50,
                       color="tab:red", label=f"board default ({ref.cand.key})")
        if best is not None:
            ax.scatter([best.resources[kind]], [best.cycles / 1e6], marker="*", s=160,
                       color="tab:orange", label=f"best ({best.cand.key})")
        ax.axvline(result.budget[kind], color="k", ls="--", lw=0.8)
        ax.set_xlabel(f"{kind.upper()} (model; dashed: budget)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("cycles (millions)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle(f"AutoVTA: {result.network.name} on {result.board} "
                 f"({len(result.points)} evaluated, tuner {result.tuner})", fontsize=10)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def write_outputs(result: ExploreResult, out_dir: str | Path,
                  extra: dict[str, Any] | None = None) -> Path:
    """Write ``explore.json``, ``pareto.png``, (when a point was found) ``vta_config.json``
    and their digest into ``out_dir``, atomically. An existing directory is replaced only if
    it is wholly an earlier exploration's output (its digest holds) or is empty."""
    out = Path(out_dir)
    report = result.to_json()
    if extra:
        report.update(extra)
    png = plot_pareto(result)
    with atomic_dir(out, "exploration output", replaceable=is_explore_output_or_empty) as tmp:
        (tmp / REPORT).write_text(json.dumps(report, indent=1) + "\n")
        (tmp / PLOT).write_bytes(png)
        best = result.best
        if best is not None:
            # the bus width is part of the point (its configuration's BUS_WIDTH)
            (tmp / CONFIG).write_text(best.cand.cfg.to_json())
        write_digest(tmp, KIND, VERSION)
    return out


def is_explore_output_or_empty(d: Path) -> bool:
    """Wholly an earlier exploration's output (its digest holds: no file added, removed or
    changed) or an empty directory."""
    return is_output_or_empty(d, KIND, VERSION)
