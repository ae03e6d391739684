"""The firmware on the simulated rig's real Ethernet gateware (LiteEth, the command bridge, the
packetizer), driven frame by frame over UDP and the serial link from inside a network namespace the
test makes (targets/netns.py): IDENTIFY's Ethernet tail, replies on the link of their command, the
repeated-command rule, STREAM_CONFIG's destination resolved to the command's source, the stream
restarted at START with its session and every record of the run in it, STREAM_STATUS's counts equal
to what arrived, NET_CONFIG's ACK from the old address and the new one answering.

Needs the simulator's Ethernet build (targets.sim.build(ethernet=True), branch eth-sim): skipped, with
the reason, where it or a network namespace is not available."""

import inspect
import socket
import struct
import time

import pytest
from hilat.link import protocol as p

from targets import sim

pytestmark = pytest.mark.slow   # a simulator build of its own

RIG_IP = "192.168.1.50"
NEW_IP = "192.168.1.51"
COMMAND_PORT, STREAM_PORT = 5800, 5801
SESSION = 0x5EC0_1D01
STREAM_HEADER = struct.Struct("<IBBBBIIQQHH")   # docs/ethernet.md, "The stream datagram"
STIM_PULSES, STIM_PERIOD = 40, 2000


def _skip_reason():
    if "ethernet" not in inspect.signature(sim.build).parameters:
        return "targets.sim has no Ethernet build (branch eth-sim)"
    from targets import netns

    return netns.unavailable_reason()


REASON = _skip_reason()


class Link:
    """The host's side: one UDP socket on the TAP's address (command replies from 5800, stream
    datagrams from 5801) and the serial link's TCP connection; frames decoded as they come."""

    def __init__(self, serial_url):
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((sim.ETH_HOST_IP, 0))
        self.udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        host, port = serial_url.removeprefix("socket://").split(":")
        self.serial = socket.create_connection((host, int(port)), timeout=30)
        self.serial_decoder = p.FrameDecoder()
        self.stream = []      # (source address, bytes) of every stream datagram
        self.replies = []     # (source address, raw datagram) of every command-port datagram

    def send_udp(self, msg, seq, ip=RIG_IP):
        wire = msg.encode(seq)
        self.udp.sendto(wire, (ip, COMMAND_PORT))
        return wire

    def receive_udp(self, timeout):
        """Datagrams for ``timeout`` seconds (or until the first command-port one, timeout=None: 60 s)."""
        deadline = time.monotonic() + (60 if timeout is None else timeout)
        got = []
        while time.monotonic() < deadline:
            self.udp.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data, source = self.udp.recvfrom(4096)
            except TimeoutError:
                break
            if source[1] == STREAM_PORT:
                self.stream.append((source, data))
                continue
            self.replies.append((source, data))
            got.append((source, data))
            if timeout is None:
                break
        return got

    def ask_udp(self, msg, seq, ip=RIG_IP):
        """One command over UDP: its reply's datagram (one frame, from ip:5800) and the frame."""
        self.send_udp(msg, seq, ip)
        got = self.receive_udp(None)
        assert got, f"no reply to {msg.NAME} over UDP"
        source, data = got[0]
        assert source == (ip, COMMAND_PORT) and data.count(0) == 1 and data.endswith(b"\x00")
        return data, p.decode_frame(data)

    def ask_serial(self, msg, seq):
        self.serial.sendall(msg.encode(seq))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.serial.settimeout(max(0.01, deadline - time.monotonic()))
            frames = self.serial_decoder.feed(self.serial.recv(4096))
            if frames:
                return frames[0]
        raise AssertionError(f"no reply to {msg.NAME} on the serial link")


def _records(datagram, n_channels):
    """(session, seq, flags, first_index, [(tick, channels, levels)]) of a stream datagram."""
    magic, version, flags, words, header_words, session, seq, first, base, count, _ = \
        STREAM_HEADER.unpack_from(datagram)
    assert (magic, version, words, header_words) == (0x54414C48, 1, 2, 9)
    assert len(datagram) == 36 + 8 * count
    out = []
    for k in range(count):
        (record,) = struct.unpack_from("<Q", datagram, 36 + 8 * k)
        mask = (1 << n_channels) - 1
        out.append((base + (record & 0xFFFFFFFF), (record >> 32) & mask, (record >> (32 + n_channels)) & mask))
    return session, seq, flags, first, out


