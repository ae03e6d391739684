"""The Colorlight targets' Ethernet and the i9 target, without the toolchain (docs/boards.md,
docs/wiring.md "Ethernet"): which PHY's pins a build takes, the 125 MHz constraint on its receive
clock, the defaults (i5: Ethernet without the engine; i9: both), the i9's device, UART pins and rig
pins, and the build report's eth_rx / eth_tx rows, matched by the clock's port even when ts has the
same frequency."""

import re

import pytest
from litex.gen import LiteXModule
from litex_boards.platforms import colorlight_i5 as platforms
from migen import ClockDomain

from targets import board_flow, build_report, colorlight_i5, colorlight_i9

# litex-boards' eth_clocks / eth resources: (rx clock, GTXCLK, rx_ctl, tx_ctl) balls per PHY index.
PHY_BALLS = {0: ("H2", "G1", "P2", "K1"), 1: ("L19", "U19", "M20", "P19")}


def sites(lpf):
    return dict(re.findall(r'LOCATE COMP "(\w+)" SITE "(\w+)";', lpf))


@pytest.mark.parametrize("index", sorted(PHY_BALLS))
def test_rgmii_phy_takes_its_pins_and_its_clock_is_constrained(index, tmp_path):
    platform = platforms.Platform(board="i9", revision="7.2")
    top = LiteXModule()
    top.cd_sys = ClockDomain()      # the PHY's CSRs and MDIO are in sys
    top.comb += top.cd_sys.clk.eq(platform.request("clk25"))
    top.ethphy = board_flow.rgmii_phy(platform, index)
    platform.build(top, build_dir=str(tmp_path), run=False)
    lpf = (tmp_path / "top.lpf").read_text()
    located = sites(lpf)
    rx_clock, tx_clock, rx_ctl, tx_ctl = PHY_BALLS[index]
    port = board_flow.eth_clock_net(index)
    assert (located[port], located[f"eth_clocks{index}_tx"]) == (rx_clock, tx_clock)
    assert (located[f"eth{index}_rx_ctl"], located[f"eth{index}_tx_ctl"]) == (rx_ctl, tx_ctl)
    other = 1 - index
    assert f"eth_clocks{other}_rx" not in located
    assert re.search(rf'FREQUENCY PORT "{port}" 125\.0 MHz;', lpf)
    # TX is clocked from the RX clock, and GTXCLK leaves without the FPGA's delay (the PHY adds it).
    verilog = (tmp_path / "top.v").read_text()
    # {pad: DEL_VALUE} of every DELAYG, the pad being its output (transmit) or its input (receive).
    delays = {}
    for value, a, z in re.findall(r"DELAYG #\(.*?\.DEL_VALUE\s*\(\d+'d(\d+)\)\s*\).*?\.A\s*\(([\w\[\]]+)\)"
                                  r".*?\.Z\s*\(([\w\[\]]+)\)", verilog, re.S):
        delays[z if z.startswith("eth") else a] = int(value)
    assert delays[f"eth_clocks{index}_tx"] == delays[f"eth{index}_tx_ctl"] == 0
    assert delays[f"eth{index}_rx_ctl"] == int(2e-9 / 25e-12)     # LiteEth's 2 ns on the receive side


def test_unknown_phy_is_refused():
    with pytest.raises(SystemExit, match="--eth-phy 2"):
        board_flow.rgmii_phy(platforms.Platform(board="i5", revision="7.0"), 2)


@pytest.mark.parametrize("target, engine, ethernet, icmp", [(colorlight_i5, False, True, False),
                                                             (colorlight_i9, True, True, True)])
def test_defaults(target, engine, ethernet, icmp):
    args = target.make_parser().parse_args([])
    assert (args.engine, args.ethernet, args.eth_phy, args.ip, args.mac, args.icmp) == (engine, ethernet, 0, None,
                                                                                       None, icmp)
    args = target.make_parser().parse_args(["--no-ethernet", "--eth-phy", "1", "--ip", "10.0.0.7", "--no-icmp"])
    assert (args.ethernet, args.eth_phy) == (False, 1)
    assert board_flow.eth_settings(args) == {"ip": "10.0.0.7", "mac": None, "with_icmp": False}


def test_ethernet_kwargs_pass_only_what_is_given():
    phy = object()
    assert board_flow.ethernet_kwargs(phy, {"ip": None, "mac": None}) == {"ethernet_phy": phy}
    assert board_flow.ethernet_kwargs(phy, {"ip": "10.0.0.7", "mac": None, "with_icmp": True}) == {
        "ethernet_phy": phy, "eth_ip": "10.0.0.7", "eth_with_icmp": True}


