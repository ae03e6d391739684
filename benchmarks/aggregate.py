"""Aggregation throughput, two stages, each against the per-event Python loop a user would write.

1. Samples -> statistics: 10^7 latency samples -> Faller row + percentiles (exact, hilat.analysis)
   and -> HDR histogram (hilat.hdr). Baseline: one Python pass per sample updating count, min, max,
   sums and a dict histogram, percentiles read from the sorted dict; and the same loop recording into
   the reference HdrHistogram package (``hdrhistogram`` on PyPI) one value at a time.
2. Edges -> pairing -> statistics: 10^7 captured edges -> all 5 latency kinds, with and without tagged
   samples. Baseline: a per-edge state machine for the two stimulus responses only (less work than
   hilat does), checked to give the same latencies.

Not a test: figures are printed, nothing is asserted. Best of 3 (the loop: 1) wall-clock times.

    .venv/bin/python benchmarks/aggregate.py [--events 10000000] [--baseline-events 1000000]
"""

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from hilat import analysis
from hilat.statistics.distribution import exact_figures, summarize
from hilat.statistics.percentiles import PERCENTILES

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # gateware/ and targets/ of the checkout
from gateware.channels import channel_table  # noqa: E402

# The default simulated rig's channels: stim0, stim1, in0 = isr, in1 = task, in2 = spare, in3 = tag.
ROLES = analysis.Channels.from_table([(c.name, c.role) for c in channel_table(2, 4)])


def synthetic_edges(n_events, seed=1):
    """Stimuli with ISR and task responses (6 edges each), heavy-tailed latencies, 1% misses."""
    rng = np.random.default_rng(seed)
    n = n_events // 6
    stim = np.cumsum(rng.integers(4000, 6000, n)).astype(np.int64)
    isr = 50 + rng.geometric(0.05, n) + (rng.random(n) < 1e-3) * rng.integers(300, 3000, n)
    task = isr + 80 + rng.integers(0, 30, n)
    missed = rng.random(n) < 0.01
    parts = [(stim, 0, 1), (stim + 10, 0, 0)]
    for lat, ch, width in ((isr, 2, 20), (task, 3, 30)):
        t = stim[~missed] + lat[~missed]
        parts += [(t, ch, 1), (t + width, ch, 0)]
    ticks = np.concatenate([p[0] for p in parts])
    chans = np.concatenate([np.full(len(p[0]), p[1], np.uint8) for p in parts])
    levels = np.concatenate([np.full(len(p[0]), p[2], np.uint8) for p in parts])
    order = np.argsort(ticks, kind="stable")
    return ticks[order], chans[order], levels[order]


def vectorised(ticks, chans, levels):
    p = analysis.pair(ticks, chans, levels, ROLES)
    found = analysis.measure(ticks, chans, levels, ROLES)
    return p, summarize(found), summarize(found, exclude_tagged=True)


