"""Rig wire protocol, version 4 (docs/protocol.md): frames, messages and a streaming decoder.

    wire:    COBS(payload || crc32) 0x00
    payload: version:u8 type:u8 seq:u16 body...      (little-endian)

Every message is a dataclass with ``encode(seq) -> bytes`` (the whole wire frame, delimiter
included), ``body() -> bytes`` and ``from_body(body)``. ``decode_frame`` decodes one frame and
raises a ``ProtocolError``; ``FrameDecoder`` splits a byte stream into frames, never raises, and
keeps the counters of the spec. Pure standard library.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

PROTOCOL_VERSION = 4
# Rig frames of these versions decode (a run's raw.bin from before: version 3's IDENTIFY without
# the ethernet byte; version 2's without samples_per_tick, EVENTS as version 3's without fractions).
READABLE_VERSIONS = (2, 3, 4)

HEADER_SIZE = 4  # version, type, seq
CRC_SIZE = 4
MIN_FRAME = HEADER_SIZE + CRC_SIZE  # decoded bytes of the shortest frame
MAX_PAYLOAD = 250  # header + body
MAX_DECODED = MAX_PAYLOAD + CRC_SIZE  # 254
MAX_ENCODED = 255  # COBS of MAX_DECODED bytes, delimiter excluded
MAX_WIRE = 256  # delimiter included
MAX_CHANNELS = 16  # capture channel masks: at most 16 bits (EVENTS: 1 or 2 bytes, OVERFLOW: u16)
MAX_STIMULUS = 8  # stimulus channel masks (START, STOP) are u8
EVENTS_EMPTY = HEADER_SIZE + 9  # payload of an EVENTS frame without records (base, format)
MASK64 = (1 << 64) - 1

# Message types. Host -> rig (>= 0x80).
MSG_HELLO = 0x81
MSG_STIM_CONFIG = 0x82
MSG_CAPTURE_CONFIG = 0x83
MSG_START = 0x84
MSG_STOP = 0x85
MSG_STATUS_REQ = 0x86
MSG_TIME_REQ = 0x87
MSG_ENGINE_CONFIG = 0x88
MSG_ENGINE_STATS_REQ = 0x89
MSG_ENGINE_FLUSH = 0x8A
MSG_STREAM_CONFIG = 0x8B
MSG_STREAM_STATUS_REQ = 0x8C
MSG_NET_CONFIG = 0x8D
# Rig -> host (< 0x80).
MSG_IDENTIFY = 0x01
MSG_EVENTS = 0x02
MSG_OVERFLOW = 0x03
MSG_STATUS = 0x04
MSG_ACK = 0x05
MSG_TIME = 0x06
MSG_ENGINE_BINS = 0x07
MSG_ENGINE_OUTLIERS = 0x08
MSG_ENGINE_STATS = 0x09
MSG_STREAM_STATUS = 0x0A

# Stimulus modes.
MODE_PERIODIC = 0
MODE_DITHER = 1
MODE_RANDOM = 2
MODE_BURST = 3
MODE_ONESHOT = 4

# Protocol version 1 had no channel table in IDENTIFY: its channels were fixed, as here. Only run
# directories written by a version-1 hilat need it (hilat.rundir.runs reads them).
V1_CHANNEL_TABLE = [("stim0", "stimulus"), ("stim1", "stimulus"), ("isr", "isr"), ("task", "task"),
                    ("spare", "spare"), ("tag", "tag")]

# ACK codes.
ACK_OK = 0          # done
ACK_REFUSED = 1     # a setting the rig cannot apply (the message says which)
ACK_LATE = 2        # START: the start time has passed or is closer than the start margin
ACK_MALFORMED = 3   # a frame the rig cannot parse, or an unknown command
ACK_VERSION = 4     # HELLO of another protocol version (answered whatever the session)

# IDENTIFY capability bits.
CAP_DITHER = 1 << 0
CAP_RANDOM = 1 << 1
CAP_BURST = 1 << 2
CAP_ABSOLUTE_START = 1 << 3
CAP_GLITCH_FILTER = 1 << 4
CAP_TAG_CHANNEL = 1 << 5
CAP_SUBTICK = 1 << 6
CAP_ENGINE = 1 << 7  # the on-rig measurement engine (docs/engine.md)
CAP_ETHERNET = 1 << 8  # the Ethernet link (docs/ethernet.md): IDENTIFY's ethernet tail, STREAM_CONFIG...

# The Ethernet link (docs/ethernet.md). STREAM_CONFIG: dst_ip / dst_port 0 mean the source of the
# command's own datagram; defaults of the contract.
STREAM_FLUSH_US_DEFAULT = 100
STREAM_HEARTBEAT_MS_DEFAULT = 100
STREAM_LINK_UP = 1 << 0  # STREAM_STATUS link: Ethernet frames received since reset

# CAPTURE_CONFIG per-channel flags.
CAPTURE_ENABLE = 1 << 0
CAPTURE_RISE = 1 << 1
CAPTURE_FALL = 1 << 2

# STATUS per-stimulus-channel bits.
STIM_RUNNING = 1 << 0
STIM_DONE = 1 << 1
STIM_LATE = 1 << 2

# The measurement engine (docs/engine.md). Kinds, in the order of every per-kind field.
ENGINE_KINDS = ("stim_to_isr", "stim_to_task", "isr_to_task")
ENGINE_HDR_BINS = 2304  # HdrHistogram(1, 2**24 - 1, 2 digits): bins 0..2303
ENGINE_OVERFLOW_BIN = ENGINE_HDR_BINS  # values >= 2**24 ticks
ENGINE_BINS_PER_HISTOGRAM = ENGINE_HDR_BINS + 1  # bin indices of one kind and tag, overflow included
# ENGINE_CONFIG flags.
ENGINE_ENABLE = 1 << 0
ENGINE_RAW = 1 << 1  # raw edges (EVENTS) too
ENGINE_TRIGGER_ON_LATE = 1 << 2
ENGINE_NO_TAG = 0xFF  # tag_channel: no tag
ENGINE_NEVER = 0xFFFFFFFF  # threshold: no outlier records for this kind
ENGINE_TRIGGER_ISR = 0
ENGINE_TRIGGER_TASK = 1
# ENGINE_BINS entry head: bits 0-1 type, bits 2-3 kind, bit 4 tag, bits 5-7 zero.
ENGINE_ENTRY_BIN = 0
ENGINE_ENTRY_CLOSE = 1
# ENGINE_OUTLIERS flags, and the values that are no latency.
OUTLIER_TAG_AT_START = 1 << 0
OUTLIER_TAG_IN_WINDOW = 1 << 1
OUTLIER_MISS = 0xFFFFFFFF
OUTLIER_BELOW = 0xFFFFFFFE  # below range (gateware/engine.py's BELOW_VALUE)
# ENGINE_STATS state bits.
ENGINE_STATE_ENABLED = 1 << 0
ENGINE_STATE_FLUSHED = 1 << 1
ENGINE_MIN_NONE = 0xFFFFFFFF  # min of a kind and tag without samples


# ---------------------------------------------------------------------------------------------
# Errors


class ProtocolError(ValueError):
    """A frame that cannot be accepted. ``reason`` names the check that failed."""

    reason = "error"


class CorruptFrame(ProtocolError):
    """COBS decoding failed, bad length (< 8 or > 254 decoded bytes) or CRC mismatch."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"corrupt frame ({reason}){': ' + detail if detail else ''}")
        self.reason = reason  # "cobs", "short", "too_long" or "crc"


