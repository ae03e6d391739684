"""EthStream (gateware/ethstream.py) on Verilator, with the capture in front of it: every record
exact in the datagrams (decoded by eth_tb's reader of docs/ethernet.md), the header fields, closing
on full, on the flush time, on an offset beyond 32 bits and across the 64-bit wrap, back-to-back
datagrams at full rate, heartbeats whose T is a true bound, overflow markers travelling as records
with exact drop counts, restart, disable and the routing back to the CSR reader. Random
backpressure on the UDP port; unequal clock ratios (tb.CLOCKS).
"""

import random

import cocotb
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


# Flush time and heartbeats ----------------------------------------------------------------------------

@cocotb.test()
@cocotb.parametrize(clocks=CLOCKS)
async def flush_time(dut, clocks):
    """A lone record leaves in its own datagram once the flush time has passed since it reached
    EthStream, and no earlier; a second record within the flush time rides in the first's datagram."""
    tb, configs = await start(dut, clocks)
    flush = 700
    await tb.configure_stream(SESSION, flush_cycles=flush)
    ts_ps, sys_ps, delay = tb.ts_period, tb.sys_period, tb.params["record_delay"]
    t0 = await tb.now() + 20
    tb.drive(tb.first_input, t0, 1)
    await tb.wait_until(t0)
    pin_ps = now_ps()   # mid-tick of t0 (the edge is driven from mid-tick t0 - 1)
    await ClockCycles(dut.sys_clk, flush + 200)
    assert len(tb.datagrams) == 1 and tb.stream()[0].count == 1
    waited = tb.datagrams[0].first_ps - pin_ps
    # At least the pipeline to the FIFO and the flush time; at most that, the FIFO's crossing and
    # EthStream's own few cycles.
    assert flush * sys_ps + (delay - 1) * ts_ps <= waited <= flush * sys_ps + (delay + 2) * ts_ps + 16 * sys_ps, \
        f"waited {waited} ps: flush {flush * sys_ps} ps"
    t1 = await tb.now() + 20
    tb.drive(tb.first_input, t1, 0)
    tb.drive(tb.first_input, t1 + 10, 1)
    await ClockCycles(dut.sys_clk, flush + 200)
    stream = tb.stream()
    assert [d.count for d in stream] == [1, 2]
    assert_records_equal(edges_of(check_stream(stream, SESSION)), tb.expected(configs))


