"""Reports on one or more runs: Faller's tables, tail percentiles, misses, losses; text, Markdown, JSON,
CSV and a self-contained HTML page with the plots.

Everything is built from one document (``build_report``), whose JSON form is the documented summary
format (``docs/analysis.md``, ``docs/hilat-report.schema.json``), so every output format shows
the same numbers.
"""

import base64
import csv
import html
import io
import json
from datetime import datetime, timezone

from hilat.rundir.layout import BUILTIN_KINDS
from hilat.statistics import percentiles
from hilat.statistics.distribution import STAT_KEYS
from hilat.statistics.run_statistics import REPORT_SUBSETS as SUBSETS
from hilat.statistics.run_statistics import RunStatistics
from hilat.version import __version__

REPORT_FORMAT = "hilat-report"
REPORT_VERSION = 4  # 2: any set of named kinds (measurement definitions), per-kind starts and duplicates;
                    # 3: per-kind unknown (windows a gap touched), the run's stimuli fired/seen/measured, gaps;
                    # 4: the run's unit named (``unit``, values in ``mu``: rows' "ticks" -> "mu", worst's
                    #    start_tick/ticks -> start_mu/mu, offset_mu, deadline_mu; ts_hz the tick clock)
# Kinds with a percentile table: the two stimulus responses (Faller's "interrupt acknowledge" and
# "context switching"; SSC's interrupt service and interrupt task response) and every defined one.
PERCENTILE_BUILTINS = ["stim_to_isr", "stim_to_task"]


def run_summary(run, hdr=None, aggregator=None):
    """The report document's entry for one run (see docs/analysis.md). ``hdr``: bounded memory,
    median and percentiles from HDR histograms (3 significant digits), the rest exact; None: when
    the run is longer than ``EXACT_EDGE_LIMIT`` edges. ``aggregator``: the capture's own aggregates
    (its ``StreamingAggregator``, or on-rig its ``RigHistograms``; the run directory is not read)."""
    if aggregator is not None:
        stats = RunStatistics.of_aggregates(run, aggregator)
    elif hdr is None and isinstance(getattr(run, "statistics", None), RunStatistics):
        stats = run.statistics      # the API's run: its statistics, picked once
    else:
        stats = RunStatistics.of(run, hdr)
    mu_ns = run.unit.mu_ns
    worst = {k: {**w, "ns": float(w["mu"] * mu_ns)} for k, w in stats.worst.items()}
    rig = run.meta.get("rig") or {}
    calibration = run.meta.get("calibration")
    # Every run records the ts_hz it converts with; only a clock calibration makes it calibrated.
    clock = (calibration or {}).get("clock")
    samples = run.samples_per_tick
    tick_hz = run.ts_hz
    resolution = [f"1 tick = {1e9 / tick_hz:.6g} ns (ts {tick_hz / 1e6:.6f} MHz"
                  + (f", clock calibrated: {clock['ppm']:+.4g} ppm)" if clock else ", nominal, clock uncalibrated)")]
    if samples > 1 and run.on_rig:
        resolution.append(f"on-rig: the engine pairs and bins whole ticks, though each input is sampled {samples} "
                          "times a tick (the raw edges keep the positions)")
    if calibration:
        resolution += list(calibration.get("statement") or [])
    else:
        resolution.append("no calibration in force: the rig's own pin-to-pin offset is not subtracted")
    settings = run.meta.get("settings") or {}
    return {
        "label": run.label,
        "path": str(run.path),
        "started": run.meta.get("started"),
        "rig": {k: rig.get(k) for k in ("gateware", "firmware", "ts_hz", "sys_hz")},
        "unit": run.unit.to_json(),
        "ts_hz": run.ts_hz,
        "tick_ns": run.tick_ns,
        "mu_ns": run.unit.mu_ns,
        "samples_per_tick": run.samples_per_tick,
        "units_per_tick": run.units_per_tick,
        "offset_mu": run.offset_mu,
        "deadline_mu": run.deadline_mu,
        "kinds": run.kind_titles,
        "measures": [m.to_json() for m in run.measures],
        "stimulus": settings.get("stimulus") if run.builtin else None,
        "dut_settings": (run.meta.get("extra") or {}).get("dut_settings"),
        "stimuli": stats.stimuli,
        "stimuli_accounting": stats.accounting,
        "gaps": stats.gap_count,
        "task_before_isr": int(stats.task_before_isr),
        "tagged": stats.tagged,
        "edges": stats.edges,
        "edges_source": run.edges_source,
        "statistics": stats.note,
        "resolution": resolution,
        "losses": run.losses,
        "problems": run.problems,
        "worst": worst,
        "subsets": stats.rows(mu_ns),
    }


