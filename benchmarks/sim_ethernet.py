"""Benchmark: the simulated rig streaming its raw edges over its Ethernet link (not a test: figures are
printed, nothing is asserted).

The simulated rig with Ethernet (targets/sim.py, ``build(ethernet=True)``) and the model DUT run in a
network namespace this benchmark makes (targets/netns.py; root); ``hilat``'s capture takes the records
over ``udp://192.168.1.50`` (the stream's datagrams, no CPU on the record path) for at least 10^5
records, and every stimulus's measured ISR and task latencies are compared with what the DUT model
injected (its log). Stimuli come every 1,000 ticks on average (dither +-200: 20 us, above the model's
longest response), six records each, so the simulator, not the link, sets the pace.

Last line, exactly: ``sim ethernet: N records, lost L, latencies wrong W``: N the records the host
decoded from the stream, L the records lost anywhere (the stream's index jumps, the gateware's drops,
the rig's count of records sent minus N), W the stimuli whose result differs from the DUT's log (a
latency off by any tick, a miss that was not one or the reverse, a stimulus missing).

    .venv/bin/python benchmarks/sim_ethernet.py [--stimuli 17500] [--period 1000]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # gateware/ and targets/ of the checkout
from targets import netns, sim  # noqa: E402

DUT = {"seed": 11}                     # the model's default latencies, masks, misses and tags


def _run(sim_dir, work, stimuli, period, jitter):
    """In the namespace: the capture over udp://; its figures."""
    import numpy as np
    from hilat.acquisition.capture import Capture
    from hilat.acquisition.settings import CaptureSettings, StimulusSettings

    dut_log = work / "injected.csv"
    settings = CaptureSettings(count=stimuli, out_dir=work / "runs", progress=False, label="sim-ethernet",
                               stimulus=StimulusSettings(mode="dither", period=period, jitter=jitter, seed=5))
    with sim.SimulatedRig(sim_dir, work / "sim", dut_args=DUT, dut_log=dut_log) as rig:
        started = time.monotonic()
        capture = Capture(rig.udp_url, settings).run()
        seconds = time.monotonic() - started
    if capture.error is not None or capture.interrupted:
        raise RuntimeError(f"capture failed: {capture.error}")
    meta = json.loads((capture.run_dir / "meta.json").read_text())
    stream, counters = meta["counters"]["stream"], meta["counters"]
    injected = sim.read_dut_log(dut_log)
    pairing = capture.pairing()
    n = min(len(injected), len(pairing.stim_mu))
    log_missed = injected[:n, 1] != 0
    wrong = abs(len(injected) - len(pairing.stim_mu))
    for measured, column in ((pairing.isr_latency[:n], 2), (pairing.task_latency[:n], 3)):
        measured_missed = measured == -1
        wrong_now = (log_missed != measured_missed) | (~log_missed & (measured != injected[:n, column]))
        wrong += int(wrong_now.sum())
    dropped = sum(counters.get("gateware_dropped_per_channel") or [0])
    return {"seconds": seconds, "stimuli": len(pairing.stim_mu), "injected": len(injected),
            "records": stream["records"], "rig_records_sent": stream["rig_records_sent"],
            "datagrams": stream["datagrams"], "heartbeats": stream["heartbeats"],
            "datagrams_lost": stream["datagrams_lost"], "records_lost": stream["records_lost"],
            "late": stream["late"], "stale": stream["stale"], "malformed": stream["malformed"],
            "overflow_markers": stream["overflow_markers"], "gateware_dropped": dropped,
            "ticks": int(np.int64(injected.shape[0]) * period), "wrong": wrong,
            "link_errors": len(netns.link_errors(work / "sim" / "sim.log")), "run_dir": str(capture.run_dir)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stimuli", type=int, default=17_500, help="stimuli (about 6 records each)")
    parser.add_argument("--period", type=int, default=1000, help="mean ticks between stimuli")
    parser.add_argument("--jitter", type=int, default=200, help="dither of the period, +- ticks")
    args = parser.parse_args(argv)
    reason = netns.unavailable_reason()
    if reason:
        print(f"sim ethernet: cannot run here: {reason}", file=sys.stderr)
        return 2
    built = time.monotonic()
    sim_dir = sim.build(ethernet=True)
    print(f"simulator with Ethernet: {sim_dir.name} ({time.monotonic() - built:.0f} s to build or find)", flush=True)
    with tempfile.TemporaryDirectory(prefix="hilat-sim-ethernet-") as work:
        r = netns.call(_run, sim_dir, Path(work), args.stimuli, args.period, args.jitter, timeout=3600)
    lost = r["records_lost"] + r["gateware_dropped"] + max(0, r["rig_records_sent"] - r["records"])
    print(f"stimuli: {r['stimuli']} measured of {r['injected']} injected, every {args.period} +- {args.jitter} ticks")
    print(f"stream: {r['datagrams']} datagrams ({r['heartbeats']} heartbeats), {r['records']} records of "
          f"{r['rig_records_sent']} the rig sent; datagrams lost {r['datagrams_lost']}, late {r['late']}, "
          f"stale {r['stale']}, malformed {r['malformed']}; overflow markers {r['overflow_markers']}, "
          f"records dropped in gateware {r['gateware_dropped']}; bad frames on the GMII link {r['link_errors']}")
    print(f"run time: {r['seconds']:.1f} s for {r['ticks'] / 50e6 * 1e3:.0f} ms of simulated time: "
          f"{r['records'] / r['seconds']:.0f} records/s, {r['ticks'] / r['seconds'] / 1e3:.0f} k ticks/s (wall)")
    print(f"sim ethernet: {r['records']} records, lost {lost}, latencies wrong {r['wrong']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
