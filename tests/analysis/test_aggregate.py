"""The bounded-memory aggregator equals the exact pairing, chunk boundaries wherever they fall."""

import json

import numpy as np
import pytest
from hilat import analysis
from hilat.analysis.measures import parse as parse_measure
from hilat.cli import main
from hilat.hdr import HdrHistogram
from hilat.rundir.reader import load_run
from hilat.statistics.distribution import exact_figures
from hilat.statistics.streaming import StreamingAggregator
from synth import ROLES, dut_edges, measures_json, random_run, write_run


def edges_of(run):
    return run.ticks, run.chans, run.levels


# Defined kinds next to the built-in ones: an interval with misses and duplicates (stimulus -> the
# spare input, which answers some stimuli twice), the tag's period and the ISR pulse width.
MEASURES = ["spare_reply=stim0..in2@4000", "tag_period=period:in3", "isr_width=width:isr"]


@pytest.mark.parametrize("chunk", [1, 7, 1000, 10**9])
def test_streaming_equals_exact(tmp_path, chunk):
    tags = [(20_000 + 50_000 * i, 20_000 + 50_000 * i + 3000 + 7 * i) for i in range(40)]
    path, _, _ = random_run(tmp_path / "r", n=2000, seed=9, miss_every=37)
    run = load_run(path)
    # Add tags, duplicate ISR pulses and spare-input replies to the synthetic edges.
    rng = np.random.default_rng(2)
    stim = run.pairing.stim_mu
    extra = (stim[rng.choice(len(stim), 30, replace=False)] + 2500).tolist()
    replies = [(int(s) + 100 + i % 50, int(s) + 300 + i % 7) for i, s in enumerate(stim) if i % 5]
    edges = sorted(list(zip(run.ticks.tolist(), run.chans.tolist(), run.levels.tolist()))
                   + [e for r, f in tags for e in ((r, 5, 1), (f, 5, 0))]
                   + [e for t in extra for e in ((t, 2, 1), (t + 3, 2, 0))]
                   + [e for a, b in replies for e in ((a, 4, 1), (a + 5, 4, 0), (b, 4, 1), (b + 5, 4, 0))])
    run = load_run(write_run(tmp_path / "t", edges, measures=measures_json(MEASURES)))
    exact = run.measurements
    assert exact.kinds == [k for k, _ in analysis.KINDS] + ["spare_reply", "tag_period", "isr_width"]
    agg = StreamingAggregator(run.roles, offset_mu=0, measures=run.measures)
    t, c, lv = edges_of(run)
    for i in range(0, len(t), chunk):
        agg.feed(t[i:i + chunk], c[i:i + chunk], lv[i:i + chunk])
    agg.finish(run.end_mu)
    assert agg.stimuli == exact.stimuli == 2000
    assert agg.tagged["stim_to_isr"] == int(exact.series["stim_to_isr"].tag_in_window.sum()) > 0
    assert len(exact.series["tag_period"]) == 39 and exact.latency("tag_period").tolist()[:2] == [50_000, 50_000]
    assert agg.duplicates[("all", "spare_reply")] > 0 and agg.misses[("all", "spare_reply")] >= 400
    for kind in exact.kinds:
        for subset in ("all", "untagged"):
            sel = exact.subset(kind, subset)
            lat = sel.values
            v = lat[lat != analysis.MISSING]
            st = agg.distribution(subset, kind).figures_mu()
            ref = exact_figures(v)
            key = (subset, kind)
            assert (agg.starts[key], agg.misses[key], agg.duplicates[key]) == \
                (len(sel), len(lat) - len(v), int(sel.duplicates.sum())), key
            assert (st["count"], st["min"], st["max"]) == (ref["count"], ref["min"], ref["max"])
            if ref["count"]:
                assert st["mean"] == pytest.approx(ref["mean"], rel=1e-12)
                assert st["std"] == pytest.approx(ref["std"], rel=1e-9)
            else:
                assert st["mean"] is ref["mean"] is None
            h = HdrHistogram(1, 1 << 40, 3)
            h.record(v)
            assert np.array_equal(agg.hist[key].counts, h.counts)
            for label, exact_value in ref["percentiles"].items():
                if exact_value is None:
                    assert st["percentiles"][label] is None
                else:       # HDR's highest equivalent value: within 10^-3 above the exact one
                    assert exact_value <= st["percentiles"][label] <= exact_value * 1.001 + 1
        lat = exact.latency(kind)
        i = int(np.argmax(lat))
        assert (agg.worst[kind]["index"], agg.worst[kind]["mu"]) == (i, int(lat[i])), kind


def test_chunks_out_of_order_are_refused():
    agg = StreamingAggregator(ROLES)
    agg.feed(np.array([100, 200]), np.array([0, 0]), np.array([1, 0]))
    with pytest.raises(ValueError, match="tick order"):
        agg.feed(np.array([150]), np.array([2]), np.array([1]))


