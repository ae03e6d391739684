"""The TDC's bins by code density (issue 35; docs/tdc.md, "Calibration and the model").

An input with a carry-chain TDC gives each edge a fine code: the number of the line's B taps the
edge reached before the sampling clock edge (hilat.calibration.tdc_line). Edges uncorrelated with the
rig's ts clock fall at every position of the tick alike, so the share of them with code c is code c's
width: the sub-tick code density (``resolution.bin_shares``) with B = 256 codes, zero-width codes
allowed (equal taps, and the codes beyond the tick of a line longer than a tick), and a higher code an
*earlier* edge.

What it gives (``tdc_code_density``): each code's width and its binomial standard deviation, its
centre (where later captures place an edge of that code), the LSB (the mean width of the codes the
tick spans), DNL and INL in LSBs, the effective resolution, and how many edges a stated precision per
bin needs (``edges_for_precision``). ``predicted_beside`` sets a tap table's predicted bins beside the
measured ones; ``store_input`` keeps one result per input in the rig's calibration (part ``tdc``);
``online_update`` re-estimates the bins from a run's own uncorrelated edges.
"""

import math
from dataclasses import dataclass

import numpy as np

from hilat.calibration.resolution import TooFewEdges, bin_shares, effective_step, upper_edges
from hilat.calibration.tdc_line import bin_widths_ps

# The part of a rig's calibration file that holds the TDC inputs' bins.
PART = "tdc"


@dataclass(frozen=True)
class TdcResult:
    tick_s: float
    counts: np.ndarray             # edges with code 0 .. B-1
    widths_ticks: np.ndarray       # each code's width, in ticks (they add up to 1)
    width_sigma_ticks: np.ndarray  # one binomial standard deviation of each width
    centres_ticks: np.ndarray      # each code's centre, ticks after its tick's clock edge (higher code: earlier)
    codes_used: int                # the highest code seen + 1
    first_code: int = 0            # the lowest code seen (1 for the ones-count: code 0 is no edge)

    @property
    def n_codes(self):
        return len(self.counts)

    @property
    def edges(self):
        return int(self.counts.sum())

    @property
    def span(self):
        """The codes the tick spans: from the lowest to the highest code seen (zero-width ones among
        them included)."""
        return self.codes_used - self.first_code

    @property
    def lsb_s(self):
        """The mean width of the codes the tick spans: tick / span."""
        return self.tick_s / self.span

    @property
    def zero_width(self):
        """The codes inside the span that no edge took: zero-width bins (equal taps)."""
        return self.first_code + np.flatnonzero(self.counts[self.first_code:self.codes_used] == 0)

    @property
    def dnl(self):
        """Width / LSB - 1 for every code (-1 for the zero-width ones and those outside the span)."""
        return self.widths_ticks * self.span - 1

    @property
    def inl(self):
        """The end of each code in elapsed time (the widths of the codes up to c added) minus that of
        equal bins, c - first + 1 LSBs, in LSBs: 0 at the last code of the span by construction, 0
        outside the span."""
        inl = np.cumsum(self.widths_ticks) * self.span - (np.arange(self.n_codes) - self.first_code + 1)
        inl[:self.first_code] = 0
        inl[self.codes_used:] = 0
        return inl

    @property
    def effective_resolution_s(self):
        """The step of a uniform quantizer with the same error variance: sqrt(sum w^3 / T) (the LSB for
        equal bins)."""
        return effective_step(self.widths_ticks) * self.tick_s

    @property
    def quantization_rms_s(self):
        """The rms error of an edge placed at its code's centre: sqrt(sum w^3 / (12 T))."""
        return self.effective_resolution_s / math.sqrt(12)

    def edges_for_precision(self, sigma_s):
        """Edges this line's widest bin needs for a width sigma of ``sigma_s`` (every narrower bin then
        has less)."""
        return edges_for_precision(sigma_s, self.tick_s, float(self.widths_ticks.max()) * self.tick_s)

    def centres_of(self, codes):
        """Where a capture places edges of these codes: each at its code's centre, in ticks after its
        tick's clock edge."""
        return self.centres_ticks[np.asarray(codes, dtype=np.int64)]

    def as_dict(self):
        dnl, inl, first, used = self.dnl, self.inl, self.first_code, self.codes_used
        return dict(n_codes=self.n_codes, tick_s=self.tick_s, first_code=first, codes_used=used, span=self.span,
                    counts=self.counts.tolist(),
                    widths_ticks=self.widths_ticks.tolist(), width_sigma_ticks=self.width_sigma_ticks.tolist(),
                    centres_ticks=self.centres_ticks.tolist(), dnl=dnl.tolist(), inl=inl.tolist(),
                    lsb_s=self.lsb_s, edges=self.edges, zero_width=self.zero_width.tolist(),
                    dnl_range=[float(dnl[first:used].min()), float(dnl[first:used].max())],
                    inl_range=[float(inl[first:used].min()), float(inl[first:used].max())],
                    effective_resolution_s=self.effective_resolution_s,
                    quantization_rms_s=self.quantization_rms_s)

    @classmethod
    def from_dict(cls, d):
        """A stored result (``as_dict``) back."""
        return tdc_code_density(d["counts"], d["tick_s"], min_edges=0)


