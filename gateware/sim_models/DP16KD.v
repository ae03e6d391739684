// Simulation model of the ECP5 sysMEM block DP16KD, for Verilator and cocotb only (board builds use
// the real block). Written from Lattice's "ECP5 and ECP5-5G Memory Usage Guide" (TN1264): 18 Kbit,
// here in its 512 x 36 pseudo-dual-port form, port A writing and port B reading. In that form
// DIA0-17 / DIB0-17 carry the low / high halves of a written word and DOA0-17 / DOB0-17 those of the
// read word; AD*13..5 address the word, and ADA0-3 enable its four 9-bit bytes. A read takes the
// word at the CLKB edge (CEB high) into the block's data latch; "OUTREG" adds the output register,
// loaded from the latch at the next CLKB edge with OCEB high, so the data appears two edges after the
// address instead of one. In this form the low half leaves on DOA, so REGMODE_A names its register
// and REGMODE_B the high half's: the model takes them only equal.
//
// Also the 2048 x 9 form (DATA_WIDTH_A = DATA_WIDTH_B = 9): DIA0-8 write, DOB0-8 read, AD*13..3 address
// the word (AD*2..0 unused).
//
// The subset modelled is what gateware/bram.py drives: DATA_WIDTH_A = DATA_WIDTH_B = 36 or 9, chip selects
// decoded to 0b000 and tied low, no resets, write mode NORMAL, and a read of a word written at the
// same edge returns the old word (the gateware never depends on it). Other settings stop the
// simulation at time 0 rather than simulate something else.
/* verilator lint_off UNUSEDSIGNAL */
/* verilator lint_off UNUSEDPARAM */
module DP16KD #(
    parameter DATA_WIDTH_A = 18,
    parameter DATA_WIDTH_B = 18,
    parameter REGMODE_A = "NOREG",
    parameter REGMODE_B = "NOREG",
    parameter RESETMODE = "SYNC",
    parameter ASYNC_RESET_RELEASE = "SYNC",
    parameter CSDECODE_A = "0b000",
    parameter CSDECODE_B = "0b000",
    parameter WRITEMODE_A = "NORMAL",
    parameter WRITEMODE_B = "NORMAL",
    parameter GSR = "ENABLED"
) (
    input DIA0, DIA1, DIA2, DIA3, DIA4, DIA5, DIA6, DIA7, DIA8, DIA9, DIA10, DIA11, DIA12, DIA13, DIA14,
    input DIA15, DIA16, DIA17,
    input ADA0, ADA1, ADA2, ADA3, ADA4, ADA5, ADA6, ADA7, ADA8, ADA9, ADA10, ADA11, ADA12, ADA13,
    input CEA, OCEA, CLKA, WEA, CSA0, CSA1, CSA2, RSTA,
    input DIB0, DIB1, DIB2, DIB3, DIB4, DIB5, DIB6, DIB7, DIB8, DIB9, DIB10, DIB11, DIB12, DIB13, DIB14,
    input DIB15, DIB16, DIB17,
    input ADB0, ADB1, ADB2, ADB3, ADB4, ADB5, ADB6, ADB7, ADB8, ADB9, ADB10, ADB11, ADB12, ADB13,
    input CEB, OCEB, CLKB, WEB, CSB0, CSB1, CSB2, RSTB,
    output DOA0, DOA1, DOA2, DOA3, DOA4, DOA5, DOA6, DOA7, DOA8, DOA9, DOA10, DOA11, DOA12, DOA13, DOA14,
    output DOA15, DOA16, DOA17,
    output DOB0, DOB1, DOB2, DOB3, DOB4, DOB5, DOB6, DOB7, DOB8, DOB9, DOB10, DOB11, DOB12, DOB13, DOB14,
    output DOB15, DOB16, DOB17
);
    initial begin
        if (!((DATA_WIDTH_A == 36 && DATA_WIDTH_B == 36) || (DATA_WIDTH_A == 9 && DATA_WIDTH_B == 9))
                || CSDECODE_A != "0b000" || CSDECODE_B != "0b000"
                || WRITEMODE_A != "NORMAL" || REGMODE_A != REGMODE_B
                || (REGMODE_B != "NOREG" && REGMODE_B != "OUTREG"))
            $fatal(1, "DP16KD model: settings outside the modelled subset");
    end

    wire [35:0] din = {DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6,
                       DIB5, DIB4, DIB3, DIB2, DIB1, DIB0,
                       DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6,
                       DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
    wire [8:0] write_word = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5};
    wire [3:0] byte_enable = {ADA3, ADA2, ADA1, ADA0};
    wire [8:0] read_word = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5};
    // x9: the 9-bit word a is kept as byte a[1:0] of the 36-bit word a[10:2] (the block's own
    // arrangement is not observable through one form).
    wire [10:0] write_byte = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3};
    wire [10:0] read_byte = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3};
    localparam NARROW = DATA_WIDTH_A == 9;
    wire selected_a = !CSA0 && !CSA1 && !CSA2;
    wire selected_b = !CSB0 && !CSB1 && !CSB2;

    reg [35:0] words [0:511];
    reg [35:0] latch = 36'd0;
    reg [35:0] out_register = 36'd0;
    integer b;
    // The bitstream loads every block with zeros (INITVAL_* default to 0).
    initial for (b = 0; b < 512; b = b + 1) words[b] = 36'd0;

    always @(posedge CLKA) begin
        if (CEA && WEA && selected_a) begin
            if (NARROW)
                words[write_byte[10:2]][9*write_byte[1:0] +: 9] <= din[8:0];
            else
                for (b = 0; b < 4; b = b + 1)
                    if (byte_enable[b])
                        words[write_word][9*b +: 9] <= din[9*b +: 9];
        end
    end

    always @(posedge CLKB) begin
        if (CEB && selected_b)
            latch <= NARROW ? {27'd0, words[read_byte[10:2]][9*read_byte[1:0] +: 9]} : words[read_word];
        if (OCEB)
            out_register <= latch;
    end

    wire [35:0] dout = (REGMODE_B == "OUTREG") ? out_register : latch;
    // x36: the high half on DOB, the low on DOA; x9: the word on DOB0-8 (port A only writes).
    assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4,
            DOB3, DOB2, DOB1, DOB0} = NARROW ? dout[17:0] : dout[35:18];
    assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4,
            DOA3, DOA2, DOA1, DOA0} = NARROW ? 18'd0 : dout[17:0];
endmodule
