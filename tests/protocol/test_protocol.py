"""Wire protocol v5 (docs/protocol.md): Python codec and firmware/protocol.c against the vectors.

tests/vectors/*.json were generated once by make_vectors.py; test_hand_* below derive a few
frames by hand (COBS examples from the COBS paper / Wikipedia, the CRC-32 check value and a
bitwise CRC) so that the vectors are not only the Python encoder agreeing with itself.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hilat.link import protocol as p

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors"
TOOL_SRC = ROOT / "tests" / "protocol" / "vector_tool.c"
FIRMWARE = ROOT / "firmware"
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2"]

MESSAGE_FILES = sorted(
    f for f in VECTORS.glob("*.json") if "message" in json.loads(f.read_text(encoding="utf-8"))
)


def _load_message_vectors():
    out = []
    for f in MESSAGE_FILES:
        doc = json.loads(f.read_text(encoding="utf-8"))
        cls = p.MESSAGES_BY_NAME[doc["message"]]
        assert doc["type"] == cls.TYPE
        for v in doc["vectors"]:
            out.append(pytest.param(cls, v, id=f"{doc['message']}:{v['name']}"))
    return out


MESSAGE_VECTORS = _load_message_vectors()
INVALID = json.loads((VECTORS / "invalid_commands.json").read_text(encoding="utf-8"))["vectors"]
PRIMITIVES = json.loads((VECTORS / "primitives.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------
# Helpers


def from_fields(cls, fields: dict) -> p.Message:
    kw = {}
    for f in dataclasses.fields(cls):
        v = fields[f.name]
        if cls is p.Identify and f.name == "ethernet" and v is not None:
            v = p.EthernetInfo(*v)
        elif isinstance(v, list):
            v = [tuple(x) if isinstance(x, list) else x for x in v]
        kw[f.name] = v
    assert set(fields) == set(kw), "vector fields do not match the dataclass"
    return cls(**kw)


def tool_line(msg: p.Message, seq: int) -> str:
    """The vector tool's line for a message: kind, seq, then the fields in spec order (lists as
    count then items, strings as UTF-8 hex or '-')."""
    toks = [msg.NAME.lower(), str(seq)]

    def add(v):
        if isinstance(v, str):
            toks.append(v.encode().hex() or "-")
        elif isinstance(v, (list, tuple)):
            for x in v:
                add(x)
        else:
            toks.append(str(v))

    for f in dataclasses.fields(msg):
        v = getattr(msg, f.name)
        if isinstance(msg, p.Identify) and f.name == "channels":
            # The C encoder takes the table as soc.h gives it: "name:role,name:role,...".
            add(",".join(f"{name}:{role}" for name, role in v))
            continue
        if isinstance(msg, p.Identify) and f.name == "ethernet":
            toks.append("0" if v is None else "1")  # then the tail's fields, if any
            add(v or [])
            continue
        if isinstance(msg, p.Events) and f.name == "records":
            # The C encoder takes every record with its fraction (ignored with fraction_bytes 0).
            v = [tuple(r) if len(r) == 4 else (*r, 0) for r in v]
        if isinstance(v, list):
            toks.append(str(len(v)))
        add(v)
    return " ".join(toks)


def compile_tool(out: Path, extra: list[str]) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc not found: the C codec cannot be tested")
    cmd = [gcc, *CFLAGS, *extra, f"-I{FIRMWARE}", str(TOOL_SRC), str(FIRMWARE / "protocol.c"), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return out


class Tool:
    def __init__(self, path: Path):
        self.path = path

    def run(self, lines: list[str]) -> list[str]:
        text = "".join(x + "\n" for x in lines)
        r = subprocess.run([str(self.path)], input=text, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"vector_tool exited {r.returncode}: {r.stdout[-2000:]} {r.stderr[-2000:]}"
        out = r.stdout.splitlines()
        assert len(out) == len(lines), r.stdout[-2000:]
        return out

    def one(self, line: str) -> str:
        return self.run([line])[0]


@pytest.fixture(scope="session")
def tool(tmp_path_factory) -> Tool:
    return Tool(compile_tool(tmp_path_factory.mktemp("c") / "vector_tool", []))


@pytest.fixture(scope="session")
def tool_checked(tmp_path_factory, tool) -> Tool:
    """The tool under AddressSanitizer/UBSan for the corrupted-input tests, where the toolchain
    supports it (else the plain build, which still must not crash)."""
    try:
        path = compile_tool(
            tmp_path_factory.mktemp("asan") / "vector_tool",
            ["-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"],
        )
        t = Tool(path)
        assert t.one("crc 00") == "d202ef8d"
        return t
    except AssertionError:
        return tool


def c_stream(tool: Tool, data: bytes) -> tuple[list[int], dict[str, int]]:
    out = tool.one(f"stream {data.hex() or '-'}")
    seqs_tok, *rest = out.split()
    seqs = seqs_tok.removeprefix("seqs=")
    counters = {k: int(v) for k, v in (t.split("=") for t in rest)}
    return ([] if seqs == "-" else [int(s) for s in seqs.split(",")]), counters


def frames_counted(dec: p.FrameDecoder) -> int:
    return dec.frames_ok + dec.corrupt + dec.wrong_version + dec.unknown_type + dec.malformed + dec.duplicate


def nonempty_frames(data: bytes) -> int:
    """Non-empty frames in data, every frame terminated (data ends with 0x00 or is fed one)."""
    return sum(1 for seg in (data + b"\x00").split(b"\x00")[:-1] if seg)


def py_counters(dec: p.FrameDecoder) -> dict[str, int]:
    c = dec.counters()
    del c["lost"], c["duplicate"]  # the rig does not track the host's sequence
    return c


# ---------------------------------------------------------------------------------------------
# By hand


def bitwise_crc32(data: bytes) -> int:
    """CRC-32/ISO-HDLC bit by bit, independent of zlib."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


# (data, encoded) from the COBS paper / Wikipedia's examples.
COBS_BY_HAND = [
    ("00", "0101"),
    ("0000", "010101"),
    ("00110000", "0102110101"),
    ("11220033", "0311220233"),
    ("11223344", "0511223344"),
    ("11000000", "0211010101"),
    (bytes(range(1, 255)).hex(), "ff" + bytes(range(1, 255)).hex()),
    ("00" + bytes(range(1, 255)).hex(), "01ff" + bytes(range(1, 255)).hex()),
    (bytes(range(1, 256)).hex(), "ff" + bytes(range(1, 255)).hex() + "02ff"),
    (bytes(range(2, 256)).hex() + "00", "ff" + bytes(range(2, 256)).hex() + "0101"),
    (bytes(range(3, 256)).hex() + "0001", "fe" + bytes(range(3, 256)).hex() + "0201"),
]


@pytest.mark.parametrize("data,encoded", COBS_BY_HAND)
def test_hand_cobs(data, encoded, tool_checked):
    d, e = bytes.fromhex(data), bytes.fromhex(encoded)
    assert p.cobs_encode(d) == e
    assert p.cobs_decode(e) == d
    assert tool_checked.run([f"cobs_enc {data}", f"cobs_dec {encoded}"]) == [encoded, data]


def test_hand_crc(tool):
    # The CRC-32/ISO-HDLC check value, and zlib == an independent bitwise CRC.
    assert bitwise_crc32(b"123456789") == 0xCBF43926
    assert p.crc32(b"123456789") == 0xCBF43926
    assert tool.one("crc " + b"123456789".hex()) == "cbf43926"
    rng = random.Random(3)
    for n in (0, 1, 7, 250):
        d = bytes(rng.randrange(256) for _ in range(n))
        assert p.crc32(d) == bitwise_crc32(d)


