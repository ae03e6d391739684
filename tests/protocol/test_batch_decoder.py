"""The vectorised decoder (hilat.link.batch) against the per-frame one (protocol.FrameDecoder): the same
records, the same other frames, the same counters and state, on clean streams cut anywhere and on
every kind of damage; and, per feature, a hand-built case with its expected value."""

import random
import zlib

import numpy as np
import pytest
from hilat.link import protocol as p
from hilat.link.batch import BatchDecoder, RecordBatch

MASK64 = (1 << 64) - 1
OTHERS = [p.Ack(3, 0, "ok"), p.Time(4, 123456789), p.Overflow(99, 0b101), p.Status(1, 2, 3, 0, [0, 1, 2], [1])]


# ---- streams ---------------------------------------------------------------------------------


def _delta(rng):
    """A delta whose uleb128 takes 1 to 10 bytes (0 included: zero bytes in the payload)."""
    n_bytes = rng.choice([1, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    low = 0 if n_bytes == 1 else 1 << (7 * (n_bytes - 1))
    return rng.randrange(low, min(1 << (7 * n_bytes), 1 << 64))


def _records(rng, n, mask_bytes):
    ts = rng.choice([0, rng.randrange(1 << 64), MASK64 - 1000])  # near the top: wraps past 2**64
    limit = 1 << (8 * mask_bytes)
    out = []
    for _ in range(n):
        ts = (ts + _delta(rng)) & MASK64
        # zero masks are frequent: many zero bytes, many COBS blocks
        out.append((ts, rng.choice([0, 1, rng.randrange(limit)]), rng.choice([0, 0, rng.randrange(limit)])))
    return out


def _zero_frame(seq):
    """An EVENTS frame whose payload is nearly all zeros (base 0, deltas 0, masks 0)."""
    return p.Events(0, [(0, 0, 0)] * 79).encode(seq)


def _ff_frame(seq, rng):
    """An EVENTS frame of 254 decoded bytes without a zero: COBS needs a 0xFF block (None when the
    seq has a zero byte)."""
    if not (seq & 0xFF and seq >> 8):
        return None
    while True:
        base = int.from_bytes(bytes(rng.randrange(1, 256) for _ in range(8)), "little")
        body = base.to_bytes(8, "little") + b"\x01" + bytes(rng.randrange(1, 128) if i % 3 == 0 else
                                                             rng.randrange(1, 256) for i in range(3 * 79))
        frame = p.encode_frame(p.MSG_EVENTS, seq, body)
        if frame[0] == 0xFF:  # else its CRC has a zero byte: try another base
            return frame


def _stream(rng, n_records=300, mask_bytes=1, seq=None, others=0.1, specials=0.05):
    """Wire frames (one bytes object each) of a clean stream: EVENTS frames of n_records records
    (pack_events; mask_bytes None: both widths), with other frames, zero-heavy frames and 0xFF-block
    frames in between."""
    seq = rng.randrange(1 << 16) if seq is None else seq
    frames = []

    def add(frame):
        nonlocal seq
        frames.append(frame)
        seq = (seq + 1) & 0xFFFF

    if mask_bytes is None:  # both widths, in groups of frames
        events = []
        while len(events) < max(1, n_records // 20):
            width = rng.choice([1, 2])
            events += p.pack_events(_records(rng, rng.randrange(1, 200), width), mask_bytes=width)
    else:
        events = p.pack_events(_records(rng, n_records, mask_bytes), mask_bytes=mask_bytes)
    for ev in events:
        add(ev.encode(seq))
        if rng.random() < others:
            add(rng.choice(OTHERS).encode(seq))
        if rng.random() < specials:
            add(_zero_frame(seq))
        if rng.random() < specials:
            ff = _ff_frame(seq, rng)
            if ff is not None:
                add(ff)
    return frames


def _cut(rng, data, k):
    """data cut at k random places."""
    if len(data) < 2:
        return [data]
    cuts = sorted(rng.sample(range(1, len(data)), min(k, len(data) - 1)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


# ---- comparison --------------------------------------------------------------------------------


def _flatten(frames):
    records, other = [], []
    for f in frames:
        if isinstance(f.msg, p.Events):
            records.extend(f.msg.records)
        else:
            other.append(f)
    return records, other


def _batch_records(batch):
    return list(zip(batch.ticks.tolist(), batch.channels.tolist(), batch.levels.tolist()))


def _state(d):
    return (d.counters(), d.expected_seq, d.last_wrong_version, d.pending, d._pending, d._overlong, d._recent)


def _compare(pieces, expected_seq=None, from_host=False, batch_calls=None):
    """Feed the pieces to a FrameDecoder and a BatchDecoder (feed_batch, or feed where batch_calls
    says False): same records, other frames, counters and state after every piece."""
    ref = p.FrameDecoder(from_host, expected_seq)
    dec = BatchDecoder(from_host, expected_seq)
    ref_frames, records, other, n_events = [], [], [], 0
    for k, piece in enumerate(pieces):
        ref_frames += ref.feed(piece)
        if batch_calls is None or batch_calls[k]:
            batch = dec.feed_batch(piece)
            assert batch.ticks.dtype == np.uint64
            assert batch.channels.dtype == batch.levels.dtype == np.uint16
            records += _batch_records(batch)
            other += batch.frames
            n_events += batch.events_frames
        else:
            got = _flatten(dec.feed(piece))
            records += got[0]
            other += got[1]
        assert _state(dec) == _state(ref)
    ref_records, ref_other = _flatten(ref_frames)
    assert records == ref_records
    assert other == ref_other
    if batch_calls is None:
        assert n_events == sum(isinstance(f.msg, p.Events) for f in ref_frames)
    return ref, records


# ---- equivalence -------------------------------------------------------------------------------


@pytest.mark.parametrize("mask_bytes", [1, 2, None])
def test_clean_streams_whole_and_cut_anywhere(mask_bytes):
    rng = random.Random(100 + (mask_bytes or 0))
    for _case in range(60):
        data = b"".join(_stream(rng, rng.randrange(1, 600), mask_bytes))
        ref, _ = _compare(_cut(rng, data, rng.choice([0, 0, 1, 4, 40])), expected_seq=rng.choice([None, None, 0]))
        assert ref.corrupt == ref.malformed == ref.duplicate == 0


def test_one_byte_feeds():
    rng = random.Random(7)
    for mask_bytes in (1, 2):
        data = b"".join(_stream(rng, 120, mask_bytes, specials=0.3))
        _compare([data[i : i + 1] for i in range(len(data))])


def test_feed_and_feed_batch_mixed_on_one_decoder():
    rng = random.Random(8)
    for _case in range(30):
        data = b"".join(_stream(rng, 400, rng.choice([1, 2])))
        pieces = _cut(rng, data, 12)
        _compare(pieces, batch_calls=[rng.random() < 0.5 for _ in pieces])


def _damage(rng, frames, kind):
    """Damage one place of a list of wire frames (in place)."""
    k = rng.randrange(len(frames))
    if kind == "flip":  # a corrupt byte (CRC or COBS failure)
        f = bytearray(frames[k])
        f[rng.randrange(len(f) - 1)] ^= 1 << rng.randrange(8)
        frames[k] = bytes(f)
    elif kind == "zeroed":  # a byte turned into a delimiter: a frame cut in two
        f = bytearray(frames[k])
        f[rng.randrange(len(f) - 1)] = 0
        frames[k] = bytes(f)
    elif kind == "drop":  # a gap in the sequence
        del frames[k : k + rng.choice([1, 1, 3])]
    elif kind == "replay":  # a link sends a frame again, right after or later
        frames.insert(rng.randrange(k + 1, min(k + 70, len(frames)) + 1), frames[k])
    elif kind == "version":
        frames.insert(k, p.encode_frame(p.MSG_EVENTS, rng.randrange(1 << 16), b"\x00" * 9, version=6))
    elif kind == "unknown_type":
        frames.insert(k, p.encode_frame(rng.choice([0x7E, p.MSG_HELLO]), rng.randrange(1 << 16), b"abc"))
    elif kind == "truncated_record":  # CRC right, the last record lacks its level mask
        frames.insert(k, p.encode_frame(p.MSG_EVENTS, rng.randrange(1 << 16),
                                        (1000).to_bytes(8, "little") + b"\x01\x05\x01\x01\x05\x01"))
    elif kind == "long_uleb":  # CRC right, an 11-byte uleb128
        frames.insert(k, p.encode_frame(p.MSG_EVENTS, rng.randrange(1 << 16), (1000).to_bytes(8, "little")
                                        + b"\x01" + b"\x81" * 10 + b"\x01\x01\x01"))
    elif kind == "bad_mask_bytes":
        frames.insert(k, p.encode_frame(p.MSG_EVENTS, rng.randrange(1 << 16), bytes(8) + b"\x03"))
    elif kind == "short_body":  # CRC right, an EVENTS body shorter than base + mask_bytes
        frames.insert(k, p.encode_frame(p.MSG_EVENTS, rng.randrange(1 << 16), rng.choice([b"", b"\x01" * 8])))
    elif kind == "garbage":  # overlong, without a zero
        frames.insert(k, bytes(rng.randrange(1, 256) for _ in range(rng.choice([300, 3000]))) + b"\x00")
    elif kind == "short":
        frames.insert(k, bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 9))) + b"\x00")
    elif kind == "empty":
        frames.insert(k, b"\x00\x00")
    else:
        raise AssertionError(kind)


DAMAGE = ["flip", "zeroed", "drop", "replay", "version", "unknown_type", "truncated_record", "long_uleb",
          "bad_mask_bytes", "short_body", "garbage", "short", "empty"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_streams(kind):
    rng = random.Random(zlib.crc32(kind.encode()))
    for _case in range(25):
        frames = _stream(rng, rng.randrange(200, 600), rng.choice([1, 2, None]))
        for _ in range(rng.choice([1, 1, 3])):
            _damage(rng, frames, kind)
        data = b"".join(frames)
        _compare(_cut(rng, data, rng.choice([0, 0, 3, 30])), expected_seq=rng.choice([None, 0]))


def test_every_kind_of_damage_at_once_and_random_garbage():
    rng = random.Random(9)
    for _case in range(40):
        frames = _stream(rng, 800, rng.choice([1, 2, None]), specials=0.2)
        for kind in rng.sample(DAMAGE, 5):
            _damage(rng, frames, kind)
        data = bytearray(b"".join(frames))
        for _ in range(rng.randrange(3)):  # random bytes anywhere, zeros included
            i = rng.randrange(len(data))
            data[i : i + 1] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 20)))
        _compare(_cut(rng, bytes(data), rng.choice([0, 5])), expected_seq=rng.choice([None, 0]))


