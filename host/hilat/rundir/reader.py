"""A run directory read back (layout in ``hilat.rundir.layout``): ``load_run`` and ``run_from_meta``
give a ``Run``, whose edges, gaps and stored samples are read on first use or in chunks; a run of an
earlier format, and one whose capture never finished (cut short), are read too."""

import json
from pathlib import Path

import numpy as np

from hilat import analysis, units
from hilat.analysis.measures import Measure, MeasureError
from hilat.link import protocol as p
from hilat.rundir.layout import (
    _HEADER,
    BUILTIN_KINDS,
    CHUNK_EDGES,
    EDGE_DTYPE,
    EDGES_MAGIC,
    GAP_DTYPE,
    GAPS_MAGIC,
    SAMPLE_DTYPE,
    SAMPLES_MAGIC,
    STIMULI_MAGIC,
    STIMULUS_DTYPE,
    RunError,
)
from hilat.rundir.replay import iter_events_csv, read_events_csv, read_raw, stream_of
from hilat.rundir.stores import _open_store, _read_store, _samples_of_stimuli, iter_store, store_count


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

    def first_mu(self):
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
    def end_mu(self):
        """Where the last windows close: where the capture observed up to (meta.json's observed_end),
        else just after the last edge."""
        observed = self.meta.get("observed_end")
        last = int(self.ticks[-1]) + 1 if len(self.ticks) else 0
        return max(int(observed), last) if observed is not None and not self.cut_short else last

    @property
    def pairing(self):
        if self._pairing is None:
            self._pairing = analysis.pair(self.ticks, self.chans, self.levels, self.roles, self.deadline_mu,
                                          end_mu=self.end_mu, offset_mu=self.offset_mu, gaps=self.gaps)
        return self._pairing

    @property
    def measurements(self):
        """Every kind of the run (built-in and defined), each with its own samples."""
        if self._measurements is None:
            self._measurements = analysis.measure(self.ticks, self.chans, self.levels, self.roles,
                                                  self.analysis_measures,
                                                  builtin=self.builtin, deadline=self.deadline_mu,
                                                  end_mu=self.end_mu, offset_mu=self.offset_mu,
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
        if counters.get("tdc_unmeasured_edges"):
            out["TDC edges not measured (code 0: a pulse shorter than the line; their windows unknown)"] = \
                int(counters["tdc_unmeasured_edges"])
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
