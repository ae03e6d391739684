"""The rig's clock error in ppm (``hilat calibrate clock``), against the host or a 1PPS.

- **against the host** (``--against host``): the rig's ``ts`` counter read by TIME_REQ round trips
  against ``time.monotonic`` over a duration. Each reading was latched at an unknown instant inside its
  round trip, so the ratio is bounded by +-(rtt_a + rtt_b)/2 over the duration: a hard bound that
  shrinks with the duration.
- **against a 1PPS** (``--against pps``): rising edges of a GPS 1PPS on a capture input, numbered, with
  missing and extra pulses named and excluded, then a least-squares line of tick against pulse number;
  the uncertainty comes from the fit residuals.
"""

import logging
import math
import time
from dataclasses import dataclass

import numpy as np

from hilat import analysis
from hilat.calibration.listener import RecordCollector, check_input, end_collection
from hilat.calibration.store import CalibrationError, made_now
from hilat.link import protocol as p
from hilat.link.rig import RigError

log = logging.getLogger("hilat")

# No crystal oscillator is off by this much; a larger estimate means a wrong ts_hz or a simulator.
PLAUSIBLE_PPM = 1000.0


class ImplausibleClock(CalibrationError):
    """An estimate no real oscillator could produce. ``result`` holds the numbers."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


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
        "made": made_now(),
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
        "url": url, "made": made_now(),
    }
    if abs(result.ppm) > PLAUSIBLE_PPM:
        raise ImplausibleClock(f"the 1PPS intervals say the rig's clock is off by {result.ppm:+.6g} ppm: no crystal "
                               f"is that far off. Is --pps-period ({period_s:g} s) right, and ts_hz ({ts_hz} Hz)? "
                               "Nothing stored.", out)
    return out


def run_pps(session, channel, duration_ticks, progress=None):
    """Collect rising edges on ``channel`` for ``duration_ticks``; returns their ticks."""
    check_input(session.identity, channel, "1PPS")
    collector = RecordCollector()
    session.configure_capture({channel: p.CAPTURE_ENABLE | p.CAPTURE_RISE})
    start = session.now()
    try:
        try:
            session.wait_clock(start + duration_ticks, collector, timeout=10.0, poll_s=0.25,
                               tick=(lambda: progress(session.last_now - start, duration_ticks)) if progress else None)
        except RigError as e:
            raise CalibrationError(str(e)) from None
    finally:
        lost = end_collection(session, collector)
    if lost:
        raise CalibrationError(f"the rig lost {lost} edges (FIFO full) on the 1PPS input: is it "
                               "a 1PPS signal, or does it bounce? (try a glitch filter)")
    ticks, chans, levels = analysis.edges_from_records(collector.records)
    sel = (chans == channel) & (levels == 1)
    return ticks[sel].astype(np.int64)