def test_host_direction_decoder():
    """A decoder of host frames: EVENTS is an unknown type there."""
    rng = random.Random(10)
    frames = _stream(rng, 300) + [p.Hello().encode(5), p.Stop(1).encode(6)]
    ref, _ = _compare([b"".join(frames)], from_host=True)
    assert ref.frames_ok == 2 and ref.unknown_type == len(frames) - 2


# ---- expected values, feature by feature -------------------------------------------------------


def _frames(records, mask_bytes=1, seq=0):
    return [e.encode((seq + k) & 0xFFFF) for k, e in enumerate(p.pack_events(records, mask_bytes=mask_bytes))]


def test_known_ticks_and_masks():
    records = [(1000, 0b1, 0b1), (1010, 0b1, 0), (1060, 0b100, 0b100), (MASK64, 0b100, 0), (4, 0b1, 1)]
    data = b"".join(_frames(records))
    batch = BatchDecoder().feed_batch(data)
    assert isinstance(batch, RecordBatch) and batch.events_frames == 1 and batch.frames == []
    assert batch.ticks.tolist() == [1000, 1010, 1060, MASK64, 4]  # MASK64 -> 4: a wrap of 5 ticks
    assert batch.channels.tolist() == [1, 1, 4, 4, 1] and batch.levels.tolist() == [1, 0, 4, 0, 1]


