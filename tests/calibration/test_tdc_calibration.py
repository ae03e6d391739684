"""The TDC line's model (hilat.calibration.tdc_line) and the TDC's code density
(hilat.calibration.tdc): a hand-made line with bubbles and a zero-width bin, exact; edges through a
synthetic line (the issue's CCU2C figures) recover every width within its stated error and find every
zero-width bin; the edges a stated precision needs; the stored part and the online mode."""

import json
from datetime import datetime

import numpy as np
import pytest
from hilat.calibration import tdc, tdc_line
from hilat.calibration.resolution import TooFewEdges

# Taps in chain order: tap 1 is reached after tap 2 (a bubble), taps 2 and 3 together (a zero-width bin).
HAND = tdc_line.TapTable(np.array([10.0, 30.0, 20.0, 20.0, 50.0]), 35.0)


def test_hand_line_codes_and_thermometers():
    # The tick the samplers see runs from the first tap (10 ps) to 10 + 35 ps: position p -> 45 - p ps
    # travelled at the closing clock edge; a tap is set once the edge has passed it (strictly).
    positions = np.array([0.0, 14.0, 20.0, 25.0, 30.0, 34.9])
    therm = tdc_line.thermometer(HAND, positions)
    assert therm.astype(int).tolist() == [[1, 1, 1, 1, 0],     # 45 ps: all but the last tap
                                          [1, 1, 1, 1, 0],     # 31 ps
                                          [1, 0, 1, 1, 0],     # 25 ps: a bubble at tap 1
                                          [1, 0, 0, 0, 0],     # 20 ps: taps 2 and 3 not yet passed
                                          [1, 0, 0, 0, 0],     # 15 ps
                                          [1, 0, 0, 0, 0]]     # 10.1 ps
    assert tdc_line.ones_count(therm).tolist() == [4, 4, 3, 1, 1, 1]
    assert tdc_line.fine_codes(HAND, positions).tolist() == [4, 4, 3, 1, 1, 1]
    # Code 0 is no edge, code 2 zero-width (taps 2 and 3 at once), the last code takes the rest.
    assert tdc_line.bin_widths_ps(HAND).tolist() == [0.0, 10.0, 0.0, 10.0, 15.0]
    assert HAND.bubbles == 1 and HAND.long_enough      # 50 ps >= 10 + 35 ps
    with pytest.raises(ValueError, match="inside the tick"):
        tdc_line.fine_codes(HAND, [35.0])


def test_the_gateware_view_of_a_change():
    """``detect``: a change ``phase`` after its own tick's clock edge (gateware/tdc.py's model) is
    recorded in that tick if it has passed the first tap by the closing edge, else in the next."""
    late, codes = tdc_line.detect(HAND, [5.0, 14.0, 15.0, 24.0, 25.0, 35.0])
    assert late.tolist() == [0, 0, 0, 0, 1, 1]
    assert codes.tolist() == [3, 3, 1, 1, 4, 4]       # 30, 21, 20, 11, 45, 35 ps travelled
    # ... the same codes as the model's positions give, for any phase.
    table = tdc_line.synthetic_table()
    phases = table.tick_ps - np.random.default_rng(9).random(50_000) * table.tick_ps   # (0, tick]
    late, codes = tdc_line.detect(table, phases)
    assert 0 < late.mean() < 0.1                       # the first tap's ~240 ps of the 7143 ps tick
    assert np.array_equal(codes, tdc_line.fine_codes(table, tdc_line.position_of(table, phases, late)))
    with pytest.raises(ValueError, match="inside the tick"):
        tdc_line.detect(HAND, [0.0])


def test_saturation_on_a_short_line():
    short = tdc_line.TapTable(np.array([0.0, 5.0, 10.0]), 30.0)
    assert not short.long_enough
    assert tdc_line.fine_codes(short, [0.0, 24.0, 27.0, 29.0]).tolist() == [2, 2, 1, 1]
    assert tdc_line.ones_count(tdc_line.thermometer(short, [0.0])).tolist() == [2]   # 3 ones, saturated
    assert tdc_line.bin_widths_ps(short).tolist() == [0.0, 5.0, 25.0]


