#!/usr/bin/env python3
"""hilat rig on the Colorlight i9 v7.2 (ECP5 LFE5U-45F) with the i5's extension board.

The i9 is the i5's module with the larger FPGA (litex-boards' ``colorlight_i5.Platform(board="i9",
revision="7.2")``): same SODIMM pinout, same extension board, so the same rig pins, UART and PHYs
(targets/colorlight_i5.py). The LFE5U-45F holds the measurement engine and Gigabit Ethernet together:
both on by default.

    python -m targets.colorlight_i9 --build          # build/boards/colorlight_i9/
    python -m targets.colorlight_i9 --load           # SRAM, lost at power-off
    python -m targets.colorlight_i9 --flash          # configuration flash

Serial: litex-boards' ``serial`` (tx J17, rx H18), not its ``serialx`` (E5/F4): the extension board's
schematic wires the DAPLink's USART2 to SODIMM pins 84/86, which are J17/H18 on the i9 as on the i5
(docs/boards.md, "Colorlight i9: which serial pins").
"""

from targets import board_flow
from targets import colorlight_i5 as i5

BOARD = "colorlight_i9"
PROGRAMMER_BOARD = "colorlight-i9"
MODULE = ("i9", "7.2")
DEVICE = "LFE5U-45F-6BG381C"
SYS_CLK_FREQ = i5.SYS_CLK_FREQ
TS_CLK_FREQ = i5.TS_CLK_FREQ
UART_BAUDRATE = i5.UART_BAUDRATE    # the same DAPLink bridge on the same extension board
UART_BRIDGE = i5.UART_BRIDGE
# litex-boards' resource the UART is on, and its (tx, rx) balls: SODIMM pins 84 and 86.
UART_RESOURCE = ("serial", ("J17", "H18"))
PINS = i5.PINS
PINS_FOUR_SAMPLES = i5.PINS_FOUR_SAMPLES
TRIGGER = i5.TRIGGER


class BaseSoC(i5.BaseSoC):
    def __init__(self, with_engine=True, with_ethernet=True, eth_kwargs=None, **kwargs):
        i5.BaseSoC.__init__(self, board=BOARD, module=MODULE, with_engine=with_engine, with_ethernet=with_ethernet,
                            eth_kwargs=eth_kwargs if eth_kwargs is not None else {"with_icmp": True}, **kwargs)


def make_parser():
    # The LFE5U-45F has room for ping as well.
    return i5.make_parser(BOARD, "hilat rig on Colorlight i9", PROGRAMMER_BOARD, engine_default=True,
                          ethernet_default=True, icmp_default=True)


def main():
    parser = make_parser()
    board_flow.main(lambda args: i5.build_soc(args, parser, BOARD, MODULE), BOARD, (__file__, i5.__file__),
                    parser, PROGRAMMER_BOARD)


if __name__ == "__main__":
    main()
