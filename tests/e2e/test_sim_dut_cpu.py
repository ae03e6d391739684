"""A real CPU as the simulated DUT (issue 17, docs/dut-cpus-design.md): a LiteX SoC with VexRiscv or
PicoRV32 on a 25 MHz clock of its own, running firmware/dut, in the same Verilator model as the rig.
Its stimulus interrupt's handler pulses the ISR pin, the task it wakes pulses the task pin, and it
writes its own measurements (its timer's cycles) to its console.

Inside vs outside: for every stimulus, the rig's ISR duration and ISR-entry -> task time equal the
firmware's own figures, in DUT cycles (2 ticks each: ts 50 MHz, the CPU 25 MHz), plus one constant
each (the difference of the paths from each pin write to the counter read beside it).

The other VexRiscv variants of targets/dut/cpu_soc.py (full, lite, min) pass this check too (min
with PicoRV32's stimulus period), but each costs a simulator build of its own (about a minute): they
are checked by hand, not here (their figures: docs/dut-cpus-design.md).
"""

import re

import numpy as np
import pytest
from hilat.capture import Capture, CaptureSettings, StimulusSettings

from targets import sim

N_STIMULI = 150
TICKS_PER_CYCLE = sim.TS_CLK_FREQ // sim.DUT_CPU_CLK_FREQ

# CPU -> (its firmware's banner, the stimulus period and jitter in ticks, the stimulus -> ISR pin
# bounds in DUT cycles, the bound of the inside-vs-outside constants in ticks). The stimulus -> ISR
# bounds are what only the rig sees: the 2-FF synchroniser, the CPU's interrupt entry and the handler's
# prologue, varying with the clocks' phase and the main loop's position (measured: VexRiscv 68..71
# cycles, PicoRV32 407..414). PicoRV32 saves every register before isr() (LiteX's crt0) at a CPI of
# about 4, and a division in progress delays its interrupt (up to 446 cycles seen with stimuli closer
# together); its handler, task and console line take about 7000 ticks, more than VexRiscv's period, so
# its stimuli come further apart; the few instructions between a pin write and the counter read beside
# it take longer too.
CPUS = {
    "vexriscv": ("hilat DUT VexRiscv", (4000, 1000), (40, 120), 100),
    "picorv32": ("hilat DUT PicoRV32", (12000, 3000), (300, 480), 200),
}


@pytest.fixture(scope="module", params=sorted(CPUS))
def cpu_sim(request):
    return request.param, sim.build(dut_cpu=request.param)


def _console(path):
    """The firmware's lines: its banner, then (sample, isr_cycles, task_cycles) per stimulus; sample 0
    is its warm-up before any stimulus."""
    lines = path.read_text().splitlines()
    rows = [tuple(map(int, re.fullmatch(r"irq (\d+) isr_cycles (\d+) task_cycles (\d+)", line).groups()))
            for line in lines[1:]]
    return lines[0], np.array(rows, dtype=np.int64).reshape(-1, 3)


def test_the_rig_measures_a_cpu_dut_as_it_measures_itself(cpu_sim, tmp_path):
    cpu, cpu_sim_dir = cpu_sim
    banner_expected, (period, jitter), (isr_min, isr_max), constant_max = CPUS[cpu]
    console = tmp_path / "console.txt"
    settings = CaptureSettings(count=N_STIMULI, out_dir=tmp_path / "runs", progress=False, label=cpu,
                               stimulus=StimulusSettings(mode="dither", period=period, jitter=jitter, seed=3))
    with sim.SimulatedRig(cpu_sim_dir, tmp_path / "sim", dut_args={"console": console}) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error is None and capture.status.overflow == 0 and not any(capture.status.dropped)
    banner, rows = _console(console)
    assert banner == banner_expected
    assert rows[0, 0] == 0 and rows[1:, 0].tolist() == list(range(1, N_STIMULI + 1))
    inside = rows[1:]
    pairing = capture.pairing()
    assert len(pairing) == N_STIMULI
    for latency in (pairing.isr_latency, pairing.task_latency, pairing.isr_duration, pairing.isr_to_task):
        assert (latency != -1).all()       # every stimulus answered, every pin pulse closed
    # Inside vs outside: one constant each, the same for every stimulus.
    isr_constant = pairing.isr_duration - TICKS_PER_CYCLE * inside[:, 1]
    task_constant = pairing.isr_to_task - TICKS_PER_CYCLE * inside[:, 2]
    assert len(set(isr_constant.tolist())) == 1 and abs(isr_constant[0]) < constant_max, np.unique(isr_constant)
    assert len(set(task_constant.tolist())) == 1 and abs(task_constant[0]) < constant_max, np.unique(task_constant)
    # The task's time varies with where the stimulus fell in the main loop, so the check is not
    # over a single value.
    assert len(set(inside[:, 2].tolist())) > 1
    # What only the rig sees: stimulus -> first handler instruction.
    latency = pairing.isr_latency
    assert isr_min * TICKS_PER_CYCLE < latency.min() <= latency.max() < isr_max * TICKS_PER_CYCLE, \
        (latency.min(), latency.max())
    print(f"{cpu}: stimulus -> ISR {latency.min()}..{latency.max()} ticks, ISR duration = {TICKS_PER_CYCLE} x "
          f"cycles + {isr_constant[0]}, ISR -> task = {TICKS_PER_CYCLE} x cycles + {task_constant[0]}")
