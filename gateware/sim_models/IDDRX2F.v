// Simulation model of the ECP5 x2 DDR input register IDDRX2F, for Verilator and cocotb only (board
// builds use the I/O cell). Written from its documented behaviour (Lattice, "ECP5 and ECP5-5G
// High-Speed I/O Interface", TN1265: IDDRX2 gearing): D is sampled on both edges of the edge clock
// ECLK, which runs at twice SCLK (SCLK is ECLK divided by 2 in CLKDIVF, rising with every other
// rising edge of ECLK); the four samples of one SCLK period leave together on the next rising edge of
// SCLK, Q0 the earliest and Q3 the latest. So after SCLK rising edge n + 1, Q0..Q3 hold D at
// n, n + 1/4, n + 1/2 and n + 3/4 of the SCLK period.
//
// ALIGNWD (moving the word boundary by one ECLK cycle, for source-synchronous links) is not modelled:
// the rig leaves it unconnected (its samples are aligned to ts by construction), and the model
// stops the simulation if it is ever 1 rather than simulate something else. RST (synchronous here) clears
// the outputs.
/* verilator lint_off UNUSEDSIGNAL */
module IDDRX2F (
    input  wire D,
    input  wire SCLK,
    input  wire ECLK,
    input  wire RST,
    input  wire ALIGNWD,
    output reg  Q0,
    output reg  Q1,
    output reg  Q2,
    output reg  Q3
);
    // The samples of the current SCLK period: rising and falling edge of ECLK's first cycle (SCLK
    // high), then of its second (SCLK low), index 0 the earliest. A rising-edge sample is filed at the
    // falling edge that follows it, where SCLK is settled (ECLK and SCLK rise together).
    reg rise_latest = 1'b0;
    reg rise0 = 1'b0, fall0 = 1'b0, rise1 = 1'b0, fall1 = 1'b0;
    initial begin
        Q0 = 1'b0;
        Q1 = 1'b0;
        Q2 = 1'b0;
        Q3 = 1'b0;
    end
    always @(posedge ECLK) rise_latest <= D;
    always @(negedge ECLK) begin
        if (SCLK) begin
            rise0 <= rise_latest;
            fall0 <= D;
        end else begin
            rise1 <= rise_latest;
            fall1 <= D;
        end
    end
    // ECLK and SCLK rise together; the word of the period that has just ended leaves now.
    always @(posedge SCLK) begin
        if (ALIGNWD) begin
            $display("IDDRX2F model: ALIGNWD is not modelled (the rig leaves it unconnected)");
            $stop;
        end
        Q0 <= RST ? 1'b0 : rise0;
        Q1 <= RST ? 1'b0 : fall0;
        Q2 <= RST ? 1'b0 : rise1;
        Q3 <= RST ? 1'b0 : fall1;
    end
endmodule
