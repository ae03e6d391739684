"""The rig's command layer: HELLO/IDENTIFY, commands with their acknowledgements, the frame stream.

Every byte read from the transport is handed to ``raw_sink`` (the run's raw file) *before* it is
decoded, so nothing the rig sent is lost to a decoder bug. EVENTS records are decoded into arrays
(``hilat.link.batch``); records that arrive while a command waits for its reply are kept, in order, for
the next ``read()``. ``hilat.link.session`` builds the acquisition on top.

Over a datagram link (udp://) a command whose reply has not come after ``RESEND_S`` is sent again,
the same seq and bytes (the firmware answers a repeat with its stored reply and does not execute it
twice; docs/ethernet.md, "Repeated commands"; a second copy of a reply is dropped as a replay), until
the command's timeout: then RigSilent says how often it was sent.
"""

import logging
import time

from hilat.link import protocol as p
from hilat.link.batch import BatchDecoder, join_records
from hilat.link.transport import BOARD_BAUDRATES, TransportError

log = logging.getLogger("hilat")


class RigError(Exception):
    """The rig did not answer, answered wrongly, or refused a command (``code``: its ACK code)."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class RigSilent(RigError):
    """The rig stopped answering: no reply in time, or nothing at all for a while. Mid-run this is a
    rig that was reset (it sends nothing before a new HELLO), lost its power, or lost its cable."""


RESEND_S = 0.25   # udp://: a command without its reply this long is sent again
# A byte stream: STATUS without its reply this long is asked again, with a new seq (a repeat would
# bring back the kept reply with its old frame seq, which a serial decoder past it takes for a jump).
STATUS_RENEW_S = 1.0
STALL_S = 1.0     # one pass of a wait loop this long: the host was not running (stopped, swapped out)


class Rig:
    def __init__(self, transport, raw_sink=None, hello_timeout=5.0, command_timeout=5.0):
        self.transport = transport
        self.raw_sink = raw_sink
        self.hello_timeout = hello_timeout
        self.command_timeout = command_timeout
        self.decoder = BatchDecoder(versions=(p.PROTOCOL_VERSION,))   # a live rig speaks ours or is refused
        self.tx_seq = 0
        self.identity = None
        self.pending = []          # frames other than EVENTS read while waiting for a reply, in arrival order
        self.pending_records = []  # EVENTS records read meanwhile: (ticks, channel masks, levels, fractions) arrays
        self.pending_count = 0     # records in pending_records
        self.pending_marks = []    # (records before it among the pending ones, frame or frames lost)
        self.bytes_received = 0
        # udp://: seconds to wait for a reply before sending the command again (None: a byte stream)
        self.resend_s = RESEND_S if getattr(transport, "datagrams", False) else None
        self.resends = 0           # commands sent again for a reply that did not come
        self._last_sent = b""

    # low level ----------------------------------------------------------------------------------

    def _read_frames(self):
        """Frames other than EVENTS from one transport read; its records go to ``pending_records``."""
        data = self.transport.read()
        if not data:
            return []
        self.bytes_received += len(data)
        if self.raw_sink is not None:
            self.raw_sink(data)
        batch = self.decoder.feed_batch(data)
        self.pending_marks += [(self.pending_count + at, what) for at, what in batch.marks]
        if len(batch.ticks):
            self.pending_records.append((batch.ticks, batch.channels, batch.levels, batch.fractions))
            self.pending_count += len(batch.ticks)
        return batch.frames

    def read(self):
        """One read of the link: (records as (ticks, channel masks, level masks, fractions) arrays, other
        frames), with what arrived while commands waited for replies first."""
        records, frames, _marks = self.read_marked()
        return records, frames

    def read_marked(self):
        """``read``, and where among the records the stream was disturbed: [(records before it, a
        frame of another type or frames lost)], in arrival order (``batch.segments``)."""
        try:
            fresh = self._read_frames()
        except TransportError:
            if not (self.pending or self.pending_records):
                raise
            fresh = []  # hand over what is already here; the next read reports the dropped link
        frames = self.pending + fresh
        self.pending = []
        parts, self.pending_records = self.pending_records, []
        marks, self.pending_marks, self.pending_count = self.pending_marks, [], 0
        return join_records(parts), frames, marks

    def send(self, msg):
        seq = self.tx_seq
        self._last_sent = msg.encode(seq)
        self.transport.write(self._last_sent)
        self.tx_seq = (self.tx_seq + 1) & 0xFFFF
        return seq

    def _wait_for(self, match, timeout, what, resend=False, renew=None):
        """The first frame ``match`` takes, read within ``timeout`` s; ``resend``: over a datagram link
        the last frame sent goes again every ``resend_s`` meanwhile (its reply may have been lost);
        ``renew``: over a byte stream, a new ``renew()`` message is sent every ``STATUS_RENEW_S``.
        Time the host itself was not running (a stopped process) does not count as the rig's
        silence: the deadline moves by it."""
        start = last = time.monotonic()
        deadline = start + timeout
        resend_at = start + self.resend_s if resend and self.resend_s else None
        renew_at = start + STATUS_RENEW_S if renew is not None and resend_at is None else None
        sends = 1
        while time.monotonic() < deadline:
            frames = self._read_frames()
            for i, frame in enumerate(frames):
                if match(frame):
                    self.pending += frames[i + 1:]  # what came after the reply in the same read: next read()'s
                    return frame
                self.pending.append(frame)
            now = time.monotonic()
            if now - last >= STALL_S:
                deadline += now - last
            last = now
            if resend_at is not None and now >= resend_at and now < deadline:
                self.transport.write(self._last_sent)
                self.resends += 1
                sends += 1
                resend_at = now + self.resend_s
            if renew_at is not None and now >= renew_at and now < deadline:
                self.send(renew())
                self.resends += 1
                sends += 1
                renew_at = now + STATUS_RENEW_S
        every = self.resend_s if resend_at is not None else STATUS_RENEW_S
        sent = f" (sent {sends} times, every {every:g} s)" if sends > 1 else ""
        raise RigSilent(f"no {what} from the rig on {self.transport.url} within {timeout:g} s{sent}")

    # session ------------------------------------------------------------------------------------

    def hello(self):
        """Start a session; returns the rig's Identify. Refuses another protocol version."""
        self.tx_seq = 0
        self._clear_pending()
        self.send(p.Hello(p.PROTOCOL_VERSION))
        self.decoder.reset_sequence(0)

        def is_identify(frame):
            return isinstance(frame.msg, p.Identify)
        try:
            frame = self._wait_for(is_identify, self.hello_timeout, "answer to HELLO", resend=True)
        except RigError:
            if not self.decoder.wrong_version:
                # A rig of protocol version 1 ignores a HELLO of another version: ask it in its
                # own, so that it answers and the refusal can name both versions.
                self.transport.write(p.encode_frame(p.MSG_HELLO, 0, p.Hello(1).body(), version=1))
                try:
                    self._wait_for(lambda frame: False, min(self.hello_timeout, 2.0), "answer to HELLO")
                except RigError:
                    pass
            if self.decoder.wrong_version:
                raise RigError(f"the rig on {self.transport.url} speaks protocol version "
                               f"{self.decoder.last_wrong_version}, this hilat speaks version "
                               f"{p.PROTOCOL_VERSION}: update one of them") from None
            raise RigError(f"no answer to HELLO from {self.transport.url} within {self.hello_timeout:g} s"
                           f"{_at_baud(self.transport)}: is the rig powered, flashed with the hilat gateware, "
                           "and is this its port?") from None
        self._clear_pending()  # anything before IDENTIFY belongs to an earlier session
        identity = frame.msg
        if identity.version != p.PROTOCOL_VERSION:
            raise RigError(f"the rig speaks protocol version {identity.version}, this hilat speaks "
                           f"version {p.PROTOCOL_VERSION}: update one of them")
        self.identity = identity
        return identity

    def _clear_pending(self):
        self.pending.clear()
        self.pending_records.clear()
        self.pending_marks.clear()
        self.pending_count = 0

    def command(self, msg, reply=p.Ack):
        seq = self.send(msg)

        def is_reply(frame):
            return isinstance(frame.msg, reply) and frame.msg.command_seq == seq
        frame = self._wait_for(is_reply, self.command_timeout, f"reply to {msg.NAME}", resend=True)
        if reply is p.Ack and frame.msg.code != 0:
            raise RigError(f"the rig refused {msg.NAME}: {frame.msg.message} (code {frame.msg.code})", frame.msg.code)
        return frame.msg

    def now(self):
        return self.command(p.TimeReq(), reply=p.Time).now

    def status(self):
        """The rig's counters as of this call: a STATUS read before it (already pending) is older."""
        older = {id(f) for f in self.pending if isinstance(f.msg, p.Status)}
        self.send(p.StatusReq())

        def is_status(frame):
            return isinstance(frame.msg, p.Status) and id(frame) not in older
        return self._wait_for(is_status, self.command_timeout, "STATUS", resend=True, renew=p.StatusReq).msg

    def close(self):
        try:
            self.transport.close()
        except TransportError:
            pass


def _at_baud(transport):
    """The rate a serial port was opened at, and each board's: a rig at another rate reads as silence."""
    baud = getattr(transport, "baudrate", None)
    if baud is None:
        return ""
    boards = ", ".join(f"--board {board} is {rate}" for board, rate in BOARD_BAUDRATES.items())
    return f" at {baud} baud ({boards}; or --baud)"
