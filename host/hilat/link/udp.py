"""The Ethernet stream's datagrams (docs/ethernet.md, "The stream datagram"): the encoder (fake rigs,
tests) and the vectorized decoder side by side, and ``stream.bin``, the run's file of every datagram
as it was received.

``stream.bin``: a 16-byte header (``HILATUDP``, format version u32, slot size u32), then one fixed
slot of ``SLOT_BYTES`` per datagram in arrival order: length u32 (the datagram's bytes), flags u32
(bit0: longer than the slot's payload room, cut), receive time u64 (ns, the host's monotonic clock;
one per batch of ``recvmmsg``), then the datagram, zero-padded. Fixed slots because the receiver
writes a whole ``recvmmsg`` batch in one ``write`` and the decoder reads any number of them as one
array; a full datagram fills 1,472 of the 1,520 bytes of room.

``StreamDecoder.feed(slots)`` takes such slots (from the file or the receiver) and gives the records
as ``batch.RecordBatch`` arrays, with the stream's holes among them as ``marks``, as the serial
link's ``BatchDecoder`` does: a number of records lost on the link (an int), or an overflow marker
(``StreamMark`` whose ``msg`` is a ``protocol.Overflow``). Work is per batch of datagrams and per
array of records: no Python step per datagram or per record, except per hole and per overflow marker.

Ordering: datagrams are delivered in ``seq`` order. One that arrives after a hole is held until the
hole fills (a reordered datagram) or is given up: when a datagram ``REORDER_WINDOW`` seqs past it
has arrived, or datagrams have kept arriving for ``REORDER_WAIT_NS`` since the first one after it
(the receive times in the slots, so a replay of stream.bin decides exactly as the capture did; a
quiet rig's heartbeats keep datagrams arriving). A datagram of a seq already delivered is a
duplicate; of a seq already given up, late (dropped: its records are in a gap).
"""

import struct
from typing import NamedTuple

import numpy as np

from hilat import kernels
from hilat.link import protocol as p
from hilat.link.batch import RecordBatch

MAGIC = 0x54414C48              # b"HLAT" little-endian
VERSION = 1
HEADER_WORDS = 9                # 36 bytes
HEADER_BYTES = 4 * HEADER_WORDS
MAX_PAYLOAD = 1472              # bytes of UDP payload at most (an Ethernet MTU of 1500, no fragmentation)
FLAG_HEARTBEAT = 0x01
DEFAULT_RECORD_WORDS = 2
COMMAND_PORT = 5800
STREAM_PORT = 5801

FILE_MAGIC = b"HILATUDP"
FILE_VERSION = 1
FILE_HEADER = 16
SLOT_BYTES = 1536
SLOT_HEADER = 16                # length u32, flags u32, receive time u64 (ns)
SLOT_ROOM = SLOT_BYTES - SLOT_HEADER
SLOT_TRUNCATED = 0x01

REORDER_WINDOW = 64             # seqs a datagram is waited for once later ones have arrived ...
REORDER_WAIT_NS = 20_000_000    # ... or ns of arrivals after the first one past it

# A slot's header and the datagram's header, as a view of each SLOT_BYTES row.
_FIELDS = [("length", "<u4", 0), ("slot_flags", "<u4", 4), ("recv_ns", "<u8", 8),
           ("magic", "<u4", 16), ("version", "u1", 20), ("flags", "u1", 21), ("record_words", "u1", 22),
           ("header_words", "u1", 23), ("session", "<u4", 24), ("seq", "<u4", 28), ("first_index", "<u8", 32),
           ("base", "<u8", 40), ("count", "<u2", 48)]
SLOT_DTYPE = np.dtype({"names": [f[0] for f in _FIELDS], "formats": [f[1] for f in _FIELDS],
                       "offsets": [f[2] for f in _FIELDS], "itemsize": SLOT_BYTES})
_HEAD = struct.Struct("<IBBBBIIQQHH")


def max_records(record_words=DEFAULT_RECORD_WORDS):
    """Records a full datagram holds (179 at 2 words)."""
    return (MAX_PAYLOAD - HEADER_BYTES) // (4 * record_words)


