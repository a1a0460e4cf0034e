// ECP5 primitives for simulation (vta.boards.ulx3s.ECP5_SIM_MODELS).
/* verilator lint_off UNUSEDSIGNAL */
/* verilator lint_off UNDRIVEN */
module EHXPLLL #(
  parameter PLLRST_ENA = "DISABLED", parameter INTFB_WAKE = "DISABLED",
  parameter STDBY_ENABLE = "DISABLED", parameter DPHASE_SOURCE = "DISABLED",
  parameter OUTDIVIDER_MUXA = "DIVA", parameter OUTDIVIDER_MUXB = "DIVB",
  parameter OUTDIVIDER_MUXC = "DIVC", parameter OUTDIVIDER_MUXD = "DIVD",
  parameter CLKI_DIV = 1, parameter CLKOP_ENABLE = "ENABLED", parameter CLKOP_DIV = 8,
  parameter CLKOP_CPHASE = 0, parameter CLKOP_FPHASE = 0, parameter FEEDBK_PATH = "CLKOP",
  parameter CLKFB_DIV = 1
) (
  input CLKI, input CLKFB, input PHASESEL1, input PHASESEL0, input PHASEDIR, input PHASESTEP,
  input PHASELOADREG, input STDBY, input PLLWAKESYNC, input RST, input ENCLKOP,
  output CLKOP, output LOCK
);
  assign CLKOP = CLKI;
  assign LOCK = 1'b1;
endmodule

// Behavioural model of the ECP5 MULT18X18D for the subset of its configuration that
// vta.hw.ecp5_mult instantiates (written from Lattice's sysDSP usage guide, TN1267): A/B
// input registers and the output register, each on CLK0 or absent, with the clock enables
// and synchronous resets their *_CE / *_RST parameters name; no pipeline or C register
// (refused); signed operands when SIGNEDA/SIGNEDB.
module MULT18X18D(
  input A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17,
  input B0, B1, B2, B3, B4, B5, B6, B7, B8, B9, B10, B11, B12, B13, B14, B15, B16, B17,
  input C0, C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11, C12, C13, C14, C15, C16, C17,
  input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
  input CLK0, CLK1, CLK2, CLK3, CE0, CE1, CE2, CE3, RST0, RST1, RST2, RST3,
  input SRIA0, SRIA1, SRIA2, SRIA3, SRIA4, SRIA5, SRIA6, SRIA7, SRIA8, SRIA9, SRIA10, SRIA11,
  input SRIA12, SRIA13, SRIA14, SRIA15, SRIA16, SRIA17,
  input SRIB0, SRIB1, SRIB2, SRIB3, SRIB4, SRIB5, SRIB6, SRIB7, SRIB8, SRIB9, SRIB10, SRIB11,
  input SRIB12, SRIB13, SRIB14, SRIB15, SRIB16, SRIB17,
  output P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15, P16, P17,
  output P18, P19, P20, P21, P22, P23, P24, P25, P26, P27, P28, P29, P30, P31, P32, P33,
  output P34, P35
);
  parameter REG_INPUTA_CLK = "NONE";
  parameter REG_INPUTA_CE = "CE0";
  parameter REG_INPUTA_RST = "RST0";
  parameter REG_INPUTB_CLK = "NONE";
  parameter REG_INPUTB_CE = "CE0";
  parameter REG_INPUTB_RST = "RST0";
  parameter REG_INPUTC_CLK = "NONE";
  parameter REG_PIPELINE_CLK = "NONE";
  parameter REG_OUTPUT_CLK = "NONE";
  parameter REG_OUTPUT_CE = "CE0";
  parameter REG_OUTPUT_RST = "RST0";
  parameter CLK0_DIV = "ENABLED";
  parameter GSR = "ENABLED";
  parameter SOURCEB_MODE = "B_SHIFT";
  parameter MULT_BYPASS = "DISABLED";
  parameter RESETMODE = "SYNC";

  wire [17:0] a = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
  wire [17:0] b = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};
  wire [3:0] ce = {CE3, CE2, CE1, CE0};
  wire [3:0] rst = {RST3, RST2, RST1, RST0};
  function integer sel(input [8*4-1:0] name);
    sel = name[7:0] - "0";
  endfunction

  reg [17:0] a_q = 0, b_q = 0;
  reg [35:0] p_q = 0;
  wire [17:0] a_in = (REG_INPUTA_CLK == "CLK0") ? a_q : a;
  wire [17:0] b_in = (REG_INPUTB_CLK == "CLK0") ? b_q : b;
  wire [35:0] a_ext = SIGNEDA ? {{18{a_in[17]}}, a_in} : {18'b0, a_in};
  wire [35:0] b_ext = SIGNEDB ? {{18{b_in[17]}}, b_in} : {18'b0, b_in};
  wire [35:0] product = a_ext * b_ext;

  always @(posedge CLK0) begin
    if (rst[sel(REG_INPUTA_RST)]) a_q <= 0; else if (ce[sel(REG_INPUTA_CE)]) a_q <= a;
    if (rst[sel(REG_INPUTB_RST)]) b_q <= 0; else if (ce[sel(REG_INPUTB_CE)]) b_q <= b;
    if (rst[sel(REG_OUTPUT_RST)]) p_q <= 0; else if (ce[sel(REG_OUTPUT_CE)]) p_q <= product;
  end
  wire [35:0] p = (REG_OUTPUT_CLK == "CLK0") ? p_q : product;
  assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19,
          P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1,
          P0} = p;

  initial begin
    if (REG_PIPELINE_CLK != "NONE" || REG_INPUTC_CLK != "NONE")
      $fatal(1, "MULT18X18D model: configuration outside the modelled subset");
  end
endmodule
