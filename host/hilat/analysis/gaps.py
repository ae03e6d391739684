"""Where the record stream has holes (``Gaps``, ``GapTracker``): a window a gap touches is unknown."""


import numpy as np

GAP_OPEN_END = np.iinfo(np.int64).max   # a gap that runs to the end of the run
ALL_CHANNELS = 0xFFFFFFFF                # a gap on every channel (the link lost frames)
TAG_UNKNOWN = 2                          # tag_at_start / tag_in_window where a gap hides the tag's level


class Gaps:
    """Where the record stream has holes (docs/analysis.md, "Gaps"): spans [start, end) in the
    analysis's unit on a mask of channels, whose edges may be missing there. A gateware overflow
    marker is a gap on the channels that dropped, from the first lost record's tick to the first
    record after the marker; frames lost on the link, from just after the last record before to the
    first record after, on every channel; a capture cut short, from just after its last record to
    the end (``GAP_OPEN_END``). Nothing is computed across a gap: a window that touches one on a
    channel its kind depends on is **unknown** for that kind."""

    def __init__(self, start=(), end=(), channels=()):
        self.start = np.asarray(start, dtype=np.int64).reshape(-1)
        self.end = np.asarray(end, dtype=np.int64).reshape(-1)
        self.channels = np.asarray(channels, dtype=np.uint32).reshape(-1)
        self._merged = {}

    @classmethod
    def of(cls, items):
        """From (start, end, channel mask) triples."""
        items = list(items)
        if not items:
            return cls()
        start, end, channels = zip(*items)
        return cls(start, end, [int(c) & ALL_CHANNELS for c in channels])

    def __len__(self):
        return len(self.start)

    def __add__(self, other):
        return Gaps(np.concatenate((self.start, other.start)), np.concatenate((self.end, other.end)),
                    np.concatenate((self.channels, other.channels)))

    def items(self):
        return list(zip(self.start.tolist(), self.end.tolist(), self.channels.tolist()))

    def select(self, keep):
        return Gaps(self.start[keep], self.end[keep], self.channels[keep])

    def on(self, mask):
        """The gaps touching any channel of ``mask``, merged: disjoint, sorted (starts, ends)."""
        mask = int(mask) & ALL_CHANNELS
        if mask not in self._merged:
            sel = (self.channels & np.uint32(mask)) != 0
            s, e = self.start[sel], self.end[sel]
            if len(s) > 1:
                order = np.argsort(s, kind="stable")
                s, e = s[order], np.maximum.accumulate(e[order])
                new = np.concatenate(([True], s[1:] > e[:-1]))
                last = np.append(np.flatnonzero(new)[1:] - 1, len(s) - 1)
                s, e = s[new], e[last]
            self._merged[mask] = (s, e)
        return self._merged[mask]

    def touches(self, mask, lo, hi):
        """Per span [lo, hi): whether a gap on a channel of ``mask`` overlaps it (bool array)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        s, e = self.on(mask)
        if not len(s) or not mask:
            return np.zeros(lo.shape, bool)
        idx = np.searchsorted(e, lo, side="right")        # the first gap ending after lo
        inside = idx < len(s)
        return inside & (s[np.minimum(idx, len(s) - 1)] < hi) & (hi > lo)

    def touches_to_end(self, mask, tick):
        """Whether a gap on a channel of ``mask`` lies anywhere from ``tick`` to the end of the run."""
        return bool(self.touches(mask, [tick], [GAP_OPEN_END])[0])


GAP_OVERFLOW, GAP_LINK, GAP_CUT_SHORT, GAP_UNMEASURED = 1, 2, 3, 4   # why a gap is there (runs' gaps.bin)
GAP_REASONS = {GAP_OVERFLOW: "gateware FIFO overflow", GAP_LINK: "frames lost on the link",
               GAP_CUT_SHORT: "capture cut short",
               GAP_UNMEASURED: "a TDC input's change its line did not measure (code 0)"}


class GapTracker:
    """Turns the stream's disturbances, in stream order between the records, into closed gaps
    (start, end, channels, reason) in the edges' unit (1/``units_per_tick`` tick):

    - an overflow marker (``overflow``): the gateware dropped records on ``channels`` from its tick
      on; the gap ends at the first record after the marker (the gateware refuses records from a
      drop until its marker is written, so none later than the gap's start comes before it);
    - frames lost on the link (``frames_lost``): every channel, from just after the last record
      before to the first record after;
    - the end (``close``): gaps still open run to the end of the run; a capture cut short adds
      one from just after its last edge;
    - on a TDC rig (``tdc``, an ``analysis.TdcSubticks``), an edge of code 0 on a TDC input: a
      change its line did not measure (a pulse shorter than the line), whose record's tick t is up
      to the line's length late: a gap on its channel over [t - ``tdc.unmeasured_span_ticks``, t + 1)
      ticks, closed at once (docs/tdc.md). A gap in ``count``; its edges in ``unmeasured`` too."""

    def __init__(self, units_per_tick=1, tdc=None):
        self.units = int(units_per_tick)
        self.tdc = tdc
        self.open = []              # (start, channels, reason) waiting for the next record
        self.last_record_tick = None
        self.count = 0
        self.unmeasured = 0         # TDC edges of code 0 (each a gap of its own)

    def overflow(self, tick, channels):
        self.open.append((int(tick) * self.units, int(channels), GAP_OVERFLOW))

    def frames_lost(self):
        start = 0 if self.last_record_tick is None else (self.last_record_tick + 1) * self.units
        self.open.append((start, ALL_CHANNELS, GAP_LINK))

    def records(self, record_ticks, masks=None, fractions=None):
        """Records arrived (their ticks, in order; on a TDC rig their channel masks and fractions too):
        the open gaps close at the first; returns them, and the gaps of edges of code 0."""
        if not len(record_ticks):
            return []
        closed = []
        if self.open:
            end = int(record_ticks[0]) * self.units
            closed = [(start, max(end, start), channels, reason) for start, channels, reason in self.open]
            self.open = []
            self.count += len(closed)
        self.last_record_tick = int(record_ticks[-1])
        if self.tdc is not None and masks is not None and fractions is not None and len(fractions) == len(record_ticks):
            ticks, channels, edges = self.tdc.unmeasured(record_ticks, masks, fractions)
            if len(ticks):
                self.unmeasured += edges
                span = self.tdc.unmeasured_span_ticks
                start = (np.maximum(ticks.astype(np.int64) - span, 0) * self.units).tolist()
                end = ((ticks.astype(np.int64) + 1) * self.units).tolist()
                closed += [(a, b, c, GAP_UNMEASURED) for a, b, c in zip(start, end, channels.tolist())]
                self.count += len(ticks)
        return closed

    def close(self, cut_short_after=None):
        """The gaps still open, to the end of the run; ``cut_short_after``: the last edge's time of a
        capture that ended early (what came after it is unknown)."""
        closed = [(start, GAP_OPEN_END, channels, reason) for start, channels, reason in self.open]
        self.open = []
        if cut_short_after is not None:
            closed.append((int(cut_short_after) + 1, GAP_OPEN_END, ALL_CHANNELS, GAP_CUT_SHORT))
        self.count += len(closed)
        return closed


def gap_tracker(subticks=None):
    """The ``GapTracker`` of a run placed by ``subticks`` (None: whole ticks): in its unit, and on a TDC
    rig (``TdcSubticks``) with its edges of code 0 as gaps."""
    if subticks is None:
        return GapTracker()
    return GapTracker(subticks.units_per_tick, tdc=subticks if hasattr(subticks, "unmeasured") else None)
