"""MeasurementEngine (gateware/engine.py) on Verilator against engine_model.py (the host's pairing,
HdrHistogram bins, intervals of the start tick): bins exact per interval, kind and tag whether swept
or spilled, closes after their bins, exact statistics, misses, duplicates (and their saturation),
below range, the overflow bin, interval boundaries, deadlines, the minimum spacing and what is lost
below it, flush, clear, trigger-out to the tick, outlier records (and their loss), roles at their
low level. Random backpressure on the bins and outlier ports; unequal clock ratios (tb.CLOCKS), and
the rigs' own for the minimum spacing (RIG_CLOCKS).

The engine runs for hundreds of thousands of ticks per test, so its testbench (``EngineTB``) keeps
Python off the clock edges: the simulator's own clocks, inputs driven by waking at the next
scheduled change, monitors woken by their port's ``valid``.
"""

import random

# tb.py and the models (engine_model, model) sit next to this file, which is on sys.path both under
# pytest and in the simulator.
import cocotb
import engine_model as em
import pytest
from cocotb.triggers import ClockCycles, Event, FallingEdge, First, RisingEdge, Timer
from hilat.analysis import Channels
from hilat.engine import EngineConfig, Trigger
from model import BURST, DITHER, PERIODIC, StimulusConfig, filtered_edges, stimulus_edges, stimulus_rises
from tb import CLOCKS, TB, VARIANTS, needs, run_cocotb

from gateware.engine import (
    CROSSING_DEPTH,
    INTERVAL_SHIFT_MIN,
    MAX_TS_PER_SYS,
    MIN_SPACING,
    SLOT,
    STAT_BELOW,
    STAT_MISSES,
    hdr_bin,
    stat_index,
)
from gateware.stimulus import MIN_INTERVAL

STIM, STIM1, ISR, TASK, SPARE, TAG = 0, 1, 2, 3, 4, 5   # stim0, stim1, in0..in3 (default roles)
SHIFT = INTERVAL_SHIFT_MIN
INTERVAL = 1 << SHIFT


def unsigned(signal):
    value = signal.value
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


# Testbench ----------------------------------------------------------------------------------------

