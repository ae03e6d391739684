"""No figure from a gap: windows that touch a hole in the record stream are unknown, never a miss, a
latency or a duplicate; a stimulus lost in a gap merges no windows; the streaming aggregator agrees
with the exact pairing wherever the chunk boundaries and the gaps fall."""

import numpy as np
import pytest
from hilat import analysis
from hilat.analysis.measures import parse
from hilat.statistics.distribution import exact_figures, summarize
from hilat.statistics.streaming import StreamingAggregator
from synth import ROLES, TS_HZ, dut_edges

M = analysis.MISSING
ALL = analysis.ALL_CHANNELS
STIM = [1000, 6000, 11000, 16000, 21000]
ISR = [50, None, 75, 400, 60]
TASK = [140, None, None, 500, 150]
STIM_CH, ISR_CH, TASK_CH, SPARE_CH, TAG_CH = 0, 2, 3, 4, 5


def arrays(edges):
    e = np.array(edges, dtype=np.int64)
    return e[:, 0], e[:, 1].astype(np.uint8), e[:, 2].astype(np.uint8)


def without(edges, lo, hi, channels):
    """The edges, those on ``channels`` in [lo, hi) dropped (as the gateware drops them)."""
    return [e for e in edges if not (lo <= e[0] < hi and e[1] in channels)]


def test_gaps_merge_and_touch():
    gaps = analysis.Gaps.of([(100, 200, 1 << ISR_CH), (150, 300, 1 << TASK_CH), (500, 600, ALL)])
    s, e = gaps.on(1 << ISR_CH | 1 << TASK_CH)
    assert s.tolist() == [100, 500] and e.tolist() == [300, 600]
    assert gaps.on(1 << SPARE_CH)[0].tolist() == [500]
    touched = gaps.touches(1 << ISR_CH, [0, 0, 200, 199, 600, 450], [100, 101, 500, 200, 700, 501])
    assert touched.tolist() == [False, True, False, True, False, True]


def test_response_lost_in_a_gap_is_unknown_not_a_miss():
    # Stimulus 2's ISR pulse (11075..11095) fell into a gap on the ISR channel.
    edges = without(dut_edges(STIM, ISR, TASK), 11050, 11100, {ISR_CH})
    plain = analysis.pair(*arrays(edges), ROLES)
    assert plain.isr_latency.tolist() == [50, M, M, 400, 60]      # without the gap: a false miss
    gaps = analysis.Gaps.of([(11050, 11100, 1 << ISR_CH)])
    p = analysis.pair(*arrays(edges), ROLES, gaps=gaps)
    assert p.isr_latency.tolist() == [50, M, M, 400, 60]
    assert p.unknown_of("stim_to_isr").tolist() == [0, 0, 1, 0, 0]
    for kind in ("stim_to_task", "isr_to_task", "isr_duration"):   # they depend on the ISR's rise too
        assert p.unknown_of(kind).tolist() == [0, 0, 1, 0, 0], kind
    assert p.unknown_of("task_duration").tolist() == [0, 0, 1, 0, 0]
    s = summarize(analysis.measure(*arrays(edges), ROLES, gaps=gaps))
    row = s["stim_to_isr"]
    assert (row["starts"], row["count"], row["misses"], row["unknown"]) == (5, 3, 1, 1)
    assert (row["min"], row["max"]) == (50, 400)


def test_gap_on_a_channel_no_kind_depends_on_changes_nothing():
    edges = dut_edges(STIM, ISR, TASK)
    p = analysis.pair(*arrays(edges), ROLES, gaps=analysis.Gaps.of([(0, 30000, 1 << SPARE_CH)]))
    assert p.isr_latency.tolist() == [50, M, 75, 400, 60]
    assert all(not p.unknown_of(k).any() for k, _ in analysis.KINDS)


