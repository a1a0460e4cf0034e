"""Lanes of the compute module's ALU (stages E2 and E3 of :mod:`vta.hw.compute`) and of the
narrow stages around it that ALU chains use (PRE and the tail of :data:`vta.isa.fusion.STAGES`)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2
from vta.isa.layout import AluOp

__all__ = ["AluLane", "TailLane"]


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
    meanwhile)."""

    def __init__(self, acc_width: int) -> None:
        _check_width(self, acc_width)
        self.acc_width = acc_width
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
        regs = _registers(m, self.en, {
            "lt": a < b,
            "sum": (a + b)[:aw],
            "neg": neg,
            "amt": amt,
            "a": a,
            "b": b,
            # (the two cross products are registered apart: a multiplier and an adder in one
            # cycle was the ALU's slowest path)
            "p0": (au[:lo] * bu[:lo])[:aw],
            "p1": (au[:lo] * bu[lo:])[:aw - lo],
            "p2": (au[lo:] * bu[:lo])[:aw - lo],
        })
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
        # MUL: p0 + ((p1 + p2) << lo) mod 2**aw; the high half p0_hi + p1 + p2 through a
        # carry-save stage (sum and majority bits, the latter weighted twice)
        x, y, z = regs["p0"][lo:], regs["p1"], regs["p2"]
        save_sum = Signal(aw - lo, name="csa_s")
        save_carry = Signal(aw - lo, name="csa_c")
        m.d.comb += [save_sum.eq(x ^ y ^ z), save_carry.eq((x & y) | (x & z) | (y & z))]
        product = Cat(regs["p0"][:lo], (save_sum + (save_carry << 1))[:aw - lo])
        m.d.comb += self.result.eq(Mux(self.is_mul, product, other))
        return m


class TailLane(wiring.Component):
    """One lane of one of the narrow stages around the compute module's ALU (PRE or a tail
    stage of :data:`vta.isa.fusion.STAGES`), over two pipeline stages like :class:`AluLane`:
    ``a`` is registered into the lane's second cycle when ``en``; ``result`` is that cycle's
    combinational output. ``imm`` is the stage's member's immediate (a sign-extended
    ``imm_width``-bit value, held for a whole chain); a stage that no member of the chain takes
    passes ``a`` on, by a neutral immediate (0) for an ADD or SHR stage and by ``take`` low for
    a MIN/MAX stage (``is_max``: MAX). Each kind builds only its operation; SHR shifts right
    by 0 to ``max_shift`` only (the chain rule gives it no other immediate): a shifter of
    ``bits_for(max_shift)`` levels."""

    def __init__(self, acc_width: int, ops: frozenset, imm_width: int, *,
                 max_shift: int = 0) -> None:
        _check_width(self, acc_width)
        if not 0 <= max_shift < acc_width:
            self._MustUse__silence = True
            raise TypeError(f"TailLane max_shift must be in [0, {acc_width}), not {max_shift}")
        self.max_shift = max_shift
        kinds = {frozenset({AluOp.ADD}): "add", frozenset({AluOp.SHR}): "shr",
                 frozenset({AluOp.MIN, AluOp.MAX}): "minmax"}
        if ops not in kinds:
            self._MustUse__silence = True
            raise TypeError(f"a tail stage runs ADD, SHR or MIN/MAX, not {sorted(ops)}")
        self.acc_width, self.kind = acc_width, kinds[ops]
        super().__init__({
            "a": In(signed(acc_width)), "imm": In(signed(imm_width)), "en": In(1),
            "take": In(1), "is_max": In(1),
            "result": Out(acc_width),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        aw, kind = self.acc_width, self.kind
        a = self.a
        b = Signal(signed(aw), name="imm_ext")
        m.d.comb += b.eq(self.imm)
        if kind == "add":
            regs = _registers(m, self.en, {"sum": (a + b)[:aw]})
            m.d.comb += self.result.eq(regs["sum"])
        elif kind == "shr":
            amt = self.imm.as_unsigned()[:bits_for(self.max_shift)]
            regs = _registers(m, self.en, {"a": a, "amt": amt})
            m.d.comb += self.result.eq(regs["a"].as_signed() >> regs["amt"])
        else:
            regs = _registers(m, self.en, {"a": a, "lt": a < b})
            take_b = self.take & Mux(self.is_max, regs["lt"], ~regs["lt"])
            m.d.comb += self.result.eq(Mux(take_b, b, regs["a"]))
        return m


def _check_width(lane: wiring.Component, acc_width: int) -> None:
    if acc_width < 2 or acc_width & (acc_width - 1):
        lane._MustUse__silence = True  # never built: no "created but never used" warning
        raise TypeError(f"{type(lane).__name__} acc_width must be a power of two >= 2, "
                        f"not {acc_width!r}")


def _registers(m: Module, en, values: dict) -> dict:
    """A register per value, loaded when ``en`` (named ``e3_<name>``)."""
    regs = {}
    for name, value in values.items():
        regs[name] = reg = Signal(value.shape(), name=f"e3_{name}")
        with m.If(en):
            m.d.sync += reg.eq(value)
    return regs

