"""``hilat capture``: configure the rig, run stimuli, stream every edge to a run directory.

The capture is a stream (docs/analysis.md, "Streaming capture"): bytes -> raw.bin -> records
(``hilat.link.batch``, as arrays) -> edges -> edges.bin and the streaming pairing
(``aggregate.StreamingAggregator``) -> samples/KIND.bin, the rolling .hlog and the live view. Memory
is flat however long the run: nothing holds the records. At the end (or on SIGUSR1, as an interim)
summary.json and summary.txt are rendered from the aggregates, without reading the run back.
The run directory's layout is in ``hilat.rundir.layout``.

On-rig (``CaptureSettings.on_rig``, docs/engine.md): the rig's engine pairs and bins; its frames go
to ``engine.RigHistograms`` (hlog/rig.hlog, outliers.bin, engine.json) and the summary comes from
its bins and exact statistics, complete whatever the link carries. Raw edges are off, or best effort
beside it (``raw``); meta.json's ``results`` says which results are complete.
"""

import dataclasses
import errno
import logging
import math
import signal
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from hilat import analysis, calibration, units
from hilat.link import protocol as p
from hilat.link.rig import RigError, RigSilent
from hilat.link.session import Session
from hilat.link.transport import DEFAULT_BAUDRATE, TransportError
from hilat.statistics.streaming import SampleOutOfRange
from hilat.values import format_ticks

log = logging.getLogger("hilat")

@dataclass
class StimulusSettings:
    """Stimulus channel 0, in ticks of the rig's timebase."""
    mode: str = "dither"
    period: int = 5000
    jitter: int = 1000
    width: int = 10
    probability: int = 0
    burst_count: int = 1
    burst_spacing: int = 10
    seed: int = 1
    invert: bool = False


@dataclass
class CaptureSettings:
    count: int | None = 2000           # stimuli; None: until duration
    duration_ticks: int | None = None
    deadline_ticks: int | None = None  # response window; default: to the next stimulus (on-rig: the
                                       # engine's limit, engine.deadline_limit; see effective_deadline)
    glitch: int = 0
    label: str = ""
    out_dir: Path = Path("runs")
    progress: bool = True
    stimulus: StimulusSettings = field(default_factory=StimulusSettings)
    # Where this rig's calibration is looked up (hilat.calibration); None: none applied, for the
    # reason given (stated in the run's resolution lines).
    calibration_dir: Path | None = None
    no_calibration_reason: str = "no calibration directory given"
    baudrate: int = DEFAULT_BAUDRATE   # the rig's UART (ignored for socket://)
    # Roles moved from the rig's defaults ({role: channel name or number}) and active-low inputs.
    roles: dict = field(default_factory=dict)
    active_low: list = field(default_factory=list)
    # Measurement definitions (hilat.analysis.measures: "NAME=A..B", "NAME=period:A", "NAME=width:A").
    measures: list = field(default_factory=list)
    # No stimulus at all: the rig only timestamps (DUT-paced tests); the measures are the kinds.
    no_stimulus: bool = False
    # More stimulus outputs fired at the same time: [(channel, {setting: value})], each with the
    # stimulus settings above except those it names (another interrupt source, its own period...).
    also_fire: list = field(default_factory=list)
    # Rolling .hlog: one interval per this many seconds of rig time, per kind (0: none).
    hlog_interval_s: float = 10.0
    # Records per step of the streaming pairing (None: 65536). Tests set it small to put chunk
    # boundaries between stimuli and their responses.
    chunk_records: int | None = None
    # The rig's measurement engine: on_rig measures there (the built-in kinds of the stimulus), raw
    # streams the edges too (an on-rig capture without it sends none); intervals of 2**shift ticks;
    # outlier records for samples above {kind: ticks}; the trigger-out pin (an engine.Trigger, ticks).
    on_rig: bool = False
    raw: bool = True
    engine_interval_shift: int = 24
    outlier_thresholds: dict = field(default_factory=dict)
    trigger: object = None


STIMULUS_SETTING_NAMES = [f.name for f in dataclasses.fields(StimulusSettings)]


def engine_offset(offset_ticks):
    """The whole ticks the rig's engine subtracts for a loopback offset measured in sub-ticks: the
    floor, as a loopback measured in whole ticks would have found it (7.75 ticks -> 7)."""
    return int(math.floor(offset_ticks))


def effective_deadline(settings):
    """The deadline (ticks) a capture's windows close at, for the host's pairing and the rig's engine
    alike: the one asked for, else none, except on-rig, where the engine needs one no larger than
    ``engine.deadline_limit`` (its default). A periodic stimulus's next pulse comes exactly one
    period later, seen or not: its windows close there even when its edge was lost in a gap, so the
    window before it is judged, not unknown (docs/analysis.md, "Gaps")."""
    if settings.on_rig and settings.deadline_ticks is None:
        from hilat import engine

        return engine.deadline_limit(settings.engine_interval_shift)
    if not settings.on_rig and not settings.no_stimulus and settings.stimulus.mode == "periodic":
        period = int(settings.stimulus.period)
        return period if settings.deadline_ticks is None else min(int(settings.deadline_ticks), period)
    return settings.deadline_ticks


def _roles(settings, ident):
    return analysis.Channels.from_table(ident.channels, stimulus_active=0 if settings.stimulus.invert else 1,
                                        roles=settings.roles, active_low=settings.active_low)