def test_stimulus_lost_in_a_gap_merges_no_windows():
    # Stimulus 3 (16000) was dropped with everything else in [15990, 16600): without the gap its
    # window would merge into stimulus 2's, which would take stimulus 3's ISR (16400) as its own.
    edges = without(dut_edges(STIM, ISR, TASK), 15990, 16600, {STIM_CH, ISR_CH, TASK_CH})
    edges = edges + [(16450, ISR_CH, 1), (16470, ISR_CH, 0)]      # a response after the gap
    edges.sort()
    merged = analysis.pair(*arrays(edges), ROLES)
    assert merged.isr_latency.tolist()[2:] == [75, 60] and merged.isr_duplicates[2] == 1
    p = analysis.pair(*arrays(edges), ROLES, gaps=analysis.Gaps.of([(15990, 16600, 1 << STIM_CH | 1 << ISR_CH
                                                                      | 1 << TASK_CH)]))
    assert p.stim_mu.tolist() == [1000, 6000, 11000, 21000]
    assert p.isr_latency.tolist() == [50, M, M, 60] and p.unknown_of("stim_to_isr").tolist() == [0, 0, 1, 0]
    assert p.isr_duplicates.tolist() == [0, 0, 0, 0]


def test_capture_cut_short_leaves_the_last_window_unknown():
    edges = dut_edges(STIM, ISR, TASK)
    last = max(e[0] for e in edges)
    gaps = analysis.Gaps.of([(last + 1, analysis.GAP_OPEN_END, ALL)])
    p = analysis.pair(*arrays(edges), ROLES, gaps=gaps)
    assert p.unknown_of("stim_to_isr").tolist() == [0, 0, 0, 0, 1]
    assert p.isr_latency.tolist() == [50, M, 75, 400, M]
    # With a deadline every window closed before the end: all judged.
    p = analysis.pair(*arrays(edges), ROLES, deadline=170, gaps=gaps)
    assert p.unknown_of("stim_to_isr").tolist() == [0] * 5 and p.isr_latency.tolist() == [50, M, 75, M, 60]


def test_tag_hidden_by_a_gap_is_unknown_only_without_tagged_samples():
    edges = dut_edges(STIM, ISR, TASK, tag_spans=[(900, 1500), (11900, 12500)])
    gaps = analysis.Gaps.of([(5000, 7000, 1 << TAG_CH)])   # the tag might have risen in stimulus 1's window
    found = analysis.measure(*arrays(edges), ROLES, gaps=gaps)
    s = found.series["stim_to_isr"]
    assert s.tag_in_window.tolist() == [1, analysis.TAG_UNKNOWN, 1, 0, 0] and s.n_unknown == 0
    untagged = found.subset("stim_to_isr", "untagged")
    assert untagged.start_mu.tolist() == [6000, 16000, 21000] and untagged.unknown.tolist() == [1, 0, 0]
    assert untagged.n_misses == 0 and untagged.valid().tolist() == [400, 60]


def test_task_rise_before_its_windows_isr_is_a_late_task_not_a_response():
    # Stimulus 1's task runs late, into stimulus 2's window, before stimulus 2's ISR: it must not
    # give a negative ISR -> task time.
    edges = dut_edges([1000, 2000], [50, 300], [None, 400]) + [(2100, TASK_CH, 1), (2130, TASK_CH, 0)]
    edges.sort()
    p = analysis.pair(*arrays(edges), ROLES)
    assert p.isr_to_task.tolist() == [M, 100] and p.task_latency.tolist() == [M, 400]
    assert p.task_before_isr.tolist() == [0, 1] and p.task_duplicates.tolist() == [0, 0]
    assert (p.isr_to_task[p.isr_to_task != M] >= 0).all()


def test_measures_are_unknown_across_gaps():
    edges = dut_edges(STIM, ISR, TASK)
    isr_width = parse("w=width:isr", ROLES, TS_HZ)
    stim_period = parse("per=period:stim0", ROLES, TS_HZ)
    reply = parse("r=stim0..in0", ROLES, TS_HZ)
    gaps = analysis.Gaps.of([(11080, 11090, 1 << ISR_CH)])
    found = analysis.measure(*arrays(edges), ROLES, [isr_width, stim_period, reply], gaps=gaps)
    assert found.series["w"].unknown.tolist() == [0, 1, 0, 0] and found.series["w"].n_misses == 0
    assert found.series["per"].unknown.tolist() == [0, 0, 0, 0]
    assert found.series["r"].unknown.tolist() == [0, 0, 1, 0, 0] and found.series["r"].n_misses == 1
    found = analysis.measure(*arrays(edges), ROLES, [stim_period],
                             gaps=analysis.Gaps.of([(7000, 7001, 1 << STIM_CH)]))
    assert found.series["per"].unknown.tolist() == [0, 1, 0, 0]


