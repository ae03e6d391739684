"""From captured edges to latencies: pairing each stimulus with its responses, then statistics.

Pairing (per stimulus k, active edge at tick S_k; its window runs to the next stimulus, or to
``S_k + deadline`` if that is earlier):

- stimulus -> ISR entry: first ISR-pin rise in the window (SSC "interrupt service response");
- stimulus -> task: first task-pin rise in the window (SSC "interrupt task response");
- ISR entry -> task: their difference (rescheduling latency);
- ISR and task durations: from that rise to the pin's next fall (the DUT raises the pin on entry and
  drops it on exit), whether or not the fall lies inside the window;
- no rise in the window: a **miss** (kept as ``MISSING``, counted, reported as a share of stimuli);
  more than one: a **duplicate** (counted, the first is used);
- the tag level at the stimulus and whether the tag was high at any time in the window are kept, so
  every figure can be given with and without tagged samples (Faller's "incl./excl. DMA").

A calibrated rig offset (``offset_mu``, in the run's unit; stored in ticks: the rig's own stimulus-pin
-> capture delay, measured with a loopback jumper) is subtracted from the two stimulus -> response latencies only.

Statistics are exact, from the stored samples: Faller's count/min/median/max/mean/std and the tail
percentiles, each percentile only where the sample count supports it.
"""

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from hilat import kernels
from hilat.analysis.measures import MISSING, Series, channel_bit, compute

# (key, title, measured from the stimulus?)  Keys are stable: they name columns and JSON fields.
KINDS = [
    ("stim_to_isr", "stimulus -> ISR entry"),
    ("stim_to_task", "stimulus -> task"),
    ("isr_to_task", "ISR entry -> task"),
    ("isr_duration", "ISR duration"),
    ("task_duration", "task duration"),
]
KIND_TITLES = dict(KINDS)

def _channel_number(names, ref):
    ref = str(ref)
    if ref in names:
        return names.index(ref)
    if ref.isdigit() and int(ref) < len(names):
        return int(ref)
    raise ValueError(f"no channel {ref!r} on this rig (channels: {', '.join(names)}, or 0..{len(names) - 1})")


@dataclass(frozen=True)
class Channels:
    """Which capture channel plays which role. Built from the rig's channel table (IDENTIFY: the
    (name, default role) of every channel) by :meth:`from_table`; no channel number is assumed. A
    role no channel plays is None: nothing is paired for it (a tag that is never high)."""
    stimulus: int
    isr: int | None = None
    task: int | None = None
    tag: int | None = None
    stimulus_active: int = 1   # level of the stimulus pin while a pulse is active
    names: tuple = ()          # channel names, by channel number
    default_roles: tuple = ()  # the rig's default role of each channel ("" for none)
    active_low: tuple = ()     # input channels whose active level is low (the DUT pulls them down)

    PAIRED_ROLES = ("stimulus", "isr", "task", "tag")

    @classmethod
    def from_table(cls, table, stimulus_active=1, roles=None, active_low=()):
        """``table``: [(name, role)] by channel number; each role goes to its first channel, unless
        ``roles`` ({role: channel name or number}) moves it; ``active_low``: channels (names or
        numbers) whose active level is low. Raises ValueError naming what is wrong."""
        names = tuple(name for name, _ in table)
        first = {}
        for number, (_name, role) in enumerate(table):
            if role:
                first.setdefault(role, number)
        n_outputs = sum(1 for _, role in table if role == "stimulus")
        for role, ref in (roles or {}).items():
            if role not in cls.PAIRED_ROLES:
                raise ValueError(f"unknown role {role!r} (roles: {', '.join(cls.PAIRED_ROLES)})")
            number = _channel_number(names, ref)
            if (role == "stimulus") != (number < n_outputs):
                raise ValueError(f"{names[number]} cannot be the {role}: "
                                 + ("the stimulus must be an output" if role == "stimulus" else "it is an output"))
            first[role] = number
        low = tuple(sorted({_channel_number(names, ref) for ref in active_low}))
        for number in low:
            if number < n_outputs:
                raise ValueError(f"{names[number]} is a stimulus output: its polarity is --invert's")
        taken = [(role, first[role]) for role in ("isr", "task", "tag") if first.get(role) is not None]
        if len({n for _, n in taken}) != len(taken):
            raise ValueError("two roles on one channel: " + ", ".join(f"{r}={names[n]}" for r, n in taken))
        if "stimulus" not in first:
            raise ValueError("the rig's channel table has no stimulus channel")
        return cls(stimulus=first["stimulus"], isr=first.get("isr"), task=first.get("task"), tag=first.get("tag"),
                   stimulus_active=stimulus_active, names=names,
                   default_roles=tuple(role for _, role in table), active_low=low)

    def channel_of(self, role):
        return {"stimulus": self.stimulus, "isr": self.isr, "task": self.task, "tag": self.tag}.get(role)

    @property
    def n_outputs(self):
        return sum(1 for role in self.default_roles if role == "stimulus")

    def is_output(self, channel):
        return channel < self.n_outputs

    def active_level(self, channel):
        """The pin level while a channel is active: 0 for an inverted stimulus or an active-low input."""
        if self.is_output(channel):
            return self.stimulus_active
        return 0 if channel in self.active_low else 1

    def resolve(self, ref):
        """A channel number from a name, a number, or a role this capture gives a channel."""
        ref = str(ref)
        if ref in self.PAIRED_ROLES and ref not in self.names:
            channel = self.channel_of(ref)
            if channel is None:
                raise ValueError(f"no channel plays the {ref} role on this rig")
            return channel
        return _channel_number(self.names, ref)

    def label(self, channel):
        """What to call a channel in exports: the role it plays here; else its default role, unless
        that is a stimulus's or another channel plays it here; else its name."""
        for role in ("isr", "task", "tag"):
            if self.channel_of(role) == channel:
                return role
        default = self.default_roles[channel] if channel < len(self.default_roles) else ""
        if default and default != "stimulus" and self.channel_of(default) in (None, channel):
            return default
        return self.names[channel] if channel < len(self.names) else f"ch{channel}"


