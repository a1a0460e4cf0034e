"""Hardware variant options of the VTA core that do not change what it computes.

A :class:`CoreOptions` selects implementation choices that trade flip-flops (and, for some,
one cycle of GEMM latency) for a shorter critical path on a given FPGA family. Every variant
executes the same ISA with the same results as the functional simulator; the options are not
part of ``vta_config.json`` (a program does not depend on them) but of the board a core is
built for (``Board.core_options`` in :mod:`vta.boards.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from vta.isa.errors import ConfigError

__all__ = ["CoreOptions", "REPLICA_ATTR"]

#: Attribute of registers that duplicate another on purpose (a private copy next to the logic it
#: drives); the synthesis scripts mark the flip-flops that drive such a signal ``keep`` so yosys
#: does not merge the copies back into one.
REPLICA_ATTR = "vta_replica"


@dataclass(frozen=True)
class CoreOptions:
    """Implementation variants of :class:`vta.hw.core.VTACore`.

    ``replicate_control``: every output lane of the compute datapath gets its own copy of the
    registers that steer it (stage valids used as load enables, accumulator forwarding selects,
    the ALU opcode, reset and operand selects), so no control net fans out across the whole
    ``batch * block_out * acc_width``-bit datapath. No extra latency; ``lanes`` times as many
    of those flip-flops.

    ``replicate_operands``: a GEMM stage between the scratchpad outputs and the multipliers in
    which every multiplier loads a private copy of its two operands: the long wires from the
    block RAMs to distant multipliers (ECP5's DSP rows) then end in a flip-flop. One more
    cycle per GEMM pipeline drain and ``batch * block_in * block_out`` operand-register pairs.
    Tried on the ULX3S (ECP5): its fabric registers routed worse there (docs/boards.md,
    "Measured"); ``dsp_registers`` puts the same stage inside the DSP blocks.

    ``pack_multipliers``: output channels ``2j`` and ``2j + 1`` share their multipliers, two
    signed products per multiplier (:mod:`vta.hw.packed`, :class:`vta.hw.gemm.GemmPair`): half
    as many GEMM multipliers, each ``inp x (inp + 2 wgt + 1)`` bits (8 x 25 for int8, one
    DSP48E1 or DSP48E2 slice, ``(w1 << 16) + w0`` in its pre-adder) and a popcount per lane
    pair; the adder trees' first levels stay in the fabric. No extra latency. For the Xilinx
    families; on ECP5 a 25x8 product takes two MULT18X18D, as many as the two 8x8 products it
    replaces.

    ``dsp_registers``: every GEMM multiplier is an ECP5 MULT18X18D with its own operand and
    product registers (:class:`vta.hw.ecp5_mult.Mult18x18D`): the operand registers are the
    GEMM stage C of ``replicate_operands`` (one more cycle per GEMM pipeline drain), the
    product register stage M's, both inside the DSP block, so the multiplier path neither
    starts nor ends in a fabric flip-flop. The primitive is instantiated only in the Verilog
    for an ECP5 board; simulation elaborates its behavioural model. For the ULX3S (not its
    default until place and route shows it pays); an alternative to ``replicate_operands``
    and ``pack_multipliers``.
    """

    replicate_control: bool = False
    replicate_operands: bool = False
    pack_multipliers: bool = False
    dsp_registers: bool = False

    def __post_init__(self) -> None:
        if self.dsp_registers and (self.replicate_operands or self.pack_multipliers):
            other = "replicate_operands" if self.replicate_operands else "pack_multipliers"
            raise ConfigError(f"core option dsp_registers excludes {other} (the DSP's operand "
                              f"registers are the operand stage; ECP5 does not pack products)")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> CoreOptions:
        """Options from a mapping (a board's ``core_options``); unknown names and values that
        are not booleans raise :class:`ConfigError`."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown core option(s) {', '.join(unknown)} "
                              f"(known: {', '.join(sorted(known))})")
        for name, value in values.items():
            if not isinstance(value, bool):
                raise ConfigError(f"core option {name} must be true or false, not {value!r}")
        return cls(**values)

    @classmethod
    def from_names(cls, text: str) -> CoreOptions:
        """The options named in a comma-separated list (``--core-options``; ``""`` is the
        plain core) turned on; unknown names raise :class:`ConfigError`."""
        names = (n.strip() for n in text.split(","))
        return cls.from_dict(dict.fromkeys((n for n in names if n), True))

    @classmethod
    def coerce(cls, options: CoreOptions | Mapping[str, Any] | None) -> CoreOptions:
        """``options`` as a :class:`CoreOptions` (``None`` is the default core)."""
        return options if isinstance(options, CoreOptions) else cls.from_dict(options)

    def as_dict(self) -> dict[str, bool]:
        """The options that differ from the default core (an empty dict for the default)."""
        default = CoreOptions()
        return {k: v for k, v in asdict(self).items() if v != getattr(default, k)}

    @property
    def extra_gemm_latency(self) -> int:
        """Cycles the variant adds between a GEMM micro-op's operands and its accumulator
        write."""
        return int(self.replicate_operands or self.dsp_registers)

    @property
    def operand_stage(self) -> bool:
        """Whether the GEMM has a stage C between D's operand registers and the products."""
        return self.replicate_operands or self.dsp_registers
