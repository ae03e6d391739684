"""StimulusGenerator (gateware/stimulus.py) on Verilator against the reference model, through the
capture core: every mode's edges exact to the tick, seeds, the tightest legal settings, random
arrivals within statistical bounds, late and inverted starts, start times across the 64-bit wrap,
and each channel's count of pulses fired (read through its snapshot) against the pin's rises.
"""

import cocotb
import pytest
from cocotb.triggers import ClockCycles

# tb.py and the model sit next to this file, which is on sys.path both under pytest and in the simulator.
from model import BURST, DITHER, ONESHOT, PERIODIC, RANDOM, StimulusConfig, stimulus_edges, stimulus_rises
from tb import CLOCKS, DONE, LATE, assert_records_equal, needs, run_cocotb, start_capture, start_tb

from gateware.stimulus import MIN_INTERVAL

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


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def stimulus_dither_wide_spans(dut, clocks):
    """Dither intervals with spans of 2**18 ticks and more, where all four 18 x 18 partial products
    of the multiplier count (a shorter jitter leaves the high half of the span 0): the next
    interval, read before the first pulse (the seed's draw) and after it (the fire's draw), equals
    the model's, for spans up to 2**32 - 1999 and seeds with high bits set."""
    tb = await start_tb(dut, clocks)
    next_interval = dut.stimuluschannel0_ditherinterval0_dither_next_interval
    # (P, J, seed); legal settings keep P + J < 2**32.
    cases = [(2**17 + 1000, 2**17, 0x9E3779B9), (2**31 + 999, 2**31 - 1000, 0xFFFFFFFF),
             (2**31 + 2**29, 2**30 + 12345, 0x80000001), (0x7FFFFFFF, 0x7FFF0000, 0x0003FFFF)]
    for period, jitter, seed in cases:
        assert period + jitter < 2**32
        start = await tb.now() + 400
        cfg = StimulusConfig(mode=DITHER, period=period, jitter=jitter, width=2, count=3, seed=seed,
                             start_time=start)
        rises = stimulus_rises(cfg, 3)
        await tb.configure_stimulus(0, cfg)
        await tb.commit_stimulus(0)
        await ClockCycles(dut.sys_clk, 20)
        assert await tb.now() < start - 20
        seed_draw = int(next_interval.value)
        await tb.wait_until(start + 20)
        fire_draw = int(next_interval.value)
        assert (seed_draw, fire_draw) == (rises[1] - rises[0], rises[2] - rises[1]), (period, jitter, seed)
        assert rises[2] - rises[1] >= 2**16, "the draws must reach the high partial products"
    await tb.write_fields("stimulus_ch0_control", enable=0)
    await tb.commit_stimulus(0)


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
        # Fires MIN_INTERVAL apart are each counted once; the commit zeroed the previous case's count.
        assert await tb.read_fired(channel) == n_rises, name


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
    tb, configs = await start_capture(dut, clocks)
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


# Pulses fired -----------------------------------------------------------------------------------

