"""``hilat export``: a run's samples as CSV or Parquet, its latencies as an HdrHistogram interval log,
and its raw edges as a VCD that GTKWave and PulseView open.

The sample exports (CSV, Parquet, JSON) say the run's unit, mu (``hilat.units``, docs/analysis.md "The
run's unit"): the columns holding a value in it end in ``_mu`` (``start_mu``, ``value_mu``), the
``mu_ns`` column holds one mu in ns on every row (pandas' ``read_csv`` gets the conversion with the
data), and Parquet's schema metadata and the JSON document carry the whole unit (``hilat.unit``/``unit``).

An on-rig run without raw edges (``hilat capture --on-rig``) has the engine's histograms only: its
interval log comes from them (``write_rig_hlog``: hlog/rig.hlog), and the exports that need samples
or edges are refused (``needs_raw_edges``)."""

import json
import math
import re
from datetime import datetime

import numpy as np

from hilat import analysis, hdr
from hilat.extras import require
from hilat.reports.interval_log import IntervalLog
from hilat.rundir.layout import SAMPLE_DTYPE, RunError

SAMPLE_COLUMNS = ["kind", "index", "start_mu", "time_s", "value_mu", "value_ns", "mu_ns", "tag_at_start",
                  "tag_in_window", "duplicates", "unknown"]
SAMPLES_JSON_FORMAT, SAMPLES_JSON_VERSION = "hilat-samples", 1


def _sample_items(run, kind, chunk=1 << 20):
    """The samples of ``kind`` as ``layout.SAMPLE_DTYPE`` chunks: as the capture stored them
    (samples/KIND.bin, streamed), or computed from the edges for a run without them."""
    if run.has_stored_samples():
        yield from run.iter_samples(kind, chunk=chunk)
        return
    se = run.measurements.series[kind]
    items = np.empty(len(se), SAMPLE_DTYPE)
    items["start_mu"], items["value_mu"], items["duplicates"] = se.start_mu, se.values, se.duplicates
    items["tag_at_start"], items["tag_in_window"] = se.tag_at_start, se.tag_in_window
    items["unknown"] = se.unknown
    yield items


def iter_sample_columns(run, chunk=1 << 20):
    """{column: array} chunks: one row per sample of every kind (built-in and defined), kind by kind,
    each in start order: ``index`` counts the kind's samples, ``start_mu`` the start edge's time in the
    run's unit, ``time_s`` is rig time since the run's first edge, ``value_mu``/``value_ns`` the value
    (-1 / NaN: missed, or unknown), ``mu_ns`` one mu in ns, ``unknown`` 1 where a gap
    in the record stream touched the window (the row is neither a sample nor a miss; its tag flags
    may be analysis.TAG_UNKNOWN). Bounded memory."""
    origin = run.first_mu()
    unit = run.unit
    for kind in run.kind_titles:
        index = 0
        for items in _sample_items(run, kind, chunk):
            n = len(items)
            unknown = items["unknown"]
            values = np.where(unknown != 0, analysis.MISSING, items["value_mu"])
            yield {"kind": np.full(n, kind, dtype=object), "index": np.arange(index, index + n, dtype=np.int64),
                   "start_mu": items["start_mu"], "time_s": (items["start_mu"] - origin) / unit.mu_hz,
                   "value_mu": values,
                   "value_ns": np.where(values == analysis.MISSING, np.nan, unit.to_ns(values)),
                   "mu_ns": np.full(n, unit.mu_ns),
                   "tag_at_start": items["tag_at_start"], "tag_in_window": items["tag_in_window"],
                   "duplicates": items["duplicates"].astype(np.int64), "unknown": unknown.astype(np.uint8)}
            index += n


def sample_columns(run):
    """Every sample as one {column: array} (``iter_sample_columns`` concatenated; a short run's)."""
    parts = list(iter_sample_columns(run))
    empty = {"kind": object, "time_s": np.float64, "value_ns": np.float64, "mu_ns": np.float64,
             "tag_at_start": np.uint8,
             "tag_in_window": np.uint8, "unknown": np.uint8}
    return {c: np.concatenate([p[c] for p in parts]) if parts else np.zeros(0, empty.get(c, np.int64))
            for c in SAMPLE_COLUMNS}


