"""The compiled kernels (hilat.kernels) give exactly what their numpy references give."""

import numpy as np
import pytest
from hilat import analysis, hdr, kernels

pytestmark = pytest.mark.skipif(not kernels.available(), reason="numba not installed")


@pytest.fixture
def numpy_only(monkeypatch):
    """Run a block with the kernels switched off (the numpy code the callers fall back to)."""
    def run(fn, *args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(kernels, "_KERNELS", False)
            return fn(*args, **kwargs)
    return run


def test_edges_from_records_equal_the_table(numpy_only):
    rng = np.random.default_rng(7)
    n = 5000
    ticks = np.cumsum(rng.integers(0, 4, n)).astype(np.uint64) + np.uint64(2**62)
    masks = rng.integers(0, 1 << 16, n).astype(np.uint16)
    masks[::5] = 0          # a record without a mask bit gives no edge
    masks[1::5] = 0xFFFF    # all 16 channels
    masks[2::5] = 1 << 15   # only the last
    levels = rng.integers(0, 1 << 16, n).astype(np.uint16)
    got = analysis.edges_from_records((ticks, masks, levels))
    want = numpy_only(analysis.edges_from_records, (ticks, masks, levels))
    assert len(want[0]) == int(sum(bin(int(m)).count("1") for m in masks))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)
    empty = analysis.edges_from_records((ticks[:0], masks[:0], levels[:0]))
    assert [len(a) for a in empty] == [0, 0, 0]


def test_edges_with_subticks_equal_the_table(numpy_only):
    # S = 1 (fractions unused) goes through the kernel; S = 4 keeps the table: both equal it.
    rng = np.random.default_rng(3)
    ticks = np.arange(1000, dtype=np.uint64) * np.uint64(3)
    masks = rng.integers(1, 1 << 6, 1000).astype(np.uint16)
    levels = rng.integers(0, 1 << 6, 1000).astype(np.uint16)
    fractions = rng.integers(0, 1 << 12, 1000).astype(np.uint16)
    for sub in (analysis.Subticks.nominal(1, first_input=2), analysis.Subticks.nominal(4, first_input=2)):
        got = analysis.edges_from_records((ticks, masks, levels, fractions), subticks=sub)
        want = numpy_only(analysis.edges_from_records, (ticks, masks, levels, fractions), subticks=sub)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and np.array_equal(g, w)
    # Without fractions (S = 4): the kernel, placed on the tick boundaries.
    sub = analysis.Subticks.nominal(4, first_input=2)
    got = analysis.edges_from_records((ticks, masks, levels), subticks=sub)
    want = numpy_only(analysis.edges_from_records, (ticks, masks, levels), subticks=sub)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_equals_numpy(side):
    rng = np.random.default_rng(11)
    haystack = np.sort(rng.integers(0, 300, 2000))          # many ties
    for needles in (np.sort(rng.integers(-10, 310, 1500)),   # sorted (the pairing's case)
                    rng.integers(-10, 310, 1500),             # unsorted: each step back searched again
                    np.zeros(0, np.int64), np.full(7, 150)):
        needles = needles.astype(np.int64)
        assert np.array_equal(kernels.searchsorted(haystack, needles, side), np.searchsorted(haystack, needles, side))
    assert np.array_equal(kernels.searchsorted(haystack[:0], needles, side), np.zeros(len(needles), np.intp))


def test_hdr_dense_values_count_as_bucket_indices():
    # Values spanning fewer ticks than there are of them are counted per value, then per bucket:
    # the counts equal one bucket index per sample, the out-of-range ones counted apart.
    rng = np.random.default_rng(5)
    for lo, hi in ((0, 40), (12, 44), (10**6, 10**6 + 900), (2**40 - 50, 2**40 + 50), (-20, 30)):
        v = rng.integers(lo, hi, 10000)
        h = hdr.HdrHistogram(1, 2**40, 3)
        h.record(v)
        inside = v[(v >= 0) & (v <= h.highest_recordable)]
        want = np.bincount(h.counts_array_index(inside), minlength=h.counts_len)
        assert np.array_equal(h._counts, want)
        assert h.total_count == len(inside) and h.out_of_range == len(v) - len(inside)


