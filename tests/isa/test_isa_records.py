"""The JSON record codec (vta.isa.records) every typed result uses: what it writes, what it reads
back, and the one-line error naming the field of a malformed record. Reference: hand-written
JSON values."""

from __future__ import annotations

import doctest
import json
from dataclasses import dataclass

import pytest
import vta.isa.records
import vta.isa.stats
from vta.isa import Config, FileError
from vta.isa.records import JsonRecord


class ThingError(FileError):
    pass


@dataclass(frozen=True)
class Pair:  # a plain (non-record) dataclass inside a record
    a: int
    b: float | list[float] | None = None


@dataclass(frozen=True)
class Thing(JsonRecord):
    error = ThingError
    what = "thing file"
    derived = ("double",)

    name: str
    shape: tuple[int, ...]
    cfg: Config
    pairs: dict[str, Pair]
    flag: bool = False
    note: str | None = None

    @property
    def double(self) -> int:
        return 2 * len(self.shape)


def _thing() -> Thing:
    return Thing("t", (1, 2, 3), Config.preset("small"), {"x": Pair(1, [0.5, 2.0]), "y": Pair(2)})


@pytest.mark.unit
def test_written_form_and_round_trip() -> None:
    t = _thing()
    raw = t.to_json()
    assert raw == {"name": "t", "shape": [1, 2, 3], "cfg": Config.preset("small").to_dict(),
                   "pairs": {"x": {"a": 1, "b": [0.5, 2.0]}, "y": {"a": 2}}, "flag": False,
                   "double": 6}
    assert Thing.from_json(json.loads(json.dumps(raw))) == t
    assert Thing.from_json({**raw, "note": None}) == t  # an explicit null is the default
    assert Thing.from_json({**raw, "pairs": {"z": {"a": 0, "b": 3}}}).pairs["z"].b == 3.0


@pytest.mark.unit
@pytest.mark.parametrize("change, message", [
    ({"name": 3}, "field name must be a string, not 3"),
    ({"shape": [1, "2"]}, "field shape[1] must be an integer, not '2'"),
    ({"flag": 1}, "field flag must be true or false, not 1"),
    ({"pairs": {"x": {"b": 1.0}}}, "field pairs.x.a is missing"),
    ({"pairs": {"x": {"a": 1, "b": "wide"}}}, "field pairs.x.b must be a list, not 'wide'"),
    ({"cfg": "pynq"}, "field cfg must be a JSON object, not 'pynq'"),
    ({"colour": "red"}, "field colour is not expected (a file of another version or kind?)"),
])
def test_errors_name_the_field(change: dict, message: str) -> None:
    raw = {**_thing().to_json(), **change}
    with pytest.raises(ThingError) as e:
        Thing.from_json(raw)
    assert str(e.value) == f"thing file: {message}"


@pytest.mark.unit
def test_a_bad_config_is_a_config_error() -> None:
    raw = _thing().to_json()
    raw["cfg"] = {**raw["cfg"], "LOG_BLOCK": 9}
    with pytest.raises(vta.isa.ConfigError):
        Thing.from_json(raw)


@pytest.mark.unit
@pytest.mark.parametrize("module", [vta.isa.records, vta.isa.stats])
def test_module_examples(module) -> None:  # noqa: ANN001
    assert doctest.testmod(module).failed == 0
