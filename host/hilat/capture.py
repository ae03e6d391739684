"""``hilat capture``: configure the rig, run stimuli, record every edge, write a run directory.

Run directory (``OUT/YYYYmmdd-HHMMSS-LABEL/``):

- ``raw.bin``       every byte received from the rig, appended before anything decodes it;
- ``events.csv``    decoded edges: tick, channel, level, tag level;
- ``latencies.csv`` one row per stimulus: its tick and its latencies in ticks (-1: missed);
- ``meta.json``     rig identity, configuration, label, counters (frames, losses, drops), and the
                    calibration in force (``"calibration"``: offset subtracted, calibrated ts_hz,
                    warnings, resolution statement; see ``hilat.calibration``);
- ``summary.txt``   the latency table; ``summary.json``: the report document (docs/analysis.md).
"""

import csv
import dataclasses
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from hilat import analysis, calibration
from hilat import protocol as p
from hilat.rig import Rig, RigError
from hilat.transport import DEFAULT_BAUDRATE, Transport, TransportError

log = logging.getLogger("hilat")

MODES = {"periodic": p.MODE_PERIODIC, "dither": p.MODE_DITHER, "random": p.MODE_RANDOM,
         "burst": p.MODE_BURST, "oneshot": p.MODE_ONESHOT}


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
    deadline_ticks: int | None = None  # response window; default: to the next stimulus
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
    # Measurement definitions (hilat.measures: "NAME=A..B", "NAME=period:A", "NAME=width:A").
    measures: list = field(default_factory=list)
    # No stimulus at all: the rig only timestamps (DUT-paced tests); the measures are the kinds.
    no_stimulus: bool = False
    # More stimulus outputs fired at the same time: [(channel, {setting: value})], each with the
    # stimulus settings above except those it names (another interrupt source, its own period...).
    also_fire: list = field(default_factory=list)


STIMULUS_SETTING_NAMES = [f.name for f in dataclasses.fields(StimulusSettings)]


