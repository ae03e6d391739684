"""Sub-tick bins by code density: the width of each of a tick's S sample bins (docs/subtick.md,
"Calibrating the bins").

Edges that arrive uncorrelated with the rig's ``ts`` clock are spread evenly over the tick, so the
share of them recorded with fraction k is the width of bin k: the count estimates it with the
multinomial standard deviation ``sqrt(p (1 - p) / N)`` ticks. Sources a user can use: the DUT's own
free-running toggles (a timer output, a UART line), a second oscillator, or a jumper from an output
driven from a clock unrelated to the rig's.

Bin k holds the edges between sample k - 1 and sample k; the tick's last sample is at its next clock
edge (the instant a one-sample rig takes), so bin k's upper edge is ``1 - sum(widths[k + 1:])``
ticks after the tick's clock edge. What is left for the loopback calibration is where that last
sample is, a constant of the rig's input path.
"""

from dataclasses import dataclass

import numpy as np


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
        return float(np.sqrt(np.sum(np.asarray(self.widths_ticks) ** 3))) * self.tick_s

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


def code_density(counts, tick_s, min_edges=1000):
    """The bins from ``counts`` (edges per fraction, len = samples per tick) of edges uncorrelated
    with ts."""
    counts = np.asarray(counts, dtype=np.int64)
    S = len(counts)
    if S not in (2, 4, 8):
        raise ValueError(f"{S} bins: sub-tick sampling has 2, 4 or 8 samples a tick")
    n = int(counts.sum())
    if n < min_edges:
        raise TooFewEdges(f"{n} edges; a bin-width estimate needs at least {min_edges}")
    widths = counts / n
    sigma = np.sqrt(widths * (1 - widths) / n)
    upper = 1 - (np.cumsum(widths[::-1])[::-1] - widths)    # 1 - sum(widths[k + 1:])
    centres = upper - widths / 2
    nominal_upper = np.arange(1, S + 1) / S
    return ResolutionResult(
        samples_per_tick=S, tick_s=float(tick_s), counts=tuple(int(c) for c in counts),
        widths_ticks=tuple(widths.tolist()), width_sigma_ticks=tuple(sigma.tolist()),
        centres_ticks=tuple(centres.tolist()), dnl=tuple((widths * S - 1).tolist()),
        inl=tuple(((upper - nominal_upper) * S).tolist()))
