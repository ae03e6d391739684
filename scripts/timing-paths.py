#!/usr/bin/env python3
"""Every endpoint of a routed design near or over the period, not only the worst one nextpnr prints.

nextpnr's log gives one critical path per clock, and a route is 15 minutes or more: timing work wants
the whole list from one run. A ``--report`` JSON written with ``--detailed-timing-report`` (as
scripts/fmax-cores.sh and the board builds' fmax runs write) lists, for every net, the latest arrival
time at each of its register and block inputs; this prints the latest ones of one clock, launched
and captured by that clock, grouped by the register (a bus's bits on one line). Arrival times leave
out the sink's setup time (0.1 to 0.4 ns on ECP5), so nextpnr's own Fmax is somewhat lower than the
worst line here suggests.

Usage: scripts/timing-paths.py REPORT.json [--clock ts_clk] [--mhz 140] [--margin 0.8] [--lines 40]
"""
import argparse
import collections
import json
import re


def register_of(cell):
    """A flip-flop or block by the signal it holds (yosys names cells after their nets), bits merged."""
    name = re.split(r"_TRELLIS_FF|\$DPRAM|_DPR16X4", cell)[0]
    return re.sub(r"\.\d+$", "", name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--clock", default="ts_clk", help="a clock name as in the report (its net name)")
    ap.add_argument("--mhz", type=float, default=140.0)
    ap.add_argument("--margin", type=float, default=0.8, help="also list endpoints this many ns inside the period")
    ap.add_argument("--lines", type=int, default=40)
    args = ap.parse_args()
    event, period = f"posedge {args.clock}", 1000 / args.mhz
    arrival = {}   # (cell, port) -> latest arrival, ns
    for net in json.load(open(args.report))["detailed_net_timings"]:
        if net.get("event") != event:
            continue
        for ep in net["endpoints"]:
            if ep.get("event") == event:
                key = (ep["cell"], ep["port"])
                arrival[key] = max(arrival.get(key, 0.0), ep["delay"][1])
    groups = collections.defaultdict(list)
    for (cell, port), t in arrival.items():
        groups[(register_of(cell), port)].append(t)
    worst = sorted(groups.items(), key=lambda kv: -max(kv[1]))
    failing = sum(1 for t in arrival.values() if t > period)
    print(f"{args.clock} at {args.mhz:g} MHz ({period:.2f} ns): {failing} of {len(arrival)} endpoints fail")
    for (register, port), times in worst[:args.lines]:
        if max(times) < period - args.margin:
            break
        late = sum(1 for t in times if t > period)
        print(f"{max(times):6.2f} ns  {register}.{port}  ({len(times)} bits, {late} over)")


if __name__ == "__main__":
    main()
