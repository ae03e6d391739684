"""The carry-chain TDC in the model (issue 35; docs/tdc.md, "Calibration and the model").

Not a test: what the line's model predicts for the build's tap table. The tap table is the i5
build's, from nextpnr's SDF (``targets/tdc/taps_colorlight_i5.json``); until that file is committed
the benchmark runs on a SYNTHETIC table from the issue's CCU2C figures
(``hilat.calibration.tdc_line.synthetic_table``) and says so on its first line.

1. --edges edges (10^6) at uniformly random positions in the tick go through the model: the
   thermometer the samplers catch at the clock edge and the ones-counting encoder's code
   (``tdc_line.thermometer``, ``ones_count``), in chunks of --chunk edges (bounded memory).
2. Code density (``hilat.calibration.tdc.tdc_code_density``) estimates every bin's width from their
   codes; printed: each code's estimate against the table's true width, in the estimate's sigmas;
   the LSB, zero-width codes, DNL/INL ranges, the effective resolution sqrt(sum w^3 / T).
3. --pairs edge pairs (10^4) with known true intervals (anywhere up to 1000 ticks, both edges at
   random positions) are timed as a capture would after that calibration: tick + the code's
   estimated centre; the error is measured - true interval.

    .venv/bin/python benchmarks/tdc.py
    .venv/bin/python benchmarks/tdc.py --taps targets/tdc/taps_colorlight_i5.json --edges 1e6 --pairs 1e4

The last line is ``tdc: B bins, mean bin P ps, effective resolution E ps, pair error rms R ps (model)``.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from hilat.calibration import tdc, tdc_line

ROOT = Path(__file__).resolve().parents[1]
I5_TAPS = ROOT / "targets" / "tdc" / "taps_colorlight_i5.json"


def codes_through_the_line(table, positions_ps, chunk):
    """The encoder's codes for edges at these positions: thermometer then ones-count, ``chunk`` edges at
    a time (chunk x taps bytes at most); checked against the sorted-search shortcut."""
    out = np.empty(len(positions_ps), dtype=np.int64)
    for start in range(0, len(positions_ps), chunk):
        part = positions_ps[start:start + chunk]
        out[start:start + chunk] = tdc_line.ones_count(tdc_line.thermometer(table, part))
    if not np.array_equal(out, tdc_line.fine_codes(table, positions_ps)):
        raise AssertionError("the thermometer's ones-count and the sorted search disagree")
    return out


def pair_errors(table, result, pairs, rng):
    """Measured - true interval (ps) of ``pairs`` edge pairs, each edge placed at its code's estimated
    centre."""
    tick = table.tick_ps
    first = rng.random(pairs) * 1000 * tick
    interval = rng.random(pairs) * 1000 * tick
    measured = []
    for t in (first, first + interval):
        n = np.floor(t / tick)
        codes = tdc_line.fine_codes(table, t - n * tick)
        measured.append((n + result.centres_of(codes)) * tick)
    return (measured[1] - measured[0]) - interval


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--taps", type=Path, default=None, help=f"tap table (default {I5_TAPS.relative_to(ROOT)}, "
                    "else a synthetic one)")
    ap.add_argument("--edges", type=float, default=1e6)
    ap.add_argument("--pairs", type=float, default=1e4)
    ap.add_argument("--chunk", type=int, default=65536)
    ap.add_argument("--seed", type=int, default=35)
    args = ap.parse_args(argv)
    path = args.taps or (I5_TAPS if I5_TAPS.exists() else None)
    table = tdc_line.load_tap_table(path) if path else tdc_line.synthetic_table()
    print(f"tap table: {table.source} ({table.board}, {table.device}): {table.n_taps} taps, "
          f"{table.bubbles} out of order, tick {table.tick_ps:.1f} ps, first tap {table.taps_ps.min():.0f} ps, "
          f"line {np.ptp(table.taps_ps):.0f} ps" + ("" if path else " [SYNTHETIC: no build's table committed]"))
    if not table.long_enough:
        print("warning: the line is shorter than a tick: the encoder saturates at its last code")
    rng = np.random.default_rng(args.seed)
    edges, pairs = int(args.edges), int(args.pairs)

    t0 = time.perf_counter()
    codes = codes_through_the_line(table, rng.random(edges) * table.tick_ps, args.chunk)
    result = tdc.tdc_code_density(tdc.code_counts(codes, table.n_taps), table.tick_ps * 1e-12)
    elapsed = time.perf_counter() - t0
    truth = tdc_line.bin_widths_ps(table) / table.tick_ps
    sigma = result.width_sigma_ticks
    z = np.divide(result.widths_ticks - truth, np.sqrt(truth * (1 - truth) / edges),
                  out=np.zeros(table.n_taps), where=truth > 0)
    used = result.codes_used
    print(f"{edges} edges through the line in {elapsed:.2f} s (thermometer + ones-count, {args.chunk}-edge chunks)")
    print(f"{'code':>4} {'edges':>7} {'width ps':>9} {'sigma':>6} {'true ps':>8} {'z':>6}")
    for c in range(table.n_taps):
        if c < 4 or used - 3 <= c < used or c in result.zero_width[:4]:
            print(f"{c:>4} {result.counts[c]:>7} {result.widths_ticks[c] * table.tick_ps:>9.2f} "
                  f"{sigma[c] * table.tick_ps:>6.2f} {truth[c] * table.tick_ps:>8.2f} {z[c]:>+6.2f}")
    true_zero = result.first_code + np.flatnonzero(truth[result.first_code:used] == 0)
    lsb_sigma_ps = np.sqrt(result.lsb_s / result.tick_s / edges) * table.tick_ps
    rms_error_ps = np.sqrt(np.mean((result.widths_ticks - truth) ** 2)) * table.tick_ps
    print(f"codes {result.first_code}..{used - 1} span the tick ({result.span} bins), {len(result.zero_width)} of "
          f"them zero-width, codes {used}..{table.n_taps - 1} beyond it; estimates vs true widths: max |z| "
          f"{np.max(np.abs(z)):.2f}, rms error {rms_error_ps:.3f} ps (sigma of a {result.lsb_s * 1e12:.1f} ps bin "
          f"{lsb_sigma_ps:.2f} ps); true zero-width codes found: {np.array_equal(result.zero_width, true_zero)}")
    d = result.as_dict()
    print(f"LSB {result.lsb_s * 1e12:.2f} ps, DNL {d['dnl_range'][0]:+.2f}..{d['dnl_range'][1]:+.2f} LSB, INL "
          f"{d['inl_range'][0]:+.2f}..{d['inl_range'][1]:+.2f} LSB, effective resolution "
          f"{result.effective_resolution_s * 1e12:.2f} ps (rms quantization "
          f"{result.quantization_rms_s * 1e12:.2f} ps), edges for 1 ps per bin: {result.edges_for_precision(1e-12)}")

    errors = pair_errors(table, result, pairs, rng)
    rms = float(np.sqrt(np.mean(errors ** 2)))
    # Expected: each edge's quantization (rms sqrt(sum w^3 / 12 T)) and its code's centre's estimation
    # error (the share of the edges before it, binomial: sqrt(P (1 - P) / N) ticks); the two edges' centre
    # errors come from one calibration and partly cancel, so this bounds the rms from above.
    before = np.cumsum(result.widths_ticks) - result.widths_ticks / 2
    centre_var = float(np.sum(truth * before * (1 - before) / edges)) * table.tick_ps ** 2
    quant = result.quantization_rms_s * 1e12
    expected = np.sqrt(2 * (quant ** 2 + centre_var))
    print(f"{pairs} pairs: error mean {errors.mean():+.2f} ps, rms {rms:.2f} ps, max |error| "
          f"{np.max(np.abs(errors)):.1f} ps; expected between {np.sqrt(2) * quant:.2f} ps (two edges' quantization, "
          f"{quant:.2f} ps rms each) and {expected:.2f} ps (plus their centres' estimation errors, "
          f"{np.sqrt(centre_var):.2f} ps rms each, as if independent)")
    print(f"tdc: {table.n_taps} bins, mean bin {result.lsb_s * 1e12:.1f} ps, effective resolution "
          f"{result.effective_resolution_s * 1e12:.1f} ps, pair error rms {rms:.1f} ps (model)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
