"""Where a capture on a TDC rig places each input edge (issue 35; docs/tdc.md, "Placement of TDC edges").

The record carries 8 bits of code per TDC input (the first ``tdc_inputs`` DUT inputs). An edge of
code c recorded at tick t was ``T(c)`` before tick t's closing clock edge: at ``(t + 1) * tick -
T(c)``, T(c) the centre of code c's bin in elapsed time since the edge entered the line. So its
position inside tick t is ``tick - T(c)`` (negative for a late edge: T(c) > tick). T(c) comes from,
per input:

- **measured** bins (``hilat calibrate resolution`` on that input: code density, ``tdc.py``); code
  density gives the widths, not where the first bin starts, so the bins are laid from ``anchor_ps``,
  the line's first tap (``s0``) in the predicted table when the calibration had one, else 0 (the
  loopback offset takes that constant);
- else the **predicted** bins of the rig's tap table (``predicted_table``: a board's committed
  ``targets/tdc/taps_<board>.json``, or for the simulator the i5 table stretched to its tick), the
  run saying so;
- else nothing: that input's edges stay at whole ticks, the run saying so.

Positions are in the TDC run unit (``analysis.TDC_UNITS_PER_TICK``) and form an
``analysis.TdcSubticks``.
"""

import logging
from pathlib import Path

import numpy as np

from hilat.analysis import TDC_UNITS_PER_TICK, TdcSubticks
from hilat.calibration.tdc_line import TapTable, load_tap_table, stretched
from hilat.simulator import checkout_root

log = logging.getLogger("hilat")

N_CODES = 256
# The simulated rig's TDC lines are the i5 build's, stretched to its tick (docs/tdc.md, contract item 6).
SIMULATOR_BOARD = "sim"
SIMULATOR_TABLE_OF = "colorlight_i5"


def board_of(identity):
    """The board a rig identity's gateware was built for (the gateware string's first word)."""
    return str(identity.get("gateware", "")).split(" ")[0]


def tdc_channels(identity):
    """The channels with a TDC: the first ``tdc_inputs`` DUT inputs (none without a TDC)."""
    first = int(identity["n_stimulus"])
    return list(range(first, first + int(identity.get("tdc_inputs") or 0)))


def tick_ps_of(identity):
    return 1e12 / float(identity["ts_hz"])


def table_path(board, root=None):
    """Where a board's committed tap table is in the checkout (None: no checkout here)."""
    root = root if root is not None else checkout_root()
    return None if root is None else Path(root) / "targets" / "tdc" / f"taps_{board}.json"


