"""`hilat export`: samples (CSV, Parquet) equal the pairing; the VCD is well-formed and a third-party
reader (vcdvcd) recovers every edge at its exact time."""

import csv

import numpy as np
import pytest
import vcdvcd
from hilat import analysis, export
from hilat.cli import main
from hilat.runs import load_run
from synth import dut_edges, random_run, write_run


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
    assert len(rows) == len(p) == 800
    assert [int(r["stim_to_isr_ticks"]) for r in rows] == p.isr_latency.tolist()
    assert [r["stim_to_isr_ns"] for r in rows][:3] == [f"{v * 20.0:.3f}" if v >= 0 else "" for v in
                                                       p.isr_latency[:3]]
    assert sum(r["stim_to_isr_ns"] == "" for r in rows) == 16          # every 50th stimulus missed
    table = pq.read_table(run.path / "samples.parquet")
    assert table.column("stim_to_task_ticks").to_pylist() == p.task_latency.tolist()
    assert table.column("stimulus_tick").to_pylist() == p.stim_tick.tolist()
    assert table.schema.metadata[b"hilat.ts_hz"] == b"50000000.0"


def test_vcd_timescale_choice():
    assert export.vcd_timescale(50e6)[0::2] == ("10 ns", 2)
    assert export.vcd_timescale(100e6)[0::2] == ("10 ns", 1)
    assert export.vcd_timescale(125e6)[0::2] == ("1 ns", 8)
    assert export.vcd_timescale(1e6)[0::2] == ("1 us", 1)
    scale, _, per_tick = export.vcd_timescale(150e6)      # 6.666.. ns: no exact unit, fs with rounding
    assert scale == "1 fs" and per_tick == pytest.approx(6666666.667, rel=1e-9)


def test_vcd_is_read_back_edge_for_edge(run, tmp_path):
    path = tmp_path / "e.vcd"
    n = export.write_vcd(run, path)
    assert n == len(run.ticks)
    text = path.read_text()
    header, _, body = text.partition("$enddefinitions $end\n")
    assert "$timescale 10 ns $end" in header and header.count("$var wire 1 ") == 3
    times = [int(line[1:]) for line in body.splitlines() if line.startswith("#")]
    assert times == sorted(times) and len(times) == len(set(times))
    vcd = vcdvcd.VCDVCD(str(path))
    t0 = int(run.ticks[0])
    for ch, name in ((0, "stim0"), (2, "isr"), (3, "task")):
        sel = run.chans == ch
        expect = [(int(t - t0) * 2, str(int(lv))) for t, lv in zip(run.ticks[sel], run.levels[sel])]
        # Every channel's first edge is a rise, so its initial value (dumped at #0) is 0.
        assert vcd[f"hilat.{name}"].tv == [(0, "0")] + expect, name


def test_vcd_initial_level_is_before_the_first_edge(tmp_path):
    # An active-low DUT pin whose first edge falls: it was high before.
    edges = dut_edges([1000], [50], [140]) + [(900, 4, 0), (1500, 4, 1)]
    r = load_run(write_run(tmp_path / "r", sorted(edges)))
    path = tmp_path / "i.vcd"
    export.write_vcd(r, path)
    tv = vcdvcd.VCDVCD(str(path))["hilat.spare"].tv
    assert tv == [(0, "1"), (0, "0"), (1200, "1")]


def test_export_needs_a_format(run, caplog, capsys):
    with pytest.raises(SystemExit) as e:
        main(["export", str(run.path)])
    assert e.value.code == 2 and "--csv, --parquet, --hlog and/or --vcd" in capsys.readouterr().err


def test_samples_of_an_empty_run(tmp_path):
    r = load_run(write_run(tmp_path / "empty", []))
    export.write_csv(r, tmp_path / "s.csv")
    assert open(tmp_path / "s.csv").read().startswith("index,stimulus_tick,time_s,stim_to_isr_ticks")
    assert export.write_vcd(r, tmp_path / "e.vcd") == 0
    assert analysis.MISSING == -1 and np.array_equal(export.sample_columns(r)["index"], [])


def test_hlog_export_holds_every_latency_per_interval(run, tmp_path):
    from hilat import hdr

    path = tmp_path / "isr.hlog"
    assert main(["export", str(run.path), "--hlog", str(path), "--interval", "10ms"]) == 0
    log = hdr.read_hlog(path)
    p = run.pairing
    ok = p.isr_latency != analysis.MISSING
    t = (p.stim_tick - p.stim_tick[0]) / run.ts_hz
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
