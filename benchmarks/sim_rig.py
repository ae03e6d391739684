"""Benchmarks of the simulated rig (not tests: figures are printed, nothing is asserted).

1. Simulator speed: rig ticks (= sys cycles, one clock in the simulator) per wall-clock second, and
   per CPU-second of the simulator process (what it would run at alone on a core: the figure to
   trust on a loaded machine), for each DUT: the Verilog model, then each CPU DUT (targets/dut/
   cpu_soc.py's CPUS: VexRiscv, PicoRV32 where built) at its default clock and VexRiscv also at an
   unrelated one; idle and while streaming a capture.
2. Firmware path cost (model DUT): the shortest stimulus period the firmware sustains without a single
   record lost in gateware, as records/s, and the sys cycles per record that implies; then the
   records/s a 3 Mbaud link carries at the measured bytes per record, for comparison.

    .venv/bin/python benchmarks/sim_rig.py [--speed-only]
"""

import os
import sys
import tempfile
import time
from pathlib import Path

from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.link.rig import Rig
from hilat.link.transport import Transport

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # gateware/ and targets/ of the checkout
from targets import sim, simrig  # noqa: E402

CPU_DUTS = ("vexriscv", "picorv32")
UNRELATED_CLOCK_HZ = 33_333_700
SLOW_CPUS = {"picorv32": 3}            # their stimuli this many times further apart
STREAM_PERIOD, STREAM_COUNT = 4000, 1500   # about 6 M ticks of streaming, 6 records a stimulus


def cpu_seconds(pid):
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rig_now(rig):
    with Transport(rig.url) as t:
        r = Rig(t)
        r.hello()
        return r.now()


def idle_speed(rig, seconds=3.0):
    """Rig ticks per wall-clock second and per CPU-second of the simulator, with nothing to capture."""
    with Transport(rig.url) as t:
        r = Rig(t)
        r.hello()
        t0, c0, n0 = time.monotonic(), cpu_seconds(rig.process.pid), r.now()
        time.sleep(seconds)
        t1, c1, n1 = time.monotonic(), cpu_seconds(rig.process.pid), r.now()
    return (n1 - n0) / (t1 - t0), (n1 - n0) / max(c1 - c0, 1e-9)


def streaming_speed(rig, period, count, out):
    """As idle_speed, over a capture of ``count`` stimuli ``period`` ticks apart: every tick simulated from
    just before it to just after it (its setup too, a small part of a long capture)."""
    t0, c0, n0 = time.monotonic(), cpu_seconds(rig.process.pid), rig_now(rig)
    run(rig, period, count, out)
    t1, c1, n1 = time.monotonic(), cpu_seconds(rig.process.pid), rig_now(rig)
    return (n1 - n0) / (t1 - t0), (n1 - n0) / max(c1 - c0, 1e-9)


def run(rig, period, count, out):
    """A periodic capture: the capture, records lost in gateware, raw bytes and wall seconds."""
    settings = CaptureSettings(count=count, out_dir=out, progress=False, label=f"p{period}",
                               stimulus=StimulusSettings(mode="periodic", period=period, jitter=0, width=10))
    t0 = time.monotonic()
    cap = Capture(rig.url, settings).run()
    wall = time.monotonic() - t0
    lost = sum(cap.status.dropped) if cap.status else None
    raw = (cap.run_dir / "raw.bin").stat().st_size
    return cap, lost, raw, wall


def span_ticks(cap):
    """The ticks between the capture's first and last edge (the capture streams its records: none kept)."""
    stream = cap.stream
    return (stream.last_mu - stream.first_mu) // cap.units_per_tick if cap.records_received > 1 else 0


def speed_line(name, state, wall_rate, cpu_rate):
    print(f"simulator speed, {name}, {state + ':':10s} {wall_rate / 1e6:.2f} M cycles/s "
          f"({cpu_rate / 1e6:.2f} M per CPU-second)", flush=True)


def model_dut(out, speed_only):
    with simrig.running({"run_dir": out / "sim"}) as rig:
        speed_line("model DUT", "idle", *idle_speed(rig))
        speed_line("model DUT", "streaming", *streaming_speed(rig, STREAM_PERIOD, STREAM_COUNT, out))
        if speed_only:
            return
        best = None
        for period in (4000, 3000, 2000, 1500, 1200, 1000, 800):
            cap, lost, raw, wall = run(rig, period, 400, out)
            records, span = cap.records_received, span_ticks(cap)
            rate = records / (span / cap.identity.ts_hz) if span else 0
            print(f"period {period:5d} ticks: {records} records, {rate / 1e3:7.1f} k records/s, "
                  f"lost in gateware {lost}, {raw / max(records, 1):.2f} wire bytes/record", flush=True)
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


def cpu_dut(cpu, out, clock_hz=None):
    """Idle and streaming speed with a CPU DUT (its own clock at ``clock_hz``, default DUT_CPU_CLK_FREQ)."""
    try:
        sim_dir = sim.build(dut_cpu=cpu)
    except Exception as e:          # a CPU the simulated rig does not build (yet): say so, go on
        print(f"simulator speed, {cpu} DUT: not built ({type(e).__name__}: {str(e)[:200]})", flush=True)
        return
    hz = clock_hz or sim.DUT_CPU_CLK_FREQ
    name = f"{cpu} DUT at {hz / 1e6:g} MHz"
    # A slow CPU (PicoRV32: about 7000 ticks a stimulus) gets its stimuli further apart.
    period = STREAM_PERIOD * SLOW_CPUS.get(cpu, 1)
    with sim.SimulatedRig(sim_dir, out / f"sim-{cpu}-{hz}", dut_args={"console": out / f"console-{cpu}-{hz}.txt"},
                          dut_cpu_clk_hz=clock_hz) as rig:
        speed_line(name, "idle", *idle_speed(rig))
        speed_line(name, "streaming", *streaming_speed(rig, period, STREAM_COUNT // SLOW_CPUS.get(cpu, 1), out))


def main(argv=None):
    speed_only = "--speed-only" in (argv if argv is not None else sys.argv[1:])
    out = Path(tempfile.mkdtemp(prefix="hilat-bench-"))
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (a loaded machine lowers the wall-clock "
          "figures, less the per-CPU-second ones)", flush=True)
    model_dut(out, speed_only)
    from targets.dut.cpu_soc import CPUS
    for cpu in CPU_DUTS:
        if cpu in CPUS:
            cpu_dut(cpu, out)
    cpu_dut("vexriscv", out, UNRELATED_CLOCK_HZ)
    return 0


if __name__ == "__main__":
    sys.exit(main())