def file_header():
    return FILE_MAGIC + struct.pack("<II", FILE_VERSION, SLOT_BYTES)


class StreamFileError(ValueError):
    """A stream.bin that cannot be read (the message names the file and why)."""


def check_file_header(head, path="stream.bin"):
    if len(head) < FILE_HEADER or head[:8] != FILE_MAGIC:
        raise StreamFileError(f"{path}: not a hilat datagram stream file (bad header)")
    version, slot = struct.unpack_from("<II", head, 8)
    if version != FILE_VERSION or slot != SLOT_BYTES:
        raise StreamFileError(f"{path}: stream file version {version}, slot {slot} bytes; this hilat reads version "
                              f"{FILE_VERSION}, slot {SLOT_BYTES}")


# ---- the record layout --------------------------------------------------------------------------------


MAX_FRACTION_BITS = 64          # a record's fraction: 8 TDC inputs of 8 bits (docs/tdc.md)


def record_words_for(n_channels, fraction_bits):
    """32-bit words a record takes: its 32 + 2n + 1 + f bits rounded up to an even count of words
    (2 without a fraction wider than 64 - 33 - 2n bits, 4 with a TDC's 32 or 64)."""
    return 2 * -(-(33 + 2 * n_channels + fraction_bits) // 64)


class Layout(NamedTuple):
    """Where a record's fields lie (docs/ethernet.md, "Record"): ``n`` channels, then ``f`` fraction
    bits (every input's together: their sub-tick samples, or the TDC inputs' 8-bit codes), in
    ``record_words`` 32-bit words (an even count: the records are read as 64-bit halves)."""
    n_channels: int
    fraction_bits: int = 0
    record_words: int = DEFAULT_RECORD_WORDS

    @classmethod
    def of(cls, identity, record_words=None):
        """The layout of a rig's records (its IDENTIFY; ``record_words`` as its Ethernet tail says,
        None: the fewest that hold them)."""
        n, f = identity.n_stimulus + identity.n_inputs, identity.fraction_width
        return cls(n, f, record_words_for(n, f) if record_words is None else record_words)

    @property
    def halves(self):
        """64-bit words a record takes."""
        return self.record_words // 2

    def check(self):
        n, f, words = self.n_channels, self.fraction_bits, self.record_words
        if not (1 <= n <= p.MAX_CHANNELS and 0 <= f <= MAX_FRACTION_BITS and words >= 2 and words % 2 == 0
                and 33 + 2 * n + f <= 32 * words):
            raise ValueError(f"records of {n} channels and {f} fraction bits in {words} words: this hilat reads "
                             f"an even count of words holding 33 + 2n + f bits, n <= {p.MAX_CHANNELS}, "
                             f"f <= {MAX_FRACTION_BITS}")
        return self


def _put(words, values, start, width):
    """OR ``values`` (uint64, < 2**width) into the bit field [start, start + width) of records
    ``words`` ((records, halves) uint64, bit k of a record at bit k % 64 of half k // 64)."""
    half, bit = divmod(start, 64)
    words[:, half] |= values << np.uint64(bit)
    if bit + width > 64:
        words[:, half + 1] |= values >> np.uint64(64 - bit)


def _get(words, start, width):
    """The bit field [start, start + width) (width <= 64) of records ``words`` as uint64 (see _put)."""
    half, bit = divmod(start, 64)
    values = words[:, half] >> np.uint64(bit)
    if bit + width > 64:
        values = values | (words[:, half + 1] << np.uint64(64 - bit))
    return values & np.uint64((1 << width) - 1) if width < 64 else values


def pack_records(layout, offsets, channels, levels, kinds=None, fractions=None):
    """Records at ``offsets`` from their datagram's base as (records, record_words / 2) uint64."""
    n = layout.n_channels
    offsets = np.asarray(offsets, np.uint64)
    words = np.zeros((len(offsets), layout.halves), np.uint64)
    _put(words, offsets & np.uint64(0xFFFFFFFF), 0, 32)
    _put(words, np.asarray(channels, np.uint64), 32, n)
    _put(words, np.asarray(levels, np.uint64), 32 + n, n)
    if kinds is not None:
        _put(words, np.asarray(kinds, np.uint64) & np.uint64(1), 32 + 2 * n, 1)
    if fractions is not None and layout.fraction_bits:
        _put(words, np.asarray(fractions, np.uint64), 33 + 2 * n, layout.fraction_bits)
    return words


def encode_datagram(session, seq, first_index, base, words=(), heartbeat=False, record_words=DEFAULT_RECORD_WORDS):
    """One datagram's bytes: the header and the records (``pack_records``' rows: uint64 halves; a
    1-D array is one half a record)."""
    words = np.asarray(words, "<u8")
    head = _HEAD.pack(MAGIC, VERSION, FLAG_HEARTBEAT if heartbeat else 0, record_words, HEADER_WORDS, session,
                      seq & 0xFFFFFFFF, first_index, base & 0xFFFFFFFFFFFFFFFF, len(words), 0)
    return head + words.tobytes()


def encode_stream(layout, ticks, channels, levels, session, seq=0, first_index=0, kinds=None, fractions=None):
    """The data datagrams of records (ticks in order), as the packetizer closes them: full, or when
    the next record's offset would not fit 32 bits. Returns a list of bytes (tests, fake rigs)."""
    ticks = np.asarray(ticks, np.uint64)
    full = max_records(layout.record_words)
    out, i, n = [], 0, len(ticks)
    while i < n:
        end = min(i + full, n)
        if int(ticks[end - 1]) - int(ticks[i]) >= 1 << 32:
            end = int(np.searchsorted(ticks, int(ticks[i]) + (1 << 32), side="left"))
        sl = slice(i, end)
        words = pack_records(layout, ticks[sl] - ticks[i], np.asarray(channels)[sl], np.asarray(levels)[sl],
                             None if kinds is None else np.asarray(kinds)[sl],
                             None if fractions is None else np.asarray(fractions)[sl])
        out.append(encode_datagram(session, seq, first_index + i, int(ticks[i]), words,
                                   record_words=layout.record_words))
        seq += 1
        i = end
    return out


def slots_of(datagrams, recv_ns=0):
    """Datagrams (bytes) as stream.bin slots (tests; the receiver fills its slots itself)."""
    slots = np.zeros((len(datagrams), SLOT_BYTES), np.uint8)
    head = slots.view(SLOT_DTYPE)[:, 0]
    for i, d in enumerate(datagrams):
        room = min(len(d), SLOT_ROOM)
        slots[i, SLOT_HEADER:SLOT_HEADER + room] = np.frombuffer(d, np.uint8, count=room)
        head["length"][i] = len(d)
        head["slot_flags"][i] = SLOT_TRUNCATED if len(d) > SLOT_ROOM else 0
    head["recv_ns"] = recv_ns
    return slots


# ---- decoding -----------------------------------------------------------------------------------------


class StreamMark(NamedTuple):
    """A mark of the stream among the records (batch.holes reads ``msg``): an overflow marker."""
    msg: object


COUNTERS = ("datagrams", "heartbeats", "records", "datagrams_lost", "records_lost", "reordered", "duplicated",
            "late", "stale", "malformed", "overflow_markers")


class StreamDecoder:
    """Slots in, records out (see the module). ``session``: the run's session id (None: the first
    well-formed datagram's, for a replay that does not know it)."""

    RECENT = 1 << 14   # seqs remembered as delivered, to tell a duplicate from a late datagram

    def __init__(self, layout, session=None, reorder_window=REORDER_WINDOW, reorder_wait_ns=REORDER_WAIT_NS):
        self.layout = layout.check()
        self.session = session
        self.reorder_window = int(reorder_window)
        self.reorder_wait_ns = int(reorder_wait_ns)
        self.next_seq = 0            # the seq expected next (64-bit, unwrapped)
        self.next_index = 0          # the first_index expected next
        self.max_seq = -1            # the highest seq received (unwrapped)
        self.now_ns = 0              # the latest receive time seen
        self.complete_before = None  # tick T of the last heartbeat delivered: every record below it is here or a gap
        self.last_tick = None
        self._recent = np.full(self.RECENT, -1, np.int64)
        self._held = np.zeros((0, SLOT_BYTES), np.uint8)   # datagrams after a hole, in seq order
        self._held_seq = np.zeros(0, np.int64)
        self._held_recv = np.zeros(0, np.int64)
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.wrong_layout = None     # (record_words, header_words) of a datagram not of this layout
        self.first_data_ns = self.last_data_ns = None   # receive times of the first and last datagram with records

    def counters(self):
        return {**self.counts, "held": len(self._held_seq)}

    # -- one batch of slots --

    def feed(self, slots) -> RecordBatch:
        """The records of the datagrams in ``slots`` ((k, SLOT_BYTES) uint8, arrival order) that can
        be delivered in order now; later ones wait for the holes before them (see the module)."""
        slots = np.ascontiguousarray(slots, np.uint8).reshape(-1, SLOT_BYTES)
        if not len(slots):
            return self._deliver(np.zeros(0, np.int64), slots)
        head = slots.view(SLOT_DTYPE)[:, 0]
        self.now_ns = max(self.now_ns, int(head["recv_ns"].max()))
        ok = self._well_formed(head)
        if self.session is None and ok.any():
            self.session = int(head["session"][np.argmax(ok)])
        fresh = ok & (head["session"] == np.uint32(self.session or 0))
        self.counts["stale"] += int((ok & ~fresh).sum())
        idx = np.flatnonzero(fresh)
        seq = self._unwrap(head["seq"][idx])
        recv = head["recv_ns"][idx].astype(np.int64)
        if len(idx) == len(slots) and not len(self._held_seq) and \
                (seq == self.next_seq + np.arange(len(seq))).all():   # the usual case: all in order
            self.max_seq = max(self.max_seq, int(seq[-1]))
            return self._deliver(seq, slots)
        # Reordered: below a seq received before it (arrival order); duplicates and late ones apart.
        before = np.maximum.accumulate(np.concatenate(([self.max_seq], seq)))[:-1]
        if len(seq):
            self.max_seq = max(self.max_seq, int(seq.max()))
        old = seq < self.next_seq
        seen = self._recent[seq[old] % self.RECENT] == seq[old]
        self.counts["duplicated"] += int(seen.sum())
        self.counts["late"] += int((~seen).sum())
        # The held ones first, so that the first copy of a seq is kept.
        all_seq = np.concatenate((self._held_seq, seq[~old]))
        all_recv = np.concatenate((self._held_recv, recv[~old]))
        uniq, first = np.unique(all_seq, return_index=True)
        self.counts["duplicated"] += len(all_seq) - len(uniq)
        n_held = len(self._held_seq)
        kept_new = first[first >= n_held] - n_held
        self.counts["reordered"] += int((seq[~old][kept_new] < before[~old][kept_new]).sum())
        rows_src = first   # index into held + new(~old)
        order_recv = all_recv[first]
        cut = self._deliverable(uniq, order_recv)
        new_rows = idx[~old]

        def rows(which):   # the slots of entries of held + new, in that order
            from_held = which < n_held
            if from_held.all():
                return self._held[which]
            if not from_held.any():
                return slots[new_rows[which - n_held]]
            out = np.empty((len(which), SLOT_BYTES), np.uint8)
            out[from_held] = self._held[which[from_held]]
            out[~from_held] = slots[new_rows[which[~from_held] - n_held]]
            return out

        delivered = rows(rows_src[:cut])
        self._held, self._held_seq = rows(rows_src[cut:]).copy(), uniq[cut:]
        self._held_recv = order_recv[cut:]
        return self._deliver(uniq[:cut], delivered)

    def flush(self) -> RecordBatch:
        """The end of the stream: every held datagram is delivered, its holes given up."""
        seq, rows = self._held_seq, self._held
        self._held, self._held_seq = np.zeros((0, SLOT_BYTES), np.uint8), np.zeros(0, np.int64)
        self._held_recv = np.zeros(0, np.int64)
        return self._deliver(seq, rows)

    def _well_formed(self, head):
        length = head["length"].astype(np.int64)
        hw = head["header_words"].astype(np.int64)
        rw = head["record_words"].astype(np.int64)
        count = head["count"].astype(np.int64)
        basic = ((head["slot_flags"] & SLOT_TRUNCATED) == 0) & (length >= HEADER_BYTES) & (length <= MAX_PAYLOAD) \
            & (head["magic"] == MAGIC) & (head["version"] == VERSION) & (hw >= HEADER_WORDS)
        heartbeat = (head["flags"] & FLAG_HEARTBEAT) != 0
        ok = basic & (length == 4 * hw + 4 * rw * count) & (~heartbeat | (count == 0)) \
            & ((head["flags"] & ~np.uint8(FLAG_HEARTBEAT)) == 0)
        layout = ok & (rw == self.layout.record_words)
        if self.wrong_layout is None and (ok & ~layout).any():
            i = int(np.argmax(ok & ~layout))
            self.wrong_layout = (int(rw[i]), int(hw[i]))
        self.counts["malformed"] += int((~layout).sum())
        return layout

    def _unwrap(self, seq32):
        """32-bit seqs as 64-bit ones, the nearest to the seq expected next."""
        d = (seq32.astype(np.int64) - (self.next_seq & 0xFFFFFFFF)) & 0xFFFFFFFF
        d = np.where(d >= 1 << 31, d - (1 << 32), d)
        return self.next_seq + d

    def _deliverable(self, seq, recv):
        """How many of the sorted seqs can go now: up to the first hole still waited for."""
        if not len(seq):
            return 0
        prev = np.concatenate(([self.next_seq - 1], seq[:-1]))
        holes = np.flatnonzero(seq - prev > 1)
        if not len(holes):
            return len(seq)
        # The first arrival after each hole: the earliest receive time among the seqs past it.
        first_after = np.minimum.accumulate(recv[::-1])[::-1][holes]
        given_up = (self.max_seq - prev[holes] > self.reorder_window) | \
                   (self.now_ns - first_after >= self.reorder_wait_ns)
        waiting = np.flatnonzero(~given_up)
        return int(holes[waiting[0]]) if len(waiting) else len(seq)

    # -- records of datagrams in order --

    def _deliver(self, seq, rows) -> RecordBatch:
        marks = []
        if not len(seq):
            return _empty_batch()
        self._recent[seq % self.RECENT] = seq
        prev = np.concatenate(([self.next_seq - 1], seq[:-1]))
        self.counts["datagrams_lost"] += int((seq - prev - 1).sum())
        self.next_seq = int(seq[-1]) + 1
        head = rows.view(SLOT_DTYPE)[:, 0]
        count = head["count"].astype(np.int64)
        first_index = head["first_index"].astype(np.int64)
        heartbeat = (head["flags"] & FLAG_HEARTBEAT) != 0
        self.counts["datagrams"] += len(seq)
        self.counts["heartbeats"] += int(heartbeat.sum())
        if heartbeat.any():
            t = int(head["base"][heartbeat].max())
            self.complete_before = t if self.complete_before is None else max(self.complete_before, t)
        expected = np.concatenate(([self.next_index], (first_index + count)[:-1]))
        lost = first_index - expected
        self.next_index = int(first_index[-1] + count[-1])
        data = count > 0
        if data.any():
            recv = head["recv_ns"][data]
            self.first_data_ns = int(recv[0]) if self.first_data_ns is None else self.first_data_ns
            self.last_data_ns = max(self.last_data_ns or 0, int(recv.max()))
        before = np.concatenate(([0], np.cumsum(count)[:-1]))   # records before each datagram
        for i in np.flatnonzero(lost > 0).tolist():
            self.counts["records_lost"] += int(lost[i])
            marks.append((int(before[i]), int(lost[i])))
        fast = self._fast_records(rows, head, count)
        if fast is not None:   # no overflow marker among them (the usual case): one compiled pass
            ticks, channels, levels, fractions = fast
            self.counts["records"] += len(ticks)
            if len(ticks):
                self.last_tick = int(ticks[-1])
            return RecordBatch(ticks, channels, levels, [], 0, fractions, marks)
        ticks, words = self._records(rows, head, count)
        n = self.layout.n_channels
        kind = _get(words, 32 + 2 * n, 1)
        if kind.any():   # overflow markers: marks, not records
            at = np.flatnonzero(kind)
            marker_channels = _get(words[at], 32, n).tolist()
            for j, i in enumerate(at.tolist()):
                chans = marker_channels[j]
                marks.append((i - j, StreamMark(p.Overflow(int(ticks[i]), chans))))
            keep = kind == 0
            ticks, words = ticks[keep], words[keep]
            self.counts["overflow_markers"] += len(at)
            # A loss mark sits before its datagram's records: count the markers before it out too.
            marks = [(at_ - int(np.searchsorted(np.flatnonzero(~keep), at_, side="left")), what)
                     if isinstance(what, int) else (at_, what) for at_, what in marks]
        marks.sort(key=lambda m: m[0])
        self.counts["records"] += len(ticks)
        if len(ticks):
            self.last_tick = int(ticks[-1])
        channels = _get(words, 32, n).astype(np.uint16)
        levels = _get(words, 32 + n, n).astype(np.uint16)
        f = self.layout.fraction_bits
        fractions = _get(words, 33 + 2 * n, f) if f else np.zeros(len(words), np.uint64)
        return RecordBatch(ticks, channels, levels, [], 0, fractions, marks)

    def _fast_records(self, rows, head, count):
        """The compiled pass of ``_deliver`` (hilat.kernels), or None: no numba, a longer header, an
        overflow marker among the records."""
        if not kernels.available() or not (head["header_words"] == HEADER_WORDS).all():
            return None
        return kernels.slot_records(rows, SLOT_HEADER + HEADER_BYTES, count, head["base"], self.layout.n_channels,
                                    self.layout.fraction_bits, self.layout.record_words)

    def _records(self, rows, head, count):
        """(ticks, records as (records, halves) uint64) of the datagrams' records, in order (overflow
        markers included)."""
        halves = self.layout.halves
        if not count.any():
            return np.zeros(0, np.uint64), np.zeros((0, halves), np.uint64)
        top = int(count.max())
        size = 8 * halves   # bytes a record
        hw = head["header_words"]
        if (hw == HEADER_WORDS).all():
            start = SLOT_HEADER + HEADER_BYTES
            words = rows[:, start:start + size * top].view("<u8").reshape(len(rows), top, halves)
            full = count == top
            words = words.reshape(-1, halves) if full.all() else words[np.arange(top) < count[:, None]]
        else:   # a longer header (a later version's): skip to each datagram's records
            words = np.concatenate([rows[i, SLOT_HEADER + 4 * int(h):][:size * int(c)].view("<u8").reshape(-1, halves)
                                    for i, (h, c) in enumerate(zip(hw.tolist(), count.tolist()))])
        ticks = np.repeat(head["base"].astype(np.uint64), count) + (words[:, 0] & np.uint64(0xFFFFFFFF))
        return ticks, words


def _empty_batch():
    z = np.zeros(0, np.uint16)
    return RecordBatch(np.zeros(0, np.uint64), z, z, [], 0, np.zeros(0, np.uint64), [])


# ---- stream.bin -----------------------------------------------------------------------------------------


def iter_stream_file(path, chunk_slots=4096):
    """The slots of a stream.bin, ``chunk_slots`` at a time (a torn last slot is left out)."""
    with open(path, "rb") as f:
        check_file_header(f.read(FILE_HEADER), path)
        buf = np.empty((chunk_slots, SLOT_BYTES), np.uint8)
        while True:
            n = f.readinto(memoryview(buf).cast("B")) // SLOT_BYTES
            if not n:
                return
            yield buf[:n]


def decode_stream_file(path, decoder, chunk_slots=4096):
    """The RecordBatches of a stream.bin through ``decoder`` (a StreamDecoder), in order, the held
    datagrams' last."""
    for slots in iter_stream_file(path, chunk_slots):
        yield decoder.feed(slots)
    yield decoder.flush()
