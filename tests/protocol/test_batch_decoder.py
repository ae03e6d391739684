"""The vectorised decoder (hilat.batch) against the per-frame one: same records, same other frames,
same counters and sequence state, on clean streams and on every kind of damage."""

import random
import zlib

import numpy as np
import pytest
from hilat import protocol as p
from hilat.batch import BatchDecoder

MASK64 = (1 << 64) - 1


def _records(rng, n, mask_bytes, start=None):
    ts = rng.randrange(0, 1 << 64) if start is None else start
    out = []
    limit = 1 << (8 * mask_bytes)
    for _ in range(n):
        ts = (ts + rng.choice([0, 1, 5, 127, 128, 300, 20000, 1 << 21, 1 << 40, 1 << 63])) & MASK64
        # zero masks are frequent (falls): many COBS blocks
        out.append((ts, rng.randrange(1, limit), rng.choice([0, 0, rng.randrange(0, limit)])))
    return out


def _stream(rng, n_records=400, mask_bytes=1, seq=0, others=True):
    frames = []
    for ev in p.pack_events(_records(rng, n_records, mask_bytes), mask_bytes=mask_bytes):
        frames.append(ev.encode(seq))
        seq = (seq + 1) & 0xFFFF
        if others and rng.random() < 0.1:
            msg = rng.choice([p.Ack(3, 0, "ok"), p.Time(4, 123456789), p.Overflow(99, 0b101),
                              p.Status(1, 2, 3, 0, [0, 1, 2], [p.STIM_RUNNING])])
            frames.append(msg.encode(seq))
            seq = (seq + 1) & 0xFFFF
    return frames


def _flatten(frames):
    recs, other = [], []
    for f in frames:
        if isinstance(f.msg, p.Events):
            recs.extend(f.msg.records)
        else:
            other.append(f)
    return recs, other


def _batch_records(batch):
    return list(zip(batch.ticks.tolist(), batch.channels.tolist(), batch.levels.tolist()))


def _compare(data, cuts, expected_seq=None):
    ref, fast = p.FrameDecoder(expected_seq=expected_seq), BatchDecoder(expected_seq=expected_seq)
    ref_frames, recs, other = [], [], []
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
    for piece in pieces:
        ref_frames += ref.feed(piece)
        batch = fast.feed_batch(piece)
        recs += _batch_records(batch)
        other += batch.frames
    ref_recs, ref_other = _flatten(ref_frames)
    assert recs == ref_recs
    assert other == ref_other
    assert fast.counters() == ref.counters()
    assert fast.expected_seq == ref.expected_seq and fast.pending == ref.pending
    return recs


def _cuts(rng, n, k):
    return sorted(rng.sample(range(1, n), min(k, n - 1))) if n > 1 else []


@pytest.mark.parametrize("mask_bytes", [1, 2])
def test_clean_streams_any_split(mask_bytes):
    rng = random.Random(mask_bytes)
    for _case in range(40):
        data = b"".join(_stream(rng, 300, mask_bytes, seq=rng.randrange(0, 1 << 16)))
        recs = _compare(data, _cuts(rng, len(data), rng.choice([0, 1, 5, 50])))
        assert len(recs) == 300


def test_one_byte_feeds():
    rng = random.Random(7)
    data = b"".join(_stream(rng, 60))
    _compare(data, list(range(1, len(data))))


@pytest.mark.parametrize("damage", ["flip", "drop_frame", "replay", "version", "unknown_type", "truncated_record",
                                    "long_uleb", "garbage", "ff_block", "zeros"])
def test_damaged_streams_match_the_per_frame_decoder(damage):
    rng = random.Random(zlib.crc32(damage.encode()))
    for _case in range(25):
        frames = _stream(rng, 200, rng.choice([1, 2]))
        k = rng.randrange(len(frames))
        if damage == "flip":
            f = bytearray(frames[k])
            f[rng.randrange(len(f) - 1)] ^= 1 << rng.randrange(8)
            frames[k] = bytes(f)
        elif damage == "drop_frame":
            del frames[k]
        elif damage == "replay":
            frames.insert(k + 1, frames[k])
        elif damage == "version":
            frames.insert(k, p.encode_frame(p.MSG_EVENTS, 5, b"\x00" * 9, version=3))
        elif damage == "unknown_type":
            frames.insert(k, p.encode_frame(0x7E, 5, b"abc"))
        elif damage == "truncated_record":
            frames.insert(k, p.encode_frame(p.MSG_EVENTS, 5, (1000).to_bytes(8, "little") + b"\x01\x05\x01"))
        elif damage == "long_uleb":
            frames.insert(k, p.encode_frame(p.MSG_EVENTS, 5, (1000).to_bytes(8, "little") + b"\x01" + b"\x81" * 11
                                            + b"\x01\x01\x01"))
        elif damage == "garbage":
            frames.insert(k, bytes(rng.randrange(1, 256) for _ in range(400)) + b"\x00")
        elif damage == "ff_block":
            # 254 decoded bytes without a zero (the largest payload): its COBS needs a 0xFF block.
            body = (0x0101010101010101).to_bytes(8, "little") + b"\x01" + b"\x01\x01\x01" * 79
            frames.insert(k, p.encode_frame(p.MSG_EVENTS, 0x0505, body))
        else:
            frames.insert(k, b"\x00\x00")
        data = b"".join(frames)
        _compare(data, _cuts(rng, len(data), rng.choice([0, 3, 30])), expected_seq=rng.choice([None, 0]))


def test_known_ticks_and_masks():
    records = [(1000, 0b1, 0b1), (1010, 0b1, 0), (1060, 0b100, 0b100), ((1 << 64) - 1, 0b100, 0), (4, 0b1, 1)]
    data = b"".join(e.encode(k) for k, e in enumerate(p.pack_events(records)))
    batch = BatchDecoder().feed_batch(data)
    assert batch.ticks.dtype == np.uint64 and batch.events_frames == 1
    assert _batch_records(batch) == records
    assert BatchDecoder().feed_batch(data[:-1]).ticks.size == 0   # no delimiter yet: nothing decoded


def test_a_frame_with_a_0xff_cobs_block_is_decoded():
    body = (0x0101010101010101).to_bytes(8, "little") + b"\x01" + b"\x01\x01\x01" * 79
    frame = p.encode_frame(p.MSG_EVENTS, 0x0505, body)
    batch = BatchDecoder().feed_batch(frame)
    assert len(batch.ticks) == 79 and batch.ticks[0] == 0x0101010101010101 + 1
