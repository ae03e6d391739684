"""The rig's measurement engine, host side (docs/engine.md): what to ask of it, what to make of what it sends.

The engine pairs and bins on the rig; the host only configures it and collects. Layers, bottom up:

- the bins: ``ENGINE_HDR`` is the HdrHistogram whose counts-array index the rig computes
  (``bin_of``), so the host adds the rig's counts at their index, never re-binning; bin
  ``OVERFLOW_BIN`` counts values beyond that histogram's range;
- ``EngineConfig``: the capture's roles and settings, as the ENGINE_CONFIG message;
- ``RigHistograms``: ENGINE_BINS / ENGINE_OUTLIERS / ENGINE_STATS frames in, closed intervals out
  (a callback and ``hlog/rig.hlog``), run totals per kind and tag, ``outliers.bin``, and the check
  of the bins against the engine's exact statistics;
- ``RigAggregates``: those results in the shape of ``aggregate.StreamingAggregator``, so the
  report (``report.build_report(..., aggregates=...)``) renders an on-rig run as any other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from hilat import analysis
from hilat.hdr import HdrHistogram, HlogWriter
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


def deadline_limit(interval_shift: int) -> int:
    """The longest deadline (ticks) the engine takes at ``interval_shift``: the engine holds two
    intervals per bank, so no window may stay open across two interval boundaries (docs/engine.md,
    "Intervals without stopping"). The firmware refuses a deadline of 0 or above it."""
    return (1 << interval_shift) - 2 * SWEEP_TICKS


def shift_for_deadline(deadline: int) -> int | None:
    """The smallest interval shift whose deadline limit takes ``deadline`` ticks (None: none does)."""
    return next((s for s in range(1, INTERVAL_SHIFT_MAX + 1) if deadline_limit(s) >= deadline), None)


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


# ---- configuration ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trigger:
    """The trigger pin: a pulse of ``width`` ticks when ``response`` ("isr" or "task") has not come
    ``threshold`` ticks after the stimulus (and, ``on_late``, when it then comes)."""

    threshold: int
    response: str = "isr"
    width: int = 1
    on_late: bool = False


@dataclass(frozen=True)
class EngineConfig:
    """What the engine pairs and how (docs/engine.md, "Pairing"). Roles are (channel, level after
    the active edge); ``deadline``: a window runs to the next start or this many ticks, 1 ..
    ``deadline_limit(interval_shift)`` (None: that limit, the longest the engine takes); ``offset``:
    the calibrated rig offset in ticks; ``thresholds``: per kind, the value above which a sample is an
    outlier record (None: never); ``raw``: raw edges (EVENTS) as well."""

    start: tuple[int, int]
    isr: tuple[int, int]
    task: tuple[int, int]
    tag: tuple[int, int] | None = None
    deadline: int | None = None
    offset: int = 0
    interval_shift: int = 24
    thresholds: tuple = (None, None, None)
    trigger: Trigger | None = None
    raw: bool = False

    def __post_init__(self):
        if self.deadline is None:
            object.__setattr__(self, "deadline", deadline_limit(self.interval_shift))

    @classmethod
    def from_roles(cls, roles: analysis.Channels, **settings) -> EngineConfig:
        """The engine's roles from the capture's (``analysis.Channels``), each at its active level."""
        missing = [role for role in ("isr", "task") if roles.channel_of(role) is None]
        if missing:
            raise ValueError("the engine pairs the stimulus with an ISR and a task channel: no "
                             f"{' and no '.join(missing)} channel on this rig (give --role)")

        def role(channel):
            return channel, roles.active_level(channel)
        tag = None if roles.tag is None else role(roles.tag)
        return cls(start=role(roles.stimulus), isr=role(roles.isr), task=role(roles.task), tag=tag, **settings)

    @property
    def interval_ticks(self) -> int:
        return 1 << self.interval_shift

    def check_limits(self, stats: p.EngineStats) -> None:
        """Raise ValueError naming a setting below the engine's limits (its ENGINE_STATS)."""
        if self.interval_shift < stats.interval_shift_min:
            raise ValueError(f"interval shift {self.interval_shift}: the engine takes {stats.interval_shift_min} "
                             "at least")
        if self.deadline < stats.min_spacing:
            raise ValueError(f"deadline {self.deadline} ticks: the engine takes {stats.min_spacing} at least")

    def message(self) -> p.EngineConfig:
        """The ENGINE_CONFIG message; ValueError names a setting the wire cannot carry."""
        for name, value, top in (("deadline", self.deadline, 0xFFFFFFFF), ("offset", self.offset, 0xFFFF),
                                 ("interval shift", self.interval_shift, 63)):
            if not 0 <= value <= top:
                raise ValueError(f"engine {name} {value} out of 0..{top}")
        limit = deadline_limit(self.interval_shift)
        if not 0 < self.deadline <= limit:
            raise ValueError(f"engine deadline {self.deadline} ticks out of 1..{limit} (the limit at interval "
                             f"shift {self.interval_shift}: 2**shift - 2 sweeps of {SWEEP_TICKS} ticks)")
        thresholds = [p.ENGINE_NEVER if t is None else int(t) for t in self.thresholds]
        if len(thresholds) != len(KINDS) or not all(0 <= t <= p.ENGINE_NEVER for t in thresholds):
            raise ValueError(f"engine thresholds {self.thresholds}: one per kind, ticks below 2**32 - 1, or None")
        flags = p.ENGINE_ENABLE | (p.ENGINE_RAW if self.raw else 0)
        trigger = self.trigger
        if trigger is not None:
            if trigger.response not in ("isr", "task") or not 1 <= trigger.width <= 0xFFFF \
                    or not 0 < trigger.threshold <= 0xFFFFFFFF:
                raise ValueError(f"trigger {trigger}: response isr or task, width 1..65535, threshold 1..2**32-1")
            flags |= p.ENGINE_TRIGGER_ON_LATE if trigger.on_late else 0
        tag_channel, tag_level = self.tag if self.tag is not None else (p.ENGINE_NO_TAG, 1)
        return p.EngineConfig(
            flags, *self.start, *self.isr, *self.task, tag_channel, tag_level, self.deadline, self.offset,
            self.interval_shift, thresholds,
            p.ENGINE_TRIGGER_TASK if trigger is not None and trigger.response == "task" else p.ENGINE_TRIGGER_ISR,
            trigger.threshold if trigger is not None else 0, trigger.width if trigger is not None else 0)


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

    def __init__(self, interval_shift: int, ts_hz: float, *, run_dir: Path | None = None, origin_tick: int = 0,
                 start_time: float | None = None, with_tag: bool = True,
                 on_interval: Callable[[EngineInterval], None] | None = None):
        self.shift = int(interval_shift)
        self.ts_hz = float(ts_hz)
        self.origin_tick = int(origin_tick)
        self.with_tag = with_tag
        self.on_interval = on_interval
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
        self._hlog = self._outliers = None
        if run_dir is not None:
            from hilat.rundir.layout import OUTLIER_DTYPE, OUTLIERS_MAGIC
            from hilat.rundir.stores import StoreAppender

            (Path(run_dir) / "hlog").mkdir(parents=True, exist_ok=True)
            start_time = time.time() if start_time is None else start_time
            self._hlog = HlogWriter(Path(run_dir) / "hlog" / "rig.hlog", start_time=start_time, base_time=start_time,
                                    max_value_unit_ratio=1e6,
                                    comments=["hilat on-rig engine: bins at their highest equivalent value, in ns"])
            self._outliers = StoreAppender(Path(run_dir) / "outliers.bin", OUTLIERS_MAGIC, OUTLIER_DTYPE)
            self._outlier_dtype = OUTLIER_DTYPE

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
        if self._hlog is not None:
            self._log(out)
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
        if self._outliers is not None:
            items = np.empty(len(table), self._outlier_dtype)
            items["start_tick"], items["flags"], items["values"] = table[:, 0], table[:, 1], table[:, 2:]
            self._outliers.append(items)

    # ---- rig.hlog ----

    def _log(self, interval: EngineInterval) -> None:
        start = max(interval.start_tick, self.origin_tick)
        end = interval.end_tick if self.end_tick is None else max(min(interval.end_tick, self.end_tick), start + 1)
        start_s, length_s = (start - self.origin_tick) / self.ts_hz, (end - start) / self.ts_hz
        for k, kind in enumerate(KINDS):
            self._log_line(start_s, length_s, kind, interval.counts[k].sum(axis=0))
            if self.with_tag:
                self._log_line(start_s, length_s, f"{kind}.tagged", interval.counts[k, 1])
        self._hlog.flush()

    def _log_line(self, start_s, length_s, tag, counts):
        if counts.any():
            self._hlog.interval(start_s, length_s, ns_histogram(counts, 1e9 / self.ts_hz), tag=tag)

    # ---- the end ----

    def finish(self) -> RigHistograms:
        """Hand out the intervals still open (incomplete: some kind never closed them), close the files."""
        for n in sorted(self._open):
            self._hand_out(self._open[n])
        if self._hlog is not None:
            self._hlog.close()
            self._outliers.close()
            self._hlog = None
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


