"""hilat's Python API: open a rig, capture, and read a run's latency statistics in seconds.

    import hilat

    with hilat.Rig("socket://127.0.0.1:7000") as rig:
        run = rig.capture(count=2000, period="100us", jitter="20us", deadline="50us")
    isr = run.stats("stim_to_isr")
    assert isr.percentile(99.9) < 50e-6 and isr.misses == 0

Everything is in seconds (a float, or a string with a unit: "30us", "1.5ms", "250ns", "2s"; whole
ticks as "1500 ticks"). The statistics are exact where the run keeps its samples, else from
HdrHistogram bins (``Stats.resolution`` says which). ``docs/api.md`` has the whole surface; the CLI
(``hilat.cli``) is a thin layer over this module.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from hilat import analysis, shutdown, values
from hilat.values import format_seconds

log = logging.getLogger("hilat")

__all__ = ["Rig", "Run", "Stats", "Seconds", "Comparison", "FailRule", "InsufficientSamples", "load", "compare",
           "simulate", "parse_duration", "parse_fail_rule", "SettingsError", "CaptureError", "Baseline", "SUBSETS"]

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


# ---- a run -------------------------------------------------------------------------------------------

class Run:
    """A run directory (``hilat capture``'s output), read back: its kinds and their statistics."""

    def __init__(self, path: str | Path):
        from hilat.runs import load_run

        self._run = load_run(Path(path))
        self._stats: dict[tuple[str, str], Stats] = {}
        self._source = None
        self._unseen = None

    @property
    def path(self) -> Path:
        return Path(self._run.path)

    @property
    def label(self) -> str:
        return self._run.label

    @property
    def kinds(self) -> dict[str, str]:
        """{kind: title} of every measurement kind of the run, in report order."""
        return dict(self._run.kind_titles)

    @property
    def ts_hz(self) -> float:
        """The tick clock, ticks per second (calibrated when a clock calibration was in force), as
        ``Rig.ts_hz`` of the same rig."""
        return float(self._run.ts_hz)

    @property
    def unit(self):
        """The run's unit (``hilat.units.RunUnit``): what one mu, the unit of every ``*_mu`` value, is."""
        return self._run.unit

    @property
    def mu_s(self) -> float:
        """One unit of the run's values (``*_mu``) in seconds: a tick, or a sub-tick (docs/subtick.md)."""
        return self._run.unit.mu_ns * 1e-9

    @property
    def units_per_tick(self) -> int:
        """1 (values in ticks), S (sub-ticks of a rig sampling S times a tick) or 64 S (calibrated bins)."""
        return int(self._run.units_per_tick)

    @property
    def on_rig(self) -> bool:
        return bool(self._run.on_rig)

    @property
    def meta(self) -> dict:
        return self._run.meta

    @property
    def rig(self) -> dict:
        """The rig's identity as the run recorded it (board, gateware, firmware, clocks...)."""
        ident = dict(self._run.meta.get("rig") or {})
        board, _, git_hash = str(ident.get("gateware", "")).partition(" ")
        ident["board"] = board if git_hash else None
        return ident

    @property
    def losses(self) -> dict:
        return self._run.losses()

    @property
    def problems(self) -> list[str]:
        """What makes the run incomplete or suspect (dropped edges, overflows, errors), one line each."""
        return list(self._run.problems())

    def _statistics_source(self):
        if self._source is None:
            from hilat import report

            if self._run.on_rig:
                self._source = ("rig", report._on_rig_aggregates(self._run))
            elif report.use_hdr(self._run):
                self._source = ("hdr", report.stream_aggregate(self._run))
            else:
                self._source = ("exact", self._run.measurements)
        return self._source

    def stats(self, kind: str, subset: str = "all") -> Stats:
        """The statistics of ``kind`` (see ``kinds``) over ``subset``: "all", "untagged" (windows
        that never saw the tag; a window whose tag a gap hid is unknown there) or "tagged".

        For the stimulus kinds, stimuli the rig's generator fired whose edge was lost (``unseen`` in
        ``stimuli_accounting``) are unknown windows of "all" and "untagged", as in the report."""
        if kind not in self._run.kind_titles:
            raise KeyError(f"the run has no kind {kind!r} (kinds: {', '.join(self._run.kind_titles)})")
        if subset not in SUBSETS:
            raise ValueError(f"subset is one of {', '.join(SUBSETS)}, got {subset!r}")
        key = (kind, subset)
        if key not in self._stats:
            st = self._compute(kind, subset)
            from hilat.report import BUILTIN_KINDS

            unseen = self._unseen_stimuli() if kind in BUILTIN_KINDS and subset != "tagged" else 0
            st.unknown += unseen
            st.starts += unseen
            self._stats[key] = st
        return self._stats[key]

    def _stimuli_seen(self) -> int:
        _how, source = self._statistics_source()
        return int(source.stimuli)

    def _unseen_stimuli(self) -> int:
        """Stimuli the generator fired (the rig's counter) that the capture never saw: their edges
        were lost. 0 for an on-rig run, a run without a stimulus, or a rig that does not count."""
        if self._unseen is None:
            from hilat import report

            self._unseen = 0
            if self._run.builtin and not self._run.on_rig:
                subsets = {"all": {}}   # the accounting's "measured" is not needed here
                acc = report.stimuli_accounting(self._run, self._stimuli_seen(), subsets)
                self._unseen = int(acc["unseen"]) if acc else 0
        return self._unseen

    @property
    def stimuli_accounting(self) -> dict | None:
        """The run's stimuli as summary.json states them (``report.stimuli_accounting``): {fired, seen,
        unseen, measured, unknown} of stimulus -> ISR entry: every stimulus fired is measured (a
        sample or a miss) or unknown (a gap touched its window, or its edge was lost). ``fired`` is
        None on a rig that does not count; the whole is None for an on-rig run (the engine counts
        what it paired: nothing is unknown) or one without a stimulus."""
        from hilat import report

        if not self._run.builtin or self._run.on_rig:
            return None
        first = report.BUILTIN_KINDS[0]
        st = self.stats(first)
        acc = report.stimuli_accounting(self._run, self._stimuli_seen(), {"all": {}})
        if acc is None:
            return None
        return {**acc, "measured": st.count + st.misses, "unknown": st.unknown}

    def _compute(self, kind, subset) -> Stats:
        how, source = self._statistics_source()
        title, mu_s = self._run.kind_titles[kind], self._run.unit.mu_ns * 1e-9
        if how == "rig":  # the engine's figures are whole ticks, the run's unit may be a sub-tick: these
            # Stats count in ticks (their mu_s is a tick)
            mu_s *= source.units_per_value
        if how == "exact":
            if subset == "tagged":
                series = source.series[kind]
                series = series.take(np.flatnonzero(series.tag_in_window == 1))
            else:   # untagged: a window whose tag a gap hid is unknown (it may have been tagged)
                series = source.subset(kind, subset)
            ok = (series.values != analysis.MISSING) & (series.unknown == 0)
            return Stats.from_values(kind, series.values[ok], mu_s, misses=series.n_misses,
                                     unknown=series.n_unknown, duplicates=int(series.duplicates.sum()),
                                     title=title, subset=subset, start_mu=series.start_mu[ok],
                                     tagged=series.tag_in_window[ok] == 1)
        # The aggregates (streamed or the engine's) keep the single worst sample of all.
        w = source.worst.get(kind) if subset == "all" else None
        # (the aggregates' worst is in the run's unit, whatever these Stats count in)
        worst = [WorstSample(w["start_mu"], w["mu"], w["mu"] * self._run.unit.mu_ns * 1e-9, w["tagged"])] if w else []
        key = (subset, kind)
        if how == "hdr":
            if subset == "tagged":
                raise ValueError(f"{self.path}: a streamed (long) run keeps all and untagged, not tagged alone")
            ex = source.exact[key]
            return Stats(kind, title, subset, mu_s, starts=source.starts[key], misses=source.misses[key],
                         unknown=source.unknown[key], duplicates=source.duplicates[key], count=ex.n,
                         min_mu=ex.min, max_mu=ex.max,
                         mean_mu=ex.mean if ex.n else None, std_mu=ex.std if ex.n else None,
                         histogram=source.hist[key], worst=worst,
                         resolution="HdrHistogram, 3 significant digits (streamed: the run is long)")
        # RigAggregates counts all and untagged; the tagged subset has binned samples only.
        from hilat.engine import bins_std
        exact = source.rig.exact(kind, subset)
        n = source.count_of(kind, subset)
        return Stats(kind, title, subset, mu_s, starts=source.starts.get(key, n), misses=source.misses.get(key, 0),
                     unknown=source.unknown.get(key, 0), duplicates=source.duplicates.get(key, 0), count=n,
                     min_mu=exact["min"] if exact and n else None, max_mu=exact["max"] if exact and n else None,
                     mean_mu=exact["sum"] / n if exact and n else None,
                     std_mu=bins_std(source.rig.counts(kind, subset)) if n else None,
                     rig_counts=source.rig.counts(kind, subset),
                     worst=worst, resolution="on-rig: the engine's HdrHistogram bins, 2 significant digits")

    def __iter__(self) -> Iterator[Stats]:
        return (self.stats(k) for k in self.kinds)

    def report(self, format: str = "text") -> str:
        """The report (``hilat report``) in ``format``: text, markdown, json or csv."""
        from hilat import report

        return report.format_report(report.build_report([self._run]), format)

    def compare(self, other: Run) -> Comparison:
        return compare(self, other)

    def __repr__(self):
        return f"<Run {self.label!r} at {self.path}: {', '.join(self.kinds)}>"


def load(path: str | Path) -> Run:
    """A run directory read back (``runs.RunError`` if it cannot be read)."""
    return Run(path)


# ---- comparisons and fail rules --------------------------------------------------------------------------

@dataclass(frozen=True)
class FailRule:
    """B fails against A when ``statistic`` of B exceeds A's by more than ``percent`` % (or by more
    than ``absolute_s`` seconds); ``statistic``: "max", "mean", "min", or a percentile "p99.9"."""
    statistic: str
    percent: float | None = None
    absolute_s: float | None = None
    kind: str | None = None          # None: every kind both runs have

    def text(self) -> str:
        limit = f"{self.percent:g}%" if self.percent is not None else format_seconds(self.absolute_s).replace(" ", "")
        return f"{self.kind + ':' if self.kind else ''}{self.statistic}:{limit}"


def parse_fail_rule(text: str) -> FailRule:
    """``[KIND:]STATISTIC:LIMIT``: ``p99.9:10%`` (B's p99.9 more than 10 % above A's fails),
    ``stim_to_isr:max:500ns`` (more than 500 ns above), ``mean:5%``."""
    parts = text.strip().split(":")
    if len(parts) == 2:
        kind, (statistic, limit) = None, parts
    elif len(parts) == 3:
        kind, statistic, limit = parts
    else:
        raise ValueError(f"a fail rule is [KIND:]STATISTIC:LIMIT, e.g. p99.9:10% or stim_to_isr:max:500ns; "
                         f"got {text!r}")
    statistic = statistic.strip()
    if not (statistic in ("min", "max", "mean") or re.fullmatch(r"p(100|[0-9]{1,2}(\.[0-9]+)?)", statistic)):
        raise ValueError(f"{text!r}: the statistic is min, max, mean or a percentile like p99.9")
    limit = limit.strip()
    if limit.endswith("%"):
        try:
            percent = float(limit[:-1])
        except ValueError:
            raise ValueError(f"{text!r}: {limit!r} is not a percentage") from None
        return FailRule(statistic, percent=percent, kind=kind)
    try:
        return FailRule(statistic, absolute_s=parse_duration(limit), kind=kind)
    except ValueError:
        raise ValueError(f"{text!r}: the limit is a percentage (10%) or a time (500ns)") from None


def _statistic(stats: Stats, statistic: str) -> Seconds | None:
    if statistic in ("min", "max", "mean"):
        return getattr(stats, statistic)
    return stats.percentile(float(statistic[1:]))


def _judge(rules, kinds_a, kinds_b, value_a, value_b) -> list[str]:
    """Lines for every (rule, kind) where B exceeds A beyond the rule; ``value_x(kind, statistic)``
    gives seconds or None (no samples) and raises InsufficientSamples where it cannot say."""
    failures = []
    for rule in (parse_fail_rule(r) if isinstance(r, str) else r for r in rules):
        for kind in [rule.kind] if rule.kind else [k for k in kinds_b if k in kinds_a and k not in _NOT_COMPARED]:
            if kind not in kinds_a or kind not in kinds_b:
                failures.append(f"{rule.text()}: {kind} is not in both")
                continue
            try:
                va, vb = value_a(kind, rule.statistic), value_b(kind, rule.statistic)
            except InsufficientSamples as e:
                failures.append(f"{rule.text()}: cannot judge: {e}")
                continue
            if va is None or vb is None:
                failures.append(f"{rule.text()}: {kind} has no samples in {'A' if va is None else 'B'}")
                continue
            allowed = va * (1 + rule.percent / 100) if rule.percent is not None else va + rule.absolute_s
            if vb > allowed:
                failures.append(f"{kind} {rule.statistic}: B {format_seconds(vb)} > A {format_seconds(va)} "
                                f"+ {rule.text().rpartition(':')[2]} = {format_seconds(allowed)}")
    return failures


# Pulse durations are what the DUT spends, not latencies: compared only when a rule names them.
_NOT_COMPARED = ("isr_duration", "task_duration")


class Comparison:
    """Run B against run A: the report's side-by-side rows and fail rules (``check``)."""

    def __init__(self, a: Run, b: Run):
        from hilat import report

        self.a, self.b = a, b
        self.document = report.compare_document(report.build_report([a._run, b._run]))
        self.kinds = list(self.document["kinds"])

    def text(self, markdown: bool = False) -> str:
        from hilat import report

        return report.format_compare(self.document, markdown=markdown)

    def check(self, rules: list[FailRule | str]) -> list[str]:
        """One line per rule and kind that B breaks (empty: B passes). A percentile either run's count
        cannot support is a failure too: it cannot be judged."""
        return _judge(rules, self.a.kinds, self.b.kinds, lambda k, st: _statistic(self.a.stats(k), st),
                      lambda k, st: _statistic(self.b.stats(k), st))


def compare(a: Run | str | Path, b: Run | str | Path) -> Comparison:
    """Run B (new) against run A (reference); paths or ``Run`` objects."""
    return Comparison(a if isinstance(a, Run) else Run(a), b if isinstance(b, Run) else Run(b))


# ---- baselines ---------------------------------------------------------------------------------------------

# What makes two rigs measure alike: a baseline taken on another identity is not compared.
# Percentiles a baseline keeps besides the report's (p50 .. p99.9999), where the count supports them.
BASELINE_PERCENTILES = (95.0, 99.5, 99.95)
BASELINE_IDENTITY = ("gateware", "firmware", "ts_hz", "sys_hz", "n_stimulus", "n_inputs", "pin_to_stamp_delay")


class Baseline:
    """A run's figures kept as JSON to judge later runs of the same test on the same rig: per kind,
    the counts and min / mean / max and the percentiles the count supports, in seconds, and the rig's
    identity (``BASELINE_IDENTITY``)."""

    FORMAT = "hilat-baseline"
    VERSION = 1

    def __init__(self, doc: dict):
        if doc.get("format") != self.FORMAT:
            raise ValueError(f"not a hilat baseline (format {doc.get('format')!r})")
        self.doc = doc

    @classmethod
    def from_run(cls, run: Run, name: str = "") -> Baseline:
        from datetime import datetime, timezone

        rig = run.rig
        kinds = {}
        for kind in run.kinds:
            st = run.stats(kind)
            figures = {label: None if v is None else float(v) for label, v in st.ladder()} if st.count else {}
            if st.count:
                figures["mean"] = float(st.mean)
                figures.update((f"p{p:g}", float(st.percentile(p))) for p in BASELINE_PERCENTILES if st.supports(p))
            kinds[kind] = {"count": st.count, "misses": st.misses, "unknown": st.unknown, "seconds": figures}
        return cls({"format": cls.FORMAT, "version": cls.VERSION, "name": name,
                    "taken": datetime.now(timezone.utc).isoformat(timespec="seconds"), "run": str(run.path),
                    "board": rig.get("board"), "rig": {k: rig.get(k) for k in BASELINE_IDENTITY}, "kinds": kinds})

    @classmethod
    def load(cls, path: str | Path) -> Baseline:
        import json

        try:
            return cls(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: cannot read the baseline ({e})") from None

    def save(self, path: str | Path) -> Path:
        import json

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.doc, indent=1, sort_keys=True) + "\n")
        return path

    @property
    def kinds(self) -> dict:
        return self.doc["kinds"]

    def identity_differences(self, run: Run) -> list[str]:
        rig = run.rig
        return [f"{k}: baseline {self.doc['rig'].get(k)!r}, run {rig.get(k)!r}" for k in BASELINE_IDENTITY
                if self.doc["rig"].get(k) != rig.get(k)]

    def value(self, kind: str, statistic: str) -> float | None:
        entry = self.kinds[kind]
        if not entry["count"]:
            return None
        if statistic.startswith("p"):
            statistic = f"p{float(statistic[1:]):g}"        # p99.90 is p99.9
        if statistic not in entry["seconds"]:
            raise InsufficientSamples(f"{kind}: the baseline has no {statistic} ({entry['count']} samples "
                                      "do not support it)")
        return entry["seconds"][statistic]

    def check(self, run: Run, rules: list[FailRule | str]) -> list[str]:
        """Lines for every rule the run breaks against this baseline (A), after its identity: another
        rig, gateware or firmware fails outright."""
        differences = self.identity_differences(run)
        if differences:
            return [f"the baseline was taken on another rig or gateware ({'; '.join(differences)}): take a new "
                    "baseline on this one"]
        return _judge(rules, self.kinds, run.kinds, self.value, lambda k, st: _statistic(run.stats(k), st))


