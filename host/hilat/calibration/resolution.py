"""Sub-tick bins by code density: the width of each of a tick's S sample bins (docs/subtick.md,
"Calibrating the bins").

Edges that arrive uncorrelated with the rig's ``ts`` clock are spread evenly over the tick, so the
share of them recorded with fraction k is the width of bin k: the count estimates it with the
multinomial standard deviation ``sqrt(p (1 - p) / N)`` ticks. Sources a user can use: the DUT's own
free-running toggles (a timer output, a UART line), a second oscillator, or a jumper from an output
driven from a clock unrelated to the rig's.

``hilat calibrate resolution`` (``run_resolution``, ``resolution_calibration``) collects the edges on
one input and stores the bins per rig identity; later captures of that rig place each input edge at
its bin's measured centre (``subticks_for``, ``analysis.Subticks``).

Bin k holds the edges between sample k - 1 and sample k; the tick's last sample is at its next clock
edge (the instant a one-sample rig takes), so bin k's upper edge is ``1 - sum(widths[k + 1:])``
ticks after the tick's clock edge. What is left for the loopback calibration is where that last
sample is, a constant of the rig's input path.
"""

from dataclasses import dataclass

import numpy as np

from hilat.analysis import Subticks
from hilat.calibration.listener import RecordCollector, check_input, end_collection
from hilat.calibration.store import CalibrationError, made_now
from hilat.link.protocol import CAPTURE_ENABLE, CAPTURE_FALL, CAPTURE_RISE
from hilat.link.rig import RigError


class TooFewEdges(ValueError):
    """Not enough edges for a bin-width estimate."""


@dataclass(frozen=True)
class ResolutionResult:
    samples_per_tick: int
    tick_s: float
    counts: tuple                  # edges recorded with fraction 0 .. S-1
    widths_ticks: tuple            # each bin's width, in ticks (they add up to 1)
    width_sigma_ticks: tuple       # one standard deviation of each width
    centres_ticks: tuple           # each bin's centre, in ticks after the tick's clock edge
    dnl: tuple                     # width / nominal width - 1
    inl: tuple                     # upper edge - nominal upper edge, in nominal bins

    @property
    def edges(self):
        return int(sum(self.counts))

    @property
    def effective_resolution_s(self):
        """The step of a uniform quantizer with the same error variance (an edge reported at its bin's
        centre): sqrt(sum of width**3) ticks; 1/S of a tick when the bins are equal."""
        return effective_step(self.widths_ticks) * self.tick_s

    @property
    def nominal_s(self):
        return self.tick_s / self.samples_per_tick

    def as_dict(self):
        return dict(samples_per_tick=self.samples_per_tick, tick_s=self.tick_s, counts=list(self.counts),
                    widths_ticks=list(self.widths_ticks), width_sigma_ticks=list(self.width_sigma_ticks),
                    centres_ticks=list(self.centres_ticks), dnl=list(self.dnl), inl=list(self.inl),
                    effective_resolution_s=self.effective_resolution_s)


def fraction_counts(fractions, samples_per_tick):
    """Counts of each fraction value among the edges' ``fractions`` (an array of 0 .. S-1)."""
    fractions = np.asarray(fractions, dtype=np.int64)
    if len(fractions) and (fractions.min() < 0 or fractions.max() >= samples_per_tick):
        raise ValueError(f"fractions must be 0 .. {samples_per_tick - 1}")
    return np.bincount(fractions, minlength=samples_per_tick)


