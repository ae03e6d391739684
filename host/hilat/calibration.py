"""Calibration: what the rig knows about itself, and what every number it reports can claim.

Three measurements, each stored per rig identity and applied by later captures:

- **loopback** (``hilat calibrate loopback``): a jumper from a stimulus output (STIM0) to a capture
  input (SPARE, channel 4). The delay from each stimulus edge to its copy on the input is the rig's
  own stimulus->capture offset; its spread is the rig's own jitter. The offset (the median delay,
  an integer number of ticks) is subtracted from every stimulus->response latency.
- **clock against the host** (``hilat calibrate clock --against host``): the rig's ``ts`` counter
  read by TIME_REQ round trips against ``time.monotonic`` over a duration. Each reading was latched
  at an unknown instant inside its round trip, so the ratio is bounded by +-(rtt_a + rtt_b)/2 over
  the duration: a hard bound that shrinks with the duration.
- **clock against a 1PPS** (``hilat calibrate clock --against pps``): rising edges of a GPS 1PPS on
  a capture input, numbered, with missing and extra pulses named and excluded, then a least-squares
  line of tick against pulse number; the uncertainty comes from the fit residuals.

Calibration files live in ``$HILAT_CALIBRATION_DIR`` or ``~/.config/hilat/calibration/`` (or
``--calibration-dir``), one JSON file per rig identity: the gateware string and clocks IDENTIFY
reports. A capture applies the file of its rig's identity; failing that, the newest one of the same
board and nominal clock, with a warning. Older than :data:`STALE_DAYS`: applied, with a warning.
"""

import hashlib
import json
import logging
import math
import os
import re
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from hilat import analysis
from hilat import protocol as p

log = logging.getLogger("hilat")

FORMAT = "hilat-calibration"
VERSION = 1
STALE_DAYS = 30.0
# No crystal oscillator is off by this much; a larger estimate means a wrong ts_hz or a simulator.
PLAUSIBLE_PPM = 1000.0
# Fields of IDENTIFY that make a rig's timing what it is (the firmware string is kept, not keyed).
IDENTITY_FIELDS = ("gateware", "ts_hz", "sys_hz", "n_stimulus", "n_inputs", "pin_to_stamp_delay")
# The default role of the input a loopback jumper or a 1PPS is wired to (the rig's channel table).
CALIBRATION_ROLE = "spare"


class CalibrationError(Exception):
    """A calibration could not be made; the message says why and what to do."""


