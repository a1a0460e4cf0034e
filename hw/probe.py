"""The core with its per-module debug state on extra output ports, for simulation harnesses.

:class:`ProbedCore` has every port of :class:`vta.hw.core.VTACore` plus ``debug_states`` (the
``states`` register: fetch, load, compute, store state codes, 4 bits each) and
``debug_{load,compute,store}_done`` (instructions completed per module). The harnesses sample them
every cycle to build per-instruction timelines (``--trace``) without perturbing the design: the
signals are the ones the host register block already reads. The core itself is unchanged; the
wrapper elaborates it and taps the register block's inputs.

With ``reset_stage=True`` (the tsim build) the ``rst`` input reaches the core through one
register: the core leaves (and enters) reset one cycle after ``rst`` falls (rises). Verilator
re-evaluates every piece of logic that depends on a top-level input at each ``eval()``, and the
core's synchronous reset feeds the next-state logic of nearly every register; behind a register
that logic depends on state only and is evaluated once per clock edge, which makes the model
about twice as fast. A harness holding ``rst`` for one more cycle sees the same core.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amaranth.hdl import ClockDomain, ClockSignal, DomainRenamer, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out
from vta.isa import Config

from .core import VTACore
from .options import CoreOptions

#: Extra output ports and the register each one mirrors.
DEBUG_PORTS = {"debug_states": ("states", 16), "debug_load_done": ("load_done", 32),
               "debug_compute_done": ("compute_done", 32),
               "debug_store_done": ("store_done", 32)}


class ProbedCore(wiring.Component):
    """:class:`VTACore` plus ``debug_*`` output ports (see the module docstring)."""

    def __init__(self, cfg: Config, *,
                 options: CoreOptions | Mapping[str, Any] | None = None,
                 reset_stage: bool = False) -> None:
        self.core = VTACore(cfg, options=options)
        self.core._MustUse__silence = True  # elaborated through this wrapper
        self.cfg = cfg
        self.bus_width = cfg.bus_width
        self.reset_stage = reset_stage
        members = dict(self.core.signature.members)
        for name, (_reg, width) in DEBUG_PORTS.items():
            members[name] = Out(width)
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        inner = self.core.elaborate(platform)
        if self.reset_stage:
            m.domains.core = ClockDomain("core", local=True)
            rst_q = Signal(init=1, reset_less=True)
            m.d.sync += rst_q.eq(ResetSignal("sync"))
            m.d.comb += [ClockSignal("core").eq(ClockSignal("sync")),
                         ResetSignal("core").eq(rst_q)]
            m.submodules.core = DomainRenamer("core")(inner)
        else:
            m.submodules.core = inner
        for name, member in self.core.signature.members.items():
            outer, port = getattr(self, name), getattr(self.core, name)
            if member.flow == wiring.In:
                m.d.comb += port.eq(outer)
            else:
                m.d.comb += outer.eq(port)
        regs = inner.submodules.regs
        for name, (reg, _width) in DEBUG_PORTS.items():
            m.d.comb += getattr(self, name).eq(getattr(regs, f"ro_{reg}"))
        return m


def generate(cfg: Config, *, name: str = "vta_core", reset_stage: bool = True,
             options: CoreOptions | Mapping[str, Any] | None = None) -> str:
    """Verilog of :class:`ProbedCore`, by default with its reset stage (the tsim harness's
    design); ``options``: its hardware variant (:class:`~vta.hw.options.CoreOptions`)."""
    from amaranth.back import verilog  # deferred: amaranth, only to generate

    core = ProbedCore(cfg, reset_stage=reset_stage, options=options)
    return verilog.convert(core, name=name, emit_src=False)


__all__ = ["ProbedCore", "DEBUG_PORTS", "generate"]
