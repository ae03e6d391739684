"""Transport: a byte stream to the rig through pyserial's ``serial_for_url``.

``/dev/ttyUSB0`` (a board), ``socket://127.0.0.1:PORT`` (the simulated rig), ``loop://`` (tests), and
``udp://HOST[:PORT]`` (an Ethernet rig's command port, 5800 by default; docs/ethernet.md): one frame a
datagram each way, read as the concatenation of the datagrams (frames end with 0x00, so the byte
stream decodes as the serial link's does). ``Rig`` sends a command again when its reply does not come.
Only one ``hilat`` may use a port at a time: an exclusive lock (flock on a file named after the
URL, and pyserial's own exclusive mode for serial devices) refuses a second one clearly.
"""

import fcntl
import hashlib
import os
import select
import socket
import tempfile

from hilat.extras import MissingExtra

try:
    import serial
except ImportError:
    # Serial ports need pyserial (the `serial` extra) or labgrid's fork pyserial-labgrid (the
    # `labgrid` extra), which installs the same module; socket:// (the simulated rig) needs neither.
    serial = None


class TransportError(Exception):
    """The port cannot be used; the message names the port and the cause."""


def _network_namespace():
    """The network namespace this process is in (its inode), or "" where /proc does not say."""
    try:
        return str(os.stat("/proc/self/ns/net").st_ino)
    except OSError:
        return ""


def _lock_path(url):
    # An address names a rig only within its network namespace (a simulated rig's 192.168.1.50
    # exists in the namespace its test made): network URLs are locked per namespace.
    key = url + ("@netns:" + _network_namespace() if url.startswith(("udp://", "socket://")) else "")
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    safe = "".join(c if c.isalnum() else "_" for c in url)[-40:]
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(base, f"hilat-{safe}-{digest}.lock")


# The rate each board's gateware is built with by default: what its USB-serial bridge carries
# (targets/<board>.py UART_BAUDRATE, a test keeps the two equal; docs/boards.md, "Serial link"). The
# Colorlight i5's DAPLink bridge cannot make 3 Mbaud.
BOARD_BAUDRATES = {"colorlight_i5": 2_000_000, "colorlight_i9": 2_000_000, "ulx3s": 3_000_000}
# Without --board or --baud: the ULX3S's rate, the fastest link (a rig built with another
# --uart-baudrate is reached with --baud). socket:// (the simulator) has no baud rate.
DEFAULT_BAUDRATE = BOARD_BAUDRATES["ulx3s"]


def baudrate_for(board=None, baud=None):
    """The rate to open a rig's port at: ``baud`` if given, else the board's, else the default."""
    if baud is not None:
        return baud
    if board is None:
        return DEFAULT_BAUDRATE
    if board not in BOARD_BAUDRATES:
        raise ValueError(f"unknown board {board!r}: one of {', '.join(sorted(BOARD_BAUDRATES))}")
    return BOARD_BAUDRATES[board]


class _Socket:
    """``socket://HOST:PORT`` read in large pieces: pyserial's socket handler hands over a byte or
    two per call, which cannot keep up with a rig streaming millions of records per second."""

    def __init__(self, url, timeout):
        host, _, port = url[len("socket://"):].rpartition(":")
        self.timeout = timeout
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
        # 1 MiB: room for bursts, while what arrives during a command's round trip (kept until the
        # reply comes) stays small; a larger buffer raised the capture's peak RSS by ~30 MiB.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self.sock.settimeout(None)

    def read(self, size):
        ready, _, _ = select.select([self.sock], [], [], self.timeout)
        if not ready:
            return b""
        data = self.sock.recv(size)
        if not data:
            raise ConnectionResetError("the other end closed the connection")
        return data

    def write(self, data):
        self.sock.sendall(data)

    def close(self):
        self.sock.close()


UDP_COMMAND_PORT = 5800    # docs/ethernet.md, HILAT_ETH_COMMAND_PORT


def parse_udp_url(url):
    """(host, port) of ``udp://HOST[:PORT]``; ValueError naming what is wrong."""
    rest = url[len("udp://"):].rstrip("/")
    host, sep, port = rest.rpartition(":") if rest.count(":") == 1 else (rest, "", "")
    if not sep:
        host, port = rest, str(UDP_COMMAND_PORT)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{url}: expected udp://HOST[:PORT] (PORT 1-65535, {UDP_COMMAND_PORT} by default)")
    return host, int(port)


