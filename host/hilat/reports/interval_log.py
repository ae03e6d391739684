"""``IntervalLog``: the one writer of a run's latencies as an HdrHistogram interval log (.hlog).

Samples come in start order, chunk by chunk, per tag (a kind): each falls into the interval of rig
time its start lies in (``interval_s`` long, from the first sample's start), values in ns. The
capture's rolling log (hlog/capture.hlog: a line per kind and interval, ``cut`` at SIGUSR1) and
``hilat export --hlog`` (one kind, every interval, empty ones too) both write through it; the engine's
log (hlog/rig.hlog) holds the rig's bins, not samples (``RunWriter.rig_intervals``). One interval's
histograms are held at a time.
"""

import numpy as np

from hilat import hdr
from hilat.statistics.streaming import SampleOutOfRange

# The streaming aggregator's range (2**40 mu) in ns: whatever it holds, the log holds; beyond is an
# error, never a dropped value.
HIGHEST_MU = 1 << 40


class IntervalLog:
    """``path``: the .hlog; ``mu_hz``: the run's units a second (sample starts are in mu);
    ``start_time``: the log's start (Unix seconds); ``tagged``: a tag (the kind) on each line;
    ``contiguous``: every interval from the first to the last, empty ones too (one tag only)."""

    def __init__(self, path, mu_hz, interval_s, start_time, tagged=True, contiguous=False, significant_figures=3):
        self.mu_hz = mu_hz
        self.interval_mu = max(1, int(round(interval_s * mu_hz)))
        self.writer = hdr.HlogWriter(path, start_time=start_time, base_time=start_time, max_value_unit_ratio=1e6)
        self.tagged, self.contiguous = tagged, contiguous
        self.significant_figures = significant_figures
        self.highest_ns = max(3_600_000_000_000, int(HIGHEST_MU * 1e9 / mu_hz) + 1)
        self.origin = None
        self.open = {}          # per tag: [interval start in mu, histogram]
        self.intervals = 0      # lines written
        self.below_zero = 0     # samples below 0 ns (sooner than the rig's own delay): not in a log of latencies

    def begin(self, origin_mu):
        """Intervals from ``origin_mu`` (default: the first sample's start)."""
        if self.origin is None:
            self.origin = int(origin_mu)

    def samples(self, tag, start_mu, values_ns):
        """A chunk of one tag's samples: their starts (mu, ascending) and values (ns, integers)."""
        if not len(start_mu):
            return
        if self.origin is None:
            self.origin = int(start_mu[0])
        # A response sooner than the rig's own delay (a value below 0 once the calibrated offset is
        # subtracted) has no place in a log of latencies >= 0: counted (meta.json), the calibration's
        # warning says why; the summary keeps it.
        if values_ns.min() < 0:
            below = values_ns < 0
            self.below_zero += int(np.count_nonzero(below))
            start_mu, values_ns = start_mu[~below], values_ns[~below]
            if not len(start_mu):
                return
        # In start order: when the first and the last lie in one interval (a chunk is much shorter than
        # an interval), so do all, and no interval index per sample is needed.
        first, last = ((int(start_mu[i]) - self.origin) // self.interval_mu for i in (0, -1))
        if first == last:
            parts = [(first, values_ns)]
        else:
            idx = (start_mu - self.origin) // self.interval_mu
            bounds = np.flatnonzero(np.diff(idx)) + 1
            parts = zip((int(i[0]) for i in np.split(idx, bounds)), np.split(values_ns, bounds))
        for part_idx, part in parts:
            start = self.origin + part_idx * self.interval_mu
            current = self.open.get(tag)
            if current is not None and start > current[0]:
                self._close(tag)
                if self.contiguous:     # the empty intervals between
                    for empty in range(current[0] + self.interval_mu, start, self.interval_mu):
                        self.open[tag] = [empty, self._histogram()]
                        self._close(tag)
                current = None
            if current is None:
                current = self.open[tag] = [start, self._histogram()]
            top = current[1].highest_recordable
            if part.max() > top:
                raise SampleOutOfRange(f"{tag}: a sample of {int(part.max())} ns in the interval from {start} mu "
                                       f"is beyond the interval log's {top} ns")
            current[1].record(part)

    def _histogram(self):
        return hdr.HdrHistogram(1, self.highest_ns, self.significant_figures)

    def _close(self, tag, end_mu=None):
        start, hist = self.open.pop(tag)
        end = start + self.interval_mu if end_mu is None else max(end_mu, start + 1)
        self.writer.interval((start - self.origin) / self.mu_hz, (end - start) / self.mu_hz, hist,
                             tag=tag if self.tagged else None)
        self.intervals += 1

    def cut(self, end_mu):
        """Write every open interval with samples now, ending at ``end_mu``; later samples open new ones."""
        for tag in [t for t, current in self.open.items() if current[1].total_count]:
            self._close(tag, end_mu)
        self.writer.flush()

    def close(self, end_mu=None):
        """Write the open intervals (ending at ``end_mu``, else whole) and close the file."""
        for tag in list(self.open):
            self._close(tag, end_mu)
        self.writer.close()