def test_synthetic_line_has_the_issue_figures():
    table = tdc_line.synthetic_table()
    widths = tdc_line.bin_widths_ps(table)
    assert table.n_taps == 256 and "SYNTHETIC" in table.source
    assert table.bubbles > 10 and table.long_enough
    assert widths.sum() == pytest.approx(table.tick_ps)
    used = np.flatnonzero(widths)
    span = used[-1] + 1 - used[0]
    assert 30 < table.tick_ps / span < 36                      # ~33 ps a bit
    assert np.count_nonzero(widths[used[0]:used[-1]] == 0) > 3  # zero-width bins inside the tick
    # The encoder on the thermometer and the sorted search agree, edge for edge.
    positions = np.random.default_rng(3).random(20_000) * table.tick_ps
    assert np.array_equal(tdc_line.ones_count(tdc_line.thermometer(table, positions)),
                          tdc_line.fine_codes(table, positions))


def test_tap_table_file(tmp_path):
    path = tmp_path / "taps.json"
    table = tdc_line.synthetic_table(n_taps=16)
    path.write_text(json.dumps(table.as_dict()))
    back = tdc_line.load_tap_table(path)
    assert back.taps_ps.tolist() == table.taps_ps.tolist() and back.tick_ps == table.tick_ps
    assert back.source == table.source
    path.write_text(json.dumps({"board": "x", "tick_ps": 1.0, "taps_ps": [0, 1]}))
    with pytest.raises(ValueError, match="device, source"):
        tdc_line.load_tap_table(path)


def test_code_density_by_hand():
    T = 7e-9
    r = tdc.tdc_code_density([0, 100, 0, 100, 200], T, min_edges=400)
    assert r.widths_ticks.tolist() == [0, 0.25, 0, 0.25, 0.5]
    assert (r.first_code, r.codes_used, r.span) == (1, 5, 4) and r.lsb_s == T / 4
    assert r.zero_width.tolist() == [2]
    assert r.dnl.tolist() == [-1, 0, -1, 0, 1]
    assert r.inl.tolist() == [0, 0, -1, -1, 0]
    # A higher code is an earlier edge: code 1 ends at the tick's end.
    assert r.centres_ticks.tolist() == [1, 0.875, 0.75, 0.625, 0.25]
    assert r.effective_resolution_s == pytest.approx(np.sqrt(2 * 0.25**3 + 0.5**3) * T)
    assert r.quantization_rms_s == pytest.approx(r.effective_resolution_s / np.sqrt(12))
    assert r.width_sigma_ticks[4] == pytest.approx(np.sqrt(0.5 * 0.5 / 400))
    with pytest.raises(TooFewEdges, match="399 edges"):
        tdc.tdc_code_density([0, 100, 0, 100, 199], T, min_edges=400)


def test_equal_bins_resolve_to_the_lsb():
    r = tdc.tdc_code_density([0] + [500] * 200 + [0] * 55, 7e-9)
    assert r.span == 200 and r.lsb_s == pytest.approx(7e-9 / 200)
    assert r.effective_resolution_s == pytest.approx(r.lsb_s)
    assert np.allclose(r.dnl[1:201], 0) and np.allclose(r.inl, 0) and len(r.zero_width) == 0


def test_random_edges_through_the_synthetic_line_recover_every_bin():
    table = tdc_line.synthetic_table()
    n = 400_000
    codes = tdc_line.fine_codes(table, np.random.default_rng(35).random(n) * table.tick_ps)
    r = tdc.tdc_code_density(tdc.code_counts(codes, 256), table.tick_ps * 1e-12)
    truth = tdc_line.bin_widths_ps(table) / table.tick_ps
    seen = r.counts > 0
    # Every estimate within 4.5 of its stated sigmas (256 bins), each zero-width bin found as such.
    assert np.all(np.abs(r.widths_ticks - truth)[seen] <= 4.5 * r.width_sigma_ticks[seen])
    assert np.array_equal(r.counts == 0, truth == 0)
    true_seen = np.flatnonzero(truth)
    assert r.first_code == true_seen[0] and r.codes_used == true_seen[-1] + 1
    lsb_true = table.tick_ps * 1e-12 / (true_seen[-1] + 1 - true_seen[0])
    assert r.lsb_s == lsb_true
    # The effective resolution: sqrt(sum w^3 / T) of the true widths, to the estimates' error.
    true_eff = np.sqrt(np.sum(truth ** 3)) * r.tick_s
    assert r.effective_resolution_s == pytest.approx(true_eff, rel=0.02)
    assert lsb_true < r.effective_resolution_s < 2 * lsb_true
    # The predicted bins beside the measured ones: the same line, so they agree within the statistics.
    beside = tdc.predicted_beside(r, table)
    assert beside["max_abs_z"] < 5 and beside["lsb_s"] == pytest.approx(lsb_true)
    assert beside["effective_resolution_s"] == pytest.approx(true_eff)
    with pytest.raises(ValueError, match="tick"):
        tdc.predicted_beside(r, tdc_line.TapTable(table.taps_ps, 7000.0))
    with pytest.raises(ValueError, match="16 taps"):
        tdc.predicted_beside(r, tdc_line.synthetic_table(n_taps=16))


