"""`hilat export` of an on-rig run without raw edges: the HdrHistogram interval log comes straight
from the engine's bins (hlog/rig.hlog), the exports that need samples or edges are refused."""

import json

import numpy as np
import pytest
from engine_rig import EngineRig
from hilat import engine
from hilat.cli import main
from hilat.hdr import read_hlog
from test_engine_capture import capture, usage_error

TS_HZ = 50e6
SHIFT = 16  # test_engine_capture.capture's


@pytest.fixture(scope="module")
def on_rig_run(tmp_path_factory):
    """An on-rig run of the fake engine rig (3000 stimuli, intervals of 2**16 ticks), and the rig."""
    rig = EngineRig()
    run_dir, _ = capture(rig, tmp_path_factory.mktemp("runs"))
    assert json.loads((run_dir / "meta.json").read_text())["results"] == {"on_rig": "complete", "raw": "none"}
    return run_dir, rig


def export(run_dir, *args):
    return main(["export", str(run_dir), *args])


@pytest.mark.parametrize("kind", engine.KINDS)
def test_hlog_is_the_engines_intervals(on_rig_run, tmp_path, kind):
    run_dir, rig = on_rig_run
    path = tmp_path / f"{kind}.hlog"
    assert export(run_dir, "--hlog", str(path), "--kind", kind) == 0
    exported = read_hlog(path).intervals
    engine_lines = [iv for iv in read_hlog(run_dir / "hlog" / "rig.hlog").intervals if iv.tag == kind]
    # One untagged line per engine interval with samples of the kind, the engine's histogram as it is.
    assert len(exported) == len(engine_lines) == len(np.unique(rig.samples.start[rig.samples.binned[
        engine.KINDS.index(kind)]] >> SHIFT)) > 5
    for mine, theirs in zip(exported, engine_lines):
        assert mine.tag is None
        assert (mine.start_s, mine.length_s) == pytest.approx((theirs.start_s, theirs.length_s))
        assert mine.histogram == theirs.histogram
    # Every sample the engine binned, and their percentiles: the summary's, in ns.
    expected, hist = rig.expected(kind)
    total = read_hlog(path).merged(None)
    assert total.total_count == expected["count"]
    summary = json.loads((run_dir / "summary.json").read_text())["runs"][0]["subsets"]["all"][kind]
    p99_ns = summary["mu"]["percentiles"]["p99"] * 1e9 / TS_HZ
    assert total.value_at_percentile(99) == total.highest_equivalent_value(round(p99_ns))


def test_hlog_intervals_merged_per_interval_option(on_rig_run, tmp_path, capsys):
    run_dir, rig = on_rig_run
    path = tmp_path / "merged.hlog"
    assert export(run_dir, "--hlog", str(path), "--interval", "5ms") == 0
    merged = read_hlog(path).intervals
    engine_lines = [iv for iv in read_hlog(run_dir / "hlog" / "rig.hlog").intervals if iv.tag == "stim_to_isr"]
    def window(t):  # the 5 ms window of a time (the log's times have 3 decimals: no float noise)
        return int(round(t * 1000) // 5)

    groups = np.unique([window(iv.start_s) for iv in engine_lines])
    assert len(merged) == len(groups) < len(engine_lines)
    assert sum(iv.histogram.total_count for iv in merged) == rig.expected("stim_to_isr")[0]["count"]
    for iv in merged:  # each spans whole engine intervals inside its 5 ms
        assert window(iv.start_s) == window(iv.start_s + iv.length_s - 0.001)
    # Finer than the engine's intervals (2**16 ticks: 1.311 ms) cannot be.
    why = usage_error(["export", str(run_dir), "--hlog", str(tmp_path / "fine.hlog"), "--interval", "1ms"], capsys)
    assert "--interval 0.001 s: the engine binned this run in intervals of 0.00131072 s" in why
    assert not (tmp_path / "fine.hlog").exists()


@pytest.mark.parametrize("what", ["--csv", "--parquet", "--vcd"])
def test_exports_of_samples_or_edges_say_the_run_has_on_rig_results_only(on_rig_run, tmp_path, capsys, what):
    run_dir, _ = on_rig_run
    target = tmp_path / "out"
    why = usage_error(["export", str(run_dir), "--hlog", str(tmp_path / "x.hlog"), what, str(target)], capsys)
    assert "the run has on-rig results only" in why and f"{what} need the raw edges" in why
    assert not target.exists() and not (tmp_path / "x.hlog").exists()


def test_the_api_reads_an_on_rig_run_with_nothing_unknown(on_rig_run):
    from hilat import api
    from hilat.reports import report
    from hilat.rundir.reader import load_run

    run_dir, _rig = on_rig_run
    run = api.load(run_dir)
    doc = report.build_report([load_run(run_dir)])["runs"][0]
    for kind in run.kinds:
        st = run.stats(kind)
        row = doc["subsets"]["all"][kind]
        assert st.unknown == row["unknown"] == 0
        assert (st.count, st.misses) == (row["count"], row["misses"])
    assert run.stimuli_accounting is None and doc["stimuli_accounting"] is None