def python_loop(ticks, chans, levels):
    """Per-event loop: the window of a stimulus closes at the next stimulus."""
    isr_lat, task_lat = [], []
    stim = isr_at = task_at = None
    for t, ch, lv in zip(ticks.tolist(), chans.tolist(), levels.tolist()):
        if ch == 0 and lv == 1:
            if stim is not None:
                isr_lat.append(isr_at - stim if isr_at is not None else -1)
                task_lat.append(task_at - stim if task_at is not None else -1)
            stim, isr_at, task_at = t, None, None
        elif ch == 2 and lv == 1 and stim is not None and isr_at is None:
            isr_at = t
        elif ch == 3 and lv == 1 and stim is not None and task_at is None:
            task_at = t
    if stim is not None:
        isr_lat.append(isr_at - stim if isr_at is not None else -1)
        task_lat.append(task_at - stim if task_at is not None else -1)
    out = {}
    for name, lat in (("isr", isr_lat), ("task", task_lat)):
        ok = sorted(v for v in lat if v >= 0)
        n = len(ok)
        mean = sum(ok) / n
        std = math.sqrt(sum((v - mean) ** 2 for v in ok) / (n - 1))
        pcts = [ok[max(math.ceil(p * n - 1e-9), 1) - 1] for p in PERCENTILES]
        out[name] = (ok[0], ok[n // 2], ok[-1], mean, std, pcts)
    return isr_lat, task_lat, out


def best_of(fn, repeat, *args):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times), result


def samples_loop(values):
    """Per-sample Python aggregation: running sums and a dict histogram, then percentiles."""
    n, lo, hi, total, total_sq, hist = 0, None, None, 0, 0, {}
    for v in values:
        n += 1
        lo = v if lo is None or v < lo else lo
        hi = v if hi is None or v > hi else hi
        total += v
        total_sq += v * v
        hist[v] = hist.get(v, 0) + 1
    mean = total / n
    std = math.sqrt((total_sq - n * mean * mean) / (n - 1))
    out, seen, keys = [], 0, sorted(hist)
    targets = [max(math.ceil(p * n - 1e-9), 1) for p in PERCENTILES]
    ti = 0
    for k in keys:
        seen += hist[k]
        while ti < len(targets) and seen >= targets[ti]:
            out.append(k)
            ti += 1
    return lo, hi, mean, std, out


def samples_loop_hdrhistogram(values):
    """Per-sample recording with the reference Python HdrHistogram package (hdrhistogram on PyPI)."""
    from hdrh.histogram import HdrHistogram as PyHdr

    h = PyHdr(1, 1 << 40, 3)
    for v in values:
        h.record_value(v)
    return [h.get_value_at_percentile(100 * p) for p in PERCENTILES]


def samples_vectorised(values):
    return exact_figures(values)


def samples_hdr(values):
    from hilat.hdr import HdrHistogram

    h = HdrHistogram(1, 1 << 40, 3)
    h.record(values)
    return h.percentiles([100 * p for p in PERCENTILES])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--baseline-events", type=int, default=1_000_000)
    args = ap.parse_args()

    rng = np.random.default_rng(7)
    samples = (50 + rng.geometric(0.02, args.events) + (rng.random(args.events) < 1e-4)
               * rng.integers(1000, 100_000, args.events)).astype(np.int64)
    t_exact, st = best_of(samples_vectorised, 3, samples)
    t_hdr, _ = best_of(samples_hdr, 3, samples)
    m = min(args.baseline_events, len(samples))
    t_loop, loop = best_of(samples_loop, 1, samples[:m].tolist())
    same = loop[4] == [v for v in exact_figures(samples[:m])["percentiles"].values() if v is not None]
    print(f"1. samples -> statistics, {len(samples):,} samples:")
    print(f"   exact (counted): {t_exact:.3f} s = {len(samples) / t_exact / 1e6:.1f} M samples/s")
    print(f"   HDR histogram:  {t_hdr:.3f} s = {len(samples) / t_hdr / 1e6:.1f} M samples/s")
    print(f"   python loop:    {m:,} samples in {t_loop:.3f} s = {m / t_loop / 1e6:.2f} M samples/s "
          f"(same percentiles: {same})")
    m2 = m // 10
    t_pkg, _ = best_of(samples_loop_hdrhistogram, 1, samples[:m2].tolist())
    print(f"   python loop, hdrhistogram package record_value(): {m2:,} samples in {t_pkg:.3f} s = "
          f"{m2 / t_pkg / 1e6:.2f} M samples/s")
    print(f"   ratio (throughput) against the dict loop: exact {(len(samples) / t_exact) / (m / t_loop):.0f}x, "
          f"HDR {(len(samples) / t_hdr) / (m / t_loop):.0f}x; against the package loop: HDR "
          f"{(len(samples) / t_hdr) / (m2 / t_pkg):.0f}x")

    ticks, chans, levels = synthetic_edges(args.events)
    n = len(ticks)
    t_vec, (pairing, _, _) = best_of(vectorised, 3, ticks, chans, levels)
    print(f"2. edges -> pairing -> statistics, vectorised: {n:,} edges, {len(pairing):,} stimuli in {t_vec:.3f} s = "
          f"{n / t_vec / 1e6:.1f} M edges/s "
          "(pairing + Faller table + percentiles, all 5 kinds, with and without tagged samples)")

    m = min(args.baseline_events, n)
    bt, bc, bl = ticks[:m], chans[:m], levels[:m]
    t_loop, (isr_lat, task_lat, _) = best_of(python_loop, 1, bt, bc, bl)
    check = analysis.pair(bt, bc, bl, ROLES)
    same = (np.array_equal(check.isr_latency, isr_lat) and np.array_equal(check.task_latency, task_lat))
    t_vec_m, _ = best_of(vectorised, 3, bt, bc, bl)
    print(f"   python loop: {m:,} edges in {t_loop:.3f} s = {m / t_loop / 1e6:.2f} M edges/s "
          f"(stimulus -> ISR and -> task only); same latencies as the vectorised pairing: {same}")
    print(f"   ratio on the same {m:,} edges: {t_loop / t_vec_m:.0f}x; "
          f"at full size (rates): {(n / t_vec) / (m / t_loop):.0f}x")


if __name__ == "__main__":
    main()
