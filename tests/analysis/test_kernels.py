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
