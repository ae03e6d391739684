"""A model of the carry-chain TDC line (issue 35; docs/tdc.md, "Calibration and the model"): pure numpy,
no per-edge Python loop.

The line: an input edge enters the carry chain and reaches tap k ``taps_ps[k]`` ps later (the tap
arrival table, in chain order; from nextpnr's SDF for a real build, ``targets/tdc/*.json``). Taps may
be out of order (a later tap reached sooner: a *bubble* in the thermometer) or equal (a zero-width
bin). Every tap's sampler takes the line at each rising edge of the sampling (ts) clock, period
``tick_ps``. The edge belongs to the tick whose closing clock edge is the first to see it in the line
(any tap passed; ``detect`` maps a change's phase in its own tick, as gateware/tdc.py's model has
it, to that tick and code): the route to the line's first-reached tap, ``s0 = min(taps_ps)``, is a
constant of the input path like the synchronizer's (the loopback calibration takes it), so positions
count from the instant the edge reaches that tap. An edge at ``position`` ps into its tick
(0 <= position < tick) has travelled ``elapsed = s0 + tick - position`` ps at the tick's closing
clock edge: the samplers hold the thermometer ``taps_ps < elapsed`` (tap k is 1 if the edge has
passed it, strictly, as in gateware/tdc.py's simulation model). The encoder counts the ones
(bubble-tolerant: the order of the taps does not matter), saturating at ``B - 1`` for a line of B
taps (the code fits log2(B) bits; a line longer than s0 + tick never reaches its last taps).

So the fine code of an edge is the number of taps it reached: a higher code is an *earlier* edge in
its tick, and code 0 (no tap) is no edge. Code c holds the edges whose elapsed time lies in
(s[c - 1], s[c]], s the sorted arrival times: its width is that clipped to the tick
(``bin_widths_ps``), which is what code density measures (hilat.calibration.tdc).

This module lives in ``hilat.calibration`` (not ``targets``) because the calibration states the
predicted bins beside the measured ones and the host never imports ``targets``; the benchmark and the
simulated rig import it from here.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TAP_TABLE_KEYS = ("board", "device", "source", "tick_ps", "taps_ps")


@dataclass(frozen=True)
class TapTable:
    """A line's tap arrival times (ps after the edge enters the line, chain order) and its tick."""
    taps_ps: np.ndarray
    tick_ps: float
    board: str = ""
    device: str = ""
    source: str = ""

    def __post_init__(self):
        taps = np.asarray(self.taps_ps, dtype=np.float64)
        if taps.ndim != 1 or len(taps) < 2:
            raise ValueError("a tap table needs at least 2 taps")
        if not np.all(np.isfinite(taps)) or taps.min() < 0:
            raise ValueError("tap arrival times must be finite and >= 0 ps")
        if not self.tick_ps > 0:
            raise ValueError(f"tick_ps must be > 0, not {self.tick_ps}")
        object.__setattr__(self, "taps_ps", taps)
        object.__setattr__(self, "tick_ps", float(self.tick_ps))

    @property
    def n_taps(self):
        return len(self.taps_ps)

    @property
    def bubbles(self):
        """How many adjacent tap pairs are out of order (tap k + 1 reached before tap k)."""
        return int(np.sum(np.diff(self.taps_ps) < 0))

    @property
    def long_enough(self):
        """Whether the line is longer than a tick past its first tap (no position in the tick saturates
        the encoder)."""
        return bool(self.taps_ps.max() >= self.taps_ps.min() + self.tick_ps)

    def as_dict(self):
        return dict(board=self.board, device=self.device, source=self.source, tick_ps=self.tick_ps,
                    taps_ps=self.taps_ps.tolist())


def load_tap_table(path):
    """The tap table of a build (``targets/tdc/taps_<board>.json``: board, device, source, tick_ps,
    taps_ps)."""
    data = json.loads(Path(path).read_text())
    missing = [k for k in TAP_TABLE_KEYS if k not in data]
    if missing:
        raise ValueError(f"{path}: tap table without {', '.join(missing)}")
    return TapTable(np.asarray(data["taps_ps"], dtype=np.float64), float(data["tick_ps"]), str(data["board"]),
                    str(data["device"]), str(data["source"]))


def stretched(table, tick_ps):
    """The table of a line ``tick_ps / table.tick_ps`` times as slow, at a ``tick_ps`` tick, its arrivals
    rounded to whole ps (what gateware/tdc.py's model compares): the simulated rig's lines are the i5
    build's stretched to its 20 ns tick, the same shape (bubbles, ratios) (docs/tdc.md)."""
    scale = float(tick_ps) / table.tick_ps
    return TapTable(np.rint(table.taps_ps * scale), float(tick_ps), table.board, table.device,
                    f"{table.source}; stretched x {scale:.6g} to a {float(tick_ps):g} ps tick")


def thermometer(table, positions_ps):
    """The samplers' bits at the clock edge after each edge: a (len(positions), B) bool array, row i tap
    k set when edge i (``positions_ps[i]`` ps after its tick's clock edge) has reached tap k. Memory is
    len(positions) x B bytes: callers with many edges take them in chunks (``fine_codes`` needs no
    thermometer)."""
    elapsed = _elapsed(table, positions_ps)
    return table.taps_ps[None, :] < elapsed[:, None]


