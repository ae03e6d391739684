"""Bounded-memory aggregation for runs too long to keep every sample.

``StreamingAggregator`` takes the edges in chunks (in tick order), pairs them exactly as
``analysis.pair`` does, and keeps per latency kind and subset (all / untagged):

- exact: stimuli, count, misses, duplicates, min, max, mean and standard deviation (Chan's parallel
  update of count/mean/M2), the worst case and its stimulus;
- an HDR histogram (``hilat.hdr``, 3 significant digits by default) for the median and percentiles,
  each within 10^-sf relative of the exact value (the highest value equivalent to the exact one).

Every kind (built-in and defined, ``hilat.analysis.measures``) is aggregated the same way. Memory is
constant in the run length: the histograms, and a carried tail of edges from each kind's
second-to-last start edge on (a window needs the next start; an ISR duration may run past it), with
the tag's level before it. A response pulse longer than two stimulus intervals loses its duration
(counted as missing).
"""

import copy

import numpy as np

from hilat import analysis, kernels
from hilat.hdr import HdrHistogram
from hilat.statistics.distribution import Distribution, WorstSample

SUBSET_NAMES = ("all", "untagged")


class SampleOutOfRange(ValueError):
    """A sample no histogram of its kind can hold (a latency is never below minus the calibrated
    offset, nor above the histogram's highest value): the message names the kind, the sample and
    its start tick. Raised, never dropped with a warning (docs/analysis.md, "Statistics")."""


class _Exact:
    """Count, min, max, mean and M2 (sum of squared deviations), merged chunk by chunk."""

    def __init__(self):
        self.n, self.mean, self.m2 = 0, 0.0, 0.0
        self.min = self.max = None

    def add(self, v):
        if not len(v):
            return
        n_b = len(v)
        if kernels.available() and v.dtype == np.int64:
            mean_b, m2_b, lo, hi = kernels.moments(v)
        else:
            mean_b = float(v.mean())
            m2_b = float(((v - mean_b) ** 2).sum())
            lo, hi = int(v.min()), int(v.max())
        n = self.n + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / n
        self.m2 += m2_b + delta * delta * self.n * n_b / n
        self.n = n
        self.min = lo if self.min is None else min(self.min, lo)
        self.max = hi if self.max is None else max(self.max, hi)

    @property
    def std(self):
        return (self.m2 / (self.n - 1)) ** 0.5 if self.n > 1 else 0.0


def _start_cut(t, c, lv, channel, level, look_back=4096):
    """The tick of a kind's second-to-last start edge (``channel`` at ``level``) when it has three or
    more, else of its first (None: none). The last ``look_back`` edges are searched first: in a long
    chunk they hold the last starts, and the whole array is not scanned."""
    if len(t) > look_back:
        tail = len(t) - look_back
        idx = np.flatnonzero((c[tail:] == channel) & (lv[tail:] == level))
        # Three or more in all: three inside the look-back, or two and one before it.
        if len(idx) >= 3 or (len(idx) == 2 and ((c[:tail] == channel) & (lv[:tail] == level)).any()):
            return int(t[tail + idx[-2]])
    idx = np.flatnonzero((c == channel) & (lv == level))
    if not len(idx):
        return None
    return int(t[idx[-2]] if len(idx) >= 3 else t[idx[0]])


