"""A run directory read back (``Run``, ``load``): part of ``hilat.api`` (its docstring has the whole)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from hilat.api.stats import SUBSETS
from hilat.reports import report
from hilat.rundir import reader
from hilat.statistics.distribution import Distribution
from hilat.statistics.run_statistics import RunStatistics


class Run(reader.Run):
    """A run directory (``hilat capture``'s output) as the reader gives it (``rundir.reader.Run``),
    plus its statistics in seconds: one ``Distribution`` per kind and subset, from the one source
    the run's statistics picked (``RunStatistics``: the rig's bins, the streamed aggregates or the
    exact samples). Made by ``load`` (or ``hilat.load``)."""

    _statistics: RunStatistics | None = None
    _source: str | None = None

    @property
    def statistics(self) -> RunStatistics:
        """The run's statistics, its source picked once (the report of this run reads the same)."""
        if self._statistics is None:
            self._statistics = RunStatistics.of(self, source=self._source)
        return self._statistics

    @property
    def kinds(self) -> dict[str, str]:
        """{kind: title} of every measurement kind of the run, in report order."""
        return dict(self.kind_titles)

    @property
    def mu_s(self) -> float:
        """One unit of the run's values (``*_mu``) in seconds: a tick, or a sub-tick (docs/subtick.md)."""
        return self.unit.mu_ns * 1e-9

    @property
    def rig(self) -> dict:
        """The rig's identity as the run recorded it (board, gateware, firmware, clocks...)."""
        ident = dict(self.meta.get("rig") or {})
        board, _, git_hash = str(ident.get("gateware", "")).partition(" ")
        ident["board"] = board if git_hash else None
        return ident

    def stats(self, kind: str, subset: str = "all") -> Distribution:
        """The ``Distribution`` of ``kind`` (see ``kinds``) over ``subset``: "all", "untagged"
        (windows that never saw the tag; a window whose tag a gap hid is unknown there) or "tagged".

        For the stimulus kinds, stimuli the rig's generator fired whose edge was lost (``unseen`` in
        ``stimuli_accounting``) are unknown windows of "all" and "untagged", as in the report."""
        if kind not in self.kind_titles:
            raise KeyError(f"the run has no kind {kind!r} (kinds: {', '.join(self.kind_titles)})")
        if subset not in SUBSETS:
            raise ValueError(f"subset is one of {', '.join(SUBSETS)}, got {subset!r}")
        return self.statistics.distribution(kind, subset)

    @property
    def stimuli_accounting(self) -> dict | None:
        """The run's stimuli as summary.json states them: {fired, seen, unseen, measured, unknown} of
        stimulus -> ISR entry: every stimulus fired is measured (a sample or a miss) or unknown (a gap
        touched its window, or its edge was lost). ``fired`` is None on a rig that does not count; the
        whole is None for an on-rig run (the engine counts what it paired: nothing is unknown) or one
        without a stimulus."""
        return self.statistics.accounting

    def __iter__(self) -> Iterator[Distribution]:
        return (self.stats(k) for k in self.kinds)

    def report(self, format: str = "text") -> str:
        """The report (``hilat report``) in ``format``: text, markdown, json or csv."""
        return report.format_report(report.build_report([self]), format)

    def __repr__(self):
        return f"<Run {self.label!r} at {self.path}: {', '.join(self.kinds)}>"


def load(path: str | Path, source: str | None = None) -> Run:
    """A run directory read back (``rundir.layout.RunError`` if it cannot be read). ``source``: the
    statistics' source, "exact", "hdr" or "rig" (default: the rig's bins for an on-rig run, else
    exact samples, streamed for a long run; ``Stats.resolution`` says which)."""
    run = reader.load_run(Path(path), cls=Run)
    run._source = source
    return run