class WrongVersion(ProtocolError):
    reason = "version"

    def __init__(self, version: int, msg_type: int, seq: int):
        super().__init__(f"protocol version {version}, expected {PROTOCOL_VERSION}")
        self.version, self.msg_type, self.seq = version, msg_type, seq


class UnknownType(ProtocolError):
    reason = "unknown_type"

    def __init__(self, msg_type: int, seq: int):
        super().__init__(f"unknown message type 0x{msg_type:02x}")
        self.msg_type, self.seq = msg_type, seq


class MalformedFrame(ProtocolError):
    """Valid frame (CRC matched) whose body does not fit its type."""

    reason = "bad_length"


class OutOfRange(MalformedFrame):
    """Valid frame whose body has the right length but a count beyond what the protocol allows."""

    reason = "range"


# ---------------------------------------------------------------------------------------------
# Primitives


def crc32(data: bytes) -> int:
    """CRC-32/ISO-HDLC, as zlib.crc32."""
    return zlib.crc32(data) & 0xFFFFFFFF


def cobs_encode(data: bytes) -> bytes:
    """COBS without the delimiter. A trailing full block (254 non-zero bytes) is not followed by
    an empty block, as in the usual reference encoder."""
    out = bytearray()
    chunks = bytes(data).split(b"\x00")
    last = len(chunks) - 1
    for k, chunk in enumerate(chunks):
        full = False
        while len(chunk) >= 254:
            out.append(0xFF)
            out += chunk[:254]
            chunk = chunk[254:]
            full = True
        if chunk or not full or k != last:
            out.append(len(chunk) + 1)
            out += chunk
    return bytes(out)


def _cobs_decode_slow(data: bytes) -> bytes:
    out = []
    i, n = 0, len(data)
    while i < n:
        code = data[i]
        end = i + code
        if end > n:
            raise CorruptFrame("cobs", "truncated block")
        out.append(data[i + 1 : end])
        i = end
        if code != 0xFF and i < n:
            out.append(b"\x00")
    return b"".join(out)


def cobs_decode(data: bytes) -> bytes:
    """Inverse of cobs_encode (delimiter excluded). Raises CorruptFrame("cobs")."""
    n = len(data)
    if n == 0 or b"\x00" in data:
        raise CorruptFrame("cobs", "empty or contains 0x00")
    # Fast path (no 0xFF block): every code byte but the first becomes the zero it stands for.
    buf = bytearray(data)
    i = 0
    while i < n:
        code = buf[i]
        if code == 0xFF:
            return _cobs_decode_slow(data)
        buf[i] = 0
        i += code
    if i != n:
        raise CorruptFrame("cobs", "truncated block")
    del buf[0]
    return bytes(buf)


def uleb128(value: int) -> bytes:
    if value < 0:
        raise ValueError("uleb128 of a negative value")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _pack_str(s: str) -> bytes:
    b = s.encode("utf-8")
    if len(b) > 255:
        raise ValueError(f"string longer than 255 bytes: {s[:20]!r}...")
    return bytes((len(b),)) + b


def _unpack_str(body: bytes, i: int) -> tuple[str, int]:
    if i >= len(body):
        raise MalformedFrame("missing string")
    end = i + 1 + body[i]
    if end > len(body):
        raise MalformedFrame("truncated string")
    return body[i + 1 : end].decode("utf-8", errors="replace"), end


_HEADER = struct.Struct("<BBH")


def encode_frame(msg_type: int, seq: int, body: bytes, version: int = PROTOCOL_VERSION) -> bytes:
    """The wire bytes of one frame, delimiter included."""
    if not 0 <= seq <= 0xFFFF:
        raise ValueError(f"seq out of range: {seq}")
    payload = _HEADER.pack(version, msg_type, seq) + body
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    return cobs_encode(payload + crc32(payload).to_bytes(4, "little")) + b"\x00"


def decode_payload(frame: bytes) -> tuple[int, int, int, bytes]:
    """COBS-decode and check one frame (without delimiter): (version, type, seq, body).

    Raises CorruptFrame; does not check the version."""
    if len(frame) > MAX_ENCODED:
        raise CorruptFrame("too_long", f"{len(frame)} encoded bytes")
    dec = cobs_decode(frame)
    if len(dec) < MIN_FRAME:
        raise CorruptFrame("short", f"{len(dec)} bytes")
    if zlib.crc32(dec[:-4]) != int.from_bytes(dec[-4:], "little"):
        raise CorruptFrame("crc")
    version, msg_type, seq = _HEADER.unpack_from(dec)
    return version, msg_type, seq, dec[HEADER_SIZE:-CRC_SIZE]


# ---------------------------------------------------------------------------------------------
# Messages


class Message:
    """Base of every message dataclass."""

    __slots__ = ()
    TYPE: ClassVar[int]
    NAME: ClassVar[str]

    def body(self) -> bytes:  # pragma: no cover - overridden
        raise NotImplementedError

    @classmethod
    def from_body(cls, body: bytes) -> Message:  # pragma: no cover - overridden
        raise NotImplementedError

    def encode(self, seq: int, version: int = PROTOCOL_VERSION) -> bytes:
        """Whole wire frame, delimiter included (``version``: of the header; another than ours only
        to write a rig's frame from before, as the test vectors do)."""
        try:
            body = self.body(version) if isinstance(self, Identify) else self.body()
        except struct.error as e:
            raise ValueError(f"{self.NAME}: field out of range: {e}") from None
        return encode_frame(self.TYPE, seq, body, version)