def test_i9_elaborates_with_engine_and_ethernet(tmp_path):
    soc = colorlight_i9.BaseSoC()
    assert soc.platform.device == colorlight_i9.DEVICE == "LFE5U-45F-6BG381C"
    assert soc.engine is not None and soc.ethnet is not None and soc.eth_phy == 0
    assert soc.ethnet.core.icmp is not None                     # ping, where there is room
    assert soc.gateware_identity.startswith("colorlight_i9 ")
    assert soc.constants["HILAT_ETHERNET"] == 1 and soc.constants["HILAT_ENGINE_BINS"] > 0
    soc.platform.build(soc, build_dir=str(tmp_path), run=False)
    lpf = (tmp_path / "top.lpf").read_text()
    located = sites(lpf)
    # The UART on litex-boards' `serial`: tx J17, rx H18 (SODIMM 84 / 86, the DAPLink's USART2).
    resource, (tx, rx) = colorlight_i9.UART_RESOURCE
    assert resource == "serial" and (located["serial_tx"], located["serial_rx"]) == (tx, rx) == ("J17", "H18")
    assert "serialx_tx" not in located
    # The rig's pins and the trigger-out are the i5's: the same extension board.
    for name, (where, _) in colorlight_i5.PINS.items():
        assert located[name] == board_flow._ball(soc.platform, where), name
    assert located["trigger"] == board_flow._ball(soc.platform, colorlight_i9.TRIGGER[0]) == "C2"
    # PHY 0 (the pairs named ETH2 on P1), its receive clock constrained for the report's eth rows.
    assert located["eth_clocks0_rx"] == PHY_BALLS[0][0] and "eth_clocks1_rx" not in located
    assert 'FREQUENCY PORT "eth_clocks0_rx" 125.0 MHz;' in lpf


def test_i5_default_is_ethernet_without_engine():
    soc = colorlight_i5.BaseSoC()
    assert soc.platform.device == "LFE5U-25F-6BG381C" and soc.eth_phy == 0
    assert getattr(soc, "engine", None) is None and not hasattr(soc.ethnet.core, "icmp")
    assert getattr(colorlight_i5.BaseSoC(with_ethernet=False), "ethnet", None) is None    # --no-ethernet


LOG = """\
Info: Max frequency for clock '$glbnet$crg_clkout': 64.10 MHz (PASS at 50.00 MHz)
Info: Max frequency for clock '$glbnet$crg_clkout1': 140.20 MHz (PASS at 125.00 MHz)
Info: Max frequency for clock '$glbnet$eth_clocks0_rx$TRELLIS_IO_IN': 121.70 MHz (FAIL at 125.00 MHz)
"""


def test_eth_clock_rows_matched_by_port(tmp_path):
    bit = tmp_path / "x.bit"
    bit.write_bytes(b"bits")
    eth = (board_flow.ETH_CLK_FREQ, board_flow.eth_clock_net(0))
    # ts at 125 MHz (four samples a tick) shares the frequency: the eth net is not ts's.
    report = build_report.make("colorlight_i9", "LFE5U-45F", {"sys": 50e6, "ts": 125e6, "eth_rx": eth,
                                                             "eth_tx": eth}, LOG, bit, tmp_path)
    clocks = report["clocks"]
    assert clocks["ts"]["nets"] == ["$glbnet$crg_clkout1"] and clocks["ts"]["met"]
    assert clocks["eth_rx"]["nets"] == clocks["eth_tx"]["nets"] == ["$glbnet$eth_clocks0_rx$TRELLIS_IO_IN"]
    assert clocks["eth_rx"]["achieved_mhz"] == 121.70 and not clocks["eth_rx"]["met"]
    assert build_report.problems(report) == [
        "clock 'eth_rx' reaches 121.70 MHz, below the requested 125.00 MHz",
        "clock 'eth_tx' reaches 121.70 MHz, below the requested 125.00 MHz"]
    summary = build_report.summary(report)
    assert "  eth_rx requested  125.000 MHz, achieved Fmax 121.70 MHz  FAIL" in summary
    assert "  ts     requested  125.000 MHz, achieved Fmax 140.20 MHz  PASS" in summary
    # The other PHY's port was not timed: a problem, not a pass.
    other = (board_flow.ETH_CLK_FREQ, board_flow.eth_clock_net(1))
    report = build_report.make("b", "d", {"eth_rx": other}, LOG, bit, tmp_path)
    assert "clock 'eth_rx' (125.000 MHz) not found in nextpnr's timing report" in build_report.problems(report)
