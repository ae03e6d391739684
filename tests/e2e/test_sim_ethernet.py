"""The simulated Ethernet link, end to end, inside a network namespace each test makes (targets/netns.py).

The simulator's gmii_ethernet module makes the TAP interface with the host's address (192.168.1.100)
and checks every frame the rig sends (preamble, CRC); dumpcap writes the link to a pcap that tshark
reads back with checksum validation on. Nothing of it exists outside the namespace. Skipped, with the
reason, where a namespace cannot be made (not root, no /dev/net/tun).
"""

import random
import socket
import struct
import time

import pytest

from targets import netns, sim

REASON = netns.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no network namespace: {REASON}")


def _icmp_checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _ping(address, ident, seq, payload, timeout):
    """One ICMP echo request to ``address``; the reply's payload (raw socket: we are root in the namespace)."""
    header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    request = struct.pack("!BBHHH", 8, 0, _icmp_checksum(header + payload), ident, seq) + payload
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        s.settimeout(timeout)
        s.sendto(request, (address, 0))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            packet, _ = s.recvfrom(2048)
            icmp = packet[(packet[0] & 0x0F) * 4:]
            kind, _, _, got_ident, got_seq = struct.unpack("!BBHHH", icmp[:8])
            if kind == 0 and (got_ident, got_seq) == (ident, seq):
                return icmp[8:]
    raise TimeoutError(f"no echo reply from {address}")


def _checked_frames(pcap):
    """(kind, frame) of every frame of ``pcap`` as tshark reads it (kind: "arp", or the protocol on IPv4:
    "udp", "icmp"), once it passed what every frame must: not malformed, no warning or error of tshark's,
    and on IPv4 a header checksum tshark validated as good."""
    for frame in netns.tshark_frames(pcap):
        protocols = frame["frame.protocols"]
        kind = "arp" if protocols == "eth:ethertype:arp" else protocols.split(":")[3] if protocols.startswith(
            "eth:ethertype:ip:") else protocols
        severities = [int(s) for s in frame["_ws.expert.severity"].split(",") if s]
        assert frame["_ws.malformed"] == "" and max(severities, default=0) < netns.WARN_SEVERITY, frame
        assert kind == "arp" or frame["ip.checksum.status"] == "1", frame
        yield kind, frame


def _echo_in_namespace(sim_dir, run_dir, sizes, seed):
    """In the namespace: LiteEth's echo simulator, the link captured; a ping, then one datagram of each
    size (random bytes) sent and its echo awaited. Returns what was sent and received, and the pcap."""
    from targets import sim_liteeth

    rng = random.Random(seed)
    pcap = run_dir / "link.pcap"
    sent, received, pongs = [], [], []
    with sim_liteeth.EchoSim(sim_dir, run_dir), netns.Capture(sim.ETH_TAP, pcap):
        pongs.append(_ping(sim_liteeth.ETH_RIG_IP, 0x4C54, 1, b"hilat ping", timeout=30))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((sim.ETH_HOST_IP, 0))
            s.settimeout(30)
            for size in sizes:
                payload = rng.randbytes(size)
                s.sendto(payload, (sim_liteeth.ETH_RIG_IP, sim_liteeth.ECHO_PORT))
                data, source = s.recvfrom(4096)
                sent.append(payload)
                received.append((data, source))
            port = s.getsockname()[1]
    return {"sent": sent, "received": received, "pongs": pongs, "pcap": pcap, "port": port,
            "link_errors": netns.link_errors(run_dir / "sim.log")}


@pytest.mark.slow   # LiteEth's echo: a simulator build of its own (about 25 s)
def test_liteeth_echo_in_a_namespace(tmp_path):
    """LiteEth alone behind the GMII model: it answers a ping and echoes every datagram exactly (sizes
    1 .. 1,472 bytes), the module finds no bad frame, and tshark finds in the pcap only ARP, ICMP and
    UDP frames with good IPv4 checksums, whose UDP payloads are the datagrams sent and echoed, in order."""
    from targets import sim_liteeth

    sim_dir = sim_liteeth.build()
    sizes = [1, 17, 18, 100, 511, 1024, 1471, 1472] + [random.Random(1).randrange(1, 1473) for _ in range(24)]
    out = netns.call(_echo_in_namespace, sim_dir, tmp_path / "echo", sizes, 5, timeout=300)
    assert out["pongs"] == [b"hilat ping"]
    assert [data for data, _ in out["received"]] == out["sent"]
    assert {source for _, source in out["received"]} == {(sim_liteeth.ETH_RIG_IP, sim_liteeth.ECHO_PORT)}
    assert out["link_errors"] == []

    kinds, to_rig, from_rig = {}, [], []
    for kind, frame in _checked_frames(out["pcap"]):
        kinds[kind] = kinds.get(kind, 0) + 1
        assert kind in ("arp", "icmp", "udp"), frame
        if kind == "udp":
            # LiteEth sends no UDP checksum (0, allowed in IPv4): the Ethernet CRC the module checked covers it.
            if frame["ip.src"] == sim_liteeth.ETH_RIG_IP:
                assert frame["udp.checksum.status"] == "3" and frame["udp.checksum"] == "0x0000", frame
                assert frame["udp.srcport"] == str(sim_liteeth.ECHO_PORT)
                from_rig.append(frame["udp.payload"])
            else:
                assert frame["udp.checksum.status"] == "1" and frame["udp.srcport"] == str(out["port"])
                to_rig.append(frame["udp.payload"])
    assert to_rig == out["sent"] and from_rig == out["sent"]
    assert kinds["udp"] == 2 * len(sizes) and kinds["icmp"] == 2 and kinds.get("arp", 0) >= 2


