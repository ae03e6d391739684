"""The rig's own offset and jitter, by loopback (``hilat calibrate loopback``).

A jumper from a stimulus output (STIM0) to a capture input (SPARE, channel 4). The delay from each
stimulus edge to its copy on the input is the rig's own stimulus->capture offset; its spread is the
rig's own jitter. The offset (the median delay, an integer number of ticks) is subtracted from every
stimulus->response latency. A rig that samples its inputs S > 1 times a tick (docs/subtick.md) gives
the delays in the units captures use: sub-ticks (7.25 ticks at S = 4), or 1/(64 S) tick with a
resolution calibration in force; the offset, a whole number of them, is stored in ticks.
"""

import logging
from dataclasses import dataclass

import numpy as np

from hilat import analysis
from hilat.calibration.listener import RecordCollector, check_input, end_collection
from hilat.calibration.resolution import subticks_for
from hilat.calibration.statement import placement_key
from hilat.calibration.store import CalibrationError, made_now
from hilat.link import protocol as p
from hilat.link.rig import RigError

log = logging.getLogger("hilat")


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
    rise_delays: np.ndarray        # per stimulus, ticks (sub-ticks when S > 1); -1: no edge on the loopback input
    fall_delays: np.ndarray
    unclaimed_edges: int           # loopback rises before the first stimulus or beyond the first per window
    units_per_tick: int = 1        # the delays are in 1/this tick (analysis.Subticks)
    samples_per_tick: int = 1      # of the rig's inputs
    positions: str = "nominal"     # where the sub-tick bins stand: "nominal", or "calibrated <made>"

    @property
    def missing(self):
        return int((self.rise_delays < 0).sum())

    def summary(self):
        found = self.rise_delays[self.rise_delays >= 0]
        rise = _stats(found)
        fall = _stats(self.fall_delays[self.fall_delays >= 0])
        return {"offset_ticks": rise.get("median_ticks"), "rise": rise, "fall": fall,
                "stimuli": int(self.stimuli), "missing": self.missing, "unclaimed_edges": int(self.unclaimed_edges)}


def loopback_delays(records, stimulus_channel, loopback_channel, active=1, subticks=None):
    """Pair each stimulus edge with the first edge of the same direction on the loopback input; in
    the units of ``subticks`` (``analysis.Subticks``: sub-ticks on a rig that samples its inputs more
    than once a tick; None: ticks)."""
    ticks, chans, levels = analysis.edges_from_records(records, subticks=subticks)
    ticks = ticks.astype(np.int64)
    order = np.argsort(ticks, kind="stable")
    ticks, chans, levels = ticks[order], chans[order], levels[order]

    def edges(ch, level):
        return ticks[(chans == ch) & (levels == level)]
    stim_rise, stim_fall = edges(stimulus_channel, active), edges(stimulus_channel, 1 - active)
    rise, unclaimed = _first_after(stim_rise, edges(loopback_channel, active))
    fall, _ = _first_after(stim_fall, edges(loopback_channel, 1 - active))
    subticks = subticks or analysis.Subticks()
    return LoopbackResult(len(stim_rise), rise, fall, unclaimed, subticks.units_per_tick, subticks.samples_per_tick)


def _positions(resolution):
    """How a calibration names the bin positions it used (statement.applied compares them)."""
    return f"calibrated {resolution['made']}" if resolution else "nominal"


def no_loopback_message(stimuli, stimulus_channel, loopback_channel):
    return (f"no edges on capture channel {loopback_channel} during {stimuli} stimulus pulses: the loopback "
            f"jumper is missing. Wire stimulus output STIM{stimulus_channel} to the SPARE capture input "
            f"(channel {loopback_channel}), see docs/wiring.md, and run again (or give the input you wired "
            "with --channel).")


