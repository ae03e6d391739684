// Simulation model of the ECP5 flip-flop FD1S3BX, for Verilator and cocotb only (board builds use
// the fabric's). Written from its documented behaviour (Lattice FPGA libraries reference): Q takes D
// on the rising edge of CK, and is set to 1 at once while PD (asynchronous preset) is high; it
// starts at 1, as the global set/reset leaves it.
module FD1S3BX (
    input  wire D,
    input  wire CK,
    input  wire PD,
    output reg  Q
);
    initial Q = 1'b1;
    always @(posedge CK or posedge PD) Q <= PD ? 1'b1 : D;
endmodule