# ---- the simulated rig over its Ethernet link --------------------------------------------------------------

# Every DUT setting and stimulus of the serial end-to-end test (tests/e2e/test_sim_end_to_end.py), fewer stimuli.
N_STIMULI = 500
DUT = {"seed": 7, "mask_per1024": 40, "miss_per1024": 12}
STIMULUS = {"mode": "dither", "period": 5000, "jitter": 1000, "seed": 3}


@pytest.fixture(scope="module")
def eth_sim_dir():
    """The simulated rig with Ethernet: a build of its own (about 3 minutes, cached by content hash)."""
    return sim.build(ethernet=True)


def _capture(rig, url, run_dir, label):
    from hilat.capture import Capture, CaptureSettings, StimulusSettings

    settings = CaptureSettings(count=N_STIMULI, out_dir=run_dir / "runs", progress=False, label=label,
                               stimulus=StimulusSettings(**STIMULUS))
    return Capture(url, settings).run()


def _records(run_dir):
    """A run's records relative to its start tick: (ticks, channels, levels)."""
    from hilat.runs import load_run

    run = load_run(run_dir)
    return run.ticks - int(run.meta["start_tick"]), run.chans, run.levels


def _udp_and_serial_in_namespace(sim_dir, work):
    """In the namespace: one capture over udp:// with the link captured to a pcap, then the same settings
    over the serial link of a fresh simulator (the DUT model starts again from its seed)."""
    out = {}
    for link in ("udp", "serial"):
        dut_log = work / f"injected-{link}.csv"
        with sim.SimulatedRig(sim_dir, work / f"sim-{link}", dut_args=DUT, dut_log=dut_log) as rig:
            if link == "udp":
                assert rig.udp_url == "udp://192.168.1.50"
                with netns.Capture(sim.ETH_TAP, work / "link.pcap"):
                    capture = _capture(rig, rig.udp_url, work, link)
            else:
                capture = _capture(rig, rig.url, work, link)
        assert capture.error is None and not capture.interrupted, capture.error
        pairing = capture.pairing()
        out[link] = {"run_dir": capture.run_dir, "injected": sim.read_dut_log(dut_log),
                     "isr": pairing.isr_latency, "task": pairing.task_latency, "records": _records(capture.run_dir),
                     "link_errors": netns.link_errors(work / f"sim-{link}" / "sim.log")}
    return out


@pytest.mark.slow   # the Ethernet simulator build
def test_udp_measures_exactly_as_serial_and_the_pcap_is_what_the_host_received(eth_sim_dir, tmp_path):
    """The model DUT's injected latencies measured exactly over udp://; the same settings over the serial
    link give identical records; the gmii module found no bad frame; tshark finds every frame of the
    link a good ARP or Ethernet/IPv4/UDP frame, and the stream's payloads are stream.bin's datagrams."""
    import json

    import numpy as np

    out = netns.call(_udp_and_serial_in_namespace, eth_sim_dir, tmp_path, timeout=900)
    udp, serial = out["udp"], out["serial"]
    for result in (udp, serial):
        injected = result["injected"]
        assert len(injected) == len(result["isr"]) == N_STIMULI and not (injected[:, 1] == 2).any()
        missed = injected[:, 1] == 1
        assert missed.any() and not missed.all()
        np.testing.assert_array_equal(result["isr"][missed], -1)
        np.testing.assert_array_equal(result["isr"][~missed], injected[~missed, 2])
        np.testing.assert_array_equal(result["task"][~missed], injected[~missed, 3])
        assert result["link_errors"] == []
    np.testing.assert_array_equal(udp["injected"], serial["injected"])
    for a, b in zip(udp["records"], serial["records"]):
        np.testing.assert_array_equal(a, b)
    assert len(udp["records"][0]) > 4 * N_STIMULI

    meta = json.loads((udp["run_dir"] / "meta.json").read_text())
    stream = meta["counters"]["stream"]
    assert stream is not None, meta["counters"]

    # stream.bin: every datagram as received (udp.py's slots), in arrival order.
    from hilat import udp as udp_format

    received = []
    for slots in udp_format.iter_stream_file(udp["run_dir"] / "stream.bin"):
        for slot in slots:
            length = int(slot[:4].view("<u4")[0])
            received.append(bytes(slot[udp_format.SLOT_HEADER:udp_format.SLOT_HEADER + length]))
    assert received

    streamed = []
    for kind, frame in _checked_frames(tmp_path / "link.pcap"):
        assert kind in ("arp", "udp"), frame
        if kind == "arp":
            continue
        if frame["ip.src"] == "192.168.1.50":
            assert frame["udp.checksum.status"] == "3", frame   # LiteEth sends none (0); the module checked the CRC
            assert frame["udp.srcport"] in ("5800", "5801"), frame
            if frame["udp.srcport"] == "5801":
                streamed.append(frame["udp.payload"])
        else:
            assert frame["udp.checksum.status"] == "1" and frame["udp.dstport"] == "5800", frame
    assert streamed == received
    assert len(received) == stream["datagrams_received"] == stream["rig_datagrams_sent"], stream
    # The rig's records (an edge on two channels in one tick is one record), as many as over serial.
    serial_meta = json.loads((serial["run_dir"] / "meta.json").read_text())
    assert stream["records"] == stream["rig_records_sent"] == serial_meta["counters"]["rig_records_sent"], stream
    assert not any(stream[k] for k in ("datagrams_lost", "records_lost", "reordered", "duplicated", "late", "stale",
                                       "malformed")), stream