def _rows_text(cols, missing="", quote=""):
    """The rows of a chunk as text, fields comma-separated, built column-wise (no per-row Python):
    CSV lines, or (``missing`` "null", ``quote`` '"') the rows of a JSON array without brackets."""
    text = [np.char.add(np.char.add(quote, cols["kind"].astype(str)), quote)]
    for name in SAMPLE_COLUMNS[1:]:
        if name == "time_s":
            text.append(np.char.mod("%.9f", cols[name]))
        elif name == "value_ns":
            text.append(np.where(np.isnan(cols[name]), missing, np.char.mod("%.3f", cols[name])))
        elif name == "mu_ns":
            text.append(np.char.mod("%.17g", cols[name]))
        else:
            text.append(cols[name].astype(str))
    line = text[0]
    for column in text[1:]:
        line = np.char.add(np.char.add(line, ","), column)
    return line


def _csv_text(cols):
    line = _rows_text(cols)
    return "\n".join(line.tolist()) + "\n" if len(line) else ""


def write_csv(run, path):
    with open(path, "w", newline="") as f:
        f.write(",".join(SAMPLE_COLUMNS) + "\n")
        # 2^17 rows a chunk: their text as numpy strings (4 bytes a character) stays ~100 MiB.
        for cols in iter_sample_columns(run, chunk=1 << 17):
            f.write(_csv_text(cols))


def write_parquet(run, path):
    """The samples as Parquet, one row group per chunk (bounded memory)."""
    pa = require("pyarrow", "report", "Parquet export (--parquet)")
    pq = require("pyarrow.parquet", "report", "Parquet export (--parquet)")


    meta = {b"hilat.label": run.label.encode(), b"hilat.ts_hz": repr(run.ts_hz).encode(),
            b"hilat.offset_mu": str(run.offset_mu).encode(), b"hilat.unit": json.dumps(run.unit.to_json()).encode()}
    types = {"kind": pa.string(), "index": pa.int64(), "start_mu": pa.int64(), "time_s": pa.float64(),
             "value_mu": pa.int64(), "value_ns": pa.float64(), "mu_ns": pa.float64(), "tag_at_start": pa.uint8(),
             "tag_in_window": pa.uint8(), "duplicates": pa.int64(), "unknown": pa.uint8()}
    schema = pa.schema([(c, types[c]) for c in SAMPLE_COLUMNS], metadata=meta)
    with pq.ParquetWriter(path, schema) as writer:
        for cols in iter_sample_columns(run):
            arrays = [pa.array(cols[c].tolist() if c == "kind" else cols[c], type=types[c]) for c in SAMPLE_COLUMNS]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))


def write_json(run, path):
    """The samples as one JSON document: {format, version, label, unit (``units.RunUnit.to_json``),
    ts_hz, offset_mu, columns, data: [[row], ...]} (``pandas.DataFrame(doc["data"], columns=doc["columns"])``).
    Written chunk by chunk (bounded memory); a missed or unknown value_ns is null."""
    head = {"format": SAMPLES_JSON_FORMAT, "version": SAMPLES_JSON_VERSION, "label": run.label,
            "unit": run.unit.to_json(), "ts_hz": run.ts_hz, "offset_mu": run.offset_mu, "columns": SAMPLE_COLUMNS}
    with open(path, "w") as f:
        f.write(json.dumps(head)[:-1] + ', "data": [')
        first = True
        for cols in iter_sample_columns(run, chunk=1 << 17):
            line = _rows_text(cols, missing="null", quote='"')
            if len(line):
                f.write(("" if first else ",\n") + "[" + "],\n[".join(line.tolist()) + "]")
                first = False
        f.write("]}\n")


def write_hlog(run, path, kind="stim_to_isr", interval_s=1.0, significant_figures=3):
    """HdrHistogram interval log of one latency kind, values in ns, one histogram per ``interval_s``
    of rig time (by the time of each sample's start edge), every interval from the first sample's to
    the last's (``interval_log.IntervalLog``). HdrHistogram's HistogramLogProcessor and our reader both
    read it. Streams the samples: one interval's histogram in memory at a time."""
    if kind not in run.kind_titles:
        raise ValueError(f"the run has no kind {kind!r} (kinds: {', '.join(run.kind_titles)})")
    started = run.meta.get("started")
    start_time = datetime.fromisoformat(started).timestamp() if started else 0.0
    log = IntervalLog(path, run.unit.mu_hz, interval_s, start_time, tagged=False, contiguous=True,
                      significant_figures=significant_figures)
    try:
        for items in _sample_items(run, kind):
            if len(items):     # intervals from the first window's start, measured or not
                log.begin(items["start_mu"][0])
            ok = (items["value_mu"] != analysis.MISSING) & (items["unknown"] == 0)
            log.samples(kind, items["start_mu"][ok], np.round(run.unit.to_ns(items["value_mu"][ok])).astype(np.int64))
    finally:
        log.close()
    return log.intervals


