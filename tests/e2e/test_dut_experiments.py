"""The seeds' experiments on a real CPU (VexRiscv) as the simulated DUT, short versions
(targets/dut/experiments.py, firmware/dut/experiments.c on the hkern kernel; docs/dut-benchmarks.md).

Each stimulus experiment is cross-checked exactly: for every stimulus, the rig's ISR duration and
ISR -> task time equal the firmware's own cycle counts x 2 ticks plus one constant each; the
constants are stated here (the difference of the paths from each pin write to the counter read
beside it) and must not move.
"""

import numpy as np
import pytest

from targets import sim
from targets.dut import experiments as ex

pytestmark = pytest.mark.slow   # the VexRiscv DUT's simulator build

# VexRiscv (standard) with hkern: ISR duration = 2 x isr_cycles + 48 ticks (the handler's last pin
# write comes 24 cycles after its second counter read: the write-through store of the record and
# the pin's bus write; its first read comes straight after the first pin write), ISR -> task =
# 2 x task_cycles + 0 (both pin writes precede their counter reads by the same path).
VEXRISCV_CONSTANTS = (42, 0)


@pytest.fixture(scope="module")
def vex_sim():
    return sim.build(dut_cpu="vexriscv")


def _answered(v):
    v = np.asarray(v)
    assert (v >= 0).all(), f"{int((v < 0).sum())} unanswered"
    return v


def test_ssc_response_cross_checked_exactly(vex_sim, tmp_path):
    result = ex.run(vex_sim, tmp_path, "vexriscv", "response", count=80)
    check = result.check
    assert check.samples == 80 and check.mismatches == 0, check.describe()
    assert (check.isr_constant, check.task_constant) == VEXRISCV_CONSTANTS
    p = result.capture.pairing()
    isr, task = _answered(p.isr_latency), _answered(p.task_latency)
    # The kernel's trap path (every register saved, write-through stores) before the handler's pin,
    # and the switch to the woken task after it: hundreds of DUT cycles, each stimulus alike when
    # nothing else runs (a few ticks of the clocks' phase).
    assert 150 * ex.TICKS_PER_CYCLE < isr.min() and isr.max() - isr.min() <= 4
    assert task.min() > isr.max()
    table = ex.ssc_table([result])
    assert "interrupt service response" in table and "interrupt task response" in table


def test_faller_dma_masks_interrupts_and_the_cross_check_still_holds(vex_sim, tmp_path):
    quiet = ex.run(vex_sim, tmp_path, "vexriscv", "response", count=60)
    dma = ex.run(vex_sim, tmp_path, "vexriscv", "response-dma", count=150, seed=7)
    assert dma.check.mismatches == 0, dma.check.describe()
    assert (dma.check.isr_constant, dma.check.task_constant) == VEXRISCV_CONSTANTS
    q, d = _answered(quiet.capture.pairing().isr_latency), _answered(dma.capture.pairing().isr_latency)
    # A stimulus in a masked window waits up to the window's length (500 cycles); one outside it
    # is served as in the quiet run.
    assert d.min() <= q.max() + 2 * ex.TICKS_PER_CYCLE
    assert d.max() > q.max() + 300 * ex.TICKS_PER_CYCLE
    assert d.max() < q.max() + 600 * ex.TICKS_PER_CYCLE
    # The masked window only delays the handler's entry: once in, the handler and the switch to the
    # task take the same time for every stimulus.
    assert len(np.unique(dma.capture.pairing().isr_to_task)) == 1
    assert "ISR+DMA" in ex.faller_table([(quiet, dma)])


def test_sacha_ipc_operations_timed_by_the_rig_alone(vex_sim, tmp_path):
    result = ex.run(vex_sim, tmp_path, "vexriscv", "ipc", count=40, no_stimulus=True, measures=ex.IPC_MEASURES)
    ms = result.capture.measurements()
    for name in ex.IPC_MEASURES:
        v = np.asarray(ms.latency(name))
        done = v[v >= 0]
        assert len(done) >= 39, name
        assert int((v < 0).sum()) <= 1, name          # only a round the capture's end cut
        # Each operation is the same instructions every round, from an idle system: one value.
        assert len(np.unique(done)) == 1 and done[0] > 100 * ex.TICKS_PER_CYCLE, (name, np.unique(done))
    table = ex.sacha_table([result])
    for title in ex.IPC_TITLES.values():
        assert title in table


def test_realstone_pipeline_deadlines(vex_sim, tmp_path):
    result = ex.run(vex_sim, tmp_path, "vexriscv", "pipeline", count=40)
    assert result.check.mismatches == 0, result.check.describe()
    assert (result.check.isr_constant, result.check.task_constant) == VEXRISCV_CONSTANTS
    # The stages' pseudo-random work: the cross-check holds over many different values.
    assert len(set(ex.read_console(result.console)[:, 2].tolist())) > 20
    v = _answered(result.capture.pairing().task_latency)
    us = v * ex.NS_PER_TICK / 1000
    deadlines = [float(np.percentile(us, 25)), float(np.percentile(us, 75)), float(us.max())]
    table = ex.realstone_table(result, deadlines)
    missed = [int(line.split()[3]) for line in table.splitlines()[3:]]
    assert missed == [int((us > d).sum()) for d in deadlines]
    assert missed[0] >= missed[1] >= missed[2] == 0 and missed[0] > 0


def test_realfeel_histogram_counts_every_sample(vex_sim, tmp_path):
    result = ex.run(vex_sim, tmp_path, "vexriscv", "response-dma", count=120, mode="periodic", jitter=0)
    assert result.check.mismatches == 0
    table = ex.realfeel_table(result)
    counts = [int(line.split()[-1]) for line in table.splitlines()[3:]]
    assert sum(counts) == 120
    worst = _answered(result.capture.pairing().task_latency).max()
    assert f"worst case {worst / ex.TICKS_PER_CYCLE:g} cyc" in table


def test_demo_cpus_last_line(vex_sim, capsys, tmp_path):
    assert ex.main(["cpus", "--cpu", "vexriscv", "--count", "20", "--work", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "dut cpus: 1 cpus, 40 stimuli, cross-check mismatches 0"


def test_a_firmware_image_is_refused_where_it_cannot_run(vex_sim, tmp_path, capsys):
    from hilat import cli

    with pytest.raises(ValueError, match="no firmware image 'nope'"):
        sim.SimulatedRig(vex_sim, tmp_path, dut_firmware="nope")
    with pytest.raises(ValueError, match="goes with a CPU DUT"):
        sim.SimulatedRig(sim.build(), tmp_path, dut_firmware="ipc")
    with pytest.raises(SystemExit) as raised:
        cli.main(["demo", "--dut-firmware", "ipc"])
    assert raised.value.code == 2 and "--dut-firmware goes with --dut-cpu" in capsys.readouterr().err


def test_an_experiment_at_a_dut_clock_unrelated_to_the_rigs(vex_sim, capsys, tmp_path):
    """At 31.415927 MHz (about 1.59 ticks a cycle) the cross-check follows the clock's edges
    (targets/dut/clock_check.py) and the tables convert ticks at that clock."""
    assert ex.main(["ssc", "--cpu", "vexriscv", "--count", "30", "--dut-clock", "31415927",
                    "--work", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == "cross-check mismatches 0 over 30 stimuli"
    assert "31415927 Hz" in captured.err
    with pytest.raises(SystemExit):
        ex.main(["ssc", "--dut-clock", "60000000"])
