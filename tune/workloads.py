"""Workload specs for ``vta tune --workload``: ``NAME:key=value,key=value``.

Each registered workload maps its keys (with defaults) onto a tuning template's arguments, e.g.
``conv2d:H=56,W=56,CI=64,CO=64,K=3,S=1,P=1``. Operator templates register themselves in
:mod:`vta.tune.workload_registry`; importing this module loads the built-in ones.
"""

from __future__ import annotations

from vta.compiler.graph.validate import MAX_TENSOR_BYTES
from vta.isa import Config
from vta.isa.fileio import format_size

from . import vta_tasks  # noqa: F401  (registers the built-in operator templates)
from .task import Task
from .workload_registry import WORKLOADS, Workload, WorkloadError


def known_workloads() -> dict[str, Workload]:
    return dict(WORKLOADS)


def parse_workload(spec: str, cfg: Config) -> Task:
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
    check_sizes(w, values)
    args = w.make_args(values, cfg) if w.make_args else tuple(values.values())
    return Task.create(w.template, args)


def check_sizes(w: Workload, values: dict[str, int]) -> None:
    """Every key but ``w.may_be_zero`` at least 1, and no tensor of the workload above
    the bound of a model's tensors, :data:`vta.compiler.graph.validate.MAX_TENSOR_BYTES`,
    counting 4 bytes (the accumulators' int32) a value (a WorkloadError naming it), before
    anything is allocated: a conv2d of H=W=100000 would otherwise allocate until the
    machine's memory is gone."""
    for key, v in values.items():
        if v < 1 and key not in w.may_be_zero:
            raise WorkloadError(f"workload {w.name}: {key}={v} must be at least 1")
    for tensor, count in (w.tensors(values) if w.tensors else {}).items():
        if count < 1:
            raise WorkloadError(f"workload {w.name}: its {tensor} would be empty (a kernel "
                                "larger than the padded input?)")
        if count * 4 > MAX_TENSOR_BYTES:
            raise WorkloadError(f"workload {w.name}: its {tensor} of {count} values would take "
                                f"{format_size(count * 4)}, more than the "
                                f"{format_size(MAX_TENSOR_BYTES)} a tensor may have; make the "
                                "workload smaller")
