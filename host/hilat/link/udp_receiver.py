"""The stream's receiver: a loop that does nothing but ``recvmmsg`` (Linux, through ctypes) into a
preallocated batch of slots and append them to the run's ``stream.bin`` (``hilat.link.udp``), raw first.

Why a loop of its own and a file between it and the decoder: the rig sends ~81 k datagrams/s at
line rate whatever the host does; a datagram the socket buffer cannot take is lost for good. The
receiver only moves bytes (one ``recvmmsg`` and one ``write`` per batch of up to ``BATCH``
datagrams), so it keeps up however far the processing lags; the processing reads stream.bin behind
it (``StreamReader``: from the page cache, in big arrays). A killed process loses nothing already
written; a full disk stops the receiver with the error, what was written stays.

The loop runs in a child process (``ReceiverProcess``, the capture's): as a thread of the capture
(``Receiver.start``) it waited for the GIL behind the pairing's long numpy calls, and a loaded
2-core host lost 29 % of a 2 s line-rate stream that way (benchmarks/udp_stream.py). The parent
opens and binds the socket (its port is known at once, datagrams queue in its buffer before the
child runs) and hands it over; what is on disk is counted from the file's size (whole slots).
"""

import ctypes
import ctypes.util
import errno
import logging
import os
import queue
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from hilat import kernels
from hilat.link import udp

log = logging.getLogger("hilat")

BATCH = 512                       # datagrams a recvmmsg takes at most
RCVBUF_WANTED = 64 << 20          # bytes: ~0.5 s of line rate (the kernel counts ~2x a datagram's payload)
RCVBUF_ENOUGH = 8 << 20           # below this, one line says how to raise the cap
LINE_RATE_DATAGRAMS = 81_000      # datagrams/s of 1,472 bytes on gigabit Ethernet
SO_RCVBUFFORCE = 33
MSG_WAITFORONE = 0x10000
MSG_TRUNC = 0x20
POLL_S = 0.1                      # the receiver's wait for a first datagram before it looks at stop
READY_TIMEOUT_S = 20.0            # the receiver's child process starting, at most
RECEIVER_NICE = -10               # the receiver's child runs before the capture (root only)


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


def open_socket(bind, rcvbuf=RCVBUF_WANTED):
    """The stream's socket: bound, the largest receive buffer (one line when the kernel caps it
    low), and a receive timeout so that the receiver's loop sees a stop soon."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        granted = set_receive_buffer(sock, rcvbuf)
        sock.bind(bind)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, int(POLL_S * 1e6)))
    except OSError:
        sock.close()
        raise
    if granted < RCVBUF_ENOUGH:
        log.warning("the stream's socket buffer is %d KiB (the kernel's cap): at line rate that is %.0f ms of "
                    "datagrams; raise it with sysctl -w net.core.rmem_max=%d (or run as root)",
                    granted >> 10, 1e3 * granted / 2 / (LINE_RATE_DATAGRAMS * udp.MAX_PAYLOAD), RCVBUF_WANTED)
    return sock


def create_stream_file(path):
    """stream.bin opened for appending, with its header when new."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    if os.fstat(fd).st_size == 0:
        os.write(fd, udp.file_header())
    return fd


