"""`hilat capture --on-rig` (and `--raw`) against a rig whose engine sends the bins of a known
pattern (tests/host/engine_rig.py): the summary is the injected latencies' exact statistics, the
percentiles those of their HdrHistogram, and the run directory says what is complete."""

import json

import engine_reference as ref
import jsonschema
import numpy as np
import pytest
from engine_rig import EngineRig
from fake_rig import FakeRig, capture_script
from hilat import analysis, api
from hilat.cli import main
from hilat.hdr import read_hlog
from hilat.link import protocol as p
from hilat.rundir.layout import OUTLIER_DTYPE, OUTLIERS_MAGIC
from hilat.rundir.reader import load_run
from hilat.rundir.stores import iter_store
from hilat.statistics.percentiles import PERCENTILES, percentile_label, samples_needed
from test_reports import SCHEMA

COUNT = 3000


def capture(rig, tmp_path, *extra):
    with FakeRig(rig.script) as fake:
        code = main(["capture", fake.url, "--on-rig", "--count", str(COUNT), "--mode", "periodic", "--period", "500",
                     "--jitter", "0", "--out", str(tmp_path), "--no-progress", "--no-calibration",
                     "--interval-shift", "16", *extra])
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    return run_dir, json.loads((run_dir / "summary.json").read_text())


def check_summary(rig, doc):
    """Every figure of the summary: the pattern's exact statistics, percentiles to the bin."""
    jsonschema.validate(doc, SCHEMA)
    (run,) = doc["runs"]
    assert list(run["kinds"]) == list(p.ENGINE_KINDS)
    assert run["stimuli"] == COUNT and run["problems"] == []
    assert run["statistics"].startswith("on-rig:")
    for kind in p.ENGINE_KINDS:
        for subset in ("all", "untagged"):
            exact, hist = rig.expected(kind, subset)
            row = run["subsets"][subset][kind]
            ticks = row["mu"]
            assert (row["count"], ticks["min"], ticks["max"]) == (exact["count"], exact["min"], exact["max"])
            assert ticks["mean"] == pytest.approx(exact["mean"], rel=1e-15)
            # The bins' std is HdrHistogram's of the injected values (bucket medians, population).
            assert ticks["std"] == pytest.approx(hist.stddev, rel=1e-12) and ticks["std"] > 0
            assert ticks["median"] == hist.value_at_percentile(50.0)
            for q in PERCENTILES:
                label = percentile_label(q)
                supported = exact["count"] >= samples_needed(q)
                want = min(hist.value_at_percentile(100 * q), exact["max"]) if supported else None
                assert ticks["percentiles"][label] == want, (kind, subset, label)
            if subset == "all":
                assert (row["misses"], row["duplicates"]) == (exact["misses"], exact["duplicates"])
                assert row["starts"] == exact["count"] + exact["misses"] + exact["below"]
        assert run["tagged"][kind] == rig.expected(kind, "all")[0]["count"] - rig.expected(kind, "untagged")[0]["count"]
    # The pattern has misses, duplicates, tagged samples and more than one interval.
    isr = run["subsets"]["all"]["stim_to_isr"]
    assert isr["misses"] > 50 and isr["duplicates"] > 20
    assert 0 < run["tagged"]["stim_to_isr"] < COUNT


def test_on_rig_summary_is_the_injected_latencies(tmp_path):
    rig = EngineRig()
    run_dir, doc = capture(rig, tmp_path, "--outlier", "stim_to_isr=600")
    check_summary(rig, doc)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["results"] == {"on_rig": "complete", "raw": "none"}
    assert meta["edges"] == 0 and meta["engine"]["problems"] == []
    assert meta["engine"]["config"]["flags"] == p.ENGINE_ENABLE and rig.config.thresholds[0] == 600
    # The engine's configuration: the capture's roles, the interval shift asked for.
    assert (rig.config.start_channel, rig.config.isr_channel, rig.config.task_channel, rig.config.tag_channel,
            rig.config.interval_shift) == (0, 2, 3, 5, 16)
    # rig.hlog: every complete interval of the run, the kind's lines adding up to its count.
    log = read_hlog(run_dir / "hlog" / "rig.hlog")
    assert log.merged("stim_to_isr").total_count == rig.expected("stim_to_isr")[0]["count"]
    s = rig.samples
    number = s.start >> 16
    assert meta["engine"]["intervals"] == len(np.unique(number)) > 5
    assert len([iv for iv in log.intervals if iv.tag == "stim_to_isr"]) == len(np.unique(number[s.binned[0]]))
    # Outliers: every sample above the threshold, and the worst case found among them.
    stored = next(iter_store(run_dir / "outliers.bin", OUTLIERS_MAGIC, OUTLIER_DTYPE, 1 << 20))
    above = s.binned[0] & (s.value[0] > 600)
    assert stored["start_tick"].tolist() == s.start[above].tolist() and meta["engine"]["outliers"] == above.sum()
    worst = doc["runs"][0]["worst"]["stim_to_isr"]
    assert worst["mu"] == s.value[0][s.binned[0]].max() and worst["index"] is None
    assert " mu" in (run_dir / "summary.txt").read_text()
    # A later report reads the engine's results back (engine.json): the same figures.
    assert main(["report", str(run_dir), "--format", "json", "-o", str(tmp_path / "report.json")]) == 0
    again = json.loads((tmp_path / "report.json").read_text())
    assert again["runs"][0]["subsets"] == doc["runs"][0]["subsets"]
    # The API's statistics of the same run: the same figures, std too (the bins', in seconds).
    isr = api.load(run_dir).stats("stim_to_isr")
    want = doc["runs"][0]["subsets"]["all"]["stim_to_isr"]["mu"]
    assert isr.std_mu == want["std"] and isr.mean_mu == want["mean"] and isr.std > 0


