"""Frames to record arrays: ``BatchDecoder.feed_batch`` gives the EVENTS records of a piece of the
stream as numpy arrays and the other frames as ``protocol.Frame`` objects.

Why: throughput. A capture must take millions of records per second, and ``FrameDecoder.feed``
makes a Python tuple per record (``Events.from_body``). Here the complete frames of a piece are
decoded all at once: the COBS code-byte chains of all frames are followed together (one numpy step
per code byte index), the CRC is checked per frame with zlib, the records of all EVENTS bodies are
walked together (one numpy step per record index, through a table of the record length at every
byte), then the deltas and masks of all records are gathered at once and the timestamps are a
cumulative sum from each frame's base (uint64: mod 2**64, as on the wire).

Runs of intact EVENTS frames in sequence are accepted in one go. Every other frame (another type, a
CRC failure, a gap, a replay, another version, a malformed body...) goes through
``FrameDecoder._frame``, and a frame begun in an earlier call through ``FrameDecoder.feed``, so the
counters, the sequence and replay rules and the pending/overlong handling are the per-frame
decoder's; ``feed`` and ``feed_batch`` can be mixed on one decoder.
"""

import zlib
from typing import NamedTuple

import numpy as np

from hilat.link import protocol as p

_PAD = 256  # zero bytes after a piece: a code-byte chain or record walk that runs past its end stops there
_ULEB_MAX = 10  # bytes of the longest uleb128 delta (64 bits)
_MIN_VECTOR = 4  # fewer complete frames in a piece: the per-frame path is faster


class RecordBatch(NamedTuple):
    ticks: np.ndarray     # uint64 record timestamps, in arrival order
    channels: np.ndarray  # uint16 channel masks
    levels: np.ndarray    # uint16 level masks
    frames: list          # the frames that are not EVENTS (protocol.Frame), in arrival order
    events_frames: int    # EVENTS frames decoded into the arrays
    # uint64 fractions: the inputs' sub-tick samples (docs/subtick.md) or TDC codes (docs/tdc.md); 0 without
    fractions: np.ndarray = np.zeros(0, np.uint64)
    # Where the stream was disturbed, in arrival order: (records before it in this batch, what) with
    # what a Frame of another type than EVENTS or an int (frames lost on the link, a sequence gap).
    marks: list = []
    # The records' edges when the link worked them out already (its decode thread, hilat.kernels
    # .edges_with_offsets: ticks, channels, levels, first_edge), else None.
    edges: tuple | None = None


class _Events(NamedTuple):
    """The intact EVENTS frames among the frames of a piece, and their records."""

    index: np.ndarray     # which frames (ascending)
    seq: np.ndarray       # their seqs
    first: np.ndarray     # where each one's records start in the arrays below (len(index) + 1 entries)
    ticks: np.ndarray
    channels: np.ndarray
    levels: np.ndarray
    fractions: np.ndarray


def _no_records():
    return np.zeros(0, np.uint64), np.zeros(0, np.uint16), np.zeros(0, np.uint16), np.zeros(0, np.uint64)


def join_records(parts):
    """Record arrays (ticks, channel masks, levels, fractions) of several reads as one, in order."""
    if len(parts) == 1:
        return tuple(parts[0])
    return tuple(np.concatenate(x) for x in zip(*parts)) if parts else _no_records()


class _Batch:
    """A RecordBatch being built: pieces of record arrays and frames, in arrival order."""

    def __init__(self):
        self.parts = []
        self.frames = []
        self.marks = []
        self.records = 0
        self.events_frames = 0

    def add_arrays(self, ticks, channels, levels, fractions, n_frames):
        if len(ticks):
            self.parts.append((ticks, channels, levels, fractions))
            self.records += len(ticks)
        self.events_frames += n_frames

    def add_loss(self, frames_lost):
        self.marks.append((self.records, int(frames_lost)))

    def add_frames(self, frames):
        for frame in frames:
            msg = frame.msg
            if isinstance(msg, p.Events):
                width = 4 if msg.fraction_bytes else 3
                table = np.array(msg.records, dtype=np.uint64).reshape(-1, width)
                fractions = table[:, 3] if width == 4 else np.zeros(len(table), np.uint64)
                self.add_arrays(table[:, 0].copy(), table[:, 1].astype(np.uint16), table[:, 2].astype(np.uint16),
                                fractions, 1)
            else:
                self.frames.append(frame)
                self.marks.append((self.records, frame))

    def result(self) -> RecordBatch:
        if len(self.parts) == 1:
            arrays = self.parts[0]
        elif self.parts:
            arrays = [np.concatenate(x) for x in zip(*self.parts)]
        else:
            arrays = _no_records()
        ticks, channels, levels, fractions = arrays
        return RecordBatch(ticks, channels, levels, self.frames, self.events_frames, fractions, self.marks)