def test_edges_for_a_precision():
    T = 7e-9
    # A 33 ps bin to 1 ps: p (1 - p) (T / sigma)^2 edges.
    p = 33e-12 / T
    assert tdc.edges_for_precision(1e-12, T, 33e-12) == int(np.ceil(p * (1 - p) * 7000**2))
    # ... and that many edges give a width whose spread is that sigma (binomial draws of the count).
    n = tdc.edges_for_precision(1e-12, T, 33e-12)
    widths = np.random.default_rng(1).binomial(n, p, 4000) / n * T
    assert np.std(widths) == pytest.approx(1e-12, rel=0.05)
    r = tdc.tdc_code_density([0, 300, 700], T)
    assert r.edges_for_precision(0.01 * T) == int(np.ceil(0.7 * 0.3 / 0.01**2))
    with pytest.raises(ValueError):
        tdc.edges_for_precision(0, T, 33e-12)


def test_stored_per_input_and_read_back():
    table = tdc_line.synthetic_table(n_taps=32, tick_ps=1000.0)
    codes = tdc_line.fine_codes(table, np.random.default_rng(2).random(5000) * 1000.0)
    a = tdc.tdc_calibration(codes, 1e-9, 32, channel=4, made="2026-11-28T01:00:00+00:00", table=table)
    b = tdc.tdc_calibration(codes[:3000], 1e-9, 32, channel=5, made="2026-11-28T01:00:00+00:00")
    a = json.loads(json.dumps(a))
    part = tdc.store_input(tdc.store_input(None, a), b)
    assert sorted(part["inputs"]) == ["4", "5"] and part["inputs"]["5"]["edges"] == 3000
    assert part["inputs"]["5"]["predicted"] is None and part["inputs"]["4"]["predicted"]["source"] == table.source
    again = tdc.store_input(part, dict(b, edges=1))
    assert again["inputs"]["4"] == a and again["inputs"]["5"]["edges"] == 1
    back = tdc.TdcResult.from_dict(a)
    assert back.widths_ticks.tolist() == a["widths_ticks"] and back.lsb_s == a["lsb_s"]
    assert back.centres_of([1, 2]).tolist() == a["centres_ticks"][1:3]


def test_online_update_pools_uncorrelated_edges_and_refuses_locked_ones():
    table = tdc_line.synthetic_table()
    rng = np.random.default_rng(4)
    stored = tdc.tdc_code_density(tdc.code_counts(tdc_line.fine_codes(table, rng.random(200_000) * table.tick_ps),
                                                  256), table.tick_ps * 1e-12)
    run = tdc_line.fine_codes(table, rng.random(300_000) * table.tick_ps)
    same, how = tdc.online_update(stored, run[:1000])
    assert same is stored and how == "too few"
    pooled, how = tdc.online_update(stored, run)
    assert how == "pooled" and pooled.edges == 500_000
    assert np.array_equal(pooled.counts, stored.counts + tdc.code_counts(run, 256))
    assert np.all(pooled.width_sigma_ticks <= stored.width_sigma_ticks)
    # Edges locked to the rig's clock: a few positions only.
    locked = tdc_line.fine_codes(table, rng.choice([100.0, 3000.0, 5000.0], 200_000))
    with pytest.raises(tdc.Correlated, match="do not fit"):
        tdc.online_update(stored, locked)
    # A line that changed (every tap 3 % slower, temperature) is refused too.
    slower = tdc_line.TapTable(table.taps_ps * 1.03, table.tick_ps)
    with pytest.raises(tdc.Correlated):
        tdc.online_update(stored, tdc_line.fine_codes(slower, rng.random(300_000) * table.tick_ps))