class ImplausibleClock(CalibrationError):
    """An estimate no real oscillator could produce. ``result`` holds the numbers."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


def _utcnow():
    return datetime.now(timezone.utc)


def _iso(dt):
    return dt.isoformat(timespec="seconds")


# ---- identity and store ---------------------------------------------------------------------------

def rig_identity(ident):
    """The identity a calibration belongs to, from an IDENTIFY message."""
    out = {name: getattr(ident, name) for name in IDENTITY_FIELDS}
    out["firmware"] = ident.firmware
    return out


def identity_key(identity):
    """File-name key: readable board/clock part plus a hash of every identity field."""
    blob = json.dumps({k: identity[k] for k in IDENTITY_FIELDS}, sort_keys=True).encode()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", str(identity["gateware"])).strip("-")[:40] or "rig"
    return f"{slug}-{int(identity['ts_hz'])}Hz-{hashlib.sha256(blob).hexdigest()[:8]}"


def _board(identity):
    return str(identity.get("gateware", "")).split(" ")[0]


def default_dir():
    env = os.environ.get("HILAT_CALIBRATION_DIR")
    if env:
        return Path(env)
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / "hilat" / "calibration"


def resolve_dir(explicit=None):
    """``--calibration-dir`` if given, else ``$HILAT_CALIBRATION_DIR``, else the user config dir."""
    return Path(explicit) if explicit else default_dir()


class Store:
    """Calibration files in one directory, one per rig identity."""

    def __init__(self, directory):
        self.dir = Path(directory)

    def path(self, identity):
        return self.dir / f"{identity_key(identity)}.json"

    def load(self, identity):
        return self._read(self.path(identity))

    def _read(self, path):
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise CalibrationError(f"calibration file {path} is unreadable ({e}): move it away and "
                                   "calibrate again") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CalibrationError(f"{path} is not a hilat calibration file")
        if data.get("version") != VERSION:
            raise CalibrationError(f"{path} has calibration format version {data.get('version')}, this hilat "
                                   f"reads version {VERSION}: calibrate again")
        data["file"] = str(path)
        return data

    def find(self, identity):
        """(calibration, exact): this identity's file, else the newest of the same board and nominal
        ts_hz (exact = False), else (None, False)."""
        own = self.load(identity)
        if own is not None:
            return own, True
        candidates = []
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []:
            try:
                cal = self._read(path)
            except CalibrationError as e:
                log.warning("%s", e)
                continue
            other = cal.get("rig_identity") or {}
            if _board(other) == _board(identity) and other.get("ts_hz") == identity["ts_hz"]:
                candidates.append((cal.get("updated", ""), str(path), cal))
        if candidates:
            return max(candidates, key=lambda c: c[:2])[2], False
        return None, False

    def update(self, identity, part, result):
        """Store ``result`` as the ``part`` ("loopback" or "clock") of this identity's calibration,
        keeping the other part. Returns (path, the replaced result or None)."""
        path = self.path(identity)
        cal = self.load(identity) or {"format": FORMAT, "version": VERSION, "rig_identity": identity,
                                      "loopback": None, "clock": None}
        cal.pop("file", None)
        previous = cal.get(part)
        cal[part] = result
        cal["rig_identity"] = identity
        cal["updated"] = result["made"]
        self.dir.mkdir(parents=True, exist_ok=True)
        # Written beside and renamed over: a crash or a second writer never leaves half a file.
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=path.stem, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(cal, indent=1) + "\n")
        os.replace(tmp, path)
        return path, previous


# ---- loopback -------------------------------------------------------------------------------------

def _stats(values):
    v = np.asarray(values, dtype=np.int64)
    if len(v) == 0:
        return {"n": 0}
    s = np.sort(v)
    hist = {str(int(k)): int(c) for k, c in zip(*np.unique(v, return_counts=True))}
    return {"n": int(len(v)), "median_ticks": int(s[(len(s) - 1) // 2]), "min_ticks": int(s[0]),
            "max_ticks": int(s[-1]), "mean_ticks": float(v.mean()),
            "std_ticks": float(v.std(ddof=1)) if len(v) > 1 else 0.0, "histogram": hist}


def _first_after(starts, edges):
    """For each start tick, the delay to the first edge in [start, next start); -1 if none.
    Returns (delays, number of edges no start claimed)."""
    n = len(starts)
    ends = np.append(starts[1:], np.iinfo(np.int64).max) if n else starts
    lo = np.searchsorted(edges, starts, side="left")
    hi = np.searchsorted(edges, ends, side="left")
    found = hi > lo
    delays = np.full(n, -1, dtype=np.int64)
    delays[found] = edges[lo[found]] - starts[found]
    claimed = int(found.sum())
    return delays, len(edges) - claimed


@dataclass
class LoopbackResult:
    stimuli: int
    rise_delays: np.ndarray        # per stimulus, ticks; -1: no edge on the loopback input
    fall_delays: np.ndarray
    unclaimed_edges: int           # loopback rises before the first stimulus or beyond the first per window

    @property
    def missing(self):
        return int((self.rise_delays < 0).sum())

    def summary(self):
        found = self.rise_delays[self.rise_delays >= 0]
        rise = _stats(found)
        fall = _stats(self.fall_delays[self.fall_delays >= 0])
        return {"offset_ticks": rise.get("median_ticks"), "rise": rise, "fall": fall,
                "stimuli": int(self.stimuli), "missing": self.missing, "unclaimed_edges": int(self.unclaimed_edges)}


def loopback_delays(records, stimulus_channel, loopback_channel, active=1):
    """Pair each stimulus edge with the first edge of the same direction on the loopback input."""
    ticks, chans, levels = analysis.edges_from_records(records)
    ticks = ticks.astype(np.int64)
    order = np.argsort(ticks, kind="stable")
    ticks, chans, levels = ticks[order], chans[order], levels[order]

    def edges(ch, level):
        return ticks[(chans == ch) & (levels == level)]
    stim_rise, stim_fall = edges(stimulus_channel, active), edges(stimulus_channel, 1 - active)
    rise, unclaimed = _first_after(stim_rise, edges(loopback_channel, active))
    fall, _ = _first_after(stim_fall, edges(loopback_channel, 1 - active))
    return LoopbackResult(len(stim_rise), rise, fall, unclaimed)


def no_loopback_message(stimuli, stimulus_channel, loopback_channel):
    return (f"no edges on capture channel {loopback_channel} during {stimuli} stimulus pulses: the loopback "
            f"jumper is missing. Wire stimulus output STIM{stimulus_channel} to the SPARE capture input "
            f"(channel {loopback_channel}), see docs/wiring.md, and run again (or give the input you wired "
            "with --channel).")


def loopback_calibration(result, ts_hz, stimulus_channel, loopback_channel, stimulus, url, max_missing=0.01):
    """The stored loopback calibration, or CalibrationError for unusable data."""
    s = result.summary()
    found = s["rise"]["n"]
    if result.stimuli == 0:
        raise CalibrationError(f"no stimulus edges were recorded on channel {stimulus_channel}: the rig did not "
                               "pulse (see the log above)")
    if found == 0:
        raise CalibrationError(no_loopback_message(result.stimuli, stimulus_channel, loopback_channel))
    if result.missing > max_missing * result.stimuli:
        raise CalibrationError(f"{result.missing} of {result.stimuli} stimulus pulses never reached channel "
                               f"{loopback_channel}: the loopback jumper makes intermittent contact (or the "
                               "delay exceeds the stimulus interval). Fix it and run again.")
    rise = s["rise"]
    tick_ns = 1e9 / ts_hz
    return {
        "offset_ticks": int(rise["median_ticks"]),
        "offset_ns": rise["median_ticks"] * tick_ns,
        "min_ticks": rise["min_ticks"], "max_ticks": rise["max_ticks"],
        "mean_ticks": rise["mean_ticks"], "std_ticks": rise["std_ticks"], "n": rise["n"],
        "histogram": rise["histogram"],
        "fall": {k: v for k, v in s["fall"].items() if k != "histogram"},
        "stimuli": s["stimuli"], "missing": s["missing"], "unclaimed_edges": s["unclaimed_edges"],
        "stimulus_channel": stimulus_channel, "capture_channel": loopback_channel,
        "stimulus": stimulus, "url": url, "made": _iso(_utcnow()),
        "method": "median (lower median, an observed value) of the delays from each stimulus rising edge to "
                  "the first rising edge on the loopback input; spread = min/max/std of those delays",
    }


# ---- clock against the host -----------------------------------------------------------------------

@dataclass
class Exchange:
    """One TIME_REQ round trip: the tick was latched between host times ``sent`` and ``received``."""
    sent: float
    received: float
    tick: int

    @property
    def rtt(self):
        return self.received - self.sent

    @property
    def mid(self):
        return (self.sent + self.received) / 2


def best_exchange(now, clock, tries):
    """The round trip with the smallest rtt of ``tries`` (the tightest bracket of its latch)."""
    best = None
    for _ in range(tries):
        sent = clock()
        tick = now()
        received = clock()
        ex = Exchange(sent, received, tick)
        if best is None or ex.rtt < best.rtt:
            best = ex
    return best


def host_clock_estimate(now, ts_hz, duration, clock=time.monotonic, sleep=time.sleep, tries=8, every=0.5,
                        progress=None):
    """Frequency error (ppm) of the rig's ts counter against ``clock`` over ``duration`` seconds.

    ``now()`` reads the rig's counter (TIME_REQ). The two end readings are the best of ``tries`` round
    trips each. Each latch lies within its round trip, so the true host interval between the latches is
    (mid_b - mid_a) +- (rtt_a + rtt_b)/2; with one tick of quantization over the span, the bound is
    +-((rtt_a + rtt_b)/2 + 1/ts_hz) / duration. Readings every ``every`` s in between check that the
    counter runs straight (each must lie on the line within its own bracket and the end bound).
    """
    a = best_exchange(now, clock, tries)
    middle = []
    while clock() - a.mid < duration - every:
        sleep(min(every, max(0.0, duration - every - (clock() - a.mid))))
        middle.append(best_exchange(now, clock, 1))
        if progress:
            progress(clock() - a.mid, duration)
    remaining = duration - (clock() - a.mid)
    if remaining > 0:
        sleep(remaining)
    b = best_exchange(now, clock, tries)
    span_s = b.mid - a.mid
    span_ticks = b.tick - a.tick
    if span_s <= 0 or span_ticks <= 0:
        raise CalibrationError("the rig's clock did not advance between the two readings")
    ratio = span_ticks / ts_hz / span_s
    ppm = (ratio - 1) * 1e6
    bound = ((a.rtt + b.rtt) / 2 + 1 / ts_hz) / span_s
    uncertainty = bound * ratio * 1e6
    # Straightness: the counter at each middle reading versus the line through the ends.
    worst = 0.0
    off_line = 0
    for ex in middle:
        predicted = a.tick + (ex.mid - a.mid) * ratio * ts_hz
        dev_s = (ex.tick - predicted) / ts_hz
        allowed = ex.rtt / 2 + (a.rtt + b.rtt) / 2 + 2 / ts_hz
        worst = max(worst, abs(dev_s))
        off_line += abs(dev_s) > allowed
    result = {
        "method": "host", "ppm": ppm, "uncertainty_ppm": uncertainty, "coverage": "bound",
        "basis": (f"hard bound +-((rtt_a + rtt_b)/2 + 1 tick) / duration with rtt_a = {a.rtt * 1e6:.1f} us, "
                  f"rtt_b = {b.rtt * 1e6:.1f} us (best of {tries} TIME_REQ round trips each), duration "
                  f"{span_s:.3f} s; relative to the host's monotonic clock, itself only as right as the "
                  "host's oscillator and NTP discipline"),
        "duration_s": span_s, "span_ticks": int(span_ticks), "rtt_a_s": a.rtt, "rtt_b_s": b.rtt,
        "readings": len(middle) + 2, "readings_off_line": int(off_line), "worst_deviation_s": worst,
        "made": _iso(_utcnow()),
    }
    if abs(ppm) > PLAUSIBLE_PPM:
        raise ImplausibleClock(
            f"the rig's ts counter ran {ratio:.6g} times as fast as the host's clock ({ppm:+.6g} ppm): no crystal "
            f"is that far off (plausible: |ppm| < {PLAUSIBLE_PPM:g}). This looks like the simulator (simulated time "
            "runs far slower than real time; use --against pps with the simulator's 1PPS source) or a wrong ts_hz "
            "in the gateware. Nothing stored.", result)
    if off_line:
        log.warning("%d of %d intermediate readings lie off the straight line by more than their bracket "
                    "(worst %.1f us): the host clock jumped or the link stalled; lengthen --duration or retry",
                    off_line, len(middle), worst * 1e6)
    return result


# ---- clock against a 1PPS -------------------------------------------------------------------------

@dataclass
class PpsResult:
    nominal_ticks: float
    accepted: list                  # [(pulse number, tick)]
    missing: list                   # [(pulse number, expected tick)]
    extra: list                     # [(tick, reason)]
    slope: float = math.nan         # ticks per pulse
    intercept: float = math.nan
    residual_rms: float = math.nan  # ticks
    ppm: float = math.nan
    uncertainty_ppm: float = math.nan


def _fit(n, t):
    n = np.asarray(n, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    n0, t0 = n.mean(), t.mean()
    sxx = float(((n - n0) ** 2).sum())
    slope = float(((n - n0) * (t - t0)).sum() / sxx)
    intercept = t0 - slope * n0
    return slope, intercept, t - (intercept + slope * n), sxx


def _coarse_numbering(ticks, nominal, tolerance):
    """Walk the edges from an anchor (two consecutive intervals of about one nominal period), numbering
    each edge by the whole number of periods since the last accepted one. Returns {index: number}."""
    d = np.diff(ticks)
    good = np.abs(d - nominal) <= tolerance * nominal
    anchors = np.flatnonzero(good[:-1] & good[1:]) if len(good) > 1 else np.flatnonzero(good)
    if len(anchors) == 0:
        return {}
    a = int(anchors[0])
    numbers = {a: 0}
    for direction in (1, -1):
        last_i, last_n, period = a, 0, float(d[a])
        i = a + direction
        while 0 <= i < len(ticks):
            gap = (ticks[i] - ticks[last_i]) * direction
            k = int(round(gap / period))
            if k >= 1 and abs(gap - k * period) <= tolerance * nominal:
                last_n += k * direction
                numbers[i] = last_n
                if k == 1:
                    period = 0.8 * period + 0.2 * gap   # follow the rig's clock error
                last_i = i
            i += direction
    return numbers


def analyse_pps(ticks, nominal_ticks, tolerance=0.01, reject_sigma=6.0, floor_ticks=3.0):
    """Number the 1PPS edges, name missing and extra pulses, fit tick = a + b * number.

    Coarse pass: intervals within ``tolerance`` (relative) of whole periods. Fine pass (repeated until
    stable): every edge gets the number nearest the fitted line; an edge further from the line than
    max(``reject_sigma`` robust sigmas, ``floor_ticks``), or a second edge for one number, is extra;
    numbers without an edge are missing. Neither is ever used in the fit.
    """
    ticks = np.asarray(sorted(int(t) for t in ticks), dtype=np.int64)
    result = PpsResult(float(nominal_ticks), [], [], [])
    if len(ticks) < 3:
        return result
    numbers = _coarse_numbering(ticks, nominal_ticks, tolerance)
    if len(numbers) < 3:
        return result
    idx = np.array(sorted(numbers))
    slope, intercept, resid, _ = _fit([numbers[i] for i in idx], ticks[idx])
    for _round in range(5):
        n_near = np.round((ticks - intercept) / slope).astype(np.int64)
        resid_all = ticks - (intercept + slope * n_near)
        in_fit = np.abs(resid_all) <= max(floor_ticks, tolerance * nominal_ticks)
        mad = float(np.median(np.abs(resid_all[in_fit]))) if in_fit.any() else 0.0
        threshold = max(reject_sigma * 1.4826 * mad, floor_ticks)
        keep = np.abs(resid_all) <= threshold
        # One edge per number: the one nearest the line.
        best = {}
        for i in np.flatnonzero(keep):
            n = int(n_near[i])
            if n not in best or abs(resid_all[i]) < abs(resid_all[best[n]]):
                best[n] = i
        chosen = np.array(sorted(best.values()), dtype=np.int64)
        if len(chosen) < 3:
            return result
        new = _fit(n_near[chosen], ticks[chosen])
        converged = abs(new[0] - slope) < 1e-12 * slope and abs(new[1] - intercept) < 1e-6
        slope, intercept, resid, sxx = new
        if converged:
            break
    chosen_set = set(int(i) for i in chosen)
    n_first = int(n_near[chosen].min())
    result.accepted = [(int(n_near[i]) - n_first, int(ticks[i])) for i in chosen]
    have = {n for n, _ in result.accepted}
    last = max(have)
    result.missing = [(n, int(round(intercept + slope * (n + n_first)))) for n in range(last + 1) if n not in have]
    for i in range(len(ticks)):
        if i in chosen_set:
            continue
        position = (ticks[i] - intercept) / slope - n_first
        if keep[i]:
            reason = f"a second edge for pulse {int(n_near[i]) - n_first}, {resid_all[i]:+.0f} ticks off the line"
        else:
            reason = f"{position:.3f} periods after pulse 0, {resid_all[i]:+.0f} ticks off the nearest expected pulse"
        result.extra.append((int(ticks[i]), reason))
    dof = len(chosen) - 2
    rms = math.sqrt(float((resid ** 2).sum()) / dof) if dof > 0 else math.nan
    result.slope, result.intercept, result.residual_rms = slope, intercept, rms
    # One tick of quantization (uniform: sigma 1/sqrt(12) tick) is the least scatter claimed.
    sigma = max(rms if dof > 0 else 0.0, 1 / math.sqrt(12))
    se_slope = sigma / math.sqrt(sxx)
    result.ppm = (slope / nominal_ticks - 1) * 1e6
    result.uncertainty_ppm = 2 * se_slope / nominal_ticks * 1e6
    return result


def pps_calibration(result, ts_hz, period_s, channel, url, edges):
    """The stored clock calibration from a 1PPS analysis, or CalibrationError."""
    nominal = result.nominal_ticks
    if edges == 0:
        raise CalibrationError(f"no pulses on capture channel {channel}: connect the 1PPS output of the GPS "
                               f"receiver to capture channel {channel} (SPARE, see docs/wiring.md) with a common "
                               "ground, wait for the receiver's fix, and run again")
    if len(result.accepted) < 3:
        raise CalibrationError(f"{edges} edges on channel {channel}, but fewer than three pulses a whole number of "
                               f"nominal periods ({period_s:g} s = {nominal:.0f} ticks) apart: is --pps-period "
                               "right, and is this a 1PPS signal? Lengthen --duration for more pulses.")
    span = result.accepted[-1][0]
    expected = span + 1
    if len(result.missing) + len(result.extra) > 0.5 * expected:
        raise CalibrationError(f"{len(result.missing)} missing and {len(result.extra)} extra pulses against "
                               f"{len(result.accepted)} good ones: the signal on channel {channel} is not a clean "
                               f"pulse every {period_s:g} s (check --pps-period and the wiring)")
    out = {
        "method": "pps", "ppm": result.ppm, "uncertainty_ppm": result.uncertainty_ppm, "coverage": "k=2",
        "basis": (f"least-squares line of tick against pulse number over {len(result.accepted)} pulses spanning "
                  f"{span} periods of {period_s:g} s; uncertainty = 2 x the slope's standard error from the fit "
                  f"residuals (rms {result.residual_rms:.3f} ticks, at least 1/sqrt(12) tick of quantization); "
                  "relative to the 1PPS source, taken as exact"),
        "channel": channel, "pps_period_s": period_s, "nominal_ticks": nominal,
        "ticks_per_pulse": result.slope, "residual_rms_ticks": result.residual_rms,
        "pulses_used": len(result.accepted), "edges": int(edges),
        "missing": [{"pulse": n, "expected_tick": t} for n, t in result.missing],
        "extra": [{"tick": t, "why": why} for t, why in result.extra],
        "url": url, "made": _iso(_utcnow()),
    }
    if abs(result.ppm) > PLAUSIBLE_PPM:
        raise ImplausibleClock(f"the 1PPS intervals say the rig's clock is off by {result.ppm:+.6g} ppm: no crystal "
                               f"is that far off. Is --pps-period ({period_s:g} s) right, and ts_hz ({ts_hz} Hz)? "
                               "Nothing stored.", out)
    return out


# ---- talking to the rig ---------------------------------------------------------------------------

class Listener:
    """A session that enables some capture channels and collects their records."""

    def __init__(self, rig, ident):
        self.rig = rig
        self.ident = ident
        self.records = []
        self.overflows = []
        self.status = None

    def configure(self, flags_by_channel):
        n = self.ident.n_stimulus + self.ident.n_inputs
        self.rig.command(p.CaptureConfig([(flags_by_channel.get(ch, 0), 0) for ch in range(n)]))

    def pump(self):
        got = 0
        while self.rig.pending:
            got += self._ingest(self.rig.pending.pop(0))
        for frame in self.rig.frames():
            got += self._ingest(frame)
        return got

    def _ingest(self, frame):
        msg = frame.msg
        if isinstance(msg, p.Events):
            self.records.extend(msg.records)
            return len(msg.records)
        if isinstance(msg, p.Overflow):
            self.overflows.append((msg.timestamp, msg.channels))
        elif isinstance(msg, p.Status):
            self.status = msg
        return 0

    def drain(self, quiet=0.3):
        """Read until nothing arrived for ``quiet`` seconds."""
        until = time.monotonic() + quiet
        while time.monotonic() < until:
            if self.pump():
                until = time.monotonic() + quiet

    def until_tick(self, tick, idle_timeout=10.0, poll=0.25, progress=None):
        """Collect until the rig's counter has passed ``tick``."""
        last_progress = (time.monotonic(), self.rig.now())
        while True:
            self.pump()
            now_tick = self.rig.now()
            if now_tick >= tick:
                return
            if progress:
                progress(now_tick)
            if now_tick != last_progress[1]:
                last_progress = (time.monotonic(), now_tick)
            elif time.monotonic() - last_progress[0] > idle_timeout:
                raise CalibrationError("the rig's clock does not advance")
            end = time.monotonic() + poll
            while time.monotonic() < end:
                self.pump()

    def finish(self):
        """Disable capture, read what is still on its way, then the counters."""
        self.configure({})
        self.drain()
        self.status = self.rig.status()
        self.pump()

    def lost(self):
        dropped = sum(self.status.dropped) if self.status else 0
        return dropped + len(self.overflows)


