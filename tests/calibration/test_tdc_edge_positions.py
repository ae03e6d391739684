"""A TDC rig's calibration in the capture path (docs/tdc.md, "Calibration in the capture path"):
where captures place each code (measured bins, else the tap table's predicted ones, else whole ticks,
and the run says which), exact on hand-made lines; an edge of known time through the gateware's view
of the line (tdc_line.detect) placed within half its bin; one input's calibration stored without
touching another's; the statement; the codes of a calibration source taken from uint64 fractions and
refused when they cannot be a calibration."""

from types import SimpleNamespace

import numpy as np
import pytest
from hilat import analysis
from hilat.calibration import (
    CalibrationError,
    Store,
    applied,
    rig_identity,
    tdc,
    tdc_line,
    tdc_placement,
    tdc_rig,
    tdc_statement,
)
from hilat.calibration.loopback import loopback_delays

U = analysis.TDC_UNITS_PER_TICK
TICK_PS = 20000.0          # the simulator's 50 MHz
S0, W = 500.0, 100.0       # a uniform line: tap k reached S0 + k W ps after the edge enters it
UNIFORM = tdc_line.TapTable(S0 + W * np.arange(256), TICK_PS, board="test", source="uniform test line")


def _ident(tdc_inputs=4, gateware="sim abc123", ts_hz=50_000_000, n_inputs=4):
    channels = [("stim0", "stimulus"), ("stim1", "stimulus"), ("in0", "isr"), ("in1", "task"), ("in2", "spare"),
                ("in3", "tag")][:2 + n_inputs]
    return SimpleNamespace(gateware=gateware, ts_hz=ts_hz, sys_hz=50_000_000, n_stimulus=2, n_inputs=n_inputs,
                           pin_to_stamp_delay=7, firmware="fw", samples_per_tick=1, tdc_inputs=tdc_inputs,
                           tdc_taps=256 if tdc_inputs else 0, channels=channels)


def test_predicted_centres_of_a_hand_line():
    # Taps 10, 30, 20, 20, 50 ps, tick 35 ps: sorted 10 20 20 30 50, the tick's edges travel (10, 45].
    hand = tdc_line.TapTable(np.array([10.0, 30.0, 20.0, 20.0, 50.0]), 35.0)
    assert tdc_placement.predicted_centres_ps(hand).tolist() == [10.0, 15.0, 20.0, 25.0, 37.5]


def test_an_edge_of_known_time_lands_within_half_its_bin():
    """The contract: an edge recorded at tick t with code c is at (t + 1) tick - T(c). Through the
    gateware's view of the line (a change ``phase`` into its tick, recorded ``late`` ticks later)."""
    identity = rig_identity(_ident())
    subticks, warnings = tdc_placement.tdc_subticks(identity, None, UNIFORM)
    assert not warnings and [p["placement"] for p in subticks.placement] == ["predicted"] * 4
    phases = np.random.default_rng(2).uniform(1e-3, TICK_PS, 20000)
    late, codes = tdc_line.detect(UNIFORM, phases)
    assert late.any() and not late.all()     # edges in the first S0 ps of a tick are seen a tick later
    t0 = np.arange(len(phases), dtype=np.int64) * 5 + 1000
    records = ((t0 + late).astype(np.uint64), np.full(len(t0), 1 << 3, np.uint16), np.zeros(len(t0), np.uint16),
               (codes.astype(np.uint64) << np.uint64(8)))      # channel 3: the second TDC input
    times, chans, _ = analysis.edges_from_records(records, subticks=subticks)
    assert (chans == 3).all()
    # Code c covers the elapsed times (S0 + (c-1) W, S0 + c W]: its centre S0 + (c - 1/2) W, exactly.
    expected = (t0 + late + 1) * U - np.rint((S0 + (codes - 0.5) * W) / TICK_PS * U).astype(np.int64)
    assert times.view(np.int64).tolist() == expected.tolist()
    true_mu = (t0 + phases / TICK_PS) * U
    assert np.abs(times.view(np.int64) - true_mu).max() <= (W / 2) / TICK_PS * U + 0.5


