"""gateware/cdc.py's helpers that need no second clock: Gray to binary, pipelined (the FIFO's
half-free level, docs/timing-cores.md "Drop accounting")."""

import pytest
from migen import run_simulation

from gateware.cdc import GrayToBinary


@pytest.mark.parametrize("bits", [3, 4, 5, 11])
def test_gray_to_binary_every_value(bits):
    dut = GrayToBinary(bits)
    values = list(range(2**bits))
    got = []

    def drive():
        for v in values + [0] * GrayToBinary.latency:
            yield dut.gray.eq(v ^ (v >> 1))
            yield
            got.append((yield dut.binary))

    run_simulation(dut, drive())
    # The output a cycle after the input is registered: the latency's registers, then one to read.
    assert got[GrayToBinary.latency:GrayToBinary.latency + len(values)] == values