def test_hand_frame_time_req(tool):
    # TIME_REQ, seq 0: payload 05 87 00 00; CRC-32 of it = 0xf2e0222b, little-endian 2b 22 e0 f2.
    # COBS: [05 87] 00 | [] 00 | [2b 22 e0 f2] -> 03 05 87 | 01 | 05 2b 22 e0 f2, then 00.
    assert bitwise_crc32(bytes.fromhex("05870000")) == 0xF2E0222B
    wire = "0305870105 2b22e0f200".replace(" ", "")
    assert p.TimeReq().encode(0).hex() == wire
    assert tool.one("time_req 0") == wire
    assert tool.one("parse " + wire[:-2]) == "time_req 0"
    doc = json.loads((VECTORS / "time_req.json").read_text(encoding="utf-8"))
    assert [v["wire"] for v in doc["vectors"] if v["seq"] == 0] == [wire]


def test_hand_frame_events(tool):
    # EVENTS, seq 1, base 1000 (e8 03 00..), masks of 1 byte, one record: delta 0, channels 4, levels 4.
    payload = bytes.fromhex("05020100" + "e803000000000000" + "01" + "00" + "0404")
    crc = bitwise_crc32(payload).to_bytes(4, "little")
    assert 0 not in crc  # so the tail is one block
    # Blocks: [03 02 01] 00 | [e8 03] 00 | then 5 zeros (base bytes) as empty blocks, [01] (format:
    # masks of 1 byte, no fraction) 00 (the delta), and the last block 04 04 + CRC (6 bytes, code 07).
    wire = bytes.fromhex("04050201" + "03e803" + "01" * 5 + "0201" + "070404") + crc + b"\x00"
    msg = p.Events(1000, [(1000, 4, 4)])
    assert msg.encode(1) == wire
    assert tool.one("events 1 1000 1 1000 4 4 0 1 0") == wire.hex()
    doc = json.loads((VECTORS / "events.json").read_text(encoding="utf-8"))
    assert [v["wire"] for v in doc["vectors"] if v["name"] == "one record, delta 0"] == [wire.hex()]


def test_hand_frame_events_two_byte_masks(tool):
    # 10 channels: masks of 2 bytes, little-endian; channel 9 rising is channels 0x0200, levels 0x0200.
    payload = bytes.fromhex("05020200" + "0a00000000000000" + "02" + "03" + "0002" + "0002")
    crc = bitwise_crc32(payload).to_bytes(4, "little")
    msg = p.Events(10, [(13, 0x0200, 0x0200)], 2)
    assert p.cobs_decode(msg.encode(2)[:-1]) == payload + crc
    assert tool.one("events 2 10 1 13 512 512 0 2 0") == msg.encode(2).hex()
    assert p.decode_frame(msg.encode(2)).msg.records == [(13, 0x0200, 0x0200)]


def test_hand_frame_events_fractions(tool):
    # Four inputs at four samples a tick: one fraction byte, input i's position at bits 2i..2i+1.
    # Format byte 0x11 (masks of 1 byte, fraction of 1); the record: delta 3, channels 0b001100
    # (in0, in1), levels 0b000100, fraction 0b0111 (in0 at sample 3, in1 at sample 1).
    payload = bytes.fromhex("05020300" + "0a00000000000000" + "11" + "03" + "0c04" + "07")
    crc = bitwise_crc32(payload).to_bytes(4, "little")
    msg = p.Events(10, [(13, 0b001100, 0b000100, 0b0111)], 1, 1)
    assert p.cobs_decode(msg.encode(3)[:-1]) == payload + crc
    assert tool.one("events 3 10 1 13 12 4 7 1 1") == msg.encode(3).hex()
    assert p.decode_frame(msg.encode(3)).msg.records == [(13, 0b001100, 0b000100, 0b0111)]
    # A version-2 frame (a run's raw.bin from before) still decodes: no fraction byte.
    v2 = p.encode_frame(p.MSG_EVENTS, 4, bytes.fromhex("0a00000000000000" + "01" + "03" + "0c04"), version=2)
    assert p.decode_frame(v2).msg.records == [(13, 0b001100, 0b000100)]


def test_hand_identify_uart_baud_is_an_optional_tail_in_version_3():
    # Version 3: uart_baud (u32, little-endian) follows the channel table; a body that ends with the
    # table is a rig's from before it and decodes with uart_baud None; any other tail is malformed.
    old = p.Identify(3, 10**8, 5 * 10**7, 1, 1, 512, 17, 0x3F, 4, 15, 1000, 1, "fw", "gw", [("s", "stimulus"),
                                                                                          ("i", "isr")])
    body = old.body(3)
    assert body.endswith(b"\x01i\x03isr")
    assert p.decode_frame(p.encode_frame(p.MSG_IDENTIFY, 0, body, 3)).msg.uart_baud is None
    # 2,000,000 = 0x001E8480.
    new = p.decode_frame(p.encode_frame(p.MSG_IDENTIFY, 0, body + bytes.fromhex("80841e00"), 3)).msg
    assert new.uart_baud == 2_000_000 and dataclasses.replace(new, uart_baud=None) == old
    assert dataclasses.replace(old, uart_baud=2_000_000).body(3) == body + bytes.fromhex("80841e00")
    for tail in ("80841e", "80841e0000", "00"):
        with pytest.raises(p.MalformedFrame, match="trailing bytes"):
            p.decode_frame(p.encode_frame(p.MSG_IDENTIFY, 0, body + bytes.fromhex(tail), 3))
    # A version-3 rig has no Ethernet tail, and a version-4 IDENTIFY always has uart_baud.
    with pytest.raises(ValueError):
        dataclasses.replace(old, uart_baud=0, ethernet=p.EthernetInfo(1, 2, 3, 4, 2, 5)).body(3)
    with pytest.raises(ValueError):
        old.encode(0)


def test_hand_identify_ethernet_tail_and_tdc_fields(tool):
    # Version 4: after uart_baud, ethernet:u8; when 1, ip:u32 (LE) mac:6 bytes (wire order)
    # command_port:u16 stream_port:u16 record_words:u8 max_records:u16. Version 5: then tdc_inputs:u8
    # tdc_taps:u16 (LE).
    table = [("s", "stimulus"), ("i", "isr")]
    plain = p.Identify(5, 10**8, 5 * 10**7, 1, 1, 512, 17, 0x3F, 4, 15, 1000, 1, "fw", "gw", table, 2_000_000)
    head = plain.body()[:-8]
    assert plain.body() == head + bytes.fromhex("80841e00" "00" "00" "0000")
    eth = dataclasses.replace(plain, capabilities=0x13F, ethernet=p.EthernetInfo(0xC0A80132, 0x10E2D5000050, 5800,
                                                                                 5801, 4, 89),
                              tdc_inputs=1, tdc_taps=256)
    tail = bytes.fromhex("80841e00" "01" "3201a8c0" "10e2d5000050" "a816" "a916" "04" "5900" "01" "0001")
    assert eth.body()[len(head):] == tail and eth.body()[:len(head)] == dataclasses.replace(
        plain, capabilities=0x13F).body()[:len(head)]
    assert eth.fraction_bits == 8 and eth.fraction_width == 8 and eth.fraction_bytes == 1
    for msg in (plain, eth):
        assert p.decode_frame(msg.encode(9)).msg == msg
        assert tool.one(tool_line(msg, 9)) == msg.encode(9).hex()
    # A version-4 rig's body is the same without the TDC fields: no TDC.
    v4 = dataclasses.replace(eth, version=4, tdc_inputs=0, tdc_taps=0)
    assert v4.body(4)[1:] == eth.body()[1:-3]
    assert p.decode_frame(p.encode_frame(p.MSG_IDENTIFY, 0, v4.body(4), 4)).msg == v4
    with pytest.raises(ValueError, match="no TDC fields in version 4"):
        eth.body(4)
    # The tails are all or nothing; an ethernet byte other than 0 or 1, or a missing byte, is malformed.
    body = eth.body()
    for bad in (body[:-1], body[:-3], body + b"\x00", head + bytes.fromhex("80841e00" "02") + tail[5:],
                head + tail[:4], plain.body() + b"\x00", plain.body()[:-3], head):
        with pytest.raises(p.MalformedFrame):
            p.decode_frame(p.encode_frame(p.MSG_IDENTIFY, 0, bad))
    # TDC fields that cannot be, refused by the encoder and (the same bytes otherwise) by the decoder:
    # more TDC inputs than inputs, a TDC on a rig sampling 4 times a tick, TDC inputs without taps.
    spt4 = body[:25] + b"\x04" + body[26:]   # samples_per_tick is the fixed part's last byte
    for bad, bad_body, why in ((dataclasses.replace(eth, tdc_inputs=2), body[:-3] + bytes.fromhex("020001"),
                                "2 TDC inputs of 1 inputs"),
                               (dataclasses.replace(eth, samples_per_tick=4), spt4, "4 samples a tick"),
                               (dataclasses.replace(eth, tdc_taps=0), body[:-3] + bytes.fromhex("010000"),
                                "of 0 taps")):
        with pytest.raises(ValueError, match=why):
            bad.body()
        with pytest.raises(p.MalformedFrame, match=why):
            p.decode_frame(p.encode_frame(p.MSG_IDENTIFY, 0, bad_body))
    nine = [("x", "")] * 9
    with pytest.raises(ValueError, match="9 TDC inputs of 9 inputs"):   # more than a 64-bit fraction holds
        dataclasses.replace(eth, n_inputs=9, channels=table[:1] + nine, tdc_inputs=9).body()


