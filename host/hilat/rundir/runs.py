"""A run directory: written as the capture streams (``RunWriter``), read back in chunks (``Run``).

Layout (docs/analysis.md, "Run directory"):

- ``raw.bin``        every byte received from the rig, appended before anything decodes it (over
                     udp://, the command link's datagrams: replies and frames, one after the other);
- ``stream.bin``     udp:// only: every datagram of the Ethernet stream as received, in fixed slots
                     with its length and receive time, written before anything decodes it
                     (``hilat.link.udp``; decoded again with meta.json's rig and ``counters.stream.session``);
- ``edges.bin``      the decoded edges as they arrive: a 16-byte header (``HILATEDG``, format version,
                     item size), then fixed-width little-endian items ``EDGE_DTYPE`` (tick, channel,
                     level), in tick order;
- ``samples/stimuli.bin`` the built-in kinds' samples as the streaming pairing finalises them, one
                     item per stimulus: header ``HILATSTM``, then ``STIMULUS_DTYPE`` items (start tick,
                     each kind's value or -1 for a miss or an unknown, the ISR's and task's duplicates,
                     tag flags, a bit per unknown kind), in start order;
- ``samples/KIND.bin`` the samples of each defined measurement kind (and of the built-in ones in runs
                     written before stimuli.bin): header ``HILATSMP``, then ``SAMPLE_DTYPE`` items
                     (start tick, value or -1, duplicates, tag flags, unknown), in start order (store
                     version 2; version 1, without ``unknown``, is still read);
- ``gaps.bin``       where the record stream had holes (``analysis.Gaps``): header ``HILATGAP``, then
                     ``GAP_DTYPE`` items (start, end, channel mask, reason), as the capture closed them;
- ``meta.json``      rig identity, settings, counters, calibration; ``summary.txt``/``summary.json``:
                     the report document, rendered from the capture's aggregates;
- ``hlog/``          the rolling HdrHistogram interval log of the capture (``capture.hlog``), and of
                     the rig's engine (``rig.hlog``) in an on-rig capture;
- ``outliers.bin``   on-rig: the engine's outlier records (header ``HILATOUT``, ``OUTLIER_DTYPE``).

Times and values are in ticks, or in finer units when meta.json's ``rig.samples_per_tick`` S is above
1 (docs/subtick.md: sub-ticks, 1/S tick, or 1/(64 S) tick with a resolution calibration in force;
``Run.subticks``); meta.json's durations (deadline, offset, measures) stay in ticks.

Runs written before ``edges.bin`` existed keep ``events.csv`` (CSV: tick,channel,level,tag); with
neither, the edges are decoded again from ``raw.bin``. Reports recompute the latencies from the
edges, so they reflect the pairing rules and the calibration, not what an older tool wrote.
"""

import json
import os
import queue
import threading
from pathlib import Path

import numpy as np

from hilat import analysis, units
from hilat.analysis.measures import Measure, MeasureError
from hilat.link import protocol as p

EDGES_MAGIC = b"HILATEDG"
SAMPLES_MAGIC = b"HILATSMP"
STORE_VERSION = 1
EDGE_DTYPE = np.dtype([("tick", "<i8"), ("channel", "u1"), ("level", "u1")])
SAMPLE_DTYPE_V1 = np.dtype([("start_mu", "<i8"), ("value_mu", "<i8"), ("duplicates", "<u2"),
                            ("tag_at_start", "u1"), ("tag_in_window", "u1")])
SAMPLE_DTYPE = np.dtype(SAMPLE_DTYPE_V1.descr + [("unknown", "u1")])
SAMPLES_VERSIONS = {1: SAMPLE_DTYPE_V1, 2: SAMPLE_DTYPE}
# The built-in kinds' samples, one item per stimulus (samples/stimuli.bin): the start tick and the
# tag flags once, each kind's value (analysis.KINDS order), the ISR's and the task's duplicates, and
# the kinds a gap made unknown (bit k: kind k). Half the bytes of five per-kind stores.
STIMULI_MAGIC = b"HILATSTM"
BUILTIN_KINDS = tuple(kind for kind, _ in analysis.KINDS)
STIMULUS_DTYPE = np.dtype([("start_mu", "<i8"), ("values", "<i8", (len(BUILTIN_KINDS),)),
                           ("isr_duplicates", "<u2"), ("task_duplicates", "<u2"), ("tag_at_start", "u1"),
                           ("tag_in_window", "u1"), ("unknown", "u1")])
