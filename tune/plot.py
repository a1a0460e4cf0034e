"""Plots of tuning logs: best cost so far against trials, one line per (workload, tuner)."""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

from vta.isa.errors import FileError
from vta.isa.fileio import write_atomic

from .log import read_log


def best_so_far_curves(path: str | Path) -> dict[tuple[str, str], list[float]]:
    """(workload, tuner) -> best cost after each trial, in log order (inf before the first)."""
    curves: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in read_log(path):
        c = curves[(r.workload, r.tuner or "?")]
        prev = c[-1] if c else float("inf")
        c.append(min(prev, r.cost) if r.ok else prev)
    return dict(curves)


def plot_log(path: str | Path, out: str | Path, *, title: str | None = None) -> int:
    """Write a PNG of the log's best-so-far curves; returns the number of curves."""
    import matplotlib  # deferred: matplotlib, only to draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: matplotlib, after its backend is set

    curves = best_so_far_curves(path)
    if not curves:
        raise FileError(f"tuning log {path} has no records to plot")
    workloads = sorted({w for w, _ in curves})
    fig, axes = plt.subplots(len(workloads), 1, figsize=(7, 3 * len(workloads)), squeeze=False)
    for ax, w in zip(axes[:, 0], workloads):
        for (wk, tuner), ys in sorted(curves.items()):
            if wk == w:
                ax.plot(range(1, len(ys) + 1), ys, label=tuner, drawstyle="steps-post")
        ax.set_xlabel("trials")
        ax.set_ylabel("best cost")
        ax.set_title(_short(w), fontsize=8)
        ax.legend()
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    write_atomic(out, buf.getvalue(), "plot")
    return len(curves)


def _short(workload: str, n: int = 90) -> str:
    return workload if len(workload) <= n else workload[: n - 3] + "..."
