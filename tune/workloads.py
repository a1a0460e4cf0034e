"""Workload specs for ``vta tune --workload``: ``NAME:key=value,key=value``.

Each registered workload maps its keys (with defaults) onto a tuning template's arguments, e.g.
``conv2d:H=56,W=56,CI=64,CO=64,K=3,S=1,P=1``. Operator templates register themselves here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vta.isa import Config
from vta.isa.errors import VTAError

from .task import Task


class WorkloadError(VTAError):
    """A workload spec that cannot be parsed or is not known."""


@dataclass(frozen=True)
class Workload:
    name: str
    template: str
    keys: tuple[tuple[str, int], ...]  #: (key, default) in template-argument order
    doc: str = ""
    #: builds the template's argument tuple from the parsed keys and the Config
    make_args: Callable[[dict[str, int], Config], tuple[Any, ...]] | None = None

    def usage(self) -> str:
        return f"{self.name}:" + ",".join(f"{k}={v}" for k, v in self.keys)


WORKLOADS: dict[str, Workload] = {}


def register_workload(w: Workload) -> None:
    WORKLOADS[w.name] = w


def _load_builtin() -> None:
    # the operator templates register themselves when their module is imported (it imports
    # the compiler only when a template runs)
    from . import vta_tasks  # noqa: F401


def known_workloads() -> dict[str, Workload]:
    _load_builtin()
    return dict(WORKLOADS)


def parse_workload(spec: str, cfg: Config) -> Task:
    _load_builtin()
    name, _, rest = spec.partition(":")
    w = WORKLOADS.get(name.strip())
    if w is None:
        known = ", ".join(x.usage() for x in WORKLOADS.values()) or "none registered"
        raise WorkloadError(f"unknown workload {name!r}; known: {known}")
    values = dict(w.keys)
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, val = item.partition("=")
        if not eq:
            raise WorkloadError(f"workload {spec!r}: expected key=value, got {item!r}")
        if key not in values:
            raise WorkloadError(f"workload {name}: unknown key {key!r}; keys are "
                                f"{', '.join(values)}")
        try:
            values[key] = int(val, 0)
        except ValueError:
            raise WorkloadError(f"workload {name}: {key}={val!r} is not an integer") from None
        if values[key] < 0:
            raise WorkloadError(f"workload {name}: {key}={val} must not be negative")
    _check_bounds(name, values)
    args = w.make_args(values, cfg) if w.make_args else tuple(values.values())
    return Task.create(w.template, args)


#: keys that count or size something: at least 1 (a padding, a clip bound may be 0)
_SIZES = ("N", "H", "W", "C", "CI", "CO", "K", "S", "M")  # G: its own message


def _check_bounds(name: str, v: dict[str, int]) -> None:
    """Sizes at least 1, and no tensor of the workload (input, weight, output; int32 values)
    beyond the bound of a model's tensors, before anything is allocated for it."""
    from vta.compiler.graph.validate import MAX_TENSOR_BYTES
    from vta.isa.fileio import format_size

    for key in _SIZES:
        if key in v and v[key] < 1:
            raise WorkloadError(f"workload {name}: {key}={v[key]} must be at least 1")
    n, h, w = v.get("N", 1), v.get("H", 1), v.get("W", 1)
    ci, co = v.get("CI", v.get("C", 1)), v.get("CO", v.get("C", 1))
    grow = v.get("S", 1) ** 2 if name == "conv2d_transpose" else 1
    tensors = {"input": n * ci * h * w, "output": n * co * h * w * grow,
               "weight": co * ci * v.get("K", 1) ** 2 if "CI" in v else 0}
    if name == "dense":
        tensors = {"input": n * v["K"], "weight": v["K"] * v["M"], "output": n * v["M"]}
    for what, count in tensors.items():
        if count * 4 > MAX_TENSOR_BYTES:
            raise WorkloadError(f"workload {name}: its {what} of {count} values would take "
                                f"{format_size(count * 4)}, more than the "
                                f"{format_size(MAX_TENSOR_BYTES)} a tensor may have")