GAPS_MAGIC = b"HILATGAP"
GAP_DTYPE = np.dtype([("start", "<i8"), ("end", "<i8"), ("channels", "<u4"), ("reason", "u1")])
OUTLIERS_MAGIC = b"HILATOUT"
# The engine's outlier records (ENGINE_OUTLIERS): stimulus tick, tag flags, each kind's value in
# ticks (0xFFFFFFFF: a miss, 0xFFFFFFFE: below range).
OUTLIER_DTYPE = np.dtype([("start_tick", "<u8"), ("flags", "u1"), ("values", "<u4", (3,))])
_HEADER = 16
# Edges per chunk when a run is read in pieces: 1 Mi edges (10 MiB of items, ~60 MiB while paired).
CHUNK_EDGES = 1 << 20


class RunError(Exception):
    """A run directory that cannot be read; the message says which file and why."""


# ---- fixed-width stores ---------------------------------------------------------------------------------


def _store_version(dtype):
    return 2 if dtype == SAMPLE_DTYPE else STORE_VERSION


def _store_header(magic, dtype):
    return magic + _store_version(dtype).to_bytes(4, "little") + dtype.itemsize.to_bytes(4, "little")


def _open_store(path, magic, dtype):
    """An open store file positioned after its header, and its item count (a torn last item of a
    capture that died mid-write is left out). A samples store of version 1 is read with its own
    item type (``SAMPLES_VERSIONS``): ``iter_store`` converts its items."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise RunError(f"{path.parent}: no {path.name}") from None
    head = f.read(_HEADER)
    if len(head) < _HEADER or head[:8] != magic:
        f.close()
        raise RunError(f"{path}: not a hilat {magic[5:].decode().lower()} store (bad header)")
    version, itemsize = int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little")
    file_dtype = SAMPLES_VERSIONS.get(version) if dtype == SAMPLE_DTYPE else (
        dtype if version == STORE_VERSION else None)
    if file_dtype is None or itemsize != file_dtype.itemsize:
        f.close()
        raise RunError(f"{path}: store version {version}, item size {itemsize}; this hilat reads version "
                       f"{_store_version(dtype)}, item size {dtype.itemsize}")
    count = (os.fstat(f.fileno()).st_size - _HEADER) // file_dtype.itemsize
    return f, count, file_dtype


def store_count(path, magic, dtype):
    f, count, _ = _open_store(path, magic, dtype)
    f.close()
    return count


def iter_store(path, magic, dtype, chunk):
    """The items of a store file, ``chunk`` at a time (bounded memory), as ``dtype`` items."""
    f, count, file_dtype = _open_store(path, magic, dtype)
    with f:
        left = count
        while left:
            n = min(chunk, left)
            items = np.fromfile(f, dtype=file_dtype, count=n)
            if len(items) < n:
                raise RunError(f"{path}: shorter than its size said")
            left -= n
            if file_dtype != dtype:  # an older store: the fields it has, the others zero
                converted = np.zeros(len(items), dtype)
                for name in file_dtype.names:
                    converted[name] = items[name]
                items = converted
            yield items


def _read_store(path, magic, dtype):
    parts = list(iter_store(path, magic, dtype, 1 << 62))
    return parts[0] if parts else np.zeros(0, dtype)


# A long capture writes tens of GB (a gigabit stream's edges and samples): the page cache would fill
# with them and the kernel reclaim it on the capture's time. Every LET_GO_BYTES written, the pages of
# a file more than LET_GO_BYTES behind its end are given back: written to disk in the background
# (POSIX_FADV_DONTNEED starts their write-back) and dropped once clean (a later call).
LET_GO_BYTES = 64 << 20


class _WriteBehind:
    """One thread that does a run's bulk writing, jobs in the order they were given: the appenders'
    item arrays and the capture's samples and interval log (``RunWriter.later``). A write (and the
    kernel's dirty-page throttling) then waits there, not in the decoding and pairing. Bounded:
    ``put`` blocks once ``depth`` jobs wait. A failed job (a full disk, a sample no log holds) is
    kept and raised by the next ``put``/``sync``; the jobs after it are not done."""

    def __init__(self, depth=64):
        self._queue = queue.Queue(maxsize=depth)
        self.failed = None      # the first failure: no job after it is done
        self._unraised = None   # that failure until raised once on the capture's thread
        self._thread = threading.Thread(target=self._run, name="hilat-run-writer", daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                if self.failed is None:
                    job()
            except Exception as e:   # noqa: BLE001 - raised on the capture's thread (_raise)
                self.failed = self._unraised = e
            finally:
                self._queue.task_done()

    @property
    def here(self):
        """Whether this is the writer's own thread (a job appending writes at once)."""
        return threading.current_thread() is self._thread

    def _raise(self):
        if self._unraised is not None:
            error, self._unraised = self._unraised, None
            raise error

    def put(self, job):
        """``job()`` on the writer's thread, after the jobs given before."""
        self._raise()
        self._queue.put(job)

    def sync(self):
        """Every job given so far done (or its error raised)."""
        self._queue.join()
        self._raise()

    def stop(self):
        self._queue.put(None)
        self._thread.join()