def rises(records, channel, before=None):
    """Rising edges of stimulus ``channel`` among edge records (those at ticks < ``before``)."""
    return sum(1 for t, m, lv in records if m >> channel & 1 and lv >> channel & 1 and (before is None or t < before))


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def stimulus_fired_count(dut, clocks):
    """Each channel's pulse count, read through its snapshot CSR, equals the rises on its pin: a
    snapshot mid-run lies between the rises before the request and those by the time it is valid;
    a run with a count ends at the count; a free-running channel stopped mid-run (its last pulse
    possibly cut short) keeps what it fired through the stop. A commit that starts a channel zeroes
    its count, ``fired_control.clear`` too, and neither touches the other channel's."""
    tb, _ = await start_capture(dut, clocks)
    start = await tb.now() + 300
    counted = StimulusConfig(mode=PERIODIC, period=40, width=5, count=57, start_time=start)
    free = StimulusConfig(mode=BURST, period=90, burst_count=3, burst_spacing=8, width=2, count=0,
                          start_time=start)
    await tb.configure_stimulus(0, counted)
    await tb.configure_stimulus(1, free)
    await tb.commit_stimulus(0, 1)
    await tb.wait_until(start + 1000)
    requested = await tb.now()
    mid_run = await tb.read_fired(0)
    valid_by = await tb.now()
    await tb.wait_until(start + 57 * 40 + 100)
    # Stop the free-running channel: a commit with enable 0.
    await tb.write_fields("stimulus_ch1_control", enable=0, mode=BURST, invert=0, at_time=1)
    await tb.commit_stimulus(1)
    await tb.settle()
    records = tb.edge_records()
    # The count lags the pin by the fire's two registers: pulses that rose by `requested - 3` are in it.
    assert rises(records, 0, requested - 3) <= mid_run <= rises(records, 0, valid_by + 1), (mid_run, requested)
    assert 0 < mid_run < 57
    assert rises(records, 0) == 57 and await tb.read_fired(0) == 57
    stopped = rises(records, 1)
    assert stopped > 3 * (57 * 40 // 90), "the free-running channel ran past the counted one"
    assert await tb.read_fired(1) == stopped
    assert (await tb.read_fields("stimulus_ch1_status"))["done"] == 0, "stopped, not done"
    assert await tb.read_fired(1) == stopped, "a second snapshot of a stopped channel reads the same"

    # A new run on channel 1 zeroes its count at its commit, long before its first pulse.
    tb.records.clear()
    start = await tb.now() + 3000
    again = StimulusConfig(mode=PERIODIC, period=30, width=3, count=4, start_time=start)
    await tb.configure_stimulus(1, again)
    await tb.commit_stimulus(1)
    assert await tb.read_fired(1) == 0
    assert await tb.now() < start
    assert await tb.read_fired(0) == 57, "channel 0 keeps its count"
    await tb.wait_until(start + 4 * 30 + 20)
    await tb.settle()
    assert rises(tb.edge_records(), 1) == 4 and await tb.read_fired(1) == 4
    await tb.write_fields("stimulus_ch0_fired_control", clear=1)
    assert await tb.read_fired(0) == 0, "cleared"
    assert await tb.read_fired(1) == 4, "channel 1 keeps its count"


def test_fired_counter_saturates_and_clears():
    """_FiredCounter alone (Migen's simulator), 3 bits: counts every `count` cycle, back to back,
    stops at 7, and a clear wins over a count in the same cycle."""
    from migen import Signal, run_simulation

    from gateware.stimulus import _FiredCounter

    count, clear = Signal(), Signal()
    counter = _FiredCounter(count, clear, "sys", width=3)
    # (count, clear) per cycle, and the value expected the cycle after.
    steps = [(1, 0)] * 5 + [(0, 0)] * 2 + [(1, 0)] * 4 + [(1, 1), (1, 0), (0, 0), (1, 0)] + [(1, 0)] * 9 + [(0, 1)]
    expected, value = [], 0
    for c, k in steps:
        value = 0 if k else min(value + c, 7)
        expected.append(value)
    got = []

    def drive():
        for c, k in steps:
            yield count.eq(c)
            yield clear.eq(k)
            yield
            got.append((yield counter.value))

    run_simulation(counter, drive())
    # Migen reads the value in the cycle a step is applied: one cycle behind.
    assert got[1:] == expected[:-1]
    assert 7 in got and got.count(7) > 3, "saturated, and held there"


# Across the 64-bit wrap ------------------------------------------------------------------------

@cocotb.test(**needs("wrap"))
@cocotb.parametrize(clocks=CLOCKS)
async def stimulus_across_wrap(dut, clocks):
    """Start times are absolute 64-bit ticks, compared over all 64 bits: a channel started before
    the wrap pulses across it exactly; a start that differs from the current tick only in the top
    16 bits, and lies in the past, is refused as late."""
    tb, configs = await start_capture(dut, clocks)
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


# pytest ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ['default', 'wrap'])
def test_stimulus(variant):
    run_cocotb(__file__, variant)