def _fixed(cls, st: struct.Struct, body: bytes):
    if len(body) != st.size:
        raise MalformedFrame(f"{cls.NAME}: body of {len(body)} bytes, expected {st.size}")
    return cls(*st.unpack(body))


# Host -> rig ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Hello(Message):
    TYPE: ClassVar[int] = MSG_HELLO
    NAME: ClassVar[str] = "HELLO"
    _S: ClassVar[struct.Struct] = struct.Struct("<B")
    version: int = PROTOCOL_VERSION

    def body(self) -> bytes:
        return self._S.pack(self.version)

    @classmethod
    def from_body(cls, body: bytes) -> Hello:
        return _fixed(cls, cls._S, body)


@dataclass(slots=True)
class StimConfig(Message):
    TYPE: ClassVar[int] = MSG_STIM_CONFIG
    NAME: ClassVar[str] = "STIM_CONFIG"
    _S: ClassVar[struct.Struct] = struct.Struct("<BBBIIIIHIII")
    channel: int
    mode: int
    invert: int = 0
    width: int = 1
    period: int = 0
    jitter: int = 0
    probability: int = 0
    burst_count: int = 0
    burst_spacing: int = 0
    count: int = 0
    seed: int = 0

    def body(self) -> bytes:
        return self._S.pack(
            self.channel, self.mode, self.invert, self.width, self.period, self.jitter,
            self.probability, self.burst_count, self.burst_spacing, self.count, self.seed,
        )

    @classmethod
    def from_body(cls, body: bytes) -> StimConfig:
        return _fixed(cls, cls._S, body)


@dataclass(slots=True)
class CaptureConfig(Message):
    """channels: one (flags, glitch) per capture channel, channel 0 first."""

    TYPE: ClassVar[int] = MSG_CAPTURE_CONFIG
    NAME: ClassVar[str] = "CAPTURE_CONFIG"
    channels: list[tuple[int, int]] = field(default_factory=list)

    def body(self) -> bytes:
        out = bytearray((len(self.channels),))
        for flags, glitch in self.channels:
            out += struct.pack("<BB", flags, glitch)
        return bytes(out)

    @classmethod
    def from_body(cls, body: bytes) -> CaptureConfig:
        if len(body) < 1 or len(body) != 1 + 2 * body[0]:
            raise MalformedFrame(f"CAPTURE_CONFIG: body of {len(body)} bytes")
        if body[0] > MAX_CHANNELS:
            raise OutOfRange(f"CAPTURE_CONFIG: {body[0]} channels, at most {MAX_CHANNELS}")
        return cls([(body[1 + 2 * i], body[2 + 2 * i]) for i in range(body[0])])


@dataclass(slots=True)
class Start(Message):
    TYPE: ClassVar[int] = MSG_START
    NAME: ClassVar[str] = "START"
    _S: ClassVar[struct.Struct] = struct.Struct("<BBQ")
    channels: int
    at_time: int = 0
    start: int = 0

    def body(self) -> bytes:
        return self._S.pack(self.channels, self.at_time, self.start)

    @classmethod
    def from_body(cls, body: bytes) -> Start:
        return _fixed(cls, cls._S, body)


@dataclass(slots=True)
class Stop(Message):
    TYPE: ClassVar[int] = MSG_STOP
    NAME: ClassVar[str] = "STOP"
    _S: ClassVar[struct.Struct] = struct.Struct("<B")
    channels: int

    def body(self) -> bytes:
        return self._S.pack(self.channels)

    @classmethod
    def from_body(cls, body: bytes) -> Stop:
        return _fixed(cls, cls._S, body)


@dataclass(slots=True)
class StatusReq(Message):
    TYPE: ClassVar[int] = MSG_STATUS_REQ
    NAME: ClassVar[str] = "STATUS_REQ"

    def body(self) -> bytes:
        return b""

    @classmethod
    def from_body(cls, body: bytes) -> StatusReq:
        if body:
            raise MalformedFrame(f"STATUS_REQ: body of {len(body)} bytes")
        return cls()


@dataclass(slots=True)
class TimeReq(Message):
    TYPE: ClassVar[int] = MSG_TIME_REQ
    NAME: ClassVar[str] = "TIME_REQ"

    def body(self) -> bytes:
        return b""

    @classmethod
    def from_body(cls, body: bytes) -> TimeReq:
        if body:
            raise MalformedFrame(f"TIME_REQ: body of {len(body)} bytes")
        return cls()


def _empty(cls, body: bytes):
    if body:
        raise MalformedFrame(f"{cls.NAME}: body of {len(body)} bytes, expected 0")
    return cls()


@dataclass(slots=True)
class EngineConfig(Message):
    """The engine's roles and settings (docs/engine.md); it resets the engine. Levels are the pin
    level after the active edge (1 rise, 0 fall); tag_channel ENGINE_NO_TAG: no tag; deadline 0:
    none; thresholds per kind (ENGINE_NEVER: no outlier records); trigger_threshold 0: no trigger."""

    TYPE: ClassVar[int] = MSG_ENGINE_CONFIG
    NAME: ClassVar[str] = "ENGINE_CONFIG"
    _S: ClassVar[struct.Struct] = struct.Struct("<9BIHB3IBIH")
    flags: int
    start_channel: int
    start_level: int
    isr_channel: int
    isr_level: int
    task_channel: int
    task_level: int
    tag_channel: int = ENGINE_NO_TAG
    tag_level: int = 1
    deadline: int = 0
    offset: int = 0
    interval_shift: int = 24
    thresholds: list[int] = field(default_factory=lambda: [ENGINE_NEVER] * len(ENGINE_KINDS))
    trigger_response: int = ENGINE_TRIGGER_ISR
    trigger_threshold: int = 0
    trigger_width: int = 0

    def body(self) -> bytes:
        if len(self.thresholds) != len(ENGINE_KINDS):
            raise ValueError(f"ENGINE_CONFIG: {len(self.thresholds)} thresholds, one per kind expected")
        return self._S.pack(
            self.flags, self.start_channel, self.start_level, self.isr_channel, self.isr_level,
            self.task_channel, self.task_level, self.tag_channel, self.tag_level, self.deadline, self.offset,
            self.interval_shift, *self.thresholds, self.trigger_response, self.trigger_threshold,
            self.trigger_width,
        )

    @classmethod
    def from_body(cls, body: bytes) -> EngineConfig:
        if len(body) != cls._S.size:
            raise MalformedFrame(f"ENGINE_CONFIG: body of {len(body)} bytes, expected {cls._S.size}")
        v = cls._S.unpack(body)
        return cls(*v[:12], list(v[12:15]), *v[15:])