@pytest.mark.parametrize("n_channels,fraction_bits", [(6, 0), (6, 4), (6, 32), (10, 64), (16, 64)])
def test_the_stream_decoders_compiled_pass_equals_its_numpy_one(numpy_only, n_channels, fraction_bits):
    # Full datagrams with a lost one between them, sub-tick fractions, TDC codes (the simulator's 4
    # inputs: 32 bits; 8 inputs x 8 bits: 64, in 4-word records; 16 channels: 6 words, the kind bit
    # in the second half) or none, and a batch with an overflow marker (the compiled pass gives it
    # back to the numpy one): the same batches, and the records encoded.
    from hilat.link import udp

    layout = udp.Layout(n_channels, fraction_bits, udp.record_words_for(n_channels, fraction_bits))
    full = udp.max_records(layout.record_words)
    rng = np.random.default_rng(5)
    n = 3000
    ticks = (1 << 40) + np.cumsum(rng.integers(1, 1 << 20, n)).astype(np.uint64)
    channels, levels = rng.integers(1, 1 << n_channels, n), rng.integers(0, 1 << n_channels, n)
    fractions = (rng.integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)
                 if fraction_bits == 64 else rng.integers(0, 1 << fraction_bits, n).astype(np.uint64))
    fractions[:3] = [0, (1 << fraction_bits) - 1, 1 << max(fraction_bits - 1, 0)]
    if not fraction_bits:
        fractions = None
    kinds = np.zeros(n, np.uint8)
    kinds[2500] = 1
    datagrams = udp.encode_stream(layout, ticks, channels, levels, 7, kinds=kinds, fractions=fractions)
    del datagrams[3]

    def decode():
        decoder = udp.StreamDecoder(layout, session=7)
        return [decoder.feed(udp.slots_of(datagrams[:10])), decoder.feed(udp.slots_of(datagrams[10:])),
                decoder.flush()], decoder.counters()

    got, got_counts = decode()
    want, want_counts = numpy_only(decode)
    assert got_counts == want_counts and got_counts["records_lost"] == full and got_counts["overflow_markers"] == 1
    for g, w in zip(got, want):
        for field in ("ticks", "channels", "levels", "fractions"):
            a, b = getattr(g, field), getattr(w, field)
            assert a.dtype == b.dtype and np.array_equal(a, b), field
        assert g.marks == w.marks
    assert sum(len(b.ticks) for b in got) == n - full - 1
    kept = np.ones(n, bool)
    kept[3 * full:4 * full] = False   # the lost datagram
    kept[2500] = False                # the overflow marker
    fields = ("ticks", "channels", "levels", "fractions")
    decoded = [np.concatenate([getattr(b, field) for b in got]) for field in fields]
    sent = [ticks, channels, levels, fractions if fraction_bits else np.zeros(n, np.uint64)]
    for field, a, b in zip(fields, decoded, sent):
        assert np.array_equal(a, np.asarray(b)[kept].astype(a.dtype)), field


def test_edges_with_offsets_say_where_each_records_edges_start():
    rng = np.random.default_rng(9)
    n = 2000
    ticks = np.cumsum(rng.integers(1, 9, n)).astype(np.uint64)
    masks = rng.integers(0, 1 << 6, n).astype(np.uint16)
    levels = rng.integers(0, 1 << 6, n).astype(np.uint16)
    *edges, first_edge = kernels.edges_with_offsets(ticks, masks, levels)
    want = analysis.edges_from_records((ticks, masks, levels))
    for g, w in zip(edges, want):
        assert np.array_equal(g, w)
    per_record = np.array([bin(int(m)).count("1") for m in masks])
    assert np.array_equal(first_edge, np.concatenate(([0], np.cumsum(per_record))))
    # A piece of records, r0..r1, is the edges first_edge[r0]..first_edge[r1].
    r0, r1 = 700, 1300
    piece = analysis.edges_from_records((ticks[r0:r1], masks[r0:r1], levels[r0:r1]))
    assert np.array_equal(edges[0][first_edge[r0]:first_edge[r1]], piece[0])


