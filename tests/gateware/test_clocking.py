"""EdgeClock (gateware/clocking.py) on Verilator with the models of ECLKSYNCB, CLKDIVF and IDDRX2F:
from one edge clock, ts is its half, in phase, held in reset until the divider runs; an input
sampled through that chain (InputSampler, four samples a tick) gives each tick the pin's level at
exactly edge + 1/4, 1/2, 3/4 and 1 tick, three ticks later, from a random quarter-tick pattern.
"""

import random
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge, Timer

HERE = Path(__file__).resolve().parent
TOPLEVEL = "hilat_edge_clock"
EDGE_PERIOD_PS = 8_000          # the edge clock; a tick is twice that


def _top():
    from migen import ClockSignal, Module, ResetSignal, Signal

    from gateware.clocking import EdgeClock
    from gateware.sampler import InputSampler

    m = Module()
    m.edge_clock, m.reset, m.pin = Signal(name="edge_clock"), Signal(name="reset"), Signal(name="pin")
    m.ts_clk, m.ts_rst, m.samples = Signal(name="ts_clk"), Signal(name="ts_rst"), Signal(4, name="samples")
    m.submodules.clocks = EdgeClock(m.edge_clock, m.reset)
    m.submodules.sampler = sampler = InputSampler(m.pin, 4, "ts", "eclk")
    m.comb += [m.ts_clk.eq(ClockSignal("ts")), m.ts_rst.eq(ResetSignal("ts")), m.samples.eq(sampler.samples)]
    m.latency = sampler.latency
    return m


@cocotb.test()
async def ts_is_the_edge_clock_halved_and_samples_exact(dut):
    cocotb.start_soon(Clock(dut.edge_clock, EDGE_PERIOD_PS, unit="ps").start())
    dut.reset.value = 1
    dut.pin.value = 0
    await ClockCycles(dut.edge_clock, 10)
    assert dut.ts_clk.value == 0 and dut.ts_rst.value == 1, "ts runs, or is out of reset, while reset"
    await FallingEdge(dut.edge_clock)
    dut.reset.value = 0
    # ts rises with every other edge-clock rise, from the first one after the release.
    rises = []
    for _ in range(8):
        await RisingEdge(dut.edge_clock)
        await Timer(1, unit="ps")
        rises.append(int(dut.ts_clk.value))
    assert rises in ([1, 0] * 4, [0, 1] * 4), rises
    assert dut.ts_rst.value == 0, "ts still in reset two ticks after the release"

    # A random level in every quarter tick, set mid-quarter, from a ts rising edge on.
    period = 2 * EDGE_PERIOD_PS
    quarter = period // 4
    rng = random.Random(16)
    pattern = [rng.randrange(2) for _ in range(4 * 200)]
    await RisingEdge(dut.ts_clk)
    start = cocotb.utils.get_sim_time("ps")

    async def drive():
        for level in pattern:
            await Timer(quarter // 2, unit="ps")
            dut.pin.value = level
            await Timer(quarter - quarter // 2, unit="ps")
    cocotb.start_soon(drive())
    words = []
    for _ in range(200):
        await FallingEdge(dut.ts_clk)
        words.append(int(dut.samples.value))
    # Tick t's sample k is the pin at start + t ticks + (k + 1) quarters: the level of quarter
    # 4 t + k (set in its middle). `samples` holds tick n - 3 after the n-th edge from `start`
    # (edge 0 is `start` itself).
    latency = 3
    for n in range(latency + 1, 199):
        t = n - latency
        expected = sum(pattern[4 * t + k] << k for k in range(4))
        assert words[n] == expected, f"tick {t}: samples {words[n]:04b}, pin {expected:04b}"
    assert sum(bin(w).count("1") for w in words) > 300, "the pattern was not seen"
    assert cocotb.utils.get_sim_time("ps") - start >= 199 * period


def test_clocking():
    from migen.fhdl.verilog import convert
    from tb import run_tests, verilator_build

    build_dir = HERE / "sim_build" / "clocking"
    build_dir.mkdir(parents=True, exist_ok=True)
    top = _top()
    assert top.latency == 3
    verilog = build_dir / f"{TOPLEVEL}.v"
    convert(top, ios={top.edge_clock, top.reset, top.pin, top.ts_clk, top.ts_rst, top.samples},
            name=TOPLEVEL).write(str(verilog))
    runner = verilator_build(verilog, TOPLEVEL, build_dir)
    run_tests(runner, TOPLEVEL, build_dir, __file__, {}, "the clocking toplevel")