def test_hand_built_frame_ten_byte_deltas_and_two_byte_masks():
    # base 2**64 - 2; deltas 3 (1 byte, wraps to 1), 300 (2 bytes), 2**63 (10 bytes)
    body = (MASK64 - 1).to_bytes(8, "little") + b"\x02"
    body += b"\x03" + b"\x01\x80" + b"\x02\x00"
    body += b"\xac\x02" + b"\xff\xff" + b"\x00\x00"
    body += b"\x80" * 9 + b"\x01" + b"\x34\x12" + b"\x78\x56"
    batch = BatchDecoder().feed_batch(p.encode_frame(p.MSG_EVENTS, 7, body))
    assert batch.ticks.tolist() == [1, 301, 301 + (1 << 63)]
    assert batch.channels.tolist() == [0x8001, 0xFFFF, 0x1234]
    assert batch.levels.tolist() == [0x0002, 0, 0x5678]


def test_many_frames_at_once_known_ticks():
    records = [(10 * i, i % 256, (i * 7) % 256) for i in range(1000)]
    frames = _frames(records, seq=0xFFF8)  # the seq wraps past 0xFFFF on the way
    d = BatchDecoder()
    batch = d.feed_batch(b"".join(frames))
    assert _batch_records(batch) == records
    assert batch.events_frames == len(frames) == d.frames_ok
    assert len(frames) > 8 and d.expected_seq == (0xFFF8 + len(frames)) & 0xFFFF and d.lost == 0
    d = BatchDecoder()
    d.feed_batch(b"".join(frames[:8]))  # up to seq 0xFFFF
    assert d.expected_seq == 0
    done = sum(len(p.decode_frame(f).msg.records) for f in frames[:8])
    assert _batch_records(d.feed_batch(b"".join(frames[8:]))) == records[done:] and d.lost == 0


