"""``hilat export``: a run's samples as CSV or Parquet, its latencies as an HdrHistogram interval log,
and its raw edges as a VCD that GTKWave and PulseView open."""

import csv
from datetime import datetime

import numpy as np

from hilat import analysis

SAMPLE_COLUMNS = ["kind", "index", "start_tick", "time_s", "ticks", "ns", "tag_at_start", "tag_in_window",
                  "duplicates"]


def sample_columns(run):
    """{column: array}: one row per sample of every kind (built-in and defined), kind by kind, each
    in start order: ``index`` counts the kind's samples, ``time_s`` is rig time since the run's
    first edge, ``ticks``/``ns`` the value (-1 / NaN: missed)."""
    found = run.measurements
    origin = int(run.ticks[0]) if len(run.ticks) else 0
    parts = {c: [] for c in SAMPLE_COLUMNS}
    for kind in found.kinds:
        se = found.series[kind]
        n = len(se)
        parts["kind"].append(np.full(n, kind, dtype=object))
        parts["index"].append(np.arange(n, dtype=np.int64))
        parts["start_tick"].append(se.start_tick.astype(np.int64))
        parts["time_s"].append((se.start_tick - origin) / run.ts_hz)
        parts["ticks"].append(se.values.astype(np.int64))
        parts["ns"].append(np.where(se.values == analysis.MISSING, np.nan, se.values * run.tick_ns))
        parts["tag_at_start"].append(se.tag_at_start.astype(np.uint8))
        parts["tag_in_window"].append(se.tag_in_window.astype(np.uint8))
        parts["duplicates"].append(se.duplicates.astype(np.int64))
    empty = {"kind": object, "time_s": np.float64, "ns": np.float64, "tag_at_start": np.uint8,
             "tag_in_window": np.uint8}
    return {c: np.concatenate(v) if v else np.zeros(0, empty.get(c, np.int64)) for c, v in parts.items()}


def write_csv(run, path):
    cols = sample_columns(run)
    names = list(cols)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names)
        text = {n: cols[n].astype(str) if cols[n].dtype.kind in "iuO" else None for n in names}
        text["time_s"] = np.char.mod("%.9f", cols["time_s"])
        text["ns"] = np.where(np.isnan(cols["ns"]), "", np.char.mod("%.3f", cols["ns"]))
        w.writerows(zip(*(text[n] for n in names)))


def write_parquet(run, path):
    from hilat.extras import require

    pa = require("pyarrow", "report", "Parquet export (--parquet)")
    pq = require("pyarrow.parquet", "report", "Parquet export (--parquet)")

    cols = sample_columns(run)
    cols["kind"] = pa.array(cols["kind"].tolist(), type=pa.string())
    table = pa.table(cols)
    meta = {b"hilat.label": run.label.encode(), b"hilat.ts_hz": repr(run.ts_hz).encode(),
            b"hilat.offset_ticks": str(run.offset_ticks).encode()}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
    pq.write_table(table, path)


def write_hlog(run, path, kind="stim_to_isr", interval_s=1.0, significant_figures=3):
    """HdrHistogram interval log of one latency kind, values in ns, one histogram per ``interval_s``
    of rig time (by the time of each sample's start edge). HdrHistogram's HistogramLogProcessor and
    our reader both read it."""
    from hilat import hdr

    if kind not in run.kind_titles:
        raise ValueError(f"the run has no kind {kind!r} (kinds: {', '.join(run.kind_titles)})")
    series = run.measurements.series[kind]
    lat = series.values
    ok = lat != analysis.MISSING
    ns = np.round(lat[ok] * run.tick_ns).astype(np.int64)
    t = (series.start_tick[ok] - (series.start_tick[0] if len(series) else 0)) / run.ts_hz
    highest = max(int(ns.max()) if len(ns) else 1, 2) * 2
    intervals = []
    n_intervals = int(t[-1] // interval_s) + 1 if len(t) else 0
    idx = (t // interval_s).astype(np.int64) if len(t) else np.zeros(0, np.int64)
    for k in range(n_intervals):
        h = hdr.HdrHistogram(lowest=1, highest=highest, significant_figures=significant_figures)
        h.record(np.maximum(ns[idx == k], 1))
        intervals.append((k * interval_s, interval_s, h))
    started = run.meta.get("started")
    start_time = datetime.fromisoformat(started).timestamp() if started else 0.0
    hdr.write_hlog(path, intervals, start_time=start_time, base_time=start_time, max_value_unit_ratio=1e6)
    return len(intervals)


_VCD_UNITS = ["fs", "ps", "ns", "us", "ms", "s"]


def parse_vcd_unit(text):
    """Femtoseconds in a VCD time unit given as "1ns", "10 ps", "100us" (1, 10 or 100 of fs..s)."""
    import re

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
        unit_fs = next((10 ** e for e in range(15, -1, -1) if fits(10 ** e)), 10 ** 6 if tick_fs >= 2e6 else 1)
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
    the dump (readers such as sigrok's drop a change that no later timestamp follows)."""
    scale_text, _unit_fs, per_tick, exact = vcd_timescale(run.ts_hz, unit_fs)
    ticks, chans, levels = run.ticks, run.chans, run.levels
    present = sorted({int(c) for c in np.unique(chans)}) or [0]
    ids = {ch: chr(33 + i) for i, ch in enumerate(present)}
    origin = int(ticks[0]) - 1 if len(ticks) else 0
    with open(path, "w") as f:
        f.write(f"$date {run.meta.get('started') or ''} $end\n")
        f.write(f"$version hilat export, run {run.label} $end\n")
        rounding = "" if exact else f", times rounded to {scale_text} (--vcd-timescale 1fs for exact ones)"
        f.write(f"$comment time 0 of this file is rig tick {origin}, one tick before the first edge; "
                f"1 tick = {run.tick_ns:g} ns{rounding} $end\n")
        f.write(f"$timescale {scale_text} $end\n$scope module hilat $end\n")
        for ch in present:
            f.write(f"$var wire 1 {ids[ch]} {run.roles.label(ch)} $end\n")
        f.write("$upscope $end\n$enddefinitions $end\n")
        # Initial values: the level before each channel's first edge (edges toggle), else 0.
        f.write("#0\n$dumpvars\n")
        for ch in present:
            first = np.flatnonzero(chans == ch)
            f.write(f"{1 - int(levels[first[0]]) if len(first) else 0}{ids[ch]}\n")
        f.write("$end\n")
        last_time = 0
        for tick, ch, lv in zip(ticks.tolist(), chans.tolist(), levels.tolist()):
            time = round((tick - origin) * per_tick)
            if time != last_time:
                f.write(f"#{time}\n")
                last_time = time
            f.write(f"{lv}{ids[ch]}\n")
        if len(ticks):
            f.write(f"#{round((int(ticks[-1]) + 1 - origin) * per_tick)}\n")
    return len(ticks)
