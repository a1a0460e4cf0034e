"""One lane of the compute module's GEMM (stages C, M, T1 and T2 of :mod:`vta.hw.compute`)."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .options import REPLICA_ATTR

__all__ = ["GemmLane", "tree_level"]


def tree_level(terms: list, levels: int) -> list:
    """``levels`` levels of a balanced adder tree (pairs summed, an odd term passed on)."""
    for _ in range(levels):
        if len(terms) == 1:
            break
        terms = [terms[j] + terms[j + 1] if j + 1 < len(terms) else terms[j]
                 for j in range(0, len(terms), 2)]
    return terms


class GemmLane(wiring.Component):
    """The dot product of one accumulator lane (batch row ``b``, output column ``n``) over
    ``block_in`` int operand pairs, pipelined over the GEMM stages:

    - C (``operand_stage`` only): every multiplier loads a private copy of its operands
      (registers ``inp_c_{b}_{n}_{k}``/``wgt_c_{b}_{n}_{k}``, marked as replicas) when ``en_c``;
    - M: the products -> registers when ``en_m``;
    - T1: two adder-tree levels -> registers when ``en_t1``;
    - T2: the remaining levels -> ``sum`` when ``en_t2``; ``zero`` (a reset micro-op, priority
      over ``en_t2``) loads zero instead.

    ``x`` and ``w`` are the operand lanes (D's registers); ``sum`` is the registered total,
    sign-extended to ``inp_width + wgt_width + ceil_log2(block_in)`` bits (wide enough for any
    total).
    """

    def __init__(self, *, block_in: int, inp_width: int, wgt_width: int, operand_stage: bool,
                 name: tuple[int, int] = (0, 0)) -> None:
        if block_in < 1:
            self._MustUse__silence = True  # never built: no "created but never used" warning
            raise TypeError(f"GemmLane block_in must be a positive integer, not {block_in!r}")
        self.block_in, self.operand_stage, self.lane = block_in, operand_stage, name
        self.inp_width, self.wgt_width = inp_width, wgt_width
        super().__init__({
            "x": In(signed(inp_width)).array(block_in),
            "w": In(signed(wgt_width)).array(block_in),
            "en_c": In(1), "en_m": In(1), "en_t1": In(1), "en_t2": In(1), "zero": In(1),
            "sum": Out(signed(inp_width + wgt_width + ceil_log2(block_in))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        b, n = self.lane

        def reg(value, name: str, en, *, replica: bool = False) -> Signal:
            r = Signal(value.shape(), name=name, attrs={REPLICA_ATTR: 1} if replica else {})
            with m.If(en):
                m.d.sync += r.eq(value)
            return r

        prods = []
        for k in range(self.block_in):
            xa, wa = self.x[k], self.w[k]
            if self.operand_stage:
                xa = reg(xa, f"inp_c_{b}_{n}_{k}", self.en_c, replica=True)
                wa = reg(wa, f"wgt_c_{b}_{n}_{k}", self.en_c, replica=True)
            prods.append(reg(xa * wa, f"prod_{b}_{n}_{k}", self.en_m))
        part = [reg(t, f"part_{b}_{n}_{j}", self.en_t1)
                for j, t in enumerate(tree_level(prods, 2))]
        total = reg(tree_level(part, 64)[0], f"sum_{b}_{n}", self.en_t2)
        with m.If(self.zero):
            m.d.sync += total.eq(0)
        m.d.comb += self.sum.eq(total)
        return m
