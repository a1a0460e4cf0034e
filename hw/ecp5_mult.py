"""A signed multiplier with registered operands and a registered product: on ECP5 the
MULT18X18D primitive with its own input and output registers, elsewhere (and in every
simulator) a behavioural model of exactly what that primitive does.

yosys's ``synth_ecp5`` maps a ``*`` to a MULT18X18D but leaves the registers around it in the
fabric: the path weight register -> multiplier -> product register then crosses the routing
twice (docs/boards.md, "Measured"). :class:`Mult18x18D` instantiates the primitive with
``REG_INPUTA_CLK``/``REG_INPUTB_CLK`` (operand registers, clock enable ``CE0``) and
``REG_OUTPUT_CLK`` (product register, clock enable ``CE1``) on ``CLK0``; the fabric then only
feeds the operand registers and reads the product register.

The model (what simulation elaborates): on a rising clock edge the operand registers load
``a`` and ``b`` when ``ce_in``; the product register loads the product of the operand
registers' values (before that edge) when ``ce_out``. Neither register has a reset (the
primitive's ``RST`` inputs are tied low; the design never reads a product it did not load);
both start at zero as the primitive's do after configuration. ``p`` is the product register's
low ``len(a) + len(b)`` bits (the product of two signed operands always fits them).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import ClockSignal, Const, Instance, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Mult18x18D", "PrimitiveTarget", "MULT18_WIDTH"]

#: Width of each MULT18X18D operand port.
MULT18_WIDTH = 18


@dataclass(frozen=True)
class PrimitiveTarget:
    """The ``platform`` handed to ``elaborate`` when the core is generated for synthesis on
    ``family``: components with a vendor primitive (:class:`Mult18x18D` on ``"ecp5"``)
    instantiate it; without one (``platform`` is None: simulation, ``vta verilog``) they
    elaborate to their behavioural model."""

    family: str


class Mult18x18D(wiring.Component):
    """``p = a * b`` two clock edges after ``a``/``b`` (operand registers enabled by ``ce_in``,
    product register by ``ce_out``); signed operands of at most 18 bits each."""

    def __init__(self, a_width: int, b_width: int) -> None:
        for what, w in (("a_width", a_width), ("b_width", b_width)):
            if not isinstance(w, int) or not 1 <= w <= MULT18_WIDTH:
                self._MustUse__silence = True  # never built
                raise TypeError(f"Mult18x18D {what} must be an integer in 1..{MULT18_WIDTH}, "
                                f"not {w!r}")
        self.a_width, self.b_width = a_width, b_width
        super().__init__({"a": In(signed(a_width)), "b": In(signed(b_width)),
                          "ce_in": In(1), "ce_out": In(1),
                          "p": Out(signed(a_width + b_width))})

    def elaborate(self, platform) -> Module:
        if getattr(platform, "family", None) == "ecp5":
            return self._primitive()
        m = Module()
        a_q = Signal(signed(self.a_width), name="a_q", reset_less=True)
        b_q = Signal(signed(self.b_width), name="b_q", reset_less=True)
        p_q = Signal(signed(self.a_width + self.b_width), name="p_q", reset_less=True)
        with m.If(self.ce_in):
            m.d.sync += [a_q.eq(self.a), b_q.eq(self.b)]
        with m.If(self.ce_out):
            m.d.sync += p_q.eq(a_q * b_q)
        m.d.comb += self.p.eq(p_q)
        return m

    def _primitive(self) -> Module:
        m = Module()
        a = self.a.as_signed()
        b = self.b.as_signed()
        product = Signal(2 * MULT18_WIDTH)
        ports = {f"i_A{k}": a[min(k, self.a_width - 1)] for k in range(MULT18_WIDTH)}
        ports |= {f"i_B{k}": b[min(k, self.b_width - 1)] for k in range(MULT18_WIDTH)}
        ports |= {f"i_C{k}": Const(0) for k in range(MULT18_WIDTH)}
        ports |= {f"o_P{k}": product[k] for k in range(2 * MULT18_WIDTH)}
        ports |= {f"i_CLK{k}": ClockSignal("sync") if k == 0 else Const(0) for k in range(4)}
        ports |= {"i_CE0": self.ce_in, "i_CE1": self.ce_out, "i_CE2": Const(0),
                  "i_CE3": Const(0)}
        ports |= {f"i_RST{k}": Const(0) for k in range(4)}
        ports |= {"i_SIGNEDA": Const(1), "i_SIGNEDB": Const(1), "i_SOURCEA": Const(0),
                  "i_SOURCEB": Const(0)}
        ports |= {f"i_SRI{ab}{k}": Const(0) for ab in "AB" for k in range(MULT18_WIDTH)}
        params = {"p_REG_INPUTA_CLK": "CLK0", "p_REG_INPUTA_CE": "CE0",
                  "p_REG_INPUTA_RST": "RST0",
                  "p_REG_INPUTB_CLK": "CLK0", "p_REG_INPUTB_CE": "CE0",
                  "p_REG_INPUTB_RST": "RST0",
                  "p_REG_OUTPUT_CLK": "CLK0", "p_REG_OUTPUT_CE": "CE1",
                  "p_REG_OUTPUT_RST": "RST0",
                  "p_REG_PIPELINE_CLK": "NONE", "p_REG_INPUTC_CLK": "NONE",
                  "p_CLK0_DIV": "ENABLED", "p_GSR": "DISABLED",
                  "p_SOURCEB_MODE": "B_SHIFT", "p_MULT_BYPASS": "DISABLED",
                  "p_RESETMODE": "SYNC"}
        m.submodules.mult18x18d = Instance("MULT18X18D", **params, **ports)
        m.d.comb += self.p.eq(product[:self.a_width + self.b_width])
        return m
