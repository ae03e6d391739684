"""Pairing on synthetic edges with known answers: latencies, misses, duplicates, tags, durations,
deadlines and the calibrated offset."""

import dataclasses

import numpy as np
from hilat import analysis
from hilat.statistics.distribution import summarize
from synth import ROLES, dut_edges

M = analysis.MISSING


def arrays(edges):
    e = np.array(edges, dtype=np.int64)
    return e[:, 0], e[:, 1].astype(np.uint8), e[:, 2].astype(np.uint8)


STIM = [1000, 6000, 11000, 16000, 21000]
ISR = [50, None, 75, 400, 60]
TASK = [140, None, None, 500, 150]


def test_latencies_misses_durations():
    p = analysis.pair(*arrays(dut_edges(STIM, ISR, TASK)), ROLES)
    assert p.stim_mu.tolist() == STIM
    assert p.isr_latency.tolist() == [50, M, 75, 400, 60]
    assert p.task_latency.tolist() == [140, M, M, 500, 150]
    assert p.isr_to_task.tolist() == [90, M, M, 100, 90]
    assert p.isr_duration.tolist() == [20, M, 20, 20, 20]
    assert p.task_duration.tolist() == [30, M, M, 30, 30]
    s = summarize(analysis.measure(*arrays(dut_edges(STIM, ISR, TASK)), ROLES))
    assert (s["stim_to_isr"]["count"], s["stim_to_isr"]["misses"]) == (4, 1)
    assert (s["stim_to_task"]["count"], s["stim_to_task"]["misses"]) == (3, 2)
    assert s["stim_to_isr"]["min"] == 50 and s["stim_to_isr"]["max"] == 400
    # [50, 60, 75, 400]: the median is p50, the lower middle (inverted CDF), never a mean of two
    assert s["stim_to_isr"]["median"] == 60.0


def test_only_misses():
    s = summarize(analysis.measure(*arrays(dut_edges(STIM, [None] * 5, [None] * 5)), ROLES))
    assert s["stim_to_isr"]["count"] == 0 and s["stim_to_isr"]["misses"] == 5 and s["stim_to_isr"]["min"] is None


def test_duplicates_counted_first_used():
    edges = dut_edges(STIM, ISR, TASK, extra_isr=[1200, 1300, 16900])
    p = analysis.pair(*arrays(edges), ROLES)
    assert p.isr_latency.tolist() == [50, M, 75, 400, 60]
    assert p.isr_duplicates.tolist() == [2, 0, 0, 1, 0]
    s = summarize(analysis.measure(*arrays(edges), ROLES))
    assert (s["stim_to_isr"]["duplicates"], s["stim_to_task"]["duplicates"]) == (3, 0)


def test_deadline_turns_late_responses_into_misses():
    p = analysis.pair(*arrays(dut_edges(STIM, ISR, TASK)), ROLES, deadline=300)
    assert p.isr_latency.tolist() == [50, M, 75, M, 60]
    assert p.task_latency.tolist() == [140, M, M, M, 150]


def test_tag_at_stimulus_and_in_window():
    # Tag high across stimulus 0; rising inside the window of stimulus 2 only; rising exactly at
    # 21000, which counts for stimulus 4, not 3 (a window ends before the next stimulus).
    edges = dut_edges(STIM, ISR, TASK, tag_spans=[(900, 1100), (11500, 11600), (21000, 21010)])
    p = analysis.pair(*arrays(edges), ROLES)
    assert p.tag_at_stimulus.tolist() == [1, 0, 0, 0, 1]
    assert p.tag_in_window.tolist() == [1, 0, 1, 0, 1]
    u = p.untagged()
    assert u.stim_mu.tolist() == [6000, 16000] and u.isr_latency.tolist() == [M, 400]
    assert summarize(analysis.measure(*arrays(edges), ROLES), exclude_tagged=True)[
        "stim_to_isr"]["count"] == 1