def plan(settings, ident):
    """What a capture with ``settings`` does on the rig ``ident`` (its IDENTIFY): (roles, measures,
    {stimulus channel: StimulusSettings} to fire, (channel, level) of the edge --count counts).
    Raises ValueError naming what does not fit this rig."""
    from hilat.analysis import measures

    s = settings
    roles = _roles(s, ident)
    defined = [measures.parse(text, roles, ident.ts_hz, reserved=[k for k, _ in analysis.KINDS])
               for text in s.measures]
    names = [m.name for m in defined]
    if len(set(names)) != len(names):
        raise ValueError(f"a measurement name is given twice: {', '.join(names)}")
    if s.no_stimulus and not defined:
        raise ValueError("a capture with no stimulus measures nothing by default: give --measure")
    if s.trigger is not None and not s.on_rig:
        raise ValueError("the trigger-out pin is the rig's engine's: --trigger goes with --on-rig")
    if s.on_rig:
        _check_on_rig(s, ident, roles, defined)
    fired = {} if s.no_stimulus else {roles.stimulus: s.stimulus}
    for ref, overrides in s.also_fire:
        channel = roles.resolve(ref)
        if not roles.is_output(channel):
            raise ValueError(f"{roles.names[channel]} is an input: only stimulus outputs fire")
        if channel in fired:
            raise ValueError(f"{roles.names[channel]} fires already")
        unknown = set(overrides) - set(STIMULUS_SETTING_NAMES)
        if unknown:
            raise ValueError(f"unknown stimulus setting(s) {', '.join(sorted(unknown))} for "
                             f"{roles.names[channel]} (settings: {', '.join(STIMULUS_SETTING_NAMES)})")
        fired[channel] = dataclasses.replace(s.stimulus, **overrides)
    if s.no_stimulus:
        pace = (defined[0].start.channel, defined[0].start.level)
    else:
        pace = (roles.stimulus, roles.stimulus_active)
    return roles, defined, fired, pace


def _check_on_rig(settings, ident, roles, defined):
    from hilat import engine

    if not ident.capabilities & p.CAP_ENGINE:
        raise ValueError("this rig has no measurement engine (hilat info lists its features): capture without "
                         "--on-rig")
    if defined or settings.no_stimulus:
        raise ValueError("the rig's engine measures the stimulus -> ISR/task kinds only: no --measure or "
                         "--no-stimulus with --on-rig")
    unknown = set(settings.outlier_thresholds) - set(engine.KINDS)
    if unknown:
        raise ValueError(f"no engine kind {', '.join(sorted(unknown))} (kinds: {', '.join(engine.KINDS)})")
    deadline, shift = settings.deadline_ticks, settings.engine_interval_shift
    limit = engine.deadline_limit(shift)
    if deadline is not None and deadline > limit:
        larger = engine.shift_for_deadline(deadline)
        hint = (f"give a larger --interval-shift ({larger} takes it)" if larger is not None
                else f"no interval shift up to {engine.INTERVAL_SHIFT_MAX} takes it")
        raise ValueError(f"deadline {format_ticks(deadline, ident.ts_hz)}: with --on-rig at interval shift "
                         f"{shift} the engine takes at most {format_ticks(max(limit, 0), ident.ts_hz)} (a "
                         f"window may not stay open across two interval boundaries); {hint}")
    if settings.trigger is not None:
        _check_trigger(settings.trigger, effective_deadline(settings), ident.ts_hz)
    engine.EngineConfig.from_roles(roles)  # an isr and a task channel


def _check_trigger(trigger, deadline, ts_hz):
    def time(ticks):
        return format_ticks(ticks, ts_hz)

    if trigger.threshold < 1:
        raise ValueError(f"trigger at {time(trigger.threshold)}: the engine's trigger needs 1 tick at least")
    if trigger.threshold >= deadline:
        raise ValueError(f"trigger at {time(trigger.threshold)}: every window closes at the deadline, "
                         f"{time(deadline)}, before that, so the pin would never pulse; give a shorter --trigger "
                         "(or a longer --deadline)")
    if not 1 <= trigger.width <= 0xFFFF:
        raise ValueError(f"trigger width {time(trigger.width)}: the engine's pulse is 1 to {time(0xFFFF)}")


