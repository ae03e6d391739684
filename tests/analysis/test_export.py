"""`hilat export`: samples (CSV, Parquet) equal the pairing; the VCD is well-formed and a third-party
reader (vcdvcd) recovers every edge at its exact time."""

import csv

import numpy as np
import pytest
import vcdvcd
from hilat import analysis
from hilat.cli import main
from hilat.reports import export
from hilat.rundir.reader import load_run
from sigrok import check_vcd_with_sigrok
from synth import dut_edges, measures_json, random_run, write_run


@pytest.fixture
def run(tmp_path):
    path, _, _ = random_run(tmp_path / "run", n=800, seed=4, miss_every=50,
                            label="x")
    return load_run(path)


def test_csv_and_parquet_equal_the_pairing(run, tmp_path):
    import pyarrow.parquet as pq

    assert main(["export", str(run.path), "--csv", str(tmp_path / "s.csv"), "--parquet"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "s.csv")))
    p = run.pairing
    assert len(rows) == 5 * len(p) == 4000       # one row per sample of each built-in kind
    isr = [r for r in rows if r["kind"] == "stim_to_isr"]
    assert [int(r["index"]) for r in isr] == list(range(800))
    assert [int(r["value_mu"]) for r in isr] == p.isr_latency.tolist()
    assert [r["value_ns"] for r in isr][:3] == [f"{v * 20.0:.3f}" if v >= 0 else "" for v in p.isr_latency[:3]]
    assert sum(r["value_ns"] == "" for r in isr) == 16          # every 50th stimulus missed
    assert float(isr[1]["time_s"]) == pytest.approx((p.stim_mu[1] - run.ticks[0]) / 50e6)
    table = pq.read_table(run.path / "samples.parquet")
    kinds = np.array(table.column("kind").to_pylist())
    assert np.array(table.column("value_mu").to_pylist())[kinds == "stim_to_task"].tolist() == p.task_latency.tolist()
    assert np.array(table.column("start_mu").to_pylist())[kinds == "isr_duration"].tolist() == p.stim_mu.tolist()
    assert table.schema.metadata[b"hilat.ts_hz"] == b"50000000.0"


def test_samples_of_defined_kinds(tmp_path):
    """A run with no stimulus and two defined kinds: the samples table holds exactly those."""
    edges = [(t, 2, 1) for t in (100, 350, 700)] + [(t + 5, 2, 0) for t in (100, 350, 700)] + [(130, 3, 1), (139, 3, 0)]
    path = write_run(tmp_path / "r", sorted(edges), measures=measures_json(["tick=period:in0", "reply=in0..in1"]),
                     settings={"no_stimulus": True, "deadline_ticks": None})
    assert main(["export", str(path), "--csv", str(tmp_path / "s.csv")]) == 0
    rows = [(r["kind"], int(r["index"]), int(r["start_mu"]), int(r["value_mu"]))
            for r in csv.DictReader(open(tmp_path / "s.csv"))]
    assert rows == [("tick", 0, 100, 250), ("tick", 1, 350, 350), ("reply", 0, 100, 30), ("reply", 1, 350, -1),
                    ("reply", 2, 700, -1)]


def test_vcd_timescale_choice():
    assert export.vcd_timescale(50e6) == ("10 ns", 10 ** 7, 2, True)
    assert export.vcd_timescale(100e6)[0::2] == ("10 ns", 1)
    assert export.vcd_timescale(125e6)[0::2] == ("1 ns", 8)
    assert export.vcd_timescale(1e6)[0::2] == ("1 us", 1)
    # 140 MHz (the boards): 7.142857 ns, no exact unit: 1 ns, rounded.
    scale, unit_fs, per_tick, exact = export.vcd_timescale(140e6)
    assert (scale, unit_fs, exact) == ("1 ns", 10 ** 6, False) and per_tick == pytest.approx(7.142857142857)
    # Forced: exact femtoseconds (with rounding below 1 fs), or a unit that is exact anyway.
    scale, _, per_tick, _ = export.vcd_timescale(150e6, unit_fs=export.parse_vcd_unit("1fs"))
    assert scale == "1 fs" and per_tick == pytest.approx(6666666.667, rel=1e-9)
    assert export.vcd_timescale(50e6, unit_fs=export.parse_vcd_unit("1 ns")) == ("1 ns", 10 ** 6, 20, True)
    with pytest.raises(ValueError, match="not a VCD time unit"):
        export.parse_vcd_unit("5ns")


def test_vcd_at_140_mhz_keeps_every_tick_apart(tmp_path):
    edges = dut_edges([1000, 1007], [3, 1], [5, 2], isr_width=1, task_width=1, stim_width=1)
    r = load_run(write_run(tmp_path / "r", edges, ts_hz=140_000_000))
    export.write_vcd(r, tmp_path / "f.vcd")
    text = (tmp_path / "f.vcd").read_text()
    assert "$timescale 1 ns $end" in text and "times rounded to 1 ns" in text
    times = [int(line[1:]) for line in text.splitlines() if line.startswith("#")]
    ticks = sorted({int(t) for t in r.ticks})
    assert times[1:-1] == [round((t - ticks[0] + 1) * 1e9 / 140e6) for t in ticks]
    assert len(set(times)) == len(times)