def test_report_hdr_mode(tmp_path, capsys):
    path, _, _ = random_run(tmp_path / "r", n=3000, seed=3, miss_every=100)
    assert main(["report", str(path), "--hdr", "--format", "json"]) == 0
    hdr_doc = json.loads(capsys.readouterr().out)
    assert main(["report", str(path), "--format", "json"]) == 0
    exact_doc = json.loads(capsys.readouterr().out)
    a, b = hdr_doc["runs"][0], exact_doc["runs"][0]
    assert a["statistics"].startswith("hdr") and b["statistics"] == "exact"
    ra, rb = a["subsets"]["all"]["stim_to_isr"], b["subsets"]["all"]["stim_to_isr"]
    assert (ra["count"], ra["misses"], ra["mu"]["min"], ra["mu"]["max"]) == \
        (rb["count"], rb["misses"], rb["mu"]["min"], rb["mu"]["max"])
    assert a["worst"] == b["worst"]


def test_report_hdr_refuses_plots(tmp_path, capsys):
    path = write_run(tmp_path / "r", dut_edges([1000], [50], [140]))
    with pytest.raises(SystemExit) as e:
        main(["report", str(path), "--hdr", "--html", str(tmp_path / "x.html")])
    assert e.value.code == 2 and "cannot draw plots" in capsys.readouterr().err


def test_a_response_sooner_than_the_offset_is_in_the_streamed_figures():
    """With a calibrated offset of 100 ticks, a response 60 ticks after its stimulus is -40: the
    streamed histograms hold it (they count value + offset), as the exact figures do; before, HDR
    refused it as out of range and the streamed p50 and min disagreed with the exact ones."""
    edges = dut_edges([1000, 2000, 3000, 4000], [60, 150, 160, 170], [None] * 4)
    t, c, lv = (np.array(x) for x in zip(*edges))
    exact = analysis.measure(t, c.astype(np.uint8), lv.astype(np.uint8), ROLES, offset_mu=100)
    agg = StreamingAggregator(ROLES, offset_mu=100)
    agg.feed(t, c.astype(np.uint8), lv.astype(np.uint8))
    agg.finish(int(t[-1]) + 1)
    ref = exact_figures(exact.series["stim_to_isr"].valid())
    st = agg.distribution("all", "stim_to_isr").figures_mu()
    assert ref["min"] == st["min"] == -40 and ref["median"] == st["median"] == 50.0
    assert st["percentiles"]["p50"] == ref["percentiles"]["p50"] == 50
    assert agg.hist[("all", "stim_to_isr")].out_of_range == 0


def _collector():
    got = {}

    def on_samples(kind, series):
        got.setdefault(kind, []).append(series)
    return got, on_samples


def _joined(parts):
    return {name: np.concatenate([getattr(s, name) for s in parts])
            for name in ("start_mu", "window_end", "values", "duplicates", "tag_in_window", "unknown")}


@pytest.mark.parametrize("definitions", [(), MEASURES[1:]])
@pytest.mark.parametrize("chunk", [1, 5, 333])
def test_heartbeats_close_windows_as_the_exact_pairing(chunk, definitions):
    """advance(T) after every chunk (T: the next chunk's first tick, as a heartbeat says): every
    sample, of every kind, equals the whole run's pairing, in order and to the tick (defined
    measures keep their own cut, which holds the built-in kinds' too)."""
    rng = np.random.default_rng(5)
    stim = (np.cumsum(rng.integers(4000, 6000, 300)) + 1000).tolist()
    isr = [None if i % 11 == 0 else int(v) for i, v in enumerate(rng.integers(40, 2500, 300))]
    task = [None if i % 13 == 0 else int(v) for i, v in enumerate(rng.integers(100, 3500, 300))]
    tags = [(int(s) + 30, int(s) + 4500) for s in stim[40:300:37]]
    edges = dut_edges(stim, isr, task, tag_spans=tags, isr_width=1200)   # some past the deadline
    t, c, lv = (np.array(x) for x in zip(*edges))
    c, lv = c.astype(np.uint8), lv.astype(np.uint8)
    end = int(t[-1]) + 1
    measures = [parse_measure(m, ROLES) for m in definitions]
    exact = analysis.measure(t, c, lv, ROLES, measures, deadline=3000, end_mu=end)
    got, on_samples = _collector()
    agg = StreamingAggregator(ROLES, deadline=3000, measures=measures, on_samples=on_samples)
    for i in range(0, len(t), chunk):
        agg.feed(t[i:i + chunk], c[i:i + chunk], lv[i:i + chunk])
        agg.advance(int(t[i + chunk]) if i + chunk < len(t) else end)
    agg.finish(end)
    for kind in exact.kinds:
        mine, ref = _joined(got[kind]), exact.series[kind]
        for name, values in mine.items():
            assert np.array_equal(values, getattr(ref, name)), (kind, name)
    assert agg.stimuli == exact.stimuli == 300 and agg.tagged["stim_to_isr"] > 0