class EngineTB(TB):
    """The shared TB for long runs: the simulator's own clocks, inputs driven by waking at the next
    scheduled change, event-driven monitors of the bins and outlier ports (random ready) and of the
    trigger pin."""
    clock_impl = "gpi"

    def __init__(self, dut, clocks, ready_probability=0.5, seed=1):
        super().__init__(dut, clocks, ready_probability, seed)
        self.entries = []        # bins port, in arrival order: (type, kind, tag, bin, count, interval)
        self.outliers = []       # outlier port: (start, values, flags)
        self.trigger_runs = []   # trigger pin high: (first tick, first tick low again)
        self.raw_records = 0     # records out of the capture's FIFO
        self.ready = {"bins": ready_probability, "outlier": ready_probability}  # per port
        self._scheduled = Event()

    async def start(self):
        await super().start()
        dut = self.dut
        dut.bins_ready.value = 0
        dut.outlier_ready.value = 0
        cocotb.start_soon(self._port_monitor("bins", ("type", "kind", "tag", "bin", "count", "interval"),
                                             self.entries))
        cocotb.start_soon(self._port_monitor("outlier", ("start", "values", "flags"), self.outliers))
        cocotb.start_soon(self._trigger_monitor())

    async def _monitor(self):
        """The raw path: drained at once, records counted."""
        dut = self.dut
        dut.ev_ready.value = 1
        while True:
            await RisingEdge(dut.ev_valid)
            while dut.ev_valid.value:
                await FallingEdge(dut.sys_clk)
                self.raw_records += int(dut.ev_valid.value)

    def drive(self, channel, tick, level):
        assert tick > self.dut.ts.value.to_unsigned() + 2, "scheduled in the past"
        super().drive(channel, tick, level)
        self._scheduled.set()

    async def _drive_inputs(self):
        dut, period = self.dut, self.ts_period
        while True:
            await FallingEdge(dut.ts_clk)
            tick = dut.ts.value.to_unsigned()
            self.last_ts = tick
            for bit, level in self.schedule.pop(tick, {}).items():
                self.inputs = (self.inputs & ~(1 << bit)) | (level << bit)
                dut.inputs.value = self.inputs
            self._scheduled.clear()
            if not self.schedule:
                await self._scheduled.wait()
                continue
            gap = min(self.schedule) - tick
            assert gap > 0, "an input change was scheduled in the past"
            if gap > 1:
                # Wake in the high phase of the tick of the next change (or when one is added).
                await First(Timer(gap * period - period // 4, unit="ps"), self._scheduled.wait())

    async def _port_monitor(self, name, fields, out):
        dut = self.dut
        valid, ready = getattr(dut, f"{name}_valid"), getattr(dut, f"{name}_ready")
        signals = [getattr(dut, f"{name}_{f}") for f in fields]
        while True:
            await FallingEdge(dut.sys_clk)
            if not valid.value:
                ready.value = 0
                await RisingEdge(valid)
                continue
            take = int(self.rng.random() < self.ready[name])
            ready.value = take
            if take:
                out.append(tuple(unsigned(s) for s in signals))

    async def _trigger_monitor(self):
        dut = self.dut
        while True:
            await RisingEdge(dut.trigger)
            await FallingEdge(dut.ts_clk)
            rise = dut.ts.value.to_unsigned()
            await FallingEdge(dut.trigger)
            await FallingEdge(dut.ts_clk)
            self.trigger_runs.append((rise, dut.ts.value.to_unsigned()))

    async def sleep_until(self, tick):
        """Let the simulation run without Python on the edges until ``tick``."""
        now = await self.now()
        if tick > now + 1:
            await Timer((tick - now - 1) * self.ts_period, unit="ps")
        await self.wait_until(tick)

    def pulse(self, channel, rise, width):
        self.drive(channel, rise, 1)
        self.drive(channel, rise + width, 0)

    # engine ----------------------------------------------------------------------------------------

    async def configure(self, cfg: EngineConfig):
        """Capture every channel (both edges), the raw path as ``cfg.raw``; the engine's settings."""
        await self.write_fields("capture_raw", enable=int(cfg.raw))
        self.configs = await self.configure_capture()
        tag_channel, tag_level = cfg.tag or (0, 1)
        trig = cfg.trigger
        await self.write_fields(
            "engine_config", start_channel=cfg.start[0], start_level=cfg.start[1],
            isr_channel=cfg.isr[0], isr_level=cfg.isr[1], task_channel=cfg.task[0], task_level=cfg.task[1],
            tag_channel=tag_channel, tag_level=tag_level, tag_enable=int(cfg.tag is not None),
            interval_shift=cfg.interval_shift - INTERVAL_SHIFT_MIN,
            trigger_response=int(trig is not None and trig.response == "task"),
            trigger_on_late=int(trig is not None and trig.on_late))
        await self.write("engine_deadline", cfg.deadline)
        await self.write("engine_offset", cfg.offset)
        for k, t in enumerate(cfg.thresholds):
            await self.write(f"engine_threshold{k}", em.NEVER if t is None else t)
        await self.write("engine_trigger_threshold", trig.threshold if trig else 0)
        await self.write("engine_trigger_width", trig.width if trig else 0)
        self.cfg = cfg

    async def control(self, **strobe):
        await self.write_fields("engine_control", **strobe)

    async def status(self):
        return await self.read_fields("engine_status")

    async def wait_engine(self, field, value=1, every=64, timeout_ticks=300_000):
        """Poll ``engine_status.field`` every ``every`` sys cycles until it reads ``value``."""
        end = await self.now() + timeout_ticks
        while (await self.status())[field] != value:
            assert await self.now() < end, f"engine_status.{field} never {value}"
            await Timer(every * self.sys_period, unit="ps")

    async def clear(self):
        """Stop and zero everything; returns once ``status.busy`` has dropped."""
        await self.control(clear=1)
        await ClockCycles(self.dut.sys_clk, 16)
        await self.wait_engine("busy", 0)

    async def run_start(self):
        """Start a run; returns the tick read just before (the run starts a few ticks later)."""
        now = await self.now()
        await self.control(start=1)
        return now

    async def drain(self, quiet=64):
        """Until the bins and outlier ports have been empty for ``quiet`` sys cycles."""
        dut, n = self.dut, 0
        while n < quiet:
            await FallingEdge(dut.sys_clk)
            n = 0 if dut.bins_valid.value or dut.outlier_valid.value else n + 1

    async def flush(self):
        """Flush, wait for ``status.flushed``, drain; returns the tick read just before the flush."""
        now = await self.now()
        await self.control(flush=1)
        await self.wait_engine("flushed")
        await self.drain()
        return now

    async def statistics(self):
        """{name: value} of every statistic, from one snapshot (the firmware's reading: a record at a
        time through ``engine_stats_index``)."""
        await self.control(snapshot=1)
        await self.wait_status("engine_status", "valid")
        out = {name: await self.read(f"engine_{name}") for name in ("samples", "samples_lost", "bins_lost",
                                                                     "outliers_lost")}
        for k in range(em.N_KINDS):
            for slot, name in ((STAT_MISSES, "misses"), (STAT_BELOW, "below")):
                await self.write("engine_stats_index", stat_index(k, slot))
                out[f"k{k}_{name}"] = await self.read("engine_stats_count")
            out[f"k{k}_duplicates"] = await self.read("engine_stats_duplicates")
            for t in range(2):
                await self.write("engine_stats_index", stat_index(k, t))
                for s in ("count", "min", "max", "sum"):
                    out[f"k{k}_t{t}_{s}"] = await self.read(f"engine_stats_{s}")
        return out

    def edges(self, stimuli=()):
        """Every edge the engine saw: [(tick, channel, level)] of the stimulus channels
        (``stimuli``: [(channel, StimulusConfig, pulses)]) and of the inputs."""
        out = []
        for channel, cfg, n in stimuli:
            out += [(t, channel, lv) for t, lv in stimulus_edges(cfg, n)]
        for ch, changes in self.input_changes.items():
            initial = self.input_initial >> (ch - self.first_input) & 1
            out += [(t, ch, lv) for t, lv in filtered_edges(changes, 0, initial=initial)]
        return out


async def start_engine_tb(dut, clocks, cfg, **kwargs):
    """A started testbench, the engine cleared (its bank memories outlive the reset) and configured."""
    tb = EngineTB(dut, clocks, **kwargs)
    await tb.start()
    await tb.configure(cfg)
    await tb.clear()
    return tb


async def start_stimulus(tb, *cfgs):
    """Start stimulus channels: (channel, StimulusConfig) pairs, committed together."""
    for channel, cfg in cfgs:
        await tb.configure_stimulus(channel, cfg)
    await tb.commit_stimulus(*[channel for channel, _ in cfgs])


def default_config(tag=True, **settings):
    """(EngineConfig, roles) for the rig's default roles (stim0, isr in0, task in1, tag in3)."""
    roles = em.rig_roles()
    # Deadline 0 (none) unless given: the gateware keeps that mode, though the firmware and the host
    # now always set one (hilat.engine.deadline_limit).
    settings.setdefault("deadline", 0)
    cfg = EngineConfig.from_roles(roles, **settings)
    if not tag:
        cfg = EngineConfig(**{**cfg.__dict__, "tag": None})
        roles = Channels(**{**roles.__dict__, "tag": None})
    return cfg, roles


def custom_config(start, isr, task, **settings):
    """(EngineConfig, roles) with roles on any channels (active high, no tag), where the host's
    channel table would refuse them (a response on a stimulus output, a start on an input)."""
    base = em.rig_roles()
    roles = Channels(stimulus=start, isr=isr, task=task, tag=None, names=base.names,
                     default_roles=base.default_roles)
    settings.setdefault("deadline", 0)
    return EngineConfig(start=(start, 1), isr=(isr, 1), task=(task, 1), **settings), roles


class Responses:
    """DUT pulses, never overlapping on one channel (a pulse that would is left out)."""
    def __init__(self, tb):
        self.tb = tb
        self.last_fall = {}

    def pulse(self, channel, rise, width):
        if rise <= self.last_fall.get(channel, -2) + 1:
            return False
        self.tb.pulse(channel, rise, width)
        self.last_fall[channel] = rise + width
        return True


# Checks -------------------------------------------------------------------------------------------

def check_bins(entries, samples, first, last):
    """The bins port against the model: per (interval, kind, tag, bin) the counts of every entry
    (swept or spilled) sum to the model's; each kind closes every interval first..last once, in
    order, each after all of its bins. Returns {(kind, interval): [bank address of each bin entry]}
    in arrival order."""
    got, order = {}, {}
    closes = {k: [] for k in range(em.N_KINDS)}
    for i, (typ, kind, tag, b, count, interval) in enumerate(entries):
        if typ:
            closes[kind].append(interval)
            continue
        assert count > 0, f"entry {i}: a bin with count 0"
        assert interval not in closes[kind], f"entry {i}: kind {kind}, a bin of interval {interval} after its close"
        key = (interval, kind, tag, b)
        got[key] = got.get(key, 0) + count
        order.setdefault((kind, interval), []).append(tag * em.TAG_BINS + b)
    expected = em.bins(samples)
    wrong = {k: (got.get(k, 0), v) for k, v in expected.items() if got.get(k, 0) != v}
    extra = {k: v for k, v in got.items() if k not in expected}
    assert not wrong and not extra, f"bins (interval, kind, tag, bin): (got, expected) {wrong}, unexpected {extra}"
    for kind in range(em.N_KINDS):
        assert closes[kind] == list(range(first, last + 1)), \
            f"kind {kind}: closes {closes[kind]}, expected {first}..{last}"
    return order


def check_stats(stats, samples, lost=0, windows=None):
    """Every statistic exact against the model (``samples``: those that came through, of
    ``windows``; the rest lost)."""
    model = em.stats(samples)
    assert stats["samples"] == len(samples) == (len(samples) if windows is None else windows - lost)
    assert (stats["samples_lost"], stats["bins_lost"], stats["outliers_lost"]) == (lost, 0, 0)
    for k, m in enumerate(model):
        got = {f: stats[f"k{k}_{f}"] for f in ("misses", "duplicates", "below")}
        assert got == dict(misses=m.misses, duplicates=m.duplicates, below=m.below), f"kind {k}"
        for t in range(2):
            got = {f: stats[f"k{k}_t{t}_{f}"] for f in ("count", "min", "max", "sum")}
            assert got == dict(count=m.count[t], min=m.min[t], max=m.max[t], sum=m.sum[t]), f"kind {k}, tag {t}"


async def finish(tb, cfg, roles, stimuli, first_tick, lost=0):
    """Flush, then check bins, closes and statistics against the model; returns the samples."""
    end = await tb.flush()
    samples = em.samples(cfg, roles, tb.edges(stimuli), end)
    check_bins(tb.entries, samples, first_tick >> cfg.interval_shift, end >> cfg.interval_shift)
    check_stats(await tb.statistics(), samples, lost)
    return samples


def random_responses(tb, rng, rises, isr_max=300, task_max=300, tag=0.2):
    """Random ISR and task pulses after each rise (misses, duplicates, the task before the ISR at
    times), and tag pulses on some."""
    r = Responses(tb)
    for s in rises:
        if rng.random() < 0.9:
            isr = s + rng.randint(0, isr_max)
            r.pulse(ISR, isr, rng.randint(1, 20))
            if rng.random() < 0.1:
                r.pulse(ISR, isr + 30, 2)
            if rng.random() < 0.9:
                r.pulse(TASK, isr + rng.randint(-20, task_max), 3)
        if rng.random() < tag:
            r.pulse(TAG, s + rng.randint(-50, 200), rng.randint(1, 300))
    return r


# Histograms ---------------------------------------------------------------------------------------

@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def bins_exact_random(dut, clocks):
    """Random responses to a dithered stimulus over five intervals of the smallest shift, the raw
    path off: bins exact per interval, kind and tag, closes after their bins, statistics, misses,
    duplicates, below range (offset 40); no record reaches the raw FIFO."""
    cfg, roles = default_config(interval_shift=SHIFT, offset=40)
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0])
    rng = random.Random(clocks[1])
    first = await tb.run_start()
    n = 450
    stim = StimulusConfig(mode=DITHER, period=700, jitter=300, width=3, count=n, seed=5, start_time=first + 400)
    rises = stimulus_rises(stim, n)
    random_responses(tb, rng, rises)
    await start_stimulus(tb, (STIM, stim))
    await tb.sleep_until(rises[-1] + 2000)
    samples = await finish(tb, cfg, roles, [(STIM, stim, n)], first)
    st = em.stats(samples)
    assert (rises[-1] >> SHIFT) - (first >> SHIFT) >= 4
    assert all(s.misses and s.below for s in st) and st[0].duplicates and all(s.count[1] for s in st)
    assert tb.raw_records == 0
    assert await tb.snapshot_drops() == (0, [0] * tb.n_channels)


