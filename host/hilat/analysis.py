"""From captured edges to latencies: pairing each stimulus with its responses, then statistics.

Pairing (per stimulus k, active edge at tick S_k; its window runs to the next stimulus, or to
``S_k + deadline`` if that is earlier):

- stimulus -> ISR entry: first ISR-pin rise in the window (SSC "interrupt service response");
- stimulus -> task: first task-pin rise in the window (SSC "interrupt task response");
- ISR entry -> task: their difference (rescheduling latency);
- no rise in the window: a **miss**; more than one: a **duplicate** (counted, the first is used);
- the tag level at the stimulus and whether the tag was high at any time in the window are kept, so
  every figure can be given with and without tagged samples.
"""

from dataclasses import dataclass

import numpy as np

KINDS = [
    ("stim_to_isr", "stimulus -> ISR entry"),
    ("stim_to_task", "stimulus -> task"),
    ("isr_to_task", "ISR entry -> task"),
]
MISSING = -1


@dataclass
class Channels:
    """Which capture channel plays which role (defaults: the SoC's wiring)."""
    stimulus: int = 0
    stimulus_active: int = 1   # level of the stimulus pin while a pulse is active
    isr: int = 2
    task: int = 3
    tag: int = 5


def edges_from_records(records):
    """records [(tick, channels mask, levels)] -> arrays (tick, channel, level, tag-free)."""
    ticks, chans, levels = [], [], []
    for tick, mask, lv in records:
        ch = 0
        while mask:
            if mask & 1:
                ticks.append(tick)
                chans.append(ch)
                levels.append(lv >> ch & 1)
            mask >>= 1
            ch += 1
    return (np.array(ticks, dtype=np.uint64), np.array(chans, dtype=np.uint8),
            np.array(levels, dtype=np.uint8))


def _rises(ticks, chans, levels, channel, active=1):
    sel = (chans == channel) & (levels == active)
    return ticks[sel].astype(np.int64)


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
    isr_latency: np.ndarray      # ticks, MISSING where missed
    task_latency: np.ndarray
    isr_to_task: np.ndarray
    isr_duplicates: np.ndarray   # extra ISR rises in the window
    task_duplicates: np.ndarray
    tag_at_stimulus: np.ndarray
    tag_in_window: np.ndarray

    def latency(self, kind):
        return {"stim_to_isr": self.isr_latency, "stim_to_task": self.task_latency,
                "isr_to_task": self.isr_to_task}[kind]


def pair(ticks, chans, levels, roles=None, deadline=None, end_tick=None):
    """Pair stimuli and responses. ``end_tick``: the capture's last tick (closes the last window)."""
    roles = roles or Channels()
    ticks = np.asarray(ticks, dtype=np.int64)
    order = np.argsort(ticks, kind="stable")
    ticks, chans, levels = ticks[order], np.asarray(chans)[order], np.asarray(levels)[order]
    stim = _rises(ticks, chans, levels, roles.stimulus, roles.stimulus_active)
    isr = _rises(ticks, chans, levels, roles.isr)
    task = _rises(ticks, chans, levels, roles.task)
    n = len(stim)
    last = end_tick if end_tick is not None else (int(ticks[-1]) + 1 if len(ticks) else 0)
    window_end = np.append(stim[1:], last + 1).astype(np.int64) if n else np.zeros(0, np.int64)
    if deadline is not None and n:
        window_end = np.minimum(window_end, stim + int(deadline))

    def first_in_window(resp):
        lo = np.searchsorted(resp, stim, side="left")
        hi = np.searchsorted(resp, window_end, side="left")
        found = hi > lo
        latency = np.full(n, MISSING, dtype=np.int64)
        latency[found] = resp[lo[found]] - stim[found]
        return latency, np.maximum(hi - lo - 1, 0)

    isr_latency, isr_dup = first_in_window(isr)
    task_latency, task_dup = first_in_window(task)
    both = (isr_latency != MISSING) & (task_latency != MISSING)
    isr_to_task = np.where(both, task_latency - isr_latency, MISSING)

    tag_sel = chans == roles.tag
    tag_ticks, tag_levels = ticks[tag_sel], levels[tag_sel]
    tag_at = _level_at(tag_ticks, tag_levels, stim)
    # High at any time in [S, end): high at S, or a rise inside the window.
    tag_rises = tag_ticks[tag_levels == 1]
    rise_inside = np.searchsorted(tag_rises, window_end, "left") > np.searchsorted(tag_rises, stim, "left")
    tag_window = (tag_at == 1) | rise_inside
    return Pairing(stim, window_end, isr_latency, task_latency, isr_to_task, isr_dup, task_dup,
                   tag_at, tag_window.astype(np.uint8))


def summarize(pairing, ts_hz, exclude_tagged=False):
    """{kind: {count, misses, min, median, max, mean, std} in ticks and ns} (Faller's table)."""
    keep = np.ones(len(pairing.stim_tick), dtype=bool)
    if exclude_tagged:
        keep &= pairing.tag_in_window == 0
    out = {}
    for kind, _title in KINDS:
        lat = pairing.latency(kind)[keep]
        ok = lat[lat != MISSING]
        row = {"stimuli": int(keep.sum()), "count": int(len(ok)), "misses": int(len(lat) - len(ok))}
        if len(ok):
            row.update(min=int(ok.min()), median=float(np.median(ok)), max=int(ok.max()),
                       mean=float(ok.mean()), std=float(ok.std(ddof=1)) if len(ok) > 1 else 0.0)
        out[kind] = row
    out["duplicates"] = {"isr": int(pairing.isr_duplicates[keep].sum()),
                         "task": int(pairing.task_duplicates[keep].sum())}
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
