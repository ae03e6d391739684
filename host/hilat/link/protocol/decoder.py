"""Frames in, messages out: the tables of the messages each side sends, ``decode_frame`` (one frame,
raising a ``ProtocolError``) and ``FrameDecoder`` (a byte stream split into frames; never raises,
keeps the spec's counters)."""

from __future__ import annotations

from dataclasses import dataclass

from hilat.link.protocol.commands import CaptureConfig, Hello, Start, StatusReq, StimConfig, Stop, TimeReq
from hilat.link.protocol.engine_messages import (
    EngineBins,
    EngineConfig,
    EngineFlush,
    EngineOutliers,
    EngineStats,
    EngineStatsReq,
)
from hilat.link.protocol.ethernet import NetConfig, StreamConfig, StreamStatus, StreamStatusReq
from hilat.link.protocol.events import Events
from hilat.link.protocol.frame import (
    MAX_ENCODED,
    PROTOCOL_VERSION,
    READABLE_VERSIONS,
    CorruptFrame,
    Message,
    ProtocolError,
    UnknownType,
    WrongVersion,
    decode_payload,
)
from hilat.link.protocol.replies import Ack, Identify, Overflow, Status, Time


def _by_type(*classes: type[Message]) -> dict[int, type[Message]]:
    """{TYPE: class}; two messages of one type are a mistake in this package, not a wire error."""
    table = {c.TYPE: c for c in classes}
    if len(table) != len(classes):
        raise AssertionError(f"two messages share a type among {[c.NAME for c in classes]}")
    return table


HOST_MESSAGES: dict[int, type[Message]] = _by_type(
    Hello, StimConfig, CaptureConfig, Start, Stop, StatusReq, TimeReq, EngineConfig,
    EngineStatsReq, EngineFlush, StreamConfig, StreamStatusReq, NetConfig,
)
RIG_MESSAGES: dict[int, type[Message]] = _by_type(
    Identify, Events, Overflow, Status, Ack, Time, EngineBins, EngineOutliers, EngineStats,
    StreamStatus,
)
MESSAGES: dict[int, type[Message]] = {**HOST_MESSAGES, **RIG_MESSAGES}
MESSAGES_BY_NAME: dict[str, type[Message]] = {c.NAME: c for c in MESSAGES.values()}


@dataclass(slots=True)
class Frame:
    seq: int
    msg: Message

    @property
    def type(self) -> int:
        return self.msg.TYPE


def _message(cls: type[Message], body: bytes, version: int) -> Message:
    """``cls`` from ``body`` of a frame of ``version`` (only IDENTIFY changed with versions 3 and 4)."""
    return cls.from_body(body, version) if cls.BODY_BY_VERSION else cls.from_body(body)


def decode_frame(frame: bytes, messages: dict[int, type[Message]] = MESSAGES,
                 versions: tuple[int, ...] | None = None) -> Frame:
    """Decode one wire frame (a trailing 0x00 delimiter is accepted). Raises a ProtocolError:
    CorruptFrame, WrongVersion, UnknownType or MalformedFrame. ``versions``: those accepted (by
    default: commands only in ours, a rig's frames in READABLE_VERSIONS)."""
    if frame.endswith(b"\x00"):
        frame = frame[:-1]
    version, msg_type, seq, body = decode_payload(frame)
    if versions is None:
        versions = (PROTOCOL_VERSION,) if messages is HOST_MESSAGES else READABLE_VERSIONS
    if version not in versions:
        raise WrongVersion(version, msg_type, seq)
    cls = messages.get(msg_type)
    if cls is None:
        raise UnknownType(msg_type, seq)
    return Frame(seq, _message(cls, body, version))


