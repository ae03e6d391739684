"""A capture's settings and its plan: what it fires, which channels play which role, what it
measures, checked against the rig's IDENTIFY before anything is sent (``plan``). The capture's
lifecycle is ``hilat.acquisition.capture``."""

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from hilat import analysis, engine
from hilat.analysis import measures
from hilat.link import protocol as p
from hilat.link.transport import DEFAULT_BAUDRATE
from hilat.values import format_ticks


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
    # A TDC rig's online mode (docs/tdc.md): the run's own edges re-estimate each TDC input's bins,
    # stored for later captures and stated in the run. Off by default.
    tdc_online: bool = False


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
        return engine.deadline_limit(settings.engine_interval_shift)
    if not settings.on_rig and not settings.no_stimulus and settings.stimulus.mode == "periodic":
        period = int(settings.stimulus.period)
        return period if settings.deadline_ticks is None else min(int(settings.deadline_ticks), period)
    return settings.deadline_ticks


def channel_roles(settings, ident):
    """The channel roles of the rig ``ident`` (its IDENTIFY table) with the settings' moves, active-low
    inputs and the stimulus's polarity."""
    return analysis.Channels.from_table(ident.channels, stimulus_active=0 if settings.stimulus.invert else 1,
                                        roles=settings.roles, active_low=settings.active_low)


def plan(settings, ident):
    """What a capture with ``settings`` does on the rig ``ident`` (its IDENTIFY): (roles, measures,
    {stimulus channel: StimulusSettings} to fire, (channel, level) of the edge --count counts).
    Raises ValueError naming what does not fit this rig."""
    s = settings
    roles = channel_roles(s, ident)
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