def test_hand_frame_engine_bins(tool):
    # A tagged bin of stim_to_task (kind 1) in interval 300, the overflow bin 2304, count 1, then
    # stim_to_task's close of interval 300:
    #   head 0x14 (type 0, kind 1 << 2, tag 1 << 4), 300 = ac 02, 2304 = 0x900 = 80 12, 01;
    #   head 0x05 (type 1, kind 1 << 2), ac 02.
    body = bytes.fromhex("14ac02801201" + "05ac02")
    payload = bytes.fromhex("05070900") + body
    wire = p.cobs_encode(payload + bitwise_crc32(payload).to_bytes(4, "little")) + b"\x00"
    msg = p.EngineBins([(0, 1, 1, 300, 2304, 1), (1, 1, 0, 300, 0, 0)])
    assert msg.encode(9) == wire
    assert tool.one("engine_bins 9 2 0 1 1 300 2304 1 1 1 0 300 0 0") == wire.hex()
    assert p.decode_frame(wire).msg.entries == [p.BinsEntry(0, 1, 1, 300, 2304, 1), p.BinsEntry(1, 1, 0, 300, 0, 0)]


def test_hand_frame_engine_config(tool):
    # docs/protocol.md's field order, by hand: 9 bytes, deadline u32, offset u16, shift u8, 3 x u32,
    # trigger_response u8, trigger_threshold u32, trigger_width u16: 35 bytes.
    body = (bytes([0x03, 0, 1, 2, 1, 3, 1, 0xFF, 1]) + (50_000).to_bytes(4, "little") + (21).to_bytes(2, "little")
            + bytes([24]) + b"".join(t.to_bytes(4, "little") for t in (10, 20, 0xFFFFFFFF)) + bytes([1])
            + (4000).to_bytes(4, "little") + (100).to_bytes(2, "little"))
    assert len(body) == 35
    msg = p.EngineConfig(p.ENGINE_ENABLE | p.ENGINE_RAW, 0, 1, 2, 1, 3, 1, p.ENGINE_NO_TAG, 1, 50_000, 21, 24,
                         [10, 20, p.ENGINE_NEVER], p.ENGINE_TRIGGER_TASK, 4000, 100)
    assert msg.body() == body
    wire = msg.encode(3)
    assert tool.one(f"parse {wire[:-1].hex()}") == tool_line(msg, 3)


def test_hand_status_with_and_without_fired(tool):
    # 2 capture channels, 2 stimulus channels: 14 bytes of counters and n, 2 x u32, stim_n, 2 status
    # bytes; then (this rig) 2 x fired:u32, little-endian. Without them: an older rig's body.
    older = bytes.fromhex("01000000" "02000000" "03000000" "00" "02" "05000000" "00000000" "02" "0201")
    body = older + bytes.fromhex("2c010000" "ffffffff")
    assert len(older) == 14 + 8 + 1 + 2 and len(body) == len(older) + 8
    msg = p.Status(1, 2, 3, 0, [5, 0], [p.STIM_DONE, p.STIM_RUNNING], [300, 2**32 - 1])
    assert msg.body() == body
    assert p.Status.from_body(body) == msg
    assert p.Status.from_body(older) == p.Status(1, 2, 3, 0, [5, 0], [p.STIM_DONE, p.STIM_RUNNING])
    assert p.Status.from_body(older).fired == []
    assert tool.one(tool_line(msg, 7)) == msg.encode(7).hex()
    # Anything between the two lengths, or past the longer, is malformed; so is a count per channel
    # missing on the encoding side, in both codecs.
    for cut in (1, 4, 7):
        with pytest.raises(p.MalformedFrame):
            p.Status.from_body(body[:-cut])
    with pytest.raises(p.MalformedFrame):
        p.Status.from_body(body + bytes(4))
    with pytest.raises(ValueError):
        p.Status(1, 2, 3, 0, [5, 0], [p.STIM_DONE, p.STIM_RUNNING], [300]).body()
    assert tool.one("status 7 1 2 3 0 2 5 0 2 2 1 1 300") == "err nofit"


def test_hand_frames_of_the_ethernet_link(tool):
    # docs/ethernet.md's field order, by hand. STREAM_CONFIG: enable u8, session u32, dst_ip u32 (the
    # numeric value, little-endian: 192.168.1.100 = 0xC0A80164 -> 64 01 a8 c0), dst_port u16, flush_us
    # u16, heartbeat_ms u16: 15 bytes.
    body = bytes.fromhex("01" "01ef cdab" "6401a8c0" "0c17" "6400" "f401".replace(" ", ""))
    msg = p.StreamConfig(1, 0xABCDEF01, 0xC0A80164, 5900, 100, 500)
    assert msg.body() == body and p.StreamConfig.from_body(body) == msg
    assert tool.one(f"parse {msg.encode(7)[:-1].hex()}") == tool_line(msg, 7)
    # NET_CONFIG: ip u32 little-endian, then the MAC's 6 bytes in wire order.
    msg = p.NetConfig(p.parse_ip("192.168.1.51"), p.parse_mac("10:e2:d5:00:00:51"))
    assert msg.body() == bytes.fromhex("3301a8c0" "10e2d5000051")
    assert (p.format_ip(msg.ip), p.format_mac(msg.mac)) == ("192.168.1.51", "10:e2:d5:00:00:51")
    assert tool.one(f"parse {msg.encode(8)[:-1].hex()}") == tool_line(msg, 8)
    # STREAM_STATUS: 38 bytes.
    msg = p.StreamStatus(7, 1, 1, 0x01020304, 0xC0A80164, 40000, 100, 100, 5, 1 << 33, 9, 2)
    body = bytes.fromhex("0700" "01" "01" "04030201" "6401a8c0" "409c" "6400" "6400" "05000000" "0000000002000000"
                         "09000000" "02000000")
    assert len(body) == 38 and msg.body() == body and p.StreamStatus.from_body(body) == msg
    assert tool.one(tool_line(msg, 3)) == msg.encode(3).hex()
    for bad in ("1.2.3", "1.2.3.256", "a.b.c.d"):
        with pytest.raises(ValueError):
            p.parse_ip(bad)
    for bad in ("10:e2:d5:00:00", "10:e2:d5:00:00:5", "zz:e2:d5:00:00:50"):
        with pytest.raises(ValueError):
            p.parse_mac(bad)