class BatchDecoder(p.FrameDecoder):
    """A FrameDecoder whose ``feed_batch`` returns EVENTS records as arrays (see the module)."""

    def feed_batch(self, data: bytes) -> RecordBatch:
        """As ``feed``, but the records of the EVENTS frames come out concatenated in arrays."""
        data = bytes(data)
        out = _Batch()
        first = data.find(b"\x00")
        if first < 0:
            self.feed(data)  # no frame ends here: only the pending bytes grow
            return out.result()
        last = data.rfind(b"\x00")
        lo = 0
        if self._pending or self._overlong:  # the frame begun in an earlier call: FrameDecoder's rules
            lost = self.lost
            frames = self.feed(data[: first + 1])
            if self.lost > lost:
                out.add_loss(self.lost - lost)
            out.add_frames(frames)
            lo = first + 1
        if last >= lo:
            self._complete_frames(data, lo, last + 1, out)
        self.feed(data[last + 1 :])  # the start of the next frame (no 0x00: decodes nothing)
        return out.result()

    def _complete_frames(self, data, lo, hi, out):
        """The frames of data[lo:hi], which starts a frame and ends with a delimiter."""
        buf = np.frombuffer(data, np.uint8, count=hi - lo, offset=lo)
        ends = np.flatnonzero(buf == 0)
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        nonempty = ends > starts  # consecutive 0x00 are empty frames: ignored
        starts, ends = starts[nonempty], ends[nonempty]
        n = len(starts)
        if n < _MIN_VECTOR:
            for s, e in zip(starts.tolist(), ends.tolist()):
                self._one_frame(data[lo + s : lo + e], out)
            return
        events = self._intact_events(buf, starts, ends)
        intact = np.zeros(n, bool)
        intact[events.index] = True
        seq = np.full(n, -1, np.int64)
        seq[events.index] = events.seq
        # A run of accepted frames (intact ones) stops before frame k unless k is intact and follows k-1.
        follows = intact[1:] & (seq[1:] == (seq[:-1] + 1) & 0xFFFF)
        stops = np.append(np.flatnonzero(~follows) + 1, n)
        record_at = np.zeros(n, np.int64)  # which entry of events.first belongs to frame k
        record_at[events.index] = np.arange(len(events.index))
        starts_l, ends_l, seq_l, intact_l = starts.tolist(), ends.tolist(), seq.tolist(), intact.tolist()
        k = 0
        while k < n:
            if intact_l[k] and self.expected_seq in (None, seq_l[k]):
                j = int(stops[np.searchsorted(stops, k, side="right")])
                a, b = events.first[record_at[k]], events.first[record_at[j - 1] + 1]
                out.add_arrays(events.ticks[a:b], events.channels[a:b], events.levels[a:b],
                               events.fractions[a:b], j - k)
                self._accept_run(data, lo, starts_l, ends_l, seq_l, k, j)
                k = j
            else:
                self._one_frame(data[lo + starts_l[k] : lo + ends_l[k]], out)
                k += 1

    def _one_frame(self, enc, out):
        frames = []
        lost = self.lost
        self._frame(enc, frames)
        if self.lost > lost:  # a sequence gap before this frame: before its records
            out.add_loss(self.lost - lost)
        out.add_frames(frames)

    def _accept_run(self, data, lo, starts, ends, seq, k, j):
        """Frames k..j-1: intact EVENTS frames, the first one expected, each following the last.
        The state FrameDecoder._frame would leave."""
        self.frames_ok += j - k
        self.expected_seq = (seq[j - 1] + 1) & 0xFFFF
        window = self.DUPLICATE_WINDOW
        for i in range(max(k, j - window), j):
            self._recent[seq[i] % window] = (seq[i], data[lo + starts[i] : lo + ends[i]])

    def _intact_events(self, buf, starts, ends) -> _Events:
        """Which frames buf[starts[k]:ends[k]] are EVENTS frames that FrameDecoder would accept if
        their seq were expected (COBS, length, CRC, version, type and body all right), and their
        records."""
        if p.MSG_EVENTS not in self.messages:
            none = np.zeros(0, np.int64)
            return _Events(none, none, np.zeros(1, np.int64), *_no_records())
        lengths = ends - starts
        index = np.flatnonzero((lengths > p.MIN_FRAME) & (lengths <= p.MAX_ENCODED))
        dec, chained = _cobs_decode(buf, starts[index], ends[index])
        index = index[chained]
        header = starts[index] + 1  # decoded frame k: dec[starts[k] + 1 : ends[k]]
        crc_at = ends[index] - p.CRC_SIZE
        seq = dec[header + 2].astype(np.int64) | (dec[header + 3].astype(np.int64) << 8)
        keep = np.isin(dec[header], self.versions) & (dec[header + 1] == p.MSG_EVENTS)
        keep[keep] = _crc_ok(dec, header[keep], crc_at[keep])
        index, seq = index[keep], seq[keep]
        well_formed, first, *records = _events_records(dec, header[keep] + p.HEADER_SIZE, crc_at[keep])
        return _Events(index[well_formed], seq[well_formed], first, *records)