@dataclass(slots=True)
class EngineStatsReq(Message):
    TYPE: ClassVar[int] = MSG_ENGINE_STATS_REQ
    NAME: ClassVar[str] = "ENGINE_STATS_REQ"

    def body(self) -> bytes:
        return b""

    @classmethod
    def from_body(cls, body: bytes) -> EngineStatsReq:
        return _empty(cls, body)


@dataclass(slots=True)
class EngineFlush(Message):
    """Close the open window and every interval up to now; the ACK follows the run's last bins."""

    TYPE: ClassVar[int] = MSG_ENGINE_FLUSH
    NAME: ClassVar[str] = "ENGINE_FLUSH"

    def body(self) -> bytes:
        return b""

    @classmethod
    def from_body(cls, body: bytes) -> EngineFlush:
        return _empty(cls, body)


def format_ip(ip: int) -> str:
    """192.168.1.100 from 0xC0A80164 (the numeric value the commands carry)."""
    return ".".join(str((ip >> s) & 0xFF) for s in (24, 16, 8, 0))


def parse_ip(text: str) -> int:
    """0xC0A80164 from "192.168.1.100"; ValueError on anything else."""
    parts = text.strip().split(".")
    if len(parts) != 4 or not all(x.isdigit() and int(x) <= 255 for x in parts):
        raise ValueError(f"not an IPv4 address: {text!r}")
    return int.from_bytes(bytes(int(x) for x in parts), "big")


def format_mac(mac: int) -> str:
    """10:e2:d5:00:00:50 from 0x10E2D5000050 (wire order: the first byte is the most significant)."""
    return ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))


def parse_mac(text: str) -> int:
    """0x10E2D5000050 from "10:e2:d5:00:00:50" (or with '-'); ValueError on anything else."""
    parts = text.strip().replace("-", ":").split(":")
    if len(parts) != 6 or not all(len(x) == 2 for x in parts):
        raise ValueError(f"not a MAC address: {text!r}")
    return int.from_bytes(bytes.fromhex("".join(parts)), "big")


@dataclass(slots=True)
class StreamConfig(Message):
    """The Ethernet stream (docs/ethernet.md): ``enable`` routes the capture's records to the
    packetizer; ``session`` is latched at the next START; ``dst_ip`` (numeric, 192.168.1.100 =
    0xC0A80164) and ``dst_port`` 0: the source of this command's datagram; ``flush_us`` (>= 1) how
    long a datagram's first record may wait; ``heartbeat_ms`` 0: no heartbeats."""

    TYPE: ClassVar[int] = MSG_STREAM_CONFIG
    NAME: ClassVar[str] = "STREAM_CONFIG"
    _S: ClassVar[struct.Struct] = struct.Struct("<BIIHHH")
    enable: int
    session: int
    dst_ip: int = 0
    dst_port: int = 0
    flush_us: int = STREAM_FLUSH_US_DEFAULT
    heartbeat_ms: int = STREAM_HEARTBEAT_MS_DEFAULT

    def body(self) -> bytes:
        return self._S.pack(self.enable, self.session, self.dst_ip, self.dst_port, self.flush_us, self.heartbeat_ms)

    @classmethod
    def from_body(cls, body: bytes) -> StreamConfig:
        return _fixed(cls, cls._S, body)


@dataclass(slots=True)
class StreamStatusReq(Message):
    TYPE: ClassVar[int] = MSG_STREAM_STATUS_REQ
    NAME: ClassVar[str] = "STREAM_STATUS_REQ"

    def body(self) -> bytes:
        return b""

    @classmethod
    def from_body(cls, body: bytes) -> StreamStatusReq:
        return _empty(cls, body)


@dataclass(slots=True)
class NetConfig(Message):
    """The rig's address until reset (docs/ethernet.md); its ACK leaves from the old one. ``ip``
    numeric (0xC0A80132 = 192.168.1.50), ``mac`` the 48-bit value whose bytes, most significant
    first, are the wire order (0x10E2D5000050 = 10:e2:d5:00:00:50)."""

    TYPE: ClassVar[int] = MSG_NET_CONFIG
    NAME: ClassVar[str] = "NET_CONFIG"
    ip: int
    mac: int

    def body(self) -> bytes:
        if not 0 <= self.mac < 1 << 48:
            raise ValueError(f"NET_CONFIG: MAC {self.mac:#x} beyond 48 bits")
        return struct.pack("<I", self.ip) + self.mac.to_bytes(6, "big")

    @classmethod
    def from_body(cls, body: bytes) -> NetConfig:
        if len(body) != 10:
            raise MalformedFrame(f"NET_CONFIG: body of {len(body)} bytes, expected 10")
        return cls(int.from_bytes(body[:4], "little"), int.from_bytes(body[4:], "big"))


# Rig -> host ---------------------------------------------------------------------------------


class EthernetInfo(NamedTuple):
    """IDENTIFY's Ethernet tail (protocol 4; docs/ethernet.md): the rig's address now (numeric IPv4,
    48-bit MAC whose bytes most significant first are the wire order), its UDP ports, and the stream
    datagram's record size (32-bit words) and records per datagram."""

    ip: int
    mac: int
    command_port: int
    stream_port: int
    record_words: int
    max_records: int


_ETHERNET_TAIL = struct.Struct("<I6sHHBH")


