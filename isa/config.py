"""The one configuration object: TVM's ``vta_config.json`` parameters and everything derived.

A :class:`Config` is immutable and passed explicitly to every layer of the kit. Derived sizes follow
TVM's ``hw_spec_const.h``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import ConfigError, FileError
from .fileio import SMALL_INPUT, loads_json, read_bytes, write_atomic
from .layout import Layouts, build_layouts

#: The nine parameters of vta_config.json, in TVM's order.
PARAMS = (
    "LOG_INP_WIDTH",
    "LOG_WGT_WIDTH",
    "LOG_ACC_WIDTH",
    "LOG_BATCH",
    "LOG_BLOCK",
    "LOG_UOP_BUFF_SIZE",
    "LOG_INP_BUFF_SIZE",
    "LOG_WGT_BUFF_SIZE",
    "LOG_ACC_BUFF_SIZE",
)

# (min, max) accepted for each parameter, with the reason shown when rejected.
_RANGES: dict[str, tuple[int, int, str]] = {
    "LOG_INP_WIDTH": (3, 4, "inputs are 8- or 16-bit integers"),
    "LOG_WGT_WIDTH": (3, 4, "weights are 8- or 16-bit integers"),
    "LOG_ACC_WIDTH": (4, 5, "accumulators are 16- or 32-bit integers"),
    "LOG_BATCH": (0, 4, "batch is 1 to 16"),
    "LOG_BLOCK": (1, 6, "block is 2 to 64"),
    "LOG_UOP_BUFF_SIZE": (2, 20, "buffer sizes are 2^2 B to 1 MiB"),
    "LOG_INP_BUFF_SIZE": (2, 24, "buffer sizes are 2^2 B to 16 MiB"),
    "LOG_WGT_BUFF_SIZE": (2, 24, "buffer sizes are 2^2 B to 16 MiB"),
    "LOG_ACC_BUFF_SIZE": (2, 24, "buffer sizes are 2^2 B to 16 MiB"),
}

#: Width of the SRAM address fields of LOAD/STORE (sram_base); no buffer may be deeper.
SRAM_ADDR_BITS = 16
#: The key of vta_config.json that holds the AXI data bus width (bits) of the core
#: (:attr:`Config.BUS_WIDTH`). Not one of TVM's nine parameters (TVM fixes the bus per target):
#: a file without it has the 64-bit bus, and it is written only when it is not 64, so a default
#: configuration's file is TVM's.
BUS_WIDTH_KEY = "BUS_WIDTH"
BUS_WIDTHS = (64, 128)
DEFAULT_BUS_WIDTH = 64


def check_param(name: str, value: Any) -> None:
    """A ConfigError unless ``value`` is a valid value of parameter ``name`` on its own (the
    constraints between parameters are :class:`Config`'s)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, not {value!r}")
    lo, hi, why = _RANGES[name]
    if not lo <= value <= hi:
        raise ConfigError(f"{name}={value} is out of range [{lo}, {hi}] ({why})")


@dataclass(frozen=True)
class Config:
    """VTA hardware parameters (TVM's vta_config.json) and derived quantities."""

    LOG_INP_WIDTH: int = 3
    LOG_WGT_WIDTH: int = 3
    LOG_ACC_WIDTH: int = 5
    LOG_BATCH: int = 0
    LOG_BLOCK: int = 4
    LOG_UOP_BUFF_SIZE: int = 15
    LOG_INP_BUFF_SIZE: int = 15
    LOG_WGT_BUFF_SIZE: int = 18
    LOG_ACC_BUFF_SIZE: int = 17
    #: Width in bits of the core's AXI memory bus (one of :data:`BUS_WIDTHS`): the core's data
    #: port, tsim's and the performance model's beat, the boards' memory port.
    BUS_WIDTH: int = DEFAULT_BUS_WIDTH
    #: Keys of the JSON file that are not hardware parameters (TARGET, HW_VER, ...), kept as-is.
    extra: tuple[tuple[str, Any], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in PARAMS:
            check_param(name, getattr(self, name))
        if max(self.LOG_INP_WIDTH, self.LOG_WGT_WIDTH) > self.LOG_ACC_WIDTH:
            raise ConfigError(
                f"LOG_ACC_WIDTH={self.LOG_ACC_WIDTH} must be at least LOG_INP_WIDTH and "
                f"LOG_WGT_WIDTH ({self.LOG_INP_WIDTH}, {self.LOG_WGT_WIDTH})")
        for buf in ("uop", "inp", "wgt", "acc"):
            log_depth = getattr(self, f"log_{buf}_depth")
            size_key = f"LOG_{buf.upper()}_BUFF_SIZE"
            if log_depth < 0:
                raise ConfigError(
                    f"{size_key}={getattr(self, size_key)} is smaller than one {buf} element "
                    f"({getattr(self, f'{buf}_elem_bytes')} bytes); raise it to at least "
                    f"{getattr(self, size_key) - log_depth}")
            if log_depth > SRAM_ADDR_BITS:
                raise ConfigError(
                    f"{size_key}={getattr(self, size_key)} gives a {buf} buffer of 2^{log_depth} "
                    f"entries, beyond the {SRAM_ADDR_BITS}-bit sram_base field; lower it to at "
                    f"most {getattr(self, size_key) - log_depth + SRAM_ADDR_BITS}")
        bus = self.BUS_WIDTH
        if isinstance(bus, bool) or not isinstance(bus, int) or bus not in BUS_WIDTHS:
            raise ConfigError(f"{BUS_WIDTH_KEY}={bus!r} is not a bus width; use 64 or 128")
        # The instruction and micro-op layouts must fit 128 and 32 bits.
        build_layouts(self)

    # ----------------------------------------------------------------- file format
    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> Config:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a JSON object, got {type(data).__name__}")
        missing = [p for p in PARAMS if p not in data]
        if missing:
            raise ConfigError(f"{source}: missing key(s) {', '.join(missing)}")
        extra = tuple((k, v) for k, v in data.items() if k not in (*PARAMS, BUS_WIDTH_KEY))
        bus = data.get(BUS_WIDTH_KEY, DEFAULT_BUS_WIDTH)
        try:
            return cls(**{p: data[p] for p in PARAMS}, BUS_WIDTH=bus, extra=extra)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None

    @classmethod
    def from_json(cls, path: str | Path) -> Config:
        """Read TVM's vta_config.json format (extra keys such as TARGET are kept)."""
        path = Path(path)
        try:
            text = read_bytes(path, "config file", limit=SMALL_INPUT).decode("utf-8")
            data = loads_json(text, f"config file {path}")
        except FileError as e:
            raise ConfigError(str(e)) from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"cannot read config file {path}: {e}") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
        return cls.from_dict(data, source=str(path))

    @classmethod
    def preset(cls, name: str) -> Config:
        """A named preset shipped with the kit (see :func:`preset_names`)."""
        names = preset_names()
        if name not in names:
            raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(names)}")
        text = resources.files("vta.isa.presets").joinpath(f"{name}.json").read_text()
        return cls.from_dict(json.loads(text), source=f"preset {name}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = dict(self.extra)
        d.update({p: getattr(self, p) for p in PARAMS})
        if self.BUS_WIDTH != DEFAULT_BUS_WIDTH:
            d[BUS_WIDTH_KEY] = self.BUS_WIDTH
        return d

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        if path is not None:
            write_atomic(path, text, "config file")  # all or nothing, FileError on failure
        return text

    def replace(self, **changes: Any) -> Config:
        return replace(self, **changes)

    @property
    def bus_width(self) -> int:
        """The core's AXI data bus width in bits (:attr:`BUS_WIDTH`)."""
        return self.BUS_WIDTH

    @property
    def bus_bytes(self) -> int:
        """The bus width in bytes: one data beat."""
        return self.BUS_WIDTH // 8

    def with_bus_width(self, bits: int) -> Config:
        """This configuration with a ``bits``-wide bus."""
        return replace(self, BUS_WIDTH=bits)

    @property
    def params(self) -> dict[str, int]:
        """TVM's nine parameters (not the bus width: :attr:`hw_params` has it too)."""
        return {p: getattr(self, p) for p in PARAMS}

    @property
    def hw_params(self) -> dict[str, int]:
        """Every hardware parameter: TVM's nine and ``BUS_WIDTH``."""
        return {**self.params, BUS_WIDTH_KEY: self.BUS_WIDTH}

    # ------------------------------------------------------------------- derived
    @property
    def inp_width(self) -> int:
        return 1 << self.LOG_INP_WIDTH

    @property
    def wgt_width(self) -> int:
        return 1 << self.LOG_WGT_WIDTH

    @property
    def acc_width(self) -> int:
        return 1 << self.LOG_ACC_WIDTH

    @property
    def out_width(self) -> int:
        return self.inp_width

    @property
    def batch(self) -> int:
        return 1 << self.LOG_BATCH

    @property
    def block_in(self) -> int:
        return 1 << self.LOG_BLOCK

    @property
    def block_out(self) -> int:
        return 1 << self.LOG_BLOCK

    @property
    def block(self) -> int:
        return 1 << self.LOG_BLOCK

    # log2 of the number of entries of each on-chip buffer
    @property
    def log_uop_depth(self) -> int:
        return self.LOG_UOP_BUFF_SIZE - 2

    @property
    def log_inp_depth(self) -> int:
        return self.LOG_INP_BUFF_SIZE - self.LOG_BATCH - self.LOG_BLOCK - self.LOG_INP_WIDTH + 3

    @property
    def log_wgt_depth(self) -> int:
        return self.LOG_WGT_BUFF_SIZE - 2 * self.LOG_BLOCK - self.LOG_WGT_WIDTH + 3

    @property
    def log_acc_depth(self) -> int:
        return self.LOG_ACC_BUFF_SIZE - self.LOG_BATCH - self.LOG_BLOCK - self.LOG_ACC_WIDTH + 3

    @property
    def log_out_depth(self) -> int:
        return self.log_acc_depth

    @property
    def uop_depth(self) -> int:
        return 1 << self.log_uop_depth

    @property
    def inp_depth(self) -> int:
        return 1 << self.log_inp_depth

    @property
    def wgt_depth(self) -> int:
        return 1 << self.log_wgt_depth

    @property
    def acc_depth(self) -> int:
        return 1 << self.log_acc_depth

    @property
    def out_depth(self) -> int:
        return self.acc_depth

    # element sizes in bytes
    @property
    def uop_elem_bytes(self) -> int:
        return 4

    @property
    def inp_elem_bytes(self) -> int:
        return self.batch * self.block_in * self.inp_width // 8

    @property
    def wgt_elem_bytes(self) -> int:
        return self.block_out * self.block_in * self.wgt_width // 8

    @property
    def acc_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.acc_width // 8

    @property
    def out_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.out_width // 8

    @property
    def macs_per_cycle(self) -> int:
        """Peak multiply-accumulates per cycle of the GEMM core."""
        return self.batch * self.block_in * self.block_out

    def elem_bytes(self, memory_type: int) -> int:
        """Bytes of one element of the given memory type (a ``MemType`` or its value)."""
        return self._elem_bytes[memory_type]

    def depth(self, memory_type: int) -> int:
        """Entries of the SRAM buffer for the given memory type."""
        return self._depths[memory_type]

    @cached_property
    def _elem_bytes(self) -> tuple[int, ...]:
        # by MemType value (a hot lookup of the code generator and the performance model)
        return (self.uop_elem_bytes, self.wgt_elem_bytes, self.inp_elem_bytes,
                self.acc_elem_bytes, self.out_elem_bytes)

    @cached_property
    def _depths(self) -> tuple[int, ...]:
        return (self.uop_depth, self.wgt_depth, self.inp_depth, self.acc_depth,
                self.out_depth)

    @cached_property
    def layouts(self) -> Layouts:
        """The instruction and micro-op field layouts for this configuration."""
        return build_layouts(self)

    def describe(self) -> dict[str, Any]:
        """Parameters plus derived quantities, as shown by ``vta config show``."""
        return {
            "params": self.hw_params,
            "derived": {
                "batch": self.batch, "block_in": self.block_in, "block_out": self.block_out,
                "inp_width": self.inp_width, "wgt_width": self.wgt_width,
                "acc_width": self.acc_width, "out_width": self.out_width,
                "uop_depth": self.uop_depth, "inp_depth": self.inp_depth,
                "wgt_depth": self.wgt_depth, "acc_depth": self.acc_depth,
                "uop_elem_bytes": self.uop_elem_bytes, "inp_elem_bytes": self.inp_elem_bytes,
                "wgt_elem_bytes": self.wgt_elem_bytes, "acc_elem_bytes": self.acc_elem_bytes,
                "out_elem_bytes": self.out_elem_bytes, "macs_per_cycle": self.macs_per_cycle,
            },
        }


def preset_names() -> list[str]:
    return sorted(
        p.name[:-5] for p in resources.files("vta.isa.presets").iterdir()
        if p.name.endswith(".json"))


DEFAULT = Config()

__all__ = ["Config", "DEFAULT", "PARAMS", "preset_names", "SRAM_ADDR_BITS", "BUS_WIDTHS",
           "BUS_WIDTH_KEY", "DEFAULT_BUS_WIDTH"]
