// hilat_dut_model: the default simulated device under test of hilat's simulated rig.
//
// Port list (a user's own DUT model must provide exactly these ports; choose it with
// `hilat sim --dut-model FILE.v --dut-top MODULE`):
//
//   clk        input   the rig's `ts` clock: one cycle is one tick of the rig's timebase
//   rst        input   active-high reset, synchronous to clk
//   stim[1:0]  input   the rig's stimulus pins (channel 0 is the interrupt line)
//   isr_pin    output  raised at ISR entry, dropped at ISR exit       (rig input in0, channel 2)
//   task_pin   output  raised when the woken task is dispatched       (rig input in1, channel 3)
//   spare_pin  output  calibration source, low unless enabled below      (rig capture channel 4)
//   tag_pin    output  "DMA active": raised around some responses     (rig capture channel 5)
//
// Behaviour: on each rising edge of stim[0] at tick S the model draws, from a xorshift32 PRNG
// seeded by +dut_seed, whether it misses the interrupt, its interrupt latency
//   L = isr_base + (r & (2**isr_spread_bits - 1)) [+ mask_ticks when an "interrupts masked"
//       window hits, probability mask_per1024/1024], at least 1,
// its rescheduling delay R = resched_base + (r & (2**resched_spread_bits - 1)), and whether the tag
// is raised (tag_per1024/1024). It then raises isr_pin at S+L for isr_width ticks, task_pin at
// S+L+R for task_width ticks, and tag_pin from S+1 to the end of the task pulse. A stimulus that
// arrives while a response is still in progress is ignored and logged as missed (busy).
//
// Every stimulus is written to +dut_log=FILE (if given) as one CSV line:
//   index,missed,isr_latency_ticks,task_latency_ticks,tagged
// so tests compare what the rig measured against exactly what was injected.
//
// The spare pin stands for the rig's calibration inputs (hilat calibrate, docs/calibration.md):
//
// - loopback (+dut_loopback=1): the jumper STIM0 -> SPARE, i.e. spare_pin = stim[0] delayed by
//   loopback_delay ticks (the rig's own offset; the real rig's output and input paths) plus, per
//   pulse, a uniform extra 0..loopback_jitter ticks from a PRNG of its own (+dut_loopback_seed).
//   Delay + jitter <= 255 ticks; the stimulus interval must exceed delay + jitter + pulse width.
// - 1PPS (+dut_pps_period=P ticks, 0 = off): a pulse every P*(1 + pps_ppb*1e-9) ticks, i.e. what a
//   GPS 1PPS looks like to a rig whose clock is off by pps_ppb parts per billion (signed). The
//   fraction is accumulated exactly: pulse k comes k*P + floor(k*P*ppb/1e9) ticks after pulse 0
//   (about P ticks after reset). Options: pps_width (ticks high, default P/10), pps_jitter J
//   (each pulse moved by a uniform -J..+J ticks, not accumulated), pps_missing_every N with
//   pps_missing_run R (pulses k >= N with k mod N < R are not emitted), pps_extra_every M (an extra
//   pulse a third of an interval after each pulse k >= 1 with k mod M == 0). Every pulse is written
//   to +dut_pps_log=FILE as "kind,index,tick" (kind: pulse, missing (with its ideal tick), extra);
//   tick counts the DUT clock from reset.
//
// Wiring, as a user's board may have it (for captures with roles on other pins, --role/--active-low):
// +dut_isr_active_low=1 makes the ISR signal active-low (idle high, pulled low at ISR entry);
// +dut_swap_isr_task=1 puts the ISR signal on task_pin and the task signal on isr_pin.
//
// A second interrupt source (+dut_irq2=1, for two stimulus channels at once): on each rising edge
// of stim[1] at tick S2, spare_pin rises at S2 + L2, L2 = irq2_base + (r & (2**irq2_spread_bits - 1))
// from a PRNG of its own (+dut_irq2_seed), for irq2_width ticks; a stim[1] edge while that pulse
// is pending is ignored and logged as missed. Logged to +dut_irq2_log=FILE as "index,missed,latency".
//
// DUT-paced activity (+dut_paced_period=P, 0 = off; for captures with no stimulus): the DUT itself
// "sends" on isr_pin every P + (r & (2**paced_jitter_bits - 1)) ticks, the receiver "wakes" on
// task_pin D = paced_recv_base + (r & 31) ticks after each send, and a handler runs on tag_pin
// H = paced_handler_base + (r & 15) ticks after that, for W = paced_width + (r & 7) ticks (send
// and wake pulses are paced_width ticks). These replace the stimulus responses on those pins.
// Logged to +dut_paced_log=FILE as "index,send_tick,recv_delay,handler_delay,handler_width"
// (send_tick counts the DUT clock from reset).
//
// All settings are plusargs (+dut_isr_base=50 ...), so changing them needs no rebuild.

