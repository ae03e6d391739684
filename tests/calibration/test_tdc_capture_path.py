"""The TDC path through the real API, CLI and capture against the host tests' scripted rig (its
IDENTIFY given ``tdc_inputs``/``tdc_taps`` here): ``hilat calibrate resolution --input`` on a TDC
input (its collection replaced by synthetic records with uint64 fractions), stored per input; a
capture's unit, placement and statement on a TDC rig."""

import dataclasses
import json

import numpy as np
import pytest
from fake_rig import FakeRig, capture_script
from hilat import analysis, api
from hilat.calibration import tdc_rig
from hilat.cli import main
from hilat.link.session import Session
from hilat.rundir.reader import load_run

U = analysis.TDC_UNITS_PER_TICK


@pytest.fixture
def tdc_identity(monkeypatch):
    """The scripted rig's IDENTIFY with a TDC on its first four inputs (256 taps)."""
    real_open = Session.open

    def open_with_tdc(self):
        real_open(self)
        self.identity = dataclasses.replace(self.identity, tdc_inputs=4, tdc_taps=256)
        return self
    monkeypatch.setattr(Session, "open", open_with_tdc)


@pytest.fixture
def tap_table(tmp_path):
    # A uniform line at the scripted rig's 20 ns tick: 100 ps bins from 500 ps.
    path = tmp_path / "taps_test.json"
    path.write_text(json.dumps({"board": "test", "device": "-", "source": "uniform test line", "tick_ps": 20000.0,
                                "taps_ps": (500.0 + 100.0 * np.arange(256)).tolist()}))
    return path


def _source_records(channel, n_per_code=60):
    """An unrelated source's records on ``channel`` (the first input is channel 2): codes 1..200 alike."""
    codes = np.tile(np.arange(1, 201), n_per_code).astype(np.uint64)
    ticks = np.arange(len(codes), dtype=np.uint64) * 7 + 1000
    masks = np.full(len(codes), 1 << channel, np.uint16)
    return ticks, masks, masks, codes << np.uint64(8 * (channel - 2))


def test_calibrate_resolution_on_tdc_inputs_one_at_a_time(tmp_path, capsys, monkeypatch, tdc_identity, tap_table):
    monkeypatch.setattr(tdc_rig, "run_resolution", lambda session, channel, edges, progress=None:
                        _source_records(channel))
    cal_dir = tmp_path / "cal"
    with FakeRig(capture_script()) as rig:
        assert main(["calibrate", "resolution", rig.url, "--input", "spare", "--tap-table", str(tap_table),
                     "--calibration-dir", str(cal_dir)]) == 0
        text = capsys.readouterr().out
        cal = api.Rig(rig.url, calibration_dir=cal_dir).calibrate_resolution(channel="isr", tap_table=tap_table)
        assert main(["calibrate", "resolution", rig.url, "--channel", "4", "--input", "in0"]) == 2
        assert main(["calibrate", "resolution", rig.url, "--input", "stim0", "--calibration-dir", str(cal_dir)]) == 1
        assert main(["calibrate", "resolution", rig.url, "--input", "nosuch", "--calibration-dir", str(cal_dir)]) == 1
    assert text.startswith("TDC bins of channel 4 on socket://")
    assert "LSB 100 ps" in text and "predicted by the model (uniform test line)" in text
    assert cal.part == "tdc" and cal.result["channel"] == 2 and cal.result["anchor_ps"] == 500.0
    stored = json.loads(cal.stored.read_text())
    assert sorted(stored["tdc"]["inputs"]) == ["2", "4"]
    assert stored["rig_identity"]["tdc_inputs"] == 4 and stored["rig_identity"]["tdc_taps"] == 256
    assert stored["tdc"]["inputs"]["4"]["edges"] == 12000 and stored["tdc"]["inputs"]["4"]["predicted"]


