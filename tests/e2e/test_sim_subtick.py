"""End to end in simulation with sub-tick timestamps (docs/subtick.md): the rig samples each input 4
times a tick (IDDRX2F on the edge clock, ts its half through CLKDIVF, as on a board), and the DUT
model runs on a clock 4 times faster than ts, so it answers with delays in quarter ticks.

The DUT's clock is half a sub-tick off the rig's sampling instants (no edge of the DUT's falls on a
sampling instant, so nothing depends on the simulator's order of simultaneous events). A response
the model logs as L of its cycles leaves it L - 1/2 sub-ticks after the stimulus edge: its cycle
that sees the stimulus began half a sub-tick before it. The rig reports the sub-tick bin the edge
fell in by its lower end, L - 1; every latency must be exactly that.
"""

import json

import numpy as np
import pytest
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.cli import main

from targets import sim

pytestmark = pytest.mark.slow   # the sub-tick simulator build

S = 4
N_STIMULI = 400


@pytest.fixture(scope="module")
def subtick_sim_dir():
    return sim.build(samples_per_tick=S)


def test_sub_tick_latencies_measured_exactly(subtick_sim_dir, tmp_path, capsys):
    dut_log = tmp_path / "injected.csv"
    # A spread of 128 sub-ticks puts the responses at every position of the tick.
    dut = {"seed": 7, "isr_spread_bits": 7, "resched_spread_bits": 6, "mask_per1024": 40, "miss_per1024": 12}
    settings = CaptureSettings(count=N_STIMULI, out_dir=tmp_path / "runs", progress=False, label="subtick",
                               stimulus=StimulusSettings(mode="dither", period=2000, jitter=500, seed=3))
    with sim.SimulatedRig(subtick_sim_dir, tmp_path / "sim", dut_args=dut, dut_log=dut_log) as rig:
        assert main(["info", rig.url]) == 0
        capture = Capture(rig.url, settings).run()
    info = capsys.readouterr().out
    assert "sampling   each input 4 times a tick" in info and "5 ns" in info
    assert capture.error is None and not capture.interrupted
    injected = sim.read_dut_log(dut_log)
    pairing = capture.pairing()
    assert len(pairing) == N_STIMULI and len(injected) == N_STIMULI and not (injected[:, 1] == 2).any()
    missed = injected[:, 1] == 1
    assert 1 <= missed.sum() < 40
    np.testing.assert_array_equal(pairing.isr_latency[missed], -1)
    np.testing.assert_array_equal(pairing.isr_latency[~missed], injected[~missed, 2] - 1)
    np.testing.assert_array_equal(pairing.task_latency[~missed], injected[~missed, 3] - 1)
    np.testing.assert_array_equal(pairing.tag_in_window[~missed], injected[~missed, 4])
    # Every position in the tick occurs, for the ISR and the task alike.
    for latency in (pairing.isr_latency[~missed], pairing.task_latency[~missed]):
        assert set(np.unique(latency % S)) == set(range(S))
    # Stimuli on ticks: their times are whole ticks in sub-ticks, the dither's intervals.
    assert (pairing.stim_mu % S == 0).all()
    intervals = np.diff(pairing.stim_mu) // S
    assert intervals.min() >= 1500 and intervals.max() <= 2500
    # Nothing lost; the report in ns from 5 ns sub-ticks.
    assert capture.status.overflow == 0 and not any(capture.status.dropped)
    assert capture.status.records_sent == capture.records_received
    doc = json.loads((capture.run_dir / "summary.json").read_text())["runs"][0]
    row = doc["subsets"]["all"]["stim_to_isr"]
    assert row["ns"]["min"] == pytest.approx(5.0 * (injected[~missed, 2] - 1).min())
    assert row["ns"]["max"] == pytest.approx(5.0 * (injected[~missed, 2] - 1).max())
    check_exports_name_the_unit(capture.run_dir, injected, missed, tmp_path)


