"""`hilat report`, `compare` and `export` on synthetic runs with known answers; bad run directories."""

import csv
import json
import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hilat import analysis
from hilat.cli import main
from hilat.rundir.reader import load_run
from synth import TS_HZ, dut_edges, measures_json, random_run, write_legacy_run, write_run

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "hilat-report.schema.json").read_text())
TICK_NS = 1e9 / TS_HZ


@pytest.fixture
def cli(capsys, caplog):
    """Run the CLI in-process: (exit code, stdout, stderr + log messages), never a traceback."""
    def run(*argv):
        caplog.clear()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:     # a usage error: argparse prints it and exits with 2
            code = e.code
        out, err = capsys.readouterr()
        err += caplog.text
        assert "Traceback" not in out + err
        return code, out, err
    return run


@pytest.fixture
def two_runs(tmp_path):
    a, isr_a, _ = random_run(tmp_path / "a", n=3000, seed=11, label="load0", miss_every=100)
    b, isr_b, _ = random_run(tmp_path / "b", n=3000, seed=11, shift=25, label="load1", miss_every=100)
    return a, b, isr_a, isr_b


def test_report_text_is_fallers_table_with_exact_values(tmp_path, cli):
    stim = [1000, 6000, 11000, 16000, 21000]
    run = write_run(tmp_path / "r", dut_edges(stim, [50, None, 75, 400, 60], [140, None, None, 500, 150]),
                    label="hand")
    code, out, _ = cli("report", run)
    assert code == 0
    # stimulus -> ISR: 50 60 75 400 ticks x 20 ns; median 60 ticks (p50, the lower middle); mean
    # 146.25; std by hand; no window unknown.
    std = np.std([50, 60, 75, 400], ddof=1) * TICK_NS
    row = re.search(r"^hand\s+4\s+1\s+20\.000%\s+0\s+1000\.0\s+1200\.0\s+8000\.0\s+2925\.0\s+(\S+)$", out, re.M)
    assert row, out
    assert float(row.group(1)) == pytest.approx(std, abs=0.05)
    assert "stimulus -> task (ns), all samples" in out and "40.000%" in out
    assert "p99.9 needs 1000" in out
    assert "uncalibrated" in out


