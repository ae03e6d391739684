"""``scripts/board-tdc-check``: what a user with a board built with ``--tdc`` runs once (issue 35, item 5;
docs/tdc.md, "The board check").

1. **Code density** on the input the calibration jumper is on (an unrelated source: its edges fall
   at every phase of the tick): the input's 256 bins, stored for later captures (``hilat calibrate
   resolution``), with the tap table's predicted bins beside them.
2. **Single-shot precision**: one source split to two TDC inputs A and B. Each edge reaches both, so
   the difference of their placed times is the two inputs' constant skew plus both errors; with
   independent errors of equal size, one input's single-shot precision is ``sigma(difference) /
   sqrt(2)`` (``pair_precision``). A and B are placed at bins estimated by code density from the
   same edges (the split source is unrelated to ts too), so the check needs no other calibration.

It prints a table: each figure from the board beside the model's prediction (the tap table's bins:
quantization alone, no metastability, clock jitter or drift). Nothing here runs without a board:
the analysis (``pair_precision``, ``predicted_single_shot_ps``, ``check_table``) and the arguments
(``parse_args``) are tested on constructed data; the script itself (its ``main``) is
scripts/board-tdc-check.
"""

import argparse
import math

import numpy as np

from hilat.calibration import tdc_rig
from hilat.calibration.listener import RecordCollector, check_input, end_collection
from hilat.calibration.store import CalibrationError
from hilat.calibration.tdc_line import bin_widths_ps
from hilat.link.protocol import CAPTURE_ENABLE, CAPTURE_FALL, CAPTURE_RISE


def placed_ps(ticks, codes, centres_ps, tick_ps, origin_tick):
    """Edge times in ps after ``origin_tick``'s start: (t + 1) tick - T(c) (docs/tdc.md, the contract)."""
    t = np.asarray(ticks, dtype=np.int64) - int(origin_tick)
    return (t + 1) * float(tick_ps) - np.asarray(centres_ps, dtype=np.float64)[np.asarray(codes, dtype=np.intp)]


def pair_precision(ticks_a, codes_a, ticks_b, codes_b, centres_a_ps, centres_b_ps, tick_ps, max_skew_ps=None):
    """One edge split to inputs A and B: each A edge paired with B's nearest edge (within
    ``max_skew_ps``, default one tick); the differences B - A give the mean skew and their standard
    deviation, and one input's single-shot precision sigma / sqrt(2). ``centres_*_ps``: T(c) per code
    of each input. Returns a dict (ps); ValueError with fewer than 2 pairs."""
    ticks_a, ticks_b = np.asarray(ticks_a, dtype=np.int64), np.asarray(ticks_b, dtype=np.int64)
    if not len(ticks_a) or not len(ticks_b):
        raise ValueError("no edges on one of the two inputs: is the source wired to both?")
    origin = min(int(ticks_a.min()), int(ticks_b.min()))
    a = placed_ps(ticks_a, codes_a, centres_a_ps, tick_ps, origin)
    b = placed_ps(ticks_b, codes_b, centres_b_ps, tick_ps, origin)
    order = np.argsort(b, kind="stable")
    b = b[order]
    max_skew_ps = float(tick_ps) if max_skew_ps is None else float(max_skew_ps)
    right = np.clip(np.searchsorted(b, a), 0, len(b) - 1)
    left = np.clip(right - 1, 0, len(b) - 1)
    nearest = np.where(np.abs(b[left] - a) <= np.abs(b[right] - a), left, right)
    diff = b[nearest] - a
    paired = np.abs(diff) <= max_skew_ps
    # A B edge nearest to two A edges is one pair only: keep the first A edge that took it.
    taken = nearest[paired]
    unique = np.zeros(len(taken), dtype=bool)
    unique[np.unique(taken, return_index=True)[1]] = True
    diff = diff[paired][unique]
    if len(diff) < 2:
        raise ValueError(f"{len(diff)} edges of A have an edge of B within {max_skew_ps:g} ps: is one source split "
                         "to both inputs?")
    sigma = float(np.std(diff, ddof=1))
    return {"pairs": int(len(diff)), "unpaired_a": int(len(a) - len(diff)), "unpaired_b": int(len(b) - len(diff)),
            "skew_ps": float(np.mean(diff)), "sigma_difference_ps": sigma, "single_shot_ps": sigma / math.sqrt(2)}


def quantization_rms_ps(widths_ps, tick_ps):
    """The rms error of an edge placed at its bin's centre, bins of these widths: sqrt(sum w^3 / (12 T))."""
    w = np.asarray(widths_ps, dtype=np.float64)
    return math.sqrt(float(np.sum(w ** 3)) / (12 * float(tick_ps)))


def predicted_single_shot_ps(table_a, table_b=None):
    """The model's single-shot precision of one input (its line's quantization alone): the rms of
    the pair difference over sqrt(2), sqrt((qa^2 + qb^2) / 2) for two lines' tables."""
    qa = quantization_rms_ps(bin_widths_ps(table_a), table_a.tick_ps)
    qb = qa if table_b is None else quantization_rms_ps(bin_widths_ps(table_b), table_b.tick_ps)
    return math.sqrt((qa ** 2 + qb ** 2) / 2)