def test_hand_frame_engine_stats():
    # 28 bytes of totals and limits, then per kind 3 x u64 and 2 x (u64 u32 u32 u64): 244 bytes.
    kinds = [p.EngineKindStats(k, 2, 3, 4, 5, 6, 7, 8, p.ENGINE_MIN_NONE, 0, 0) for k in range(3)]
    msg = p.EngineStats(0x0102, 3, 1 << 40, 4, 5, 6, 7, 8, 16, 2305, kinds)
    body = msg.body()
    assert len(body) == 244 and len(body) + 4 <= p.MAX_PAYLOAD
    assert body[:28] == bytes.fromhex("0201" "03" "0000000000010000" "04000000" "05000000" "06000000" "07" "08"
                                      "10" "0109")
    kind2 = body[28 + 2 * 72 : 28 + 3 * 72]
    assert kind2 == (bytes.fromhex("0200000000000000" "0200000000000000" "0300000000000000")
                     + bytes.fromhex("0400000000000000" "05000000" "06000000" "0700000000000000")
                     + bytes.fromhex("0800000000000000" "ffffffff" "00000000" "0000000000000000"))


# ---------------------------------------------------------------------------------------------
# Vectors


@pytest.mark.parametrize("cls,v", MESSAGE_VECTORS)
def test_vector_python(cls, v):
    msg = from_fields(cls, v["fields"])
    wire = bytes.fromhex(v["wire"])
    assert msg.encode(v["seq"], v.get("version", p.PROTOCOL_VERSION)) == wire
    assert len(wire) <= p.MAX_WIRE and wire.index(0) == len(wire) - 1
    frame = p.decode_frame(wire)
    assert frame.seq == v["seq"] and frame.type == cls.TYPE
    assert frame.msg == msg
    # The streaming decoder of the right direction gives the same.
    dec = p.FrameDecoder(from_host=cls.TYPE >= 0x80)
    assert dec.feed(wire) == [p.Frame(v["seq"], msg)]
    assert dec.frames_ok == 1 and dec.corrupt == 0


@pytest.mark.parametrize("cls,v", MESSAGE_VECTORS)
def test_vector_c(cls, v, tool):
    msg = from_fields(cls, v["fields"])
    if v.get("version", p.PROTOCOL_VERSION) != p.PROTOCOL_VERSION:
        # A version-3 or version-4 rig's IDENTIFY (the firmware sends only its own version): the
        # firmware's frame is this one's body with what came later, every other field the same:
        # uart_baud (0 where it was missing) and the ethernet byte 0 (version 4), the TDC fields 0
        # (version 5).
        assert isinstance(msg, p.Identify) and v["version"] in (3, 4)
        now = dataclasses.replace(msg, uart_baud=msg.uart_baud or 0)
        if len(now.body()) + p.HEADER_SIZE > p.MAX_PAYLOAD:  # an old version's largest: too long now
            assert tool.one(tool_line(now, v["seq"])) == "err nofit"
            return
        frame = p.decode_frame(bytes.fromhex(tool.one(tool_line(now, v["seq"]))))
        assert frame.msg == now and frame.seq == v["seq"]
        added = (bytes(4) if msg.uart_baud is None else b"") + (b"\x00" if v["version"] == 3 else b"")
        assert frame.msg.body() == msg.body(v["version"]) + added + bytes(3)
        return
    line = tool_line(msg, v["seq"])
    if cls.TYPE >= 0x80:  # commands: the parser gives back the same line
        enc, parsed = tool.run([line, f"parse {v['wire'][:-2]}"])
        assert parsed == line
    else:
        enc = tool.one(line)
    assert enc == v["wire"]


def test_vectors_cover_edge_cases():
    wires = {(c.NAME, v["name"]): bytes.fromhex(v["wire"]) for c, v in (x.values for x in MESSAGE_VECTORS)}
    assert {name for name, _ in wires} == set(p.MESSAGES_BY_NAME)
    assert any(len(w) == p.MAX_WIRE for (n, _), w in wires.items() if n == "EVENTS")
    # A frame that is one 254-byte COBS run, and frames with 0x00 in the payload.
    assert any(w[0] == 0xFF and len(w) == 256 for w in wires.values())
    assert sum(0 in p.cobs_decode(w[:-1]) for w in wires.values()) > 40
    # uleb128 deltas of 1..10 bytes.
    sizes = set()
    for (n, _), w in wires.items():
        if n == "EVENTS":
            prev = None
            ev = p.decode_frame(w).msg
            for ts, *_ in ev.records:
                sizes.add(len(p.uleb128((ts - (ev.base if prev is None else prev)) % 2**64)))
                prev = ts
    assert sizes == set(range(1, 11))
    # ENGINE_BINS: intervals of 1..5 uleb128 bytes, counts of 1..10, bins of 1..2, a full frame.
    sizes = {"interval": set(), "bin": set(), "count": set()}
    for (n, _), w in wires.items():
        if n == "ENGINE_BINS":
            assert len(p.cobs_decode(w[:-1])) <= p.MAX_DECODED
            for e in p.decode_frame(w).msg.entries:
                sizes["interval"].add(len(p.uleb128(e.interval)))
                if e.type == p.ENGINE_ENTRY_BIN:
                    sizes["bin"].add(len(p.uleb128(e.bin)))
                    sizes["count"].add(len(p.uleb128(e.count)))
    assert sizes == {"interval": set(range(1, 6)), "bin": {1, 2}, "count": set(range(1, 11))}
    payloads = {n: max(len(p.cobs_decode(w[:-1])) - 4 for (m, _), w in wires.items() if m == n)
                for n in ("ENGINE_BINS", "ENGINE_OUTLIERS")}
    assert payloads == {"ENGINE_BINS": p.MAX_PAYLOAD, "ENGINE_OUTLIERS": 4 + 11 * 21}


@pytest.mark.parametrize("v", INVALID, ids=[v["name"] for v in INVALID])
def test_invalid_commands(v, tool_checked):
    wire = bytes.fromhex(v["wire"])
    with pytest.raises(p.ProtocolError) as e:
        p.decode_frame(wire, p.HOST_MESSAGES)
    assert e.value.reason == v["error"]
    if "type" in v and v["error"] not in ("bad_length", "range"):
        assert (e.value.msg_type, e.value.seq) == (v["type"], v["seq"])
    expected = f"err {v['error']}" + (f" {v['type']} {v['seq']}" if "type" in v else "")
    assert tool_checked.one(f"parse {v['wire'] or '-'}") == expected
    # In a stream: counted in the right counter, never returned.
    dec = p.FrameDecoder(from_host=True)
    assert dec.feed(wire + b"\x00") == []
    counter = {"version": "wrong_version", "unknown_type": "unknown_type", "bad_length": "malformed",
               "range": "malformed"}
    if wire:
        assert dec.counters()[counter.get(v["error"], "corrupt")] == 1


@pytest.mark.parametrize("i", range(len(PRIMITIVES["cobs"])))
def test_primitive_cobs(i, tool_checked):
    v = PRIMITIVES["cobs"][i]
    d, e = bytes.fromhex(v["data"]), bytes.fromhex(v["encoded"])
    assert p.cobs_encode(d) == e and p.cobs_decode(e) == d
    assert 0 not in e and len(e) <= len(d) + len(d) // 254 + 1
    out = tool_checked.run([f"cobs_enc {v['data'] or '-'}", f"cobs_dec {v['encoded']}"])
    assert out == [v["encoded"], v["data"] or "-"]


def test_primitive_crc(tool):
    lines = [f"crc {v['data'] or '-'}" for v in PRIMITIVES["crc32"]]
    expected = [v["crc32"] for v in PRIMITIVES["crc32"]]
    assert [f"{p.crc32(bytes.fromhex(v['data'])):08x}" for v in PRIMITIVES["crc32"]] == expected
    assert tool.run(lines) == expected


