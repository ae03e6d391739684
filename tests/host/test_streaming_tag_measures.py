"""Measures whose edges are on the tag channel: the capture's streaming pairing (its summary) counts
what the report recomputes from the run's edges, wherever the chunks of the stream are cut.

The streaming aggregator carries the tag's level from one chunk to the next; it carried it as the
tag's last edge before the cut, which a measure starting on the tag channel took for a start edge
again (a second sample of a start already counted, its end edge gone: a miss)."""

import json

import numpy as np
import pytest
from fake_rig import FakeRig, capture_script
from hilat import analysis
from hilat.analysis import measures
from hilat.cli import main
from hilat.rundir.reader import load_run
from hilat.statistics.streaming import SUBSET_NAMES, StreamingAggregator
from synth import ROLES, TS_HZ

ISR, TASK, SPARE, TAG = 2, 3, 4, 5
# A DUT's inter-task round (in2 = spare, in1 = task, in3 = tag, in0 = isr), as build/ipc-bug's: send
# -> receive, signal -> handler, semaphore hand-off, yield to the other task; then a pause.
ROUND = [(0, SPARE, 1), (1278, TASK, 1), (2000, SPARE, 0), (3414, TASK, 0),
         (5000, TAG, 1), (6228, ISR, 1), (7000, TAG, 0), (7992, ISR, 0)]
PERIOD = 20_000
DEFINITIONS = ["send_to_receive=in2:rise..task:rise", "signal_to_handler=in2:fall..task:fall",
               "semaphore_handoff=tag:rise..isr:rise", "yield_to_other=tag:fall..isr:fall",
               "tag_period=period:tag", "tag_width=width:tag", "tag_to_task=tag:fall..task:rise"]


def _parse(definitions):
    return [measures.parse(d, ROLES, TS_HZ, reserved=[k for k, _ in analysis.KINDS]) for d in definitions]


def _rounds(n, start=1000):
    edges = sorted((start + PERIOD * k + dt, ch, lv) for k in range(n) for dt, ch, lv in ROUND)
    t, c, lv = (np.array(x) for x in zip(*edges))
    return t.astype(np.int64), c.astype(np.uint8), lv.astype(np.uint8)


def _streamed(edges, defined, chunk, end_tick, builtin=False):
    agg = StreamingAggregator(ROLES, measures=defined, builtin=builtin)
    t, c, lv = edges
    for i in range(0, len(t), chunk):
        agg.feed(t[i:i + chunk], c[i:i + chunk], lv[i:i + chunk])
    return agg.finish(end_tick)


def _assert_same(agg, exact):
    for kind in exact.kinds:
        assert agg.tagged[kind] == int(exact.series[kind].tag_in_window.sum()), kind
        for subset in SUBSET_NAMES:
            sel = exact.subset(kind, subset)
            key = (subset, kind)
            assert (agg.starts[key], agg.misses[key], agg.duplicates[key]) == \
                (len(sel), int((sel.values == analysis.MISSING).sum()), int(sel.duplicates.sum())), key


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 8, 13, 10**9])
def test_measures_on_the_tag_channel_stream_as_the_report_counts(chunk):
    n = 40
    edges = _rounds(n)
    end_tick = int(edges[0][-1]) + 1
    defined = _parse(DEFINITIONS)
    exact = analysis.measure(*edges, ROLES, defined, builtin=False, end_mu=end_tick)
    # What a deterministic DUT gives: one sample a round (the period: one fewer), none missed but the
    # last tag fall's task rise, which the next round would have brought.
    misses = {kind: int(kind == "tag_to_task") for kind in exact.kinds}
    for kind in exact.kinds:
        assert len(exact.series[kind]) == (n - 1 if kind == "tag_period" else n), kind
        assert int((exact.latency(kind) == analysis.MISSING).sum()) == misses[kind], kind
    agg = _streamed(edges, defined, chunk, end_tick)
    _assert_same(agg, exact)
    assert {kind: agg.misses[("all", kind)] for kind in exact.kinds} == misses
    # A measure starting on the tag's active edge is tagged by its own start: none is untagged.
    assert agg.starts[("untagged", "semaphore_handoff")] == 0


@pytest.mark.parametrize("chunk", [1, 3, 8, 10**9])
def test_the_tag_level_carries_over_chunks_without_tag_edges(chunk):
    """A tag that rises once and stays high: every later window is tagged, in every chunk."""
    t, c, lv = _rounds(30)
    keep = c != TAG
    t, c, lv = (np.append(a[keep], x) for a, x in ((t, 5 * PERIOD + 500), (c, TAG), (lv, 1)))
    order = np.argsort(t, kind="stable")
    edges = t[order], c[order], lv[order]
    end_tick = int(edges[0][-1]) + 1
    defined = _parse(["send_to_receive=in2:rise..task:rise", "isr_period=period:isr"])
    exact = analysis.measure(*edges, ROLES, defined, builtin=False, end_mu=end_tick)
    assert len(exact.subset("send_to_receive", "untagged")) == 4
    _assert_same(_streamed(edges, defined, chunk, end_tick), exact)


def test_a_capture_summary_counts_tag_measures_as_the_report(tmp_path):
    """Through a capture: summary.json (streamed) says what the run's edges say."""
    period, n = 1500, 8
    # Each stimulus period: the tag pulses (in3, mask bit 5) and the task (in1, bit 3) answers each edge.
    extra = [(period * k + dt, mask, levels) for k in range(n)
             for dt, mask, levels in ((300, 0b100000, 0b100000), (420, 0b1000, 0b1000),
                                      (600, 0b100000, 0), (760, 0b1000, 0))]
    definitions = ["tag_to_task=tag:rise..task:rise", "tag_fall_to_task=tag:fall..task:fall"]
    with FakeRig(capture_script([60] * n, period=period, extra_edges=extra)) as rig:
        code = main(["capture", rig.url, "--count", str(n), "--period", str(period), "--jitter", "0",
                     "--mode", "periodic", "--out", str(tmp_path), "--no-progress", "--no-calibration",
                     *(a for d in definitions for a in ("--measure", d))])
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    exact = load_run(run_dir).measurements
    summary = json.loads((run_dir / "summary.json").read_text())["runs"][0]["subsets"]
    for kind in ("tag_to_task", "tag_fall_to_task"):
        series = exact.series[kind]
        assert len(series) == n and not (series.values == analysis.MISSING).any()
        for subset in SUBSET_NAMES:
            sel = exact.subset(kind, subset)
            row = summary[subset][kind]
            assert (row["starts"], row["misses"]) == (len(sel), int((sel.values == analysis.MISSING).sum())), \
                (subset, kind)