def test_zero_heavy_and_0xff_block_frames():
    rng = random.Random(11)
    ff = _ff_frame(0x0505, rng)
    assert ff[0] == 0xFF and len(ff) == p.MAX_WIRE
    zero = _zero_frame(0x0506)
    assert zero.count(1) > 80  # a code byte for every zero
    d = BatchDecoder()
    batch = d.feed_batch(ff + zero + _zero_frame(0x0507) + _zero_frame(0x0508))
    payload = p.cobs_decode(ff[:-1])
    base, first_delta = int.from_bytes(payload[4:12], "little"), payload[13]
    assert batch.ticks[0] == (base + first_delta) & MASK64 and batch.channels[0] == payload[14]
    assert _batch_records(batch) == p.decode_frame(ff).msg.records + [(0, 0, 0)] * (3 * 79)
    assert d.frames_ok == 4 and d.corrupt == 0


def test_a_frame_split_across_calls():
    frames = _frames([(100, 1, 1), (150, 1, 0)]) + _frames([(200, 2, 2)], seq=1)
    data = b"".join(frames)
    d = BatchDecoder()
    half = len(frames[0]) // 2
    assert d.feed_batch(data[:half]).ticks.size == 0 and d.pending == half
    assert d.feed_batch(data[half:]).ticks.tolist() == [100, 150, 200]
    assert d.pending == 0 and d.frames_ok == 2


def test_corrupt_frame_counted_others_kept():
    frames = [f for k in range(6) for f in _frames([(1000 * k + 1, 1, 0)], seq=k)]
    bad = bytearray(frames[2])
    assert bad[5] not in (0, 0x40)
    bad[5] ^= 0x40
    frames[2] = bytes(bad)
    d = BatchDecoder(expected_seq=0)
    batch = d.feed_batch(b"".join(frames))
    assert batch.ticks.tolist() == [1, 1001, 3001, 4001, 5001]
    assert d.corrupt == 1 and d.resync_bytes == len(frames[2]) and d.lost == 1 and d.frames_ok == 5


def test_gap_and_replay():
    frames = [f for k in range(8) for f in _frames([(k + 1, 1, 0)], seq=k)]
    d = BatchDecoder()
    batch = d.feed_batch(b"".join(frames[:3] + frames[5:] + [frames[6]]))  # 3, 4 lost; 6 replayed
    assert batch.ticks.tolist() == [1, 2, 3, 6, 7, 8]
    assert d.lost == 2 and d.duplicate == 1 and d.expected_seq == 8


