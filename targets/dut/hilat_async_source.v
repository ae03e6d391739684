// hilat_async_source: a free-running square wave on a clock of its own, unrelated to the rig's ts,
// for the code-density calibration of the sub-tick bins (hilat calibrate resolution,
// docs/subtick.md): its edges fall at every phase of the rig's tick in turn, as the toggles of a
// second oscillator do on a board.
//
//   clk   input   the source's own clock (the simulator's src_clk clocker)
//   out   output  toggles every +async_source_cycles=N clk cycles; low and still when N is 0 (default)
//
// Every edge is out's change on a clk rising edge: with the clock's period P and the rig's tick T,
// consecutive edges move by N*P mod T through the tick.

module hilat_async_source (
    input  wire clk,
    output reg  out
);
    reg [31:0] cycles, count;

    initial begin
        cycles = 0;
        if ($value$plusargs("async_source_cycles=%d", cycles)) ;
        count = 0;
        out = 1'b0;
    end

    always @(posedge clk) begin
        if (cycles != 0) begin
            if (count + 1 >= cycles) begin
                count <= 0;
                out   <= ~out;
            end else begin
                count <= count + 1;
            end
        end
    end
endmodule
