// Simulation model of the ECP5 edge-clock divider CLKDIVF, for Verilator and cocotb only (board
// builds use the clock tree's block). Written from its documented behaviour (Lattice, "ECP5 and
// ECP5-5G High-Speed I/O Interface", TN1265): CDIVX is CLKI divided by DIV; with DIV "2.0" it rises
// with every other rising edge of CLKI, the first one after RST is released, and is low while RST is
// high. That is the gearing clock of IDDRX2F: SCLK high during the first ECLK cycle of each word.
//
// The subset modelled is what the rig uses: DIV "2.0", ALIGNWD tied to 0 (no word slip). DIV "3.5"
// or ALIGNWD at 1 stop the simulation rather than simulate something else.
/* verilator lint_off UNUSEDSIGNAL */
module CLKDIVF #(
    parameter DIV = "2.0",
    parameter GSR = "DISABLED"
) (
    input  wire CLKI,
    input  wire RST,
    input  wire ALIGNWD,
    output reg  CDIVX
);
    initial begin
        CDIVX = 1'b0;
        if (DIV != "2.0") begin
            $display("CLKDIVF model: only DIV \"2.0\" is modelled");
            $stop;
        end
    end
    always @(posedge CLKI) begin
        if (ALIGNWD) begin
            $display("CLKDIVF model: ALIGNWD is not modelled (the rig ties it to 0)");
            $stop;
        end
        CDIVX <= RST ? 1'b0 : ~CDIVX;
    end
endmodule
