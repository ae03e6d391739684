"""A scripted rig on a local TCP port, speaking the protocol with hilat.link.protocol's encoders.

For host tests that need a rig misbehaving on purpose (silent, another version, a dropped link).
"""

import socket
import sys
import threading
from pathlib import Path

from hilat.link import protocol as p

# The fake rigs also run as scripts (stream_rig.py, udp_rig.py, engine_rig.py: benchmarks start them):
# the clone's gateware/ is imported from the clone (it is not installed; docs/architecture.md).
CLONE = str(Path(__file__).resolve().parents[2])
if CLONE not in sys.path:
    sys.path.append(CLONE)


def identify(version=p.PROTOCOL_VERSION, n_inputs=4, samples_per_tick=1):
    from gateware.channels import channel_table

    table = [(c.name, c.role) for c in channel_table(2, n_inputs)]
    return p.Identify(version=version, ts_hz=50_000_000, sys_hz=50_000_000, n_stimulus=2, n_inputs=n_inputs,
                      fifo_depth=1024, pin_to_stamp_delay=17,
                      capabilities=0x3F | (p.CAP_SUBTICK if samples_per_tick > 1 else 0), firmware="fake",
                      gateware="fake rig", channels=table, samples_per_tick=samples_per_tick,
                      uart_baud=0)  # protocol 4 and later always have it


class FakeRig:
    """``script(receive, send)`` runs each time a client connects; ``sent`` keeps every byte sent."""

    def __init__(self, script, raw=False):
        self.script = script
        self.raw = raw  # receive() gives the bytes as they come, not decoded frames
        self.sent = bytearray()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]
        self.url = f"socket://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        # One client at a time, each from the script's start (a CLI command may open the port twice).
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self._session(conn)

    def _session(self, conn):
        with conn:
            conn.settimeout(5)
            decoder = p.FrameDecoder(from_host=True)

            def send(data):
                self.sent += data
                conn.sendall(data)

            def receive():
                while True:
                    data = conn.recv(4096)
                    if not data:
                        return None
                    if self.raw:
                        return data
                    frames = decoder.feed(data)
                    if frames:
                        return frames
            try:
                self.script(receive, send)
            except (OSError, TimeoutError):
                pass

    def close(self):
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() of the serving thread
        except OSError:
            pass
        self.listener.close()
        self.thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def capture_script(isr_latencies=(60, 60, 60), period=1500, drop_link=False, n_inputs=4, extra_edges=(),
                   samples_per_tick=1, lose_frames=(), overflow=None, reset_after=None):
    """A rig that runs a whole capture: ACKs every command, answers TIME_REQ and STATUS_REQ, and on
    START sends one stimulus per entry of ``isr_latencies``, ``period`` ticks apart, each answered on
    the ISR input (channel 2) that many ticks later. Once started, its clock is past the last
    response. ``drop_link``: the link drops right after the events. ``n_inputs``: the rig's inputs
    (more than 6 makes its EVENTS masks 2 bytes); ``extra_edges``: (offset from the start, channel
    mask, levels) records sent too. ``samples_per_tick`` S > 1: the rig samples its inputs S times a
    tick, the ISR latencies are in sub-ticks (1/S tick) and its records carry the ISR's position in
    the tick (the record's fraction, input 0's bits); the ISR falls 20 ticks after it rose, on the
    same position. ``lose_frames``: indices of EVENTS frames the link loses (their seqs are used);
    ``overflow`` (first, n): records first..first+n-1 are dropped in the gateware, an OVERFLOW marker
    at the first's tick with their channels in their place. ``reset_after`` k: the rig is reset after
    its k-th EVENTS frame: it sends nothing more and answers nothing (a reset rig waits for HELLO)."""
    fraction_bytes = 1 if samples_per_tick > 1 else 0

    def script(receive, send):
        seq, now = 0, 1000
        while True:
            frames = receive()
            if frames is None:
                return
            for frame in frames:
                msg = frame.msg
                if isinstance(msg, p.Hello):
                    send(identify(n_inputs=n_inputs, samples_per_tick=samples_per_tick).encode(0))
                    seq = 1
                    continue
                if isinstance(msg, p.TimeReq):
                    send(p.Time(frame.seq, now).encode(seq))
                    now += 1000   # the rig's clock runs (a capture's drain waits for it)
                elif isinstance(msg, p.StatusReq):
                    send(p.Status(0, 0, 0, 0, [0] * (2 + n_inputs), [p.STIM_DONE, 0]).encode(seq))
                else:
                    send(p.Ack(frame.seq).encode(seq))
                    if isinstance(msg, p.Start):
                        seq += 1
                        records = []
                        for k, latency in enumerate(isr_latencies):
                            t = msg.start + period * k
                            ticks, position = divmod(latency, samples_per_tick)
                            records += [(t, 0b1, 0b1), (t + 10, 0b1, 0), (t + ticks, 0b100, 0b100, position),
                                        (t + ticks + 20, 0b100, 0, position)]
                        records += [(msg.start + dt, mask, levels) for dt, mask, levels in extra_edges]
                        records = sorted(r + (0,) * (3 + fraction_bytes - len(r)) if fraction_bytes else r[:3]
                                         for r in records)
                        pieces = [records]
                        if overflow is not None:
                            first, n = overflow
                            lost = records[first:first + n]
                            mask = 0
                            for r in lost:
                                mask |= r[1]
                            pieces = [records[:first], p.Overflow(lost[0][0], mask), records[first + n:]]
                        k = 0
                        for piece in pieces:
                            if isinstance(piece, p.Overflow):
                                send(piece.encode(seq))
                                seq += 1
                                continue
                            for events in p.pack_events(piece, mask_bytes=p.mask_bytes_for(2 + n_inputs),
                                                        fraction_bytes=fraction_bytes):
                                if reset_after is not None and k >= reset_after:
                                    while receive() is not None:   # reset: deaf and mute until closed
                                        pass
                                    return
                                if k not in lose_frames:
                                    send(events.encode(seq))
                                seq += 1
                                k += 1
                        if drop_link:
                            return
                        now = msg.start + period * (len(isr_latencies) + 2)
                        continue
                seq += 1

    return script


class PtyRig:
    """The same scripted rig behind a pseudo-terminal: the host opens ``url`` (/dev/pts/N) as a serial
    port, so termios settings such as the baud rate are real and readable (``line_speeds``: the
    slave's input and output speed, as termios constants, when the script ran)."""

    def __init__(self, script):
        import os
        import termios

        self.master, self.slave = os.openpty()
        self.url = os.ttyname(self.slave)
        self.sent = bytearray()
        self.line_speeds = []
        self._termios = termios
        self.script = script
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        import os
        import select

        decoder = p.FrameDecoder(from_host=True)

        def send(data):
            self.sent += data
            os.write(self.master, data)

        def receive():
            while True:
                ready, _, _ = select.select([self.master], [], [], 5)
                if not ready:
                    return None
                try:
                    data = os.read(self.master, 4096)
                except OSError:
                    return None
                self.line_speeds.append(tuple(self._termios.tcgetattr(self.slave)[4:6]))
                frames = decoder.feed(data)
                if frames:
                    return frames
        try:
            self.script(receive, send)
        except OSError:
            pass

    def close(self):
        import os

        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass
        self.thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
