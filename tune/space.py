"""AutoTVM-style search spaces: knobs defined by a template, configurations as indexed entities.

A template is a function ``template(cfg, *args)`` that calls ``cfg.define_split(...)`` /
``cfg.define_knob(...)`` and then reads ``cfg["name"]``. Run once with a :class:`ConfigSpace` it
records the space; run with a :class:`ConfigEntity` the same calls are no-ops and the reads give
that configuration's values. Every configuration has an index in ``range(len(space))``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from vta.isa.errors import VTAError


class SpaceError(VTAError):
    """An invalid knob definition or configuration."""


def _factorizations(extent: int, parts: int, max_factor: int | None) -> list[tuple[int, ...]]:
    """All ordered tuples of ``parts`` positive integers whose product is ``extent``."""
    if parts == 1:
        return [(extent,)] if max_factor is None or extent <= max_factor else []
    out = []
    for d in range(1, extent + 1):
        if extent % d == 0 and (max_factor is None or d <= max_factor):
            out += [(d, *rest) for rest in _factorizations(extent // d, parts - 1, max_factor)]
    return out


@dataclass(frozen=True)
class Knob:
    """One dimension of a space: a name and its candidate values."""

    name: str
    candidates: tuple[Any, ...]
    kind: str = "knob"  # "split" or "knob"

    def features(self, value: Any) -> list[float]:
        if self.kind == "split":
            return [math.log2(v) for v in value]
        if isinstance(value, bool | int | float) and not isinstance(value, str):
            return [float(value)]
        return [float(self.candidates.index(value))]


class ConfigSpace:
    """The space recorded by running a template in definition mode."""

    def __init__(self) -> None:
        self.knobs: dict[str, Knob] = {}
        self._constraints: list[Callable[[ConfigEntity], bool]] = []

    # ------------------------------------------------------------- definition API
    def define_split(
        self,
        name: str,
        extent: int,
        *,
        num_outputs: int = 2,
        max_factor: int | None = None,
        policy: str = "factors",
    ) -> None:
        """Split an axis of ``extent`` into ``num_outputs`` factors whose product is ``extent``."""
        if not isinstance(extent, int) or extent < 1:
            raise SpaceError(f"split {name!r}: extent must be a positive integer, not {extent!r}")
        if policy == "power2":
            cands = [
                c
                for c in _factorizations(extent, num_outputs, max_factor)
                if all(v & (v - 1) == 0 for v in c[1:])
            ]
        elif policy == "factors":
            cands = _factorizations(extent, num_outputs, max_factor)
        else:
            raise SpaceError(
                f"split {name!r}: policy must be 'factors' or 'power2', not {policy!r}"
            )
        self._add(Knob(name, tuple(cands), "split"))

    def define_knob(self, name: str, candidates: Sequence[Any]) -> None:
        if not candidates:
            raise SpaceError(f"knob {name!r} has no candidates")
        self._add(Knob(name, tuple(candidates), "knob"))

    def add_constraint(self, check: Callable[[ConfigEntity], bool]) -> None:
        """Configurations for which ``check`` is false are invalid (filtered before measuring)."""
        self._constraints.append(check)

    def _add(self, knob: Knob) -> None:
        if not knob.candidates:
            raise SpaceError(f"knob {knob.name!r} has no candidates")
        old = self.knobs.get(knob.name)
        if old is not None and old != knob:
            raise SpaceError(f"knob {knob.name!r} is defined twice with different candidates")
        self.knobs[knob.name] = knob

    def __getitem__(self, name: str) -> Any:
        # during definition a template may read a knob: give its first candidate
        return self.knobs[name].candidates[0]

    # ------------------------------------------------------------------ indexing
    @property
    def dims(self) -> list[int]:
        return [len(k.candidates) for k in self.knobs.values()]

    def __len__(self) -> int:
        return math.prod(self.dims) if self.knobs else 1

    def digits(self, index: int) -> list[int]:
        if not 0 <= index < len(self):
            raise SpaceError(
                f"configuration index {index} is outside the space (0..{len(self) - 1})"
            )
        out = []
        for d in self.dims:
            out.append(index % d)
            index //= d
        return out

    def index_of_digits(self, digits: Sequence[int]) -> int:
        index, mul = 0, 1
        for dg, d in zip(digits, self.dims):
            index += dg * mul
            mul *= d
        return index

    def get(self, index: int) -> ConfigEntity:
        values = {
            k.name: k.candidates[dg] for k, dg in zip(self.knobs.values(), self.digits(index))
        }
        return ConfigEntity(index, values, self)

    def from_values(self, values: Mapping[str, Any]) -> ConfigEntity:
        digits = []
        for k in self.knobs.values():
            v = values[k.name]
            v = tuple(v) if k.kind == "split" else v
            if v not in k.candidates:
                raise SpaceError(f"value {v!r} is not a candidate of knob {k.name!r}")
            digits.append(k.candidates.index(v))
        return self.get(self.index_of_digits(digits))

    def is_valid(self, index: int) -> bool:
        entity = self.get(index)
        return all(c(entity) for c in self._constraints)

    def __iter__(self) -> Iterator[ConfigEntity]:
        for i in range(len(self)):
            yield self.get(i)

    def valid_indices(self, limit: int = 1_000_000) -> list[int]:
        if len(self) > limit:
            raise SpaceError(f"space of {len(self)} configurations is too large to enumerate")
        return [i for i in range(len(self)) if self.is_valid(i)]

    def random_valid(self, rng: np.random.Generator, *, tries: int = 1000) -> int | None:
        for _ in range(tries):
            i = int(rng.integers(len(self)))
            if self.is_valid(i):
                return i
        return None

    def neighbours(self, index: int) -> Iterator[int]:
        """Indices that differ from ``index`` in exactly one knob."""
        digits = self.digits(index)
        for pos, d in enumerate(self.dims):
            for alt in range(d):
                if alt != digits[pos]:
                    nd = list(digits)
                    nd[pos] = alt
                    yield self.index_of_digits(nd)

    def features(self, index: int) -> np.ndarray:
        """Knob features: log2 of split factors, knob values (or candidate positions)."""
        e = self.get(index)
        return np.array(
            list(
                itertools.chain.from_iterable(
                    k.features(e.values[k.name]) for k in self.knobs.values()
                )
            ),
            dtype=np.float64,
        )

    def describe(self) -> str:
        rows = [
            f"  {k.name}: {len(k.candidates)} candidates ({k.kind})" for k in self.knobs.values()
        ]
        return f"space of {len(self)} configurations\n" + "\n".join(rows)


@dataclass(frozen=True)
class ConfigEntity(Mapping):
    """One configuration: its index in the space and the value of every knob."""

    index: int
    values: dict[str, Any]
    space: ConfigSpace | None = field(default=None, compare=False, repr=False)

    # definition calls are no-ops on an entity, so one template serves both modes
    def define_split(self, name: str, extent: int, **_: Any) -> None:
        if name not in self.values:
            raise SpaceError(f"configuration has no knob {name!r}")

    def define_knob(self, name: str, candidates: Sequence[Any]) -> None:
        if name not in self.values:
            raise SpaceError(f"configuration has no knob {name!r}")

    def add_constraint(self, check: Callable[[ConfigEntity], bool]) -> None:
        pass

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "values": {k: list(v) if isinstance(v, tuple) else v for k, v in self.values.items()},
        }
