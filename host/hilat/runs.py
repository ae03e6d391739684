"""A run directory, loaded back for reports, comparisons and exports.

The edges come from ``events.csv``; when it is missing they are decoded again from ``raw.bin`` (the
bytes exactly as received). Latencies are always recomputed from the edges, so a report reflects the
pairing rules and the calibration of the run, not whatever an older tool wrote.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hilat import analysis
from hilat import protocol as p


class RunError(Exception):
    """A run directory that cannot be read; the message says which file and why."""


@dataclass
class Run:
    path: Path
    meta: dict
    ticks: np.ndarray           # edge ticks (int64), sorted
    chans: np.ndarray           # edge channel (uint8)
    levels: np.ndarray          # level after the edge (uint8)
    ts_hz: float                # tick frequency used for ns (calibrated when a calibration was in force)
    offset_ticks: int           # calibrated rig offset, subtracted from stimulus -> response latencies
    roles: analysis.Channels
    deadline_ticks: int | None
    edges_source: str           # "events.csv" or "raw.bin"
    measures: list = field(default_factory=list)   # measures.Measure definitions of the run
    builtin: bool = True        # a stimulus fired: the built-in stimulus kinds exist
    _pairing: analysis.Pairing | None = field(default=None, repr=False)
    _measurements: analysis.Measurements | None = field(default=None, repr=False)

    @property
    def label(self):
        return self.meta.get("label") or self.path.name

    @property
    def tick_ns(self):
        return 1e9 / self.ts_hz

    @property
    def end_tick(self):
        return int(self.ticks[-1]) + 1 if len(self.ticks) else 0

    @property
    def pairing(self):
        if self._pairing is None:
            self._pairing = analysis.pair(self.ticks, self.chans, self.levels, self.roles, self.deadline_ticks,
                                          end_tick=self.end_tick, offset_ticks=self.offset_ticks)
        return self._pairing

    @property
    def measurements(self):
        """Every kind of the run (built-in and defined), each with its own samples."""
        if self._measurements is None:
            self._measurements = analysis.measure(self.ticks, self.chans, self.levels, self.roles, self.measures,
                                                  builtin=self.builtin, deadline=self.deadline_ticks,
                                                  end_tick=self.end_tick, offset_ticks=self.offset_ticks)
        return self._measurements

    @property
    def kind_titles(self):
        return analysis.kind_titles(self.roles, self.measures, self.builtin)

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
        return out

    def problems(self):
        """Conditions a reader must see next to the figures (interrupted, errors, losses)."""
        out = []
        if self.meta.get("error"):
            out.append(f"the capture ended with an error: {self.meta['error']}")
        if self.meta.get("interrupted"):
            out.append("the capture was interrupted (Ctrl-C): the figures cover what was captured")
        for what, n in self.losses().items():
            out.append(f"LOST: {n} {what}")
        replayed = ((self.meta.get("counters") or {}).get("decoder") or {}).get("duplicate")
        if replayed:
            out.append(f"{replayed} replayed frames (a seq and bytes seen just before) were dropped as duplicates: "
                       "no data lost, but the link repeats frames")
        return out


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


def read_raw(path):
    """Decode raw.bin again: (ticks, chans, levels, decoder counters)."""
    decoder = p.FrameDecoder()
    records = []
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            for frame in decoder.feed(chunk):
                if isinstance(frame.msg, p.Events):
                    records.extend(frame.msg.records)
    ticks, chans, levels = analysis.edges_from_records(records)
    return ticks.astype(np.int64), chans, levels, decoder.counters()


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


def load_run(path, edges=True):
    """A run directory; with ``edges=False`` only its description (for streaming over events.csv)."""
    path = Path(path)
    if not path.exists():
        raise RunError(f"{path}: no such run directory")
    if not path.is_dir():
        raise RunError(f"{path}: not a directory (give the run directory, e.g. runs/20260101-120000-demo)")
    meta = _read_json(path / "meta.json")
    if not isinstance(meta, dict) or meta.get("format") != "hilat-run":
        raise RunError(f"{path / 'meta.json'}: not a hilat run description (format is not 'hilat-run')")
    rig = meta.get("rig")
    if not rig:
        raise RunError(f"{path}: the capture never identified the rig ({meta.get('error') or 'no rig data'}); "
                       "there is nothing to report")
    if not edges:
        if not (path / "events.csv").exists():
            raise RunError(f"{path}: no events.csv (streaming reads need it; a plain report decodes raw.bin)")
        ticks, chans, levels = np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.uint8)
        source = "events.csv"
    elif (path / "events.csv").exists():
        ticks, chans, levels = read_events_csv(path / "events.csv")
        source = "events.csv"
    elif (path / "raw.bin").exists():
        ticks, chans, levels, _ = read_raw(path / "raw.bin")
        source = "raw.bin"
    else:
        raise RunError(f"{path}: neither events.csv nor raw.bin is there")
    if len(ticks) and np.any(ticks[1:] < ticks[:-1]):
        order = np.argsort(ticks, kind="stable")
        ticks, chans, levels = ticks[order], chans[order], levels[order]
    settings = meta.get("settings") or {}
    stim = settings.get("stimulus") or {}
    calibration = meta.get("calibration") or {}
    try:
        roles = analysis.Channels.from_table(channel_table(rig), stimulus_active=0 if stim.get("invert") else 1,
                                             roles=settings.get("roles"), active_low=settings.get("active_low") or ())
    except ValueError as e:
        raise RunError(f"{path / 'meta.json'}: {e}") from None
    from hilat.measures import Measure, MeasureError

    try:
        measures = [Measure.from_json(m) for m in meta.get("measures") or []]
    except MeasureError as e:
        raise RunError(f"{path / 'meta.json'}: {e}") from None
    return Run(path=path, meta=meta, ticks=ticks, chans=chans, levels=levels,
               ts_hz=float(calibration.get("ts_hz") or rig["ts_hz"]),
               offset_ticks=int(calibration.get("offset_ticks") or 0), roles=roles,
               deadline_ticks=settings.get("deadline_ticks"), edges_source=source, measures=measures,
               builtin=not settings.get("no_stimulus"))