def stimuli_line(acc):
    """``fired F, seen S, unknown U, measured M`` (stimulus -> ISR entry; F from the rig's generator)."""
    fired = "?" if acc["fired"] is None else acc["fired"]
    return (f"stimuli: fired {fired}, seen {acc['seen']}, unknown {acc['unknown']}, measured {acc['measured']}"
            + ("" if acc["fired"] is not None else " (this rig does not count what it fired)"))


def _where(worst):
    """Where a worst case was: its sample number, or (on-rig: no numbers) its stimulus tick."""
    return f"at sample {worst['index']}" if worst["index"] is not None else f"at {worst['start_mu']} mu"


def _all_kinds(runs):
    kinds = {}
    for run in runs:
        for kind, title in run.kind_titles.items():
            kinds.setdefault(kind, title)
    return kinds


def build_report(runs, hdr=None, aggregates=None):
    """The report document of ``runs``; ``aggregates``: {run path: StreamingAggregator} of runs
    whose statistics are already aggregated (a capture's summary)."""
    aggregates = aggregates or {}

    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hilat_version": __version__,
        # Every kind of any run, in order: the built-in ones, then each run's definitions.
        "kinds": _all_kinds(runs),
        "percentiles": [percentiles.percentile_label(p) for p in percentiles.PERCENTILES],
        "percentile_min_samples": {percentiles.percentile_label(p): percentiles.samples_needed(p)
                                   for p in percentiles.PERCENTILES},
        "runs": [run_summary(r, hdr, aggregates.get(r.path)) for r in runs],
    }


# ---- text, Markdown, HTML --------------------------------------------------------------------------

def _fmt(v, digits=1):
    if v is None:
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def blocks(doc):
    """The report as a list of blocks: ("heading", text), ("table", header, rows), ("note", text),
    ("list", [(item, [sub-items])]). Faller's layout: a table per latency kind with one row per run
    (min, med, max, average, std dev) in ns; then tail percentiles, misses and losses, resolution."""
    out = []
    runs = doc["runs"]
    for subset, subset_title in SUBSETS:
        if subset == "untagged" and not any(any(r["tagged"].values()) for r in runs):
            continue
        for kind, title in doc["kinds"].items():
            if subset == "untagged" and kind.endswith("duration"):
                continue
            out.append(("heading", f"{title} (ns), {subset_title}"))
            rows = []
            for r in runs:
                row = r["subsets"][subset].get(kind)
                if row is None:
                    continue
                share = row["miss_share"]
                rows.append([r["label"], row["count"], row["misses"],
                             "-" if share is None else f"{100 * share:.3f}%", row.get("unknown", 0)]
                            + [_fmt(row["ns"][k], 1) for k in STAT_KEYS])
            out.append(("table", ["run", "count", "misses", "missed", "unknown", "min", "med", "max", "average",
                                  "std dev"], rows))
    for kind in [k for k in doc["kinds"] if k in PERCENTILE_BUILTINS or k not in BUILTIN_KINDS]:
        out.append(("heading", f"{doc['kinds'][kind]}: percentiles (ns)"))
        rows, unsupported = [], set()
        for r in runs:
            if kind not in r["subsets"]["all"]:
                continue
            pcts = r["subsets"]["all"][kind]["ns"]["percentiles"]
            rows.append([r["label"]] + [_fmt(pcts[p], 1) for p in doc["percentiles"]]
                        + [_fmt(r["subsets"]["all"][kind]["ns"]["max"], 1)])
            unsupported |= {p for p, v in pcts.items() if v is None}
        out.append(("table", ["run"] + doc["percentiles"] + ["max"], rows))
        if unsupported:
            need = ", ".join(f"{p} needs {doc['percentile_min_samples'][p]}" for p in doc["percentiles"]
                             if p in unsupported)
            out.append(("note", f"'-': too few samples to support that percentile ({need})."))
    # Periods: the spread is the timer's resolution and jitter (the Ready/SSC paper's question).
    rows = []
    for r in runs:
        for m in r["measures"]:
            if m["shape"] == "period" and r["subsets"]["all"][m["name"]]["count"]:
                ns = r["subsets"]["all"][m["name"]]["ns"]
                rows.append([r["label"], m["name"], _fmt(ns["mean"], 1), _fmt(ns["min"], 1), _fmt(ns["max"], 1),
                             _fmt(ns["max"] - ns["min"], 1), _fmt(ns["std"], 1)])
    if rows:
        out.append(("heading", "period jitter (ns)"))
        out.append(("table", ["run", "kind", "mean period", "min", "max", "peak-to-peak", "std dev"], rows))
    out.append(("heading", "worst cases and duplicates"))
    rows = []
    for r in runs:
        for kind in r["kinds"]:
            if kind.endswith("duration") or kind == "isr_to_task":
                continue
            w = r["worst"].get(kind)
            worst = (f"{w['ns']:.1f} ns {_where(w)}" + (" (tagged)" if w["tagged"] else "") if w else "-")
            rows.append([r["label"], kind, r["subsets"]["all"][kind]["starts"], r["tagged"].get(kind, 0), worst,
                         r["subsets"]["all"][kind]["duplicates"]])
    out.append(("table", ["run", "kind", "starts", "tagged", "worst", "duplicates"], rows))
    out.append(("heading", "losses"))
    out.append(("table", ["run", "stimuli", "edges", "gaps", "lost events"],
                [[r["label"], r["stimuli"], r["edges"], r.get("gaps", 0), sum(r["losses"].values())] for r in runs]))
    lines = [f"{r['label']}: {stimuli_line(r['stimuli_accounting'])}" for r in runs if r.get("stimuli_accounting")]
    if any(r.get("gaps") for r in runs):
        lines.append("unknown: windows a gap in the record stream touched (gateware overflow, frames lost on the "
                     "link, a capture cut short, a TDC input's change its line did not measure), and stimuli "
                     "whose edge was lost: neither a sample nor a miss, in no figure above")
    if lines:
        out.append(("list", [(line, []) for line in lines]))
    out.append(("heading", "resolution and run conditions"))
    out.append(("list", [(f"{r['label']}: {r['stimuli']} stimuli, rig {r['rig'].get('gateware')}, {r['path']}",
                          r["resolution"] + ([] if r["statistics"] == "exact" else [r["statistics"]])
                          + r["problems"]) for r in runs]))
    return out