def test_wrong_version_unknown_type_malformed_events():
    good = [f for k in range(5) for f in _frames([(k + 1, 1, 0)], seq=k)]
    wrong = p.encode_frame(p.MSG_EVENTS, 5, bytes(9), version=6)
    unknown = p.encode_frame(0x7E, 5, b"")
    truncated = p.encode_frame(p.MSG_EVENTS, 6, bytes(8) + b"\x01\x05\x01")
    long_uleb = p.encode_frame(p.MSG_EVENTS, 7, bytes(8) + b"\x01" + b"\x81" * 10 + b"\x01\x01\x01")
    tail = [f for k in range(3) for f in _frames([(k + 100, 1, 0)], seq=8 + k)]
    d = BatchDecoder(expected_seq=0)
    batch = d.feed_batch(b"".join(good + [wrong, unknown, truncated, long_uleb] + tail))
    assert batch.ticks.tolist() == [1, 2, 3, 4, 5, 100, 101, 102]
    assert (d.wrong_version, d.last_wrong_version, d.unknown_type, d.malformed) == (1, 6, 1, 2)
    assert d.lost == 0 and d.frames_ok == 8 and d.expected_seq == 11


def test_overlong_garbage_without_zeros():
    d = BatchDecoder()
    for _ in range(3):
        assert d.feed_batch(b"\x55" * 1000).ticks.size == 0
    assert d.pending == 3000 and len(d._pending) <= p.MAX_ENCODED
    frames = [f for k in range(6) for f in _frames([(k + 1, 1, 0)], seq=k)]
    batch = d.feed_batch(b"\x55" * 10 + b"\x00" + b"".join(frames))
    assert batch.ticks.tolist() == [1, 2, 3, 4, 5, 6]
    assert d.corrupt == 1 and d.resync_bytes == 3011 and d.pending == 0


def test_other_frames_interleaved_in_order():
    events = p.pack_events([(10, 1, 1), (20, 1, 0)])[0]
    messages = [events, p.Ack(3, 0, "ok"), events, p.Status(5, 6, 7, 0, [0], [p.STIM_DONE]), p.Time(9, 12345),
                events, p.Overflow(77, 0b10), events, events]
    d = BatchDecoder()
    batch = d.feed_batch(b"".join(m.encode(k) for k, m in enumerate(messages)))
    assert batch.frames == [p.Frame(1, messages[1]), p.Frame(3, messages[3]), p.Frame(4, messages[4]),
                            p.Frame(6, messages[6])]
    assert batch.ticks.tolist() == [10, 20] * 5 and batch.events_frames == 5


def test_empty_events_frame():
    frames = [p.Events(123).encode(k) for k in range(5)]
    batch = BatchDecoder().feed_batch(b"".join(frames))
    assert batch.ticks.size == 0 and batch.events_frames == 5


def test_reset_sequence():
    frames = [f for k in range(6) for f in _frames([(k + 1, 1, 0)], seq=k)]
    d = BatchDecoder()
    d.feed_batch(b"".join(frames))
    d.reset_sequence(0)  # a new session: seq 0 expected; the old frames are no replays of it
    batch = d.feed_batch(b"".join(frames[:5]))
    assert batch.ticks.tolist() == [1, 2, 3, 4, 5] and d.lost == 0 and d.duplicate == 0
    batch = d.feed_batch(b"".join(frames[:5] + frames[5:]))  # a replay of all five, then seq 5
    assert batch.ticks.tolist() == [6] and d.duplicate == 5 and d.expected_seq == 6


