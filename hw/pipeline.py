"""What the compute pipeline's components (:mod:`vta.hw.compute`) share: the record a micro-op
carries down the pipeline, registers, and per-lane copies of control registers."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data
from vta.isa import Config

from .options import REPLICA_ATTR

__all__ = ["BASES", "ctrl_layout", "base_widths", "uop_layout_in_flight", "lanes", "reg",
           "LaneRegs"]

#: The three index streams a micro-op iteration offsets.
BASES = ("dst", "src", "wgt")


def ctrl_layout(cfg: Config) -> data.StructLayout:
    """What travels down the pipeline with every micro-op of an instruction."""
    return data.StructLayout({"alu": 1, "reset": 1, "op": 3, "use_imm": 1,
                              "imm": signed(cfg.layouts.alu["imm"].width), "chain": 1})


def base_widths(cfg: Config) -> dict[str, int]:
    """Address widths of the dst (accumulator), src (input or accumulator) and wgt indices."""
    return {"dst": cfg.log_acc_depth, "src": max(cfg.log_acc_depth, cfg.log_inp_depth),
            "wgt": cfg.log_wgt_depth}


def uop_layout_in_flight(cfg: Config) -> data.StructLayout:
    """A micro-op iteration as stages S2 and R hold it: its instruction's ``ctrl``, its
    addresses, whether it is an ALU micro-op that reads the accumulator (``alu_read``) and
    whether it reads two operands (``two``)."""
    widths = base_widths(cfg)
    return data.StructLayout({"valid": 1, "ctrl": ctrl_layout(cfg), **widths,
                              "alu_read": 1, "two": 1})


def lanes(value, count: int, width: int, *, is_signed: bool = True) -> list:
    """``value`` cut into ``count`` lanes of ``width`` bits (signed unless ``is_signed``
    is false)."""
    parts = [value.word_select(k, width) for k in range(count)]
    return [lane.as_signed() if is_signed else lane for lane in parts]


def reg(m: Module, value, name: str, *, en=None, replica: bool = False) -> Signal:
    """A register of ``value`` (same shape), loaded every cycle or when ``en``; ``replica``
    marks it as a deliberate copy (:data:`~vta.hw.options.REPLICA_ATTR`)."""
    attrs = {REPLICA_ATTR: 1} if replica else {}
    r = Signal.like(value, name=name, attrs=attrs) if isinstance(value, Signal) else \
        Signal(value.shape(), name=name, attrs=attrs)
    if en is None:
        m.d.sync += r.eq(value)
    else:
        with m.If(en):
            m.d.sync += r.eq(value)
    return r


class LaneRegs:
    """Control registers for ``count`` datapath lanes of module ``m``: with ``replicate``
    (:attr:`~vta.hw.options.CoreOptions.replicate_control`) one copy per lane, so a control
    signal that steers every bit of the datapath drives each lane from a flip-flop of its own
    instead of one net across the whole datapath; else one register for all lanes."""

    def __init__(self, m: Module, count: int, *, replicate: bool) -> None:
        self.m, self.count, self.replicate = m, count, replicate

    def __call__(self, value, name: str, *, same=None) -> list:
        """Per-lane registers of ``value``; without replication ``same`` (an existing register
        of ``value``) when given."""
        if same is not None and not self.replicate:
            return [same] * self.count
        if not self.replicate or self.count == 1:
            return [reg(self.m, value, name)] * self.count
        return [reg(self.m, value, f"{name}_l{k}", replica=True) for k in range(self.count)]

    def map(self, value_of, name: str) -> list:
        """Per-lane registers of ``value_of(lane)`` (built from per-lane copies); one register
        for all lanes without replication (then the copies are one register)."""
        if not self.replicate or self.count == 1:
            return [reg(self.m, value_of(0), name)] * self.count
        return [reg(self.m, value_of(k), f"{name}_l{k}", replica=True)
                for k in range(self.count)]
