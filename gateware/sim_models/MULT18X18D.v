// Simulation model of the ECP5 sysDSP MULT18X18D, for Verilator and cocotb only (board builds use
// the real block). Written from Lattice's "ECP5 and ECP5-5G sysDSP Usage Guide" (TN1267): an 18 x 18
// multiplier, signed or unsigned per operand (SIGNEDA / SIGNEDB), with optional input, pipeline and
// output registers, each clocked by the CLKn its REG_*_CLK parameter names, enabled by CEn and reset
// to 0 by RSTn (RESETMODE SYNC: at the clock edge).
//
// The subset modelled is what gateware/dsp.py drives: clock, enable and reset number 0, parallel A
// and B inputs (SOURCEA = SOURCEB = 0, no shift chains, no cascade); other settings stop the
// simulation at time 0 rather than simulate something else.
/* verilator lint_off UNUSEDSIGNAL */
/* verilator lint_off UNUSEDPARAM */
module MULT18X18D #(
    parameter REG_INPUTA_CLK = "NONE",
    parameter REG_INPUTA_CE = "CE0",
    parameter REG_INPUTA_RST = "RST0",
    parameter REG_INPUTB_CLK = "NONE",
    parameter REG_INPUTB_CE = "CE0",
    parameter REG_INPUTB_RST = "RST0",
    parameter REG_INPUTC_CLK = "NONE",
    parameter REG_INPUTC_CE = "CE0",
    parameter REG_INPUTC_RST = "RST0",
    parameter REG_PIPELINE_CLK = "NONE",
    parameter REG_PIPELINE_CE = "CE0",
    parameter REG_PIPELINE_RST = "RST0",
    parameter REG_OUTPUT_CLK = "NONE",
    parameter REG_OUTPUT_CE = "CE0",
    parameter REG_OUTPUT_RST = "RST0",
    parameter CLK0_DIV = "ENABLED",
    parameter HIGHSPEED_CLK = "NONE",
    parameter GSR = "ENABLED",
    parameter CAS_MATCH_REG = "FALSE",
    parameter SOURCEB_MODE = "B_SHIFT",
    parameter MULT_BYPASS = "DISABLED",
    parameter RESETMODE = "SYNC"
) (
    input A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17,
    input B0, B1, B2, B3, B4, B5, B6, B7, B8, B9, B10, B11, B12, B13, B14, B15, B16, B17,
    input C0, C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11, C12, C13, C14, C15, C16, C17,
    input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
    input CLK0, CE0, RST0,
    output P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15, P16, P17,
    output P18, P19, P20, P21, P22, P23, P24, P25, P26, P27, P28, P29, P30, P31, P32, P33, P34, P35
);
    wire [17:0] a = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
    wire [17:0] b = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};

    initial begin
        if ((REG_INPUTA_CLK != "NONE" && REG_INPUTA_CLK != "CLK0") ||
            (REG_INPUTB_CLK != "NONE" && REG_INPUTB_CLK != "CLK0") ||
            (REG_PIPELINE_CLK != "NONE" && REG_PIPELINE_CLK != "CLK0") ||
            (REG_OUTPUT_CLK != "NONE" && REG_OUTPUT_CLK != "CLK0") ||
            REG_INPUTA_CE != "CE0" || REG_INPUTB_CE != "CE0" || REG_PIPELINE_CE != "CE0" ||
            REG_OUTPUT_CE != "CE0" || REG_INPUTA_RST != "RST0" || REG_INPUTB_RST != "RST0" ||
            REG_PIPELINE_RST != "RST0" || REG_OUTPUT_RST != "RST0" ||
            RESETMODE != "SYNC" || MULT_BYPASS != "DISABLED")
            $fatal(1, "MULT18X18D model: settings outside the modelled subset");
    end

    // Input registers (or wires), the signed or unsigned product, pipeline and output registers.
    reg [17:0] a_reg = 18'd0, b_reg = 18'd0;
    reg signed_a_reg = 1'b0, signed_b_reg = 1'b0;
    always @(posedge CLK0) if (RST0) begin
        a_reg <= 18'd0; b_reg <= 18'd0; signed_a_reg <= 1'b0; signed_b_reg <= 1'b0;
    end else if (CE0) begin
        a_reg <= a; b_reg <= b; signed_a_reg <= SIGNEDA; signed_b_reg <= SIGNEDB;
    end
    wire [17:0] a_in = REG_INPUTA_CLK == "NONE" ? a : a_reg;
    wire [17:0] b_in = REG_INPUTB_CLK == "NONE" ? b : b_reg;
    wire signed_a = REG_INPUTA_CLK == "NONE" ? SIGNEDA : signed_a_reg;
    wire signed_b = REG_INPUTB_CLK == "NONE" ? SIGNEDB : signed_b_reg;
    // Each operand extended to 36 bits by its own signedness, then a 36-bit product.
    wire [35:0] a_ext = {{18{signed_a & a_in[17]}}, a_in};
    wire [35:0] b_ext = {{18{signed_b & b_in[17]}}, b_in};
    wire [35:0] product = a_ext * b_ext;

    reg [35:0] pipeline_reg = 36'd0, output_reg = 36'd0;
    always @(posedge CLK0) if (RST0) pipeline_reg <= 36'd0; else if (CE0) pipeline_reg <= product;
    wire [35:0] pipelined = REG_PIPELINE_CLK == "NONE" ? product : pipeline_reg;
    always @(posedge CLK0) if (RST0) output_reg <= 36'd0; else if (CE0) output_reg <= pipelined;
    wire [35:0] p = REG_OUTPUT_CLK == "NONE" ? pipelined : output_reg;

    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18,
            P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0} = p;
endmodule
