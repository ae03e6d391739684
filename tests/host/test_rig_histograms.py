"""hilat.engine: the rig's bins into the host's histograms, bin for bin.

The frames come from a reference worked out without hilat.engine (tests/host/engine_reference.py):
synthetic edges paired by hilat.analysis.pair, the values binned by HdrHistogram, ENGINE_BINS entries
in an order the engine may send them, over the whole wire path (encode, FrameDecoder)."""

import numpy as np
import pytest
from engine_reference import (
    engine_entries,
    engine_stats,
    histogram,
    interval_counts,
    outliers,
    reference_samples,
    roles,
    synthetic_edges,
)
from hilat import engine
from hilat.hdr import HdrHistogram, read_hlog
from hilat.link import protocol as p
from hilat.rundir.layout import OUTLIER_DTYPE, OUTLIERS_MAGIC
from hilat.rundir.stores import iter_store
from hilat.rundir.writer import RunWriter
from hilat.statistics.distribution import Distribution
from hilat.statistics.run_statistics import RunStatistics
from test_hdr import JAVA_PERCENTILES, needs_java, parse_java_read, run_java

SHIFT = 16
TS_HZ = 100e6


def wire(messages, seq0=0):
    """The messages through the wire: encoded, then decoded by the rig -> host FrameDecoder."""
    dec = p.FrameDecoder()
    frames = dec.feed(b"".join(m.encode((seq0 + k) % 65536) for k, m in enumerate(messages)))
    assert dec.frames_ok == len(messages) and dec.malformed == 0
    return [f.msg for f in frames]


def run_engine(samples, *, seed=0, run_dir=None, origin_tick=0, stats=True, shift=SHIFT, **kw):
    """RigHistograms fed with the samples' ENGINE_BINS (and ENGINE_STATS), finished; and the
    intervals it handed out."""
    seen = []
    writer = RunWriter(run_dir) if run_dir is not None else None
    files = dict(on_log_lines=writer.rig_intervals, on_outliers=writer.outliers) if writer else {}
    rig = engine.RigHistograms(shift, TS_HZ, origin_tick=origin_tick, on_interval=seen.append, **files, **kw)
    messages = p.pack_engine_bins(engine_entries(samples, shift, seed))
    if stats:
        messages.append(engine_stats(samples))
    for msg in wire(messages):
        rig.feed(msg)
    rig.finish()
    if writer is not None:
        writer.close()
    return rig, seen


@pytest.fixture(scope="module")
def samples():
    r = roles()
    edges = synthetic_edges(r, 4000, seed=3, overflow_windows=3, below_offset=40)
    return reference_samples(edges, r, offset=25, end_tick=int(edges[0][-1]) + 1)


# ---- the layout ------------------------------------------------------------------------------------------


def test_engine_layout_is_hdrhistograms():
    h = HdrHistogram(**engine.ENGINE_HDR)
    assert h.counts_len == 2304 == engine.HDR_BINS and engine.OVERFLOW_BIN == 2304
    # docs/engine.md's formula, for every value the histogram holds.
    for lo in range(0, 1 << 24, 1 << 21):
        v = np.arange(lo, lo + (1 << 21))
        assert np.array_equal(engine.bin_of(v), h.counts_array_index(v))
    assert engine.bin_of([255, 256, 511, 512, (1 << 24) - 1]).tolist() == [255, 256, 383, 384, 2303]
    assert engine.bin_of([1 << 24, 1 << 40, 2**62]).tolist() == [engine.OVERFLOW_BIN] * 3


