"""Shared testbench of the Ethernet gateware tests (test_ethstream.py, test_ethcmd.py).

``gateware.ethernet.EthernetCores`` (the timing cores with EthStream and EthCommandBridge, their
CSRs on one bus, the UDP user ports as ports) is exported and built once per pytest session. The
datagrams are decoded here by a reader written from docs/ethernet.md alone (byte offsets, not the
gateware's layouts), so a field the gateware puts in the wrong place fails the tests.
"""

import random
import struct
from pathlib import Path

import cocotb
from cocotb.triggers import FallingEdge
from tb import TB, run_tests

HERE     = Path(__file__).resolve().parent
TOPLEVEL = "hilat_ethernet_cores"
# Clocks the build's heartbeat window is sized for: the slowest ts against the fastest sys of
# tb.CLOCKS (the window in sys cycles grows with sys / ts).
BUILD_CLOCKS = dict(sys_clk_freq=100e6, ts_clk_freq=60e6)

MAGIC = 0x54414C48
HEADER = struct.Struct("<IBBBBIIQQHH")   # docs/ethernet.md, "The stream datagram", offsets 0..35


def now_ps():
    return cocotb.utils.get_sim_time("ps")


class Datagram:
    """One datagram off a UDP user port: its words, the port's parameters, and when it left."""
    def __init__(self, words, params, first_cycle, last_cycle, first_ps):
        self.words, self.params = words, params
        self.first_cycle, self.last_cycle, self.first_ps = first_cycle, last_cycle, first_ps

    @property
    def payload(self):
        """The UDP payload's bytes: a 32-bit word's byte 0 (bits 0..7) first on the wire."""
        data = b"".join(w.to_bytes(4, "little") for w in self.words)
        return data[:self.params["length"]]


class StreamDatagram:
    """A stream datagram decoded by the documented format. ``records``: (tick, channels, levels,
    kind, fraction) with tick = base + offset, modulo 2**64."""
    def __init__(self, payload, n_channels, fraction_bits):
        (self.magic, self.version, self.flags, self.record_words, self.header_words, self.session,
         self.seq, self.first_index, self.base, self.count, self.reserved) = HEADER.unpack_from(payload)
        assert self.magic == MAGIC, f"magic {self.magic:#x}"
        assert self.version == 1 and self.header_words == 9 and self.reserved == 0
        size = 4 * self.record_words
        assert len(payload) == 4 * self.header_words + self.count * size, \
            f"{len(payload)} bytes for {self.count} records"
        n, mask = n_channels, (1 << n_channels) - 1
        self.records = []
        for k in range(self.count):
            at = 4 * self.header_words + k * size
            r = int.from_bytes(payload[at:at + size], "little")
            assert r >> (33 + 2 * n + fraction_bits) == 0, f"record {k}: bits set beyond its fields"
            self.records.append(((self.base + (r & 0xFFFFFFFF)) % 2**64, r >> 32 & mask, r >> (32 + n) & mask,
                                 r >> (32 + 2 * n) & 1, r >> (33 + 2 * n) & ((1 << fraction_bits) - 1)))

    @property
    def heartbeat(self):
        return self.flags & 1


