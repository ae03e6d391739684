"""A capture from a rig that samples its inputs 4 times a tick (docs/subtick.md): every edge time,
latency, deadline and report line in sub-ticks, exact, from the stream, from edges.bin and from
raw.bin alike."""

import json

import numpy as np
import pytest
from fake_rig import FakeRig, capture_script
from hilat import analysis
from hilat.cli import main
from hilat.rundir.reader import load_run

S = 4
TICK_NS = 20.0                      # the fake rig's ts: 50 MHz
SUBTICK_NS = TICK_NS / S
# Sub-tick latencies: every position in the tick, and two beyond a 61-tick (244 sub-tick) deadline.
ISR_LATENCIES = (240, 241, 242, 243, 300, 244, 61)


def _capture(tmp_path, *extra):
    with FakeRig(capture_script(ISR_LATENCIES, samples_per_tick=S)) as rig:
        code = main(["capture", rig.url, "--count", str(len(ISR_LATENCIES)), "--period", "1500", "--jitter", "0",
                     "--mode", "periodic", "--out", str(tmp_path), "--no-progress",
                     *([] if "--calibration-dir" in extra else ["--no-calibration"]), *extra])
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    return run_dir


def test_edges_from_records_places_each_input_at_its_position():
    # Records of a rig with 2 outputs and 4 inputs at 4 samples a tick: 2 bits per input.
    ticks = np.array([10, 11, 12], np.uint64)
    masks = np.array([0b000001, 0b111100, 0b000101], np.uint16)
    levels = np.array([0b000001, 0b010100, 0b000000], np.uint16)
    fractions = np.array([0, 0b11_10_01_00, 0b10], np.uint16)
    times, chans, lv = analysis.edges_from_records((ticks, masks, levels, fractions),
                                                   subticks=analysis.Subticks.nominal(S, first_input=2))
    assert times.tolist() == [40, 44, 45, 46, 47, 48, 50]
    assert chans.tolist() == [0, 2, 3, 4, 5, 0, 2]
    assert lv.tolist() == [1, 1, 0, 1, 0, 0, 0]
    # One sample a tick: ticks, whatever the fraction field holds.
    times, _, _ = analysis.edges_from_records((ticks, masks, levels, fractions))
    assert times.tolist() == [10, 11, 11, 11, 11, 12, 12]


def test_subtick_latencies_are_exact_in_the_stream_the_stores_and_raw_bin(tmp_path):
    run_dir = _capture(tmp_path)
    run = load_run(run_dir)
    assert run.samples_per_tick == S and run.ts_hz == pytest.approx(50e6) and run.unit.mu_hz == pytest.approx(50e6 * S)
    isr = run.measurements.latency("stim_to_isr")
    assert isr.tolist() == list(ISR_LATENCIES)
    assert run.measurements.latency("isr_duration").tolist() == [20 * S] * len(ISR_LATENCIES)
    # What the capture's streaming pairing wrote as it went.
    stored = np.concatenate([items["value_mu"] for items in run.iter_samples("stim_to_isr")])
    assert stored.tolist() == list(ISR_LATENCIES)
    # The same edges decoded again from the bytes the rig sent.
    (run_dir / "edges.bin").rename(run_dir / "edges.kept")
    again = load_run(run_dir)
    assert again.edges_source == "raw.bin"
    assert again.measurements.latency("stim_to_isr").tolist() == list(ISR_LATENCIES)

    # The API says the unit, and its seconds are the sub-tick's.
    from hilat import api

    public = api.load(run_dir)
    assert public.units_per_tick == S and public.mu_s == pytest.approx(SUBTICK_NS * 1e-9)
    assert public.stats("stim_to_isr").max == pytest.approx(300 * SUBTICK_NS * 1e-9)

    doc = json.loads((run_dir / "summary.json").read_text())["runs"][0]
    assert doc["samples_per_tick"] == S and doc["mu_ns"] == pytest.approx(SUBTICK_NS)
    assert doc["tick_ns"] == pytest.approx(S * SUBTICK_NS) and doc["unit"]["mu_per_tick"] == S
    row = doc["subsets"]["all"]["stim_to_isr"]
    assert row["mu"]["min"] == 61 and row["mu"]["max"] == 300
    assert row["ns"]["min"] == pytest.approx(61 * SUBTICK_NS) and row["ns"]["max"] == pytest.approx(300 * SUBTICK_NS)
    assert any("sampled 4 times a tick" in line and "1/4 tick (5 ns)" in line for line in doc["resolution"])
    assert not any("whole ticks" in line for line in doc["resolution"])
    assert doc["resolution"][0].startswith("1 tick = 20 ns")


def test_a_deadline_in_ticks_closes_windows_in_sub_ticks(tmp_path):
    # 61 ticks = 244 sub-ticks: a window [stimulus, stimulus + 244) takes 243, not 244 or 300.
    run_dir = _capture(tmp_path, "--deadline", "61")
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["deadline_ticks"] == 61
    run = load_run(run_dir)
    assert run.deadline_mu == 61 * S
    expected = [v if v < 61 * S else analysis.MISSING for v in ISR_LATENCIES]
    assert run.measurements.latency("stim_to_isr").tolist() == expected
    stored = np.concatenate([items["value_mu"] for items in run.iter_samples("stim_to_isr")])
    assert stored.tolist() == expected
    row = json.loads((run_dir / "summary.json").read_text())["runs"][0]["subsets"]["all"]["stim_to_isr"]
    assert row["misses"] == 2


def _calibration_dir(tmp_path, ident, **parts):
    from hilat import calibration

    cal_dir = tmp_path / "cal"
    for part, result in parts.items():
        calibration.Store(cal_dir).update(calibration.rig_identity(ident), part, result)
    return cal_dir