def test_statement_states_measured_and_predicted_bins():
    from datetime import datetime, timezone

    from hilat.calibration import tdc_statement, tdc_text

    table = tdc_line.synthetic_table()
    codes = tdc_line.fine_codes(table, np.random.default_rng(6).random(100_000) * table.tick_ps)
    r = tdc.tdc_calibration(codes, table.tick_ps * 1e-12, 256, channel=4, made="2026-10-01T00:00:00+00:00",
                            table=table)
    part = tdc.store_input(None, json.loads(json.dumps(r)))
    lines, warnings = tdc_statement(part, now=datetime(2026, 11, 28, tzinfo=timezone.utc))
    assert lines[0].startswith(f"TDC channel 4: 256 codes, {r['span']} bins over the tick ")
    assert f"LSB {r['lsb_s'] * 1e12:.3g} ps" in lines[0] and "100000 edges" in lines[0] and "58 days old" in lines[0]
    assert f"effective resolution {r['effective_resolution_s'] * 1e12:.3g} ps" in lines[0]
    assert lines[1].startswith("  predicted by the model (SYNTHETIC") and len(lines) == 2
    assert len(warnings) == 1 and "stale" in warnings[0]
    text = tdc_text(r, "sim").splitlines()
    assert len(text) == 1 + 2 + 1 + r["span"]          # title, statement, header, a row per code of the span
    assert text[4].split()[0] == str(r["first_code"]) and text[-1].split()[0] == str(r["codes_used"] - 1)


def test_stored_tdc_part_is_stated_by_every_capture(tmp_path):
    """A rig's file with a ``tdc`` part (Store.update): the statement a capture records states it."""
    from hilat.calibration import Store, applied

    identity = {"gateware": "colorlight_i5 abc", "ts_hz": 140e6, "sys_hz": 60e6, "n_stimulus": 2, "n_inputs": 4,
                "pin_to_stamp_delay": 19, "firmware": "x", "samples_per_tick": 1}
    table = tdc_line.synthetic_table()
    codes = tdc_line.fine_codes(table, np.random.default_rng(8).random(50_000) * table.tick_ps)
    r = tdc.tdc_calibration(codes, table.tick_ps * 1e-12, 256, channel=5, made="2026-11-28T00:00:00+00:00")
    store = Store(tmp_path)
    store.update(identity, tdc.PART, tdc.store_input(None, r))
    cal, exact = store.find(identity)
    assert exact and cal["tdc"]["inputs"]["5"]["edges"] == 50_000
    out = applied(identity, cal, exact, now=datetime.fromisoformat("2026-11-28T01:00:00+00:00"))
    assert out["tdc"] == cal["tdc"] and not out["warnings"]
    assert [line for line in out["statement"] if line.startswith("TDC channel 5: 256 codes")]
    assert "TDC" not in " ".join(applied(identity, None)["statement"])


def test_a_stated_precision_says_how_many_edges_it_needs():
    table = tdc_line.synthetic_table()
    codes = tdc_line.fine_codes(table, np.random.default_rng(10).random(200_000) * table.tick_ps)
    T = table.tick_ps * 1e-12
    with pytest.raises(TooFewEdges, match=r"200000 edges give the widest bin .* 1 ps needs (\d+) edges") as e:
        tdc.tdc_calibration(codes, T, 256, channel=4, made="now", precision_s=1e-12)
    needed = int(str(e.value).split(" needs ")[1].split()[0])
    assert 400_000 < needed < 800_000                  # the ~87 ps widest bin: p (1 - p) (T / 1 ps)^2
    r = tdc.tdc_calibration(codes, T, 256, channel=4, made="now", precision_s=2e-12)
    assert r["width_sigma_max_s"] <= 2e-12 and r["edges_needed"] <= 200_000 and r["precision_s"] == 2e-12
    # The edges it said it needs do give that precision.
    more = tdc_line.fine_codes(table, np.random.default_rng(11).random(needed) * table.tick_ps)
    assert tdc.tdc_calibration(more, T, 256, channel=4, made="now", precision_s=1e-12)["width_sigma_max_s"] <= 1e-12
