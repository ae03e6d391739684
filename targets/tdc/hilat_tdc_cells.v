// For synthesis of a TDC line (gateware/tdc.py) with yosys, board builds only; never simulated.
//
// TRELLIS_COMB is nextpnr-ecp5's own cell (half a slice: a LUT4, its carry and the F/FCO outputs); yosys
// does not know it, so it is declared here as a black box with the ports nextpnr gives it
// (ecp5/cells.cc) that the line uses: the instances pass through synthesis untouched, with their BEL.
(* blackbox *)
module TRELLIS_COMB(
	input A, B, C, D, M, FCI,
	output F, FCO, OFX
);
	parameter MODE = "LOGIC";
	parameter [15:0] INITVAL = 16'h0000;
	parameter CCU2_INJECT1 = "NO";
endmodule

// The line's carry input: 1'bx, which nextpnr takes as "no carry in" (a constant makes it add a
// feed-in cell, no net at all crashes it: issue 35's probe).
module hilat_tdc_undef(output o);
	assign o = 1'bx;
endmodule