@dataclass(slots=True)
class Identify(Message):
    """channels: (name, default role) of every channel, stimulus outputs first (the rig's channel
    table, gateware/channels.py); role "" for none. uart_baud: the rate the rig's UART was built for
    (0: no serial line, the simulator), after the table; None for a version-3 rig built before it
    was sent, whose body ends with the table (and encodes so). ethernet: the Ethernet tail of
    protocol 4 (None: a rig without Ethernet, or a frame of version 3)."""

    TYPE: ClassVar[int] = MSG_IDENTIFY
    NAME: ClassVar[str] = "IDENTIFY"
    _S: ClassVar[struct.Struct] = struct.Struct("<BIIBBHBIHBIB")
    _S_V2: ClassVar[struct.Struct] = struct.Struct("<BIIBBHBIHBI")   # version 2: no samples_per_tick
    version: int
    ts_hz: int
    sys_hz: int
    n_stimulus: int
    n_inputs: int
    fifo_depth: int
    pin_to_stamp_delay: int
    capabilities: int
    min_interval: int = 4
    glitch_max: int = 15
    start_margin: int = 1000
    samples_per_tick: int = 1     # of each DUT input (docs/subtick.md)
    firmware: str = ""
    gateware: str = ""
    channels: list[tuple[str, str]] = field(default_factory=list)
    uart_baud: int | None = None
    ethernet: EthernetInfo | None = None

    def body(self, version: int = PROTOCOL_VERSION) -> bytes:
        """The body in a frame of ``version``: 4 always has uart_baud and the ethernet byte."""
        if len(self.channels) != self.n_stimulus + self.n_inputs:
            raise ValueError(f"IDENTIFY: {len(self.channels)} channels, n_stimulus + n_inputs = "
                             f"{self.n_stimulus + self.n_inputs}")
        if version >= 4 and self.uart_baud is None:
            raise ValueError("IDENTIFY: version 4 always has uart_baud")
        if version < 4 and self.ethernet is not None:
            raise ValueError(f"IDENTIFY: no ethernet tail in version {version}")
        tail = b""
        if version >= 4:
            if self.ethernet is None:
                tail = b"\x00"
            else:
                e = EthernetInfo(*self.ethernet)
                if not 0 <= e.mac < 1 << 48:
                    raise ValueError(f"IDENTIFY: MAC {e.mac:#x} beyond 48 bits")
                tail = b"\x01" + _ETHERNET_TAIL.pack(e.ip, e.mac.to_bytes(6, "big"), e.command_port, e.stream_port,
                                                     e.record_words, e.max_records)
        return (
            self._S.pack(
                self.version, self.ts_hz, self.sys_hz, self.n_stimulus, self.n_inputs, self.fifo_depth,
                self.pin_to_stamp_delay, self.capabilities, self.min_interval, self.glitch_max, self.start_margin,
                self.samples_per_tick,
            )
            + _pack_str(self.firmware)
            + _pack_str(self.gateware)
            + b"".join(_pack_str(name) + _pack_str(role) for name, role in self.channels)
            + (b"" if self.uart_baud is None else struct.pack("<I", self.uart_baud))
            + tail
        )

    @classmethod
    def from_body(cls, body: bytes, version: int = PROTOCOL_VERSION) -> Identify:
        layout = cls._S if version >= 3 else cls._S_V2
        n = layout.size
        if len(body) < n:
            raise MalformedFrame(f"IDENTIFY: body of {len(body)} bytes")
        fixed = layout.unpack_from(body)
        if version < 3:
            fixed = (*fixed, 1)
        firmware, i = _unpack_str(body, n)
        gateware, i = _unpack_str(body, i)
        channels = []
        for _ in range(fixed[3] + fixed[4]):
            name, i = _unpack_str(body, i)
            role, i = _unpack_str(body, i)
            channels.append((name, role))
        uart_baud = ethernet = None
        rest = len(body) - i
        if version >= 4:
            # uart_baud, then ethernet:u8 and, when 1, the tail.
            if rest < 5:
                raise MalformedFrame("IDENTIFY: no uart_baud and ethernet byte")
            (uart_baud,) = struct.unpack_from("<I", body, i)
            kind = body[i + 4]
            if kind not in (0, 1):
                raise MalformedFrame(f"IDENTIFY: ethernet {kind}")
            if rest != 5 + kind * _ETHERNET_TAIL.size:
                raise MalformedFrame("IDENTIFY: trailing bytes" if kind == 0 or rest > 5 + _ETHERNET_TAIL.size
                                     else "IDENTIFY: truncated ethernet tail")
            if kind:
                ip, mac, command_port, stream_port, words, max_records = _ETHERNET_TAIL.unpack_from(body, i + 5)
                ethernet = EthernetInfo(ip, int.from_bytes(mac, "big"), command_port, stream_port, words,
                                        max_records)
        # Version 3: uart_baud came later at the end: a body that ends with the table is a rig's from before.
        elif rest == 4:
            (uart_baud,) = struct.unpack_from("<I", body, i)
        elif rest != 0:
            raise MalformedFrame("IDENTIFY: trailing bytes")
        if fixed[-1] not in (1, 2, 4, 8):
            raise MalformedFrame(f"IDENTIFY: {fixed[-1]} samples a tick")
        return cls(*fixed, firmware, gateware, channels, uart_baud, ethernet)

    @property
    def fraction_bits(self) -> int:
        """Bits of each input's sub-tick position in an EVENTS record's fraction."""
        return self.samples_per_tick.bit_length() - 1

    @property
    def fraction_bytes(self) -> int:
        return (self.n_inputs * self.fraction_bits + 7) // 8

    @property
    def n_channels(self) -> int:
        return self.n_stimulus + self.n_inputs