def loopback_calibration(result, ts_hz, stimulus_channel, loopback_channel, stimulus, url, max_missing=0.01):
    """The stored loopback calibration, or CalibrationError for unusable data; edges no stimulus claimed
    are logged as a warning (and not used)."""
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
    if result.unclaimed_edges:
        log.warning("%d more edges on channel %d than stimulus pulses (ringing on the jumper, or another source "
                    "on that input?): not used", result.unclaimed_edges, loopback_channel)
    rise, fall = _in_ticks(s["rise"], result.units_per_tick), _in_ticks(s["fall"], result.units_per_tick)
    tick_ns = 1e9 / ts_hz
    return {
        "offset_ticks": rise["median_ticks"],
        "offset_ns": rise["median_ticks"] * tick_ns,
        "min_ticks": rise["min_ticks"], "max_ticks": rise["max_ticks"],
        "mean_ticks": rise["mean_ticks"], "std_ticks": rise["std_ticks"], "n": rise["n"],
        "histogram": rise["histogram"],
        # The delays are whole units of 1/units_per_tick tick (docs/subtick.md): sub-ticks at the nominal
        # bin positions, finer at calibrated ones.
        "samples_per_tick": result.samples_per_tick, "units_per_tick": result.units_per_tick,
        "subtick_positions": result.positions,
        "fall": {k: v for k, v in fall.items() if k != "histogram"},
        "stimuli": s["stimuli"], "missing": s["missing"], "unclaimed_edges": s["unclaimed_edges"],
        "stimulus_channel": stimulus_channel, "capture_channel": loopback_channel,
        "stimulus": stimulus, "url": url, "made": made_now(),
        "method": "median (lower median, an observed value) of the delays from each stimulus rising edge to "
                  "the first rising edge on the loopback input; spread = min/max/std of those delays",
    }


def _in_ticks(stats, units_per_tick):
    """Delay statistics in sub-ticks -> in ticks (unchanged, whole ticks, when S = 1)."""
    if units_per_tick == 1 or not stats.get("n"):
        return stats
    s = units_per_tick
    out = {k: (v / s if k.endswith("_ticks") else v) for k, v in stats.items()}
    out["histogram"] = {f"{int(k) / s:g}": n for k, n in stats["histogram"].items()}
    return out


def run_loopback(session, count, period, jitter, width, stimulus_channel, loopback_channel, seed=1,
                 progress=None, resolution=None, placement=None):
    """Pulse ``count`` times (dithered) and collect every edge; returns a LoopbackResult. On a rig that
    samples more than once a tick the delays are in sub-ticks, its bins at ``resolution``'s centres
    (the resolution calibration captures apply) or nominal; ``placement`` (``resolution.placement_for``,
    a TDC rig's) places the edges as captures do and overrides that."""

    ident = session.identity
    if not 0 <= stimulus_channel < ident.n_stimulus:
        raise CalibrationError(f"stimulus channel {stimulus_channel} does not exist (0..{ident.n_stimulus - 1})")
    check_input(ident, loopback_channel, "loopback")
    if not 1 <= width < period - jitter:
        raise CalibrationError(f"pulse width {width} ticks must be shorter than the shortest interval "
                               f"({period - jitter} ticks)")
    collector = RecordCollector(count_channel=stimulus_channel)
    both = p.CAPTURE_ENABLE | p.CAPTURE_RISE | p.CAPTURE_FALL
    session.configure_capture({stimulus_channel: both, loopback_channel: both})
    session.configure_stimulus(stimulus_channel, "dither", width=width, period=period, jitter=jitter, count=count,
                               seed=seed)
    start = session.start(1 << stimulus_channel)

    def finished(status):
        # The rig pulsed its count although fewer rises arrived: edges were lost (counted below).
        return bool(status.stim_status) and bool(status.stim_status[stimulus_channel] & p.STIM_DONE)

    try:
        try:
            session.collect(collector, lambda: collector.rises >= count, on_status=finished,
                            tick=(lambda: progress(collector.rises, count)) if progress else None)
        except RigError as e:
            raise CalibrationError(str(e)) from None
        # The copy of the last pulse may still be on its way: wait out one more interval.
        session.wait_clock((collector.last_rise or start) + period + jitter + 64, collector)
    finally:
        session.stop(1 << stimulus_channel)
        lost = end_collection(session, collector)
    if lost:
        raise CalibrationError(f"the rig lost {lost} edges (FIFO full) during the loopback run: "
                               "lengthen --period and run again")
    subticks = placement or subticks_for(ident.samples_per_tick, ident.n_stimulus, resolution)
    result = loopback_delays(collector.records, stimulus_channel, loopback_channel, subticks=subticks)
    if subticks.placement:   # a TDC rig's: which bins its inputs stood at
        result.positions = placement_key(subticks.placement)
    else:
        result.positions = _positions(resolution if subticks.calibrated else None)
    return result
