"""Where the analysis places a TDC rig's edges (analysis.TdcSubticks, docs/tdc.md "Placement of TDC
edges"): exact to the unit from the record's tick and its 8-bit codes (uint64 fractions, input i at
bits 8i .. 8i+7), outputs and inputs without a TDC at whole ticks, a record's edges in time order, and
the placement and the run's unit round-tripping through a run's meta.json."""

import numpy as np
import pytest
from hilat import analysis, units

U = analysis.TDC_UNITS_PER_TICK
FIRST = 2            # two stimulus outputs: the DUT inputs are channels 2 .. 9
TDC_INPUTS = 8       # 64 bits of codes: input 7's code in the fraction's top byte


def _positions(seed=35):
    # Per input a different table, with negative positions (late edges) and ones beyond the tick.
    rng = np.random.default_rng(seed)
    return tuple(tuple(int(p) for p in rng.integers(-300, U + 1, 256)) for _ in range(TDC_INPUTS))


def _placement():
    return tuple({"channel": FIRST + i, "placement": "predicted", "source": "test"} for i in range(TDC_INPUTS))


def _fraction(codes):
    """The record's fraction from {input: code}."""
    return sum(int(code) << (8 * i) for i, code in codes.items())


def test_each_code_at_its_position_exactly():
    subticks = analysis.TdcSubticks(FIRST, _positions(), _placement())
    table = subticks.positions
    # One record per (input, code) pair tried: the channel's edge at tick t with that code, and
    # other inputs' codes in the same fraction (they must not leak into this channel's position).
    rng = np.random.default_rng(1)
    ticks, masks, levels, fractions, expected = [], [], [], [], []
    t = 1000
    for i in range(TDC_INPUTS):
        for code in (1, 2, 127, 200, 254, 255):
            others = {j: int(rng.integers(1, 256)) for j in range(TDC_INPUTS) if j != i}
            ticks.append(t)
            masks.append(1 << (FIRST + i))
            levels.append(1 << (FIRST + i))
            fractions.append(_fraction({**others, i: code}))
            expected.append(t * U + table[i][code])
            t += 3
    records = (np.array(ticks, dtype=np.uint64), np.array(masks, dtype=np.uint16), np.array(levels, dtype=np.uint16),
               np.array(fractions, dtype=np.uint64))
    times, chans, lv = analysis.edges_from_records(records, subticks=subticks)
    assert times.view(np.int64).tolist() == expected
    assert chans.tolist() == [FIRST + i for i in range(TDC_INPUTS) for _ in range(6)]
    assert lv.tolist() == [1] * len(expected)


