"""EthStream (gateware/ethstream.py) on Verilator, with the capture in front of it: every record
exact in the datagrams (decoded by eth_tb's reader of docs/ethernet.md), the header fields, closing
on full, on the flush time, on an offset beyond 32 bits and across the 64-bit wrap, back-to-back
datagrams at full rate, heartbeats whose T is a true bound, overflow markers travelling as records
with exact drop counts, restart, disable and the routing back to the CSR reader. Random
backpressure on the UDP port; unequal clock ratios (tb.CLOCKS).
"""

import random

import cocotb
import pytest
from cocotb.triggers import ClockCycles, FallingEdge
from eth_tb import EthTB, check_stream, now_ps, run_ethernet_cocotb
from tb import CLOCKS, assert_records_equal

SESSION = 0x5EED0001


async def start(dut, clocks, **kwargs):
    tb = EthTB(dut, clocks, **kwargs)
    await tb.start()
    configs = await tb.configure_capture()
    return tb, configs


def edges_of(records):
    return [(t, ch, lv) for t, ch, lv, kind, _ in records if kind == 0]


async def drain(tb, sys_cycles):
    """Let the capture, EthStream and the port empty (the flush time must have passed)."""
    await tb.settle()
    await ClockCycles(tb.dut.sys_clk, sys_cycles)


# Records, headers, backpressure ----------------------------------------------------------------------

@cocotb.test()
@cocotb.parametrize(clocks=CLOCKS)
async def records_exact_with_backpressure(dut, clocks):
    """Random edges, the UDP port ready half the time: every record once, exact, in order; seq,
    first_index, base, count, session in every header; datagrams close full and on the flush
    time; the port's length, address and ports; the counters."""
    tb, configs = await start(dut, clocks, stream_ready=0.5)
    flush_ticks = 3000   # a burst fills a datagram within it; a pause's records do not
    await tb.configure_stream(SESSION, flush_cycles=flush_ticks * tb.ts_period // tb.sys_period,
                              dst_ip=0x7F000001, dst_port=6001)
    rng = random.Random(clocks[0])
    t0 = await tb.now() + 20
    for ch in range(tb.first_input, tb.n_channels):
        tick, level = t0, 0
        for k in range(150):
            # bursts (full datagrams) and pauses (flushed ones)
            tick += rng.randint(1, 60) if (k // 50) % 2 == 0 else rng.randint(100, 900)
            level ^= 1
            tb.drive(ch, tick, level)
    await drain(tb, 3 * flush_ticks)
    expected = tb.expected(configs)
    stream = tb.stream()
    records = check_stream(stream, SESSION, max_records=tb.params["max_records"])
    assert_records_equal(edges_of(records), expected)
    assert all(kind == 0 for _, _, _, kind, _ in records)
    counts = [d.count for d in stream]
    assert tb.params["max_records"] in counts, f"no datagram closed full: {counts}"
    assert any(c < tb.params["max_records"] for c in counts[:-1]), "no datagram closed on the flush time"
    for d, s in zip(tb.datagrams, stream):
        assert d.params == dict(length=36 + 8 * s.count, ip_address=0x7F000001, src_port=5801, dst_port=6001)
        assert len(d.words) * 4 == d.params["length"] and d.last_be == 0b1000
    assert await tb.read("ethstream_datagrams") == len(stream)
    assert await tb.read("ethstream_records") == len(records)
    assert await tb.snapshot_drops() == (0, [0] * tb.n_channels)


# Full rate, offsets, the wrap (records from the rec_* port) -----------------------------------------

async def feed(tb, records):
    """Offer ``records`` (tick, channels, levels, kind, fraction) on the rec_* port, one a cycle as
    fast as EthStream takes them."""
    dut = tb.dut
    dut.records_from_port.value = 1
    for t, ch, lv, kind, fraction in records:
        await FallingEdge(dut.sys_clk)
        dut.rec_valid.value = 1
        dut.rec_timestamp.value = t
        dut.rec_channels.value = ch
        dut.rec_levels.value = lv
        dut.rec_kind.value = kind
        dut.rec_fraction.value = fraction
        while not dut.rec_ready.value:
            await FallingEdge(dut.sys_clk)
    await FallingEdge(dut.sys_clk)
    dut.rec_valid.value = 0


def random_record(rng, t, n):
    return (t % 2**64, rng.getrandbits(n), rng.getrandbits(n), rng.getrandbits(1), rng.getrandbits(8))


@cocotb.test()
async def full_rate_offsets_and_wrap(dut):
    """Records offered every cycle, the port always ready: full datagrams leave back to back (one
    idle cycle between them) with a payload word every cycle; a record 2**32 - 1 ticks after its
    datagram's base stays in it, one 2**32 after starts the next; ticks across the 64-bit wrap;
    every field of every record (kind and fraction included) exact."""
    tb, _ = await start(dut, CLOCKS[0])
    await tb.configure_stream(SESSION, flush_cycles=100_000)
    rng, n, limit = random.Random(5), tb.n_channels, tb.params["max_records"]
    t = 2**64 - 3 * limit * 5
    records = []
    for _ in range(4 * limit):   # across the wrap, 1..9 ticks apart
        t += rng.randint(1, 9)
        records.append(random_record(rng, t, n))
    base = t + 100
    records += [random_record(rng, base, n), random_record(rng, base + 2**32 - 1, n),
                random_record(rng, base + 2**32, n), random_record(rng, base + 2**33 + 5, n)]
    await feed(tb, records)
    await tb.write_fields("ethstream_control", enable=0)   # sends the last one
    await ClockCycles(dut.sys_clk, 1000)
    stream = tb.stream()
    got = check_stream(stream, SESSION, max_records=limit)
    assert got == records
    counts = [d.count for d in stream]
    # 4 * limit records, then: the datagram with base and base + 2**32 - 1, then one record each.
    assert counts[:4] == [limit] * 4 and counts[4:] == [2, 1, 1], counts
    full = tb.datagrams[:4]
    for a, b in zip(full, full[1:]):
        assert b.first_cycle - a.last_cycle <= 2, "full datagrams not back to back"
    for d in full:
        assert d.last_cycle - d.first_cycle == len(d.words) - 1, "a datagram's words not one a cycle"


# pytest ----------------------------------------------------------------------------------------------

def test_ethstream():
    run_ethernet_cocotb(__file__)
