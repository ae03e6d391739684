"""Benchmark of the HDR histogram for long runs (not a test: figures are printed, nothing is asserted).

Records 10^9 heavy-tailed latencies (lognormal, median 5000 ticks, with rare outliers up to 2^40
ticks) into one HdrHistogram(1, 2^40, 3), 10^7 at a time from a seeded generator, and prints at
10^6, 10^7, 10^8 and 10^9 samples: recording throughput, the histogram's memory, the process's
peak RSS and its growth since the 10^7 checkpoint (memory must stay constant in the sample count),
and what keeping every sample would take. Then the working memory of one record() call on a 10^7
chunk, measured with tracemalloc.

    .venv/bin/python benchmarks/hdr_memory.py            # up to 10^9 samples (a few minutes)
    .venv/bin/python benchmarks/hdr_memory.py --quick    # up to 10^8
"""

import argparse
import resource
import time
import tracemalloc

import numpy as np
from hilat.hdr import HdrHistogram

CHUNK = 10**7
SEED = 20240601


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024      # Linux reports KiB


def current_rss_bytes():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:
        return float("nan")


class Latencies:
    """Heavy-tailed latencies in ticks, generated into reused buffers so that generation adds no memory."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.normal = np.empty(CHUNK, dtype=np.float64)
        self.ticks = np.empty(CHUNK, dtype=np.int64)

    def next(self, n):
        normal, ticks = self.normal[:n], self.ticks[:n]
        self.rng.standard_normal(out=normal)
        np.multiply(normal, 0.8, out=normal)                               # lognormal, sigma 0.8
        np.add(normal, np.log(5000.0), out=normal)                          # median 5000 ticks
        np.exp(normal, out=normal)
        np.copyto(ticks, normal, casting="unsafe")
        rare = self.rng.integers(0, n, max(1, n // 100_000))                # 1e-5: preemptions, page faults
        ticks[rare] = self.rng.integers(1 << 20, 1 << 40, rare.size)
        return ticks


def mib(n):
    return n / (1 << 20)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="stop at 10^8 samples")
    args = parser.parse_args()
    checkpoints = [10**6, 10**7, 10**8] + ([] if args.quick else [10**9])

    hist = HdrHistogram(1, 1 << 40, 3)
    source = Latencies(SEED)
    print(f"HdrHistogram(1, 2^40, 3): {hist.counts_len} buckets, {hist.memory_bytes / 1024:.0f} KiB of counts; "
          f"chunks of {CHUNK:.0e} samples")
    print(f"{'samples':>10} {'record s':>9} {'M samples/s':>12} {'hist KiB':>9} {'peak RSS MiB':>13} "
          f"{'RSS MiB':>8} {'peak vs 1e7':>11} {'all samples MiB':>16} {'ratio':>9}")
    done, record_s, gen_s = 0, 0.0, 0.0
    rss_at_1e7 = None
    for target in checkpoints:
        while done < target:
            n = min(CHUNK, target - done)
            t0 = time.perf_counter()
            chunk = source.next(n)
            t1 = time.perf_counter()
            hist.record(chunk)
            t2 = time.perf_counter()
            gen_s += t1 - t0
            record_s += t2 - t1
            done += n
        peak = peak_rss_bytes()
        if target == 10**7:
            rss_at_1e7 = peak
        growth = f"{peak / rss_at_1e7:.3f}x" if rss_at_1e7 else "-"
        every = done * 8                                                      # int64 per sample
        print(f"{done:>10.0e} {record_s:>9.2f} {done / record_s / 1e6:>12.1f} {hist.memory_bytes / 1024:>9.0f} "
              f"{mib(peak):>13.1f} {mib(current_rss_bytes()):>8.1f} {growth:>11} {mib(every):>16.0f} "
              f"{every / hist.memory_bytes:>8.0f}x", flush=True)

    complete = hist.total_count == done and hist.out_of_range == 0
    p = hist.percentiles([50, 99, 99.99, 99.9999])
    print(f"recorded {hist.total_count} samples ({'all' if complete else 'NOT all'}), out of range "
          f"{hist.out_of_range}; p50 {p[0]}, p99 {p[1]}, p99.99 {p[2]}, p99.9999 {p[3]}, max {hist.max} ticks "
          f"(exact max {hist.max_recorded})")
    print(f"generation {gen_s:.1f} s ({done / gen_s / 1e6:.1f} M samples/s), recording {record_s:.1f} s")

    chunk = Latencies(SEED + 1).next(CHUNK)
    fresh = HdrHistogram(1, 1 << 40, 3)
    tracemalloc.start()
    fresh.record(chunk)
    working = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"record() working memory for one {CHUNK:.0e}-sample chunk: {working / 1024:.0f} KiB "
          f"(the chunk itself: {mib(chunk.nbytes):.0f} MiB, held by the caller)")


if __name__ == "__main__":
    main()
