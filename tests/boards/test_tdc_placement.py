"""The TDC line as placed and routed (gateware/tdc.py, targets/tdc/line_build.py): one line of 256 taps
with its encoder through yosys and nextpnr-ecp5 for the Colorlight i5's LFE5U-25F (about 10 s, once
per session). nextpnr's placed netlist (``--write``) is read back: every cell of the line sits at the
bel asked for, the carry runs on the dedicated FCO -> FCI wires only (no general routing, no feed-in
cell of nextpnr's own), each sampler takes its own half's F, the encoder meets 140 MHz while the
line's asynchronous paths are left out of the timing, the committed tap table is this build's, and the
lines' regions are logic tiles in prjtrellis' tile grid.
"""

import json
import re

import pytest

from gateware.tdc import FEED_IN_INITVAL, N_TAPS, REGIONS, TAP_INITVAL, carry_bels, line_tiles
from targets.tdc import line_build

pytestmark = pytest.mark.slow    # a nextpnr run (about 10 s)

# Wires of the carry: a slice's FCI/FCO, the tile's FCI/FCO and the HFIE wire between two tiles.
CARRY_WIRE = re.compile(r"^X\d+/Y\d+/(?:\d+_\d+_)?(FCI[A-D]?1?_SLICE|FCO[A-D]?_SLICE|FCI|FCO|HFIE0000)$")


@pytest.fixture(scope="module")
def line(tmp_path_factory):
    result = line_build.build(out=tmp_path_factory.mktemp("tdc_line"))
    placed = json.loads(result["placed"].read_text())
    return result, placed, line_build.placed_cells(placed)


def _by_bel(cells):
    return {c["attributes"]["NEXTPNR_BEL"]: (n, c) for n, c in cells.items() if "NEXTPNR_BEL" in c["attributes"]}


def _int(v):
    return int(v, 2) if isinstance(v, str) else v


def test_every_cell_at_its_bel(line):
    result, _placed, cells = line
    at = _by_bel(cells)
    bels = carry_bels(result["device"], 0, N_TAPS)
    assert len(bels) == N_TAPS + 1
    for i, (comb_bel, ff_bel) in enumerate(bels):
        name, comb = at[comb_bel]
        assert comb["type"] == "TRELLIS_COMB" and comb["parameters"]["MODE"] == "CCU2", (comb_bel, name)
        assert _int(comb["parameters"]["INITVAL"]) == (FEED_IN_INITVAL if i == 0 else TAP_INITVAL), name
        assert comb["parameters"]["CCU2_INJECT1"] == "NO", name
        if i == 0:
            continue
        ff_name, ff = at[ff_bel]
        assert ff["type"] == "TRELLIS_FF", (ff_bel, ff_name)
        assert ff["connections"]["DI"] == comb["connections"]["F"], f"{ff_name} does not sample {name}"


def test_carry_on_dedicated_wires_only(line):
    result, placed, cells = line
    module, = placed["modules"].values()
    nets = {tuple(n["bits"]): (name, n) for name, n in module["netnames"].items()}
    chain = line_build.line_cells(placed, carry_bels(result["device"], 0, N_TAPS))
    # The line starts on no carry at all: nextpnr added no feed-in cell of its own.
    assert not chain[0][1]["connections"].get("FCI"), chain[0][1]["connections"].get("FCI")
    users = {}
    for n, c in cells.items():
        for port, bits in c["connections"].items():
            if c["port_directions"].get(port) == "input":
                for b in bits:
                    users.setdefault(b, []).append((n, port))
    for (name, cell), (next_name, next_cell) in zip(chain, chain[1:]):
        fco = cell["connections"]["FCO"]
        assert next_cell["connections"]["FCI"] == fco, f"{name} FCO does not drive {next_name} FCI"
        assert users[fco[0]] == [(next_name, "FCI")], f"carry of {name} goes elsewhere too: {users[fco[0]]}"
        net_name, net = nets[tuple(fco)]
        routing = net["attributes"]["ROUTING"].split(";")
        wires = [w for w in routing[0::3] if w]
        pips = [p for p in routing[1::3] if p]
        assert wires, f"{net_name} unrouted"
        bad = [w for w in wires if not CARRY_WIRE.match(w)]
        assert not bad, f"{net_name} ({name} -> {next_name}) leaves the carry wires: {bad}"
        for p in pips:
            tile, arc = p.rsplit("/", 1)
            for end in arc.split("->"):
                assert re.search(r"FC[IO]|HFIE", end), f"{net_name}: pip {p} is not a carry pip"
    # The tile-to-tile hops are there: the line spans its tiles on one row.
    xs = {c["attributes"]["NEXTPNR_BEL"].split("/")[0] for _, c in chain}
    assert len(xs) == line_tiles(N_TAPS)


