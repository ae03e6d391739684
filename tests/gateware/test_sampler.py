"""InputSampler (gateware/sampler.py) through EdgeCapture on Verilator, with the I/O cells' models
(sim_models/IDDRX2F.v with its edge clock, IDDRX1F.v): every input edge's tick *and* sub-tick
position exact (docs/subtick.md), two positions in one record, edges in a tick's first and last
sample, pulses inside a tick and shorter than a sample, a bounce, glitch filter and edge select
with positions, the 64-bit wrap (the two-sample variant starts 3000 ticks before it), and uneven
sample instants recovered by the resolution calibration's code density. Random backpressure;
unequal clock ratios.
"""

import random

import cocotb
import pytest

# tb.py and the model sit next to this file, which is on sys.path both under pytest and in the simulator.
from tb import assert_records_equal, needs, run_cocotb, start_capture

# (ts period, sys period) in ps: ts faster and slower than sys; a sample's time a whole ps.
SUBTICK_CLOCKS = [(10_000, 27_028), (16_000, 10_000)]
WRAP = 2**64


@cocotb.test(**needs("subtick4", "subtick2"))
@cocotb.parametrize(clocks=SUBTICK_CLOCKS)
async def random_subtick_edges_exact(dut, clocks):
    """Random edges on every input at random samples of their ticks: each recorded once, at its
    tick and sample; records that hold several inputs carry each one's position."""
    tb, configs = await start_capture(dut, clocks, ready_probability=0.6, seed=clocks[0])
    rng = random.Random(11 + clocks[1])
    S = tb.samples_per_tick
    t0 = await tb.now() + 20
    for ch in range(tb.first_input, tb.n_channels):
        tick, level = t0, 0
        while tick < t0 + 3500:     # past the wrap in the variant that starts 3000 ticks before it
            tick += rng.randint(1, 40)
            level ^= 1
            tb.drive_subtick(ch, tick, rng.randrange(S), level)
    await tb.settle()
    expected = tb.expected_subtick(configs)
    assert len(expected) >= 400
    assert {f for *_, fractions in expected for f in fractions.values()} == set(range(S))
    assert any(len(set(fractions.values())) > 1 for *_, fractions in expected), "no record with two positions"
    if tb.params["reset_value"]:
        ticks = [t for t, *_ in expected]
        assert min(ticks) < 1000 and max(ticks) > WRAP - 3000, "the run does not cross the 64-bit wrap"
    assert_records_equal(tb.subtick_records(), expected)


