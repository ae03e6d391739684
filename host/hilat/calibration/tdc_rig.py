"""The TDC on the rig (issue 35; docs/tdc.md, "Calibration in the capture path"): where a capture
places its edges (``placement_for``), and ``hilat calibrate resolution`` on a TDC input: the codes of
an unrelated source's edges (``run_tdc_resolution``), code density with the predicted bins beside it
(``tdc_resolution_calibration``), stored per rig identity and per input (``store_tdc_input``)."""

import numpy as np

from hilat.calibration import tdc, tdc_placement
from hilat.calibration.resolution import TooFewEdges, run_resolution, subticks_for
from hilat.calibration.store import CalibrationError, Store, made_now, rig_identity
from hilat.calibration.tdc_line import bin_widths_ps


def placement_for(ident, in_force=None, online=None):
    """Where a capture on this rig (IDENTIFY) places its edges with the calibration ``in_force``
    (``statement.applied``): a TDC rig's ``analysis.TdcSubticks`` (its inputs' measured bins, else the
    tap table's predicted ones; ``online``: bins re-estimated from a run, docs/tdc.md), else
    ``subticks_for``'s ``analysis.Subticks``."""
    identity = rig_identity(ident)
    if identity["tdc_inputs"]:
        table, why = tdc_placement.predicted_table(identity)
        return tdc_placement.tdc_subticks(identity, (in_force or {}).get("tdc"), table, why, online)[0]
    return subticks_for(ident.samples_per_tick, ident.n_stimulus, (in_force or {}).get("resolution"))

# ---- hilat calibrate resolution on a TDC input ---------------------------------------------------------

# The edges a TDC calibration collects unless told: the widest predicted bin (66 ps of a 7.14 ns
# tick) then has a width sigma of 2.2 ps, its centre one of at most 11 ps.
TDC_DEFAULT_EDGES = 100_000
# An unrelated source takes every code of the tick; one locked to ts a handful. Fewer distinct codes
# than this share of the predicted span (or of the line's codes, with no table) refuses the result.
TDC_CORRELATED_SPAN = 0.5


def check_tdc_input(ident, channel):
    first = ident.n_stimulus
    tdc_inputs = ident.tdc_inputs
    if not first <= channel < first + tdc_inputs:
        raise CalibrationError(f"channel {channel} has no TDC (this rig's TDC inputs are channels {first}.."
                               f"{first + tdc_inputs - 1}): move the source (the jumper) to one of them")


def run_tdc_resolution(session, channel, edges, progress=None):
    """Collect ``edges`` edges (both directions) on TDC input ``channel``; returns their codes."""
    check_tdc_input(session.identity, channel)
    return input_codes(run_resolution(session, channel, edges, progress=progress), channel, session.identity)


def input_codes(records, channel, ident):
    """The TDC codes (1 .. 255) of every edge on input ``channel`` among ``records`` (ticks, channel
    masks, levels, fractions arrays): 8 bits of the fraction from bit 8 (channel - first input)."""
    _ticks, masks, _levels, fractions = records
    on_channel = ((np.asarray(masks, dtype=np.int64) >> channel) & 1).astype(bool)
    shift = np.uint64(8 * (channel - ident.n_stimulus))
    codes = (np.asarray(fractions, dtype=np.uint64)[on_channel] >> shift) & np.uint64(0xFF)
    return codes.astype(np.int64)


def tdc_resolution_calibration(codes, ident, channel, url, table=None, precision_s=None, min_edges=1000,
                               counts=None):
    """The stored calibration of TDC input ``channel`` from its edges' codes (or their ``counts`` per
    code; ``tdc.tdc_calibration``), with the predicted ``table``'s bins beside it; or CalibrationError
    (too few edges for ``precision_s``, a source locked to ts). Edges of code 0 (not measured) are
    left out and counted (``unmeasured_edges``)."""
    n_codes = int(ident.tdc_taps or 256)
    try:
        if counts is None:
            counts = tdc.code_counts(codes, n_codes)
    except ValueError as e:
        raise CalibrationError(f"the TDC codes of channel {channel}: {e}") from None
    # Code 0 with an edge: a change the line did not measure (a pulse shorter than the line settles
    # in, docs/tdc.md): no place in the tick, so no part of the code density; counted and stated.
    counts = np.asarray(counts, dtype=np.int64).copy()
    unmeasured, counts[0] = int(counts[0]), 0
    try:
        result = tdc.tdc_calibration(None, 1.0 / ident.ts_hz, n_codes, channel, made_now(), table,
                                     min_edges=min_edges, precision_s=precision_s, counts=counts)
    except TooFewEdges as e:
        raise CalibrationError(f"{e}: collect more (--edges)") from None
    except ValueError as e:
        raise CalibrationError(f"the TDC codes of channel {channel}: {e}") from None
    expected = (table and result["predicted"]["codes_used"] - result["predicted"]["first_code"]) or n_codes
    seen = int(np.count_nonzero(result["counts"]))
    if seen < TDC_CORRELATED_SPAN * expected:
        raise CalibrationError(
            f"the {result['edges']} edges on channel {channel} took only {seen} distinct TDC codes (a tick spans "
            f"about {expected}): the source is locked to the rig's clock (its own stimulus, or a DUT clocked from "
            "the same oscillator); use one unrelated to it: a free-running DUT timer or UART line, a second "
            "oscillator")
    result.update(url=url, unmeasured_edges=unmeasured)
    return result