# The exports made of samples or edges, which an on-rig run without raw edges does not have.
RAW_EXPORTS = ("csv", "parquet", "json", "vcd")


def needs_raw_edges(run, wanted):
    """The exports of ``wanted`` that this run cannot give (it has no raw edges), in the order given."""
    return [] if run.has_raw_edges else [what for what in wanted if what in RAW_EXPORTS]


def engine_interval_s(run):
    """The length of an on-rig run's engine intervals (its rig.hlog lines), in seconds of rig time."""
    return 2 ** run.meta["engine"]["config"]["interval_shift"] / run.ts_hz


def write_rig_hlog(run, path, kind="stim_to_isr", interval_s=None):
    """HdrHistogram interval log of one kind of an on-rig run, straight from the engine's bins
    (hlog/rig.hlog: values in ns, each bin at its highest equivalent value): one interval per engine
    interval that has samples of the kind, or, with ``interval_s`` (no shorter than an engine
    interval), the engine's intervals merged per ``interval_s`` of rig time from the run's start, each
    spanning its engine intervals. Lines untagged, as ``write_hlog`` writes them. Returns the number of
    intervals written; ValueError names what cannot be done."""

    if kind not in run.kind_titles:
        raise ValueError(f"the run has no kind {kind!r} (kinds: {', '.join(run.kind_titles)})")
    engine_s = engine_interval_s(run)
    if interval_s is not None and interval_s < engine_s * (1 - 1e-9):
        raise ValueError(f"--interval {interval_s:g} s: the engine binned this run in intervals of {engine_s:.6g} s "
                         "(2**--interval-shift ticks), an interval log cannot be finer; give at least that")
    source = run.path / "hlog" / "rig.hlog"
    try:
        log = hdr.read_hlog(source)
    except hdr.HdrFormatError as e:
        raise RunError(f"{e} (the engine's interval log of this on-rig run)") from None
    groups = []  # [start_s, end_s, histogram]
    for iv in log.intervals:
        if iv.tag != kind:
            continue
        group = None if interval_s is None else math.floor(iv.start_s / interval_s + 1e-9)
        if groups and group is not None and groups[-1][3] == group:
            groups[-1][1] = iv.start_s + iv.length_s
            groups[-1][2].add(iv.histogram)
        else:
            groups.append([iv.start_s, iv.start_s + iv.length_s, iv.histogram.copy(), group])
    writer = hdr.HlogWriter(path, start_time=log.start_time, base_time=log.base_time, max_value_unit_ratio=1e6,
                            comments=[f"hilat on-rig engine, {kind}: bins at their highest equivalent value, in ns"])
    try:
        for start_s, end_s, histogram, _group in groups:
            writer.interval(start_s, end_s - start_s, histogram)
    finally:
        writer.close()
    return len(groups)


_VCD_UNITS = ["fs", "ps", "ns", "us", "ms", "s"]


def parse_vcd_unit(text):
    """Femtoseconds in a VCD time unit given as "1ns", "10 ps", "100us" (1, 10 or 100 of fs..s)."""
    m = re.fullmatch(r"\s*(1|10|100)\s*(fs|ps|ns|us|ms|s)\s*", text)
    if not m:
        raise ValueError(f"not a VCD time unit: {text!r} (1, 10 or 100 of fs, ps, ns, us, ms, s)")
    return int(m.group(1)) * 10 ** (3 * _VCD_UNITS.index(m.group(2)))


