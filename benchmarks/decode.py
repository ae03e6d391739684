"""Decoding throughput: the per-frame decoder against the vectorised one (hilat.link.batch).

Not a test: figures are printed, nothing is asserted by timing. A clean stream of full EVENTS frames
as the rig sends them (deltas of 1 byte, a fifth of 2 bytes; 1-byte masks: ~75 records a frame,
then the same records with 2-byte masks) is fed in chunks of 256 KiB and 1 MiB to
``FrameDecoder.feed`` (the records flattened into one list, as a consumer of it must) and to
``BatchDecoder.feed_batch``. Each figure is the best of --repeat runs.

    .venv/bin/python benchmarks/decode.py
    .venv/bin/python benchmarks/decode.py --records 2e6 --repeat 5

The last line is ``decode: batch R records/s, x.x times the per-frame decoder``, for 1-byte masks
in 256 KiB chunks (what a capture reads from the link at a time).
"""

import argparse
import time

import numpy as np
from hilat.link import protocol as p
from hilat.link.batch import BatchDecoder

CHUNKS = (256 << 10, 1 << 20)


def stream(n, mask_bytes, seed=1):
    """Wire bytes of n records in full EVENTS frames (consecutive seqs from 0)."""
    rng = np.random.default_rng(seed)
    deltas = np.where(rng.random(n) < 0.8, rng.integers(1, 128, n), rng.integers(128, 1 << 14, n))
    ticks = (10**9 + np.cumsum(deltas)).tolist()
    top = 1 << (6 if mask_bytes == 1 else 12)  # 6 channels, or 12
    records = list(zip(ticks, rng.integers(1, top, n).tolist(), rng.integers(0, top, n).tolist()))
    frames = p.pack_events(records, mask_bytes=mask_bytes)
    return b"".join(f.encode(k & 0xFFFF) for k, f in enumerate(frames)), len(frames)


def per_frame(data, chunk):
    decoder, records = p.FrameDecoder(), []
    for i in range(0, len(data), chunk):
        for frame in decoder.feed(data[i : i + chunk]):
            if isinstance(frame.msg, p.Events):
                records.extend(frame.msg.records)
    return len(records), decoder


def batch(data, chunk):
    decoder, n = BatchDecoder(), 0
    for i in range(0, len(data), chunk):
        n += len(decoder.feed_batch(data[i : i + chunk]).ticks)
    return n, decoder


def rate(decode, data, chunk, n_records, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        n, decoder = decode(data, chunk)
        best = min(best, time.perf_counter() - t)
        clean = decoder.frames_ok and not any(v for k, v in decoder.counters().items() if k != "frames_ok")
        if n != n_records or not clean:
            raise SystemExit(f"{decode.__name__}: {n} records of {n_records}, {decoder.counters()}")
    return n_records / best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=float, default=1e6, help="records of each stream (default 1e6)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each figure, the best is kept (default 3)")
    args = ap.parse_args()
    n = int(args.records)
    headline = None
    for mask_bytes in (1, 2):
        data, n_frames = stream(n, mask_bytes)
        print(f"{mask_bytes}-byte masks: {n} records, {n_frames} frames ({n / n_frames:.1f} records a frame), "
              f"{len(data) / 2**20:.1f} MiB")
        for chunk in CHUNKS:
            slow = rate(per_frame, data, chunk, n, args.repeat)
            fast = rate(batch, data, chunk, n, args.repeat)
            print(f"  {chunk >> 10:5d} KiB chunks: FrameDecoder.feed {slow / 1e6:6.2f} M records/s, "
                  f"BatchDecoder.feed_batch {fast / 1e6:6.2f} M records/s ({fast / slow:.1f}x)")
            if headline is None:
                headline = fast, slow
    fast, slow = headline
    print(f"decode: batch {fast:.0f} records/s, {fast / slow:.1f} times the per-frame decoder")


if __name__ == "__main__":
    main()
