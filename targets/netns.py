"""Running things inside a network namespace of their own (Linux, root): the simulated rig's Ethernet.

The simulator's ``gmii_ethernet`` module creates a TAP interface and gives it the host's address; the
rig's address sits behind it. Both must exist only where nothing else on the machine sees them, so
the simulator, the host side talking to it (hilat, a test) and the capture of the link all run in a
fresh namespace (``unshare(CLONE_NEWNET)``): it has only ``lo`` (brought up here) and whatever the
simulator creates, and it goes away with its last process.

- ``unavailable_reason()``: why a namespace cannot be made here (not root, no /dev/net/tun, no
  ``unshare``), or None.
- ``isolated()``: whether this process is in a namespace of its own with nothing but ``lo``.
- ``enter()``: move the calling process into a new namespace (for a process that is about to run
  everything inside it, e.g. ``hilat demo --ethernet``).
- ``call(fn, *args, timeout=...)``: run ``fn(*args)`` in a forked child inside a new namespace and
  return its result (pickled back); an exception there is raised here with the child's traceback.
  The child is killed at the timeout, and its own children with it (they die with it: hilat.shutdown).
- ``Capture``: dumpcap writing an interface's frames to a pcap file (the simulated link's record).
"""

import ctypes
import os
import pickle
import select
import shutil
import signal
import socket
import struct
import subprocess
import time
import traceback
from pathlib import Path

from hilat import shutdown

CLONE_NEWNET = 0x40000000


class NamespaceError(RuntimeError):
    pass


def unavailable_reason():
    """Why a network namespace with a TAP interface cannot be made here, or None if it can."""
    if not os.sys.platform.startswith("linux"):
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "making a network namespace and a TAP interface needs root"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun (TAP interfaces) on this machine"
    if shutil.which("ip") is None:
        return "no `ip` command (Debian's iproute2)"
    try:
        probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare --net failed: {e}"
    if probe.returncode != 0:
        return f"unshare --net failed: {probe.stderr.strip()}"
    return None


def isolated():
    """Whether this process's network namespace has no interface but ``lo``: a namespace of its own (the
    machine's has its real interfaces), with no simulated rig's TAP yet (one rig a namespace)."""
    return {name for _, name in socket.if_nameindex()} <= {"lo"}


def enter():
    """Move this process into a new network namespace with ``lo`` up and IPv6 off (the simulated link
    then carries only the IPv4 traffic we make, no router solicitations). Its children start in it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise NamespaceError(f"unshare(CLONE_NEWNET): {os.strerror(errno)}")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # Interfaces made from now on (the TAP) start with IPv6 off.
    for path in ("/proc/sys/net/ipv6/conf/default/disable_ipv6", "/proc/sys/net/ipv6/conf/all/disable_ipv6"):
        if os.path.exists(path):
            Path(path).write_text("1")


def _die_with(parent):
    """The kernel kills this (forked) process when ``parent`` dies (PR_SET_PDEATHSIG), as
    hilat.shutdown does for the children it starts."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def call(fn, *args, timeout=600):
    """``fn(*args)`` run in a forked child that first enters a new network namespace; its return value
    (picklable) is returned. An exception raised by ``fn`` is raised as ``NamespaceError`` with the
    child's traceback; the child is killed after ``timeout`` seconds (``TimeoutError``)."""
    reason = unavailable_reason()
    if reason:
        raise NamespaceError(reason)
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:   # the child: never returns into the caller's code
        status = 0
        try:
            os.close(read_fd)
            _die_with(parent)
            enter()
            payload = ("ok", fn(*args))
        except BaseException as e:   # noqa: BLE001 - everything goes back to the parent
            payload = ("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
            status = 1
        try:
            data = pickle.dumps(payload)
        except Exception as e:   # noqa: BLE001
            data, status = pickle.dumps(("error", f"result not picklable: {e}")), 1
        try:
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
        finally:
            os._exit(status)
    os.close(write_fd)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        with os.fdopen(read_fd, "rb") as pipe:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"namespace child {pid} ran over {timeout} s: killed")
                ready, _, _ = select.select([pipe], [], [], left)
                if ready:
                    chunk = os.read(pipe.fileno(), 1 << 20)
                    if not chunk:
                        break
                    chunks.append(chunk)
    finally:
        if os.waitpid(pid, os.WNOHANG)[0] == 0:   # still running (a timeout, an interrupt): killed, then reaped
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if not chunks:
        raise NamespaceError(f"namespace child {pid} died without a result")
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "error":
        raise NamespaceError(f"in the namespace: {value}")
    return value