def test_vcd_is_read_back_edge_for_edge(run, tmp_path):
    path = tmp_path / "e.vcd"
    n = export.write_vcd(run, path)
    assert n == len(run.ticks)
    text = path.read_text()
    header, _, body = text.partition("$enddefinitions $end\n")
    assert "$timescale 10 ns $end" in header and header.count("$var wire 1 ") == 3
    times = [int(line[1:]) for line in body.splitlines() if line.startswith("#")]
    assert times == sorted(times) and len(times) == len(set(times))
    # Time 0 is one tick before the first edge; a last timestamp one tick after the last edge.
    origin = int(run.ticks[0]) - 1
    assert f"is rig tick {origin}," in header and times[0] == 0 and times[1] == 2
    assert times[-1] == (int(run.ticks[-1]) + 1 - origin) * 2
    vcd = vcdvcd.VCDVCD(str(path))
    for ch, name in ((0, "stim0"), (2, "isr"), (3, "task")):
        sel = run.chans == ch
        expect = [(int(t - origin) * 2, str(int(lv))) for t, lv in zip(run.ticks[sel], run.levels[sel])]
        # Every channel's first edge is a rise, so its initial value (dumped at #0) is 0.
        assert vcd[f"hilat.{name}"].tv == [(0, "0")] + expect, name


def test_vcd_initial_level_is_before_the_first_edge(tmp_path):
    # An active-low DUT pin whose first edge falls: it was high before.
    edges = dut_edges([1000], [50], [140]) + [(900, 4, 0), (1500, 4, 1)]
    r = load_run(write_run(tmp_path / "r", sorted(edges)))
    path = tmp_path / "i.vcd"
    export.write_vcd(r, path)
    tv = vcdvcd.VCDVCD(str(path))["hilat.spare"].tv
    assert tv == [(0, "1"), (2, "0"), (1202, "1")]
    stim = vcdvcd.VCDVCD(str(path))["hilat.stim0"].tv
    assert stim[:2] == [(0, "0"), (202, "1")]


def test_vcd_read_by_sigrok_equals_the_run(tmp_path):
    """Debian's sigrok-cli reads every edge of events.csv at its time, the first and the last
    included, and its jitter decoder measures hilat's stimulus -> ISR latency for every stimulus that
    does not follow a miss. Before: the first edge sat at #0 (invisible) and the last had no
    timestamp after it (dropped)."""
    # Misses, duplicate ISR pulses, a tag and an active-low input whose first edge falls.
    rng = np.random.default_rng(9)
    stim = (np.cumsum(rng.integers(4000, 6000, 600)) + 1000).tolist()
    isr = [None if k % 37 == 5 else int(v) for k, v in enumerate(rng.integers(40, 900, 600))]
    task = [None if v is None else v + 100 for v in isr]
    edges = dut_edges(stim, isr, task, extra_isr=[s + 2500 for s in stim[::23]], tag_spans=[(stim[50], stim[60])])
    edges += [(stim[k] + 3000, 4, k % 2) for k in range(20)]     # falls first: high before
    run = load_run(write_run(tmp_path / "run", sorted(edges)))
    vcd = tmp_path / "e.vcd"
    assert main(["export", str(run.path), "--vcd", str(vcd)]) == 0
    compared = check_vcd_with_sigrok(run, vcd)
    misses = int((run.pairing.isr_latency == analysis.MISSING).sum())
    assert misses >= 15 and compared >= len(run.pairing) - 2 * misses


