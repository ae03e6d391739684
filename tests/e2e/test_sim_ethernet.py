"""The simulated Ethernet link, end to end, inside a network namespace each test makes (targets/netns.py).

The simulator's gmii_ethernet module makes the TAP interface with the host's address (192.168.1.100)
and checks every frame the rig sends (preamble, CRC); dumpcap writes the link to a pcap that tshark
reads back with checksum validation on. Nothing of it exists outside the namespace. (LiteEth alone
behind the same model, echoing datagrams of every size: benchmarks/sim_liteeth_echo.py.) Skipped, with the
reason, where a namespace cannot be made (not root, no /dev/net/tun).
"""

import pytest

from targets import netns, sim

REASON = netns.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no network namespace: {REASON}")


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
    from hilat.acquisition.capture import Capture
    from hilat.acquisition.settings import CaptureSettings, StimulusSettings

    settings = CaptureSettings(count=N_STIMULI, out_dir=run_dir / "runs", progress=False, label=label,
                               stimulus=StimulusSettings(**STIMULUS))
    return Capture(url, settings).run()


def _records(run_dir):
    """A run's records relative to its start tick: (ticks, channels, levels)."""
    from hilat.rundir.reader import load_run

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
                out["pong"] = netns.ping("192.168.1.50", 0x4C54, 1, b"hilat ping", timeout=30)   # ICMP is on
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
    assert out["pong"] == b"hilat ping"
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
    from hilat.link import udp as udp_format

    received = []
    for slots in udp_format.iter_stream_file(udp["run_dir"] / "stream.bin"):
        for slot in slots:
            length = int(slot[:4].view("<u4")[0])
            received.append(bytes(slot[udp_format.SLOT_HEADER:udp_format.SLOT_HEADER + length]))
    assert received

    streamed = []
    for kind, frame in netns.checked_frames(tmp_path / "link.pcap"):
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
