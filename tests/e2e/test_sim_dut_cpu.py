"""A real CPU as the simulated DUT (issue 17, docs/dut-benchmarks.md): a LiteX SoC with VexRiscv or
PicoRV32 on a 25 MHz clock of its own, running hkern and its experiments (firmware/dut), in the same
Verilator model as the rig.

Inside vs outside, for every stimulus: the rig's ISR duration and ISR-entry -> task time equal the
firmware's own counts, in DUT cycles (2 ticks each: ts 50 MHz, the CPU 25 MHz), plus one constant
each, stated here per CPU: the difference of the paths from each pin write to the counter read
beside it (the ISR duration's last pin write comes after a counter read and a store, its first
before one; the task's pin and its read come in the same order as the handler's first pair).

The other VexRiscv variants of targets/dut/cpu_soc.py (full, lite, min) each cost a simulator build
of their own (about a minute): `make demo-cpus` runs them, not `make test`.
"""

import numpy as np
import pytest

from targets import sim
from targets.dut import experiments as ex

pytestmark = pytest.mark.slow   # a simulator build per CPU DUT

# CPU -> (its firmware's banner, the cross-check's constants in ticks (ISR duration, ISR -> task),
# stimulus -> ISR pin bounds in DUT cycles). The stimulus -> ISR time is what only the rig sees: the
# GPIO input's 2-FF synchroniser, the CPU's interrupt entry, hkern's trap path saving every register,
# the dispatch to the handler and its test of the peripheral's pending bit. Measured on an idle
# system: VexRiscv about 235 cycles (its write-through data cache makes each of the 33 stores a bus
# write), PicoRV32 about 650 (no cache, about 4 cycles an instruction); the bounds leave room for
# changes of the kernel's code (docs/dut-benchmarks.md has the figures of the current one).
CPUS = {
    "vexriscv": ("hilat DUT VexRiscv hkern response", (42, 0), (150, 300)),
    "picorv32": ("hilat DUT PicoRV32 hkern response", (108, 0), (500, 800)),
}


@pytest.fixture(scope="module", params=sorted(CPUS))
def cpu_sim(request):
    return request.param, sim.build(dut_cpu=request.param)


def test_the_rig_measures_a_cpu_dut_as_it_measures_itself(cpu_sim, tmp_path):
    cpu, sim_dir = cpu_sim
    banner, constants, (isr_min, isr_max) = CPUS[cpu]
    result = ex.run(sim_dir, tmp_path, cpu, "response", count=60)
    capture = result.capture
    assert capture.status.overflow == 0 and not any(capture.status.dropped)
    assert banner in result.console.read_text().splitlines()
    pairing = capture.pairing()
    assert len(pairing) == 60
    for latency in (pairing.isr_latency, pairing.task_latency, pairing.isr_duration, pairing.isr_to_task):
        assert (latency != -1).all()       # every stimulus answered, every pin pulse closed
    check = result.check
    assert check.mismatches == 0 and (check.isr_constant, check.task_constant) == constants, check.describe()
    latency = pairing.isr_latency
    assert isr_min * ex.TICKS_PER_CYCLE <= latency.min() <= latency.max() <= isr_max * ex.TICKS_PER_CYCLE, \
        (latency.min(), latency.max())
    assert latency.max() - latency.min() <= 4 * ex.TICKS_PER_CYCLE      # an idle CPU: the clocks' phase only


def test_cross_check_holds_over_varying_work(cpu_sim, tmp_path):
    """The pipeline's stages work a pseudo-random number of cycles: the firmware's ISR -> task time
    differs from sample to sample, and the rig's follows it exactly."""
    cpu, sim_dir = cpu_sim
    result = ex.run(sim_dir, tmp_path, cpu, "pipeline", count=30)
    check = result.check
    assert check.samples == 30 and check.mismatches == 0, check.describe()
    assert (check.isr_constant, check.task_constant) == CPUS[cpu][1]
    inside = ex.read_console(result.console)
    assert inside[:, 0].tolist() == list(range(1, 31))
    assert len(np.unique(inside[:, 2])) > 5     # (a spin loop reads the counter: PicoRV32 needs ~50 cycles a read)
