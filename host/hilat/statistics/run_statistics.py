"""A run's statistics from the one source picked for it (docs/analysis.md, "One distribution").

``RunStatistics.of`` picks once: the rig's bins for an on-rig run, the streamed HDR aggregates for a
long run (or when asked), the exact samples otherwise; a capture hands over its own aggregator
(``of_aggregates``) so its summary reads nothing back. Every output of the run (the report, the API,
formats, comparisons, baselines, the pytest plugin) asks this object for a ``Distribution``.
"""

from __future__ import annotations

import json

import numpy as np

from hilat.analysis import MISSING
from hilat.engine import KINDS as ENGINE_KINDS
from hilat.engine import RigHistograms
from hilat.rundir.layout import BUILTIN_KINDS, RunError
from hilat.statistics.distribution import Distribution, WorstSample
from hilat.statistics.streaming import StreamingAggregator

# The subsets a report shows (the API also gives "tagged").
REPORT_SUBSETS = [("all", "all samples"), ("untagged", "excluding tagged samples")]

# Above this many edges a run's statistics stream (HDR percentiles) instead of pairing every edge at
# once (~100 bytes per edge).
EXACT_EDGE_LIMIT = 20_000_000

NOTES = {
    "exact": "exact",
    "hdr": ("hdr: median and percentiles from an HDR histogram, 3 significant digits (highest equivalent "
            "value); count, min, max, mean, std exact"),
    "rig": ("on-rig: median and percentiles from the engine's HdrHistogram bins (2 significant digits, highest "
            "equivalent value) and std from them (HdrHistogram's: bucket medians, population); count, min, max, "
            "mean exact (ENGINE_STATS)"),
}


class RunStatisticsError(RunError):
    """A run whose statistics cannot be read (an on-rig run without its engine.json)."""


def stream_aggregate(run, significant_figures=3):
    """A ``StreamingAggregator`` fed with every edge of ``run``, chunk by chunk (bounded memory)."""
    agg = StreamingAggregator(run.roles, run.deadline_mu, run.offset_mu, significant_figures=significant_figures,
                              measures=run.analysis_measures, builtin=run.builtin)
    for start, end, channels in run.gaps.items():
        agg.add_gap(start, end, channels)
    for chunk in run.iter_edges():
        agg.feed(*chunk)
    return agg.finish()


def use_hdr(run, hdr=None):
    """Whether the statistics of ``run`` stream: ``hdr`` when given, else when the run is long."""
    if hdr is not None:
        return hdr
    return run.edge_count > EXACT_EDGE_LIMIT


