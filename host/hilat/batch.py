"""Frames to record arrays: ``BatchDecoder.feed_batch`` gives the EVENTS records of a piece of the
stream as numpy arrays and the other frames as ``protocol.Frame`` objects.

Why: a capture must take millions of records per second, and ``Events.from_body`` makes a Python
tuple per record. Here a clean piece (every frame intact, in sequence, of this protocol version)
is decoded for all its frames at once: the COBS code-byte chains of all frames are followed
together (one numpy step per code byte), then the records of all EVENTS bodies (one numpy step per
record index, the uleb128 delta byte by byte), and the timestamps are a cumulative sum from each
frame's base. A piece that is not clean (a CRC failure, a gap, a replay, another version, an
overlong or malformed frame...) goes through ``FrameDecoder.feed`` instead, so the counters and
rules are exactly the per-frame decoder's in every case.
"""

import zlib
from typing import NamedTuple

import numpy as np

from hilat import protocol as p

_MAX_RECORDS = (p.MAX_PAYLOAD - p.EVENTS_EMPTY) // 3 + 1  # records an EVENTS frame can hold (1-byte masks)


class RecordBatch(NamedTuple):
    ticks: np.ndarray     # uint64 record timestamps, in arrival order
    channels: np.ndarray  # uint16 channel masks
    levels: np.ndarray    # uint16 level masks
    frames: list          # the frames that are not EVENTS, in arrival order
    events_frames: int    # EVENTS frames decoded into the arrays


def _empty_batch(frames=(), events_frames=0):
    return RecordBatch(np.zeros(0, np.uint64), np.zeros(0, np.uint16), np.zeros(0, np.uint16), list(frames),
                       events_frames)


class _NotClean(Exception):
    """The piece needs the per-frame decoder."""