def tdc_code_density(counts, tick_s, min_edges=1000):
    """The bins from ``counts`` (edges per code 0 .. B-1) of edges uncorrelated with ts."""
    if int(np.sum(counts)) == 0:
        raise TooFewEdges("0 edges; a bin-width estimate needs some")
    counts, widths, sigma = bin_shares(counts, min_edges)
    seen = np.flatnonzero(counts)
    centres = upper_edges(widths, later_codes_higher=False) - widths / 2
    return TdcResult(float(tick_s), counts, widths, sigma, centres, int(seen[-1]) + 1, int(seen[0]))


def code_counts(codes, n_codes):
    """Counts of each code among ``codes`` (an array of 0 .. n_codes-1), in one pass."""
    codes = np.asarray(codes, dtype=np.int64)
    if len(codes) and (codes.min() < 0 or codes.max() >= n_codes):
        raise ValueError(f"codes must be 0 .. {n_codes - 1}")
    return np.bincount(codes, minlength=n_codes)


def edges_for_precision(sigma_s, tick_s, width_s):
    """The edges a bin ``width_s`` wide needs for its width's binomial standard deviation
    sqrt(p (1 - p) / N) tick, p = width / tick, to be at most ``sigma_s``: N = p (1 - p) (T / sigma)^2.
    (Relative precision r of that bin: sigma_s = r * width_s.)"""
    p = width_s / tick_s
    if not 0 <= p <= 1 or not sigma_s > 0:
        raise ValueError("need 0 <= width <= tick and sigma > 0")
    return int(math.ceil(p * (1 - p) * (tick_s / sigma_s) ** 2))


def predicted_beside(result, table):
    """The tap table's predicted bins beside the measured ones: per code the predicted width (ticks),
    the difference in the measurement's standard deviations, and the summary figures."""
    if table.n_taps != result.n_codes:
        raise ValueError(f"the tap table has {table.n_taps} taps, the calibration {result.n_codes} codes")
    tick_s = table.tick_ps * 1e-12
    if not math.isclose(tick_s, result.tick_s, rel_tol=1e-6):
        raise ValueError(f"the tap table's tick ({table.tick_ps} ps) is not the calibration's "
                         f"({result.tick_s * 1e12:g} ps)")
    predicted = bin_widths_ps(table) / table.tick_ps
    diff = result.widths_ticks - predicted
    # The measured width's sigma from the predicted share (a predicted-zero bin measured empty: z = 0).
    sigma = np.sqrt(predicted * (1 - predicted) / max(result.edges, 1))
    z = np.divide(diff, sigma, out=np.where(diff == 0, 0.0, np.inf), where=sigma > 0)
    seen = np.flatnonzero(predicted)
    return dict(source=table.source, widths_ticks=predicted.tolist(), z=z.tolist(),
                lsb_s=tick_s / (seen[-1] + 1 - seen[0]), first_code=int(seen[0]), codes_used=int(seen[-1]) + 1,
                effective_resolution_s=effective_step(predicted) * tick_s,
                rms_difference_s=float(np.sqrt(np.mean(diff ** 2))) * tick_s,
                max_abs_z=float(np.max(np.abs(z))))