@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def interval_boundaries_and_spills(dut, clocks):
    """Stimuli on the boundary tick B = 2**16 (its sample is in interval 1) and on B2 - 1 (the last
    tick of interval 1); ten tagged samples on each side of B in the same bins: those of interval 1
    land before the sweep of interval 0 reaches the bins, which spill (ahead of the sweep's address
    order: one more tagged sample of interval 0 sits in lower bins, swept after the spill) and
    still sum exactly."""
    cfg, roles = default_config(interval_shift=SHIFT)
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0] + 1)
    rng = random.Random(clocks[1] + 1)
    b, b2, period = INTERVAL, 2 * INTERVAL, 255          # 65535 = 257 * 255: rises at B and B2 - 1
    first = await tb.run_start()
    before = (b - first - 300) // period
    n = before + 257 + 8
    stim = StimulusConfig(mode=PERIODIC, period=period, width=2, count=n, start_time=b - before * period)
    rises = stimulus_rises(stim, n)
    assert b in rises and b2 - 1 in rises and b2 - 1 + period in rises
    r = Responses(tb)
    special = {b2 - 1: 252, b2 - 1 + period: 253}        # unique ISR latencies
    for s in rises:
        if s in special:
            r.pulse(ISR, s + special[s], 1)
        elif s == b - 11 * period:                          # tagged, bins below the spilled ones
            r.pulse(TAG, s - 2, 100)
            r.pulse(ISR, s + 5, 2)
            r.pulse(TASK, s + 200, 2)
        elif b - 10 * period <= s < b + 10 * period:       # tagged, the same bins on both sides of B
            r.pulse(TAG, s - 2, 100)
            r.pulse(ISR, s + 10, 2)
            r.pulse(TASK, s + 245, 2)
        elif rng.random() < 0.95:                          # untagged, bins the sweep reaches late
            isr = s + rng.randint(100, 150)
            r.pulse(ISR, isr, 1)
            r.pulse(TASK, isr + rng.randint(80, 100), 1)
    await start_stimulus(tb, (STIM, stim))
    await tb.sleep_until(rises[-1] + 1000)
    end = await tb.flush()
    samples = em.samples(cfg, roles, tb.edges([(STIM, stim, n)]), end)
    order = check_bins(tb.entries, samples, first >> SHIFT, end >> SHIFT)
    check_stats(await tb.statistics(), samples)
    model = em.bins(samples)
    # B's sample is in interval 1 (ten tagged on each side of B); B2 - 1's is the last of interval 1.
    assert model[(0, 0, 1, 10)] == 10 and model[(1, 0, 1, 10)] == 10
    assert model[(1, 0, 0, 252)] == 1 and model[(2, 0, 0, 253)] == 1
    for kind in range(em.N_KINDS):
        sequence = order[(kind, 0)]
        assert sequence != sorted(sequence), f"kind {kind}: no spill (interval 0's bins all in sweep order)"


def warped(edges, warps):
    """The model's timeline of a run whose window ages were pushed on: ``warps`` [(tick, ticks)],
    each inserting ``ticks`` ticks at ``tick`` (every later edge that much later)."""
    out = []
    for t, ch, lv in edges:
        out.append((t + sum(j for at, j in warps if at <= t), ch, lv))
    return out


@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def overflow_bin_and_large_values(dut, clocks):
    """Values from 2**24 ticks on go to the overflow bin (2304, tagged and untagged: the last words
    of the bank half and of the bank), 2**24 - 1 to the last regular bin; values near 2**32 keep
    exact max and 64-bit sums.

    A window 2**24 ticks long takes minutes to simulate: each of these windows has its age pushed
    on in the middle of a quiet stretch (the pairing's ``window_age`` register, deposited), and the
    model inserts the same ticks at that point of its timeline."""
    cfg, roles = default_config(interval_shift=SHIFT)
    tb = await start_engine_tb(dut, clocks, cfg)
    first = await tb.run_start()
    period, n = 4000, 4
    stim = StimulusConfig(mode=PERIODIC, period=period, width=2, count=n, start_time=first + 500)
    s = stimulus_rises(stim, n)
    top = 1 << 24
    # (window, ISR latency, task latency or None, tagged, age pushed on by)
    windows = [(0, 1000, 1001, False, top - 1 - 1000), (1, 1000, 1500, True, top + 5 - 1000),
               (2, 2000, None, True, 0xFFFFFFF0 - 2000), (3, 50, 60, False, 0)]
    for w, isr, task, tagged, _ in windows:
        tb.pulse(ISR, s[w] + isr, 2)
        if task is not None:
            tb.pulse(TASK, s[w] + task, 2)
        if tagged:
            tb.pulse(TAG, s[w] + 300, 10)
    await start_stimulus(tb, (STIM, stim))
    age = dut.measurementengine_pairing_window_age
    warps = []
    for w, _, _, _, push in windows:
        if push:
            await tb.wait_until(s[w] + 600)
            age.value = unsigned(age) + push
            warps.append((s[w] + 600, push))
    await tb.sleep_until(s[-1] + 1000)
    end = await tb.flush()
    samples = em.samples(cfg, roles, warped(tb.edges([(STIM, stim, n)]), warps), end + sum(j for _, j in warps))
    for sample, real in zip(samples, s):     # back to the real ticks
        sample.start, sample.interval = real, real >> SHIFT
    check_bins(tb.entries, samples, first >> SHIFT, end >> SHIFT)
    check_stats(await tb.statistics(), samples)
    model = em.bins(samples)
    ovf = em.OVERFLOW_BIN
    assert model[(0, 0, 0, ovf - 1)] == 1 and model[(0, 1, 0, ovf)] == 1
    assert model[(0, 0, 1, ovf)] == 2 and model[(0, 1, 1, ovf)] == 1
    assert em.stats(samples)[0].sum[1] > 1 << 32


