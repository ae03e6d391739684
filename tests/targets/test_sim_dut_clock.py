"""A CPU DUT's clock unrelated to the rig's (targets/sim_modules/hilat_dut_clock): a phase accumulator on
the simulator's existing time step, any mean frequency, its edges as targets.sim.dut_clock_edges gives them.

The module is built here as the simulator builds it (a shared object with LiteX's module API) and driven by
a small C program that calls it as LiteX's sim.c does: one tick a time step, the pad read after each. Its
rising edges must be dut_clock_edges' to the step, and at 25 MHz LiteX's own clocker's (the default, which
the exact cross-check of tests/e2e/test_sim_dut_cpu.py relies on). Then the whole simulator: a VexRiscv DUT
at 33.3337 MHz, whose ISR pin edges the rig times must fall on those edges."""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from targets import sim

litex_sim = pytest.importorskip("litex.build.sim.verilator")
CORE = Path(litex_sim.core_directory)
STEP_PS = sim.sim_step_ps(dut_cpu=True)

DRIVER = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include "modules.h"

static struct ext_module_s *module;
static int keep(struct ext_module_s *m) { module = m; return 0; }

int main(int argc, char **argv)
{   /* module.so args step_ps steps: prints the steps at which the pad rises */
    void *lib = dlopen(argv[1], RTLD_NOW);
    int (*init)(int (*)(struct ext_module_s *)) = dlsym(lib, "litex_sim_ext_module_init");
    char clk = 0, last = 0;
    struct pad_s pads[] = {{"dut_cpu_clk", 1, &clk}, {NULL, 0, NULL}};
    struct pad_list_s plist = {"dut_cpu_clk", pads, 0, NULL};
    unsigned long long step = strtoull(argv[3], NULL, 0), steps = strtoull(argv[4], NULL, 0), k;
    void *sess;

    init(keep);
    if (module->new_sess(&sess, argv[2]) || module->add_pads(sess, &plist))
        return 1;
    for (k = 0; k < steps; k++) {
        module->tick(sess, k * step);
        if (clk && !last)
            printf("rise %llu\n", k);
        last = clk;
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """Runs a simulator module: (source .c, its args, steps) -> the steps where the pad rises."""
    if not shutil.which("gcc"):
        pytest.skip("no gcc")
    work = tmp_path_factory.mktemp("dut_clock")
    (work / "driver.c").write_text(DRIVER)
    subprocess.run(["gcc", "-O1", "-I", str(CORE), "-o", str(work / "driver"), str(work / "driver.c"), "-ldl"],
                   check=True)

    def run(source, args, steps):
        lib = work / (Path(source).stem + ".so")
        if not lib.exists():
            subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-I", str(CORE), "-o", str(lib), str(source),
                            "-ljson-c"], check=True)
        out = subprocess.run([str(work / "driver"), str(lib), json.dumps(args), str(STEP_PS), str(steps)],
                             check=True, capture_output=True, text=True).stdout
        return np.array([line.split()[1] for line in out.splitlines() if line.startswith("rise ")], dtype=np.int64)
    return run


OUR_MODULE = sim.SIM_MODULES / sim.DUT_CLOCK_MODULE / f"{sim.DUT_CLOCK_MODULE}.c"


@pytest.mark.parametrize("freq_hz", [33_333_700, 25_000_000, 49_999_999, 50_000_000, 1_234_567, 24_999_999])
def test_the_module_rises_where_dut_clock_edges_says(driver, freq_hz):
    steps = 400_000
    rises = driver(OUR_MODULE, {"freq_hz": freq_hz}, steps)
    expected = sim.dut_clock_edges(np.arange(len(rises) + 1), freq_hz)   # edge 0 at step 0
    assert rises.tolist() == expected[:len(rises)].tolist()
    assert expected[len(rises)] >= steps                     # and no edge missed at the end
    # The mean frequency is exact: n edges in n / f, to within the step.
    n = len(rises) - 1
    assert abs(rises[-1] * STEP_PS - n * 10**12 / freq_hz) < STEP_PS


def test_at_25_mhz_it_is_litex_s_clocker(driver):
    steps = 10_000
    ours = driver(OUR_MODULE, {"freq_hz": sim.DUT_CPU_CLK_FREQ}, steps)
    litex = driver(CORE / "modules" / "clocker" / "clocker.c", {"freq_hz": sim.DUT_CPU_CLK_FREQ, "phase_deg": 0},
                   steps)
    assert ours.tolist() == litex.tolist() and len(ours) == steps // 4