def store_tdc_input(ident, result, directory):
    """Store one TDC input's ``result`` in this rig's calibration (part ``tdc``), the other inputs' kept;
    ``directory`` None stores nothing. Returns (the rig identity, the file or None)."""
    identity = rig_identity(ident)
    if directory is None:
        return identity, None
    store = Store(directory)
    part = tdc.store_input((store.load(identity) or {}).get(tdc.PART), result)
    path, _previous = store.update(identity, tdc.PART, part)
    return identity, path


def _widest_predicted_s(table):
    return float(bin_widths_ps(table).max()) * 1e-12


def edges_for(table, precision_s):
    """The edges the widest predicted bin of ``table`` needs for a width sigma of ``precision_s``."""
    return tdc.edges_for_precision(precision_s, table.tick_ps * 1e-12, _widest_predicted_s(table))


def precision_text(table, edges, precision_s=None):
    """What ``edges`` edges give the widest predicted bin, and what ``precision_s`` needs."""
    tick_s, widest_s = table.tick_ps * 1e-12, _widest_predicted_s(table)
    p = widest_s / tick_s
    sigma_s = (p * (1 - p) / edges) ** 0.5 * tick_s
    text = (f"{edges} edges give the widest predicted bin ({widest_s * 1e12:.3g} ps) a width sigma of "
            f"{sigma_s * 1e12:.3g} ps")
    if precision_s is not None:
        text += f"; {precision_s * 1e12:.3g} ps needs {edges_for(table, precision_s)} edges"
    return text


# ---- the online mode: a run's own edges re-estimate the bins (docs/tdc.md, "Online mode") -------------

# Fewer edges on an input than this and its bins are not re-estimated (tdc.online_update's default).
ONLINE_MIN_EDGES = 100_000


class CodeCounts:
    """Per TDC input, how many of a run's edges took each code: what the online mode re-estimates
    from. Memory is 256 counts an input however long the run; one vectorised pass per input a chunk."""

    def __init__(self, first_input, tdc_inputs, n_codes=256):
        self.first_input = int(first_input)
        self.counts = np.zeros((int(tdc_inputs), n_codes), dtype=np.int64)

    def add(self, masks, fractions):
        masks = np.asarray(masks, dtype=np.int64)
        fractions = np.asarray(fractions, dtype=np.uint64)
        for i in range(len(self.counts)):
            on = ((masks >> (self.first_input + i)) & 1).astype(bool)
            codes = (fractions[on] >> np.uint64(8 * i)) & np.uint64(0xFF)
            self.counts[i] += np.bincount(codes.astype(np.intp), minlength=self.counts.shape[1])


def online_results(ident, in_force, counts, table=None, min_edges=ONLINE_MIN_EDGES):
    """The online re-estimate of every TDC input from a run's ``counts`` (a CodeCounts): per input a
    dict (channel, edges, how: "pooled" with its stored bins, "run alone" without any, "too few",
    "correlated"; why; result: the stored-form bins when re-estimated, else None)."""
    stored = ((in_force or {}).get("tdc") or {}).get("inputs") or {}
    out = []
    for i, run_counts in enumerate(counts.counts):
        channel = counts.first_input + i
        # Code 0: changes the line did not measure (docs/tdc.md): no part of the bins.
        run_counts = run_counts.copy()
        run_counts[0] = 0
        entry = {"channel": channel, "edges": int(run_counts.sum()), "how": "too few", "why": "", "result": None}
        out.append(entry)
        if entry["edges"] == 0:
            continue
        previous = stored.get(str(channel))
        try:
            if previous:
                result, how = tdc.online_update(tdc.TdcResult.from_dict(previous), counts=run_counts,
                                                min_edges=min_edges)
                pooled = result.counts
            elif entry["edges"] >= min_edges:
                pooled, how = run_counts, "run alone"
            else:
                how = "too few"
            if how == "too few":
                entry["why"] = f"{entry['edges']} edges, fewer than {min_edges}: the bins in force stand"
                continue
            result = tdc_resolution_calibration(None, ident, channel, "online", table, min_edges=0, counts=pooled)
        except (tdc.Correlated, CalibrationError) as e:
            entry.update(how="correlated", why=str(e))
            continue
        result["method"] = (f"online: {entry['edges']} edges of a run's own "
                            + (f"pooled with the calibration of {previous.get('made')}; " if previous else "; ")
                            + result["method"])
        entry.update(how=how, result=result, why=f"re-estimated from {int(pooled.sum())} edges")
    return out


def online_lines(entries, stored_in):
    """The run's statement lines for the online mode (``online_results``), stored in ``stored_in``."""
    lines = ["TDC online mode: this run's own edges re-estimate each TDC input's bins; this run's edges stand at "
             "the bins in force when it started, the re-estimate is "
             + (f"stored for later captures ({stored_in})" if stored_in else "not stored (no calibration directory)")]
    for e in entries:
        lines.append(f"TDC online channel {e['channel']}: {e['edges']} edges, {e['how']}"
                     + (f": {e['why']}" if e["why"] else ""))
    return lines