@dataclass(frozen=True)
class Subticks:
    """Where the analysis puts an input edge inside its tick, on a rig that samples each input
    ``samples_per_tick`` S times a tick (docs/subtick.md). Times are in units of 1/``units_per_tick``
    tick; an input edge recorded at tick t with fraction k is at ``t * units_per_tick + positions[k]``,
    an output's (on a tick boundary) at ``t * units_per_tick``.

    - nominal (``nominal``): units are sub-ticks, 1/S tick, and bin k stands at its lower end, k (as
      a tick does at S = 1); S = 1 is the plain tick;
    - calibrated (``calibrated``, from ``hilat calibrate resolution``): bin k stands at its measured
      centre, in units of 1/(S * CALIBRATED_UNITS_PER_BIN) tick."""
    samples_per_tick: int = 1
    first_input: int = 0           # the rig's first input channel: the fraction's bits start there
    units_per_tick: int = 1
    positions: tuple = (0,)
    calibrated: bool = False

    CALIBRATED_UNITS_PER_BIN = 64  # 1/256 tick at S = 4: far below any bin width's uncertainty

    @classmethod
    def nominal(cls, samples_per_tick=1, first_input=0):
        s = int(samples_per_tick)
        return cls(s, int(first_input), s, tuple(range(s)))

    @classmethod
    def from_centres(cls, centres_ticks, first_input=0):
        """Bin k at ``centres_ticks[k]`` ticks after its tick's clock edge (each in (0, 1))."""
        s = len(centres_ticks)
        units = s * cls.CALIBRATED_UNITS_PER_BIN
        positions = tuple(int(round(c * units)) for c in centres_ticks)
        if not all(0 <= a < b < units for a, b in zip(positions, positions[1:])):
            raise ValueError(f"bin centres {centres_ticks} are not increasing inside the tick")
        return cls(s, int(first_input), units, positions, calibrated=True)

    @classmethod
    def from_meta(cls, unit):
        """From a run's meta.json ``time_unit`` (what the capture used); None: a run written before
        sub-ticks, whose edges are ticks."""
        if not unit:
            return cls()
        return cls(int(unit["samples_per_tick"]), int(unit.get("first_input", 0)), int(unit["units_per_tick"]),
                   tuple(int(p) for p in unit["subtick_positions"]), bool(unit.get("calibrated")))

    def to_meta(self):
        return {"units_per_tick": self.units_per_tick, "samples_per_tick": self.samples_per_tick,
                "subtick_positions": list(self.positions), "first_input": self.first_input,
                "calibrated": self.calibrated}

    @property
    def unit_name(self):
        """What one unit is called in messages."""
        if self.units_per_tick == 1:
            return "tick"
        return "sub-tick" if not self.calibrated else f"1/{self.units_per_tick} tick"

    def place(self, ticks, chans, fractions):
        """Edge times (uint64) of edges at ``ticks`` on channels ``chans`` with their records' ``fractions``."""
        times = np.asarray(ticks, dtype=np.uint64)
        if self.units_per_tick == 1:
            return times
        times = times * np.uint64(self.units_per_tick)
        if fractions is None or self.samples_per_tick == 1:
            return times
        positions = np.asarray(self.positions, dtype=np.uint64)[self.sample_index(chans, fractions)]
        return times + np.where(chans >= self.first_input, positions, np.uint64(0))

    def sample_index(self, chans, fractions):
        """Each edge's first sample at its new level (0 .. S-1), from its record's fraction field: input
        i's log2(S) bits from bit i * log2(S); 0 for an output (its bits are not in the field)."""
        chans = np.asarray(chans)
        bits_per_input = self.samples_per_tick.bit_length() - 1
        inputs = chans.astype(np.int64) - self.first_input
        shift = np.where(inputs >= 0, inputs * bits_per_input, 0).astype(np.uint16)
        index = (np.asarray(fractions, dtype=np.uint16) >> shift) & np.uint16(self.samples_per_tick - 1)
        return np.where(inputs >= 0, index, 0)