def test_on_rig_with_raw_edges_agrees_with_the_host_pairing(tmp_path):
    rig = EngineRig(seed=11)
    run_dir, doc = capture(rig, tmp_path, "--raw")
    check_summary(rig, doc)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["results"] == {"on_rig": "complete", "raw": "complete"}
    assert meta["engine"]["config"]["flags"] == p.ENGINE_ENABLE | p.ENGINE_RAW
    # The raw edges, paired again by the host, give the engine's figures.
    run = load_run(run_dir)
    assert run.edge_count == len(rig.edges[0])
    latencies = run.pairing.isr_latency
    found = latencies[latencies != analysis.MISSING]
    stats = doc["runs"][0]["subsets"]["all"]["stim_to_isr"]
    assert (len(found), int(found.min()), int(found.max())) == (stats["count"], stats["mu"]["min"],
                                                                stats["mu"]["max"])
    assert run.problems == []


def test_on_rig_overflow_is_counted_and_in_no_percentile(tmp_path):
    # Windows beyond 2**24 ticks (0.2% of the samples): their ISR values are in the overflow bin
    # (intervals of 2**25 ticks, so that the deadline the engine takes is longer than those windows).
    rig = EngineRig(seed=3, overflow_windows=6)
    run_dir, doc = capture(rig, tmp_path, "--interval-shift", "25")
    (run,) = doc["runs"]
    row = run["subsets"]["all"]["stim_to_isr"]
    exact, hist = rig.expected("stim_to_isr")
    beyond = int((rig.samples.binned[0] & (rig.samples.value[0] >= 1 << 24)).sum())
    assert beyond >= 5 and hist.total_count == exact["count"] - beyond
    assert (row["count"], row["mu"]["max"]) == (exact["count"], exact["max"])
    assert row["mu"]["mean"] == pytest.approx(exact["mean"], rel=1e-15)
    # p99 lies below the overflow, p99.9 in it: not known, shown as '-'.
    assert row["mu"]["percentiles"]["p99"] == hist.value_at_percentile(99 * exact["count"] / hist.total_count)
    assert row["mu"]["percentiles"]["p99.9"] is None and exact["count"] >= 1000
    engine_doc = json.loads((run_dir / "engine.json").read_text())
    bins = engine_doc["bins"]["stim_to_isr"]
    assert sum(c for b, c in bins["untagged"] + bins["tagged"] if b == 2304) == beyond
    assert run["problems"] == [f"engine: {beyond} stim_to_isr samples of 2**24 ticks or more (the overflow bin): in "
                               "the count, min, max and mean; a percentile that falls among them is not known ('-')"]
    assert json.loads((run_dir / "meta.json").read_text())["results"]["on_rig"] == "complete"


