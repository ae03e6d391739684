"""Bounded-memory aggregation for runs too long to keep every sample.

``StreamingAggregator`` takes the edges in chunks (in tick order), pairs them exactly as
``analysis.pair`` does, and keeps per latency kind and subset (all / untagged):

- exact: stimuli, count, misses, duplicates, min, max, mean and standard deviation (Chan's parallel
  update of count/mean/M2), the worst case and its stimulus;
- an HDR histogram (``hilat.hdr``, 3 significant digits by default) for the median and percentiles,
  each within 10^-sf relative of the exact value (the highest value equivalent to the exact one).

Memory is constant in the run length: the histograms, and a carried tail of edges from the
second-to-last stimulus on (a window needs the next stimulus; an ISR duration may run past it).
A response pulse longer than two stimulus intervals loses its duration (counted as missing).
"""

import numpy as np

from hilat import analysis
from hilat.hdr import HdrHistogram

SUBSET_NAMES = ("all", "untagged")


class _Exact:
    """Count, min, max, mean and M2 (sum of squared deviations), merged chunk by chunk."""

    def __init__(self):
        self.n, self.mean, self.m2 = 0, 0.0, 0.0
        self.min = self.max = None

    def add(self, v):
        if not len(v):
            return
        n_b = len(v)
        mean_b = float(v.mean())
        m2_b = float(((v - mean_b) ** 2).sum())
        n = self.n + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / n
        self.m2 += m2_b + delta * delta * self.n * n_b / n
        self.n = n
        lo, hi = int(v.min()), int(v.max())
        self.min = lo if self.min is None else min(self.min, lo)
        self.max = hi if self.max is None else max(self.max, hi)

    @property
    def std(self):
        return (self.m2 / (self.n - 1)) ** 0.5 if self.n > 1 else 0.0


class StreamingAggregator:
    def __init__(self, roles, deadline=None, offset_ticks=0, highest=1 << 40, significant_figures=3):
        self.roles = roles
        self.deadline = deadline
        self.offset_ticks = int(offset_ticks)
        self.significant_figures = significant_figures
        self.hist = {(s, k): HdrHistogram(1, highest, significant_figures) for s in SUBSET_NAMES
                     for k, _ in analysis.KINDS}
        self.exact = {(s, k): _Exact() for s in SUBSET_NAMES for k, _ in analysis.KINDS}
        self.stimuli = dict.fromkeys(SUBSET_NAMES, 0)
        self.misses = {(s, k): 0 for s in SUBSET_NAMES for k, _ in analysis.KINDS}
        self.duplicates = {s: {"isr": 0, "task": 0} for s in SUBSET_NAMES}
        self.worst = {}
        self.tagged = 0
        self.edges = 0
        self._tail = (np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.uint8))
        self._finished = False

    # ---- feeding ----------------------------------------------------------------------------------

    def feed(self, ticks, chans, levels):
        """One chunk of edges; chunks must follow each other in tick order."""
        ticks = np.asarray(ticks, dtype=np.int64)
        chans, levels = np.asarray(chans, dtype=np.uint8), np.asarray(levels, dtype=np.uint8)
        if len(self._tail[0]) and len(ticks) and ticks[0] < self._tail[0][-1]:
            raise ValueError("chunks must be fed in tick order")
        self.edges += len(ticks)
        t = np.concatenate((self._tail[0], ticks))
        c = np.concatenate((self._tail[1], chans))
        lv = np.concatenate((self._tail[2], levels))
        stim_idx = np.flatnonzero((c == self.roles.stimulus) & (lv == self.roles.stimulus_active))
        if len(stim_idx) < 3:
            self._tail = self._trim(t, c, lv, stim_idx[0] if len(stim_idx) else len(t))
            return
        # Everything before the second-to-last stimulus is final.
        cut = stim_idx[-2]
        p = analysis.pair(t, c, lv, self.roles, self.deadline, end_tick=int(t[-1]) + 1,
                          offset_ticks=self.offset_ticks)
        self._account(p.select(p.stim_tick < t[cut]))
        self._tail = self._trim(t, c, lv, cut)

    def _trim(self, t, c, lv, start):
        """Edges from ``start`` on, plus the last tag edge before it (the tag level carries over)."""
        tag_before = np.flatnonzero(c[:start] == self.roles.tag) if self.roles.tag is not None else np.zeros(0, int)
        keep = np.concatenate((tag_before[-1:], np.arange(start, len(t))))
        return t[keep], c[keep], lv[keep]

    def finish(self, end_tick=None):
        """Close the last windows (at ``end_tick``, default the last edge + 1) and return self."""
        if not self._finished:
            t, c, lv = self._tail
            end = end_tick if end_tick is not None else (int(t[-1]) + 1 if len(t) else 0)
            self._account(analysis.pair(t, c, lv, self.roles, self.deadline, end_tick=end,
                                        offset_ticks=self.offset_ticks))
            self._tail = (t[:0], c[:0], lv[:0])
            self._finished = True
        return self

    def _account(self, p):
        first_index = self.stimuli["all"]
        self.tagged += int(p.tag_in_window.sum())
        for subset in SUBSET_NAMES:
            sel = p if subset == "all" else p.untagged()
            self.stimuli[subset] += len(sel)
            self.duplicates[subset]["isr"] += int(sel.isr_duplicates.sum())
            self.duplicates[subset]["task"] += int(sel.task_duplicates.sum())
            for kind, _ in analysis.KINDS:
                lat = sel.latency(kind)
                ok = lat != analysis.MISSING
                v = lat[ok]
                self.misses[(subset, kind)] += int(len(lat) - len(v))
                self.exact[(subset, kind)].add(v)
                self.hist[(subset, kind)].record(v)
                if subset == "all" and kind in ("stim_to_isr", "stim_to_task") and len(v):
                    i = int(np.argmax(lat))
                    best = self.worst.get(kind)
                    if best is None or lat[i] > best["ticks"]:
                        self.worst[kind] = {"stimulus_index": first_index + i, "stimulus_tick": int(sel.stim_tick[i]),
                                            "ticks": int(lat[i]), "tagged": bool(sel.tag_in_window[i])}

    # ---- results ----------------------------------------------------------------------------------

    def stats(self, subset, kind, percentiles=analysis.PERCENTILES):
        """Like ``analysis.stats``; min/max/mean/std exact, median and percentiles from the histogram."""
        ex, h = self.exact[(subset, kind)], self.hist[(subset, kind)]
        row = {"count": ex.n}
        if ex.n == 0:
            row.update(min=None, median=None, max=None, mean=None, std=None,
                       percentiles={analysis.percentile_label(p): None for p in percentiles})
            return row
        values = h.percentiles([100 * p for p in percentiles])
        row.update(min=ex.min, median=float(h.value_at_percentile(50.0)), max=ex.max, mean=ex.mean, std=ex.std)
        row["percentiles"] = {analysis.percentile_label(p): (min(int(v), ex.max) if ex.n >= analysis.samples_needed(p)
                                                             else None) for p, v in zip(percentiles, values)}
        return row
