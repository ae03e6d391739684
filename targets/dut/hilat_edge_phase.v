// hilat_edge_phase: where inside its tick each edge of the DUT's outputs falls, for the simulated rig
// with a TDC on every input (hilat sim --tdc, docs/tdc.md, "Simulation"). Verilator has no delays: an
// output changes on the clock edge that opens its tick, and this module says *when* in that tick the
// change is taken to happen (`phase_ps`, 1 .. TICK_PS ps after the opening edge), which the TDC's
// model line (gateware/tdc.py, _ThermometerModel) turns into the code the carry line would give.
//
//   clk        input   the rig's ts clock (the DUT model's clock)
//   pins       input   the DUT's outputs as the rig's inputs see them (N of them)
//   phase_ps   output  per input, 16 bits each: the phase of a change of that input in this tick
//
// Phases come from a xorshift32 PRNG (+edge_phase_seed, default 1), uniform over the tick, a new one
// every tick for every input; +edge_phase_fixed=P gives every change the phase P instead. Every change
// is written to +edge_phase_log=FILE as "input,level,phase_ps" in the order of the changes on that
// input, so a test knows each edge's time to the ps: its tick from the DUT's own log, its phase here.
//
// The resolution calibration's unrelated source (+tdc_source_ticks=N, 0 = off; N >= 3 so the line
// settles between changes): `source` toggles every N ticks; the rig ORs it onto the SPARE input, and
// its changes take phases from the same PRNG, so they fall at every phase of the tick uniformly, as an
// unrelated oscillator's do on a board.

module hilat_edge_phase #(
    parameter N = 4,
    parameter TICK_PS = 20000
) (
    input  wire            clk,
    input  wire [N-1:0]    pins,
    output wire [16*N-1:0] phase_ps,
    output reg             source
);
    reg [31:0] state, seed, fixed, source_ticks, source_count;
    reg [N-1:0] last;
    integer log_fd, i;
    reg [8*256-1:0] log_name;

    initial begin
        seed = 1;
        if ($value$plusargs("edge_phase_seed=%d", seed)) ;
        state = (seed == 0) ? 32'h1 : seed;
        fixed = 0;
        if ($value$plusargs("edge_phase_fixed=%d", fixed)) ;
        source_ticks = 0;
        if ($value$plusargs("tdc_source_ticks=%d", source_ticks)) ;
        source_count = 0;
        source = 1'b0;
        last = 0;
        log_fd = 0;
        if ($value$plusargs("edge_phase_log=%s", log_name))
            log_fd = $fopen(log_name, "w");
    end

    // Input k's phase this tick: 1 .. TICK_PS, from the state mixed with k.
    function [15:0] phase_of(input [31:0] s, input integer k);
        reg [31:0] x;
        begin
            x = s ^ (32'h9E3779B9 * (k + 1));
            x = x ^ (x >> 16);
            x = x * 32'h45D9F3B;
            x = x ^ (x >> 16);
            phase_of = (fixed != 0) ? fixed[15:0] : 16'(1 + (x % TICK_PS));
        end
    endfunction

    function [31:0] xorshift32(input [31:0] s);
        reg [31:0] x;
        begin
            x = s ^ (s << 13);
            x = x ^ (x >> 17);
            xorshift32 = x ^ (x << 5);
        end
    endfunction

    genvar g;
    generate
        for (g = 0; g < N; g = g + 1) begin : phases
            assign phase_ps[16*g +: 16] = phase_of(state, g);
        end
    endgenerate

    always @(posedge clk) begin
        // The changes of the tick that ends now, with the phases the model line used for them.
        for (i = 0; i < N; i = i + 1) begin
            if (pins[i] != last[i] && log_fd != 0)
                $fwrite(log_fd, "%0d,%0d,%0d\n", i, pins[i], phase_of(state, i));
        end
        if (log_fd != 0 && pins != last) $fflush(log_fd);   // readable while the simulator runs
        last <= pins;
        state <= xorshift32(state);
        if (source_ticks != 0) begin
            if (source_count + 1 >= source_ticks) begin
                source_count <= 0;
                source <= ~source;
            end else
                source_count <= source_count + 1;
        end
    end

    final if (log_fd != 0) $fclose(log_fd);
endmodule