def test_cobs_random_roundtrip(tool_checked):
    rng = random.Random(11)
    datas = []
    for _ in range(200):
        n = rng.randrange(0, 700)
        zero_p = rng.choice([0.0, 0.001, 0.05, 0.5])
        datas.append(bytes(0 if rng.random() < zero_p else rng.randrange(1, 256) for _ in range(n)))
    out = tool_checked.run([f"cobs_enc {d.hex() or '-'}" for d in datas])
    for d, e in zip(datas, out):
        assert p.cobs_encode(d).hex() == e
        assert p.cobs_decode(p.cobs_encode(d)) == d


def test_cobs_decode_errors(tool_checked):
    for bad in ["", "00", "0200", "05112233", "ff" + "11" * 253, "0311"]:
        with pytest.raises(p.CorruptFrame):
            p.cobs_decode(bytes.fromhex(bad))
        assert tool_checked.one(f"cobs_dec {bad or '-'}") == "err cobs"


# ---------------------------------------------------------------------------------------------
# EVENTS packing and limits


def test_events_60_records_of_2000_ticks_do_not_fit(tool):
    """docs/protocol.md: "a frame of 60 records is about 260 bytes". With 250 payload bytes a
    frame takes 59 records of 4 bytes (2-byte deltas): 13 + 59 * 4 = 249."""
    recs = [(1_000_000 + 2000 * k, 1 << (k % 2), k % 2) for k in range(60)]
    with pytest.raises(ValueError):
        p.Events(1_000_000 - 2000, recs).encode(0)
    line = tool_line(p.Events(1_000_000 - 2000, recs), 0)
    assert tool.one(line) == "err nofit 59"
    w59 = p.Events(1_000_000 - 2000, recs[:59]).encode(0)
    assert len(w59) == 255 and tool.one(tool_line(p.Events(1_000_000 - 2000, recs[:59]), 0)) == w59.hex()
    # base = first timestamp (delta 0, 3 bytes): 60 records need 252 bytes, still too many.
    assert tool.one(tool_line(p.Events(recs[0][0], recs), 0)) == "err nofit 59"


def test_pack_events(tool):
    rng = random.Random(5)
    t, recs = 2**64 - 50_000, []
    for _ in range(3000):
        t = (t + rng.choice([0, 3, 100, 2000, 2100, 70_000, 1 << 40])) % 2**64
        recs.append((t, rng.randrange(1, 64), rng.randrange(64)))
    frames = p.pack_events(recs)
    assert [r for f in frames for r in f.records] == recs
    wires = [f.encode(k) for k, f in enumerate(frames)]
    assert all(len(w) <= p.MAX_WIRE for w in wires)
    # Full: the next record would not have fitted.
    for f, nxt in zip(frames, frames[1:]):
        size = len(f.body()) + 4 + len(p.uleb128((nxt.records[0][0] - f.records[-1][0]) % 2**64)) + 2
        assert size > p.MAX_PAYLOAD
    # The C incremental builder makes the same frames (base = first timestamp).
    assert tool.run([tool_line(f, k) for k, f in enumerate(frames)]) == [w.hex() for w in wires]
    dec = p.FrameDecoder()
    got = dec.feed(b"".join(wires))
    assert [r for fr in got for r in fr.msg.records] == recs
    assert dec.counters() == dict(p.FrameDecoder().counters(), frames_ok=len(frames))


def test_pack_engine_bins(tool):
    """The C builder refuses an entry that does not fit (frame unchanged), as pack_engine_bins
    splits: both make the same frames."""
    rng = random.Random(6)
    entries = []
    for interval in (5, 6, 2**32 - 1, 0):
        for k in range(3):
            for t in (0, 1):
                for b in sorted(rng.sample(range(p.ENGINE_OVERFLOW_BIN + 1), 40)):
                    entries.append((p.ENGINE_ENTRY_BIN, k, t, interval, b, rng.choice([1, 2, 300, 1 << 20, 2**35 - 1])))
            entries.append((p.ENGINE_ENTRY_CLOSE, k, 0, interval, 0, 0))
    frames = p.pack_engine_bins(entries)
    assert [e for f in frames for e in f.entries] == entries
    wires = [f.encode(k) for k, f in enumerate(frames)]
    assert all(len(w) <= p.MAX_WIRE for w in wires)
    for f, nxt in zip(frames, frames[1:]):  # full: the next entry would not have fitted
        assert 4 + len(f.body()) + len(p.EngineBins(nxt.entries[:1]).body()) > p.MAX_PAYLOAD
    assert tool.run([tool_line(f, k) for k, f in enumerate(frames)]) == [w.hex() for w in wires]
    # One entry too many for the C builder: refused at that index.
    over = frames[0].entries + frames[1].entries[:1]
    assert tool.one(tool_line(p.EngineBins(over), 0)) == f"err nofit {len(frames[0].entries)}"
    dec = p.FrameDecoder()
    assert [e for fr in dec.feed(b"".join(wires)) for e in fr.msg.entries] == entries


def test_pack_engine_outliers(tool):
    records = [(1000 * k, k & 3, k, p.OUTLIER_MISS, p.OUTLIER_BELOW) for k in range(25)]
    frames = p.pack_engine_outliers(records)
    assert [len(f.records) for f in frames] == [11, 11, 3]
    assert [r for f in frames for r in f.records] == records
    assert tool.one(tool_line(p.EngineOutliers(records[:12]), 0)) == "err nofit 11"


def test_c_engine_bins_refuses_unencodable_entries(tool):
    for entry, index in [((0, 3, 0, 1, 1, 1), 1), ((0, 0, 2, 1, 1, 1), 1), ((0, 0, 0, 1, 2305, 1), 1),
                         ((1, 3, 0, 1, 0, 0), 1)]:
        msg_line = tool_line(p.EngineBins([(0, 0, 0, 1, 1, 1)]), 0).split()
        line = " ".join([*msg_line[:2], "2", *msg_line[3:], *map(str, entry)])
        assert tool.one(line) == f"err range {index}"
        with pytest.raises(ValueError):
            p.EngineBins([entry]).encode(0)


@pytest.mark.parametrize("body,why", [
    (b"\x20\x01", "reserved head bit"),
    (b"\x02\x01", "entry type 2"),
    (b"\x0c\x01\x01\x01", "kind 3"),
    (b"\x11\x01", "close with the tag bit"),
    (b"\x00\x01\x01", "bin without its count"),
    (b"\x00\x81", "truncated uleb128"),
    (b"\x00\x01\x01" + b"\xff" * 10 + b"\x01", "uleb128 longer than 10 bytes"),
    (b"\x00\x01\x01" + b"\xff" * 9 + b"\x02", "count beyond 64 bits"),
])
def test_engine_bins_malformed(body, why):
    with pytest.raises(p.MalformedFrame) as e:
        p.EngineBins.from_body(body)
    assert type(e.value) is p.MalformedFrame and "ENGINE_BINS" in str(e.value), why


@pytest.mark.parametrize("body", [b"\x00" + p.uleb128(2**32) + b"\x01\x01", b"\x00\x01" + p.uleb128(2305) + b"\x01"])
def test_engine_bins_out_of_range(body):
    with pytest.raises(p.OutOfRange):
        p.EngineBins.from_body(body)


def test_engine_fixed_bodies_malformed():
    with pytest.raises(p.MalformedFrame, match="ENGINE_OUTLIERS: body of 20 bytes"):
        p.EngineOutliers.from_body(bytes(20))
    with pytest.raises(p.MalformedFrame, match="ENGINE_OUTLIERS: body of 43 bytes"):
        p.EngineOutliers.from_body(bytes(43))
    for n in (243, 245, 0):
        with pytest.raises(p.MalformedFrame, match=f"ENGINE_STATS: body of {n} bytes, expected 244"):
            p.EngineStats.from_body(bytes(n))
    for n in (34, 36):
        with pytest.raises(p.MalformedFrame, match=f"ENGINE_CONFIG: body of {n} bytes, expected 35"):
            p.EngineConfig.from_body(bytes(n))
    # In a stream: counted as malformed, the frames around it delivered.
    dec = p.FrameDecoder()
    got = dec.feed(p.Time(0, 1).encode(0) + p.encode_frame(p.MSG_ENGINE_BINS, 1, b"\x03\x01")
                   + p.EngineBins([(1, 0, 0, 3, 0, 0)]).encode(2))
    assert [f.seq for f in got] == [0, 2] and dec.malformed == 1