def _cobs_decode(buf, starts, ends):
    """COBS-decode the frames buf[starts[k]:ends[k]] (without 0x00; each ends[k] is a delimiter)
    together. Returns (dec, chained): dec is buf with every code byte after a frame's first set to
    the 0 it stands for, plus _PAD zero bytes, so frame k decodes to dec[starts[k] + 1 : ends[k]];
    chained[k]: its code-byte chain ends exactly at ends[k] (else it is corrupt).

    A 0xFF code (254 bytes without a zero, no zero after them) fits a frame only as its first code
    with the block reaching its end: no zero to write, so it needs nothing special here."""
    codes = np.zeros(len(buf) + _PAD, np.uint8)
    codes[: len(buf)] = buf
    dec = codes.copy()
    pos = starts
    visited = []
    # A chain stops on a 0 byte: its own delimiter, or (a corrupt frame) a later one or the padding.
    for _ in range(p.MAX_ENCODED):
        step = codes[pos]
        if not step.any():
            break
        pos = pos + step
        dec[pos] = 0
        visited.append(pos)
    chained = pos == ends
    if not chained.all() and visited:  # a chain ran into other frames: zero only the good chains'
        dec[: len(buf)] = buf
        dec[np.stack(visited, axis=1)[chained]] = 0
    return dec, chained


def _crc_ok(dec, header, crc_at):
    """Whether the CRC32 at dec[crc_at[k]:][:4] (little-endian) is that of dec[header[k]:crc_at[k]]."""
    data = dec.tobytes()
    crc32 = zlib.crc32
    computed = np.fromiter((crc32(data[a:b]) for a, b in zip(header.tolist(), crc_at.tolist())), np.uint32,
                           count=len(header))
    stored = dec[crc_at[:, None] + np.arange(4)].view("<u4").ravel()
    return computed == stored


def _record_lengths(dec, tail):
    """For every byte of dec: the length of a record starting there (uleb128 delta, then ``tail``
    bytes: two masks and the fraction), the delta counted as 11 bytes when it is longer than 10."""
    more = dec >= 0x80  # a uleb128 byte with another one after it
    length = more.astype(np.uint8) + np.uint8(1 + tail)
    run = more
    for i in range(1, _ULEB_MAX):
        run = run[:-1] & more[i:]  # bytes p..p+i all go on
        if not run.any():
            break
        length[:-i] += run
    return length


