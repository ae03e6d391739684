#!/usr/bin/env python3
"""hilat rig on the Colorlight i5 (ECP5 LFE5U-25F) with its extension board.

Built with the open toolchain from PyPI (YoWASP Yosys + nextpnr-ecp5 + ecppack), loaded with
openFPGALoader through the extension board's CMSIS-DAP USB port, which also carries the UART.

    python -m targets.colorlight_i5 --build          # build/boards/colorlight_i5/
    python -m targets.colorlight_i5 --load           # SRAM, lost at power-off
    python -m targets.colorlight_i5 --flash          # configuration flash

Rig signals are on connector P3 (litex-boards' ``pmode``); with ``--samples-per-tick 4`` the inputs are
on ``pmodf`` (bank 7, where IDDRX2F is); see docs/wiring.md. Gigabit Ethernet (docs/ethernet.md) is
on by default, the measurement engine off: the LFE5U-25F holds one of the two (docs/boards.md).
The Colorlight i9 (targets/colorlight_i9.py) is the same module with an LFE5U-45F: its target
reuses this one with the engine on as well.
"""

from litex_boards.platforms import colorlight_i5

from gateware.soc import RigSoC
from targets import board_flow

BOARD = "colorlight_i5"
PROGRAMMER_BOARD = "colorlight-i5"
MODULE = ("i5", "7.0")    # litex-boards' Platform(board=, revision=)
SYS_CLK_FREQ = 50e6
TS_CLK_FREQ  = 140e6  # 7.14 ns ticks, exact from the PLL (VCO 700 MHz, with sys 50 MHz)
# The extension board's serial port is DAPLink on an STM32F103: its USART2 (36 MHz APB1, 16x
# oversampling only) tops out at 36e6 / 16 = 2.25 Mbaud and cannot make 3 Mbaud (USARTDIV 0.75 < 1).
# 2 Mbaud is exact there (BRR = 36e6 / 2e6 = 18: USARTDIV 1.125) and a standard termios rate.
# docs/boards.md, "Serial link".
UART_BAUDRATE = 2_000_000
UART_BRIDGE = ("DAPLink CMSIS-DAP (STM32F103) on the extension board", 2_250_000)   # (name, top rate)

# Channel -> (connector position, header position); pmode:0..3 = PMOD pins 1-4, pmode:4..7 = pins
# 7-10. A jumper across pins 1 and 7 (stim0 -> in2, the spare input) is the calibration loopback.
PINS = {
    "stim0": ("pmode:0", "P3 pin 1"),
    "stim1": ("pmode:1", "P3 pin 2"),
    "in0":   ("pmode:2", "P3 pin 3"),
    "in1":   ("pmode:6", "P3 pin 9"),
    "in2":   ("pmode:4", "P3 pin 7"),
    "in3":   ("pmode:5", "P3 pin 8"),
    "in4":   ("pmode:3", "P3 pin 4"),
    "in5":   ("pmode:7", "P3 pin 10"),
    "in6":   ("pmodf:0", "`pmodf` pin 1"),
    "in7":   ("pmodf:1", "`pmodf` pin 2"),
}

# Four samples a tick (IDDRX2F, only in the left and right banks; P3 is bank 1, the top): the four
# inputs on `pmodf` pins 7-10 (balls E2 D2 B1 A3, bank 7), the stimulus outputs where they are. The
# loopback is a wire from P3 pin 1 (stim0) to `pmodf` pin 9 (in2). `pmodf` pin 3 keeps the trigger-out.
PINS_FOUR_SAMPLES = {
    "stim0": PINS["stim0"],
    "stim1": PINS["stim1"],
    "in0":   ("pmodf:4", "`pmodf` pin 7"),
    "in1":   ("pmodf:5", "`pmodf` pin 8"),
    "in2":   ("pmodf:6", "`pmodf` pin 9"),
    "in3":   ("pmodf:7", "`pmodf` pin 10"),
}

# The engine's trigger-out (pulses while a stimulus waits past its threshold): pin, header position.
TRIGGER = ("pmodf:2", "`pmodf` pin 3")


# Ethernet on by default, the engine off: on the LFE5U-25F the rig with both takes 94 % of the LUTs
# (docs/boards.md, "Colorlight i5: Ethernet or the engine"). No ping by default: the build stays the
# one measured to close timing (--icmp adds it).
ETHERNET_DEFAULT = True
ICMP_DEFAULT = False


# CRG ----------------------------------------------------------------------------------------------

class _CRG(board_flow.PllCRG):
    def __init__(self, platform, sys_clk_freq, ts_clk_freq, samples_per_tick=1):
        board_flow.PllCRG.__init__(self, platform.request("clk25"), ~platform.request("cpu_reset_n"),
                                   sys_clk_freq, ts_clk_freq, samples_per_tick)