class _RollingHlog:
    """The capture's HdrHistogram interval log: per kind, one interval per ``interval_s`` of rig time
    (by each sample's start, in the run's unit mu), values in ns, tagged with the kind. SIGUSR1 cuts the open intervals
    short (``cut``) so that an interim reader sees everything up to now."""

    def __init__(self, path, kinds, mu_hz, interval_s, start_time):
        from hilat import hdr

        self._hdr = hdr
        self.mu_hz = mu_hz
        self.interval_mu = max(1, int(round(interval_s * mu_hz)))
        self.writer = hdr.HlogWriter(path, start_time=start_time, base_time=start_time, max_value_unit_ratio=1e6)
        self.origin = None
        # Per kind: [interval start tick, histogram]
        self.open = {kind: None for kind in kinds}
        self.intervals = 0
        self.below_zero = 0

    # The streaming aggregator's range (aggregate.StreamingAggregator's 2**40 units) in ns: whatever
    # it holds, the log holds; beyond is an error, never a dropped value.
    HIGHEST_UNITS = 1 << 40

    def _histogram(self):
        highest_ns = max(3_600_000_000_000, int(self.HIGHEST_UNITS * 1e9 / self.mu_hz) + 1)
        return self._hdr.HdrHistogram(1, highest_ns, 3)

    def samples(self, kind, start_mu, values_ns):
        if not len(start_mu):
            return
        if self.origin is None:
            self.origin = int(start_mu[0])
        # A response sooner than the rig's own delay (a value below 0 once the calibrated offset is
        # subtracted) has no place in a log of latencies >= 0: counted (meta.json), the calibration's
        # warning says why; the summary keeps it.
        if values_ns.min() < 0:
            below = values_ns < 0
            self.below_zero += int(np.count_nonzero(below))
            start_mu, values_ns = start_mu[~below], values_ns[~below]
            if not len(start_mu):
                return
        # The samples come in start order: when the first and the last lie in one interval (a chunk
        # is much shorter than an interval), so do all, and no interval index per sample is needed.
        first, last = ((int(start_mu[i]) - self.origin) // self.interval_mu for i in (0, -1))
        if first == last:
            parts = [(first, values_ns)]
        else:
            idx = (start_mu - self.origin) // self.interval_mu
            bounds = np.flatnonzero(np.diff(idx)) + 1
            parts = zip((int(i[0]) for i in np.split(idx, bounds)), np.split(values_ns, bounds))
        for part_idx, part in parts:
            start = self.origin + part_idx * self.interval_mu
            current = self.open[kind]
            if current is not None and start > current[0]:
                self._close(kind)
                current = None
            if current is None:
                current = self.open[kind] = [start, self._histogram()]
            top = current[1].highest_recordable
            if part.max() > top:
                raise SampleOutOfRange(f"{kind}: a sample of {int(part.max())} ns in the interval from rig tick "
                                       f"{start} is beyond the interval log's {top} ns")
            current[1].record(part)

    def _close(self, kind, end_tick=None):
        start, hist = self.open[kind]
        end = start + self.interval_mu if end_tick is None else max(end_tick, start + 1)
        self.writer.interval((start - self.origin) / self.mu_hz, (end - start) / self.mu_hz, hist, tag=kind)
        self.intervals += 1
        self.open[kind] = None

    def cut(self, end_tick):
        """Write every open interval now, ending at ``end_tick``; the next samples open new ones."""
        for kind, current in self.open.items():
            if current is not None and current[1].total_count:
                self._close(kind, end_tick)
        self.writer.flush()

    def close(self, end_tick):
        for kind, current in self.open.items():
            if current is not None:
                self._close(kind, end_tick)
        self.writer.close()


class _Stream:
    """The consumer of the session's records: edges to the run directory, the streaming pairing,
    the count that ends the capture, and the new maxima. Its times, durations and values are in the
    analysis's unit: ticks, or sub-ticks on a rig that samples its inputs more than once a tick
    (``subticks``, an ``analysis.Subticks``; ``mu_hz``: the run's units, mu, per second)."""

    def __init__(self, writer, roles, measures, builtin, deadline, offset_mu, pace, mu_hz, hlog=None,
                 chunk_records=None, on_new_max=None, subticks=None):
        from hilat.statistics.streaming import StreamingAggregator

        self.writer = writer
        self.pace_channel, self.pace_level = pace
        self.mu_ns = 1e9 / mu_hz
        self.subticks = subticks
        self.hlog = hlog
        self.chunk_records = chunk_records
        self.on_new_max = on_new_max
        self.aggregator = StreamingAggregator(roles, deadline, offset_mu, measures=measures, builtin=builtin,
                                              on_samples=self._samples)
        # The stream's holes (docs/analysis.md, "Gaps"): told by the session between the records.
        self.gaps = analysis.GapTracker(subticks.units_per_tick if subticks is not None else 1)
        self.paced = 0               # edges that --count counts (stimuli, or the first measure's starts)
        self.last_paced = None
        self.first_tick = None
        self.last_tick = None
        self.records = 0
        self.out_of_order = 0        # edges behind the previous one (a rig never sends them: counted, dropped)
        self.advanced = None         # the last heartbeat's tick given to the pairing, in the edges' unit
        self.shown_max = {}
        self.responses_before_offset = 0
        # The kinds the offset is subtracted from, whose negative values are "before the offset".
        self._offset_kinds = {"stim_to_isr", "stim_to_task"} if offset_mu else set()

    # Records per step when none is set: the working arrays of a step (edges, pairing) stay a few
    # tens of MiB however much one read of the link brings.
    DEFAULT_CHUNK = 1 << 18

    # Records may come with their edges worked out (the Ethernet stream's decode thread): ``edges=``.
    takes_edges = True

    def __call__(self, ticks, masks, levels, fractions, edges=None):
        step = self.chunk_records or self.DEFAULT_CHUNK
        for i in range(0, len(ticks), step):
            j = min(i + step, len(ticks))
            part = None
            if edges is not None:
                a, b = int(edges[3][i]), int(edges[3][j])
                part = (edges[0][a:b], edges[1][a:b], edges[2][a:b])
            self._records(ticks[i:j], masks[i:j], levels[i:j], fractions[i:j], part)

    def on_gap(self, what):
        """A hole in the stream, before the records that follow: an OVERFLOW marker, or a number of
        frames lost on the link."""
        if isinstance(what, int):
            self.gaps.frames_lost()
        else:
            self.gaps.overflow(what.timestamp, what.channels)

    def _close_gaps(self, closed):
        for start, end, channels, _reason in closed:
            self.aggregator.add_gap(start, end, channels)
        self.writer.gaps(closed)

    def _records(self, rec_ticks, masks, levels, fractions, edges=None):
        self.records += len(rec_ticks)
        self._close_gaps(self.gaps.records(rec_ticks))
        if edges is None:
            ticks, chans, lv = analysis.edges_from_records((rec_ticks, masks, levels), fractions, self.subticks)
        else:   # the kernel's edges (no sub-tick positions): placed as edges_from_records places them
            ticks, chans, lv = edges
            if self.subticks is not None:
                ticks = self.subticks.place(ticks, chans, None)
        # A new array: reinterpreted in place (ticks < 2^63), not copied.
        ticks = ticks.view(np.int64) if ticks.dtype == np.uint64 else ticks.astype(np.int64)
        floor = self.last_tick if self.advanced is None else max(self.advanced, self.last_tick or self.advanced)
        if floor is not None and len(ticks) and (ticks[0] < floor or (np.diff(ticks) < 0).any()):
            keep = ticks >= np.maximum.accumulate(np.concatenate(([floor], ticks)))[:-1]
            self.out_of_order += int((~keep).sum())
            ticks, chans, lv = ticks[keep], chans[keep], lv[keep]
        if not len(ticks):
            return
        if self.first_tick is None:
            self.first_tick = int(ticks[0])
        self.last_tick = int(ticks[-1])
        self.writer.edges(ticks, chans, lv)
        paced = np.flatnonzero((chans == self.pace_channel) & (lv == self.pace_level))
        if len(paced):
            self.paced += len(paced)
            self.last_paced = int(ticks[paced[-1]])
        self.aggregator.feed(ticks, chans, lv)
        self._new_maxima()

    def advance(self, complete_before):
        """A heartbeat of the stream: every record before tick ``complete_before`` has arrived or is
        in a gap. With no gap open (a hole's end is not known yet) the pairing closes the windows it
        ends (``StreamingAggregator.advance``): a quiet DUT's last stimuli are judged now."""
        if complete_before is None or self.gaps.open:
            return
        units = int(complete_before) * (self.subticks.units_per_tick if self.subticks is not None else 1)
        if self.advanced is not None and units <= self.advanced:
            return
        self.advanced = units
        self.aggregator.advance(units)
        self._new_maxima()

    def _samples(self, kind, series):
        # Written on the run writer's thread (its file writes and the log's histograms do not hold
        # up the pairing); the arrays are final and not changed after.
        self.writer.later(lambda: self._write_samples(kind, series))

    def _write_samples(self, kind, series):
        self.writer.samples(kind, series)
        values, starts = series.values, series.start_mu
        ok = values != analysis.MISSING
        measured = int(np.count_nonzero(ok))
        if kind in self._offset_kinds:
            self.responses_before_offset += int(np.count_nonzero((values < 0) & ok))
        if self.hlog is not None and measured:
            if measured < len(values):
                values, starts = values[ok], starts[ok]
            # A whole number of ns a unit (20 ns at 50 MHz): an integer product, the same as the
            # rounded float one below 2^53 ns, without the float pass.
            exact = (float(self.mu_ns).is_integer()
                     and max(-int(values.min()), int(values.max())) * int(self.mu_ns) < 1 << 53)
            ns = values * int(self.mu_ns) if exact else np.round(values * self.mu_ns).astype(np.int64)
            self.hlog.samples(kind, starts, ns)

    def _new_maxima(self):
        for kind, worst in self.aggregator.worst.items():
            if worst["mu"] > self.shown_max.get(kind, -1):
                self.shown_max[kind] = worst["mu"]
                if self.on_new_max is not None:
                    self.on_new_max(kind, worst)

    def finish(self, end_tick=None, cut_short=False):
        """Close the last windows at ``end_tick``; ``cut_short``: the capture ended early, so what
        came after the last edge is a gap."""
        self._close_gaps(self.gaps.close(self.last_tick if cut_short and self.last_tick is not None else None))
        self.aggregator.finish(end_tick)
        self._new_maxima()

    @property
    def gap_count(self):
        return self.gaps.count


# What a write into the run directory fails with when the disk (or a quota, a file size limit) is full.
_WRITE_ERRORS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EIO}


