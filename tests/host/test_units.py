"""The run's unit (hilat.units, docs/analysis.md "The run's unit"): the value object, the names that
say it, and runs of the previous format still read."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hilat.rundir.layout import RunError
from hilat.rundir.reader import load_run
from hilat.units import RUN_FORMAT_VERSION, RunUnit

HOST = Path(__file__).parents[2] / "host" / "hilat"


def test_the_unit_of_ticks_sub_ticks_and_calibrated_bins():
    tick = RunUnit(50e6)
    assert (tick.mu_hz, tick.mu_ns, tick.tick_ns, tick.name) == (50e6, 20.0, 20.0, "tick")
    quarter = RunUnit(50e6, samples_per_tick=4, units_per_tick=4)
    assert (quarter.mu_hz, quarter.mu_ns, quarter.mu_ps, quarter.tick_ns) == (200e6, 5.0, 5000.0, 20.0)
    assert quarter.name == "sub-tick (1/4 tick)"
    fine = RunUnit(50e6, samples_per_tick=4, units_per_tick=256, calibrated=True)
    assert (fine.mu_ns, fine.mu_ps, fine.name) == (0.078125, 78.125, "1/256 tick")
    # Conversions: exact integer ps products where a mu is a whole number of ps.
    values = np.array([0, 1, 7, 1 << 40], dtype=np.int64)
    assert quarter.to_ns(values).tolist() == [0.0, 5.0, 35.0, 5.0 * (1 << 40)]
    assert fine.to_ns(np.array([3])).tolist() == [0.234375]
    assert quarter.ticks_to_mu(61) == 244 and quarter.ticks_to_mu(None) is None
    # A 140 MHz tick: no whole ns, the float product.
    board = RunUnit(140e6, 4, 4)
    assert board.to_ns(np.array([4]))[0] == pytest.approx(1e9 / 140e6)


def test_the_unit_round_trips_through_json_and_refuses_nonsense():
    for unit in (RunUnit(50e6), RunUnit(125e6, 4, 4), RunUnit(50_000_123.5, 4, 256, True)):
        doc = json.loads(json.dumps(unit.to_json()))
        assert RunUnit.from_json(doc) == unit and doc["name"] == "mu" and doc["mu_ns"] == unit.mu_ns
    with pytest.raises(ValueError, match="unreadable run unit"):
        RunUnit.from_json({"tick_hz": 50e6})
    with pytest.raises(ValueError, match="not a positive frequency"):
        RunUnit(0.0)
    with pytest.raises(ValueError, match="at least 1"):
        RunUnit(50e6, 4, 0)


# Every identifier (or string key) under host/hilat ending in _tick/_ticks that holds whole ticks, or
# is a ratio to the tick, with its reason. A new name ending so must be added here with a reason, or
# end in _mu when it holds a value in the run's unit.
TRUE_TICKS = {
    "samples_per_tick": "ratio", "units_per_tick": "ratio", "mu_per_tick": "ratio", "per_tick": "ratio",
    "deadline_ticks": "setting", "duration_ticks": "setting", "trigger_delay_ticks": "setting",
    "start_margin_ticks": "setting", "pin_to_stamp_delay_ticks": "setting", "min_spacing_ticks": "setting",
    "min_interval_ticks": "setting", "jitter_ticks": "setting", "glitch_max_ticks": "setting",
    "threshold_ticks": "setting", "width_ticks": "setting", "period_ticks": "setting", "delay_ticks": "setting",
    "delta_ticks": "setting", "interval_ticks": "setting", "tdc_source_ticks": "setting",
    "unmeasured_span_ticks": "record (how many ticks before its record an unmeasured TDC change may lie)",
    "rec_ticks": "record", "record_ticks": "record", "last_record_tick": "record", "out_ticks": "record",
    "origin_tick": "rig", "until_tick": "rig", "target_tick": "rig", "start_tick": "rig",
    "last_tick": "record (the link's last record, before sub-tick placement)",
    "end_tick": "rig (the engine's intervals, whole ticks)",
    "centres_ticks": "calibration", "widths_ticks": "calibration", "nominal_ticks": "calibration",
    "width_sigma_ticks": "calibration", "residual_rms_ticks": "calibration", "min_ticks": "calibration",
    "max_ticks": "calibration", "mean_ticks": "calibration", "std_ticks": "calibration",
    "median_ticks": "calibration", "_in_ticks": "calibration", "offset_ticks": "calibration",
    "floor_ticks": "clock", "span_ticks": "clock", "expected_tick": "clock",
    "_ticks": "parser", "in_ticks": "parser", "format_ticks": "parser", "with_ticks": "parser",
    "_tick": "heartbeat",
}
# Names holding values in mu that still end in _tick(s): none left (the list may only stay empty).
PENDING_MU = set()


def test_every_tick_name_under_host_hilat_is_a_true_tick_or_pending():
    found = set()
    for path in HOST.rglob("*.py"):
        found |= set(re.findall(r"\b(\w*?_ticks?)\b", path.read_text()))
    unexplained = sorted(found - set(TRUE_TICKS) - PENDING_MU)
    assert not unexplained, (f"names ending in _tick(s) not in the allow-list: {unexplained}; a value in the "
                             "run's unit ends in _mu (hilat.units), a true tick goes in TRUE_TICKS with its reason")
    assert not (PENDING_MU - found), f"renamed, drop from PENDING_MU: {sorted(PENDING_MU - found)}"
    assert not (set(TRUE_TICKS) - found), f"gone, drop from TRUE_TICKS: {sorted(set(TRUE_TICKS) - found)}"


# A run directory as hilat wrote it in run format 4 (meta.json without "unit"; values in sub-ticks by
# its time_unit): what the previous version of the run format must still read.
V4_CHANNELS = [["stim0", "stimulus"], ["stim1", "stimulus"], ["in0", "isr"], ["in1", "task"],
               ["in2", "spare"], ["in3", "tag"]]
V4_META = {
    "format": "hilat-run", "version": 4, "label": "v4", "url": "loop://", "started": "2026-01-01T00:00:00+00:00",
    "rig": {"version": 2, "ts_hz": 50e6, "sys_hz": 50e6, "n_stimulus": 2, "n_inputs": 4, "fifo_depth": 1024,
            "pin_to_stamp_delay": 17, "capabilities": 63, "firmware": "fw", "gateware": "v4 fixture",
            "samples_per_tick": 4, "channels": V4_CHANNELS},
    "settings": {"count": None, "deadline_ticks": 100, "stimulus": {"mode": "dither", "invert": False}},
    "time_unit": {"units_per_tick": 4, "samples_per_tick": 4, "subtick_positions": [0, 1, 2, 3], "first_input": 2},
    "interrupted": False, "error": None, "calibration": None,
    "counters": {"decoder": {"frames_ok": 1, "lost": 0, "corrupt": 0}},
}


def test_a_run_of_the_previous_format_reads_with_the_same_unit(tmp_path):
    """Run format 5 adds meta.json's "unit"; a version 4 run (without it) reads with the unit its
    time_unit and rig give, its values unchanged; a version from a newer hilat is refused in one line."""
    from hilat.reports import report

    old = tmp_path / "v4"
    old.mkdir()
    # stimulus at 400 mu (tick 100), ISR entry (in0) 30 mu later, both back low.
    (old / "events.csv").write_text("tick,channel,level,tag\n400,0,1,0\n430,2,1,0\n600,0,0,0\n650,2,0,0\n")
    (old / "meta.json").write_text(json.dumps(V4_META))
    run = load_run(old)
    assert run.unit == RunUnit(50e6, 4, 4) and run.ts_hz == 50e6 and run.deadline_mu == 400
    doc = report.build_report([run])
    row = doc["runs"][0]["subsets"]["all"]["stim_to_isr"]
    assert (row["count"], row["mu"]["max"], row["ns"]["max"]) == (1, 30, 150.0)
    assert doc["runs"][0]["unit"]["mu_ns"] == 5.0 and doc["version"] == 4
    (old / "meta.json").write_text(json.dumps({**V4_META, "version": RUN_FORMAT_VERSION + 1}))
    with pytest.raises(RunError, match=f"run format version {RUN_FORMAT_VERSION + 1}; this hilat reads"):
        load_run(old)
