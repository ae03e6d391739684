"""Each board's UART at the rate its USB-serial bridge carries (docs/boards.md, "Serial link"): the
Colorlight i5's DAPLink bridge at 2 Mbaud, the ULX3S's FT231X at 3 Mbaud; --uart-baudrate decides over
it; the host's --board knows the same rates; the SoC reports its rate to the host (soc.h, IDENTIFY);
the build report states LiteX's divider at the board's sys clock."""

import re

import pytest
from hilat.link.transport import BOARD_BAUDRATES, DEFAULT_BAUDRATE

from targets import board_flow, build_report, colorlight_i5, colorlight_i9, ulx3s

BOARDS = {"colorlight_i5": colorlight_i5, "colorlight_i9": colorlight_i9, "ulx3s": ulx3s}


def test_the_host_knows_each_boards_rate():
    assert BOARD_BAUDRATES == {name: board.UART_BAUDRATE for name, board in BOARDS.items()}
    assert DEFAULT_BAUDRATE == ulx3s.UART_BAUDRATE


@pytest.mark.parametrize("board", BOARDS.values(), ids=BOARDS)
def test_each_rate_is_inside_its_bridge(board):
    _, bridge_max_baud = board.UART_BRIDGE
    assert board.UART_BAUDRATE <= bridge_max_baud


def test_daplink_divider_arithmetic():
    # STM32F103 USART2 on a 36 MHz APB1 with 16x oversampling: USARTDIV = 36e6 / (16 * baud) must be
    # >= 1 (2.25 Mbaud at most); BRR holds it as 12.4 fixed point, i.e. 36e6 / baud.
    apb1_hz, oversampling = 36e6, 16
    assert colorlight_i5.UART_BRIDGE[1] == apb1_hz / oversampling
    assert apb1_hz / (oversampling * 3_000_000) < 1                      # 3 Mbaud: impossible
    brr = apb1_hz / colorlight_i5.UART_BAUDRATE
    assert brr == 18 and brr / oversampling == 1.125                     # exact: no rate error


@pytest.mark.parametrize("name", BOARDS)
def test_parser_default_and_override(name):
    parser = BOARDS[name].make_parser()
    parser.parse_args([])
    assert parser.soc_argdict["uart_baudrate"] == BOARD_BAUDRATES[name]
    parser = BOARDS[name].make_parser()
    parser.parse_args(["--uart-baudrate", "115200"])
    assert parser.soc_argdict["uart_baudrate"] == 115200


def test_i5_soc_is_built_for_its_rate_and_tells_the_firmware(tmp_path):
    soc = colorlight_i5.BaseSoC()
    assert soc.uart_baudrate == 2_000_000 and soc.constants["HILAT_UART_BAUDRATE"] == 2_000_000
    soc.platform.build(soc, build_dir=str(tmp_path), run=False)
    # LiteX's UART PHY steps its phase accumulator by the word the build report computes.
    word = build_report.uart(soc.uart_baudrate, soc.sys_clk_freq)["tuning_word"]
    verilog = (tmp_path / "top.v").read_text()
    assert re.search(rf"tx_phase \+ \d+'d{word}\)", verilog) and re.search(rf"rx_phase \+ \d+'d{word}\)", verilog)
    override = colorlight_i5.BaseSoC(uart_baudrate=1_000_000)
    assert override.constants["HILAT_UART_BAUDRATE"] == 1_000_000


def test_build_report_states_the_divider():
    # 2 Mbaud at 50 MHz: the word is floor(2e6 / 50e6 * 2**32) = floor(171,798,691.84), so the mean
    # rate is 0.84 / 171,798,691.84 low; edges on the 20 ns sys grid, 4 % of a 500 ns bit.
    entry = build_report.uart(2_000_000, 50e6, *colorlight_i5.UART_BRIDGE)
    assert entry["tuning_word"] == 171_798_691
    assert entry["rate_error_ppm"] == pytest.approx(-0.84 / 171_798_691.84 * 1e6, abs=1e-6)
    assert (entry["edge_step_ns"], entry["edge_step_bit_percent"]) == (20.0, 4.0)
    assert entry["within_bridge"] and entry["bridge_max_baud"] == 2_250_000
    line = build_report.uart_line(entry)
    assert line.startswith("UART 2000000 baud (DAPLink CMSIS-DAP (STM32F103) on the extension board): LiteX's "
                           "divider at 50 MHz gives 1999999.990 baud (-0.005 ppm), bit edges on a 20.000 ns grid "
                           "(4.000 % of a bit)")
    assert "ABOVE" not in line
    # Overridden above what the bridge carries: built, but the report says so.
    above = build_report.uart(3_000_000, 50e6, *colorlight_i5.UART_BRIDGE)
    assert not above["within_bridge"]
    assert build_report.uart_line(above).endswith("ABOVE the bridge's 2250000 baud: the host cannot read it")


def test_build_report_carries_the_uart_entry(tmp_path):
    bit = tmp_path / "x.bit"
    bit.write_bytes(b"bits")
    log = "Info: Max frequency for clock '$glbnet$sys': 60.00 MHz (PASS at 50.00 MHz)\n"
    report = build_report.make("colorlight_i5", "LFE5U-25F", {"sys": 50e6}, log, bit, tmp_path,
                               uart=build_report.uart(2_000_000, 50e6, *colorlight_i5.UART_BRIDGE))
    assert report["uart"]["baud"] == 2_000_000
    assert "  UART 2000000 baud (DAPLink" in build_report.summary(report)
    assert "UART" not in build_report.summary(build_report.make("b", "d", {"sys": 50e6}, log, bit, tmp_path))


def test_the_report_reads_the_board_socs_bridge():
    """board_flow passes the SoC's (bridge, top rate) to the report (the build itself is not run here)."""
    soc = ulx3s.BaseSoC()
    entry = build_report.uart(soc.uart_baudrate, soc.sys_clk_freq, *soc.uart_bridge)
    assert entry["baud"] == 3_000_000 and entry["bridge"] == "FT231X on US1" and entry["within_bridge"]
    assert board_flow.build_report is build_report
