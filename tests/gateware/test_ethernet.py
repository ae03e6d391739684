"""EthernetLink (gateware/ethernet.py) with EthStream and EthCommandBridge on LiteEth's PHY model, on
Verilator: what the rig puts on the wire, byte by byte. The host's side is built and parsed here
from the protocols' own formats (Ethernet II, ARP, IPv4 with its header checksum, UDP): the rig
answers ARP for its address, takes a command datagram to port 5800 (its bytes and source through
the ethcmd CSRs), resolves the host by ARP and sends the reply from 5800, streams records from 5801
(decoded by eth_tb's reader of docs/ethernet.md: exact), counts the frames it receives, and takes a
new address and MAC at run time (ethnet_ip, ethnet_mac: NET_CONFIG). The model has no preamble or
CRC (LiteEth's own, not the rig's).
"""

import struct

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge
from eth_tb import EthTB, StreamDatagram, receive_all, run_ethernet_cocotb
from tb import CLOCKS, TB, assert_records_equal

RIG_IP, RIG_MAC = 0xC0A80132, 0x10E2D5000050        # the build's (docs/ethernet.md)
HOST_IP, HOST_MAC = 0xC0A80164, 0x020000000064
BROADCAST = 0xFFFFFFFFFFFF
ARP, IPV4, UDP = 0x0806, 0x0800, 17


def mac_bytes(mac):
    return mac.to_bytes(6, "big")


def ethernet(dst, src, ethertype, payload):
    frame = mac_bytes(dst) + mac_bytes(src) + struct.pack("!H", ethertype) + payload
    return frame + bytes(max(0, 60 - len(frame)))


def arp(op, sender_mac, sender_ip, target_mac, target_ip):
    return struct.pack("!HHBBH6sI6sI", 1, IPV4, 6, 4, op, mac_bytes(sender_mac), sender_ip,
                       mac_bytes(target_mac), target_ip)


def ones_complement_sum(data):
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def udp_ipv4(src_ip, dst_ip, src_port, dst_port, payload):
    udp = struct.pack("!HHHH", src_port, dst_port, 8 + len(payload), 0) + payload
    header = struct.pack("!BBHHHBBHII", 0x45, 0, 20 + len(udp), 0, 0, 64, UDP, 0, src_ip, dst_ip)
    checksum = 0xFFFF - ones_complement_sum(header)
    return header[:10] + struct.pack("!H", checksum) + header[12:] + udp


def parse(frame):
    """A frame from the rig: ("arp", op, sender_mac, sender_ip, target_ip, dst mac) or ("udp",
    src_ip, dst_ip, src_port, dst_port, payload, dst mac, src mac), every header checked."""
    dst, src, ethertype = int.from_bytes(frame[:6], "big"), int.from_bytes(frame[6:12], "big"), \
        struct.unpack("!H", frame[12:14])[0]
    body = frame[14:]
    if ethertype == ARP:
        hw, proto, hs, ps, op, smac, sip, _, tip = struct.unpack("!HHBBH6sI6sI", body[:28])
        assert (hw, proto, hs, ps) == (1, IPV4, 6, 4)
        assert int.from_bytes(smac, "big") == src
        return ("arp", op, src, sip, tip, dst)
    assert ethertype == IPV4, f"ethertype {ethertype:#x}"
    version_ihl, _, total, _, _, _, protocol, _, sip, dip = struct.unpack("!BBHHHBBHII", body[:20])
    assert version_ihl == 0x45 and protocol == UDP
    assert ones_complement_sum(body[:20]) == 0xFFFF, "IPv4 header checksum wrong"
    sport, dport, length, _ = struct.unpack("!HHHH", body[20:28])
    assert length == total - 20, "UDP length and IP length disagree"
    return ("udp", sip, dip, sport, dport, bytes(body[28:28 + length - 8]), dst, src)