# Spacing ------------------------------------------------------------------------------------------

# The rigs' own clock ratios (ts, sys periods in ps): the simulated rig's one clock, the boards' 140
# over 50 MHz (2.8), and MAX_TS_PER_SYS (3), where sys takes a sample exactly every MIN_SPACING ticks.
RIG_CLOCKS = [(20_000, 20_000), (7_142, 20_000), (10_000, 30_000)]


@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def min_spacing_nothing_lost(dut, clocks):
    """Stimuli MIN_SPACING (12) ticks apart across two interval boundaries (the sweeps share the
    banks with a sample every other slot), ISR edges from stim1 dithered around them: every sample
    binned, nothing lost."""
    await min_spacing_run(dut, clocks)


@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=RIG_CLOCKS)
async def min_spacing_nothing_lost_at_the_rigs_ratios(dut, clocks):
    """As min_spacing_nothing_lost, at the simulated rig's and the boards' clock ratios and at the
    highest one a build accepts (docs/engine.md, "Minimum spacing, end to end")."""
    await min_spacing_run(dut, clocks)


async def min_spacing_run(dut, clocks):
    cfg, roles = custom_config(STIM, STIM1, TASK, interval_shift=SHIFT)
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0] + 3)
    first = await tb.run_start()
    start = first + 400
    n = (2 * INTERVAL + 1000 - start) // MIN_SPACING
    stim = StimulusConfig(mode=PERIODIC, period=MIN_SPACING, width=2, count=n, start_time=start)
    isr = StimulusConfig(mode=DITHER, period=MIN_SPACING, jitter=1, width=3, count=n, seed=9, start_time=start + 3)
    await start_stimulus(tb, (STIM, stim), (STIM1, isr))
    await tb.sleep_until(start + n * MIN_SPACING + 100)
    samples = await finish(tb, cfg, roles, [(STIM, stim, n), (STIM1, isr, n)], first)
    assert len(samples) == n and sum(isinstance(s.values[0], int) for s in samples) > 0.9 * n
    # Thousands of samples in a few bins an interval: full words spilled (this build's words count
    # to 255), in the intervals of their samples (finish checked the sums per interval).
    full = 1 << VARIANTS["engine"]["engine_word_count_bits"]
    spills = {interval for typ, _, _, _, count, interval in tb.entries if not typ and count == full}
    assert len(spills) >= 2, spills


def check_consistent(entries, stats, samples):
    """When windows were lost at the crossing (which ones is not known): every window is counted
    or lost; per kind the binned, missed and below-range samples add up to the windows counted;
    the bins hold each tag's count, and never more per bin than the model's."""
    assert stats["samples"] + stats["samples_lost"] == len(samples)
    model, got = em.bins(samples), {}
    for typ, kind, tag, b, count, interval in entries:
        if not typ:
            got[(interval, kind, tag, b)] = got.get((interval, kind, tag, b), 0) + count
    assert all(count <= model.get(key, 0) for key, count in got.items()), (got, model)
    for k in range(em.N_KINDS):
        counted = [stats[f"k{k}_t{t}_count"] for t in range(2)]
        assert sum(counted) + stats[f"k{k}_misses"] + stats[f"k{k}_below"] == stats["samples"], f"kind {k}"
        for t in range(2):
            assert sum(c for (_, kind, tag, _), c in got.items() if (kind, tag) == (k, t)) == counted[t]


@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def spacing_4_lost_at_the_crossing(dut, clocks):
    """Stimuli MIN_INTERVAL (4) ticks apart across an interval boundary, each answered a tick later:
    with sys taking a sample every 2 * SLOT of its cycles, the crossing's FIFO overflows when that
    is longer than 4 ticks, and each window it drops is counted. Every window that came through
    gives an outlier record (threshold 0), so the test knows which: those are binned exactly, and
    the statistics are theirs."""
    assert MIN_INTERVAL == 4
    cfg, roles = custom_config(STIM, STIM1, TASK, interval_shift=SHIFT, thresholds=(0, None, None))
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0] + 4)
    tb.ready["outlier"] = 1.0
    first = await tb.run_start()
    start = (((first >> SHIFT) + 1) << SHIFT) - 1500
    n = 800
    stim = StimulusConfig(mode=PERIODIC, period=4, width=2, count=n, start_time=start)
    isr = StimulusConfig(mode=PERIODIC, period=4, width=2, count=n, start_time=start + 1)
    await start_stimulus(tb, (STIM, stim), (STIM1, isr))
    await tb.sleep_until(start + 4 * n + 100)
    end = await tb.flush()
    samples = em.samples(cfg, roles, tb.edges([(STIM, stim, n), (STIM1, isr, n)]), end)
    assert len(samples) == n and all(s.values[0] == 1 for s in samples)
    came = {o[0] for o in tb.outliers}
    kept = [s for s in samples if s.start in came]
    assert len(came) == len(kept)
    lost = n - len(kept)
    sys_ticks_per_sample = 2 * SLOT * clocks[1] / clocks[0]
    if sys_ticks_per_sample > 4:
        assert lost > n * (1 - 4 / sys_ticks_per_sample) - 3 * CROSSING_DEPTH, (lost, sys_ticks_per_sample)
    else:
        assert lost == 0
    check_bins(tb.entries, kept, first >> SHIFT, end >> SHIFT)
    check_stats(await tb.statistics(), kept, lost=lost, windows=n)


@cocotb.test(**needs("engine"))
async def spacing_below_min_lost_at_the_highest_ratio(dut):
    """At ts = MAX_TS_PER_SYS x sys, stimuli one tick closer than MIN_SPACING (11) across an interval
    boundary (about 3,500 windows): sys takes one every 12 ticks, so once the crossing's FIFO is full
    about one window in 12 is lost, each counted; what came through adds up. MIN_SPACING is the
    limit there, not a margin."""
    clocks = RIG_CLOCKS[-1]
    assert clocks[1] == MAX_TS_PER_SYS * clocks[0] and MIN_SPACING == 2 * SLOT * MAX_TS_PER_SYS
    cfg, roles = custom_config(STIM, STIM1, TASK, interval_shift=SHIFT)
    tb = await start_engine_tb(dut, clocks, cfg, seed=11)
    first = await tb.run_start()
    start, spacing = first + 400, MIN_SPACING - 1
    n = (INTERVAL + 1000 - start) // spacing
    stim = StimulusConfig(mode=PERIODIC, period=spacing, width=2, count=n, start_time=start)
    isr = StimulusConfig(mode=PERIODIC, period=spacing, width=2, count=n, start_time=start + 3)
    await start_stimulus(tb, (STIM, stim), (STIM1, isr))
    await tb.sleep_until(start + n * spacing + 100)
    end = await tb.flush()
    samples = em.samples(cfg, roles, tb.edges([(STIM, stim, n), (STIM1, isr, n)]), end)
    stats = await tb.statistics()
    check_consistent(tb.entries, stats, samples)
    expected = n * (1 - spacing / MIN_SPACING)
    dut._log.info(f"spacing {spacing}: {stats['samples_lost']} of {n} windows lost (about {expected:.0f} expected)")
    assert expected - CROSSING_DEPTH - 8 <= stats["samples_lost"] <= expected + 8, (stats["samples_lost"], expected)