def role_channel(ident, role):
    """The first channel of this rig whose default role is ``role`` (its IDENTIFY table)."""
    for number, (_name, channel_role) in enumerate(ident.channels):
        if channel_role == role:
            return number
    table = ", ".join(f"{n} {name} ({r or '-'})" for n, (name, r) in enumerate(ident.channels))
    raise CalibrationError(f"this rig has no channel with the role '{role}' ({table}): name the channel")


def _check_input(ident, channel, what):
    first, last = ident.n_stimulus, ident.n_stimulus + ident.n_inputs - 1
    if not first <= channel <= last:
        raise CalibrationError(f"{what}: channel {channel} is not a capture input of this rig (inputs are "
                               f"channels {first}..{last})")


def run_loopback(rig, ident, count, period, jitter, width, stimulus_channel, loopback_channel, seed=1,
                 progress=None):
    """Pulse ``count`` times (dithered) and collect every edge; returns a LoopbackResult."""
    if not 0 <= stimulus_channel < ident.n_stimulus:
        raise CalibrationError(f"stimulus channel {stimulus_channel} does not exist (0..{ident.n_stimulus - 1})")
    _check_input(ident, loopback_channel, "loopback")
    if not 1 <= width < period - jitter:
        raise CalibrationError(f"pulse width {width} ticks must be shorter than the shortest interval "
                               f"({period - jitter} ticks)")
    listener = Listener(rig, ident)
    both = p.CAPTURE_ENABLE | p.CAPTURE_RISE | p.CAPTURE_FALL
    listener.configure({stimulus_channel: both, loopback_channel: both})
    rig.command(p.StimConfig(channel=stimulus_channel, mode=p.MODE_DITHER, invert=0, width=width, period=period,
                             jitter=jitter, probability=0, burst_count=1, burst_spacing=10, count=count,
                             seed=seed))
    from hilat.capture import start_margin

    start = rig.now() + start_margin(ident)
    rig.command(p.Start(channels=1 << stimulus_channel, at_time=1, start=start))
    try:
        last_stim = _pulse_until_done(rig, listener, stimulus_channel, count, progress)
        # The copy of the last pulse may still be on its way: wait out one more interval.
        listener.until_tick((last_stim or start) + period + jitter + 64)
    finally:
        rig.command(p.Stop(channels=1 << stimulus_channel))
        listener.finish()
    if listener.lost():
        raise CalibrationError(f"the rig lost {listener.lost()} edges (FIFO full) during the loopback run: "
                               "lengthen --period and run again")
    return loopback_delays(listener.records, stimulus_channel, loopback_channel)