class BatchDecoder(p.FrameDecoder):
    def feed_batch(self, data: bytes) -> RecordBatch:
        data = bytes(data)
        if not self._overlong:
            try:
                return self._fast(data)
            except _NotClean:
                pass
        return self._slow(data)

    # ---- the per-frame path (exact rules for anything unusual) ----

    def _slow(self, data):
        parts, frames, n_events = [], [], 0
        for frame in self.feed(data):
            if isinstance(frame.msg, p.Events):
                if frame.msg.records:
                    parts.append(np.array(frame.msg.records, dtype=np.uint64).reshape(-1, 3))
                n_events += 1
            else:
                frames.append(frame)
        if not parts:
            return _empty_batch(frames, n_events)
        table = np.concatenate(parts)
        return RecordBatch(table[:, 0].copy(), table[:, 1].astype(np.uint16), table[:, 2].astype(np.uint16), frames,
                           n_events)

    # ---- the vectorised path ----

    def _fast(self, data):
        buf_bytes = self._pending + data
        cut = buf_bytes.rfind(b"\x00")
        if cut < 0:
            if len(buf_bytes) > p.MAX_ENCODED:
                raise _NotClean
            self._pending = buf_bytes
            return _empty_batch()
        buf = np.frombuffer(buf_bytes, dtype=np.uint8, count=cut + 1)
        zeros = np.flatnonzero(buf == 0)
        starts = np.concatenate(([0], zeros[:-1] + 1))
        ends = zeros                                    # exclusive: the delimiter
        keep = ends > starts                            # consecutive zeros: empty frames, ignored
        starts, ends = starts[keep], ends[keep]
        if not len(starts):
            self._pending = buf_bytes[cut + 1:]
            return _empty_batch()
        lengths = ends - starts
        if lengths.max() > p.MAX_ENCODED or lengths.min() < p.MIN_FRAME + 1:
            raise _NotClean
        # COBS: follow every frame's code-byte chain together; each code byte after the first stands
        # for a zero. A 0xFF code (254 non-zero bytes in a row) is rare: the per-frame path has it.
        decoded = buf.copy()
        pos = starts.copy()
        active = np.ones(len(starts), bool)
        first = True
        while active.any():
            at = pos[active]
            code = buf[at]
            if (code == 0xFF).any():
                raise _NotClean
            if not first:
                decoded[at] = 0
            first = False
            pos[active] = at + code
            active = pos < ends
        if (pos != ends).any():
            raise _NotClean                             # a truncated COBS block: corrupt
        # Decoded frame k is decoded[starts[k] + 1 : ends[k]]: header, body, CRC.
        hdr = starts + 1
        version = decoded[hdr]
        msg_type = decoded[hdr + 1]
        seq = decoded[hdr + 2].astype(np.int64) | (decoded[hdr + 3].astype(np.int64) << 8)
        if (version != p.PROTOCOL_VERSION).any():
            raise _NotClean
        expected = self.expected_seq
        if expected is not None and seq[0] != expected:
            raise _NotClean
        if len(seq) > 1 and ((np.diff(seq) & 0xFFFF) != 1).any():
            raise _NotClean
        dec_bytes = decoded.tobytes()
        for s, e in zip(hdr.tolist(), ends.tolist()):
            if zlib.crc32(dec_bytes[s:e - 4]) != int.from_bytes(dec_bytes[e - 4:e], "little"):
                raise _NotClean
        is_events = msg_type == p.MSG_EVENTS
        frames = []
        for k in np.flatnonzero(~is_events).tolist():
            cls = self.messages.get(int(msg_type[k]))
            if cls is None:
                raise _NotClean
            body = dec_bytes[int(hdr[k]) + p.HEADER_SIZE:int(ends[k]) - p.CRC_SIZE]
            try:
                frames.append(p.Frame(int(seq[k]), cls.from_body(body)))
            except p.ProtocolError:
                raise _NotClean from None
        events = np.flatnonzero(is_events)
        if len(events) and p.MSG_EVENTS not in self.messages:
            raise _NotClean
        ticks, chans, levels = self._records(decoded, hdr[events] + p.HEADER_SIZE, ends[events] - p.CRC_SIZE)
        # Commit the decoder's state as FrameDecoder would have left it.
        self.frames_ok += len(starts)
        self.expected_seq = int((seq[-1] + 1) & 0xFFFF)
        for k in range(max(0, len(starts) - self.DUPLICATE_WINDOW), len(starts)):
            s = int(seq[k])
            self._recent[s % self.DUPLICATE_WINDOW] = (s, buf_bytes[int(starts[k]):int(ends[k])])
        self._pending = buf_bytes[cut + 1:]
        if len(self._pending) > p.MAX_ENCODED:
            self._overlong += len(self._pending)
            self._pending = b""
        return RecordBatch(ticks, chans, levels, frames, len(events))

    @staticmethod
    def _records(decoded, body_start, body_end):
        """Records of EVENTS bodies [body_start, body_end) of ``decoded``, frame by frame in order."""
        n = len(body_start)
        if not n:
            return np.zeros(0, np.uint64), np.zeros(0, np.uint16), np.zeros(0, np.uint16)
        if (body_end - body_start < 9).any():
            raise _NotClean
        base = np.zeros(n, np.uint64)
        for i in range(8):
            base |= decoded[body_start + i].astype(np.uint64) << np.uint64(8 * i)
        mask_bytes = decoded[body_start + 8].astype(np.int64)
        if ((mask_bytes != 1) & (mask_bytes != 2)).any():
            raise _NotClean
        wide = mask_bytes == 2
        deltas = np.zeros((n, _MAX_RECORDS), np.uint64)
        chans = np.zeros((n, _MAX_RECORDS), np.uint16)
        levels = np.zeros((n, _MAX_RECORDS), np.uint16)
        valid = np.zeros((n, _MAX_RECORDS), bool)
        pos = body_start + 9
        limit = len(decoded) - 1
        step = 0
        active = pos < body_end
        while active.any():
            if step >= _MAX_RECORDS:
                raise _NotClean
            rows = np.flatnonzero(active)
            at = pos[rows]
            end = body_end[rows]
            delta = np.zeros(len(rows), np.uint64)
            going = np.ones(len(rows), bool)
            for shift in range(10):
                where = np.minimum(at, limit)
                byte = decoded[where].astype(np.uint64)
                if (going & (at >= end)).any():
                    raise _NotClean                     # the delta runs past the body: truncated record
                delta |= np.where(going, (byte & np.uint64(0x7F)) << np.uint64(7 * shift), np.uint64(0))
                at = at + going
                going = going & (byte >= 0x80)
                if not going.any():
                    break
            else:
                raise _NotClean                         # a uleb128 longer than 10 bytes
            w = wide[rows]
            if (at + np.where(w, 4, 2) > end).any():
                raise _NotClean
            c0, c1 = decoded[np.minimum(at, limit)], decoded[np.minimum(at + 1, limit)]
            c2, c3 = decoded[np.minimum(at + 2, limit)], decoded[np.minimum(at + 3, limit)]
            ch = np.where(w, c0.astype(np.uint16) | (c1.astype(np.uint16) << 8), c0)
            lv = np.where(w, c2.astype(np.uint16) | (c3.astype(np.uint16) << 8), c1)
            deltas[rows, step] = delta
            chans[rows, step] = ch
            levels[rows, step] = lv
            valid[rows, step] = True
            pos[rows] = at + np.where(w, 4, 2)
            active = pos < body_end
            step += 1
        deltas[:, 0] += base                            # uint64 arithmetic: timestamps mod 2**64
        ticks = np.cumsum(deltas[:, :step], axis=1, dtype=np.uint64)
        sel = valid[:, :step]
        return ticks[sel], chans[:, :step][sel], levels[:, :step][sel]
