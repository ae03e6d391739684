"""A run directory read back (``Run``, ``load``): part of ``hilat.api`` (its docstring has the whole)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from hilat import analysis
from hilat.api.stats import SUBSETS, Stats, WorstSample

# ---- a run -------------------------------------------------------------------------------------------

class Run:
    """A run directory (``hilat capture``'s output), read back: its kinds and their statistics."""

    def __init__(self, path: str | Path):
        from hilat.rundir.reader import load_run

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
            from hilat.reports import report

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
            from hilat.reports.report import BUILTIN_KINDS

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
            from hilat.reports import report

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
        from hilat.reports import report

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
        from hilat.reports import report

        return report.format_report(report.build_report([self._run]), format)

    def compare(self, other: Run):
        """This run against ``other`` (``hilat.api.compare``: a ``Comparison``)."""
        from hilat.api.compare import compare  # compare.py reads runs: it imports this module

        return compare(self, other)

    def __repr__(self):
        return f"<Run {self.label!r} at {self.path}: {', '.join(self.kinds)}>"


def load(path: str | Path) -> Run:
    """A run directory read back (``layout.RunError`` if it cannot be read)."""
    return Run(path)
