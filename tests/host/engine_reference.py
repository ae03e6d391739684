"""What the rig's engine must send for known edges, worked out on the host: synthetic edges, the
host's own pairing of them (``hilat.analysis.pair``), their values binned with ``HdrHistogram`` (not
with ``hilat.engine``, the code under test), and ENGINE_BINS entries in an order the engine may send
them (per kind: an interval's bins, then its close; the three kinds' streams interleaved at random, so
one kind's bins of an interval come after another's close of it), and the ENGINE_STATS of them.

Serves tests/host/test_rig_histograms.py and the engine of the fake rig (tests/host/engine_rig.py)."""

from typing import NamedTuple

import numpy as np
from hilat import analysis
from hilat.hdr import HdrHistogram
from hilat.link import protocol as p

# The simulated rig's channel table (fake_rig.identify()'s): stim0 stim1 in0=isr in1=task in2 in3=tag.
TABLE = [("stim0", "stimulus"), ("stim1", "stimulus"), ("in0", "isr"), ("in1", "task"), ("in2", "spare"),
         ("in3", "tag")]
HDR = dict(lowest=1, highest=2**24 - 1, significant_figures=2)  # docs/engine.md, written out again here
HDR_BINS, OVERFLOW_BIN = 2304, 2304


def roles(active_low=(), inverted=False):
    return analysis.Channels.from_table(TABLE, stimulus_active=0 if inverted else 1, active_low=active_low)


def synthetic_edges(roles, n, seed=0, base_tick=0, overflow_windows=0, below_offset=0):
    """Edges of ``n`` stimuli (spacing 40..700 ticks, ``overflow_windows`` of them longer than 2**24
    with an ISR beyond 2**24), responses at random latencies: about 5% of each missed, 3% of ISRs
    doubled, some tasks before the ISR, ``below_offset``: some ISRs sooner than that; tag pulses.
    (ticks, channels, levels) in tick order, each role's active edge at its active level."""
    rng = np.random.default_rng(seed)
    spacing = rng.integers(40, 700, n)
    long = rng.choice(np.arange(1, n), overflow_windows, replace=False) if overflow_windows else np.zeros(0, int)
    spacing[long] = (1 << 24) + rng.integers(200, 4000, len(long))
    stim = base_tick + np.cumsum(spacing) - spacing[0]  # window k lasts spacing[k + 1]
    room = np.append(spacing[1:], 800) - 12  # every pulse ends before the next stimulus
    isr = rng.integers(0, room)
    isr[long - 1] = (1 << 24) + rng.integers(0, 100, len(long))
    task = rng.integers(0, room)
    if below_offset:
        isr[rng.random(n) < 0.05] = rng.integers(0, below_offset)
    edges = []

    def pulse(channel, at, width=2):
        active = roles.active_level(channel)
        edges.append((at, np.full(len(at), channel), np.full(len(at), active)))
        edges.append((at + width, np.full(len(at), channel), np.full(len(at), 1 - active)))

    pulse(roles.stimulus, stim, 4)
    has_isr, has_task = rng.random(n) > 0.05, rng.random(n) > 0.05
    pulse(roles.isr, (stim + isr)[has_isr])
    twice = has_isr & (rng.random(n) < 0.03) & (isr + 8 < room)
    pulse(roles.isr, (stim + isr + 4)[twice])
    pulse(roles.task, (stim + task)[has_task])
    # Tag pulses of 300 ticks from 150 ticks before some stimuli (some windows see it at the start,
    # some only later), never overlapping.
    tag_starts = stim[np.flatnonzero(rng.random(n) < 0.08)] - 150
    tag_starts = tag_starts[np.append(np.diff(tag_starts) > 400, True) & (tag_starts >= 0)]
    pulse(roles.tag, tag_starts, 300)
    ticks = np.concatenate([e[0] for e in edges]).astype(np.int64)
    order = np.argsort(ticks, kind="stable")
    return (ticks[order], np.concatenate([e[1] for e in edges]).astype(np.uint8)[order],
            np.concatenate([e[2] for e in edges]).astype(np.uint8)[order])


class Samples(NamedTuple):
    """Per stimulus: its tick, and per kind (rows: stim_to_isr, stim_to_task, isr_to_task) the value in
    ticks, whether the response(s) came, the duplicates; whether the window saw the tag."""

    start: np.ndarray
    value: np.ndarray
    present: np.ndarray
    duplicates: np.ndarray
    tagged: np.ndarray

    @property
    def binned(self):
        return self.present & (self.value >= 0)