def _engine_results(run):
    try:
        doc = json.loads((run.path / "engine.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise RunStatisticsError(f"{run.path}: an on-rig run without a readable engine.json ({e})") from None
    return RigHistograms.from_json(doc)


class RunStatistics:
    """The statistics of one run: ``distribution(kind, subset)``, and the run-wide counts (stimuli,
    tagged windows, edges, late tasks, gaps, the worst sample of each kind, the stimulus accounting)."""

    def __init__(self, run, source, found=None, agg=None, rig=None, edges=None):
        self.run, self.source, self.note = run, source, NOTES[source]
        self._found, self._agg, self._rig = found, agg, rig
        self.mu_s = run.unit.mu_ns * 1e-9
        self._cache = {}
        if source == "exact":
            self.stimuli, self.task_before_isr = found.stimuli, found.task_before_isr
            self.tagged = {k: int((found.series[k].tag_in_window == 1).sum()) for k in found.kinds}
            self.edges, self.gap_count = int(run.edge_count), len(run.gaps)
            self.worst = self._exact_worst(found)
        elif source == "hdr":
            self.stimuli, self.task_before_isr = agg.stimuli, getattr(agg, "task_before_isr", 0)
            self.tagged, self.edges, self.gap_count = dict(agg.tagged), agg.edges, agg.gap_count
            self.worst = {k: dict(w) for k, w in agg.worst.items()}
        else:
            # The engine pairs on the rig, before any link: no gaps, nothing unknown.
            self.stimuli = rig.stats.samples if rig.stats is not None else 0
            self.task_before_isr, self.gap_count = 0, 0
            self.edges = int(run.edge_count if edges is None else edges)
            self.tagged = {k: self._rig_count(k, "tagged") for k in ENGINE_KINDS}
            self.worst = self._rig_worst(rig, run.units_per_tick)
        self.accounting = None if source == "rig" else self._accounting()

    # ---- picking the source, once ------------------------------------------------------------------

    @classmethod
    def of(cls, run, hdr=None, source=None) -> RunStatistics:
        """The run's statistics from its own files: by default the engine's bins (on-rig), else the
        streamed aggregates (``hdr``, or a run over ``EXACT_EDGE_LIMIT`` edges) or the exact samples.
        ``source`` ("exact", "hdr", "rig") asks for one; an on-rig run has the other two only when
        the link carried all its raw edges beside the engine (``--raw``)."""
        if source is None:
            source = "rig" if run.on_rig and hdr is None else ("hdr" if use_hdr(run, hdr) else "exact")
        if source not in NOTES:
            raise ValueError(f"a statistics source is one of {', '.join(NOTES)}, got {source!r}")
        if source == "rig":
            if not run.on_rig:
                raise RunStatisticsError(f"{run.path}: not an on-rig run: it has no rig bins")
            return cls(run, "rig", rig=_engine_results(run))
        if run.on_rig and (run.meta.get("results") or {}).get("raw") != "complete":
            raise RunStatisticsError(f"{run.path}: an on-rig run without all its raw edges has only the rig's "
                                     "bins (capture with --raw for the host's pairing beside them)")
        if source == "hdr":
            return cls(run, "hdr", agg=stream_aggregate(run))
        return cls(run, "exact", found=run.measurements)

    @classmethod
    def of_aggregates(cls, run, aggregates, edges=None) -> RunStatistics:
        """A capture's statistics from what it aggregated while running: its ``StreamingAggregator``
        or, on-rig, its ``RigHistograms`` (``edges``: the raw edges it wrote beside them)."""
        if isinstance(aggregates, RunStatistics):
            return aggregates
        if isinstance(aggregates, RigHistograms):
            return cls(run, "rig", rig=aggregates, edges=edges)
        return cls(run, "hdr", agg=aggregates)

    # ---- one distribution per kind and subset -------------------------------------------------------

    @property
    def kinds(self):
        return list(self.run.kind_titles) if self.source != "rig" else list(ENGINE_KINDS)

    def distribution(self, kind, subset="all") -> Distribution:
        """The ``Distribution`` of ``kind`` over ``subset`` ("all", "untagged", "tagged"). For the
        stimulus kinds, stimuli the generator fired whose edge was lost (``accounting["unseen"]``)
        are unknown windows of "all" and "untagged"."""
        key = (kind, subset)
        if key not in self._cache:
            d = self._distribution(kind, subset, self.run.kind_titles.get(kind, kind))
            unseen = self.accounting["unseen"] if self.accounting else 0
            if unseen and kind in BUILTIN_KINDS and subset != "tagged":
                d.unknown += unseen
                d.starts += unseen
            self._cache[key] = d
        return self._cache[key]

    def _distribution(self, kind, subset, title):
        if self.source == "exact":
            return Distribution.of_series(kind, self._found.subset(kind, subset), self.mu_s, title=title,
                                          subset=subset)
        if self.source == "hdr":
            if subset == "tagged":
                raise ValueError(f"{self.run.path}: a streamed (long) run keeps all and untagged, not tagged alone")
            return self._agg.distribution(subset, kind, self.mu_s, title)
        # The engine keeps the single worst sample of all.
        w = self.worst.get(kind) if subset == "all" else None
        worst = [WorstSample(w["start_mu"], w["mu"], w["mu"] * self.mu_s, w["tagged"], w["index"])] if w else []
        rig = self._rig
        exact = rig.exact(kind, subset)
        n = self._rig_count(kind, subset)
        # The engine counts misses, duplicates and below-range samples for all samples only.
        whole = subset == "all" and exact is not None
        return Distribution.rig(kind, self.mu_s, rig.counts(kind, subset), exact, self.run.units_per_tick,
                                title=title, subset=subset, count=n,
                                starts=n + (exact["misses"] + exact["below"] if whole else 0),
                                misses=exact["misses"] if whole else 0,
                                duplicates=exact["duplicates"] if whole else 0, worst=worst)

    def _rig_count(self, kind, subset):
        """Samples of one kind and subset: the engine's exact count, else the bins' total."""
        exact = self._rig.exact(kind, subset)
        return exact["count"] if exact is not None else int(self._rig.counts(kind, subset).sum())

    # ---- run-wide figures ----------------------------------------------------------------------------

    @staticmethod
    def _exact_worst(found):
        worst = {}
        for kind in found.kinds:
            series = found.series[kind]
            lat = np.where(series.unknown == 1, MISSING, series.values)
            if (lat != MISSING).any():
                i = int(np.argmax(lat))
                worst[kind] = {"index": i, "start_mu": int(series.start_mu[i]), "mu": int(lat[i]),
                               "tagged": bool(series.tag_in_window[i] == 1)}
        return worst

    @staticmethod
    def _rig_worst(rig, u):
        worst = {}
        for k, kind in enumerate(ENGINE_KINDS):
            exact, w = rig.exact(kind), rig.worst[k]
            if w is not None and exact is not None and w[0] == exact["max"]:
                worst[kind] = {"index": None, "start_mu": w[1] * u, "mu": w[0] * u, "tagged": w[2]}
        return worst

    def _accounting(self):
        """The run's stimuli as the generator fired them and as they were judged: {fired, seen, unseen,
        measured, unknown} (fired None for a rig that does not count). Every fired stimulus is a sample,
        a miss or unknown: those whose edge was dropped are unknown for every built-in kind, though
        their ticks are gone (``unseen``). ``measured``/``unknown``: of stimulus -> ISR entry."""
        run = self.run
        if not run.builtin:
            return None
        fired_list = (run.meta.get("counters") or {}).get("rig_stimuli_fired")
        stim = run.roles.stimulus
        fired = int(fired_list[stim]) if fired_list and stim < len(fired_list) else None
        unseen = max(fired - int(self.stimuli), 0) if fired is not None else 0
        first = BUILTIN_KINDS[0]
        d = self._distribution(first, "all", first) if first in run.kind_titles else None
        return {"fired": fired, "seen": int(self.stimuli), "unseen": unseen,
                "measured": (d.count + d.misses) if d else 0, "unknown": (d.unknown if d else 0) + unseen}

    def rows(self, mu_ns):
        """{subset: {kind: the report's row}} of the report's subsets (all, untagged)."""
        return {name: {kind: self.distribution(kind, name).row(mu_ns) for kind in self.kinds}
                for name, _title in REPORT_SUBSETS}
