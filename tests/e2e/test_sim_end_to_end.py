"""End to end in simulation: gateware, firmware, UART-over-TCP, decoder, pairing.

The simulated DUT writes every latency it injects; the rig must measure exactly those, to the tick.
"""


import json

import numpy as np
import pytest
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.cli import main

from targets import sim

N_STIMULI = 2000


def test_measured_equals_injected(sim_dir, tmp_path, capsys):
    dut_log = tmp_path / "injected.csv"
    # More masked windows and misses than the default, so both are exercised within 2000 stimuli.
    dut = {"seed": 7, "mask_per1024": 40, "miss_per1024": 12}
    settings = CaptureSettings(count=N_STIMULI, out_dir=tmp_path / "runs", progress=False, label="e2e",
                               stimulus=StimulusSettings(mode="dither", period=5000, jitter=1000, seed=3))
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args=dut, dut_log=dut_log) as rig:
        assert main(["info", rig.url]) == 0
        # The firmware sends soc.h's UART rate in IDENTIFY: 0 on the simulator, whose UART is TCP.
        assert "  link       no serial line (the simulator's UART is bridged to TCP)\n" in capsys.readouterr().out
        capture = Capture(rig.url, settings).run()
    assert capture.error is None and not capture.interrupted
    injected = sim.read_dut_log(dut_log)
    pairing = capture.pairing()
    n = len(pairing.stim_mu)
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
    intervals = np.diff(pairing.stim_mu)
    assert intervals.min() >= 4000 and intervals.max() <= 6000
    # Nothing was lost anywhere on the way.
    counters = capture.status
    assert counters.overflow == 0 and not any(counters.dropped)
    decoder = (capture.run_dir / "meta.json").read_text()
    assert '"lost": 0' in decoder and '"corrupt": 0' in decoder
    assert counters.records_sent == capture.records_received
    # The stimulus generator's own count: the pulses the DUT saw, in the final STATUS and meta.json
    # (channel 1 never started: HELLO zeroed it).
    assert counters.fired == [len(injected), 0]
    assert json.loads(decoder)["counters"]["rig_stimuli_fired"] == [N_STIMULI, 0]
    summary = (capture.run_dir / "summary.txt").read_text()
    assert f"{N_STIMULI} stimuli" in summary and "stimulus -> ISR entry" in summary


def test_roles_on_other_pins_and_an_active_low_isr(sim_dir, tmp_path):
    """The DUT wired differently (ISR on the task pin, active-low; task on the ISR pin): with
    --role isr=in1 --role task=in0 --active-low in1 the rig still measures exactly what was injected;
    with the default roles it would not."""
    dut_log = tmp_path / "injected.csv"
    dut = {"seed": 11, "isr_active_low": 1, "swap_isr_task": 1, "miss_per1024": 12}
    roles = {"isr": "in1", "task": "in0"}
    settings = CaptureSettings(count=400, out_dir=tmp_path / "runs", progress=False, label="roles",
                               roles=roles, active_low=["in1"],
                               stimulus=StimulusSettings(mode="dither", period=5000, jitter=1000, seed=5))
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args=dut, dut_log=dut_log) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error is None
    injected = sim.read_dut_log(dut_log)
    pairing = capture.pairing()
    assert len(pairing) == len(injected) == 400
    missed = injected[:, 1] == 1
    assert missed.any()
    np.testing.assert_array_equal(pairing.isr_latency[~missed], injected[~missed, 2])
    np.testing.assert_array_equal(pairing.task_latency[~missed], injected[~missed, 3])
    np.testing.assert_array_equal(pairing.isr_latency[missed], -1)
    assert (pairing.isr_duration[~missed] == 20).all()       # the time the pin stays low
    # The run directory keeps the roles: a report of it pairs the same way.
    from hilat.rundir.reader import load_run

    run = load_run(capture.run_dir)
    np.testing.assert_array_equal(run.pairing.isr_latency, pairing.isr_latency)
    # The same edges with the default roles give other numbers (the check can fail).
    import dataclasses

    default = dataclasses.replace(run.roles, isr=2, task=3, active_low=())
    from hilat import analysis

    wrong = analysis.pair(run.ticks, run.chans, run.levels, default, end_mu=run.end_mu)
    assert not np.array_equal(wrong.isr_latency[~missed], injected[~missed, 2])


@pytest.mark.parametrize("chunk_records", [1, 7, 1000])
def test_streaming_path_is_exact_at_any_chunk_boundary(sim_dir, tmp_path, chunk_records):
    """The capture's own streaming pairing (what it writes to samples/KIND.bin, summary.json and
    the .hlog) equals what the DUT injected, to the tick, whether records reach it one at a time (every
    response in a later chunk than its stimulus), in chunks of 7, or of 1000."""
    from hilat.rundir.layout import EDGE_DTYPE, EDGES_MAGIC
    from hilat.rundir.stores import store_count

    dut_log = tmp_path / "injected.csv"
    settings = CaptureSettings(count=300, out_dir=tmp_path / "runs", progress=False, label="chunks",
                               chunk_records=chunk_records, hlog_interval_s=0.001,
                               stimulus=StimulusSettings(mode="dither", period=5000, jitter=1000, seed=9))
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 5, "miss_per1024": 20},
                          dut_log=dut_log) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error is None
    injected = sim.read_dut_log(dut_log)
    missed = injected[:, 1] == 1
    assert len(injected) == 300 and missed.any()
    run = capture.load()
    stored = {kind: np.concatenate(list(run.iter_samples(kind))) for kind in ("stim_to_isr", "stim_to_task")}
    for kind, column in (("stim_to_isr", 2), ("stim_to_task", 3)):
        values = stored[kind]["value_mu"]
        assert len(values) == 300
        np.testing.assert_array_equal(values[missed], -1)
        np.testing.assert_array_equal(values[~missed], injected[~missed, column])
    # Every stored kind equals the exact pairing recomputed from edges.bin.
    found = run.measurements
    for kind in run.kind_titles:
        items = np.concatenate(list(run.iter_samples(kind)))
        np.testing.assert_array_equal(items["value_mu"], found.series[kind].values)
        np.testing.assert_array_equal(items["start_mu"], found.series[kind].start_mu)
    summary = json.loads((capture.run_dir / "summary.json").read_text())["runs"][0]
    isr = summary["subsets"]["all"]["stim_to_isr"]
    assert isr["starts"] == 300 and isr["misses"] == int(missed.sum())
    assert isr["mu"]["max"] == injected[~missed, 2].max() and isr["mu"]["min"] == injected[~missed, 2].min()
    # The rolling .hlog holds every ISR sample (in ns), tagged by kind.
    from hilat import hdr

    log = hdr.read_hlog(capture.run_dir / "hlog" / "capture.hlog")
    merged = log.merged("stim_to_isr")
    assert merged.total_count == int((~missed).sum()) and len(log.intervals) > 3
    assert merged.max == merged.highest_equivalent_value(injected[~missed, 2].max() * 20)
    assert store_count(capture.run_dir / "edges.bin", EDGES_MAGIC, EDGE_DTYPE) == run.edge_count
