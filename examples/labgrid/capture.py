"""A capture through labgrid: the place's HilatDriver (env.yaml), then its latency statistics.

    LG_COORDINATOR=127.0.0.1:20408 .venv-labgrid/bin/python examples/labgrid/capture.py --count 2000

Prints a table (times in microseconds), or with ``--json`` the rig's identity and each kind's
statistics with its exact samples in ticks (what tests/host/test_labgrid.py checks).
"""

import argparse
import json
from pathlib import Path

from labgrid import Environment


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, default=Path(__file__).with_name("env.yaml"),
                        help="labgrid environment file (default: env.yaml beside this script)")
    parser.add_argument("--count", type=int, default=2000, help="stimuli")
    parser.add_argument("--period", default="100us", help="stimulus period")
    parser.add_argument("--jitter", default="20us", help="dither: +- this around the period")
    parser.add_argument("--seed", type=int, default=1, help="the dither's seed")
    parser.add_argument("--out", default="runs", help="where the run directory goes")
    parser.add_argument("--json", action="store_true", help="print JSON, with every sample in ticks")
    args = parser.parse_args(argv)

    env = Environment(str(args.env))
    try:
        target = env.get_target("main")
        rig = target.get_driver("HilatDriver")          # activates it: opens the rig
        url, identity = rig.url, rig.info()
        run = rig.capture(count=args.count, period=args.period, jitter=args.jitter, seed=args.seed,
                          out_dir=args.out, label="labgrid")
    finally:
        env.cleanup()                                   # deactivates the driver

    if args.json:
        kinds = {}
        for kind in run.kinds:
            s = run.stats(kind)
            values = s.values_mu()
            kinds[kind] = {"count": s.count, "misses": s.misses, "min_s": s.min, "median_s": s.median,
                           "max_s": s.max, "values_mu": None if values is None else values.tolist()}
        print(json.dumps({"url": url, "identity": identity, "run": str(run.path),
                          "kinds": kinds}))
        return 0
    print(f"{run.path}: {args.count} stimuli through labgrid")
    print(f"{'latency':24} {'count':>7} {'misses':>7} {'min':>9} {'median':>9} {'p99':>9} {'max':>9}   (us)")
    for kind, title in run.kinds.items():
        s = run.stats(kind)
        p99 = s.percentile(99) if s.supports(99) else None
        cells = [f"{v * 1e6:9.2f}" if v is not None else f"{'-':>9}" for v in (s.min, s.median, p99, s.max)]
        print(f"{title:24} {s.count:>7} {s.misses:>7} {' '.join(cells)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