class Capture:
    """One capture run; keeps everything it received even when the run ends badly.

    ``Capture(url, settings)`` opens its own session; ``Capture(None, settings, session=s)`` uses an
    open ``Session`` (the CLI identifies the rig and checks the settings on that one link)."""

    def __init__(self, url, settings, extra_meta=None, session=None, live=None):
        self.url = url if url is not None else session.url
        self.settings = settings
        self.extra_meta = extra_meta or {}
        self.session = session
        self.live = live             # a live.LiveView, or None: the capture makes one when progress is on
        self.status = None
        self.identity = None
        self.start_tick = None
        self.interrupted = False
        self.stopped_by = None       # the signal that interrupted it, when not Ctrl-C (SIGTERM, SIGHUP)
        self.error = None
        self.run_dir = None
        self.writer = None
        self.stream = None
        self.hlog = None
        self.calibration = None    # meta["calibration"]: what is applied, once the rig identified
        self.interim_summaries = 0
        self.engine_config = None  # engine.EngineConfig of an on-rig capture, once configured
        self.rig_histograms = None # engine.RigHistograms of an on-rig capture, from its start on
        self.engine_limits = None  # the engine's ENGINE_STATS before the run (its limits, trigger delay)
        self.link_plan = None      # link_plan.LinkPlan: the raw edges' expected rate against the link's
        self.stream_link = None    # udp_receiver.StreamLink of a udp:// capture, once its stream closed
        self.finished_cleanly = False  # the stimuli stopped and everything before the rig's clock arrived
        self.observed_end = None
        self._complete_before = None   # tick before which every record arrived or is a gap (the drain)
        self._roles = None         # analysis.Channels, once the rig identified
        self._measures = []        # measures.Measure, once the rig identified
        self._fired = {}           # {stimulus channel: StimulusSettings} fired by this capture
        self._pace = None          # (channel, level): the edge --count counts
        self._subticks = None      # analysis.Subticks, once the calibration is known
        self._t0 = None
        self._interim_requested = False
        self._last_flush = 0.0

    # set-up ---------------------------------------------------------------------------------------

    def _make_run_dir(self):
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        name = stamp + (f"-{self.settings.label}" if self.settings.label else "")
        run_dir = Path(self.settings.out_dir) / name
        suffix = 1
        while run_dir.exists():
            suffix += 1
            run_dir = Path(self.settings.out_dir) / f"{name}-{suffix}"
        run_dir.mkdir(parents=True)
        return run_dir

    def _configure(self, session):
        ident = self.identity
        flags = p.CAPTURE_ENABLE | p.CAPTURE_RISE | p.CAPTURE_FALL
        inputs = range(ident.n_stimulus, ident.n_stimulus + ident.n_inputs)
        session.configure_capture({ch: flags for ch in range(session.n_channels)},
                                  {ch: self.settings.glitch for ch in inputs})
        # Stimulus output k is channel k of the capture stream and output k of the rig (the channel
        # table puts the outputs first).
        for stim, s in self._fired.items():
            session.configure_stimulus(stim, s.mode, width=s.width, period=s.period, jitter=s.jitter,
                                       probability=s.probability, burst_count=s.burst_count,
                                       burst_spacing=s.burst_spacing, count=self.settings.count or 0, seed=s.seed,
                                       invert=s.invert)
        if self.settings.on_rig:
            self._configure_engine(session)
        if session.datagrams and self.settings.raw:
            # udp://: the raw edges come as datagrams into stream.bin (docs/ethernet.md), enabled
            # before START, which restarts the stream.
            session.open_stream(self.run_dir / "stream.bin")
        self.start_tick = session.start(self._fired_mask)
        if self.settings.on_rig:
            from hilat import engine

            self.rig_histograms = engine.RigHistograms(
                self.engine_config.interval_shift, self.ts_hz, origin_tick=self.start_tick, start_time=self._t0,
                with_tag=self._roles.tag is not None, on_interval=self.live.engine_interval,
                on_log_lines=self.writer.rig_intervals, on_outliers=self.writer.outliers)
            session.engine_sink = self.rig_histograms.feed

    def _configure_engine(self, session):
        from hilat import engine

        s = self.settings
        limits = session.engine_stats()
        try:
            config = engine.EngineConfig.from_roles(
                self._roles, deadline=self.deadline_ticks, offset=engine_offset(self.offset_ticks),
                interval_shift=s.engine_interval_shift, raw=s.raw, trigger=s.trigger,
                thresholds=tuple(s.outlier_thresholds.get(kind) for kind in engine.KINDS))
            config.check_limits(limits)
            config.message()
        except ValueError as e:
            raise RigError(str(e)) from None
        session.configure_engine(config)
        self.engine_config = config
        self.engine_limits = limits

    @property
    def _fired_mask(self):
        return sum(1 << ch for ch in self._fired)

    def _plan(self):
        try:
            self._roles, self._measures, self._fired, self._pace = plan(self.settings, self.identity)
        except ValueError as e:
            raise RigError(str(e)) from None

    def _check_link(self):
        """One line before the start when the raw edges will not fit through the link (docs/analysis.md,
        "Gaps"); the plan is kept in meta.json."""
        from hilat.acquisition import link_plan

        if self.settings.on_rig or not self.settings.raw or not self._fired:
            return
        if str(self.url).startswith("udp://"):
            return   # gigabit Ethernet: ~14.6 M records/s, beyond any stimulus rate the plan knows
        serial = not str(self.url).startswith(("socket://", "loop://"))
        self.link_plan = link_plan.plan(self._fired, self._pace[0], self._roles, self.identity,
                                        self.settings.baudrate if serial else None, count=self.settings.count)
        if self.link_plan.over:
            log.warning("%s", self.link_plan.warning())

    def _open_stream(self):
        from hilat.acquisition import live as live_view

        builtin = not self.settings.no_stimulus
        kinds = list(analysis.kind_titles(self._roles, self._measures, builtin))
        self.writer.set_kinds(kinds)
        if self.settings.hlog_interval_s and self.settings.raw:
            (self.run_dir / "hlog").mkdir(exist_ok=True)
            self.hlog = _RollingHlog(self.run_dir / "hlog" / "capture.hlog", kinds, self.unit.mu_hz,
                                     self.settings.hlog_interval_s, self._t0)
        if self.live is None:
            # On-rig without raw edges it shows the engine's intervals as they come.
            self.live = live_view.LiveView(enabled=self.settings.progress)
        self.live.begin(self, kinds)
        # The stream works in the edges' unit: durations in ticks become sub-ticks when S > 1.
        offset, deadline, measures = analysis.in_subticks(self.units_per_tick, self.offset_ticks,
                                                          self.deadline_ticks, self._measures)
        self.stream = _Stream(self.writer, self._roles, measures, builtin, deadline, offset, self._pace,
                              self.unit.mu_hz, hlog=self.hlog, chunk_records=self.settings.chunk_records,
                              on_new_max=self.live.new_max, subticks=self.subticks)

    # stream ---------------------------------------------------------------------------------------

    def _done_stimulating(self):
        s = self.settings
        if s.count is not None and self.stream.paced >= s.count:
            return True
        if s.duration_ticks is not None and self.stream.last_tick is not None:
            return self.stream.last_tick >= (self.start_tick + s.duration_ticks) * self.units_per_tick
        return False

    def _rig_finished(self, status):
        """STATUS says the stimulus finished its count, yet fewer stimuli than the count arrived:
        edges were lost on the way (counted), so stop waiting for them. What is still on its way
        arrives in the drain that follows (``_finish``); frames lost on the link never do, so the
        records received are not compared with those the rig sent."""
        self.status = status
        stim = self._roles.stimulus
        return bool(stim in self._fired and len(status.stim_status) > stim and status.stim_status[stim] & p.STIM_DONE
                    and self.settings.count is not None)

    def _stimuli_fired(self):
        """The paced stimulus channel's pulses as the rig's generator counted them (its last STATUS),
        else the count asked for; None without either."""
        stim = self._roles.stimulus if self._roles else None
        fired = getattr(self.status, "fired", None) if self.status else None
        if fired and stim is not None and stim < len(fired) and stim in self._fired:
            return int(fired[stim])
        return self.settings.count if self._fired else None

    def _tick(self):
        """After every read: the live view, and an interim summary when SIGUSR1 asked for one."""
        self.live.update()
        now = time.monotonic()
        if now - self._last_flush >= 1.0:
            # Decoded data reaches the disk within a second (raw.bin is unbuffered anyway), written
            # behind: the decoding does not wait for it.
            self._last_flush = now
            self.writer.flush(wait=False)
        if self._interim_requested:
            self._interim_requested = False
            self.write_interim()

    def _on_rig_status(self, status):
        """On-rig: the run ends when the rig says its stimulus finished its count (or its clock
        passed the duration), whatever the raw edges (if any) that arrived."""
        self.status = status
        s = self.settings
        stim = self._roles.stimulus
        if s.count is not None:
            return len(status.stim_status) > stim and bool(status.stim_status[stim] & p.STIM_DONE)
        if s.duration_ticks is not None:
            return self.session.now() >= self.start_tick + s.duration_ticks
        return False

    def _collect(self, session):
        if self.settings.on_rig:
            # The engine may be silent for a whole interval: the rig answering STATUS is what counts.
            session.collect(self.stream, lambda: False, on_status=self._on_rig_status, status_every=0.25,
                            idle_timeout=None, tick=self._tick)
        else:
            session.collect(self.stream, self._done_stimulating, on_status=self._rig_finished, tick=self._tick)

    def _finish(self, session):
        """Stop stimuli, then let every response up to the last deadline arrive."""
        if self._fired:
            session.stop(self._fired_mask)
        # Wait one response window past the last stimulus (with no stimulus: a measure's deadline, else 1 ms).
        window = self.settings.deadline_ticks or max(
            [s.period + s.jitter for s in self._fired.values()]
            or [m.deadline_ticks or 0 for m in self._measures] + [self.identity.ts_hz // 1000])
        if self.deadline_ticks:
            window = min(window, self.deadline_ticks)
        # The last stimulus fired before the rig's clock now (the STOP is acknowledged): the last one
        # received may be far older, its successors still on the way or lost (a link past its rate).
        target = session.now() + window + 64
        session.wait_clock(target, self.stream, tick=self._tick)
        self._complete_before = target
        # Records older than `target` are in the FIFO or on the wire: read until quiet, or until a
        # record at or past `target` arrives.
        if self.settings.raw:
            session.drain(self.stream, until_tick=target)
        self._close_stream(session)
        if self.rig_histograms is not None:
            self._flush_engine(session)
        self.status = session.finish(self.stream)

    def _close_stream(self, session):
        """udp://: the rig's counts of what it sent, the stream disabled, the rest decoded."""
        if session.stream is not None:
            self.stream_link = session.close_stream(self.stream)
            if self.live is not None:
                self.live.update()
            c = self.stream_link.counters()
            lag = c.get("processing_done_after_last_arrival_s")
            log.info("stream: the rig sent %s records in %s datagrams; %d records arrived, %d datagrams (%d records) "
                     "lost%s", c.get("rig_records_sent"), c.get("rig_datagrams_sent"), c["records"],
                     c["datagrams_lost"], c["records_lost"],
                     f"; processing was done {lag:.2f} s after the last datagram (at most {c['peak_lag_datagrams']} "
                     "datagrams behind)" if lag is not None else "")

    def _flush_engine(self, session):
        """The engine closes every interval (its bins arrive before the ACK), then its exact totals."""
        self.rig_histograms.end_tick = session.now()
        session.engine_flush(self.stream)
        self.rig_histograms.feed(session.engine_stats())

    # run ------------------------------------------------------------------------------------------

    def _on_sigusr1(self, signum, frame):
        self._interim_requested = True

    def run(self):
        from hilat.rundir.layout import RunError
        from hilat.rundir.writer import RunWriter

        try:
            self.run_dir = self._make_run_dir()
            self.writer = RunWriter(self.run_dir)
        except OSError as e:
            raise RunError(f"cannot create a run directory in {self.settings.out_dir}: {e.strerror or e}") from None
        self._t0 = time.time()
        own_session = self.session is None
        session = self.session
        previous_usr1 = None
        try:
            if own_session:
                session = self.session = Session(self.url, baudrate=self.settings.baudrate, raw_sink=self.writer.raw)
                session.open()
            else:
                session.set_raw_sink(self.writer.raw)
            self.identity = session.identity
            log.info("rig: %s, %s; ts %.3f MHz", self.identity.gateware, self.identity.firmware,
                     self.identity.ts_hz / 1e6)
            self._plan()
            self._check_link()
            self.calibration = calibration.for_rig(self.identity, self.settings.calibration_dir,
                                                   reason_if_none=self.settings.no_calibration_reason)
            for warning in self.calibration["warnings"]:
                log.warning("%s", warning)
            from hilat.calibration.resolution import subticks_for

            self._subticks = subticks_for(self.samples_per_tick, self.identity.n_stimulus,
                                          self.calibration.get("resolution"))
            self._open_stream()
            try:
                previous_usr1 = signal.signal(signal.SIGUSR1, self._on_sigusr1)
            except ValueError:  # not the main thread: no interim summaries on a signal
                previous_usr1 = None
            self._configure(session)
            self._write_started(session)
            self._collect(session)
            self._finish(session)
            self.finished_cleanly = True
            fired = self._stimuli_fired()
            if fired is not None and self.stream.paced < fired:
                log.warning("the rig fired %d stimuli, %d arrived: the others' edges were lost (counted; their "
                            "windows are unknown)", fired, self.stream.paced)
        except KeyboardInterrupt as e:
            self.interrupted = True
            # SIGTERM, SIGHUP (hilat.shutdown.Terminated) are said by name; Ctrl-C is the default.
            self.stopped_by = signal.Signals(e.signum).name if hasattr(e, "signum") else None
            log.warning("interrupted%s: stopping the rig and keeping what was captured",
                        f" ({self.stopped_by})" if self.stopped_by else "")
            if session is not None and session.rig is not None and self.identity is not None:
                try:
                    session.rig.command_timeout = 2.0
                    session.stop()
                    if self.stream is not None:
                        session.drain(self.stream, quiet=0.1)
                        self._close_stream(session)
                        if self.rig_histograms is not None:
                            self._flush_engine(session)
                        self.status = session.finish(self.stream)
                except (RigError, TransportError, KeyboardInterrupt):
                    pass
        except RigSilent as e:
            self.error = str(e)
            if self.start_tick is not None:   # mid-run: say what it likely is
                self.error += (": the rig stopped answering mid-run (reset, powered off, or its cable pulled?); the "
                               "run up to its last record is kept, what came after is unknown")
        except (RigError, TransportError) as e:
            self.error = str(e)
        except SampleOutOfRange as e:   # a value no histogram holds: an error, never a dropped sample
            self.error = f"run {self.run_dir}: {e}"
            log.error("%s", self.error)
        except OSError as e:   # the run directory cannot be written: disk full, a file size limit
            if e.errno not in _WRITE_ERRORS:
                raise
            self._stop_on_write_error(session, e)
        finally:
            if previous_usr1 is not None:
                signal.signal(signal.SIGUSR1, previous_usr1)
            if self.live is not None:
                self.live.close()
            decoder = session.decoder_counters if session is not None else {}
            if own_session and session is not None:
                session.close()
            try:
                self._write(decoder)
            except OSError as e:
                self.error = self.error or self._write_error(e)
            finally:
                try:
                    self.writer.close()
                except OSError as e:
                    self.error = self.error or self._write_error(e)
        return self

    # crash safety (docs/analysis.md, "What survives a failure") ----------------------------------------

    def _write_started(self, session):
        """meta.json as the stimuli start, marked interim: a capture killed before it ends leaves a run
        directory that ``hilat report`` reads (from raw.bin) and says was cut short. The end of the run
        replaces it."""
        self.writer.write_json("meta.json", self._meta(session.decoder_counters, interim=True))

    def _write_error(self, e):
        return f"cannot write the run directory {self.run_dir}: {e.strerror or e}"

    def _stop_on_write_error(self, session, e):
        """Disk full (or a file size limit): stop the rig, leave what is on disk as it is (each file
        readable up to its last whole item), and end with the reason as the capture's error."""
        self.error = self._write_error(e)
        if session is not None and session.rig is not None and self.identity is not None:
            session.raw_sink = None   # what still arrives stays in memory, not half on disk
            try:
                session.rig.command_timeout = 2.0
                session.stop()
            except (RigError, TransportError, OSError):
                pass
            try:   # meta.json with the error, if it still fits (the end of the run may not get that far)
                self.writer.write_json("meta.json", self._meta(session.decoder_counters))
            except OSError:
                pass

    # results --------------------------------------------------------------------------------------

    def roles(self):
        """The channel roles of this rig (its IDENTIFY table) and this stimulus's polarity."""
        return _roles(self.settings, self.identity)

    @property
    def records_received(self):
        return self.stream.records if self.stream else 0

    def load(self):
        """The run directory just written, as ``reader.Run`` (its edges read on first use)."""
        from hilat.rundir.reader import load_run

        return load_run(self.run_dir)

    def pairing(self):
        """The built-in kinds per stimulus, recomputed exactly from the run's edges."""
        return self.load().pairing

    def measurements(self):
        """Every kind of this capture, recomputed exactly from the run's edges."""
        return self.load().measurements

    @property
    def deadline_ticks(self):
        """The deadline the pairing uses (``effective_deadline``), the engine's and the host's."""
        return effective_deadline(self.settings)

    @property
    def offset_ticks(self):
        return self.calibration["offset_ticks"] if self.calibration else 0

    @property
    def ts_hz(self):
        """Ticks per second for converting to ns: the calibrated frequency when there is one."""
        if self.calibration:
            return self.calibration["ts_hz"]
        return self.identity.ts_hz if self.identity else 1

    @property
    def samples_per_tick(self):
        """How often the rig samples each input a tick."""
        return getattr(self.identity, "samples_per_tick", 1) or 1

    @property
    def subticks(self):
        """Where the raw edges' times put an input edge in its tick (``analysis.Subticks``): nominal
        bins, or a resolution calibration's centres when one is in force; fixed once the rig identified
        and the calibration is known."""
        from hilat.calibration.resolution import subticks_for

        if self._subticks is not None:
            return self._subticks
        return subticks_for(self.samples_per_tick, self.identity.n_stimulus if self.identity else 0)

    @property
    def units_per_tick(self):
        return self.subticks.units_per_tick

    @property
    def unit(self):
        """The run's unit (``units.RunUnit``): that of the raw edges' times, samples and values."""
        return units.RunUnit.of(self.ts_hz, self.subticks)

    def _meta(self, decoder, interim=False):
        ident = self.identity
        stream = self.stream
        status = self.status
        dropped = list(status.dropped) if status else None
        session = self.session
        return {
            "format": "hilat-run", "version": units.RUN_FORMAT_VERSION,
            "label": self.settings.label, "url": self.url,
            "started": datetime.fromtimestamp(self._t0, timezone.utc).isoformat(),
            "wall_seconds": round(time.time() - self._t0, 3),
            "rig": dataclasses.asdict(ident) if ident else None,
            "settings": _jsonable(dataclasses.asdict(self.settings)),
            # What the run measures, resolved against the rig's table (reports read these back).
            "measures": [m.to_json() for m in self._measures],
            "fired": sorted(self._fired),
            "start_tick": self.start_tick,
            # The unit of edges.bin, samples/ and the hlog (docs/subtick.md): 1/units_per_tick tick,
            # an input edge at tick * units_per_tick + subtick_positions[its fraction].
            "time_unit": self.subticks.to_meta(),
            # The run's unit, mu (hilat.units; run format 5 on): what one unit of those times is.
            "unit": self.unit.to_json(),
            # The deadline the windows closed at (ticks; None: the next stimulus): the rig's engine and
            # the host's pairing of the edges, now and in later reports.
            "deadline_ticks": self.deadline_ticks,
            # Where the last windows closed (the edges' unit): the rig's clock once everything before
            # it had arrived (a report closes them there too); None: just after the last edge.
            "observed_end": self.observed_end,
            "stimuli": stream.aggregator.stimuli if stream and not self.settings.no_stimulus else 0,
            "records": stream.records if stream else 0,
            "edges": self.writer.edge_count,
            "raw_bytes": self.writer.raw_bytes,
            "interrupted": self.interrupted,
            "stopped_by": self.stopped_by,
            "interim": interim,
            "error": self.error,
            "counters": {
                "decoder": decoder,
                "gateware_overflow_markers": session.overflows if session else 0,
                "gateware_dropped_per_channel": dropped,
                "gateware_overflow_flag": status.overflow if status else None,
                "rig_records_sent": status.records_sent if status else None,
                "rig_events_sent": status.events_sent if status else None,
                "rig_frames_sent": status.frames_sent if status else None,
                "rig_stimuli_fired": list(status.fired) if status and status.fired else None,
                "out_of_order_edges": stream.out_of_order if stream else 0,
                "hlog_values_below_zero": self.hlog.below_zero if self.hlog else 0,
                "gaps": stream.gap_count if stream else 0,
                "stream": self._stream_meta(),
            },
            "link_plan": dataclasses.asdict(self.link_plan) if self.link_plan else None,
            "extra": self.extra_meta,
            "calibration": self._calibration_meta(),
            "results": self._results(decoder, interim),
            "engine": self._engine_meta(),
        }

    def _stream_meta(self):
        """udp://: the datagram stream's counters (docs/ethernet.md, "Losses the host counts"), the rig's
        own counts of what it sent, and how far the processing lagged the link (None: no stream)."""
        link = self.stream_link or (self.session.stream if self.session is not None else None)
        return link.counters() if link is not None else None

    def _results(self, decoder, interim):
        """Which results are complete: on_rig (the engine's; "none" without it) and raw (the edges:
        "none" when off, "partial" when any was lost on the way)."""
        s, session = self.settings, self.session
        unfinished = interim or self.interrupted or self.error is not None
        on_rig = "none"
        if s.on_rig:
            rig = self.rig_histograms
            on_rig = "complete" if rig is not None and not rig.problems() and not unfinished else "partial"
        dropped = sum(self.status.dropped) if self.status else 0
        stream = self._stream_meta() or {}
        lost = (any(decoder.get(k) for k in ("lost", "corrupt", "malformed")) or dropped
                or stream.get("records_lost") or stream.get("receiver_error")
                or (session.overflows if session else 0) or (self.stream.out_of_order if self.stream else 0))
        raw = "none" if not s.raw else ("partial" if lost or unfinished else "complete")
        return {"on_rig": on_rig, "raw": raw}

    def _engine_meta(self):
        rig = self.rig_histograms
        if self.engine_config is None:
            return None
        return {"config": dataclasses.asdict(self.engine_config.message()),
                "trigger": self._trigger_meta(),
                "intervals": rig.intervals_complete + rig.intervals_incomplete if rig else 0,
                "outliers": rig.outliers if rig else 0,
                "problems": rig.problems() if rig else ["the engine never started"],
                "notes": rig.notes() if rig else []}

    def _trigger_meta(self):
        """The trigger-out as configured: in ticks and ns, and the pin's delay after the threshold."""
        trigger = self.engine_config.trigger
        if trigger is None:
            return None
        tick_ns = 1e9 / self.ts_hz
        return {"response": trigger.response, "threshold_ticks": trigger.threshold,
                "threshold_ns": trigger.threshold * tick_ns, "width_ticks": trigger.width,
                "width_ns": trigger.width * tick_ns, "on_late": trigger.on_late,
                "delay_ticks": self.engine_limits.trigger_delay}

    def _observed_end(self):
        """Where the last windows close (the edges' unit): in a run that finished, the tick the drain
        made complete (one response window past the last stimulus); else just after the last edge (a
        capture cut short: what follows is a gap)."""
        last = self.stream.last_tick
        # The drain after the rig's clock passed the target read until quiet or until a record at
        # or past it: every edge before it has arrived, or its loss is a gap.
        if self.finished_cleanly and self._complete_before is not None:
            end = int(self._complete_before) * self.units_per_tick
            return max(end, last + 1) if last is not None else end
        return last + 1 if last is not None else None

    def _write(self, decoder):
        if self.identity is None:
            self.writer.write_json("meta.json", {"format": "hilat-run", "version": units.RUN_FORMAT_VERSION,
                                                 "url": self.url,
                                                 "error": self.error, "label": self.settings.label, "rig": None})
            return
        if self.stream is not None:
            self.observed_end = self._observed_end()
            try:
                self.stream.finish(self.observed_end, cut_short=self.interrupted or self.error is not None)
                self.writer.flush()   # the samples' jobs done (a log's error raised here)
            except SampleOutOfRange as e:
                self.error = self.error or f"run {self.run_dir}: {e}"
                log.error("%s", self.error)
        if self.hlog is not None:
            self.writer.flush()   # every sample in the log (the writer's thread) before it closes
            self.hlog.close((self.stream.last_tick or 0) + 1)
        if self.rig_histograms is not None:
            self.writer.write_json("engine.json", {**self.rig_histograms.finish().to_json(),
                                                   "config": dataclasses.asdict(self.engine_config.message())})
        self.writer.flush()
        meta = self._meta(decoder)
        self.writer.write_json("meta.json", meta)
        if self.stream is not None:
            self._write_summaries(meta)

    def _write_summaries(self, meta, interim=False):
        """summary.json (the report document of ``hilat report --format json``, schema in
        docs/hilat-report.schema.json) and summary.txt, from the aggregates: nothing is read back."""
        from hilat.reports import report
        from hilat.rundir.reader import run_from_meta
        from hilat.statistics.run_statistics import RunStatistics

        run = run_from_meta(self.run_dir, meta, edges=())
        if self.rig_histograms is not None:
            statistics = RunStatistics.of_aggregates(run, self.rig_histograms, edges=self.writer.edge_count)
        else:
            statistics = RunStatistics.of_aggregates(run, self.stream.aggregator)
        doc = report.build_report([run], aggregates={run.path: statistics})
        if interim:
            doc["runs"][0]["problems"].insert(0, f"interim summary #{self.interim_summaries} while capturing: "
                                                 f"the samples final so far ({self.stream.paced} "
                                                 f"{'stimuli' if run.builtin else 'start edges'} received)")
        self.summary = doc
        self.writer.write_text("summary.json", report.format_json(doc))
        self.writer.write_text("summary.txt", report.format_text(doc))

    def write_interim(self):
        """SIGUSR1: summary.json/.txt and meta.json of everything final so far, and the open .hlog
        intervals cut at the last edge; the capture goes on."""
        self.interim_summaries += 1
        if self.hlog is not None and self.stream.last_tick is not None:
            self.writer.flush()
            self.hlog.cut(self.stream.last_tick + 1)
        if self.rig_histograms is not None:  # the closed intervals' bins, the engine's totals so far
            self.rig_histograms.feed(self.session.engine_stats())
        self.writer.flush()
        meta = self._meta(self.session.decoder_counters if self.session else {}, interim=True)
        self.writer.write_json("meta.json", meta)
        self._write_summaries(meta, interim=True)
        log.info("interim summary #%d written to %s", self.interim_summaries, self.run_dir / "summary.txt")

    def _calibration_meta(self):
        if self.calibration is None:
            return None
        meta = dict(self.calibration)
        if self.offset_ticks:
            # A response sooner than the rig's own delay cannot have been caused by the stimulus: its
            # latency is negative after the subtraction (and -1 would read as a miss), so say so.
            early = self.stream.responses_before_offset if self.stream else 0
            meta["responses_before_offset"] = early
            if early:
                meta["warnings"] = meta["warnings"] + [
                    f"{early} responses came sooner than the rig's own loopback delay "
                    f"({self.offset_ticks:g} ticks): check the calibration and the wiring"]
                meta["statement"] = meta["statement"] + [f"WARNING: {meta['warnings'][-1]}"]
        return meta

    def report(self):
        """The run's summary text (summary.txt)."""
        return (self.run_dir / "summary.txt").read_text().rstrip("\n") if self.run_dir else ""


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj


