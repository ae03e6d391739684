"""The rig's channels and roles (``Channels``), the sub-tick positions of edges (``Subticks``) and
edges from records: what the pairing reads."""

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from hilat import kernels

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
        sub-ticks, whose edges are ticks. A TDC rig's (``"tdc"`` in it) is a ``TdcSubticks``."""
        if not unit:
            return cls()
        if unit.get("tdc"):
            return TdcSubticks.from_meta(unit)
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

    @property
    def uses_fractions(self):
        """Whether the records' fraction fields move an edge inside its tick."""
        return self.units_per_tick != 1 and self.samples_per_tick != 1

    @property
    def placement(self):
        """Per TDC input, how its edges are placed (none here: ``TdcSubticks`` has them)."""
        return ()

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


# A TDC rig's run unit: 1/4096 tick (1.74 ps at ts 140 MHz, 4.88 ps at the simulator's 50 MHz), far
# below a TDC bin (~33 ps) and its centre's uncertainty (docs/tdc.md, "The run's unit").
TDC_UNITS_PER_TICK = 4096
TDC_CODE_BITS = 8


@dataclass(frozen=True)
class TdcSubticks:
    """Where the analysis puts an input edge on a rig whose first ``len(positions)`` DUT inputs have a
    carry-chain TDC (docs/tdc.md): the record's fraction holds 8 bits of code per TDC input (input i at
    bits 8i .. 8i+7, code 0: no edge of that input in the record), and an edge of code c recorded at
    tick t is at ``t * units_per_tick + positions[i][c]``: ``positions[i][c]`` = tick - T(c) in units,
    T(c) the code's bin centre before the tick's closing clock edge (negative for a late edge, one
    that lies in the tick before). Outputs and inputs without a TDC stay at whole ticks.
    ``placement``: per TDC input (channel, "measured" / "predicted" / "online", source), what the
    run states about where its positions came from. The same ``place()`` as ``Subticks``."""
    first_input: int
    positions: tuple                 # per TDC input: 256 positions (units) by code
    placement: tuple = ()            # per TDC input: {"channel", "placement", "source"}
    units_per_tick: int = TDC_UNITS_PER_TICK

    samples_per_tick = 1
    uses_fractions = True

    def __post_init__(self):
        rows = [tuple(int(p) for p in row) for row in self.positions]
        if any(len(row) != 1 << TDC_CODE_BITS for row in rows):
            raise ValueError(f"a TDC input's positions: {1 << TDC_CODE_BITS} codes each")
        object.__setattr__(self, "positions", tuple(rows))
        object.__setattr__(self, "placement", tuple(dict(p) for p in self.placement))

    @property
    def tdc_inputs(self):
        return len(self.positions)

    @property
    def calibrated(self):
        """Whether any TDC input stands at measured bins (code density), not only predicted ones."""
        return any(p.get("placement") in ("measured", "online") for p in self.placement)

    @property
    def unit_name(self):
        return f"1/{self.units_per_tick} tick"

    def place(self, ticks, chans, fractions):
        """Edge times (uint64; a late edge at tick 0 would wrap, no capture starts there) of edges at
        ``ticks`` on channels ``chans`` with their records' ``fractions`` (8 bits of code per TDC input)."""
        times = np.asarray(ticks, dtype=np.uint64) * np.uint64(self.units_per_tick)
        if fractions is None or not self.tdc_inputs:
            return times
        inputs = np.asarray(chans).astype(np.int64) - self.first_input
        tdc = (inputs >= 0) & (inputs < self.tdc_inputs)
        row = np.where(tdc, inputs, 0)
        shift = (row * TDC_CODE_BITS).astype(np.uint64)
        codes = (np.asarray(fractions, dtype=np.uint64) >> shift) & np.uint64((1 << TDC_CODE_BITS) - 1)
        position = self._table[row, codes.astype(np.intp)]
        return (times.view(np.int64) + np.where(tdc, position, 0)).view(np.uint64)

    def unmeasured(self, ticks, masks, fractions):
        """The records holding an edge of code 0 on a TDC input (a change its line did not measure):
        (their ticks, the channel mask of those edges, how many such edges in all)."""
        masks = np.asarray(masks).astype(np.uint32)
        fractions = np.asarray(fractions, dtype=np.uint64)
        hits = np.zeros(len(masks), np.uint32)
        for i in range(self.tdc_inputs):   # at most 8: a loop over inputs, not records
            bit = np.uint32(1 << (self.first_input + i))
            code = (fractions >> np.uint64(i * TDC_CODE_BITS)) & np.uint64((1 << TDC_CODE_BITS) - 1)
            hits |= np.where(((masks & bit) != 0) & (code == 0), bit, np.uint32(0))
        rows = np.flatnonzero(hits)
        edges = int(np.unpackbits(hits[rows].view(np.uint8)).sum()) if len(rows) else 0
        return np.asarray(ticks)[rows], hits[rows], edges

    # cached_property: asked once per chunk of records, computed once (it writes the instance's
    # __dict__ directly, which a frozen dataclass allows).
    @functools.cached_property
    def unmeasured_span_ticks(self):
        """How many ticks before its record's an unmeasured change may lie: the line settles one
        line length after the change (its longest bin centre T, from the positions: T = tick -
        position), and the record's tick is the one whose closing clock edge saw it settled."""
        lowest = min((min(row[1:]) for row in self.positions), default=0)
        return int(np.ceil(1 - lowest / self.units_per_tick)) + 1

    @functools.cached_property
    def _table(self):
        return np.array(self.positions, dtype=np.int64).reshape(-1, 1 << TDC_CODE_BITS)

    def to_meta(self):
        return {"units_per_tick": self.units_per_tick, "samples_per_tick": 1, "subtick_positions": [0],
                "first_input": self.first_input, "calibrated": self.calibrated,
                "tdc": {"code_bits": TDC_CODE_BITS,
                        "inputs": [{**p, "positions_mu": list(row)} for p, row in zip(self.placement,
                                                                                        self.positions)]}}

    @classmethod
    def from_meta(cls, unit):
        inputs = unit["tdc"]["inputs"]
        return cls(int(unit.get("first_input", 0)), tuple(tuple(i["positions_mu"]) for i in inputs),
                   tuple({k: v for k, v in i.items() if k != "positions_mu"} for i in inputs),
                   int(unit["units_per_tick"]))


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
    # The fractions matter only to a rig that samples its inputs more than once a tick, or has a TDC.
    fractions_used = subticks is not None and fractions is not None and subticks.uses_fractions
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
    chans = chans.astype(np.uint8)
    if subticks is not None:
        times = subticks.place(times, chans, None if fractions is None else np.asarray(fractions)[rows])
        if fractions_used and len(times) > 1 and (np.diff(times.view(np.int64)) < 0).any():
            # One record's edges come in channel order; their positions need not be (two inputs of one
            # tick, a TDC input's edge before an output's tick). A record's edges all lie inside
            # [tick - s0, tick + 1 - s0) (docs/tdc.md), the records' ticks increase: a stable sort
            # orders the edges inside each record and moves none across records.
            order = np.argsort(times.view(np.int64), kind="stable")
            times, chans, levels = times[order], chans[order], levels[order]
    return times, chans, levels


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
