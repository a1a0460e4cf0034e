"""One lane of the compute module's ALU (stages E2 and E3 of :mod:`vta.hw.compute`)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2
from vta.isa.layout import AluOp

__all__ = ["AluLane"]


class AluLane(wiring.Component):
    """One ALU lane over two pipeline stages: ``a``, ``b`` (E2 operands) are registered into E3
    when ``en``; ``op`` and ``is_mul`` (``op == MUL``) are the parent's E3 registers; ``result``
    is E3's combinational output.

    MIN/MAX signed, ADD and MUL wrap (MUL from three half-width partial products, summed in
    E3), SHR by a negative amount shifts left; shift amounts are clamped to the width (right
    shifts by >= the width give the sign, left shifts by >= the width give 0).

    The product's high half is the sum of three terms, reduced to two by a carry-save stage
    (one LUT level) so that one adder follows, and the product enters the result last (one
    multiplexer after the adder; the other operations' multiplexer works on registers
    meanwhile).

    ``with_mul=False`` builds a lane without the multiplier (a fused chain's later stages): MUL
    then passes ``a`` on like any other unknown operation. ``b_width``: ``b`` is a
    sign-extended ``b_width``-bit value (a fused chain stage's immediate); when it fits the
    low half, the product takes two half-width partial products, the third (low half of
    ``a`` times the sign extension) being ``-a_lo`` or 0."""

    def __init__(self, acc_width: int, *, with_mul: bool = True,
                 b_width: int | None = None) -> None:
        if acc_width < 2 or acc_width & (acc_width - 1):
            self._MustUse__silence = True  # never built: no "created but never used" warning
            raise TypeError(f"AluLane acc_width must be a power of two >= 2, not {acc_width!r}")
        self.acc_width, self.with_mul = acc_width, with_mul
        self.narrow_b = b_width is not None and b_width <= acc_width // 2
        super().__init__({
            "a": In(signed(acc_width)), "b": In(signed(acc_width)), "en": In(1),
            "op": In(3), "is_mul": In(1),
            "result": Out(acc_width),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        aw = self.acc_width
        lo = aw // 2
        log_aw = exact_log2(aw)
        a, b = self.a, self.b
        # E2: compare, sum, shift amount, partial products
        au, bu = a.as_unsigned(), b.as_unsigned()
        neg = bu[aw - 1]
        # the amount is |b| clamped to aw, from bit tests: b > aw (b >= 0) when a bit above
        # log2(aw) is set or bit log2(aw) and a lower one are; b < -aw (b < 0) when the bits
        # from log2(aw) up are not all ones; else |b| <= aw fits in log2(aw) + 1 bits
        too_big = Mux(neg, ~bu[log_aw:].all(),
                      (bu[log_aw + 1:] != 0) | (bu[log_aw] & (bu[:log_aw] != 0)))
        low = bu[:log_aw + 1]
        amt = Mux(too_big, aw, Mux(neg, (-low)[:log_aw + 1], low))
        r = {
            "lt": a < b,
            "sum": (a + b)[:aw],
            "neg": neg,
            "amt": amt,
            "a": a,
            "b": b,
        }
        if self.with_mul:
            # (the two cross products are registered apart: a multiplier and an adder in one
            # cycle was the ALU's slowest path)
            p1 = Mux(neg, -au[:lo], 0) if self.narrow_b else au[:lo] * bu[lo:]
            r.update(p0=(au[:lo] * bu[:lo])[:aw], p1=p1[:aw - lo],
                     p2=(au[lo:] * bu[:lo])[:aw - lo])
        regs = {}
        for name, value in r.items():
            regs[name] = reg = Signal(value.shape(), name=f"e3_{name}")
            with m.If(self.en):
                m.d.sync += reg.eq(value)
        # E3: select
        ea = regs["a"].as_signed()
        eb = regs["b"].as_signed()
        other = Signal(aw)
        with m.Switch(self.op):
            with m.Case(AluOp.MIN):
                m.d.comb += other.eq(Mux(regs["lt"], ea, eb))
            with m.Case(AluOp.MAX):
                m.d.comb += other.eq(Mux(regs["lt"], eb, ea))
            with m.Case(AluOp.ADD):
                m.d.comb += other.eq(regs["sum"])
            with m.Case(AluOp.SHR):
                m.d.comb += other.eq(Mux(regs["neg"], (ea << regs["amt"])[:aw],
                                         ea >> regs["amt"]))
            with m.Default():
                m.d.comb += other.eq(ea)
        if not self.with_mul:
            m.d.comb += self.result.eq(other)
            return m
        # MUL: p0 + ((p1 + p2) << lo) mod 2**aw; the high half p0_hi + p1 + p2 through a
        # carry-save stage (sum and majority bits, the latter weighted twice)
        x, y, z = regs["p0"][lo:], regs["p1"], regs["p2"]
        save_sum = Signal(aw - lo, name="csa_s")
        save_carry = Signal(aw - lo, name="csa_c")
        m.d.comb += [save_sum.eq(x ^ y ^ z), save_carry.eq((x & y) | (x & z) | (y & z))]
        product = Cat(regs["p0"][:lo], (save_sum + (save_carry << 1))[:aw - lo])
        m.d.comb += self.result.eq(Mux(self.is_mul, product, other))
        return m
