"""The rig's replies, rig -> host (docs/protocol.md, "Rig -> host"): IDENTIFY (the rig's identity,
channel table and capabilities), OVERFLOW, STATUS, ACK and TIME, each with its type and its fields'
constants beside its encoder and decoder. The record stream (EVENTS) is in ``events``, the engine's
messages in ``engine_messages``, STREAM_STATUS in ``ethernet``."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar

from hilat.link.protocol.ethernet import EthernetInfo
from hilat.link.protocol.frame import PROTOCOL_VERSION, FixedMessage, MalformedFrame, Message, _pack_str, _unpack_str

MSG_IDENTIFY = 0x01
MSG_OVERFLOW = 0x03
MSG_STATUS = 0x04
MSG_ACK = 0x05
MSG_TIME = 0x06

# Protocol version 1 had no channel table in IDENTIFY: its channels were fixed, as here. Only run
# directories written by a version-1 hilat need it (hilat.rundir.reader reads them).
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

# STATUS per-stimulus-channel bits.
STIM_RUNNING = 1 << 0
STIM_DONE = 1 << 1
STIM_LATE = 1 << 2


_ETHERNET_TAIL = struct.Struct("<I6sHHBH")
_TDC_TAIL = struct.Struct("<BH")   # protocol 5: tdc_inputs, tdc_taps
TDC_CODE_BITS = 8                  # a TDC input's bits in a record's fraction (docs/tdc.md)
MAX_TDC_INPUTS = 8                 # a fraction is at most 64 bits (EVENTS: 8 bytes)


@dataclass(slots=True)
class Identify(Message):
    """channels: (name, default role) of every channel, stimulus outputs first (the rig's channel
    table, gateware/channels.py); role "" for none. uart_baud: the rate the rig's UART was built for
    (0: no serial line, the simulator), after the table; None for a version-3 rig built before it
    was sent, whose body ends with the table (and encodes so). ethernet: the Ethernet tail of
    protocol 4 (None: a rig without Ethernet, or a frame of version 3). tdc_inputs, tdc_taps
    (protocol 5, after the Ethernet tail; 0 in a frame of an earlier version): the first
    ``tdc_inputs`` DUT inputs have a carry-chain TDC of ``tdc_taps`` taps, and each record's
    fraction holds 8 bits of TDC code per such input (docs/tdc.md)."""

    TYPE: ClassVar[int] = MSG_IDENTIFY
    NAME: ClassVar[str] = "IDENTIFY"
    BODY_BY_VERSION: ClassVar[bool] = True
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
    tdc_inputs: int = 0
    tdc_taps: int = 0

    def body(self, version: int = PROTOCOL_VERSION) -> bytes:
        """The body in a frame of ``version``: 4 always has uart_baud and the ethernet byte, 5 the
        TDC fields after them."""
        if len(self.channels) != self.n_stimulus + self.n_inputs:
            raise ValueError(f"IDENTIFY: {len(self.channels)} channels, n_stimulus + n_inputs = "
                             f"{self.n_stimulus + self.n_inputs}")
        if version >= 4 and self.uart_baud is None:
            raise ValueError("IDENTIFY: version 4 always has uart_baud")
        if version < 4 and self.ethernet is not None:
            raise ValueError(f"IDENTIFY: no ethernet tail in version {version}")
        if version < 5 and (self.tdc_inputs or self.tdc_taps):
            raise ValueError(f"IDENTIFY: no TDC fields in version {version}")
        problem = self._tdc_problem()
        if problem:
            raise ValueError(problem)
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
        if version >= 5:
            tail += _TDC_TAIL.pack(self.tdc_inputs, self.tdc_taps)
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
        tdc = (0, 0)
        rest = len(body) - i
        if version >= 4:
            # uart_baud, then ethernet:u8 and, when 1, the tail; in version 5 the TDC fields last.
            if rest < 5:
                raise MalformedFrame("IDENTIFY: no uart_baud and ethernet byte")
            (uart_baud,) = struct.unpack_from("<I", body, i)
            kind = body[i + 4]
            if kind not in (0, 1):
                raise MalformedFrame(f"IDENTIFY: ethernet {kind}")
            tdc_size = _TDC_TAIL.size if version >= 5 else 0
            ethernet_size = 5 + kind * _ETHERNET_TAIL.size
            if rest != ethernet_size + tdc_size:
                raise MalformedFrame("IDENTIFY: trailing bytes" if rest > ethernet_size + tdc_size
                                     else "IDENTIFY: truncated tail")
            if tdc_size:
                tdc = _TDC_TAIL.unpack_from(body, i + ethernet_size)
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
        ident = cls(*fixed, firmware, gateware, channels, uart_baud, ethernet, *tdc)
        problem = ident._tdc_problem()
        if problem:
            raise MalformedFrame(problem)
        return ident

    def _tdc_problem(self) -> str:
        """Why the TDC fields cannot be (the record's fraction holds 8 bits a TDC input, 64 at most,
        and a TDC rig samples once a tick), or ""."""
        if not 0 <= self.tdc_inputs <= min(self.n_inputs, MAX_TDC_INPUTS):
            return (f"IDENTIFY: {self.tdc_inputs} TDC inputs of {self.n_inputs} inputs (at most "
                    f"{MAX_TDC_INPUTS}: 8 bits each in a 64-bit fraction)")
        if self.tdc_inputs and self.samples_per_tick != 1:
            return f"IDENTIFY: TDC inputs with {self.samples_per_tick} samples a tick (a TDC rig samples once)"
        if self.tdc_inputs and not self.tdc_taps:
            return f"IDENTIFY: {self.tdc_inputs} TDC inputs of 0 taps"
        return ""

    @property
    def fraction_bits(self) -> int:
        """Bits of each input's fine position in a record's fraction: 8 (its TDC code) for an input
        with a TDC, else log2(samples_per_tick) (its sub-tick sample, docs/subtick.md)."""
        return TDC_CODE_BITS if self.tdc_inputs else self.samples_per_tick.bit_length() - 1

    @property
    def fraction_width(self) -> int:
        """Bits of a record's fraction: the TDC inputs' codes, or every input's sub-tick sample."""
        return TDC_CODE_BITS * self.tdc_inputs if self.tdc_inputs else self.n_inputs * self.fraction_bits

    @property
    def fraction_bytes(self) -> int:
        return (self.fraction_width + 7) // 8

    @property
    def n_channels(self) -> int:
        return self.n_stimulus + self.n_inputs


@dataclass(slots=True)
class Overflow(FixedMessage):
    TYPE: ClassVar[int] = MSG_OVERFLOW
    NAME: ClassVar[str] = "OVERFLOW"
    _S: ClassVar[struct.Struct] = struct.Struct("<QH")
    timestamp: int
    channels: int


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
class Time(FixedMessage):
    TYPE: ClassVar[int] = MSG_TIME
    NAME: ClassVar[str] = "TIME"
    _S: ClassVar[struct.Struct] = struct.Struct("<HQ")
    command_seq: int
    now: int
