"""The frame layer (docs/protocol.md, "Framing"): the wire's sizes and versions, COBS, CRC-32,
uleb128 and the length-prefixed strings, one frame's encoding and checking, the errors a frame can
raise, and ``Message``, the base every message dataclass extends.

    wire:    COBS(payload || crc32) 0x00
    payload: version:u8 type:u8 seq:u16 body...      (little-endian)
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import fields
from typing import ClassVar

PROTOCOL_VERSION = 5
# Rig frames of these versions decode (a run's raw.bin from before: version 4's IDENTIFY without the
# TDC fields; version 3's without the ethernet byte; version 2's without samples_per_tick, EVENTS as
# version 3's without fractions).
READABLE_VERSIONS = (2, 3, 4, 5)

HEADER_SIZE = 4  # version, type, seq
CRC_SIZE = 4
MIN_FRAME = HEADER_SIZE + CRC_SIZE  # decoded bytes of the shortest frame
MAX_PAYLOAD = 250  # header + body
MAX_DECODED = MAX_PAYLOAD + CRC_SIZE  # 254
MAX_ENCODED = 255  # COBS of MAX_DECODED bytes, delimiter excluded
MAX_WIRE = 256  # delimiter included
MAX_CHANNELS = 16  # capture channel masks: at most 16 bits (EVENTS: 1 or 2 bytes, OVERFLOW: u16)
MAX_STIMULUS = 8  # stimulus channel masks (START, STOP) are u8
MASK64 = (1 << 64) - 1


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
    # Whether body() and from_body() take the frame's version (only IDENTIFY changed with versions 3
    # and 4: a run's raw.bin from before still decodes).
    BODY_BY_VERSION: ClassVar[bool] = False

    def body(self) -> bytes:  # pragma: no cover - overridden
        raise NotImplementedError

    @classmethod
    def from_body(cls, body: bytes) -> Message:  # pragma: no cover - overridden
        raise NotImplementedError

    def encode(self, seq: int, version: int = PROTOCOL_VERSION) -> bytes:
        """Whole wire frame, delimiter included (``version``: of the header; another than ours only
        to write a rig's frame from before, as the test vectors do)."""
        try:
            body = self.body(version) if self.BODY_BY_VERSION else self.body()
        except struct.error as e:
            raise ValueError(f"{self.NAME}: field out of range: {e}") from None
        return encode_frame(self.TYPE, seq, body, version)


class FixedMessage(Message):
    """Base of the messages whose body is their fields, in the order declared, packed by one struct
    (``_S``)."""

    __slots__ = ()
    _S: ClassVar[struct.Struct]

    def body(self) -> bytes:
        return self._S.pack(*(getattr(self, f.name) for f in fields(self)))

    @classmethod
    def from_body(cls, body: bytes) -> FixedMessage:
        if len(body) != cls._S.size:
            raise MalformedFrame(f"{cls.NAME}: body of {len(body)} bytes, expected {cls._S.size}")
        return cls(*cls._S.unpack(body))


class EmptyMessage(Message):
    """Base of the messages without a body (requests, and commands that carry nothing)."""

    __slots__ = ()

    def body(self) -> bytes:
        return b""

    @classmethod
    def from_body(cls, body: bytes) -> EmptyMessage:
        if body:
            raise MalformedFrame(f"{cls.NAME}: body of {len(body)} bytes, expected 0")
        return cls()