def test_dut_clock_edges_scalar_and_array():
    # 25 MHz on 10 ns steps: every 4th step.
    assert [sim.dut_clock_edges(n) for n in (0, 1, 3)] == [0, 4, 12]
    edges = sim.dut_clock_edges([[1, 2], [3, 10**9]], 33_333_700)
    assert edges.shape == (2, 2) and edges[0, 0] == 3 and edges[1, 1] == -(-10**21 // (33_333_700 * STEP_PS))
    # Beyond int64's reach of n * 1e12, Python's integers: the same formula.
    assert sim.dut_clock_edges(np.array([10**13]), 33_333_700)[0] == -(-10**25 // (33_333_700 * STEP_PS))


def test_a_half_period_shorter_than_the_step_is_refused():
    sim.check_clock_settings(1, dut_cpu=True, dut_cpu_clk_hz=50_000_000)   # a half period of one step
    with pytest.raises(ValueError, match="time step of 10000 ps"):
        sim.check_clock_settings(1, dut_cpu=True, dut_cpu_clk_hz=50_000_001)
    with pytest.raises(ValueError, match="whole Hz"):
        sim.check_clock_settings(1, dut_cpu=True, dut_cpu_clk_hz=33.3e6)
    with pytest.raises(ValueError, match="CPU DUT"):
        sim.check_clock_settings(1, dut_cpu=False, dut_cpu_clk_hz=33_333_700)
    config = json.loads(sim._sim_config(0, dut_cpu=True, dut_cpu_clk_hz=33_333_700).get_json())
    assert config[-1]["timebase"] == STEP_PS                    # the step stays the rig's


@pytest.mark.parametrize("argv, message", [
    (["sim", "--dut-cpu-clock", "33_333_700"], "goes with a CPU DUT"),
    (["demo", "--dut-cpu", "vexriscv", "--dut-cpu-clock", "60000000"], "time step of 10000 ps"),
])
def test_hilat_refuses_a_dut_clock_it_cannot_simulate_before_building(argv, message, capsys):
    from hilat import cli

    with pytest.raises(SystemExit) as raised:
        cli.main(argv)
    assert raised.value.code == 2 and message in capsys.readouterr().err


# ---- the simulator: a VexRiscv DUT on a clock unrelated to the rig's ------------------------------

UNRELATED_HZ = 31_415_927      # ~1.59 ticks a cycle, no short pattern


def _edges_in_ticks(freq_hz, last_tick):
    """The rig tick of each DUT clock edge, in order: a DUT pin that edge sets is sampled at the next ts
    edge (plus the rig's constant input delay, not counted here)."""
    edges = sim.dut_clock_edges(np.arange(int(last_tick * 2 * freq_hz / sim.TS_CLK_FREQ) + 10), freq_hz)
    return edges // (10**12 // sim.TS_CLK_FREQ // STEP_PS)


def _offsets(pin_edges, freq_hz):
    """The offsets (ticks) between the rig's timestamps and the simulator's steps under which every pin
    edge the rig timed is in the tick of a DUT clock edge (empty: none)."""
    ticks = _edges_in_ticks(freq_hz, pin_edges.max())
    assert (np.diff(ticks) > 0).all()
    offsets = pin_edges[0] - ticks[ticks <= pin_edges[0]]
    for edge in pin_edges[1:]:
        wanted = edge - offsets
        pos = np.clip(np.searchsorted(ticks, wanted), 0, len(ticks) - 1)
        offsets = offsets[ticks[pos] == wanted]
    return offsets


@pytest.mark.slow   # the VexRiscv DUT's simulator build
def test_a_vexriscv_dut_at_an_unrelated_frequency_switches_its_pins_on_those_edges(tmp_path):
    """Every edge of the DUT's pins the rig times is in the tick of an edge of dut_clock_edges' schedule,
    under one offset between the rig's timestamps and the simulator's steps for the whole run. About
    0.63 of the ticks hold a DUT edge, so 200 pin edges fit by chance with odds of 1e-40; the same
    edges under a schedule 10 ppm off, or at 25 MHz, fit nowhere. (Only the pins' timing is used, not
    what the firmware does or prints.)"""
    from hilat.acquisition.capture import Capture
    from hilat.acquisition.settings import CaptureSettings, StimulusSettings

    sim_dir = sim.build(dut_cpu="vexriscv")          # the build of tests/e2e/test_sim_dut_cpu.py
    settings = CaptureSettings(count=100, out_dir=tmp_path / "runs", progress=False, label="unrelated",
                               stimulus=StimulusSettings(mode="dither", period=4000, jitter=1000, seed=5))
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"console": tmp_path / "console.txt"},
                          dut_cpu_clk_hz=UNRELATED_HZ) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error is None and not any(capture.status.dropped)
    run = capture.load()
    dut_pins = [i for i, role in enumerate(run.roles.default_roles) if role != "stimulus"]
    pin_edges = run.ticks[np.isin(run.chans, dut_pins)]
    assert len(pin_edges) >= 200                     # the firmware answers (ISR and task pins, rise and fall)
    assert len(_offsets(pin_edges, UNRELATED_HZ)) > 0
    for wrong in (UNRELATED_HZ - 300, UNRELATED_HZ + 300, sim.DUT_CPU_CLK_FREQ):
        assert len(_offsets(pin_edges, wrong)) == 0
