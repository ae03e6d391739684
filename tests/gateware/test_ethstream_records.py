"""EthStream's record words (docs/ethernet.md, "Record") for the TDC's wide fractions (docs/tdc.md):
the record is 32 + 2n + 1 + fraction bits rounded up to an even count of 32-bit words. In Migen's
simulator (no Verilator build: seconds), EthStream alone with a record of 2 stimulus + 8 TDC inputs
(10 channels, 8 x 8 = 64 fraction bits: 4 words) and the simulator's 4 (6 channels, 32 bits: 4
words), its datagrams read by eth_tb's reader written from docs/ethernet.md: every field of every
record exact, the 64-bit fraction's top bits included. The Verilator tests (test_ethstream.py) cover
the 2-word records of today's builds through the capture.
"""

import random

import pytest
from eth_tb import StreamDatagram
from migen import ClockDomain, Module, Signal, passive, run_simulation

from gateware.capture import record_layout
from gateware.ethstream import EthStream, max_records, record_words


@pytest.mark.parametrize("n_channels,fraction_bits,words", [
    (6, 0, 2), (6, 8, 2), (10, 11, 2),   # today's builds: 45 .. 64 bits
    (10, 16, 4),                          # 4 samples a tick on 8 inputs: 69 bits (3 words before)
    (6, 32, 4), (10, 64, 4),              # the simulator's 4 TDC inputs, a board's 8
    (16, 64, 6),                          # 129 bits
])
def test_a_record_takes_an_even_count_of_words(n_channels, fraction_bits, words):
    assert record_words(record_layout(n_channels, fraction_bits)) == words
    assert max_records(words) == (1472 - 36) // (4 * words)


class _Bench(Module):
    def __init__(self, n_channels, fraction_bits):
        self.clock_domains.cd_sys = ClockDomain()
        self.clock_domains.cd_ts = ClockDomain()
        self.submodules.stream = EthStream(record_layout(n_channels, fraction_bits), Signal(64), depth=3,
                                           quiet_cycles=8, with_csr=False)


def _run(n_channels, fraction_bits, records):
    """The records through EthStream: the datagrams' payloads (bytes), in order."""
    bench = _Bench(n_channels, fraction_bits)
    dut = bench.stream
    words, datagrams = [], []

    def feed():
        yield dut.packer.flush_cycles.eq(1 << 30)
        yield dut.enable.eq(1)
        yield
        for tick, channels, levels, kind, fraction in records:
            for name, value in (("timestamp", tick), ("channels", channels), ("levels", levels), ("kind", kind),
                                ("fraction", fraction)):
                yield getattr(dut.sink, name).eq(value)
            yield dut.sink.valid.eq(1)
            yield
            while not (yield dut.sink.ready):
                yield
        yield dut.sink.valid.eq(0)
        for _ in range(40):
            yield
        yield dut.enable.eq(0)   # sends the datagram being filled
        for _ in range(400):
            yield

    @passive
    def collect():
        yield dut.udp.ready.eq(1)
        while True:
            if (yield dut.udp.valid):
                words.append((yield dut.udp.data))
                if (yield dut.udp.last):
                    datagrams.append(b"".join(w.to_bytes(4, "little") for w in words))
                    words.clear()
            yield

    run_simulation(bench, [feed(), collect()], clocks={"sys": 10, "ts": 10})
    return datagrams


@pytest.mark.parametrize("n_channels,fraction_bits", [(10, 64), (6, 32)])
def test_tdc_records_leave_exact_in_4_words(n_channels, fraction_bits):
    rng = random.Random(fraction_bits)
    limit = max_records(4)
    tick = 2**64 - 40 * limit          # across the 64-bit wrap
    records = []
    for k in range(limit + 30):        # a full datagram and the start of the next
        tick += rng.randint(1, 9)
        codes = [rng.choice([0, 1, 255, rng.randint(1, 255)]) for _ in range(fraction_bits // 8)]
        if k < 3:                      # no edge, all codes 255 (the top bit of the fraction), all 1
            codes = [(0, 255, 1)[k]] * (fraction_bits // 8)
        fraction = sum(c << (8 * i) for i, c in enumerate(codes))
        records.append((tick % 2**64, rng.getrandbits(n_channels), rng.getrandbits(n_channels), 0, fraction))
    payloads = _run(n_channels, fraction_bits, records)
    decoded = [StreamDatagram(d, n_channels, fraction_bits) for d in payloads]
    assert [d.count for d in decoded] == [limit, 30]
    assert all(d.record_words == 4 and d.seq == k for k, d in enumerate(decoded))
    assert [r for d in decoded for r in d.records] == records