def reference_samples(edges, roles, deadline=None, offset=0, end_tick=None):
    """The host's pairing (``analysis.pair``) of the edges, as the engine's three kinds."""
    pr = analysis.pair(*edges, roles, deadline, end_mu=end_tick, task_after_isr=False)   # the engine's rule
    isr_ok, task_ok = pr.isr_mu != analysis.MISSING, pr.task_mu != analysis.MISSING
    value = np.stack([pr.isr_mu - pr.stim_mu - offset, pr.task_mu - pr.stim_mu - offset,
                      pr.task_mu - pr.isr_mu])
    present = np.stack([isr_ok, task_ok, isr_ok & task_ok])
    duplicates = np.stack([pr.isr_duplicates, pr.task_duplicates, np.zeros(len(pr.stim_mu), np.int64)])
    return Samples(pr.stim_mu, value, present, duplicates, pr.tag_in_window.astype(bool))


def histogram(samples, kind, subset="all"):
    """(HdrHistogram of the binned values below 2**24, count of those at or above) of one kind and
    subset (all, untagged, tagged)."""
    keep = samples.binned[kind] & {"all": True, "untagged": ~samples.tagged, "tagged": samples.tagged}[subset]
    values = samples.value[kind][keep]
    h = HdrHistogram(**HDR)
    h.record(values[values < 1 << 24])
    return h, int((values >= 1 << 24).sum())


def interval_counts(samples, shift):
    """{interval number: counts[kind, tag, bin]} (bin 2304: values of 2**24 ticks and more)."""
    layout = HdrHistogram(**HDR)
    number = samples.start >> shift
    out = {}
    for n in np.unique(number).tolist():
        counts = np.zeros((3, 2, HDR_BINS + 1), np.int64)
        for kind in range(3):
            keep = samples.binned[kind] & (number == n)
            v = samples.value[kind][keep]
            index = np.where(v >= 1 << 24, OVERFLOW_BIN, layout.counts_array_index(np.minimum(v, (1 << 24) - 1)))
            np.add.at(counts[kind], (samples.tagged[keep].astype(int), index), 1)
        out[n] = counts
    return out


def engine_entries(samples, shift, seed=0):
    """ENGINE_BINS entries as the engine may send them: per kind, each interval's nonzero bins (in a
    random order, a few split in two entries) then its close; the kinds' streams interleaved at random."""
    rng = np.random.default_rng(seed)
    streams = [[] for _ in range(3)]
    for n, counts in sorted(interval_counts(samples, shift).items()):
        low = n & 0xFFFFFFFF
        for kind in range(3):
            tag, bin_ = np.nonzero(counts[kind])
            entries = [[p.ENGINE_ENTRY_BIN, kind, int(t), low, int(b), int(counts[kind, t, b])]
                       for t, b in zip(tag, bin_)]
            for k in rng.permutation(len(entries)).tolist():
                e = entries[k]
                if e[5] > 1 and rng.random() < 0.05:  # one count in two entries
                    streams[kind].append(p.BinsEntry(*e[:5], 1))
                    e[5] -= 1
                streams[kind].append(p.BinsEntry(*e))
            streams[kind].append(p.BinsEntry(p.ENGINE_ENTRY_CLOSE, kind, 0, low, 0, 0))
    out, heads = [], [0, 0, 0]
    while any(h < len(s) for h, s in zip(heads, streams)):
        kind = rng.choice([k for k in range(3) if heads[k] < len(streams[k])])
        run = int(rng.integers(1, 40))
        out += streams[kind][heads[kind]:heads[kind] + run]
        heads[kind] += run
    return out


def engine_stats(samples, command_seq=0, samples_lost=0, state=p.ENGINE_STATE_ENABLED | p.ENGINE_STATE_FLUSHED):
    """The ENGINE_STATS of the samples: exact run totals per kind and tag."""
    kinds = []
    for kind in range(3):
        row = [int((~samples.present[kind]).sum()), int(samples.duplicates[kind].sum()),
               int((samples.present[kind] & (samples.value[kind] < 0)).sum())]
        for tagged in (False, True):
            v = samples.value[kind][samples.binned[kind] & (samples.tagged == tagged)]
            row += [len(v), int(v.min()) if len(v) else p.ENGINE_MIN_NONE, int(v.max()) if len(v) else 0,
                    int(v.sum())]
        kinds.append(p.EngineKindStats(*row))
    return p.EngineStats(command_seq, state, len(samples.start), samples_lost, 0, 0, 6, 8, 16,
                         p.ENGINE_BINS_PER_HISTOGRAM, kinds)


def outliers(samples, thresholds):
    """The outlier records of the samples above a kind's threshold (None: never)."""
    above = np.zeros(len(samples.start), bool)
    for kind, t in enumerate(thresholds):
        if t is not None:
            above |= samples.binned[kind] & (samples.value[kind] > t)
    values = np.where(samples.present, np.where(samples.value < 0, p.OUTLIER_BELOW, samples.value), p.OUTLIER_MISS)
    return [p.Outlier(int(s), p.OUTLIER_TAG_IN_WINDOW if t else 0, *map(int, v))
            for s, t, v in zip(samples.start[above], samples.tagged[above], values[:, above].T)]