module hilat_dut_model (
    input  wire       clk,
    input  wire       rst,
    input  wire [1:0] stim,
    output wire       isr_pin,
    output wire       task_pin,
    output wire       spare_pin,
    output wire       tag_pin
);
    reg [31:0] seed, isr_base, isr_spread_bits, mask_per1024, mask_ticks, resched_base;
    reg [31:0] resched_spread_bits, isr_width, task_width, miss_per1024, tag_per1024;
    reg [8*512-1:0] log_name, pps_log_name;
    integer log_fd, pps_log_fd;
    reg [31:0] loopback, loopback_delay, loopback_jitter, loopback_seed;
    reg [31:0] pps_period, pps_width, pps_jitter, pps_missing_every, pps_missing_run, pps_extra_every;
    reg [31:0] pps_seed;
    integer    pps_ppb;
    reg [31:0] isr_active_low, swap_isr_task;
    // The ISR and task signals, active high, then as wired to the pins.
    reg        isr_level, task_level;
    wire       isr_signal = isr_level ^ isr_active_low[0];
    reg        tag_level;
    // DUT-paced activity, when enabled, drives the ISR, task and tag pins instead.
    reg        paced_send, paced_recv, paced_handler;
    reg [31:0] paced_period;
    wire       paced = paced_period != 0;
    assign isr_pin  = paced ? paced_send : swap_isr_task[0] ? task_level : isr_signal;
    assign task_pin = paced ? paced_recv : swap_isr_task[0] ? isr_signal : task_level;
    assign tag_pin  = paced ? paced_handler : tag_level;

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
        isr_active_low = 0; swap_isr_task = 0;
        if ($value$plusargs("dut_isr_active_low=%d", isr_active_low)) ;
        if ($value$plusargs("dut_swap_isr_task=%d", swap_isr_task)) ;
        if (seed == 0) seed = 32'h2545F491;
        log_fd = 0;
        if ($value$plusargs("dut_log=%s", log_name)) begin
            log_fd = $fopen(log_name, "w");
        end
        loopback = 0; loopback_delay = 0; loopback_jitter = 0; loopback_seed = 1;
        pps_period = 0; pps_ppb = 0; pps_width = 0; pps_jitter = 0; pps_missing_every = 0;
        pps_missing_run = 1; pps_extra_every = 0; pps_seed = 1;
        if ($value$plusargs("dut_loopback=%d", loopback)) ;
        if ($value$plusargs("dut_loopback_delay=%d", loopback_delay)) ;
        if ($value$plusargs("dut_loopback_jitter=%d", loopback_jitter)) ;
        if ($value$plusargs("dut_loopback_seed=%d", loopback_seed)) ;
        if ($value$plusargs("dut_pps_period=%d", pps_period)) ;
        if ($value$plusargs("dut_pps_ppb=%d", pps_ppb)) ;
        if ($value$plusargs("dut_pps_width=%d", pps_width)) ;
        if ($value$plusargs("dut_pps_jitter=%d", pps_jitter)) ;
        if ($value$plusargs("dut_pps_missing_every=%d", pps_missing_every)) ;
        if ($value$plusargs("dut_pps_missing_run=%d", pps_missing_run)) ;
        if ($value$plusargs("dut_pps_extra_every=%d", pps_extra_every)) ;
        if ($value$plusargs("dut_pps_seed=%d", pps_seed)) ;
        if (loopback_seed == 0) loopback_seed = 32'h2545F491;
        if (pps_seed == 0) pps_seed = 32'h2545F491;
        if (loopback_delay + loopback_jitter > 255) begin
            $display("hilat_dut_model: loopback_delay + loopback_jitter > 255 ticks, clamped");
            loopback_jitter = 0;
            if (loopback_delay > 255) loopback_delay = 255;
        end
        if (pps_width == 0 || pps_width >= pps_period / 3) pps_width = pps_period / 10 + 1;
        pps_log_fd = 0;
        if (pps_period != 0 && $value$plusargs("dut_pps_log=%s", pps_log_name)) begin
            pps_log_fd = $fopen(pps_log_name, "w");
        end
    end


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
    wire [31:0] draw_isr_any = isr_base + (r2 & ((32'd1 << isr_spread_bits) - 1))
                             + (((r3 & 32'd1023) < mask_per1024) ? mask_ticks : 32'd0);
    // At least 1: the pins are registered, so nothing can answer in the stimulus's own tick.
    wire [31:0] draw_isr  = (draw_isr_any == 0) ? 32'd1 : draw_isr_any;
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
            isr_level  <= 1'b0;
            task_level <= 1'b0;
            tag_level <= 1'b0;
        end else begin
            stim_prev <= stim[0];
            if (busy) begin
                t <= t + 1;
                // Registered outputs: set in cycle S+k-1 to show in cycle S+k.
                if (t + 1 == isr_at)             isr_level  <= 1'b1;
                if (t + 1 == isr_at + isr_width) isr_level  <= 1'b0;
                if (t + 1 == task_at)            task_level <= 1'b1;
                if (t + 1 == end_at) begin
                    task_level <= 1'b0;
                    tag_level <= 1'b0;
                    busy     <= 1'b0;
                end
            end
            if (stim_rise) begin
                // Tick S: the stimulus pin is active in this cycle.
                index <= index + 1;
                if (busy) begin
                    // Flushed as the others: the last stimulus of a run may be one of these.
                    if (log_fd != 0) begin
                        $fwrite(log_fd, "%0d,2,0,0,0\n", index);
                        $fflush(log_fd);
                    end
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
                        // A pin due at S+1 is set now: the countdown above sets S+k's from S+1 on.
                        if (draw_isr == 1)  isr_level  <= 1'b1;
                        if (draw_task == 1) task_level <= 1'b1;
                        isr_at  <= draw_isr;
                        task_at <= draw_task;
                        end_at  <= draw_task + task_width;
                        tag_level <= draw_tag;
                    end
                end
            end
        end
    end

    // ---- loopback: spare_pin = stim[0] delayed by loopback_delay (+ jitter drawn per pulse) ----
    reg  [255:0] stim_hist;        // stim_hist[i]: stim[0] i+1 ticks ago
    reg  [31:0]  lb_state, lb_delay;
    wire [31:0]  lb_r = xorshift32(lb_state);
    wire [31:0]  lb_draw = loopback_delay + (loopback_jitter == 0 ? 32'd0 : lb_r % (loopback_jitter + 1));
    // The delay of a pulse is drawn at its rising edge and holds until the next one.
    wire [31:0]  lb_now = (stim[0] & ~stim_prev) ? lb_draw : lb_delay;
    wire         loopback_pin = (lb_now == 0) ? stim[0] : stim_hist[lb_now[7:0] - 8'd1];

    // ---- 1PPS ----
    reg  [63:0]        cycle;      // DUT clock ticks since reset
    reg  [63:0]        pps_ideal;  // tick of the next ideal pulse
    reg  [63:0]        pps_rise_at, pps_extra_at, pps_fall_at;
    reg                pps_rise_pending, pps_extra_pending;
    reg  signed [63:0] pps_rem;    // accumulated fraction, in 1e-9 ticks, 0 <= pps_rem < 1e9
    reg  [31:0]        pps_index, pps_state, pps_rise_index, pps_extra_index;
    reg                pps_pin;
    // Exact fractional accumulation of the next interval, P*(1 + ppb*1e-9) = P + q + (rem' - rem)/1e9.
    wire signed [63:0] pps_total = pps_rem + $signed({32'd0, pps_period}) * $signed({{32{pps_ppb[31]}}, pps_ppb});
    wire signed [63:0] pps_trunc = pps_total / 64'sd1000000000;   // rounds toward zero
    wire signed [63:0] pps_q     = (pps_total - pps_trunc * 64'sd1000000000 < 0) ? pps_trunc - 1 : pps_trunc;
    wire        [31:0] pps_r     = xorshift32(pps_state);
    wire               pps_missing = pps_missing_every != 0 && pps_index >= pps_missing_every
                                     && (pps_index % pps_missing_every) < pps_missing_run;

    always @(posedge clk) begin
        if (rst) begin
            stim_hist <= 0;
            lb_state  <= loopback_seed;
            lb_delay  <= loopback_delay;
            cycle     <= 0;
            pps_ideal <= {32'd0, pps_period};
            pps_rem   <= 0;
            pps_index <= 0;
            pps_state <= pps_seed;
            pps_pin   <= 1'b0;
            pps_rise_pending  <= 1'b0;
            pps_extra_pending <= 1'b0;
            pps_fall_at <= 0;
        end else begin
            stim_hist <= {stim_hist[254:0], stim[0]};
            if (stim[0] & ~stim_prev) begin
                lb_delay <= lb_draw;
                if (loopback_jitter != 0) lb_state <= lb_r;
            end
            cycle <= cycle + 1;
            if (pps_period != 0) begin
                // Pulses are registered: decided in tick X-1 to show in tick X.
                if (cycle == pps_ideal) begin
                    pps_rem   <= pps_total - pps_q * 64'sd1000000000;
                    pps_ideal <= pps_ideal + {32'd0, pps_period} + pps_q;
                    pps_index <= pps_index + 1;
                    pps_state <= pps_r;
                    // A pulse shows in tick ideal + 2 + J + u, u uniform in [-J, J] (0 without jitter).
                    if (pps_missing) begin
                        if (pps_log_fd != 0) begin
                            $fwrite(pps_log_fd, "missing,%0d,%0d\n", pps_index, cycle + 2 + {32'd0, pps_jitter});
                            $fflush(pps_log_fd);
                        end
                    end else begin
                        pps_rise_pending <= 1'b1;
                        pps_rise_index   <= pps_index;
                        pps_rise_at <= cycle + 2 + {32'd0, pps_jitter == 0 ? 32'd0 : pps_r % (2 * pps_jitter + 1)};
                    end
                    if (pps_extra_every != 0 && pps_index >= 1 && pps_index % pps_extra_every == 0) begin
                        pps_extra_pending <= 1'b1;
                        pps_extra_index   <= pps_index;
                        pps_extra_at <= cycle + 2 + {32'd0, pps_jitter + pps_period / 3};
                    end
                end
                if (pps_rise_pending && cycle + 1 == pps_rise_at) begin
                    pps_rise_pending <= 1'b0;
                    pps_pin <= 1'b1;
                    pps_fall_at <= pps_rise_at + {32'd0, pps_width};
                    if (pps_log_fd != 0) begin
                        $fwrite(pps_log_fd, "pulse,%0d,%0d\n", pps_rise_index, pps_rise_at);
                        $fflush(pps_log_fd);
                    end
                end else if (pps_extra_pending && cycle + 1 == pps_extra_at) begin
                    pps_extra_pending <= 1'b0;
                    pps_pin <= 1'b1;
                    pps_fall_at <= pps_extra_at + {32'd0, pps_width};
                    if (pps_log_fd != 0) begin
                        $fwrite(pps_log_fd, "extra,%0d,%0d\n", pps_extra_index, pps_extra_at);
                        $fflush(pps_log_fd);
                    end
                end else if (pps_pin && cycle + 1 == pps_fall_at) begin
                    pps_pin <= 1'b0;
                end
            end
        end
    end

    // ---- a second interrupt source on spare_pin, answering stim[1] ----
    reg [31:0] irq2, irq2_base, irq2_spread_bits, irq2_width, irq2_seed;
    reg [8*512-1:0] irq2_log_name;
    integer    irq2_log_fd;
    reg        stim1_prev, irq2_busy, irq2_pin;
    reg [31:0] irq2_state, irq2_t, irq2_at, irq2_index;
    wire [31:0] irq2_r    = xorshift32(irq2_state);
    wire [31:0] irq2_draw = irq2_base + (irq2_r & ((32'd1 << irq2_spread_bits) - 1));

    initial begin
        irq2 = 0; irq2_base = 30; irq2_spread_bits = 7; irq2_width = 15; irq2_seed = 99;
        if ($value$plusargs("dut_irq2=%d", irq2)) ;
        if ($value$plusargs("dut_irq2_base=%d", irq2_base)) ;
        if ($value$plusargs("dut_irq2_spread_bits=%d", irq2_spread_bits)) ;
        if ($value$plusargs("dut_irq2_width=%d", irq2_width)) ;
        if ($value$plusargs("dut_irq2_seed=%d", irq2_seed)) ;
        if (irq2_seed == 0) irq2_seed = 32'h2545F491;
        if (irq2_base < 2) irq2_base = 2;
        irq2_log_fd = 0;
        if (irq2 != 0 && $value$plusargs("dut_irq2_log=%s", irq2_log_name)) irq2_log_fd = $fopen(irq2_log_name, "w");
    end

    always @(posedge clk) begin
        if (rst) begin
            stim1_prev <= 1'b0;
            irq2_busy  <= 1'b0;
            irq2_pin   <= 1'b0;
            irq2_state <= irq2_seed;
            irq2_t     <= 0;
            irq2_index <= 0;
        end else begin
            stim1_prev <= stim[1];
            if (irq2_busy) begin
                // As for the ISR: set in cycle S2+k-1 to show in cycle S2+k.
                irq2_t <= irq2_t + 1;
                if (irq2_t + 1 == irq2_at) irq2_pin <= 1'b1;
                if (irq2_t + 1 == irq2_at + irq2_width) begin
                    irq2_pin  <= 1'b0;
                    irq2_busy <= 1'b0;
                end
            end
            if (irq2 != 0 && stim[1] && !stim1_prev) begin
                irq2_index <= irq2_index + 1;
                if (irq2_busy) begin
                    if (irq2_log_fd != 0) $fwrite(irq2_log_fd, "%0d,1,0\n", irq2_index);
                end else begin
                    irq2_state <= irq2_r;
                    irq2_busy  <= 1'b1;
                    irq2_t     <= 1;
                    irq2_at    <= irq2_draw;
                    if (irq2_log_fd != 0) $fwrite(irq2_log_fd, "%0d,0,%0d\n", irq2_index, irq2_draw);
                end
                if (irq2_log_fd != 0) $fflush(irq2_log_fd);
            end
        end
    end

    // ---- DUT-paced activity: send (isr_pin) -> wake (task_pin) -> handler (tag_pin) ----
    reg [31:0] paced_jitter_bits, paced_recv_base, paced_handler_base, paced_width, paced_seed;
    reg [8*512-1:0] paced_log_name;
    integer    paced_log_fd;
    reg [63:0] paced_send_at, paced_send_end, paced_recv_at, paced_handler_at, paced_handler_end;
    reg [31:0] paced_state, paced_index;
    wire [31:0] paced_r1 = xorshift32(paced_state);
    wire [31:0] paced_r2 = xorshift32(paced_r1);
    wire [31:0] paced_delay   = paced_recv_base + (paced_r1 & 32'd31);
    wire [31:0] paced_handler_delay = paced_handler_base + (paced_r1 >> 8 & 32'd15);
    wire [31:0] paced_handler_width = paced_width + (paced_r1 >> 16 & 32'd7);
    wire [31:0] paced_next    = paced_period + (paced_r2 & ((32'd1 << paced_jitter_bits) - 1));

    initial begin
        paced_period = 0; paced_jitter_bits = 8; paced_recv_base = 40; paced_handler_base = 60;
        paced_width = 10; paced_seed = 17;
        if ($value$plusargs("dut_paced_period=%d", paced_period)) ;
        if ($value$plusargs("dut_paced_jitter_bits=%d", paced_jitter_bits)) ;
        if ($value$plusargs("dut_paced_recv_base=%d", paced_recv_base)) ;
        if ($value$plusargs("dut_paced_handler_base=%d", paced_handler_base)) ;
        if ($value$plusargs("dut_paced_width=%d", paced_width)) ;
        if ($value$plusargs("dut_paced_seed=%d", paced_seed)) ;
        if (paced_seed == 0) paced_seed = 32'h2545F491;
        paced_log_fd = 0;
        if (paced_period != 0 && $value$plusargs("dut_paced_log=%s", paced_log_name))
            paced_log_fd = $fopen(paced_log_name, "w");
    end

    always @(posedge clk) begin
        if (rst) begin
            paced_send <= 1'b0; paced_recv <= 1'b0; paced_handler <= 1'b0;
            paced_state <= paced_seed;
            paced_index <= 0;
            paced_send_at <= {32'd0, paced_period};
            paced_send_end <= 0; paced_recv_at <= 0; paced_handler_at <= 0; paced_handler_end <= 0;
        end else if (paced) begin
            // Registered, like the pps: decided in tick X-1 to show in tick X (cycle + 1 == X).
            if (cycle + 1 == paced_send_at) begin
                paced_send <= 1'b1;
                paced_send_end <= paced_send_at + paced_width;
                paced_state <= paced_r2;
                paced_index <= paced_index + 1;
                paced_recv_at <= paced_send_at + paced_delay;
                paced_handler_at <= paced_send_at + paced_delay + paced_handler_delay;
                paced_handler_end <= paced_send_at + paced_delay + paced_handler_delay + paced_handler_width;
                paced_send_at <= paced_send_at + paced_next;
                if (paced_log_fd != 0) begin
                    $fwrite(paced_log_fd, "%0d,%0d,%0d,%0d,%0d\n", paced_index, paced_send_at, paced_delay,
                            paced_handler_delay, paced_handler_width);
                    $fflush(paced_log_fd);
                end
            end
            if (paced_send && cycle + 1 == paced_send_end) paced_send <= 1'b0;
            if (cycle + 1 == paced_recv_at) paced_recv <= 1'b1;
            if (paced_recv && cycle + 1 == paced_recv_at + paced_width) paced_recv <= 1'b0;
            if (cycle + 1 == paced_handler_at) paced_handler <= 1'b1;
            if (paced_handler && cycle + 1 == paced_handler_end) paced_handler <= 1'b0;
        end
    end

    assign spare_pin = irq2 != 0 ? irq2_pin : loopback != 0 ? loopback_pin : pps_pin;
endmodule
