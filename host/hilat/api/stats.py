"""Statistics of one kind of a run, in seconds (``Stats``): part of ``hilat.api`` (its docstring has the whole)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from hilat import analysis, values
from hilat.values import format_seconds

log = logging.getLogger("hilat")

SUBSETS = ("all", "untagged", "tagged")
# Worst samples kept per kind for failure messages and summaries.
WORST_SHOWN = 5


class SettingsError(ValueError):
    """Capture settings that cannot run on this rig (a bad value, a role or measure it lacks)."""


class InsufficientSamples(ValueError):
    """A percentile the sample count cannot support: fewer than 1/(1-p) samples, so no sample lies
    above it and its value would just be the maximum."""


# ---- durations ---------------------------------------------------------------------------------------

# The API's duration: seconds, or a string with a unit ("30us", "1.5 ms", "N ticks" with ts_hz).
parse_duration = values.seconds


def _ticks(value, ts_hz: float) -> int:
    """Whole ticks of a duration (a tick count given as "N ticks" stays exact)."""
    if isinstance(value, str):
        return values.parse_duration(value).ticks(ts_hz)
    return int(round(values.seconds(value) * ts_hz))


class Seconds(float):
    """A latency in seconds that remembers where it came from (its ``Stats`` and which statistic),
    so a failed ``assert`` on it can show the whole distribution (the pytest plugin does)."""

    stats: Stats | None
    statistic: str

    def __new__(cls, value: float, stats: Stats | None = None, statistic: str = ""):
        obj = super().__new__(cls, value)
        obj.stats = stats
        obj.statistic = statistic
        return obj

    def __repr__(self):
        return f"{float(self)!r}"

    def describe(self) -> str:
        where = f"{self.statistic} of {self.stats.kind}" if self.stats is not None else self.statistic
        return f"{where} = {format_seconds(float(self))}"


# ---- statistics of one kind ----------------------------------------------------------------------------

@dataclass(frozen=True)
class WorstSample:
    """One of the largest samples: its stimulus's (start's) time and its value in the run's unit (mu),
    the value in seconds, and its tag."""
    start_mu: int
    value_mu: int
    seconds: float
    tagged: bool


class Stats:
    """The samples of one measurement kind of a run (one subset: all, untagged or tagged), in seconds.

    ``count`` counts the samples with a value; ``misses`` the windows seen whole without one;
    ``unknown`` the windows a gap in the record stream touched (and, for the stimulus kinds, stimuli
    the generator fired whose edge was lost): neither a sample nor a miss, in no figure; ``starts``
    all three. ``miss_share`` is of the windows judged (``count`` + ``misses``).
    ``min``/``max``/``mean`` are exact; the median and percentiles are exact when the run keeps its
    samples (``resolution`` "exact"), else HdrHistogram's (the highest value equivalent to the
    true one, within ``resolution``). The ``*_mu`` figures are in the run's unit, ``mu_s`` seconds
    each (docs/analysis.md, "The run's unit"); an on-rig run's are the engine's whole ticks (its
    ``mu_s`` is then a tick)."""

    def __init__(self, kind: str, title: str, subset: str, mu_s: float, *, starts: int, misses: int,
                 duplicates: int, count: int, min_mu: int | None, max_mu: int | None,
                 mean_mu: float | None, std_mu: float | None, sorted_mu: np.ndarray | None = None,
                 histogram=None, rig_counts: np.ndarray | None = None, worst: list[WorstSample] | None = None,
                 resolution: str = "exact", unknown: int = 0):
        self.kind, self.title, self.subset, self.mu_s = kind, title, subset, mu_s
        self.starts, self.misses, self.duplicates, self.count = int(starts), int(misses), int(duplicates), int(count)
        self.unknown = int(unknown)
        self.min_mu, self.max_mu = min_mu, max_mu
        self.mean_mu, self.std_mu = mean_mu, std_mu
        self._sorted = sorted_mu
        self._hist = histogram
        self._rig_counts = rig_counts
        self.worst = list(worst or [])
        self.resolution = resolution

    @classmethod
    def from_values(cls, kind: str, values_mu, mu_s: float, *, misses: int = 0, duplicates: int = 0,
                    title: str | None = None, subset: str = "all", start_mu=None, tagged=None,
                    unknown: int = 0) -> Stats:
        """Exact statistics of valid samples in mu (misses and unknown windows given apart)."""
        v = np.asarray(values_mu, dtype=np.int64)
        order = np.argsort(v, kind="stable")
        s = v[order]
        st = analysis.stats(s, percentiles=[])
        worst = []
        if start_mu is not None and len(v):
            start_mu = np.asarray(start_mu, dtype=np.int64)
            tags = np.zeros(len(v), bool) if tagged is None else np.asarray(tagged, bool)
            for i in order[::-1][:WORST_SHOWN]:
                worst.append(WorstSample(int(start_mu[i]), int(v[i]), float(v[i] * mu_s), bool(tags[i])))
        return cls(kind, title or analysis.KIND_TITLES.get(kind, kind), subset, mu_s,
                   starts=len(v) + misses + unknown, misses=misses, duplicates=duplicates, count=len(v),
                   min_mu=st["min"], max_mu=st["max"],
                   mean_mu=st["mean"], std_mu=st["std"], sorted_mu=s, worst=worst, unknown=unknown)

    # -- values in seconds --

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

    @property
    def miss_share(self) -> float | None:
        """Misses of the windows judged (samples and misses; unknown windows are neither)."""
        judged = self.count + self.misses
        return self.misses / judged if judged else None

    def supports(self, percentile: float) -> bool:
        """Whether the count supports ``percentile`` (in percent): at least one sample above it."""
        return self.count > 0 and (percentile <= 50.0 or self.count >= analysis.samples_needed(percentile / 100.0))

    def samples_needed(self, percentile: float) -> int:
        return analysis.samples_needed(percentile / 100.0)

    def percentile_mu(self, percentile: float) -> int | None:
        """The ``percentile`` (0..100) in mu: the smallest sample with that share of samples at or
        below it; None when it lies in the rig's overflow bin (above its range)."""
        if not 0.0 <= percentile <= 100.0:
            raise ValueError(f"a percentile is 0..100, got {percentile!r}")
        if not self.supports(percentile):
            raise InsufficientSamples(
                f"{self.kind}: p{percentile:g} needs at least {self.samples_needed(percentile)} samples, the run has "
                f"{self.count}; capture more or judge a lower percentile")
        if self._sorted is not None:
            return int(analysis.exact_percentile(self._sorted, percentile / 100.0))
        if self._rig_counts is not None:
            from hilat.engine import engine_percentiles

            (value,) = engine_percentiles(self._rig_counts, [percentile])
            return None if value is None else min(int(value), self.max_mu)
        return min(int(self._hist.value_at_percentile(percentile)), self.max_mu)

    def percentile(self, percentile: float) -> Seconds:
        """The ``percentile`` (0..100, e.g. 99.99) in seconds. Raises ``InsufficientSamples`` where
        the count cannot support it; inf where it lies above the rig's histogram range."""
        value_mu = self.percentile_mu(percentile)
        return Seconds(float("inf") if value_mu is None else value_mu * self.mu_s, self, f"p{percentile:g}")

    # -- the whole distribution --

    def values_mu(self) -> np.ndarray | None:
        """The valid samples in mu, ascending, when the run keeps them (else None)."""
        return self._sorted

    def histogram(self):
        """The distribution as an ``hilat.hdr.HdrHistogram`` in mu (exact samples are recorded at 3
        significant digits; on-rig runs give the engine's bins, its overflow bin as out of range)."""
        from hilat.hdr import HdrHistogram

        if self._hist is not None:
            return self._hist
        if self._rig_counts is not None:
            from hilat.engine import tick_histogram

            self._hist = tick_histogram(self._rig_counts)
            return self._hist
        h = HdrHistogram(1, 1 << 40, 3)
        if self._sorted is not None and len(self._sorted):
            h.record(self._sorted)
        self._hist = h
        return h

    def counts_between(self, edges_s) -> np.ndarray:
        """Samples in [edges[i], edges[i+1]) for seconds ``edges`` ascending: exact from the samples,
        else each histogram bucket counted at its highest equivalent value."""
        edges_mu = np.asarray(edges_s, dtype=np.float64) / self.mu_s
        if self._sorted is not None:
            idx = np.searchsorted(self._sorted, np.ceil(edges_mu - 1e-9), side="left")
            return np.diff(idx)
        b = self.histogram().recorded_buckets()
        which = np.searchsorted(edges_mu, b.highest, side="right") - 1
        out = np.zeros(len(edges_mu) - 1, np.int64)
        ok = (which >= 0) & (which < len(out))
        np.add.at(out, which[ok], b.count[ok])
        return out

    def ladder(self) -> list[tuple[str, Seconds | None]]:
        """(label, value) for min, the report percentiles the count supports, and max."""
        rows = [("min", self.min)]
        for p in analysis.PERCENTILES:
            if self.supports(100 * p):
                rows.append((analysis.percentile_label(p), self.percentile(100 * p)))
        return rows + [("max", self.max)]

    def describe(self, bars: int = 12) -> str:
        """A few lines for a human (a failed budget): counts, the percentile ladder, the worst samples
        with their stimulus ticks, then a log-spaced text histogram."""
        head = (f"{self.kind} ({self.title}, {self.subset}): {self.count} samples, {self.misses} missed of "
                f"{self.starts}, {self.unknown} unknown, {self.duplicates} duplicate responses; {self.resolution}")
        lines = [head]
        if not self.count:
            return head
        lines.append("  " + "  ".join(f"{label} {format_seconds(v)}" for label, v in self.ladder()))
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
            return f"<Stats {self.kind} {self.subset}: no samples, {self.misses} missed, {self.unknown} unknown>"
        return (f"<Stats {self.kind} {self.subset}: {self.count} samples, {self.misses} missed, {self.unknown} "
                f"unknown, min {format_seconds(self.min)}, max {format_seconds(self.max)}>")
