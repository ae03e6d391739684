"""On-rig histograms at a stimulus rate the link could never carry as raw edges (not a test).

The simulated rig with the measurement engine (``sim.build(with_engine=True)``) fires a stimulus
every PERIOD ticks (50 ticks at the simulator's 50 MHz: 10^6 stimuli/s of rig time); the DUT model
answers inside each period (below 26 ticks a faster DUT is taken, see ``dut_for``; ``--dut KEY=VALUE``
changes a setting). Raw edges are off: only bins, closes and statistics cross the link. The rig's
histograms, per interval, kind and tag, are compared bin for bin with the injected latencies (the
DUT model's log) binned by the host's HdrHistogram code, and its misses with the log's.

    .venv/bin/python benchmarks/rig_histograms.py [--stimuli N] [--period TICKS] [--shift S] [--dut K=V ...]

Last line: ``rig histograms: N stimuli at R stimuli/s (rig time), samples lost L, bins differing D,
misses differing M (DUT: A answered, B missed, C busy)``. L is what the engine counted as lost
(``samples_lost``: windows lost at the crossing, a kind's value beyond a sweep; ``bins_lost``) plus
the windows, and per kind the values, missing from its statistics without being counted. A DUT miss
is no loss: the engine counts it as a miss (M compares those with the log). A stimulus the DUT
ignores because it is still answering the previous one ("busy": the period is shorter than its
response) is a miss too, but its window may hold the previous stimulus's responses: with C > 0 the
bins and misses differ by the DUT's doing, not the engine's.
"""

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from hilat.engine import ENGINE_HDR, deadline_limit
from hilat.hdr import HdrHistogram
from hilat.link import protocol as p
from hilat.link.rig import Rig
from hilat.link.transport import Transport

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # gateware/ and targets/ of the checkout
from targets import sim, simrig  # noqa: E402

# The DUT model answers well inside a 50-tick period: ISR at 5..12 ticks for 3 ticks, the task 4..11
# ticks later for 3 ticks, the tag (DMA) raised from S+1 to the task's end on 1 stimulus in 8. It
# ignores a stimulus until the task's pulse has ended (26 ticks at most).
DUT = dict(seed=9, isr_base=5, isr_spread_bits=3, isr_width=3, resched_base=4, resched_spread_bits=3,
           task_width=3, tag_per1024=128, miss_per1024=0, mask_per1024=0)
# For shorter periods: ISR at 1..4 ticks for 1, the task 1..2 ticks later for 1: done within 7 ticks.
FAST_DUT = dict(DUT, isr_base=1, isr_spread_bits=2, isr_width=1, resched_base=1, resched_spread_bits=1,
                task_width=1)


def response_ticks(dut):
    """Ticks from a stimulus to the end of the DUT model's longest response (its task pulse): a
    stimulus that comes sooner is ignored ("busy"). The ISR pulse must end by then too."""
    isr_last = dut["isr_base"] + (1 << dut["isr_spread_bits"]) - 1
    if dut["mask_per1024"]:
        isr_last += dut.get("mask_ticks", 400)
    task_end = isr_last + dut["resched_base"] + (1 << dut["resched_spread_bits"]) - 1 + dut["task_width"]
    return max(task_end, isr_last + dut["isr_width"])


def dut_for(period, overrides):
    """The benchmark's DUT, or the fast one when the period is shorter than its response."""
    dut = dict(DUT if response_ticks(DUT) <= period else FAST_DUT)
    dut.update(overrides)
    return dut
STIM, ISR, TASK, TAG = 0, 2, 3, 5   # channels: stim0, in0, in1, in3 (the default roles)