def interface_up(name):
    """Whether interface ``name`` exists in this process's namespace and is up (SIOCGIFFLAGS: /sys shows
    the namespace it was mounted in, not ours)."""
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            request = fcntl.ioctl(s.fileno(), 0x8913, struct.pack("16sH14x", name.encode(), 0))   # SIOCGIFFLAGS
        except OSError:
            return False
    return bool(struct.unpack("16sH14x", request)[1] & 1)   # IFF_UP


def wait_for_interface(name, timeout=60, process=None):
    """Wait until interface ``name`` exists and is up (the simulator makes its TAP at start-up);
    ``process``: give up early when it has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if interface_up(name):
            return
        if process is not None and process.poll() is not None:
            raise NamespaceError(f"the process that was to make {name} ended (status {process.returncode})")
        time.sleep(0.05)
    raise TimeoutError(f"no interface {name} after {timeout} s")


def _packet_socket_on(index):
    """Whether a packet socket is bound to interface ``index`` in this namespace."""
    lines = Path("/proc/net/packet").read_text().splitlines()[1:]
    return any(int(line.split()[4]) == index for line in lines if len(line.split()) > 4)


# The capture's own end marker (IEEE's local experimental ethertype), left out by tshark_frames.
END_ETHERTYPE = 0x88B5


class Capture:
    """dumpcap writing every frame of ``interface`` to ``path`` (classic pcap), from ``start()`` (which
    returns once dumpcap captures) to ``stop()`` (which waits until it has written everything)."""

    def __init__(self, interface, path):
        self.interface, self.path = interface, Path(path)
        self.process = None

    def start(self, timeout=30):
        if shutil.which("dumpcap") is None:
            raise NamespaceError("no dumpcap (Debian's tshark: scripts/setup.sh installs it)")
        self.path.unlink(missing_ok=True)
        self.log = open(self.path.with_suffix(".dumpcap.log"), "w+")
        # -P: pcap, not pcapng; no ring buffer, no snap length: every byte of every frame.
        self.process = subprocess.Popen(["dumpcap", "-i", self.interface, "-P", "-w", str(self.path)],
                                        stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                        **shutdown.child_options())
        deadline = time.monotonic() + timeout
        index = socket.if_nametoindex(self.interface)
        while time.monotonic() < deadline:
            # dumpcap's "Capturing on" comes before its socket is bound: wait for the packet socket on
            # the interface itself (this namespace's /proc/net/packet), from when every frame is kept.
            if _packet_socket_on(index):
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise NamespaceError(f"dumpcap did not start capturing on {self.interface}: "
                             f"{self.path.with_suffix('.dumpcap.log').read_text()[-2000:]}")

    def stop(self, timeout=10):
        """Stop once everything sent so far is in the file: dumpcap reads the kernel's ring in blocks and
        flushes its file every half second, and on SIGINT drops what it has not read. So an end marker
        (a frame of ethertype END_ETHERTYPE with a fresh token, sent on the interface: it reaches the
        simulator too, which drops it) goes last, and the file is read until it ends with it."""
        if self.process and self.process.poll() is None:
            token = os.urandom(16)
            with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
                s.bind((self.interface, 0))
                s.send(b"\xff" * 6 + b"\x02\0\0\0\0\x01" + struct.pack("!H", END_ETHERTYPE) + token + bytes(30))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.process.poll() is None:
                with open(self.path, "rb") as f:
                    f.seek(max(0, f.seek(0, 2) - 64))
                    if token in f.read():
                        break
                time.sleep(0.1)
            else:
                raise NamespaceError(f"dumpcap did not write the end marker within {timeout} s")
            self.process.send_signal(signal.SIGINT)   # dumpcap closes the file on SIGINT
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                shutdown.stop_child(self.process, timeout=2)
        if getattr(self, "log", None):
            self.log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if exc[0] is None:
            self.stop()
        else:   # an error already: no waiting for the end marker
            self.kill()

    def kill(self):
        """Stop dumpcap at once (what it has not written is lost)."""
        if self.process:
            shutdown.stop_child(self.process, timeout=2)
        if getattr(self, "log", None):
            self.log.close()


# What tshark_frames reads of each frame. Checksum status with tshark's validation on: 0 bad, 1 good, 2 not
# checked, 3 not present (a UDP checksum of 0 is "none" in IPv4, which LiteEth sends: the Ethernet CRC
# covers the frame). Expert severity: WARN_SEVERITY and above are tshark's warnings and errors.
TSHARK_FIELDS = ("frame.number", "frame.protocols", "eth.src", "eth.dst", "eth.type", "ip.src", "ip.dst",
                 "ip.checksum.status", "udp.srcport", "udp.dstport", "udp.length", "udp.checksum",
                 "udp.checksum.status", "udp.payload", "_ws.malformed", "_ws.expert.severity")

WARN_SEVERITY = 0x00600000


def tshark_frames(pcap):
    """Every frame of ``pcap`` as Debian's tshark dissects it, IP and UDP checksum validation on: one
    dict of TSHARK_FIELDS (strings, '' where absent; ``udp.payload`` as bytes) at a time."""
    if shutil.which("tshark") is None:
        raise NamespaceError("no tshark (Debian's: scripts/setup.sh installs it)")
    args = ["tshark", "-n", "-r", str(pcap), "-Y", f"not eth.type == 0x{END_ETHERTYPE:04x}",
            "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
            "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for field in TSHARK_FIELDS:
        args += ["-e", field]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **shutdown.child_options()) as process:
        for line in process.stdout:
            frame = dict(zip(TSHARK_FIELDS, line.rstrip("\n").split("\t")))
            frame["udp.payload"] = bytes.fromhex(frame.get("udp.payload", "").replace(":", ""))
            yield frame
        errors = process.stderr.read()
    if process.returncode != 0:
        raise NamespaceError(f"tshark could not read {pcap}: {errors[-2000:]}")


def link_errors(sim_log):
    """The lines of the simulator's log in which LiteX's gmii_ethernet module reports a bad frame from
    the rig (preamble, frame check sequence, bus error, length)."""
    text = Path(sim_log).read_text(errors="replace")
    return [line for line in text.splitlines() if line.startswith("[gmii_ethernet]:")]


def _icmp_checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ping(address, ident, seq, payload, timeout):
    """One ICMP echo request to ``address``; the reply's payload (a raw socket: root in the namespace)."""
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


class BadFrame(ValueError):
    """A frame of the link that tshark finds malformed, warns about, or whose IPv4 checksum is bad."""


def checked_frames(pcap):
    """(kind, frame) of every frame of ``pcap`` as tshark reads it (kind: "arp", or the protocol on IPv4:
    "udp", "icmp"), once it passed what every frame must: not malformed, no warning or error of tshark's,
    and on IPv4 a header checksum tshark validated as good (else ``BadFrame``)."""
    for frame in tshark_frames(pcap):
        protocols = frame["frame.protocols"]
        kind = "arp" if protocols == "eth:ethertype:arp" else protocols.split(":")[3] if protocols.startswith(
            "eth:ethertype:ip:") else protocols
        severities = [int(s) for s in frame["_ws.expert.severity"].split(",") if s]
        if frame["_ws.malformed"] != "" or max(severities, default=0) >= WARN_SEVERITY:
            raise BadFrame(f"tshark: {frame}")
        if kind != "arp" and frame["ip.checksum.status"] != "1":
            raise BadFrame(f"IPv4 header checksum not good: {frame}")
        yield kind, frame
