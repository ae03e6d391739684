"""What to make of what the engine sends: ENGINE_BINS / ENGINE_OUTLIERS / ENGINE_STATS frames in,
closed intervals out, run totals per kind and tag, and the check of the bins against the
engine's exact statistics."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Callable, NamedTuple

import numpy as np

from hilat.engine.bins import BINS, KINDS, MAX_COUNT, OVERFLOW_BIN, TAGS, bin_of, ns_histogram, tick_histogram
from hilat.hdr import HdrHistogram
from hilat.link import protocol as p
from hilat.rundir.layout import OUTLIER_DTYPE

# ---- collecting -------------------------------------------------------------------------------------------


class EngineInterval(NamedTuple):
    """One interval of the rig: ``number`` (start tick >> shift, unwrapped), its ticks [start, end),
    ``counts[kind, tag, bin]`` (bin OVERFLOW_BIN: beyond 2**24 ticks), and whether every kind
    closed it (False: handed out at the end or to bound memory, some of its bins may be missing)."""

    number: int
    start_tick: int
    end_tick: int
    counts: np.ndarray
    complete: bool


@dataclass
class _Open:
    number: int
    counts: np.ndarray = field(default_factory=lambda: np.zeros((len(KINDS), len(TAGS), BINS), np.int64))
    closed: np.ndarray = field(default_factory=lambda: np.zeros(len(KINDS), bool))


class RigHistograms:
    """The engine's output, frame by frame (``feed``), into intervals and run totals.

    An interval is complete when every kind has sent its close; until then its bins are held (only
    open intervals are: at most ``MAX_OPEN``, the oldest handed out incomplete beyond that), then it
    goes to ``on_interval`` (an ``EngineInterval``), to ``hlog/rig.hlog`` and into the run totals.
    Interval numbers come as their low 32 bits: each is taken as the one nearest the last seen
    (``origin_tick`` >> shift at first). With ``run_dir``, ``hlog/rig.hlog`` (values in ns as the
    capture's, one line per kind and, ``with_tag``, per kind's tagged samples; a bin logged at its
    highest equivalent value, the overflow bin as out of range) and ``outliers.bin`` are written as
    the frames come. Nothing here raises on what the rig sends: anomalies are counted and
    ``problems()`` says them."""

    MAX_OPEN = 16

    def __init__(self, interval_shift: int, ts_hz: float, *, origin_tick: int = 0,
                 start_time: float | None = None, with_tag: bool = True,
                 on_interval: Callable[[EngineInterval], None] | None = None,
                 on_log_lines: Callable[[list, float], None] | None = None,
                 on_outliers: Callable[[np.ndarray], None] | None = None):
        self.shift = int(interval_shift)
        self.ts_hz = float(ts_hz)
        self.origin_tick = int(origin_tick)
        self.with_tag = with_tag
        self.on_interval = on_interval
        # Where the intervals' log lines and the outlier records go (the run writer's hlog/rig.hlog
        # and outliers.bin): this collector writes no file.
        self.on_log_lines, self.on_outliers = on_log_lines, on_outliers
        self.end_tick: int | None = None     # set when known (the capture's end): clips the last interval
        self.totals = np.zeros((len(KINDS), len(TAGS), BINS), np.int64)  # run totals of every interval
        self.stats: p.EngineStats | None = None  # the last ENGINE_STATS
        self.intervals_complete = 0
        self.intervals_incomplete = 0
        self.late_bins = 0           # bins of a kind and interval after that kind's close of it
        self.duplicate_closes = 0
        self.bad_counts = 0          # bins whose count no 35-bit counter holds (dropped)
        self.outliers = 0
        # Per kind, the largest value among the outlier records: (ticks, start tick, tagged) or None.
        self.worst: list[tuple[int, int, bool] | None] = [None] * len(KINDS)
        self._open: dict[int, _Open] = {}
        self._last_done: int | None = None
        self._reference = self.origin_tick >> self.shift
        self.start_time = time.time() if start_time is None else start_time

    # ---- frames in ----

    def feed(self, msg: p.Message) -> None:
        """One engine message (ENGINE_BINS, ENGINE_OUTLIERS or ENGINE_STATS)."""
        if isinstance(msg, p.EngineBins):
            self._entries(msg.entries)
        elif isinstance(msg, p.EngineOutliers):
            self._outlier_records(msg.records)
        elif isinstance(msg, p.EngineStats):
            self.stats = msg
        else:
            raise TypeError(f"not an engine message: {msg.NAME}")

    def _entries(self, entries) -> None:
        if not entries:
            return
        table = np.array(entries, dtype=np.uint64).reshape(-1, 6)  # type, kind, tag, interval, bin, count
        bad = table[:, 5] > MAX_COUNT
        if bad.any():
            self.bad_counts += int(bad.sum())
            table = table[~bad]
        table = table.astype(np.int64)
        low = table[:, 3]
        # The interval nearest the last one seen, whatever the low 32 bits wrapped past.
        number = self._reference + ((low - (self._reference & 0xFFFFFFFF) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        if len(number):
            self._reference = int(number[-1])
        # In arrival order: the bins up to a close, then that close.
        lo = 0
        for c in [*np.flatnonzero(table[:, 0] == p.ENGINE_ENTRY_CLOSE).tolist(), len(table)]:
            if c > lo:
                self._bins(table[lo:c], number[lo:c])
            if c < len(table):
                self._close(int(table[c, 1]), int(number[c]))
            lo = c + 1

    def _bins(self, rows, numbers) -> None:
        for n in np.unique(numbers).tolist():  # one or two intervals a frame
            sel = rows[numbers == n]
            kind, tag, bin_, count = sel[:, 1], sel[:, 2], sel[:, 4], sel[:, 5]
            interval = self._open.get(n)
            if interval is None and self._last_done is not None and n <= self._last_done:
                # Its interval is out already: the totals take it, its hlog line lacks it.
                self.late_bins += len(sel)
                np.add.at(self.totals, (kind, tag, bin_), count)
                continue
            interval = interval or self._open_interval(n)
            self.late_bins += int(interval.closed[kind].sum())
            np.add.at(interval.counts, (kind, tag, bin_), count)

    def _close(self, kind: int, n: int) -> None:
        interval = self._open.get(n)
        if interval is None:
            if self._last_done is not None and n <= self._last_done:
                self.duplicate_closes += 1
                return
            interval = self._open_interval(n)  # an interval none of whose bins came first
        if interval.closed[kind]:
            self.duplicate_closes += 1
            return
        interval.closed[kind] = True
        if interval.closed.all():
            self._hand_out(interval)

    def _open_interval(self, n: int) -> _Open:
        if len(self._open) >= self.MAX_OPEN:  # closes lost on the way: bound memory
            self._hand_out(self._open[min(self._open)])
        interval = self._open[n] = _Open(n)
        return interval

    def _hand_out(self, interval: _Open) -> None:
        del self._open[interval.number]
        complete = bool(interval.closed.all())
        if complete:
            self.intervals_complete += 1
        else:
            self.intervals_incomplete += 1
        self._last_done = interval.number if self._last_done is None else max(self._last_done, interval.number)
        self.totals += interval.counts
        start = interval.number << self.shift
        out = EngineInterval(interval.number, start, start + (1 << self.shift), interval.counts, complete)
        if self.on_log_lines is not None:
            self.on_log_lines(self.log_lines(out), self.start_time)
        if self.on_interval is not None:
            self.on_interval(out)

    def _outlier_records(self, records) -> None:
        if not records:
            return
        self.outliers += len(records)
        table = np.array(records, dtype=np.uint64).reshape(-1, 5)
        for k in range(len(KINDS)):
            values = table[:, 2 + k].astype(np.int64)
            values[values >= p.OUTLIER_BELOW] = -1  # a miss or below range: no value
            i = int(np.argmax(values))
            if values[i] >= 0 and (self.worst[k] is None or values[i] > self.worst[k][0]):
                self.worst[k] = (int(values[i]), int(table[i, 0]), bool(table[i, 1] & p.OUTLIER_TAG_IN_WINDOW))
        if self.on_outliers is not None:
            items = np.empty(len(table), OUTLIER_DTYPE)
            items["start_tick"], items["flags"], items["values"] = table[:, 0], table[:, 1], table[:, 2:]
            self.on_outliers(items)

    # ---- rig.hlog ----

    def log_lines(self, interval: EngineInterval) -> list:
        """The interval's lines of the rig's interval log: [(start_s, length_s, tag, HdrHistogram in
        ns)], one per kind with samples and, ``with_tag``, per kind's tagged samples; a bin at its
        highest equivalent value, the overflow bin as out of range."""
        start = max(interval.start_tick, self.origin_tick)
        end = interval.end_tick if self.end_tick is None else max(min(interval.end_tick, self.end_tick), start + 1)
        start_s, length_s = (start - self.origin_tick) / self.ts_hz, (end - start) / self.ts_hz
        lines = []
        for k, kind in enumerate(KINDS):
            parts = [(kind, interval.counts[k].sum(axis=0))]
            if self.with_tag:
                parts.append((f"{kind}.tagged", interval.counts[k, 1]))
            lines += [(start_s, length_s, tag, ns_histogram(counts, 1e9 / self.ts_hz)) for tag, counts in parts
                      if counts.any()]
        return lines

    # ---- the end ----

    def finish(self) -> RigHistograms:
        """Hand out the intervals still open (incomplete: some kind never closed them)."""
        for n in sorted(self._open):
            self._hand_out(self._open[n])
        return self

    def counts(self, kind: str, subset: str = "all") -> np.ndarray:
        """Run totals of one kind, bin by bin (OVERFLOW_BIN last): subset all, untagged or tagged."""
        k = KINDS.index(kind)
        return self.totals[k].sum(axis=0) if subset == "all" else self.totals[k, TAGS.index(subset)].copy()

    def histogram(self, kind: str, subset: str = "all") -> HdrHistogram:
        """The run's histogram of one kind, in ticks; the overflow bin counted as out of range above."""
        return tick_histogram(self.counts(kind, subset))

    def exact(self, kind: str, subset: str = "all") -> dict:
        """The engine's exact figures of one kind and subset (ENGINE_STATS): count, min, max, sum,
        and for subset all the misses, duplicates and below-range samples; None without ENGINE_STATS."""
        if self.stats is None:
            return None
        k = self.stats.kinds[KINDS.index(kind)]
        parts = {"untagged": [(k.untagged_count, k.untagged_min, k.untagged_max, k.untagged_sum)],
                 "tagged": [(k.tagged_count, k.tagged_min, k.tagged_max, k.tagged_sum)]}
        parts["all"] = parts["untagged"] + parts["tagged"]
        present = [x for x in parts[subset] if x[0]]
        out = {"count": sum(x[0] for x in present), "min": min((x[1] for x in present), default=None),
               "max": max((x[2] for x in present), default=None), "sum": sum(x[3] for x in present)}
        if subset == "all":
            out.update(misses=k.misses, duplicates=k.duplicates, below=k.below)
        return out

    def problems(self) -> list[str]:
        """What a reader must know next to the figures: anything the bins and the exact statistics
        disagree on, anything lost or out of order. Empty when all is consistent."""
        out = []
        if self._open:
            out.append(f"{len(self._open)} engine intervals still open")
        if self.intervals_incomplete:
            out.append(f"{self.intervals_incomplete} engine intervals were never closed by every kind "
                       "(frames lost?): their bins are in the totals")
        for what, n in (("bins came after their interval's close (kept in the totals, missing from rig.hlog)",
                         self.late_bins),
                        ("duplicate interval closes", self.duplicate_closes),
                        ("bins with a count beyond the engine's 35-bit counter (dropped)", self.bad_counts)):
            if n:
                out.append(f"{n} {what}")
        stats = self.stats
        if stats is None:
            out.append("no ENGINE_STATS: the bins are not checked against the engine's exact counts")
            return out
        for what, n in (("samples lost in the engine (not binned)", stats.samples_lost),
                        ("bins lost in the engine (bins FIFO full)", stats.bins_lost),
                        ("outlier records lost in the engine", stats.outliers_lost)):
            if n:
                out.append(f"LOST: {n} {what}")
        if stats.bins != BINS:
            out.append(f"the engine has {stats.bins} bins per histogram, this host {BINS}: the bins may be misread")
        for kind in KINDS:
            for subset in TAGS:
                exact, counts = self.exact(kind, subset), self.counts(kind, subset)
                binned = int(counts.sum())
                if binned != exact["count"]:
                    out.append(f"{kind} {subset}: {binned} samples in the bins, {exact['count']} counted by the "
                               "engine")
                elif binned and (bin_of(exact["min"]) != np.flatnonzero(counts)[0]
                                 or bin_of(exact["max"]) != np.flatnonzero(counts)[-1]):
                    out.append(f"{kind} {subset}: min {exact['min']} / max {exact['max']} ticks are not in the "
                               "lowest / highest bin")
            k = self.stats.kinds[KINDS.index(kind)]
            accounted = self.exact(kind)["count"] + k.misses + k.below
            if not stats.samples_lost and accounted != stats.samples:
                out.append(f"{kind}: {accounted} samples binned, missed or below range, of {stats.samples} windows")
        return out


    def notes(self) -> list[str]:
        """What a reader must know that is no fault: samples beyond the bins' range."""
        out = []
        for kind in KINDS:
            n = int(self.counts(kind)[OVERFLOW_BIN])
            if n:
                out.append(f"{n} {kind} samples of 2**24 ticks or more (the overflow bin): in the count, min, max "
                           "and mean; a percentile that falls among them is not known ('-')")
        return out

    # ---- kept in the run directory (engine.json) ----

    def to_json(self) -> dict:
        """The run's results (totals as nonzero [bin, count] lists, ENGINE_STATS, counters and
        problems), for ``from_json``."""
        stats = self.stats
        return {
            "interval_shift": self.shift, "ts_hz": self.ts_hz, "origin_tick": self.origin_tick,
            "intervals_complete": self.intervals_complete, "intervals_incomplete": self.intervals_incomplete,
            "late_bins": self.late_bins, "duplicate_closes": self.duplicate_closes, "bad_counts": self.bad_counts,
            "outliers": self.outliers, "worst": self.worst,
            "stats": None if stats is None else {**{f.name: getattr(stats, f.name) for f in fields(stats)},
                                                 "kinds": [k._asdict() for k in stats.kinds]},
            "bins": {kind: {tag: np.stack([np.flatnonzero(c), c[np.flatnonzero(c)]], axis=1).tolist()
                            for tag, c in zip(TAGS, self.totals[k])} for k, kind in enumerate(KINDS)},
            "problems": self.problems(), "notes": self.notes(),
        }

    @classmethod
    def from_json(cls, doc: dict) -> RigHistograms:
        """The results ``to_json`` kept, finished (no file is written)."""
        rig = cls(doc["interval_shift"], doc["ts_hz"], origin_tick=doc["origin_tick"])
        for name in ("intervals_complete", "intervals_incomplete", "late_bins", "duplicate_closes", "bad_counts",
                     "outliers"):
            setattr(rig, name, int(doc[name]))
        rig.worst = [None if w is None else tuple(w) for w in doc["worst"]]
        if doc["stats"] is not None:
            fields = {f: v for f, v in doc["stats"].items() if f != "kinds"}
            rig.stats = p.EngineStats(**fields, kinds=[p.EngineKindStats(**k) for k in doc["stats"]["kinds"]])
        for k, kind in enumerate(KINDS):
            for t, tag in enumerate(TAGS):
                pairs = np.asarray(doc["bins"][kind][tag], np.int64).reshape(-1, 2)
                rig.totals[k, t, pairs[:, 0]] = pairs[:, 1]
        return rig
