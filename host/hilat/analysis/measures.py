"""Measurement definitions: named pairs of edges, beyond the built-in stimulus -> ISR/task kinds.

A definition is ``NAME=SPEC`` (``hilat capture --measure``; docs/analysis.md, "Measurement
definitions"):

- ``NAME=A..B[@DEADLINE]`` an **interval**: from each edge A to the first edge B at or after it,
  before the next A (or before A + DEADLINE). No B in that window is a miss; more than one, a
  duplicate (the first is used), as for the built-in kinds. Sacha's send -> receive, signal ->
  handler, yield -> other task; a second stimulus -> its own ISR.
- ``NAME=period:A`` the **period** of one edge: from each A to the next A (a timer task's wake-up
  period; its spread is the timer's resolution and jitter).
- ``NAME=width:A`` the **pulse width** from each edge A to the channel's next opposite edge. A
  pulse the capture ended in is not counted; one whose closing edge was lost is a miss.

An edge ``A`` is ``CHANNEL[:rise|:fall]``; CHANNEL is a channel name (``in0``), a number, or a role
(``stimulus``, ``isr``, ``task``, ``tag``: the channel playing it in this capture). ``rise`` and
``fall`` are the levels on the pin; without one, the channel's *active* edge (the fall of an
``--active-low`` input or of an ``--invert``-ed stimulus, else the rise). DEADLINE is in ticks, or
a number with ns/us/ms/s.

The calibrated rig offset (its own stimulus-pin -> capture delay) is subtracted from an interval
that starts on a stimulus output and ends on an input, as from the built-in stimulus latencies.
"""

import re
from dataclasses import dataclass

import numpy as np

from hilat.values import TICKS, DurationError, parse_duration

# The lower of the two modules: analysis (the built-in kinds, Measurements) imports this one, and
# nothing here imports analysis (``compute`` takes its ``Gaps`` as an argument).

# A sample's value where its window had no response, or was unknown (every kind, built-in or defined).
MISSING = -1
SHAPES = ("interval", "period", "width")
_NAME = re.compile(r"[a-z_][a-z0-9_]*")


class MeasureError(ValueError):
    """A definition that cannot be used; the message says which part and why."""


@dataclass(frozen=True)
class Edge:
    channel: int
    level: int      # the pin's level after the edge: 1 rise, 0 fall


@dataclass(frozen=True)
class Measure:
    name: str
    shape: str                 # one of SHAPES
    start: Edge
    end: Edge                  # interval: B; width: the opposite edge of A; period: A
    deadline_ticks: int | None = None
    subtract_offset: bool = False
    definition: str = ""       # as the user wrote it

    def title(self, names):
        """Human title from the channel names, e.g. "in0 rise -> in1 rise"."""
        def edge(e):
            return f"{names[e.channel]} {'rise' if e.level else 'fall'}"
        if self.shape == "period":
            return f"period of {edge(self.start)}"
        if self.shape == "width":
            return f"{names[self.start.channel]} {'high' if self.start.level else 'low'} pulse width"
        return f"{edge(self.start)} -> {edge(self.end)}" + (
            f" (deadline {self.deadline_ticks} ticks)" if self.deadline_ticks is not None else "")

    def to_json(self):
        return {"name": self.name, "shape": self.shape, "start": [self.start.channel, self.start.level],
                "end": [self.end.channel, self.end.level], "deadline_ticks": self.deadline_ticks,
                "subtract_offset": self.subtract_offset, "definition": self.definition}

    @classmethod
    def from_json(cls, d):
        try:
            m = cls(name=str(d["name"]), shape=str(d["shape"]), start=Edge(*map(int, d["start"])),
                    end=Edge(*map(int, d["end"])), deadline_ticks=d.get("deadline_ticks"),
                    subtract_offset=bool(d.get("subtract_offset")), definition=str(d.get("definition", "")))
        except (KeyError, TypeError, ValueError) as e:
            raise MeasureError(f"not a measurement definition: {d!r} ({e})") from None
        if m.shape not in SHAPES:
            raise MeasureError(f"measurement {m.name!r}: unknown shape {m.shape!r}")
        return m


def _ticks(text, ts_hz):
    try:
        return parse_duration(text, default_unit=TICKS).ticks(ts_hz)
    except DurationError as e:
        raise MeasureError(str(e)) from None


def parse(text, roles, ts_hz=None, reserved=()):
    """``NAME=SPEC`` -> :class:`Measure`, channels resolved against ``roles`` (an
    ``analysis.Channels``). ``reserved``: names already taken (the built-in kinds)."""
    name, sep, spec = text.partition("=")
    name, spec = name.strip(), spec.strip()
    if not sep or not spec:
        raise MeasureError(f"a measurement is NAME=SPEC (e.g. send_to_recv=in0..in1), got {text!r}")
    if not _NAME.fullmatch(name):
        raise MeasureError(f"measurement name {name!r}: lower-case letters, digits and _ (it names columns)")
    if name in reserved:
        raise MeasureError(f"measurement name {name!r} is taken (built-in kinds: {', '.join(reserved)})")

    def edge(ref):
        channel_ref, _, level_text = ref.strip().partition(":")
        channel = roles.resolve(channel_ref.strip())
        if not level_text:
            return Edge(channel, roles.active_level(channel))
        if level_text.strip() not in ("rise", "fall"):
            raise MeasureError(f"{ref!r}: the edge is rise or fall, not {level_text!r}")
        return Edge(channel, 1 if level_text.strip() == "rise" else 0)

    try:
        shape, colon, rest = spec.partition(":")
        if colon and shape in ("period", "width"):
            start = edge(rest)
            end = start if shape == "period" else Edge(start.channel, 1 - start.level)
            return Measure(name, shape, start, end, definition=text.strip())
        if ".." not in spec:
            raise MeasureError(f"{text!r}: SPEC is A..B[@DEADLINE], period:A or width:A")
        span, _, deadline = spec.partition("@")
        a, _, b = span.partition("..")
        start, end = edge(a), edge(b)
        if start == end:
            raise MeasureError(f"{text!r}: from an edge to the same edge is a period: use period:{a.strip()}")
        deadline_ticks = _ticks(deadline, ts_hz) if deadline else None
        if deadline_ticks is not None and deadline_ticks <= 0:
            raise MeasureError(f"{text!r}: the deadline must be > 0")
        return Measure(name, "interval", start, end, deadline_ticks,
                       subtract_offset=roles.is_output(start.channel) and not roles.is_output(end.channel),
                       definition=text.strip())
    except ValueError as e:
        if isinstance(e, MeasureError):
            raise
        raise MeasureError(f"measurement {name!r}: {e}") from None


@dataclass
class Series:
    """One kind's samples: one per start edge, in start order; times and values in the run's unit (mu)."""
    start_mu: np.ndarray         # int64
    window_end: np.ndarray       # int64: where the window of this start closed (exclusive)
    values: np.ndarray           # int64 mu; MISSING (-1) where missed or unknown
    duplicates: np.ndarray       # int64: extra end edges in the window
    tag_at_start: np.ndarray     # uint8 (analysis.TAG_UNKNOWN: hidden by a gap)
    tag_in_window: np.ndarray    # uint8 (analysis.TAG_UNKNOWN: hidden by a gap)
    unknown: np.ndarray = None   # uint8: 1 where a gap touches the window (neither a sample nor a miss)

    def __post_init__(self):
        if self.unknown is None:
            self.unknown = np.zeros(len(self.start_mu), np.uint8)

    def __len__(self):
        return len(self.start_mu)

    def take(self, idx):
        return Series(*(a.take(idx) for a in (self.start_mu, self.window_end, self.values, self.duplicates,
                                              self.tag_at_start, self.tag_in_window, self.unknown)))

    @property
    def n_unknown(self):
        return int(np.count_nonzero(self.unknown))

    @property
    def n_misses(self):
        """Windows without a response that were seen whole (unknown ones are not misses)."""
        return int(np.count_nonzero((self.values == MISSING) & (self.unknown == 0)))

    def valid_mask(self):
        """Where the windows have a measured value (neither missed nor unknown)."""
        return (self.values != MISSING) & (self.unknown == 0)

    def valid(self):
        """The measured values (neither missed nor unknown)."""
        return self.values[self.valid_mask()]


def channel_bit(channel):
    """The mask bit of a channel (0 for a role no channel plays)."""
    return 0 if channel is None else 1 << int(channel)


def compute(m, starts, ends, end_mu, offset_mu=0, gaps=None):
    """The samples of measure ``m``: ``starts``/``ends`` are the ticks of its start and end edges
    (sorted; the same array for a period). Returns (start ticks, window ends, values, duplicates,
    unknown); tags are added by the caller, which knows the tag channel. ``gaps``
    (``analysis.Gaps``): a sample whose window touches one on its channels is unknown."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    n = len(starts)
    mask = channel_bit(m.start.channel) | channel_bit(m.end.channel)
    has_gaps = gaps is not None and len(gaps) > 0

    def unknown_of(lo, hi, values):
        if not has_gaps:
            return np.zeros(len(lo), np.uint8)
        hidden = gaps.touches(mask, lo, hi)
        values[hidden] = MISSING
        return hidden.astype(np.uint8)

    if m.shape == "period":
        if n < 2:
            z = np.zeros(0, np.int64)
            return z, z, z, z, z.astype(np.uint8)
        values = np.diff(starts)
        return starts[:-1], starts[1:], values, np.zeros(n - 1, np.int64), unknown_of(starts[:-1], starts[1:], values)
    next_start = np.append(starts[1:], end_mu + 1) if n else np.zeros(0, np.int64)
    if m.shape == "width":
        # The first opposite edge after each start; a sentinel past the capture where there is none.
        end_at = np.append(ends, end_mu + 1)[np.searchsorted(ends, starts, side="right")]
        closed = end_at < next_start
        # The last pulse, still open when the capture ended, is not a sample (unless a gap hides
        # its end: then it is unknown).
        keep = closed | (np.arange(n) < n - 1)
        if has_gaps and n and not keep[-1]:
            keep[-1] = gaps.touches_to_end(mask, starts[-1])
        values = np.where(closed, end_at - starts, MISSING)
        window = np.where(closed, end_at + 1, next_start)
        values, starts, window = values[keep], starts[keep], window[keep]
        return starts, window, values, np.zeros(len(starts), np.int64), unknown_of(starts, window, values)
    window = next_start
    if m.deadline_ticks is not None and n:
        window = np.minimum(window, starts + int(m.deadline_ticks))
    lo = np.searchsorted(ends, starts, side="left")
    hi = np.searchsorted(ends, window, side="left")
    found = hi > lo
    values = np.full(n, MISSING, dtype=np.int64)
    offset = int(offset_mu) if m.subtract_offset else 0
    values[found] = ends[lo[found]] - starts[found] - offset
    unknown = unknown_of(starts, window, values)
    duplicates = np.where(unknown == 1, 0, np.maximum(hi - lo - 1, 0)).astype(np.int64)
    return starts, window, values, duplicates, unknown
