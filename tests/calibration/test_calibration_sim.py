"""Calibration in simulation: the simulated rig's SPARE input carries a loopback of STIM0 with a known
delay, or a 1PPS with a known frequency error and known missing and extra pulses. The calibration
must recover them (the offset to the tick, the ppm within its stated uncertainty, every bad pulse by
name), store them, and a later capture must apply them.
"""

import csv
import json
import logging

import numpy as np
import pytest
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.cli import main

from targets import sim

TS_HZ = sim.TS_CLK_FREQ


def calibrate(*args):
    return main(["calibrate", *map(str, args)])


def test_loopback_offset_recovered_and_applied_by_capture(sim_dir, tmp_path, capsys):
    """Loopback delay 7 ticks -> offset 7, spread 0; the next capture's latencies are exactly the
    injected ones minus 7, and meta.json, summary.txt and `hilat info` say so."""
    cal_dir = tmp_path / "cal"
    dut_log = tmp_path / "injected.csv"
    dut = {"loopback": 1, "loopback_delay": 7, "seed": 5}
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args=dut, dut_log=dut_log) as rig:
        assert calibrate("loopback", rig.url, "--count", 300, "--period", 2000, "--jitter", 500, "--width", 50,
                         "--calibration-dir", cal_dir, "--json") == 0
        loop = json.loads(capsys.readouterr().out)["loopback"]
        assert main(["info", rig.url, "--calibration-dir", str(cal_dir)]) == 0
        info = capsys.readouterr().out
        calibration_pulses = len(sim.read_dut_log(dut_log))   # they reached the DUT too: skip them below
        assert main(["capture", rig.url, "--count", "300", "--period", "5000", "--jitter", "1000", "--out",
                     str(tmp_path / "runs"), "--label", "calibrated", "--no-progress",
                     "--calibration-dir", str(cal_dir)]) == 0
    assert loop["offset_ticks"] == 7 and loop["min_ticks"] == 7 and loop["max_ticks"] == 7
    assert loop["n"] == 300 and loop["missing"] == 0 and loop["std_ticks"] == 0
    assert loop["fall"]["median_ticks"] == 7 and loop["fall"]["n"] == 300
    assert "rig offset: 7 ticks (140 ns) subtracted" in info and "rig jitter (loopback): 7..7 ticks" in info

    run = next((tmp_path / "runs").iterdir())
    meta = json.loads((run / "meta.json").read_text())
    calib = meta["calibration"]
    assert calib["offset_ticks"] == 7 and calib["applied"] and calib["warnings"] == []
    assert calib["ts_hz"] == TS_HZ and calib["loopback"]["offset_ticks"] == 7 and calib["clock"] is None
    assert calib["rig_identity"]["gateware"] == meta["rig"]["gateware"]
    assert any("rig offset: 7 ticks" in line for line in calib["statement"])
    assert "rig offset: 7 ticks" in (run / "summary.txt").read_text()

    injected = sim.read_dut_log(dut_log)[calibration_pulses:]
    # The samples the capture's streaming pairing stored (samples/KIND.bin), offset applied.
    from hilat.rundir.reader import load_run

    loaded = load_run(run)
    isr, task, isr_to_task = (np.concatenate(list(loaded.iter_samples(kind)))["value_mu"]
                              for kind in ("stim_to_isr", "stim_to_task", "isr_to_task"))
    assert len(isr) == len(injected) == 300
    hit = injected[:, 1] == 0
    np.testing.assert_array_equal(isr[hit], injected[hit, 2] - 7)
    np.testing.assert_array_equal(task[hit], injected[hit, 3] - 7)
    np.testing.assert_array_equal(isr_to_task[hit], injected[hit, 3] - injected[hit, 2])   # not shifted
    np.testing.assert_array_equal(isr[~hit], -1)


