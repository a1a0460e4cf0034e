"""The registry of tuning workloads: the :class:`Workload` record and :func:`register_workload`.

Operator templates (:mod:`vta.tune.vta_tasks`) register themselves here;
:mod:`vta.tune.workloads` parses ``NAME:key=value`` specs against what is registered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vta.isa import Config
from vta.isa.errors import VTAError


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
    #: the element count of each tensor the workload allocates (by name), from its keys
    tensors: Callable[[dict[str, int]], dict[str, int]] | None = None
    #: keys that may be 0 (paddings, clip bounds); every other key is at least 1
    may_be_zero: frozenset[str] = frozenset()

    def usage(self) -> str:
        return f"{self.name}:" + ",".join(f"{k}={v}" for k, v in self.keys)


WORKLOADS: dict[str, Workload] = {}


def register_workload(w: Workload) -> None:
    WORKLOADS[w.name] = w