@dataclass(slots=True)
class Events(Message):
    """records: (timestamp, channels, levels), absolute timestamps, and with ``fraction_bytes`` > 0
    (timestamp, channels, levels, fraction). On the wire each record carries delta = (timestamp -
    previous) mod 2**64, previous being ``base`` for the first, then its channel and level masks in
    ``mask_bytes`` bytes each (1 for up to 8 channels, else 2), then its fraction (the inputs'
    sub-tick positions, docs/subtick.md) in ``fraction_bytes`` bytes (0, 1 or 2). The body's
    format byte holds mask_bytes (bits 0-3) and fraction_bytes (bits 4-7)."""

    TYPE: ClassVar[int] = MSG_EVENTS
    NAME: ClassVar[str] = "EVENTS"
    base: int
    records: list[tuple[int, ...]] = field(default_factory=list)
    mask_bytes: int = 1
    fraction_bytes: int = 0

    def body(self) -> bytes:
        if self.mask_bytes not in (1, 2):
            raise ValueError(f"EVENTS: mask_bytes {self.mask_bytes}, must be 1 or 2")
        if self.fraction_bytes not in (0, 1, 2):
            raise ValueError(f"EVENTS: fraction_bytes {self.fraction_bytes}, must be 0, 1 or 2")
        out = bytearray(struct.pack("<QB", self.base, self.mask_bytes | self.fraction_bytes << 4))
        prev = self.base
        limit = 1 << (8 * self.mask_bytes)
        width = 4 if self.fraction_bytes else 3
        for rec in self.records:
            if len(rec) != width:
                raise ValueError(f"EVENTS: record {rec} with fraction_bytes {self.fraction_bytes}")
            ts, channels, levels = rec[:3]
            if not 0 <= ts <= MASK64:
                raise ValueError(f"timestamp out of range: {ts}")
            if not (0 <= channels < limit and 0 <= levels < limit):
                raise ValueError(f"masks {channels:#x}/{levels:#x} do not fit {self.mask_bytes} bytes")
            out += uleb128((ts - prev) & MASK64)
            out += channels.to_bytes(self.mask_bytes, "little") + levels.to_bytes(self.mask_bytes, "little")
            if self.fraction_bytes:
                if not 0 <= rec[3] < 1 << (8 * self.fraction_bytes):
                    raise ValueError(f"fraction {rec[3]:#x} does not fit {self.fraction_bytes} bytes")
                out += rec[3].to_bytes(self.fraction_bytes, "little")
            prev = ts
        return bytes(out)

    @classmethod
    def from_body(cls, body: bytes) -> Events:
        n = len(body)
        if n < 9:
            raise MalformedFrame(f"EVENTS: body of {n} bytes")
        ts = int.from_bytes(body[:8], "little")
        base = ts
        mask_bytes, fraction_bytes = body[8] & 0x0F, body[8] >> 4
        if mask_bytes not in (1, 2) or fraction_bytes not in (0, 1, 2):
            raise MalformedFrame(f"EVENTS: format {body[8]:#04x}")
        records: list[tuple[int, ...]] = []
        append = records.append
        i = 9
        try:
            while i < n:
                b = body[i]
                if b < 0x80:  # 1-byte delta
                    ts += b
                    i += 1
                else:
                    b2 = body[i + 1]
                    if b2 < 0x80:  # 2-byte delta
                        ts += (b & 0x7F) | (b2 << 7)
                        i += 2
                    else:
                        delta = (b & 0x7F) | ((b2 & 0x7F) << 7)
                        shift = 14
                        i += 2
                        while True:
                            b = body[i]
                            i += 1
                            delta |= (b & 0x7F) << shift
                            if b < 0x80:
                                break
                            shift += 7
                            if shift > 63:
                                raise MalformedFrame("EVENTS: uleb128 longer than 10 bytes")
                        ts += delta
                # Timestamps are mod 2**64 whatever the delta's length (a 1-byte delta crosses the
                # wrap as often as a long one).
                if ts > MASK64:
                    ts &= MASK64
                if fraction_bytes:
                    at = i + 2 * mask_bytes
                    if at + fraction_bytes > n:
                        raise IndexError
                    fraction = int.from_bytes(body[at:at + fraction_bytes], "little")
                    if mask_bytes == 1:
                        append((ts, body[i], body[i + 1], fraction))
                    else:
                        append((ts, body[i] | body[i + 1] << 8, body[i + 2] | body[i + 3] << 8, fraction))
                    i = at + fraction_bytes
                elif mask_bytes == 1:
                    append((ts, body[i], body[i + 1]))
                    i += 2
                else:
                    if i + 4 > n:
                        raise IndexError
                    append((ts, body[i] | body[i + 1] << 8, body[i + 2] | body[i + 3] << 8))
                    i += 4
        except IndexError:
            raise MalformedFrame("EVENTS: truncated record") from None
        if i != n:
            raise MalformedFrame("EVENTS: truncated record")
        return cls(base, records, mask_bytes, fraction_bytes)



@dataclass(slots=True)
class Overflow(Message):
    TYPE: ClassVar[int] = MSG_OVERFLOW
    NAME: ClassVar[str] = "OVERFLOW"
    _S: ClassVar[struct.Struct] = struct.Struct("<QH")
    timestamp: int
    channels: int

    def body(self) -> bytes:
        return self._S.pack(self.timestamp, self.channels)

    @classmethod
    def from_body(cls, body: bytes) -> Overflow:
        return _fixed(cls, cls._S, body)


@dataclass(slots=True)
class Status(Message):
    """The rig's counters. ``fired``: pulses each stimulus channel fired (its gateware count at
    STATUS time, saturating at 2**32-1), one per ``stim_status`` entry; empty when the rig does not
    send them (older firmware, a run's raw.bin from before): unknown, not zero."""

    TYPE: ClassVar[int] = MSG_STATUS
    NAME: ClassVar[str] = "STATUS"
    _S: ClassVar[struct.Struct] = struct.Struct("<IIIBB")
    records_sent: int
    events_sent: int
    frames_sent: int
    overflow: int
    dropped: list[int] = field(default_factory=list)  # per capture channel
    stim_status: list[int] = field(default_factory=list)  # STIM_* bits per stimulus channel
    fired: list[int] = field(default_factory=list)  # pulses per stimulus channel; [] unknown

    def body(self) -> bytes:
        if self.fired and len(self.fired) != len(self.stim_status):
            raise ValueError(f"STATUS: {len(self.fired)} fired counts for {len(self.stim_status)} stimulus channels")
        return (
            self._S.pack(
                self.records_sent, self.events_sent, self.frames_sent, self.overflow, len(self.dropped)
            )
            + struct.pack(f"<{len(self.dropped)}I", *self.dropped)
            + struct.pack("<B", len(self.stim_status))
            + bytes(self.stim_status)
            + struct.pack(f"<{len(self.fired)}I", *self.fired)
        )

    @classmethod
    def from_body(cls, body: bytes) -> Status:
        k = cls._S.size
        if len(body) < k + 1:
            raise MalformedFrame(f"STATUS: body of {len(body)} bytes")
        records, events, frames, overflow, n = cls._S.unpack_from(body)
        j = k + 4 * n
        if len(body) < j + 1:
            raise MalformedFrame(f"STATUS: body of {len(body)} bytes")
        stim_n = body[j]
        end = j + 1 + stim_n
        # The fired counts were appended to the body (protocol 3 kept): a body ending after the
        # status bytes is an older rig's.
        if len(body) not in (end, end + 4 * stim_n):
            raise MalformedFrame(f"STATUS: body of {len(body)} bytes")
        dropped = list(struct.unpack_from(f"<{n}I", body, k))
        fired = list(struct.unpack_from(f"<{stim_n}I", body, end)) if len(body) > end else []
        return cls(records, events, frames, overflow, dropped, list(body[j + 1 : end]), fired)


@dataclass(slots=True)
class Ack(Message):
    TYPE: ClassVar[int] = MSG_ACK
    NAME: ClassVar[str] = "ACK"
    _S: ClassVar[struct.Struct] = struct.Struct("<HB")
    command_seq: int
    code: int = 0
    message: str = ""

    def body(self) -> bytes:
        return self._S.pack(self.command_seq, self.code) + _pack_str(self.message)

    @classmethod
    def from_body(cls, body: bytes) -> Ack:
        if len(body) < 3:
            raise MalformedFrame(f"ACK: body of {len(body)} bytes")
        command_seq, code = cls._S.unpack_from(body)
        message, i = _unpack_str(body, 3)
        if i != len(body):
            raise MalformedFrame("ACK: trailing bytes")
        return cls(command_seq, code, message)


