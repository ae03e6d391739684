"""The one percentile definition of every figure hilat prints (docs/analysis.md, "Statistics").

A percentile is HdrHistogram's and numpy's "inverted CDF": the smallest sample with at least that
share of the samples at or below it, always a measured value, never an interpolation. The median is
p50 by that definition (the lower middle of an even count). A percentile is shown only when the count
supports it: at least 1/(1-p) samples, so that at least one sample lies above it.
"""

import numpy as np

# Percentiles the reports show (as fractions).
PERCENTILES = [0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999, 0.999999]


def percentile_label(p):
    """0.999 -> 'p99.9', 0.5 -> 'p50'."""
    text = f"{p * 100:.6f}".rstrip("0").rstrip(".")
    return "p" + text


def samples_needed(p):
    """Smallest sample count that supports percentile p (a fraction): at least one sample above it."""
    return int(np.ceil(round(1.0 / (1.0 - p), 6)))


def percentile_rank(n, p):
    """1-based rank of percentile p (a fraction, or an array of them) among n samples: ceil(p n), at
    least 1 and at most n (the 1e-9 keeps p n that floats put a hair above a whole number on it)."""
    rank = np.clip(np.ceil(np.asarray(p, dtype=np.float64) * n - 1e-9).astype(np.int64), 1, n)
    return int(rank) if rank.ndim == 0 else rank


def exact_percentile(sorted_values, p):
    """The smallest sample v with at least a fraction p of the samples <= v. ``p`` may be an array of
    fractions (one sample each)."""
    return sorted_values[percentile_rank(len(sorted_values), p) - 1]
