"""End to end in simulation with a TDC on every input (docs/tdc.md, "Simulation"): the simulated rig's
inputs run into the model of the i5's carry line (stretched to the simulator's 20 ns tick), the DUT
model's edges each at a known place in their tick (targets/dut/hilat_edge_phase.v logs it), and the
host places every edge at its code's bin centre (the predicted table here: no calibration stored).

Ground truth: a response the DUT logs L ticks after its stimulus, at phase p ps into its tick, is
L * tick + p after the stimulus edge (the rig's own pin, on the tick). The TDC says which of the
line's bins the response's age at the closing clock edge (tick - p) fell in: every measured latency
must be L ticks plus the position of exactly that bin (the bin the injected time lies in, found
here from the tap table alone), to the unit, and within that bin of the injected time in ps.
"""

import json

import numpy as np
import pytest
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.analysis import Subticks

from targets import sim

pytestmark = pytest.mark.slow   # the TDC simulator build

N_STIMULI = 300
TICK_PS = 10**12 // sim.TS_CLK_FREQ


@pytest.fixture(scope="module")
def tdc_sim_dir():
    return sim.build(tdc=True)


def expected_code(taps, phase_ps):
    """(ticks late, code) of a change ``phase_ps`` into its tick through the model line ``taps``: the
    taps it passed before the tick's closing clock edge, or, when none, before the next one."""
    age = TICK_PS - phase_ps
    passed = int((taps < age).sum())
    if passed:
        return 0, min(passed, 255)
    return 1, min(int((taps < age + TICK_PS).sum()), 255)


def rising_phases(changes, input_index):
    """The phases of input ``input_index``'s rising changes, in order (hilat_edge_phase's log)."""
    rows = changes[(changes[:, 0] == input_index) & (changes[:, 1] == 1)]
    return rows[:, 2]


def test_tdc_latencies_exact_to_the_bin(tdc_sim_dir, tmp_path):
    dut_log, phase_log = tmp_path / "injected.csv", tmp_path / "phases.csv"
    dut = {"seed": 11, "isr_spread_bits": 6, "resched_spread_bits": 5, "miss_per1024": 12}
    settings = CaptureSettings(count=N_STIMULI, out_dir=tmp_path / "runs", progress=False, label="tdc",
                               stimulus=StimulusSettings(mode="dither", period=3000, jitter=500, seed=5))
    with sim.SimulatedRig(tdc_sim_dir, tmp_path / "sim", dut_args=dut, dut_log=dut_log,
                          edge_phase_seed=21, edge_phase_log=phase_log) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error is None and not capture.interrupted
    assert capture.status.overflow == 0 and not any(capture.status.dropped)
    injected = sim.read_dut_log(dut_log)
    changes = sim.read_edge_phase_log(phase_log)
    missed = injected[:, 1] == 1
    assert len(injected) == N_STIMULI and 1 <= missed.sum() < 30
    meta = json.loads((capture.run_dir / "meta.json").read_text())
    unit = Subticks.from_meta(meta["time_unit"])
    U = unit.units_per_tick
    assert U >= 1024 and unit.tdc_inputs == sim.N_INPUTS
    taps = np.array(sim.tdc_taps_ps())
    pairing = capture.pairing()
    np.testing.assert_array_equal(pairing.isr_latency[missed], -1)
    checked = 0
    for kind, column, input_index in (("isr", 2, 0), ("task", 3, 1)):
        phases = rising_phases(changes, input_index)
        assert len(phases) == int((~missed).sum())
        measured = getattr(pairing, f"{kind}_latency")[~missed]
        expected = []
        for ticks, phase in zip(injected[~missed, column], phases):
            late, code = expected_code(taps, int(phase))
            expected.append((int(ticks) + late) * U + unit.positions[input_index][code])
        np.testing.assert_array_equal(measured, expected)
        # In ps: within the bin of the injected time (the widest bin, plus a unit's rounding).
        injected_ps = injected[~missed, column] * TICK_PS + phases
        error_ps = measured * TICK_PS / U - injected_ps
        widest = float(np.diff(np.sort(taps)).max())
        assert np.abs(error_ps).max() <= widest / 2 + TICK_PS / U
        # Every place in the tick occurs: the codes span the line.
        assert np.ptp(measured % U) > U * 3 // 4
        checked += len(measured)
    assert checked > 1.9 * N_STIMULI
    # The stimuli are on ticks.
    assert (pairing.stim_mu % U == 0).all()
    # The run says where its positions came from: the predicted table, for every TDC input.
    assert [p["placement"] for p in unit.placement] == ["predicted"] * sim.N_INPUTS