def test_tag_before_its_first_edge_is_the_other_level():
    # An active-low tag idling low: active until its first edge (a rise, to inactive), so the
    # windows before it are tagged; an active-high tag whose first edge is a fall likewise.
    low = dataclasses.replace(ROLES, active_low=(ROLES.tag,))
    edges = dut_edges(STIM, ISR, TASK) + [(10500, ROLES.tag, 1), (17000, ROLES.tag, 0), (17010, ROLES.tag, 1)]
    p = analysis.pair(*arrays(edges), low)
    assert p.tag_at_stimulus.tolist() == [1, 1, 0, 0, 0]
    assert p.tag_in_window.tolist() == [1, 1, 0, 1, 0]
    falls_first = dut_edges(STIM, ISR, TASK) + [(10500, ROLES.tag, 0)]
    assert analysis.pair(*arrays(falls_first), ROLES).tag_in_window.tolist() == [1, 1, 0, 0, 0]
    # Without tag edges the tag counts as inactive (its level is not in the edges).
    assert analysis.pair(*arrays(dut_edges(STIM, ISR, TASK)), low).tag_in_window.tolist() == [0] * 5


def test_offset_subtracted_from_stimulus_responses_only():
    p = analysis.pair(*arrays(dut_edges(STIM, ISR, TASK)), ROLES, offset_mu=7)
    assert p.isr_latency.tolist() == [43, M, 68, 393, 53]
    assert p.task_latency.tolist() == [133, M, M, 493, 143]
    assert p.isr_to_task.tolist() == [90, M, M, 100, 90]
    assert p.isr_duration.tolist() == [20, M, 20, 20, 20]


def test_inverted_stimulus_and_unsorted_input():
    edges = [(t, ch, 1 - lv if ch == 0 else lv) for t, ch, lv in dut_edges(STIM, ISR, TASK)]
    rng = np.random.default_rng(0)
    shuffled = [edges[i] for i in rng.permutation(len(edges))]
    p = analysis.pair(*arrays(shuffled), dataclasses.replace(ROLES, stimulus_active=0))
    assert p.isr_latency.tolist() == [50, M, 75, 400, 60]


def test_edges_from_records_vectorised_equals_bitwise_loop():
    rng = np.random.default_rng(5)
    recs = [(int(t), int(m), int(lv)) for t, m, lv in
            zip(np.cumsum(rng.integers(1, 50, 3000)), rng.integers(1, 256, 3000), rng.integers(0, 256, 3000))]
    expect = [(t, ch, lv >> ch & 1) for t, m, lv in recs for ch in range(8) if m >> ch & 1]
    ticks, chans, levels = analysis.edges_from_records(recs)
    assert list(zip(ticks.tolist(), chans.tolist(), levels.tolist())) == expect
    # 16-bit masks (protocol v2, more than 8 channels).
    recs = [(int(t), int(m), int(lv)) for t, m, lv in
            zip(np.cumsum(rng.integers(1, 50, 3000)), rng.integers(1, 1 << 16, 3000), rng.integers(0, 1 << 16, 3000))]
    expect = [(t, ch, lv >> ch & 1) for t, m, lv in recs for ch in range(16) if m >> ch & 1]
    ticks, chans, levels = analysis.edges_from_records(recs)
    assert list(zip(ticks.tolist(), chans.tolist(), levels.tolist())) == expect
    empty = analysis.edges_from_records([])
    assert all(len(a) == 0 for a in empty)


def test_pulse_widths_per_channel():
    edges = dut_edges(STIM, ISR, TASK) + [(30000, 2, 1)]     # an ISR pulse still open at the end
    from hilat.analysis import measures

    series = analysis.measure(*arrays(sorted(edges)), ROLES, [measures.parse("w=width:in0", ROLES)],
                              builtin=False).series["w"]
    starts, widths = series.start_mu, series.values
    assert starts.tolist() == [1050, 11075, 16400, 21060] and widths.tolist() == [20] * 4
