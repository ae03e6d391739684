"""Reference model of the MeasurementEngine (gateware/engine.py), from the host's definitions, not
the RTL: the per-stimulus latencies, misses, duplicates and tags come from ``hilat.analysis.pair``
on the edges a test drives; the bins are ``hilat.hdr.HdrHistogram(1, 2**24 - 1, 2)``'s counts-array
index (bin 2304: values from 2**24 ticks on); a sample is in the interval of its start tick
(``start >> interval_shift``). The settings are the host's ``hilat.engine.EngineConfig``.

What the model adds to the host's pairing is what docs/engine.md says the rig does with it: the
duplicates of one window saturate at 0xFFFF, a negative value is "below range" (counted, not
binned), a sample above a kind's threshold is an outlier record, and the trigger pin's pulses.
"""

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from hilat import analysis
from hilat.engine import EngineConfig
from hilat.hdr import HdrHistogram

from gateware.channels import channel_table

HDR = HdrHistogram(1, 2**24 - 1, 2)
OVERFLOW_BIN = HDR.counts_len          # values above HDR.highest_recordable (2**24 - 1)
TAG_BINS = OVERFLOW_BIN + 1
MISS = 0xFFFFFFFF                      # outlier record: no value
BELOW = 0xFFFFFFFE                     # outlier record: below range
NEVER = 0xFFFFFFFF                     # threshold: no outliers
DUPLICATES_MAX = 0xFFFF                # per window, per response
N_KINDS = 3


def bin_of(value):
    """The engine's bin of a value >= 0 (HdrHistogram's counts-array index, or the overflow bin)."""
    return OVERFLOW_BIN if value > HDR.highest_recordable else HDR.counts_array_index(value)


def rig_roles(n_stimulus=2, n_inputs=4, stimulus_active=1, active_low=(), **roles):
    """``analysis.Channels`` of the rig's channel table (gateware.channels), the default roles unless
    ``roles`` ({role: channel}) moves them; the stimulus is channel 0."""
    table = [(c.name, c.role) for c in channel_table(n_stimulus, n_inputs)]
    return analysis.Channels.from_table(table, roles=roles, stimulus_active=stimulus_active, active_low=active_low)


@dataclass
class Sample:
    start: int
    interval: int
    values: tuple          # per kind: ticks >= 0, None (a miss), or "below"
    raw: tuple             # (isr tick - start, task tick - start), None where missed
    duplicates: tuple      # per kind, saturated
    tag_at: int
    tag_in: int
    window_end: int

    def outlier_word(self):
        """The three values as an outlier record carries them (kind 0 in the low word)."""
        word = 0
        for k, v in enumerate(self.values):
            word |= (MISS if v is None else BELOW if v == "below" else v) << (32 * k)
        return word


@dataclass
class KindStats:
    misses: int = 0
    duplicates: int = 0
    below: int = 0
    count: list = field(default_factory=lambda: [0, 0])
    min: list = field(default_factory=lambda: [0xFFFFFFFF, 0xFFFFFFFF])
    max: list = field(default_factory=lambda: [0, 0])
    sum: list = field(default_factory=lambda: [0, 0])


def samples(cfg: EngineConfig, roles, edges, end_tick):
    """Every window's sample. ``edges``: [(tick, channel, level after)], every channel's; ``end_tick``:
    the last tick the open window includes (the engine's flush comes the tick after it)."""
    edges = sorted(edges)
    ticks = np.array([t for t, _, _ in edges], dtype=np.int64)
    chans = np.array([c for _, c, _ in edges], dtype=np.uint8)
    levels = np.array([lv for _, _, lv in edges], dtype=np.uint8)
    # The engine pairs the window's first task rise, the host the first after the window's ISR
    # (docs/engine.md, "Pairing"): the model is the engine's rule.
    p = analysis.pair(ticks, chans, levels, roles, deadline=cfg.deadline or None, end_mu=end_tick,
                      offset_mu=cfg.offset, task_after_isr=False)
    out = []
    for i in range(len(p)):
        start = int(p.stim_mu[i])
        values = []
        for latency in (p.isr_latency[i], p.task_latency[i], p.isr_to_task[i]):
            found = kind_found(p, i, len(values))
            values.append(None if not found else "below" if latency < 0 else int(latency))
        raw = tuple(None if at == analysis.MISSING else int(at) - start for at in (p.isr_mu[i], p.task_mu[i]))
        dups = (min(int(p.isr_duplicates[i]), DUPLICATES_MAX), min(int(p.task_duplicates[i]), DUPLICATES_MAX), 0)
        out.append(Sample(start, start >> cfg.interval_shift, tuple(values), raw, dups, int(p.tag_at_stimulus[i]),
                          int(p.tag_in_window[i]), int(p.window_end[i])))
    return out


def kind_found(p, i, kind):
    isr, task = p.isr_mu[i] != analysis.MISSING, p.task_mu[i] != analysis.MISSING
    return (isr, task, isr and task)[kind]


def bins(samples):
    """Counter {(interval, kind, tag, bin): count} of the binned values."""
    out = Counter()
    for s in samples:
        for k, v in enumerate(s.values):
            if isinstance(v, int):
                out[(s.interval & 0xFFFFFFFF, k, s.tag_in, bin_of(v))] += 1
    return out


def stats(samples):
    """Per kind: misses, duplicates, below range; per tag: count, min, max, sum of the binned values."""
    out = [KindStats() for _ in range(N_KINDS)]
    for s in samples:
        for k, v in enumerate(s.values):
            st = out[k]
            st.duplicates += s.duplicates[k]
            if v is None:
                st.misses += 1
            elif v == "below":
                st.below += 1
            else:
                t = s.tag_in
                st.count[t] += 1
                st.min[t] = min(st.min[t], v)
                st.max[t] = max(st.max[t], v)
                st.sum[t] += v
    return out


def outliers(cfg: EngineConfig, samples):
    """[(start, values word, flags)] of the samples with a value above its kind's threshold."""
    thresholds = [NEVER if t is None else t for t in cfg.thresholds]
    return [(s.start, s.outlier_word(), s.tag_at | s.tag_in << 1) for s in samples
            if any(isinstance(v, int) and v > th for v, th in zip(s.values, thresholds))]


def trigger_high(cfg: EngineConfig, samples, delay):
    """The ticks the trigger pin is high, as [(first, last + 1)] runs: a pulse of ``width`` ticks,
    ``delay`` ticks after the window reaches ``threshold`` ticks without the chosen response, or
    (``on_late``) after the response comes later than that; a pulse starting while one is high
    extends it."""
    trig = cfg.trigger
    if trig is None or trig.width == 0:
        return []
    which = 0 if trig.response == "isr" else 1
    events = []
    for s in samples:
        at = s.raw[which]
        if (at is None or at >= trig.threshold) and s.start + trig.threshold < s.window_end:
            events.append(s.start + trig.threshold)
        if trig.on_late and at is not None and at > trig.threshold:
            events.append(s.start + at)
    runs = []
    for e in sorted(events):
        lo, hi = e + delay, e + delay + trig.width
        if runs and lo <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(runs[-1][1], hi))
        else:
            runs.append((lo, hi))
    return runs