def test_outputs_and_inputs_without_a_tdc_stay_at_whole_ticks():
    # Two of the four DUT inputs have a TDC: channels 2 and 3; 4 and 5 are tick-level.
    positions = ((U // 2,) * 256, (U // 4,) * 256)
    subticks = analysis.TdcSubticks(FIRST, positions, _placement()[:2])
    ticks = np.array([10, 20, 30, 40, 50, 60], dtype=np.uint64)
    masks = np.array([1, 2, 1 << 2, 1 << 3, 1 << 4, 1 << 5], dtype=np.uint16)
    # Every fraction all ones: bits a non-TDC channel would read if it took any.
    fractions = np.full(6, np.iinfo(np.uint64).max, dtype=np.uint64)
    times, chans, _ = analysis.edges_from_records((ticks, masks, masks, fractions), subticks=subticks)
    assert times.tolist() == [10 * U, 20 * U, 30 * U + U // 2, 40 * U + U // 4, 50 * U, 60 * U]
    assert chans.tolist() == [0, 1, 2, 3, 4, 5]


def test_a_records_edges_come_out_in_time_order_and_none_is_lost():
    # One record: the stimulus output at tick 100, input 0 with a late edge (before the tick), input 1
    # early in the tick; the next record's edges all after them.
    positions = (tuple([-40] * 256), tuple([U // 3] * 256))
    subticks = analysis.TdcSubticks(FIRST, positions, _placement()[:2])
    ticks = np.array([100, 101], dtype=np.uint64)
    masks = np.array([0b1101, 0b1000], dtype=np.uint16)       # channels 0, 2, 3; then 3
    fraction = np.array([_fraction({0: 7, 1: 9}), _fraction({1: 9})], dtype=np.uint64)
    times, chans, _ = analysis.edges_from_records((ticks, masks, masks, fraction), subticks=subticks)
    assert times.view(np.int64).tolist() == [100 * U - 40, 100 * U, 100 * U + U // 3, 101 * U + U // 3]
    assert chans.tolist() == [2, 0, 3, 3]


def test_without_fractions_every_edge_is_at_its_tick():
    subticks = analysis.TdcSubticks(FIRST, _positions(), _placement())
    assert subticks.place(np.array([5, 6], dtype=np.uint64), np.array([2, 3]), None).tolist() == [5 * U, 6 * U]


def test_placement_and_unit_round_trip_through_meta():
    subticks = analysis.TdcSubticks(FIRST, _positions(), _placement())
    meta = subticks.to_meta()
    back = analysis.Subticks.from_meta(meta)
    assert isinstance(back, analysis.TdcSubticks) and back == subticks
    assert back.units_per_tick == U and back.samples_per_tick == 1 and not back.calibrated
    unit = units.RunUnit.of(140e6, back)
    assert unit.units_per_tick == U and unit.tdc_placement == subticks.placement
    assert unit.name == f"1/{U} tick (TDC)"
    assert units.RunUnit.from_json(unit.to_json()) == unit
    assert unit.to_json()["tdc_placement"][0] == {"channel": FIRST, "placement": "predicted", "source": "test"}
    # A measured input makes the unit a calibrated one.
    measured = analysis.TdcSubticks(FIRST, _positions(), ({**_placement()[0], "placement": "measured"},)
                                    + _placement()[1:])
    assert measured.calibrated and units.RunUnit.of(140e6, measured).calibrated
    # A plain run's unit is what it was: no TDC key.
    assert "tdc_placement" not in units.RunUnit.of(50e6, analysis.Subticks()).to_json()


def test_a_table_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match="256 codes"):
        analysis.TdcSubticks(FIRST, ((0,) * 255,), _placement()[:1])


def _code_zero_run():
    """Three stimuli (channel 0) and their ISR pulses (channel 2, a TDC input); the second pulse's
    rise has code 0, a change its line did not measure. Records: (tick, mask, levels, fraction)."""
    rows = []
    for k, (rise, rise_code, fall_code) in enumerate(((50, 100, 50), (60, 0, 30), (40, 200, 10))):
        base = 1000 * (k + 1)
        rows += [(base, 1, 1, 0), (base + 10, 1, 0, 0),
                 (base + rise, 1 << FIRST, 1 << FIRST, rise_code), (base + rise + 20, 1 << FIRST, 0, fall_code)]
    ticks, masks, levels, fractions = (np.array(x, dtype=d) for x, d in
                                       zip(zip(*rows), (np.uint64, np.uint16, np.uint16, np.uint64)))
    return ticks, masks, levels, fractions


def test_an_edge_of_code_0_is_a_gap_and_its_window_unknown():
    from hilat.statistics.streaming import StreamingAggregator
    from synth import ROLES

    positions = (tuple(U - 10 * c for c in range(256)),)
    subticks = analysis.TdcSubticks(FIRST, positions, _placement()[:1])
    ticks, masks, levels, fractions = _code_zero_run()
    # The positions reach back 0.62 tick at most: an unmeasured change lies at most 2 ticks before.
    assert subticks.unmeasured_span_ticks == 2
    tracker = analysis.gap_tracker(subticks)
    closed = tracker.records(ticks, masks, fractions)
    assert closed == [(2058 * U, 2061 * U, 1 << FIRST, analysis.GAP_UNMEASURED)]
    assert (tracker.unmeasured, tracker.count) == (1, 1)
    gaps = analysis.Gaps.of([(a, b, c) for a, b, c, _ in closed])
    t, c, lv = analysis.edges_from_records((ticks, masks, levels), fractions, subticks)
    t = t.view(np.int64)
    paired = analysis.pair(t, c, lv, ROLES, gaps=gaps)
    late = [(50 * U + positions[0][100]), None, (40 * U + positions[0][200])]
    assert paired.isr_latency.tolist() == [late[0], analysis.MISSING, late[2]]
    assert paired.unknown_of("stim_to_isr").tolist() == [0, 1, 0]
    # The capture's path: the gap known before the edges after its start, any chunking.
    for chunk in (1, 3, len(t)):
        agg = StreamingAggregator(ROLES)
        agg.add_gap(*closed[0][:3])
        for i in range(0, len(t), chunk):
            agg.feed(t[i:i + chunk], c[i:i + chunk], lv[i:i + chunk])
        agg.finish(int(t[-1]) + 1)
        key = ("all", "stim_to_isr")
        assert (agg.starts[key], agg.misses[key], agg.unknown[key]) == (3, 0, 1)
        figures = agg.distribution("all", "stim_to_isr").figures_mu()
        assert (figures["count"], figures["min"], figures["max"]) == (2, min(late[0], late[2]), max(late[0], late[2]))