@cocotb.test(**needs("subtick4", "subtick2"))
@cocotb.parametrize(clocks=SUBTICK_CLOCKS)
async def first_and_last_sample(dut, clocks):
    """In one tick, inputs changing in the tick's first sample, its last, and between: one record,
    each input's own position; then the other way round."""
    tb, configs = await start_capture(dut, clocks)
    S = tb.samples_per_tick
    t = await tb.now() + 20
    inputs = list(range(tb.first_input, tb.n_channels))
    positions = [0, S - 1, S // 2, max(S // 2 - 1, 0)]
    for ch, k in zip(inputs, positions):
        tb.drive_subtick(ch, t, k, 1)
        tb.drive_subtick(ch, t + 1, S - 1 - k, 0)
    await tb.settle()
    expected = tb.expected_subtick(configs)
    full = sum(1 << ch for ch in inputs)
    assert expected == [
        (t % WRAP, full, full, dict(zip(inputs, positions))),
        ((t + 1) % WRAP, full, 0, {ch: S - 1 - k for ch, k in zip(inputs, positions)}),
    ]
    assert_records_equal(tb.subtick_records(), expected)


@cocotb.test(**needs("subtick4"))
@cocotb.parametrize(clocks=SUBTICK_CLOCKS)
async def pulses_inside_a_tick(dut, clocks):
    """A pulse that starts and ends inside one tick is not an edge, whichever samples it covers; a
    pulse between two samples is not seen at all; a bounce (high, low, high inside a tick) is one
    edge at its first crossing. The edges after them are exact."""
    tb, configs = await start_capture(dut, clocks)
    S, period = tb.samples_per_tick, tb.ts_period
    sample_ps = period // S
    ch = tb.first_input + 2
    t = await tb.now() + 20
    # Covers samples 0 and 1 of tick t, back low before sample 2.
    tb.drive_at_time(t, sample_ps // 2, ch, 1)
    tb.drive_at_time(t, 2 * sample_ps + sample_ps // 2, ch, 0)
    # Between samples 1 and 2 of tick t + 3, a third of a sample wide.
    tb.drive_at_time(t + 3, 2 * sample_ps + sample_ps // 3, ch, 1)
    tb.drive_at_time(t + 3, 2 * sample_ps + 2 * sample_ps // 3, ch, 0)
    # A bounce in tick t + 6: high before sample 0, low before sample 1, high again before sample 2.
    tb.drive_at_time(t + 6, sample_ps // 2, ch, 1)
    tb.drive_at_time(t + 6, sample_ps + sample_ps // 2, ch, 0)
    tb.drive_at_time(t + 6, 2 * sample_ps + sample_ps // 2, ch, 1)
    # A clean fall in the last sample of tick t + 9.
    tb.drive_at_time(t + 9, (S - 1) * sample_ps + sample_ps // 2, ch, 0)
    await tb.settle()
    bit = 1 << ch
    assert_records_equal(tb.subtick_records(), [
        ((t + 6) % WRAP, bit, bit, {ch: 0}),
        ((t + 9) % WRAP, bit, 0, {ch: S - 1}),
    ])


@cocotb.test(**needs("subtick4", "subtick2"))
@cocotb.parametrize(clocks=SUBTICK_CLOCKS)
async def glitch_filter_and_edge_select_keep_positions(dut, clocks):
    """Glitch filters (2, 3 ticks) and edge selects (rising only, falling only) on inputs toggling
    1 to 6 ticks apart at random samples: the edges they keep are at their tick and sample, and an
    edge they drop leaves no position in a record it shares."""
    tb = (await start_capture(dut, clocks))[0]
    inputs = list(range(tb.first_input, tb.n_channels))
    glitch = min(3, tb.params["glitch_max"])
    settings = {inputs[0]: (1, 1, 0, 0), inputs[1]: (1, 0, 1, 0), inputs[2]: (1, 1, 1, 2),
                inputs[3]: (1, 1, 1, glitch)}
    configs = await tb.configure_capture(settings)
    rng = random.Random(5 + clocks[0])
    S = tb.samples_per_tick
    t0 = await tb.now() + 20
    for ch in inputs:
        tick, level = t0, 0
        for _ in range(80):
            tick += rng.randint(1, 6)
            level ^= 1
            tb.drive_subtick(ch, tick, rng.randrange(S), level)
    await tb.settle()
    expected = tb.expected_subtick(configs)
    observed = tb.subtick_records()
    accepted = sum(bin(m).count("1") for _, m, _, _ in expected)
    assert 0 < accepted < 4 * 80, "the filters and selects dropped nothing (or everything)"
    assert any(m & (1 << inputs[3]) for _, m, _, _ in expected)
    assert_records_equal(observed, expected)


# Non-uniform bins: the edge clock's rise, fall, rise, fall at these ps after each ts rising edge
# (not 0, 4000, 8000, 12000), as duty-cycle and phase distortion would put them. The I/O cell samples
# at those edges; tick t's fraction k is the word's sample k + 1 (the last, the next word's first),
# and an edge before the word's first sample belongs to the tick before, as its last bin.
SKEW_CLOCKS = (16_000, 10_000)
UNEVEN_EDGES_PS = (100, 4900, 8300, 13500)


@cocotb.test(**needs("subtick4"))
async def resolution_calibration_recovers_uneven_bins(dut):
    """Edges at random times, uncorrelated with ts, through an I/O cell sampling on an uneven edge
    clock: every record is at the tick and fraction those sample instants give, and the code density
    of the fractions (hilat calibrate resolution's estimate) recovers each bin's width within 4 of its
    stated standard deviations, bins up to 0.09 tick from nominal."""
    from hilat.calibration import resolution

    tb, configs = await start_capture(dut, SKEW_CLOCKS, eclk_edges_ps=UNEVEN_EDGES_PS)
    S, period = tb.samples_per_tick, tb.ts_period
    first_sample = UNEVEN_EDGES_PS[0]
    instants = [*UNEVEN_EDGES_PS[1:], period + first_sample]   # tick t's samples, after its edge
    rng = random.Random(16)
    t0 = await tb.now() + 20
    for ch in range(tb.first_input, tb.n_channels):
        tick, level = t0, 0
        while tick < t0 + 30_000:
            tick += rng.randint(4, 20)
            level ^= 1
            while True:     # a time uncorrelated with ts, a few ps clear of any sample instant
                offset = rng.randrange(1, period)
                if all(abs(offset - i) > 2 for i in instants + [first_sample]):
                    break
            if offset < first_sample:      # the tick before's last bin (driven from that tick)
                tb.drive_subtick(ch, tick - 1, S - 1, level, offset_ps=offset + period)
            else:
                fraction = next(k for k in range(S) if offset < instants[k])
                tb.drive_subtick(ch, tick, fraction, level, offset_ps=offset)
    await tb.settle()
    expected = tb.expected_subtick(configs)
    assert len(expected) >= 8000
    assert_records_equal(tb.subtick_records(), expected)

    fractions = [f for *_, by_channel in expected for f in by_channel.values()]
    r = resolution.code_density(resolution.fraction_counts(fractions, S), period * 1e-12)
    truth = [(instants[k] - (instants[k - 1] if k else first_sample)) / period for k in range(S)]
    for k in range(S):
        assert abs(r.widths_ticks[k] - truth[k]) <= 4 * r.width_sigma_ticks[k], (k, r.widths_ticks, truth)
    assert max(abs(w - 1 / S) for w in truth) > 0.08      # the bins are far from nominal ...
    assert max(r.width_sigma_ticks) < 0.006               # ... and the estimate resolves them
    assert r.effective_resolution_s > period * 1e-12 / S


@pytest.mark.parametrize("variant", ["subtick4", "subtick2"])
def test_sampler(variant):
    run_cocotb(__file__, variant)

