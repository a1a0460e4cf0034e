"""Tuning tasks: a registered template applied to a workload's arguments.

A template is registered under a name with :func:`template`; a :class:`Task` is that name plus
JSON-serialisable arguments, so it can be rebuilt in a worker process (or on a Dask worker) from
its name alone. A task names a template of the kit's own registry, which this module holds and
never loads: the package (``vta/tune/__init__.py``) imports the kit's template modules, so every
process that imports anything of vta.tune (a worker, a tuning log read back) has them all; nothing
is imported by name from a record (a log is data).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from vta.isa.errors import VTAError

from .space import ConfigEntity, ConfigSpace

_TEMPLATES: dict[str, Callable[..., Any]] = {}


class TaskError(VTAError):
    """An unknown template or invalid workload."""


def template(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(cfg, *args)`` as the template ``name``.

    In definition mode ``cfg`` is a :class:`ConfigSpace`; otherwise a :class:`ConfigEntity`.
    The function returns whatever the task's measurer knows how to evaluate.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        _TEMPLATES[name] = fn
        return fn

    return deco


def get_template(name: str) -> Callable[..., Any]:
    """The template registered as ``name``; an unknown name is a TaskError naming the known
    ones."""
    if not isinstance(name, str):
        raise TaskError(f"a tuning template is named by a string, not {name!r}")
    if name not in _TEMPLATES:
        raise TaskError(f"unknown tuning template {name!r}; known: {', '.join(sorted(_TEMPLATES))}")
    return _TEMPLATES[name]


@dataclass
class Task:
    """A template and the arguments of one workload; ``space`` is computed on creation."""

    name: str
    args: tuple[Any, ...]
    space: ConfigSpace = field(default_factory=ConfigSpace, compare=False, repr=False)

    @classmethod
    def create(cls, name: str, args: tuple[Any, ...] | list[Any]) -> Task:
        fn = get_template(name)
        space = ConfigSpace()
        fn(space, *args)
        return cls(name, tuple(args), space)

    @property
    def key(self) -> str:
        """A stable workload key (used in logs to match records to tasks)."""
        return json.dumps([self.name, list(self.args)], separators=(",", ":"), default=str)

    def instantiate(self, entity: ConfigEntity) -> Any:
        return get_template(self.name)(entity, *self.args)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "args": list(self.args)}

    @classmethod
    def from_json(cls, d: Any) -> Task:
        """The task a record names: a template of the kit's registry and its arguments (a
        ``module`` key, written by earlier versions, is ignored: nothing is imported by name
        from a record)."""
        if not isinstance(d, dict) or not isinstance(d.get("args"), list):
            raise TaskError(f"a task is an object with a template name and a list of args, "
                            f"not {str(d)[:80]}")
        return cls.create(d.get("name"), tuple(d["args"]))


_FEATURES: dict[str, Callable[[Task, ConfigEntity], Any]] = {}


def features(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(task, entity) -> 1-D array``: cost-model features for template ``name``
    (e.g. from the lowered loop IR). Without one, the knob values are the features."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        _FEATURES[name] = fn
        return fn

    return deco


def task_features(task: Task, index: int) -> Any:
    fn = _FEATURES.get(task.name)
    if fn is None:
        return task.space.features(index)
    return np.concatenate(
        [task.space.features(index), np.asarray(fn(task, task.space.get(index)), dtype=np.float64)]
    )
