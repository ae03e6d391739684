"""The stream's receiver: a thread that does nothing but ``recvmmsg`` (Linux, through ctypes) into a
preallocated batch of slots and append them to the run's ``stream.bin`` (``hilat.udp``), raw first.

Why a thread of its own and a file between it and the decoder: the rig sends ~81 k datagrams/s at
line rate whatever the host does; a datagram the socket buffer cannot take is lost for good. The
receiver only moves bytes (one ``recvmmsg`` and one ``write`` per batch of up to ``BATCH`` datagrams,
both without the GIL), so it keeps up however far the processing lags; the processing reads
stream.bin behind it (``StreamReader``: from the page cache, in big arrays). A killed process loses
nothing already written; a full disk stops the receiver with the error (``error``), what was
written stays.
"""

import ctypes
import ctypes.util
import errno
import logging
import os
import socket
import struct
import threading
import time

import numpy as np

from hilat import udp

log = logging.getLogger("hilat")

BATCH = 512                       # datagrams a recvmmsg takes at most
RCVBUF_WANTED = 64 << 20          # bytes: ~0.5 s of line rate (the kernel counts ~2x a datagram's payload)
RCVBUF_ENOUGH = 8 << 20           # below this, one line says how to raise the cap
LINE_RATE_DATAGRAMS = 81_000      # datagrams/s of 1,472 bytes on gigabit Ethernet
SO_RCVBUFFORCE = 33
MSG_WAITFORONE = 0x10000
MSG_TRUNC = 0x20
POLL_S = 0.1                      # the receiver's wait for a first datagram before it looks at stop


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.POINTER(_Iovec)), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t), ("msg_flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _Msghdr), ("msg_len", ctypes.c_uint)]


_libc = None


def _recvmmsg():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        _libc.recvmmsg.argtypes = [ctypes.c_int, ctypes.POINTER(_Mmsghdr), ctypes.c_uint, ctypes.c_int,
                                   ctypes.c_void_p]
        _libc.recvmmsg.restype = ctypes.c_int
    return _libc.recvmmsg


def set_receive_buffer(sock, wanted=RCVBUF_WANTED):
    """The largest receive buffer up to ``wanted``: SO_RCVBUFFORCE (root, past net.core.rmem_max),
    else SO_RCVBUF (capped there). Returns the bytes the kernel granted (it doubles what it is asked)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, wanted)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, wanted)
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


class Receiver:
    """``Receiver(path, bind=(ip, 0))`` opens the socket (``port``, ``address``) and appends every
    datagram to ``path`` (stream.bin, created with its header) from ``start()`` to ``stop()``.
    ``slots`` counts what is on disk (the reader reads up to it); ``event`` is set after each write."""

    def __init__(self, path, bind=("0.0.0.0", 0), rcvbuf=RCVBUF_WANTED, batch=BATCH):
        self.path = path
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.rcvbuf = set_receive_buffer(self.sock, rcvbuf)
            self.sock.bind(bind)
            # recvmmsg waits at most this long for its first datagram, so the thread sees stop() soon.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, int(POLL_S * 1e6)))
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError:
            self.sock.close()
            raise
        if os.fstat(self.fd).st_size == 0:
            os.write(self.fd, udp.file_header())
        self.address = self.sock.getsockname()
        self.port = self.address[1]
        if self.rcvbuf < RCVBUF_ENOUGH:
            log.warning("the stream's socket buffer is %d KiB (the kernel's cap): at line rate that is %.0f ms of "
                        "datagrams; raise it with sysctl -w net.core.rmem_max=%d (or run as root)",
                        self.rcvbuf >> 10, 1e3 * self.rcvbuf / 2 / (LINE_RATE_DATAGRAMS * udp.MAX_PAYLOAD),
                        RCVBUF_WANTED)
        self.batch = batch
        self.ring = np.zeros((batch, udp.SLOT_BYTES), np.uint8)
        self._iov = (_Iovec * batch)()
        self._msgs = (_Mmsghdr * batch)()
        base = self.ring.ctypes.data
        for i in range(batch):
            self._iov[i].iov_base = base + i * udp.SLOT_BYTES + udp.SLOT_HEADER
            self._iov[i].iov_len = udp.SLOT_ROOM
            self._msgs[i].msg_hdr.msg_iov = ctypes.pointer(self._iov[i])
            self._msgs[i].msg_hdr.msg_iovlen = 1
        # msg_len and msg_flags of every entry, read as arrays after each call.
        view = np.frombuffer(self._msgs, np.uint8).reshape(batch, ctypes.sizeof(_Mmsghdr))
        self._lengths = view[:, _Mmsghdr.msg_len.offset:][:, :4].view("<u4")[:, 0]
        flags_at = _Mmsghdr.msg_hdr.offset + _Msghdr.msg_flags.offset
        self._flags = view[:, flags_at:flags_at + 4].view("<i4")[:, 0]
        self._head = self.ring.view(udp.SLOT_DTYPE)[:, 0]
        self.slots = 0            # datagrams written to stream.bin
        self.bytes = 0            # their payload bytes
        self.calls = 0
        self.first_write = self.last_write = None   # monotonic s of the first and last batch written
        self.error = None         # why the receiver stopped early (a full disk, a socket error)
        self.event = threading.Event()
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, name="hilat-udp-receiver", daemon=True)
        self._thread.start()
        return self

    def _run(self):
        recvmmsg = _recvmmsg()
        fd, msgs, batch = self.sock.fileno(), self._msgs, self.batch
        try:
            while not self._stop.is_set():
                n = recvmmsg(fd, msgs, batch, MSG_WAITFORONE, None)
                if n < 0:
                    e = ctypes.get_errno()
                    if e in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
                        continue
                    raise OSError(e, os.strerror(e))
                self._write(n)
        except OSError as e:
            self.error = f"the stream's receiver stopped: {e.strerror or e}"
            log.error("%s", self.error)
        finally:
            self.event.set()

    def _write(self, n):
        head = self._head[:n]
        head["length"] = self._lengths[:n]
        head["slot_flags"] = (self._flags[:n] & MSG_TRUNC) != 0
        head["recv_ns"] = time.monotonic_ns()
        view = memoryview(self.ring[:n]).cast("B")
        while view:
            view = view[os.write(self.fd, view):]
        self.bytes += int(self._lengths[:n].sum())
        self.last_write = time.monotonic()
        if self.first_write is None:
            self.first_write = self.last_write
        self.slots += n
        self.calls += 1
        self.ring[:n] = 0   # no bytes of an earlier datagram in a shorter one's slot
        self.event.set()

    def stop(self):
        """Stops the thread (within POLL_S) and closes the socket and the file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.sock.close()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class StreamReader:
    """Reads stream.bin behind the receiver: ``read()`` gives the slots written since the last read
    (at most ``chunk`` of them) as one array, in a buffer reused by the next read."""

    def __init__(self, path, chunk=4096):
        self.fd = os.open(path, os.O_RDONLY)
        self.buf = np.empty((chunk, udp.SLOT_BYTES), np.uint8)
        self.done = 0     # slots read

    def read(self, available):
        n = min(available - self.done, len(self.buf))
        if n <= 0:
            return self.buf[:0]
        view = memoryview(self.buf[:n]).cast("B")
        offset = udp.FILE_HEADER + self.done * udp.SLOT_BYTES
        got = 0
        while got < len(view):
            k = os.preadv(self.fd, [view[got:]], offset + got)
            if k <= 0:
                break
            got += k
        n = got // udp.SLOT_BYTES
        self.done += n
        return self.buf[:n]

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class StreamLink:
    """A run's stream: the receiver thread writing stream.bin, the reader behind it and the decoder.
    ``poll()`` decodes what arrived since the last call (at most a reader chunk); ``close()`` stops
    the receiver and ``drain()`` decodes the rest, the held datagrams included."""

    def __init__(self, path, layout, session_id, bind_ip="0.0.0.0", chunk=4096):
        self.path = path
        self.receiver = Receiver(path, bind=(bind_ip, 0)).start()
        self.reader = StreamReader(path, chunk)
        self.decoder = udp.StreamDecoder(layout, session=session_id)
        self.session_id = session_id
        self.started = time.monotonic()
        self.rig_status = None    # the rig's STREAM_STATUS at the end: what it sent
        self._last_rate = (self.started, 0, 0)
        self.peak_lag = 0         # the most datagrams on disk not decoded yet, at any poll
        self.first_data = None    # when the first datagram was decoded and handed on (monotonic s)
        self.last_processed = None  # when the last records were handed on (the consumer done with them)

    @property
    def port(self):
        return self.receiver.port

    @property
    def backlog(self):
        """Datagrams on disk not decoded yet: how far the processing lags the link."""
        return self.receiver.slots - self.reader.done

    def poll(self):
        self.peak_lag = max(self.peak_lag, self.backlog)
        slots = self.reader.read(self.receiver.slots)
        if not len(slots):
            return None
        if self.first_data is None:
            self.first_data = time.monotonic()
        return self.decoder.feed(slots)

    def wait(self, timeout):
        """Until the receiver wrote more (or ``timeout`` s)."""
        if not self.backlog:
            self.receiver.event.wait(timeout)
        self.receiver.event.clear()

    def close(self, quiet=0.05, limit=2.0):
        """Stop receiving once nothing arrived for ``quiet`` s (at most ``limit`` s)."""
        if self.receiver.fd is None:
            return
        end = time.monotonic() + limit
        last = -1
        while self.receiver.slots != last and time.monotonic() < end:
            last = self.receiver.slots
            time.sleep(quiet)
        self.receiver.stop()

    def drain(self):
        """After ``close``: every batch still on disk, then the held datagrams (as a generator)."""
        while self.backlog:
            yield self.poll()
        yield self.decoder.flush()

    def rates(self):
        """(datagrams/s, records/s) arriving since the last call (records from the bytes: the
        payload past each datagram's header, 8 bytes a record), for the live view."""
        now, slots, nbytes = time.monotonic(), self.receiver.slots, self.receiver.bytes
        t, s, b = self._last_rate
        self._last_rate = (now, slots, nbytes)
        dt = max(now - t, 1e-9)
        return (slots - s) / dt, (nbytes - b - udp.HEADER_BYTES * (slots - s)) / 8 / dt

    def counters(self):
        """The link's figures for meta.json: received, lost, the rig's own counts, the lag."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        out = {"session": self.session_id, "port": self.port, "socket_buffer_bytes": self.receiver.rcvbuf,
               "datagrams_received": self.receiver.slots, "bytes_received": self.receiver.bytes,
               "datagrams_decoded": self.reader.done, "lag_datagrams": self.backlog,
               "seconds": round(elapsed, 3), "receiver_error": self.receiver.error,
               **self.decoder.counters()}
        receiver = self.receiver
        if self.first_data is not None and self.last_processed is not None:
            # Processing: from the first datagram decoded to the last records handed on; the lag: how
            # long after the last datagram arrived the processing was done with it.
            out["processing_seconds"] = round(self.last_processed - self.first_data, 6)
            if receiver.last_write is not None:
                out["arrival_seconds"] = round(receiver.last_write - receiver.first_write, 6)
                out["processing_done_after_last_arrival_s"] = round(self.last_processed - receiver.last_write, 6)
        out["peak_lag_datagrams"] = self.peak_lag
        if self.rig_status is not None:
            out["rig_datagrams_sent"] = self.rig_status.datagrams
            out["rig_records_sent"] = self.rig_status.records
        return out

    def stop(self):
        """Close everything (an error path: what is on disk stays)."""
        self.receiver.stop()
        self.reader.close()