def test_calibrated_bins_place_the_loopback(tdc_sim_dir, tmp_path, monkeypatch):
    """``hilat calibrate resolution`` on the TDC rig (code density of the unrelated source on SPARE,
    stored for that input only), then a capture of the loopback jumper STIM0 -> SPARE (the ISR role
    moved to SPARE): SPARE's edges stand at the measured bins' centres, the other inputs at the
    predicted ones, and every latency is D ticks plus the measured position of the bin the injected
    edge fell in, to the unit; in ps, within that bin plus the calibration's own error."""
    from hilat import api

    monkeypatch.setenv("HILAT_CALIBRATION_DIR", str(tmp_path / "calibration"))
    edges, source_ticks = 4000, 1001     # the source slow enough for the simulated link
    with sim.SimulatedRig(tdc_sim_dir, tmp_path / "sim-source", tdc_source_ticks=source_ticks) as rig:
        calibration = api.Rig(rig.url).calibrate_resolution(edges=edges)
    result = calibration.result
    taps = np.sort(np.array(sim.tdc_taps_ps()))
    mean_bin_ps = float(np.diff(taps).mean())
    assert sum(result["counts"]) >= edges
    # The measured mean bin (LSB: the tick over the codes it spans) is the line's, to within 5 %.
    assert abs(TICK_PS / result["span"] - mean_bin_ps) < 0.05 * mean_bin_ps

    delay, phase_log = 5, tmp_path / "phases.csv"
    settings = CaptureSettings(count=200, out_dir=tmp_path / "runs", progress=False, label="tdc-loopback",
                               roles={"isr": "in2"},     # SPARE
                               calibration_dir=tmp_path / "calibration",
                               stimulus=StimulusSettings(mode="dither", period=4000, jitter=400, seed=2))
    with sim.SimulatedRig(tdc_sim_dir, tmp_path / "sim", dut_args={"loopback": 1, "loopback_delay": delay,
                                                                   "miss_per1024": 0},
                          edge_phase_seed=5, edge_phase_log=phase_log) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error is None and capture.status.overflow == 0
    unit = Subticks.from_meta(json.loads((capture.run_dir / "meta.json").read_text())["time_unit"])
    U = unit.units_per_tick
    assert [p["placement"] for p in unit.placement] == ["predicted", "predicted", "measured", "predicted"]
    phases = rising_phases(sim.read_edge_phase_log(phase_log), 2)
    measured = capture.pairing().isr_latency
    assert len(measured) == 200 and len(phases) >= 200 and (measured >= 0).all()
    expected = []
    for phase in phases[:200]:
        late, code = expected_code(np.array(sim.tdc_taps_ps()), int(phase))
        expected.append((delay + late) * U + unit.positions[2][code])
    np.testing.assert_array_equal(measured, expected)
    error_ps = measured * TICK_PS / U - (delay * TICK_PS + phases[:200])
    # A bin's half width, plus the centres' error from code density: at most a few sigma of the
    # cumulative count's, tick * sqrt(F (1 - F) / N) <= tick / (2 sqrt(N)).
    bound = np.diff(taps).max() / 2 + 4 * TICK_PS / (2 * np.sqrt(edges))
    assert np.abs(error_ps).max() <= bound, (np.abs(error_ps).max(), bound)