def check_exports_name_the_unit(run_dir, injected, missed, tmp_path):
    """The done-when of the named unit (docs/analysis.md, "The run's unit"): this four-sample run's
    samples exported to CSV, Parquet and JSON and read back with the readers a user has, every value's
    unit in its column's name (``_mu``, ``_ns``, ``_s``) or in the file's metadata, and converting
    with that unit gives the injected latencies in ns exactly: L - 1 of the DUT's cycles (a quarter of
    the rig's tick, from meta.json's clock, not from the export), as the module docstring derives."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    out = {fmt: tmp_path / f"samples.{fmt}" for fmt in ("csv", "parquet", "json")}
    assert main(["export", str(run_dir)] + [a for fmt, path in out.items() for a in (f"--{fmt}", str(path))]) == 0
    meta = json.loads((run_dir / "meta.json").read_text())
    dut_cycle_ns = 1e9 / meta["rig"]["ts_hz"] / S                                 # 5 ns at ts 50 MHz
    want_isr_ns = (injected[~missed, 2] - 1) * dut_cycle_ns
    want_task_ns = (injected[~missed, 3] - 1) * dut_cycle_ns
    columns = ["kind", "index", "start_mu", "time_s", "value_mu", "value_ns", "mu_ns", "tag_at_start",
               "tag_in_window", "duplicates", "unknown"]

    def check(kinds, value_mu, value_ns, mu_ns, unit, how):
        isr, task = kinds == "stim_to_isr", kinds == "stim_to_task"
        for sel, want in ((isr, want_isr_ns), (task, want_task_ns)):
            answered = np.asarray(value_mu)[sel] != -1
            assert answered.sum() == len(want), how
            np.testing.assert_array_equal(np.asarray(value_mu)[sel][answered] * mu_ns, want, err_msg=how)
            np.testing.assert_array_equal(np.asarray(value_ns)[sel][answered], want, err_msg=how)
        assert unit["name"] == "mu" and unit["mu_per_tick"] == S and not unit["calibrated"], how
        assert unit["mu_ns"] == mu_ns == dut_cycle_ns and unit["tick_hz"] == meta["rig"]["ts_hz"], how

    # CSV: the unit in each column's name and in the mu_ns column (pandas' and pyarrow's default readers).
    table = pacsv.read_csv(out["csv"])
    assert table.column_names == columns
    (mu_ns,) = set(table.column("mu_ns").to_pylist())
    check(np.array(table.column("kind").to_pylist()), table.column("value_mu").to_numpy(),
          table.column("value_ns").to_numpy(zero_copy_only=False), mu_ns, meta["unit"], "csv")
    # Parquet: the column names, and the whole unit in the schema's metadata.
    table = pq.read_table(out["parquet"])
    assert table.column_names == columns
    unit = json.loads(table.schema.metadata[b"hilat.unit"])
    check(np.array(table.column("kind").to_pylist()), table.column("value_mu").to_numpy(),
          table.column("value_ns").to_numpy(zero_copy_only=False), unit["mu_ns"], unit, "parquet")
    # JSON: the unit as a field beside the columns and rows.
    doc = json.loads(out["json"].read_text())
    assert doc["columns"] == columns and doc["format"] == "hilat-samples"
    rows = {c: [r[i] for r in doc["data"]] for i, c in enumerate(columns)}
    check(np.array(rows["kind"]), np.array(rows["value_mu"]),
          np.array([np.nan if v is None else v for v in rows["value_ns"]]), doc["unit"]["mu_ns"], doc["unit"], "json")
    try:
        import pandas as pd
    except ImportError:     # pandas is not a dependency of hilat: pyarrow's readers above stand for it
        return
    frame = pd.read_csv(out["csv"])
    isr = frame[(frame.kind == "stim_to_isr") & (frame.value_mu != -1)]
    np.testing.assert_array_equal(isr.value_mu * isr.mu_ns, want_isr_ns)
    frame = pd.read_parquet(out["parquet"])
    assert json.loads(pq.read_schema(out["parquet"]).metadata[b"hilat.unit"])["mu_ns"] == frame.mu_ns.iloc[0]
    frame = pd.DataFrame(doc["data"], columns=doc["columns"])
    isr = frame[(frame.kind == "stim_to_isr") & (frame.value_mu != -1)]
    np.testing.assert_array_equal(isr.value_mu * doc["unit"]["mu_ns"], want_isr_ns)


def test_loopback_offset_in_sub_ticks_recovered_and_applied(subtick_sim_dir, tmp_path, capsys):
    """The loopback jumper delayed by 30..33 of the DUT clock's cycles (quarter ticks): the rig sees
    its copies 29..32 sub-ticks after the stimulus (as above, the bin's lower end), so the offset is
    a whole number of sub-ticks, 7.25..8 ticks, the spread the jitter's, and a later capture
    subtracts exactly that many sub-ticks."""
    cal_dir = tmp_path / "cal"
    dut_log = tmp_path / "injected.csv"
    dut = {"loopback": 1, "loopback_delay": 30, "loopback_jitter": 3, "seed": 5}
    with sim.SimulatedRig(subtick_sim_dir, tmp_path / "sim", dut_args=dut, dut_log=dut_log) as rig:
        assert main(["calibrate", "loopback", rig.url, "--count", "400", "--period", "2000", "--jitter", "500",
                     "--width", "50", "--calibration-dir", str(cal_dir), "--json"]) == 0
        loop = json.loads(capsys.readouterr().out)["loopback"]
        calibration_pulses = len(sim.read_dut_log(dut_log))
        assert main(["capture", rig.url, "--count", "200", "--period", "2000", "--jitter", "500", "--out",
                     str(tmp_path / "runs"), "--no-progress", "--calibration-dir", str(cal_dir)]) == 0
    assert loop["samples_per_tick"] == S and loop["n"] == 400 and loop["missing"] == 0
    assert loop["min_ticks"] == 29 / S and loop["max_ticks"] == 32 / S
    assert set(loop["histogram"]) == {"7.25", "7.5", "7.75", "8"}
    assert sum(loop["histogram"].values()) == 400 and min(loop["histogram"].values()) > 50
    offset_subticks = loop["offset_ticks"] * S
    assert offset_subticks in (29, 30, 31, 32)

    from hilat.rundir.reader import load_run

    run = load_run(next((tmp_path / "runs").iterdir()))
    assert run.offset_mu == offset_subticks
    assert any(f"rig offset: {loop['offset_ticks']:g} ticks" in line for line in run.meta["calibration"]["statement"])
    injected = sim.read_dut_log(dut_log)[calibration_pulses:]
    isr = np.concatenate(list(run.iter_samples("stim_to_isr")))["value_mu"]
    hit = injected[:, 1] == 0
    assert len(isr) == len(injected) == 200
    np.testing.assert_array_equal(isr[hit], injected[hit, 2] - 1 - offset_subticks)


# The edge clock held high 6 of its 10 ns: its falling-edge samples move from 5 and 15 ns of the
# 20 ns tick to 6 and 16, so the bins are 6, 4, 6 and 4 ns wide (0.3, 0.2, 0.3, 0.2 tick).
EDGE_CLOCK_HIGH_PS = 6000
UNEVEN_BIN_EDGES_NS = (0, 6, 10, 16, 20)


def test_calibrate_resolution_recovers_uneven_bins_and_captures_use_their_centres(subtick_sim_dir, tmp_path, capsys):
    """hilat calibrate resolution on a rig whose bins are uneven by construction, with edges from a
    source of its own clock: each width within 4 of its stated sigma of the injected one. A later
    capture places every DUT edge at its bin's measured centre, and its report says so."""
    cal_dir = tmp_path / "cal"
    with sim.SimulatedRig(subtick_sim_dir, tmp_path / "sim-cal", edge_clock_high_ps=EDGE_CLOCK_HIGH_PS,
                          async_source_cycles=2223) as rig:
        assert main(["calibrate", "resolution", rig.url, "--edges", "4000", "--calibration-dir", str(cal_dir),
                     "--json"]) == 0
        res = json.loads(capsys.readouterr().out)["resolution"]
    injected_widths = np.diff(UNEVEN_BIN_EDGES_NS) / 20.0
    assert res["samples_per_tick"] == S and res["edges"] >= 4000 and res["channel"] == 4
    deviation = np.abs(np.array(res["widths_ticks"]) - injected_widths)
    assert (deviation <= 4 * np.array(res["width_sigma_ticks"])).all(), (res["widths_ticks"], res["width_sigma_ticks"])
    assert max(res["width_sigma_ticks"]) < 0.01
    np.testing.assert_allclose(res["dnl"], injected_widths * S - 1, atol=0.05)

    # A capture on the same rig: the DUT's edges (2.5, 7.5, 12.5, 17.5 ns into a tick, one per bin)
    # stand at the measured centres, in 1/256 tick.
    dut_log = tmp_path / "injected.csv"
    dut = {"seed": 7, "isr_spread_bits": 7, "miss_per1024": 0, "mask_per1024": 0}
    with sim.SimulatedRig(subtick_sim_dir, tmp_path / "sim", edge_clock_high_ps=EDGE_CLOCK_HIGH_PS,
                          dut_args=dut, dut_log=dut_log) as rig:
        assert main(["capture", rig.url, "--count", "200", "--period", "2000", "--jitter", "500", "--out",
                     str(tmp_path / "runs"), "--no-progress", "--calibration-dir", str(cal_dir)]) == 0
    from hilat.rundir.reader import load_run

    run = load_run(next((tmp_path / "runs").iterdir()))
    units = S * 64
    assert run.subticks.calibrated and run.units_per_tick == units
    positions = np.round(np.array(res["centres_ticks"]) * units).astype(np.int64)
    assert run.subticks.positions == tuple(positions.tolist())
    injected = sim.read_dut_log(dut_log)
    true_ns = (injected[:, 2] - 0.5) * 5.0          # the DUT's edge after the stimulus's, as above
    ticks, phase_ns = np.divmod(true_ns, 20.0)
    bins = np.searchsorted(UNEVEN_BIN_EDGES_NS, phase_ns) - 1
    expected = ticks.astype(np.int64) * units + positions[bins]
    isr = np.concatenate(list(run.iter_samples("stim_to_isr")))["value_mu"]
    np.testing.assert_array_equal(isr, expected)
    assert set(bins.tolist()) == set(range(S))
    # Each edge is now within half a nominal bin's rounding of its true time (0.5 ns off the true
    # centre here: the DUT's edges sit 0.5 ns before each bin's middle).
    assert np.abs(isr * 20.0 / units - true_ns).max() <= 0.5 + 20.0 / units
    summary = (run.path / "summary.txt").read_text()
    assert "sub-tick bins calibrated (" in summary and "each input edge at its bin's measured centre" in summary


def test_settings_the_simulated_clocks_cannot_take_are_refused(subtick_sim_dir, tmp_path):
    with pytest.raises(ValueError, match="in steps of 250 ps"):
        sim.SimulatedRig(subtick_sim_dir, tmp_path, edge_clock_high_ps=6100)
    with pytest.raises(ValueError, match="5000 .. 9750 ps"):
        sim.SimulatedRig(subtick_sim_dir, tmp_path, edge_clock_high_ps=4000)
    with pytest.raises(SystemExit) as usage:   # a rig sampling once a tick has no such source
        main(["sim", "--async-source", "7"])
    assert usage.value.code == 2