class LinkTB(EthTB):
    """EthTB on the unit with the link: frames in on phy_sink_*, out on phy_source_*."""
    async def start(self):
        dut = self.dut
        dut.records_from_port.value = 0
        dut.rec_valid.value = 0
        dut.phy_sink_valid.value = 0
        self.frames = []
        await TB.start(self)
        cocotb.start_soon(self._wire_monitor())

    async def _wire_monitor(self):
        dut, current = self.dut, bytearray()
        while True:
            await FallingEdge(dut.sys_clk)
            if dut.phy_source_valid.value:
                current.append(dut.phy_source_data.value.to_unsigned())
            elif current:
                self.frames.append(parse(bytes(current)))
                current = bytearray()

    async def send_frame(self, frame):
        dut = self.dut
        for b in frame:
            await FallingEdge(dut.sys_clk)
            dut.phy_sink_valid.value = 1
            dut.phy_sink_data.value = b
        await FallingEdge(dut.sys_clk)
        dut.phy_sink_valid.value = 0
        await ClockCycles(dut.sys_clk, 12)   # the inter-frame gap

    async def wait_frames(self, n, cycles=3000):
        for _ in range(cycles // 10):
            if len(self.frames) >= n:
                return self.frames[n - 1]
            await ClockCycles(self.dut.sys_clk, 10)
        raise AssertionError(f"{len(self.frames)} frames from the rig, waited for {n}: {self.frames}")


@cocotb.test()
async def on_the_wire(dut):
    tb = LinkTB(dut, CLOCKS[0])
    await tb.start()
    configs = await tb.configure_capture()
    assert await tb.read("ethnet_ip") == RIG_IP and await tb.read("ethnet_mac") == RIG_MAC

    # ARP: the rig answers for its address, to the asker.
    await tb.send_frame(ethernet(BROADCAST, HOST_MAC, ARP, arp(1, HOST_MAC, HOST_IP, 0, RIG_IP)))
    assert await tb.wait_frames(1) == ("arp", 2, RIG_MAC, RIG_IP, HOST_IP, HOST_MAC)

    # A command datagram: its bytes and source through the ethcmd CSRs.
    command = bytes(range(1, 40))
    await tb.send_frame(ethernet(RIG_MAC, HOST_MAC, IPV4, udp_ipv4(HOST_IP, RIG_IP, 40000, 5800, command)))
    await ClockCycles(dut.sys_clk, 100)
    assert await receive_all(tb) == [(command, HOST_IP, 40000)]
    # One to another address, and one to another port, are not taken.
    await tb.send_frame(ethernet(RIG_MAC, HOST_MAC, IPV4, udp_ipv4(HOST_IP, RIG_IP + 1, 40000, 5800, command)))
    await tb.send_frame(ethernet(RIG_MAC, HOST_MAC, IPV4, udp_ipv4(HOST_IP, RIG_IP, 40000, 5802, command)))
    await ClockCycles(dut.sys_clk, 100)
    assert await receive_all(tb) == []
    assert (await tb.read_fields("ethnet_status"))["rx_frames"] == 4

    # The reply: the rig asks who has the host's address, then sends it from 5800.
    reply = b"reply of 21 bytes....."[:21]
    await tb.write("ethcmd_tx_dst_ip", HOST_IP)
    await tb.write("ethcmd_tx_dst_port", 40000)
    for b in reply:
        await tb.write("ethcmd_tx_data", b)
    await tb.write_fields("ethcmd_tx_send", send=1)
    assert await tb.wait_frames(2) == ("arp", 1, RIG_MAC, RIG_IP, HOST_IP, BROADCAST)
    await tb.send_frame(ethernet(RIG_MAC, HOST_MAC, ARP, arp(2, HOST_MAC, HOST_IP, RIG_MAC, RIG_IP)))
    assert await tb.wait_frames(3) == ("udp", RIG_IP, HOST_IP, 5800, 40000, reply, HOST_MAC, RIG_MAC)

    # The stream: records from 5801 to the host, exact.
    await tb.configure_stream(0xABCD0001, flush_cycles=300, dst_ip=HOST_IP, dst_port=6000)
    t = await tb.now() + 20
    for k in range(30):
        tb.drive(tb.first_input + k % 4, t + 5 * k, 1 - (k // 4) % 2)
    await tb.settle()
    await ClockCycles(dut.sys_clk, 600)
    datagrams = [f for f in tb.frames[3:] if f[0] == "udp"]
    assert datagrams and all(f[1:5] == (RIG_IP, HOST_IP, 5801, 6000) and f[6:] == (HOST_MAC, RIG_MAC)
                             for f in datagrams)
    stream = [StreamDatagram(f[5], tb.n_channels, 8) for f in datagrams]
    assert [d.seq for d in stream] == list(range(len(stream)))
    records = [r[:3] for d in stream for r in d.records]
    assert_records_equal(records, tb.expected(configs))

    # NET_CONFIG: a new address and MAC at run time; the old address is no longer answered.
    new_ip, new_mac = 0xC0A8014D, 0x10E2D50000AA
    await tb.write("ethnet_ip", new_ip)
    await tb.write("ethnet_mac", new_mac)
    seen = len(tb.frames)
    await tb.send_frame(ethernet(BROADCAST, HOST_MAC, ARP, arp(1, HOST_MAC, HOST_IP, 0, RIG_IP)))
    await tb.send_frame(ethernet(BROADCAST, HOST_MAC, ARP, arp(1, HOST_MAC, HOST_IP, 0, new_ip)))
    assert await tb.wait_frames(seen + 1) == ("arp", 2, new_mac, new_ip, HOST_IP, HOST_MAC)
    await ClockCycles(dut.sys_clk, 300)
    assert len(tb.frames) == seen + 1, "the old address answered"
    command = b"to the new address"
    await tb.send_frame(ethernet(new_mac, HOST_MAC, IPV4, udp_ipv4(HOST_IP, new_ip, 40001, 5800, command)))
    await ClockCycles(dut.sys_clk, 100)
    assert await receive_all(tb) == [(command, HOST_IP, 40001)]


def test_ethernet_on_the_wire():
    run_ethernet_cocotb(__file__, with_link=True)


# The SoC option ------------------------------------------------------------------------------------

def _rig_soc(tmp_path, ethernet):
    """A RigSoC on LiteX's simulation platform (with LiteEth's PHY model when ``ethernet``), its
    csr.json and soc.h generated (no software, no gateware build)."""
    import json

    from liteeth.phy.model import LiteEthPHYModel
    from litex.build.generic_platform import Pins, Subsignal
    from litex.build.sim import SimPlatform
    from litex.soc.integration.builder import Builder
    from migen import ClockDomain, Module, Signal

    from gateware.soc import RigSoC

    def stream_pads(name):
        return (name, 0, *[Subsignal(f"{side}_{what}", Pins(8 if what == "data" else 1))
                           for side in ("source", "sink") for what in ("valid", "ready", "data")])

    platform = SimPlatform("SIM", [("sys_clk", 0, Pins(1)), ("sys_rst", 0, Pins(1)),
                                   stream_pads("serial"), stream_pads("eth")])
    phy = LiteEthPHYModel(platform.request("eth")) if ethernet else None
    soc = RigSoC(platform, 50e6, 50e6, [Signal() for _ in range(2)], [Signal() for _ in range(4)], board="sim",
                 uart_name="sim", ethernet_phy=phy, eth_ip="10.0.0.7", eth_mac="02:00:00:00:00:07")
    soc.crg = Module()
    soc.crg.clock_domains.cd_sys = ClockDomain()
    soc.crg.clock_domains.cd_ts = ClockDomain()
    builder = Builder(soc, output_dir=str(tmp_path), compile_software=False, compile_gateware=False,
                      csr_json=str(tmp_path / "csr.json"))
    if phy is not None:
        soc.ethphy = phy   # as a target may do after RigSoC.__init__: the PHY is added once all the same
    builder.build(run=False)
    csrs = json.loads((tmp_path / "csr.json").read_text())["csr_registers"]
    soc_h = (tmp_path / "software" / "include" / "generated" / "soc.h").read_text()
    return csrs, soc_h


DOCUMENTED_CSRS = {   # docs/ethernet.md, "CSRs"
    "ethstream": ["control", "session", "dst_ip", "dst_port", "flush_cycles", "heartbeat_cycles", "datagrams",
                  "records"],
    "ethcmd": ["rx_status", "rx_data", "rx_pop", "rx_src_ip", "rx_src_port", "tx_data", "tx_send", "tx_dst_ip",
               "tx_dst_port", "tx_status", "rx_dropped"],
    "ethnet": ["ip", "mac", "status"],
}


def test_rig_soc_with_and_without_ethernet(tmp_path):
    """With a PHY the SoC has every CSR docs/ethernet.md names and the soc.h constants (the build's
    address and MAC); without one, none of them."""
    csrs, soc_h = _rig_soc(tmp_path / "eth", ethernet=True)
    for module, registers in DOCUMENTED_CSRS.items():
        for register in registers:
            assert f"{module}_{register}" in csrs, f"{module}_{register} missing"
    assert csrs["ethstream_records"]["size"] == 2 and csrs["ethnet_mac"]["size"] == 2   # 64 and 48 bits
    assert "ethphy_crg_reset" in csrs   # the PHY is in the SoC (added by RigSoC)
    for line in ("HILAT_ETHERNET 1", f"HILAT_ETH_IP_DEFAULT {0x0A000007}", f"HILAT_ETH_MAC_DEFAULT {0x020000000007}",
                 "HILAT_ETH_COMMAND_PORT 5800", "HILAT_ETH_STREAM_PORT 5801", "HILAT_ETH_RECORD_WORDS 2",
                 "HILAT_ETH_MAX_RECORDS 179"):
        assert f"#define {line}\n" in soc_h, line
    csrs, soc_h = _rig_soc(tmp_path / "uart", ethernet=False)
    assert not [name for name in csrs if name.startswith(("ethstream", "ethcmd", "ethnet"))]
    assert "HILAT_ETH" not in soc_h and "capture_ev_pop" in csrs
