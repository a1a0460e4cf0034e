"""A one-line progress bar for long runs (tuning, exploration), written to stderr."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class ProgressBar:
    def __init__(self, total: int, label: str = "", *, stream: TextIO | None = None,
                 width: int = 28, min_interval: float = 0.1) -> None:
        self.total = max(1, total)
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.min_interval = min_interval
        self._last = 0.0
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def update(self, done: int, extra: str = "", *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.min_interval and done < self.total:
            return
        self._last = now
        frac = min(1.0, done / self.total)
        bar = "#" * int(frac * self.width) + "-" * (self.width - int(frac * self.width))
        line = f"{self.label} [{bar}] {done}/{self.total} {extra}"
        if self._tty:
            self.stream.write("\r" + line[:200].ljust(100))
        elif force or done >= self.total:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()

    def __call__(self, info: dict[str, Any]) -> None:
        """Use as a tuner progress callback."""
        best = info.get("best_cost")
        best_s = f"best {best:,.0f}" if best is not None else "best -"
        self.update(info["trials"], f"{best_s}  {info.get('rate', 0):.1f} trials/s  "
                                    f"errors {info.get('errors', 0)}")
