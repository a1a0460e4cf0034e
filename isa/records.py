"""Typed records with JSON round trips: one codec for every result the kit writes or reads.

A record is a frozen dataclass whose fields are JSON-shaped: ``int``, ``float``, ``str``,
``bool``, ``X | None``, ``X | Y`` (the first that fits), ``dict[str, X]``, ``list[X]``,
``tuple[X, ...]``, ``Any`` (kept as is), another dataclass of such fields (a record or not), or
:class:`~vta.isa.config.Config` (its vta_config.json keys). Subclass
:class:`JsonRecord`: ``to_json()`` gives plain JSON values (a field at ``None`` whose default is
``None`` is left out), ``from_json(data)`` checks every field's presence and type and raises the
record's ``error`` class with one line naming the field (``modules.load.busy must be an integer,
not 'x'``).

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Point(JsonRecord):
...     x: int
...     label: str | None = None
>>> Point.from_json(Point(3).to_json()) == Point(3), Point(3).to_json()
(True, {'x': 3})
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, TypeVar, Union

from .config import Config
from .errors import FileError, VTAError

R = TypeVar("R", bound="JsonRecord")


class JsonRecord:
    """Mixin of a frozen dataclass with ``to_json`` / ``from_json`` (see the module doc)."""

    #: The error a malformed record raises (a VTAError subclass).
    error: ClassVar[type[VTAError]] = FileError
    #: What the record is, for messages ("statistics", "module manifest").
    what: ClassVar[str] = "record"
    #: Keys ``to_json`` adds beyond the fields (derived values); ``from_json`` accepts them.
    derived: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (dicts, lists, numbers, strings, None)."""
        return _encode(self)

    @classmethod
    def from_json(cls: type[R], data: Any) -> R:
        """The record from ``to_json``'s form; a one-line ``error`` naming a bad field."""
        return _decode_record(cls, data, "", cls)


def _encode(value: Any) -> Any:
    if isinstance(value, Config):  # (a dataclass, but its file form is vta_config.json's)
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if v is None and f.default is None:
                continue
            out[f.name] = _encode(v)
        for key in getattr(type(value), "derived", ()):
            v = getattr(value, key)
            if v is not None:
                out[key] = _encode(v)
        return out
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    return value


def _fail(root: type[JsonRecord], path: str, problem: str) -> VTAError:
    where = f"field {path}" if path else "the record"
    return root.error(f"{root.what}: {where} {problem}")


def _decode_record(cls: type[Any], data: Any, path: str, root: type[JsonRecord]) -> Any:
    if not isinstance(data, dict):
        raise _fail(root, path, f"must be a JSON object, not {_show(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields) - set(getattr(cls, "derived", ())))
    if unknown:
        raise _fail(root, _join(path, unknown[0]), "is not expected (a file of another version "
                                                   "or kind?)")
    kwargs = {}
    for name, f in fields.items():
        sub = _join(path, name)
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise _fail(root, sub, "is missing")
            continue
        kwargs[name] = _decode(hints[name], data[name], sub, root)
    return cls(**kwargs)


def _decode(tp: Any, value: Any, path: str, root: type[JsonRecord]) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        kinds = [a for a in args if a is not type(None)]
        for k in kinds[:-1]:  # int | list[int]: the first kind that fits
            try:
                return _decode(k, value, path, root)
            except VTAError:
                pass
        return _decode(kinds[-1], value, path, root)
    if tp is Config:
        if not isinstance(value, dict):
            raise _fail(root, path, f"must be a JSON object, not {_show(value)}")
        return Config.from_dict(value, source=f"{root.what} field {path}")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _decode_record(tp, value, path, root)
    if origin is dict:
        if not isinstance(value, dict):
            raise _fail(root, path, f"must be a JSON object, not {_show(value)}")
        return {k: _decode(args[1], v, _join(path, k), root) for k, v in value.items()}
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise _fail(root, path, f"must be a list, not {_show(value)}")
        items = [_decode(args[0], v, f"{path}[{k}]", root) for k, v in enumerate(value)]
        return items if origin is list else tuple(items)
    return _scalar(tp, value, path, root)


_SCALARS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _scalar(tp: Any, value: Any, path: str, root: type[JsonRecord]) -> Any:
    ok = {int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
          str: lambda v: isinstance(v, str),
          bool: lambda v: isinstance(v, bool)}
    if tp not in ok:
        raise TypeError(f"a JsonRecord field of type {tp!r} is not supported")
    if not ok[tp](value):
        raise _fail(root, path, f"must be {_SCALARS[tp]}, not {_show(value)}")
    return float(value) if tp is float else value


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["JsonRecord"]
