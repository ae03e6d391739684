"""On-rig histograms at a stimulus rate the link could never carry as raw edges (not a test).

The simulated rig with the measurement engine (``sim.build(with_engine=True)``) fires a stimulus
every PERIOD ticks (50 ticks at the simulator's 50 MHz: 10^6 stimuli/s of rig time); the DUT model
answers inside each period. Raw edges are off: only bins, closes and statistics cross the link. The
rig's histograms, per interval, kind and tag, are compared bin for bin with the injected latencies
(the DUT model's log) binned by the host's HdrHistogram code.

    .venv/bin/python benchmarks/rig_histograms.py [--stimuli N] [--period TICKS] [--shift S]

Last line: ``rig histograms: N stimuli at R stimuli/s (rig time), samples lost L, bins differing D``.
"""

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from hilat import protocol as p
from hilat.engine import ENGINE_HDR, deadline_limit
from hilat.hdr import HdrHistogram
from hilat.rig import Rig
from hilat.transport import Transport

from targets import sim

# The DUT model answers well inside a 50-tick period: ISR at 5..12 ticks for 3 ticks, the task 4..11
# ticks later for 3 ticks, the tag (DMA) raised from S+1 to the task's end on 1 stimulus in 8.
DUT = dict(seed=9, isr_base=5, isr_spread_bits=3, isr_width=3, resched_base=4, resched_spread_bits=3,
           task_width=3, tag_per1024=128, miss_per1024=0, mask_per1024=0)
STIM, ISR, TASK, TAG = 0, 2, 3, 5   # channels: stim0, in0, in1, in3 (the default roles)


def expected_bins(injected, first_tick, period, shift):
    """{(interval, kind, tag): counts array} of the injected latencies."""
    hdr = HdrHistogram(**ENGINE_HDR)
    starts = first_tick + period * np.arange(len(injected), dtype=np.int64)
    interval = starts >> shift
    tag = injected[:, 4].astype(np.int64)
    values = {0: injected[:, 2], 1: injected[:, 3], 2: injected[:, 3] - injected[:, 2]}
    out = {}
    for kind, v in values.items():
        index = hdr.counts_array_index(v.astype(np.int64))
        for (iv, t) in set(zip(interval.tolist(), tag.tolist())):
            sel = (interval == iv) & (tag == t)
            out[(iv, kind, t)] = np.bincount(index[sel], minlength=hdr.counts_len + 1)
    return out


def run(args):
    sim_dir = sim.build(with_engine=True)
    work = Path(tempfile.mkdtemp(prefix="hilat-rig-histograms-"))
    dut_log = work / "injected.csv"
    received = defaultdict(lambda: np.zeros(HdrHistogram(**ENGINE_HDR).counts_len + 1, np.int64))
    closes = defaultdict(set)
    with sim.SimulatedRig(sim_dir, work / "sim", dut_args=DUT, dut_log=dut_log) as simulated:
        with Transport(simulated.url) as transport:
            rig = Rig(transport, command_timeout=60.0)
            identity = rig.hello()
            if not identity.capabilities & p.CAP_ENGINE:
                raise SystemExit("this rig has no measurement engine")

            def take(frames):
                for frame in frames:
                    if isinstance(frame.msg, p.EngineBins):
                        for e in frame.msg.entries:
                            if e.type == p.ENGINE_ENTRY_BIN:
                                received[(e.interval, e.kind, e.tag)][e.bin] += e.count
                            else:
                                closes[e.kind].add(e.interval)

            both = p.CAPTURE_ENABLE | p.CAPTURE_RISE | p.CAPTURE_FALL
            rig.command(p.CaptureConfig([(both if ch in (STIM, ISR, TASK, TAG) else 0, 0)
                                         for ch in range(identity.n_stimulus + identity.n_inputs)]))
            rig.command(p.EngineConfig(flags=p.ENGINE_ENABLE, start_channel=STIM, start_level=1,
                                       isr_channel=ISR, isr_level=1, task_channel=TASK, task_level=1,
                                       tag_channel=TAG, tag_level=1, interval_shift=args.shift,
                                       # The next stimulus closes each window long before this.
                                       deadline=deadline_limit(args.shift)))
            rig.command(p.StimConfig(channel=0, mode=0, invert=0, width=5, period=args.period, jitter=0,
                                     probability=0, burst_count=1, burst_spacing=10, count=args.stimuli, seed=1))
            first = rig.now() + 300_000
            rig.command(p.Start(channels=1, at_time=1, start=first))
            wall = time.monotonic()
            end = first + args.stimuli * args.period
            while rig.now() < end + 1000:
                take(rig.read()[1])
            rig.command(p.EngineFlush())
            take(rig.read()[1])
            stats = rig.command(p.EngineStatsReq(), reply=p.EngineStats)
            take(rig.read()[1])
            wall = time.monotonic() - wall
    injected = sim.read_dut_log(dut_log)
    expected = expected_bins(injected, first, args.period, args.shift)
    keys = set(expected) | set(received)
    zero = np.zeros_like(next(iter(expected.values())))
    differing = sum(int(np.count_nonzero(expected.get(k, zero) != received.get(k, zero))) for k in keys)
    binned = [k.untagged_count + k.tagged_count for k in stats.kinds]
    lost = (stats.samples_lost + stats.bins_lost + abs(args.stimuli - stats.samples)
            + sum(abs(args.stimuli - b) for b in binned))
    open_intervals = {iv for (iv, _, _) in expected} - set.intersection(*(closes[k] for k in range(3)))
    rate = identity.ts_hz / args.period
    print(f"engine: {stats.samples} samples, binned per kind {binned}, samples_lost {stats.samples_lost}, "
          f"bins_lost {stats.bins_lost}, {len({iv for iv, _, _ in expected})} intervals of 2^{args.shift} ticks "
          f"({len(open_intervals)} not closed), min spacing {stats.min_spacing} ticks, "
          f"trigger delay {stats.trigger_delay} ticks; simulated in {wall:.1f} s", file=sys.stderr)
    print(f"rig histograms: {args.stimuli} stimuli at {rate:.0f} stimuli/s (rig time), "
          f"samples lost {lost}, bins differing {differing + len(open_intervals)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stimuli", type=int, default=100_000)
    parser.add_argument("--period", type=int, default=50, help="ticks between stimuli (default 50)")
    parser.add_argument("--shift", type=int, default=20, help="interval boundaries every 2^SHIFT ticks")
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