def slots_on_disk(path):
    """Whole slots in stream.bin (a batch being written counts up to its last whole slot)."""
    return max(0, (os.stat(path).st_size - udp.FILE_HEADER) // udp.SLOT_BYTES)


class Receiver:
    """``Receiver(path, bind=(ip, 0))`` opens the socket (``port``, ``address``) and appends every
    datagram to ``path`` (stream.bin, created with its header) from ``start()`` (a thread) or ``run()``
    to ``stop()``. ``slots`` counts what is on disk (the reader reads up to it)."""

    def __init__(self, path, bind=("0.0.0.0", 0), rcvbuf=RCVBUF_WANTED, batch=BATCH, sock=None):
        self.path = path
        self.sock = sock if sock is not None else open_socket(bind, rcvbuf)
        self.rcvbuf = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        try:
            self.fd = create_stream_file(path)
        except OSError:
            self.sock.close()
            raise
        self.address = self.sock.getsockname()
        self.port = self.address[1]
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
        self.error = None         # why the receiver stopped early (a full disk, a socket error)
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        """The loop in a thread of this process (tests; a capture runs it in a child process)."""
        self._thread = threading.Thread(target=self.run, name="hilat-udp-receiver", daemon=True)
        self._thread.start()
        return self

    def run(self):
        """The loop (in the calling thread) until ``stop`` is asked; ``error`` says why it ended early."""
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

    def _write(self, n):
        head = self._head[:n]
        head["length"] = self._lengths[:n]
        head["slot_flags"] = (self._flags[:n] & MSG_TRUNC) != 0
        head["recv_ns"] = time.monotonic_ns()
        view = memoryview(self.ring[:n]).cast("B")
        while view:
            view = view[os.write(self.fd, view):]
        self.bytes += int(self._lengths[:n].sum())
        self.slots += n
        self.ring[:n] = 0   # no bytes of an earlier datagram in a shorter one's slot

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


class ReceiverProcess:
    """The receiver's loop in a child process (see the module): ``port``, ``rcvbuf``, ``slots`` (on
    disk), ``stop()`` (then ``error``: the child's reason when it ended early)."""

    def __init__(self, path, bind=("0.0.0.0", 0), rcvbuf=RCVBUF_WANTED):
        self.path = path
        sock = open_socket(bind, rcvbuf)
        self.rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        self.address = sock.getsockname()
        self.port = self.address[1]
        self.error = None
        try:
            os.close(create_stream_file(path))   # the header, before the child appends
            # The child imports this hilat, wherever it was imported from (an installed package or
            # a checkout on sys.path).
            package_root = str(Path(__file__).resolve().parents[2])
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root,
                                                                             os.environ.get("PYTHONPATH")]))}
            argv = [sys.executable, "-m", "hilat.link.udp_receiver", str(path), str(sock.fileno())]
            self.proc = subprocess.Popen(argv,
                                         pass_fds=[sock.fileno()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, env=env)
        finally:
            sock.close()   # the child has its own copy
        # Its loop running before the stream starts: the socket buffer holds well under a second at
        # line rate, and a Python child takes that long to start on a loaded host.
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT_S)
        if not ready or self.proc.stdout.readline() != b"ready\n":
            self.stop()
            raise OSError(f"the stream's receiver did not start within {READY_TIMEOUT_S:g} s: {self.error}")

    @property
    def slots(self):
        return slots_on_disk(self.path)

    @property
    def fd(self):   # None once stopped (as Receiver's)
        return None if self.proc is None else self.proc.pid

    def stop(self):
        if self.proc is None:
            return
        try:   # communicate closes the child's stdin: its stop
            _, err = self.proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            err = b"the stream's receiver did not stop within 5 s (killed)"
        if self.proc.returncode:
            self.error = (err.decode(errors="replace").strip().splitlines() or
                          [f"the stream's receiver exited with code {self.proc.returncode}"])[-1]
        self.proc = None


def _child(path, fd):
    """``python -m hilat.link.udp_receiver PATH FD``: the receiver on the socket FD until stdin ends."""
    try:   # before the pairing and whatever else the host runs: a datagram not taken in time is lost
        os.nice(RECEIVER_NICE)
    except OSError:
        pass   # not root: the default priority
    receiver = Receiver(path, sock=socket.socket(fileno=fd))
    threading.Thread(target=lambda: (sys.stdin.buffer.read(), receiver._stop.set()), daemon=True).start()
    print("ready", flush=True)
    receiver.run()
    os.close(receiver.fd)
    if receiver.error:
        print(receiver.error, file=sys.stderr)
        return 1
    return 0


LET_GO_BYTES = 64 << 20   # stream.bin's pages given back this far behind the reader (rundir.stores.LET_GO_BYTES)


