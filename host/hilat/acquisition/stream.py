"""The capture's record stream and its consumers: ``_Stream`` turns the session's records into edges
(edges.bin), feeds the streaming pairing (samples/KIND.bin), the rolling interval log
(hlog/capture.hlog, a ``reports.interval_log.IntervalLog``) and counts what ends the capture. Nothing
here holds the records: memory is flat however long the run (docs/analysis.md, "Streaming capture")."""

import numpy as np

from hilat import analysis
from hilat.statistics.streaming import StreamingAggregator


class _Stream:
    """The consumer of the session's records: edges to the run directory, the streaming pairing,
    the count that ends the capture, and the new maxima. Its times, durations and values are in the
    analysis's unit: ticks, or sub-ticks on a rig that samples its inputs more than once a tick
    (``subticks``, an ``analysis.Subticks``; ``mu_hz``: the run's units, mu, per second)."""

    def __init__(self, writer, roles, measures, builtin, deadline, offset_mu, pace, mu_hz, hlog=None,
                 chunk_records=None, on_new_max=None, subticks=None, code_counts=None):
        self.writer = writer
        self.pace_channel, self.pace_level = pace
        self.mu_ns = 1e9 / mu_hz
        self.subticks = subticks
        self.code_counts = code_counts   # a TDC rig's online mode: codes counted per input (tdc_rig.CodeCounts)
        self.hlog = hlog
        self.chunk_records = chunk_records
        self.on_new_max = on_new_max
        self.aggregator = StreamingAggregator(roles, deadline, offset_mu, measures=measures, builtin=builtin,
                                              on_samples=self._samples)
        # The stream's holes (docs/analysis.md, "Gaps"): told by the session between the records.
        self.gaps = analysis.gap_tracker(subticks)
        self.paced = 0               # edges that --count counts (stimuli, or the first measure's starts)
        self.last_paced = None
        self.first_mu = None
        self.last_mu = None
        self.records = 0
        self.out_of_order = 0        # edges behind the previous one (a rig never sends them: counted, dropped)
        self.advanced = None         # the last heartbeat's tick given to the pairing, in the edges' unit
        self.shown_max = {}
        self.responses_before_offset = 0
        # The kinds the offset is subtracted from, whose negative values are "before the offset".
        self._offset_kinds = {"stim_to_isr", "stim_to_task"} if offset_mu else set()

    # Records per step when none is set: the working arrays of a step (edges, pairing) stay a few
    # tens of MiB however much one read of the link brings.
    DEFAULT_CHUNK = 1 << 18

    # Records may come with their edges worked out (the Ethernet stream's decode thread): ``edges=``.
    takes_edges = True

    def __call__(self, ticks, masks, levels, fractions, edges=None):
        step = self.chunk_records or self.DEFAULT_CHUNK
        for i in range(0, len(ticks), step):
            j = min(i + step, len(ticks))
            part = None
            if edges is not None:
                a, b = int(edges[3][i]), int(edges[3][j])
                part = (edges[0][a:b], edges[1][a:b], edges[2][a:b])
            self._records(ticks[i:j], masks[i:j], levels[i:j], fractions[i:j], part)

    def on_gap(self, what):
        """A hole in the stream, before the records that follow: an OVERFLOW marker, or a number of
        frames lost on the link."""
        if isinstance(what, int):
            self.gaps.frames_lost()
        else:
            self.gaps.overflow(what.timestamp, what.channels)

    def _close_gaps(self, closed):
        for start, end, channels, _reason in closed:
            self.aggregator.add_gap(start, end, channels)
        self.writer.gaps(closed)

    def _records(self, rec_ticks, masks, levels, fractions, edges=None):
        self.records += len(rec_ticks)
        if self.code_counts is not None and fractions is not None:
            self.code_counts.add(masks, fractions)
        self._close_gaps(self.gaps.records(rec_ticks, masks, fractions))
        if edges is None:
            ticks, chans, lv = analysis.edges_from_records((rec_ticks, masks, levels), fractions, self.subticks)
        else:   # the kernel's edges (no sub-tick positions): placed as edges_from_records places them
            ticks, chans, lv = edges
            if self.subticks is not None:
                ticks = self.subticks.place(ticks, chans, None)
        # A new array: reinterpreted in place (ticks < 2^63), not copied.
        ticks = ticks.view(np.int64) if ticks.dtype == np.uint64 else ticks.astype(np.int64)
        floor = self.last_mu if self.advanced is None else max(self.advanced, self.last_mu or self.advanced)
        if floor is not None and len(ticks) and (ticks[0] < floor or (np.diff(ticks) < 0).any()):
            keep = ticks >= np.maximum.accumulate(np.concatenate(([floor], ticks)))[:-1]
            self.out_of_order += int((~keep).sum())
            ticks, chans, lv = ticks[keep], chans[keep], lv[keep]
        if not len(ticks):
            return
        if self.first_mu is None:
            self.first_mu = int(ticks[0])
        self.last_mu = int(ticks[-1])
        self.writer.edges(ticks, chans, lv)
        paced = np.flatnonzero((chans == self.pace_channel) & (lv == self.pace_level))
        if len(paced):
            self.paced += len(paced)
            self.last_paced = int(ticks[paced[-1]])
        self.aggregator.feed(ticks, chans, lv)
        self._new_maxima()

    def advance(self, complete_before):
        """A heartbeat of the stream: every record before tick ``complete_before`` has arrived or is
        in a gap. With no gap open (a hole's end is not known yet) the pairing closes the windows it
        ends (``StreamingAggregator.advance``): a quiet DUT's last stimuli are judged now."""
        if complete_before is None or self.gaps.open:
            return
        units = int(complete_before) * (self.subticks.units_per_tick if self.subticks is not None else 1)
        if self.advanced is not None and units <= self.advanced:
            return
        self.advanced = units
        self.aggregator.advance(units)
        self._new_maxima()

    def _samples(self, kind, series):
        # Written on the run writer's thread (its file writes and the log's histograms do not hold
        # up the pairing); the arrays are final and not changed after.
        self.writer.later(lambda: self._write_samples(kind, series))

    def _write_samples(self, kind, series):
        self.writer.samples(kind, series)
        values, starts = series.values, series.start_mu
        ok = values != analysis.MISSING
        measured = int(np.count_nonzero(ok))
        if kind in self._offset_kinds:
            self.responses_before_offset += int(np.count_nonzero((values < 0) & ok))
        if self.hlog is not None and measured:
            if measured < len(values):
                values, starts = values[ok], starts[ok]
            # A whole number of ns a unit (20 ns at 50 MHz): an integer product, the same as the
            # rounded float one below 2^53 ns, without the float pass.
            exact = (float(self.mu_ns).is_integer()
                     and max(-int(values.min()), int(values.max())) * int(self.mu_ns) < 1 << 53)
            ns = values * int(self.mu_ns) if exact else np.round(values * self.mu_ns).astype(np.int64)
            self.hlog.samples(kind, starts, ns)

    def _new_maxima(self):
        for kind, worst in self.aggregator.worst.items():
            if worst["mu"] > self.shown_max.get(kind, -1):
                self.shown_max[kind] = worst["mu"]
                if self.on_new_max is not None:
                    self.on_new_max(kind, worst)

    def finish(self, end_mu=None, cut_short=False):
        """Close the last windows at ``end_mu``; ``cut_short``: the capture ended early, so what
        came after the last edge is a gap."""
        self._close_gaps(self.gaps.close(self.last_mu if cut_short and self.last_mu is not None else None))
        self.aggregator.finish(end_mu)
        self._new_maxima()

    @property
    def gap_count(self):
        return self.gaps.count
