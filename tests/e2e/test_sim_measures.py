"""Measurement definitions end to end in simulation: two stimulus channels at once, each response
paired with its own stimulus; a capture with no stimulus at all, where the DUT paces itself. The DUT
model logs every interval it produces; the rig must measure exactly those, to the tick."""

import numpy as np
from hilat import analysis
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.cli import main
from hilat.rundir.reader import load_run

from targets import sim

M = analysis.MISSING


def test_two_stimulus_channels_each_paired_with_its_own(sim_dir, tmp_path):
    """stim0 -> ISR/task (the built-in kinds) and, at the same time, stim1 -> a second interrupt
    source's response on in2, at another rate and phase."""
    dut_log, irq2_log = tmp_path / "injected.csv", tmp_path / "irq2.csv"
    dut = {"seed": 4, "miss_per1024": 12, "irq2": 1, "irq2_log": irq2_log.resolve()}
    settings = CaptureSettings(count=400, out_dir=tmp_path / "runs", progress=False, label="two",
                               stimulus=StimulusSettings(mode="dither", period=5000, jitter=1000, seed=3),
                               also_fire=[("stim1", {"period": 7001, "jitter": 1500, "seed": 9})],
                               measures=["irq2=stim1..in2"])
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args=dut, dut_log=dut_log) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error is None
    run = load_run(capture.run_dir)
    found = run.measurements
    assert found.kinds == [k for k, _ in analysis.KINDS] + ["irq2"]
    # Source 1: the built-in kinds, exactly as injected.
    injected = sim.read_dut_log(dut_log)
    missed = injected[:, 1] == 1
    assert found.stimuli == len(injected) == 400 and missed.any()
    np.testing.assert_array_equal(found.latency("stim_to_isr")[~missed], injected[~missed, 2])
    np.testing.assert_array_equal(found.latency("stim_to_task")[~missed], injected[~missed, 3])
    np.testing.assert_array_equal(found.latency("stim_to_isr")[missed], M)
    # Source 2: every stim1 pulse the DUT saw, with its own latency (the last may have been cut off
    # by the end of the capture).
    irq2 = np.loadtxt(irq2_log, delimiter=",", dtype=np.int64, ndmin=2)
    series = found.series["irq2"]
    assert len(series) == len(irq2) > 200 and not irq2[:, 1].any()
    np.testing.assert_array_equal(series.values[:-1], irq2[:-1, 2])
    assert series.values[-1] in (irq2[-1, 2], M)
    # The two stimuli interleave: the check pairs across them, and the other stimulus gives other numbers.
    stim1 = series.start_mu
    between = np.searchsorted(found.series["stim_to_isr"].start_mu, stim1)
    assert len(np.unique(between)) > 150
    from hilat.analysis import measures

    wrong = analysis.measure(run.ticks, run.chans, run.levels, run.roles,
                             [measures.parse("irq2=stim0..in2", run.roles)], builtin=False, end_mu=run.end_mu)
    assert len(wrong.series["irq2"]) == 400 and (wrong.latency("irq2") == M).sum() > 50


def test_no_stimulus_capture_with_definitions_and_a_period(sim_dir, tmp_path, capsys):
    """The rig as a pure timestamper: the DUT sends on in0 every 3000..3255 ticks, wakes a receiver
    on in1, which runs a handler on in3. Two intervals, the send period and the handler's pulse width,
    each equal to what the DUT logged."""
    paced_log = tmp_path / "paced.csv"
    dut = {"paced_period": 3000, "paced_log": paced_log.resolve(), "tag_per1024": 0}
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args=dut) as rig:
        code = main(["capture", rig.url, "--no-stimulus", "--count", "300", "--no-progress", "--label", "paced",
                     "--out", str(tmp_path / "runs"),
                     "--measure", "send_to_recv=in0..in1", "--measure", "recv_to_handler=in1:rise..in3:rise@500",
                     "--measure", "send_period=period:in0", "--measure", "handler_width=width:in3"])
    out = capsys.readouterr().out
    assert code == 0
    assert "in0 rise -> in1 rise" in out and "period of in0 rise" in out and "stimulus -> ISR" not in out
    (run_dir,) = (tmp_path / "runs").iterdir()
    run = load_run(run_dir)
    found = run.measurements
    assert found.stimuli == 0 and found.kinds == ["send_to_recv", "recv_to_handler", "send_period", "handler_width"]
    log = np.loadtxt(paced_log, delimiter=",", dtype=np.int64, ndmin=2)
    index, send_tick, recv_delay, handler_delay, handler_width = log.T
    # Rig ticks and DUT cycles differ by a constant: find the logged send the first captured one is.
    sends = found.series["send_to_recv"].start_mu
    assert len(sends) >= 300
    k0 = next(k for k in range(len(log) - 4)
              if np.array_equal(np.diff(send_tick[k:k + 5]), np.diff(sends[:5])))
    n = len(sends) - 1            # the last send's reply may lie past the end of the capture
    assert k0 + n < len(log)
    np.testing.assert_array_equal(sends[:n] - sends[0], send_tick[k0:k0 + n] - send_tick[k0])
    np.testing.assert_array_equal(found.latency("send_to_recv")[:n], recv_delay[k0:k0 + n])
    np.testing.assert_array_equal(found.latency("send_period")[:n], np.diff(send_tick[k0:k0 + n + 1]))
    # The capture starts at an arbitrary tick: the receiver and handler of the send before the first
    # captured one may still lie inside it, so those series are aligned on the first captured send.
    handlers = found.series["recv_to_handler"]
    handlers = handlers.values[handlers.start_mu > sends[0]]
    np.testing.assert_array_equal(handlers[:n], handler_delay[k0:k0 + n])
    widths = found.series["handler_width"]
    widths = widths.values[widths.start_mu > sends[0]]
    np.testing.assert_array_equal(widths[:n], handler_width[k0:k0 + n])
    # The jitter of the period is the DUT's: 8 bits of it.
    period = found.latency("send_period")
    assert period.min() >= 3000 and period.max() <= 3255 and period.max() - period.min() > 200