class FrameDecoder:
    """Splits a byte stream at 0x00 into frames; never raises on bad input.

    Counters: ``frames_ok``; ``corrupt`` (COBS, CRC, shorter than 8 or longer than 254 decoded
    bytes); ``wrong_version``; ``unknown_type`` (a type of the other direction included);
    ``malformed`` (CRC matched but the body does not fit its type); ``lost`` (sequence gaps,
    (seq - expected) mod 2**16); ``resync_bytes`` (bytes of corrupt frames, delimiter included).
    Every non-empty frame is counted in exactly one of frames_ok, corrupt, wrong_version,
    unknown_type, malformed, duplicate. Empty frames (consecutive 0x00) are ignored. The sequence
    is tracked across all frames whose CRC and version are valid; the first one sets it, unless
    ``expected_seq`` is given (e.g. 0 right after sending HELLO: see ``reset_sequence``).

    ``duplicate``: a replay (a link or bridge that sends a frame again): a frame whose seq is one of
    the last ``DUPLICATE_WINDOW`` seqs accepted and whose bytes equal that frame's. It is dropped,
    counted there and not as loss, and the expected seq stays. A frame behind the sequence that is
    *not* such a replay (other bytes) is not dropped: the sequence jumped, and the gap rule counts it.
    """

    DUPLICATE_WINDOW = 64  # the rig never reuses a seq within 2**16 frames, so 64 is no ambiguity

    def __init__(self, from_host: bool = False, expected_seq: int | None = None,
                 versions: tuple[int, ...] | None = None):
        self.messages = HOST_MESSAGES if from_host else RIG_MESSAGES
        # ``versions`` accepted: by default a rig's frames of an earlier version still decode (a run's
        # raw.bin), commands only in ours. A live session takes only ours (a rig of another version
        # is refused by name: Rig.hello).
        if versions is None:
            versions = (PROTOCOL_VERSION,) if from_host else READABLE_VERSIONS
        self.versions = versions
        self.expected_seq = expected_seq
        self.frames_ok = 0
        self.corrupt = 0
        self.wrong_version = 0
        self.last_wrong_version = None  # the version of the last refused frame
        self.unknown_type = 0
        self.malformed = 0
        self.lost = 0
        self.duplicate = 0
        self.resync_bytes = 0
        # The bytes of the frame last accepted with each seq, by seq mod DUPLICATE_WINDOW.
        self._recent: list[tuple[int, bytes] | None] = [None] * self.DUPLICATE_WINDOW
        self._pending = b""
        self._overlong = 0  # bytes dropped from the current (overlong) frame

    def reset_sequence(self, expected_seq: int | None = 0) -> None:
        """Expect ``expected_seq`` next (None: take the next frame's seq without counting). A new
        session: frames of the old one are no longer duplicates of anything."""
        self.expected_seq = expected_seq
        self._recent = [None] * self.DUPLICATE_WINDOW

    def counters(self) -> dict[str, int]:
        return {
            "frames_ok": self.frames_ok,
            "corrupt": self.corrupt,
            "wrong_version": self.wrong_version,
            "unknown_type": self.unknown_type,
            "malformed": self.malformed,
            "lost": self.lost,
            "duplicate": self.duplicate,
            "resync_bytes": self.resync_bytes,
        }

    @property
    def pending(self) -> int:
        """Bytes received of a frame not yet terminated."""
        return len(self._pending) + self._overlong

    def feed(self, data: bytes) -> list[Frame]:
        out: list[Frame] = []
        parts = bytes(data).split(b"\x00")
        tail = parts.pop()
        if parts:
            first = self._pending + parts[0]
            if self._overlong:
                self._bad(self._overlong + len(first))
                self._overlong = 0
            elif first:
                self._frame(first, out)
            for p in parts[1:]:
                if p:
                    self._frame(p, out)
            self._pending = b""
        self._pending += tail
        if len(self._pending) > MAX_ENCODED:  # keep memory bounded: only count the bytes
            self._overlong += len(self._pending)
            self._pending = b""
        return out

    def _bad(self, n: int) -> None:
        self.corrupt += 1
        self.resync_bytes += n + 1

    def _frame(self, enc: bytes, out: list[Frame]) -> None:
        try:
            version, msg_type, seq, body = decode_payload(enc)
        except CorruptFrame:
            self._bad(len(enc))
            return
        if version not in self.versions:
            self.wrong_version += 1
            self.last_wrong_version = version
            return
        expected = self.expected_seq
        slot = seq % self.DUPLICATE_WINDOW
        if expected is not None and seq != expected:
            behind = (expected - seq) & 0xFFFF
            if 1 <= behind <= self.DUPLICATE_WINDOW and self._recent[slot] == (seq, enc):
                self.duplicate += 1
                return
            self.lost += (seq - expected) & 0xFFFF
        self.expected_seq = (seq + 1) & 0xFFFF
        self._recent[slot] = (seq, enc)
        cls = self.messages.get(msg_type)
        if cls is None:
            self.unknown_type += 1
            return
        try:
            msg = _message(cls, body, version)
        except ProtocolError:
            self.malformed += 1
            return
        self.frames_ok += 1
        out.append(Frame(seq, msg))