def start_margin(ident):
    """Ticks ahead of now to start at: 1 ms, and at least twice the rig's own start margin (the
    commands take a round trip before the start is armed)."""
    return max(ident.ts_hz // 1000, 2 * ident.start_margin)


def _roles(settings, ident):
    return analysis.Channels.from_table(ident.channels, stimulus_active=0 if settings.stimulus.invert else 1,
                                        roles=settings.roles, active_low=settings.active_low)


def plan(settings, ident):
    """What a capture with ``settings`` does on the rig ``ident`` (its IDENTIFY): (roles, measures,
    {stimulus channel: StimulusSettings} to fire, (channel, level) of the edge --count counts).
    Raises ValueError naming what does not fit this rig."""
    from hilat import measures

    s = settings
    roles = _roles(s, ident)
    defined = [measures.parse(text, roles, ident.ts_hz, reserved=[k for k, _ in analysis.KINDS])
               for text in s.measures]
    names = [m.name for m in defined]
    if len(set(names)) != len(names):
        raise ValueError(f"a measurement name is given twice: {', '.join(names)}")
    if s.no_stimulus and not defined:
        raise ValueError("a capture with no stimulus measures nothing by default: give --measure")
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


class Capture:
    """One capture run; keeps everything it received even when the run ends badly."""

    def __init__(self, url, settings, extra_meta=None):
        self.url = url
        self.settings = settings
        self.extra_meta = extra_meta or {}
        self.records = []          # (tick, channels, levels)
        self.overflows = []        # (tick, channels) gateware overflow markers
        self.status = None
        self.identity = None
        self.start_tick = None
        self.stim_seen = 0
        self.last_stim = None
        self.interrupted = False
        self.error = None
        self.run_dir = None
        self.calibration = None    # meta["calibration"]: what is applied, once the rig identified
        self._roles = None         # analysis.Channels, once the rig identified
        self._measures = []        # measures.Measure, once the rig identified
        self._fired = {}           # {stimulus channel: StimulusSettings} fired by this capture
        self._pace = None          # (channel, level): the edge --count counts
        self.responses_before_offset = 0
        self._edges_cache = None   # (record count, decoded edges): see _edges()

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

    def _configure(self, rig):
        ident = self.identity
        n = ident.n_stimulus + ident.n_inputs
        flags = p.CAPTURE_ENABLE | p.CAPTURE_RISE | p.CAPTURE_FALL
        if self.settings.glitch > ident.glitch_max:
            raise RigError(f"glitch filter of {self.settings.glitch} ticks: this rig's longest is "
                           f"{ident.glitch_max} ticks")
        glitch = [0] * ident.n_stimulus + [self.settings.glitch] * ident.n_inputs
        rig.command(p.CaptureConfig([(flags, glitch[ch]) for ch in range(n)]))
        # Stimulus output k is channel k of the capture stream and output k of the rig (the channel
        # table puts the outputs first).
        for stim, s in self._fired.items():
            rig.command(p.StimConfig(channel=stim, mode=MODES[s.mode], invert=int(s.invert), width=s.width,
                                     period=s.period, jitter=s.jitter, probability=s.probability,
                                     burst_count=s.burst_count, burst_spacing=s.burst_spacing,
                                     count=self.settings.count or 0, seed=s.seed))
        # Start at an absolute tick a little ahead, so the start is exact and recorded.
        margin = start_margin(ident)
        self.start_tick = rig.now() + margin
        if self._fired:
            rig.command(p.Start(channels=self._fired_mask, at_time=1, start=self.start_tick))

    @property
    def _fired_mask(self):
        return sum(1 << ch for ch in self._fired)

    def _plan(self):
        try:
            self._roles, self._measures, self._fired, self._pace = plan(self.settings, self.identity)
        except ValueError as e:
            raise RigError(str(e)) from None

    # stream ---------------------------------------------------------------------------------------

    def _ingest(self, frame):
        msg = frame.msg
        if isinstance(msg, p.Events):
            stim_ch, active = self._pace
            for rec in msg.records:
                self.records.append(rec)
                tick, mask, levels = rec
                if mask >> stim_ch & 1 and (levels >> stim_ch & 1) == active:
                    self.stim_seen += 1
                    self.last_stim = tick
        elif isinstance(msg, p.Overflow):
            self.overflows.append((msg.timestamp, msg.channels))
            log.warning("rig FIFO overflow at tick %d: edges lost on channels %s (counted)",
                        msg.timestamp, bin(msg.channels))
        elif isinstance(msg, p.Status):
            self.status = msg

    def _pump(self, rig):
        for frame in rig.frames():
            self._ingest(frame)

    def _done_stimulating(self):
        s = self.settings
        if s.count is not None and self.stim_seen >= s.count:
            return True
        if s.duration_ticks is not None and self.records:
            return self.records[-1][0] >= self.start_tick + s.duration_ticks
        return False

    def _stimulate(self, rig, progress):
        """Collect until the count or duration is reached. Every second the rig is asked whether its
        stimulus has finished, so lost stimulus edges (counted) cannot make the host wait forever."""
        last_check = time.monotonic()
        last_data = (time.monotonic(), rig.bytes_received)
        while not self._done_stimulating():
            self._pump(rig)
            progress.update()
            now = time.monotonic()
            if rig.bytes_received != last_data[1]:
                last_data = (now, rig.bytes_received)
            if now - last_check >= 1.0:
                last_check = now
                status = rig.status()
                self._pump_pending(rig)
                self.status = status
                stim = self._roles.stimulus
                if (stim in self._fired and len(status.stim_status) > stim
                        and status.stim_status[stim] & p.STIM_DONE):
                    log.warning("the rig finished its %s stimuli but %d arrived: edges were lost (counted)",
                                self.settings.count, self.stim_seen)
                    return
            if now - last_data[0] > 10.0:
                raise RigError(f"the rig on {self.url} sent nothing for 10 s")

    def _finish(self, rig):
        """Stop stimuli, then let every response up to the last deadline arrive."""
        if self._fired:
            rig.command(p.Stop(channels=self._fired_mask))
        self._pump_pending(rig)
        # Wait one response window past the last stimulus (with no stimulus: a measure's deadline, else 1 ms).
        window = self.settings.deadline_ticks or max(
            [s.period + s.jitter for s in self._fired.values()]
            or [m.deadline_ticks or 0 for m in self._measures] + [self.identity.ts_hz // 1000])
        target = (self.last_stim or self.start_tick) + window + 64
        deadline = time.monotonic() + 30
        while rig.now() < target:
            self._pump_pending(rig)
            if time.monotonic() > deadline:
                raise RigError("the rig's clock does not advance")
            time.sleep(0.02)
        # Records older than `target` are in the FIFO or on the wire: read until quiet, or until a
        # record at or past `target` arrives (records come in tick order), so that an input that
        # never stops toggling (a 1PPS on the spare input) cannot hold the capture open.
        quiet_until = time.monotonic() + 0.3
        while time.monotonic() < quiet_until and not (self.records and self.records[-1][0] >= target):
            before = len(self.records)
            self._pump_pending(rig)
            self._pump(rig)
            if len(self.records) != before:
                quiet_until = time.monotonic() + 0.3
        self.status = rig.status()
        self._pump_pending(rig)

    def _pump_pending(self, rig):
        while rig.pending:
            self._ingest(rig.pending.pop(0))

    # run ------------------------------------------------------------------------------------------

    def run(self):
        self.run_dir = self._make_run_dir()
        raw = open(self.run_dir / "raw.bin", "ab", buffering=0)
        transport = None
        rig = None
        t0 = time.time()
        progress = _Progress(self, enabled=self.settings.progress)
        try:
            transport = Transport(self.url, baudrate=self.settings.baudrate)
            rig = Rig(transport, raw_sink=raw.write)
            self.identity = rig.hello()
            log.info("rig: %s, %s; ts %.3f MHz", self.identity.gateware, self.identity.firmware,
                     self.identity.ts_hz / 1e6)
            self._plan()
            self.calibration = calibration.for_rig(self.identity, self.settings.calibration_dir,
                                                   reason_if_none=self.settings.no_calibration_reason)
            for warning in self.calibration["warnings"]:
                log.warning("%s", warning)
            self._configure(rig)
            self._stimulate(rig, progress)
            self._finish(rig)
        except KeyboardInterrupt:
            self.interrupted = True
            log.warning("interrupted: stopping the rig and keeping what was captured")
            if rig is not None:
                try:
                    rig.command_timeout = 2.0
                    rig.command(p.Stop(channels=(1 << self.identity.n_stimulus) - 1))
                    self._pump_pending(rig)
                    self.status = rig.status()
                except (RigError, TransportError, KeyboardInterrupt):
                    pass
        except (RigError, TransportError) as e:
            self.error = str(e)
        finally:
            progress.close()
            raw.close()
            decoder = rig.decoder.counters() if rig else {}
            if rig is not None:
                rig.close()
            elif transport is not None:
                transport.close()
            if self.identity is not None or self.records:
                self._write(decoder, t0)
            elif self.run_dir is not None:
                (self.run_dir / "meta.json").write_text(json.dumps(
                    {"url": self.url, "error": self.error, "label": self.settings.label}, indent=1))
        return self

    # results --------------------------------------------------------------------------------------

    def roles(self):
        """The channel roles of this rig (its IDENTIFY table) and this stimulus's polarity."""
        return _roles(self.settings, self.identity)

    def _edges(self):
        """(ticks, chans, levels, end tick) of the records so far, decoded once per record count."""
        if self._edges_cache is None or self._edges_cache[0] != len(self.records):
            end = int(self.records[-1][0]) + 1 if self.records else 0
            self._edges_cache = (len(self.records), (*analysis.edges_from_records(self.records), end))
        return self._edges_cache[1]

    def pairing(self):
        """The built-in kinds, per stimulus (latencies.csv)."""
        ticks, chans, levels, end = self._edges()
        # The rig's own stimulus->capture delay (loopback calibration) is subtracted by the pairing
        # from the stimulus->response latencies only.
        pairing = analysis.pair(ticks, chans, levels, self.roles(), self.settings.deadline_ticks, end_tick=end,
                                offset_ticks=self.offset_ticks)
        self.responses_before_offset = sum(
            int(((at != analysis.MISSING) & (latency < 0)).sum())
            for at, latency in ((pairing.isr_tick, pairing.isr_latency), (pairing.task_tick, pairing.task_latency)))
        return pairing

    def measurements(self):
        """Every kind of this capture: the built-in ones when a stimulus fired, and the measures."""
        ticks, chans, levels, end = self._edges()
        return analysis.measure(ticks, chans, levels, self.roles(), self._measures,
                                builtin=not self.settings.no_stimulus, deadline=self.settings.deadline_ticks,
                                end_tick=end, offset_ticks=self.offset_ticks)

    @property
    def offset_ticks(self):
        return self.calibration["offset_ticks"] if self.calibration else 0

    @property
    def ts_hz(self):
        """Ticks per second for converting to ns: the calibrated frequency when there is one."""
        if self.calibration:
            return self.calibration["ts_hz"]
        return self.identity.ts_hz if self.identity else 1

    def _write(self, decoder, t0):
        run = self.run_dir
        ident = self.identity
        roles = self.roles() if ident else None
        tag_ch = roles.tag if ident else None
        tag_low = int(tag_ch in roles.active_low) if ident else 0
        n_channels = ident.n_channels if ident else 0
        with open(run / "events.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["tick", "channel", "level", "tag"])
            for tick, mask, levels in self.records:
                tag = (levels >> tag_ch & 1) ^ tag_low if tag_ch is not None else 0
                for ch in range(n_channels):
                    if mask >> ch & 1:
                        w.writerow([tick, ch, levels >> ch & 1, tag])
        pairing = self.pairing()
        with open(run / "latencies.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["index", "stimulus_tick", "isr_latency_ticks", "task_latency_ticks",
                        "isr_to_task_ticks", "tag_at_stimulus", "tag_in_window", "isr_duplicates"])
            for i in range(len(pairing.stim_tick)):
                w.writerow([i, int(pairing.stim_tick[i]), int(pairing.isr_latency[i]),
                            int(pairing.task_latency[i]), int(pairing.isr_to_task[i]),
                            int(pairing.tag_at_stimulus[i]), int(pairing.tag_in_window[i]),
                            int(pairing.isr_duplicates[i])])
        dropped = list(self.status.dropped) if self.status else None
        meta = {
            "format": "hilat-run", "version": 1,
            "label": self.settings.label, "url": self.url,
            "started": datetime.fromtimestamp(t0, timezone.utc).isoformat(),
            "wall_seconds": round(time.time() - t0, 3),
            "rig": dataclasses.asdict(ident) if ident else None,
            "settings": _jsonable(dataclasses.asdict(self.settings)),
            # What the run measures, resolved against the rig's table (reports read these back).
            "measures": [m.to_json() for m in self._measures],
            "fired": sorted(self._fired),
            "start_tick": self.start_tick,
            "stimuli": int(len(pairing.stim_tick)) if not self.settings.no_stimulus else 0,
            "records": len(self.records),
            "interrupted": self.interrupted,
            "error": self.error,
            "counters": {
                "decoder": decoder,
                "gateware_overflow_markers": len(self.overflows),
                "gateware_dropped_per_channel": dropped,
                "gateware_overflow_flag": self.status.overflow if self.status else None,
                "rig_records_sent": self.status.records_sent if self.status else None,
                "rig_events_sent": self.status.events_sent if self.status else None,
                "rig_frames_sent": self.status.frames_sent if self.status else None,
            },
            "extra": self.extra_meta,
            "calibration": self._calibration_meta(),
        }
        (run / "meta.json").write_text(json.dumps(meta, indent=1))
        (run / "summary.txt").write_text(self.report() + "\n")
        # The run's summary is the report document of `hilat report --format json` (schema in
        # docs/hilat-report.schema.json), computed again from the files just written.
        from hilat import report, runs

        (run / "summary.json").write_text(report.format_json(report.build_report([runs.load_run(run)])))

    def _calibration_meta(self):
        if self.calibration is None:
            return None
        meta = dict(self.calibration)
        if self.offset_ticks:
            # A response sooner than the rig's own delay cannot have been caused by the stimulus: its
            # latency is negative after the subtraction (and -1 would read as a miss), so say so.
            early = self.responses_before_offset
            meta["responses_before_offset"] = early
            if early:
                meta["warnings"] = meta["warnings"] + [
                    f"{early} responses came sooner than the rig's own loopback delay "
                    f"({self.offset_ticks} ticks): check the calibration and the wiring"]
                meta["statement"] = meta["statement"] + [f"WARNING: {meta['warnings'][-1]}"]
        return meta

    def report(self):
        found = self.measurements()
        ts_hz = self.ts_hz
        counted = (f"{found.stimuli} stimuli" if not self.settings.no_stimulus else
                   f"no stimulus, {len(found.series[found.kinds[0]])} {found.kinds[0]} samples")
        lines = [analysis.format_table(analysis.summarize(found, ts_hz), f"{self.settings.label or 'run'}: {counted}")]
        tagged = analysis.tagged_samples(found)
        if tagged:
            lines.append("")
            lines.append(analysis.format_table(analysis.summarize(found, ts_hz, exclude_tagged=True),
                                               f"excluding {tagged} tagged "
                                               + ("samples" if self.settings.no_stimulus else "stimuli")))
        losses = self.loss_lines()
        if losses:
            lines += [""] + losses
        if self.calibration:
            lines += [""] + self._calibration_meta()["statement"]
        return "\n".join(lines)

    def loss_lines(self):
        out = []
        if self.status and (self.status.overflow or any(self.status.dropped)):
            out.append(f"LOST in gateware (FIFO full): {sum(self.status.dropped)} edges, per channel "
                       f"{list(self.status.dropped)}")
        return out


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj


class _Progress:
    """Live count and ISR-latency min/median/max on stderr (a line every 2 s when not a TTY)."""

    def __init__(self, capture, enabled=True):
        self.capture = capture
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.shown = False

    def update(self):
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < (0.25 if self.tty else 2.0):
            return
        self.last = now
        c = self.capture
        total = f"/{c.settings.count}" if c.settings.count else ""
        counted = f"{c._measures[0].name} starts" if c.settings.no_stimulus and c._measures else "stimuli"
        text = f"{c.stim_seen}{total} {counted}"
        if c.records and c.identity and not c.settings.no_stimulus:
            lat = c.pairing().isr_latency
            ok = lat[lat >= 0]
            if len(ok):
                tick_ns = 1e9 / c.identity.ts_hz
                text += (f" | ISR latency min {ok.min() * tick_ns:.0f} median {np.median(ok) * tick_ns:.0f}"
                         f" max {ok.max() * tick_ns:.0f} ns | misses {int((lat < 0).sum())}")
        if self.tty:
            sys.stderr.write("\r" + text[:150].ljust(150))
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()
        self.shown = True

    def close(self):
        if self.enabled and self.tty and self.shown:
            sys.stderr.write("\n")
