"""The engine's cost as the build report states it: a synthesis of the engine alone."""

from gateware.engine import BANK_RAM_WORDS
from gateware.standalone import LUT4_PER_CELL, engine_cost
from targets import build_report


def test_engine_cost_from_its_own_synthesis(tmp_path):
    """yosys synth_ecp5 of EngineAlone: the block RAMs are the three banks' (5 each: 18-bit words,
    two 2048x9 pairs and a 512x36) and the 512-entry bins FIFO's 3; the LUT4-equivalents add up
    from the cell counts; the build report's summary states them."""
    cost = engine_cost(tmp_path, n_channels=8)
    cells = cost["cells"]
    assert BANK_RAM_WORDS == 4608
    assert cost["block_rams"] == cells["DP16KD"] == 3 * 5 + 3
    assert cost["lut4_equivalent"] == sum(cells.get(c, 0) * k for c, k in LUT4_PER_CELL.items())
    assert 3000 < cost["lut4_equivalent"] < 12000 and cost["flip_flops"] == cells["TRELLIS_FF"] > 2000
    assert cost["multipliers"] == 0
    report = {"board": "b", "device": "d", "timing_met": True, "clocks": {}, "resources": {},
              "engine_cost": cost}
    assert (f"engine: {cost['lut4_equivalent']} LUT4-equivalents, {cost['flip_flops']} FF, 18 DP16KD"
            in build_report.summary(report))