def test_a_heartbeat_judges_a_quiet_duts_last_stimuli():
    """Three stimuli, then silence: the feed alone keeps the last two (a window needs the next
    stimulus); a heartbeat past their deadlines judges them, exactly. One whose ISR pulse has not
    fallen yet waits for its fall (its duration is still open), and so do the ones after it."""
    edges = dut_edges([1000, 5000, 9000], [60, 70, 80], [150, None, 170], isr_width=20)
    t, c, lv = (np.array(x) for x in zip(*edges))
    c, lv = c.astype(np.uint8), lv.astype(np.uint8)
    got, on_samples = _collector()
    agg = StreamingAggregator(ROLES, deadline=2000, on_samples=on_samples)
    agg.feed(t, c, lv)
    assert _joined(got["stim_to_isr"])["values"].tolist() == [60]
    agg.advance(10_999)             # the last window ends at 11,000: not closed yet
    assert _joined(got["stim_to_isr"])["values"].tolist() == [60, 70]
    agg.advance(11_000)
    isr = _joined(got["stim_to_isr"])
    assert isr["start_mu"].tolist() == [1000, 5000, 9000] and isr["values"].tolist() == [60, 70, 80]
    assert _joined(got["stim_to_task"])["values"].tolist() == [150, analysis.MISSING, 170]
    assert _joined(got["isr_duration"])["values"].tolist() == [20, 20, 20]
    assert agg.stimuli == 3 and agg.misses[("all", "stim_to_task")] == 1
    # An ISR pulse still high at a heartbeat past its window's end: that sample waits for its fall.
    edges = dut_edges([1000, 5000, 9000], [60, 70, 80], [150, None, 170], isr_width=3000)
    t, c, lv = (np.array(x) for x in zip(*edges))
    c, lv = c.astype(np.uint8), lv.astype(np.uint8)
    got, on_samples = _collector()
    agg = StreamingAggregator(ROLES, deadline=2000, on_samples=on_samples)
    keep = t < 11_500               # the third ISR pulse falls at 12,080
    agg.feed(t[keep], c[keep], lv[keep])
    agg.advance(11_500)
    assert _joined(got["isr_duration"])["start_mu"].tolist() == [1000, 5000]
    agg.feed(t[~keep], c[~keep], lv[~keep])
    agg.advance(20_000)
    assert _joined(got["isr_duration"])["values"].tolist() == [3000, 3000, 3000]
    with pytest.raises(ValueError, match="advance"):
        agg.feed(np.array([19_999]), np.array([2], np.uint8), np.array([1], np.uint8))


@pytest.mark.parametrize("chunk", [7, 10**6])
def test_late_tasks_are_counted_once(chunk):
    """Task rises before their window's ISR rise (late tasks): the streamed count equals the exact
    one at any chunk size (before, the tail's stimuli were counted again at every feed)."""
    edges = dut_edges([1000 * (i + 1) for i in range(50)], [100] * 50, [50] * 50)
    t, c, lv = (np.array(x) for x in zip(*edges))
    c, lv = c.astype(np.uint8), lv.astype(np.uint8)
    exact = analysis.measure(t, c, lv, ROLES, end_mu=int(t[-1]) + 1)
    agg = StreamingAggregator(ROLES)
    for i in range(0, len(t), chunk):
        agg.feed(t[i:i + chunk], c[i:i + chunk], lv[i:i + chunk])
    agg.finish(int(t[-1]) + 1)
    assert agg.task_before_isr == exact.task_before_isr == 50


class _Sink:
    """A run writer that keeps what the capture's stream gives it."""

    def __init__(self):
        self.samples_of, self.closed = {}, []

    def edges(self, ticks, chans, levels):
        pass

    def later(self, job):   # the run writer's thread: here at once
        job()

    def gaps(self, closed):
        self.closed += closed

    def samples(self, kind, series):
        self.samples_of.setdefault(kind, []).extend(series.start_mu.tolist())


def test_the_capture_advances_on_a_heartbeat_only_with_no_gap_open():
    """stream._Stream: a heartbeat (complete_before) closes the windows it ends; while frames lost
    on the link wait for the next record (the gap's end), it does nothing."""
    from hilat.acquisition.stream import _Stream

    edges = dut_edges([1000, 5000, 9000], [60, 70, 80], [150, 160, 170])
    t, c, lv = (np.array(x) for x in zip(*edges))
    masks, levels = (1 << c).astype(np.uint16), (lv << c).astype(np.uint16)
    sink = _Sink()
    stream = _Stream(sink, ROLES, [], True, 2000, 0, (0, 1), 50e6)
    stream(t.astype(np.uint64), masks, levels, np.zeros(len(t), np.uint16))
    assert sink.samples_of["stim_to_isr"] == [1000]
    stream.on_gap(1)                  # frames lost after the last record: a gap open
    stream.advance(12_000)
    assert sink.samples_of["stim_to_isr"] == [1000] and stream.advanced is None
    stream(np.array([20_000], np.uint64), np.array([1 << 2], np.uint16), np.array([1 << 2], np.uint16),
           np.zeros(1, np.uint16))    # the next record closes the gap [9201, 20000) on every channel
    assert [g[:2] for g in sink.closed] == [(9201, 20_000)]
    stream.advance(20_001)
    assert sink.samples_of["stim_to_isr"] == [1000, 5000, 9000] and stream.advanced == 20_001