@dataclass(slots=True)
class Time(Message):
    TYPE: ClassVar[int] = MSG_TIME
    NAME: ClassVar[str] = "TIME"
    _S: ClassVar[struct.Struct] = struct.Struct("<HQ")
    command_seq: int
    now: int

    def body(self) -> bytes:
        return self._S.pack(self.command_seq, self.now)

    @classmethod
    def from_body(cls, body: bytes) -> Time:
        return _fixed(cls, cls._S, body)


def _uleb(body: bytes, i: int, what: str) -> tuple[int, int]:
    """One uleb128 at body[i]: (value, next index); MalformedFrame if truncated or over 64 bits."""
    value = shift = 0
    n = len(body)
    while True:
        if i >= n:
            raise MalformedFrame(f"{what}: truncated uleb128")
        b = body[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise MalformedFrame(f"{what}: uleb128 longer than 10 bytes")
    if value > MASK64:
        raise MalformedFrame(f"{what}: uleb128 beyond 64 bits")
    return value, i


class BinsEntry(NamedTuple):
    """One ENGINE_BINS entry. type ENGINE_ENTRY_BIN: ``count`` samples of (kind, tag) fell in
    ``bin`` in ``interval``; ENGINE_ENTRY_CLOSE: every bin of ``kind`` in ``interval`` has been sent
    (tag, bin and count 0)."""

    type: int
    kind: int
    tag: int
    interval: int
    bin: int
    count: int


def _bins_entry_bytes(e: BinsEntry) -> bytes:
    if e.type not in (ENGINE_ENTRY_BIN, ENGINE_ENTRY_CLOSE) or not 0 <= e.kind < len(ENGINE_KINDS) \
            or e.tag not in (0, 1) or not 0 <= e.interval <= 0xFFFFFFFF:
        raise ValueError(f"ENGINE_BINS: entry {tuple(e)} out of range")
    head = bytes((e.type | e.kind << 2 | e.tag << 4,))
    if e.type == ENGINE_ENTRY_CLOSE:
        if e.tag or e.bin or e.count:
            raise ValueError(f"ENGINE_BINS: a close carries no tag, bin or count: {tuple(e)}")
        return head + uleb128(e.interval)
    if not 0 <= e.bin <= ENGINE_OVERFLOW_BIN:
        raise ValueError(f"ENGINE_BINS: bin {e.bin} beyond {ENGINE_OVERFLOW_BIN}")
    return head + uleb128(e.interval) + uleb128(e.bin) + uleb128(e.count)


@dataclass(slots=True)
class EngineBins(Message):
    """Nonzero bins of closed intervals and the closes (docs/engine.md, "Intervals"), in the
    order the engine sent them."""

    TYPE: ClassVar[int] = MSG_ENGINE_BINS
    NAME: ClassVar[str] = "ENGINE_BINS"
    entries: list[BinsEntry] = field(default_factory=list)

    def body(self) -> bytes:
        return b"".join(_bins_entry_bytes(BinsEntry(*e)) for e in self.entries)

    @classmethod
    def from_body(cls, body: bytes) -> EngineBins:
        entries: list[BinsEntry] = []
        i, n = 0, len(body)
        while i < n:
            head = body[i]
            kind_type, kind, tag = head & 3, (head >> 2) & 3, (head >> 4) & 1
            if head >> 5 or kind_type > ENGINE_ENTRY_CLOSE or kind >= len(ENGINE_KINDS):
                raise MalformedFrame(f"ENGINE_BINS: entry head 0x{head:02x} at byte {i}")
            interval, i = _uleb(body, i + 1, "ENGINE_BINS")
            if interval > 0xFFFFFFFF:
                raise OutOfRange(f"ENGINE_BINS: interval {interval} beyond 32 bits")
            if kind_type == ENGINE_ENTRY_CLOSE:
                if tag:
                    raise MalformedFrame("ENGINE_BINS: a close with the tag bit")
                entries.append(BinsEntry(kind_type, kind, 0, interval, 0, 0))
                continue
            bin_, i = _uleb(body, i, "ENGINE_BINS")
            count, i = _uleb(body, i, "ENGINE_BINS")
            if bin_ > ENGINE_OVERFLOW_BIN:
                raise OutOfRange(f"ENGINE_BINS: bin {bin_} beyond {ENGINE_OVERFLOW_BIN}")
            entries.append(BinsEntry(kind_type, kind, tag, interval, bin_, count))
        return cls(entries)


class Outlier(NamedTuple):
    """One outlier record: the stimulus tick, OUTLIER_TAG_* flags, and each kind's value in ticks
    (OUTLIER_MISS: no value, OUTLIER_BELOW: below range)."""

    start: int
    flags: int
    stim_to_isr: int
    stim_to_task: int
    isr_to_task: int


@dataclass(slots=True)
class EngineOutliers(Message):
    TYPE: ClassVar[int] = MSG_ENGINE_OUTLIERS
    NAME: ClassVar[str] = "ENGINE_OUTLIERS"
    _S: ClassVar[struct.Struct] = struct.Struct("<QB3I")
    records: list[Outlier] = field(default_factory=list)

    def body(self) -> bytes:
        return b"".join(self._S.pack(*r) for r in self.records)

    @classmethod
    def from_body(cls, body: bytes) -> EngineOutliers:
        if len(body) % cls._S.size:
            raise MalformedFrame(f"ENGINE_OUTLIERS: body of {len(body)} bytes, not whole "
                                 f"{cls._S.size}-byte records")
        return cls([Outlier(*r) for r in cls._S.iter_unpack(body)])


class EngineKindStats(NamedTuple):
    """One kind's exact run totals (ENGINE_STATS). min is ENGINE_MIN_NONE while its count is 0."""

    misses: int
    duplicates: int
    below: int
    untagged_count: int
    untagged_min: int
    untagged_max: int
    untagged_sum: int
    tagged_count: int
    tagged_min: int
    tagged_max: int
    tagged_sum: int


@dataclass(slots=True)
class EngineStats(Message):
    """The engine's run totals and limits, answering ENGINE_STATS_REQ (``command_seq``); ``state``:
    ENGINE_STATE_* bits; ``bins``: bin indices per kind and tag, overflow bin included."""

    TYPE: ClassVar[int] = MSG_ENGINE_STATS
    NAME: ClassVar[str] = "ENGINE_STATS"
    _S: ClassVar[struct.Struct] = struct.Struct("<HBQIIIBBBH")
    _K: ClassVar[struct.Struct] = struct.Struct("<QQQQIIQQIIQ")
    command_seq: int
    state: int
    samples: int
    samples_lost: int
    bins_lost: int
    outliers_lost: int
    trigger_delay: int
    min_spacing: int
    interval_shift_min: int
    bins: int
    kinds: list[EngineKindStats] = field(default_factory=list)

    def body(self) -> bytes:
        if len(self.kinds) != len(ENGINE_KINDS):
            raise ValueError(f"ENGINE_STATS: {len(self.kinds)} kinds, expected {len(ENGINE_KINDS)}")
        return self._S.pack(
            self.command_seq, self.state, self.samples, self.samples_lost, self.bins_lost, self.outliers_lost,
            self.trigger_delay, self.min_spacing, self.interval_shift_min, self.bins,
        ) + b"".join(self._K.pack(*k) for k in self.kinds)

    @classmethod
    def from_body(cls, body: bytes) -> EngineStats:
        size = cls._S.size + len(ENGINE_KINDS) * cls._K.size
        if len(body) != size:
            raise MalformedFrame(f"ENGINE_STATS: body of {len(body)} bytes, expected {size}")
        kinds = [EngineKindStats(*k) for k in cls._K.iter_unpack(body[cls._S.size:])]
        return cls(*cls._S.unpack_from(body), kinds)


@dataclass(slots=True)
class StreamStatus(Message):
    """The Ethernet stream's state, answering STREAM_STATUS_REQ (``command_seq``): the settings of
    the last STREAM_CONFIG (``dst_ip``/``dst_port`` as resolved: the address the stream goes to),
    ``link`` (STREAM_LINK_UP), the packetizer's counts since the stream's restart (``datagrams``,
    heartbeats included; ``records``), Ethernet frames received since reset (``rx_frames``) and
    command datagrams dropped because the rig's buffer was full (``command_dropped``)."""

    TYPE: ClassVar[int] = MSG_STREAM_STATUS
    NAME: ClassVar[str] = "STREAM_STATUS"
    _S: ClassVar[struct.Struct] = struct.Struct("<HBBIIHHHIQII")
    command_seq: int
    enabled: int
    link: int
    session: int
    dst_ip: int
    dst_port: int
    flush_us: int
    heartbeat_ms: int
    datagrams: int
    records: int
    rx_frames: int
    command_dropped: int

    def body(self) -> bytes:
        return self._S.pack(
            self.command_seq, self.enabled, self.link, self.session, self.dst_ip, self.dst_port, self.flush_us,
            self.heartbeat_ms, self.datagrams, self.records, self.rx_frames, self.command_dropped,
        )

    @classmethod
    def from_body(cls, body: bytes) -> StreamStatus:
        return _fixed(cls, cls._S, body)


HOST_MESSAGES: dict[int, type[Message]] = {
    c.TYPE: c for c in (Hello, StimConfig, CaptureConfig, Start, Stop, StatusReq, TimeReq, EngineConfig,
                        EngineStatsReq, EngineFlush, StreamConfig, StreamStatusReq, NetConfig)
}
RIG_MESSAGES: dict[int, type[Message]] = {
    c.TYPE: c for c in (Identify, Events, Overflow, Status, Ack, Time, EngineBins, EngineOutliers, EngineStats,
                        StreamStatus)
}
MESSAGES: dict[int, type[Message]] = {**HOST_MESSAGES, **RIG_MESSAGES}
MESSAGES_BY_NAME: dict[str, type[Message]] = {c.NAME: c for c in MESSAGES.values()}


def mask_bytes_for(n_channels: int) -> int:
    """Bytes of an EVENTS channel mask on a rig with ``n_channels`` channels."""
    return 1 if n_channels <= 8 else 2


def pack_events(records: list[tuple[int, ...]], base: int | None = None, mask_bytes: int = 1,
                fraction_bytes: int = 0) -> list[Events]:
    """Split records into as few EVENTS messages as fit MAX_PAYLOAD. Each frame's base is the
    given base (first frame) or its first record's timestamp, as the firmware does."""
    frames: list[Events] = []
    cur: Events | None = None
    size = prev = 0
    masks = 2 * mask_bytes + fraction_bytes
    for rec in records:
        ts = rec[0]
        if cur is not None:
            need = len(uleb128((ts - prev) & MASK64)) + masks
            if size + need > MAX_PAYLOAD:
                cur = None
        if cur is None:
            b = ts if base is None or frames else base
            cur = Events(b, [], mask_bytes, fraction_bytes)
            frames.append(cur)
            size, prev = EVENTS_EMPTY, b
            need = len(uleb128((ts - prev) & MASK64)) + masks
        cur.records.append(rec)
        size += need
        prev = ts
    return frames


def pack_engine_bins(entries) -> list[EngineBins]:
    """Split ENGINE_BINS entries into as few frames as fit MAX_PAYLOAD, in order (as the firmware
    does: an entry that does not fit starts the next frame)."""
    frames: list[EngineBins] = []
    size = MAX_PAYLOAD
    for e in entries:
        e = BinsEntry(*e)
        need = len(_bins_entry_bytes(e))
        if size + need > MAX_PAYLOAD:
            frames.append(EngineBins([]))
            size = HEADER_SIZE
        frames[-1].entries.append(e)
        size += need
    return frames


def pack_engine_outliers(records) -> list[EngineOutliers]:
    """Outlier records in frames of as many as fit (11)."""
    per_frame = (MAX_PAYLOAD - HEADER_SIZE) // EngineOutliers._S.size
    records = [Outlier(*r) for r in records]
    return [EngineOutliers(records[i : i + per_frame]) for i in range(0, len(records), per_frame)]


# ---------------------------------------------------------------------------------------------
# Frames


@dataclass(slots=True)
class Frame:
    seq: int
    msg: Message

    @property
    def type(self) -> int:
        return self.msg.TYPE


def _message(cls: type[Message], body: bytes, version: int) -> Message:
    """``cls`` from ``body`` of a frame of ``version`` (only IDENTIFY changed with versions 3 and 4)."""
    return cls.from_body(body, version) if cls is Identify else cls.from_body(body)


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
