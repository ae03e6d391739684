"""The one interval-log writer (hilat.reports.interval_log): samples in start order, one line per
interval and tag, read back with our .hlog reader (Java's reads the same files: test_hdr.py)."""

import numpy as np
import pytest
from hilat import hdr
from hilat.reports.interval_log import IntervalLog
from hilat.statistics.streaming import SampleOutOfRange

MU_HZ = 1000.0          # 1 mu = 1 ms: an interval of 1 s is 1000 mu


def read(path):
    return hdr.read_hlog(path).intervals


def test_lines_per_interval_and_tag_with_the_values_recorded(tmp_path):
    log = IntervalLog(tmp_path / "a.hlog", MU_HZ, 1.0, start_time=0.0)
    log.samples("isr", np.array([0, 10, 999, 1000, 2500]), np.array([5, 6, 7, 8, 9]))
    log.samples("task", np.array([20, 2100]), np.array([50, 60]))
    log.close(end_mu=2600)
    lines = read(tmp_path / "a.hlog")
    got = sorted((iv.tag, round(iv.start_s, 6), iv.histogram.total_count) for iv in lines)
    assert got == [("isr", 0.0, 3), ("isr", 1.0, 1), ("isr", 2.0, 1), ("task", 0.0, 1), ("task", 2.0, 1)]
    last = [iv for iv in lines if iv.tag == "isr" and iv.start_s == 2.0][0]
    assert last.length_s == pytest.approx(0.6) and last.histogram.max == 9
    assert log.intervals == 5


def test_contiguous_writes_the_empty_intervals_and_negative_values_are_counted_not_clamped(tmp_path):
    log = IntervalLog(tmp_path / "b.hlog", MU_HZ, 1.0, start_time=0.0, tagged=False, contiguous=True)
    log.begin(0)
    log.samples("isr", np.array([100, 3500, 3600]), np.array([4, -3, 7]))
    log.close()
    lines = read(tmp_path / "b.hlog")
    assert [(iv.tag, iv.start_s, iv.histogram.total_count) for iv in lines] == [
        (None, 0.0, 1), (None, 1.0, 0), (None, 2.0, 0), (None, 3.0, 1)]
    assert log.below_zero == 1 and lines[-1].histogram.min == 7


def test_cut_writes_what_is_open_and_a_value_beyond_the_range_is_an_error(tmp_path):
    log = IntervalLog(tmp_path / "c.hlog", MU_HZ, 10.0, start_time=0.0)
    log.samples("isr", np.array([0, 5]), np.array([1, 2]))
    log.cut(end_mu=6)
    assert [(iv.start_s, iv.length_s) for iv in read(tmp_path / "c.hlog")] == [(0.0, pytest.approx(0.006))]
    with pytest.raises(SampleOutOfRange, match="beyond the interval log"):
        log.samples("isr", np.array([7]), np.array([log.highest_ns * 4]))
    log.close()
