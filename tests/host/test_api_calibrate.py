"""``Rig.calibrate_*`` (the API behind ``hilat calibrate``) against the fake rig: the measurement's
edges are synthetic (the collection is replaced), the rest is the real path: HELLO, the analysis, the
store, and the CLI printing what the API returned."""

import json

import numpy as np
import pytest
from fake_rig import FakeRig, capture_script
from hilat import api, calibration
from hilat.cli import main
from test_cli import _loopback_result  # 100 pulses through a jumper of 7 ticks


def test_calibrate_loopback_returns_stores_and_is_what_the_cli_prints(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(calibration, "run_loopback", lambda *a, **k: _loopback_result())
    with FakeRig(capture_script()) as rig:
        cal = api.Rig(rig.url, calibration_dir=tmp_path / "api").calibrate_loopback(count=100)
        assert main(["calibrate", "loopback", rig.url, "--count", "100", "--calibration-dir",
                     str(tmp_path / "cli")]) == 0
        text = capsys.readouterr().out
        assert main(["calibrate", "loopback", rig.url, "--count", "100", "--no-store", "--json"]) == 0
        printed = json.loads(capsys.readouterr().out)
    assert cal.part == "loopback" and cal.result["offset_ticks"] == 7 and cal.result["n"] == 100
    assert cal.rig_identity["gateware"] == "fake rig" and cal.stored.parent == tmp_path / "api"
    stored = json.loads(cal.stored.read_text())
    assert stored["loopback"]["offset_ticks"] == 7
    # The CLI prints the API's result: the same text (but for the file's place), the same JSON.
    assert text == cal.text().replace(str(tmp_path / "api"), str(tmp_path / "cli")) + "\n"
    assert "rig offset    7 ticks (140 ns)" in text
    assert printed["stored"] is None and printed["loopback"]["offset_ticks"] == 7
    assert printed["rig_identity"] == cal.rig_identity


def test_calibrate_loopback_without_store_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration, "run_loopback", lambda *a, **k: _loopback_result())
    with FakeRig(capture_script()) as rig:
        cal = api.Rig(rig.url, calibration_dir=tmp_path).calibrate_loopback(count=100, store=False)
    assert cal.stored is None and cal.to_json()["stored"] is None and not list(tmp_path.iterdir())
    assert "not stored (--no-store)" in cal.text()


def _pps_ticks(ppm, pulses=60, period=10_000):
    return list(10_000 + np.round(np.arange(pulses) * period * (1 + ppm * 1e-6)).astype(np.int64))


def test_calibrate_clock_against_a_pps(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration, "run_pps", lambda session, channel, duration, progress=None: _pps_ticks(25.0))
    with FakeRig(capture_script()) as rig:
        cal = api.Rig(rig.url, calibration_dir=tmp_path).calibrate_clock("pps", pps_period="10000 ticks",
                                                                         duration="600000 ticks")
    assert cal.part == "clock" and cal.result["method"] == "pps"
    assert abs(cal.result["ppm"] - 25.0) <= cal.result["uncertainty_ppm"]
    assert cal.analysis.startswith("1PPS on channel 4") and cal.text().startswith(cal.analysis + "\n")
    assert json.loads(cal.stored.read_text())["clock"]["ppm"] == cal.result["ppm"]


def test_an_implausible_clock_is_refused_with_its_analysis(tmp_path, capsys, monkeypatch, caplog):
    # 3000 ppm: no crystal is that far off; the 1PPS analysis says which pulses were used.
    monkeypatch.setattr(calibration, "run_pps", lambda session, channel, duration, progress=None: _pps_ticks(3000.0))
    with FakeRig(capture_script()) as rig:
        with pytest.raises(calibration.ImplausibleClock) as e:
            api.Rig(rig.url, calibration_dir=tmp_path).calibrate_clock("pps", pps_period="10000 ticks")
        assert main(["calibrate", "clock", rig.url, "--against", "pps", "--pps-period", "10000",
                     "--calibration-dir", str(tmp_path)]) == 1
    assert e.value.analysis.startswith("1PPS on channel 4") and e.value.result["ppm"] > 2900
    assert capsys.readouterr().out == e.value.analysis + "\n"
    assert "no crystal is that far off" in caplog.text and not list(tmp_path.iterdir())


def test_resolution_on_a_rig_without_sub_tick_bins_is_one_line(tmp_path, capsys, caplog):
    with FakeRig(capture_script()) as rig:
        with pytest.raises(calibration.CalibrationError, match="samples each input once a tick"):
            api.Rig(rig.url, calibration_dir=tmp_path).calibrate_resolution()
        assert main(["calibrate", "resolution", rig.url, "--calibration-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().out == "" and "samples each input once a tick" in caplog.text
    assert not list(tmp_path.iterdir())


def test_calibrate_clock_against_what(tmp_path):
    with pytest.raises(api.SettingsError, match="host or pps"):
        api.Rig("socket://127.0.0.1:1", calibration_dir=tmp_path).calibrate_clock("gps")