def edges_from_records(records, fractions=None, subticks=None):
    """Records [(tick, channel mask, levels)] or three (four, with the fractions) arrays -> edge arrays
    (time, channel, level).

    One record carries every channel that changed in that tick; each set mask bit becomes an edge.
    Times are ticks, or finer units on a rig that samples its inputs more than once a tick
    (``subticks``, a :class:`Subticks`; ``fractions``: the records' fraction fields). Vectorised:
    ~10^7 records/s."""
    if isinstance(records, tuple) and len(records) in (3, 4) and isinstance(records[0], np.ndarray):
        rec_ticks, masks, lv = records[:3]
        if len(records) == 4 and fractions is None:
            fractions = records[3]
    else:
        arr = np.array(records, dtype=np.uint64)
        arr = arr.reshape(-1, arr.shape[-1] if arr.ndim == 2 else 3)
        if arr.shape[1] not in (3, 4):
            raise ValueError(f"records of {arr.shape[1]} fields: (tick, mask, levels[, fraction]) expected")
        rec_ticks, masks, lv = arr[:, 0], arr[:, 1], arr[:, 2]
        if arr.shape[1] == 4 and fractions is None:
            fractions = arr[:, 3]
    masks = np.asarray(masks).astype(np.uint16, copy=False)
    lv = np.asarray(lv, dtype=np.uint16)
    count, first, table = _mask_bits()
    # The fractions matter only to a rig that samples its inputs more than once a tick.
    fractions_used = subticks is not None and fractions is not None and subticks.units_per_tick != 1 \
        and subticks.samples_per_tick != 1
    if not fractions_used and kernels.available():
        # One compiled pass (hilat.kernels): the same edges as the table's below.
        times, chans, levels = kernels.edges_from_records(rec_ticks, masks, lv, int(count[masks].sum(dtype=np.int64)))
        if subticks is not None:
            times = subticks.place(times, chans, None)
        return times, chans, levels
    # Each record gives count[mask] edges, its set bits in ascending order: table[first[mask] + j].
    per_record = count[masks]
    rows = np.repeat(np.arange(len(masks), dtype=np.intp), per_record)
    # table index of edge e: first[mask] of its record + (e - the record's first edge).
    start = first[masks].astype(np.int64) - (np.cumsum(per_record, dtype=np.int64) - per_record)
    chans = table[np.repeat(start, per_record) + np.arange(len(rows), dtype=np.int64)]
    levels = ((lv[rows] >> chans) & 1).astype(np.uint8)
    times = np.asarray(rec_ticks, dtype=np.uint64)[rows]
    if subticks is not None:
        times = subticks.place(times, chans, None if fractions is None else np.asarray(fractions)[rows])
    return times, chans.astype(np.uint8), levels


_MASK_BITS = None


def _mask_bits():
    """For every 16-bit channel mask: its number of set bits (uint8), where its bits start in
    ``table`` (int64), and ``table``: every mask's set bits in ascending order (uint16), mask after
    mask (524,288 entries; built once)."""
    global _MASK_BITS
    if _MASK_BITS is None:
        bits = np.unpackbits(np.arange(1 << 16, dtype="<u2").view(np.uint8).reshape(-1, 2), axis=1,
                             bitorder="little")
        count = bits.sum(axis=1, dtype=np.uint8)
        first = np.concatenate(([0], np.cumsum(count, dtype=np.int64)[:-1]))
        _MASK_BITS = (count, first, np.nonzero(bits)[1].astype(np.uint16))
    return _MASK_BITS