@cocotb.test()
@cocotb.parametrize(clocks=CLOCKS)
async def heartbeats_bound_the_stream(dut, clocks):
    """Sparse edges with quiet stretches longer and shorter than the heartbeat period, then edges
    aimed at the moments heartbeats read the timebase (swept across the pipeline's depth and the
    quiet window): heartbeats (flag, count 0, first_index, seq) go on quiet stretches only, and
    their T is a true bound: no record of a tick below T comes after one; T is at most the pipeline
    and the heartbeat's own latency behind the timebase when it leaves."""
    tb, configs = await start(dut, clocks)
    period, flush = 800, 150
    await tb.configure_stream(SESSION, flush_cycles=flush, heartbeat_cycles=period)
    sys_per_tick = tb.ts_period / tb.sys_period
    ch = tb.first_input + 1

    def toggle(tick):
        changes = tb.input_changes[ch]
        tb.drive(ch, tick, 1 - changes[-1][1] if changes else 1)

    rng = random.Random(clocks[1])
    t = await tb.now() + 20
    for _ in range(20):
        t += rng.randint(1, int(2.5 * period / sys_per_tick))
        toggle(t)
    await tb.settle()
    # Probes: a heartbeat leaves; the next one reads the timebase about `period` cycles later.
    depth, quiet = tb.params["heartbeat_depth"], tb.params["quiet_cycles"]
    low, high = -(depth + 12), int((quiet + 12) / sys_per_tick)
    for k in range(30):
        seen = len(tb.datagrams)
        while not any(tb.stream()[i].heartbeat for i in range(seen, len(tb.datagrams))):
            await ClockCycles(dut.sys_clk, 40)
        beat = tb.datagrams[-1]
        toggle(beat.first_tick + round((period - 2) / sys_per_tick) + low + k * (high - low) // 29)
    await drain(tb, 2 * period)
    stream = tb.stream()
    records = check_stream(stream, SESSION)
    assert_records_equal(edges_of(records), tb.expected(configs))
    beats = [k for k, d in enumerate(stream) if d.heartbeat]
    assert len(beats) >= 30, f"{len(beats)} heartbeats"
    slack = depth + (quiet + 64) / sys_per_tick + 8
    for k in beats:
        T = stream[k].base
        later = [r[0] for d in stream[k + 1:] for r in d.records]
        assert all(tick >= T for tick in later), f"heartbeat {k}: T {T}, a later record at {min(later)}"
        assert T <= tb.datagrams[k].first_tick, "T ahead of the timebase"
        assert tb.datagrams[k].first_tick - T <= slack, f"T {T} lags the timebase {tb.datagrams[k].first_tick}"
        assert len(tb.datagrams[k].words) == 9 and tb.datagrams[k].params["length"] == 36
        previous = tb.datagrams[k - 1].last_cycle if k else 0
        assert tb.datagrams[k].first_cycle - previous >= period, "a heartbeat before the period was quiet"
    # A quiet stretch of several periods has a heartbeat each period (plus the bound's latency).
    runs = [(a, b) for a, b in zip(beats, beats[1:]) if b == a + 1]
    assert runs, "no two heartbeats in a row"
    for a, b in runs:
        assert tb.datagrams[b].first_cycle - tb.datagrams[a].first_cycle <= period + quiet + 40


# Overflow, restart, disable ---------------------------------------------------------------------------

@cocotb.test()
@cocotb.parametrize(clocks=CLOCKS)
async def overflow_markers_in_the_stream(dut, clocks):
    """The UDP port held off while dense edges arrive: the packet buffer and then the capture FIFO
    fill and the capture drops. Every record that got through is exact and in order; the drop
    counters count exactly the lost edges; each gap's overflow marker travels in the stream at its
    first lost record, with the channels of the records lost in it."""
    tb, configs = await start(dut, clocks, stream_ready=0.0)
    await tb.configure_stream(SESSION, flush_cycles=300)
    last = tb.drive_random_toggles(random.Random(9), await tb.now() + 20, 700, max_gap=4)
    await tb.wait_until(last + 50)
    tb.stream_ready = 1.0
    await drain(tb, 3000)
    expected = tb.expected(configs)
    records = check_stream(tb.stream(), SESSION)
    kept, lost, j = edges_of(records), [], 0
    for record in expected:
        if j < len(kept) and kept[j] == record:
            j += 1
        else:
            lost.append(record)
    assert j == len(kept), f"record {j} that got through is not the model's next one: {kept[j]}"
    assert lost, "nothing lost: the test must overflow the capture FIFO"
    overflow, dropped = await tb.snapshot_drops()
    assert overflow == 1
    for ch in range(tb.n_channels):
        assert dropped[ch] == sum(m >> ch & 1 for _, m, _ in lost), f"channel {ch}"
    markers = [(t, ch) for t, ch, _, kind, _ in records if kind == 1]
    lost_ticks = [t for t, _, _ in lost]
    assert markers and all(t in lost_ticks for t, _ in markers)
    covered = {t: 0 for t, _ in markers}
    for t, mask, _ in lost:
        covered[max(m for m in covered if m <= t)] |= mask
    assert markers == list(covered.items())


@cocotb.test()
@cocotb.parametrize(clocks=CLOCKS)
async def restart_disable_and_routing(dut, clocks):
    """Restart sends the datagram being filled (old session), then seq and first_index start from 0
    in the new session; disabling sends what is open and routes the records to the CSR reader
    (capture_ev_*), exact; enabling again continues the session's sequence."""
    tb, configs = await start(dut, clocks)
    await tb.configure_stream(SESSION, flush_cycles=10**6)

    async def edges(n, gap=7):
        """``n`` edges, ``gap`` ticks apart, on the inputs in turn; then let them through."""
        t = await tb.now() + 20
        for k in range(n):
            ch = tb.first_input + k % 4
            changes = tb.input_changes[ch]
            tb.drive(ch, t + gap * k, 1 - changes[-1][1] if changes else 1)
        await tb.settle()

    await edges(20)
    assert tb.datagrams == [], "sent before its flush time"
    await tb.write("ethstream_session", SESSION + 1)
    await tb.write_fields("ethstream_control", enable=1, restart=1)
    await ClockCycles(dut.sys_clk, 200)
    assert await tb.read("ethstream_datagrams") == 0 and await tb.read("ethstream_records") == 0
    await edges(10)
    await tb.write_fields("ethstream_control", enable=0)
    await ClockCycles(dut.sys_clk, 200)
    stream = tb.stream()
    assert [(d.session, d.seq, d.first_index, d.count) for d in stream] == [
        (SESSION, 0, 0, 20), (SESSION + 1, 0, 0, 10)]
    assert await tb.read("ethstream_datagrams") == 1 and await tb.read("ethstream_records") == 10
    via_stream = [r for d in stream for r in d.records]

    await edges(15)
    via_csr = []
    while (await tb.read_fields("capture_ev_status"))["pending"]:
        t = await tb.read("capture_ev_timestamp")
        info = await tb.read_fields("capture_ev_info")
        via_csr.append((t, info["channels"], info["levels"]))
        await tb.write_fields("capture_ev_pop", pop=1)
    assert len(via_csr) == 15 and len(tb.datagrams) == 2

    await tb.write_fields("ethstream_control", enable=1)
    await edges(5)
    await tb.write_fields("ethstream_control", enable=0)
    await ClockCycles(dut.sys_clk, 200)
    stream = tb.stream()
    assert [(d.session, d.seq, d.first_index, d.count) for d in stream[2:]] == [(SESSION + 1, 1, 10, 5)]
    expected = tb.expected(configs)
    assert_records_equal(edges_of(via_stream) + via_csr + edges_of(stream[2].records), expected)


# pytest ----------------------------------------------------------------------------------------------

def test_ethstream():
    run_ethernet_cocotb(__file__)