def _text_table(header, rows, markdown):
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "|".join([":---"] + ["---:"] * (len(header) - 1)) + "|"]
        return out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(r):
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return [line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def format_text(doc, markdown=False):
    labels = ", ".join(r["label"] for r in doc["runs"])
    out = [f"# hilat report: {labels}" if markdown else f"hilat report: {len(doc['runs'])} run(s): {labels}", ""]
    for block in blocks(doc):
        if block[0] == "heading":
            out += [f"### {block[1]}", ""] if markdown else [block[1], "=" * len(block[1])]
        elif block[0] == "table":
            out += _text_table(block[1], block[2], markdown) + [""]
        elif block[0] == "note":
            out += [block[1], ""]
        elif block[0] == "list":
            for item, subs in block[1]:
                out += [("- " if markdown else "") + item] + [("  - " if markdown else "  ") + s for s in subs]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}h2{margin-top:1.6em}
img{max-width:100%;border:1px solid #eee}.note{color:#555;font-size:.9em}"""


def format_html(doc, images):
    """A self-contained page: tables plus the plots embedded as data: URIs (reads offline).
    ``images``: {title: png bytes}."""

    esc = html.escape
    labels = ", ".join(r["label"] for r in doc["runs"])
    out = ["<!DOCTYPE html>", "<html lang=en><head><meta charset=utf-8>",
           f"<title>hilat report: {esc(labels)}</title><style>{_CSS}</style></head><body>",
           f"<h1>hilat report: {esc(labels)}</h1>",
           f"<p class=note>generated {esc(doc['generated'])} by hilat {esc(doc['hilat_version'])}</p>"]
    for title, png in images.items():
        data = base64.b64encode(png).decode("ascii")
        out.append(f"<h2>{esc(title)}</h2><img alt=\"{esc(title)}\" src=\"data:image/png;base64,{data}\">")
    for block in blocks(doc):
        if block[0] == "heading":
            out.append(f"<h2>{esc(block[1])}</h2>")
        elif block[0] == "table":
            out.append("<table><tr>" + "".join(f"<th>{esc(str(h))}</th>" for h in block[1]) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in r) + "</tr>" for r in block[2]]
            out.append("</table>")
        elif block[0] == "note":
            out.append(f"<p class=note>{esc(block[1])}</p>")
        elif block[0] == "list":
            out.append("<ul>")
            for item, subs in block[1]:
                out.append(f"<li>{esc(item)}<ul>" + "".join(f"<li>{esc(s)}</li>" for s in subs) + "</ul></li>")
            out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def format_json(doc):
    return json.dumps(doc, indent=1) + "\n"


CSV_COLUMNS = ["run", "subset", "kind", "starts", "count", "misses", "unknown", "miss_share", "duplicates", "unit",
               "mu_ns"]