def _codes_uniform(n_per_code=50, first=1, last=200):
    return np.repeat(np.arange(first, last + 1), n_per_code)


def test_measured_bins_placed_from_the_anchor_and_inputs_independent(tmp_path):
    ident = _ident()
    identity = rig_identity(ident)
    # Input 2 (channel 4): every code 1..200 equally often: each 1/200 tick wide, laid from the table's s0.
    a = tdc_rig.tdc_resolution_calibration(_codes_uniform(), ident, 4, "sim://", UNIFORM)
    assert a["anchor_ps"] == S0 and a["predicted"]["max_abs_z"] == 0.0
    path_a = tdc_rig.store_tdc_input(ident, a, tmp_path)[1]
    # Input 3 (channel 5) later, with other widths: input 2's stays as it was.
    b = tdc_rig.tdc_resolution_calibration(_codes_uniform(first=3, last=202), ident, 5, "sim://", None)
    path_b = tdc_rig.store_tdc_input(ident, b, tmp_path)[1]
    assert path_a == path_b
    part = Store(tmp_path).load(identity)["tdc"]
    assert sorted(part["inputs"]) == ["4", "5"] and part["inputs"]["4"] == a
    subticks, _ = tdc_placement.tdc_subticks(identity, part, UNIFORM)
    kinds = {p["channel"]: p["placement"] for p in subticks.placement}
    assert kinds == {2: "predicted", 3: "predicted", 4: "measured", 5: "measured"}
    c = np.arange(1, 201)
    want_a = np.rint((1 - (S0 + (c - 0.5) * TICK_PS / 200) / TICK_PS) * U).astype(int)
    assert [subticks.positions[2][k] for k in c] == want_a.tolist()
    # Without a table the anchor is 0: the bins fill the tick itself.
    want_b = np.rint((1 - (np.arange(1, 201) - 0.5) / 200) * U).astype(int)
    assert [subticks.positions[3][k] for k in range(3, 203)] == want_b.tolist()
    # Re-calibrating input 2 leaves input 3's stored result untouched.
    tdc_rig.store_tdc_input(ident, tdc_rig.tdc_resolution_calibration(_codes_uniform(20), ident, 4, "x", UNIFORM),
                            tmp_path)
    assert Store(tmp_path).load(identity)["tdc"]["inputs"]["5"] == b
    # No table and no measurement: whole ticks, said so.
    bare, _ = tdc_placement.tdc_subticks(identity, None, None, "no tap table for board 'x'")
    assert bare.placement[0]["placement"] == "none" and "no tap table" in bare.placement[0]["source"]
    assert set(bare.positions[0]) == {0}


def test_the_identity_picks_the_table_and_keys_the_file():
    sim = rig_identity(_ident())
    table, why = tdc_placement.predicted_table(sim)
    i5 = tdc_line.load_tap_table(tdc_placement.table_path("colorlight_i5"))
    assert why is None and table.tick_ps == TICK_PS
    assert table.taps_ps.tolist() == np.rint(i5.taps_ps * TICK_PS / i5.tick_ps).tolist()
    board, why = tdc_placement.predicted_table(rig_identity(_ident(gateware="colorlight_i5 abc", ts_hz=140_000_000)))
    assert board.taps_ps.tolist() == i5.taps_ps.tolist() and board.tick_ps == pytest.approx(1e12 / 140e6)
    none, why = tdc_placement.predicted_table(rig_identity(_ident(gateware="nosuchboard abc")))
    assert none is None and "nosuchboard" in why
    # A TDC build keeps a calibration file of its own; a rig without one keeps its old key.
    from hilat.calibration import identity_key
    assert identity_key(sim) != identity_key(rig_identity(_ident(tdc_inputs=0)))
    plain = rig_identity(_ident(tdc_inputs=0))
    assert identity_key(plain) == identity_key({k: v for k, v in plain.items() if not k.startswith("tdc")})


