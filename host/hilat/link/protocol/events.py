"""The record stream (docs/protocol.md, "EVENTS"): the EVENTS message, whose records carry each
edge's timestamp as a uleb128 delta, its channel and level masks and the inputs' sub-tick positions;
``pack_events`` splits records into frames as the firmware does. The fast decoder of a stream of
EVENTS frames is ``hilat.link.batch``."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar

from hilat.link.protocol.frame import HEADER_SIZE, MASK64, MAX_PAYLOAD, MalformedFrame, Message, uleb128

MSG_EVENTS = 0x02

EVENTS_EMPTY = HEADER_SIZE + 9  # payload of an EVENTS frame without records (base, format)
# A record's fraction: the inputs' sub-tick samples (1 or 2 bytes) or, on a TDC rig (protocol 5), 8
# bits of TDC code per TDC input (up to 8 inputs).
MAX_FRACTION_BYTES = 8


@dataclass(slots=True)
class Events(Message):
    """records: (timestamp, channels, levels), absolute timestamps, and with ``fraction_bytes`` > 0
    (timestamp, channels, levels, fraction). On the wire each record carries delta = (timestamp -
    previous) mod 2**64, previous being ``base`` for the first, then its channel and level masks in
    ``mask_bytes`` bytes each (1 for up to 8 channels, else 2), then its fraction (the inputs'
    sub-tick positions, docs/subtick.md, or TDC codes, docs/tdc.md) in ``fraction_bytes`` bytes
    (0 .. 8), little-endian. The body's format byte holds mask_bytes (bits 0-3) and fraction_bytes
    (bits 4-7)."""

    TYPE: ClassVar[int] = MSG_EVENTS
    NAME: ClassVar[str] = "EVENTS"
    base: int
    records: list[tuple[int, ...]] = field(default_factory=list)
    mask_bytes: int = 1
    fraction_bytes: int = 0

    def body(self) -> bytes:
        if self.mask_bytes not in (1, 2):
            raise ValueError(f"EVENTS: mask_bytes {self.mask_bytes}, must be 1 or 2")
        if not 0 <= self.fraction_bytes <= MAX_FRACTION_BYTES:
            raise ValueError(f"EVENTS: fraction_bytes {self.fraction_bytes}, must be 0 .. {MAX_FRACTION_BYTES}")
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
        if mask_bytes not in (1, 2) or fraction_bytes > MAX_FRACTION_BYTES:
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
