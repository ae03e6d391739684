// hilat_dut_cpu: a real CPU as the simulated DUT (targets/dut/cpu_soc.py's hilat_dut_soc), behind
// hilat_dut_model's ports plus a clock of its own (cpu_clk): the stimulus pin is the CPU's
// interrupt, its GPIO outputs are the pins the rig watches. What the firmware writes to its console
// byte goes to the file named by +dut_console=PATH, flushed at each newline.
module hilat_dut_cpu (
    input  wire       clk,        // the rig's ts: unused, the CPU runs on cpu_clk as a real DUT would
    input  wire       rst,
    input  wire       cpu_clk,
    input  wire [1:0] stim,
    output wire       isr_pin,
    output wire       task_pin,
    output wire       spare_pin,
    output wire       tag_pin
);
    wire [3:0] gpio;
    wire       console_valid;
    wire [7:0] console_data;

    hilat_dut_soc soc (
        .clk(cpu_clk), .rst(rst), .irq_in(stim[0]), .gpio_out(gpio),
        .console_valid(console_valid), .console_data(console_data)
    );
    assign isr_pin   = gpio[0];
    assign task_pin  = gpio[1];
    assign tag_pin   = gpio[2];
    assign spare_pin = gpio[3];

    integer console = 0;
    reg [8*512-1:0] console_name;
    initial if ($value$plusargs("dut_console=%s", console_name)) console = $fopen(console_name, "w");
    always @(posedge cpu_clk)
        if (console_valid && console != 0) begin
            $fwrite(console, "%c", console_data);
            if (console_data == 8'h0a) $fflush(console);
        end
endmodule