def _pulse_until_done(rig, listener, stimulus_channel, count, progress, idle_timeout=10.0):
    """Collect until ``count`` stimulus rises arrived, or the rig says its stimulus is done (then edges
    were lost, which the caller finds counted). Returns the tick of the last stimulus rise."""
    seen, last_stim, scanned = 0, None, 0
    last_check = last_data = time.monotonic()
    done = False
    while seen < count and not done:
        if listener.pump():
            last_data = time.monotonic()
        now = time.monotonic()
        if now - last_check >= 1.0:
            last_check = now
            listener.status = rig.status()
            stim = listener.status.stim_status
            if stim and stim[stimulus_channel] & p.STIM_DONE:
                listener.pump()
                done = True
        for tick, mask, levels in listener.records[scanned:]:
            if mask >> stimulus_channel & levels >> stimulus_channel & 1:
                seen += 1
                last_stim = tick
        scanned = len(listener.records)
        if progress:
            progress(seen, count)
        if now - last_data > idle_timeout:
            raise CalibrationError(f"the rig sent nothing for {idle_timeout:g} s")
    return last_stim


def run_pps(rig, ident, channel, duration_ticks, progress=None):
    """Collect rising edges on ``channel`` for ``duration_ticks``; returns their ticks."""
    _check_input(ident, channel, "1PPS")
    listener = Listener(rig, ident)
    listener.configure({channel: p.CAPTURE_ENABLE | p.CAPTURE_RISE})
    start = rig.now()
    try:
        listener.until_tick(start + duration_ticks,
                            progress=(lambda t: progress(t - start, duration_ticks)) if progress else None)
    finally:
        listener.finish()
    if listener.lost():
        raise CalibrationError(f"the rig lost {listener.lost()} edges (FIFO full) on the 1PPS input: is it "
                               "a 1PPS signal, or does it bounce? (try a glitch filter)")
    ticks, chans, levels = analysis.edges_from_records(listener.records)
    sel = (chans == channel) & (levels == 1)
    return ticks[sel].astype(np.int64)