def predicted_table(identity, path=None):
    """(TapTable at this rig's tick, None) or (None, why not): the tap table of ``path`` if given, else
    the rig's board's committed one, the simulator's being the i5 table stretched to its tick."""
    tick_ps = tick_ps_of(identity)
    board = board_of(identity)
    if path is None:
        path = table_path(SIMULATOR_TABLE_OF if board == SIMULATOR_BOARD else board)
        if path is None:
            return None, "no checkout here with targets/tdc/ (set HILAT_CHECKOUT)"
        if not path.is_file():
            return None, f"no tap table for board {board!r} ({path.name} is not committed)"
    try:
        table = load_tap_table(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return None, f"tap table {path} unreadable ({e})"
    taps = int(identity.get("tdc_taps") or N_CODES)
    if table.n_taps != taps:
        return None, f"tap table {path} has {table.n_taps} taps, the rig's lines {taps}"
    if board == SIMULATOR_BOARD:
        return stretched(table, tick_ps), None
    return TapTable(table.taps_ps, tick_ps, table.board, table.device, table.source), None


def predicted_centres_ps(table):
    """Each code's bin centre T(c) in ps of elapsed time (the contract's: code c covers the elapsed
    times (s[c-1], s[c]] of the sorted arrivals s, clipped to what a tick's edges travel,
    (s0, s0 + tick]); a zero-width code's is its bin's one instant; code 0 (no edge) has s0."""
    s = np.sort(table.taps_ps)
    lo, hi = s[0], s[0] + table.tick_ps
    lower = np.concatenate(([s[0]], s[:-1]))
    upper = np.concatenate(([s[0]], s[1:-1], [np.inf]))
    return (np.clip(lower, lo, hi) + np.clip(upper, lo, hi)) / 2


def measured_centres_ps(result, tick_ps):
    """T(c) in ps from a stored code-density result (``tdc.tdc_calibration``): its centres laid from
    its ``anchor_ps`` (the elapsed time where its lowest code starts). A stored centre is
    ``1 - (widths of the codes below and half its own)`` ticks after the tick's clock edge."""
    centres = np.asarray(result["centres_ticks"], dtype=np.float64)
    return float(result.get("anchor_ps") or 0.0) + (1 - centres) * tick_ps


def positions_mu(centres_ps, tick_ps, units_per_tick=TDC_UNITS_PER_TICK):
    """Positions inside the record's tick, in 1/``units_per_tick`` tick: tick - T(c), rounded."""
    return tuple(int(p) for p in np.rint((1 - np.asarray(centres_ps) / tick_ps) * units_per_tick).astype(np.int64))


def usable_measured(result, tick_ps):
    """Why a stored input's result cannot place edges (None: it can)."""
    try:
        if len(result["centres_ticks"]) != N_CODES:
            return f"{len(result['centres_ticks'])} codes, not {N_CODES}"
        if abs(float(result["tick_s"]) * 1e12 - tick_ps) > 1e-6 * tick_ps:
            return f"made at a {float(result['tick_s']) * 1e12:g} ps tick, this rig's is {tick_ps:g} ps"
    except (KeyError, TypeError, ValueError) as e:
        return f"unreadable ({e})"
    return None


def tdc_subticks(identity, tdc_part=None, table=None, why_no_table=None, online=None):
    """The ``TdcSubticks`` of a capture on this rig (``identity``: ``store.rig_identity``), from its
    stored ``tdc`` part, the predicted ``table`` (``predicted_table``), and ``online`` ({channel:
    stored-form result} re-estimated from a run's own edges, placed as measured). Returns
    (TdcSubticks, warnings)."""
    tick_ps = tick_ps_of(identity)
    stored = dict((tdc_part or {}).get("inputs") or {})
    rows, placement, warnings = [], [], []
    for channel in tdc_channels(identity):
        result = (online or {}).get(channel) or stored.get(str(channel))
        problem = usable_measured(result, tick_ps) if result else None
        if problem:
            warnings.append(f"the TDC calibration of channel {channel} is not applied: {problem}; recalibrate "
                            f"(hilat calibrate resolution --input {channel})")
            result = None
        if result:
            kind = "online" if channel in (online or {}) else "measured"
            rows.append(positions_mu(measured_centres_ps(result, tick_ps), tick_ps))
            source = (f"code density of {result['edges']} edges, made {result.get('made')}"
                      + (", re-estimated with this run's edges" if kind == "online" else ""))
        elif table is not None:
            kind = "predicted"
            rows.append(positions_mu(predicted_centres_ps(table), tick_ps))
            source = "PREDICTED bins of the tap table; no measured calibration of this input"
        else:
            kind = "none"
            rows.append((0,) * N_CODES)
            source = f"whole ticks: no measured calibration and no tap table ({why_no_table or 'none given'})"
        # Code 0 with an edge: a change the line did not measure (a pulse shorter than the line, docs/tdc.md):
        # no place in the tick, so at its whole tick, never at a bin.
        rows[-1] = (0,) + tuple(rows[-1][1:])
        placement.append({"channel": channel, "placement": kind, "source": source}
                         | ({"tap_table": table.source} if kind == "predicted" else {}))
    return TdcSubticks(int(identity["n_stimulus"]), tuple(rows), tuple(placement)), warnings


def placement_lines(placement, units_per_tick=TDC_UNITS_PER_TICK, tick_ps=None):
    """The resolution statement's lines for a TDC run's placement (``TdcSubticks.placement``)."""
    unit = f"1/{units_per_tick} tick" + (f" = {tick_ps / units_per_tick:.4g} ps" if tick_ps else "")
    lines = [f"TDC: {len(placement)} inputs carry 8-bit codes; times in {unit}, each TDC edge at its code's "
             "bin centre, tick - T(c) inside its record's tick"]
    tables = {p["tap_table"] for p in placement if p.get("tap_table")}
    lines += [f"TDC tap table (the model's prediction, not a measurement): {t}" for t in sorted(tables)]
    for p in placement:
        lines.append(f"TDC channel {p['channel']}: {p['placement']}: {p['source']}")
    return lines

