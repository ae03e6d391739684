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
