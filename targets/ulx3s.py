#!/usr/bin/env python3
"""hilat rig on the ULX3S (ECP5 LFE5U-25F/45F/85F, FT231X USB-UART; the 12F is too small for the rig).

Built with the open toolchain from PyPI (YoWASP Yosys + nextpnr-ecp5 + ecppack), loaded with
openFPGALoader through the FT231X on the US1 port, which also carries the UART.

    python -m targets.ulx3s --build [--device LFE5U-85F]    # build/boards/ulx3s/
    python -m targets.ulx3s --load                          # SRAM, lost at power-off
    python -m targets.ulx3s --flash                         # configuration flash

Rig signals are on header J1, GP0-GP4/GN0-GN4; with ``--samples-per-tick 4`` the inputs are on J2
(bank 2, where IDDRX2F is); see docs/wiring.md.
"""

from litex_boards.platforms import radiona_ulx3s

from gateware.soc import RigSoC
from targets import board_flow

BOARD = "ulx3s"
PROGRAMMER_BOARD = "ulx3s"
ENGINE_OFF_DEVICES = ("LFE5U-25F",)   # 79 % full with the engine: timing met with some seeds only
SYS_CLK_FREQ = 50e6
TS_CLK_FREQ  = 140e6  # 7.14 ns ticks, exact from the PLL (VCO 700 MHz, with sys 50 MHz)
# The FT231X on US1 runs up to 3 Mbaud (its 48 MHz / 16 with divisor 1): the rig's fastest link.
# docs/boards.md, "Serial link".
UART_BAUDRATE = 3_000_000
UART_BRIDGE = ("FT231X on US1", 3_000_000)   # (name, top rate)

# Channel -> (FPGA ball, header position). J1 pairs GPn (+ row) / GNn (- row) sit side by side, so
# a jumper across GP0/GN0 (stim0 -> in2, the spare input) is the calibration loopback.
PINS = {
    "stim0": ("B11", "J1 GP0 (`J1_5+`)"),
    "in2":   ("C11", "J1 GN0 (`J1_5-`)"),
    "stim1": ("A10", "J1 GP1 (`J1_7+`)"),
    "in3":   ("A11", "J1 GN1 (`J1_7-`)"),
    "in0":   ("A9",  "J1 GP2 (`J1_9+`)"),
    "in1":   ("B10", "J1 GN2 (`J1_9-`)"),
    "in4":   ("B9",  "J1 GP3 (`J1_11+`)"),
    "in5":   ("C10", "J1 GN3 (`J1_11-`)"),
    "in6":   ("A7",  "J1 GP4 (`J1_13+`)"),
    "in7":   ("A8",  "J1 GN4 (`J1_13-`)"),
}

# Four samples a tick (IDDRX2F, only in the left and right banks; J1's GP0-GP4 are bank 0, the top):
# the four inputs on J2 GP18/GN18 and GP19/GN19 (balls H18 H17 F17 G18, bank 2), the stimulus
# outputs where they are. The loopback is a wire from J1 GP0 (stim0) to J2 GP19 (in2).
PINS_FOUR_SAMPLES = {
    "stim0": PINS["stim0"],
    "stim1": PINS["stim1"],
    "in0":   ("H18", "J2 GP18 (`J2_13+`)"),
    "in1":   ("H17", "J2 GN18 (`J2_13-`)"),
    "in2":   ("F17", "J2 GP19 (`J2_15+`)"),
    "in3":   ("G18", "J2 GN19 (`J2_15-`)"),
}

# The engine's trigger-out (pulses while a stimulus waits past its threshold): pin, header position.
TRIGGER = ("B2", "LED D0 (its resistor side)")


# CRG ----------------------------------------------------------------------------------------------

class _CRG(board_flow.PllCRG):
    def __init__(self, platform, sys_clk_freq, ts_clk_freq, samples_per_tick=1):
        board_flow.PllCRG.__init__(self, platform.request("clk25"), platform.request("rst"),
                                   sys_clk_freq, ts_clk_freq, samples_per_tick)
        # Keep the ESP32 from resetting the FPGA.
        self.comb += platform.request("wifi_gpio0").eq(1)