def test_clean_events_skip_the_per_frame_path(monkeypatch):
    """The reason for the module: intact EVENTS frames in sequence never reach FrameDecoder._frame
    (only the frame split across calls and the other types do)."""
    calls = []
    d = BatchDecoder()
    original = d._frame
    monkeypatch.setattr(d, "_frame", lambda enc, out: calls.append(enc) or original(enc, out))
    rng = random.Random(12)
    frames = _stream(rng, 2000, others=0, specials=0.1)
    d.feed_batch(b"".join(frames))
    assert calls == [] and d.frames_ok == len(frames)
    ack = p.Ack(1, 0, "").encode(d.expected_seq)
    events = _frames([(5 * i, 1, 1) for i in range(1000)], seq=(d.expected_seq + 1) & 0xFFFF)
    batch = d.feed_batch(ack + b"".join(events))
    assert calls == [ack[:-1]] and batch.events_frames == len(events) and len(batch.ticks) == 1000
    # A corrupt code byte whose chain runs on into the next frame: that one stays intact.
    calls.clear()
    events = _frames([(5 * i, 1, 1) for i in range(1000)], seq=d.expected_seq)
    bad = bytearray(events[0])
    code = 0
    while code + bad[code] < len(bad) - 1:
        code += bad[code]
    bad[code] = len(bad) - code + 1  # the last code byte, now pointing at the next frame's version byte
    batch = d.feed_batch(b"".join(events[:1] + [bytes(bad)] + events[1:]))
    assert calls == [bad[:-1]] and batch.events_frames == len(events) and d.corrupt == 1 and d.lost == 0


def test_fractions_and_mixed_record_layouts_in_one_piece():
    """EVENTS frames with 1- and 2-byte fractions, 1- and 2-byte masks and none, mixed in one piece
    (more than _MIN_VECTOR frames): every record's fraction as from_body gives it, 0 where none."""
    rng = np.random.default_rng(16)
    frames, expected, seq = [], [], 0
    for layout in [(1, 1), (2, 2), (1, 0), (2, 1), (1, 2), (2, 0), (1, 1)]:
        mask_bytes, fraction_bytes = layout
        t = int(rng.integers(0, 1 << 40))
        records = []
        for _ in range(int(rng.integers(1, 30))):
            t += int(rng.choice([0, 1, 127, 128, 20_000]))
            rec = (t, int(rng.integers(0, 1 << (8 * mask_bytes))), int(rng.integers(0, 1 << (8 * mask_bytes))))
            records.append((*rec, int(rng.integers(0, 1 << (8 * fraction_bytes)))) if fraction_bytes else rec)
        for frame in p.pack_events(records, mask_bytes=mask_bytes, fraction_bytes=fraction_bytes):
            frames.append(frame.encode(seq))
            seq += 1
            expected += [(*r[:3], r[3] if fraction_bytes else 0) for r in frame.records]
    batch = BatchDecoder().feed_batch(b"".join(frames))
    got = list(zip(batch.ticks.tolist(), batch.channels.tolist(), batch.levels.tolist(), batch.fractions.tolist()))
    assert got == expected and batch.events_frames == len(frames)
    # One frame at a time (the per-frame path) gives the same.
    d = BatchDecoder()
    parts = [d.feed_batch(f) for f in frames]
    assert sum((b.fractions.tolist() for b in parts), []) == [r[3] for r in expected]


def test_tdc_fractions_of_up_to_8_bytes_agree_with_the_reference_decoder():
    """Protocol 5's TDC codes: fractions of 3 .. 8 bytes (64-bit values up to 2**64 - 1) among the
    older layouts, in one piece: the vectorised decoder gives (uint64) what FrameDecoder's per-record
    Events.from_body gives; a frame whose fraction nibble is 9 is malformed and counted, both ways,
    and the frames around it still decode."""
    rng = random.Random(35)
    frames, seq = [], 0
    for mask_bytes, fraction_bytes in [(1, 4), (2, 8), (1, 8), (1, 0), (2, 3), (1, 1), (2, 8), (1, 4), (2, 2)]:
        t = rng.getrandbits(64)
        records = []
        for _ in range(rng.randrange(1, 40)):
            t = (t + rng.choice([0, 1, 127, 128, 20_000, 1 << 50])) & p.MASK64
            rec = (t, rng.getrandbits(8 * mask_bytes), rng.getrandbits(8 * mask_bytes))
            fraction = rng.choice([0, p.MASK64, 1 << 63, rng.getrandbits(8 * fraction_bytes)])
            records.append((*rec, fraction & ((1 << 8 * fraction_bytes) - 1)) if fraction_bytes else rec)
        for frame in p.pack_events(records, mask_bytes=mask_bytes, fraction_bytes=fraction_bytes):
            frames.append(frame.encode(seq))
            seq += 1
    nine = bytearray(p.Events(5, [(6, 1, 1, 7)], 1, 8).body())
    nine[8] = 0x91   # masks of 1 byte, 9 fraction bytes: beyond the protocol
    frames.insert(4, p.encode_frame(p.MSG_EVENTS, 4, bytes(nine) + bytes(1)))
    frames[5:] = [p.encode_frame(p.MSG_EVENTS, 5 + k, p.decode_frame(f).msg.body()) for k, f in enumerate(frames[5:])]
    reference = p.FrameDecoder()
    expected = [(*r[:3], r[3] if len(r) == 4 else 0) for f in reference.feed(b"".join(frames)) for r in f.msg.records]
    assert reference.malformed == 1 and len(expected) > 100
    d = BatchDecoder()
    batch = d.feed_batch(b"".join(frames))
    assert batch.fractions.dtype == np.uint64
    got = list(zip(batch.ticks.tolist(), batch.channels.tolist(), batch.levels.tolist(), batch.fractions.tolist()))
    assert got == expected and d.malformed == 1 and d.frames_ok == len(frames) - 1
    assert max(r[3] for r in expected) == p.MASK64