def test_batch_decoder_passes_engine_frames():
    """EVENTS records come out as arrays, the engine frames in order among the other frames."""
    from hilat.link import batch

    stats = p.EngineStats(3, 1, 5, 0, 0, 0, 6, 8, 16, 2305, [p.EngineKindStats(*range(11))] * 3)
    msgs = [p.Events(100, [(100 + k, 1, 1) for k in range(50)]), p.EngineBins([(0, 2, 1, 4, 77, 9)]),
            p.Events(200, [(200 + k, 2, 0) for k in range(50)]), p.EngineOutliers([(5, 3, 1, 2, 3)]),
            p.Events(300, [(300, 4, 4)]), p.Events(400, [(400, 4, 0)]), stats]
    stream = b"".join(m.encode(k) for k, m in enumerate(msgs))
    dec = batch.BatchDecoder()
    got = dec.feed_batch(stream)
    assert [f.msg for f in got.frames] == [msgs[1], msgs[3], stats]
    assert len(got.ticks) == 102 and dec.frames_ok == len(msgs)


def test_events_decode_speed():
    """100k records/s must be easy for the host: decode 100k records well within a second."""
    recs, t = [], 0
    for k in range(100_000):
        t += 1900 + (k * 37) % 200
        recs.append((t, 1 << (k % 6), k & 0x3F))
    stream = b"".join(f.encode(k % 65536) for k, f in enumerate(p.pack_events(recs)))
    dec = p.FrameDecoder()
    t0 = time.perf_counter()
    n = sum(len(f.msg.records) for f in dec.feed(stream))
    dt = time.perf_counter() - t0
    assert n == 100_000 and dec.corrupt == 0
    assert dt < 1.0, f"{dt:.2f} s for 100k records"


# ---------------------------------------------------------------------------------------------
# FrameDecoder


def rig_frames(n: int, seed: int, seq0: int = 0) -> list[tuple[int, p.Message, bytes]]:
    rng = random.Random(seed)
    out = []
    t = rng.randrange(2**64)
    for k in range(n):
        seq = (seq0 + k) % 65536
        kind = rng.randrange(6)
        if kind == 0:
            recs = []
            for _ in range(rng.randrange(0, 50)):
                t = (t + rng.choice([0, 1, 127, 128, 2000, 1 << 20, 1 << 50])) % 2**64
                recs.append((t, rng.randrange(256), rng.randrange(256)))
            msg: p.Message = p.pack_events(recs)[0] if recs else p.Events(t, [])
        elif kind == 1:
            msg = p.Overflow(rng.randrange(2**64), rng.randrange(256))
        elif kind == 2:
            stim = [rng.randrange(8) for _ in range(rng.randrange(9))]
            msg = p.Status(*(rng.randrange(2**32) for _ in range(3)), rng.randrange(2),
                           [rng.randrange(2**32) for _ in range(rng.randrange(9))], stim,
                           [rng.randrange(2**32) for _ in stim] if rng.random() < 0.5 else [])
        elif kind == 3:
            msg = p.Ack(rng.randrange(65536), rng.randrange(4), "x" * rng.randrange(30))
        elif kind == 4:
            msg = p.Time(rng.randrange(65536), rng.randrange(2**64))
        else:
            eth = p.EthernetInfo(rng.randrange(2**32), rng.randrange(2**48), 5800, 5801, 2, 179)
            msg = p.Identify(4, 10**8, 5 * 10**7, 2, 4, 512, 17, 0x3F, 4, 15, 1000, 1, "fw", "gw" * rng.randrange(40),
                             [(f"c{i}", "role") for i in range(6)], 0, eth if rng.random() < 0.5 else None)
        out.append((seq, msg, msg.encode(seq)))
    return out


def test_decoder_garbage_between_frames():
    frames = rig_frames(6, 1)
    garbage = [b"\xde\xad\xbe\xef\x00", b"\x00\x00", b"\x55" * 10 + b"\x00", b"\x01\x00", b"\xff\xff\xff\x00"]
    stream = garbage[0]
    for k, (_, _, w) in enumerate(frames):
        stream += w + (garbage[k + 1] if k + 1 < len(garbage) else b"")
    dec = p.FrameDecoder()
    got = dec.feed(stream)
    assert [(f.seq, f.msg) for f in got] == [(s, m) for s, m, _ in frames]
    # Garbage frames: deadbeef, 55*10, 01 (COBS "01" = empty payload: short), ffffff; empty ignored.
    assert dec.counters() == dict(
        frames_ok=6, corrupt=4, wrong_version=0, unknown_type=0, malformed=0, lost=0, duplicate=0,
        resync_bytes=5 + 11 + 2 + 4,
    )


def test_decoder_joins_mid_stream_and_byte_by_byte():
    frames = rig_frames(20, 2, seq0=65530)
    stream = b"".join(w for _, _, w in frames)
    cut = stream[7:]  # joined in the middle of the first frame
    whole = p.FrameDecoder()
    got = whole.feed(cut)
    assert [f.seq for f in got] == [s for s, _, _ in frames[1:]]
    assert whole.corrupt == 1 and whole.resync_bytes == len(frames[0][2]) - 7 and whole.lost == 0
    for chunking in (1, 2, 3, 17, 255, 256, 1000):
        dec = p.FrameDecoder()
        got2 = []
        for i in range(0, len(cut), chunking):
            got2 += dec.feed(cut[i : i + chunking])
        assert got2 == got and dec.counters() == whole.counters()
        assert dec.pending == 0


