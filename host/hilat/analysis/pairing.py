"""Pairing each stimulus (or start edge) with its responses: the built-in kinds and the measurement
definitions (``measure``), one window search (``pair``)."""

import dataclasses
from dataclasses import dataclass

import numpy as np

from hilat import kernels
from hilat.analysis.channels import KINDS
from hilat.analysis.gaps import GAP_OPEN_END, TAG_UNKNOWN
from hilat.analysis.measures import MISSING, Series, channel_bit, compute


def _level_at(edge_mu, edge_levels, at, initial=0):
    """Level of a channel at ticks ``at`` (inclusive of an edge at that tick)."""
    if len(edge_mu) == 0:
        return np.full(len(at), initial, dtype=np.uint8)
    idx = np.searchsorted(edge_mu, at, side="right") - 1
    out = np.where(idx >= 0, edge_levels[np.maximum(idx, 0)], initial)
    return out.astype(np.uint8)


@dataclass
class Pairing:
    stim_mu: np.ndarray
    window_end: np.ndarray
    isr_latency: np.ndarray      # ticks, offset subtracted; MISSING where missed or unknown
    task_latency: np.ndarray
    isr_to_task: np.ndarray
    isr_duration: np.ndarray     # ticks from the matched ISR rise to the next ISR fall
    task_duration: np.ndarray
    isr_mu: np.ndarray         # tick of the matched response edge (MISSING where missed)
    task_mu: np.ndarray
    isr_duplicates: np.ndarray   # extra ISR rises in the window
    task_duplicates: np.ndarray
    tag_at_stimulus: np.ndarray  # 0/1, TAG_UNKNOWN where a gap hides the tag
    tag_in_window: np.ndarray
    offset_mu: int = 0
    # {kind: uint8 array}: 1 where a gap touches what the kind depends on (its value is MISSING,
    # and it is neither a miss nor a sample); missing kinds: nothing unknown.
    unknown: dict = dataclasses.field(default_factory=dict)
    # Task rises in a window before its matched ISR rise: late tasks of earlier stimuli, never
    # this stimulus's task (docs/analysis.md, "Pairing").
    task_before_isr: np.ndarray = None

    def __len__(self):
        return len(self.stim_mu)

    def latency(self, kind):
        return {"stim_to_isr": self.isr_latency, "stim_to_task": self.task_latency,
                "isr_to_task": self.isr_to_task, "isr_duration": self.isr_duration,
                "task_duration": self.task_duration}[kind]

    def unknown_of(self, kind):
        flags = self.unknown.get(kind)
        return flags if flags is not None else np.zeros(len(self), np.uint8)

    def select(self, keep):
        """The pairing restricted to stimuli where ``keep`` is true."""
        idx = np.flatnonzero(keep)     # one index array, then take(): much faster than 13 boolean masks
        fields = {k: (v.take(idx) if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        fields["unknown"] = {k: v.take(idx) for k, v in self.unknown.items()}
        return Pairing(**fields)

    def untagged(self):
        return self.select(self.tag_in_window == 0)


class EdgeGroups:
    """The edges split by (channel, pin level after the edge), each group in tick order: one stable
    counting sort, then any group is a slice."""

    def __init__(self, ticks, chans, levels):
        ticks = np.asarray(ticks, dtype=np.int64)
        chans = np.asarray(chans)
        levels = np.asarray(levels)
        if len(ticks) and np.any(ticks[1:] < ticks[:-1]):
            order = np.argsort(ticks, kind="stable")
            ticks, chans, levels = ticks[order], chans[order], levels[order]
        self.ticks = ticks
        key = (chans.astype(np.uint8) << 1) | levels.astype(np.uint8)
        if kernels.available():   # the ticks themselves grouped, in one compiled counting sort
            self._grouped, self._bounds = kernels.group(ticks, key, 2 * 16)
            self._order = None
        else:
            self._order = np.argsort(key, kind="stable")
            self._bounds = np.concatenate(([0], np.cumsum(np.bincount(key, minlength=2 * 16))))

    def __call__(self, channel, level):
        if channel is None:  # a role no channel plays
            return self.ticks[:0]
        k = channel << 1 | level
        if self._order is None:
            return self._grouped[self._bounds[k]:self._bounds[k + 1]]
        return self.ticks.take(self._order[self._bounds[k]:self._bounds[k + 1]])

    @property
    def last_mu(self):
        return int(self.ticks[-1]) if len(self.ticks) else -1


def _tag_flags(groups, roles, starts, window_end, tag_level=None, gaps=None):
    """(tag level at each start, tag active at any time in [start, window end)), as uint8;
    TAG_UNKNOWN for both where a gap on the tag's channel lies between the tag's last edge before
    the start and the window's end (its level there is not known). ``tag_level``: the tag's level
    (1 active) before its first edge in ``groups``, where earlier edges set it (the streaming
    aggregator's previous chunks); None: see below."""
    if roles.tag is None:
        zeros = np.zeros(len(starts), np.uint8)
        return zeros, zeros
    active = roles.active_level(roles.tag)
    tag_rises, tag_falls = groups(roles.tag, active), groups(roles.tag, 1 - active)
    tag_mu = np.concatenate((tag_rises, tag_falls))
    tag_levels = np.concatenate((np.ones(len(tag_rises), np.uint8), np.zeros(len(tag_falls), np.uint8)))
    tag_order = np.argsort(tag_mu, kind="stable")
    # An edge is a change of level: before the tag's first edge it was at the other level (an
    # active-low tag idling low is active from the start). A tag without edges counts as inactive.
    if tag_level is not None:
        initial = int(tag_level)
    else:
        initial = 1 - int(tag_levels[tag_order[0]]) if len(tag_order) else 0
    tag_at = _level_at(tag_mu[tag_order], tag_levels[tag_order], starts, initial=initial)
    # Active at any time in [S, end): active at S, or a rise inside the window.
    rise_inside = kernels.searchsorted(tag_rises, window_end, "left") > kernels.searchsorted(tag_rises, starts, "left")
    tag_window = ((tag_at == 1) | rise_inside).astype(np.uint8)
    if gaps is not None and len(gaps):
        sorted_mu = tag_mu[tag_order]
        before = np.searchsorted(sorted_mu, starts, side="right") - 1
        last_edge = np.where(before >= 0, sorted_mu[np.maximum(before, 0)] if len(sorted_mu) else 0,
                             np.iinfo(np.int64).min)
        starts = np.asarray(starts, dtype=np.int64)
        bit = channel_bit(roles.tag)
        hidden_at = gaps.touches(bit, last_edge, starts + 1)
        hidden_window = gaps.touches(bit, last_edge, np.maximum(window_end, starts + 1))
        # Tagged for sure: active at the start (seen), or a rise seen inside the window.
        sure = ((tag_at == 1) & ~hidden_at) | rise_inside
        tag_at = np.where(hidden_at, TAG_UNKNOWN, tag_at).astype(np.uint8)
        tag_window = np.where(sure, 1, np.where(hidden_window, TAG_UNKNOWN, tag_window)).astype(np.uint8)
    return tag_at, tag_window


def pair(ticks, chans, levels, roles, deadline=None, end_mu=None, offset_mu=0, groups=None, tag_level=None,
         gaps=None, task_after_isr=True):
    """Pair stimuli and responses (``roles``: a :class:`Channels`). ``end_mu``: the capture's last
    tick (closes the last window). Each role's active edge is its rise, or its fall on an
    active-low input or an inverted stimulus. ``tag_level``: the tag's level (1 active) before the
    first edge given, when edges before them set it (None: the opposite of its first edge's).
    ``gaps`` (:class:`Gaps`): where edges may be missing; a window that touches one on a channel a
    kind depends on is unknown for that kind (``Pairing.unknown``). ``task_after_isr`` False: the
    on-rig engine's rule, the window's first task rise whatever the ISR (docs/engine.md)."""
    groups = groups if groups is not None else EdgeGroups(ticks, chans, levels)

    def active(channel):
        return groups(channel, roles.active_level(channel) if channel is not None else 1)

    def inactive(channel):
        return groups(channel, 1 - roles.active_level(channel) if channel is not None else 0)

    stim = active(roles.stimulus)
    isr_rise, isr_fall = active(roles.isr), inactive(roles.isr)
    task_rise, task_fall = active(roles.task), inactive(roles.task)
    n = len(stim)
    last = end_mu if end_mu is not None else groups.last_mu + 1
    window_end = np.append(stim[1:], last + 1).astype(np.int64) if n else np.zeros(0, np.int64)
    if deadline is not None and n:
        window_end = np.minimum(window_end, stim + int(deadline))

    def first_in_window(rises, falls, after):
        """The first rise at or after ``after`` (per window) and before the window's end, the rises
        after it in the window, and the pulse's duration."""
        if kernels.available() and rises.dtype == np.int64 and falls.dtype == np.int64:
            return kernels.first_in_window(rises, falls, after, window_end, MISSING)
        lo = kernels.searchsorted(rises, after, side="left")
        hi = kernels.searchsorted(rises, window_end, side="left")
        found = hi > lo
        at = np.full(n, MISSING, dtype=np.int64)
        at[found] = rises[lo[found]]
        # Duration: the first fall after the matched rise (MISSING if the capture ended first).
        duration = np.full(n, MISSING, dtype=np.int64)
        if found.any() and len(falls):
            fi = kernels.searchsorted(falls, at[found], side="right")
            has_fall = fi < len(falls)
            idx = np.flatnonzero(found)[has_fall]
            duration[idx] = falls[fi[has_fall]] - at[idx]
        return at, np.maximum(hi - lo - 1, 0), duration

    isr_at, isr_dup, isr_duration = first_in_window(isr_rise, isr_fall, stim)
    # The task response is the first task rise at or after the window's ISR rise: a task rise before
    # it is the late task of an earlier stimulus, and with no ISR rise in the window none is this
    # stimulus's (a rig without an ISR role pairs the first task rise in the window).
    task_from = (np.where(isr_at != MISSING, isr_at, window_end) if roles.isr is not None and task_after_isr
                 else stim)
    task_at, task_dup, task_duration = first_in_window(task_rise, task_fall, task_from)
    task_before_isr = (kernels.searchsorted(task_rise, np.minimum(task_from, window_end), side="left")
                       - kernels.searchsorted(task_rise, stim, side="left")).astype(np.int64)
    isr_latency = np.where(isr_at != MISSING, isr_at - stim - offset_mu, MISSING)
    task_latency = np.where(task_at != MISSING, task_at - stim - offset_mu, MISSING)
    both = (isr_at != MISSING) & (task_at != MISSING)
    isr_to_task = np.where(both, task_at - isr_at, MISSING)
    tag_at, tag_window = _tag_flags(groups, roles, stim, window_end, tag_level, gaps)
    unknown = {}
    if gaps is not None and len(gaps) and n:
        stim_bit, isr_bit, task_bit = (channel_bit(c) for c in (roles.stimulus, roles.isr, roles.task))
        isr_hidden = gaps.touches(stim_bit | isr_bit, stim, window_end)
        task_hidden = gaps.touches(stim_bit | task_bit, stim, window_end)

        def pulse_hidden(at, duration, bit):
            # A duration also depends on its pin from the rise to the fall (or the run's end).
            found = at != MISSING
            end = np.where(duration != MISSING, at + duration + 1, GAP_OPEN_END)
            return found & gaps.touches(bit, np.where(found, at, 0), end)

        unknown = {"stim_to_isr": isr_hidden, "stim_to_task": task_hidden | isr_hidden,
                   "isr_to_task": isr_hidden | task_hidden,
                   "isr_duration": isr_hidden | pulse_hidden(isr_at, isr_duration, isr_bit),
                   "task_duration": task_hidden | isr_hidden | pulse_hidden(task_at, task_duration, task_bit)}
        unknown = {k: v.astype(np.uint8) for k, v in unknown.items()}
        values = {"stim_to_isr": isr_latency, "stim_to_task": task_latency, "isr_to_task": isr_to_task,
                  "isr_duration": isr_duration, "task_duration": task_duration}
        for kind, flags in unknown.items():
            values[kind][flags.astype(bool)] = MISSING
        isr_dup = np.where(isr_hidden, 0, isr_dup)
        task_dup = np.where(unknown["stim_to_task"].astype(bool), 0, task_dup)
        task_before_isr = np.where(unknown["stim_to_task"].astype(bool), 0, task_before_isr)
    return Pairing(stim, window_end, isr_latency, task_latency, isr_to_task, isr_duration, task_duration,
                   isr_at, task_at, isr_dup, task_dup, tag_at, tag_window, int(offset_mu), unknown,
                   task_before_isr)


class Measurements:
    """Every kind of one capture, by name: the built-in stimulus kinds (when a stimulus fired) and
    the measurement definitions, each a :class:`measures.Series` with its own start edges."""

    def __init__(self, titles, series, stimuli, task_before_isr=0, task_before_isr_each=None):
        self.titles = titles       # {kind: title}, in report order
        self.series = series       # {kind: Series}
        self.stimuli = stimuli     # stimuli of the built-in kinds (0: none fired)
        self.task_before_isr = task_before_isr  # task rises before their window's ISR (late tasks)
        self.task_before_isr_each = task_before_isr_each   # the same per stimulus (None: not known)

    @property
    def kinds(self):
        return list(self.titles)

    def latency(self, kind):
        return self.series[kind].values

    def subset(self, kind, subset="all"):
        """A kind's samples: all, untagged or tagged; in the untagged subset a sample whose tag a gap
        hid is unknown (it might have been tagged)."""
        s = self.series[kind]
        if subset == "all":
            return s
        if subset == "tagged":
            return s.take(np.flatnonzero(s.tag_in_window == 1))
        sel = s.take(np.flatnonzero(s.tag_in_window != 1))
        hidden = sel.tag_in_window == TAG_UNKNOWN
        if hidden.any():
            sel.unknown = sel.unknown | hidden.astype(np.uint8)
            sel.values = np.where(hidden, MISSING, sel.values)
            sel.duplicates = np.where(hidden, 0, sel.duplicates)
        return sel

    def take_before(self, tick):
        """Only the samples whose start edge lies before ``tick``."""
        each, late = self.task_before_isr_each, self.task_before_isr
        if each is not None:   # only the stimuli kept (a streamed tail's others are counted later)
            each = each[self.series[KINDS[0][0]].start_mu < tick]
            late = int(each.sum())
        return Measurements(self.titles, {k: _series_before(s, tick) for k, s in self.series.items()},
                            self.stimuli, late, each)


def _series_before(series, tick):
    """The samples of ``series`` whose start lies before ``tick``: a prefix (starts in order) as views,
    not copies."""
    idx = np.flatnonzero(series.start_mu < tick)
    if len(idx) and idx[-1] != len(idx) - 1:
        return series.take(idx)
    n = len(idx)
    return Series(series.start_mu[:n], series.window_end[:n], series.values[:n], series.duplicates[:n],
                  series.tag_at_start[:n], series.tag_in_window[:n], series.unknown[:n])


def kind_titles(roles, measures=(), builtin=True):
    titles = dict(KINDS) if builtin else {}
    titles.update((m.name, m.title(roles.names)) for m in measures)
    return titles


def measure(ticks, chans, levels, roles, measures=(), builtin=True, deadline=None, end_mu=None, offset_mu=0,
            tag_level=None, gaps=None):
    """:class:`Measurements` of a capture: the built-in kinds (``builtin``: a stimulus fired; see
    :func:`pair`, also for ``tag_level`` and ``gaps``) and each measurement definition
    (``hilat.analysis.measures``)."""
    groups = EdgeGroups(ticks, chans, levels)
    last = end_mu if end_mu is not None else groups.last_mu + 1
    series = {}
    stimuli = 0
    task_before_isr = 0
    if builtin:
        p = pair(ticks, chans, levels, roles, deadline, end_mu=last, offset_mu=offset_mu, groups=groups,
                 tag_level=tag_level, gaps=gaps)
        stimuli = len(p)
        task_before_isr = int(p.task_before_isr.sum()) if p.task_before_isr is not None else 0
        dups = {"stim_to_isr": p.isr_duplicates, "stim_to_task": p.task_duplicates}
        for kind, _ in KINDS:
            series[kind] = Series(p.stim_mu, p.window_end, p.latency(kind),
                                  dups.get(kind, np.zeros(len(p), np.int64)).astype(np.int64),
                                  p.tag_at_stimulus, p.tag_in_window, p.unknown_of(kind))
    for m in measures:
        starts, window_end, values, duplicates, unknown = compute(
            m, groups(m.start.channel, m.start.level), groups(m.end.channel, m.end.level), last, offset_mu,
            gaps=gaps)
        tag_at, tag_window = _tag_flags(groups, roles, starts, window_end, tag_level, gaps)
        series[m.name] = Series(starts, window_end, values, duplicates, tag_at, tag_window, unknown)
    return Measurements(kind_titles(roles, measures, builtin), series, stimuli, task_before_isr,
                        p.task_before_isr if builtin and p.task_before_isr is not None else None)
