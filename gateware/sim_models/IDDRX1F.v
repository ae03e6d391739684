// Simulation model of the ECP5 generic x1 DDR input register IDDRX1F, for Verilator and cocotb only
// (board builds use the I/O cell). Written from its documented behaviour (Lattice, "ECP5 and ECP5-5G
// High-Speed I/O Interface", TN1265: generic IDDRX1 gearing): D is sampled on both edges of SCLK,
// and the two samples leave together on the next rising edge, Q0 the one taken at the rising edge
// and Q1 the one taken at the falling edge that follows it. So after rising edge n + 1, Q0 holds D at
// edge n and Q1 holds D half a period later: the two samples of one SCLK period, in time order.
//
// RST (synchronous here, as the rig drives it from a synchronous reset) clears both outputs.
/* verilator lint_off UNUSEDSIGNAL */
module IDDRX1F (
    input  wire D,
    input  wire SCLK,
    input  wire RST,
    output reg  Q0,
    output reg  Q1
);
    reg rise_sample = 1'b0;
    reg fall_sample = 1'b0;
    initial begin
        Q0 = 1'b0;
        Q1 = 1'b0;
    end
    always @(posedge SCLK) begin
        rise_sample <= RST ? 1'b0 : D;
        Q0 <= RST ? 1'b0 : rise_sample;
        Q1 <= RST ? 1'b0 : fall_sample;
    end
    always @(negedge SCLK) fall_sample <= RST ? 1'b0 : D;
endmodule
