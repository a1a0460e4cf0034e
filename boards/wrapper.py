"""The board top wrapper in Verilog: the core behind vendor-style AXI ports, clock and reset.

The wrapper ``vta_top`` exposes the ports block-design tools expect: an AXI4-Lite slave
``s_axi_control_*`` (with the ``*prot`` signals), an AXI4 master ``m_axi_gmem_*`` (with a 1-bit ID,
``*cache``, ``*prot``, ``*lock`` and ``*qos`` driven with constants), a clock ``clk``, an
active-low reset ``rst_n`` (the processor's) that is synchronised and inverted for the core's
active-high synchronous ``rst``, and a level ``interrupt``. For Xilinx the ports carry
``X_INTERFACE_INFO`` attributes so Vivado's block design infers the interfaces, clock, reset and
interrupt when the module is added as a module reference. They declare no ``FREQ_HZ``: the
block design propagates the frequency the processing system really makes (a ZynqMP PL clock
requested at 200 MHz is 187.5 MHz), and a fixed one on a module reference fails validation.
A board that reaches DRAM through a cache-coherent port (the DE10-Nano's ACP window) also gets
``*user`` ports and cacheable ``*cache`` values (:data:`ACP_SIGNALS`).

The core's ports are read from its Verilog (:func:`core_ports`) and checked against the
contract of ``hw/README.md``, so a change of the core's interface fails here, by name.
"""

from __future__ import annotations

import re

from .registry import Board, BoardError

#: The core ports the wrapper connects (besides clk and rst): name -> direction.
AXIL_PORTS = {
    "awaddr": "input", "awvalid": "input", "awready": "output",
    "wdata": "input", "wstrb": "input", "wvalid": "input", "wready": "output",
    "bresp": "output", "bvalid": "output", "bready": "input",
    "araddr": "input", "arvalid": "input", "arready": "output",
    "rdata": "output", "rresp": "output", "rvalid": "output", "rready": "input",
}
AXI_PORTS = {
    "araddr": "output", "arlen": "output", "arsize": "output", "arburst": "output",
    "arvalid": "output", "arready": "input",
    "rdata": "input", "rresp": "input", "rlast": "input", "rvalid": "input", "rready": "output",
    "awaddr": "output", "awlen": "output", "awsize": "output", "awburst": "output",
    "awvalid": "output", "awready": "input",
    "wdata": "output", "wstrb": "output", "wlast": "output", "wvalid": "output",
    "wready": "input",
    "bresp": "input", "bvalid": "input", "bready": "output",
}

#: ``*cache`` and ``*user`` of a coherent (ACP) master: write-back cacheable, shared.
ACP_SIGNALS = {"awcache": (4, "4'b1111"), "arcache": (4, "4'b1111"), "awuser": (5, "5'b00001"),
               "aruser": (5, "5'b00001")}

_PORT_RE = re.compile(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):(\d+)\]\s*)?"
                      r"([A-Za-z_][\w$]*)\s*;", re.M)


def core_ports(verilog: str, module: str = "vta_core") -> dict[str, tuple[str, int]]:
    """Ports of ``module`` in Amaranth-generated Verilog: name -> (direction, width)."""
    m = re.search(rf"^module {re.escape(module)}\s*\(", verilog, re.M)
    if m is None:
        raise BoardError(f"the core Verilog has no module {module!r}")
    end = verilog.find("\nendmodule", m.end())
    body = verilog[m.end():end if end >= 0 else len(verilog)]
    ports = {}
    for d, msb, lsb, name in _PORT_RE.findall(body):
        ports[name] = (d, int(msb) - int(lsb) + 1 if msb else 1)
    return ports