# ---- the rig --------------------------------------------------------------------------------------------

def capture_settings(ts_hz: float, *, count: int | None = None, duration=None, deadline=None, mode: str = "dither",
                     period="100us", jitter="20us", mean=None, width="10 ticks", burst_count: int = 1,
                     burst_spacing="10 ticks", seed: int = 1, invert: bool = False, glitch: int = 0,
                     roles: dict | None = None, active_low=(), measures=(), no_stimulus: bool = False,
                     also_fire=(), on_rig: bool = False, raw: bool | None = None, interval_shift: int = 24,
                     outliers: dict | None = None, trigger: tuple | None = None, trigger_on_late: bool = False,
                     trigger_width=None, label: str = "", out_dir="runs", progress: bool = False,
                     default_count: int = 2000):
    """``capture.CaptureSettings`` from typed settings; durations in seconds or with a unit
    (``parse_duration``), ``trigger`` = (response "isr"/"task", time). Raises ValueError on a
    combination that cannot run."""
    from hilat.capture import CaptureSettings, StimulusSettings

    if count is not None and (not isinstance(count, int) or count <= 0):
        raise ValueError(f"count must be a whole number > 0, got {count!r}")
    values.stimulus_mode(mode)
    period_t = _ticks(period, ts_hz)
    probability = 0
    if mode == "random":
        if mean is None:
            raise ValueError("mode random needs mean (the mean interval)")
        mean_t = _ticks(mean, ts_hz)
        if mean_t <= period_t:
            raise ValueError("mean must be longer than period (the hold-off)")
        # interval = hold-off + geometric(p) failures: mean = P + (1-p)/p  =>  p = 1/(mean - P + 1)
        probability = min(int(round(2**32 / (mean_t - period_t + 1))), 2**32 - 1)
    if no_stimulus and not measures:
        raise ValueError("no_stimulus measures nothing by itself: give at least one measure")
    if raw and not on_rig:
        raise ValueError("raw goes with on_rig (without it a capture streams the raw edges anyway)")
    if (trigger_on_late or trigger_width is not None) and trigger is None:
        raise ValueError("trigger_on_late and trigger_width go with trigger")
    stim = StimulusSettings(mode=mode, period=period_t, jitter=_ticks(jitter, ts_hz) if mode == "dither" else 0,
                            width=_ticks(width, ts_hz), probability=probability, burst_count=burst_count,
                            burst_spacing=_ticks(burst_spacing, ts_hz), seed=seed, invert=invert)
    trig = None
    if trigger is not None:
        from hilat.engine import Trigger

        response, threshold = trigger
        trig = Trigger(threshold=_ticks(threshold, ts_hz), response=response,
                       width=_ticks(trigger_width if trigger_width is not None else "1us", ts_hz),
                       on_late=trigger_on_late)
    return CaptureSettings(on_rig=on_rig, raw=bool(raw) or not on_rig, engine_interval_shift=interval_shift,
                           outlier_thresholds={k: _ticks(t, ts_hz) for k, t in (outliers or {}).items()},
                           trigger=trig, roles=dict(roles or {}), active_low=list(active_low),
                           measures=list(measures), no_stimulus=no_stimulus, also_fire=list(also_fire),
                           count=count if count is not None else (None if duration is not None else default_count),
                           duration_ticks=_ticks(duration, ts_hz) if duration is not None else None,
                           deadline_ticks=_ticks(deadline, ts_hz) if deadline is not None else None,
                           glitch=glitch, label=label, out_dir=Path(out_dir), progress=progress, stimulus=stim)