def test_percentiles_are_hdrhistograms_and_none_in_the_overflow():
    rng = np.random.default_rng(1)
    values = rng.integers(0, 1 << 24, 20_000) >> rng.integers(0, 24, 20_000)
    h = engine.engine_histogram()
    h.record(values)
    counts = np.append(h.counts, 0)
    ps = [0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0]
    assert engine.engine_percentiles(counts, ps) == h.percentiles(ps).tolist()
    # 1% beyond 2**24: p99.9 falls there, p50 does not move its rank.
    counts[engine.OVERFLOW_BIN] = 202
    total = 20_202
    got = engine.engine_percentiles(counts, [50.0, 98.0, 99.9, 100.0])
    ranks = np.cumsum(h.counts)
    assert got[0] == h.highest_equivalent_value(h.value_from_index(int(np.searchsorted(ranks, total // 2 + 1))))
    assert got[1] is not None and got[2:] == [None, None]
    assert engine.engine_percentiles(np.zeros(2305, np.int64), [50.0]) == [None]


# ---- bins to histograms ----------------------------------------------------------------------------------


def test_bins_are_the_reference_histograms_to_the_bin(samples):
    rig, _ = run_engine(samples)
    for k, kind in enumerate(engine.KINDS):
        for subset in ("all", "untagged", "tagged"):
            expected, overflow = histogram(samples, k, subset)
            counts = rig.counts(kind, subset)
            assert np.array_equal(counts[:2304], expected.counts), (kind, subset)
            assert counts[engine.OVERFLOW_BIN] == overflow
            got = rig.histogram(kind, subset)
            assert got == expected and got.out_of_range_above == overflow
    # The pattern has what the test is about: overflow, tagged and untagged, below range, misses.
    assert rig.counts("stim_to_isr")[engine.OVERFLOW_BIN] >= 2
    assert rig.counts("stim_to_isr", "tagged").sum() > 100 and rig.counts("stim_to_isr", "untagged").sum() > 1000
    assert rig.problems() == []


def test_intervals_complete_in_order_with_their_own_bins(samples):
    entries = engine_entries(samples, SHIFT)
    # Some kind's bins of an interval arrive after another kind's close of it (spills).
    closed, late = set(), 0
    for e in entries:
        if e.type == p.ENGINE_ENTRY_CLOSE:
            closed.add((e.kind, e.interval))
        elif any((k, e.interval) in closed for k in range(3) if k != e.kind):
            late += 1
    assert late > 10
    rig, seen = run_engine(samples)
    expected = interval_counts(samples, SHIFT)
    assert [iv.number for iv in seen] == sorted(expected) and all(iv.complete for iv in seen)
    for iv in seen:
        assert np.array_equal(iv.counts, expected[iv.number])
        assert (iv.start_tick, iv.end_tick) == (iv.number << SHIFT, (iv.number + 1) << SHIFT)
    assert rig.intervals_complete == len(expected) and rig.intervals_incomplete == 0


def test_interval_numbers_unwrap_across_2_to_the_32():
    r = roles()
    base = ((1 << 32) - 3) << SHIFT  # the interval number's low 32 bits wrap 3 intervals in
    edges = synthetic_edges(r, 1500, seed=5, base_tick=base)
    s = reference_samples(edges, r, end_tick=int(edges[0][-1]) + 1)
    assert (s.start >> SHIFT).max() > 1 << 32
    rig, seen = run_engine(s, origin_tick=base)
    assert [iv.number for iv in seen] == sorted(interval_counts(s, SHIFT))
    assert rig.problems() == []


def test_exact_figures_and_checks(samples):
    rig, _ = run_engine(samples)
    k = 0
    binned = samples.binned[k]
    values = samples.value[k][binned]
    assert rig.exact("stim_to_isr") == {"count": len(values), "min": int(values.min()), "max": int(values.max()),
                                        "sum": int(values.sum()), "misses": int((~samples.present[k]).sum()),
                                        "duplicates": int(samples.duplicates[k].sum()),
                                        "below": int((samples.present[k] & (samples.value[k] < 0)).sum())}
    tagged = samples.value[k][binned & samples.tagged]
    assert rig.exact("stim_to_isr", "tagged") == {"count": len(tagged), "min": int(tagged.min()),
                                                  "max": int(tagged.max()), "sum": int(tagged.sum())}
    # Stats that disagree with the bins: a problem, not an exception.
    stats = engine_stats(samples)
    bad = stats.kinds[1]._replace(untagged_count=stats.kinds[1].untagged_count + 1)
    stats.kinds[1] = bad
    rig.feed(stats)
    n = int((samples.binned[1] & ~samples.tagged).sum())
    assert f"stim_to_task untagged: {n} samples in the bins, {n + 1} counted by the engine" in rig.problems()
    assert f"stim_to_task: {len(samples.start) + 1} samples binned, missed or below range, of " \
           f"{len(samples.start)} windows" in rig.problems()


def test_no_stats_is_said():
    rig = engine.RigHistograms(SHIFT, TS_HZ).finish()
    assert rig.problems() == ["no ENGINE_STATS: the bins are not checked against the engine's exact counts"]
    assert rig.exact("stim_to_isr") is None


def test_anomalies_are_counted_not_raised():
    rig = engine.RigHistograms(SHIFT, TS_HZ)
    B, C = p.ENGINE_ENTRY_BIN, p.ENGINE_ENTRY_CLOSE
    rig.feed(p.EngineBins([(B, 0, 0, 7, 10, 2), (C, 0, 0, 7, 0, 0), (B, 0, 0, 7, 11, 1),  # a bin after its close
                           (C, 0, 0, 7, 0, 0),                                            # twice
                           (C, 1, 0, 7, 0, 0), (C, 2, 0, 7, 0, 0),                        # 7 complete
                           (B, 1, 1, 7, 12, 4),                                           # after 7 is out
                           (C, 1, 0, 6, 0, 0),                                            # close of an old one
                           (B, 2, 0, 8, 5, (1 << 35)),                                    # no 35-bit count
                           (B, 2, 0, 9, 5, 3), (C, 0, 0, 9, 0, 0)]))                     # 9 never closed by all
    assert (rig.late_bins, rig.duplicate_closes, rig.bad_counts) == (2, 2, 1)
    rig.finish()
    assert rig.intervals_complete == 1 and rig.intervals_incomplete == 1
    # Every bin the rig sent with a valid count is in the totals.
    assert rig.counts("stim_to_isr")[[10, 11]].tolist() == [2, 1]
    assert rig.counts("stim_to_task", "tagged")[12] == 4 and rig.counts("isr_to_task")[5] == 3
    problems = rig.problems()
    assert "1 engine intervals were never closed by every kind (frames lost?): their bins are in the totals" in problems
    assert "2 bins came after their interval's close (kept in the totals, missing from rig.hlog)" in problems
    assert "2 duplicate interval closes" in problems
    assert "1 bins with a count beyond the engine's 35-bit counter (dropped)" in problems


def test_open_intervals_are_bounded():
    rig = engine.RigHistograms(SHIFT, TS_HZ)
    for n in range(1000):  # intervals whose closes never come
        rig.feed(p.EngineBins([(p.ENGINE_ENTRY_BIN, 0, 0, n, 1, 1), (p.ENGINE_ENTRY_CLOSE, 1, 0, n, 0, 0)]))
        assert len(rig._open) <= rig.MAX_OPEN
    rig.finish()
    assert rig.intervals_incomplete == 1000 and rig.counts("stim_to_isr")[1] == 1000


def test_engine_losses_are_problems(samples):
    rig, _ = run_engine(samples)
    stats = engine_stats(samples)
    rig.feed(p.EngineStats(stats.command_seq, stats.state, stats.samples, 3, 4, 5, stats.trigger_delay,
                           stats.min_spacing, stats.interval_shift_min, 2000, stats.kinds))
    problems = rig.problems()
    assert problems[:4] == ["LOST: 3 samples lost in the engine (not binned)",
                            "LOST: 4 bins lost in the engine (bins FIFO full)",
                            "LOST: 5 outlier records lost in the engine",
                            "the engine has 2000 bins per histogram, this host 2305: the bins may be misread"]


# ---- files -----------------------------------------------------------------------------------------------


def test_rig_hlog_holds_every_interval_in_ns(samples, tmp_path):
    rig, seen = run_engine(samples, run_dir=tmp_path, start_time=1_700_000_000.0)
    log = read_hlog(tmp_path / "hlog" / "rig.hlog")
    tick_ns = 1e9 / TS_HZ
    expected = []
    for iv in seen:
        for k, kind in enumerate(engine.KINDS):
            for tag, counts in ((kind, iv.counts[k].sum(axis=0)), (f"{kind}.tagged", iv.counts[k, 1])):
                if counts.any():
                    expected.append((iv.number, tag, counts))
    assert [x.tag for x in log.intervals] == [tag for _, tag, _ in expected]
    for line, (number, _tag, counts) in zip(log.intervals, expected):
        assert line.start_s == pytest.approx(((number << SHIFT) - 0) / TS_HZ, abs=1e-3)
        h = line.histogram
        assert h.total_count == counts[:2304].sum() and h.out_of_range_above == counts[2304]
        # Each bin at its highest equivalent value in ns: the log's percentiles are the bins'.
        layout = engine.engine_histogram()
        nz = np.flatnonzero(counts[:2304])
        ns = np.round(layout.highest_equivalent_value(layout.value_from_index(nz)) * tick_ns).astype(np.int64)
        ref = HdrHistogram(1, 3_600_000_000_000, 3)
        for v, c in zip(ns.tolist(), counts[nz].tolist()):
            ref.record_value(max(v, 1), c)
        assert np.array_equal(h.counts, ref.counts)
    # Over the run, the log's histograms of a kind add up to the totals.
    merged = log.merged("stim_to_isr")
    assert merged.total_count == rig.counts("stim_to_isr")[:2304].sum()
    assert merged.out_of_range_above == rig.counts("stim_to_isr")[2304] >= 2


@needs_java
def test_java_hdrhistogram_reads_rig_hlog(samples, tmp_path):
    run_engine(samples, run_dir=tmp_path, start_time=1_700_000_000.0)
    path = tmp_path / "hlog" / "rig.hlog"
    ours = read_hlog(path).intervals
    seen = parse_java_read(run_java("read", path, *JAVA_PERCENTILES))
    assert len(seen) == len(ours) > 20
    for java, line in zip(seen, ours, strict=True):
        h = line.histogram
        assert java["tag"] == line.tag
        assert (java["total"], java["min"], java["max"]) == (h.total_count, h.min, h.max)
        assert java["buckets"] == list(h)
        assert java["pct"] == h.percentiles(JAVA_PERCENTILES).tolist()


def test_outliers_are_stored(samples, tmp_path):
    records = outliers(samples, [500, None, None])
    assert 20 < len(records)
    writer = RunWriter(tmp_path)
    rig = engine.RigHistograms(SHIFT, TS_HZ, on_outliers=writer.outliers)
    for msg in wire(p.pack_engine_outliers(records)):
        rig.feed(msg)
    rig.finish()
    writer.close()
    stored = np.concatenate(list(iter_store(tmp_path / "outliers.bin", OUTLIERS_MAGIC, OUTLIER_DTYPE, 1 << 20)))
    assert rig.outliers == len(records)
    assert stored["start_tick"].tolist() == [r.start for r in records]
    assert stored["values"].tolist() == [[r.stim_to_isr, r.stim_to_task, r.isr_to_task] for r in records]
    assert stored["flags"].tolist() == [r.flags for r in records]
    assert (stored["values"][:, 0] > 500).all()


# ---- configuration ---------------------------------------------------------------------------------------


def test_config_from_roles():
    cfg = engine.EngineConfig.from_roles(roles(), deadline=5000, offset=21, interval_shift=20,
                                         thresholds=(10_000, None, None))
    assert cfg.message() == p.EngineConfig(p.ENGINE_ENABLE, 0, 1, 2, 1, 3, 1, 5, 1, 5000, 21, 20,
                                           [10_000, p.ENGINE_NEVER, p.ENGINE_NEVER], 0, 0, 0)
    assert cfg.interval_ticks == 1 << 20
    # An inverted stimulus and an active-low ISR: their active edges are falls.
    low = engine.EngineConfig.from_roles(roles(active_low=["in0"], inverted=True), raw=True,
                                         trigger=engine.Trigger(4000, "task", width=10, on_late=True))
    # No deadline given: the longest the engine takes at this interval shift.
    assert low.message() == p.EngineConfig(p.ENGINE_ENABLE | p.ENGINE_RAW | p.ENGINE_TRIGGER_ON_LATE, 0, 0, 2, 0,
                                           3, 1, 5, 1, 2**24 - 55608, 0, 24, [p.ENGINE_NEVER] * 3,
                                           p.ENGINE_TRIGGER_TASK, 4000, 10)


def test_deadline_limit_is_the_gateware_s():
    """The host's copy of the engine's sweep time and deadline limit: the gateware's own."""
    from gateware import engine as gateware_engine

    assert engine.SWEEP_TICKS == gateware_engine.SWEEP_TICKS == 27804
    assert engine.INTERVAL_SHIFT_MAX == gateware_engine.INTERVAL_SHIFT_MAX
    for shift in range(gateware_engine.INTERVAL_SHIFT_MIN, gateware_engine.INTERVAL_SHIFT_MAX + 1):
        assert engine.deadline_limit(shift) == gateware_engine.deadline_limit(shift) == 2**shift - 55608
    assert engine.shift_for_deadline(engine.deadline_limit(20)) == 20
    assert engine.shift_for_deadline(engine.deadline_limit(20) + 1) == 21
    assert engine.shift_for_deadline(2**31) is None


def test_config_deadline_within_the_limit():
    for shift in (16, 20, 31):
        limit = engine.deadline_limit(shift)
        assert engine.EngineConfig.from_roles(roles(), interval_shift=shift).message().deadline == limit
        assert engine.EngineConfig.from_roles(roles(), interval_shift=shift, deadline=limit).message().deadline == limit
        for bad in (0, limit + 1):
            with pytest.raises(ValueError, match=f"engine deadline {bad} ticks out of 1..{limit}"):
                engine.EngineConfig.from_roles(roles(), interval_shift=shift, deadline=bad).message()


def test_config_refuses_what_the_wire_or_the_engine_cannot_take():
    from hilat import analysis

    no_tag = analysis.Channels.from_table([("s", "stimulus"), ("i", "isr"), ("t", "task")])
    assert engine.EngineConfig.from_roles(no_tag).message().tag_channel == p.ENGINE_NO_TAG
    with pytest.raises(ValueError, match="no task channel"):
        engine.EngineConfig.from_roles(analysis.Channels.from_table([("s", "stimulus"), ("i", "isr")]))
    with pytest.raises(ValueError, match="engine offset 70000 out of 0..65535"):
        engine.EngineConfig.from_roles(roles(), offset=70_000).message()
    with pytest.raises(ValueError, match="thresholds"):
        engine.EngineConfig.from_roles(roles(), thresholds=(1, 2)).message()
    with pytest.raises(ValueError, match="trigger"):
        engine.EngineConfig.from_roles(roles(), trigger=engine.Trigger(100, "dma")).message()
    stats = p.EngineStats(0, 0, 0, 0, 0, 0, 6, 8, 16, 2305, [p.EngineKindStats(*[0] * 11)] * 3)
    with pytest.raises(ValueError, match="deadline 4 ticks: the engine takes 8 at least"):
        engine.EngineConfig.from_roles(roles(), deadline=4).check_limits(stats)
    with pytest.raises(ValueError, match="interval shift 12: the engine takes 16 at least"):
        engine.EngineConfig.from_roles(roles(), interval_shift=12).check_limits(stats)
    engine.EngineConfig.from_roles(roles(), deadline=8, interval_shift=16).check_limits(stats)


def test_hdr_add_counts_adds_at_the_index():
    h = engine.engine_histogram()
    h.add_counts([300, 5, 300], [2, 1, 3])
    ref = engine.engine_histogram()
    ref.record_value(5)
    ref.record_value(h.value_from_index(300), 5)
    assert h == ref and (h.min_recorded, h.max_recorded) == (5, h.highest_equivalent_value(h.value_from_index(300)))
    h.add_counts([7, 8], [0, 0])
    assert h == ref
    for index, counts in (([2304], [1]), ([-1], [1]), ([1], [-1]), ([1, 2], [1])):
        with pytest.raises(ValueError):
            h.add_counts(index, counts)
    h.count_out_of_range(above=4)
    assert (h.out_of_range_above, h.out_of_range_below, h.total_count) == (4, 0, 6)


def test_rig_distribution_in_the_units_of_a_sub_tick_run(samples):
    """On a rig that samples its inputs 4 times a tick the run's unit is a quarter tick: the engine's
    whole ticks come out 4 times larger, so the report converts every figure with one tick_ns."""
    rig, _ = run_engine(samples)
    # The worst samples as the engine's outlier records would give them (value, stimulus tick, tagged).
    rig.worst = [(rig.exact(kind)["max"], 1000 + k, 0) for k, kind in enumerate(engine.KINDS)]
    ticks, quarters = RunStatistics._rig_worst(rig, 1), RunStatistics._rig_worst(rig, 4)
    assert ticks.keys() == quarters.keys() == set(engine.KINDS)
    for kind in ("stim_to_isr", "isr_to_task"):
        a = Distribution.rig(kind, 1.0, rig.counts(kind), rig.exact(kind)).figures_mu()
        b = Distribution.rig(kind, 1.0, rig.counts(kind), rig.exact(kind), units_per_tick=4).figures_mu()
        assert b["count"] == a["count"] > 0
        for key in ("min", "median", "max", "mean", "std"):
            assert b[key] == (None if a[key] is None else pytest.approx(4 * a[key]))
        assert {k: v and 4 * v for k, v in a["percentiles"].items()} == b["percentiles"]
        assert quarters[kind]["mu"] == 4 * ticks[kind]["mu"]
        assert quarters[kind]["start_mu"] == 4 * ticks[kind]["start_mu"]
