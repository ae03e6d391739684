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

A calibrated rig offset (``offset_ticks``: the rig's own stimulus-pin -> capture delay, measured with a
loopback jumper) is subtracted from the two stimulus -> response latencies only.

Statistics are exact, from the stored samples: Faller's count/min/median/max/mean/std and the tail
percentiles, each percentile only where the sample count supports it.
"""

from dataclasses import dataclass

import numpy as np

# (key, title, measured from the stimulus?)  Keys are stable: they name columns and JSON fields.
KINDS = [
    ("stim_to_isr", "stimulus -> ISR entry"),
    ("stim_to_task", "stimulus -> task"),
    ("isr_to_task", "ISR entry -> task"),
    ("isr_duration", "ISR duration"),
    ("task_duration", "task duration"),
]
KIND_TITLES = dict(KINDS)
MISSING = -1

# Percentiles the reports show (as fractions). p is shown when at least 1/(1-p) samples exist, i.e.
# when at least one sample lies above it; below that the value would just be the maximum.
PERCENTILES = [0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999, 0.999999]


def percentile_label(p):
    """0.999 -> 'p99.9', 0.5 -> 'p50'."""
    text = f"{p * 100:.6f}".rstrip("0").rstrip(".")
    return "p" + text


def samples_needed(p):
    """Smallest sample count that supports percentile p (at least one sample above it)."""
    return int(np.ceil(round(1.0 / (1.0 - p), 6)))


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

        def number_of(ref):
            ref = str(ref)
            if ref in names:
                return names.index(ref)
            if ref.isdigit() and int(ref) < len(names):
                return int(ref)
            raise ValueError(f"no channel {ref!r} on this rig (channels: {', '.join(names)}, or 0..{len(names) - 1})")

        for role, ref in (roles or {}).items():
            if role not in cls.PAIRED_ROLES:
                raise ValueError(f"unknown role {role!r} (roles: {', '.join(cls.PAIRED_ROLES)})")
            number = number_of(ref)
            if (role == "stimulus") != (number < n_outputs):
                raise ValueError(f"{names[number]} cannot be the {role}: "
                                 + ("the stimulus must be an output" if role == "stimulus" else "it is an output"))
            first[role] = number
        low = tuple(sorted({number_of(ref) for ref in active_low}))
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


def edges_from_records(records):
    """Records [(tick, channel mask, levels)] or three arrays -> edge arrays (tick, channel, level).

    One record carries every channel that changed in that tick; each set mask bit becomes an edge.
    Vectorised: ~10^7 records/s."""
    if isinstance(records, tuple) and len(records) == 3 and isinstance(records[0], np.ndarray):
        rec_ticks, masks, lv = records
    else:
        arr = np.array(records, dtype=np.uint64).reshape(-1, 3)
        rec_ticks, masks, lv = arr[:, 0], arr[:, 1], arr[:, 2]
    masks = np.ascontiguousarray(masks, dtype="<u2")
    lv = np.asarray(lv, dtype=np.uint16)
    # Masks of up to 16 channels (protocol v2): the two little-endian bytes of each, bit by bit.
    bits = np.unpackbits(masks.view(np.uint8).reshape(-1, 2), axis=1, bitorder="little")  # (records, 16)
    rows, chans = np.nonzero(bits)
    levels = (lv[rows] >> chans.astype(np.uint16)) & 1
    return (np.asarray(rec_ticks, dtype=np.uint64)[rows], chans.astype(np.uint8), levels.astype(np.uint8))


def _edges(ticks, chans, levels, channel, level):
    sel = (chans == channel) & (levels == level)
    return ticks[sel]


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
    isr_latency: np.ndarray      # ticks, offset subtracted; MISSING where missed
    task_latency: np.ndarray
    isr_to_task: np.ndarray
    isr_duration: np.ndarray     # ticks from the matched ISR rise to the next ISR fall
    task_duration: np.ndarray
    isr_tick: np.ndarray         # tick of the matched response edge (MISSING where missed)
    task_tick: np.ndarray
    isr_duplicates: np.ndarray   # extra ISR rises in the window
    task_duplicates: np.ndarray
    tag_at_stimulus: np.ndarray
    tag_in_window: np.ndarray
    offset_ticks: int = 0

    def __len__(self):
        return len(self.stim_tick)

    def latency(self, kind):
        return {"stim_to_isr": self.isr_latency, "stim_to_task": self.task_latency,
                "isr_to_task": self.isr_to_task, "isr_duration": self.isr_duration,
                "task_duration": self.task_duration}[kind]

    def select(self, keep):
        """The pairing restricted to stimuli where ``keep`` is true."""
        idx = np.flatnonzero(keep)     # one index array, then take(): much faster than 13 boolean masks
        fields = {k: (v.take(idx) if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        return Pairing(**fields)

    def untagged(self):
        return self.select(self.tag_in_window == 0)


def pair(ticks, chans, levels, roles, deadline=None, end_tick=None, offset_ticks=0):
    """Pair stimuli and responses (``roles``: a :class:`Channels`). ``end_tick``: the capture's last
    tick (closes the last window)."""
    ticks = np.asarray(ticks, dtype=np.int64)
    chans = np.asarray(chans)
    levels = np.asarray(levels)
    if roles.active_low:
        # An active-low input's active edge is its fall: pair on the inverted level.
        low = np.isin(chans, roles.active_low)
        levels = np.where(low, 1 - levels, levels).astype(levels.dtype)
    if len(ticks) and np.any(ticks[1:] < ticks[:-1]):
        order = np.argsort(ticks, kind="stable")
        ticks, chans, levels = ticks[order], chans[order], levels[order]
    # Split the edges by (channel, level) in one stable counting sort: each group stays in tick order.
    key = (chans.astype(np.uint8) << 1) | levels.astype(np.uint8)
    order = np.argsort(key, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(key, minlength=2 * 16))))

    def group(channel, level):
        if channel is None:  # a role no channel plays
            return ticks[:0]
        k = channel << 1 | level
        return ticks.take(order[bounds[k]:bounds[k + 1]])

    stim = group(roles.stimulus, roles.stimulus_active)
    isr_rise, isr_fall = group(roles.isr, 1), group(roles.isr, 0)
    task_rise, task_fall = group(roles.task, 1), group(roles.task, 0)
    n = len(stim)
    last = end_tick if end_tick is not None else (int(ticks[-1]) + 1 if len(ticks) else 0)
    window_end = np.append(stim[1:], last + 1).astype(np.int64) if n else np.zeros(0, np.int64)
    if deadline is not None and n:
        window_end = np.minimum(window_end, stim + int(deadline))

    def first_in_window(rises, falls):
        lo = np.searchsorted(rises, stim, side="left")
        if deadline is None:
            # Windows end at the next stimulus: the next window's start index is this one's end.
            hi = np.append(lo[1:], np.searchsorted(rises, window_end[-1:], side="left"))
        else:
            hi = np.searchsorted(rises, window_end, side="left")
        found = hi > lo
        at = np.full(n, MISSING, dtype=np.int64)
        at[found] = rises[lo[found]]
        # Duration: the first fall after the matched rise (MISSING if the capture ended first).
        duration = np.full(n, MISSING, dtype=np.int64)
        if found.any() and len(falls):
            fi = np.searchsorted(falls, at[found], side="right")
            has_fall = fi < len(falls)
            idx = np.flatnonzero(found)[has_fall]
            duration[idx] = falls[fi[has_fall]] - at[idx]
        return at, np.maximum(hi - lo - 1, 0), duration

    isr_at, isr_dup, isr_duration = first_in_window(isr_rise, isr_fall)
    task_at, task_dup, task_duration = first_in_window(task_rise, task_fall)
    isr_latency = np.where(isr_at != MISSING, isr_at - stim - offset_ticks, MISSING)
    task_latency = np.where(task_at != MISSING, task_at - stim - offset_ticks, MISSING)
    both = (isr_at != MISSING) & (task_at != MISSING)
    isr_to_task = np.where(both, task_at - isr_at, MISSING)

    tag_rises, tag_falls = group(roles.tag, 1), group(roles.tag, 0)
    tag_ticks = np.concatenate((tag_rises, tag_falls))
    tag_levels = np.concatenate((np.ones(len(tag_rises), np.uint8), np.zeros(len(tag_falls), np.uint8)))
    tag_order = np.argsort(tag_ticks, kind="stable")
    tag_at = _level_at(tag_ticks[tag_order], tag_levels[tag_order], stim)
    # High at any time in [S, end): high at S, or a rise inside the window.
    rise_inside = np.searchsorted(tag_rises, window_end, "left") > np.searchsorted(tag_rises, stim, "left")
    tag_window = (tag_at == 1) | rise_inside
    return Pairing(stim, window_end, isr_latency, task_latency, isr_to_task, isr_duration, task_duration,
                   isr_at, task_at, isr_dup, task_dup, tag_at, tag_window.astype(np.uint8), int(offset_ticks))


def pulse_widths(ticks, chans, levels, channel, active=1):
    """Every complete pulse on ``channel``: (start ticks, widths in ticks), from each active edge to
    the next inactive edge. A pulse still open at the end of the capture is not included."""
    ticks = np.asarray(ticks, dtype=np.int64)
    starts = _edges(ticks, chans, levels, channel, active)
    ends = _edges(ticks, chans, levels, channel, 1 - active)
    fi = np.searchsorted(ends, starts, side="right")
    ok = fi < len(ends)
    return starts[ok], ends[fi[ok]] - starts[ok]


def _rank(n, p):
    """1-based rank of percentile p among n samples: ceil(p n), at least 1."""
    return min(max(int(np.ceil(p * n - 1e-9)), 1), n)


def exact_percentile(sorted_values, p):
    """The smallest sample v with at least a fraction p of the samples <= v (HdrHistogram's and
    numpy's 'inverted_cdf' definition): always a measured value, never an interpolation."""
    return sorted_values[_rank(len(sorted_values), p) - 1]


def stats(values, percentiles=PERCENTILES):
    """Faller's row (count, min, median, max, mean, std) plus percentiles, in ticks. ``values`` are
    the valid samples (misses removed). Percentiles that the count does not support are None."""
    values = np.asarray(values, dtype=np.int64)
    n = len(values)
    row = {"count": int(n)}
    if n == 0:
        row.update(min=None, median=None, max=None, mean=None, std=None,
                   percentiles={percentile_label(p): None for p in percentiles})
        return row
    lo, hi = int(values.min()), int(values.max())
    if hi - lo <= 4 * n + (1 << 16):
        # Latencies are whole ticks in a narrow range: count them (O(n)) instead of sorting.
        counts = np.bincount(values)[lo:] if lo >= 0 else np.bincount(values - lo)
        cum = np.cumsum(counts)

        def at_rank(rank):          # the rank-th smallest sample, 1-based
            return lo + int(np.searchsorted(cum, rank, side="left"))
        offsets = np.arange(len(counts), dtype=np.float64)
        mean_off = float(counts @ offsets) / n
        mean = lo + mean_off
        var = float(counts @ (offsets - mean_off) ** 2) / (n - 1) if n > 1 else 0.0
    else:
        s = np.sort(values)

        def at_rank(rank):
            return int(s[rank - 1])
        mean = float(s.mean())
        var = float(s.var(ddof=1)) if n > 1 else 0.0
    median = float(at_rank(n // 2 + 1)) if n % 2 else (at_rank(n // 2) + at_rank(n // 2 + 1)) / 2
    row.update(min=lo, median=median, max=hi, mean=mean, std=var ** 0.5)
    row["percentiles"] = {percentile_label(p): (at_rank(_rank(n, p)) if n >= samples_needed(p) else None)
                          for p in percentiles}
    return row


def summarize(pairing, ts_hz, exclude_tagged=False):
    """{kind: {stimuli, count, misses, min, median, max, mean, std, percentiles}} in ticks (Faller's
    table), plus duplicates and the tick period."""
    sel = pairing.untagged() if exclude_tagged else pairing
    out = {}
    for kind, _title in KINDS:
        lat = sel.latency(kind)
        ok = lat[lat != MISSING]
        row = {"stimuli": int(len(lat)), "misses": int(len(lat) - len(ok))}
        row.update(stats(ok))
        out[kind] = row
    out["duplicates"] = {"isr": int(sel.isr_duplicates.sum()), "task": int(sel.task_duplicates.sum())}
    out["tick_ns"] = 1e9 / ts_hz
    return out


def format_table(summary, title=None):
    tick_ns = summary["tick_ns"]
    lines = []
    if title:
        lines.append(title)
    head = f"{'latency':<24}{'count':>7}{'misses':>8}{'min':>11}{'median':>11}{'max':>11}{'mean':>11}{'std':>11}"
    lines += [head + "   (ns)", "-" * len(head)]
    for kind, label in KINDS:
        row = summary[kind]
        if row["count"]:
            vals = [row[k] * tick_ns for k in ("min", "median", "max", "mean", "std")]
            cells = "".join(f"{v:>11.1f}" for v in vals)
        else:
            cells = "".join(f"{'-':>11}" for _ in range(5))
        lines.append(f"{label:<24}{row['count']:>7}{row['misses']:>8}{cells}")
    d = summary["duplicates"]
    lines.append(f"duplicate responses: ISR {d['isr']}, task {d['task']}; 1 tick = {tick_ns:g} ns")
    return "\n".join(lines)
