"""Statistics against hand-computed values and numpy; the percentile support rule; Faller's axis."""

import math

import numpy as np
import pytest
from hilat.reports.plots import faller_forward, faller_inverse, histogram_bins, percentile_curve
from hilat.statistics.distribution import exact_figures
from hilat.statistics.percentiles import PERCENTILES, exact_percentile, percentile_label, samples_needed


def test_faller_row_hand_computed():
    st = exact_figures(np.array([4, 1, 100, 3, 2]))
    assert (st["count"], st["min"], st["median"], st["max"]) == (5, 1, 3.0, 100)
    assert st["mean"] == 22.0
    # sample std: deviations -21 -20 -19 -18 78 -> (441+400+361+324+6084)/4 = 1902.5
    assert st["std"] == pytest.approx(math.sqrt(1902.5), rel=1e-12)
    assert st["percentiles"]["p50"] == 3          # 3rd of 5 sorted: 1 2 [3] 4 100
    assert st["percentiles"]["p90"] is None        # needs 10 samples


def test_even_count_median_is_p50_the_lower_middle():
    # One median everywhere: the inverted CDF, as every percentile (never the mean of the middle two).
    st = exact_figures(np.array([10, 20, 30, 40]))
    assert st["median"] == 20.0 == st["percentiles"]["p50"]


def test_single_sample_and_empty():
    st = exact_figures(np.array([7]))
    assert (st["min"], st["max"], st["mean"], st["std"]) == (7, 7, 7.0, 0.0)
    empty = exact_figures(np.array([], dtype=np.int64))
    assert empty["count"] == 0 and empty["min"] is None and all(v is None for v in empty["percentiles"].values())


@pytest.mark.parametrize("n", [10, 999, 1000, 12345, 200_000])
def test_percentiles_equal_numpy_inverted_cdf(n):
    rng = np.random.default_rng(n)
    values = (rng.lognormal(4, 1, n) + (rng.random(n) < 1e-3) * 1e5).astype(np.int64)
    st = exact_figures(values)
    for p in PERCENTILES:
        label = percentile_label(p)
        if n >= samples_needed(p):
            assert st["percentiles"][label] == int(np.quantile(values, p, method="inverted_cdf")), label
        else:
            assert st["percentiles"][label] is None, label


def test_percentile_support_thresholds():
    assert [samples_needed(p) for p in PERCENTILES] == [2, 10, 100, 1000, 10_000, 100_000,
                                                                          1_000_000]
    assert [percentile_label(p) for p in PERCENTILES] == [
        "p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999"]
    below = exact_figures(np.arange(999))
    at = exact_figures(np.arange(1000))
    assert below["percentiles"]["p99.9"] is None and at["percentiles"]["p99.9"] == 998


def test_percentile_curve_matches_exact_percentile():
    s = np.sort(np.random.default_rng(3).integers(0, 10_000, 5000))
    ps = np.array([0.001, 0.5, 0.9, 0.99, 0.9999, 1.0])
    assert percentile_curve(s, ps).tolist() == [exact_percentile(s, p) for p in ps]
    assert percentile_curve(s, [1.0])[0] == s[-1]


def test_faller_axis_transform():
    lam = 10.0
    assert faller_forward(0.0) == 0.0 and faller_forward(1.0) == pytest.approx(1.0)
    # The median sits near the left edge, the tail is stretched: (e^5-1)/(e^10-1).
    assert faller_forward(0.5) == pytest.approx(math.expm1(5) / math.expm1(10), rel=1e-12)
    assert faller_forward(0.5) < 0.01 and faller_forward(0.99) > 0.9
    p = np.linspace(0, 1, 101)
    x = faller_forward(p, lam)
    assert np.all(np.diff(x) > 0)
    np.testing.assert_allclose(faller_inverse(x, lam), p, atol=1e-12)


def test_histogram_bins_whole_ticks():
    assert histogram_bins(5, 9).tolist() == [5, 6, 7, 8, 9, 10]
    edges = histogram_bins(1, 10**6)
    assert edges[0] == 1 and edges[-1] == 10**6 + 1 and np.all(np.diff(edges) > 0)
    assert len(edges) <= 121


def test_counting_and_sorting_paths_agree():
    rng = np.random.default_rng(12)
    narrow = rng.integers(100, 5000, 50_000)                       # counted
    wide = np.append(narrow, [10**12])                              # sorted (range too wide to count)
    for values in (narrow, wide):
        st = exact_figures(values)
        assert st["median"] == np.median(values) and st["mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert st["std"] == pytest.approx(values.std(ddof=1), rel=1e-9)
        for p in PERCENTILES[:5]:
            assert st["percentiles"][percentile_label(p)] == np.quantile(values, p, method="inverted_cdf")