# ---- applying a calibration -----------------------------------------------------------------------

def _age_days(made, now):
    try:
        then = datetime.fromisoformat(made)
    except (TypeError, ValueError):
        return None
    return (now - then).total_seconds() / 86400


def _age_text(days):
    if days is None:
        return "age unknown"
    if days < 1 / 24:
        return f"{days * 1440:.0f} min old"
    if days < 2:
        return f"{days * 24:.1f} h old"
    return f"{days:.0f} days old"


def _fmt_ns(ns):
    return f"{ns:.6g} ns"


def applied(identity, calibration=None, exact=True, reason=None, now=None, stale_days=STALE_DAYS):
    """What a capture records as ``meta["calibration"]`` and applies: offset_ticks, ts_hz, warnings and
    the resolution statement. ``calibration`` is a stored calibration (or None: uncalibrated)."""
    now = now or _utcnow()
    nominal = float(identity["ts_hz"])
    tick_ns = 1e9 / nominal
    warnings = []
    loop = (calibration or {}).get("loopback")
    clock = (calibration or {}).get("clock")
    if calibration is not None and not exact:
        other = calibration.get("rig_identity") or {}
        warnings.append(f"calibration made on another rig identity (gateware '{other.get('gateware')}', "
                        f"{other.get('ts_hz')} Hz); this rig is '{identity['gateware']}': recalibrate "
                        "(hilat calibrate loopback / clock)")
    ages = {}
    for name, part in (("loopback", loop), ("clock", clock)):
        if part:
            ages[name] = _age_days(part.get("made"), now)
            if ages[name] is not None and ages[name] > stale_days:
                warnings.append(f"{name} calibration is stale: made {part.get('made')}, {ages[name]:.0f} days ago "
                                f"(> {stale_days:g} days): run hilat calibrate {name}")
    offset = int(loop["offset_ticks"]) if loop else 0
    ppm = float(clock["ppm"]) if clock else 0.0
    ts_hz = nominal * (1 + ppm * 1e-6)
    lines = [f"timebase: {nominal / 1e6:g} MHz nominal, 1 tick = {_fmt_ns(tick_ns)}; every edge is quantized "
             f"to 1 tick (a latency is +-1 tick)"]
    if clock:
        source = f"1PPS on channel {clock.get('channel')}" if clock["method"] == "pps" else "against the host clock"
        lines.append(f"clock: {ppm:+.4g} ppm +- {clock['uncertainty_ppm']:.2g} ppm ({clock['coverage']}, {source}, "
                     f"{clock.get('made')}, {_age_text(ages.get('clock'))}): ts = {ts_hz:.1f} Hz, "
                     f"1 tick = {_fmt_ns(1e9 / ts_hz)}")
    else:
        lines.append("clock: not calibrated: ticks are converted at the nominal frequency (its error is unknown; "
                     "run hilat calibrate clock)")
    if loop:
        lines.append(f"rig offset: {offset} ticks ({_fmt_ns(offset * 1e9 / ts_hz)}) subtracted from every "
                     f"stimulus->response latency (loopback STIM{loop.get('stimulus_channel')} -> channel "
                     f"{loop.get('capture_channel')}, {loop.get('made')}, {_age_text(ages.get('loopback'))})")
        lines.append(f"rig jitter (loopback): {loop['min_ticks']}..{loop['max_ticks']} ticks "
                     f"(peak-to-peak {loop['max_ticks'] - loop['min_ticks']} ticks, std {loop['std_ticks']:.3g} "
                     f"ticks, N = {loop['n']})")
    else:
        lines.append("rig offset: not calibrated: latencies include the rig's own stimulus->capture delay "
                     "(run hilat calibrate loopback)")
    if calibration is None and reason:
        lines.append(f"calibration: none applied ({reason})")
    elif calibration is not None:
        lines.append(f"calibration file: {calibration.get('file')}")
    lines += [f"WARNING: {w}" for w in warnings]
    identity_of = (calibration or {}).get("rig_identity")
    return {"applied": calibration is not None, "offset_ticks": offset, "ts_hz": ts_hz, "ts_hz_nominal": nominal,
            "ppm": ppm if clock else None, "rig_identity": identity_of, "file": (calibration or {}).get("file"),
            "loopback": loop, "clock": clock, "warnings": warnings, "statement": lines}


def for_rig(ident, directory, now=None, stale_days=STALE_DAYS, reason_if_none="no calibration directory given"):
    """The calibration a capture on this rig applies (see :func:`applied`), from ``directory``;
    ``directory`` None applies none, for ``reason_if_none``."""
    identity = rig_identity(ident)
    if directory is None:
        return applied(identity, None, reason=reason_if_none)
    try:
        cal, exact = Store(directory).find(identity)
    except CalibrationError as e:
        # A broken file must not stop a capture: it runs uncalibrated and says why.
        out = applied(identity, None, reason=str(e), now=now)
        out["warnings"].append(str(e))
        out["statement"].append(f"WARNING: {e}")
        return out
    if cal is None:
        return applied(identity, None, reason=f"none stored for this rig in {directory}", now=now)
    return applied(identity, cal, exact, now=now, stale_days=stale_days)