def _session(sim_dir, run_dir):
    """In the namespace: the whole exchange; returns what the test checks."""
    out = {}
    with sim.SimulatedRig(sim_dir, run_dir) as rig:
        link = Link(rig.url)
        _, frame = link.ask_udp(p.Hello(), 0)
        ident = frame.msg
        out["identify"] = ident
        status_req = p.StreamStatusReq()
        first, frame = link.ask_udp(status_req, 1)
        out["status_before"] = frame.msg
        again, _ = link.ask_udp(status_req, 1)          # its reply "lost": the same command again
        out["repeat_same_bytes"] = again == first
        # A command on the serial link: its reply there, none over UDP.
        out["serial_time"] = link.ask_serial(p.TimeReq(), 2)
        out["udp_after_serial"] = link.receive_udp(0.5)
        _, frame = link.ask_udp(p.StreamConfig(1, SESSION, 0, 0, 100, 1000), 3)
        out["stream_config_ack"] = frame.msg
        _, frame = link.ask_udp(status_req, 4)
        out["status_configured"] = frame.msg
        flags = p.CAPTURE_ENABLE | p.CAPTURE_RISE | p.CAPTURE_FALL
        n = ident.n_stimulus + ident.n_inputs
        acks = [link.ask_udp(p.CaptureConfig([(flags, 0)] * n), 5)[1].msg,
                link.ask_udp(p.StimConfig(0, p.MODE_PERIODIC, 0, 10, STIM_PERIOD, count=STIM_PULSES), 6)[1].msg,
                link.ask_udp(p.Start(channels=1), 7)[1].msg]
        out["run_acks"] = acks
        # The run: STIM_PULSES x STIM_PERIOD ticks, then quiet until the stream has sent them all.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            link.receive_udp(1.0)
            rises = sum(1 for _, data in link.stream
                        for _, ch, lv in _records(data, n)[4] if ch & 1 and lv & 1)
            if rises >= STIM_PULSES:
                break
        link.receive_udp(1.0)   # the last datagrams, flushed after 100 us
        _, frame = link.ask_udp(status_req, 8)
        out["status_after"] = frame.msg
        out["stream"] = list(link.stream)
        out["events_over_udp"] = [p.decode_frame(d).type for _, d in link.replies].count(p.MSG_EVENTS)
        # The rig's address changes after NET_CONFIG's ACK, which leaves from the old one.
        _, frame = link.ask_udp(p.NetConfig(p.parse_ip(NEW_IP), 0x10E2D5000051), 9)
        out["net_config_ack"] = frame.msg
        _, frame = link.ask_udp(p.Hello(), 0, ip=NEW_IP)
        out["identify_new"] = frame.msg
    return out


@pytest.mark.skipif(REASON is not None, reason=f"{REASON}")
def test_firmware_over_the_simulated_ethernet_link(tmp_path):
    from targets import netns

    sim_dir = sim.build(ethernet=True)
    out = netns.call(_session, sim_dir, tmp_path / "run", timeout=600)

    ident = out["identify"]
    assert ident.version == p.PROTOCOL_VERSION and ident.capabilities & p.CAP_ETHERNET
    assert ident.ethernet == p.EthernetInfo(p.parse_ip(RIG_IP), 0x10E2D5000050, COMMAND_PORT, STREAM_PORT, 2, 179)
    before = out["status_before"]
    assert (before.command_seq, before.enabled, before.link, before.session, before.dst_ip, before.dst_port,
            before.flush_us, before.heartbeat_ms) == (1, 0, p.STREAM_LINK_UP, 0, 0, 0, 100, 100)
    assert out["repeat_same_bytes"]
    assert isinstance(out["serial_time"].msg, p.Time) and out["serial_time"].msg.command_seq == 2
    assert out["udp_after_serial"] == []
    assert out["stream_config_ack"] == p.Ack(3, p.ACK_OK, "")
    configured = out["status_configured"]
    assert (configured.enabled, configured.session, p.format_ip(configured.dst_ip), configured.flush_us,
            configured.heartbeat_ms) == (1, SESSION, sim.ETH_HOST_IP, 100, 1000)
    assert [a.code for a in out["run_acks"]] == [p.ACK_OK] * 3

    # The stream: this session only, seq from 0 without a gap, first_index exact, the stimulus's
    # pulses all there (its own output is captured: STIM_PULSES rises and falls on channel 0).
    n = ident.n_stimulus + ident.n_inputs
    decoded = sorted((_records(data, n) for _, data in out["stream"]), key=lambda d: d[1])
    assert {d[0] for d in decoded} == {SESSION}
    assert [d[1] for d in decoded] == list(range(len(decoded)))
    index = 0
    for _, _, _, first, records in decoded:
        assert first == index
        index += len(records)
    records = [r for d in decoded for r in d[4]]
    assert [t for t, _, _ in records] == sorted(t for t, _, _ in records)
    stim = [lv & 1 for _, ch, lv in records if ch & 1]
    assert stim == [1, 0] * STIM_PULSES
    after = out["status_after"]
    assert (after.datagrams, after.records) == (len(decoded), len(records))
    assert out["events_over_udp"] == 0

    assert out["net_config_ack"] == p.Ack(9, p.ACK_OK, "")
    assert out["identify_new"].ethernet.ip == p.parse_ip(NEW_IP)
    assert out["identify_new"].ethernet.mac == 0x10E2D5000051