def test_edge_groups_equal_the_sorted_ones(numpy_only):
    rng = np.random.default_rng(13)
    n = 4000
    ticks = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)
    chans, levels = rng.integers(0, 16, n).astype(np.uint8), rng.integers(0, 2, n).astype(np.uint8)
    got = analysis.EdgeGroups(ticks, chans, levels)
    want = numpy_only(analysis.EdgeGroups, ticks, chans, levels)
    for channel in range(16):
        for level in (0, 1):
            g, w = got(channel, level), want(channel, level)
            assert g.dtype == w.dtype and np.array_equal(g, w)
    assert sum(len(got(c, lv)) for c in range(16) for lv in (0, 1)) == n


def test_pairing_equals_its_numpy_searches(numpy_only):
    # Windows with no response, several rises (duplicates), pulses still high at the end, and a
    # deadline cutting windows: the compiled window search gives the numpy searches' pairing.
    rng = np.random.default_rng(17)
    roles = analysis.Channels(stimulus=0, isr=1, task=2)
    stim = np.arange(1, 3001) * 1000
    edges = []
    for s in stim.tolist():
        edges += [(s, 0, 1), (s + 10, 0, 0)]
        for _ in range(int(rng.integers(0, 3))):            # 0, 1 or 2 ISR pulses
            r = s + int(rng.integers(1, 900))
            edges += [(r, 1, 1), (r + int(rng.integers(1, 300)), 1, 0)]
        if rng.random() < 0.8:
            r = s + int(rng.integers(50, 990))
            edges += [(r, 2, 1)] + ([(r + 20, 2, 0)] if s < stim[-1] else [])
    edges.sort()
    t, c, lv = (np.array(x) for x in zip(*edges))
    for deadline in (None, 600):
        got = analysis.pair(t, c, lv, roles, deadline=deadline)
        want = numpy_only(analysis.pair, t, c, lv, roles, deadline=deadline)
        for field in vars(got):
            g, w = getattr(got, field), getattr(want, field)
            if isinstance(g, np.ndarray):
                assert np.array_equal(g, w), field
        assert (got.isr_duplicates > 0).any() and (got.isr_latency == analysis.MISSING).any()


def test_moments_equal_numpys(numpy_only):
    from hilat.statistics.streaming import _Exact

    rng = np.random.default_rng(19)
    chunks = [rng.integers(-50, 1 << 30, k).astype(np.int64) for k in (1, 7, 5000, 300)]
    got, want = _Exact(), numpy_only(_Exact)
    for v in chunks:
        got.add(v)
        numpy_only(want.add, v)
    assert (got.n, got.min, got.max) == (want.n, want.min, want.max)
    assert got.mean == pytest.approx(want.mean, rel=1e-12) and got.std == pytest.approx(want.std, rel=1e-12)


def test_hdr_counts_equal_the_numpy_index(numpy_only):
    rng = np.random.default_rng(23)
    cases = ((1 << 40, rng.integers(0, 1 << 40, 20000)), (3_600_000_000_000, rng.integers(0, 3000, 5000)),
             (1 << 20, np.array([0, 1, 5, 1 << 20])))
    for highest, values in cases:
        got, want = hdr.HdrHistogram(1, highest, 3), hdr.HdrHistogram(1, highest, 3)
        got.record(values)
        numpy_only(want.record, values)
        assert np.array_equal(got._counts, want._counts)
        for figure in ("total_count", "min_recorded", "max_recorded"):
            assert getattr(got, figure) == getattr(want, figure), figure
    # Out of range: the numpy path counts it apart, as before.
    h = hdr.HdrHistogram(1, 1000, 3)
    assert h.record(np.array([5, -1, 10**9])) == 2 and h.total_count == 1