def test_report_json_follows_schema_and_numpy(two_runs, cli):
    a, b, isr_a, _ = two_runs
    code, out, _ = cli("report", a, b, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["format"] == "hilat-report" and doc["version"] == 4
    row = doc["runs"][0]["subsets"]["all"]["stim_to_isr"]
    valid = np.array([v for v in isr_a if v is not None])
    assert row["misses"] == 30 and row["count"] == 2970 and row["miss_share"] == pytest.approx(0.01)
    assert row["mu"]["max"] == valid.max() and row["ns"]["max"] == valid.max() * TICK_NS
    for p in ("p50", "p90", "p99"):
        q = float(p[1:]) / 100
        assert row["mu"]["percentiles"][p] == np.quantile(valid, q, method="inverted_cdf")
    assert row["mu"]["percentiles"]["p99.9"] is not None and row["mu"]["percentiles"]["p99.99"] is None


def test_schema_rejects_a_document_without_version(two_runs, cli):
    a, *_ = two_runs
    _, out, _ = cli("report", a, "--format", "json")
    doc = json.loads(out)
    del doc["version"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)


def test_report_csv_markdown_html_and_plots(two_runs, tmp_path, cli):
    a, b, *_ = two_runs
    code, out, _ = cli("report", a, b, "--format", "csv")
    rows = list(csv.DictReader(out.splitlines()))
    assert code == 0 and len(rows) == 2 * 2 * len(analysis.KINDS) * 2
    isr_ns = [r for r in rows if r["run"] == "load1" and r["kind"] == "stim_to_isr" and r["subset"] == "all"
              and r["unit"] == "ns"][0]
    assert float(isr_ns["max"]) == load_run(b).pairing.isr_latency.max() * TICK_NS
    code, out, _ = cli("report", a, "--format", "markdown")
    assert code == 0 and "| run | count | misses | missed | unknown | min | med | max | average | std dev |" in out
    html, plots = tmp_path / "r.html", tmp_path / "plots"
    code, _, _ = cli("report", a, b, "--html", html, "--plots", plots)
    assert code == 0
    page = html.read_text()
    assert page.count('src="data:image/png;base64,') == 4 and "<table>" in page and "http" not in page
    for name in ("faller", "percentiles", "histogram", "timeseries"):
        assert (plots / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (plots / f"{name}.svg").read_bytes()[:2000]


def test_compare_differences_at_each_percentile(two_runs, cli):
    a, b, *_ = two_runs
    code, out, _ = cli("compare", a, b, "--format", "json")
    assert code == 0
    cmp = json.loads(out)
    rows = {r["statistic"]: r for r in cmp["kinds"]["stim_to_isr"]["rows"]}
    # B is A shifted by exactly 25 ticks = 500 ns at every percentile, min and max.
    for stat in ("min", "p50", "p90", "p99", "p99.9", "max", "mean"):
        assert rows[stat]["b_minus_a"] == pytest.approx(500.0), stat
    assert rows["p99.99"]["a"] is None and rows["p99.99"]["b_minus_a"] is None
    assert rows["std"]["b_minus_a"] == pytest.approx(0.0, abs=1e-9)
    assert cmp["kinds"]["stim_to_isr"]["worst_b"]["mu"] == cmp["kinds"]["stim_to_isr"]["worst_a"]["mu"] + 25
    code, out, _ = cli("compare", a, b)
    assert "B - A" in out and "worst case load0" in out and "worst case load1" in out


def test_report_applies_the_calibration_in_the_run(tmp_path, cli):
    stim = [1000, 6000]
    cal = {"offset_ticks": 5, "ts_hz": 50_000_050.0, "statement": ["calibrated on rig X, 2 h ago"],
           "clock": {"method": "pps", "ppm": 1.0}}
    run = write_run(tmp_path / "c", dut_edges(stim, [50, 60], [140, 150]), calibration=cal)
    code, out, _ = cli("report", run, "--format", "json")
    r = json.loads(out)["runs"][0]
    assert r["offset_mu"] == 5 and r["subsets"]["all"]["stim_to_isr"]["mu"]["min"] == 45
    assert r["subsets"]["all"]["stim_to_isr"]["ns"]["min"] == pytest.approx(45 * 1e9 / 50_000_050.0)
    assert "calibrated on rig X, 2 h ago" in r["resolution"]
    assert r["resolution"][0] == "1 tick = 20 ns (ts 50.000050 MHz, clock calibrated: +1 ppm)"
    assert r["subsets"]["all"]["isr_to_task"]["mu"]["min"] == 90


def test_report_of_an_uncalibrated_run_says_uncalibrated_once(tmp_path, cli):
    # What a capture without any stored calibration records: the nominal ts_hz and no clock.
    from hilat import calibration

    identity = {"gateware": "synthetic 0000000", "firmware": "hilat-fw 1", "ts_hz": TS_HZ}
    cal = calibration.applied(identity, None, reason="none stored for this rig")
    run = write_run(tmp_path / "u", dut_edges([1000, 6000], [50, 60], [140, 150]), calibration=cal)
    for fmt in ("text", "markdown", "json"):
        code, out, _ = cli("report", run, "--format", fmt)
        assert code == 0 and ", calibrated)" not in out and "clock calibrated" not in out, fmt
        assert "ts 50.000000 MHz, nominal, clock uncalibrated" in out and "clock: not calibrated" in out, fmt
    code, _, _ = cli("report", run, "--html", tmp_path / "u.html")
    page = (tmp_path / "u.html").read_text()
    assert code == 0 and ", calibrated)" not in page and "nominal, clock uncalibrated" in page


def test_empty_run_gives_an_honest_empty_report(tmp_path, cli):
    run = write_run(tmp_path / "empty", [])
    code, out, _ = cli("report", run)
    assert code == 0 and re.search(r"^synthetic\s+0\s+0\s+-\s+0\s+-", out, re.M)
    code, _, _ = cli("report", run, "--html", tmp_path / "e.html")
    assert code == 0 and (tmp_path / "e.html").exists()
    code, out, _ = cli("compare", run, run)
    assert code == 0


def test_run_with_only_misses(tmp_path, cli):
    run = write_run(tmp_path / "m", dut_edges([1000, 6000, 11000], [None] * 3, [None] * 3), label="dead")
    code, out, _ = cli("report", run, "--html", tmp_path / "m.html")
    assert code == 0 and re.search(r"^dead\s+0\s+3\s+100\.000%", out, re.M)


@pytest.mark.parametrize("damage,message", [
    ("missing", "no such run directory"),
    ("file", "not a directory"),
    ("no_meta", "no meta.json"),
    ("bad_json", "not valid JSON"),
    ("not_a_run", "not a hilat run description"),
    ("no_rig", "never identified the rig"),
    ("no_events", "none of edges.bin, events.csv, raw.bin"),
    ("bad_events", "not a whole number"),
    ("short_row", "rows must have 4 fields"),
])
def test_bad_run_directories_give_clear_errors(tmp_path, cli, damage, message):
    # The previous format's events.csv: its reader's errors too.
    run = write_legacy_run(tmp_path / "r", dut_edges([1000], [50], [140]))
    if damage == "missing":
        run = tmp_path / "nope"
    elif damage == "file":
        run = run / "events.csv"
    elif damage == "no_meta":
        (run / "meta.json").unlink()
    elif damage == "bad_json":
        (run / "meta.json").write_text('{"format": "hilat-run", ')
    elif damage == "not_a_run":
        (run / "meta.json").write_text('{"format": "something else"}')
    elif damage == "no_rig":
        (run / "meta.json").write_text('{"format": "hilat-run", "rig": null, "error": "cannot open /dev/ttyX"}')
    elif damage == "no_events":
        (run / "events.csv").unlink()
    elif damage == "bad_events":
        (run / "events.csv").write_text("tick,channel,level,tag\n1000,0,1,0\n10x0,2,1,0\n")
    elif damage == "short_row":
        (run / "events.csv").write_text("tick,channel,level,tag\n1000,0,1\n")
    for argv in (["report", run], ["compare", run, run], ["export", run, "--csv"]):
        code, _, err = cli(*argv)
        assert code == 1 and message in err, (argv, err)


def test_events_decoded_from_raw_bin_when_events_csv_is_missing(tmp_path):
    from hilat.link import protocol as p

    edges = dut_edges([1000, 6000, 11000], [50, 60, None], [140, 150, None])
    records, levels = [], 0
    for tick in sorted({e[0] for e in edges}):
        mask = 0
        for t, ch, lv in edges:
            if t == tick:
                mask |= 1 << ch
                levels = (levels & ~(1 << ch)) | (lv << ch)
        records.append((tick, mask, levels))
    run = write_legacy_run(tmp_path / "raw", edges)
    raw = b"".join(msg.encode(seq) for seq, msg in enumerate(p.pack_events(records)))
    (run / "raw.bin").write_bytes(raw)
    (run / "events.csv").unlink()
    loaded = load_run(run)
    assert loaded.edges_source == "raw.bin"
    assert loaded.pairing.isr_latency.tolist() == [50, 60, analysis.MISSING]


def test_a_run_written_by_protocol_1_is_still_read(tmp_path, cli):
    # Protocol 1's IDENTIFY had no channel table: its fixed channels (protocol.V1_CHANNEL_TABLE) apply.
    run = write_legacy_run(tmp_path / "v1", dut_edges([1000, 6000], [50, 60], [140, 150], tag_spans=[(6100, 6300)]))
    meta = json.loads((run / "meta.json").read_text())
    meta["rig"] = {k: v for k, v in meta["rig"].items() if k != "channels"} | {"version": 1, "tag_channel": 5}
    (run / "meta.json").write_text(json.dumps(meta))
    code, out, _ = cli("report", run, "--format", "json")
    r = json.loads(out)["runs"][0]
    assert code == 0 and r["subsets"]["all"]["stim_to_isr"]["mu"]["min"] == 50
    assert r["subsets"]["untagged"]["stim_to_isr"]["count"] == 1          # the tag (channel 5) still counts
    meta["rig"]["version"] = 2                                            # a v2 run must have its table
    (run / "meta.json").write_text(json.dumps(meta))
    code, _, err = cli("report", run)
    assert code == 1 and "the rig has no channel table" in err


def dut_paced_run(path, label, shift=0, seed=5):
    """A run with no stimulus: the DUT sends on in0 (period 1000 + 0..99 ticks), replies on in1 after
    40 + 0..19 (+ shift) ticks and runs a handler on in3 (the tag pin) 25..34 ticks after that."""
    rng = np.random.default_rng(seed)
    send = np.cumsum(1000 + rng.integers(0, 100, 500))
    reply = send + 40 + shift + rng.integers(0, 20, 500)
    handler = reply + 25 + rng.integers(0, 10, 500)
    edges = sorted([e for t in send for e in ((int(t), 2, 1), (int(t) + 5, 2, 0))]
                   + [e for t in reply for e in ((int(t), 3, 1), (int(t) + 7, 3, 0))]
                   + [e for t in handler for e in ((int(t), 4, 1), (int(t) + 9, 4, 0))])
    write_run(path, edges, label=label, settings={"no_stimulus": True, "deadline_ticks": None},
              measures=measures_json(["send_to_recv=in0..in1", "recv_to_handler=in1:rise..in2:rise@100",
                                      "send_period=period:in0", "handler_width=width:in2"]))
    return send, reply, handler


def test_defined_kinds_in_every_output(tmp_path, cli):
    send, reply, handler = dut_paced_run(tmp_path / "a", "paced0")
    dut_paced_run(tmp_path / "b", "paced1", shift=10)
    code, out, _ = cli("report", tmp_path / "a", "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert list(doc["kinds"]) == ["send_to_recv", "recv_to_handler", "send_period", "handler_width"]
    assert doc["kinds"]["send_to_recv"] == "in0 rise -> in1 rise"
    run = doc["runs"][0]
    assert run["stimuli"] == 0 and run["stimulus"] is None
    rows = run["subsets"]["all"]
    assert rows["send_to_recv"]["mu"]["max"] == (reply - send).max()
    assert rows["send_to_recv"]["count"] == 500 and rows["send_to_recv"]["misses"] == 0
    assert rows["recv_to_handler"]["mu"]["min"] == (handler - reply).min()
    assert rows["send_period"]["count"] == 499 and rows["send_period"]["mu"]["max"] == np.diff(send).max()
    assert rows["handler_width"]["mu"]["min"] == rows["handler_width"]["mu"]["max"] == 9
    assert run["worst"]["send_period"]["mu"] == np.diff(send).max()
    code, text, _ = cli("report", tmp_path / "a", tmp_path / "b")
    assert code == 0 and "in0 rise -> in1 rise (ns), all samples" in text and "period of in0 rise: percentiles" in text
    assert "stimulus -> ISR" not in text
    jitter = re.search(r"^paced0\s+send_period\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+$", text, re.M)
    periods = np.diff(send) * TICK_NS
    assert jitter and [float(x) for x in jitter.groups()] == pytest.approx(
        [periods.mean(), periods.min(), periods.max(), periods.max() - periods.min()], abs=0.05)
    code, out, _ = cli("report", tmp_path / "a", "--format", "csv")
    assert code == 0 and {r["kind"] for r in csv.DictReader(out.splitlines())} == set(doc["kinds"])
    code, _, _ = cli("report", tmp_path / "a", "--plots", tmp_path / "plots", "--kinds", "send_period")
    assert code == 0 and (tmp_path / "plots" / "faller.png").exists()
    code, _, err = cli("report", tmp_path / "a", "--plots", tmp_path / "plots", "--kinds", "stim_to_isr")
    assert code == 2 and "no run has the kind(s) stim_to_isr" in err
    code, out, _ = cli("compare", tmp_path / "a", tmp_path / "b", "--format", "json")
    cmp = json.loads(out)
    assert list(cmp["kinds"]) == ["send_to_recv", "recv_to_handler", "send_period", "handler_width"]
    shift = {r["statistic"]: r["b_minus_a"] for r in cmp["kinds"]["send_to_recv"]["rows"]}
    assert shift["min"] == shift["max"] == pytest.approx(10 * TICK_NS)
    # Nothing in common with a stimulus run: a clear error, not an empty comparison.
    random_run(tmp_path / "c", n=100)
    code, _, err = cli("compare", tmp_path / "a", tmp_path / "c")
    assert code == 2 and "no kind in common" in err
    code, _, _ = cli("export", tmp_path / "a", "--hlog", tmp_path / "p.hlog", "--kind", "send_period")
    assert code == 0 and (tmp_path / "p.hlog").read_text().count("\n") > 3


def test_a_run_of_the_previous_format_reads_as_the_current_one(tmp_path, cli):
    # The same edges in both run formats: the current one (edges.bin and the capture's stored samples)
    # and the previous one (events.csv, read by the compatibility reader) report the same figures.
    edges = dut_edges([1000, 6000, 11000, 16000], [50, None, 75, 400], [140, None, None, 500],
                      tag_spans=[(6100, 6300)])
    current = write_run(tmp_path / "now", edges, label="x")
    legacy = write_legacy_run(tmp_path / "old", edges, label="x")
    assert load_run(current).edges_source == "edges.bin" and load_run(current).has_stored_samples()
    assert load_run(legacy).edges_source == "events.csv" and not load_run(legacy).has_stored_samples()
    docs = []
    for run in (current, legacy):
        code, out, err = cli("report", run, "--format", "json")
        assert code == 0, err
        docs.append(json.loads(out)["runs"][0]["subsets"])
    assert docs[0] == docs[1] and docs[0]["all"]["stim_to_isr"]["mu"]["max"] == 400
