"""Verilog generation for the VTA core (``vta verilog``, boards, tsim)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vta.isa import Config

from .ecp5_mult import PrimitiveTarget
from .options import CoreOptions
from .regs import describe

__all__ = ["generate", "describe_ports", "describe_core"]


def generate(cfg: Config, *, name: str = "vta_core",
             options: CoreOptions | Mapping[str, Any] | None = None,
             family: str | None = None) -> str:
    """The Verilog text of :class:`vta.hw.core.VTACore` for ``cfg`` (its bus width included)
    as module ``name`` (``options``: its hardware variant, :class:`~vta.hw.options.CoreOptions`).
    ``family``: the FPGA family it is synthesised for, whose primitives it may instantiate
    (:class:`~vta.hw.ecp5_mult.PrimitiveTarget`); ``None`` (simulation) elaborates every
    such block to its behavioural model."""
    from amaranth.back import verilog  # deferred: amaranth, only to generate

    from .core import VTACore  # deferred: amaranth, only to generate

    core = VTACore(cfg, options=options)
    platform = PrimitiveTarget(family) if family is not None else None
    return verilog.convert(core, name=name, emit_src=False, platform=platform)


def describe_ports(cfg: Config) -> list[dict[str, Any]]:
    """The core's Verilog ports: name, direction and width (clk and rst first)."""
    from .core import VTACore  # deferred: amaranth, only to generate

    core = VTACore(cfg)
    core._MustUse__silence = True  # only its signature is needed
    ports: list[dict[str, Any]] = [{"name": "clk", "dir": "input", "width": 1},
                                   {"name": "rst", "dir": "input", "width": 1}]
    for pname, member in core.signature.members.items():
        ports.append({"name": pname, "dir": "input" if member.flow.name == "In" else "output",
                      "width": member.shape.width if hasattr(member.shape, "width")
                      else int(member.shape)})
    return ports


def describe_core(cfg: Config, *, name: str = "vta_core",
                  options: CoreOptions | Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON description written next to the Verilog by ``vta verilog``."""
    return {
        "module": name,
        "bus_width": cfg.bus_width,
        "core_options": CoreOptions.coerce(options).as_dict(),
        "clock": "clk",
        "reset": {"name": "rst", "active": "high", "synchronous": True},
        "ports": describe_ports(cfg),
        "registers": describe(),
        "config": cfg.to_dict(),
        "derived": cfg.describe()["derived"],
    }
