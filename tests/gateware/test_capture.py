"""EdgeCapture (gateware/capture.py) on Verilator against the reference model: exact timestamps,
same-tick edges, an edge every tick, glitch filter and edge select, overflow (exact drop counts,
one marker per gap, recovery), the 64-bit wrap, and the firmware's CSR read-out. Random
backpressure on the record stream; unequal clock ratios (tb.CLOCKS).
"""

import random

import cocotb
import pytest
from cocotb.triggers import ClockCycles

# tb.py and the model sit next to this file, which is on sys.path both under pytest and in the simulator.
from model import ONESHOT, StimulusConfig, stimulus_edges
from tb import CLOCKS, assert_records_equal, kept_and_lost, needs, run_cocotb, start_capture, start_tb

# Capture ---------------------------------------------------------------------------------------

@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def random_edges_exact(dut, clocks):
    """Random edges on all inputs, random backpressure: every edge once, at exactly its tick."""
    tb, configs = await start_capture(dut, clocks, ready_probability=0.6, seed=clocks[0])
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
    tb, configs = await start_capture(dut, clocks)
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
    tb, configs = await start_capture(dut, clocks)
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
    tb, configs = await start_capture(dut, clocks, ready_probability=0.0)
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


@cocotb.test(**needs("default"))
@cocotb.parametrize(clocks=CLOCKS)
async def overflow_gaps_each_marked_once(dut, clocks):
    """Slow random reads against dense edges: the FIFO fills and drains many times. Every record
    that gets through is exact and in order, every lost one is counted, and each gap has exactly
    one marker: at its first lost record, with the channels of every record lost until the next
    marker, never two markers for one gap."""
    tb, configs = await start_capture(dut, clocks, ready_probability=0.15)
    t = tb.drive_random_toggles(random.Random(11), await tb.now() + 20, 6 * tb.params["fifo_depth"], max_gap=3)
    await tb.wait_until(t + 50)
    tb.ready_probability = 1.0
    await tb.settle()
    expected = tb.expected(configs)
    overflow, dropped = await tb.snapshot_drops()

    lost = kept_and_lost(expected, tb.edge_records())
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
    # A gap is known before anything after its start: every record ahead of a marker in the stream
    # is earlier than the marker's tick, and every record lost in its gap earlier than the first
    # record behind it (the host's gap is [marker tick, that record's tick)).
    latest, gap_end, open_gap = -1, {}, None
    for ts, _, _, kind in tb.records:
        if kind == 1:
            assert latest < ts, f"a record at {latest} reached the stream before the marker of the gap from {ts}"
            open_gap = ts
        else:
            latest = ts
            if open_gap is not None:
                gap_end[open_gap], open_gap = ts, None
    for ts, _, _ in lost:
        owner = max(m for m in marker_ticks if m <= ts)
        assert ts < gap_end.get(owner, 1 << 64), f"record lost at {ts} after its gap's end {gap_end[owner]}"


# Across the 64-bit wrap ------------------------------------------------------------------------

@cocotb.test(**needs("wrap"))
@cocotb.parametrize(clocks=CLOCKS)
async def events_across_wrap(dut, clocks):
    """Edges stamped across the 64-bit wrap keep exact timestamps."""
    tb, configs = await start_capture(dut, clocks)
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


# CSR read-out (the firmware's path) -------------------------------------------------------------

@cocotb.test(**needs("csr"))
@cocotb.parametrize(clocks=CLOCKS)
async def records_through_csrs(dut, clocks):
    """Records read through ev_* CSRs (as the firmware does) equal the model, overflow included."""
    tb, configs = await start_capture(dut, clocks)
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


# pytest ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ['default', 'wrap', 'csr'])
def test_capture(variant):
    run_cocotb(__file__, variant)
