"""targets/netns.py without the simulator: the namespace runner and the link capture (on the namespace's
own loopback). Skipped, with the reason, where a network namespace cannot be made."""

import os
import socket
import time

import pytest

from targets import netns

REASON = netns.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no network namespace: {REASON}")


def _interfaces():
    return netns.isolated(), sorted(name for _, name in socket.if_nameindex()), os.getpid()


def test_call_runs_in_a_fresh_namespace_and_returns_the_result():
    isolated, names, pid = netns.call(_interfaces)
    assert isolated and names == ["lo"]
    assert pid != os.getpid()
    assert not netns.isolated()   # this process is still in the machine's namespace


def _lo_up():
    return netns.interface_up("lo")


def test_lo_is_up_inside():
    assert netns.call(_lo_up) is True


def _fail():
    raise ValueError("on purpose")


def test_an_exception_comes_back_with_its_traceback():
    with pytest.raises(netns.NamespaceError, match="ValueError: on purpose") as e:
        netns.call(_fail)
    assert "_fail" in str(e.value)


def _sleep_and_leave_a_pid(path):
    path.write_text(str(os.getpid()))
    time.sleep(60)


def test_the_child_is_killed_at_the_timeout(tmp_path):
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        netns.call(_sleep_and_leave_a_pid, tmp_path / "pid", timeout=1)
    assert time.monotonic() - started < 10
    pid = int((tmp_path / "pid").read_text())
    assert not os.path.exists(f"/proc/{pid}")


def _capture_loopback(pcap, n):
    """Datagrams on lo, sent right before stop(): the capture must still hold every one."""
    with netns.Capture("lo", pcap):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, socket.socket(socket.AF_INET,
                                                                                   socket.SOCK_DGRAM) as tx:
            rx.bind(("127.0.0.1", 0))
            for i in range(n):
                tx.sendto(i.to_bytes(2, "little") * 50, rx.getsockname())
            port = rx.getsockname()[1]
    return port


def test_capture_keeps_every_frame_up_to_stop(tmp_path):
    n = 200
    port = netns.call(_capture_loopback, tmp_path / "lo.pcap", n)
    frames = [f for f in netns.tshark_frames(tmp_path / "lo.pcap") if f["udp.dstport"] == str(port)]
    assert [f["udp.payload"] for f in frames] == [i.to_bytes(2, "little") * 50 for i in range(n)]
    assert all(f["ip.checksum.status"] in ("1", "2") for f in frames)