def format_csv(doc):
    """One row per run, subset, kind and unit (``mu``, the run's unit, and ``ns``), with every statistic
    and percentile; ``mu_ns`` on every row is one mu of that run in ns (the conversion)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS + STAT_KEYS + doc["percentiles"])
    for r in doc["runs"]:
        for subset, _ in SUBSETS:
            for kind in r["kinds"]:
                row = r["subsets"][subset][kind]
                for unit in ("mu", "ns"):
                    vals = row[unit]
                    w.writerow([r["label"], subset, kind, row["starts"], row["count"], row["misses"],
                                row.get("unknown", 0),
                                "" if row["miss_share"] is None else f"{row['miss_share']:.9g}", row["duplicates"],
                                unit, f"{r['unit']['mu_ns']:.12g}"]
                               + ["" if vals[k] is None else f"{vals[k]:.12g}" for k in STAT_KEYS]
                               + ["" if vals["percentiles"][p] is None else f"{vals['percentiles'][p]:.12g}"
                                  for p in doc["percentiles"]])
    return buf.getvalue()


def format_report(doc, fmt):
    if fmt == "text":
        return format_text(doc)
    if fmt == "markdown":
        return format_text(doc, markdown=True)
    if fmt == "json":
        return format_json(doc)
    if fmt == "csv":
        return format_csv(doc)
    raise ValueError(f"unknown report format {fmt!r}")


# ---- comparison of two runs ------------------------------------------------------------------------

# Compared: every kind both runs have, but the pulse durations of the built-in ISR and task.
COMPARE_SKIP = ["isr_duration", "task_duration"]


def compare_document(doc):
    """Two runs side by side: each statistic and percentile of A and B in ns, B - A, and B / A."""
    a, b = doc["runs"]
    kinds = {}
    common = [k for k in a["kinds"] if k in b["kinds"] and k not in COMPARE_SKIP]
    if not common:
        raise ValueError(f"the runs have no kind in common ({', '.join(a['kinds'])} / {', '.join(b['kinds'])})")
    for kind in common:
        ra, rb = a["subsets"]["all"][kind], b["subsets"]["all"][kind]
        rows = []

        def add(name, va, vb, rows=rows):
            diff = None if va is None or vb is None else vb - va
            ratio = None if va in (None, 0) or vb is None else vb / va
            rows.append({"statistic": name, "a": va, "b": vb, "b_minus_a": diff, "b_over_a": ratio})
        add("count", ra["count"], rb["count"])
        add("unknown", ra.get("unknown", 0), rb.get("unknown", 0))
        add("missed %", None if ra["miss_share"] is None else 100 * ra["miss_share"],
            None if rb["miss_share"] is None else 100 * rb["miss_share"])
        add("min", ra["ns"]["min"], rb["ns"]["min"])
        for p in doc["percentiles"]:
            add(p, ra["ns"]["percentiles"][p], rb["ns"]["percentiles"][p])
        for k in ("max", "mean", "std"):
            add(k, ra["ns"][k], rb["ns"][k])
        kinds[kind] = {"rows": rows, "worst_a": a["worst"].get(kind), "worst_b": b["worst"].get(kind)}
    return {"format": "hilat-compare", "version": REPORT_VERSION, "a": a["label"], "b": b["label"],
            "a_path": a["path"], "b_path": b["path"], "kinds": kinds, "report": doc}


def format_compare(cmp, markdown=False):
    doc = cmp["report"]
    a_name, b_name = cmp["a"], cmp["b"]
    if a_name == b_name:
        a_name, b_name = f"A {a_name}", f"B {b_name}"
    out = [f"{'# ' if markdown else ''}hilat compare: A = {cmp['a_path']}, B = {cmp['b_path']}", ""]
    for kind, body in cmp["kinds"].items():
        title = f"{doc['kinds'][kind]} (ns)"
        out += [f"### {title}", ""] if markdown else [title, "=" * len(title)]
        rows = []
        for r in body["rows"]:
            digits = 3 if r["statistic"] == "missed %" else 1
            cells = [_fmt(None if r[k] is None else float(r[k]), digits) if r["statistic"] not in ("count", "unknown")
                     else _fmt(r[k]) for k in ("a", "b", "b_minus_a")]
            if r["b_minus_a"] is not None and r["statistic"] not in ("count", "unknown") and r["b_minus_a"] > 0:
                cells[2] = "+" + cells[2]
            ratio = "-" if r["b_over_a"] is None else f"{r['b_over_a']:.3f}"
            rows.append([r["statistic"]] + cells + [ratio])
        out += _text_table(["", a_name, b_name, "B - A", "B / A"], rows, markdown) + [""]
        for side, name in (("worst_a", a_name), ("worst_b", b_name)):
            w = body[side]
            if w:
                out.append(f"worst case {name}: {w['ns']:.1f} ns {_where(w)} "
                           f"(stimulus at {w['start_mu']} mu){', tagged' if w['tagged'] else ''}")
        out.append("")
    for r in doc["runs"]:
        for line in r["problems"]:
            out.append(f"{r['label']}: {line}")
    if doc["runs"][0]["tick_ns"] != doc["runs"][1]["tick_ns"]:
        out.append("note: the two runs have different tick periods "
                   f"({doc['runs'][0]['tick_ns']:g} and {doc['runs'][1]['tick_ns']:g} ns)")
    return "\n".join(out).rstrip() + "\n"