class StreamReader:
    """Reads stream.bin behind the receiver: ``read()`` gives the slots written since the last read
    (at most ``chunk`` of them) as one array, in a buffer reused by the next read."""

    def __init__(self, path, chunk=4096):
        self.fd = os.open(path, os.O_RDONLY)
        self.buf = np.empty((chunk, udp.SLOT_BYTES), np.uint8)
        self.done = 0     # slots read
        self._let_go = 0  # bytes of the file given back to the page cache

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
        # Read once: its pages given back (written back in the background, dropped once clean).
        behind = udp.FILE_HEADER + self.done * udp.SLOT_BYTES - LET_GO_BYTES
        if behind - self._let_go >= LET_GO_BYTES and hasattr(os, "posix_fadvise"):
            os.posix_fadvise(self.fd, 0, behind, os.POSIX_FADV_DONTNEED)
            self._let_go = behind
        return self.buf[:n]

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class StreamLink:
    """A run's stream: the receiver process writing stream.bin, and a decode thread reading and
    decoding behind it (the decoding's numpy passes and the caller's pairing then share the two
    cores; a few batches wait at most). ``poll()`` hands on what was decoded since the last call;
    ``close()`` stops the receiver and ``drain()`` hands on the rest, the held datagrams included."""

    # Decoded batches waiting for poll(): the decode thread stops ahead of the consumer there.
    READY_BATCHES = 3

    def __init__(self, path, layout, session_id, bind_ip="0.0.0.0", chunk=4096):
        self.path = path
        self.receiver = ReceiverProcess(path, bind=(bind_ip, 0))
        self.reader = StreamReader(path, chunk)
        self.decoder = udp.StreamDecoder(layout, session=session_id)
        self.session_id = session_id
        self.started = time.monotonic()
        self.rig_status = None    # the rig's STREAM_STATUS at the end: what it sent
        self._last_rate = (self.started, 0, 0)
        self.peak_lag = 0         # the most datagrams on disk not handed on yet, at any poll
        self.first_data = None    # when the first datagram was decoded and handed on (monotonic s)
        self.last_processed = None  # when the last records were handed on (the consumer done with them)
        # The heartbeat bound T as of the last batch handed on (the decoder's own may be ahead of it).
        self.complete_before = None
        self.delivered = 0        # slots whose records were handed on
        self.records = 0          # records handed on
        self._ready = queue.Queue(maxsize=self.READY_BATCHES)
        self._stop_decoding = threading.Event()
        self._decode_error = None
        self._decoding = threading.Thread(target=self._decode_loop, name="hilat-stream-decoder", daemon=True)
        self._decoding.start()

    @property
    def port(self):
        return self.receiver.port

    @property
    def backlog(self):
        """Datagrams on disk not handed on yet: how far the processing lags the link."""
        return self.receiver.slots - self.delivered

    def _decode_loop(self):
        try:
            while not self._stop_decoding.is_set():
                slots = self.reader.read(self.receiver.slots)
                if not len(slots):
                    time.sleep(0.001)
                    continue
                # The reader's buffer is reused by its next read: the batch's arrays are new ones.
                batch = self._with_edges(self.decoder.feed(slots))
                item = (batch, self.decoder.complete_before, self.reader.done)
                while not self._stop_decoding.is_set():
                    try:
                        self._ready.put(item, timeout=0.05)
                        break
                    except queue.Full:
                        pass
        except BaseException as e:   # handed to the consumer by poll()
            self._decode_error = e

    def _with_edges(self, batch):
        """The batch with its records' edges (compiled, without the GIL: beside the consumer's
        pairing), when numba is there and the records carry no sub-tick positions to place."""
        if self.decoder.layout.fraction_bits or not len(batch.ticks) or not kernels.available():
            return batch
        return batch._replace(edges=kernels.edges_with_offsets(batch.ticks, batch.channels, batch.levels))

    def poll(self):
        """The records decoded since the last call (a RecordBatch), None when nothing new is decoded.
        Raises TransportError once everything on disk is handed on if the receiver ended on its own
        (killed, a full disk): nothing more can arrive."""
        self.peak_lag = max(self.peak_lag, self.backlog)
        try:
            # Datagrams on disk: their batch is being decoded, worth a short wait.
            batch, complete_before, done = self._ready.get(timeout=0.2 if self.backlog else 0.0005)
        except queue.Empty:
            if self._decode_error is not None:
                raise self._decode_error from None
            self._check_receiver()
            return None
        self.delivered = done
        self.complete_before = complete_before
        self.records += len(batch.ticks)
        if self.first_data is None:
            self.first_data = time.monotonic()
        return batch

    def _check_receiver(self):
        proc = getattr(self.receiver, "proc", None)
        if proc is not None and proc.poll() is not None and not self.backlog:
            from hilat.link.transport import TransportError

            code = proc.returncode
            self.receiver.stop()
            raise TransportError(f"{self.receiver.error or f'the stream receiver exited with code {code}'}: what it "
                                 f"wrote to {self.path} is kept, nothing more of the Ethernet stream is received")

    def wait(self, timeout):
        """A moment for the receiver to write more, when nothing waits (``timeout`` s at most)."""
        if not self.backlog:
            time.sleep(min(timeout, 0.002))

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
            batch = self.poll()
            if batch is not None:
                yield batch
            elif self._decode_error is not None or not self._decoding.is_alive():
                raise self._decode_error or RuntimeError("the stream's decode thread ended early")
        self._stop_decoding.set()
        self._decoding.join()
        batch = self.decoder.flush()
        self.complete_before = self.decoder.complete_before
        self.records += len(batch.ticks)
        yield batch

    def rates(self):
        """(datagrams/s arriving, records/s decoded) since the last call, for the live view."""
        now, slots, records = time.monotonic(), self.receiver.slots, self.records
        t, s, r = self._last_rate
        self._last_rate = (now, slots, records)
        dt = max(now - t, 1e-9)
        return (slots - s) / dt, (records - r) / dt

    def counters(self):
        """The link's figures for meta.json: received, lost, the rig's own counts, the lag."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        out = {"session": self.session_id, "port": self.port, "socket_buffer_bytes": self.receiver.rcvbuf,
               "datagrams_received": self.receiver.slots,
               "datagrams_decoded": self.delivered, "lag_datagrams": self.backlog,
               "seconds": round(elapsed, 3), "receiver_error": self.receiver.error,
               **self.decoder.counters()}
        first, last = self.decoder.first_data_ns, self.decoder.last_data_ns
        if self.first_data is not None and self.last_processed is not None:
            # Processing: from the first datagram decoded to the last records handed on; the lag: how
            # long after the last datagram with records arrived the processing was done with it.
            out["processing_seconds"] = round(self.last_processed - self.first_data, 6)
            if first is not None:
                out["arrival_seconds"] = round((last - first) / 1e9, 6)
                out["processing_done_after_last_arrival_s"] = round(self.last_processed - last / 1e9, 6)
        out["peak_lag_datagrams"] = self.peak_lag
        if self.rig_status is not None:
            out["rig_datagrams_sent"] = self.rig_status.datagrams
            out["rig_records_sent"] = self.rig_status.records
        return out

    def stop(self):
        """Close everything (an error path: what is on disk stays)."""
        self._stop_decoding.set()
        self._decoding.join()
        self.receiver.stop()
        self.reader.close()


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], int(sys.argv[2])))
