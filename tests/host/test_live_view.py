"""The live view of a capture paired on the host: its plain line and its terminal table state each
kind's unknown windows (a gap in the record stream touched them) apart from its misses, and the
capture's gaps."""

from hilat.rundir.reader import load_run
from synth import GAPPED_ISR, GAPPED_STIM, GAPPED_UNKNOWN, gapped_run, live_capture, live_last_line


def test_the_live_view_counts_unknown_windows_and_gaps(tmp_path):
    run = load_run(gapped_run(tmp_path / "g"))
    capture = live_capture(run)
    line, table = live_last_line(capture, list(run.kind_titles))
    agg = capture.stream.aggregator
    missed = GAPPED_ISR.count(None) - 1               # stimulus GAPPED_UNKNOWN's ISR was hidden, not missed
    assert agg.misses[("all", "stim_to_isr")] == missed and agg.unknown[("all", "stim_to_isr")] == 1
    part = next(p for p in line.split(" | ") if p.startswith("stim_to_isr "))
    assert part.endswith(f"misses {missed} unknown 1 dup 0"), part
    for kind in run.kind_titles:
        assert f"misses {agg.misses[('all', kind)]} unknown {agg.unknown[('all', kind)]} dup" in line, kind
    assert " | gaps 1 | lost " in line
    head = next(row for row in table.splitlines() if row.split()[:1] == ["kind"]).split()
    assert head[-3:] == ["misses", "unknown", "dups"]
    row = next(row for row in table.splitlines() if row.split()[:1] == ["stim_to_isr"]).split()
    assert row[head.index("misses")] == str(missed) and row[head.index("unknown")] == "1"
    assert row[head.index("samples")] == str(len(GAPPED_STIM))
    assert "gaps 1" in table
    # Without the gap, the hidden ISR is a miss: the view counts it so, and nothing is unknown.
    plain = live_capture(run, gaps=False)
    assert plain.stream.aggregator.misses[("all", "stim_to_isr")] == missed + 1
    line, _ = live_last_line(plain, list(run.kind_titles))
    assert f"misses {missed + 1} unknown 0 dup" in line and " | gaps 0 | " in line
    assert GAPPED_ISR[GAPPED_UNKNOWN] is None