@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def spacing_2_lost_counted(dut, clocks):
    """Starts 2 ticks apart (an input as the start channel, below the engine's minimum), responses
    at random: each window lost at the crossing is counted, and what came through adds up."""
    cfg, roles = custom_config(SPARE, ISR, TASK, interval_shift=SHIFT)
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0] + 5)
    rng = random.Random(clocks[1] + 5)
    first = await tb.run_start()
    r = Responses(tb)
    t0, n = first + 300, 300
    for i in range(n):
        s = t0 + 2 * i
        tb.pulse(SPARE, s, 1)
        if rng.random() < 0.8:
            r.pulse(ISR, s + rng.randint(0, 1), 1)
    await tb.sleep_until(t0 + 2 * n + 100)
    end = await tb.flush()
    samples = em.samples(cfg, roles, tb.edges(), end)
    stats = await tb.statistics()
    check_consistent(tb.entries, stats, samples)
    assert stats["samples_lost"] > 0 or 2 * SLOT * clocks[1] <= 2 * clocks[0]


@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def deadline_ends_windows(dut, clocks):
    """Deadline D: a window is [S, S + D) unless the next start comes first; responses and tag
    edges at S + D - 1 count, at S + D not; the trigger waits in live windows only."""
    d = 100
    cfg, roles = default_config(interval_shift=SHIFT, deadline=d, trigger=Trigger(threshold=d - 1, width=2))
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0] + 10)
    first = await tb.run_start()
    n = 12
    stim = StimulusConfig(mode=BURST, burst_count=2, burst_spacing=60, period=500, width=2, count=n,
                          start_time=first + 400)
    rises = stimulus_rises(stim, n)
    r = Responses(tb)
    for i, s in enumerate(rises):
        if i % 2 == 0:                          # ended by the next start, 60 ticks on
            r.pulse(ISR, s + 10, 1)
            r.pulse(TASK, s + 59, 1)
        else:                                   # ended by the deadline: at its last tick, then at it
            late = d - 1 + (i >> 1 & 1)
            r.pulse(ISR, s + late, 1)
            r.pulse(TASK, s + late - 5, 1)
            r.pulse(TAG, s + late, 1)
    await start_stimulus(tb, (STIM, stim))
    await tb.sleep_until(rises[-1] + 600)
    samples = await finish(tb, cfg, roles, [(STIM, stim, n)], first)
    assert tb.trigger_runs == em.trigger_high(cfg, samples, tb.params["trigger_delay"]) != []
    second = samples[1::2]                                # windows ended by the deadline
    assert [s.values[0] is None for s in second] == [i & 1 == 1 for i in range(len(second))]
    assert [s.tag_in for s in second] == [int(i & 1 == 0) for i in range(len(second))]


@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def active_low_roles(dut, clocks):
    """Every role at its low level: the stimulus's falling edge starts a window (an inverted
    stimulus's active edge), the ISR, the task and the tag are active low (the DUT pulls them down):
    bins, statistics and tags exact against the host's pairing of the same edges."""
    roles = em.rig_roles(stimulus_active=0, active_low=(ISR, TASK, TAG))
    cfg = EngineConfig.from_roles(roles, interval_shift=SHIFT, deadline=0)
    assert (cfg.start[1], cfg.isr[1], cfg.task[1], cfg.tag[1]) == (0, 0, 0, 0)
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0] + 3)
    rng = random.Random(clocks[1] + 3)
    first = await tb.run_start()
    n, width = 150, 3
    stim = StimulusConfig(mode=DITHER, period=700, jitter=300, width=width, count=n, seed=9, start_time=first + 400)
    rises = stimulus_rises(stim, n)
    random_responses(tb, rng, rises)
    await start_stimulus(tb, (STIM, stim))
    await tb.sleep_until(rises[-1] + 2000)
    samples = await finish(tb, cfg, roles, [(STIM, stim, n)], first)
    # Windows start at the pulses' ends; the tag (low while idle) is in nearly every window.
    assert [s.start for s in samples] == [r + width for r in rises]
    assert sum(s.tag_in for s in samples) > n // 2 and any(isinstance(s.values[0], int) for s in samples)


# Flush, clear --------------------------------------------------------------------------------------

@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def flush_closes_window_and_intervals(dut, clocks):
    """A window of interval 0 still open in interval 1: neither interval closes. Flush closes the
    window (its sample is counted) and both intervals; status.flushed rises only once every bin and
    close is out (polled as fast as the bus allows, then nothing more comes)."""
    cfg, roles = default_config(interval_shift=SHIFT)
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0] + 6)
    rng = random.Random(clocks[1] + 6)
    first = await tb.run_start()
    n = (INTERVAL - first - 1000) // 1500
    stim = StimulusConfig(mode=PERIODIC, period=1500, width=2, count=n, start_time=INTERVAL - 1500 * n + 500)
    rises = stimulus_rises(stim, n)
    random_responses(tb, rng, rises[:-1], tag=0.3)
    tb.pulse(ISR, rises[-1] + 3000, 2)          # the last window's, after the boundary
    await start_stimulus(tb, (STIM, stim))
    await tb.sleep_until(INTERVAL + 5000)
    await tb.drain()
    assert not any(e[0] for e in tb.entries), "an interval closed with a window of it open"
    assert (await tb.statistics())["samples"] == n - 1
    end = await tb.now()
    await tb.control(flush=1)
    while not (await tb.status())["flushed"]:
        pass
    await tb.drain(quiet=16)
    samples = em.samples(cfg, roles, tb.edges([(STIM, stim, n)]), end)
    assert samples[-1].raw[0] == 3000
    seen = len(tb.entries)
    check_bins(tb.entries, samples, 0, 1)
    check_stats(await tb.statistics(), samples)
    status = await tb.status()
    assert status["flushed"] and not status["busy"] and status["running"]
    await tb.sleep_until(await tb.now() + 20_000)
    assert len(tb.entries) == seen and (await tb.status())["flushed"]


@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def clear_then_second_run(dut, clocks):
    """A run left unflushed (counts in the banks, an interval open), then clear: statistics zero,
    not running; a second run in the same interval gives exactly its own bins and statistics."""
    cfg, roles = default_config(interval_shift=SHIFT + 1)
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0] + 7)
    rng = random.Random(clocks[1] + 7)
    await tb.run_start()
    await tb.wait_engine("running")
    first_run = StimulusConfig(mode=PERIODIC, period=300, width=2, count=60, start_time=await tb.now() + 300)
    random_responses(tb, rng, stimulus_rises(first_run, 60), tag=0.3)
    await start_stimulus(tb, (STIM, first_run))
    await tb.sleep_until(stimulus_rises(first_run, 60)[-1] + 600)
    stats = await tb.statistics()
    assert stats["samples"] == 59 and stats["k0_t0_count"] > 0     # the last window still open
    await tb.clear()
    await tb.drain()
    assert not (await tb.status())["running"]
    zero = await tb.statistics()
    assert all(v == (0xFFFFFFFF if k.endswith("_min") else 0) for k, v in zero.items()), zero

    tb.entries.clear()
    tb.restart_changes()
    first = await tb.run_start()
    assert first + 30_000 < 1 << cfg.interval_shift, "both runs in interval 0"
    second = StimulusConfig(mode=PERIODIC, period=300, width=2, count=50, start_time=first + 300)
    random_responses(tb, rng, stimulus_rises(second, 50), tag=0.3)
    await start_stimulus(tb, (STIM, second))
    await tb.sleep_until(stimulus_rises(second, 50)[-1] + 600)
    samples = await finish(tb, cfg, roles, [(STIM, second, 50)], first)
    assert len(samples) == 50


# Trigger-out ---------------------------------------------------------------------------------------

