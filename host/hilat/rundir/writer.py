"""``RunWriter``: the one writer of a run directory (layout in ``hilat.rundir.layout``), as the
capture goes: raw bytes first, then edges, gaps and samples in fixed-width stores, JSON and text files
replaced whole."""

import json
from pathlib import Path

import numpy as np

from hilat.hdr import HlogWriter
from hilat.rundir.layout import (
    BUILTIN_KINDS,
    EDGE_DTYPE,
    EDGES_MAGIC,
    GAP_DTYPE,
    GAPS_MAGIC,
    OUTLIER_DTYPE,
    OUTLIERS_MAGIC,
    SAMPLE_DTYPE,
    SAMPLES_MAGIC,
    STIMULI_MAGIC,
    STIMULUS_DTYPE,
)
from hilat.rundir.stores import StoreAppender, _stimulus_items, _WriteBehind


class RunWriter:
    """Writes a run directory as the capture goes: raw bytes first (unbuffered), then edges and
    samples in fixed-width items. Nothing is held beyond the write buffers."""

    def __init__(self, path, kinds=()):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._raw = open(self.path / "raw.bin", "ab", buffering=0)
        # Edges and samples are written behind (the bulk of a fast stream's bytes); gaps at once.
        self._behind = _WriteBehind()
        self._edges = StoreAppender(self.path / "edges.bin", EDGES_MAGIC, EDGE_DTYPE, self._behind)
        self._gaps = StoreAppender(self.path / "gaps.bin", GAPS_MAGIC, GAP_DTYPE)
        self._samples = {}
        self._stimuli = None     # samples/stimuli.bin: the built-in kinds'
        self._pending = {}       # built-in kinds' series of the current step, until all are in
        self.raw_bytes = 0
        self._rig_hlog = self._outliers = None    # on-rig: hlog/rig.hlog and outliers.bin, when first written
        self.set_kinds(kinds)

    def set_kinds(self, kinds):
        """The measurement kinds whose samples will come (known once the rig has identified)."""
        if kinds:
            (self.path / "samples").mkdir(exist_ok=True)
        if self._stimuli is None and all(kind in kinds for kind in BUILTIN_KINDS):
            self._stimuli = StoreAppender(self.path / "samples" / "stimuli.bin", STIMULI_MAGIC, STIMULUS_DTYPE,
                                          self._behind)
        for kind in kinds:
            if self._stimuli is not None and kind in BUILTIN_KINDS:
                continue
            if kind not in self._samples:
                self._samples[kind] = StoreAppender(self.path / "samples" / f"{kind}.bin", SAMPLES_MAGIC, SAMPLE_DTYPE,
                                                    self._behind)

    def raw(self, data):
        # A short write (the disk filling up) is followed by one that raises: every byte counted is
        # on disk.
        view = memoryview(data)
        while view:
            n = self._raw.write(view)
            self.raw_bytes += n
            view = view[n:]

    def edges(self, ticks, chans, levels):
        items = np.empty(len(ticks), EDGE_DTYPE)
        items["tick"], items["channel"], items["level"] = ticks, chans, levels
        self._edges.append(items)

    @property
    def edge_count(self):
        return self._edges.count

    def gaps(self, closed):
        """Gaps as the capture closed them: [(start, end, channel mask, reason)]."""
        if closed:
            items = np.array([tuple(g) for g in closed], GAP_DTYPE)
            self._gaps.append(items)
            self._gaps.flush()  # few and precious: on disk at once

    @property
    def gap_count(self):
        return self._gaps.count

    def samples(self, kind, series):
        """Final samples of one kind (a ``measures.Series``), in start order. The built-in kinds come
        one after the other for the same stimuli (the streaming pairing's step): stored together."""
        if self._stimuli is not None and kind in BUILTIN_KINDS:
            self._pending[kind] = series
            if len(self._pending) == len(BUILTIN_KINDS):
                self._stimuli.append(_stimulus_items([self._pending[k] for k in BUILTIN_KINDS]))
                self._pending = {}
            return
        items = np.empty(len(series), SAMPLE_DTYPE)
        items["start_mu"], items["value_mu"] = series.start_mu, series.values
        items["duplicates"] = np.minimum(series.duplicates, 0xFFFF)
        items["tag_at_start"], items["tag_in_window"] = series.tag_at_start, series.tag_in_window
        items["unknown"] = series.unknown
        self._samples[kind].append(items)

    # ---- the engine's results (on-rig) ----

    def rig_intervals(self, lines, start_time):
        """Lines of hlog/rig.hlog: [(start_s, length_s, tag, HdrHistogram in ns)], written at once (a
        line per interval, kind and tag; ``start_time``: the log's start, Unix seconds)."""
        if self._rig_hlog is None:
            (self.path / "hlog").mkdir(exist_ok=True)
            self._rig_hlog = HlogWriter(self.path / "hlog" / "rig.hlog", start_time=start_time, base_time=start_time,
                                        max_value_unit_ratio=1e6,
                                        comments=["hilat on-rig engine: bins at their highest equivalent value, in ns"])
        for start_s, length_s, tag, histogram in lines:
            self._rig_hlog.interval(start_s, length_s, histogram, tag=tag)
        self._rig_hlog.flush()

    def outliers(self, items):
        """The engine's outlier records (``layout.OUTLIER_DTYPE`` items) to outliers.bin."""
        if self._outliers is None:
            self._outliers = StoreAppender(self.path / "outliers.bin", OUTLIERS_MAGIC, OUTLIER_DTYPE)
        self._outliers.append(items)

    def write_json(self, name, doc):
        """A JSON file, replaced whole (a reader never sees half of it)."""
        self.write_text(name, json.dumps(doc, indent=1))

    def write_text(self, name, text):
        tmp = self.path / f".{name}.tmp"
        try:
            tmp.write_text(text)
        except OSError:   # disk full: no half file left behind, the previous one stays
            tmp.unlink(missing_ok=True)
            raise
        tmp.replace(self.path / name)

    def later(self, job):
        """``job()`` on the writer's thread, after the writes given before it (its errors are raised
        by a later call here, as a write's)."""
        self._behind.put(job)

    def flush(self, wait=True):
        """Edges and samples readable by another process; ``wait=False``: soon (the writer thread's
        next job), without waiting for it."""
        for appender in [self._edges, *self._samples.values(), *filter(None, [self._stimuli])]:
            appender.flush(wait=False)
        if wait:
            self._behind.sync()

    def close(self):
        """Every file closed, even when one cannot write its buffer (disk full); then that error."""
        error = None
        for f in [self._raw, self._edges, self._gaps, *self._samples.values(),
                  *filter(None, [self._stimuli, self._rig_hlog, self._outliers])]:
            try:
                f.close()
            except OSError as e:
                error = error or e
        self._behind.stop()
        if error is not None:
            raise error