class StreamingAggregator:
    """``measures``/``builtin``: the kinds, as in ``analysis.measure``."""

    def __init__(self, roles, deadline=None, offset_mu=0, highest=1 << 40, significant_figures=3,
                 measures=(), builtin=True, on_samples=None):
        self.roles = roles
        # Called as on_samples(kind, measures.Series) with every kind's samples once they are final,
        # in start order (the capture writes them to the run directory and its rolling .hlog).
        self.on_samples = on_samples
        self.deadline = deadline
        self.offset_mu = int(offset_mu)
        self.measures = list(measures)
        self.builtin = builtin
        self.significant_figures = significant_figures
        self.titles = analysis.kind_titles(roles, self.measures, builtin)
        self.kinds = list(self.titles)
        # The start edge of every kind: a window closes at its kind's next start.
        self._start_edges = ([(roles.stimulus, roles.stimulus_active)] if builtin else []) + [
            (m.start.channel, m.start.level) for m in self.measures]
        keys = [(s, k) for s in SUBSET_NAMES for k in self.kinds]
        # Until the first window a tag touches, the untagged subset is every sample: its histogram
        # and exact statistics are the same objects as the "all" ones (recorded once), copied apart
        # then (_split_untagged).
        self.hist = {("all", k): HdrHistogram(1, highest, significant_figures) for k in self.kinds}
        self.hist.update({("untagged", k): self.hist[("all", k)] for k in self.kinds})
        self._untagged_shared = True
        # A kind the calibrated offset is subtracted from can hold a response sooner than the rig's
        # own delay, down to -offset: its histograms count value + offset (shifted back at output).
        offset_kinds = ({"stim_to_isr", "stim_to_task"} if builtin else set()) | {
            m.name for m in self.measures if m.subtract_offset}
        self.shift = {k: max(self.offset_mu, 0) if k in offset_kinds else 0 for k in self.kinds}
        self.exact = {("all", k): _Exact() for k in self.kinds}
        self.exact.update({("untagged", k): self.exact[("all", k)] for k in self.kinds})
        self.starts = dict.fromkeys(keys, 0)
        self.misses = dict.fromkeys(keys, 0)
        self.unknown = dict.fromkeys(keys, 0)    # windows a gap touched: neither samples nor misses
        self.task_before_isr = 0
        # Where the stream has holes (analysis.Gaps), in the edges' unit; only those the tail can
        # still touch are kept (see _trim).
        self.gaps = analysis.Gaps()
        self.gap_count = 0
        self._tag_edge_dropped = None   # tick of the last tag edge trimmed from the tail
        self.duplicates = dict.fromkeys(keys, 0)
        self.tagged = dict.fromkeys(self.kinds, 0)
        self.stimuli = 0
        self.worst = {}
        self.edges = 0
        self._tail = (np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.uint8))
        # The tag's level (1 active) before the tail, once a tag edge was dropped from it; None: none
        # was, the level before the tail's first tag edge is the opposite of that edge's, as on disk.
        self._tag_level = None
        self._finished = False
        self._complete_before = np.iinfo(np.int64).min   # advance(): every edge before it was fed

    # ---- feeding ----------------------------------------------------------------------------------

    def _measure(self, t, c, lv, end_mu):
        return analysis.measure(t, c, lv, self.roles, self.measures, self.builtin, self.deadline,
                                end_mu=end_mu, offset_mu=self.offset_mu, tag_level=self._tag_level,
                                gaps=self.gaps)

    def add_gap(self, start, end, channels):
        """A hole in the stream: edges on ``channels`` (a mask) in [start, end) may be missing. Given
        before any edge after ``start`` (the capture's gaps are known by then: docs/analysis.md)."""
        self.gaps = self.gaps + analysis.Gaps.of([(start, end, channels)])
        self.gap_count += 1

    def feed(self, ticks, chans, levels):
        """One chunk of edges; chunks must follow each other in tick order."""
        ticks = np.asarray(ticks, dtype=np.int64)
        chans, levels = np.asarray(chans, dtype=np.uint8), np.asarray(levels, dtype=np.uint8)
        if len(ticks) and ((len(self._tail[0]) and ticks[0] < self._tail[0][-1]) or ticks[0] < self._complete_before):
            raise ValueError("chunks must be fed in tick order (and none before a tick advance() was given)")
        self.edges += len(ticks)
        t = np.concatenate((self._tail[0], ticks))
        c = np.concatenate((self._tail[1], chans))
        lv = np.concatenate((self._tail[2], levels))
        # Every sample starting before the second-to-last start edge of each kind is final (its
        # window closed, and an ISR duration may run one interval further); a kind with fewer
        # starts holds the cut at its first.
        cut = None
        for channel, level in self._start_edges:
            tick = _start_cut(t, c, lv, channel, level)
            if tick is not None:
                cut = tick if cut is None else min(cut, tick)
        if cut is None:
            self._tail = self._trim(t, c, lv, len(t))
            return
        start = int(np.searchsorted(t, cut, side="left"))
        if start:
            self._account(self._measure(t, c, lv, int(t[-1]) + 1).take_before(cut))
        self._tail = self._trim(t, c, lv, start)

    def advance(self, tick):
        """Every edge before ``tick`` has been fed (a heartbeat of the stream: docs/ethernet.md): the
        built-in kinds' windows that ``tick`` closes are judged now, without waiting for the next
        stimuli. Final: a window before the last stimulus, and the last one when its deadline lies at
        or before ``tick``; a sample whose pulse has not fallen yet (its duration still open) waits,
        and so does every one after it. Defined measures keep their own cut (the feed's rule). The
        samples are those the whole run's pairing gives; later edges must not lie before ``tick``."""
        tick = int(tick)
        self._complete_before = max(self._complete_before, tick)
        t, c, lv = self._tail
        if self._finished or not self.builtin or not len(t):
            return
        # The feed's cut for the defined measures (their windows are theirs to close).
        cut = None
        for channel, level in self._start_edges[1:]:
            m_cut = _start_cut(t, c, lv, channel, level)
            if m_cut is not None:
                cut = m_cut if cut is None else min(cut, m_cut)
        # The tail's last window ends at ``tick`` at the latest (end_mu + 1); it is final only if its
        # deadline ends it sooner, else the next stimulus (at ``tick`` or later) may.
        found = self._measure(t, c, lv, max(tick - 1, int(t[-1]) + 1))
        series = found.series
        starts = series["stim_to_isr"].start_mu
        if not len(starts):
            return
        final = np.ones(len(starts), bool)
        final[-1] = self.deadline is not None and int(starts[-1]) + int(self.deadline) <= tick
        for response, duration in (("stim_to_isr", "isr_duration"), ("stim_to_task", "task_duration")):
            d = series[duration]
            still_high = (series[response].values != analysis.MISSING) & (d.values == analysis.MISSING)
            final &= ~(still_high & (d.unknown == 0))
        waiting = np.flatnonzero(~final)
        b_cut = int(starts[waiting[0]]) if len(waiting) else tick
        cut = b_cut if cut is None else min(cut, b_cut)
        start = int(np.searchsorted(t, cut, side="left"))
        if not start:
            return
        self._account(found.take_before(cut))
        self._tail = self._trim(t, c, lv, start)

    def _trim(self, t, c, lv, start):
        """Edges from ``start`` on; the tag's level carries over as ``_tag_level``, not as its last edge
        before ``start``: kept, that edge would be a start edge again for a measure on the tag channel
        (a second sample of a start already counted, its end edge dropped: a miss).

        Gaps that end before the tail are dropped, except that a tag gap after the last tag edge
        trimmed leaves the tag's level unknown: one gap on the tag just before the tail says so."""
        if self.roles.tag is not None:
            tag_before = np.flatnonzero(c[:start] == self.roles.tag)
            if len(tag_before):
                self._tag_level = int(lv[tag_before[-1]] == self.roles.active_level(self.roles.tag))
                self._tag_edge_dropped = int(t[tag_before[-1]])
        if len(self.gaps):
            tail_start = int(t[start]) if start < len(t) else (int(t[-1]) + 1 if len(t) else 0)
            old = self.gaps.end <= tail_start
            if old.any():
                tag_bit = np.uint32(analysis.channel_bit(self.roles.tag))
                since = self._tag_edge_dropped if self._tag_edge_dropped is not None else np.iinfo(np.int64).min
                tag_hidden = bool((old & ((self.gaps.channels & tag_bit) != 0) & (self.gaps.end > since)).any())
                self.gaps = self.gaps.select(~old)
                if tag_hidden:
                    self.gaps = self.gaps + analysis.Gaps.of([(tail_start - 1, tail_start, int(tag_bit))])
        return t[start:], c[start:], lv[start:]

    def finish(self, end_mu=None):
        """Close the last windows (at ``end_mu``, default the last edge + 1) and return self."""
        if not self._finished:
            t, c, lv = self._tail
            end = end_mu if end_mu is not None else (int(t[-1]) + 1 if len(t) else 0)
            self._account(self._measure(t, c, lv, end))
            self._tail = (t[:0], c[:0], lv[:0])
            self._finished = True
        return self

    def _account(self, found):
        if self.builtin:
            self.stimuli += len(found.series[analysis.KINDS[0][0]])
            self.task_before_isr += found.task_before_isr
        if self._untagged_shared and any((found.series[k].tag_in_window != 0).any() for k in self.kinds):
            self._split_untagged()
        for kind in self.kinds:
            first_index = self.starts[("all", kind)]
            valid_all = found.series[kind].valid()
            self._check_range(kind, found.series[kind], first_index, valid_all)
            if self.on_samples is not None:
                self.on_samples(kind, found.series[kind])
            self.tagged[kind] += int((found.series[kind].tag_in_window == 1).sum())
            for subset in SUBSET_NAMES:
                key = (subset, kind)
                if subset != "all" and self._untagged_shared:
                    # No window tagged (nor hidden) so far: the untagged samples are all of them.
                    for counter in (self.starts, self.duplicates, self.misses, self.unknown):
                        counter[key] = counter[("all", kind)]
                    continue
                sel = found.subset(kind, subset)
                lat = sel.values
                v = valid_all if subset == "all" else sel.valid()
                self.starts[key] += len(sel)
                self.duplicates[key] += int(sel.duplicates.sum())
                self.misses[key] += sel.n_misses
                self.unknown[key] += sel.n_unknown
                self.exact[key].add(v)
                self.hist[key].record(v + self.shift[kind])
                if subset == "all" and len(v):
                    i = int(np.argmax(lat))
                    best = self.worst.get(kind)
                    if best is None or lat[i] > best["mu"]:
                        self.worst[kind] = {"index": first_index + i, "start_mu": int(sel.start_mu[i]),
                                            "mu": int(lat[i]), "tagged": bool(sel.tag_in_window[i])}

    def _split_untagged(self):
        """The first tagged window: the untagged subset gets its own histograms and statistics, copies
        of the "all" ones so far (every sample until now was untagged)."""
        for kind in self.kinds:
            self.hist[("untagged", kind)] = copy.deepcopy(self.hist[("all", kind)])
            self.exact[("untagged", kind)] = copy.copy(self.exact[("all", kind)])
        self._untagged_shared = False

    def _check_range(self, kind, series, first_index, v):
        """Every measured value of ``series`` (``v``: its valid ones) fits the kind's histograms, else
        SampleOutOfRange."""
        if not len(v):
            return
        shift, top = self.shift[kind], self.hist[("all", kind)].highest_recordable
        if v.min() + shift >= 0 and v.max() + shift <= top:
            return
        lat = series.values
        valid = np.flatnonzero((lat != analysis.MISSING) & (series.unknown == 0))
        i = int(valid[np.flatnonzero((v + shift < 0) | (v + shift > top))[0]])
        raise SampleOutOfRange(f"{kind} sample {first_index + i} (start at {int(series.start_mu[i])}): "
                               f"{int(lat[i])} is outside what its histogram holds ({-shift}..{top - shift})")

    # ---- results ----------------------------------------------------------------------------------

    def distribution(self, subset, kind, mu_s=1.0, title=None):
        """The ``Distribution`` of ``kind`` over ``subset`` (all, untagged) so far: count, min, max,
        mean, std exact, the rest from the histogram; ``mu_s``: seconds per mu, for output in seconds."""
        key = (subset, kind)
        w = self.worst.get(kind) if subset == "all" else None
        worst = [WorstSample(w["start_mu"], w["mu"], w["mu"] * mu_s, w["tagged"], w["index"])] if w else []
        return Distribution.streamed(kind, mu_s, self.hist[key], self.shift[kind], self.exact[key],
                                     title=title or self.titles.get(kind, kind), subset=subset,
                                     starts=self.starts[key], misses=self.misses[key], unknown=self.unknown[key],
                                     duplicates=self.duplicates[key], worst=worst)
