"""The code-density estimate of the sub-tick bins (hilat.calibration.resolution) against bins whose
widths are known: by hand, and from edges at uniformly random phases through known bin edges.
The gateware's own non-uniform bins are recovered in tests/gateware/test_sampler.py."""

import numpy as np
import pytest
from hilat.calibration import resolution as res

TICK_S = 1 / 140e6


def test_equal_bins_by_hand():
    r = res.code_density([1000, 1000, 1000, 1000], TICK_S)
    assert r.widths_ticks == (0.25, 0.25, 0.25, 0.25)
    assert r.centres_ticks == (0.125, 0.375, 0.625, 0.875)
    assert r.dnl == (0, 0, 0, 0) and r.inl == (0, 0, 0, 0)
    assert r.effective_resolution_s == pytest.approx(TICK_S / 4, rel=1e-12)
    assert r.edges == 4000 and r.nominal_s == TICK_S / 4


def test_unequal_bins_by_hand():
    # Bin 1 is 1.5 nominal bins wide, bin 2 half: upper edges at 0.25, 0.625, 0.75, 1.
    r = res.code_density([2500, 3750, 1250, 2500], TICK_S)
    assert r.widths_ticks == pytest.approx((0.25, 0.375, 0.125, 0.25))
    assert r.centres_ticks == pytest.approx((0.125, 0.4375, 0.6875, 0.875))
    assert r.dnl == pytest.approx((0, 0.5, -0.5, 0))
    assert r.inl == pytest.approx((0, 0.5, 0, 0))
    assert r.effective_resolution_s == pytest.approx(np.sqrt(2 * 0.25**3 + 0.375**3 + 0.125**3) * TICK_S)
    assert r.effective_resolution_s > TICK_S / 4      # unequal bins resolve worse than equal ones


@pytest.mark.parametrize("upper", [(0.31, 0.5, 0.68, 1.0), (0.5, 1.0), (0.2, 0.3, 0.45, 0.5, 0.7, 0.8, 0.85, 1.0)])
def test_random_phases_recover_the_widths(upper):
    """Edges at uniformly random phases, binned by known upper edges: every width within 4 of its
    stated standard deviations, and the deviations as small as N promises."""
    rng = np.random.default_rng(16)
    phases = rng.random(200_000)
    fractions = np.searchsorted(np.asarray(upper), phases, side="left")
    S = len(upper)
    r = res.code_density(res.fraction_counts(fractions, S), TICK_S)
    truth = np.diff(np.concatenate(([0.0], upper)))
    sigma = np.asarray(r.width_sigma_ticks)
    assert np.all(np.abs(np.asarray(r.widths_ticks) - truth) <= 4 * sigma)
    assert np.all(sigma < 0.5 / np.sqrt(200_000) + 1e-12)
    # The upper edges follow from the widths (the last one at the next clock edge).
    upper_measured = np.asarray(r.centres_ticks) + np.asarray(r.widths_ticks) / 2
    assert upper_measured[-1] == pytest.approx(1.0)
    assert np.all(np.abs(upper_measured - upper) <= 4 * np.sqrt(np.cumsum(sigma[::-1] ** 2)[::-1]) + 1e-12)


def test_bad_input():
    with pytest.raises(res.TooFewEdges, match="999 edges"):
        res.code_density([250, 250, 250, 249], TICK_S)
    with pytest.raises(ValueError, match="2, 4 or 8"):
        res.code_density([1000] * 3, TICK_S)
    with pytest.raises(ValueError, match="0 .. 3"):
        res.fraction_counts([0, 4], 4)