def ones_count(bits):
    """The bubble-tolerant encoder: the number of ones in each thermometer row, saturating at B - 1."""
    bits = np.asarray(bits, dtype=bool)
    return np.minimum(bits.sum(axis=1), bits.shape[1] - 1).astype(np.int64)


def fine_codes(table, positions_ps):
    """The encoder's code for each edge, without building the thermometer: the count of taps with
    arrival < elapsed (a sorted search), saturating at B - 1. Equal to ``ones_count(thermometer(...))``."""
    return _codes(table, _elapsed(table, positions_ps))


def _codes(table, elapsed):
    reached = np.searchsorted(np.sort(table.taps_ps), elapsed, side="left")
    return np.minimum(reached, table.n_taps - 1).astype(np.int64)


def bin_widths_ps(table):
    """Each code's width in ps (B of them, adding up to the tick): code c (1 <= c <= B - 2) takes the
    elapsed times (s[c - 1], s[c]], s the sorted arrivals, the last code the rest (saturation), all
    inside the tick the samplers see, [s[0], s[0] + tick). Zero for code 0 (no edge), for the codes of
    equal taps and for those beyond the tick."""
    s = np.sort(table.taps_ps)
    lo, hi = s[0], s[0] + table.tick_ps
    lower = np.concatenate(([s[0]], s[:-1]))
    upper = np.concatenate(([s[0]], s[1:-1], [np.inf]))
    return np.clip(upper, lo, hi) - np.clip(lower, lo, hi)


def detect(table, phase_ps):
    """The gateware's view (gateware/tdc.py's ``_ThermometerModel`` and ``_Encoder``): an input change
    ``phase_ps`` after the clock edge that starts the tick it happens in (0 < phase <= tick). The
    encoder records it in the first tick whose closing clock edge finds a tap passed: that tick
    (``late`` 0) if the change has passed the line's first tap by then (tick - phase > s0), else the
    next one (``late`` 1). Returns (late, codes) as arrays; ``position_of`` gives the change's
    position in the model's terms."""
    phase = np.asarray(phase_ps, dtype=np.float64)
    if phase.size and (phase.min() <= 0 or phase.max() > table.tick_ps):
        raise ValueError(f"phases must be in (0, {table.tick_ps}] ps (inside the tick)")
    elapsed = table.tick_ps - phase
    late = (elapsed <= table.taps_ps.min()).astype(np.int64)
    return late, _codes(table, elapsed + late * table.tick_ps)


def position_of(table, phase_ps, late):
    """The model's position (ps into the tick the change is recorded in, counted from the first tap)
    of a change ``phase_ps`` after its own tick's clock edge, recorded ``late`` ticks later."""
    return np.asarray(phase_ps, dtype=np.float64) - np.asarray(late) * table.tick_ps + table.taps_ps.min()


def _elapsed(table, positions_ps):
    positions = np.asarray(positions_ps, dtype=np.float64)
    if positions.size and (positions.min() < 0 or positions.max() >= table.tick_ps):
        raise ValueError(f"positions must be in [0, {table.tick_ps}) ps (inside the tick)")
    return table.taps_ps.min() + table.tick_ps - positions


# ---- synthetic tables (tests, and the benchmark until a build's SDF table is committed) -------------

def synthetic_table(n_taps=256, tick_ps=1e12 / 140e6, seed=35, bubble_share=0.15, zero_share=0.05):
    """A SYNTHETIC tap table from the issue's figures, not from a build: a CCU2C carries 2 bits in
    62/66/71 ps (min/typ/max), so a bit (a tap) takes ~33 ps, each CCU2C's delay drawn between min and
    max and split unevenly between its two bits; ``bubble_share`` of adjacent pairs swapped (out-of-order
    taps) and ``zero_share`` of taps given their neighbour's arrival (zero-width bins); a ~200 ps
    route to the first tap. 256 taps span about 8.6 ns: longer than a 140 MHz tick (7.14 ns)."""
    rng = np.random.default_rng(seed)
    cells = (n_taps + 1) // 2
    cell_ps = rng.uniform(62.0, 71.0, cells)
    split = rng.uniform(0.3, 0.7, cells)             # the share of a cell's delay before its first bit
    steps = np.empty(2 * cells)
    steps[0::2] = cell_ps * split
    steps[1::2] = cell_ps * (1 - split)
    taps = 200.0 + np.cumsum(steps[:n_taps])
    pairs = np.flatnonzero(rng.random(n_taps - 1) < bubble_share)
    pairs = pairs[np.concatenate(([True], np.diff(pairs) > 1))] if len(pairs) else pairs  # disjoint swaps
    taps[pairs], taps[pairs + 1] = taps[pairs + 1].copy(), taps[pairs].copy()
    zeros = np.flatnonzero(rng.random(n_taps - 1) < zero_share) + 1
    taps[zeros] = taps[zeros - 1]
    return TapTable(taps, float(tick_ps), board="synthetic", device="LFE5U-25F (synthetic)",
                    source="SYNTHETIC: hilat.calibration.tdc_line.synthetic_table from the issue's CCU2C "
                           "figures (62/66/71 ps per 2 bits), not a build's SDF")
