"""The on-rig measurement engine's messages (docs/engine.md): ENGINE_CONFIG, ENGINE_STATS_REQ and
ENGINE_FLUSH (host -> rig), ENGINE_BINS, ENGINE_OUTLIERS and ENGINE_STATS (rig -> host), with the
engine's constants (kinds, histogram bins, flags) beside them, and the packers that split bins and
outliers into frames as the firmware does."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from hilat.link.protocol.frame import (
    HEADER_SIZE,
    MASK64,
    MAX_PAYLOAD,
    EmptyMessage,
    MalformedFrame,
    Message,
    OutOfRange,
    uleb128,
)

MSG_ENGINE_CONFIG = 0x88
MSG_ENGINE_STATS_REQ = 0x89
MSG_ENGINE_FLUSH = 0x8A
MSG_ENGINE_BINS = 0x07
MSG_ENGINE_OUTLIERS = 0x08
MSG_ENGINE_STATS = 0x09

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
class EngineStatsReq(EmptyMessage):
    TYPE: ClassVar[int] = MSG_ENGINE_STATS_REQ
    NAME: ClassVar[str] = "ENGINE_STATS_REQ"


@dataclass(slots=True)
class EngineFlush(EmptyMessage):
    """Close the open window and every interval up to now; the ACK follows the run's last bins."""

    TYPE: ClassVar[int] = MSG_ENGINE_FLUSH
    NAME: ClassVar[str] = "ENGINE_FLUSH"


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
