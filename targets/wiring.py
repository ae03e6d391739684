"""The tables of docs/wiring.md, made from the channel table (gateware/channels.py) and each board's
pin map, so the document cannot drift from the gateware:

    python -m targets.wiring            # rewrite the generated parts of docs/wiring.md
    python -m targets.wiring --check    # exit 1 if the document is out of date (tests/boards)

A generated part stands between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``."""

import re
import sys

from gateware import channels
from targets import board_flow
from targets.open_toolchain import ROOT

DOC = ROOT / "docs" / "wiring.md"


def tables():
    from litex_boards.platforms import colorlight_i5, radiona_ulx3s

    from targets import colorlight_i5 as i5_target
    from targets import ulx3s as ulx3s_target

    i5 = colorlight_i5.Platform(board="i5", revision="7.0", toolchain="trellis")
    ulx3s = radiona_ulx3s.Platform(toolchain="trellis")
    four = board_flow.max_inputs(4)
    return {
        "channels": channels.markdown_table(board_flow.rig_table()),
        "colorlight_i5": board_flow.wiring_table(i5, i5_target.PINS),
        "ulx3s": board_flow.wiring_table(ulx3s, ulx3s_target.PINS),
        "colorlight_i5_trigger": board_flow.trigger_line(i5, i5_target.TRIGGER),
        "colorlight_ethernet": ethernet_table(i5),
        "ulx3s_trigger": board_flow.trigger_line(ulx3s, ulx3s_target.TRIGGER),
        # Four samples a tick (--samples-per-tick 4): four inputs, on a left or right bank.
        "colorlight_i5_four_samples": board_flow.wiring_table(i5, i5_target.PINS_FOUR_SAMPLES, four),
        "ulx3s_four_samples": board_flow.wiring_table(ulx3s, ulx3s_target.PINS_FOUR_SAMPLES, four),
    }


# Which pairs of the extension board's P1 header each PHY drives, and its MDIO address. litex-boards
# numbers the PHYs by their PHYA[0] strap (its eth 0 has PHYA[0] = 0), which is the reverse of the
# names of the pairs on the module's SODIMM and on P1 (ETH1_*, ETH2_*): eth 0 is on the ETH2 pairs.
ETH_P1_PAIRS = {0: "ETH2_1..4 (P/N)", 1: "ETH1_1..4 (P/N)"}
ETH_MDIO_ADDRESS = {0: 0, 1: 1}


def ethernet_table(platform):
    """docs/wiring.md's table of the Colorlight modules' two RGMII PHYs, from litex-boards' resources."""
    rows = ["| `--eth-phy` | pairs on P1 | RXC | GTXCLK | RX_CTL | TX_CTL | RXD0-3 | TXD0-3 | MDIO address |",
            "|---|---|---|---|---|---|---|---|---|"]
    for index in board_flow.ETH_PHYS:
        clocks = {s.name: s.constraint for s in _subsignals(platform, "eth_clocks", index)}
        eth = {s.name: s.constraint for s in _subsignals(platform, "eth", index)}
        rows.append(f"| {index} | {ETH_P1_PAIRS[index]} | {clocks['rx']} | {clocks['tx']} | {eth['rx_ctl']} | "
                    f"{eth['tx_ctl']} | {eth['rx_data']} | {eth['tx_data']} | {ETH_MDIO_ADDRESS[index]} |")
    return "\n".join(rows) + "\n"


def _subsignals(platform, name, number):
    """(name, balls) of each subsignal of the litex-boards resource ``name``, ``number``."""
    from types import SimpleNamespace

    from litex.build.generic_platform import Pins, Subsignal

    resource, = [r for r in platform.constraint_manager.available if r[:2] == (name, number)]
    for item in resource[2:]:
        if isinstance(item, Subsignal):
            pins = next(c for c in item.constraints if isinstance(c, Pins))
            yield SimpleNamespace(name=item.name, constraint=" ".join(pins.identifiers))


def render(text, parts):
    for name, table in parts.items():
        pattern = re.compile(rf"(<!-- generated: {name} -->\n).*?(<!-- end generated -->)", re.S)
        assert pattern.search(text), f"docs/wiring.md has no generated part {name}"
        text = pattern.sub(lambda m, table=table: m.group(1) + table + m.group(2), text)
    return text


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    text = DOC.read_text()
    new = render(text, tables())
    if "--check" in argv:
        if new != text:
            print("docs/wiring.md is out of date: run python -m targets.wiring", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
