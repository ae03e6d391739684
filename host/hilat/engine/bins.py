"""The engine's bins, host side: the HdrHistogram layout whose counts-array index the rig computes
(``bin_of``), and what the bins alone say (percentiles, std, histograms in ticks or ns)."""

from __future__ import annotations

import numpy as np

from hilat.hdr import HdrHistogram
from hilat.link import protocol as p

# The histogram the rig indexes into: 1 tick .. 2**24 - 1 ticks, 2 significant digits.
ENGINE_HDR = dict(lowest=1, highest=2**24 - 1, significant_figures=2)
OVERFLOW_FROM = ENGINE_HDR["highest"] + 1  # ticks: the overflow bin's values, and above
KINDS = p.ENGINE_KINDS
TAGS = ("untagged", "tagged")
HDR_BINS = p.ENGINE_HDR_BINS
OVERFLOW_BIN = p.ENGINE_OVERFLOW_BIN
BINS = p.ENGINE_BINS_PER_HISTOGRAM
MAX_COUNT = (1 << 35) - 1  # a bank word's counter: a larger count is no count the rig can send
# One interval's sweep of a bank takes at most SWEEP_TICKS: its 2 x 2305 words and the 16 + 8
# entries that may wait ahead of the close, one every 2 sys cycles, at up to 3 ticks per sys cycle
# (gateware.engine's SWEEP_TICKS, written out so that the host needs no gateware).
SWEEP_TICKS = (4610 + 16 + 8) * 2 * 3
INTERVAL_SHIFT_MAX = 31  # the engine's interval shift field: 16 + 4 bits


def engine_histogram() -> HdrHistogram:
    """An empty histogram in the rig's layout (ticks)."""
    return HdrHistogram(**ENGINE_HDR)


_LAYOUT = engine_histogram()
if _LAYOUT.counts_len != HDR_BINS:  # the rig's bin numbers are this layout's indices, or nothing adds up
    raise ImportError(f"HdrHistogram({ENGINE_HDR}) has {_LAYOUT.counts_len} bins, the engine {HDR_BINS}")


def bin_of(values) -> np.ndarray:
    """The rig's bin of each value (ticks >= 0), by docs/engine.md's formula:
    bucket = max(bit_length(v | 255) - 8, 0), bin = (bucket << 7) + (v >> bucket); OVERFLOW_BIN
    for v >= 2**24."""
    v = np.asarray(values, dtype=np.int64)
    inside = np.minimum(v, OVERFLOW_FROM - 1)
    bit_length = np.frexp((inside | 255).astype(np.float64))[1]  # exact: below 2**53
    bucket = np.maximum(bit_length - 8, 0)
    return np.where(v >= OVERFLOW_FROM, OVERFLOW_BIN, (bucket << 7) + (inside >> bucket))


def tick_histogram(counts: np.ndarray) -> HdrHistogram:
    """A histogram in ticks from the rig's bins (``BINS`` counts, the overflow bin last)."""
    h = engine_histogram()
    nz = np.flatnonzero(counts[:HDR_BINS])
    h.add_counts(nz, counts[nz])
    if counts[OVERFLOW_BIN]:
        h.count_out_of_range(above=int(counts[OVERFLOW_BIN]))
    return h


def ns_histogram(counts: np.ndarray, tick_ns: float) -> HdrHistogram:
    """The rig's bins as a histogram in ns, as the capture's .hlog holds them (1 ns .. 1 h, 3
    digits): each bin at its highest equivalent value (the value HdrHistogram reports for it), so
    the log's percentiles are the summary's; the overflow bin as out of range above."""
    h = HdrHistogram(1, 3_600_000_000_000, 3)
    nz = np.flatnonzero(counts[:HDR_BINS])
    ns = np.maximum(np.round(_LAYOUT.highest_equivalent_value(_LAYOUT.value_from_index(nz)) * tick_ns), 1)
    h.add_counts(h.counts_array_index(ns.astype(np.int64)), counts[nz])
    if counts[OVERFLOW_BIN]:
        h.count_out_of_range(above=int(counts[OVERFLOW_BIN]))
    return h


def engine_percentiles(counts: np.ndarray, ps) -> list[int | None]:
    """HdrHistogram's percentiles (0..100; its rank rounding and highest equivalent values, the lowest
    at 0) of the rig's bins, the overflow bin counted in the ranks: a percentile that falls in it is
    None (a value of 2**24 ticks or more, not known)."""
    ps = np.asarray(ps, np.float64)
    total = int(counts.sum())
    if not total:
        return [None] * len(ps)
    requested = np.clip(np.nextafter(ps, -np.inf), 0.0, 100.0)
    target = np.maximum(np.ceil(requested * total / 100.0), 1).astype(np.int64)
    index = np.searchsorted(np.cumsum(counts), target, side="left")
    low = _LAYOUT.value_from_index(np.minimum(index, HDR_BINS - 1))
    value = np.where(ps == 0.0, low, _LAYOUT.highest_equivalent_value(low))
    return [None if i >= OVERFLOW_BIN else int(v) for i, v in zip(index.tolist(), value.tolist())]


def bins_std(counts: np.ndarray) -> float | None:
    """The standard deviation of the rig's bins, as HdrHistogram's ``getStdDeviation`` gives it (each
    sample at its bin's median equivalent value; population). None when empty, or when the overflow
    bin holds samples (their values are not known)."""
    if counts[OVERFLOW_BIN] or not counts.any():
        return None
    return tick_histogram(counts).stddev


def bin_value(index: int) -> int:
    """The value (ticks) HdrHistogram reports for the rig's bin ``index`` (below OVERFLOW_BIN): its
    highest equivalent value."""
    return int(_LAYOUT.highest_equivalent_value(_LAYOUT.value_from_index(index)))
