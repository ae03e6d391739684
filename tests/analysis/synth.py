"""Synthetic run directories with known answers, written as `hilat capture` writes them (``write_run``),
and one in the previous run format for the compatibility reader (``write_legacy_run``)."""

import csv
import json

import numpy as np
from hilat import analysis, units
from hilat.link.protocol import PROTOCOL_VERSION

from gateware.channels import channel_table

TS_HZ = 50_000_000
# The rig these runs come from: the default simulated rig's channel table (stim0, stim1, in0 = isr,
# in1 = task, in2 = spare, in3 = tag), so the edges below use channels 0, 2, 3 and 5.
TABLE = [(c.name, c.role) for c in channel_table(2, 4)]
ROLES = analysis.Channels.from_table(TABLE)
# The run format `hilat capture` writes (meta.json "version"; results.CaptureResults._meta).
RUN_FORMAT = units.RUN_FORMAT_VERSION


def measures_json(definitions, roles=ROLES):
    """meta.json's "measures" for definitions such as "a_to_b=in0..in1" on this rig."""
    from hilat.analysis import measures

    return [measures.parse(d, roles, TS_HZ, reserved=[k for k, _ in analysis.KINDS]).to_json() for d in definitions]


def dut_edges(stim_ticks, isr_latency, task_latency, isr_width=20, task_width=30, stim_width=10,
              tag_spans=(), extra_isr=()):
    """Edges (tick, channel, level) of stimuli on channel 0 and responses on channels 2 (ISR) and 3
    (task); a latency of None is a miss. ``tag_spans``: (rise, fall) ticks of the tag (channel 5);
    ``extra_isr``: ticks of additional ISR pulses (duplicates)."""
    edges = []
    for s, li, lt in zip(stim_ticks, isr_latency, task_latency):
        edges += [(s, 0, 1), (s + stim_width, 0, 0)]
        if li is not None:
            edges += [(s + li, 2, 1), (s + li + isr_width, 2, 0)]
        if lt is not None:
            edges += [(s + lt, 3, 1), (s + lt + task_width, 3, 0)]
    for t in extra_isr:
        edges += [(t, 2, 1), (t + 3, 2, 0)]
    for rise, fall in tag_spans:
        edges += [(rise, 5, 1), (fall, 5, 0)]
    edges.sort(key=lambda e: (e[0], e[1]))
    return edges


def _meta(label, ts_hz, deadline_ticks, calibration, dut_settings, counters, settings, version, **meta_extra):
    """meta.json of a synthetic run: the fields both run formats share. The rig speaks the current
    protocol in a current run, protocol 2 (the first with a channel table) in a legacy one."""
    protocol = PROTOCOL_VERSION if version == RUN_FORMAT else 2
    return {
        "format": "hilat-run", "version": version, "label": label, "url": "loop://",
        "started": "2026-01-01T00:00:00+00:00",
        "rig": {"version": protocol, "ts_hz": ts_hz, "sys_hz": ts_hz, "n_stimulus": 2, "n_inputs": 4,
                "fifo_depth": 1024, "pin_to_stamp_delay": 17, "capabilities": 63, "firmware": f"hilat-fw {protocol}",
                "gateware": "synthetic 0000000", "channels": [list(c) for c in TABLE]},
        "settings": settings or {"count": None, "deadline_ticks": deadline_ticks,
                                 "stimulus": {"mode": "dither", "invert": False}},
        "interrupted": False, "error": None,
        "counters": counters or {"decoder": {"frames_ok": 1, "lost": 0, "corrupt": 0},
                                 "gateware_overflow_markers": 0, "gateware_dropped_per_channel": [0] * 6},
        "calibration": calibration,
        "extra": {"dut_settings": dut_settings or {}},
        **meta_extra,
    }


def write_run(run_dir, edges, label="synthetic", ts_hz=TS_HZ, deadline_ticks=None, calibration=None,
              dut_settings=None, counters=None, settings=None, gaps=(), **meta_extra):
    """A run directory in the current format, written as a capture writes it: through
    ``writer.RunWriter`` (raw.bin, edges.bin, gaps.bin, and samples/ from the capture's streaming
    pairing), then meta.json (``RUN_FORMAT``). ``gaps``: [(start, end, channel mask, reason)] in ticks."""
    from hilat.rundir.reader import run_from_meta
    from hilat.rundir.writer import RunWriter
    from hilat.statistics.streaming import StreamingAggregator

    meta = _meta(label, ts_hz, deadline_ticks, calibration, dut_settings, counters, settings, RUN_FORMAT,
                 **meta_extra)
    items = np.array(edges, np.int64).reshape(-1, 3)
    ticks, chans, levels = items[:, 0], items[:, 1].astype(np.uint8), items[:, 2].astype(np.uint8)
    writer = RunWriter(run_dir)
    try:
        writer.edges(ticks, chans, levels)
        writer.gaps(list(gaps))
        # The reader's view of the meta (roles, deadline, offset, measures in the edges' unit) drives
        # the pairing, as the capture's own settings drive it.
        run = run_from_meta(run_dir, meta, edges=(ticks, chans, levels))
        writer.set_kinds(list(run.kind_titles))
        agg = StreamingAggregator(run.roles, run.deadline_mu, run.offset_mu, measures=run.analysis_measures,
                                  builtin=run.builtin, on_samples=writer.samples)
        for start, end, channels, _reason in gaps:
            agg.add_gap(start, end, channels)
        agg.feed(ticks, chans, levels)
        agg.finish()
        writer.flush()
        meta.update(stimuli=agg.stimuli if run.builtin else 0, records=len(ticks), edges=writer.edge_count,
                    raw_bytes=0, interim=False, time_unit=analysis.Subticks().to_meta(), unit=run.unit.to_json(),
                    deadline_ticks=deadline_ticks, observed_end=None)
        meta.setdefault("measures", [])
        writer.write_json("meta.json", meta)
    finally:
        writer.close()
    return run_dir


