"""A real CPU as the simulated DUT (issue 17, docs/dut-cpus-design.md): a LiteX SoC with VexRiscv on a
25 MHz clock of its own, running firmware/dut, in the same Verilator model as the rig. Its stimulus
interrupt's handler pulses the ISR pin, the task it wakes pulses the task pin, and it writes its own
measurements (its timer's cycles) to its console.

Inside vs outside: for every stimulus, the rig's ISR duration and ISR-entry -> task time equal the
firmware's own figures, in DUT cycles (2 ticks each: ts 50 MHz, the CPU 25 MHz), plus one constant
each (the difference of the paths from each pin write to the counter read beside it).
"""

import re

import numpy as np
import pytest
from hilat.capture import Capture, CaptureSettings, StimulusSettings

from targets import sim

N_STIMULI = 150
TICKS_PER_CYCLE = sim.TS_CLK_FREQ // sim.DUT_CPU_CLK_FREQ


@pytest.fixture(scope="module")
def cpu_sim_dir():
    return sim.build(dut_cpu="vexriscv")


def _console(path):
    """The firmware's lines: its banner, then (sample, isr_cycles, task_cycles) per stimulus; sample 0
    is its warm-up before any stimulus."""
    lines = path.read_text().splitlines()
    rows = [tuple(map(int, re.fullmatch(r"irq (\d+) isr_cycles (\d+) task_cycles (\d+)", line).groups()))
            for line in lines[1:]]
    return lines[0], np.array(rows, dtype=np.int64).reshape(-1, 3)


def test_the_rig_measures_a_vexriscv_dut_as_it_measures_itself(cpu_sim_dir, tmp_path):
    console = tmp_path / "console.txt"
    settings = CaptureSettings(count=N_STIMULI, out_dir=tmp_path / "runs", progress=False, label="vexriscv",
                               stimulus=StimulusSettings(mode="dither", period=4000, jitter=1000, seed=3))
    with sim.SimulatedRig(cpu_sim_dir, tmp_path / "sim", dut_args={"console": console}) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error is None and capture.status.overflow == 0 and not any(capture.status.dropped)
    banner, rows = _console(console)
    assert banner == "hilat DUT VexRiscv"
    assert rows[0, 0] == 0 and rows[1:, 0].tolist() == list(range(1, N_STIMULI + 1))
    inside = rows[1:]
    pairing = capture.pairing()
    assert len(pairing) == N_STIMULI
    for latency in (pairing.isr_latency, pairing.task_latency, pairing.isr_duration, pairing.isr_to_task):
        assert (latency != -1).all()       # every stimulus answered, every pin pulse closed
    # Inside vs outside: one constant each, the same for every stimulus.
    isr_constant = pairing.isr_duration - TICKS_PER_CYCLE * inside[:, 1]
    task_constant = pairing.isr_to_task - TICKS_PER_CYCLE * inside[:, 2]
    assert len(set(isr_constant.tolist())) == 1 and abs(isr_constant[0]) < 100, np.unique(isr_constant)
    assert len(set(task_constant.tolist())) == 1 and abs(task_constant[0]) < 100, np.unique(task_constant)
    # The task's time varies with where the stimulus fell in the main loop, so the check is not
    # over a single value.
    assert len(set(inside[:, 2].tolist())) > 1
    # What only the rig sees: stimulus -> first handler instruction, a few tens of DUT cycles with
    # the clocks' phase and the loop's position.
    assert 40 * TICKS_PER_CYCLE < pairing.isr_latency.min() <= pairing.isr_latency.max() < 120 * TICKS_PER_CYCLE
