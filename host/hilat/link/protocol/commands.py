"""The session's commands, host -> rig (docs/protocol.md, "Host -> rig"): HELLO, STIM_CONFIG,
CAPTURE_CONFIG, START, STOP, STATUS_REQ and TIME_REQ, each with its type and its fields' constants
beside its encoder and decoder. The engine's and the Ethernet link's commands are in
``engine_messages`` and ``ethernet``."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar

from hilat.link.protocol.frame import (
    MAX_CHANNELS,
    PROTOCOL_VERSION,
    EmptyMessage,
    FixedMessage,
    MalformedFrame,
    Message,
    OutOfRange,
)
from hilat.values import STIMULUS_MODES

MSG_HELLO = 0x81
MSG_STIM_CONFIG = 0x82
MSG_CAPTURE_CONFIG = 0x83
MSG_START = 0x84
MSG_STOP = 0x85
MSG_STATUS_REQ = 0x86
MSG_TIME_REQ = 0x87

# STIM_CONFIG's mode: the stimulus modes' codes, listed once by name in hilat.values.
MODE_PERIODIC = STIMULUS_MODES["periodic"]
MODE_DITHER = STIMULUS_MODES["dither"]
MODE_RANDOM = STIMULUS_MODES["random"]
MODE_BURST = STIMULUS_MODES["burst"]
MODE_ONESHOT = STIMULUS_MODES["oneshot"]

# CAPTURE_CONFIG per-channel flags.
CAPTURE_ENABLE = 1 << 0
CAPTURE_RISE = 1 << 1
CAPTURE_FALL = 1 << 2


@dataclass(slots=True)
class Hello(FixedMessage):
    TYPE: ClassVar[int] = MSG_HELLO
    NAME: ClassVar[str] = "HELLO"
    _S: ClassVar[struct.Struct] = struct.Struct("<B")
    version: int = PROTOCOL_VERSION


@dataclass(slots=True)
class StimConfig(FixedMessage):
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
class Start(FixedMessage):
    TYPE: ClassVar[int] = MSG_START
    NAME: ClassVar[str] = "START"
    _S: ClassVar[struct.Struct] = struct.Struct("<BBQ")
    channels: int
    at_time: int = 0
    start: int = 0


@dataclass(slots=True)
class Stop(FixedMessage):
    TYPE: ClassVar[int] = MSG_STOP
    NAME: ClassVar[str] = "STOP"
    _S: ClassVar[struct.Struct] = struct.Struct("<B")
    channels: int


@dataclass(slots=True)
class StatusReq(EmptyMessage):
    TYPE: ClassVar[int] = MSG_STATUS_REQ
    NAME: ClassVar[str] = "STATUS_REQ"


@dataclass(slots=True)
class TimeReq(EmptyMessage):
    TYPE: ClassVar[int] = MSG_TIME_REQ
    NAME: ClassVar[str] = "TIME_REQ"