def test_on_rig_windows_close_at_the_engines_deadline_limit_in_both_pairings(tmp_path):
    # No --deadline: the engine takes 2**16 - 2 sweeps at most, so the windows longer than that
    # (those of the ISRs beyond 2**24 ticks) close before their ISR: a miss for the rig's engine, and
    # for the host's pairing of the raw edges, now and in a later report.
    rig = EngineRig(seed=3, overflow_windows=6)
    run_dir, doc = capture(rig, tmp_path, "--raw")
    limit = 2**16 - 55608
    assert rig.config.deadline == limit
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["deadline_ticks"] == limit and meta["engine"]["config"]["deadline"] == limit
    assert json.loads((run_dir / "engine.json").read_text())["config"]["deadline"] == limit
    assert meta["results"] == {"on_rig": "complete", "raw": "complete"}
    check_summary(rig, doc)
    (run,) = doc["runs"]
    assert run["deadline_mu"] == limit
    isr = run["subsets"]["all"]["stim_to_isr"]
    assert isr["mu"]["max"] < limit and run["problems"] == []
    # The host's pairing of the same edges: the same windows, so the same samples and misses.
    loaded = load_run(run_dir)
    assert loaded.deadline_mu == limit
    latencies = loaded.pairing.isr_latency
    assert int((latencies == analysis.MISSING).sum()) == isr["misses"]
    assert int((latencies != analysis.MISSING).sum()) == isr["count"]
    stored = next(loaded.iter_samples("stim_to_isr", 1 << 20))
    assert int((stored["value_mu"] == analysis.MISSING).sum()) == isr["misses"]
    # Without the deadline these windows' ISRs would be samples beyond 2**24 ticks.
    unlimited = ref.reference_samples(rig.edges, ref.roles(), end_tick=int(rig.edges[0][-1]) + 1)
    assert (unlimited.binned[0] & (unlimited.value[0] >= 1 << 24)).sum() >= 5


def test_on_rig_deadline_within_the_engines_limit(tmp_path, capsys):
    rig = EngineRig()
    capture(rig, tmp_path, "--deadline", "9928")
    assert rig.config.deadline == 9928
    with FakeRig(EngineRig().script) as fake:
        why = usage_error(["capture", fake.url, "--on-rig", "--deadline", "200us", "--interval-shift", "16",
                           "--out", str(tmp_path / "refused"), "--no-progress"], capsys)
    assert ("deadline 200 us (10000 ticks): with --on-rig at interval shift 16 the engine takes at most "
            "198.6 us (9928 ticks)") in why
    assert "give a larger --interval-shift (17 takes it)" in why
    assert not (tmp_path / "refused").exists()


def test_trigger_out_is_configured_and_recorded(tmp_path):
    rig = EngineRig()
    run_dir, _ = capture(rig, tmp_path / "task", "--trigger", "task=2us", "--trigger-on-late", "--trigger-width", "10")
    cfg = rig.config
    assert (cfg.trigger_response, cfg.trigger_threshold, cfg.trigger_width) == (p.ENGINE_TRIGGER_TASK, 100, 10)
    assert cfg.flags == p.ENGINE_ENABLE | p.ENGINE_TRIGGER_ON_LATE
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["settings"]["trigger"] == {"threshold": 100, "response": "task", "width": 10, "on_late": True}
    assert meta["engine"]["trigger"] == {"response": "task", "threshold_ticks": 100, "threshold_ns": 2000.0,
                                         "width_ticks": 10, "width_ns": 200.0, "on_late": True, "delay_ticks": 6}
    # The ISR by default, a pulse of 1 us, only when the response has not come.
    run_dir, _ = capture(rig, tmp_path / "isr", "--trigger", "50us")
    cfg = rig.config
    assert (cfg.trigger_response, cfg.trigger_threshold, cfg.trigger_width) == (p.ENGINE_TRIGGER_ISR, 2500, 50)
    assert cfg.flags == p.ENGINE_ENABLE
    assert json.loads((run_dir / "meta.json").read_text())["engine"]["trigger"]["on_late"] is False
    # No --trigger: no trigger.
    run_dir, _ = capture(rig, tmp_path / "none")
    assert (rig.config.trigger_threshold, rig.config.trigger_width) == (0, 0)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["settings"]["trigger"] is None and meta["engine"]["trigger"] is None


@pytest.mark.parametrize("extra, why", [
    (["--trigger", "5us"], "--trigger goes with --on-rig"),
    (["--on-rig", "--trigger-on-late"], "--trigger-on-late and --trigger-width go with --trigger"),
    (["--on-rig", "--trigger-width", "5"], "--trigger-on-late and --trigger-width go with --trigger"),
    (["--on-rig", "--trigger", "dma=5us"], "--trigger [isr=|task=]TIME"),
    (["--on-rig", "--trigger", "0"], "trigger at 0 ns (0 ticks): the engine's trigger needs 1 tick at least"),
    (["--on-rig", "--trigger", "5us", "--trigger-width", "2ms"],
     "trigger width 2 ms (100000 ticks): the engine's pulse is 1 to 1.311 ms (65535 ticks)"),
    (["--on-rig", "--deadline", "1000", "--trigger", "20us"],
     "trigger at 20 us (1000 ticks): every window closes at the deadline, 20 us (1000 ticks), before that"),
])
def test_trigger_usage_errors(tmp_path, capsys, extra, why):
    with FakeRig(EngineRig().script) as fake:
        assert why in usage_error(["capture", fake.url, *extra, "--out", str(tmp_path), "--no-progress"], capsys)
    assert not list(tmp_path.iterdir())