def _loop(offset_ticks, samples_per_tick, positions="nominal"):
    return {"offset_ticks": offset_ticks, "min_ticks": offset_ticks, "max_ticks": offset_ticks, "std_ticks": 0.0,
            "mean_ticks": offset_ticks, "n": 100, "stimulus_channel": 0, "capture_channel": 4,
            "samples_per_tick": samples_per_tick, "subtick_positions": positions, "made": "2026-11-24T00:00:00+00:00"}


def test_a_sub_tick_loopback_offset_is_subtracted_exactly(tmp_path):
    """7.25 ticks from a rig sampling 4 times a tick: 29 sub-ticks off every stimulus -> ISR latency."""
    from fake_rig import identify

    cal_dir = _calibration_dir(tmp_path, identify(samples_per_tick=S), loopback=_loop(7.25, S))
    run_dir = _capture(tmp_path / "runs", "--calibration-dir", str(cal_dir))
    run = load_run(run_dir)
    assert run.offset_mu == 29
    assert run.measurements.latency("stim_to_isr").tolist() == [v - 29 for v in ISR_LATENCIES]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["calibration"]["warnings"] == []
    assert any("rig offset: 7.25 ticks" in line for line in meta["calibration"]["statement"])


def test_a_fractional_offset_on_a_rig_sampling_once_a_tick_is_its_floor():
    assert analysis.in_subticks(1, 7.75, None)[0] == 7
    assert analysis.in_subticks(4, 7.75, 10)[:2] == (31, 40)
    from hilat.acquisition.settings import engine_offset

    assert engine_offset(7.75) == 7 and engine_offset(7.0) == 7


def test_a_run_written_before_sub_ticks_reads_as_ticks(tmp_path):
    """Runs of format 2 kept edges in ticks, even where the rig's IDENTIFY already said 4 samples a
    tick: without meta.json's time_unit the run's unit is the tick."""
    run_dir = _capture(tmp_path)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["version"] == 5 and meta["time_unit"]["units_per_tick"] == S
    old = tmp_path / "old"
    old.mkdir()
    del meta["time_unit"]
    meta["version"] = 2
    (old / "meta.json").write_text(json.dumps(meta))
    # Its edges in ticks, as such a capture stored them.
    edges = load_run(run_dir).ticks
    t, c, lv = edges // S, load_run(run_dir).chans, load_run(run_dir).levels
    with open(old / "events.csv", "w") as f:
        f.write("tick,channel,level,tag\n" + "".join(f"{a},{b},{d},0\n" for a, b, d in zip(t, c, lv)))
    run = load_run(old)
    assert run.units_per_tick == 1 and run.ts_hz == pytest.approx(50e6)
    assert run.measurements.latency("stim_to_isr").tolist() == [v // S for v in ISR_LATENCIES]


def test_the_statement_flags_calibrations_captures_cannot_use(tmp_path):
    from fake_rig import identify
    from hilat import calibration

    res = {"samples_per_tick": 2, "centres_ticks": [0.25, 0.75], "widths_ticks": [0.5, 0.5],
           "width_sigma_ticks": [0.01, 0.01], "dnl": [0, 0], "edges": 5000, "effective_resolution_s": 1e-8,
           "channel": 4, "made": "2026-11-24T00:00:00+00:00"}
    ident = identify(samples_per_tick=S)
    cal_dir = _calibration_dir(tmp_path, ident, resolution=res, loopback=_loop(7.25, S, "calibrated 2026-01-01"))
    applied = calibration.for_rig(ident, cal_dir)
    text = "\n".join(applied["warnings"])
    assert applied["resolution"] is None and "the resolution calibration has 2 bins a tick" in text
    assert "the loopback offset was measured with the sub-tick bins at calibrated 2026-01-01 positions" in text
    # An unreadable one: not applied, said why, and the capture goes on.
    broken = _calibration_dir(tmp_path / "b", ident, resolution={**res, "samples_per_tick": S, "centres_ticks": [0.5]})
    applied = calibration.for_rig(ident, broken)
    assert applied["resolution"] is None and "the resolution calibration is unreadable" in "\n".join(
        applied["warnings"])


def test_resolution_calibration_refuses_a_source_locked_to_the_rig(tmp_path):
    from fake_rig import identify
    from hilat import calibration
    from hilat.calibration import resolution

    ident = identify(samples_per_tick=S)
    rng = np.random.default_rng(3)
    even = resolution.resolution_calibration(rng.integers(0, S, 8000), ident, 50e6, 4, "loop://")
    assert even["edges"] == 8000 and abs(sum(even["widths_ticks"]) - 1) < 1e-12
    assert all(abs(w - 0.25) <= 4 * s for w, s in zip(even["widths_ticks"], even["width_sigma_ticks"]))
    text = calibration.resolution_text(even, "loop://", 50e6, None)
    assert "effective resolution" in text and "not stored" in text
    with pytest.raises(calibration.CalibrationError, match="locked to the rig's clock"):
        resolution.resolution_calibration(np.full(8000, 3), ident, 50e6, 4, "loop://")
    with pytest.raises(calibration.CalibrationError, match="collect more"):
        resolution.resolution_calibration(rng.integers(0, S, 100), ident, 50e6, 4, "loop://")
    # The positions of the spare input (channel 4, input 2: fraction bits 4-5) among other records.
    records = (np.array([1, 2, 3]), np.array([0b10000, 0b01000, 0b10100]), np.zeros(3),
               np.array([0b11 << 4, 0b10 << 2, 0b01 << 4 | 0b11]))
    assert resolution.input_fractions(records, 4, ident).tolist() == [3, 1]