def test_the_statement_says_where_each_input_stands(tmp_path):
    ident = _ident()
    a = tdc_rig.tdc_resolution_calibration(_codes_uniform(), ident, 4, "sim://", None)
    out = applied(rig_identity(ident), {"tdc": tdc.store_input(None, a), "loopback": None, "clock": None,
                                        "file": "f"})
    text = "\n".join(out["statement"])
    assert "channels 2..5 have a carry-chain TDC" in text
    assert "TDC channel 4: measured: code density of 10000 edges" in text
    assert "TDC channel 2: predicted: PREDICTED bins of the tap table; no measured calibration" in text
    assert text.count("TDC tap table (the model's prediction, not a measurement): nextpnr-ecp5 SDF") == 1
    assert "stretched x 2.8 to a 20000 ps tick" in text
    assert any("TDC channels [2, 3, 5] have no measured bins" in w for w in out["warnings"])
    assert [p["placement"] for p in out["tdc_placement"]] == ["predicted", "predicted", "measured", "predicted"]
    # A loopback made with other bins than captures now use is flagged.
    loop = {"offset_ticks": 7, "min_ticks": 7, "max_ticks": 7, "std_ticks": 0, "n": 1, "subtick_positions": "nominal",
            "made": a["made"]}
    out = applied(rig_identity(ident), {"tdc": None, "loopback": loop, "clock": None, "file": "f"})
    assert any("loopback offset was measured with the TDC bins" in w for w in out["warnings"])


def test_codes_from_uint64_fractions_and_bad_sources_refused():
    ident = _ident(tdc_inputs=8, n_inputs=8)
    ident.channels = [("s", "stimulus")] * 2 + [(f"in{i}", "") for i in range(8)]
    # Channel 9 is input 7: its code in the fraction's top byte.
    fractions = np.array([(200 << 56) | 0xFF, (3 << 56), 5], dtype=np.uint64)
    masks = np.array([1 << 9, 1 << 9, 1 << 2], dtype=np.uint16)
    assert tdc_rig.input_codes((None, masks, None, fractions), 9, ident).tolist() == [200, 3]
    with pytest.raises(CalibrationError, match="channel 1 has no TDC"):
        tdc_rig.check_tdc_input(ident, 1)
    # Code 0 (a change the line did not measure): left out of the density, counted, stated.
    with_zero = tdc_rig.tdc_resolution_calibration(np.r_[_codes_uniform(), 0, 0], ident, 4, "u", None)
    assert with_zero["unmeasured_edges"] == 2 and with_zero["edges"] == 10000 and with_zero["counts"][0] == 0
    assert "2 edges of code 0 (not measured) left out" in tdc_statement({"inputs": {"4": with_zero}})[0][0]
    # A source locked to ts: a handful of codes.
    with pytest.raises(CalibrationError, match="locked to the rig's clock"):
        tdc_rig.tdc_resolution_calibration(np.repeat([40, 41, 42], 2000), ident, 4, "u", UNIFORM)
    with pytest.raises(CalibrationError, match="needs .* edges: collect more"):
        tdc_rig.tdc_resolution_calibration(_codes_uniform(), ident, 4, "u", UNIFORM, precision_s=1e-12)
    # The edges a precision needs, from the widest predicted bin (100 ps of 20 ns): p (1 - p) (T / sigma)^2.
    p = W / TICK_PS
    assert tdc_rig.edges_for(UNIFORM, 1e-12) == int(np.ceil(p * (1 - p) * (TICK_PS / 1.0) ** 2))
    assert "10000 edges give the widest predicted bin (100 ps)" in tdc_rig.precision_text(UNIFORM, 10000, 1e-12)


