// Simulation model of the ECP5 edge-clock synchronizer ECLKSYNCB, for Verilator and cocotb only
// (board builds use the clock tree's block). Written from its documented behaviour (Lattice,
// "ECP5 and ECP5-5G High-Speed I/O Interface", TN1265): ECLKO is ECLKI, stopped while STOP is high;
// STOP is taken on the clock's low phase, so ECLKO stops and restarts without a shortened pulse.
module ECLKSYNCB (
    input  wire ECLKI,
    input  wire STOP,
    output wire ECLKO
);
    reg stopped = 1'b0;
    always @(negedge ECLKI) stopped <= STOP;
    assign ECLKO = ECLKI & ~stopped;
endmodule