# BaseSoC ------------------------------------------------------------------------------------------

class BaseSoC(RigSoC):
    def __init__(self, device="LFE5U-45F", revision="2.0", sys_clk_freq=SYS_CLK_FREQ, ts_clk_freq=None,
                 toolchain="trellis", n_inputs=None, samples_per_tick=1, with_tdc=False, tdc_inputs=None,
                 **kwargs):
        ts_clk_freq, n_inputs = board_flow.sampling_settings(samples_per_tick, ts_clk_freq, n_inputs, TS_CLK_FREQ)
        kwargs.setdefault("uart_baudrate", UART_BAUDRATE)
        platform = radiona_ulx3s.Platform(device=device, revision=revision, toolchain=toolchain)
        platform.add_extension(board_flow.rig_io(board_flow.board_pins(samples_per_tick, PINS, PINS_FOUR_SAMPLES),
                                                 n_inputs))

        # CRG --------------------------------------------------------------------------------------
        self.crg = _CRG(platform, sys_clk_freq, ts_clk_freq, samples_per_tick)

        # Rig SoC ----------------------------------------------------------------------------------
        stimulus_pads, capture_pads = board_flow.request_rig_pads(platform, n_inputs)
        if kwargs.get("with_engine"):
            kwargs["trigger_pad"] = board_flow.request_trigger_pad(platform, TRIGGER)
        if with_tdc:
            if tdc_inputs is None:
                tdc_inputs = board_flow.default_tdc_inputs(kwargs.get("with_engine"), False)
            kwargs["tdc"] = board_flow.tdc_inputs(platform, capture_pads, samples_per_tick, tdc_inputs)
        RigSoC.__init__(self, platform, sys_clk_freq, ts_clk_freq, stimulus_pads, capture_pads,
                        board=BOARD, samples_per_tick=samples_per_tick,
                        edge_clock_domain="eclk" if samples_per_tick == 4 else None, **kwargs)
        self.uart_bridge = UART_BRIDGE     # for the build report: (name, highest rate)


# Build --------------------------------------------------------------------------------------------

def make_parser():
    # The engine meets timing on the LFE5U-45F (docs/engine.md, "Room on the FPGA"); on a 25F (the
    # Colorlight i5's device) with some nextpnr seeds only: on by default on the larger devices.
    parser = board_flow.make_parser(radiona_ulx3s.Platform, BOARD, "hilat rig on ULX3S",
                                    SYS_CLK_FREQ, TS_CLK_FREQ, PROGRAMMER_BOARD, UART_BAUDRATE, engine_default=None,
                                    engine_default_text="on with the LFE5U-45F and -85F, off with the 25F")
    parser.add_target_argument("--device", default="LFE5U-45F",
                               help="FPGA device (LFE5U-25F, LFE5U-45F or LFE5U-85F).")
    parser.add_target_argument("--revision", default="2.0", help="Board revision (2.0 or 1.7).")
    return parser


def build_soc(args, parser):
    kwargs = board_flow.rig_soc_kwargs(parser)
    cpu_variant = kwargs.pop("cpu_variant", None) or "standard"
    return BaseSoC(device=args.device, revision=args.revision, sys_clk_freq=args.sys_clk_freq,
                   ts_clk_freq=args.ts_clk_freq, toolchain=args.toolchain, fifo_depth=args.fifo_depth,
                   n_inputs=args.inputs, samples_per_tick=args.samples_per_tick, cpu_variant=cpu_variant,
                   with_engine=engine_for(args), with_tdc=args.tdc, tdc_inputs=args.tdc_inputs, **kwargs)


def engine_for(args):
    """--engine / --no-engine as given, else the device's default."""
    return args.engine if args.engine is not None else args.device not in ENGINE_OFF_DEVICES


def main():
    parser = make_parser()
    board_flow.main(lambda args: build_soc(args, parser), BOARD, __file__, parser, PROGRAMMER_BOARD)


if __name__ == "__main__":
    main()
