"""The Ethernet link's messages (docs/ethernet.md): STREAM_CONFIG, STREAM_STATUS_REQ and
NET_CONFIG (host -> rig), STREAM_STATUS (rig -> host), IDENTIFY's Ethernet tail (``EthernetInfo``),
and the numeric IPv4 and MAC addresses the commands carry, read and written as text."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from hilat.link.protocol.frame import EmptyMessage, FixedMessage, MalformedFrame, Message

MSG_STREAM_CONFIG = 0x8B
MSG_STREAM_STATUS_REQ = 0x8C
MSG_NET_CONFIG = 0x8D
MSG_STREAM_STATUS = 0x0A

# The Ethernet link (docs/ethernet.md). STREAM_CONFIG: dst_ip / dst_port 0 mean the source of the
# command's own datagram; defaults of the contract.
STREAM_FLUSH_US_DEFAULT = 100
STREAM_HEARTBEAT_MS_DEFAULT = 100
STREAM_LINK_UP = 1 << 0  # STREAM_STATUS link: Ethernet frames received since reset


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
class StreamConfig(FixedMessage):
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


@dataclass(slots=True)
class StreamStatusReq(EmptyMessage):
    TYPE: ClassVar[int] = MSG_STREAM_STATUS_REQ
    NAME: ClassVar[str] = "STREAM_STATUS_REQ"


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


@dataclass(slots=True)
class StreamStatus(FixedMessage):
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
