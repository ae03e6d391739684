"""Timebase (gateware/timebase.py) on Verilator: one tick per cycle across carries and the 64-bit
wrap, and coherent latched reads from sys, at unequal clock ratios (tb.CLOCKS).
"""

import os

import cocotb
import pytest

# tb.py sits next to this file, which is on sys.path both under pytest and in the simulator.
from tb import CLOCKS, needs, run_cocotb, start_tb

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


# pytest ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ['default', 'wrap'])
def test_timebase(variant):
    run_cocotb(__file__, variant)
