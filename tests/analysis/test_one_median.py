"""One median (issue 32, item 4): every output that states a median or a p50 states the same value,
p50 by the percentiles' definition (the inverted CDF: for an even count the lower of the middle two,
never their mean; docs/analysis.md, "One median").

One even-count run: 4 stimuli whose stimulus -> ISR latencies are 10, 20, 30, 40 ticks (fired in
another order). Its median is the 2nd smallest, 20 ticks; the mean of the middle two (25) would be
wrong everywhere."""

import csv
import io
import json
import re

import numpy as np
import pytest
from hilat import analysis, api
from hilat.cli import main
from hilat.reports import formats, report
from hilat.rundir.reader import load_run
from hilat.statistics import run_statistics
from hilat.statistics.distribution import summarize
from hilat.statistics.run_statistics import stream_aggregate
from synth import TS_HZ, dut_edges, live_capture, live_last_line, write_run

ISR_TICKS = (30, 10, 40, 20)                 # in firing order
TASK_EXTRA = 100                             # stimulus -> task = ISR + 100 ticks
TICK_NS = 1e9 / TS_HZ
ORDERED = sorted(ISR_TICKS)
MEDIAN_TICKS = ORDERED[(len(ORDERED) + 1) // 2 - 1]      # rank ceil(n/2), 1-based: the lower middle
MEDIAN_NS = MEDIAN_TICKS * TICK_NS
ISR_TITLE = analysis.KIND_TITLES["stim_to_isr"]


def test_the_run_tells_the_two_definitions_apart():
    assert len(ISR_TICKS) % 2 == 0
    assert MEDIAN_TICKS == 20 and (ORDERED[1] + ORDERED[2]) / 2 != MEDIAN_TICKS
    assert MEDIAN_TICKS == np.percentile(ISR_TICKS, 50, method="inverted_cdf")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    stim = [1000 + 5000 * i for i in range(len(ISR_TICKS))]
    edges = dut_edges(stim, list(ISR_TICKS), [v + TASK_EXTRA for v in ISR_TICKS])
    return write_run(tmp_path_factory.mktemp("median") / "even", edges, label="even")


def report_output(run_dir, tmp_path, *args):
    out = tmp_path / "out"
    assert main(["report", str(run_dir), "-o", str(out), *args]) == 0
    return out.read_text()


# ---- hilat report, and the capture's summary.json / summary.txt ------------------------------------------

def check_document(doc):
    row = doc["runs"][0]["subsets"]["all"]["stim_to_isr"]
    assert row["mu"]["median"] == row["mu"]["percentiles"]["p50"] == MEDIAN_TICKS
    assert row["ns"]["median"] == row["ns"]["percentiles"]["p50"] == pytest.approx(MEDIAN_NS, rel=1e-12)
    task = doc["runs"][0]["subsets"]["all"]["stim_to_task"]
    assert task["mu"]["median"] == task["mu"]["percentiles"]["p50"] == MEDIAN_TICKS + TASK_EXTRA


def text_table(text, heading):
    """{column: cell} of the single run's row of the table under ``heading`` (report.format_text)."""
    lines = text.splitlines()
    i = lines.index(heading)
    head, row = lines[i + 2], lines[i + 4]
    assert set(lines[i + 1]) == {"="} and set(lines[i + 3]) <= {"-", " "}
    # No cell has a blank (the run's label is "even"); the last column's name does ("std dev").
    return dict(zip(head.split(), row.split()))


def check_text(text):
    faller = text_table(text, f"{ISR_TITLE} (ns), all samples")
    assert faller["med"] == f"{MEDIAN_NS:.1f}", faller
    pct = text_table(text, f"{ISR_TITLE}: percentiles (ns)")
    assert pct["p50"] == f"{MEDIAN_NS:.1f}", pct


def markdown_table(text, heading):
    lines = text.splitlines()
    i = lines.index(f"### {heading}")
    head, row = lines[i + 2], lines[i + 4]
    return dict(zip([c.strip() for c in head.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")]))


@pytest.mark.parametrize("how", ["--exact", "--hdr"])
def test_hilat_report_in_every_format(run_dir, tmp_path, how):
    check_document(json.loads(report_output(run_dir, tmp_path, "--format", "json", how)))
    check_text(report_output(run_dir, tmp_path, "--format", "text", how))
    md = report_output(run_dir, tmp_path, "--format", "markdown", how)
    assert markdown_table(md, f"{ISR_TITLE} (ns), all samples")["med"] == f"{MEDIAN_NS:.1f}"
    assert markdown_table(md, f"{ISR_TITLE}: percentiles (ns)")["p50"] == f"{MEDIAN_NS:.1f}"
    rows = list(csv.DictReader(io.StringIO(report_output(run_dir, tmp_path, "--format", "csv", how))))
    (ticks,) = [r for r in rows if (r["subset"], r["kind"], r["unit"]) == ("all", "stim_to_isr", "mu")]
    (ns,) = [r for r in rows if (r["subset"], r["kind"], r["unit"]) == ("all", "stim_to_isr", "ns")]
    assert float(ticks["median"]) == float(ticks["p50"]) == MEDIAN_TICKS
    assert float(ns["median"]) == float(ns["p50"]) == pytest.approx(MEDIAN_NS, rel=1e-9)


def test_hilat_report_html(run_dir, tmp_path):
    pytest.importorskip("matplotlib")
    page = tmp_path / "r.html"
    report_output(run_dir, tmp_path, "--html", str(page))
    html = page.read_text()
    tables = re.findall(r"<h2>([^<]*)</h2>\s*<table>(.*?)</table>", html, re.S)
    found = {}
    for heading, body in tables:
        rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
        head = re.findall(r"<th>(.*?)</th>", rows[0])
        cells = re.findall(r"<td>(.*?)</td>", rows[1])
        found[heading.replace("&gt;", ">")] = dict(zip(head, cells))
    assert found[f"{ISR_TITLE} (ns), all samples"]["med"] == f"{MEDIAN_NS:.1f}"
    assert found[f"{ISR_TITLE}: percentiles (ns)"]["p50"] == f"{MEDIAN_NS:.1f}"


def test_the_captures_summary_files(run_dir):
    """summary.json and summary.txt as a capture writes them: from its streaming aggregates."""
    run = load_run(run_dir)
    doc = report.build_report([run], aggregates={run.path: stream_aggregate(run)})
    check_document(json.loads(report.format_json(doc)))
    check_text(report.format_text(doc))


# ---- hilat compare -------------------------------------------------------------------------------------

def test_hilat_compare(run_dir, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert main(["compare", str(run_dir), str(run_dir), "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    rows = {r["statistic"]: r for r in doc["kinds"]["stim_to_isr"]["rows"]}
    assert rows["p50"]["a"] == rows["p50"]["b"] == pytest.approx(MEDIAN_NS, rel=1e-12)
    assert "median" not in rows or rows["median"]["a"] == rows["p50"]["a"]   # compare states the median as p50
    assert main(["compare", str(run_dir), str(run_dir)]) == 0
    text = capsys.readouterr().out
    section = text[text.index(f"{ISR_TITLE} (ns)"):]
    p50 = next(line.split() for line in section.splitlines() if line.startswith("p50 "))
    assert p50[1:3] == [f"{MEDIAN_NS:.1f}"] * 2


# ---- the API -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("streamed", [False, True], ids=["exact", "streamed"])
def test_the_api(run_dir, monkeypatch, streamed):
    if streamed:
        monkeypatch.setattr(run_statistics, "use_hdr", lambda run, hdr=None: True if hdr is None else hdr)
    st = api.load(run_dir).stats("stim_to_isr")
    assert st.resolution.startswith("HdrHistogram") == streamed
    assert st.median == st.percentile(50) == pytest.approx(MEDIAN_TICKS / TS_HZ, rel=1e-12)
    assert st.percentile_mu(50) == MEDIAN_TICKS
    assert dict(st.ladder())["p50"] == st.median
    assert st.to_json()["seconds"]["p50"] == float(st.median)
    # A Stats built from values, and its histogram (3 significant digits: exact at these values).
    own = api.Stats.exact("stim_to_isr", ISR_TICKS, 1 / TS_HZ)
    assert own.percentile_mu(50) == MEDIAN_TICKS and own.histogram().value_at_percentile(50) == MEDIAN_TICKS


def test_the_faller_table_of_the_analysis(run_dir):
    run = load_run(run_dir)
    summary = summarize(run.measurements)
    assert summary["stim_to_isr"]["median"] == summary["stim_to_isr"]["percentiles"]["p50"] == MEDIAN_TICKS


# ---- the live view ----------------------------------------------------------------------------------------

def test_the_live_views_last_line_and_table(run_dir):
    run = load_run(run_dir)
    line, table = live_last_line(live_capture(run), list(run.kind_titles))
    us = f"{MEDIAN_NS / 1000:.3f}"
    part = next(p for p in line.split(" | ") if p.startswith("stim_to_isr "))
    assert f" P50 {us} " in part, part
    head = next(r for r in table.splitlines() if r.split()[:1] == ["kind"]).split()
    row = next(r for r in table.splitlines() if r.split()[:1] == ["stim_to_isr"]).split()
    assert row[head.index("p50")] == us


# ---- the tool formats ---------------------------------------------------------------------------------------

def test_the_tool_formats(run_dir, tmp_path):
    run = api.load(run_dir)
    st = run.stats("stim_to_isr")
    us = MEDIAN_NS / 1000
    # .hgrm: the row at the 50 % level is the median, in microseconds.
    rows = [line.split() for line in formats.hgrm(st).splitlines()[2:] if line and not line.startswith("#")]
    (at_half,) = [r for r in rows if float(r[1]) == 0.5]
    assert float(at_half[0]) == pytest.approx(us, abs=1e-9)
    # LAVA: a p50 line when asked for.
    lines = formats.lava_lines([st], percentiles=(50,)).splitlines()
    assert f"stim_to_isr-p50-latency pass {us:.3f} us" in lines
    # The CLI's exports of the same run carry the same figures.
    assert main(["export", str(run_dir), "--hgrm", "--lava", "--kind", "stim_to_isr"]) == 0
    assert (run_dir / "stim_to_isr.hgrm").read_text() == formats.hgrm(st)


def test_make_demo_cpus_rows():
    from targets.dut import experiments

    # The DUT experiments' Faller-style rows: min, median, mean, max of the valid samples (-1: missed).
    lo, median, mean, hi = experiments._stats(list(ISR_TICKS) + [analysis.MISSING])
    assert (lo, median, hi) == (ORDERED[0], MEDIAN_TICKS, ORDERED[-1]) and mean == np.mean(ISR_TICKS)