def test_version_2_frames_of_an_old_raw_bin_decode():
    """A run's raw.bin from a version-2 rig: its EVENTS (no fraction byte) still decode, in bulk and
    one by one; a live session's decoder (ours only) refuses them."""
    records = [(5 + k, 1 << (k % 6), k & 0x3F) for k in range(40)]
    v2 = [p.encode_frame(p.MSG_EVENTS, k, e.body(), version=2) for k, e in enumerate(p.pack_events(records[:10]))]
    v2 += [p.encode_frame(p.MSG_EVENTS, len(v2) + k, p.Events(r[0], [r]).body(), version=2)
           for k, r in enumerate(records[10:])]
    batch = BatchDecoder().feed_batch(b"".join(v2))
    assert list(zip(batch.ticks.tolist(), batch.channels.tolist(), batch.levels.tolist())) == records
    live = BatchDecoder(versions=(p.PROTOCOL_VERSION,))
    assert len(live.feed_batch(b"".join(v2)).ticks) == 0 and live.wrong_version == len(v2)


def test_version_3_frames_of_an_old_raw_bin_decode():
    """A run's raw.bin from a version-3 rig (before the Ethernet link): its IDENTIFY (no ethernet byte)
    and EVENTS still decode, in bulk and one by one; a live session's decoder refuses them."""
    ident = p.Identify(3, 10**8, 5 * 10**7, 1, 1, 512, 17, 0x3F, 4, 15, 1000, 1, "fw", "gw",
                       [("s", "stimulus"), ("i", "isr")], 3_000_000)
    records = [(7 + 3 * k, 1 << (k % 2), k & 3) for k in range(30)]
    v3 = [ident.encode(0, 3)] + [p.encode_frame(p.MSG_EVENTS, 1 + k, e.body(), version=3)
                                 for k, e in enumerate(p.pack_events(records))]
    frames = p.FrameDecoder(expected_seq=0).feed(b"".join(v3))
    assert frames[0].msg == ident and frames[0].msg.ethernet is None
    assert [r for f in frames[1:] for r in f.msg.records] == records
    batch = BatchDecoder(expected_seq=0).feed_batch(b"".join(v3))
    assert list(zip(batch.ticks.tolist(), batch.channels.tolist(), batch.levels.tolist())) == records
    live = BatchDecoder(versions=(p.PROTOCOL_VERSION,))
    assert len(live.feed_batch(b"".join(v3)).ticks) == 0 and live.wrong_version == len(v3)


def test_bridge_text_vectors():
    """tests/vectors/bridge_text.json (DAPLink's overflow text in the stream): the batch decoder gives
    the vector's records and counters, whole and cut anywhere, as the per-frame decoder does."""
    import json
    from pathlib import Path

    doc = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "bridge_text.json").read_text())
    rng = random.Random(9)
    for v in doc["vectors"]:
        stream = bytes.fromhex(v["stream"])
        for pieces in ([stream], _cut(rng, stream, 5), _cut(rng, stream, 40)):
            ref, records = _compare(pieces, expected_seq=v["expected_seq"])
            assert [list(r) for r in records] == v["records"]
            assert ref.counters() == v["counters"]