def vcd_timescale(ts_hz, unit_fs=None):
    """(timescale text, femtoseconds per unit, units per tick, exact): by default the coarsest VCD
    unit (1/10/100 x fs..s) in which a tick is a whole number; where none is (7.142857 ns at 140
    MHz), 1 ns with times rounded to it, which keeps distinct ticks apart (ticks >= 2 ns) and a
    waveform viewer's sample rate sane (sigrok expands a dump to one sample per unit: at 1 fs a
    millisecond is 10^12 samples). ``unit_fs`` forces a unit (e.g. 1 for exact femtoseconds)."""
    tick_fs = 1e15 / ts_hz

    def fits(u):
        return tick_fs >= u and abs(tick_fs / u - round(tick_fs / u)) < 1e-9 * tick_fs / u

    if unit_fs is None:
        # No exact unit: the coarsest power of ten below a tick, at most 1 ns (distinct ticks stay apart).
        unit_fs = next((10 ** e for e in range(15, -1, -1) if fits(10 ** e)),
                       10 ** min(6, int(np.floor(np.log10(tick_fs * (1 - 1e-12))))))
    exp = len(str(unit_fs)) - 1
    text = f"{10 ** (exp % 3)} {_VCD_UNITS[exp // 3]}"
    exact = fits(unit_fs)
    return text, unit_fs, round(tick_fs / unit_fs) if exact else tick_fs / unit_fs, exact


def write_vcd(run, path, unit_fs=None):
    """Every captured edge as a VCD: one wire per channel (named by its role in the run, else by its
    pin name: stim0, isr, task, tag, in2, ...), in the unit :func:`vcd_timescale` picks
    (``unit_fs`` forces one). Time 0 of the file is one tick before the first edge (its rig tick is in
    the header), where every channel has its level before its first edge, so each edge, the first
    included, is a change at its own time; a last timestamp one tick after the final change closes
    the dump (readers such as sigrok's drop a change that no later timestamp follows). Streams the
    edges in chunks (two passes: the channels and their first levels, then the changes)."""
    # The unit from the rig's sample spacing (a tick, or a sub-tick: docs/subtick.md); the finer
    # positions of calibrated sub-tick bins are rounded to it.
    sample_hz = run.ts_hz * run.samples_per_tick
    scale_text, _unit_fs, per_sample, exact = vcd_timescale(sample_hz, unit_fs)
    per_tick = per_sample * run.samples_per_tick / run.units_per_tick   # VCD units per unit of the run
    exact = exact and float(per_tick).is_integer()
    first_level, origin, last_mu, count = {}, None, None, 0
    for ticks, chans, levels in run.iter_edges():
        if not len(ticks):
            continue
        if origin is None:
            origin = int(ticks[0]) - 1
        last_mu = int(ticks[-1])
        count += len(ticks)
        present, first = np.unique(chans, return_index=True)
        for ch, i in zip(present.tolist(), first.tolist()):
            first_level.setdefault(ch, int(levels[i]))
    origin = origin or 0
    present = sorted(first_level) or [0]
    ids = {ch: chr(33 + i) for i, ch in enumerate(present)}
    id_of = np.array([ids.get(ch, "?") for ch in range(max(present) + 1)])
    with open(path, "w") as f:
        f.write(f"$date {run.meta.get('started') or ''} $end\n")
        f.write(f"$version hilat export, run {run.label} $end\n")
        rounding = "" if exact else f", times rounded to {scale_text} (--vcd-timescale 1fs for exact ones)"
        unit = run.subticks.unit_name
        f.write(f"$comment time 0 of this file is rig {unit} {origin}, one {unit} before the first edge; "
                f"1 {unit} = {run.unit.mu_ns:g} ns{rounding} $end\n")
        f.write(f"$timescale {scale_text} $end\n$scope module hilat $end\n")
        for ch in present:
            f.write(f"$var wire 1 {ids[ch]} {run.roles.label(ch)} $end\n")
        f.write("$upscope $end\n$enddefinitions $end\n")
        # Initial values: the level before each channel's first edge (edges toggle), else 0.
        f.write("#0\n$dumpvars\n")
        for ch in present:
            f.write(f"{1 - first_level[ch] if ch in first_level else 0}{ids[ch]}\n")
        f.write("$end\n")
        last_time = 0
        for ticks, chans, levels in run.iter_edges():
            if not len(ticks):
                continue
            times = np.round((ticks - origin) * per_tick).astype(np.int64)
            new_time = np.diff(times, prepend=last_time) != 0
            last_time = int(times[-1])
            change = np.char.add(levels.astype(str), id_of[chans])
            stamp = np.where(new_time, np.char.add(np.char.add("#", times.astype(str)), "\n"), "")
            f.write("\n".join(np.char.add(stamp, change).tolist()) + "\n")
        if last_mu is not None:
            f.write(f"#{round((last_mu + 1 - origin) * per_tick)}\n")
    return count