def tdc_calibration(codes, tick_s, n_codes, channel, made, table=None, min_edges=1000, precision_s=None,
                    counts=None):
    """The stored calibration of one input from its edges' fine codes (or their ``counts`` per code;
    ``made``: when, ISO 8601; the tap table, if given, for the predicted bins beside the measured ones
    and for ``anchor_ps``, where the lowest code starts in elapsed time: the table's first tap, else 0).
    With ``precision_s``, the widest bin's width sigma must be at most that: fewer edges raise
    TooFewEdges saying how many it needs."""
    counts = code_counts(codes, n_codes) if counts is None else np.asarray(counts, dtype=np.int64)
    result = tdc_code_density(counts, tick_s, min_edges=min_edges)
    worst = float(result.width_sigma_ticks.max()) * result.tick_s
    if precision_s is not None:
        if worst > precision_s:
            needed = result.edges_for_precision(precision_s)
            widest_ps = result.widths_ticks.max() * tick_s * 1e12
            raise TooFewEdges(f"{result.edges} edges give the widest bin ({widest_ps:.3g} ps) a width sigma of "
                              f"{worst * 1e12:.3g} ps; {precision_s * 1e12:.3g} ps needs {needed} edges: collect more")
    out = result.as_dict()
    out.update(width_sigma_max_s=worst, precision_s=precision_s,
               edges_needed=result.edges_for_precision(precision_s) if precision_s else None)
    out.update(channel=int(channel), made=made, anchor_ps=float(table.taps_ps.min()) if table is not None else 0.0,
               method="code density: edges uncorrelated with ts take each TDC code in proportion to its width; "
                      "width = share of the edges, sigma = sqrt(p (1 - p) / N); a higher code is an earlier "
                      "edge; later captures place an edge at its code's centre")
    out["predicted"] = predicted_beside(result, table) if table is not None else None
    return out


def store_input(part, result):
    """The rig's ``tdc`` calibration part with one input's result (``tdc_calibration``) set, the other
    inputs kept: {"inputs": {"<channel>": result}, "made": this result's}."""
    inputs = dict((part or {}).get("inputs") or {})
    inputs[str(int(result["channel"]))] = result
    return {"inputs": inputs, "made": result["made"]}


# ---- online: re-estimating the bins from a run's own edges ---------------------------------------------

class Correlated(ValueError):
    """The edges' codes do not fit edges uncorrelated with ts (the source is locked to the rig's clock)."""


def consistency(stored, counts):
    """Whether ``counts`` and the ``stored`` calibration's counts (a TdcResult) can be the same bins:
    the two-sample chi-square of homogeneity over the codes either saw, sum (a/Na - b/Nb)^2 /
    ((a + b) / (Na Nb)), as (chi2, degrees of freedom, z = (chi2 - dof) / sqrt(2 dof))."""
    a = stored.counts.astype(np.float64)
    b = np.asarray(counts, dtype=np.float64)
    na, nb = a.sum(), b.sum()
    seen = (a + b) > 0
    chi2 = float(np.sum((a[seen] / na - b[seen] / nb) ** 2 / ((a[seen] + b[seen]) / (na * nb))))
    dof = max(int(seen.sum()) - 1, 1)
    return chi2, dof, (chi2 - dof) / math.sqrt(2 * dof)


def online_update(stored, codes=None, min_edges=100_000, max_z=6.0, counts=None):
    """The online mode: the bins re-estimated from a run's own edges uncorrelated with ts (``codes``:
    their fine codes), pooled with the ``stored`` calibration's counts (a TdcResult). Returns
    (TdcResult, how: "pooled" or "too few"): with fewer than ``min_edges`` edges the stored bins stand.
    Edges whose codes do not fit the stored bins (chi-square z above ``max_z``: the run's edges are
    locked to the rig's clock, or the line changed beyond the statistics) raise Correlated, and nothing
    is pooled. ``counts`` (per code) instead of ``codes``: a run's counts kept as it went."""
    counts = code_counts(codes, stored.n_codes) if counts is None else np.asarray(counts, dtype=np.int64)
    if counts.sum() < min_edges:
        return stored, "too few"
    chi2, dof, z = consistency(stored, counts)
    if z > max_z:
        raise Correlated(f"{int(counts.sum())} edges do not fit the stored bins (chi-square {chi2:.0f} for {dof} "
                         f"degrees of freedom, z = {z:.1f}): not uncorrelated with ts, or the line changed "
                         "(temperature, a rebuild): recalibrate (hilat calibrate resolution)")
    return tdc_code_density(stored.counts + counts, stored.tick_s, min_edges=0), "pooled"