def check_core_ports(ports: dict[str, tuple[str, int]], bus_width: int) -> None:
    """Raise :class:`BoardError` naming the first port that breaks the core's contract."""
    want: dict[str, tuple[str, int | None]] = {"clk": ("input", 1), "rst": ("input", 1),
                                               "interrupt": ("output", 1)}
    want.update({f"s_axil_{p}": (d, None) for p, d in AXIL_PORTS.items()})
    want.update({f"m_axi_{p}": (d, None) for p, d in AXI_PORTS.items()})
    want["m_axi_rdata"] = ("input", bus_width)
    want["m_axi_wdata"] = ("output", bus_width)
    want["m_axi_wstrb"] = ("output", bus_width // 8)
    for name, (d, width) in want.items():
        if name not in ports:
            raise BoardError(f"the core has no port {name}; the board wrapper needs the "
                             "interface of hw/README.md")
        if ports[name][0] != d or (width is not None and ports[name][1] != width):
            raise BoardError(f"core port {name} is {ports[name][0]} [{ports[name][1]}], the "
                             f"wrapper expects {d} [{width or ports[name][1]}]")


def master_constants(board: Board) -> dict[str, tuple[int, str]]:
    """The AXI4 master outputs the wrapper drives with constants: name -> (width, value)."""
    consts = {"awid": (1, "1'b0"), "arid": (1, "1'b0"), "awcache": (4, "4'b0011"),
              "arcache": (4, "4'b0011"), "awprot": (3, "3'b000"), "arprot": (3, "3'b000"),
              "awlock": (1, "1'b0"), "arlock": (1, "1'b0"), "awqos": (4, "4'b0000"),
              "arqos": (4, "4'b0000")}
    if "acp_alias" in board.extra:
        consts.update(ACP_SIGNALS)
    return consts


def _range(width: int) -> str:
    return f"[{width - 1}:0] " if width > 1 else ""


def top_wrapper(board: Board, ports: dict[str, tuple[str, int]], *, core: str = "vta_core",
                name: str = "vta_top") -> str:
    """The Verilog text of the board's top wrapper around the core module ``core``."""
    check_core_ports(ports, board.bus_width)
    xil = board.vendor == "xilinx"
    decl: list[str] = []

    def port(d: str, width: int, pname: str, attrs: tuple[str, ...] = ()) -> None:
        decl.append("".join(f"  (* {a} *)\n" for a in attrs if xil) +
                    f"  {d} wire {_range(width)}{pname}")

    port("input", 1, "clk", (
        'X_INTERFACE_INFO = "xilinx.com:signal:clock:1.0 clk CLK"',
        'X_INTERFACE_PARAMETER = "ASSOCIATED_BUSIF s_axi_control:m_axi_gmem, '
        'ASSOCIATED_RESET rst_n"'))
    port("input", 1, "rst_n", (
        'X_INTERFACE_INFO = "xilinx.com:signal:reset:1.0 rst_n RST"',
        'X_INTERFACE_PARAMETER = "POLARITY ACTIVE_LOW"'))
    port("output", 1, "interrupt", (
        'X_INTERFACE_INFO = "xilinx.com:signal:interrupt:1.0 interrupt INTERRUPT"',
        'X_INTERFACE_PARAMETER = "SENSITIVITY LEVEL_HIGH"'))
    # AXI4-Lite slave
    first = True
    for p, d in AXIL_PORTS.items():
        attrs = [f'X_INTERFACE_INFO = "xilinx.com:interface:aximm:1.0 s_axi_control {p.upper()}"']
        if first:
            attrs.append('X_INTERFACE_PARAMETER = "PROTOCOL AXI4LITE, DATA_WIDTH 32, '
                         f'ADDR_WIDTH {ports["s_axil_" + p][1]}"')
            first = False
        port(d, ports["s_axil_" + p][1], f"s_axi_control_{p}", tuple(attrs))
    for p in ("awprot", "arprot"):
        port("input", 3, f"s_axi_control_{p}",
             (f'X_INTERFACE_INFO = "xilinx.com:interface:aximm:1.0 s_axi_control {p.upper()}"',))
    # AXI4 master
    first = True
    for p, d in AXI_PORTS.items():
        attrs = [f'X_INTERFACE_INFO = "xilinx.com:interface:aximm:1.0 m_axi_gmem {p.upper()}"']
        if first:
            attrs.append(f'X_INTERFACE_PARAMETER = "PROTOCOL AXI4, DATA_WIDTH {board.bus_width}, '
                         'ADDR_WIDTH 32, ID_WIDTH 1, MAX_BURST_LENGTH 16"')
            first = False
        port(d, ports["m_axi_" + p][1], f"m_axi_gmem_{p}", tuple(attrs))
    consts = master_constants(board)
    for p, (w, _) in consts.items():
        port("output", w, f"m_axi_gmem_{p}",
             (f'X_INTERFACE_INFO = "xilinx.com:interface:aximm:1.0 m_axi_gmem {p.upper()}"',))
    for p in ("rid", "bid"):
        port("input", 1, f"m_axi_gmem_{p}",
             (f'X_INTERFACE_INFO = "xilinx.com:interface:aximm:1.0 m_axi_gmem {p.upper()}"',))

    conns = [".clk(clk)", ".rst(rst)", ".interrupt(interrupt)"]
    conns += [f".s_axil_{p}(s_axi_control_{p})" for p in AXIL_PORTS]
    conns += [f".m_axi_{p}(m_axi_gmem_{p})" for p in AXI_PORTS]
    assigns = "\n".join(f"  assign m_axi_gmem_{p} = {v};" for p, (_, v) in consts.items())
    header = (f"// Top wrapper of the VTA core for {board.title} ({board.part}), generated by\n"
              f"// vta.boards: {board.bus_width}-bit AXI4 master, AXI4-Lite registers at "
              f"0x{board.reg_base:08X}, {board.clock_mhz:g} MHz.\n"
              "// Unused inputs: s_axi_control_awprot/arprot, m_axi_gmem_rid/bid (single ID).\n")
    ports_text = ",\n".join(decl)
    conns_text = ",\n    ".join(conns)
    return f"""{header}`default_nettype none
module {name} (
{ports_text}
);
  // Reset: the processor's active-low reset, synchronised to clk, as the core's active-high rst.
  reg [1:0] rst_sync = 2'b11;
  always @(posedge clk) rst_sync <= {{rst_sync[0], ~rst_n}};
  wire rst = rst_sync[1];
{assigns}
  {core} core (
    {conns_text}
  );
endmodule
`default_nettype wire
"""