def write_legacy_run(run_dir, edges, label="legacy", **kw):
    """A run directory in the previous format (run format 1: events.csv, no edges.bin nor samples/),
    the one fixture of the compatibility reader (``replay.read_events_csv``)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "events.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["tick", "channel", "level", "tag"])
        tag = 0
        for tick, ch, level in edges:
            if ch == 5:
                tag = level
            w.writerow([tick, ch, level, tag])
    (run_dir / "meta.json").write_text(json.dumps(_meta(label, version=1, **{
        "ts_hz": TS_HZ, "deadline_ticks": None, "calibration": None, "dut_settings": None, "counters": None,
        "settings": None, **kw}), indent=1))
    return run_dir


def random_run(run_dir, n=5000, seed=1, isr_base=50, shift=0, miss_every=0, label="random", **kw):
    """Dithered stimuli with heavy-tailed latencies; returns (run_dir, isr latencies, task latencies)."""
    rng = np.random.default_rng(seed)
    stim = np.cumsum(rng.integers(4000, 6000, n)) + 1000
    isr = (isr_base + shift + rng.geometric(0.05, n) + (rng.random(n) < 0.01) * rng.integers(300, 900, n))
    task = isr + 80 + rng.integers(0, 30, n)
    isr_l = [None if miss_every and i % miss_every == 0 else int(v) for i, v in enumerate(isr)]
    task_l = [None if miss_every and i % miss_every == 0 else int(v) for i, v in enumerate(task)]
    write_run(run_dir, dut_edges(stim.tolist(), isr_l, task_l), label=label, **kw)
    return run_dir, isr_l, task_l


# A run with holes in its record stream: 10 stimuli 5000 ticks apart, stimulus 2 missed (no ISR, no
# task), and a gateware overflow on the ISR channel (in0, channel 2) in the window of stimulus 6, whose
# ISR edges are lost: that window is unknown for the kinds that read the ISR, not a miss.
GAPPED_STIM = [1000 + 5000 * i for i in range(10)]
GAPPED_ISR = [50, 60, None, 70, 80, 90, None, 100, 110, 120]   # stimulus 6's ISR: hidden by the gap
GAPPED_TASK = [v + 100 if v is not None else None for v in GAPPED_ISR]
GAPPED_TASK[6] = 300                                             # the task rose; the ISR was lost
GAPPED_MISSED, GAPPED_UNKNOWN = 2, 6
GAPPED_GAP = (GAPPED_STIM[6] + 20, GAPPED_STIM[6] + 200, 1 << 2, analysis.GAP_OVERFLOW)


def gapped_run(run_dir, fired=None, label="gapped", gaps=(GAPPED_GAP,), **kw):
    """The gapped run's directory (its gaps: ``gaps``); ``fired``: the rig's count of stimuli fired
    (meta.json counters), more than seen when stimulus edges were lost."""
    counters = {"decoder": {"frames_ok": 1, "lost": 0, "corrupt": 0}, "gateware_overflow_markers": 1,
                "gateware_dropped_per_channel": [0, 0, 2, 0, 0, 0]}
    if fired is not None:
        counters["rig_stimuli_fired"] = [fired, 0]
    return write_run(run_dir, dut_edges(GAPPED_STIM, GAPPED_ISR, GAPPED_TASK), label=label, counters=counters,
                     gaps=gaps, **kw)


def live_capture(run, gaps=True):
    """What the live view (hilat.acquisition.live.LiveView) reads of a capture, for a run read back: its edges
    through the capture's StreamingAggregator (with its gaps), no session, no rig status."""
    from types import SimpleNamespace

    from hilat.statistics.streaming import StreamingAggregator

    agg = StreamingAggregator(run.roles, run.deadline_mu, run.offset_mu, measures=run.analysis_measures,
                              builtin=run.builtin)
    gap_items = run.gaps.items() if gaps else []
    for start, end, channels in gap_items:
        agg.add_gap(start, end, channels)
    for chunk in run.iter_edges():
        agg.feed(*chunk)
    agg.finish()
    paced = int(((run.chans == run.roles.stimulus) & (run.levels == 1)).sum())
    stream = SimpleNamespace(aggregator=agg, paced=paced, records=len(run.ticks), gap_count=len(gap_items))
    settings = SimpleNamespace(on_rig=False, raw=True, no_stimulus=False, count=None)
    return SimpleNamespace(settings=settings, stream=stream, session=None, status=None, unit=run.unit,
                           ts_hz=run.ts_hz, subticks=run.subticks)


def live_last_line(capture, kinds):
    """The live view's plain line (off a terminal) after its last update, and its terminal table as text."""
    import io

    from hilat.acquisition.live import LiveView
    from rich.console import Console

    out = io.StringIO()
    view = LiveView(file=out, tty=False)
    view.begin(capture, kinds)
    view.update(force=True)
    console = Console(record=True, width=220, file=io.StringIO())
    console.print(view._table(view._state()))
    return out.getvalue().splitlines()[-1], console.export_text()