class StoreAppender:
    """One store file written item array by item array (buffered; ``flush`` makes it readable).
    With ``behind`` (a ``_WriteBehind``) the writes happen on its thread; ``flush(wait=False)`` only
    asks for one."""

    def __init__(self, path, magic, dtype, behind=None):
        self.dtype = dtype
        self.file = open(path, "wb", buffering=1 << 20)
        self.file.write(_store_header(magic, dtype))
        self.count = 0
        self._behind = behind
        self._written = self._let_go = 0   # bytes written; bytes given back to the page cache

    def append(self, items):
        if len(items):
            # The array's own bytes (no copy as tobytes makes), contiguous as it always is here.
            data = memoryview(np.ascontiguousarray(items)).cast("B")
            if self._behind is None or self._behind.here:
                self._write(data)
            else:
                self._behind.put(lambda: self._write(data))
            self.count += len(items)

    def _write(self, data):
        self.file.write(data)
        self._written += len(data)
        if self._written - self._let_go >= 2 * LET_GO_BYTES and hasattr(os, "posix_fadvise"):
            self._let_go = self._written - LET_GO_BYTES
            try:
                os.posix_fadvise(self.file.fileno(), 0, self._let_go, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass   # advice only

    def flush(self, wait=True):
        if self._behind is None or self._behind.here:
            self.file.flush()
            return
        self._behind.put(self.file.flush)
        if wait:
            self._behind.sync()

    def close(self):
        try:
            if self._behind is not None:
                self._behind.sync()
        finally:
            self.file.close()


def _stimulus_items(series):
    """STIMULUS_DTYPE items of the built-in kinds' series (BUILTIN_KINDS order, the same stimuli)."""
    first = series[0]
    if any(len(s) != len(first) for s in series):
        raise ValueError("the built-in kinds' samples of one step cover different stimuli")
    items = np.empty(len(first), STIMULUS_DTYPE)
    items["start_mu"] = first.start_mu
    for k, s in enumerate(series):
        items["values"][:, k] = s.values
    items["isr_duplicates"] = np.minimum(series[BUILTIN_KINDS.index("stim_to_isr")].duplicates, 0xFFFF)
    items["task_duplicates"] = np.minimum(series[BUILTIN_KINDS.index("stim_to_task")].duplicates, 0xFFFF)
    items["tag_at_start"], items["tag_in_window"] = first.tag_at_start, first.tag_in_window
    unknown = np.zeros(len(first), np.uint8)
    for k, s in enumerate(series):
        unknown |= (np.asarray(s.unknown) != 0).astype(np.uint8) << k
    items["unknown"] = unknown
    return items


def _samples_of_stimuli(items, kind):
    """One built-in kind's SAMPLE_DTYPE items out of STIMULUS_DTYPE ones."""
    k = BUILTIN_KINDS.index(kind)
    out = np.zeros(len(items), SAMPLE_DTYPE)
    out["start_mu"], out["value_mu"] = items["start_mu"], items["values"][:, k]
    if kind in ("stim_to_isr", "stim_to_task"):
        out["duplicates"] = items["isr_duplicates" if kind == "stim_to_isr" else "task_duplicates"]
    out["tag_at_start"], out["tag_in_window"] = items["tag_at_start"], items["tag_in_window"]
    out["unknown"] = (items["unknown"] >> k) & 1
    return out


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
        for f in [self._raw, self._edges, self._gaps, *self._samples.values(), *filter(None, [self._stimuli])]:
            try:
                f.close()
            except OSError as e:
                error = error or e
        self._behind.stop()
        if error is not None:
            raise error


# ---- reading --------------------------------------------------------------------------------------------


class Run:
    """A run directory. Its edges are read on first use (``ticks``/``chans``/``levels``), or in
    chunks with ``iter_edges`` (bounded memory, for runs of any length)."""

    def __init__(self, path, meta, ts_hz, offset_mu, roles, deadline_mu, edges_source, measures=(),
                 builtin=True, edges=None, subticks=None, analysis_measures=None):
        self.path = Path(path)
        self.meta = meta
        # The analysis counts time in the run's unit, mu (hilat.units): ticks, or finer units on a rig
        # that samples its inputs S > 1 times a tick (docs/subtick.md, analysis.Subticks): edges,
        # samples, offset and deadlines are all in mu; ts_hz is the tick clock (ticks/s).
        self.subticks = subticks or analysis.Subticks()
        self.unit = units.RunUnit.of(ts_hz, self.subticks)
        self.samples_per_tick = self.subticks.samples_per_tick
        self.units_per_tick = self.subticks.units_per_tick
        self.ts_hz = float(ts_hz)           # ticks per second (calibrated when a clock calibration was in force)
        self.offset_mu = offset_mu          # calibrated rig offset, subtracted from output -> input intervals
        self.roles = roles
        self.deadline_mu = deadline_mu
        self.edges_source = edges_source    # "edges.bin", "events.csv" or "raw.bin"
        self.measures = list(measures)      # measures.Measure definitions of the run (deadlines in ticks)
        # ... with their deadlines in the run's unit, as the pairing takes them
        self.analysis_measures = list(analysis_measures) if analysis_measures is not None else self.measures
        self.builtin = builtin              # a stimulus fired: the built-in stimulus kinds exist
        self._edges = edges
        self._gaps = None
        self._cut_short = False      # load_run found the capture never finished (_load_cut_short)
        self._pairing = None
        self._measurements = None

    # ---- edges ----

    def _load_edges(self):
        if self._edges is None:
            if self.edges_source == "edges.bin":
                items = _read_store(self.path / "edges.bin", EDGES_MAGIC, EDGE_DTYPE)
                edges = items["tick"].copy(), items["channel"].copy(), items["level"].copy()
            elif self.edges_source == "events.csv":
                edges = read_events_csv(self.path / "events.csv")
            else:
                ticks, chans, levels, _counters, gaps = read_raw(self.path / "raw.bin", self.subticks, with_gaps=True,
                                                                 stream=stream_of(self.meta))
                edges = ticks, chans, levels
                if self._gaps is None:
                    self._gaps = self._with_cut(gaps, ticks)
            self._edges = _sorted(*edges)
        return self._edges

    # ---- gaps ----

    @property
    def cut_short(self):
        """Whether the capture ended early (interrupted, an error, killed, an interim summary): what
        came after its last edge is not known."""
        m = self.meta
        return self._cut_short or bool(m.get("interrupted") or m.get("error") or m.get("interim")
                                       or m.get("cut_short"))

    @property
    def gaps(self):
        """Where the stream had holes (``analysis.Gaps``, in the edges' unit): gaps.bin as the
        capture wrote it (decoded again from raw.bin when the edges come from there), and after the
        last edge of a capture cut short."""
        if self._gaps is None:
            if self.edges_source == "raw.bin":
                self._load_edges()
            else:
                path = self.path / "gaps.bin"
                items = _read_store(path, GAPS_MAGIC, GAP_DTYPE) if path.exists() else np.zeros(0, GAP_DTYPE)
                gaps = analysis.Gaps(items["start"], items["end"], items["channels"])
                self._gaps = self._with_cut(gaps, None)
        return self._gaps

    def _with_cut(self, gaps, ticks):
        if not self.cut_short:
            return gaps
        if ticks is None:
            last = self.last_edge_time()
        else:
            last = int(ticks.max()) if len(ticks) else None
        if last is None:
            return gaps
        tail = analysis.Gaps.of([(last + 1, analysis.GAP_OPEN_END, analysis.ALL_CHANNELS)])
        return gaps + tail

    def last_edge_time(self):
        """The last edge's time (the edges are in time order), without reading them all from edges.bin."""
        if self._edges is None and self.edges_source == "edges.bin":
            f, count, dtype = _open_store(self.path / "edges.bin", EDGES_MAGIC, EDGE_DTYPE)
            with f:
                if not count:
                    return None
                f.seek(_HEADER + (count - 1) * dtype.itemsize)
                return int(np.fromfile(f, dtype=dtype, count=1)["tick"][0])
        edges = self._load_edges()
        return int(edges[0][-1]) if len(edges) and len(edges[0]) else None

    @property
    def ticks(self):
        return self._load_edges()[0]

    @property
    def chans(self):
        return self._load_edges()[1]

    @property
    def levels(self):
        return self._load_edges()[2]

    @property
    def edge_count(self):
        """Edges of the run, without reading them when the store says."""
        if self._edges is None and self.edges_source == "edges.bin":
            return store_count(self.path / "edges.bin", EDGES_MAGIC, EDGE_DTYPE)
        return len(self.ticks)

    def iter_edges(self, chunk=CHUNK_EDGES):
        """(ticks, chans, levels) chunks in tick order, bounded memory (edges.bin, events.csv)."""
        if self._edges is not None or self.edges_source == "raw.bin":
            t, c, lv = self._load_edges()
            for i in range(0, len(t), chunk):
                yield t[i:i + chunk], c[i:i + chunk], lv[i:i + chunk]
        elif self.edges_source == "edges.bin":
            for items in iter_store(self.path / "edges.bin", EDGES_MAGIC, EDGE_DTYPE, chunk):
                yield items["tick"], items["channel"], items["level"]
        else:
            yield from iter_events_csv(self.path / "events.csv")

    def first_tick(self):
        for ticks, _c, _lv in self.iter_edges(chunk=1):
            return int(ticks[0]) if len(ticks) else 0
        return 0

    # ---- samples written by the capture ----

    def _in_stimuli_store(self, kind):
        return kind in BUILTIN_KINDS and self.builtin and (self.path / "samples" / "stimuli.bin").exists()

    def has_stored_samples(self):
        """Whether the capture's streaming pairing wrote every kind's samples (samples/stimuli.bin for
        the built-in kinds, samples/KIND.bin for the others and in runs of earlier versions)."""
        samples = self.path / "samples"
        return not self.cut_short and all(self._in_stimuli_store(kind) or (samples / f"{kind}.bin").exists()
                                          for kind in self.kind_titles)

    def iter_samples(self, kind, chunk=CHUNK_EDGES):
        """The stored samples of ``kind`` (``SAMPLE_DTYPE`` items), in chunks."""
        if self._in_stimuli_store(kind):
            stimuli = iter_store(self.path / "samples" / "stimuli.bin", STIMULI_MAGIC, STIMULUS_DTYPE, chunk)
            return (_samples_of_stimuli(items, kind) for items in stimuli)
        return iter_store(self.path / "samples" / f"{kind}.bin", SAMPLES_MAGIC, SAMPLE_DTYPE, chunk)

    # ---- derived ----

    @property
    def label(self):
        return self.meta.get("label") or self.path.name

    @property
    def tick_ns(self):
        """One tick in ns (one mu is ``unit.mu_ns``)."""
        return 1e9 / self.ts_hz

    @property
    def end_tick(self):
        """Where the last windows close: where the capture observed up to (meta.json's observed_end),
        else just after the last edge."""
        observed = self.meta.get("observed_end")
        last = int(self.ticks[-1]) + 1 if len(self.ticks) else 0
        return max(int(observed), last) if observed is not None and not self.cut_short else last

    @property
    def pairing(self):
        if self._pairing is None:
            self._pairing = analysis.pair(self.ticks, self.chans, self.levels, self.roles, self.deadline_mu,
                                          end_tick=self.end_tick, offset_mu=self.offset_mu, gaps=self.gaps)
        return self._pairing

    @property
    def measurements(self):
        """Every kind of the run (built-in and defined), each with its own samples."""
        if self._measurements is None:
            self._measurements = analysis.measure(self.ticks, self.chans, self.levels, self.roles,
                                                  self.analysis_measures,
                                                  builtin=self.builtin, deadline=self.deadline_mu,
                                                  end_tick=self.end_tick, offset_mu=self.offset_mu,
                                                  gaps=self.gaps)
        return self._measurements

    @property
    def on_rig(self):
        """Measured by the rig's engine: its results are in engine.json, raw edges at most beside them."""
        return (self.meta.get("results") or {}).get("on_rig", "none") != "none"

    @property
    def has_raw_edges(self):
        """Whether the capture streamed the raw edges: every run but an on-rig one without --raw, whose
        results are the engine's histograms only."""
        return (self.meta.get("results") or {}).get("raw", "complete") != "none"

    @property
    def kind_titles(self):
        titles = analysis.kind_titles(self.roles, self.measures, self.builtin)
        if self.on_rig:  # the engine measures the stimulus -> ISR/task kinds
            return {kind: title for kind, title in titles.items() if kind in p.ENGINE_KINDS}
        return titles

    @property
    def losses(self):
        """Everything the run lost on the way, as {what: count}; empty when nothing was lost."""
        counters = self.meta.get("counters") or {}
        dec = counters.get("decoder") or {}
        out = {}
        for key in ("lost", "corrupt", "malformed", "wrong_version", "unknown_type"):
            if dec.get(key):
                out[f"frames {key}"] = int(dec[key])
        dropped = counters.get("gateware_dropped_per_channel") or []
        if any(dropped):
            out["edges dropped in gateware (FIFO full)"] = int(sum(dropped))
        if counters.get("gateware_overflow_markers"):
            out["gateware overflow markers"] = int(counters["gateware_overflow_markers"])
        if counters.get("out_of_order_edges"):
            out["edges out of tick order (dropped)"] = int(counters["out_of_order_edges"])
        stream = counters.get("stream") or {}
        if stream.get("records_lost"):
            out["records lost on the Ethernet link"] = int(stream["records_lost"])
        if stream.get("datagrams_lost"):
            out["datagrams lost on the Ethernet link"] = int(stream["datagrams_lost"])
        return out

    @property
    def problems(self):
        """Conditions a reader must see next to the figures (interrupted, errors, losses)."""
        out = [CUT_SHORT] if self.cut_short else []
        if self.meta.get("error"):
            out.append(f"the capture ended with an error: {self.meta['error']}")
        if self.meta.get("interrupted"):
            out.append(f"the capture was interrupted ({self.meta.get('stopped_by') or 'Ctrl-C'}): the figures cover "
                       "what was captured")
        for what, n in self.losses.items():
            out.append(f"LOST: {n} {what}")
        engine = self.meta.get("engine") or {}
        for line in (engine.get("problems") or []) + (engine.get("notes") or []):
            out.append(f"engine: {line}")
        results = self.meta.get("results") or {}
        if self.on_rig and results.get("raw") == "partial":
            out.append("raw edges beside the engine: partial (the link did not carry them all; the figures are the "
                       "engine's)")
        out += _stream_problems((self.meta.get("counters") or {}).get("stream") or {})
        replayed = ((self.meta.get("counters") or {}).get("decoder") or {}).get("duplicate")
        if replayed:
            out.append(f"{replayed} replayed frames (a seq and bytes seen just before) were dropped as duplicates: "
                       "no data lost, but the link repeats frames")
        return out


def _stream_problems(stream):
    """udp://: what the rig sent against what arrived, and what the stream did on the way."""
    out = []
    sent = stream.get("rig_records_sent")
    arrived = (stream.get("records") or 0) + (stream.get("overflow_markers") or 0)
    if sent is not None and sent != arrived:
        out.append(f"stream: the rig sent {sent} records in {stream.get('rig_datagrams_sent')} datagrams, "
                   f"{arrived} arrived ({stream.get('records_lost', 0)} lost on the way)")
    odd = {k: stream.get(k) for k in ("reordered", "duplicated", "late", "stale", "malformed") if stream.get(k)}
    if odd:
        out.append("stream: " + ", ".join(f"{n} datagrams {k}" for k, n in odd.items())
                   + " (put back in order or dropped; losses are counted apart)")
    if stream.get("receiver_error"):
        out.append(f"stream: {stream['receiver_error']}")
    return out


def _sorted(ticks, chans, levels):
    if len(ticks) and np.any(ticks[1:] < ticks[:-1]):
        order = np.argsort(ticks, kind="stable")
        return ticks[order], chans[order], levels[order]
    return ticks, chans, levels


def _read_json(path):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RunError(f"{path.parent}: no {path.name} (is this a hilat run directory?)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunError(f"{path}: not valid JSON ({e})") from None


def read_events_csv(path):
    """events.csv (tick,channel,level,tag) -> (ticks, chans, levels); fast, and strict about shape."""
    data = path.read_bytes()
    header, _, body = data.partition(b"\n")
    if header.strip() != b"tick,channel,level,tag":
        raise RunError(f"{path}: unexpected header {header[:60]!r}")
    return _parse_rows(path, body)


def stream_of(meta):
    """How to decode a udp:// run's stream.bin: {"layout": udp.Layout, "session": id} from its meta.json
    (None for a run without a stream)."""
    from hilat.link import udp

    stream = (meta.get("counters") or {}).get("stream")
    rig = meta.get("rig") or {}
    if not stream or not rig:
        return None
    ethernet = rig.get("ethernet") or [None] * 5
    spt = int(rig.get("samples_per_tick") or 1)
    n_inputs = int(rig["n_inputs"])
    layout = udp.Layout(int(rig["n_stimulus"]) + n_inputs, n_inputs * (spt.bit_length() - 1),
                        int(ethernet[4] or udp.DEFAULT_RECORD_WORDS))
    return {"layout": layout, "session": stream.get("session")}


def read_raw(path, subticks=None, with_gaps=False, stream=None):
    """Decode raw.bin again: (times, chans, levels, decoder counters[, gaps]); times in the units of
    ``subticks`` (``analysis.Subticks``; None: ticks). ``with_gaps``: also the stream's holes
    (``analysis.Gaps``: overflow markers and frames lost, as the capture found them; one still open
    at the end runs to the end). ``stream`` (``stream_of(meta)``): the stream.bin beside it is decoded
    too, after raw.bin's records (a udp:// capture's edges; its counters as the decoder's "stream")."""
    from hilat.link.batch import BatchDecoder

    decoder = BatchDecoder()
    tracker = analysis.GapTracker(subticks.units_per_tick if subticks is not None else 1)
    closed = []
    parts = []
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            closed += _replay(decoder.feed_batch(chunk), tracker, parts, subticks)
    counters = decoder.counters()
    stream_path = Path(path).parent / "stream.bin"
    if stream is not None and stream_path.exists():
        from hilat.link import udp

        stream_decoder = udp.StreamDecoder(stream["layout"], session=stream.get("session"))
        try:
            for batch in udp.decode_stream_file(stream_path, stream_decoder):
                closed += _replay(batch, tracker, parts, subticks)
        except udp.StreamFileError as e:
            raise RunError(str(e)) from None
        counters["stream"] = stream_decoder.counters()
    if parts:
        ticks, chans, levels = (np.concatenate(x) for x in zip(*parts))
    else:
        ticks, chans, levels = np.zeros(0, np.uint64), np.zeros(0, np.uint8), np.zeros(0, np.uint8)
    out = (ticks.astype(np.int64), chans, levels, counters)
    if with_gaps:
        closed += tracker.close()
        out += (analysis.Gaps.of([(a, b, c) for a, b, c, _reason in closed]),)
    return out


def _replay(batch, tracker, parts, subticks):
    """One RecordBatch of a replay: its holes to ``tracker`` in stream order, its edges to ``parts``;
    returns the gaps it closed."""
    from hilat.link.batch import holes, segments

    closed = []
    for lo, hi, what in segments(len(batch.ticks), holes(batch.marks)):
        if what is None:
            closed += tracker.records(batch.ticks[lo:hi])
        elif isinstance(what, int):
            tracker.frames_lost()
        else:
            tracker.overflow(what.msg.timestamp, what.msg.channels)
    if len(batch.ticks):
        parts.append(analysis.edges_from_records((batch.ticks, batch.channels, batch.levels), batch.fractions,
                                                 subticks))
    return closed


def iter_events_csv(path, chunk_bytes=64 << 20):
    """events.csv in chunks of whole lines: (ticks, chans, levels) per chunk, bounded memory."""
    with open(path, "rb") as f:
        header = f.readline()
        if header.strip() != b"tick,channel,level,tag":
            raise RunError(f"{path}: unexpected header {header[:60]!r}")
        rest = b""
        while True:
            block = f.read(chunk_bytes)
            data = rest + block
            if not block:
                if data.strip():
                    yield _parse_rows(path, data)
                return
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                yield _parse_rows(path, data[:cut])


def _parse_rows(path, body):
    body = body.strip()
    if not body:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.uint8)
    flat = body.replace(b"\r", b"").replace(b"\n", b",")
    try:
        values = np.array(flat.split(b","), dtype=np.int64)
    except ValueError:
        raise RunError(f"{path}: a field is not a whole number") from None
    if len(values) % 4:
        raise RunError(f"{path}: rows must have 4 fields (tick,channel,level,tag)")
    table = values.reshape(-1, 4)
    last = p.MAX_CHANNELS - 1
    if (table[:, 1] < 0).any() or (table[:, 1] > last).any() or ((table[:, 2] != 0) & (table[:, 2] != 1)).any():
        raise RunError(f"{path}: channel must be 0..{last} and level 0 or 1")
    return table[:, 0], table[:, 1].astype(np.uint8), table[:, 2].astype(np.uint8)


def channel_table(rig):
    """[(name, role)] of the rig a run was captured on: its IDENTIFY (protocol 2 on), or protocol 1's
    fixed channels for a run written before."""
    table = rig.get("channels")
    if table:
        return [tuple(c) for c in table]
    if rig.get("version") == 1:
        return list(p.V1_CHANNEL_TABLE)
    raise RunError("meta.json: the rig has no channel table")


def run_from_meta(path, meta, edges=None, cls=None):
    """A ``Run`` of the run directory ``path`` described by ``meta`` (its meta.json); ``edges``
    when the caller has them, else they are read from the directory on first use. ``cls``: a
    subclass of ``Run`` to make (the API's run, with its statistics in seconds)."""
    path = Path(path)
    rig = meta.get("rig")
    if not rig:
        raise RunError(f"{path}: the capture never identified the rig ({meta.get('error') or 'no rig data'}); "
                       "there is nothing to report")
    if edges is not None:
        source = "edges.bin"
    elif (path / "edges.bin").exists():
        source = "edges.bin"
    elif (path / "events.csv").exists():
        source = "events.csv"
    elif (path / "raw.bin").exists():
        source = "raw.bin"
    else:
        raise RunError(f"{path}: none of edges.bin, events.csv, raw.bin is there")
    settings = meta.get("settings") or {}
    stim = settings.get("stimulus") or {}
    calibration = meta.get("calibration") or {}
    try:
        roles = analysis.Channels.from_table(channel_table(rig), stimulus_active=0 if stim.get("invert") else 1,
                                             roles=settings.get("roles"), active_low=settings.get("active_low") or ())
    except ValueError as e:
        raise RunError(f"{path / 'meta.json'}: {e}") from None
    try:
        measures = [Measure.from_json(m) for m in meta.get("measures") or []]
    except MeasureError as e:
        raise RunError(f"{path / 'meta.json'}: {e}") from None
    # meta.json keeps durations in ticks; the Run works in the edges' unit (meta.json's time_unit,
    # as the capture wrote them: sub-ticks when S > 1; a run without it has edges in ticks).
    try:
        subticks = analysis.Subticks.from_meta(meta.get("time_unit"))
    except (KeyError, TypeError, ValueError) as e:
        raise RunError(f"{path / 'meta.json'}: unreadable time_unit ({e})") from None
    offset, deadline, analysis_measures = analysis.in_subticks(
        subticks.units_per_tick, calibration.get("offset_ticks") or 0,
        meta.get("deadline_ticks", settings.get("deadline_ticks")), measures)
    return (cls or Run)(path=path, meta=meta, ts_hz=float(calibration.get("ts_hz") or rig["ts_hz"]),
               offset_mu=offset, roles=roles, deadline_mu=deadline, edges_source=source,
               measures=measures, builtin=not settings.get("no_stimulus"), edges=edges, subticks=subticks,
               analysis_measures=analysis_measures)


def load_run(path, cls=None):
    """A run directory, described by its meta.json; its edges are read when first used."""
    path = Path(path)
    if not path.exists():
        raise RunError(f"{path}: no such run directory")
    if not path.is_dir():
        raise RunError(f"{path}: not a directory (give the run directory, e.g. runs/20260101-120000-demo)")
    if not (path / "meta.json").exists() and (path / "raw.bin").exists():
        raise RunError(f"{path}: no meta.json: the capture was cut short before its stimuli started (raw.bin "
                       f"holds {(path / 'raw.bin').stat().st_size} bytes of the rig's set-up); nothing was measured")
    meta = _read_json(path / "meta.json")
    if not isinstance(meta, dict) or meta.get("format") != "hilat-run":
        raise RunError(f"{path / 'meta.json'}: not a hilat run description (format is not 'hilat-run')")
    if not isinstance(meta.get("version", 1), int) or meta.get("version", 1) > units.RUN_FORMAT_VERSION:
        raise RunError(f"{path / 'meta.json'}: run format version {meta.get('version')!r}; this hilat reads "
                       f"versions 1 to {units.RUN_FORMAT_VERSION} (a newer hilat wrote it?)")
    if meta.get("interim"):
        return _load_cut_short(path, meta, cls)
    run = run_from_meta(path, meta, cls=cls)
    if run.edges_source != "edges.bin":
        run._load_edges()  # a CSV or raw.bin is checked now, so that a bad file is reported at once
    return run


# ---- a capture that never finished ------------------------------------------------------------------------

CUT_SHORT = ("the capture was cut short (killed, its host down, or its disk full) before it finished: the figures "
             "are those of the edges in raw.bin; what came after the last edge is a gap (the windows it cuts are "
             "unknown); the rig's own counters (edges dropped in gateware, stimuli fired) are missing")


def _load_cut_short(path, meta, cls=None):
    """A run whose capture never wrote its final meta.json: the one there was written as the stimuli
    started (or by SIGUSR1), marked interim. raw.bin is written before anything is decoded, so it
    holds every byte received up to the end; its edges are decoded again (edges.bin and samples/ may
    lag by a second, a torn item at their end), its decoder's counters are the run's, and the edges
    and the stream's gaps are found again from it, with one from the last edge on (the windows it
    cuts, the last stimulus's at least, are unknown). A run without raw edges (on-rig) keeps what it
    has."""
    run = run_from_meta(path, meta, cls=cls)
    run._cut_short = True
    raw = path / "raw.bin"
    if run.has_raw_edges and raw.exists():
        ticks, chans, levels, decoder, gaps = read_raw(raw, run.subticks, with_gaps=True, stream=stream_of(meta))
        ticks, chans, levels = _sorted(ticks, chans, levels)
        counters = {**(meta.get("counters") or {}), "decoder": decoder}
        if "stream" in decoder:   # the stream as decoded from stream.bin (the rig's own counts unknown)
            counters["stream"] = {**(counters.get("stream") or {}), **decoder.pop("stream")}
        run.meta = {**meta, "counters": counters}
        run.edges_source = "raw.bin"
        run._edges = (ticks, chans, levels)
        run._gaps = run._with_cut(gaps, ticks)
    elif run.edges_source != "edges.bin":
        run._load_edges()
    return run