def expected_bins(injected, first_tick, period, shift):
    """{(interval, kind, tag): counts array} of the injected latencies."""
    hdr = HdrHistogram(**ENGINE_HDR)
    starts = first_tick + period * np.arange(len(injected), dtype=np.int64)
    interval = starts >> shift
    tag = injected[:, 4].astype(np.int64)
    answered = injected[:, 1] == 0    # a missed stimulus (drawn, or the DUT busy) has no values
    values = {0: injected[:, 2], 1: injected[:, 3], 2: injected[:, 3] - injected[:, 2]}
    out = {}
    for kind, v in values.items():
        index = hdr.counts_array_index(v.astype(np.int64))
        for (iv, t) in set(zip(interval.tolist(), tag.tolist())):
            sel = (interval == iv) & (tag == t) & answered
            out[(iv, kind, t)] = np.bincount(index[sel], minlength=hdr.counts_len + 1)
    return out


def run(args):
    dut = dut_for(args.period, dict(kv.split("=", 1) for kv in args.dut))
    dut = {k: int(v) for k, v in dut.items()}
    work = Path(tempfile.mkdtemp(prefix="hilat-rig-histograms-"))
    dut_log = work / "injected.csv"
    received = defaultdict(lambda: np.zeros(HdrHistogram(**ENGINE_HDR).counts_len + 1, np.int64))
    closes = defaultdict(set)
    with simrig.running({"on_rig": True, "dut": dut, "run_dir": work / "sim", "dut_log": dut_log}) as simulated:
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
            rig.command(p.StimConfig(channel=0, mode=0, invert=0, width=min(5, args.period // 2), period=args.period,
                                     jitter=0, probability=0, burst_count=1, burst_spacing=10, count=args.stimuli,
                                     seed=1))
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
    misses = [k.misses for k in stats.kinds]
    # Each stimulus is one window and, per kind, one binned value, miss or below-range value: what
    # the engine counted as lost (windows at the crossing, a kind's value beyond a sweep; spills),
    # plus any window or kind's value missing without being counted.
    uncounted = max(0, args.stimuli - stats.samples - stats.samples_lost) + sum(
        abs(stats.samples - b - k.misses - k.below) for b, k in zip(binned, stats.kinds))
    lost = stats.samples_lost + stats.bins_lost + uncounted
    missed = [int((injected[:, 1] == m).sum()) for m in (0, 1, 2)]   # answered, drawn misses, busy
    misses_differing = sum(abs(m - (missed[1] + missed[2])) for m in misses)
    open_intervals = {iv for (iv, _, _) in expected} - set.intersection(*(closes[k] for k in range(3)))
    rate = identity.ts_hz / args.period
    print(f"engine: {stats.samples} samples, binned per kind {binned}, misses per kind {misses}, "
          f"samples_lost {stats.samples_lost}, bins_lost {stats.bins_lost}, uncounted {uncounted}, "
          f"{len({iv for iv, _, _ in expected})} intervals of 2^{args.shift} ticks "
          f"({len(open_intervals)} not closed), min spacing {stats.min_spacing} ticks, "
          f"trigger delay {stats.trigger_delay} ticks, ts {identity.ts_hz / 1e6:g} MHz, "
          f"sys {identity.sys_hz / 1e6:g} MHz; DUT response within {response_ticks(dut)} ticks "
          f"({' '.join(f'{k}={v}' for k, v in dut.items())}); simulated in {wall:.1f} s", file=sys.stderr)
    print(f"rig histograms: {args.stimuli} stimuli at {rate:.0f} stimuli/s (rig time), "
          f"samples lost {lost}, bins differing {differing + len(open_intervals)}, "
          f"misses differing {misses_differing} "
          f"(DUT: {missed[0]} answered, {missed[1]} missed, {missed[2]} busy)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stimuli", type=int, default=100_000)
    parser.add_argument("--period", type=int, default=50, help="ticks between stimuli (default 50)")
    parser.add_argument("--shift", type=int, default=20, help="interval boundaries every 2^SHIFT ticks")
    parser.add_argument("--dut", action="append", default=[], metavar="KEY=VALUE",
                        help="a DUT model setting (targets/dut/hilat_dut_model.v), e.g. isr_base=3")
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