def lossy_edges(seed, n=1500):
    """Random stimuli with ISR/task responses, misses, duplicates and tags; then 40 gaps, each on
    some channels, whose edges are dropped."""
    rng = np.random.default_rng(seed)
    stim = np.cumsum(rng.integers(900, 1300, n)) + 1000
    isr = [None if rng.random() < 0.03 else int(rng.integers(20, 600)) for _ in range(n)]
    task = [None if i is None or rng.random() < 0.03 else i + int(rng.integers(10, 800)) for i in isr]
    tags = [(int(s) - 50, int(s) + int(rng.integers(100, 3000))) for s in stim[::37]]
    extra = [int(s) + 700 for s in stim[::23]]
    edges = dut_edges(stim.tolist(), isr, task, tag_spans=tags, extra_isr=extra)
    edges += [e for s in stim[::3] for e in ((int(s) + 90, SPARE_CH, 1), (int(s) + 95, SPARE_CH, 0))]
    edges.sort()
    gaps = []
    for _ in range(40):
        lo = int(rng.integers(1000, int(stim[-1])))
        hi = lo + int(rng.integers(1, 4000))
        mask = ALL if rng.random() < 0.2 else int(sum(1 << c for c in rng.choice(
            [STIM_CH, ISR_CH, TASK_CH, SPARE_CH, TAG_CH], int(rng.integers(1, 3)), replace=False)))
        gaps.append((lo, hi, mask))
        edges = [e for e in edges if not (lo <= e[0] < hi and (mask >> e[1]) & 1)]
    gaps.sort()
    return edges, gaps


MEASURES = ["spare_reply=stim0..in2@4000", "tag_period=period:in3", "isr_width=width:isr"]


@pytest.mark.parametrize("chunk", [1, 7, 500, 10**9])
def test_streaming_equals_exact_across_gaps(chunk):
    edges, gap_list = lossy_edges(5)
    t, c, lv = arrays(edges)
    measures = [parse(m, ROLES, TS_HZ) for m in MEASURES]
    gaps = analysis.Gaps.of(gap_list)
    end = int(t[-1]) + 1
    exact = analysis.measure(t, c, lv, ROLES, measures, end_mu=end, gaps=gaps)
    agg = StreamingAggregator(ROLES, measures=measures)
    pending = list(gap_list)
    for i in range(0, len(t), chunk):
        # A gap is known before any edge after its start (the capture's order).
        while pending and pending[0][0] <= t[min(i + chunk, len(t)) - 1]:
            agg.add_gap(*pending.pop(0))
        agg.feed(t[i:i + chunk], c[i:i + chunk], lv[i:i + chunk])
    for g in pending:
        agg.add_gap(*g)
    agg.finish(end)
    assert agg.stimuli == exact.stimuli
    assert exact.series["stim_to_isr"].n_unknown > 20, "the gaps must hide stimuli"
    for kind in exact.kinds:
        for subset in ("all", "untagged"):
            sel = exact.subset(kind, subset)
            key = (subset, kind)
            assert (agg.starts[key], agg.misses[key], agg.unknown[key], agg.duplicates[key]) == \
                (len(sel), sel.n_misses, sel.n_unknown, int(sel.duplicates.sum())), key
            ref = exact_figures(sel.valid())
            st = agg.distribution(subset, kind).figures_mu()
            assert (st["count"], st["min"], st["max"]) == (ref["count"], ref["min"], ref["max"]), key


def test_without_an_isr_in_the_window_no_task_is_this_stimulus():
    # Stimulus 0's task comes after stimulus 1 (whose ISR was missed): it is stimulus 0's late task,
    # a miss for both (outside 0's window, before no ISR of 1's), counted as a late task.
    edges = dut_edges([1000, 2000], [50, None], [1200, None])
    p = analysis.pair(*arrays(edges), ROLES)
    assert p.task_latency.tolist() == [M, M] and p.task_before_isr.tolist() == [0, 1]
    assert p.isr_to_task.tolist() == [M, M]
