"""Opening a device by name: the backend registry's loader.

:mod:`vta.runtime.backends` is data (names, kinds, the (module, class) of each device); this module
imports the device classes it names (:mod:`vta.runtime.device`'s simulators, the board drivers)
when one is opened, and the platform plugins of "KIND:NAME" targets. The device modules import
the registry, never this loader, so the import graph has no circle.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from vta.isa import Config, VTAError

from . import backends
from .device import Device
from .errors import DeviceUnavailableError

#: Entry-point group of platform plugins: ``open("KIND:NAME")`` loads the entry point KIND and
#: calls it with (NAME, config, **options) for a platform (``mmio``, ``allocate``) that the PYNQ
#: driver runs on. vta.boards provides ``virtual`` (a board's generated top under Verilator).
PLATFORM_GROUP = "vta_kit.platforms"  # (an entry-point group, named after the distribution)


#: The device names :func:`open` accepts (besides "KIND:NAME"), from the backend registry.
TARGETS = backends.devices()


def _device_class(ref: tuple[str, str], target: str) -> type[Device]:
    """The device class a registry entry names as (module, class)."""
    module, name = ref
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as e:
        raise DeviceUnavailableError(f"the {target} device is not available: cannot import "
                                     f"{module} ({e})") from None


def _config(config: Config | str | Path | None) -> Config:
    if config is None:
        return Config()
    if isinstance(config, Config):
        return config
    text = str(config)
    if not text.endswith(".json") and not Path(text).exists():
        return Config.preset(text)
    return Config.from_json(text)


def _plugin_platform(kind: str, name: str, cfg: Config, opts: dict[str, Any]) -> Any:
    from importlib.metadata import entry_points  # deferred: ~120 ms, plugins only

    found = [e for e in entry_points(group=PLATFORM_GROUP) if e.name == kind]
    if not found:
        raise DeviceUnavailableError(f"unknown device {kind}:{name}: no platform {kind!r} is "
                                     f"installed (group {PLATFORM_GROUP})")
    try:
        return found[0].load()(name, cfg, **opts)
    except VTAError as e:
        raise DeviceUnavailableError(f"cannot open {kind}:{name}: {e}") from None


def open(target: str, config: Config | str | Path | None = None, *,  # noqa: A001
         arena_size: int | None = None, **opts: Any) -> Device:
    """Open a device: one of :data:`TARGETS` (the backend registry's devices: "fsim", "rtl",
    "tsim", "perf", "pynq", "de10-nano", "ulx3s") or "virtual:BOARD".

    "virtual:BOARD" (e.g. "virtual:pynq-z1", "virtual:de10-nano", "virtual:ulx3s-85f") is the
    board's device (PYNQ's, the DE10-Nano's, the ULX3S's) on a virtual board: the board's
    generated top Verilog under Verilator (:mod:`vta.boards.virtual`, needs verilator); its
    options (``mem_bytes=``, ``latency=``, ``error_response=``, ``poll_cycles=``) go to the
    board, ``timeout=`` to the driver.

    ``config`` is a :class:`Config`, a preset name or a vta_config.json path (default: the PYNQ
    configuration). ``arena_size`` is the DRAM arena in bytes; other options go to the device
    (``arena_base=`` for simulators; ``order=``/``trace=`` for fsim; for pynq ``bitstream=``,
    ``ip_name=``, ``platform=`` (a register-level model for testing), ``timeout=``; for
    de10-nano ``udmabuf=``, ``platform=``, ``timeout=``; for ulx3s ``port=`` (serial port,
    needs pyserial), ``platform=``, ``timeout=``; its arena is the device memory by default).
    A device that cannot be opened here raises :class:`DeviceUnavailableError`.
    """
    if isinstance(target, str) and ":" in target:
        kind, name = target.split(":", 1)
        cfg = _config(config)
        timeout = opts.pop("timeout", 60.0)
        platform = _plugin_platform(kind.lower(), name, cfg, opts)
        size = (arena_size if arena_size is not None
                else getattr(platform, "default_arena", backends.REGISTRY["virtual"].arena))
        # the platform says which board device drives it (PYNQ's or the DE10-Nano's)
        return open(getattr(platform, "runtime_device", "pynq"), cfg, arena_size=size,
                    platform=platform, timeout=timeout)
    if not isinstance(target, str) or target.lower() not in TARGETS:
        raise DeviceUnavailableError(f"unknown device {target!r}; choose one of "
                                     f"{', '.join(TARGETS)}")
    target = target.lower()
    cfg = _config(config)
    entry = backends.REGISTRY[target]
    size = arena_size if arena_size is not None else entry.arena
    cls = _device_class(entry.device, target)
    return cls(cfg, arena_size=size, **opts)


__all__ = ["open", "TARGETS", "PLATFORM_GROUP"]
