"""A capture whose stream has holes (frames lost on the link, a gateware overflow): every figure it
reports is measured, every window a hole touched is unknown, and the summary, `hilat report`, the
run read back from raw.bin alone and the stored samples agree."""

import json

import numpy as np
import pytest
from fake_rig import FakeRig, capture_script
from hilat import analysis
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.cli import main
from hilat.link.session import Session
from hilat.rundir.reader import load_run

N = 300
PERIOD = 1500
LATENCIES = [60 + (k * 7) % 400 for k in range(N)]


def capture(tmp_path, **script):
    settings = CaptureSettings(count=N, out_dir=tmp_path, progress=False, label="lossy", chunk_records=37,
                               stimulus=StimulusSettings(mode="periodic", period=PERIOD, jitter=0))
    with FakeRig(capture_script(LATENCIES, period=PERIOD, **script)) as rig:
        return Capture(rig.url, settings).run()


def check_run(cap, tmp_path, capsys):
    run = load_run(cap.run_dir)
    series = run.measurements.series["stim_to_isr"]
    start = int(run.meta["start_tick"])
    index = (series.start_mu - start) // PERIOD
    judged = series.unknown == 0
    # Every judged stimulus has its injected latency (the fake DUT misses none); the unknown ones
    # are neither samples nor misses.
    assert judged.sum() < len(series) and series.n_misses == 0
    assert series.values[judged].tolist() == [LATENCIES[i] for i in index[judged]]
    assert (series.values[~judged] == analysis.MISSING).all()
    summary = json.loads((cap.run_dir / "summary.json").read_text())["runs"][0]
    row = summary["subsets"]["all"]["stim_to_isr"]
    unknown_seen = series.n_unknown
    assert (row["count"], row["misses"]) == (int(judged.sum()), 0)
    assert row["mu"]["max"] == series.values[judged].max() and summary["gaps"] > 0
    # hilat report recomputes from edges.bin + gaps.bin: the same figures.
    assert main(["report", str(cap.run_dir), "--format", "json"]) == 0
    again = json.loads(capsys.readouterr().out)["runs"][0]["subsets"]["all"]["stim_to_isr"]
    assert {k: again[k] for k in ("count", "misses", "unknown")} == {k: row[k] for k in ("count", "misses", "unknown")}
    assert (again["mu"]["min"], again["mu"]["max"]) == (row["mu"]["min"], row["mu"]["max"])
    assert again["mu"]["mean"] == pytest.approx(row["mu"]["mean"], rel=1e-12)
    # From raw.bin alone (edges.bin and gaps.bin gone): the gaps are found again.
    (cap.run_dir / "edges.bin").unlink()
    (cap.run_dir / "gaps.bin").unlink()
    raw = load_run(cap.run_dir)
    assert raw.edges_source == "raw.bin"
    again = raw.measurements.series["stim_to_isr"]
    assert again.unknown.tolist() == series.unknown.tolist() and again.values.tolist() == series.values.tolist()
    return row, unknown_seen


def test_frames_lost_on_the_link_are_gaps(tmp_path, capsys):
    cap = capture(tmp_path, lose_frames={3, 9})
    assert cap.error is None and (cap.run_dir / "meta.json").exists()
    assert json.loads((cap.run_dir / "meta.json").read_text())["counters"]["decoder"]["lost"] == 2
    row, unknown_seen = check_run(cap, tmp_path, capsys)
    # Two frames of ~59 records: their stimuli are gone, the windows around them unknown.
    assert unknown_seen >= 2 and row["count"] + unknown_seen < N


def test_gateware_overflow_is_a_gap_on_its_channels(tmp_path, capsys):
    cap = capture(tmp_path, overflow=(401, 30))
    meta = json.loads((cap.run_dir / "meta.json").read_text())
    assert meta["counters"]["gateware_overflow_markers"] == 1 and meta["counters"]["decoder"]["lost"] == 0
    row, unknown_seen = check_run(cap, tmp_path, capsys)
    # Records 401..430 (4 a stimulus): stimuli 101..107 lost whole, stimulus 100's window touches
    # the gap; the ISR rise of 107 (record 430) got through but pairs with nothing.
    assert unknown_seen == 1 and row["count"] == N - 8


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_streamed_summary_equals_exact_at_any_chunk(tmp_path, chunk):
    settings = CaptureSettings(count=N, out_dir=tmp_path / str(chunk), progress=False, chunk_records=chunk,
                               stimulus=StimulusSettings(mode="periodic", period=PERIOD, jitter=0))
    with FakeRig(capture_script(LATENCIES, period=PERIOD, lose_frames={4}, overflow=(700, 9))) as rig:
        cap = Capture(rig.url, settings).run()
    summary = json.loads((cap.run_dir / "summary.json").read_text())["runs"][0]["subsets"]["all"]
    exact = load_run(cap.run_dir).measurements
    for kind in exact.kinds:
        s = exact.series[kind]
        assert (summary[kind]["count"], summary[kind]["misses"], summary[kind]["unknown"]) == \
            (len(s.valid()), s.n_misses, s.n_unknown), kind
    assert np.all(exact.series["isr_to_task"].valid() >= 0)