@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def trigger_exact_ticks(dut, clocks):
    """The trigger pin, raw path on: high from S + threshold + trigger_delay for `width` ticks when
    the response has not come by then (at the threshold tick itself included), no pulse for one
    before it; with on_late a second pulse when the late response comes (merged when they touch);
    the other response does not count."""
    delay = None
    for run, trigger in enumerate([Trigger(threshold=200, response="isr", width=7),
                                   Trigger(threshold=150, response="task", width=3, on_late=True)]):
        cfg, roles = default_config(interval_shift=SHIFT, trigger=trigger, raw=True)
        if run == 0:
            tb = await start_engine_tb(dut, clocks, cfg)
            delay = tb.params["trigger_delay"]
        else:
            await tb.clear()
            await tb.configure(cfg)
            tb.restart_changes()
            tb.trigger_runs.clear()
        first = await tb.run_start()
        t = trigger.threshold
        mine, other = (ISR, TASK) if trigger.response == "isr" else (TASK, ISR)
        # Response latency per window (None: none); the other response at 10 in the last one.
        latencies = [None, 50, t - 1, t, t + 100, t + 1, None]
        stim = StimulusConfig(mode=PERIODIC, period=1000, width=2, count=len(latencies), start_time=first + 500)
        s = stimulus_rises(stim, len(latencies))
        for w, lat in enumerate(latencies):
            if lat is not None:
                tb.pulse(mine, s[w] + lat, 2)
        tb.pulse(other, s[-1] + 10, 2)
        await start_stimulus(tb, (STIM, stim))
        await tb.sleep_until(s[-1] + 900)
        end = await tb.flush()
        samples = em.samples(cfg, roles, tb.edges([(STIM, stim, len(s))]), end)
        expected = em.trigger_high(cfg, samples, delay)
        assert tb.trigger_runs == expected
        high = [s[w] + t + delay for w in (0, 3, 4, 5, 6)]
        if trigger.on_late:
            high.append(s[4] + t + 100 + delay)     # window 5's late pulse extends its first
        assert sorted(lo for lo, _ in expected) == sorted(high)
        assert tb.raw_records > 0


# Outliers ------------------------------------------------------------------------------------------

@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def outlier_records_exact(dut, clocks):
    """Thresholds per kind (none for isr_to_task): one record for exactly the samples with a value
    above its kind's threshold, with the start tick, the three values (misses 0xFFFFFFFF, below range
    0xFFFFFFFE) and the tag flags."""
    cfg, roles = default_config(interval_shift=SHIFT, offset=20, thresholds=(150, 280, None))
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0] + 8)
    rng = random.Random(clocks[1] + 8)
    first = await tb.run_start()
    n = 120
    stim = StimulusConfig(mode=DITHER, period=600, jitter=100, width=2, count=n, seed=3, start_time=first + 400)
    rises = stimulus_rises(stim, n)
    for s, isr in zip(rises, (150, 151)):              # values at the threshold and one above
        tb.pulse(ISR, s + 20 + isr, 2)
    random_responses(tb, rng, rises[2:], tag=0.4)
    await start_stimulus(tb, (STIM, stim))
    await tb.sleep_until(rises[-1] + 1000)
    samples = await finish(tb, cfg, roles, [(STIM, stim, n)], first)
    expected = em.outliers(cfg, samples)
    assert [start for start, _, _ in expected[:1]] == rises[1:2]
    assert tb.outliers == expected
    words = [v for _, v, _ in expected]
    assert any(w & 0xFFFFFFFF == em.MISS or w >> 32 & 0xFFFFFFFF == em.MISS for w in words)
    assert any(w >> 64 == em.BELOW or w & 0xFFFFFFFF == em.BELOW for w in words)
    assert {f for _, _, f in expected} >= {0, 2, 3}
    assert 10 < len(expected) < n - 10


@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def outliers_lost_counted(dut, clocks):
    """Every sample an outlier, the outlier port stalled: the records that find the FIFO full are
    counted in outliers_lost, and those that got in come out in order, exact."""
    cfg, roles = default_config(tag=False, interval_shift=SHIFT, thresholds=(0, None, None))
    tb = await start_engine_tb(dut, clocks, cfg, seed=clocks[0] + 9)
    tb.ready["outlier"] = 0.0
    first = await tb.run_start()
    n = 40
    stim = StimulusConfig(mode=PERIODIC, period=200, width=2, count=n, start_time=first + 300)
    for s in stimulus_rises(stim, n):
        tb.pulse(ISR, s + 1 + s % 97, 2)
    await start_stimulus(tb, (STIM, stim))
    await tb.sleep_until(stimulus_rises(stim, n)[-1] + 300)
    tb.ready["outlier"] = 1.0
    await tb.drain()
    kept = len(tb.outliers)
    lost = (await tb.statistics())["outliers_lost"]
    end = await tb.flush()                                   # the last window's, with room again
    expected = em.outliers(cfg, em.samples(cfg, roles, tb.edges([(STIM, stim, n)]), end))
    assert len(expected) == n and 8 <= kept < n - 10
    assert tb.outliers == expected[:kept] + expected[-1:]
    assert lost == n - 1 - kept and (await tb.statistics())["outliers_lost"] == lost


# Saturation ----------------------------------------------------------------------------------------

@cocotb.test(**needs("engine"))
@cocotb.parametrize(clocks=CLOCKS)
async def duplicates_saturate_per_window(dut, clocks):
    """65539 duplicate ISR edges (stim1, every 4 ticks) in one window count 0xFFFF; the windows
    before and after count theirs from zero."""
    cfg, roles = custom_config(STIM, STIM1, TASK, interval_shift=24)
    tb = await start_engine_tb(dut, clocks, cfg, ready_probability=1.0)
    first = await tb.run_start()
    start = first + 400
    long = 4 * 65541
    stim = StimulusConfig(mode=BURST, burst_count=2, burst_spacing=40, period=40 + long, width=2, count=3,
                          start_time=start)
    n_isr = 10 + 65541 + 5
    isr = StimulusConfig(mode=PERIODIC, period=4, width=2, count=n_isr, start_time=start + 2)
    await start_stimulus(tb, (STIM, stim), (STIM1, isr))
    await tb.sleep_until(start + 4 * n_isr + 100)
    samples = await finish(tb, cfg, roles, [(STIM, stim, 3), (STIM1, isr, n_isr)], first)
    assert [s.duplicates[0] for s in samples] == [9, 0xFFFF, 4]


# pytest ------------------------------------------------------------------------------------------

@pytest.mark.slow   # the engine's cocotb run: about 80 s
def test_engine():
    run_cocotb(__file__, "engine")


def test_hdr_bin_is_the_hosts():
    """gateware.engine.hdr_bin is HdrHistogram(1, 2**24 - 1, 2)'s counts-array index, overflow bin
    beyond: every value below 2**13, around every power of two, and random ones up to 2**32."""
    rng = random.Random(1)
    values = list(range(1 << 13)) + [(1 << p) + d for p in range(13, 33) for d in range(-3, 4)]
    values += [rng.randrange(1 << rng.randint(8, 32)) for _ in range(20_000)]
    values = [v for v in values if 0 <= v < 1 << 32]
    assert [hdr_bin(v) for v in values] == [em.bin_of(v) for v in values]
    assert em.bin_of((1 << 24) - 1) == em.OVERFLOW_BIN - 1 == 2303 and em.bin_of(1 << 24) == em.OVERFLOW_BIN



