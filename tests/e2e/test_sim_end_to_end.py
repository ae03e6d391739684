"""End to end in simulation: gateware, firmware, UART-over-TCP, decoder, pairing.

The simulated DUT writes every latency it injects; the rig must measure exactly those, to the tick.
"""


import numpy as np
from hilat.capture import Capture, CaptureSettings, StimulusSettings
from hilat.cli import main

from targets import sim

N_STIMULI = 2000


def test_measured_equals_injected(sim_dir, tmp_path):
    dut_log = tmp_path / "injected.csv"
    # More masked windows and misses than the default, so both are exercised within 2000 stimuli.
    dut = {"seed": 7, "mask_per1024": 40, "miss_per1024": 12}
    settings = CaptureSettings(count=N_STIMULI, out_dir=tmp_path / "runs", progress=False, label="e2e",
                               stimulus=StimulusSettings(mode="dither", period=5000, jitter=1000, seed=3))
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args=dut, dut_log=dut_log) as rig:
        assert main(["info", rig.url]) == 0
        capture = Capture(rig.url, settings).run()
    assert capture.error is None and not capture.interrupted
    injected = sim.read_dut_log(dut_log)
    pairing = capture.pairing()
    n = len(pairing.stim_tick)
    assert n == N_STIMULI
    # The DUT saw exactly the stimuli the rig recorded (none while busy with a response).
    assert len(injected) == N_STIMULI and not (injected[:, 1] == 2).any()
    missed = injected[:, 1] == 1
    assert 5 <= missed.sum() < 100 and (injected[~missed, 2] > 400).sum() >= 20
    np.testing.assert_array_equal(pairing.isr_latency[missed], -1)
    np.testing.assert_array_equal(pairing.task_latency[missed], -1)
    np.testing.assert_array_equal(pairing.isr_latency[~missed], injected[~missed, 2])
    np.testing.assert_array_equal(pairing.task_latency[~missed], injected[~missed, 3])
    np.testing.assert_array_equal(pairing.tag_in_window[~missed], injected[~missed, 4])
    # Stimulus intervals are the dither's: within [P-J, P+J].
    intervals = np.diff(pairing.stim_tick)
    assert intervals.min() >= 4000 and intervals.max() <= 6000
    # Nothing was lost anywhere on the way.
    counters = capture.status
    assert counters.overflow == 0 and not any(counters.dropped)
    decoder = (capture.run_dir / "meta.json").read_text()
    assert '"lost": 0' in decoder and '"corrupt": 0' in decoder
    assert counters.records_sent == len(capture.records)
    summary = (capture.run_dir / "summary.txt").read_text()
    assert f"{N_STIMULI} stimuli" in summary and "stimulus -> ISR entry" in summary