def in_subticks(units_per_tick, offset_ticks, deadline_ticks, measures=()):
    """A capture's durations (in ticks: the calibrated offset, the deadline, each measure's deadline)
    in the analysis's time unit, 1/``units_per_tick`` tick (``Subticks``); unchanged when it is the tick."""
    s = int(units_per_tick)
    # A loopback offset is whole units (7.25 ticks at S = 4); in coarser units, the floor, as a
    # loopback measured in them would have found it.
    offset = int(math.floor(offset_ticks * s))
    if s == 1:
        return offset, deadline_ticks, list(measures)
    return (offset, None if deadline_ticks is None else int(deadline_ticks) * s,
            [m if m.deadline_ticks is None else dataclasses.replace(m, deadline_ticks=m.deadline_ticks * s)
             for m in measures])


GAP_OPEN_END = np.iinfo(np.int64).max   # a gap that runs to the end of the run
ALL_CHANNELS = 0xFFFFFFFF                # a gap on every channel (the link lost frames)
TAG_UNKNOWN = 2                          # tag_at_start / tag_in_window where a gap hides the tag's level


class Gaps:
    """Where the record stream has holes (docs/analysis.md, "Gaps"): spans [start, end) in the
    analysis's unit on a mask of channels, whose edges may be missing there. A gateware overflow
    marker is a gap on the channels that dropped, from the first lost record's tick to the first
    record after the marker; frames lost on the link, from just after the last record before to the
    first record after, on every channel; a capture cut short, from just after its last record to
    the end (``GAP_OPEN_END``). Nothing is computed across a gap: a window that touches one on a
    channel its kind depends on is **unknown** for that kind."""

    def __init__(self, start=(), end=(), channels=()):
        self.start = np.asarray(start, dtype=np.int64).reshape(-1)
        self.end = np.asarray(end, dtype=np.int64).reshape(-1)
        self.channels = np.asarray(channels, dtype=np.uint32).reshape(-1)
        self._merged = {}

    @classmethod
    def of(cls, items):
        """From (start, end, channel mask) triples."""
        items = list(items)
        if not items:
            return cls()
        start, end, channels = zip(*items)
        return cls(start, end, [int(c) & ALL_CHANNELS for c in channels])

    def __len__(self):
        return len(self.start)

    def __add__(self, other):
        return Gaps(np.concatenate((self.start, other.start)), np.concatenate((self.end, other.end)),
                    np.concatenate((self.channels, other.channels)))

    def items(self):
        return list(zip(self.start.tolist(), self.end.tolist(), self.channels.tolist()))

    def select(self, keep):
        return Gaps(self.start[keep], self.end[keep], self.channels[keep])

    def on(self, mask):
        """The gaps touching any channel of ``mask``, merged: disjoint, sorted (starts, ends)."""
        mask = int(mask) & ALL_CHANNELS
        if mask not in self._merged:
            sel = (self.channels & np.uint32(mask)) != 0
            s, e = self.start[sel], self.end[sel]
            if len(s) > 1:
                order = np.argsort(s, kind="stable")
                s, e = s[order], np.maximum.accumulate(e[order])
                new = np.concatenate(([True], s[1:] > e[:-1]))
                last = np.append(np.flatnonzero(new)[1:] - 1, len(s) - 1)
                s, e = s[new], e[last]
            self._merged[mask] = (s, e)
        return self._merged[mask]

    def touches(self, mask, lo, hi):
        """Per span [lo, hi): whether a gap on a channel of ``mask`` overlaps it (bool array)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        s, e = self.on(mask)
        if not len(s) or not mask:
            return np.zeros(lo.shape, bool)
        idx = np.searchsorted(e, lo, side="right")        # the first gap ending after lo
        inside = idx < len(s)
        return inside & (s[np.minimum(idx, len(s) - 1)] < hi) & (hi > lo)

    def touches_to_end(self, mask, tick):
        """Whether a gap on a channel of ``mask`` lies anywhere from ``tick`` to the end of the run."""
        return bool(self.touches(mask, [tick], [GAP_OPEN_END])[0])


GAP_OVERFLOW, GAP_LINK, GAP_CUT_SHORT = 1, 2, 3   # why a gap is there (runs' gaps.bin)
GAP_REASONS = {GAP_OVERFLOW: "gateware FIFO overflow", GAP_LINK: "frames lost on the link",
               GAP_CUT_SHORT: "capture cut short"}


class GapTracker:
    """Turns the stream's disturbances, in stream order between the records, into closed gaps
    (start, end, channels, reason) in the edges' unit (1/``units_per_tick`` tick):

    - an overflow marker (``overflow``): the gateware dropped records on ``channels`` from its tick
      on; the gap ends at the first record after the marker (the gateware refuses records from a
      drop until its marker is written, so none later than the gap's start comes before it);
    - frames lost on the link (``frames_lost``): every channel, from just after the last record
      before to the first record after;
    - the end (``close``): gaps still open run to the end of the run; a capture cut short adds
      one from just after its last edge."""

    def __init__(self, units_per_tick=1):
        self.units = int(units_per_tick)
        self.open = []              # (start, channels, reason) waiting for the next record
        self.last_record_tick = None
        self.count = 0

    def overflow(self, tick, channels):
        self.open.append((int(tick) * self.units, int(channels), GAP_OVERFLOW))

    def frames_lost(self):
        start = 0 if self.last_record_tick is None else (self.last_record_tick + 1) * self.units
        self.open.append((start, ALL_CHANNELS, GAP_LINK))

    def records(self, record_ticks):
        """Records arrived (their ticks, in order): the open gaps close at the first; returns them."""
        if not len(record_ticks):
            return []
        closed = []
        if self.open:
            end = int(record_ticks[0]) * self.units
            closed = [(start, max(end, start), channels, reason) for start, channels, reason in self.open]
            self.open = []
            self.count += len(closed)
        self.last_record_tick = int(record_ticks[-1])
        return closed

    def close(self, cut_short_after=None):
        """The gaps still open, to the end of the run; ``cut_short_after``: the last edge's time of a
        capture that ended early (what came after it is unknown)."""
        closed = [(start, GAP_OPEN_END, channels, reason) for start, channels, reason in self.open]
        self.open = []
        if cut_short_after is not None:
            closed.append((int(cut_short_after) + 1, GAP_OPEN_END, ALL_CHANNELS, GAP_CUT_SHORT))
        self.count += len(closed)
        return closed


def _level_at(edge_ticks, edge_levels, at, initial=0):
    """Level of a channel at ticks ``at`` (inclusive of an edge at that tick)."""
    if len(edge_ticks) == 0:
        return np.full(len(at), initial, dtype=np.uint8)
    idx = np.searchsorted(edge_ticks, at, side="right") - 1
    out = np.where(idx >= 0, edge_levels[np.maximum(idx, 0)], initial)
    return out.astype(np.uint8)


@dataclass
class Pairing:
    stim_tick: np.ndarray
    window_end: np.ndarray
    isr_latency: np.ndarray      # ticks, offset subtracted; MISSING where missed or unknown
    task_latency: np.ndarray
    isr_to_task: np.ndarray
    isr_duration: np.ndarray     # ticks from the matched ISR rise to the next ISR fall
    task_duration: np.ndarray
    isr_tick: np.ndarray         # tick of the matched response edge (MISSING where missed)
    task_tick: np.ndarray
    isr_duplicates: np.ndarray   # extra ISR rises in the window
    task_duplicates: np.ndarray
    tag_at_stimulus: np.ndarray  # 0/1, TAG_UNKNOWN where a gap hides the tag
    tag_in_window: np.ndarray
    offset_mu: int = 0
    # {kind: uint8 array}: 1 where a gap touches what the kind depends on (its value is MISSING,
    # and it is neither a miss nor a sample); missing kinds: nothing unknown.
    unknown: dict = dataclasses.field(default_factory=dict)
    # Task rises in a window before its matched ISR rise: late tasks of earlier stimuli, never
    # this stimulus's task (docs/analysis.md, "Pairing").
    task_before_isr: np.ndarray = None

    def __len__(self):
        return len(self.stim_tick)

    def latency(self, kind):
        return {"stim_to_isr": self.isr_latency, "stim_to_task": self.task_latency,
                "isr_to_task": self.isr_to_task, "isr_duration": self.isr_duration,
                "task_duration": self.task_duration}[kind]

    def unknown_of(self, kind):
        flags = self.unknown.get(kind)
        return flags if flags is not None else np.zeros(len(self), np.uint8)

    def select(self, keep):
        """The pairing restricted to stimuli where ``keep`` is true."""
        idx = np.flatnonzero(keep)     # one index array, then take(): much faster than 13 boolean masks
        fields = {k: (v.take(idx) if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        fields["unknown"] = {k: v.take(idx) for k, v in self.unknown.items()}
        return Pairing(**fields)

    def untagged(self):
        return self.select(self.tag_in_window == 0)


class EdgeGroups:
    """The edges split by (channel, pin level after the edge), each group in tick order: one stable
    counting sort, then any group is a slice."""

    def __init__(self, ticks, chans, levels):
        ticks = np.asarray(ticks, dtype=np.int64)
        chans = np.asarray(chans)
        levels = np.asarray(levels)
        if len(ticks) and np.any(ticks[1:] < ticks[:-1]):
            order = np.argsort(ticks, kind="stable")
            ticks, chans, levels = ticks[order], chans[order], levels[order]
        self.ticks = ticks
        key = (chans.astype(np.uint8) << 1) | levels.astype(np.uint8)
        if kernels.available():   # the ticks themselves grouped, in one compiled counting sort
            self._grouped, self._bounds = kernels.group(ticks, key, 2 * 16)
            self._order = None
        else:
            self._order = np.argsort(key, kind="stable")
            self._bounds = np.concatenate(([0], np.cumsum(np.bincount(key, minlength=2 * 16))))

    def __call__(self, channel, level):
        if channel is None:  # a role no channel plays
            return self.ticks[:0]
        k = channel << 1 | level
        if self._order is None:
            return self._grouped[self._bounds[k]:self._bounds[k + 1]]
        return self.ticks.take(self._order[self._bounds[k]:self._bounds[k + 1]])

    @property
    def last_tick(self):
        return int(self.ticks[-1]) if len(self.ticks) else -1


def _tag_flags(groups, roles, starts, window_end, tag_level=None, gaps=None):
    """(tag level at each start, tag active at any time in [start, window end)), as uint8;
    TAG_UNKNOWN for both where a gap on the tag's channel lies between the tag's last edge before
    the start and the window's end (its level there is not known). ``tag_level``: the tag's level
    (1 active) before its first edge in ``groups``, where earlier edges set it (the streaming
    aggregator's previous chunks); None: see below."""
    if roles.tag is None:
        zeros = np.zeros(len(starts), np.uint8)
        return zeros, zeros
    active = roles.active_level(roles.tag)
    tag_rises, tag_falls = groups(roles.tag, active), groups(roles.tag, 1 - active)
    tag_ticks = np.concatenate((tag_rises, tag_falls))
    tag_levels = np.concatenate((np.ones(len(tag_rises), np.uint8), np.zeros(len(tag_falls), np.uint8)))
    tag_order = np.argsort(tag_ticks, kind="stable")
    # An edge is a change of level: before the tag's first edge it was at the other level (an
    # active-low tag idling low is active from the start). A tag without edges counts as inactive.
    if tag_level is not None:
        initial = int(tag_level)
    else:
        initial = 1 - int(tag_levels[tag_order[0]]) if len(tag_order) else 0
    tag_at = _level_at(tag_ticks[tag_order], tag_levels[tag_order], starts, initial=initial)
    # Active at any time in [S, end): active at S, or a rise inside the window.
    rise_inside = kernels.searchsorted(tag_rises, window_end, "left") > kernels.searchsorted(tag_rises, starts, "left")
    tag_window = ((tag_at == 1) | rise_inside).astype(np.uint8)
    if gaps is not None and len(gaps):
        sorted_ticks = tag_ticks[tag_order]
        before = np.searchsorted(sorted_ticks, starts, side="right") - 1
        last_edge = np.where(before >= 0, sorted_ticks[np.maximum(before, 0)] if len(sorted_ticks) else 0,
                             np.iinfo(np.int64).min)
        starts = np.asarray(starts, dtype=np.int64)
        bit = channel_bit(roles.tag)
        hidden_at = gaps.touches(bit, last_edge, starts + 1)
        hidden_window = gaps.touches(bit, last_edge, np.maximum(window_end, starts + 1))
        # Tagged for sure: active at the start (seen), or a rise seen inside the window.
        sure = ((tag_at == 1) & ~hidden_at) | rise_inside
        tag_at = np.where(hidden_at, TAG_UNKNOWN, tag_at).astype(np.uint8)
        tag_window = np.where(sure, 1, np.where(hidden_window, TAG_UNKNOWN, tag_window)).astype(np.uint8)
    return tag_at, tag_window


def pair(ticks, chans, levels, roles, deadline=None, end_tick=None, offset_mu=0, groups=None, tag_level=None,
         gaps=None, task_after_isr=True):
    """Pair stimuli and responses (``roles``: a :class:`Channels`). ``end_tick``: the capture's last
    tick (closes the last window). Each role's active edge is its rise, or its fall on an
    active-low input or an inverted stimulus. ``tag_level``: the tag's level (1 active) before the
    first edge given, when edges before them set it (None: the opposite of its first edge's).
    ``gaps`` (:class:`Gaps`): where edges may be missing; a window that touches one on a channel a
    kind depends on is unknown for that kind (``Pairing.unknown``). ``task_after_isr`` False: the
    on-rig engine's rule, the window's first task rise whatever the ISR (docs/engine.md)."""
    groups = groups if groups is not None else EdgeGroups(ticks, chans, levels)

    def active(channel):
        return groups(channel, roles.active_level(channel) if channel is not None else 1)

    def inactive(channel):
        return groups(channel, 1 - roles.active_level(channel) if channel is not None else 0)

    stim = active(roles.stimulus)
    isr_rise, isr_fall = active(roles.isr), inactive(roles.isr)
    task_rise, task_fall = active(roles.task), inactive(roles.task)
    n = len(stim)
    last = end_tick if end_tick is not None else groups.last_tick + 1
    window_end = np.append(stim[1:], last + 1).astype(np.int64) if n else np.zeros(0, np.int64)
    if deadline is not None and n:
        window_end = np.minimum(window_end, stim + int(deadline))

    def first_in_window(rises, falls, after):
        """The first rise at or after ``after`` (per window) and before the window's end, the rises
        after it in the window, and the pulse's duration."""
        if kernels.available() and rises.dtype == np.int64 and falls.dtype == np.int64:
            return kernels.first_in_window(rises, falls, after, window_end, MISSING)
        lo = kernels.searchsorted(rises, after, side="left")
        hi = kernels.searchsorted(rises, window_end, side="left")
        found = hi > lo
        at = np.full(n, MISSING, dtype=np.int64)
        at[found] = rises[lo[found]]
        # Duration: the first fall after the matched rise (MISSING if the capture ended first).
        duration = np.full(n, MISSING, dtype=np.int64)
        if found.any() and len(falls):
            fi = kernels.searchsorted(falls, at[found], side="right")
            has_fall = fi < len(falls)
            idx = np.flatnonzero(found)[has_fall]
            duration[idx] = falls[fi[has_fall]] - at[idx]
        return at, np.maximum(hi - lo - 1, 0), duration

    isr_at, isr_dup, isr_duration = first_in_window(isr_rise, isr_fall, stim)
    # The task response is the first task rise at or after the window's ISR rise: a task rise before
    # it is the late task of an earlier stimulus, and with no ISR rise in the window none is this
    # stimulus's (a rig without an ISR role pairs the first task rise in the window).
    task_from = (np.where(isr_at != MISSING, isr_at, window_end) if roles.isr is not None and task_after_isr
                 else stim)
    task_at, task_dup, task_duration = first_in_window(task_rise, task_fall, task_from)
    task_before_isr = (kernels.searchsorted(task_rise, np.minimum(task_from, window_end), side="left")
                       - kernels.searchsorted(task_rise, stim, side="left")).astype(np.int64)
    isr_latency = np.where(isr_at != MISSING, isr_at - stim - offset_mu, MISSING)
    task_latency = np.where(task_at != MISSING, task_at - stim - offset_mu, MISSING)
    both = (isr_at != MISSING) & (task_at != MISSING)
    isr_to_task = np.where(both, task_at - isr_at, MISSING)
    tag_at, tag_window = _tag_flags(groups, roles, stim, window_end, tag_level, gaps)
    unknown = {}
    if gaps is not None and len(gaps) and n:
        stim_bit, isr_bit, task_bit = (channel_bit(c) for c in (roles.stimulus, roles.isr, roles.task))
        isr_hidden = gaps.touches(stim_bit | isr_bit, stim, window_end)
        task_hidden = gaps.touches(stim_bit | task_bit, stim, window_end)

        def pulse_hidden(at, duration, bit):
            # A duration also depends on its pin from the rise to the fall (or the run's end).
            found = at != MISSING
            end = np.where(duration != MISSING, at + duration + 1, GAP_OPEN_END)
            return found & gaps.touches(bit, np.where(found, at, 0), end)

        unknown = {"stim_to_isr": isr_hidden, "stim_to_task": task_hidden | isr_hidden,
                   "isr_to_task": isr_hidden | task_hidden,
                   "isr_duration": isr_hidden | pulse_hidden(isr_at, isr_duration, isr_bit),
                   "task_duration": task_hidden | isr_hidden | pulse_hidden(task_at, task_duration, task_bit)}
        unknown = {k: v.astype(np.uint8) for k, v in unknown.items()}
        values = {"stim_to_isr": isr_latency, "stim_to_task": task_latency, "isr_to_task": isr_to_task,
                  "isr_duration": isr_duration, "task_duration": task_duration}
        for kind, flags in unknown.items():
            values[kind][flags.astype(bool)] = MISSING
        isr_dup = np.where(isr_hidden, 0, isr_dup)
        task_dup = np.where(unknown["stim_to_task"].astype(bool), 0, task_dup)
        task_before_isr = np.where(unknown["stim_to_task"].astype(bool), 0, task_before_isr)
    return Pairing(stim, window_end, isr_latency, task_latency, isr_to_task, isr_duration, task_duration,
                   isr_at, task_at, isr_dup, task_dup, tag_at, tag_window, int(offset_mu), unknown,
                   task_before_isr)


class Measurements:
    """Every kind of one capture, by name: the built-in stimulus kinds (when a stimulus fired) and
    the measurement definitions, each a :class:`measures.Series` with its own start edges."""

    def __init__(self, titles, series, stimuli, task_before_isr=0, task_before_isr_each=None):
        self.titles = titles       # {kind: title}, in report order
        self.series = series       # {kind: Series}
        self.stimuli = stimuli     # stimuli of the built-in kinds (0: none fired)
        self.task_before_isr = task_before_isr  # task rises before their window's ISR (late tasks)
        self.task_before_isr_each = task_before_isr_each   # the same per stimulus (None: not known)

    @property
    def kinds(self):
        return list(self.titles)

    def latency(self, kind):
        return self.series[kind].values

    def subset(self, kind, subset="all"):
        """A kind's samples: all, untagged or tagged; in the untagged subset a sample whose tag a gap
        hid is unknown (it might have been tagged)."""
        s = self.series[kind]
        if subset == "all":
            return s
        if subset == "tagged":
            return s.take(np.flatnonzero(s.tag_in_window == 1))
        sel = s.take(np.flatnonzero(s.tag_in_window != 1))
        hidden = sel.tag_in_window == TAG_UNKNOWN
        if hidden.any():
            sel.unknown = sel.unknown | hidden.astype(np.uint8)
            sel.values = np.where(hidden, MISSING, sel.values)
            sel.duplicates = np.where(hidden, 0, sel.duplicates)
        return sel

    def take_before(self, tick):
        """Only the samples whose start edge lies before ``tick``."""
        each, late = self.task_before_isr_each, self.task_before_isr
        if each is not None:   # only the stimuli kept (a streamed tail's others are counted later)
            each = each[self.series[KINDS[0][0]].start_mu < tick]
            late = int(each.sum())
        return Measurements(self.titles, {k: _series_before(s, tick) for k, s in self.series.items()},
                            self.stimuli, late, each)


def _series_before(series, tick):
    """The samples of ``series`` whose start lies before ``tick``: a prefix (starts in order) as views,
    not copies."""
    idx = np.flatnonzero(series.start_mu < tick)
    if len(idx) and idx[-1] != len(idx) - 1:
        return series.take(idx)
    n = len(idx)
    return Series(series.start_mu[:n], series.window_end[:n], series.values[:n], series.duplicates[:n],
                  series.tag_at_start[:n], series.tag_in_window[:n], series.unknown[:n])


def kind_titles(roles, measures=(), builtin=True):
    titles = dict(KINDS) if builtin else {}
    titles.update((m.name, m.title(roles.names)) for m in measures)
    return titles


def measure(ticks, chans, levels, roles, measures=(), builtin=True, deadline=None, end_tick=None, offset_mu=0,
            tag_level=None, gaps=None):
    """:class:`Measurements` of a capture: the built-in kinds (``builtin``: a stimulus fired; see
    :func:`pair`, also for ``tag_level`` and ``gaps``) and each measurement definition
    (``hilat.analysis.measures``)."""
    groups = EdgeGroups(ticks, chans, levels)
    last = end_tick if end_tick is not None else groups.last_tick + 1
    series = {}
    stimuli = 0
    task_before_isr = 0
    if builtin:
        p = pair(ticks, chans, levels, roles, deadline, end_tick=last, offset_mu=offset_mu, groups=groups,
                 tag_level=tag_level, gaps=gaps)
        stimuli = len(p)
        task_before_isr = int(p.task_before_isr.sum()) if p.task_before_isr is not None else 0
        dups = {"stim_to_isr": p.isr_duplicates, "stim_to_task": p.task_duplicates}
        for kind, _ in KINDS:
            series[kind] = Series(p.stim_tick, p.window_end, p.latency(kind),
                                  dups.get(kind, np.zeros(len(p), np.int64)).astype(np.int64),
                                  p.tag_at_stimulus, p.tag_in_window, p.unknown_of(kind))
    for m in measures:
        starts, window_end, values, duplicates, unknown = compute(
            m, groups(m.start.channel, m.start.level), groups(m.end.channel, m.end.level), last, offset_mu,
            gaps=gaps)
        tag_at, tag_window = _tag_flags(groups, roles, starts, window_end, tag_level, gaps)
        series[m.name] = Series(starts, window_end, values, duplicates, tag_at, tag_window, unknown)
    return Measurements(kind_titles(roles, measures, builtin), series, stimuli, task_before_isr,
                        p.task_before_isr if builtin and p.task_before_isr is not None else None)
