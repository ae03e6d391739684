"""Benchmarks of the simulated rig (not tests: figures are printed, nothing is asserted).

1. Simulator speed: rig ticks (= sys cycles, one clock in the simulator) per wall-clock second,
   with the DUT model attached, idle and while streaming.
2. Firmware path cost: the shortest stimulus period the firmware sustains without a single record
   lost in gateware, as records/s, and the sys cycles per record that implies; then the records/s a
   3 Mbaud link carries at the measured bytes per record, for comparison.

    .venv/bin/python benchmarks/sim_rig.py
"""

import sys
import tempfile
import time
from pathlib import Path

from hilat.capture import Capture, CaptureSettings, StimulusSettings
from hilat.rig import Rig
from hilat.transport import Transport

from targets import sim


def ticks_per_second(url, seconds=2.0):
    with Transport(url) as t:
        rig = Rig(t)
        rig.hello()
        t0, n0 = time.monotonic(), rig.now()
        time.sleep(seconds)
        t1, n1 = time.monotonic(), rig.now()
    return (n1 - n0) / (t1 - t0)


def run(url, period, count, out):
    settings = CaptureSettings(count=count, out_dir=out, progress=False, label=f"p{period}",
                               stimulus=StimulusSettings(mode="periodic", period=period, jitter=0, width=10))
    t0 = time.monotonic()
    cap = Capture(url, settings).run()
    wall = time.monotonic() - t0
    lost = sum(cap.status.dropped) if cap.status else None
    raw = (cap.run_dir / "raw.bin").stat().st_size
    return cap, lost, raw, wall


def main():
    sim_dir = sim.build()
    out = Path(tempfile.mkdtemp(prefix="hilat-bench-"))
    with sim.SimulatedRig(sim_dir, out / "sim") as rig:
        idle = ticks_per_second(rig.url)
        print(f"simulator speed, DUT attached, idle:      {idle / 1e6:.2f} M cycles/s")
        best = None
        for period in (4000, 3000, 2000, 1500, 1200, 1000, 800):
            cap, lost, raw, wall = run(rig.url, period, 400, out)
            # The capture keeps no records (it streams them): their count, and the span of its edges.
            records = cap.records_received
            stream = cap.stream
            span = (stream.last_tick - stream.first_tick) // cap.units_per_tick if records > 1 else 0
            rate = records / (span / cap.identity.ts_hz) if span else 0
            print(f"period {period:5d} ticks: {records} records, {rate / 1e3:7.1f} k records/s, "
                  f"lost in gateware {lost}, {raw / max(records, 1):.2f} wire bytes/record, "
                  f"simulator {span / wall / 1e6:.2f} M cycles/s while streaming")
            if lost == 0:
                best = (period, rate, cap.identity.sys_hz, raw / max(records, 1))
            else:
                break
    if best:
        period, rate, sys_hz, bytes_per_record = best
        print(f"firmware sustains >= {rate / 1e3:.1f} k records/s (period {period} ticks, 6 records per "
              f"stimulus): <= {sys_hz / rate:.0f} sys cycles per record")
        print(f"a 3 Mbaud link (300 kB/s) at {bytes_per_record:.2f} bytes/record carries "
              f"{300e3 / bytes_per_record / 1e3:.1f} k records/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