class _Udp:
    """``udp://HOST[:PORT]``: a UDP socket connected to the rig's command port (it hears only the
    rig). ``datagrams``: a frame lost on the way is not resent by the link (``Rig`` resends)."""

    datagrams = True

    def __init__(self, url, timeout):
        host, port = parse_udp_url(url)
        address = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)[0][4]
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            self.sock.connect(address)
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self.remote = address

    def local_address(self):
        """(this host's IPv4 address toward the rig, the command socket's port)."""
        return self.sock.getsockname()

    def read(self, size):
        ready, _, _ = select.select([self.sock], [], [], self.timeout)
        if not ready:
            return b""
        data = bytearray()
        while len(data) < size:
            try:
                data += self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionRefusedError:
                break   # an ICMP "port unreachable" of an earlier send: nobody there yet, as silence
        return bytes(data)

    def write(self, data):
        try:
            self.sock.send(data)
        except ConnectionRefusedError:
            pass        # the answer to an earlier datagram: the rig is not listening (silence, then a timeout)

    def close(self):
        self.sock.close()


class Transport:
    def __init__(self, url, baudrate=DEFAULT_BAUDRATE, timeout=0.05):
        self.url = url
        # None: no serial line (the simulator's socket, an Ethernet rig's UDP port)
        self.baudrate = None if url.startswith(("socket://", "udp://")) else baudrate
        self._lock = None
        self.port = None
        self.socket = None
        self._acquire_lock()
        if url.startswith(("socket://", "udp://")):
            try:
                self.socket = (_Udp if url.startswith("udp://") else _Socket)(url, timeout)
            except (OSError, ValueError) as e:
                self._release_lock()
                raise TransportError(f"cannot open {url}: {e}") from None
            return
        if serial is None:
            self._release_lock()
            raise MissingExtra(f"the rig on {url} (a serial port) needs pyserial, which is not installed: "
                               "pip install 'hilat[serial]' (or 'hilat[labgrid]', whose pyserial-labgrid "
                               "provides it)")
        try:
            kwargs = dict(baudrate=baudrate, timeout=timeout, write_timeout=5, do_not_open=True)
            self.port = serial.serial_for_url(url, **kwargs)
            if url.startswith("/dev/"):
                self.port.exclusive = True
            self.port.open()
        except (serial.SerialException, OSError, ValueError) as e:
            self._release_lock()
            raise TransportError(f"cannot open {url}: {e}") from None

    def _acquire_lock(self):
        path = _lock_path(self.url)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise TransportError(f"{self.url} is in use by another hilat (pid {holder or '?'})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock = fd

    def _release_lock(self):
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def read(self, size=1 << 18):
        """Whatever arrived (possibly nothing, after the read timeout). Raises on a dropped link."""
        if self.socket is not None:
            try:
                return self.socket.read(size)
            except OSError as e:
                raise TransportError(f"link to {self.url} lost: {e}") from None
        try:
            data = self.port.read(max(1, min(size, self.port.in_waiting or 1)))
        except (serial.SerialException, OSError) as e:
            raise TransportError(f"link to {self.url} lost: {e}") from None
        try:
            waiting = self.port.in_waiting
            if waiting:
                data += self.port.read(min(waiting, size))
        except (serial.SerialException, OSError):
            # The link dropped after `data` arrived: hand those bytes over (they go to raw.bin);
            # the next read reports the loss.
            pass
        return data

    def write(self, data):
        if self.socket is not None:
            try:
                return self.socket.write(data)
            except OSError as e:
                raise TransportError(f"link to {self.url} lost: {e}") from None
        try:
            self.port.write(data)
            self.port.flush()
        except (serial.SerialException, OSError) as e:
            raise TransportError(f"link to {self.url} lost: {e}") from None

    def set_read_timeout(self, seconds):
        """How long a read of a socket link waits for data (the stream's backlog: not at all)."""
        if self.socket is not None:
            self.socket.timeout = seconds

    @property
    def datagrams(self):
        """Whether frames travel in datagrams, which the link does not resend (udp://)."""
        return getattr(self.socket, "datagrams", False)

    def local_address(self):
        """udp://: this host's address and port toward the rig."""
        return self.socket.local_address()

    def close(self):
        if self.socket is not None:
            self.socket.close()
        if self.port is not None:
            try:
                self.port.close()
            except (serial.SerialException, OSError):
                pass
        self._release_lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