# BaseSoC ------------------------------------------------------------------------------------------

class BaseSoC(RigSoC):
    """The rig on a Colorlight module with the extension board; ``board``/``module``: the i5 or the i9
    (targets/colorlight_i9.py). ``with_ethernet``: the RGMII PHY on ``eth_phy`` (litex-boards' index,
    docs/wiring.md, "Ethernet") handed to the rig SoC with ``eth_kwargs`` (address, MAC, ping)."""
    def __init__(self, sys_clk_freq=SYS_CLK_FREQ, ts_clk_freq=None, toolchain="trellis", n_inputs=None,
                 samples_per_tick=1, board=BOARD, module=MODULE, with_ethernet=ETHERNET_DEFAULT, eth_phy=0,
                 eth_kwargs=None, with_tdc=False, tdc_inputs=None, **kwargs):
        ts_clk_freq, n_inputs = board_flow.sampling_settings(samples_per_tick, ts_clk_freq, n_inputs, TS_CLK_FREQ)
        kwargs.setdefault("uart_baudrate", UART_BAUDRATE)
        platform = colorlight_i5.Platform(board=module[0], revision=module[1], toolchain=toolchain)
        platform.name = board    # the build's file names (litex-boards names both modules colorlight_i5)
        platform.add_extension(board_flow.rig_io(board_flow.board_pins(samples_per_tick, PINS, PINS_FOUR_SAMPLES),
                                                 n_inputs))

        # CRG --------------------------------------------------------------------------------------
        self.crg = _CRG(platform, sys_clk_freq, ts_clk_freq, samples_per_tick)

        # Rig SoC ----------------------------------------------------------------------------------
        stimulus_pads, capture_pads = board_flow.request_rig_pads(platform, n_inputs)
        if kwargs.get("with_engine"):
            kwargs["trigger_pad"] = board_flow.request_trigger_pad(platform, TRIGGER)
        if with_ethernet:
            self.ethphy = board_flow.rgmii_phy(platform, eth_phy)   # the SoC's UDP/IP stack runs on it
            kwargs.update(board_flow.ethernet_kwargs(self.ethphy, eth_kwargs))
        if with_tdc:
            if tdc_inputs is None:
                tdc_inputs = board_flow.default_tdc_inputs(kwargs.get("with_engine"), with_ethernet)
            kwargs["tdc"] = board_flow.tdc_inputs(platform, capture_pads, samples_per_tick, tdc_inputs)
        RigSoC.__init__(self, platform, sys_clk_freq, ts_clk_freq, stimulus_pads, capture_pads,
                        board=board, samples_per_tick=samples_per_tick,
                        edge_clock_domain="eclk" if samples_per_tick == 4 else None, **kwargs)
        self.uart_bridge = UART_BRIDGE     # for the build report: (name, highest rate)
        self.eth_phy = eth_phy if with_ethernet else None   # for the build report's eth_rx / eth_tx


# Build --------------------------------------------------------------------------------------------

def make_parser(board=BOARD, description="hilat rig on Colorlight i5", programmer_board=PROGRAMMER_BOARD,
                engine_default=False, ethernet_default=ETHERNET_DEFAULT, icmp_default=ICMP_DEFAULT):
    return board_flow.make_parser(colorlight_i5.Platform, board, description, SYS_CLK_FREQ, TS_CLK_FREQ,
                                  programmer_board, UART_BAUDRATE, engine_default=engine_default,
                                  ethernet_default=ethernet_default, icmp_default=icmp_default)


def build_soc(args, parser, board=BOARD, module=MODULE):
    kwargs = board_flow.rig_soc_kwargs(parser)
    cpu_variant = kwargs.pop("cpu_variant", None) or "standard"
    return BaseSoC(sys_clk_freq=args.sys_clk_freq, ts_clk_freq=args.ts_clk_freq, toolchain=args.toolchain,
                   fifo_depth=args.fifo_depth, n_inputs=args.inputs, samples_per_tick=args.samples_per_tick,
                   cpu_variant=cpu_variant, with_engine=args.engine, board=board, module=module,
                   with_ethernet=args.ethernet, eth_phy=args.eth_phy, eth_kwargs=board_flow.eth_settings(args),
                   with_tdc=args.tdc, tdc_inputs=args.tdc_inputs, **kwargs)


def main():
    parser = make_parser()
    board_flow.main(lambda args: build_soc(args, parser), BOARD, __file__, parser, PROGRAMMER_BOARD)


if __name__ == "__main__":
    main()