def test_a_value_no_histogram_holds_is_an_error_naming_the_run_and_the_sample(tmp_path):
    # A pulse on the spare input 2**43 ticks long: beyond what the streamed histograms hold.
    settings = CaptureSettings(count=1, out_dir=tmp_path, progress=False, measures=["w=width:in2"],
                               stimulus=StimulusSettings(mode="periodic", period=PERIOD, jitter=0))
    spare = 1 << 4
    with FakeRig(capture_script((60,), period=PERIOD, extra_edges=((100, spare, spare), (2**43, spare, 0)))) as rig:
        cap = Capture(rig.url, settings).run()
    assert cap.error and str(cap.run_dir) in cap.error and "w sample 0" in cap.error
    assert "outside what its histogram holds" in cap.error
    # The run is kept: the exact figures (no histogram) still have the sample.
    assert load_run(cap.run_dir).measurements.series["w"].valid().tolist() == [2**43 - 100]


def test_a_rig_reset_mid_run_is_said_and_the_run_up_to_it_kept(tmp_path, capsys):
    settings = CaptureSettings(count=N, out_dir=tmp_path, progress=False, label="reset",
                               stimulus=StimulusSettings(mode="periodic", period=PERIOD, jitter=0))
    with FakeRig(capture_script(LATENCIES, period=PERIOD, reset_after=10)) as rig:
        session = Session(rig.url, command_timeout=1.0)   # the STATUS that never comes: 1 s
        session.open()
        try:
            cap = Capture(None, settings, session=session).run()
        finally:
            session.close()
    assert "stopped answering mid-run" in cap.error and "reset" in cap.error
    run = load_run(cap.run_dir)
    series = run.measurements.series["stim_to_isr"]
    start = int(run.meta["start_tick"])
    index = (series.start_mu - start) // PERIOD
    judged = series.unknown == 0
    # Every stimulus before the reset is measured exactly; the last one's window runs into the
    # silence: unknown, not a miss.
    assert series.n_misses == 0 and series.unknown.tolist()[-1] == 1 and judged.sum() == len(series) - 1
    assert series.values[judged].tolist() == [LATENCIES[i] for i in index[judged]]
    assert main(["report", str(cap.run_dir)]) == 0
    out = capsys.readouterr().out
    assert "stopped answering mid-run" in out and "unknown" in out


def test_a_run_of_format_3_reads_without_gaps_and_with_old_samples(tmp_path):
    """Before format 4 a run had no gaps.bin and samples without `unknown` (store version 1)."""
    from hilat.rundir.layout import BUILTIN_KINDS, SAMPLE_DTYPE, SAMPLE_DTYPE_V1, SAMPLES_MAGIC

    cap = capture(tmp_path)
    (cap.run_dir / "gaps.bin").unlink()
    # A store of version 1 per kind (before samples/stimuli.bin held the built-in kinds together).
    current = load_run(cap.run_dir)
    for kind in BUILTIN_KINDS:
        items = np.concatenate(list(current.iter_samples(kind)))
        old = np.zeros(len(items), SAMPLE_DTYPE_V1)
        for name in SAMPLE_DTYPE_V1.names:
            old[name] = items[name]
        (cap.run_dir / "samples" / f"{kind}.bin").write_bytes(
            SAMPLES_MAGIC + (1).to_bytes(4, "little") + SAMPLE_DTYPE_V1.itemsize.to_bytes(4, "little")
            + old.tobytes())
        if kind == "stim_to_isr":
            new = items
    (cap.run_dir / "samples" / "stimuli.bin").unlink()
    meta = json.loads((cap.run_dir / "meta.json").read_text())
    meta["version"] = 3
    (cap.run_dir / "meta.json").write_text(json.dumps(meta))
    run = load_run(cap.run_dir)
    assert len(run.gaps) == 0
    assert run.has_stored_samples()
    back = next(run.iter_samples("stim_to_isr"))
    assert back.dtype == SAMPLE_DTYPE and (back["unknown"] == 0).all()
    assert back["value_mu"].tolist() == new["value_mu"].tolist()
