"""``Distribution``: one measurement kind of a run over one subset, whatever its source.

Three sources give the same interface (docs/analysis.md, "One distribution"):

- **exact**: the samples themselves (a run short enough to pair whole);
- **hdr**: the streamed aggregates (``streaming.StreamingAggregator``: count, min, max, mean and std
  exact, the rest from an HdrHistogram of 3 significant digits);
- **rig**: the on-rig engine's bins (2 significant digits, whole ticks) and its exact count, min, max
  and sum.

Every figure is in the run's unit (mu, ``hilat.units.RunUnit``), the percentiles and the median by
the one definition of ``statistics.percentiles``; ``mu_s`` turns them into seconds at output. The
report's rows, the API, the live view, the formats, comparisons, baselines and the pytest plugin all
read a Distribution; none computes a figure of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hilat.engine import bins as rig_bins
from hilat.hdr import HdrHistogram
from hilat.statistics.percentiles import PERCENTILES, exact_percentile, percentile_label, samples_needed
from hilat.values import format_seconds

# Worst samples kept per kind for failure messages and summaries.
WORST_SHOWN = 5
STAT_KEYS = ["min", "median", "max", "mean", "std"]

RESOLUTIONS = {
    "exact": "exact",
    "hdr": "HdrHistogram, 3 significant digits (streamed: the run is long)",
    "rig": "on-rig: the engine's HdrHistogram bins, 2 significant digits",
}


class InsufficientSamples(ValueError):
    """A percentile the sample count cannot support: fewer than 1/(1-p) samples, so no sample lies
    above it and its value would just be the maximum."""


class Seconds(float):
    """A latency in seconds that remembers where it came from (its distribution and which statistic),
    so a failed ``assert`` on it can show the whole distribution (the pytest plugin does)."""

    stats: Distribution | None
    statistic: str

    def __new__(cls, value: float, stats: Distribution | None = None, statistic: str = ""):
        obj = super().__new__(cls, value)
        obj.stats = stats
        obj.statistic = statistic
        return obj

    def __repr__(self):
        return f"{float(self)!r}"

    def describe(self) -> str:
        where = f"{self.statistic} of {self.stats.kind}" if self.stats is not None else self.statistic
        return f"{where} = {format_seconds(float(self))}"


@dataclass(frozen=True)
class WorstSample:
    """One of the largest samples: its stimulus's (start's) time and its value in the run's unit (mu),
    the value in seconds, its tag, and its sample number (None where the source has no numbers)."""
    start_mu: int
    value_mu: int
    seconds: float
    tagged: bool
    index: int | None = None


class Distribution:
    """The samples of one kind of a run over one subset ("all", "untagged" or "tagged").

    ``count`` counts the samples with a value; ``misses`` the windows seen whole without one;
    ``unknown`` the windows a gap in the record stream touched (and, for the stimulus kinds, stimuli
    the generator fired whose edge was lost): neither a sample nor a miss, in no figure; ``starts``
    all three. ``miss_share`` is of the windows judged (``count`` + ``misses``). The ``*_mu`` figures
    are in the run's unit, ``mu_s`` seconds each; the properties without ``_mu`` are seconds."""

    def __init__(self, kind: str, title: str, subset: str, mu_s: float, source: str, *, starts: int, misses: int,
                 duplicates: int, count: int, unknown: int = 0, min_mu=None, max_mu=None, mean_mu=None, std_mu=None,
                 worst=()):
        self.kind, self.title, self.subset, self.mu_s, self.source = kind, title, subset, float(mu_s), source
        self.starts, self.misses, self.duplicates, self.count = int(starts), int(misses), int(duplicates), int(count)
        self.unknown = int(unknown)
        self.min_mu, self.max_mu, self.mean_mu, self.std_mu = min_mu, max_mu, mean_mu, std_mu
        self.worst = list(worst)
        self.resolution = RESOLUTIONS[source]
        self._sorted = None                 # exact: the valid samples, ascending
        self._hist, self._shift = None, 0   # hdr: the histogram counts value + shift
        self._rig_counts, self._bin_mu = None, 1   # rig: the engine's bins, in ticks
        self.overflow = 0                   # rig: samples in the overflow bin (above its range)

    # ---- the three sources ----------------------------------------------------------------------

    @classmethod
    def exact(cls, kind, values_mu, mu_s, *, title=None, subset="all", misses=0, unknown=0, duplicates=0,
              start_mu=None, tagged=None) -> Distribution:
        """From the valid samples in mu (misses and unknown windows given apart)."""
        v = np.asarray(values_mu, dtype=np.int64)
        order = np.argsort(v, kind="stable")
        s = v[order]
        n = len(s)
        worst = []
        if start_mu is not None and n:
            start_mu = np.asarray(start_mu, dtype=np.int64)
            tags = np.zeros(n, bool) if tagged is None else np.asarray(tagged, bool)
            for i in order[::-1][:WORST_SHOWN]:
                worst.append(WorstSample(int(start_mu[i]), int(v[i]), float(v[i] * mu_s), bool(tags[i])))
        d = cls(kind, title or kind, subset, mu_s, "exact", starts=n + misses + unknown, misses=misses,
                duplicates=duplicates, count=n, unknown=unknown,
                min_mu=int(s[0]) if n else None, max_mu=int(s[-1]) if n else None,
                mean_mu=float(s.mean()) if n else None, std_mu=float(s.std(ddof=1)) if n > 1 else (0.0 if n else None),
                worst=worst)
        d._sorted = s
        return d

    @classmethod
    def of_series(cls, kind, series, mu_s, *, title=None, subset="all") -> Distribution:
        """From a kind's windows (``measures.Series``, already the subset's): unknown ones are neither
        samples nor misses."""
        ok = series.valid_mask()
        return cls.exact(kind, series.values[ok], mu_s, title=title, subset=subset, misses=series.n_misses,
                         unknown=series.n_unknown, duplicates=int(series.duplicates.sum()),
                         start_mu=series.start_mu[ok], tagged=series.tag_in_window[ok] == 1)

    @classmethod
    def streamed(cls, kind, mu_s, hist, shift, moments, *, title=None, subset="all", starts=0, misses=0, unknown=0,
                 duplicates=0, worst=()) -> Distribution:
        """From an HdrHistogram counting value + ``shift`` and the exact ``moments`` (n, min, max,
        mean, std) of the same samples."""
        n = moments.n
        d = cls(kind, title or kind, subset, mu_s, "hdr", starts=starts, misses=misses, unknown=unknown,
                duplicates=duplicates, count=n, min_mu=moments.min if n else None, max_mu=moments.max if n else None,
                mean_mu=moments.mean if n else None, std_mu=moments.std if n else None, worst=worst)
        d._hist, d._shift = hist, int(shift)
        return d

    @classmethod
    def rig(cls, kind, mu_s, counts, exact, units_per_tick=1, *, title=None, subset="all", count=None, starts=None,
            misses=0, unknown=0, duplicates=0, worst=()) -> Distribution:
        """From the engine's bins (``rig_bins.BINS`` counts in ticks, the overflow bin last) and its
        exact figures (count, min, max, sum in ticks; None where the engine keeps none: the bins
        then give the count). ``units_per_tick``: the run's units in a tick (sub-ticks)."""
        u = int(units_per_tick)
        n = int(exact["count"]) if exact is not None and count is None else int(count if count is not None
                                                                                 else counts.sum())
        has = exact is not None and n > 0
        std = rig_bins.bins_std(counts) if has else None
        top = None
        if exact is None and counts.any():   # the bins alone: the highest one's value, unless it overflowed
            last = int(np.flatnonzero(counts)[-1])
            top = None if last == rig_bins.OVERFLOW_BIN else rig_bins.bin_value(last) * u
        d = cls(kind, title or kind, subset, mu_s, "rig", starts=n if starts is None else starts, misses=misses,
                unknown=unknown, duplicates=duplicates, count=n,
                min_mu=exact["min"] * u if has else None, max_mu=exact["max"] * u if has else top,
                mean_mu=exact["sum"] / n * u if has else None, std_mu=None if std is None else std * u, worst=worst)
        d._rig_counts, d._bin_mu = counts, u
        d.overflow = int(counts[rig_bins.OVERFLOW_BIN])
        return d

    # ---- figures in mu ----------------------------------------------------------------------------

    def supports(self, percentile: float) -> bool:
        """Whether the count supports ``percentile`` (in percent): at least one sample above it."""
        return self.count > 0 and (percentile <= 50.0 or self.count >= samples_needed(percentile / 100.0))

    def samples_needed(self, percentile: float) -> int:
        return samples_needed(percentile / 100.0)

    def percentile_mu(self, percentile: float) -> int | None:
        """The ``percentile`` (0..100) in mu: the smallest sample with that share of samples at or
        below it (a histogram's bucket: its highest equivalent value, at most the exact max); None
        when it lies in the rig's overflow bin (above its range)."""
        if not 0.0 <= percentile <= 100.0:
            raise ValueError(f"a percentile is 0..100, got {percentile!r}")
        if not self.supports(percentile):
            raise InsufficientSamples(
                f"{self.kind}: p{percentile:g} needs at least {self.samples_needed(percentile)} samples, the run has "
                f"{self.count}; capture more or judge a lower percentile")
        if self._sorted is not None:
            return int(exact_percentile(self._sorted, percentile / 100.0))
        if self._rig_counts is not None:
            (value,) = rig_bins.engine_percentiles(self._rig_counts, [percentile])
            if value is None:       # in the overflow bin: above the bins' range
                return None
            value = int(value) * self._bin_mu
            return value if self.max_mu is None else min(value, self.max_mu)
        return min(int(self._hist.value_at_percentile(percentile)) - self._shift, self.max_mu)

    def percentiles_mu(self, fractions) -> np.ndarray:
        """The percentiles at ``fractions`` (0..1, an array; the count's support is not checked: a
        curve up to the max) in mu, as floats; nan where one lies in the rig's overflow bin."""
        ps = np.asarray(fractions, dtype=np.float64)
        if not self.count:
            return np.full(ps.shape, np.nan)
        if self._sorted is not None:
            return exact_percentile(self._sorted, ps).astype(np.float64)
        if self._rig_counts is not None:
            values = rig_bins.engine_percentiles(self._rig_counts, 100 * ps)
            out = np.array([np.nan if v is None else v * self._bin_mu for v in values], dtype=np.float64)
        else:
            out = np.asarray(self._hist.percentiles(100 * ps), dtype=np.float64) - self._shift
        return out if self.max_mu is None else np.minimum(out, self.max_mu)

    @property
    def median_mu(self) -> int | None:
        """p50 (the lower middle of an even count); None without samples."""
        return self.percentile_mu(50.0) if self.count else None

    @property
    def miss_share(self) -> float | None:
        """Misses of the windows judged (samples and misses; unknown windows are neither)."""
        judged = self.count + self.misses
        return self.misses / judged if judged else None

    def figures_mu(self, percentiles=PERCENTILES) -> dict:
        """{count, min, median, max, mean, std, percentiles: {label: value}} in mu; None where there is
        no value (no samples, the rig's overflow bin). A percentile table shows a percentile from
        ``samples_needed`` samples on (p50 too: from 2), the median from one sample."""
        out = {"count": self.count, "min": self.min_mu, "max": self.max_mu, "mean": self.mean_mu, "std": self.std_mu}
        out["median"] = None if self.median_mu is None else float(self.median_mu)
        out["percentiles"] = {percentile_label(p): self.percentile_mu(100 * p) if self.count >= samples_needed(p)
                              else None for p in percentiles}
        return out

    def row(self, mu_ns: float, percentiles=PERCENTILES) -> dict:
        """The report's statistics row (docs/analysis.md): counts, the miss share, and the figures in
        mu and in ns (``mu_ns`` ns each)."""
        mu = self.figures_mu(percentiles)
        ns = {k: None if mu[k] is None else mu[k] * mu_ns for k in STAT_KEYS}
        ns["percentiles"] = {k: None if v is None else v * mu_ns for k, v in mu["percentiles"].items()}
        return {"starts": self.starts, "count": self.count, "misses": self.misses, "unknown": self.unknown,
                "miss_share": self.miss_share, "duplicates": self.duplicates,
                "mu": {**{k: mu[k] for k in STAT_KEYS}, "percentiles": mu["percentiles"]}, "ns": ns}

    # ---- the whole distribution -------------------------------------------------------------------

    def values_mu(self) -> np.ndarray | None:
        """The valid samples in mu, ascending, when the source keeps them (exact; else None)."""
        return self._sorted

    def buckets(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(values in mu, counts, above range): every sample (the exact source) or every non-empty
        bucket at its highest equivalent value in mu, kept within the exact min and max, and the
        samples above the histogram's range (the rig's overflow bin)."""
        if self._sorted is not None:
            values, counts = np.unique(self._sorted, return_counts=True)
            return values, counts, 0
        h = self._hist if self._rig_counts is None else rig_bins.tick_histogram(self._rig_counts)
        b = h.recorded_buckets()
        at = (b.highest - self._shift) * self._bin_mu
        if self.min_mu is not None and len(at):
            at = np.clip(at, self.min_mu, max(self.max_mu, self.min_mu))
        return at.astype(np.int64), b.count.astype(np.int64), int(h.out_of_range_above)

    @property
    def histogram_unit_s(self) -> float:
        """Seconds per value of ``histogram()``: a mu, or a tick for the rig's bins."""
        return self.mu_s * self._bin_mu

    def histogram(self) -> HdrHistogram:
        """The distribution as an ``hilat.hdr.HdrHistogram`` in ``histogram_unit_s`` (mu; the rig's
        bins in ticks, its overflow bin as out of range): exact samples recorded at 3 significant
        digits."""
        if self._rig_counts is not None:
            return rig_bins.tick_histogram(self._rig_counts)
        if self._hist is not None and not self._shift:
            return self._hist
        h = HdrHistogram(1, 1 << 40, 3)
        if self._sorted is not None:
            if len(self._sorted):
                h.record(self._sorted)
        else:   # the streamed histogram counts value + shift: each bucket back at its value
            b = self._hist.recorded_buckets()
            h.add_counts(h.counts_array_index(np.maximum(b.highest - self._shift, 0)), b.count)
        return h

    def counts_between(self, edges_s) -> np.ndarray:
        """Samples in [edges[i], edges[i+1]) for seconds ``edges`` ascending (a bucket counted at
        its value, as ``buckets``)."""
        edges_mu = np.asarray(edges_s, dtype=np.float64) / self.mu_s
        values, counts, _above = self.buckets()
        cum = np.concatenate([[0], np.cumsum(counts)])
        idx = np.searchsorted(values.astype(np.float64), np.ceil(edges_mu - 1e-9), side="left")
        return np.diff(cum[idx])

    # ---- seconds, at output -----------------------------------------------------------------------

    def _s(self, value_mu, statistic) -> Seconds | None:
        return None if value_mu is None else Seconds(value_mu * self.mu_s, self, statistic)

    @property
    def min(self) -> Seconds | None:
        return self._s(self.min_mu, "min")

    @property
    def max(self) -> Seconds | None:
        return self._s(self.max_mu, "max")

    @property
    def mean(self) -> Seconds | None:
        return self._s(self.mean_mu, "mean")

    @property
    def std(self) -> Seconds | None:
        """Standard deviation: of the samples (ddof 1), or for on-rig results of the rig's bins
        (HdrHistogram's, bucket medians; None when the overflow bin holds samples)."""
        return self._s(self.std_mu, "std")

    @property
    def median(self) -> Seconds | None:
        return self.percentile(50.0) if self.count else None

    def percentile(self, percentile: float) -> Seconds:
        """The ``percentile`` (0..100, e.g. 99.99) in seconds. Raises ``InsufficientSamples`` where
        the count cannot support it; inf where it lies above the rig's histogram range."""
        value_mu = self.percentile_mu(percentile)
        return Seconds(float("inf") if value_mu is None else value_mu * self.mu_s, self, f"p{percentile:g}")

    def ladder(self) -> list[tuple[str, Seconds | None]]:
        """(label, value) for min, the report percentiles the count supports, and max."""
        rows = [("min", self.min)]
        for p in PERCENTILES:
            if self.supports(100 * p):
                rows.append((percentile_label(p), self.percentile(100 * p)))
        return rows + [("max", self.max)]

    def describe(self, bars: int = 12) -> str:
        """A few lines for a human (a failed budget): counts, the percentile ladder, the worst samples
        with their stimulus times, then a log-spaced text histogram."""
        head = (f"{self.kind} ({self.title}, {self.subset}): {self.count} samples, {self.misses} missed of "
                f"{self.starts}, {self.unknown} unknown, {self.duplicates} duplicate responses; {self.resolution}")
        if not self.count:
            return head
        lines = [head, "  " + "  ".join(f"{label} {format_seconds(v)}" for label, v in self.ladder())]
        for w in self.worst:
            lines.append(f"  worst: {format_seconds(w.seconds)} at {w.start_mu} mu (its start)"
                         + (" (tagged)" if w.tagged else ""))
        lo, hi = max(self.min_mu, 1), max(self.max_mu, 1)
        if hi > lo:
            edges = np.unique(np.round(np.geomspace(lo, hi + 1, bars + 1)).astype(np.int64))
            counts = self.counts_between(edges * self.mu_s)
            peak = max(int(counts.max()), 1)
            for a, b, c in zip(edges[:-1], edges[1:], counts):
                bar = "#" * int(np.ceil(40 * c / peak)) if c else ""
                lines.append(f"  {format_seconds(a * self.mu_s):>10} .. {format_seconds(b * self.mu_s):>10} "
                             f"{int(c):>9} {bar}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        """Counts, and min/mean/max/percentiles in seconds (percentiles the count supports)."""
        return {"kind": self.kind, "subset": self.subset, "starts": self.starts, "count": self.count,
                "misses": self.misses, "unknown": self.unknown, "duplicates": self.duplicates,
                "resolution": self.resolution,
                "seconds": {label: None if v is None else float(v) for label, v in self.ladder()}
                | {"mean": None if self.mean is None else float(self.mean)}}

    def __repr__(self):
        if not self.count:
            return f"<Distribution {self.kind} {self.subset}: no samples, {self.misses} missed, {self.unknown} unknown>"
        return (f"<Distribution {self.kind} {self.subset}: {self.count} samples, {self.misses} missed, "
                f"{self.unknown} unknown, min {format_seconds(self.min)}, max {format_seconds(self.max)}>")


def exact_figures(values_mu, percentiles=PERCENTILES) -> dict:
    """``Distribution.figures_mu`` of valid samples (a reference for the other sources' figures)."""
    return Distribution.exact("", values_mu, 1.0).figures_mu(percentiles)


def summarize(found, exclude_tagged=False) -> dict:
    """{kind: {starts, count, misses, unknown, duplicates, min, median, max, mean, std, percentiles}}
    in mu (Faller's table) for every kind of ``found`` (``analysis.Measurements``)."""
    out = {"kinds": dict(found.titles)}
    for kind in found.kinds:
        d = Distribution.of_series(kind, found.subset(kind, "untagged" if exclude_tagged else "all"), 1.0)
        out[kind] = {"starts": d.starts, "misses": d.misses, "unknown": d.unknown, "duplicates": d.duplicates,
                     **d.figures_mu()}
    return out
