"""A capture from a rig that samples its inputs 4 times a tick (docs/subtick.md): every edge time,
latency, deadline and report line in sub-ticks, exact, from the stream, from edges.bin and from
raw.bin alike."""

import json

import numpy as np
import pytest
from fake_rig import FakeRig, capture_script
from hilat import analysis, runs
from hilat.cli import main

S = 4
TICK_NS = 20.0                      # the fake rig's ts: 50 MHz
SUBTICK_NS = TICK_NS / S
# Sub-tick latencies: every position in the tick, and two beyond a 61-tick (244 sub-tick) deadline.
ISR_LATENCIES = (240, 241, 242, 243, 300, 244, 61)


def _capture(tmp_path, *extra):
    with FakeRig(capture_script(ISR_LATENCIES, samples_per_tick=S)) as rig:
        code = main(["capture", rig.url, "--count", str(len(ISR_LATENCIES)), "--period", "1500", "--jitter", "0",
                     "--mode", "periodic", "--out", str(tmp_path), "--no-progress", "--no-calibration", *extra])
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
    run = runs.load_run(run_dir)
    assert run.samples_per_tick == S and run.ts_hz == pytest.approx(50e6 * S)
    isr = run.measurements.latency("stim_to_isr")
    assert isr.tolist() == list(ISR_LATENCIES)
    assert run.measurements.latency("isr_duration").tolist() == [20 * S] * len(ISR_LATENCIES)
    # What the capture's streaming pairing wrote as it went.
    stored = np.concatenate([items["ticks"] for items in run.iter_samples("stim_to_isr")])
    assert stored.tolist() == list(ISR_LATENCIES)
    # The same edges decoded again from the bytes the rig sent.
    (run_dir / "edges.bin").rename(run_dir / "edges.kept")
    again = runs.load_run(run_dir)
    assert again.edges_source == "raw.bin"
    assert again.measurements.latency("stim_to_isr").tolist() == list(ISR_LATENCIES)

    doc = json.loads((run_dir / "summary.json").read_text())["runs"][0]
    assert doc["samples_per_tick"] == S and doc["tick_ns"] == pytest.approx(SUBTICK_NS)
    row = doc["subsets"]["all"]["stim_to_isr"]
    assert row["ticks"]["min"] == 61 and row["ticks"]["max"] == 300
    assert row["ns"]["min"] == pytest.approx(61 * SUBTICK_NS) and row["ns"]["max"] == pytest.approx(300 * SUBTICK_NS)
    assert any("sampled 4 times a tick" in line and "1/4 tick (5 ns)" in line for line in doc["resolution"])
    assert not any("whole ticks" in line for line in doc["resolution"])
    assert doc["resolution"][0].startswith("1 tick = 20 ns")


def test_a_deadline_in_ticks_closes_windows_in_sub_ticks(tmp_path):
    # 61 ticks = 244 sub-ticks: a window [stimulus, stimulus + 244) takes 243, not 244 or 300.
    run_dir = _capture(tmp_path, "--deadline", "61")
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["deadline_ticks"] == 61
    run = runs.load_run(run_dir)
    assert run.deadline_ticks == 61 * S
    expected = [v if v < 61 * S else analysis.MISSING for v in ISR_LATENCIES]
    assert run.measurements.latency("stim_to_isr").tolist() == expected
    stored = np.concatenate([items["ticks"] for items in run.iter_samples("stim_to_isr")])
    assert stored.tolist() == expected
    row = json.loads((run_dir / "summary.json").read_text())["runs"][0]["subsets"]["all"]["stim_to_isr"]
    assert row["misses"] == 2
