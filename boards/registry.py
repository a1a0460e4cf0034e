"""The board registry: one declarative entry per supported FPGA board.

Each :class:`Board` names its device, the resource budget of that device (from the vendor's
datasheet, counted the way its family counts them), the clock target, the width of the memory
port the VTA core gets, the base address of its host registers on the processor's bus, the flow
that finishes the design (Vivado, Quartus or the open ECP5 flow) and the default :class:`Config`.

Budget units, per family:

- Xilinx 7-series / UltraScale+: 6-input LUTs, flip-flops, 36 Kb block RAMs (a RAMB18 counts
  0.5), DSP48 slices. (UltraRAM of the ZU7EV is listed in the notes, not in the budget.)
- Intel Cyclone V: ALMs, registers, M10K blocks, variable-precision DSP blocks (one 27x27 or
  two 18x19 or three 9x9 multipliers each).
- Lattice ECP5: 4-input LUTs, flip-flops, 18 Kb EBR blocks (DP16KD), 18x18 multipliers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from vta.isa import Config, VTAError


class BoardError(VTAError):
    """An unknown board name or a request a board does not support."""


@dataclass(frozen=True)
class Resources:
    """Counts of the four resource kinds every board budget and every report uses."""

    lut: float
    ff: float
    bram: float
    dsp: float

    KINDS = ("lut", "ff", "bram", "dsp")

    def as_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in self.KINDS}


#: Block-RAM aspect ratios (depth, width) of a Xilinx RAMB36 (7-series and UltraScale+ alike).
_RAMB36_SHAPES = ((32768, 1), (16384, 2), (8192, 4), (4096, 9), (2048, 18), (1024, 36), (512, 72))
#: ... and of its half, the RAMB18 (0.5 of the budget unit).
_RAMB18_SHAPES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))

#: LUTs of one 8x8 signed multiplier built from logic: measured with yosys on a lone multiplier
#: (``synth_xilinx -nodsp``: 134 LUT2..LUT6 and 4 CARRY4 on xc7). Not measured on the other
#: families, which use the same figure.
_SOFT_MULT_LUTS = 134.0
#: LUTs the fabric of one packed multiplier adds (:mod:`vta.hw.packed`: its share of the
#: popcount, and adder-tree levels that two plain products would sum in the DSP slices'
#: post-adders): measured with yosys on a GemmPair of block_in 16 against two GemmLanes
#: (``synth_xilinx``: 563 against 256 LUTs for 16 packed multipliers). Only the Xilinx boards
#: pack; the other families use the same figure.
_PACKED_PAIR_LUTS = (563 - 256) / 16


@dataclass(frozen=True)
class Family:
    """What a device family calls its resources, how yosys synthesises for it, and the shapes
    and costs of its block RAMs and multipliers (read by the CLI, :mod:`vta.boards.synth` and
    the AutoVTA resource model)."""

    name: str
    vendor: str
    #: Human names of the units of :class:`Resources` (``lut``, ``ff``, ``bram``, ``dsp``).
    units: dict[str, str]
    #: The yosys synthesis command (without ``-top``), or ``None`` when yosys has none.
    synth: str
    #: Data bytes of one block RAM budget unit (ECP5: an 18 Kb EBR holds 16 Kb of data).
    bram_bytes: int
    #: Block-RAM aspect ratios (depth, width) of one budget unit.
    bram_shapes: tuple[tuple[int, int], ...]
    #: Regular expression of the netlist cell types that are DSP multipliers.
    dsp_cell: str
    #: Operand widths (a, b) of one DSP multiplier (two's-complement for Xilinx DSP48s).
    dsp_operands: tuple[int, int]
    #: Aspect ratios of a half block (Xilinx RAMB18: 0.5 of the budget unit): yosys uses one for
    #: a memory that fits it, and tiles larger memories with full blocks.
    bram_half_shapes: tuple[tuple[int, int], ...] = ()
    #: LUTs per 64 multiplier bits of a multiplier built from logic (the DSP budget's overflow).
    soft_mult_luts: float = _SOFT_MULT_LUTS
    #: LUTs the fabric of one packed multiplier (two GEMM products) adds.
    packed_pair_luts: float = _PACKED_PAIR_LUTS
    #: True when the figures are a yosys-based estimate rather than the vendor flow's mapping.
    estimate_note: str = ""

    def dsp_cost(self, a: int, b: int) -> float:
        """Estimated DSP budget one ``a`` x ``b`` multiplier takes when yosys maps it."""
        a, b = max(a, b), min(a, b)
        wa, wb = self.dsp_operands
        if self.vendor == "xilinx":
            return float(math.ceil(max(a - 1, 1) / (wa - 1)) * math.ceil(max(b - 1, 1) / (wb - 1)))
        if self.vendor == "lattice":
            return float(math.ceil(a / wa) * math.ceil(b / wb))
        # Cyclone V: one 27x27, two 18x19 or three 9x9 multipliers per DSP block
        if a <= 9:
            return 1 / 3
        if a <= 18:
            return 0.5
        return float(math.ceil(a / wa) * math.ceil(b / wb))


FAMILIES: dict[str, Family] = {
    "xc7": Family(
        "xc7", "xilinx",
        {"lut": "LUT6", "ff": "FF", "bram": "RAMB36", "dsp": "DSP48E1"},
        "synth_xilinx -family xc7 -flatten -noiopad -noclkbuf",
        bram_bytes=4096, bram_shapes=_RAMB36_SHAPES, bram_half_shapes=_RAMB18_SHAPES,
        dsp_cell=r"DSP48", dsp_operands=(25, 18)),
    "xcup": Family(
        "xcup", "xilinx",
        {"lut": "LUT6", "ff": "FF", "bram": "RAMB36", "dsp": "DSP48E2"},
        "synth_xilinx -family xcup -flatten -noiopad -noclkbuf",
        bram_bytes=4096, bram_shapes=_RAMB36_SHAPES, bram_half_shapes=_RAMB18_SHAPES,
        dsp_cell=r"DSP48", dsp_operands=(27, 18)),
    "cyclonev": Family(
        "cyclonev", "intel",
        {"lut": "ALM", "ff": "register", "bram": "M10K", "dsp": "DSP block"},
        "synth_intel_alm -family cyclonev -noiopad -noclkbuf",
        bram_bytes=1024,
        bram_shapes=((8192, 1), (4096, 2), (2048, 4), (1024, 8), (512, 16), (256, 32)),
        dsp_cell=r"MISTRAL_MUL", dsp_operands=(27, 27),
        estimate_note=(
            "estimate: yosys synth_intel_alm maps to Cyclone V ALUTs, M10Ks and multipliers; ALMs "
            "are counted as one per 6-input ALUT and one per two smaller or arithmetic ALUTs, and "
            "DSP blocks as one per 27x27, 1/2 per 18x18 and 1/3 per 9x9 multiplier; Quartus packs "
            "differently")),
    "ecp5": Family(
        "ecp5", "lattice",
        {"lut": "LUT4", "ff": "FF", "bram": "EBR (DP16KD)", "dsp": "MULT18X18D"},
        "synth_ecp5 -abc9",
        bram_bytes=2048,
        bram_shapes=((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)),
        dsp_cell=r"MULT18X18D", dsp_operands=(18, 18)),
}


def get_family(name: str) -> Family:
    """The FPGA family called ``name`` (``xc7``, ``xcup``, ``cyclonev``, ``ecp5``)."""
    fam = FAMILIES.get(name)
    if fam is None:
        raise BoardError(f"unknown FPGA family {name!r}; known families: {', '.join(FAMILIES)}")
    return fam


@dataclass(frozen=True)
class Board:
    """One FPGA board the kit can target."""

    name: str
    title: str
    family: str
    part: str
    #: Resource budget of the device (see the module docstring for units).
    budget: Resources
    clock_mhz: float
    #: Byte address of the core's host registers on the processor's bus.
    reg_base: int
    #: Size of the register window (bytes).
    reg_span: int
    #: "vivado", "quartus" or "open".
    flow: str
    #: The default configuration's parameters (overrides of :class:`Config`'s defaults; its
    #: ``BUS_WIDTH`` is the board's memory port, 64 when not given).
    config_params: dict[str, int] = field(default_factory=dict)
    notes: str = ""
    #: Flow-specific details (Vivado board part, nextpnr device/package, ...).
    extra: dict[str, Any] = field(default_factory=dict)
    #: Hardware variant options of :class:`vta.hw.core.VTACore` this board is built with.
    core_options: dict[str, Any] = field(default_factory=dict)

    @property
    def fam(self) -> Family:
        return FAMILIES[self.family]

    @property
    def vendor(self) -> str:
        return self.fam.vendor

    @property
    def default_config(self) -> Config:
        """The configuration this board is built with unless told otherwise."""
        return Config(**self.config_params)

    @property
    def bus_width(self) -> int:
        """Width in bits of the board's AXI memory port: its configuration's ``BUS_WIDTH``."""
        return self.default_config.bus_width

    def check_bus(self, cfg: Config, source: str = "the configuration") -> None:
        """A BoardError unless ``cfg``'s core has this board's memory port width (a project
        wires the core's AXI master to the port as it is); ``source`` names ``cfg``."""
        if cfg.bus_width != self.bus_width:
            raise BoardError(f"{source} has a {cfg.bus_width}-bit bus (BUS_WIDTH) but "
                             f"board {self.name} has a {self.bus_width}-bit memory port; set "
                             f"\"BUS_WIDTH\": {self.bus_width} in it (vta config write "
                             f"--bus-width {self.bus_width}) or choose another board")

    @property
    def options_note(self) -> str:
        """``", core options a, b"`` for progress lines (empty for the plain core)."""
        on = sorted(k for k, v in self.core_options.items() if v)
        return f", core options {', '.join(on)}" if on else ""

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description (``vta boards --json``)."""
        return {
            "name": self.name, "title": self.title, "vendor": self.vendor,
            "family": self.family, "part": self.part, "clock_mhz": self.clock_mhz,
            "bus_width": self.bus_width, "reg_base": f"0x{self.reg_base:08X}",
            "reg_span": f"0x{self.reg_span:X}", "flow": self.flow,
            "budget": {k: int(v) for k, v in self.budget.as_dict().items()},
            "units": dict(self.fam.units),
            "default_config": self.default_config.hw_params,
            "core_options": dict(self.core_options),
            "notes": self.notes,
        }


#: The PYNQ config of TVM, shared by the processor-based boards.
_PYNQ_CONFIG: dict[str, int] = {}
#: The Zynq UltraScale+ boards' (Ultra96-V2, ZCU104): the PYNQ config on their 128-bit
#: S_AXI_HP0_FPD memory port.
_ZYNQMP_CONFIG: dict[str, int] = {**_PYNQ_CONFIG, "BUS_WIDTH": 128}

#: The Xilinx boards' core: two GEMM products per DSP48 slice (vta.hw.packed). The ECP5 and
#: Cyclone V boards keep one product per multiplier (docs/boards.md says why).
_XILINX_OPTIONS = {"pack_multipliers": True}

#: The ULX3S-85F's configuration: the 1x4x4 GEMM of the ``small`` preset (16 multipliers; 1 KiB
#: micro-op, input and weight, 2 KiB accumulator buffers), which closes timing at the board's
#: 90 MHz (docs/boards.md: 94.5 MHz with the default seed; the core before the ALU chains
#: closed 100 MHz, the current one misses it by its GEMM weight -> multiplier path; a register
#: stage in front of the multipliers, `replicate_operands`, does not route better).
#: A 1x8x8 core with 8 KiB micro-op and input and 32 KiB weight and accumulator buffers also
#: fits the LFE5U-85F's block RAM and multipliers, but its GEMM operand -> MULT18X18D paths held
#: earlier cores at 53-59 MHz, and the current core does not finish routing within an hour.
_ULX3S_CONFIG = {"LOG_BLOCK": 2, "LOG_UOP_BUFF_SIZE": 10, "LOG_INP_BUFF_SIZE": 10,
                 "LOG_WGT_BUFF_SIZE": 10, "LOG_ACC_BUFF_SIZE": 11}

#: The Zynq UltraScale+ processing system's block-design names (Ultra96-V2, ZCU104). The slave
#: port S_AXI_HP0_FPD is the memory map SAXIGP2; of its segments only HP0_DDR_LOW (the low 2 GiB
#: of DDR at 0) is within a 32-bit master's reach (HP0_DDR_HIGH starts at 0x8_0000_0000). The
#: HPM0_FPD master's low window is 0xA0000000-0xAFFFFFFF.
_ZYNQMP_PS = {"ps_ip": "zynq_ultra_ps_e", "ps_master": "M_AXI_HPM0_FPD",
              "ps_slave": "S_AXI_HP0_FPD", "ps_ddr_segment": "SAXIGP2/HP0_DDR_LOW",
              "ddr_window": (0x0, 0x8000_0000), "reg_window": (0xA000_0000, 0x1000_0000),
              "ps_clk": "pl_clk0", "ps_rst": "pl_resetn0"}

_BOARDS: tuple[Board, ...] = (
    Board(
        name="pynq-z1", title="PYNQ-Z1", family="xc7", part="xc7z020clg400-1",
        # Zynq-7020: 53,200 LUTs, 106,400 FFs, 140 RAMB36 (4.9 Mb), 220 DSP48E1 (DS190).
        budget=Resources(lut=53200, ff=106400, bram=140, dsp=220),
        clock_mhz=100.0, reg_base=0x43C0_0000, reg_span=0x1_0000, flow="vivado",
        config_params=_PYNQ_CONFIG,
        notes="Zynq-7000; VTA on M_AXI_GP0, memory through S_AXI_HP0 (64-bit)",
        # S_AXI_HP0's DDR segment HP0_DDR_LOWOCM: the 512 MiB of DDR at 0; M_AXI_GP0's window
        # is 0x40000000-0x7FFFFFFF.
        extra={"ps_ip": "processing_system7", "ps_master": "M_AXI_GP0",
               "ps_slave": "S_AXI_HP0", "ps_ddr_segment": "S_AXI_HP0/HP0_DDR_LOWOCM",
               "ddr_window": (0x0, 0x2000_0000), "reg_window": (0x4000_0000, 0x4000_0000),
               "ps_clk": "FCLK_CLK0", "ps_rst": "FCLK_RESET0_N",
               "board_part": "www.digilentinc.com:pynq-z1:part0:1.0"},
        core_options=_XILINX_OPTIONS),
    Board(
        name="ultra96-v2", title="Ultra96-V2", family="xcup", part="xczu3eg-sbva484-1-e",
        # ZU3EG: 70,560 LUTs, 141,120 FFs, 216 RAMB36 (7.6 Mb), 360 DSP48E2 (DS891).
        budget=Resources(lut=70560, ff=141120, bram=216, dsp=360),
        clock_mhz=200.0, reg_base=0xA000_0000, reg_span=0x1_0000, flow="vivado",
        config_params=_ZYNQMP_CONFIG,
        notes="Zynq UltraScale+; VTA on M_AXI_HPM0_FPD, memory through S_AXI_HP0_FPD (128-bit)",
        extra={**_ZYNQMP_PS, "board_part": "avnet.com:ultra96v2:part0:1.2"},
        core_options=_XILINX_OPTIONS),
    Board(
        name="zcu104", title="ZCU104", family="xcup", part="xczu7ev-ffvc1156-2-e",
        # ZU7EV: 230,400 LUTs, 460,800 FFs, 312 RAMB36 (11 Mb), 96 UltraRAM, 1,728 DSP48E2.
        budget=Resources(lut=230400, ff=460800, bram=312, dsp=1728),
        clock_mhz=250.0, reg_base=0xA000_0000, reg_span=0x1_0000, flow="vivado",
        config_params=_ZYNQMP_CONFIG,
        notes="Zynq UltraScale+; 96 UltraRAM blocks (27 Mb) not counted in the BRAM budget",
        extra={**_ZYNQMP_PS, "board_part": "xilinx.com:zcu104:part0:1.1"},
        core_options=_XILINX_OPTIONS),
    Board(
        name="de10-nano", title="DE10-Nano", family="cyclonev", part="5CSEBA6U23I7",
        # Cyclone V SE A6: 41,509 ALMs, 166,036 registers, 5,570 Kb of M10K (557 blocks),
        # 112 variable-precision DSP blocks (Cyclone V device overview).
        budget=Resources(lut=41509, ff=166036, bram=557, dsp=112),
        # Registers at lightweight-bridge offset 0x20000 (TVM's place), clear of the GHRD's
        # peripherals at 0x0000-0x5FFF; memory through the FPGA-to-HPS bridge's ACP window
        # (bridge address 0x80000000 + physical address, coherent with the ARM caches) as TVM's
        # DE10-Nano driver did. f2h_irq0 lines 0-2 are the GHRD's dip switches, buttons and JTAG
        # UART; VTA takes line 3.
        clock_mhz=100.0, reg_base=0xFF22_0000, reg_span=0x1_0000, flow="quartus",
        config_params=_PYNQ_CONFIG,
        notes="Cyclone V SoC; VTA on the lightweight HPS-to-FPGA bridge (0xFF220000), memory "
              "through the FPGA-to-HPS bridge's ACP window (64-bit)",
        extra={"family_name": "Cyclone V", "lw_bridge": (0xFF20_0000, 0x20_0000),
               "acp_alias": 0x8000_0000, "ddr_window": (0x0, 0x4000_0000), "irq": 3}),
    Board(
        name="ulx3s-85f", title="ULX3S-85F", family="ecp5", part="LFE5U-85F-6BG381C",
        # LFE5U-85F: 83,640 LUT4s and FFs (41,820 slices), 208 EBR of 18 Kb (3,744 Kb),
        # 156 18x18 multipliers (ECP5 family datasheet).
        budget=Resources(lut=83640, ff=83640, bram=208, dsp=156),
        clock_mhz=90.0, reg_base=0x8000_0000, reg_span=0x1_0000, flow="open",
        config_params=_ULX3S_CONFIG,
        notes="fully open flow (yosys, nextpnr-ecp5, ecppack); no hard processor: the host "
              "reaches the registers (at 0x80000000 in the serial bridge's address space) and an "
              "on-chip memory over the USB serial port",
        extra={"nextpnr_device": "--85k", "package": "CABGA381", "speed": "6",
               "board_clock_mhz": 25.0},
        # (no core options yet: `dsp_registers`, the multipliers' own registers, is available
        # but its place and route at 100 MHz is not measured; see docs/boards.md)
        core_options={}),
)

_BY_NAME = {b.name: b for b in _BOARDS}
#: the board a latency is quoted at when none is named: the one of the default configuration
DEFAULT_BOARD = "pynq-z1"


def all_boards() -> list[Board]:
    """Every registered board, in registry order."""
    return list(_BOARDS)


def board_names() -> list[str]:
    return [b.name for b in _BOARDS]


def get_board(name: str | Board) -> Board:
    """The board called ``name`` (case-insensitive; ``_`` and ``-`` are interchangeable)."""
    if isinstance(name, Board):
        return name
    key = str(name).strip().lower().replace("_", "-")
    board = _BY_NAME.get(key)
    if board is None:
        raise BoardError(f"unknown board {name!r}; known boards: {', '.join(board_names())}")
    return board
