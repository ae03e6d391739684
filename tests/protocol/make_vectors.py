"""Generate tests/vectors/*.json with the Python encoder (run once; the files are checked in).

    .venv/bin/python tests/protocol/make_vectors.py

The tests then hold both codecs (Python and firmware/protocol.c) to these bytes; a few vectors
are also derived by hand in test_protocol.py so that the files are not only Python agreeing with
itself.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from pathlib import Path

from hilat.link import protocol as p

OUT = Path(__file__).resolve().parent.parent / "vectors"
U64 = (1 << 64) - 1
U32 = (1 << 32) - 1


def fields_of(msg: p.Message) -> dict:
    def conv(v):
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        return v

    return {f.name: conv(getattr(msg, f.name)) for f in dataclasses.fields(msg)}


def vec(name: str, seq: int, msg: p.Message, note: str = "", version: int | None = None) -> dict:
    """``version``: of the frame's header, when not ours (a rig's frame from before)."""
    wire = msg.encode(seq) if version is None else msg.encode(seq, version)
    d = {"name": name, "seq": seq, "fields": fields_of(msg), "wire": wire.hex()}
    if version is not None:
        d["version"] = version
    if note:
        d["note"] = note
    return d


def vec3(name: str, seq: int, msg: p.Message, note: str = "") -> dict:
    """A version-3 frame (a rig's from before version 4)."""
    return vec(f"version 3: {name}", seq, msg, note, version=3)


def crc_ok_seq(build, start: int = 0x0101, version: int = p.PROTOCOL_VERSION) -> int:
    """First seq from start whose frame, CRC included, has no 0x00 (a single COBS block)."""
    seq = start
    while True:
        payload = p.cobs_decode(build().encode(seq, version)[:-1])
        if 0 not in payload:
            return seq
        seq += 1


CHANNELS6 = [("stim0", "stimulus"), ("stim1", "stimulus"), ("in0", "isr"), ("in1", "task"), ("in2", "spare"),
             ("in3", "tag")]


ETHERNET_I9 = p.EthernetInfo(ip=0xC0A80132, mac=0x10E2D5000050, command_port=5800, stream_port=5801,
                             record_words=2, max_records=179)


TEN_CHANNELS = CHANNELS6 + [(f"in{k}", "") for k in range(4, 8)]


def typical_fixed(version: int) -> dict:
    """IDENTIFY's fixed fields of the vectors' typical rig, in a frame of ``version``."""
    return dict(version=version, ts_hz=100_000_000, sys_hz=50_000_000, n_stimulus=2, n_inputs=4, fifo_depth=512,
                pin_to_stamp_delay=17, capabilities=0x3F, min_interval=4, glitch_max=15, start_margin=1000)


def identify() -> list[dict]:
    """Version-5 frames, then the version-4 and version-3 ones of rigs from before (their bytes as they
    were)."""
    v5 = typical_fixed(5)
    ten = TEN_CHANNELS
    out = [
        vec("typical, no Ethernet, no TDC", 0, p.Identify(**v5, firmware="hilat-fw 4", gateware="sim 0123456789",
                                                          channels=CHANNELS6, uart_baud=0),
            note="ethernet 0: a single byte after uart_baud, then tdc_inputs 0, tdc_taps 0"),
        vec("the simulator with its TDC (hilat sim --tdc)", 2,
            p.Identify(**v5, firmware="hilat-fw 4", gateware="sim 0123456789", channels=CHANNELS6, uart_baud=0,
                       tdc_inputs=4, tdc_taps=256),
            note="4 TDC inputs of 256 taps: 32 fraction bits, 4 bytes an EVENTS record"),
        vec("Ethernet and a TDC on 8 inputs (a Colorlight i9)", 1,
            p.Identify(**{**v5, "n_inputs": 8, "capabilities": 0x1BF}, firmware="hilat-fw 4",
                       gateware="colorlight_i9 0123456789", channels=ten, uart_baud=2_000_000,
                       ethernet=p.EthernetInfo(0xC0A80132, 0x10E2D5000050, 5800, 5801, 4, 89),
                       tdc_inputs=8, tdc_taps=256),
            note="capability bit 8; ip 192.168.1.50, mac 10:e2:d5:00:00:50 (wire order), ports 5800/5801, "
                 "4 words a record (10 channels, a 64-bit fraction), 89 records a datagram; tdc_taps 256 = 00 01"),
        vec("Ethernet, no TDC", 3,
            p.Identify(**{**v5, "n_inputs": 8, "capabilities": 0x1BF}, firmware="hilat-fw 4",
                       gateware="colorlight_i9 0123456789", channels=ten, uart_baud=2_000_000,
                       ethernet=ETHERNET_I9)),
        vec("all ones", 0xFFFF,
            p.Identify(255, U32, U32, 1, 1, 0xFFFF, 255, U32, 0xFFFF, 255, U32, 1, "\x7f", "\x7f",
                       [("\x7f", "\x7f")] * 2, U32, p.EthernetInfo(U32, (1 << 48) - 1, 0xFFFF, 0xFFFF, 255, 0xFFFF),
                       1, 0xFFFF),
            note="one input with a TDC (it samples once a tick: samples_per_tick 1)"),
        vec("Ethernet, zeros", 0, p.Identify(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, "", "", [], 0,
                                             p.EthernetInfo(0, 0, 0, 0, 0, 0)),
            note="mostly 0x00: every COBS block is short"),
    ]

    # Max payload (250 bytes) with the Ethernet tail and the TDC fields; every byte non-zero so the
    # frame is one 254-byte COBS run.
    def full5():
        fixed = dict(v5, ts_hz=0x05F5E101, sys_hz=0x02FAF081, fifo_depth=0x0201, pin_to_stamp_delay=19,
                     capabilities=0x0101017F, min_interval=0x0104, start_margin=0x010103E8)
        table = sum(2 + len(n) + len(r) for n, r in CHANNELS6)
        return p.Identify(**fixed, firmware="f" * (250 - 4 - 26 - 2 - 25 - table - 4 - 18 - 3), gateware="g" * 25,
                          channels=CHANNELS6, uart_baud=0x01E84801,
                          ethernet=p.EthernetInfo(0xC0A80132, 0x12E2D5010150, 5800, 5801, 4, 0x0159),
                          tdc_inputs=4, tdc_taps=0x0101)

    assert len(full5().body()) + 4 == 250
    out.append(vec("Ethernet and TDC, max size, one 254-byte COBS run", crc_ok_seq(full5), full5()))
    return out + identify_v4() + identify_v3()


def vec4(name: str, seq: int, msg: p.Message, note: str = "") -> dict:
    """A version-4 frame (a rig's from before version 5: no TDC fields)."""
    return vec(f"version 4: {name}", seq, msg, note, version=4)


def identify_v4() -> list[dict]:
    """IDENTIFY of version-4 rigs (a run's raw.bin from before): still decoded, with no TDC."""
    v4 = typical_fixed(4)
    ten = TEN_CHANNELS
    out = [
        vec4("typical, no Ethernet", 0, p.Identify(**v4, firmware="hilat-fw 3", gateware="sim 0123456789",
                                                   channels=CHANNELS6, uart_baud=0),
             note="ethernet 0: a single byte after uart_baud"),
        vec4("Ethernet (a Colorlight i9: engine, 8 inputs, 2 Mbaud)", 1,
             p.Identify(**{**v4, "n_inputs": 8, "capabilities": 0x1BF}, firmware="hilat-fw 3",
                        gateware="colorlight_i9 0123456789", channels=ten, uart_baud=2_000_000,
                        ethernet=ETHERNET_I9),
             note="capability bit 8; ip 192.168.1.50, mac 10:e2:d5:00:00:50 (wire order), ports 5800/5801, "
                  "2 words a record, 179 records a datagram"),
        vec4("Ethernet, all ones", 0xFFFF,
             p.Identify(255, U32, U32, 1, 1, 0xFFFF, 255, U32, 0xFFFF, 255, U32, 8, "\x7f", "\x7f",
                        [("\x7f", "\x7f")] * 2, U32, p.EthernetInfo(U32, (1 << 48) - 1, 0xFFFF, 0xFFFF, 255, 0xFFFF))),
        vec4("Ethernet, zeros", 0, p.Identify(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, "", "", [], 0,
                                              p.EthernetInfo(0, 0, 0, 0, 0, 0)),
             note="mostly 0x00: every COBS block is short"),
    ]

    # Max payload (250 bytes) with the Ethernet tail; every byte non-zero so the frame is one
    # 254-byte COBS run.
    def full4():
        fixed = dict(v4, ts_hz=0x05F5E101, sys_hz=0x02FAF081, fifo_depth=0x0201, pin_to_stamp_delay=19,
                     capabilities=0x0101017F, min_interval=0x0104, start_margin=0x010103E8)
        table = sum(2 + len(n) + len(r) for n, r in CHANNELS6)
        return p.Identify(**fixed, firmware="f" * (250 - 4 - 26 - 2 - 25 - table - 4 - 18), gateware="g" * 25,
                          channels=CHANNELS6, uart_baud=0x01E84801,
                          ethernet=p.EthernetInfo(0xC0A80132, 0x12E2D5010150, 5800, 5801, 2, 0x01B3))

    assert len(full4().body(4)) + 4 == 250
    out.append(vec4("Ethernet, max size, one 254-byte COBS run", crc_ok_seq(full4, version=4), full4()))
    return out


def identify_v3() -> list[dict]:
    """IDENTIFY of version-3 rigs (a run's raw.bin from before): still decoded."""
    base = typical_fixed(3)
    ten = TEN_CHANNELS

    out = [
        vec3("typical", 0, p.Identify(**base, firmware="hilat-fw 2", gateware="sim 0123456789", channels=CHANNELS6,
                                     uart_baud=0), note="uart_baud 0: the simulator, no serial line"),
        vec3("empty strings", 0, p.Identify(**base, channels=[("", "")] * 6, uart_baud=3_000_000)),
        vec3("utf8 strings", 3, p.Identify(**base, firmware="µ-fw ✓", gateware="ΔT", channels=CHANNELS6,
                                          uart_baud=115_200)),
        vec3("10 channels, 4 without a role", 4, p.Identify(**{**base, "n_inputs": 8}, firmware="hilat-fw 2",
                                                           gateware="colorlight_i5 0123456789", channels=ten,
                                                           uart_baud=2_000_000)),
        vec3("four samples a tick (sub-tick capability)", 5,
            p.Identify(**{**base, "capabilities": 0x7F}, samples_per_tick=4, firmware="hilat-fw 3",
                       gateware="ulx3s 0123456789", channels=CHANNELS6, uart_baud=3_000_000)),
        vec3(
            "all ones",
            0xFFFF,
            p.Identify(255, U32, U32, 1, 1, 0xFFFF, 255, U32, 0xFFFF, 255, U32, 8, "\x7f", "\x7f",
                       [("\x7f", "\x7f")] * 2, U32),
        ),
        vec3(
            "zeros",
            0,
            p.Identify(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, "", "", [], 0),
            note="mostly 0x00: every COBS block is short",
        ),
        vec3("a rig built before uart_baud: the body ends with the table", 0,
            p.Identify(**base, firmware="hilat-fw 2", gateware="sim 0123456789", channels=CHANNELS6),
            note="uart_baud null: decoded as not reported; the firmware always sends it now. The bytes of "
                 "\"typical\" before uart_baud"),
    ]

    # Max payload (250 bytes): 4 + 26 fixed + strings, the channel table and uart_baud; every byte
    # non-zero so the frame is one 254-byte COBS run: code 0xFF and no trailing block (256 bytes on
    # the wire).
    def full():
        fixed = dict(version=3, ts_hz=0x05F5E101, sys_hz=0x02FAF081, n_stimulus=2, n_inputs=4, fifo_depth=0x0201,
                     pin_to_stamp_delay=19, capabilities=0x0101017F, min_interval=0x0104, glitch_max=15,
                     start_margin=0x010103E8)
        table = sum(2 + len(n) + len(r) for n, r in CHANNELS6)
        return p.Identify(**fixed, firmware="f" * (250 - 4 - 26 - 2 - 25 - table - 4), gateware="g" * 25,
                          channels=CHANNELS6, uart_baud=0x01E84801)

    assert len(full().body(3)) + 4 == 250
    seq = crc_ok_seq(full, version=3)
    out.append(vec3("max size, one 254-byte COBS run", seq, full()))
    return out


def events() -> list[dict]:
    out = [
        vec("no records", 0, p.Events(1000, [])),
        vec("one record, delta 0", 1, p.Events(1000, [(1000, 0b000100, 0b000100)])),
        vec("typical", 2, p.Events(5_000_000, [(5_000_000 + 2000 * k, 1 << (k % 6), k & 0x3F)
                                               for k in range(8)])),
    ]
    # Deltas needing 1..10 uleb128 bytes (boundaries on both sides).
    ts, recs = 0, []
    for nbytes in range(1, 11):
        for d in ((1 << (7 * nbytes)) - 1, 1 << (7 * (nbytes - 1))):
            if d > U64:
                d = U64
            ts = (ts + d) & U64
            recs.append((ts, 0x21, 0x01))
    out.append(vec("deltas of 1..5 uleb128 bytes", 7, p.Events(0, recs[:10])))
    out.append(vec("deltas of 6..10 uleb128 bytes", 8, p.Events(recs[9][0], recs[10:])))
    out.append(
        vec(
            "delta 2**64-1 (10 bytes), base 1: wraps to 0",
            9,
            p.Events(1, [(0, 1, 0)]),
        )
    )
    out.append(
        vec(
            "timestamps near 2**64, wrapping",
            10,
            p.Events(U64 - 3000, [(U64 - 2000, 1, 1), (U64, 2, 3), (1999, 1, 2), (3999, 2, 0)]),
            note="deltas are (timestamp - previous) mod 2**64",
        )
    )
    # 1-byte deltas across the wrap (the decoder's short path must wrap too), then 2-byte ones.
    out.append(vec("1-byte delta across 2**64", 13, p.Events(U64 - 1, [(3, 1, 1)]),
                   note="delta 5: the timestamp is 3, not 2**64 + 3"))
    out.append(vec("1-byte deltas stepping over 2**64", 14,
                   p.Events(U64 - 2, [(U64 - 2, 1, 1), (U64 - 1, 2, 3), (U64, 1, 2), (0, 2, 0), (1, 4, 4),
                                      (127, 4, 0)])))
    out.append(vec("2-byte deltas stepping over 2**64", 15,
                   p.Events(U64 - 200, [(U64 - 72, 1, 1), (55, 1, 0), (16438, 2, 2)])))
    # Max-size frames: payload exactly 250 bytes.
    recs = [(10_000 + 2000 * (k + 1), 1 << (k & 1), (k & 1) + 1) for k in range(57)]
    recs += [(recs[-1][0] + 5, 4, 4), (recs[-1][0] + 9, 8, 12), (recs[-1][0] + 10, 8, 0)]
    out.append(vec("max size: 57 records of 4 bytes + 3 of 3 (60 records)", 11, p.Events(10_000, recs)))
    recs = [(k * 100, 1, k & 1) for k in range(1, 80)]
    out.append(vec("max size: 79 records of 3 bytes", 12, p.Events(0, recs)))

    def full():
        # 13 + 3 * 3 + 57 * 4 = 250 bytes; deltas 127 and 2000.., every byte non-zero.
        t, r = 0x0101010101010101, []
        for k in range(60):
            t += 0x7F if k < 3 else 2000 + k
            r.append((t, 0x11 + k, 0x22))
        return p.Events(0x0101010101010101, r)

    seq = crc_ok_seq(full)
    out.append(vec("no zero byte in payload and CRC: 254-byte COBS run", seq, full()))
    # Zeros everywhere: channels/levels 0, deltas 0, seq 0.
    out.append(vec("zeros", 0, p.Events(0, [(0, 0, 0)] * 10)))
    rng = random.Random(1)
    t, recs = 1 << 40, []
    for _ in range(40):
        t += rng.choice([0, 1, 17, 127, 128, 1999, 2000, 2001, 16383, 16384, 1 << 21, 1 << 30])
        recs.append((t, rng.randrange(256), rng.randrange(256)))
    out.append(vec("random mix", 0x1234, p.Events(1 << 40, recs)))
    # Two-byte masks (more than 8 channels): little-endian, channel 8 up in the second byte.
    out.append(vec("2-byte masks, 10 channels", 16,
                   p.Events(7_000_000, [(7_000_000, 0x0001, 0x0001), (7_000_010, 0x0200, 0x0201),
                                        (7_002_000, 0x0300, 0x0001), (7_002_001, 0x0101, 0x0100)], 2)))
    rng = random.Random(2)
    t, recs = 5, []
    for _ in range(30):
        t += rng.choice([0, 1, 127, 128, 16384, 1 << 35])
        recs.append((t, rng.randrange(1 << 16), rng.randrange(1 << 16)))
    out.append(vec("2-byte masks, random mix", 17, p.Events(5, recs, 2)))
    recs = [(k * 100, 1 << (k % 16), k & 0xFFFF) for k in range(1, 46)]
    recs += [(4500 + 300, 0x8000, 0x8000), (4500 + 600, 0x4000, 0x0000)]
    out.append(vec("2-byte masks, max size: 45 records of 5 bytes + 2 of 6", 18, p.Events(0, recs, 2)))
    # Fractions (sub-tick positions, docs/subtick.md): 1 byte (four inputs of 2 bits), 2 bytes.
    out.append(vec("1-byte fractions", 19,
                   p.Events(9_000, [(9_000, 0b000100, 0b000100, 0b11), (9_001, 0b111100, 0b001100, 0b10_01_00_11),
                                    (9_200, 0b000001, 0b001101, 0), (9_201, 0b100000, 0b101101, 0xC0)], 1, 1),
                   note="format byte 0x11: masks of 1 byte, fractions of 1"))
    rng = random.Random(3)
    t, recs = U64 - 500, []
    for _ in range(25):
        t = (t + rng.choice([0, 1, 127, 128, 16384])) & U64
        recs.append((t, rng.randrange(1 << 16), rng.randrange(1 << 16), rng.randrange(1 << 16)))
    out.append(vec("2-byte masks and 2-byte fractions, across 2**64", 20, p.Events(U64 - 500, recs, 2, 2)))
    recs = [(k * 100, 1 << (k % 8), k & 0xFF, k & 0xFF) for k in range(1, 59)]
    recs.append((recs[-1][0] + 200, 1, 1, 1))
    full_fractions = p.Events(0, recs, 1, 1)
    assert len(full_fractions.body()) + 4 == 250
    out.append(vec("1-byte fractions, max size: 58 records of 4 bytes + 1 of 5", 21, full_fractions))
    # TDC codes (protocol 5, docs/tdc.md): 8 bits an input, input i at bits 8i..8i+7, 0 = no edge.
    out.append(vec("4-byte fractions: the simulator's 4 TDC inputs", 22,
                   p.Events(20_000, [(20_000, 0b000100, 0b000100, 0x0000_0001),
                                     (20_003, 0b111100, 0b001100, 0xFF_80_7F_D9),
                                     (20_130, 0b100000, 0b101100, 0x21_00_00_00),
                                     (36_000, 0b000100, 0b101000, 0x00_00_00_FF)], 1, 4),
                   note="format byte 0x41: masks of 1 byte, fractions of 4; in0 code 1 (the latest edge), codes 255 "
                        "(saturated), 0x80, 0x7f, 0xd9 in one record"))
    rng = random.Random(4)
    t, recs = U64 - 300, []
    for _ in range(12):
        t = (t + rng.choice([0, 1, 127, 128, 16384, 1 << 40])) & U64
        recs.append((t, rng.randrange(1 << 10), rng.randrange(1 << 10), rng.getrandbits(64)))
    recs.append((recs[-1][0] + 1, 0x3FF, 0x3FF, U64))
    out.append(vec("2-byte masks and 8-byte fractions (8 TDC inputs), across 2**64", 23,
                   p.Events(U64 - 300, recs, 2, 8), note="format byte 0x82"))
    recs = [(k * 100, 1 << (k % 8), k & 0xFF, 0x0101010101010101 * (k & 0x7F or 1)) for k in range(1, 20)]
    recs += [(recs[-1][0] + (1 << 21), 1, 1, 0x0807060504030201), (recs[-1][0] + (2 << 21), 2, 0, 1 << 63)]
    full_tdc = p.Events(0, recs, 1, 8)
    assert len(full_tdc.body()) + 4 == 250
    out.append(vec("8-byte fractions, max size: 19 records of 11 bytes + 2 of 14", 24, full_tdc))
    return out


def overflow() -> list[dict]:
    return [
        vec("typical", 5, p.Overflow(123_456_789, 0b001100)),
        vec("zero", 0, p.Overflow(0, 0)),
        vec("timestamp 2**64-1", 0xFFFF, p.Overflow(U64, 0xFF)),
        vec("channels 8 and up", 6, p.Overflow(1 << 33, 0x0300)),
        vec("every channel of 16", 7, p.Overflow(1, 0xFFFF)),
    ]


def status() -> list[dict]:
    return [
        vec("empty lists", 0, p.Status(0, 0, 0, 0, [], [])),
        vec(
            "typical",
            42,
            p.Status(123_456, 130_000, 2100, 0, [0, 0, 0, 0, 0, 0], [p.STIM_RUNNING, p.STIM_DONE]),
        ),
        vec(
            "overflow, late, max values, 8 + 8 channels",
            0xFFFF,
            p.Status(U32, U32, U32, 1, [U32, 1, 2, 3, 0, 1 << 24, 255, 256],
                     [p.STIM_RUNNING | p.STIM_LATE, 7, 0, 1, 2, 3, 4, 5]),
        ),
        # The fired counts after the status bytes (the vectors above are the older body, without).
        vec(
            "fired counts",
            43,
            p.Status(123_456, 130_000, 2101, 0, [0, 0, 0, 0, 0, 0], [p.STIM_DONE, p.STIM_RUNNING], [300, 0]),
        ),
        vec(
            "fired max values, 8 + 8 channels",
            0xFFFE,
            p.Status(U32, U32, U32, 1, [U32, 1, 2, 3, 0, 1 << 24, 255, 256],
                     [p.STIM_DONE, 7, 0, 1, 2, 3, 4, 5], [U32, 0, 1, 255, 256, 1 << 24, U32 - 1, 0x01000001]),
        ),
    ]


def ack() -> list[dict]:
    out = [
        vec("done", 1, p.Ack(0, 0, "")),
        vec("error with message", 3, p.Ack(2, 1, "period < MIN_INTERVAL")),
        vec("utf8 message", 4, p.Ack(0x0100, 7, "ΔT ≥ 4 ticks")),
        vec("command_seq 0xffff", 0x0100, p.Ack(0xFFFF, 255, "x")),
    ]

    def full():
        return p.Ack(0x0203, 1, "m" * 242)  # 4 + 3 + 1 + 242 = 250

    out.append(vec("max size message (242 bytes), one 254-byte COBS run", crc_ok_seq(full), full()))
    return out


def time_() -> list[dict]:
    return [
        vec("typical", 9, p.Time(8, 1_234_567_890_123)),
        vec("zeros", 0, p.Time(0, 0)),
        vec("max", 0xFFFF, p.Time(0xFFFF, U64)),
    ]


def hello() -> list[dict]:
    return [
        vec("version 5, seq 0", 0, p.Hello(5)),
        vec("version 6 in the body (header stays 5)", 0, p.Hello(6)),
        vec("seq 0xffff", 0xFFFF, p.Hello(5)),
    ]


def stim_config() -> list[dict]:
    return [
        vec("periodic", 1, p.StimConfig(0, p.MODE_PERIODIC, 0, 10, 1000)),
        vec("dither", 2, p.StimConfig(1, p.MODE_DITHER, 1, 5, 2000, 500, 0, 0, 0, 0, 0xDEADBEEF)),
        vec("random", 3, p.StimConfig(0, p.MODE_RANDOM, 0, 4, 100, 0, 1 << 24, 0, 0, 1000, 1)),
        vec("burst", 4, p.StimConfig(1, p.MODE_BURST, 0, 2, 100_000, 0, 0, 5, 50, 0, 0)),
        vec("oneshot", 5, p.StimConfig(0, p.MODE_ONESHOT, 1, 100, 0, 0, 0, 0, 0, 1, 0)),
        vec("all ones", 0xFFFF, p.StimConfig(255, 255, 255, U32, U32, U32, U32, 0xFFFF, U32, U32, U32)),
        vec("all zeros", 0, p.StimConfig(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
    ]


def capture_config() -> list[dict]:
    e, r, f = p.CAPTURE_ENABLE, p.CAPTURE_RISE, p.CAPTURE_FALL
    return [
        vec("no channels", 0, p.CaptureConfig([])),
        vec("six channels", 6, p.CaptureConfig([(e | r | f, 0), (e | r | f, 0), (e | r, 3), (e | f, 15),
                                                (0, 0), (e | r | f, 0)])),
        vec("eight channels, max glitch", 0x0101, p.CaptureConfig([(7, 255)] * 8)),
        vec("ten channels (a board with 8 inputs)", 10, p.CaptureConfig([(e | r | f, 0)] * 2 + [(e | r | f, 2)] * 8)),
        vec("sixteen channels", 16, p.CaptureConfig([(e | r | f, k) for k in range(16)])),
    ]


def start() -> list[dict]:
    return [
        vec("now", 10, p.Start(0b11, 0, 0)),
        vec("at time", 11, p.Start(0b01, 1, 123_456_789_012)),
        vec("at time near 2**64", 12, p.Start(0xFF, 1, U64 - 1)),
    ]


def stop() -> list[dict]:
    return [vec("both", 13, p.Stop(0b11)), vec("none", 0, p.Stop(0))]


def status_req() -> list[dict]:
    return [vec("seq 0", 0, p.StatusReq()), vec("seq 0x1234", 0x1234, p.StatusReq())]


def time_req() -> list[dict]:
    return [vec("seq 0", 0, p.TimeReq()), vec("seq 0xffff", 0xFFFF, p.TimeReq())]


def engine_config() -> list[dict]:
    never = [p.ENGINE_NEVER] * 3
    return [
        # The simulated rig's roles: stim0 rising, isr (channel 2) and task (3) rising, tag (5) high.
        vec("typical: tag, deadline, offset, thresholds", 1,
            p.EngineConfig(p.ENGINE_ENABLE, 0, 1, 2, 1, 3, 1, 5, 1, deadline=50_000, offset=21, interval_shift=24,
                           thresholds=[10_000, 20_000, p.ENGINE_NEVER])),
        vec("raw edges too, no tag, no deadline", 2,
            p.EngineConfig(p.ENGINE_ENABLE | p.ENGINE_RAW, 0, 1, 2, 1, 3, 1, p.ENGINE_NO_TAG, 0, 0, 0, 16, never)),
        vec("falling edges, trigger on a late task", 3,
            p.EngineConfig(p.ENGINE_ENABLE | p.ENGINE_TRIGGER_ON_LATE, 1, 0, 7, 0, 9, 0, 11, 0, 8, 0x0101, 31,
                           never, p.ENGINE_TRIGGER_TASK, 4000, 100)),
        vec("disabled, all zeros", 0, p.EngineConfig(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, [0, 0, 0], 0, 0, 0)),
        vec("all ones", 0xFFFF, p.EngineConfig(255, 255, 255, 255, 255, 255, 255, 255, 255, U32, 0xFFFF, 255,
                                               [U32] * 3, 255, U32, 0xFFFF)),
    ]


def engine_stats_req() -> list[dict]:
    return [vec("seq 0", 0, p.EngineStatsReq()), vec("seq 0xffff", 0xFFFF, p.EngineStatsReq())]


def engine_flush() -> list[dict]:
    return [vec("seq 0", 0, p.EngineFlush()), vec("seq 0x1234", 0x1234, p.EngineFlush())]


def engine_bins() -> list[dict]:
    BIN, CLOSE = p.ENGINE_ENTRY_BIN, p.ENGINE_ENTRY_CLOSE
    out = [
        vec("no entries", 0, p.EngineBins([])),
        vec("one bin", 1, p.EngineBins([(BIN, 0, 0, 7, 300, 2)])),
        vec("one close", 2, p.EngineBins([(CLOSE, 2, 0, 7, 0, 0)])),
        vec("typical: every kind, tagged and untagged, then the closes", 3, p.EngineBins(
            [(BIN, k, t, 1000, 128 * k + 21 + t, 5 + t) for k in range(3) for t in (0, 1)]
            + [(CLOSE, k, 0, 1000, 0, 0) for k in range(3)])),
        vec("overflow bin, bin 0, the largest 35-bit count", 4, p.EngineBins(
            [(BIN, 1, 1, 0, p.ENGINE_OVERFLOW_BIN, 1), (BIN, 1, 0, 0, 0, (1 << 35) - 1),
             (BIN, 2, 1, 0, 2303, 1)])),
    ]
    # uleb128 of 1..5 bytes for the interval, 1..2 for the bin, 1..10 for the count (boundaries).
    entries = []
    for nbytes in range(1, 6):
        for iv in ((1 << (7 * nbytes)) - 1, 1 << (7 * (nbytes - 1))):
            entries.append((BIN, nbytes % 3, nbytes & 1, min(iv, U32), 127, 1))
    entries.append((CLOSE, 0, 0, U32, 0, 0))
    out.append(vec("intervals of 1..5 uleb128 bytes, up to 2**32-1", 5, p.EngineBins(entries)))
    counts = [min((1 << (7 * n)) - 1, U64) for n in range(1, 11)] + [1 << (7 * n) for n in range(1, 10)]
    out.append(vec("counts of 1..10 uleb128 bytes, bins 127/128", 6,
                   p.EngineBins([(BIN, 0, c & 1, 9, 127 + (c & 1), c) for c in counts])))
    # Max size: 246 body bytes = 61 entries of 4 bytes + one close of 2.
    full = [(BIN, k % 3, k & 1, 5, 10 + k, 3) for k in range(61)] + [(CLOSE, 1, 0, 5, 0, 0)]
    assert len(p.EngineBins(full).body()) == 246
    out.append(vec("max size: 61 bins of 4 bytes and a close", 7, p.EngineBins(full)))
    return out


def engine_outliers() -> list[dict]:
    miss, below = p.OUTLIER_MISS, p.OUTLIER_BELOW
    both = p.OUTLIER_TAG_AT_START | p.OUTLIER_TAG_IN_WINDOW
    out = [
        vec("no records", 0, p.EngineOutliers([])),
        vec("one record, late task", 1, p.EngineOutliers([(123_456_789, 0, 900, 25_000, 24_100)])),
        vec("misses, below range, tag flags", 2, p.EngineOutliers(
            [(1 << 40, p.OUTLIER_TAG_IN_WINDOW, 700, miss, miss), (U64, both, below, 5, miss),
             (0, 0, miss, miss, miss)])),
    ]
    full = [((1 << 33) + 1000 * k, k & 3, 100 + k, 200 + k, 300 + k) for k in range(11)]
    out.append(vec("max size: 11 records", 3, p.EngineOutliers(full)))
    return out


def engine_stats() -> list[dict]:
    none = p.ENGINE_MIN_NONE

    def limits(**kw):
        return dict(dict(trigger_delay=6, min_spacing=8, interval_shift_min=16, bins=p.ENGINE_BINS_PER_HISTOGRAM), **kw)

    typical = [
        p.EngineKindStats(2, 1, 0, 9_000, 410, 2_900, 9_000 * 800, 990, 415, 30_000, 990 * 1_500),
        p.EngineKindStats(3, 0, 0, 8_999, 2_000, 60_000, 8_999 * 7_000, 989, 2_010, 80_000, 989 * 9_000),
        p.EngineKindStats(4, 0, 1, 8_998, 1_500, 59_000, 8_998 * 6_100, 989, 1_580, 79_000, 989 * 7_400),
    ]
    empty = [p.EngineKindStats(0, 0, 0, 0, none, 0, 0, 0, none, 0, 0)] * 3
    ones = [p.EngineKindStats(U64, U64, U64, U64, U32, U32, U64, U64, U32, U32, U64)] * 3
    return [
        vec("typical, after a flush", 5, p.EngineStats(4, p.ENGINE_STATE_ENABLED | p.ENGINE_STATE_FLUSHED, 10_001,
                                                       0, 0, 2, **limits(), kinds=typical)),
        vec("no samples yet (min 0xffffffff)", 1, p.EngineStats(0, p.ENGINE_STATE_ENABLED, 0, 0, 0, 0, **limits(),
                                                               kinds=empty)),
        vec("losses", 7, p.EngineStats(6, 1, 1 << 40, 17, 3, 1 << 31, **limits(trigger_delay=9), kinds=typical)),
        vec("all ones", 0xFFFF, p.EngineStats(0xFFFF, 255, U64, U32, U32, U32, 255, 255, 255, 0xFFFF, ones)),
    ]


def stream_config() -> list[dict]:
    return [
        vec("enable, to the command's source, defaults", 1, p.StreamConfig(1, 0x5EC0_1D01)),
        vec("explicit destination 192.168.1.100:5900, 1 ms flush, no heartbeat", 2,
            p.StreamConfig(1, 0x0000_0001, 0xC0A80164, 5900, 1000, 0)),
        vec("disable", 3, p.StreamConfig(0, 0x1234_5678, 0, 0, 100, 100)),
        vec("flush 0 (refused by the rig, not malformed)", 4, p.StreamConfig(1, 7, 0, 0, 0, 0)),
        vec("all ones", 0xFFFF, p.StreamConfig(255, U32, U32, 0xFFFF, 0xFFFF, 0xFFFF)),
        vec("all zeros", 0, p.StreamConfig(0, 0, 0, 0, 0, 0)),
    ]


def stream_status_req() -> list[dict]:
    return [vec("seq 0", 0, p.StreamStatusReq()), vec("seq 0xffff", 0xFFFF, p.StreamStatusReq())]


def net_config() -> list[dict]:
    return [
        vec("192.168.1.51, 10:e2:d5:00:00:51", 5, p.NetConfig(0xC0A80133, 0x10E2D5000051),
            note="ip little-endian like every u32 (33 01 a8 c0), mac in wire order (10 e2 d5 00 00 51)"),
        vec("zeros", 0, p.NetConfig(0, 0)),
        vec("all ones", 0xFFFF, p.NetConfig(U32, (1 << 48) - 1)),
    ]


def stream_status() -> list[dict]:
    return [
        vec("disabled, link down, nothing sent", 0, p.StreamStatus(0, 0, 0, 0, 0, 0, 100, 100, 0, 0, 0, 0)),
        vec("streaming", 12, p.StreamStatus(11, 1, p.STREAM_LINK_UP, 0x5EC0_1D01, 0xC0A80164, 40000, 100, 100,
                                            1_234_567, 200_000_000, 1_250_000, 3)),
        vec("all ones", 0xFFFF, p.StreamStatus(0xFFFF, 255, 255, U32, U32, 0xFFFF, 0xFFFF, 0xFFFF, U32, U64, U32,
                                               U32)),
    ]


def _raw(version: int, msg_type: int, seq: int, body: bytes, crc_xor: int = 0) -> str:
    payload = bytes((version, msg_type)) + seq.to_bytes(2, "little") + body
    crc = (p.crc32(payload) ^ crc_xor).to_bytes(4, "little")
    return p.cobs_encode(payload + crc).hex()


def invalid() -> list[dict]:
    """Host -> rig frames both parsers must refuse (wire without the delimiter)."""
    V = p.PROTOCOL_VERSION
    good = p.Stop(3).encode(5)[:-1]
    flipped = bytearray(good)
    flipped[-1] ^= 0x01 if flipped[-1] != 0x01 else 0x03  # a CRC byte, still non-zero
    return [
        {"name": "empty frame", "wire": "", "error": "cobs"},
        {"name": "COBS block runs past the end", "wire": "0611223344", "error": "cobs"},
        {"name": "COBS code 0xff, 3 bytes", "wire": "ff0102", "error": "cobs"},
        {"name": "too long (256 encoded bytes)", "wire": "01" * 256, "error": "too_long"},
        {"name": "7 decoded bytes", "wire": p.cobs_encode(bytes(range(1, 8))).hex(), "error": "short"},
        {"name": "header only, no CRC", "wire": p.cobs_encode(b"\x01\x86\x00\x00").hex(), "error": "short"},
        {"name": "CRC byte flipped", "wire": bytes(flipped).hex(), "error": "crc"},
        {"name": "CRC inverted", "wire": _raw(V, p.MSG_STOP, 5, b"\x03", crc_xor=U32), "error": "crc"},
        {"name": "version 1 (the previous protocol)", "wire": _raw(1, p.MSG_STOP, 5, b"\x03"), "error": "version",
         "type": p.MSG_STOP, "seq": 5},
        {"name": "HELLO of a version-1 host", "wire": _raw(1, p.MSG_HELLO, 0, b"\x01"), "error": "version",
         "type": p.MSG_HELLO, "seq": 0},
        {"name": "version 2", "wire": _raw(2, p.MSG_STOP, 5, b"\x03"), "error": "version",
         "type": p.MSG_STOP, "seq": 5},
        {"name": "version 3", "wire": _raw(3, p.MSG_STOP, 5, b"\x03"), "error": "version",
         "type": p.MSG_STOP, "seq": 5},
        {"name": "HELLO of a version-3 host", "wire": _raw(3, p.MSG_HELLO, 0, b"\x03"), "error": "version",
         "type": p.MSG_HELLO, "seq": 0},
        {"name": "version 4 (the previous protocol)", "wire": _raw(4, p.MSG_STOP, 5, b"\x03"), "error": "version",
         "type": p.MSG_STOP, "seq": 5},
        {"name": "HELLO of a version-4 host", "wire": _raw(4, p.MSG_HELLO, 0, b"\x04"), "error": "version",
         "type": p.MSG_HELLO, "seq": 0},
        {"name": "version 6", "wire": _raw(6, p.MSG_STOP, 5, b"\x03"), "error": "version",
         "type": p.MSG_STOP, "seq": 5},
        {"name": "version 0", "wire": _raw(0, p.MSG_HELLO, 0, b"\x01"), "error": "version",
         "type": p.MSG_HELLO, "seq": 0},
        {"name": "unknown type 0x8e", "wire": _raw(V, 0x8E, 7, b""), "error": "unknown_type",
         "type": 0x8E, "seq": 7},
        {"name": "STREAM_CONFIG one byte short", "wire": _raw(V, p.MSG_STREAM_CONFIG, 13, bytes(14)),
         "error": "bad_length", "type": p.MSG_STREAM_CONFIG, "seq": 13},
        {"name": "STREAM_CONFIG one byte long", "wire": _raw(V, p.MSG_STREAM_CONFIG, 13, bytes(16)),
         "error": "bad_length", "type": p.MSG_STREAM_CONFIG, "seq": 13},
        {"name": "STREAM_STATUS_REQ with a body byte", "wire": _raw(V, p.MSG_STREAM_STATUS_REQ, 14, b"\x00"),
         "error": "bad_length", "type": p.MSG_STREAM_STATUS_REQ, "seq": 14},
        {"name": "NET_CONFIG without the last MAC byte", "wire": _raw(V, p.MSG_NET_CONFIG, 15, bytes(range(1, 10))),
         "error": "bad_length", "type": p.MSG_NET_CONFIG, "seq": 15},
        {"name": "NET_CONFIG one byte long", "wire": _raw(V, p.MSG_NET_CONFIG, 15, bytes(range(1, 12))),
         "error": "bad_length", "type": p.MSG_NET_CONFIG, "seq": 15},
        {"name": "rig STREAM_STATUS sent to the rig", "wire": _raw(V, p.MSG_STREAM_STATUS, 16, bytes(38)),
         "error": "unknown_type", "type": p.MSG_STREAM_STATUS, "seq": 16},
        {"name": "rig type sent to the rig", "wire": _raw(V, p.MSG_ACK, 8, b"\x00\x00\x00\x00"),
         "error": "unknown_type", "type": p.MSG_ACK, "seq": 8},
        {"name": "HELLO with 2 body bytes", "wire": _raw(V, p.MSG_HELLO, 1, b"\x01\x00"),
         "error": "bad_length", "type": p.MSG_HELLO, "seq": 1},
        {"name": "HELLO without body", "wire": _raw(V, p.MSG_HELLO, 1, b""),
         "error": "bad_length", "type": p.MSG_HELLO, "seq": 1},
        {"name": "STIM_CONFIG one byte short", "wire": _raw(V, p.MSG_STIM_CONFIG, 2, bytes(32)),
         "error": "bad_length", "type": p.MSG_STIM_CONFIG, "seq": 2},
        {"name": "CAPTURE_CONFIG n=2 with one entry",
         "wire": _raw(V, p.MSG_CAPTURE_CONFIG, 3, b"\x02\x07\x00"),
         "error": "bad_length", "type": p.MSG_CAPTURE_CONFIG, "seq": 3},
        {"name": "CAPTURE_CONFIG without n", "wire": _raw(V, p.MSG_CAPTURE_CONFIG, 3, b""),
         "error": "bad_length", "type": p.MSG_CAPTURE_CONFIG, "seq": 3},
        {"name": "CAPTURE_CONFIG n=17 (more channels than a mask holds)",
         "wire": _raw(V, p.MSG_CAPTURE_CONFIG, 3, bytes([17]) + b"\x07\x00" * 17),
         "error": "range", "type": p.MSG_CAPTURE_CONFIG, "seq": 3},
        {"name": "START 9 bytes", "wire": _raw(V, p.MSG_START, 4, bytes(9)),
         "error": "bad_length", "type": p.MSG_START, "seq": 4},
        {"name": "STATUS_REQ with a body byte", "wire": _raw(V, p.MSG_STATUS_REQ, 6, b"\x00"),
         "error": "bad_length", "type": p.MSG_STATUS_REQ, "seq": 6},
        {"name": "ENGINE_CONFIG one byte short", "wire": _raw(V, p.MSG_ENGINE_CONFIG, 9, bytes(34)),
         "error": "bad_length", "type": p.MSG_ENGINE_CONFIG, "seq": 9},
        {"name": "ENGINE_CONFIG one byte long", "wire": _raw(V, p.MSG_ENGINE_CONFIG, 9, bytes(36)),
         "error": "bad_length", "type": p.MSG_ENGINE_CONFIG, "seq": 9},
        {"name": "ENGINE_CONFIG without body", "wire": _raw(V, p.MSG_ENGINE_CONFIG, 9, b""),
         "error": "bad_length", "type": p.MSG_ENGINE_CONFIG, "seq": 9},
        {"name": "ENGINE_STATS_REQ with a body byte", "wire": _raw(V, p.MSG_ENGINE_STATS_REQ, 10, b"\x01"),
         "error": "bad_length", "type": p.MSG_ENGINE_STATS_REQ, "seq": 10},
        {"name": "ENGINE_FLUSH with two body bytes", "wire": _raw(V, p.MSG_ENGINE_FLUSH, 11, b"\x01\x02"),
         "error": "bad_length", "type": p.MSG_ENGINE_FLUSH, "seq": 11},
        {"name": "rig ENGINE_STATS sent to the rig", "wire": _raw(V, p.MSG_ENGINE_STATS, 12, b""),
         "error": "unknown_type", "type": p.MSG_ENGINE_STATS, "seq": 12},
    ]


def primitives() -> dict:
    rng = random.Random(7)
    data = [
        b"",
        b"\x00",
        b"\x00\x00",
        bytes(range(1, 254)),  # 253 non-zero: code 0xfe
        bytes(range(1, 255)),  # 254: code 0xff, no trailing block
        bytes(range(1, 256)),  # 255: 0xff block then 0x02 block
        bytes(range(1, 255)) + b"\x00",
        b"\x00" + bytes(range(1, 255)),
        bytes([0x42]) * 508,
        bytes([0x42]) * 509,
        bytes([0x42]) * 254 + b"\x00" + bytes([0x43]) * 254,
        bytes(300),
        bytes(rng.randrange(256) for _ in range(600)),
    ]
    return {
        "description": "COBS (no delimiter) and CRC-32/ISO-HDLC of raw byte strings",
        "cobs": [{"data": d.hex(), "encoded": p.cobs_encode(d).hex()} for d in data],
        "crc32": [{"data": d.hex(), "crc32": f"{p.crc32(d):08x}"} for d in data + [b"123456789"]],
    }


MESSAGES = {
    "IDENTIFY": identify,
    "EVENTS": events,
    "OVERFLOW": overflow,
    "STATUS": status,
    "ACK": ack,
    "TIME": time_,
    "HELLO": hello,
    "STIM_CONFIG": stim_config,
    "CAPTURE_CONFIG": capture_config,
    "START": start,
    "STOP": stop,
    "STATUS_REQ": status_req,
    "TIME_REQ": time_req,
    "ENGINE_CONFIG": engine_config,
    "ENGINE_STATS_REQ": engine_stats_req,
    "ENGINE_FLUSH": engine_flush,
    "ENGINE_BINS": engine_bins,
    "ENGINE_OUTLIERS": engine_outliers,
    "ENGINE_STATS": engine_stats,
    "STREAM_CONFIG": stream_config,
    "STREAM_STATUS_REQ": stream_status_req,
    "NET_CONFIG": net_config,
    "STREAM_STATUS": stream_status,
}


FORMAT = (
    "fields: the message's fields in spec order (str as text, lists as JSON arrays; EVENTS records as "
    "[timestamp, channels, levels] with absolute timestamps, [timestamp, channels, levels, fraction] with "
    "fraction_bytes > 0 (the fraction little-endian, up to 8 bytes); "
    "IDENTIFY's ethernet as [ip, mac, command_port, stream_port, record_words, max_records] or "
    "null, ip and mac as numbers: the mac's bytes, most significant first, in wire order); wire: the whole frame "
    "in hex, 0x00 delimiter included; version, when present: the frame's protocol version, not the current one "
    "(a rig's frame from before)"
)
ENGINE_FORMAT = FORMAT + (
    "; ENGINE_BINS entries as [type, kind, tag, interval, bin, count], ENGINE_OUTLIERS records as [start, flags, "
    "value0, value1, value2], ENGINE_STATS kinds as [misses, duplicates, below, then count, min, max, sum of the "
    "untagged and of the tagged samples]"
)


def sequence() -> dict:
    """Receiver sequence rules: streams of rig->host frames with the seqs accepted and the counters."""

    def frame(seq: int, now: int) -> bytes:
        return p.Time(seq, now).encode(seq)

    def case(name: str, frames: list[tuple[int, int]], expected_seq: int | None = None, note: str = "") -> dict:
        stream = [frame(s, now) for s, now in frames]
        dec = p.FrameDecoder(expected_seq=expected_seq)
        accepted = [f.seq for f in dec.feed(b"".join(stream))]
        c = dec.counters()
        out = {"name": name, "expected_seq": expected_seq, "frames": [w.hex() for w in stream],
               "accepted_seqs": accepted, "lost": c["lost"], "duplicate": c["duplicate"]}
        if note:
            out["note"] = note
        return out

    def seqs(*values: int) -> list[tuple[int, int]]:
        return [(s, 1000 + s) for s in values]

    return {
        "description": "rig->host streams (TIME frames; now = 1000 + seq unless a case says otherwise) and "
                       "what the receiver does with their sequence numbers: the seqs it accepts, lost frames "
                       "(gaps) and duplicates (replays) dropped (docs/protocol.md, Framing)",
        "vectors": [
            case("in order", seqs(0, 1, 2, 3), expected_seq=0),
            case("gap after HELLO", seqs(3, 4), expected_seq=0),
            case("gaps", seqs(0, 1, 2, 5, 6, 10)),
            case("gap across the wrap", seqs(65534, 65535, 0, 3)),
            case("replay of the last frame", seqs(0, 1, 1, 2), expected_seq=0),
            case("replay of an older frame", seqs(0, 1, 2, 3, 1, 4), expected_seq=0),
            case("replay across the wrap", seqs(65534, 65535, 0, 65535, 1)),
            case("replay after a gap", seqs(0, 3, 3, 1, 4), expected_seq=0,
                 note="1 was lost, not seen: its late arrival is a sequence jump back, counted by the gap rule"),
            case("same seq, other bytes", [(5, 1), (6, 2), (6, 3), (7, 4)],
                 note="not a replay: the sequence jumped back 1, so 65535 frames are counted lost"),
            case("replay older than the window", seqs(*range(100), 10)),
        ],
    }


# What DAPLink (the Colorlight i5's USB-serial bridge) writes into the serial stream when its USB ring
# overflows, in place of the bytes it dropped (docs/boards.md, "Serial link").
BRIDGE_TEXT = b"<DAPLink:Overflow>"


def bridge_text() -> dict:
    """Rig->host streams with the bridge's text injected between, inside and across frames, and what
    the receiver must make of them. The expected figures come from how each stream is built (which
    frames the text damages), not from the decoder; the decoder is only asked to agree."""
    rng = random.Random(5)
    small = [p.Events(1000 * k, [(1000 * k + 7, 1 << (k % 6), k & 0x3F)]) for k in range(6)]
    small[3] = p.Time(2, 123_456)   # a frame of another type among them
    recs = [(50_000 + 40 * k, 1 << (k % 6), rng.randrange(64)) for k in range(59)]
    big = p.Events(50_000, recs)    # a full frame: with the text before it, longer than a frame can be

    def case(name, msgs, place, note=""):
        """``place(wires)`` -> (stream, indices of the frames it damages, bytes of the damaged
        stretches, delimiters included)."""
        wires = [m.encode(seq) for seq, m in enumerate(msgs)]
        stream, damaged, discarded = place(wires)
        accepted = [seq for seq in range(len(msgs)) if seq not in damaged]
        records = [list(r) for seq in accepted if isinstance(msgs[seq], p.Events) for r in msgs[seq].records]
        groups = sum(1 for k in sorted(damaged) if k - 1 not in damaged)    # adjacent damage is one frame
        counters = {"frames_ok": len(accepted), "corrupt": groups, "lost": len(damaged), "duplicate": 0,
                    "wrong_version": 0, "unknown_type": 0, "malformed": 0, "resync_bytes": discarded}
        dec = p.FrameDecoder(expected_seq=0)
        got = dec.feed(stream)
        assert [f.seq for f in got] == accepted and dec.counters() == counters, (name, dec.counters())
        out = {"name": name, "expected_seq": 0, "stream": stream.hex(), "accepted_seqs": accepted,
               "records": records, "counters": counters}
        if note:
            out["note"] = note
        return out

    T = BRIDGE_TEXT

    def between(w):     # after frame 1's delimiter: no 0x00 in the text, so it joins frame 2
        return b"".join(w[:2]) + T + b"".join(w[2:]), {2}, len(T) + len(w[2])

    def inside(w):
        mid = len(w[2]) // 2
        return b"".join(w[:2]) + w[2][:mid] + T + w[2][mid:] + b"".join(w[3:]), {2}, len(w[2]) + len(T)

    def across(w):      # bytes dropped from frame 2's tail (its delimiter too) to frame 3's head
        cut2, cut3 = len(w[2]) - 3, 4
        stretch = w[2][:cut2] + T + w[3][cut3:]
        return b"".join(w[:2]) + stretch + b"".join(w[4:]), {2, 3}, len(stretch)

    def first(w):       # the host opened the port during an overflow
        return T + b"".join(w), {0}, len(T) + len(w[0])

    def twice(w):       # two overflows: before frame 1 and inside frame 4
        mid = len(w[4]) // 3
        stream = w[0] + T + b"".join(w[1:4]) + w[4][:mid] + T + w[4][mid:] + b"".join(w[5:])
        return stream, {1, 4}, len(T) + len(w[1]) + len(w[4]) + len(T)

    def before_big(w):  # the text and a full frame: more bytes than a frame can have
        return b"".join(w[:2]) + T + b"".join(w[2:]), {2}, len(T) + len(w[2])

    return {
        "description": "rig->host streams with the text a USB-serial bridge writes into the stream on "
                       "overflow (DAPLink's, hex in `text`) between, inside and across frames: the seqs the "
                       "receiver accepts, the records of the EVENTS frames it accepts ([timestamp, channels, "
                       "levels]), and its counters (docs/protocol.md, Framing; docs/boards.md, Serial link). The "
                       "text has no 0x00: it joins the frame after it",
        "text": T.hex(),
        "vectors": [
            case("between frames", small, between),
            case("inside a frame", small, inside),
            case("across a delimiter, bytes dropped", small, across,
                 note="frames 2 and 3 merge into one corrupt frame: 1 corrupt, 2 lost"),
            case("before the first frame", small, first),
            case("twice", small, twice),
            case("before a full frame: too long", [*small[:2], big, *small[3:]], before_big,
                 note="the text and the 256-byte frame exceed 255 encoded bytes: discarded as too long"),
        ],
    }


def dump(doc) -> str:
    """Indented JSON with every list of numbers (records included) kept on one line."""
    text = json.dumps(doc, indent=1, ensure_ascii=False)
    flat = re.compile(r"\[[\s\d,]*\]")
    for _ in range(2):  # lists of numbers, then lists of those
        text = flat.sub(lambda m: re.sub(r"\s+", "", m.group(0)).replace(",", ", "), text)
        flat = re.compile(r"\[(?:\s*\[[\d, ]*\],?)*\s*\]")
    return text + "\n"


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, fn in MESSAGES.items():
        cls = p.MESSAGES_BY_NAME[name]
        doc = {
            "message": name,
            "type": cls.TYPE,
            "direction": "host->rig" if cls.TYPE >= 0x80 else "rig->host",
            "format": ENGINE_FORMAT if name.startswith("ENGINE_") else FORMAT,
            "vectors": fn(),
        }
        (OUT / f"{name.lower()}.json").write_text(dump(doc), encoding="utf-8")
    doc = {
        "description": "host->rig frames that must be refused (wire without the 0x00 delimiter)",
        "vectors": invalid(),
    }
    (OUT / "invalid_commands.json").write_text(dump(doc), encoding="utf-8")
    (OUT / "primitives.json").write_text(dump(primitives()), encoding="utf-8")
    (OUT / "sequence.json").write_text(dump(sequence()), encoding="utf-8")
    (OUT / "bridge_text.json").write_text(dump(bridge_text()), encoding="utf-8")


if __name__ == "__main__":
    main()