def bin_shares(counts, min_edges=1000):
    """Code density's core, for the sub-tick bins and the TDC's codes alike (hilat.calibration.tdc):
    from ``counts`` (edges per code, of edges uncorrelated with ts), each code's width in ticks (its
    share of the edges) and that width's binomial standard deviation sqrt(p (1 - p) / N). Returns
    (counts, widths, sigmas) as arrays."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 1 or len(counts) < 2 or (len(counts) and counts.min() < 0):
        raise ValueError("counts: one non-negative count per code, at least 2 codes")
    n = int(counts.sum())
    if n < min_edges:
        raise TooFewEdges(f"{n} edges; a bin-width estimate needs at least {min_edges}")
    widths = counts / n
    return counts, widths, np.sqrt(widths * (1 - widths) / n)


def upper_edges(widths, later_codes_higher=True):
    """Each code's latest position, in ticks after its tick's clock edge (the last sample, or the
    samplers of a TDC, at the next clock edge, 1 tick). Sub-ticks: a higher fraction is a later edge, so
    code k's upper edge is 1 - sum(widths[k + 1:]); a TDC's ones-count is the number of taps the edge
    reached before the clock edge, a higher code an earlier edge: code c's upper edge is
    1 - sum(widths[:c])."""
    widths = np.asarray(widths, dtype=np.float64)
    if later_codes_higher:
        return 1 - (np.cumsum(widths[::-1])[::-1] - widths)
    return 1 - (np.cumsum(widths) - widths)


def effective_step(widths):
    """The step of a uniform quantizer with the same error variance as bins of these ``widths`` (ticks,
    adding up to 1; an edge reported at its bin's centre): sqrt(sum of width**3). The rms error of such
    an edge is this / sqrt(12)."""
    return float(np.sqrt(np.sum(np.asarray(widths, dtype=np.float64) ** 3)))


def code_density(counts, tick_s, min_edges=1000):
    """The bins from ``counts`` (edges per fraction, len = samples per tick) of edges uncorrelated
    with ts."""
    S = len(counts)
    if S not in (2, 4, 8):
        raise ValueError(f"{S} bins: sub-tick sampling has 2, 4 or 8 samples a tick")
    counts, widths, sigma = bin_shares(counts, min_edges)
    upper = upper_edges(widths)
    centres = upper - widths / 2
    nominal_upper = np.arange(1, S + 1) / S
    return ResolutionResult(
        samples_per_tick=S, tick_s=float(tick_s), counts=tuple(int(c) for c in counts),
        widths_ticks=tuple(widths.tolist()), width_sigma_ticks=tuple(sigma.tolist()),
        centres_ticks=tuple(centres.tolist()), dnl=tuple((widths * S - 1).tolist()),
        inl=tuple(((upper - nominal_upper) * S).tolist()))


def subticks_for(samples_per_tick, first_input, resolution=None):
    """Where a capture puts input edges (``analysis.Subticks``): at the centres of a resolution
    calibration (``resolution``, the stored part) made at this rig's samples per tick, else at the
    nominal bins' lower ends."""
    samples_per_tick = int(samples_per_tick or 1)
    if resolution and int(resolution.get("samples_per_tick") or 0) == samples_per_tick > 1:
        return Subticks.from_centres(resolution["centres_ticks"], first_input)
    return Subticks.nominal(samples_per_tick, first_input)


# ---- hilat calibrate resolution ----------------------------------------------------------------

# A bin that gets less than this share of its nominal width's edges means the source is not
# uncorrelated with ts (a rig's own stimulus, a DUT clocked from the same oscillator).
CORRELATED_SHARE = 0.1


def input_fractions(records, channel, ident):
    """The sub-tick positions (0 .. S-1) of every edge on input ``channel`` among ``records``
    (ticks, channel masks, levels, fractions arrays)."""
    _ticks, masks, _levels, fractions = records
    on_channel = ((np.asarray(masks, dtype=np.int64) >> channel) & 1).astype(bool)
    subticks = Subticks.nominal(ident.samples_per_tick, ident.n_stimulus)
    return subticks.sample_index(np.full(int(on_channel.sum()), channel),
                                 np.asarray(fractions)[on_channel]).astype(np.int64)


def run_resolution(session, channel, edges, idle_timeout=10.0, progress=None):
    """Collect ``edges`` edges (both directions) on input ``channel``; returns their positions (0 .. S-1),
    or on a TDC rig the records (``tdc_rig.run_tdc_resolution`` takes their codes)."""

    ident = session.identity
    tdc = bool(ident.tdc_inputs)
    if ident.samples_per_tick == 1 and not tdc:
        raise CalibrationError("this rig samples each input once a tick: it has no sub-tick bins to calibrate "
                               "(a build with --samples-per-tick 2 or 4 has, or one with --tdc)")
    check_input(ident, channel, "resolution source")
    collector = RecordCollector()
    session.configure_capture({channel: CAPTURE_ENABLE | CAPTURE_RISE | CAPTURE_FALL})

    def received():
        return sum(len(part[0]) for part in collector.parts)

    try:
        try:
            session.collect(collector, lambda: received() >= edges, idle_timeout=idle_timeout,
                            tick=(lambda: progress(received(), edges)) if progress else None)
        except RigError as e:
            raise CalibrationError(f"{e}: no edges on channel {channel}? Wire a source unrelated to the rig's "
                                   "clock to it (see hilat calibrate resolution --help)") from None
    finally:
        lost = end_collection(session, collector)
    if lost:
        raise CalibrationError(f"the rig lost {lost} edges (FIFO full) on channel {channel}: the source toggles "
                               "too fast for the link; slow it down (or divide it)")
    if tdc:
        return collector.records
    return input_fractions(collector.records, channel, ident)


def resolution_calibration(fractions, ident, ts_hz, channel, url, min_edges=1000):
    """The stored resolution calibration from the edges' positions, or CalibrationError."""

    S = ident.samples_per_tick
    counts = fraction_counts(fractions, S)
    try:
        result = code_density(counts, 1.0 / ts_hz, min_edges=min_edges)
    except TooFewEdges as e:
        raise CalibrationError(f"{e}: collect more (--edges)") from None
    starved = [k for k, c in enumerate(counts) if c < CORRELATED_SHARE * counts.sum() / S]
    if starved:
        raise CalibrationError(
            f"bins {starved} got {[int(counts[k]) for k in starved]} of {int(counts.sum())} edges: the source is "
            "locked to the rig's clock (its own stimulus, or a DUT clocked from the same oscillator); use one "
            "unrelated to it: a free-running DUT timer or UART line, a second oscillator")
    out = result.as_dict()
    out.update(channel=channel, url=url, made=made_now(), edges=result.edges,
               nominal_s=result.nominal_s,
               method="code density: edges uncorrelated with ts fall in each sub-tick bin in proportion to its "
                      "width; width = share of the edges, sigma = sqrt(p (1 - p) / N); later captures place an "
                      "input edge at its bin's centre")
    return out