def test_timing_met_and_line_left_asynchronous(line):
    result, _placed, _cells = line
    log = result["log"].read_text()
    fmax = [float(m) for m in re.findall(r"Max frequency for clock '[^']*ts_clk[^']*': ([\d.]+) MHz \(PASS", log)]
    assert fmax and fmax[-1] >= 140, re.findall(r"Max frequency.*", log)
    assert "FAIL" not in "\n".join(re.findall(r"Max frequency.*", log))
    # The pin -> line -> samplers paths start at no clock: nextpnr lists them as <async>, unconstrained.
    assert re.search(r"Max delay <async>\s+-> posedge \S*ts_clk", log)


def test_committed_tap_table_is_this_build(line):
    result, placed, _cells = line
    table = json.loads((line_build.TAPS_DIR / "taps_colorlight_i5.json").read_text())
    taps = line_build.tap_arrivals(placed, result["sdf"].read_text(), carry_bels(result["device"], 0, N_TAPS))
    assert table["taps_ps"] == taps[line_build.TABLE_CORNER]
    assert table["device"] == "LFE5U-25F" and len(table["taps_ps"]) == N_TAPS
    assert table["tick_ps"] == pytest.approx(1e12 / 140e6, abs=1e-3)
    # nextpnr's model: a slice's carry 62 / 66 / 71 ps (speed 6) for two taps, the line longer than a tick.
    for corner, lo, hi in (("min", 7000, 9000), ("typ", 8400, 9100), ("max", 9000, 10000)):
        assert lo < max(taps[corner]) < hi, (corner, max(taps[corner]))


@pytest.mark.parametrize("board", ["colorlight_i9", "ulx3s"])
def test_committed_45f_tap_tables_are_their_builds(board, tmp_path):
    """The 45F boards' tables (their hosts' predicted bins) are their own one-line builds' at the 45F
    region's channel-0 bels; nextpnr's model gives the 25F's line (carry wires at 0 ps)."""
    result = line_build.build(board, out=tmp_path)
    placed = json.loads(result["placed"].read_text())
    taps = line_build.tap_arrivals(placed, result["sdf"].read_text(), carry_bels(result["device"], 0, N_TAPS))
    table = json.loads((line_build.TAPS_DIR / f"taps_{board}.json").read_text())
    assert table["board"] == board and table["device"] == result["device"] == "LFE5U-45F"
    assert table["taps_ps"] == taps[line_build.TABLE_CORNER]


@pytest.mark.parametrize("device", sorted(REGIONS))
def test_regions_are_logic_tiles(device):
    grid = json.loads((line_build.trellis_database() / device / "tilegrid.json").read_text())
    plc = {(int(m.group(1)), int(m.group(2))) for m in
           (re.match(r"R(\d+)C(\d+):PLC2$", name) for name in grid) if m}
    channels = 0
    while True:
        try:
            bels = carry_bels(device, channels)
        except SystemExit:
            break
        for comb, _ff in bels:
            x, y = (int(v) for v in re.match(r"X(\d+)/Y(\d+)/", comb).groups())
            assert (y, x) in plc, f"{device} channel {channels}: {comb} is not on a logic tile"
        channels += 1
    assert channels >= 8, f"{device}: room for {channels} lines"


def test_report_section(line, tmp_path):
    """The build report's TDC lines (targets/build_report.tdc_lines) from this build's prediction and a
    synthesis of the bank alone: the cost holds the line's carry cells, no block RAM."""
    from targets import build_report

    result, placed, _cells = line
    lines = line_build.predicted_lines(placed, result["sdf"].read_text(), result["device"], 1)
    cost = line_build.bank_cost(tmp_path, 1, result["device"])
    assert cost["line_carry_cells"] == N_TAPS + 1 and cost["block_rams"] == 0
    assert cost["flip_flops"] >= N_TAPS and cost["lut4_equivalent"] > cost["line_carry_cells"]
    text = "\n".join(build_report.tdc_lines({"inputs": 1, "taps": N_TAPS, "code_bits": 8, "latency_ticks": 6,
                                             "table_corner": "typ", "cost": cost, "lines": lines}))
    typ = lines[0]["bins"]["typ"]
    assert typ["mean_ps"] == pytest.approx((max(lines[0]["taps_ps"]["typ"]) - min(lines[0]["taps_ps"]["typ"]))
                                           / (N_TAPS - 1), abs=0.01)
    assert f"bins {typ['min_ps']}/{typ['mean_ps']}/{typ['max_ps']} ps" in text and "0 DP16KD" in text, text