def test_export_needs_a_format(run, caplog, capsys):
    with pytest.raises(SystemExit) as e:
        main(["export", str(run.path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--csv, --parquet, --json, --hlog, --vcd, or a tool's format: --cyclictest" in err


def test_samples_of_an_empty_run(tmp_path):
    r = load_run(write_run(tmp_path / "empty", []))
    export.write_csv(r, tmp_path / "s.csv")
    assert open(tmp_path / "s.csv").read().startswith("kind,index,start_mu,time_s,value_mu,value_ns,mu_ns,")
    assert export.write_vcd(r, tmp_path / "e.vcd") == 0
    assert analysis.MISSING == -1 and np.array_equal(export.sample_columns(r)["index"], [])


def test_hlog_export_holds_every_latency_per_interval(run, tmp_path):
    from hilat import hdr

    path = tmp_path / "isr.hlog"
    assert main(["export", str(run.path), "--hlog", str(path), "--interval", "10ms"]) == 0
    log = hdr.read_hlog(path)
    p = run.pairing
    ok = p.isr_latency != analysis.MISSING
    t = (p.stim_mu - p.stim_mu[0]) / run.unit.mu_hz
    assert len(log.intervals) == int(t[-1] // 0.01) + 1
    merged = log.merged()
    assert merged.total_count == ok.sum()
    ns = p.isr_latency[ok] * 20
    expect = hdr.HdrHistogram(1, merged.highest, 3)
    expect.record(ns)
    assert np.array_equal(merged.counts, expect.counts)
    # Interval k holds exactly the stimuli of its 10 ms of rig time.
    k = (t[ok] // 0.01).astype(int)
    assert [iv.histogram.total_count for iv in log.intervals] == np.bincount(k, minlength=len(log.intervals)).tolist()
    assert [iv.start_s for iv in log.intervals][:3] == [0.0, 0.01, 0.02]


def _store_samples(run, stimuli=False):
    """samples/KIND.bin of every kind, as captures wrote them before samples/stimuli.bin; with
    ``stimuli``, the built-in kinds' in samples/stimuli.bin, as the capture writes them now."""
    from hilat.rundir.layout import BUILTIN_KINDS, SAMPLE_DTYPE, SAMPLES_MAGIC, STIMULI_MAGIC, STIMULUS_DTYPE
    from hilat.rundir.stores import StoreAppender, _stimulus_items

    (run.path / "samples").mkdir(exist_ok=True)
    if stimuli:
        store = StoreAppender(run.path / "samples" / "stimuli.bin", STIMULI_MAGIC, STIMULUS_DTYPE)
        store.append(_stimulus_items([run.measurements.series[k] for k in BUILTIN_KINDS]))
        store.close()
    for kind in run.kind_titles:
        if stimuli and kind in BUILTIN_KINDS:
            continue
        se = run.measurements.series[kind]
        items = np.zeros(len(se), SAMPLE_DTYPE)
        items["start_mu"], items["value_mu"], items["duplicates"] = se.start_mu, se.values, se.duplicates
        items["tag_at_start"], items["tag_in_window"], items["unknown"] = se.tag_at_start, se.tag_in_window, se.unknown
        store = StoreAppender(run.path / "samples" / f"{kind}.bin", SAMPLES_MAGIC, SAMPLE_DTYPE)
        store.append(items)
        store.close()


@pytest.mark.parametrize("stored", [False, "per-kind", "stimuli"], ids=["from-edges", "stored-samples",
                                                                       "stored-stimuli"])
def test_unknown_samples_keep_their_row_with_the_flag(tmp_path, stored):
    import pyarrow.parquet as pq
    from synth import GAPPED_ISR, GAPPED_MISSED, GAPPED_STIM, GAPPED_UNKNOWN, gapped_run

    run = load_run(gapped_run(tmp_path / "g"))
    if stored:
        _store_samples(run, stimuli=stored == "stimuli")
        run = load_run(run.path)
        assert run.has_stored_samples()
    assert main(["export", str(run.path), "--csv", str(tmp_path / "s.csv"), "--parquet"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "s.csv")))
    assert list(rows[0]) == export.SAMPLE_COLUMNS and export.SAMPLE_COLUMNS[-1] == "unknown"
    isr = [r for r in rows if r["kind"] == "stim_to_isr"]
    assert [int(r["start_mu"]) for r in isr] == GAPPED_STIM        # every window keeps its row
    assert [int(r["unknown"]) for r in isr] == [int(i == GAPPED_UNKNOWN) for i in range(len(GAPPED_STIM))]
    # A value where one was measured; -1 / empty for the miss and for the unknown window alike.
    assert [int(r["value_mu"]) for r in isr] == [-1 if v is None else v for v in GAPPED_ISR]
    assert [r["value_ns"] == "" for r in isr] == [v is None for v in GAPPED_ISR]
    assert int(isr[GAPPED_MISSED]["unknown"]) == 0                    # the miss is a miss
    # Every kind's unknown rows are the windows the API counts as unknown.
    from hilat.api import load

    api_run = load(run.path)
    for kind in run.kind_titles:
        assert sum(int(r["unknown"]) for r in rows if r["kind"] == kind) == api_run.stats(kind).unknown, kind
    table = pq.read_table(run.path / "samples.parquet")
    assert str(table.schema.field("unknown").type) == "uint8"
    assert table.column("unknown").to_pylist() == [int(r["unknown"]) for r in rows]


def test_the_timeseries_plot_marks_unknown_windows_apart_from_misses(tmp_path):
    pytest.importorskip("matplotlib")
    from hilat.reports import plots
    from synth import gapped_run

    run = load_run(gapped_run(tmp_path / "g"))
    fig = plots.plot_timeseries([run], kinds=["stim_to_isr"])
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "gapped: 1 missed" in labels and "gapped: 1 unknown (gaps)" in labels
    (points,) = [line for line in ax.get_lines() if line.get_label() == "gapped"]
    assert len(points.get_xdata()) == len(run.measurements.series["stim_to_isr"].valid())
    # The other plots read the run's Distribution: its samples are the valid ones (unknown ones apart).
    assert np.array_equal(plots._distribution(run, "stim_to_isr").values_mu(),
                          np.sort(run.measurements.series["stim_to_isr"].valid()))
    plots.render(fig, "png")