def test_a_capture_on_a_tdc_rig_states_its_placement(tmp_path, tdc_identity):
    # The scripted rig sends no codes (its fraction is empty: code 0): every input edge is a change its
    # line did not measure, so each is a gap and every window is unknown, no latency and no miss
    # (docs/tdc.md, "Edges of code 0"). The unit, placement and statement are the TDC rig's: no table
    # for this board, so its inputs would stand at whole ticks, and it says so.
    with FakeRig(capture_script((60, 61, 62))) as rig:
        code = main(["capture", rig.url, "--count", "3", "--period", "1500", "--jitter", "0", "--mode", "periodic",
                     "--out", str(tmp_path / "runs"), "--no-progress", "--no-calibration", "--tdc-online"])
    assert code == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    run = load_run(run_dir)
    assert isinstance(run.subticks, analysis.TdcSubticks) and run.units_per_tick == U
    assert run.measurements.latency("stim_to_isr").tolist() == [analysis.MISSING] * 3
    summary = json.loads((run_dir / "summary.json").read_text())
    accounting = (summary["runs"][0] if "runs" in summary else summary)["stimuli_accounting"]
    assert accounting["unknown"] == 3 and accounting["measured"] == 0
    counters = json.loads((run_dir / "meta.json").read_text())["counters"]
    assert counters["tdc_unmeasured_edges"] == 6 and counters["gaps"] == 6   # each ISR pulse's rise and fall
    placement = summary["runs"][0]["unit"]["tdc_placement"] if "runs" in summary else summary["unit"]["tdc_placement"]
    assert [p["channel"] for p in placement] == [2, 3, 4, 5]
    assert {p["placement"] for p in placement} == {"none"}
    meta = json.loads((run_dir / "meta.json").read_text())
    statement = "\n".join(meta["calibration"]["statement"])
    assert "channels 2..5 have a carry-chain TDC" in statement
    assert "TDC channel 2: none: whole ticks: no measured calibration and no tap table" in statement
    # --tdc-online: the ISR's 6 edges have code 0 (not measured): none counts, nothing is re-estimated,
    # and the run says so.
    assert [e["how"] for e in meta["calibration"]["tdc_online"]] == ["too few"] * 4
    assert [e["edges"] for e in meta["calibration"]["tdc_online"]] == [0] * 4
    assert "TDC online channel 2: 0 edges, too few" in statement
    assert "TDC channel 2: none" in (run_dir / "summary.txt").read_text()


def test_the_board_check_end_to_end_on_constructed_edges(tmp_path, capsys, monkeypatch, tdc_identity, tap_table):
    """scripts/board-tdc-check's main against the scripted rig: the jumper's code density (its
    collection replaced by a uniform source), then a constructed pair: B's code is A's with pairs of
    codes swapped (1<->2, 3<->4, ...), so both inputs' bins come out 100 ps wide and B - A is -100 ps
    and +100 ps in turn: single-shot precision 100 sqrt(n / (n - 1)) / sqrt 2 ps."""
    import importlib.machinery
    import importlib.util
    from pathlib import Path

    from hilat.calibration import tdc_check

    path = Path(__file__).resolve().parents[2] / "scripts" / "board-tdc-check"
    loader = importlib.machinery.SourceFileLoader("board_tdc_check", str(path))
    script = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(script)
    monkeypatch.setattr(tdc_rig, "run_resolution", lambda session, channel, edges, progress=None:
                        _source_records(channel))
    codes_a = np.tile(np.arange(1, 201), 50)
    codes_b = codes_a + np.where(codes_a % 2 == 1, 1, -1)
    ticks = np.arange(len(codes_a), dtype=np.int64) * 11 + 5000
    n = len(codes_a)

    def pair(session, channels, edges, progress=None):
        assert channels == [2, 3] and edges == 10000
        return {2: (ticks, codes_a), 3: (ticks, codes_b)}
    monkeypatch.setattr(tdc_check, "collect_pair", pair)
    with FakeRig(capture_script()) as rig:
        code = script.main([rig.url, "--yes", "--no-store", "--tap-table", str(tap_table), "--pair-edges", "10000"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("1. code density on channel 4 (in2)") and "TDC bins of channel 4" in out
    single = next(line for line in out.splitlines() if line.startswith("single-shot precision"))
    assert single.split()[-4:] == [f"{100 * np.sqrt(n / (n - 1)) / np.sqrt(2):.3g}", "ps",
                                   f"{100 / np.sqrt(12):.3g}", "ps"]
    skew = next(line for line in out.splitlines() if line.startswith("skew B - A"))
    assert skew.split()[-3:] == ["0", "ps", "-"]     # as many -100 ps as +100 ps differences
    assert "The 'board' column is measured on this board" in out
