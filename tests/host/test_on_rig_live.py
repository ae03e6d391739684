"""The live view of `hilat capture --on-rig` without raw edges: the rig's interval histograms as they
arrive (per kind: samples, percentiles and max of the intervals in so far and of the last one), as a
plain line off a terminal and as a rich table on one, against the fake engine rig."""

import io
import re

from engine_rig import EngineRig
from fake_rig import FakeRig
from hilat import engine
from hilat.acquisition.capture import Capture
from hilat.acquisition.live import LiveView
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.cli import main

TICK_NS = 20  # the fake rig's 50 MHz


def us(ticks):
    return f"{ticks * TICK_NS / 1000:.3f}"


def expected_figures(rig, kind):
    """(count, p50, p99, p99.9, max) of the kind, as the rig's bins give them: the reference
    histogram's percentiles and the highest equivalent value of its max."""
    exact, hist = rig.expected(kind)
    return (exact["count"], *(hist.value_at_percentile(q) for q in (50, 99, 99.9)),
            hist.highest_equivalent_value(exact["max"]))


def capture_lines(tmp_path, capsys, *extra):
    """stderr's lines of an on-rig capture of the fake engine rig with the live view on (not a terminal)."""
    rig = EngineRig()
    with FakeRig(rig.script) as fake:
        assert main(["capture", fake.url, "--on-rig", *extra, "--count", "3000", "--mode", "periodic",
                     "--period", "500", "--jitter", "0", "--out", str(tmp_path), "--no-calibration",
                     "--interval-shift", "16"]) == 0
    return rig, capsys.readouterr().err.splitlines()


def test_plain_lines_show_the_rigs_intervals(tmp_path, capsys):
    rig, lines = capture_lines(tmp_path, capsys)
    progress = [line for line in lines if line.startswith("T: ")]
    assert progress, lines
    # The last line, after the flush: every interval of the run, each kind's figures from its bins.
    intervals = len({int(t) >> 16 for t in rig.samples.start})
    last = progress[-1]
    assert f" I: {intervals} intervals " in last and last.endswith("| lost 0")
    for kind in engine.KINDS:
        count, p50, p99, p999, top = expected_figures(rig, kind)
        assert (f"{kind} n {count} P50 {us(p50)} P99 {us(p99)} P99.9 {us(p999)} Max {us(top)} us (last interval n "
                in last), (kind, last)
    # New maxima as intervals come: the last one of a kind is the bin of its max.
    for kind in engine.KINDS:
        maxima = [line for line in lines if line.startswith(f"new max {kind}: ")]
        top = expected_figures(rig, kind)[-1]
        assert maxima and maxima[-1].startswith(f"new max {kind}: {us(top)} us (bin up to {top} ticks)")


def test_terminal_table_of_the_rigs_intervals(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # a terminal of 200 columns, as tests/e2e/test_sim_live.py's
    rig = EngineRig(seed=5)
    out = io.StringIO()
    view = LiveView(file=out, tty=True, refresh_s=0.01)
    settings = CaptureSettings(count=3000, on_rig=True, raw=False, engine_interval_shift=16, out_dir=tmp_path,
                               stimulus=StimulusSettings(mode="periodic", period=500, jitter=0))
    with FakeRig(rig.script) as fake:
        capture_run = Capture(fake.url, settings, live=view).run()
    assert capture_run.error is None
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    intervals = len({int(t) >> 16 for t in rig.samples.start})
    assert f"hilat capture --on-rig: {intervals} intervals of 1.311 ms from the rig" in screen
    assert "last p99" in screen and "lost: frames lost 0" in screen
    final = screen[screen.rindex("hilat capture --on-rig:"):]
    for kind in engine.KINDS:
        count, p50, p99, p999, top = expected_figures(rig, kind)
        row = next(line for line in final.splitlines() if line.strip().startswith(kind))
        assert row.split()[:6] == [kind, str(count), us(p50), us(p99), us(p999), us(top)], row


def test_with_raw_edges_the_view_still_shows_the_rigs_intervals(tmp_path, capsys):
    """The raw edges beside the engine are kept, but the run's figures (its summary's) are the
    engine's: the live view shows those, as without --raw (docs/analysis.md, "One distribution")."""
    rig, lines = capture_lines(tmp_path, capsys, "--raw")
    progress = [line for line in lines if line.startswith("T: ")]
    assert progress and all(" I: " in line and " C: " not in line for line in progress)
    count, p50, *_ = expected_figures(rig, "stim_to_isr")
    assert f"stim_to_isr n {count} P50 {us(p50)} " in progress[-1]
