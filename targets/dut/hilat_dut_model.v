// hilat_dut_model: the default simulated device under test of hilat's simulated rig.
//
// Port list (a user's own DUT model must provide exactly these ports; choose it with
// `hilat sim --dut-model FILE.v --dut-top MODULE`):
//
//   clk        input   the rig's `ts` clock: one cycle is one tick of the rig's timebase
//   rst        input   active-high reset, synchronous to clk
//   stim[1:0]  input   the rig's stimulus pins (channel 0 is the interrupt line)
//   isr_pin    output  raised at ISR entry, dropped at ISR exit       (rig capture channel 2)
//   task_pin   output  raised when the woken task is dispatched       (rig capture channel 3)
//   spare_pin  output  unused here, held low                          (rig capture channel 4)
//   tag_pin    output  "DMA active": raised around some responses     (rig capture channel 5)
//
// Behaviour: on each rising edge of stim[0] at tick S the model draws, from a xorshift32 PRNG
// seeded by +dut_seed, whether it misses the interrupt, its interrupt latency
//   L = isr_base + (r & (2**isr_spread_bits - 1)) [+ mask_ticks when an "interrupts masked"
//       window hits, probability mask_per1024/1024],
// its rescheduling delay R = resched_base + (r & (2**resched_spread_bits - 1)), and whether the tag
// is raised (tag_per1024/1024). It then raises isr_pin at S+L for isr_width ticks, task_pin at
// S+L+R for task_width ticks, and tag_pin from S+1 to the end of the task pulse. A stimulus that
// arrives while a response is still in progress is ignored and logged as missed (busy).
//
// Every stimulus is written to +dut_log=FILE (if given) as one CSV line:
//   index,missed,isr_latency_ticks,task_latency_ticks,tagged
// so tests compare what the rig measured against exactly what was injected.
//
// All settings are plusargs (+dut_isr_base=50 ...), so changing them needs no rebuild.

module hilat_dut_model (
    input  wire       clk,
    input  wire       rst,
    input  wire [1:0] stim,
    output reg        isr_pin,
    output reg        task_pin,
    output wire       spare_pin,
    output reg        tag_pin
);
    reg [31:0] seed, isr_base, isr_spread_bits, mask_per1024, mask_ticks, resched_base;
    reg [31:0] resched_spread_bits, isr_width, task_width, miss_per1024, tag_per1024;
    reg [8*512-1:0] log_name;
    integer log_fd;

    function [31:0] xorshift32(input [31:0] x);
        reg [31:0] a, b;
        begin
            a = x ^ (x << 13);
            b = a ^ (a >> 17);
            xorshift32 = b ^ (b << 5);
        end
    endfunction

    initial begin
        seed = 1; isr_base = 50; isr_spread_bits = 6; mask_per1024 = 20; mask_ticks = 400;
        resched_base = 80; resched_spread_bits = 5; isr_width = 20; task_width = 30;
        miss_per1024 = 5; tag_per1024 = 100;
        if ($value$plusargs("dut_seed=%d", seed)) ;
        if ($value$plusargs("dut_isr_base=%d", isr_base)) ;
        if ($value$plusargs("dut_isr_spread_bits=%d", isr_spread_bits)) ;
        if ($value$plusargs("dut_mask_per1024=%d", mask_per1024)) ;
        if ($value$plusargs("dut_mask_ticks=%d", mask_ticks)) ;
        if ($value$plusargs("dut_resched_base=%d", resched_base)) ;
        if ($value$plusargs("dut_resched_spread_bits=%d", resched_spread_bits)) ;
        if ($value$plusargs("dut_isr_width=%d", isr_width)) ;
        if ($value$plusargs("dut_task_width=%d", task_width)) ;
        if ($value$plusargs("dut_miss_per1024=%d", miss_per1024)) ;
        if ($value$plusargs("dut_tag_per1024=%d", tag_per1024)) ;
        if (seed == 0) seed = 32'h2545F491;
        log_fd = 0;
        if ($value$plusargs("dut_log=%s", log_name)) begin
            log_fd = $fopen(log_name, "w");
        end
    end

    assign spare_pin = 1'b0;

    reg        stim_prev;
    reg [31:0] state;
    reg        busy;
    reg [31:0] t;             // ticks since the stimulus being answered
    reg [31:0] isr_at, task_at, end_at;
    reg [31:0] index;

    // One response's draws, from the current PRNG state.
    wire [31:0] r1 = xorshift32(state);
    wire [31:0] r2 = xorshift32(r1);
    wire [31:0] r3 = xorshift32(r2);
    wire [31:0] r4 = xorshift32(r3);
    wire [31:0] r5 = xorshift32(r4);
    wire        draw_miss = (r1 & 32'd1023) < miss_per1024;
    wire [31:0] draw_isr  = isr_base + (r2 & ((32'd1 << isr_spread_bits) - 1))
                          + (((r3 & 32'd1023) < mask_per1024) ? mask_ticks : 32'd0);
    wire [31:0] draw_task = draw_isr + resched_base + (r4 & ((32'd1 << resched_spread_bits) - 1));
    wire        draw_tag  = (r5 & 32'd1023) < tag_per1024;
    wire        stim_rise = stim[0] & ~stim_prev;

    always @(posedge clk) begin
        if (rst) begin
            stim_prev <= 1'b0;
            state     <= seed;
            busy      <= 1'b0;
            t         <= 0;
            index     <= 0;
            isr_pin   <= 1'b0;
            task_pin  <= 1'b0;
            tag_pin   <= 1'b0;
        end else begin
            stim_prev <= stim[0];
            if (busy) begin
                t <= t + 1;
                // Registered outputs: set in cycle S+k-1 to show in cycle S+k.
                if (t + 1 == isr_at)             isr_pin  <= 1'b1;
                if (t + 1 == isr_at + isr_width) isr_pin  <= 1'b0;
                if (t + 1 == task_at)            task_pin <= 1'b1;
                if (t + 1 == end_at) begin
                    task_pin <= 1'b0;
                    tag_pin  <= 1'b0;
                    busy     <= 1'b0;
                end
            end
            if (stim_rise) begin
                // Tick S: the stimulus pin is active in this cycle.
                index <= index + 1;
                if (busy) begin
                    if (log_fd != 0) $fwrite(log_fd, "%0d,2,0,0,0\n", index);
                end else begin
                    state <= r5;
                    if (log_fd != 0) begin
                        $fwrite(log_fd, "%0d,%0d,%0d,%0d,%0d\n", index, draw_miss,
                                draw_miss ? 0 : draw_isr, draw_miss ? 0 : draw_task,
                                draw_miss ? 1'b0 : draw_tag);
                        $fflush(log_fd);
                    end
                    if (!draw_miss) begin
                        busy    <= 1'b1;
                        t       <= 1;     // t == k in cycle S+k
                        isr_at  <= draw_isr;
                        task_at <= draw_task;
                        end_at  <= draw_task + task_width;
                        tag_pin <= draw_tag;
                    end
                end
            end
        end
    end
endmodule