def _fmt(value, unit="ps"):
    return "-" if value is None else f"{value:.3g} {unit}"


def check_table(density, precision, table):
    """The board check's table: (figure, from the board, the model's prediction) rows as text.
    ``density``: the jumper input's stored result (``tdc.tdc_calibration``); ``precision``:
    ``pair_precision``'s dict and its inputs (``channels``); ``table``: the predicted tap table or None."""
    predicted = density.get("predicted") or {}
    rows = [("figure", "board (measured)", "model (predicted)")]
    rows.append((f"LSB, channel {density['channel']}", _fmt(density["lsb_s"] * 1e12),
                 _fmt(predicted["lsb_s"] * 1e12 if predicted else None)))
    rows.append(("bins over the tick (zero-width)", f"{density['span']} ({len(density['zero_width'])})",
                 f"{predicted['codes_used'] - predicted['first_code']}" if predicted else "-"))
    rows.append(("DNL", f"{density['dnl_range'][0]:+.2f}..{density['dnl_range'][1]:+.2f} LSB", "-"))
    rows.append(("INL", f"{density['inl_range'][0]:+.2f}..{density['inl_range'][1]:+.2f} LSB", "-"))
    rows.append(("effective resolution", _fmt(density["effective_resolution_s"] * 1e12),
                 _fmt(predicted["effective_resolution_s"] * 1e12 if predicted else None)))
    rows.append(("measured - predicted widths (rms)", _fmt(predicted.get("rms_difference_s", 0) * 1e12)
                 if predicted else "-", "-"))
    if precision:
        a, b = precision["channels"]
        rows.append((f"single-shot precision (sigma(B - A) / sqrt 2, channels {a}, {b})",
                     _fmt(precision["single_shot_ps"]),
                     _fmt(predicted_single_shot_ps(table) if table is not None else None)))
        rows.append(("skew B - A (mean)", _fmt(precision["skew_ps"]), "-"))
        rows.append(("pairs (unpaired A, B)", f"{precision['pairs']} ({precision['unpaired_a']}, "
                     f"{precision['unpaired_b']})", "-"))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(r[i].ljust(width[i]) for i in range(3)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in width))
    return "\n".join(lines)


# ---- the script --------------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog="board-tdc-check",
        description="On a board built with --tdc: the TDC's bins by code density from the calibration jumper, "
                    "then single-shot precision from one edge split to two inputs, beside the model's prediction "
                    "(docs/tdc.md, 'The board check').")
    ap.add_argument("url", help="the rig (/dev/ttyUSB0, socket://HOST:PORT, udp://HOST)")
    ap.add_argument("--jumper-input", default="spare", metavar="NAME",
                    help="the TDC input the calibration jumper (an unrelated source) is on (default: spare)")
    ap.add_argument("--pair", nargs=2, default=None, metavar=("A", "B"),
                    help="two TDC inputs one source is split to (default: the first two TDC inputs)")
    ap.add_argument("--edges", type=int, default=tdc_rig.TDC_DEFAULT_EDGES,
                    help=f"edges for the code density (default {tdc_rig.TDC_DEFAULT_EDGES})")
    ap.add_argument("--pair-edges", type=int, default=100_000,
                    help="edges on each of the pair's inputs (default 100000: they also give both inputs' bins)")
    ap.add_argument("--tap-table", default=None, metavar="FILE",
                    help="the predicted bins (default: the board's targets/tdc/taps_BOARD.json)")
    ap.add_argument("--calibration-dir", default=None, help="where the jumper input's bins are stored")
    ap.add_argument("--no-store", action="store_true", help="store nothing")
    ap.add_argument("--yes", action="store_true", help="do not wait for Enter before the pair step")
    args = ap.parse_args(argv)
    if args.edges < 1000 or args.pair_edges < 1000:
        ap.error("--edges and --pair-edges: at least 1000")
    if args.pair is not None and args.pair[0] == args.pair[1]:
        ap.error(f"--pair: two different inputs, not {args.pair[0]} twice")
    return args


def collect_pair(session, channels, edges, progress=None):
    """Edges (both directions) on two inputs until each has ``edges``; returns {channel: (ticks, codes)}."""
    ident = session.identity
    for channel in channels:
        check_input(ident, channel, "board check")
        tdc_rig.check_tdc_input(ident, channel)
    collector = RecordCollector()
    session.configure_capture({c: CAPTURE_ENABLE | CAPTURE_RISE | CAPTURE_FALL for c in channels})

    def received():
        masks = [part[1] for part in collector.parts]
        return min(sum(int(((m >> c) & 1).sum()) for m in masks) for c in channels)

    try:
        session.collect(collector, lambda: received() >= edges, idle_timeout=10.0,
                        tick=(lambda: progress(received(), edges)) if progress else None)
    finally:
        lost = end_collection(session, collector)
    if lost:
        raise CalibrationError(f"the rig lost {lost} edges (FIFO full): slow the source down")
    ticks, masks, _levels, _fractions = records = collector.records
    out = {}
    for channel in channels:
        on = ((np.asarray(masks, dtype=np.int64) >> channel) & 1).astype(bool)
        out[channel] = (np.asarray(ticks, dtype=np.int64)[on], tdc_rig.input_codes(records, channel, ident))
    return out
