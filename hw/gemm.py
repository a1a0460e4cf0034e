"""The GEMM's dot products: one lane (:class:`GemmLane`) or two lanes that share their
multipliers (:class:`GemmPair`), pipelined over the stages C, M, T1 and T2 of
:mod:`vta.hw.compute`."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .ecp5_mult import Mult18x18D
from .options import REPLICA_ATTR
from .packed import PACKED_ATTR, packed_operand, split_product

__all__ = ["GemmLane", "GemmPair", "tree_level"]


def tree_level(terms: list, levels: int) -> list:
    """``levels`` levels of a balanced adder tree (pairs summed, an odd term passed on)."""
    for _ in range(levels):
        if len(terms) == 1:
            break
        terms = [terms[j] + terms[j + 1] if j + 1 < len(terms) else terms[j]
                 for j in range(0, len(terms), 2)]
    return terms


def _reg(m: Module, value: Value, name: str, en: Value, attrs: dict | None = None) -> Signal:
    """A register of ``value`` called ``name`` that loads when ``en``."""
    r = Signal(value.shape(), name=name, attrs=attrs or {})
    with m.If(en):
        m.d.sync += r.eq(value)
    return r


def _replica(m: Module, value: Value, name: str, en: Value) -> Signal:
    """A private copy of an operand (stage C), marked so synthesis keeps the copies apart."""
    return _reg(m, value, name, en, {REPLICA_ATTR: 1})


def _adder_tree(m: Module, prods: list, lane: str, en_t1: Value, en_t2: Value, zero: Value,
                extra: Value | None = None) -> Signal:
    """Stages T1 (two adder-tree levels, plus ``extra`` as a term of its own) and T2 (the
    remaining levels; ``zero`` loads zero instead) of one lane's products."""
    part = [_reg(m, t, f"part_{lane}_{j}", en_t1) for j, t in enumerate(tree_level(prods, 2))]
    if extra is not None:
        part.append(_reg(m, extra, f"part_{lane}_c", en_t1))
    total = _reg(m, tree_level(part, 64)[0], f"sum_{lane}", en_t2)
    with m.If(zero):
        m.d.sync += total.eq(0)
    return total


def sum_shape(block_in: int, inp_width: int, wgt_width: int):
    """The shape of a lane's total: wide enough for any sum of ``block_in`` products."""
    return signed(inp_width + wgt_width + ceil_log2(block_in))


class _GemmUnit(wiring.Component):
    """What :class:`GemmLane` and :class:`GemmPair` share: their parameters, the check of
    ``block_in`` and the signature. ``WEIGHTS`` names the weight operand lanes, one per
    accumulator lane of the unit; with more than one, the per-lane ports (``en_t1``,
    ``en_t2``, ``zero``, ``sum``) are arrays indexed like ``WEIGHTS``."""

    WEIGHTS: tuple[str, ...]

    def __init__(self, *, block_in: int, inp_width: int, wgt_width: int, operand_stage: bool,
                 dsp_registers: bool = False, name: tuple[int, int] = (0, 0)) -> None:
        if not isinstance(block_in, int) or block_in < 1:
            self._MustUse__silence = True  # never built: no "created but never used" warning
            raise TypeError(f"{type(self).__name__} block_in must be a positive integer, "
                            f"not {block_in!r}")
        self.block_in, self.operand_stage, self.lane = block_in, operand_stage, name
        self.dsp_registers = dsp_registers
        self.inp_width, self.wgt_width = inp_width, wgt_width
        lanes = len(self.WEIGHTS)

        def per_lane(member):
            return member if lanes == 1 else member.array(lanes)

        super().__init__({
            "x": In(signed(inp_width)).array(block_in),
            **{w: In(signed(wgt_width)).array(block_in) for w in self.WEIGHTS},
            "en_c": In(1), "en_m": In(1),
            "en_t1": per_lane(In(1)), "en_t2": per_lane(In(1)), "zero": per_lane(In(1)),
            "sum": per_lane(Out(sum_shape(block_in, inp_width, wgt_width))),
        })