class CaptureError(RuntimeError):
    """A capture that stopped on an error; ``run`` is what it captured (kept on disk)."""

    def __init__(self, message: str, run: Run | None):
        super().__init__(message)
        self.run = run


class Rig:
    """A rig by URL (``/dev/ttyUSB0``, ``socket://HOST:PORT``, ``rfc2217://HOST:PORT``, an Ethernet rig's
    ``udp://HOST[:PORT]``: its raw edges then come as a datagram stream, docs/ethernet.md), as a context
    manager: entering says HELLO and reads its identity; each ``capture`` opens the link for its run.

    ``calibration_dir``: where this rig's calibration is looked up (default ``$HILAT_CALIBRATION_DIR``
    or the user's config dir); ``calibrate=False`` applies none."""

    def __init__(self, url: str, *, baud: int | None = None, calibration_dir: str | Path | None = None,
                 calibrate: bool = True):
        self.url = url
        self.baud = baud
        self.calibration_dir = calibration_dir
        self.calibrate = calibrate
        self._ident = None
        self._status = None
        self._engine = None

    def _transport(self):
        from hilat.transport import DEFAULT_BAUDRATE, Transport

        return Transport(self.url, baudrate=self.baud or DEFAULT_BAUDRATE)

    def _session(self):
        from hilat.session import Session

        return Session(self.url, transport=self._transport())

    def open(self) -> Rig:
        from hilat import protocol as p

        with self._session() as session:
            self._ident = session.identity
            self._status = session.ask_status()
            self._engine = session.engine_stats() if self._ident.capabilities & p.CAP_ENGINE else None
        return self

    def close(self) -> None:
        pass

    def __enter__(self) -> Rig:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def identity(self) -> dict[str, Any]:
        """The rig's facts, as ``hilat info --json`` prints them."""
        from hilat import calibration, identity

        if self._ident is None:
            self.open()
        resolution = calibration.for_rig(self._ident, self._calibration_dir())
        return identity.describe(self._ident, self._status, self.url, resolution, self._engine)

    @property
    def ts_hz(self) -> float:
        if self._ident is None:
            self.open()
        return float(self._ident.ts_hz)

    def _calibration_dir(self):
        from hilat import calibration

        return calibration.resolve_dir(self.calibration_dir) if self.calibrate else None

    def capture(self, *, hlog_interval="10s", extra_meta: dict | None = None, **settings) -> Run:
        """Run stimuli and capture (``capture_settings`` names the settings), write the run directory
        under ``out_dir`` and return it read back. Raises ``CaptureError`` (with the partial run) when
        the capture stopped on an error, ``KeyboardInterrupt`` when interrupted (the run is kept)."""
        capture = self.capture_raw(hlog_interval=hlog_interval, extra_meta=extra_meta, **settings)
        run = Run(capture.run_dir) if capture.run_dir else None
        if capture.error:
            raise CaptureError(f"{capture.error} (what was captured is kept in {capture.run_dir})", run)
        if capture.interrupted:
            raise KeyboardInterrupt(f"capture interrupted; what was captured is kept in {capture.run_dir}")
        return run

    def capture_raw(self, *, hlog_interval="10s", extra_meta=None, no_calibration_reason=None, **settings):
        """The ``capture.Capture`` itself (the CLI prints its report and keeps its exit codes)."""
        from hilat.capture import Capture, plan

        with self._session() as session:
            self._ident = session.identity
            try:
                cs = capture_settings(session.identity.ts_hz, **settings)
                plan(cs, session.identity)
            except SettingsError:
                raise
            except ValueError as e:
                raise SettingsError(str(e)) from None
            if not self.calibrate:
                cs.no_calibration_reason = no_calibration_reason or "calibrate=False: none applied"
            else:
                cs.calibration_dir = self._calibration_dir()
            cs.hlog_interval_s = parse_duration(hlog_interval) if hlog_interval not in (0, "0", None) else 0.0
            return Capture(None, cs, extra_meta, session=session).run()

    def __repr__(self):
        return f"<Rig {self.url}>"