class EthTB(TB):
    """tb.TB (CSR bus, inputs, the capture model) on EthernetCores, with a monitor of the stream
    port (random ``ready`` with ``stream_ready``) and drivers of the command ports."""
    def __init__(self, dut, clocks, stream_ready=1.0, seed=1):
        super().__init__(dut, clocks, seed=seed)
        self.stream_ready = stream_ready
        self.datagrams = []   # Datagram, in the order they left
        self.cycle = 0        # sys cycles since start
        self.replies = []     # Datagram off the command port
        self.cmd_ready = 1.0

    async def start(self):
        dut = self.dut
        dut.records_from_port.value = 0
        dut.rec_valid.value = 0
        dut.stream_ready.value = 0
        dut.cmd_in_valid.value = 0
        dut.cmd_out_ready.value = 0
        await super().start()
        cocotb.start_soon(self._port_monitor("stream", lambda: self.stream_ready, self.datagrams))
        cocotb.start_soon(self._port_monitor("cmd_out", lambda: self.cmd_ready, self.replies))

    async def _port_monitor(self, prefix, ready_probability, out):
        dut = self.dut
        valid, ready, data, last = (getattr(dut, f"{prefix}_{s}") for s in ("valid", "ready", "data", "last"))
        params = [(p, getattr(dut, f"{prefix}_{p}")) for p in ("length", "ip_address", "src_port", "dst_port")]
        last_be = getattr(dut, f"{prefix}_last_be")
        rng = random.Random(prefix)
        words, first = [], None
        while True:
            await FallingEdge(dut.sys_clk)
            if prefix == "stream":
                self.cycle += 1
            take = int(rng.random() < ready_probability())
            ready.value = take
            if take and valid.value:
                if not words:
                    first = (self.cycle, now_ps(), {p: s.value.to_unsigned() for p, s in params},
                             dut.ts.value.to_unsigned())
                else:
                    assert {p: s.value.to_unsigned() for p, s in params} == first[2], "parameters changed mid-datagram"
                words.append(data.value.to_unsigned())
                if last.value:
                    d = Datagram(words, first[2], first[0], self.cycle, first[1])
                    d.last_be = last_be.value.to_unsigned()
                    d.first_tick = first[3]   # the timebase when its first word left
                    out.append(d)
                    words = []

    def stream(self):
        """The stream port's datagrams, decoded."""
        n, f = self.n_channels, 8
        return [StreamDatagram(d.payload, n, f) for d in self.datagrams]

    async def configure_stream(self, session, flush_cycles=1000, heartbeat_cycles=0, dst_ip=0xC0A80164,
                               dst_port=6000, restart=True, enable=1):
        await self.write("ethstream_session", session)
        await self.write("ethstream_dst_ip", dst_ip)
        await self.write("ethstream_dst_port", dst_port)
        await self.write("ethstream_flush_cycles", flush_cycles)
        await self.write("ethstream_heartbeat_cycles", heartbeat_cycles)
        await self.write_fields("ethstream_control", enable=enable, restart=int(restart))


async def receive_all(tb):
    """Every datagram waiting, read byte by byte through the CSRs: [(bytes, ip, port)]."""
    datagrams, current = [], bytearray()
    while True:
        status = await tb.read_fields("ethcmd_rx_status")
        if not status["pending"]:
            assert not current, "a datagram's bytes ended without its last byte"
            return datagrams
        if not current:
            source = (await tb.read("ethcmd_rx_src_ip"), await tb.read("ethcmd_rx_src_port"))
        current.append(await tb.read("ethcmd_rx_data"))
        await tb.write_fields("ethcmd_rx_pop", pop=1)
        if status["last"]:
            datagrams.append((bytes(current), *source))
            current = bytearray()


def check_stream(datagrams, session, first_seq=0, first_index=0, max_records=None):
    """Header fields across consecutive datagrams of one session: seq consecutive, first_index the
    records before, base the first record's tick; returns the records in order."""
    records = []
    index = first_index
    for k, d in enumerate(datagrams):
        assert d.session == session, f"datagram {k}: session {d.session:#x}"
        assert d.seq == first_seq + k, f"datagram {k}: seq {d.seq}"
        assert d.first_index == index, f"datagram {k} (seq {d.seq}): first_index {d.first_index}, expected {index}"
        assert d.record_words == 2
        if d.heartbeat:
            assert d.count == 0
        else:
            assert d.flags == 0 and 0 < d.count <= (max_records or d.count)
            assert d.records[0][0] == d.base, "the first record's offset is not 0"
        index += d.count
        records += d.records
    return records


_built = {}


def ethernet_simulator(with_link=False):
    """(runner, build directory) of EthernetCores (``with_link``: on LiteEth and its PHY model),
    exported and built once per session."""
    variant = "ethernet_link" if with_link else "ethernet"
    if variant not in _built:
        from tb import verilator_build

        from gateware.ethernet import export
        build_dir = HERE / "sim_build" / variant
        verilog = export(build_dir, TOPLEVEL, with_link=with_link, **BUILD_CLOCKS)
        _built[variant] = verilator_build(verilog, TOPLEVEL, build_dir), build_dir
    return _built[variant]


def run_ethernet_cocotb(test_file, with_link=False):
    runner, build_dir = ethernet_simulator(with_link)
    env = {"HILAT_TB_INFO": str(build_dir / f"{TOPLEVEL}.json")}
    return run_tests(runner, TOPLEVEL, build_dir, test_file, env, "EthernetCores")