class GemmLane(_GemmUnit):
    """The dot product of one accumulator lane (batch row ``b``, output column ``n``) over
    ``block_in`` int operand pairs, pipelined over the GEMM stages:

    - C (``operand_stage`` only): every multiplier loads a private copy of its operands
      (registers ``inp_c_{b}_{n}_{k}``/``wgt_c_{b}_{n}_{k}``, marked as replicas) when ``en_c``;
    - M: the products -> registers when ``en_m``;
      with ``dsp_registers`` (``operand_stage`` too), C and M are the operand and product
      registers of a :class:`~vta.hw.ecp5_mult.Mult18x18D` (``mult_{b}_{n}_{k}``);
    - T1: two adder-tree levels -> registers when ``en_t1``;
    - T2: the remaining levels -> ``sum`` when ``en_t2``; ``zero`` (a reset micro-op, priority
      over ``en_t2``) loads zero instead.

    ``x`` and ``w`` are the operand lanes (D's registers); ``sum`` is the registered total,
    sign-extended to ``inp_width + wgt_width + ceil_log2(block_in)`` bits (wide enough for any
    total).
    """

    WEIGHTS = ("w",)

    def elaborate(self, platform) -> Module:
        m = Module()
        b, n = self.lane
        prods = []
        for k in range(self.block_in):
            xa, wa = self.x[k], self.w[k]
            if self.dsp_registers:
                m.submodules[f"mult_{b}_{n}_{k}"] = mult = Mult18x18D(len(xa), len(wa))
                m.d.comb += [mult.a.eq(xa), mult.b.eq(wa), mult.ce_in.eq(self.en_c),
                             mult.ce_out.eq(self.en_m)]
                prods.append(mult.p)
                continue
            if self.operand_stage:
                xa = _replica(m, xa, f"inp_c_{b}_{n}_{k}", self.en_c)
                wa = _replica(m, wa, f"wgt_c_{b}_{n}_{k}", self.en_c)
            prods.append(_reg(m, xa * wa, f"prod_{b}_{n}_{k}", self.en_m))
        total = _adder_tree(m, prods, f"{b}_{n}", self.en_t1, self.en_t2, self.zero)
        m.d.comb += self.sum.eq(total)
        return m


class GemmPair(_GemmUnit):
    """The dot products of two accumulator lanes (batch row ``b``, output columns ``n`` and
    ``n + 1``) whose products share their input operand, two per multiplier
    (:mod:`vta.hw.packed`): in stage M each multiplier computes ``x[k] * A[k]`` with
    ``A[k] = w1[k] * 2**s + w0[k]`` (``pmul_{b}_{n}_{k}``, marked
    :data:`~vta.hw.packed.PACKED_ATTR`) into a register (``pprod_{b}_{n}_{k}``; on Xilinx parts
    the DSP slice's product register). Lane
    ``n`` sums the products' low halves; lane ``n + 1`` their high halves, plus the count of
    low halves that are negative (a term of its own in T1). Stage C (``operand_stage``)
    copies ``x[k]`` and ``A[k]``; the stages' enables are those of :class:`GemmLane`, per lane
    (index 0: lane ``n``, 1: lane ``n + 1``) from T1 on.
    """

    WEIGHTS = ("w0", "w1")

    def elaborate(self, platform) -> Module:
        m = Module()
        b, n = self.lane
        low, high, signs = [], [], []
        for k in range(self.block_in):
            xa, a = self.x[k], packed_operand(self.w0[k], self.w1[k], self.inp_width)
            if self.operand_stage:
                xa = _replica(m, xa, f"inp_c_{b}_{n}_{k}", self.en_c)
                a = _replica(m, a, f"wgt_c_{b}_{n}_{k}", self.en_c)
            product = Signal(signed(len(a) + len(xa)), name=f"pmul_{b}_{n}_{k}",
                             attrs={PACKED_ATTR: 1})
            m.d.comb += product.eq(a * xa)
            p = _reg(m, product, f"pprod_{b}_{n}_{k}", self.en_m)
            lo, hi, sign = split_product(p, self.inp_width, self.wgt_width)
            low.append(lo)
            high.append(hi)
            signs.append(sign)
        for j, (prods, extra) in enumerate([(low, None), (high, tree_level(signs, 64)[0])]):
            total = _adder_tree(m, prods, f"{b}_{n + j}", self.en_t1[j], self.en_t2[j],
                                self.zero[j], extra)
            m.d.comb += self.sum[j].eq(total)
        return m
