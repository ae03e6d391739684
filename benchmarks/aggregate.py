"""Aggregation throughput: captured edges -> pairing -> Faller table and percentiles for every kind.

Not a test: figures are printed, nothing is asserted. The vectorised pipeline (hilat.analysis) runs on
10^7 synthetic edges; the baseline is the straightforward per-event Python loop a user would write
(one pass over the edges, a state machine per stimulus, then sorted() for the statistics), run on a
slice and checked to give the same latencies.

    .venv/bin/python benchmarks/aggregate.py [--events 10000000] [--baseline-events 1000000]
"""

import argparse
import math
import time

import numpy as np
from hilat import analysis


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
    p = analysis.pair(ticks, chans, levels)
    return p, analysis.summarize(p, 50e6), analysis.summarize(p, 50e6, exclude_tagged=True)


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
        pcts = [ok[max(math.ceil(p * n - 1e-9), 1) - 1] for p in analysis.PERCENTILES]
        out[name] = (ok[0], ok[n // 2], ok[-1], mean, std, pcts)
    return isr_lat, task_lat, out


def best_of(fn, repeat, *args):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times), result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--baseline-events", type=int, default=1_000_000)
    args = ap.parse_args()

    ticks, chans, levels = synthetic_edges(args.events)
    n = len(ticks)
    t_vec, (pairing, _, _) = best_of(vectorised, 3, ticks, chans, levels)
    print(f"vectorised: {n:,} edges, {len(pairing):,} stimuli in {t_vec:.3f} s = {n / t_vec / 1e6:.1f} M edges/s "
          "(pairing + Faller table + percentiles, all 5 kinds, with and without tagged samples)")

    m = min(args.baseline_events, n)
    bt, bc, bl = ticks[:m], chans[:m], levels[:m]
    t_loop, (isr_lat, task_lat, _) = best_of(python_loop, 1, bt, bc, bl)
    check = analysis.pair(bt, bc, bl)
    same = (np.array_equal(check.isr_latency, isr_lat) and np.array_equal(check.task_latency, task_lat))
    t_vec_m, _ = best_of(vectorised, 3, bt, bc, bl)
    print(f"python loop: {m:,} edges in {t_loop:.3f} s = {m / t_loop / 1e6:.2f} M edges/s "
          f"(stimulus -> ISR and -> task only); same latencies as the vectorised pairing: {same}")
    print(f"ratio on the same {m:,} edges: {t_loop / t_vec_m:.0f}x; "
          f"at full size (rates): {(n / t_vec) / (m / t_loop):.0f}x")


if __name__ == "__main__":
    main()