def test_statistics_snapshot_is_one_instant():
    """_Statistics alone (Migen's simulator): samples every 2 * SLOT cycles (values near 2**32, so the
    sums carry; misses, below range, tags, duplicates), snapshots asked at every phase of a sample's
    updates while samples keep coming. Each copy holds exactly the first `samples` samples, whole,
    every record through ``index``; after a clear, all zero (min none)."""
    from migen import Signal, run_simulation

    from gateware.engine import STAT_RECORDS, _Statistics

    n = 3
    valid, tag = Signal(), Signal()
    present, below = [Signal() for _ in range(n)], [Signal() for _ in range(n)]
    value, dups = [Signal(32) for _ in range(n)], [Signal(16) for _ in range(n)]
    lost = Signal(32)
    stats = _Statistics(valid, present, below, value, tag, dups, "sys", also=[lost])
    rng = random.Random(2)
    samples = []
    for _ in range(2500):
        kinds = [(rng.choice(["binned", "binned", "miss", "below"]),
                  rng.randrange(0xF0000000, 1 << 32) if rng.random() < 0.5 else rng.randrange(1 << 20),
                  rng.randrange(3)) for _ in range(n)]
        samples.append((rng.randrange(2), kinds))

    def model(m):
        out = {}
        for k in range(n):
            for t in range(2):
                vs = [kinds[k][1] for tg, kinds in samples[:m] if kinds[k][0] == "binned" and tg == t]
                out[stat_index(k, t)] = (len(vs), min(vs, default=0xFFFFFFFF), max(vs, default=0), sum(vs))
            for slot, what in ((STAT_MISSES, "miss"), (STAT_BELOW, "below")):
                out[stat_index(k, slot)] = (sum(kinds[k][0] == what for _, kinds in samples[:m]),)
            out[("dups", k)] = sum(kinds[k][2] for _, kinds in samples[:m])
        return out

    def read_copy():
        got = {}
        for k in range(n):
            for t in range(2):
                yield stats.index.eq(stat_index(k, t))
                yield
                record = []
                for x in (stats.count, stats.min, stats.max, stats.sum):
                    record.append((yield x))
                got[stat_index(k, t)] = tuple(record)
            for slot in (STAT_MISSES, STAT_BELOW):
                yield stats.index.eq(stat_index(k, slot))
                yield
                got[stat_index(k, slot)] = ((yield stats.count),)
            got[("dups", k)] = (yield stats.duplicates)
        return got

    copies = []

    def feeder():
        for _ in range(STAT_RECORDS + 4):   # the clear first (the engine is stopped then)
            yield
        for i, (t, kinds) in enumerate(samples):
            yield valid.eq(1)
            yield tag.eq(t)
            for k, (what, v, dup) in enumerate(kinds):
                yield present[k].eq(what == "binned")
                yield below[k].eq(what == "below")
                yield value[k].eq(v)
                yield dups[k].eq(dup)
            yield lost.eq(1000 + i)
            yield
            yield valid.eq(0)
            for _ in range(2 * SLOT - 1):
                yield

    def pulse(strobe):
        yield strobe.eq(1)
        yield
        yield strobe.eq(0)
        yield

    def take_copy():
        yield from pulse(stats.snapshot)
        while not (yield stats.valid):
            yield

    def snapper():
        yield from pulse(stats.clear)
        for phase in range(2 * SLOT * 8):
            for _ in range(37 + phase):   # every phase of a sample's updates, in turn
                yield
            yield from take_copy()
            m = yield stats.samples
            copies.append((m, (yield stats.also[0]), (yield from read_copy())))
        while (yield stats.samples) < len(samples):
            yield from take_copy()
        yield from pulse(stats.clear)
        for _ in range(STAT_RECORDS + 2):
            yield
        yield from take_copy()
        copies.append((0, None, (yield from read_copy())))

    run_simulation(stats, [feeder(), snapper()])
    assert len(copies) == 2 * SLOT * 8 + 1
    seen = {m for m, _, _ in copies}
    assert len(seen) > 10 and max(seen) < len(samples)
    for m, lost_copy, got in copies:
        assert got == model(m), f"copy of {m} samples"
        if lost_copy is not None:   # the counters kept elsewhere, taken at the same instant
            assert lost_copy == 1000 + m, f"copy of {m} samples"


def _pairing_alone(deadline=0, threshold=0, response=0, on_late=0):
    """_Pairing by itself for Migen's simulator, its decode inputs and settings plain signals (the
    settings their reset values): (pairing, decode inputs)."""
    from types import SimpleNamespace

    from migen import Signal

    from gateware.engine import _Pairing

    d = SimpleNamespace(start=Signal(), isr=Signal(), task=Signal(), tag_edge=Signal(), tag=Signal(),
                        tick=Signal(64), interval=Signal(32))
    cfg = SimpleNamespace(deadline=Signal(32, reset=deadline), trigger_threshold=Signal(32, reset=threshold),
                          trigger_response=Signal(reset=response), trigger_on_late=Signal(reset=on_late))
    return _Pairing(d, cfg, "sys"), d


def _begin(pairing):
    """A run begins (one cycle of ``begin``)."""
    yield pairing.begin.eq(1)
    yield
    yield pairing.begin.eq(0)


@pytest.mark.parametrize("threshold", [1, 3])
@pytest.mark.parametrize("deadline", [1, 2, 3, 5, 0])
def test_pairing_short_deadlines_exact(deadline, threshold):
    """_Pairing alone (Migen's simulator) with deadlines of 1, 2, 3 and 5 ticks and none, starts 1
    to 8 ticks apart and responses on random ticks: every window's found flags, latencies and
    duplicates equal the window [S, min(next start, S + deadline)) of the definition, and the
    trigger pulses exactly at the ticks the definition gives (threshold 1 on the ISR; threshold 3
    on the task, with on_late). The deadline's last tick and the trigger's threshold compares are
    decided a tick ahead in the gateware; these are their edge cases."""
    from migen import run_simulation

    rng = random.Random(deadline)
    response, on_late = int(threshold == 3), int(threshold == 3)
    pairing, d = _pairing_alone(deadline, threshold, response, on_late)
    ticks = 600
    starts = set()
    t = 20
    while t < ticks - 40:
        starts.add(t)
        t += rng.randint(1, 8)
    isr = {t for t in range(ticks) if rng.random() < 0.3}
    task = {t for t in range(ticks) if rng.random() < 0.2}
    got, triggers = [], []

    def drive():
        yield from _begin(pairing)
        for tick in range(ticks):
            yield d.tick.eq(tick)
            yield d.start.eq(tick in starts)
            yield d.isr.eq(tick in isr)
            yield d.task.eq(tick in task)
            yield
            s = pairing.sample
            if (yield s.valid):
                got.append(((yield s.start), (yield s.found_isr), (yield s.isr), (yield s.dup_isr),
                            (yield s.found_task), (yield s.task), (yield s.dup_task)))
            if (yield pairing.trigger):
                # Migen's simulator: inputs written at this cycle are seen by the next clock edge,
                # so a register read here holds what the previous tick's inputs made.
                triggers.append(tick - 1)

    run_simulation(pairing, [drive()])
    ordered = sorted(starts)
    expected, expected_triggers = [], []
    for i, s in enumerate(ordered):
        end = ordered[i + 1] if i + 1 < len(ordered) else ticks
        if deadline:
            end = min(end, s + deadline)
        row = [s]
        for edges in (isr, task):
            hits = [e for e in range(s, end) if e in edges]
            row += [int(bool(hits)), hits[0] - s if hits else 0, max(len(hits) - 1, 0)]
        expected.append(tuple(row))
        edges = (isr, task)[response]
        for t in range(s + 1, end):     # the trigger: not at the start tick, while still waiting
            age = t - s
            waiting = not any(e in edges for e in range(s, t))
            if waiting and (age == threshold or on_late and t in edges and age > threshold):
                expected_triggers.append(t)
    if not deadline:
        expected = expected[:-1]        # the last window stays open: no deadline, no flush
    assert got == expected, f"deadline {deadline}"
    assert triggers == expected_triggers
    assert len(triggers) > 10 or 0 < deadline <= threshold     # windows too short to reach it