def test_loopback_spread_is_the_configured_jitter(sim_dir, tmp_path, capsys):
    """Delay 3 + uniform 0..4 ticks per pulse: spread exactly 3..7, offset their median."""
    dut = {"loopback": 1, "loopback_delay": 3, "loopback_jitter": 4, "loopback_seed": 9}
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args=dut) as rig:
        assert calibrate("loopback", rig.url, "--count", 200, "--period", 2000, "--jitter", 500, "--width", 50,
                         "--no-store", "--json") == 0
    loop = json.loads(capsys.readouterr().out)["loopback"]
    assert loop["min_ticks"] == 3 and loop["max_ticks"] == 7 and sorted(map(int, loop["histogram"])) == [3, 4, 5, 6, 7]
    delays = np.repeat([int(k) for k in loop["histogram"]], list(loop["histogram"].values()))
    assert loop["offset_ticks"] == int(np.sort(delays)[(len(delays) - 1) // 2])
    assert loop["std_ticks"] == pytest.approx(np.std(delays, ddof=1))
    # The falling edge travels the same path with the same draw.
    assert loop["fall"]["min_ticks"] == 3 and loop["fall"]["max_ticks"] == 7


def test_no_loopback_jumper_says_what_to_wire(sim_dir, tmp_path, caplog):
    with sim.SimulatedRig(sim_dir, tmp_path / "sim") as rig:
        with caplog.at_level(logging.INFO, logger="hilat"):
            assert calibrate("loopback", rig.url, "--count", 50, "--period", 2000, "--jitter", 500,
                             "--width", 50, "--calibration-dir", tmp_path / "cal") == 1
    assert "no edges on capture channel 4 during 50 stimulus pulses" in caplog.text
    assert "Wire stimulus output STIM0 to the SPARE capture input (channel 4)" in caplog.text
    assert not (tmp_path / "cal").exists()


def read_pps_log(path):
    return [(kind, int(index), int(tick)) for kind, index, tick in csv.reader(open(path))]


def test_pps_clock_recovered_and_applied(sim_dir, tmp_path, capsys):
    """A clean 1PPS (nominal 10000 ticks) revealing +37.5 ppm: recovered within the stated uncertainty,
    stored, and used by a later capture to convert ticks to ns."""
    cal_dir = tmp_path / "cal"
    dut = {"pps_period": 10_000, "pps_ppb": 37_500}
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args=dut) as rig:
        assert calibrate("clock", rig.url, "--against", "pps", "--pps-period", 10_000, "--duration", 1_000_000,
                         "--calibration-dir", cal_dir, "--json") == 0
        clock = json.loads(capsys.readouterr().out)["clock"]
        settings = CaptureSettings(count=100, out_dir=tmp_path / "runs", progress=False, calibration_dir=cal_dir,
                                   stimulus=StimulusSettings(mode="dither", period=5000, jitter=1000))
        capture = Capture(rig.url, settings).run()
    assert clock["method"] == "pps" and clock["missing"] == [] and clock["extra"] == []
    assert clock["pulses_used"] >= 95
    assert abs(clock["ppm"] - 37.5) <= clock["uncertainty_ppm"] < 0.5
    assert "residuals" in clock["basis"] and clock["coverage"] == "k=2"
    meta = json.loads((capture.run_dir / "meta.json").read_text())
    assert meta["calibration"]["ts_hz"] == pytest.approx(TS_HZ * (1 + clock["ppm"] * 1e-6), rel=1e-12)
    assert meta["calibration"]["offset_ticks"] == 0
    summary = json.loads((capture.run_dir / "summary.json").read_text())
    assert summary["format"] == "hilat-report" and summary["version"] == 4
    assert summary["runs"][0]["tick_ns"] == pytest.approx(1e9 / meta["calibration"]["ts_hz"], rel=1e-12)
    # The run's unit carries the calibrated tick clock (one mu is a tick on this one-sample rig).
    assert summary["runs"][0]["unit"]["tick_hz"] == meta["unit"]["tick_hz"] == meta["calibration"]["ts_hz"]
    assert summary["runs"][0]["mu_ns"] == pytest.approx(1e9 / meta["calibration"]["ts_hz"], rel=1e-12)
    assert any(line.startswith("clock: +37.") for line in meta["calibration"]["statement"])


def test_pps_missing_and_extra_pulses_named_and_excluded(sim_dir, tmp_path, capsys):
    """-42.125 ppm, +-5 ticks of jitter, pulses 10k and 10k+1 missing, an extra pulse after every 7th:
    each named where the model put it, none in the fit, the ppm still within the uncertainty."""
    pps_log = tmp_path / "pps.csv"
    jitter = 5
    dut = {"pps_period": 10_000, "pps_ppb": -42_125, "pps_jitter": jitter, "pps_missing_every": 10,
           "pps_missing_run": 2, "pps_extra_every": 7}
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args=dut, pps_log=pps_log) as rig:
        assert calibrate("clock", rig.url, "--against", "pps", "--pps-period", 10_000, "--duration", 1_000_000,
                         "--no-store", "--json") == 0
    clock = json.loads(capsys.readouterr().out)["clock"]
    # +-5 ticks of jitter on 10000-tick periods over ~100 periods: about 2 ppm (k=2).
    assert abs(clock["ppm"] - (-42.125)) <= clock["uncertainty_ppm"] < 3.0
    log = read_pps_log(pps_log)
    model_extra = [t for kind, _, t in log if kind == "extra"]
    model_missing = [(index, t) for kind, index, t in log if kind == "missing"]
    named_extra = [e["tick"] for e in clock["extra"]]
    named_missing = [(m["pulse"], m["expected_tick"]) for m in clock["missing"]]
    assert len(named_extra) >= 10 and len(named_missing) >= 15

    # The rig counts ticks from its own reset, the model from its: one small constant apart, found
    # from the extra pulses (exact ticks). Their spacing repeats (a pulse every 7 periods), so a shift
    # by whole runs of them can fit too: the smallest is the one.
    shift = min((s for s in (named_extra[0] - t for t in model_extra)
                 if all(e - s in model_extra for e in named_extra)), key=abs)
    extra = [e - shift for e in named_extra]
    # Every extra pulse of the model inside the captured span is named, with its exact tick.
    assert [t for t in model_extra if extra[0] <= t <= extra[-1]] == extra
    # Every missing pulse of the model inside the span is named, once, near its ideal tick, and the
    # rig's pulse numbers are the model's indices less a constant.
    first = min(range(len(model_missing)), key=lambda i: abs(model_missing[i][1] - (named_missing[0][1] - shift)))
    expected = model_missing[first:first + len(named_missing)]
    assert len(expected) == len(named_missing)
    for (n, tick), (index, model_tick) in zip(named_missing, expected):
        assert abs(tick - shift - model_tick) <= 2 * jitter + 1
        assert index - n == expected[0][0] - named_missing[0][0]
    # Nothing excluded went into the fit: the pulses used are the edges less the extras.
    assert clock["pulses_used"] == clock["edges"] - len(named_extra)
