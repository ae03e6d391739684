"""LiteEth alone behind the simulator's GMII model (targets/sim_liteeth.py), in a network namespace made
for it: a ping, then datagrams of 1 .. 1,472 bytes echoed. Every echo must equal what was sent, the
gmii_ethernet module must find no bad frame, and tshark must find in the pcap only ARP, ICMP and UDP
frames with good IPv4 checksums whose UDP payloads are the datagrams sent and echoed, in order.

The simulated link proved without the rig (the rig over it: tests/e2e/test_sim_ethernet.py). A
simulator build of its own (about 25 s), so it is kept out of `make test`. Root and /dev/net/tun needed.

    .venv/bin/python benchmarks/sim_liteeth_echo.py [--datagrams 24]

Last line: `liteeth echo: D datagrams echoed, wrong W, bad frames B, ping ok|failed`
"""

import argparse
import random
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from targets import netns, sim, sim_liteeth  # noqa: E402


def _echo_in_namespace(sim_dir, run_dir, sizes, seed):
    """In the namespace: the echo simulator, the link captured; a ping, then one datagram of each size
    (random bytes) sent and its echo awaited."""
    rng = random.Random(seed)
    pcap = run_dir / "link.pcap"
    sent, received = [], []
    with sim_liteeth.EchoSim(sim_dir, run_dir), netns.Capture(sim.ETH_TAP, pcap):
        pong = netns.ping(sim_liteeth.ETH_RIG_IP, 0x4C54, 1, b"hilat ping", timeout=30)
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
    return {"sent": sent, "received": received, "pong": pong, "pcap": pcap, "port": port,
            "link_errors": netns.link_errors(run_dir / "sim.log")}


def _bad_frames(out):
    """The frames of the pcap that are not what they must be (a list of reasons)."""
    bad, to_rig, from_rig = [], [], []
    try:
        for kind, frame in netns.checked_frames(out["pcap"]):
            if kind not in ("arp", "icmp", "udp"):
                bad.append(f"a {kind} frame")
            elif kind == "udp" and frame["ip.src"] == sim_liteeth.ETH_RIG_IP:
                # LiteEth sends no UDP checksum (0, allowed in IPv4): the Ethernet CRC the module checked covers it.
                if frame["udp.checksum.status"] != "3" or frame["udp.srcport"] != str(sim_liteeth.ECHO_PORT):
                    bad.append(f"rig frame {frame}")
                from_rig.append(frame["udp.payload"])
            elif kind == "udp":
                if frame["udp.checksum.status"] != "1" or frame["udp.srcport"] != str(out["port"]):
                    bad.append(f"host frame {frame}")
                to_rig.append(frame["udp.payload"])
    except netns.BadFrame as e:
        bad.append(str(e))
    if to_rig != out["sent"] or from_rig != out["sent"]:
        bad.append("the pcap's UDP payloads are not the datagrams sent and echoed")
    return bad + out["link_errors"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datagrams", type=int, default=24, help="random sizes beside the fixed ones")
    args = parser.parse_args()
    reason = netns.unavailable_reason()
    if reason:
        sys.exit(f"no network namespace: {reason}")
    sim_dir = sim_liteeth.build()
    sizes = [1, 17, 18, 100, 511, 1024, 1471, 1472] + [random.Random(1).randrange(1, 1473)
                                                      for _ in range(args.datagrams)]
    with tempfile.TemporaryDirectory() as work:
        out = netns.call(_echo_in_namespace, sim_dir, Path(work) / "echo", sizes, 5, timeout=300)
        wrong = sum(data != payload or source != (sim_liteeth.ETH_RIG_IP, sim_liteeth.ECHO_PORT)
                    for payload, (data, source) in zip(out["sent"], out["received"]))
        bad = _bad_frames(out)
    for reason in bad:
        print("bad:", reason)
    print(f"liteeth echo: {len(out['received'])} datagrams echoed, wrong {wrong}, bad frames {len(bad)}, "
          f"ping {'ok' if out['pong'] == b'hilat ping' else 'failed'}")
    return 1 if wrong or bad or out["pong"] != b"hilat ping" else 0


if __name__ == "__main__":
    sys.exit(main())