def _events_records(dec, body, body_end):
    """The records of the EVENTS bodies dec[body[k]:body_end[k]] (intact frames). Returns
    (well_formed, first, ticks, channels, levels, fractions): well_formed[k] as Events.from_body
    would accept body k; the records of the well-formed bodies in order, those of the i-th
    well-formed body at first[i]:first[i + 1]."""
    base = dec[body[:, None] + np.arange(8)].view("<u8").ravel()
    fmt = dec[body + 8].astype(np.int64)
    mask_bytes, fraction_bytes = fmt & 0x0F, fmt >> 4
    well_formed = (body_end - body >= 9) & ((mask_bytes == 1) | (mask_bytes == 2)) & \
        (fraction_bytes <= p.MAX_FRACTION_BYTES)
    wide = well_formed & (mask_bytes == 2)
    tail = 2 * mask_bytes + fraction_bytes      # a record's bytes after its delta
    # step[i]: from a record at byte i to the next one; 0 where a body ends, so a walk stops there.
    tails = np.unique(tail[well_formed])
    if len(tails) <= 1:  # one record layout (the usual case)
        step = _record_lengths(dec, int(tails[0]) if len(tails) else 2)
    else:
        step = np.zeros(len(dec), np.uint8)
        for t in tails.tolist():
            in_these = _covered(len(dec), body[well_formed & (tail == t)], body_end[well_formed & (tail == t)])
            step = np.where(in_these, _record_lengths(dec, t), step)
    step[body_end] = 0
    step[-_PAD:] = 0
    # Walk the records of all bodies together: one step per record index. A record that runs past
    # its body leaves the walk beyond body_end (into the next frame or the padding): truncated.
    pos = np.where(well_formed, body + 9, body_end)
    visited = []
    while True:
        here = pos < body_end
        if not here.any():
            break
        visited.append(pos)
        pos = pos + step[pos]
    well_formed &= pos == body_end

    def records():  # where the records of the well-formed bodies are, how many a body, delta lengths
        at, counts = _flatten(visited, body_end, well_formed)
        return at, counts, step[at] - np.repeat(tail[well_formed], counts)

    at, counts, length = records()
    if (length > _ULEB_MAX).any():  # a delta longer than 10 bytes: that body is malformed
        well_formed[np.repeat(np.flatnonzero(well_formed), counts)[length > _ULEB_MAX]] = False
        at, counts, length = records()
    first = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    # Deltas: 7 bits a byte, little end first; bits past 64 fall off as in from_body's mod 2**64.
    delta = (dec[at] & 0x7F).astype(np.uint64)
    for i in range(1, int(length.max(initial=1))):
        longer = np.flatnonzero(length > i)
        delta[longer] |= (dec[at[longer] + i] & 0x7F).astype(np.uint64) << np.uint64(7 * i)
    # Timestamps: cumulative sum over all records, restarted at each body's base (uint64 wraps).
    total = np.cumsum(delta, dtype=np.uint64)
    before = np.concatenate((np.zeros(1, np.uint64), total))[first[:-1]]
    ticks = total + np.repeat(base[well_formed] - before, counts)
    masks_at = at + length
    channels = dec[masks_at].astype(np.uint16)
    levels = dec[masks_at + 1].astype(np.uint16)
    if wide.any():
        wide = np.repeat(wide[well_formed], counts)
        high = dec[masks_at + 1].astype(np.uint16) << 8
        channels = np.where(wide, channels | high, channels)
        levels = np.where(wide, dec[masks_at + 2] | (dec[masks_at + 3].astype(np.uint16) << 8), levels)
    fractions = np.zeros(len(at), np.uint64)
    fraction_bytes = np.repeat(fraction_bytes[well_formed], counts)
    if fraction_bytes.any():
        # Little-endian, one step per byte of the longest fraction (dec is padded: a read past a
        # shorter record's fraction is in range and masked off).
        fraction_at = masks_at + 2 * np.repeat(mask_bytes[well_formed], counts)
        for k in range(int(fraction_bytes.max())):
            byte = dec[fraction_at + k].astype(np.uint64) << np.uint64(8 * k)
            fractions |= np.where(fraction_bytes > k, byte, np.uint64(0))
    return well_formed, first, ticks, channels, levels, fractions


def _covered(n, starts, ends):
    """Bool array of n: True in every [starts[k], ends[k])."""
    edges = np.zeros(n + 1, np.int64)
    np.add.at(edges, starts, 1)
    np.add.at(edges, ends, -1)
    return np.cumsum(edges[:-1]) > 0


def _flatten(visited, body_end, well_formed):
    """Record positions of the well-formed bodies, body by body, and the records of each."""
    if not visited:
        return np.zeros(0, np.int64), np.zeros(int(well_formed.sum()), np.int64)
    walk = np.stack(visited, axis=1)[well_formed]
    present = walk < body_end[well_formed, None]
    return walk[present], present.sum(axis=1)


def holes(marks):
    """The marks that are holes in the record stream: frames lost on the link (an int) and the
    gateware's OVERFLOW markers (analysis.GapTracker's inputs), in order."""
    return [(at, what) for at, what in marks if isinstance(what, int) or isinstance(what.msg, p.Overflow)]


def segments(n_records, marks):
    """The records 0..n_records split at the marks: (start, stop, what) in arrival order, what None
    for a run of records, else a mark's (a Frame or frames lost)."""
    at = 0
    for position, what in marks:
        if position > at:
            yield at, position, None
            at = position
        yield at, at, what
    if at < n_records:
        yield at, n_records, None