class RigAggregates:
    """An on-rig run's results as ``report`` takes a capture's aggregates (the interface of
    ``aggregate.StreamingAggregator``), so the report renders them as it renders any run. Count, min,
    max, mean, misses and duplicates are the engine's exact figures; the median and percentiles come
    from the bins. The engine counts misses, duplicates and below-range samples for all samples only:
    the untagged rows count binned samples."""

    statistics_note = ("on-rig: median and percentiles from the engine's HdrHistogram bins (2 significant "
                       "digits, highest equivalent value) and std from them (HdrHistogram's: bucket medians, "
                       "population); count, min, max, mean exact (ENGINE_STATS)")

    def __init__(self, rig: RigHistograms, edges: int = 0, units_per_value: int = 1):
        self.rig = rig
        # The engine's values are whole ticks: this many of the run's units (sub-ticks, docs/subtick.md);
        # stats() and worst give them in the run's units.
        self.units_per_value = units_per_value
        self.kinds = list(KINDS)
        self.edges = edges
        stats = rig.stats
        self.stimuli = stats.samples if stats is not None else 0
        self.starts, self.misses, self.duplicates = {}, {}, {}
        # The engine pairs on the rig, before any link: its figures have no gaps (nothing unknown).
        self.unknown = {}
        self.gap_count = 0
        for kind in KINDS:
            exact = rig.exact(kind)
            for subset in ("all", "untagged"):
                count = self.count_of(kind, subset)
                whole = subset == "all" and exact is not None
                self.misses[(subset, kind)] = exact["misses"] if whole else 0
                self.duplicates[(subset, kind)] = exact["duplicates"] if whole else 0
                self.unknown[(subset, kind)] = 0
                self.starts[(subset, kind)] = count + (exact["misses"] + exact["below"] if whole else 0)
        self.tagged = {kind: self.count_of(kind, "tagged") for kind in KINDS}
        self.worst = {}
        u = units_per_value
        for k, kind in enumerate(KINDS):
            exact, worst = rig.exact(kind), rig.worst[k]
            if worst is not None and exact is not None and worst[0] == exact["max"]:
                self.worst[kind] = {"index": None, "start_mu": worst[1] * u, "mu": worst[0] * u,
                                    "tagged": worst[2]}

    def count_of(self, kind, subset):
        """Samples of one kind and subset: the exact count, else the bins' total."""
        exact = self.rig.exact(kind, subset)
        return exact["count"] if exact is not None else int(self.rig.counts(kind, subset).sum())

    def stats(self, subset, kind, percentiles=analysis.PERCENTILES):
        """As ``StreamingAggregator.stats``: min/max/mean exact, median and percentiles from the bins
        (None where the count does not support them, or where they fall in the overflow bin)."""
        counts, exact = self.rig.counts(kind, subset), self.rig.exact(kind, subset)
        n = self.count_of(kind, subset)
        row = {"count": n}
        if n == 0 or exact is None:
            row.update(min=None, median=None, max=None, mean=None, std=None,
                       percentiles={analysis.percentile_label(q): None for q in percentiles})
            return row
        *values, median = engine_percentiles(counts, [100 * q for q in percentiles] + [50.0])
        hi = exact["max"]
        row.update(min=exact["min"], median=None if median is None else float(median), max=hi,
                   mean=exact["sum"] / n, std=bins_std(counts))
        row["percentiles"] = {analysis.percentile_label(q): (min(v, hi) if v is not None
                                                            and n >= analysis.samples_needed(q) else None)
                              for q, v in zip(percentiles, values)}
        return self._in_run_units(row)

    def _in_run_units(self, row):
        """The engine's whole ticks as the run's unit (sub-ticks: docs/subtick.md), so a report
        converts every figure of the run with one tick_ns."""
        u = self.units_per_value
        if u == 1:
            return row
        out = {k: (None if row[k] is None else row[k] * u) for k in ("min", "median", "max", "mean", "std")}
        out["percentiles"] = {k: (None if v is None else v * u) for k, v in row["percentiles"].items()}
        return {**row, **out}


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


def bin_figures(counts: np.ndarray, percentiles=analysis.PERCENTILES) -> dict:
    """What the rig's bins alone say (ticks, bin resolution; the live view of an on-rig capture):
    count, max (the highest bin's value; None when empty or the overflow bin holds samples), the
    overflow bin's count, and the percentiles (labels as ``analysis.percentile_label``; None where the
    count does not support them or they fall in the overflow bin)."""
    n = int(counts.sum())
    nz = np.flatnonzero(counts)
    top = None if not n or nz[-1] == OVERFLOW_BIN else bin_value(int(nz[-1]))
    values = engine_percentiles(counts, [100 * q for q in percentiles])
    return {"count": n, "max": top, "overflow": int(counts[OVERFLOW_BIN]),
            "percentiles": {analysis.percentile_label(q): v if n >= analysis.samples_needed(q) else None
                            for q, v in zip(percentiles, values)}}