def test_engine_frames_lost_make_the_run_partial(tmp_path):
    class Lossy(EngineRig):
        def _run(self, start, state):
            frames = super()._run(start, state)
            return [f for f in frames if not isinstance(f, p.EngineBins)] + \
                [f for f in frames if isinstance(f, p.EngineBins)][1:]  # the first bins frame never arrives

    rig = Lossy()
    with FakeRig(rig.script) as fake:
        assert main(["capture", fake.url, "--on-rig", "--count", "2000", "--out", str(tmp_path), "--no-progress",
                     "--no-calibration", "--interval-shift", "16"]) == 0
    (run_dir,) = tmp_path.iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["results"]["on_rig"] == "partial"
    assert any("samples in the bins" in line for line in meta["engine"]["problems"])
    assert any(line.startswith("engine: ") for line in json.loads((run_dir / "summary.json").read_text())
               ["runs"][0]["problems"])


def usage_error(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err


def test_on_rig_needs_an_engine_and_the_kinds_it_measures(tmp_path, capsys):
    common = ["--out", str(tmp_path), "--no-progress"]
    with FakeRig(capture_script()) as fake:
        assert "this rig has no measurement engine" in usage_error(["capture", fake.url, "--on-rig", *common], capsys)
    with FakeRig(EngineRig().script) as fake:
        for extra, why in ((["--on-rig", "--measure", "x=in0..in1"], "no --measure or --no-stimulus with --on-rig"),
                           (["--raw"], "--raw goes with --on-rig"),
                           (["--on-rig", "--outlier", "isr=5us"], "no engine kind isr")):
            assert why in usage_error(["capture", fake.url, *extra, *common], capsys)
    assert not list(tmp_path.iterdir())


def test_a_refused_engine_config_ends_the_capture_with_the_rigs_reason(tmp_path, capsys):
    rig = EngineRig()
    with FakeRig(rig.script) as fake:
        code = main(["capture", fake.url, "--on-rig", "--out", str(tmp_path), "--no-progress", "--no-calibration",
                     "--active-low", "in0"])
    assert code == 1 and rig.refused
    assert "the capture ended with an error: the rig refused ENGINE_CONFIG: engine: roles" in capsys.readouterr().out
    (run_dir,) = tmp_path.iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["results"] == {"on_rig": "partial", "raw": "none"} and meta["engine"] is None


def test_info_shows_the_engine_and_its_limits(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HILAT_CALIBRATION_DIR", str(tmp_path / "calibration"))
    with FakeRig(EngineRig().script) as fake:
        assert main(["info", fake.url]) == 0
        assert "features   dither, random, burst, absolute-start, glitch-filter, tag, engine" in capsys.readouterr().out
        assert main(["info", fake.url, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["engine"] == {"min_spacing_ticks": 8, "interval_shift_min": 16, "bins": 2305, "trigger_delay_ticks": 6}
    with FakeRig(capture_script()) as fake:
        assert main(["info", fake.url]) == 0
    assert "engine     none (every edge goes to the host)" in capsys.readouterr().out


def test_frames_after_a_reply_in_the_same_read_are_kept():
    # The defect: a command's reply ended the wait and the frames read with it were dropped (the
    # engine's bins that followed an ACK or a STATUS: an interval never closed).
    from hilat.link.rig import Rig

    bins = p.EngineBins([(p.ENGINE_ENTRY_CLOSE, 0, 0, 8, 0, 0)])
    overflow = p.Overflow(5, 1)

    class Link:
        url = "test"
        replies = []

        def write(self, data):
            seq = p.decode_frame(data, p.HOST_MESSAGES).seq
            self.replies.append(p.Ack(seq).encode(len(self.replies)) + bins.encode(len(self.replies) + 1)
                                + overflow.encode(len(self.replies) + 2))

        def read(self):
            return self.replies.pop(0) if self.replies else b""

    rig = Rig(Link())
    rig.command(p.Stop(1))
    _, frames = rig.read()
    assert [f.msg for f in frames] == [bins, overflow]