# ---- the simulated rig --------------------------------------------------------------------------------

class Simulation:
    """The simulated rig and DUT (Verilator), started by ``simulate``: ``url`` (and ``udp_url`` with
    Ethernet), ``rig()``, and what the DUT model injected (``injected()``, from its log)."""

    def __init__(self, process):
        self._process = process
        info = process.info
        self.url: str = info["url"]
        self.udp_url: str | None = info.get("udp_url")
        self.dut_log = Path(info["dut_log"])
        self.run_dir = Path(info["run_dir"])
        self.console = Path(info["console"]) if info.get("console") else None
        self.pid: int = info["pid"]
        self.sim_dir = Path(info["sim_dir"])

    def rig(self, **kwargs) -> Rig:
        return Rig(self.udp_url or self.url, **kwargs)

    def injected(self) -> list:
        """The latencies the DUT model injected so far (``hilat.simulator.read_dut_log`` rows)."""
        from hilat.simulator import read_dut_log

        return read_dut_log(self.dut_log)

    def wait(self) -> int:
        """Until the simulator stops (an interrupt, or it ends by itself)."""
        return self._process.wait()


class simulate:
    """``with hilat.simulate() as sim:`` starts the simulated rig and DUT model (built on first use,
    cached), stops it on exit. It runs from a clone of the repository only (``hilat.simulator``).
    ``dut``: DUT model settings ({"isr_base": 80, ...}); ``on_rig``: the build with the measurement
    engine; ``dut_model``/``dut_top``: a DUT model of your own; ``workdir``: where the simulator runs
    and its DUT log goes (default: a new temporary directory). Every other option of ``hilat sim`` by
    its ``hilat.simulator.SETTINGS`` name: ``samples_per_tick``, ``dut_cpu``, ``dut_firmware``,
    ``dut_cpu_clk_hz``, ``edge_clock_high_ps``, ``async_source_cycles``, ``ethernet``, ``trace``,
    ``port``, ``dut_log``, ``pps_log``, the calibration sources (``loopback``, ``pps_period``, ...).
    Refused settings raise ``SettingsError``; no simulated rig here, ``SimulatorUnavailable``."""

    def __init__(self, *, dut: dict | None = None, on_rig: bool = False, dut_model: str | Path | None = None,
                 dut_top: str = "hilat_dut_model", workdir: str | Path | None = None, **settings):
        from hilat.simulator import SETTINGS

        unknown = set(settings) - set(SETTINGS) - {"run_dir"}   # run_dir: the launcher's name of workdir
        if unknown:
            raise SettingsError(f"simulate(): unknown settings {', '.join(sorted(unknown))}")
        workdir = workdir or settings.pop("run_dir", None)
        self.settings = {**settings, "dut": dict(dut or {}), "on_rig": on_rig, "dut_top": dut_top,
                         "dut_model": str(Path(dut_model).resolve()) if dut_model else None,
                         "run_dir": str(Path(workdir).resolve()) if workdir else None}
        for path in ("dut_log", "pps_log"):
            if self.settings.get(path):
                self.settings[path] = str(Path(self.settings[path]).resolve())
        self._process = None

    def __enter__(self) -> Simulation:
        from hilat.simulator import SimulatorProcess, SimulatorSettingsError

        # While it runs (and builds), SIGTERM and SIGHUP, unless the program handles them itself,
        # raise hilat.shutdown.Terminated, a KeyboardInterrupt, so that leaving the with block stops
        # the simulator; were the program killed outright, the kernel stops it (hilat.shutdown).
        self._signals = shutdown.signals_stop()
        self._signals.__enter__()
        try:
            self._process = SimulatorProcess(self.settings).start()
        except SimulatorSettingsError as e:
            self._process = None
            self._signals.__exit__(None, None, None)
            raise SettingsError(str(e)) from None
        except BaseException:
            self._process = None
            self._signals.__exit__(None, None, None)
            raise
        return Simulation(self._process)

    def __exit__(self, *exc) -> None:
        try:
            if self._process is not None:
                self._process.stop()
                self._process = None
        finally:
            signals, self._signals = getattr(self, "_signals", None), None
            if signals is not None:
                signals.__exit__(None, None, None)