def test_decoder_crc_and_truncation():
    frames = rig_frames(8, 3)
    w = [bytearray(x) for _, _, x in frames]
    # Frame 1: a byte flipped (kept non-zero): CRC mismatch.
    w[1][len(w[1]) // 2] = w[1][len(w[1]) // 2] % 255 + 1
    # Frame 3: truncated, its delimiter kept. Frame 5: truncated without delimiter, so it merges
    # with frame 6 into one corrupt frame.
    w[3] = w[3][:5] + b"\x00"
    w[5] = w[5][:-4]
    dec = p.FrameDecoder()
    got = dec.feed(b"".join(bytes(x) for x in w))
    assert [f.seq for f in got] == [0, 2, 4, 7]
    assert dec.corrupt == 3 and dec.lost == 4
    assert dec.resync_bytes == len(w[1]) + len(w[3]) + len(w[5]) + len(w[6])


def test_decoder_wrong_version_unknown_type_malformed():
    good = [m.encode(s) for s, m, _ in rig_frames(3, 4)]
    v2 = p.encode_frame(p.MSG_TIME, 1, p.Time(0, 5).body(), version=1)  # a version-1 rig
    unknown = p.encode_frame(0x7F, 1, b"\x01\x02")
    command = p.Hello().encode(2)  # a host -> rig type on the rig -> host decoder
    bad_events = p.encode_frame(p.MSG_EVENTS, 3, bytes(8) + b"\x80")  # truncated uleb128
    bad_status = p.encode_frame(p.MSG_STATUS, 4, bytes(16))  # 15 would be n = stim_n = 0
    stream = good[0] + v2 + unknown + command + bad_events + bad_status + p.Time(0, 1).encode(5)
    dec = p.FrameDecoder()
    got = dec.feed(stream)
    assert [f.seq for f in got] == [0, 5]
    # v2 is refused and its seq not taken; the others are valid frames: their seqs count.
    assert dec.counters() == dict(
        frames_ok=2, corrupt=0, wrong_version=1, unknown_type=2, malformed=2, lost=0, duplicate=0, resync_bytes=0
    )
    with pytest.raises(p.WrongVersion):
        p.decode_frame(v2)
    with pytest.raises(p.UnknownType):
        p.decode_frame(unknown)
    with pytest.raises(p.MalformedFrame):
        p.decode_frame(bad_events)


def test_decoder_sequence_gaps():
    def lost(seqs, expected=None):
        dec = p.FrameDecoder(expected_seq=expected)
        got = dec.feed(b"".join(p.Time(0, s).encode(s) for s in seqs))
        assert [f.seq for f in got] == seqs
        return dec.lost

    assert lost([0, 1, 2, 3]) == 0
    assert lost([0, 1, 2, 5, 6, 10]) == 2 + 3
    assert lost([65534, 65535, 0, 3]) == 2  # wraps at 2**16
    assert lost([65535, 1]) == 1
    assert lost([3, 4], expected=0) == 3  # right after HELLO
    # A version-6 frame in the middle: refused, its seq not taken, so counted as lost too.
    dec = p.FrameDecoder()
    dec.feed(p.Time(0, 0).encode(0) + p.encode_frame(p.MSG_TIME, 1, p.Time(0, 0).body(), version=6))
    dec.feed(p.Time(0, 0).encode(2))
    assert (dec.frames_ok, dec.wrong_version, dec.lost) == (2, 1, 1)
    dec.reset_sequence(0)
    dec.feed(p.Time(0, 0).encode(0))
    assert dec.lost == 1


SEQUENCE = json.loads((VECTORS / "sequence.json").read_text(encoding="utf-8"))["vectors"]


@pytest.mark.parametrize("v", SEQUENCE, ids=[v["name"] for v in SEQUENCE])
def test_sequence_vectors(v):
    # Whole stream at once, and byte by byte: the same seqs accepted, the same counters.
    stream = b"".join(bytes.fromhex(w) for w in v["frames"])
    for chunks in ([stream], [stream[i : i + 1] for i in range(len(stream))]):
        dec = p.FrameDecoder(expected_seq=v["expected_seq"])
        got = [f.seq for c in chunks for f in dec.feed(c)]
        assert got == v["accepted_seqs"]
        assert (dec.lost, dec.duplicate) == (v["lost"], v["duplicate"])
        assert dec.frames_ok + dec.duplicate == len(v["frames"])


BRIDGE = json.loads((VECTORS / "bridge_text.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("v", BRIDGE["vectors"], ids=[v["name"] for v in BRIDGE["vectors"]])
def test_bridge_text_vectors(v, tool_checked):
    """DAPLink's "<DAPLink:Overflow>" in the stream is garbage like any other: the frames around it
    decode, the one it lands in (or before) is corrupt, its bytes are discarded and counted."""
    stream = bytes.fromhex(v["stream"])
    assert stream.count(bytes.fromhex(BRIDGE["text"])) >= 1
    for chunks in ([stream], [stream[i : i + 1] for i in range(len(stream))]):
        dec = p.FrameDecoder(expected_seq=v["expected_seq"])
        got = [f for c in chunks for f in dec.feed(c)]
        assert [f.seq for f in got] == v["accepted_seqs"]
        assert [list(r) for f in got if isinstance(f.msg, p.Events) for r in f.msg.records] == v["records"]
        assert dec.counters() == v["counters"]
    # The rig's receiver (firmware/protocol.c) resynchronizes the same way: it discards the same
    # bytes as corrupt, and takes the intact rig frames for frames of a type it does not know.
    seqs, c = c_stream(tool_checked, stream)
    assert (c["corrupt"], c["resync_bytes"]) == (v["counters"]["corrupt"], v["counters"]["resync_bytes"])
    assert c["unknown_type"] == len(v["accepted_seqs"]) and seqs == []


def test_replayed_frame_is_delivered_once_and_not_lost():
    # The defect: a frame sent again (same seq, same bytes) was delivered twice and counted as
    # 65,535 lost frames.
    frames = [p.Events(1000 * k, [(1000 * k + 5, 1, 1)]).encode(k) for k in range(4)]
    dec = p.FrameDecoder(expected_seq=0)
    got = dec.feed(frames[0] + frames[1] + frames[1] + frames[2] + frames[1] + frames[3])
    assert [f.seq for f in got] == [0, 1, 2, 3]
    assert (dec.lost, dec.duplicate, dec.frames_ok) == (0, 2, 4)
    assert dec.counters()["duplicate"] == 2
    # After a new HELLO the old session's frames are not duplicates of anything.
    dec.reset_sequence(0)
    assert [f.seq for f in dec.feed(frames[0] + frames[0])] == [0]
    assert dec.duplicate == 3


def test_decoder_overlong_is_bounded():
    dec = p.FrameDecoder()
    frame = p.Time(1, 2).encode(0)
    for _ in range(100):
        assert dec.feed(b"\x42" * 1000) == []
        assert len(dec._pending) <= p.MAX_ENCODED
    assert dec.pending == 100_000
    got = dec.feed(b"\x00" + frame)
    assert [f.seq for f in got] == [0]
    assert dec.corrupt == 1 and dec.resync_bytes == 100_001
    # Exactly 255 encoded bytes is a legal length; 256 is not.
    dec = p.FrameDecoder()
    dec.feed(b"\x42" * 256 + b"\x00" + b"\x42" * 255 + b"\x00")
    assert dec.corrupt == 2 and dec.resync_bytes == 257 + 256


def test_decoder_fuzz_random_bytes():
    rng = random.Random(1234)
    for it in range(300):
        n = rng.randrange(0, 3000)
        zero_p = rng.choice([0.0, 0.004, 0.05, 0.3])
        data = bytes(0 if rng.random() < zero_p else rng.randrange(1, 256) for _ in range(n))
        dec = p.FrameDecoder(from_host=bool(it % 2))
        got = []
        i = 0
        while i < n:
            k = rng.randrange(1, 600)
            got += dec.feed(data[i : i + k])
            i += k
        got += dec.feed(b"\x00")
        assert frames_counted(dec) == nonempty_frames(data)
        assert len(got) == dec.frames_ok


def mutate(stream: bytes, rng: random.Random, n_mut: int) -> list[tuple[int, int | None]]:
    """Random flips, insertions (zeros too) and deletions; returns (byte, original index or None)."""
    s: list[tuple[int, int | None]] = [(b, i) for i, b in enumerate(stream)]
    for _ in range(n_mut):
        pos = rng.randrange(len(s) + 1)
        op = rng.randrange(5)
        if op == 0 and pos < len(s):  # flip to another value
            s[pos] = ((s[pos][0] + rng.randrange(1, 256)) % 256, None)
        elif op == 1:
            s.insert(pos, (rng.randrange(256), None))
        elif op == 2:
            s.insert(pos, (0, None))
        elif op == 3 and pos < len(s):
            del s[pos]
        elif op == 4:
            s[pos:pos] = [(rng.randrange(256), None) for _ in range(rng.randrange(1, 40))]
    return s


def intact_frames(frames, mutated) -> set[int]:
    """Indices of the original frames that still stand alone and untouched in the mutated stream."""
    start, spans = 0, {}
    for k, (_, _, w) in enumerate(frames):
        spans[(start, start + len(w) - 1)] = k  # body range, delimiter at the end
        start += len(w)
    out, seg = set(), []
    for b, origin in mutated:
        if b != 0:
            seg.append(origin)
            continue
        if seg and None not in seg and origin is not None:
            first, last = seg[0], seg[-1]
            k = spans.get((first, last + 1))
            if k is not None and last - first + 1 == len(seg) and origin == last + 1:
                out.add(k)
        seg = []
    return out


def test_decoder_fuzz_mutations():
    rng = random.Random(99)
    total_intact = 0
    for it in range(120):
        frames = rig_frames(rng.randrange(1, 25), 1000 + it, seq0=rng.randrange(65536))
        stream = b"".join(w for _, _, w in frames)
        mutated = mutate(stream, rng, rng.randrange(0, 12))
        data = bytes(b for b, _ in mutated)
        dec = p.FrameDecoder()
        got = []
        for i in range(0, len(data), 97):
            got += dec.feed(data[i : i + 97])
        got += dec.feed(b"\x00")
        expected = intact_frames(frames, mutated)
        total_intact += len(expected)
        by_seq = {f.seq: f.msg for f in got}
        for k in expected:
            seq, msg, _ = frames[k]
            assert by_seq.get(seq) == msg, f"iteration {it}: intact frame {k} not decoded"
        # Nothing invented: every decoded frame is one of the originals.
        originals = {s: m for s, m, _ in frames}
        assert all(originals.get(f.seq) == f.msg for f in got)
        # Consecutive seqs were sent: lost = span of the accepted seqs - accepted frames.
        if got:
            span = ((got[-1].seq - got[0].seq) % 65536) + 1
            assert dec.lost == span - len(got)
        assert frames_counted(dec) == nonempty_frames(data)
    assert total_intact > 500


def test_decode_frame_never_raises_other_errors():
    rng = random.Random(8)
    for _ in range(3000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
        try:
            p.decode_frame(data)
        except p.ProtocolError:
            pass


# ---------------------------------------------------------------------------------------------
# C receiver + parser on streams


def command_stream(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for k in range(rng.randrange(5, 30)):
        kind = rng.randrange(13)
        if kind == 0:
            msg: p.Message = p.Hello(rng.randrange(1, 4))
        elif kind == 1:
            u32 = [rng.randrange(2**32) for _ in range(7)]
            ch, mode = rng.randrange(2), rng.randrange(5)
            msg = p.StimConfig(ch, mode, 0, *u32[:4], rng.randrange(65536), *u32[4:])
        elif kind == 2:
            msg = p.CaptureConfig([(rng.randrange(8), rng.randrange(16)) for _ in range(rng.randrange(17))])
        elif kind == 3:
            msg = p.Start(rng.randrange(4), rng.randrange(2), rng.randrange(2**64))
        elif kind == 4:
            msg = p.Stop(rng.randrange(4))
        elif kind == 5:
            msg = p.StatusReq()
        elif kind == 6:
            msg = p.TimeReq()
        elif kind == 7:
            msg = p.EngineConfig(*(rng.randrange(256) for _ in range(9)), rng.randrange(2**32), rng.randrange(65536),
                                 rng.randrange(256), [rng.randrange(2**32) for _ in range(3)], rng.randrange(2),
                                 rng.randrange(2**32), rng.randrange(65536))
        elif kind == 8:
            msg = p.EngineStatsReq()
        elif kind == 9:
            msg = p.EngineFlush()
        elif kind == 10:
            msg = p.StreamConfig(rng.randrange(2), rng.randrange(2**32), rng.randrange(2**32), rng.randrange(65536),
                                 rng.randrange(65536), rng.randrange(65536))
        elif kind == 11:
            msg = p.StreamStatusReq()
        else:
            msg = p.NetConfig(rng.randrange(2**32), rng.randrange(2**48))
        out.append(msg.encode(k))
    return out


def test_c_stream_mixed(tool_checked):
    cmds = command_stream(0)
    longest = p.encode_frame(0x90, 60, bytes(range(1, 247)))  # unknown type, 250-byte payload
    assert len(longest) == p.MAX_WIRE
    stream = (
        b"\x13\x37" + b"\x00"  # garbage
        + cmds[0]
        + b"\x00\x00"  # empty frames: ignored
        + p.encode_frame(p.MSG_STOP, 50, b"\x03", version=1)
        + p.encode_frame(0x8E, 51, b"")  # unknown
        + p.encode_frame(p.MSG_ACK, 52, b"\x00\x00\x00\x00")  # rig type
        + p.encode_frame(p.MSG_HELLO, 53, b"")  # bad length
        + cmds[1][:-3] + b"\x00"  # truncated
        + b"\x42" * 300 + b"\x00"  # overlong
        + b"\x42" * 255 + b"\x00"  # 255 bytes: a legal length, bad COBS
        + longest  # 255 bytes, valid: must not be taken for an overlong frame
        + b"".join(cmds[2:])
    )
    seqs, c = c_stream(tool_checked, stream)
    dec = p.FrameDecoder(from_host=True)
    got = dec.feed(stream)
    assert seqs == [f.seq for f in got] == [0] + list(range(2, len(cmds)))
    assert c == py_counters(dec)
    assert c["corrupt"] == 4 and c["wrong_version"] == 1 and c["unknown_type"] == 3 and c["malformed"] == 1
    assert c["resync_bytes"] == 3 + len(cmds[1]) - 2 + 301 + 256


def test_c_stream_fuzz(tool_checked):
    rng = random.Random(77)
    lines, decs = [], []
    for it in range(150):
        if it % 3 == 0:
            data = bytes(0 if rng.random() < 0.02 else rng.randrange(256) for _ in range(rng.randrange(3000)))
        else:
            stream = b"".join(command_stream(it))
            data = bytes(b for b, _ in mutate(stream, rng, rng.randrange(0, 10)))
        data += b"\x00"
        dec = p.FrameDecoder(from_host=True)
        got = dec.feed(data)
        decs.append(([f.seq for f in got], py_counters(dec)))
        lines.append(f"stream {data.hex()}")
    out = tool_checked.run(lines)
    for line, (seqs, counters) in zip(out, decs):
        tok, *rest = line.split()
        s = tok.removeprefix("seqs=")
        assert ([] if s == "-" else [int(x) for x in s.split(",")]) == seqs
        assert {k: int(v) for k, v in (t.split("=") for t in rest)} == counters


def test_c_parse_random_frames(tool_checked):
    """Random payloads with a valid CRC reach the body parser: Python and C agree on each."""
    rng = random.Random(21)
    lines, expect = [], []
    for _ in range(400):
        msg_type = rng.choice([*p.HOST_MESSAGES, 0x80, 0x8E, 0x02])
        seq = rng.randrange(65536)
        body = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 2, 9, 10, 11, 14, 15, 16, 17, 32, 33, 34, 35,
                                                                   36])))
        if msg_type == p.MSG_CAPTURE_CONFIG and body and rng.random() < 0.7:
            body = bytes([rng.randrange(9)]) + body[1:]
            body = body[: 1 + 2 * body[0]] + bytes(max(0, 1 + 2 * body[0] - len(body)))
        wire = p.encode_frame(msg_type, seq, body, version=rng.choice([3, 4, 4, 4]))
        lines.append(f"parse {wire[:-1].hex()}")
        try:
            f = p.decode_frame(wire, p.HOST_MESSAGES)
            if isinstance(f.msg, p.CaptureConfig) and len(f.msg.channels) > 8:
                expect.append(f"err range {msg_type} {seq}")  # C holds at most 8 channels
            else:
                expect.append(tool_line(f.msg, f.seq))
        except p.ProtocolError as e:
            expect.append(f"err {e.reason} {msg_type} {seq}")
    assert tool_checked.run(lines) == expect


def test_c_capture_config_range(tool):
    wire = p.CaptureConfig([(7, 0)] * 17).encode(4)
    with pytest.raises(p.OutOfRange):  # channel masks: at most 16 channels, in Python as in C
        p.decode_frame(wire)
    assert tool.one(f"parse {wire[:-1].hex()}") == f"err range {p.MSG_CAPTURE_CONFIG} 4"


def test_riscv_build():
    """The firmware compiles for the rig's soft CPU."""
    cc = shutil.which("riscv64-unknown-elf-gcc")
    assert cc, "riscv64-unknown-elf-gcc not found: run make setup (Debian package gcc-riscv64-unknown-elf)"
    r = subprocess.run(
        [cc, "-march=rv32i", "-mabi=ilp32", *CFLAGS, "-ffreestanding", "-c", str(FIRMWARE / "protocol.c"),
         "-o", "/dev/null"],
        capture_output=True, text=True,
    )
    assert r.returncode == 0, r.stderr