@pytest.mark.parametrize("threshold", [3, (1 << 16) + 5])
def test_pairing_trigger_once_in_a_long_window(threshold):
    """A window open for more than 2**16 ticks with no response: the trigger pulses once, at the
    threshold, not again when the age's low half comes round to it (the threshold is compared in two
    registered halves), and a threshold above 2**16 is not taken at its low half alone."""
    from migen import run_simulation

    pairing, d = _pairing_alone(threshold=threshold)
    start, ticks = 5, (1 << 16) + 4000
    triggers = []

    def drive():
        yield from _begin(pairing)
        for tick in range(ticks):
            yield d.start.eq(tick == start)
            yield
            if (yield pairing.trigger):
                triggers.append(tick - 1)     # a register read here: the previous tick's (see above)

    run_simulation(pairing, [drive()])
    assert triggers == [start + threshold]


def test_pairing_deadline_above_two_to_the_sixteen():
    """A deadline of 2**16 + 7 ticks: the window ends at its last tick, not when the age's low half
    first matches the deadline's (``reaching`` is compared in two registered 16-bit halves). An ISR
    at the window's last tick is found, a task one tick later is not, and the window closes once."""
    from migen import run_simulation

    deadline = (1 << 16) + 7
    pairing, d = _pairing_alone(deadline)
    start, ticks = 5, deadline + 40
    got = []

    def drive():
        yield from _begin(pairing)
        for tick in range(ticks):
            yield d.tick.eq(tick)
            yield d.start.eq(tick == start)
            yield d.isr.eq(tick in (start + 7, start + deadline - 1))
            yield d.task.eq(tick == start + deadline)
            yield
            s = pairing.sample
            if (yield s.valid):
                got.append(((yield s.start), (yield s.found_isr), (yield s.isr), (yield s.dup_isr),
                            (yield s.found_task)))

    run_simulation(pairing, [drive()])
    assert got == [(start, 1, 7, 1, 0)]


class _MemoryRAM36:
    """A stand-in for gateware.bram.RAM36 in Migen's simulator, which cannot run the DP16KD
    instances: the same ports and behaviour as its docstring states (a read's word one cycle after
    its address; a word written at the read's own edge reads as before). RAM36 itself runs on its
    DP16KD model in the Verilator tests above."""
    latency = 1

    def __new__(cls, depth, clock_domain, width=36):
        from migen import READ_FIRST, Memory, Module, Signal

        m = Module()
        m.write_address, m.dat_w, m.we = Signal(max=depth), Signal(width), Signal()
        m.read_address, m.dat_r = Signal(max=depth), Signal(width)
        m.latency = cls.latency
        memory = Memory(width, depth)
        write = memory.get_port(write_capable=True, clock_domain=clock_domain)
        read = memory.get_port(mode=READ_FIRST, clock_domain=clock_domain)
        m.specials += memory, write, read
        m.comb += [
            write.adr.eq(m.write_address), write.dat_w.eq(m.dat_w), write.we.eq(m.we),
            read.adr.eq(m.read_address), m.dat_r.eq(read.dat_r),
        ]
        return m


def test_histogram_bank_counts_each_sample_once_at_any_arrival_rate(monkeypatch):
    """_HistogramBank alone (Migen's simulator), fed faster than the engine's crossing ever feeds it
    (a sample in most cycles, not one every 2 * SLOT): each sample is counted exactly once, in its
    interval's bins or in ``samples_lost`` - those that found another waiting, and those for an
    interval outside the two the bank holds (the one before, the one after next). The bins never count
    more of an (interval, tag, bin) than were offered, and both kinds of loss occur."""
    from migen import Module, Signal, passive, run_simulation

    import gateware.engine as engine

    monkeypatch.setattr(engine, "RAM36", _MemoryRAM36)
    rng = random.Random(14)
    valid, value, tag, interval = Signal(), Signal(32), Signal(), Signal(32)
    top = Module()
    top.submodules.binning = binning = engine._Binning(valid, value, tag, interval, "sys")
    top.submodules.bank = bank = engine._HistogramBank(
        0, binning.valid, binning.bin, binning.tag, binning.ram_address, binning.overflow, binning.interval,
        "sys")
    first = 10
    offered, out_of_range = {}, 0
    # The engine's order: intervals never go back (first, then first + 1, whose samples come while
    # the first is swept), and among them samples for intervals the bank does not hold.
    samples = []
    switch, cycles = 1500, 3000
    for cycle in range(cycles):
        if rng.random() < 0.7:
            iv = first if cycle < switch else first + 1
            if rng.random() < 0.08:
                # Before, after, and (while the bank holds first and first + 1) after next.
                iv = rng.choice([first - 1, first + 2, first + 3] if cycle < switch else [first - 1, first + 3])
            v = rng.choice([rng.randrange(0, 4000), rng.randrange(1 << 24, 1 << 25)])
            samples.append((1, v, rng.randrange(2), iv))
        else:
            samples.append((0, 0, 0, 0))
    entries, lost = [], []

    def drive():
        yield bank.first.eq(first)
        yield bank.begin.eq(1)
        yield
        yield bank.begin.eq(0)
        yield bank.source.ready.eq(1)
        for cycle, s in enumerate(samples):
            for signal, x in zip((valid, value, tag, interval), s):
                yield signal.eq(x)
            # The first interval closes once its last sample is in the bank.
            yield bank.close.eq(cycle == switch + engine._Binning.latency + SLOT)
            yield
        yield valid.eq(0)
        yield bank.close.eq(0)
        for _ in range(2 * SLOT + engine._Binning.latency):
            yield
        yield bank.close.eq(1)
        yield
        yield bank.close.eq(0)
        yield
        while (yield bank.busy):
            yield
        lost.append((yield bank.samples_lost))
        lost.append((yield bank.bins_lost))

    @passive
    def collect():
        while True:
            src = bank.source
            if (yield src.valid) and (yield src.ready):
                entries.append(((yield src.type), (yield src.interval), (yield src.tag), (yield src.bin),
                                (yield src.count)))
            yield

    run_simulation(top, [drive(), collect()])
    for s in samples:
        if s[0]:
            if s[3] not in (first, first + 1):
                out_of_range += 1
            else:
                key = (s[3], s[2], engine.hdr_bin(s[1]))
                offered[key] = offered.get(key, 0) + 1
    offered_total = sum(s[0] for s in samples)
    bins = [e for e in entries if e[0] == engine.ENTRY_BIN]
    closes = [e[1] for e in entries if e[0] == engine.ENTRY_CLOSE]
    counted = {}
    for _, iv, t, b, count in bins:
        counted[iv, t, b] = counted.get((iv, t, b), 0) + count
    samples_lost, bins_lost = lost
    assert closes == [first, first + 1]
    assert bins_lost == 0
    assert sum(counted.values()) + samples_lost == offered_total      # each sample exactly once
    for key, count in counted.items():
        assert count <= offered.get(key, 0), (key, count, [       # and the samples offered in that bin
            (i, s) for i, s in enumerate(samples) if s[0] and engine.hdr_bin(s[1]) == key[2] and s[2] == key[1]])
    assert samples_lost > out_of_range > 0          # and some lost for finding another waiting
