"""Amaranth views of the ISA, generated from the layout tables of :mod:`vta.isa.layout`.

The encoder, the functional simulator and this decoder all take field positions from
``cfg.layouts``; nothing here repeats a bit position. Each ISA layout becomes a
``data.FlexibleLayout`` whose fields sit at the table's offsets (gaps where a field was moved
to bit 64 stay unnamed).
"""

from __future__ import annotations

from amaranth.hdl import signed, unsigned
from amaranth.lib import data
from vta.isa import Config
from vta.isa.layout import INSN_BITS, Layout

__all__ = ["flexible_layout", "insn_layouts", "uop_layout", "InsnLayouts"]


def flexible_layout(layout: Layout) -> data.FlexibleLayout:
    """A ``data.FlexibleLayout`` with every field of an ISA ``Layout`` at its offset."""
    fields = {
        f.name: data.Field(signed(f.width) if f.signed else unsigned(f.width), f.offset)
        for f in layout.fields
    }
    return data.FlexibleLayout(layout.bits, fields)


class InsnLayouts:
    """The Amaranth layouts of one Config: ``mem``, ``gemm``, ``alu``, ``finish`` and ``uop``.

    ``insn`` is a 128-bit union of the instruction views, so a decoder can write
    ``view.mem.x_size`` or ``view.gemm.uop_bgn`` on one 128-bit signal.
    """

    def __init__(self, cfg: Config) -> None:
        lay = cfg.layouts
        self.mem = flexible_layout(lay.mem)
        self.gemm = flexible_layout(lay.gemm)
        self.alu = flexible_layout(lay.alu)
        self.finish = flexible_layout(lay.finish)
        self.uop = flexible_layout(lay.uop)
        self.insn = data.UnionLayout({
            "raw": unsigned(INSN_BITS), "mem": self.mem, "gemm": self.gemm, "alu": self.alu,
            "finish": self.finish,
        })


def insn_layouts(cfg: Config) -> InsnLayouts:
    return InsnLayouts(cfg)


def uop_layout(cfg: Config) -> data.FlexibleLayout:
    return flexible_layout(cfg.layouts.uop)
