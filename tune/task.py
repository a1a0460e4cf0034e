"""Tuning tasks: a registered template applied to a workload's arguments.

A template is registered under a name with :func:`template`; a :class:`Task` is that name plus
JSON-serialisable arguments, so it can be rebuilt in a worker process (or on a Dask worker) from
its name alone. The template's module is recorded and imported by the worker.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vta.isa.errors import VTAError

from .space import ConfigEntity, ConfigSpace

_TEMPLATES: dict[str, Callable[..., Any]] = {}
_MODULES: dict[str, str] = {}


class TaskError(VTAError):
    """An unknown template or invalid workload."""


def template(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(cfg, *args)`` as the template ``name``.

    In definition mode ``cfg`` is a :class:`ConfigSpace`; otherwise a :class:`ConfigEntity`.
    The function returns whatever the task's measurer knows how to evaluate.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        _TEMPLATES[name] = fn
        _MODULES[name] = fn.__module__
        return fn

    return deco


def get_template(name: str, module: str | None = None) -> Callable[..., Any]:
    if name not in _TEMPLATES and module:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise TaskError(f"cannot import module {module} of template {name!r}: {e}") from None
    if name not in _TEMPLATES:
        raise TaskError(f"unknown tuning template {name!r}; known: {', '.join(sorted(_TEMPLATES))}")
    return _TEMPLATES[name]


@dataclass
class Task:
    """A template and the arguments of one workload; ``space`` is computed on creation."""

    name: str
    args: tuple[Any, ...]
    module: str = ""
    space: ConfigSpace = field(default_factory=ConfigSpace, compare=False, repr=False)

    @classmethod
    def create(
        cls, name: str, args: tuple[Any, ...] | list[Any], module: str | None = None
    ) -> Task:
        fn = get_template(name, module)
        space = ConfigSpace()
        fn(space, *args)
        return cls(name, tuple(args), module or _MODULES[name], space)

    @property
    def key(self) -> str:
        """A stable workload key (used in logs to match records to tasks)."""
        return json.dumps([self.name, list(self.args)], separators=(",", ":"), default=str)

    def instantiate(self, entity: ConfigEntity) -> Any:
        return get_template(self.name, self.module)(entity, *self.args)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "args": list(self.args), "module": self.module}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Task:
        return cls.create(d["name"], tuple(d["args"]), d.get("module"))


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
    import numpy as np

    return np.concatenate(
        [task.space.features(index), np.asarray(fn(task, task.space.get(index)), dtype=np.float64)]
    )