def test_placement_for_and_the_loopback_in_tdc_units():
    ident = _ident()
    in_force = applied(rig_identity(ident), None, reason="test")
    placement = tdc_rig.placement_for(ident, in_force)
    assert isinstance(placement, analysis.TdcSubticks) and placement.tdc_inputs == 4
    plain = tdc_rig.placement_for(_ident(tdc_inputs=0), applied(rig_identity(_ident(tdc_inputs=0)), None))
    assert type(plain) is analysis.Subticks and plain.units_per_tick == 1
    # Stimulus at tick 100, its copy on channel 4 (third TDC input) recorded at tick 107 with code c.
    code = 150
    records = (np.array([100, 107, 120, 127], dtype=np.uint64), np.array([1, 1 << 4, 1, 1 << 4], np.uint16),
               np.array([1, 1 << 4, 0, 0], np.uint16), np.array([0, code << 16, 0, code << 16], np.uint64))
    result = loopback_delays(records, 0, 4, subticks=placement)
    assert result.units_per_tick == U
    assert result.rise_delays.tolist() == [7 * U + placement.positions[2][code]]


def test_online_mode_counts_and_re_estimates():
    ident = _ident()
    # The run's codes counted per TDC input as records come: channel 3 (input 1) and 5 (input 3).
    counts = tdc_rig.CodeCounts(2, 4)
    codes = np.tile(np.arange(1, 201), 1000)                       # 200,000 edges, every code alike
    masks = np.full(len(codes), (1 << 3) | (1 << 5), np.uint16)
    fractions = (codes.astype(np.uint64) << np.uint64(8)) | (np.uint64(40) << np.uint64(24))
    for i in range(0, len(codes), 65536):                          # in chunks, as a stream brings them
        counts.add(masks[i:i + 65536], fractions[i:i + 65536])
    assert counts.counts[1].tolist() == np.bincount(codes, minlength=256).tolist()
    assert counts.counts[3][40] == len(codes) and counts.counts[3].sum() == len(codes)
    assert counts.counts[0].sum() == counts.counts[2].sum() == 0
    stored = tdc_rig.tdc_resolution_calibration(_codes_uniform(), ident, 3, "sim://", UNIFORM)
    in_force = {"tdc": tdc.store_input(None, stored)}
    entries = {e["channel"]: e for e in tdc_rig.online_results(ident, in_force, counts, UNIFORM)}
    # Channel 3: consistent with its stored bins, pooled: the stored 10,000 edges and the run's 200,000.
    assert entries[3]["how"] == "pooled" and entries[3]["result"]["edges"] == 210_000
    assert entries[3]["result"]["counts"][1:201] == [1050] * 200
    assert "pooled with the calibration of" in entries[3]["result"]["method"]
    # Channel 5: one code only, no stored bins: a source locked to ts, nothing re-estimated.
    assert entries[5]["how"] == "correlated" and entries[5]["result"] is None
    assert "locked to the rig's clock" in entries[5]["why"]
    assert entries[2]["how"] == "too few" and entries[2]["edges"] == 0
    # A run's codes that do not fit the stored bins (only half the codes): refused, nothing pooled.
    half = tdc_rig.CodeCounts(2, 4)
    half_codes = np.tile(np.arange(1, 101), 2000)
    half.add(np.full(len(half_codes), 1 << 3, np.uint16), half_codes.astype(np.uint64) << np.uint64(8))
    entry = tdc_rig.online_results(ident, in_force, half, UNIFORM)[1]
    assert entry["how"] == "correlated" and "do not fit the stored bins" in entry["why"]
    # Without stored bins, enough spread edges stand on their own; too few leave the bins in force.
    alone = tdc_rig.online_results(ident, None, counts, UNIFORM)[1]
    assert alone["how"] == "run alone" and alone["result"]["edges"] == 200_000
    few = tdc_rig.online_results(ident, None, counts, UNIFORM, min_edges=10 ** 6)[1]
    assert few["how"] == "too few" and few["result"] is None
    lines = tdc_rig.online_lines(list(entries.values()), "cal.json")
    assert "stored for later captures (cal.json)" in lines[0]
    assert any(line.startswith("TDC online channel 3: 200000 edges, pooled") for line in lines)
