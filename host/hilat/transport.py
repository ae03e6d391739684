"""Transport: a byte stream to the rig through pyserial's ``serial_for_url``.

``/dev/ttyUSB0`` (a board), ``socket://127.0.0.1:PORT`` (the simulated rig), ``loop://`` (tests).
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


def _lock_path(url):
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
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


class Transport:
    def __init__(self, url, baudrate=DEFAULT_BAUDRATE, timeout=0.05):
        self.url = url
        self.baudrate = None if url.startswith("socket://") else baudrate   # None: no serial line
        self._lock = None
        self.port = None
        self.socket = None
        self._acquire_lock()
        if url.startswith("socket://"):
            try:
                self.socket = _Socket(url, timeout)
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
