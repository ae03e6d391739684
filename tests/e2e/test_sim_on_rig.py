"""On-rig end to end in simulation: the simulated rig with the measurement engine (gateware pairing and
binning, firmware ENGINE_* commands), `hilat capture --on-rig`, the summary from the rig's bins.

The DUT writes every latency it injects; the summary must state exactly their count, min, max, mean
and misses, and their HdrHistogram's median and percentiles, at a stimulus rate the raw path cannot carry."""

import json
import subprocess
import sys

import numpy as np
import pytest
from hilat.cli import main
from hilat.engine import RigHistograms
from hilat.hdr import HdrHistogram
from hilat.statistics.percentiles import PERCENTILES, percentile_label, samples_needed

from targets import sim

N_STIMULI = 20_000
PERIOD = 200  # ticks: 250,000 stimuli/s at 50 MHz, about 1.5 M edges/s, far beyond the UART
# A DUT that answers well within the period: the ISR 5..36 ticks after the stimulus, the task 4..19 after it.
DUT = {"seed": 5, "isr_base": 5, "isr_spread_bits": 5, "isr_width": 3, "resched_base": 4, "resched_spread_bits": 4,
       "task_width": 3, "tag_per1024": 128, "miss_per1024": 12, "mask_per1024": 0}


@pytest.fixture(scope="module")
def engine_sim_dir():
    return sim.build(with_engine=True)


@pytest.mark.parametrize("raw", [False, True])
def test_on_rig_summary_is_the_injected_latencies(engine_sim_dir, tmp_path, raw):
    dut_log = tmp_path / "injected.csv"
    with sim.SimulatedRig(engine_sim_dir, tmp_path / "sim", dut_args=DUT, dut_log=dut_log) as rig:
        code = main(["capture", rig.url, "--on-rig", *(["--raw"] if raw else []), "--count", str(N_STIMULI),
                     "--mode", "periodic", "--period", str(PERIOD), "--jitter", "0", "--out", str(tmp_path / "runs"),
                     "--no-progress", "--no-calibration", "--interval-shift", "18"])
    assert code == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["results"]["on_rig"] == "complete" and meta["engine"]["problems"] == []
    assert meta["results"]["raw"] == ("partial" if raw else "none")  # the link cannot carry these edges
    injected = sim.read_dut_log(dut_log)
    assert len(injected) == N_STIMULI
    missed = injected[:, 1] == 1
    assert 100 < missed.sum() < 500
    run = json.loads((run_dir / "summary.json").read_text())["runs"][0]
    assert run["stimuli"] == N_STIMULI
    values = {"stim_to_isr": injected[:, 2], "stim_to_task": injected[:, 3],
              "isr_to_task": injected[:, 3] - injected[:, 2]}
    for kind, v in values.items():
        for subset, keep in (("all", ~missed), ("untagged", ~missed & (injected[:, 4] == 0))):
            x = v[keep].astype(np.int64)
            h = HdrHistogram(1, 2**24 - 1, 2)
            h.record(x)
            row = run["subsets"][subset][kind]
            ticks = row["mu"]
            assert (row["count"], ticks["min"], ticks["max"]) == (len(x), x.min(), x.max()), (kind, subset)
            assert ticks["mean"] == pytest.approx(x.mean(), rel=1e-12)
            assert ticks["median"] == h.value_at_percentile(50)
            for q in PERCENTILES:
                want = min(h.value_at_percentile(100 * q), x.max()) if len(x) >= samples_needed(q) else None
                assert ticks["percentiles"][percentile_label(q)] == want, (kind, subset, q)
        assert run["subsets"]["all"][kind]["misses"] == missed.sum()
        assert run["tagged"][kind] == int(((injected[:, 4] == 1) & ~missed).sum())


def test_live_view_shows_the_rigs_intervals(engine_sim_dir, tmp_path):
    """Without raw edges the live view (plain lines off a terminal) shows the engine's intervals as they
    come; the last line, after the flush, has every sample the summary counts, and its maximum."""
    out = tmp_path / "runs"
    with sim.SimulatedRig(engine_sim_dir, tmp_path / "sim", dut_args={**DUT, "seed": 9}) as rig:
        done = subprocess.run([sys.executable, "-m", "hilat", "capture", rig.url, "--on-rig", "--count", "5000",
                               "--mode", "periodic", "--period", str(PERIOD), "--jitter", "0", "--out", str(out),
                               "--no-calibration", "--interval-shift", "18"],
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    progress = [line for line in lines if line.startswith("T: ")]
    (run_dir,) = out.iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    run = json.loads((run_dir / "summary.json").read_text())["runs"][0]
    assert meta["results"]["on_rig"] == "complete" and meta["engine"]["intervals"] > 3
    assert progress and f" I: {meta['engine']['intervals']} intervals " in progress[-1], done.stderr
    tick_us = 1e6 / meta["rig"]["ts_hz"]
    for kind in ("stim_to_isr", "stim_to_task", "isr_to_task"):
        row = run["subsets"]["all"][kind]
        top = HdrHistogram(1, 2**24 - 1, 2).highest_equivalent_value(row["mu"]["max"])
        assert f"{kind} n {row['count']} " in progress[-1] and f"Max {top * tick_us:.3f} us" in progress[-1]
        assert any(line.startswith(f"new max {kind}: {top * tick_us:.3f} us") for line in lines)


def test_demo_on_rig_builds_the_engine_and_reports_from_its_bins(engine_sim_dir, tmp_path):
    """`hilat demo --on-rig` runs against the simulated rig with the engine (the same cached build as
    `engine_sim_dir`) and its run holds the rig's histograms, complete."""
    argv = ["demo", "--on-rig", "--count", "2000", "--period", str(PERIOD), "--jitter", "0",
            "--out", str(tmp_path / "runs"), "--label", "onrig", "--no-progress"]
    for key, value in DUT.items():
        argv += ["--dut", f"{key}={value}"]
    assert main(argv) == 0
    (run_dir,) = (tmp_path / "runs").glob("*-onrig")
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["results"]["on_rig"] == "complete"
    assert (run_dir / "hlog" / "rig.hlog").stat().st_size > 0
    injected = sim.read_dut_log(run_dir / "dut_injected.csv")
    answered = injected[:, 1] == 0
    rig = RigHistograms.from_json(json.loads((run_dir / "engine.json").read_text()))
    assert rig.exact("stim_to_isr")["count"] == int(answered.sum()) > 1900
    assert int(rig.counts("stim_to_isr").sum()) == int(answered.sum())
