"""Capture throughput and memory against a rig that streams as fast as the host takes them.

Not a test: figures are printed, nothing is asserted by timing. The rig is tests/host/stream_rig.py
(its own process; a known pattern of ISR and task latencies, 5.95 records per stimulus, a stimulus
every 100 ticks = 2 us). First the rig alone: records/s into a raw socket reader that only counts
bytes and frames (the ceiling any host could reach here). Then for each size N (records) one
``hilat capture`` subprocess of the stimuli whose records make N at most (periodic, 100 ticks, no
jitter, a 100-tick window, no calibration): its wall time, its peak RSS (``os.wait4``, ru_maxrss),
the records of its run (meta.json), what it lost (decoder lost + corrupt + malformed, gateware drops
and overflow markers), and whether its summary.json finds the pattern exactly (stimuli, min and
max of the ISR and task latencies, misses). The run directory is deleted after each size.

    .venv/bin/python benchmarks/capture_stream.py                      # 10^6, 10^7, 10^8 records
    .venv/bin/python benchmarks/capture_stream.py --sizes 1e5,1e6

While ``hilat capture`` keeps every record in memory (before the streaming capture), stay at 10^6
records or below. The 10^6 run is the reference of the memory ratio: it is run too when --sizes lacks it. The last
line is ``capture stream: N records at R records/s, peak RSS M MiB (x.xx of the 10^6 run), lost L``
for the largest N.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hilat.link import protocol as p

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "host"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # gateware/ and targets/ of the checkout
import stream_rig  # noqa: E402

REFERENCE = 10**6


def size(text):
    value = float(text)
    if value < 1 or not value.is_integer():
        raise argparse.ArgumentTypeError(f"not a whole number of records: {text!r}")
    return int(value)


def raw_rate(url, records):
    """Records/s of the rig alone: HELLO, START of the stimuli of ``records``, then read and count
    until it is quiet; the rig's STATUS says how many records it sent."""
    host, port = url.removeprefix("socket://").rsplit(":", 1)
    decoder = p.FrameDecoder()
    with socket.create_connection((host, int(port)), timeout=5) as s:
        def reply(msg, seq, cls):
            s.sendall(msg.encode(seq))
            while True:
                for frame in decoder.feed(s.recv(65536)):
                    if isinstance(frame.msg, cls):
                        return frame.msg

        reply(p.Hello(), 0, p.Identify)
        reply(p.StimConfig(0, p.MODE_PERIODIC, count=stream_rig.stimuli_for(records)), 1, p.Ack)
        now = reply(p.TimeReq(), 2, p.Time).now
        t0 = time.monotonic()
        s.sendall(p.Start(channels=1, at_time=1, start=now + 50_000).encode(3))
        buf = bytearray(1 << 20)
        received = frames = 0
        last = t0
        s.settimeout(0.3)
        try:
            while n := s.recv_into(buf):
                received += n
                frames += buf.count(0, 0, n)
                last = time.monotonic()
        except TimeoutError:
            pass
        s.settimeout(5)
        decoder.reset_sequence(None)
        status = reply(p.StatusReq(), 4, p.Status)
    return status.records_sent, frames, received, last - t0


def lost(meta):
    counters = meta.get("counters") or {}
    decoder = counters.get("decoder") or {}
    return (sum(int(decoder.get(k) or 0) for k in ("lost", "corrupt", "malformed"))
            + sum(counters.get("gateware_dropped_per_channel") or [])
            + int(counters.get("gateware_overflow_markers") or 0))


def mismatches(summary, stimuli):
    """What the run's report document says that the pattern does not ([] when all agrees)."""
    want = stream_rig.expected(stimuli)
    (run,) = summary["runs"]
    rows = run["subsets"]["all"]
    found = {"stimuli": run["stimuli"],
             "isr_min": rows["stim_to_isr"]["mu"]["min"], "isr_max": rows["stim_to_isr"]["mu"]["max"],
             "isr_misses": rows["stim_to_isr"]["misses"],
             "task_min": rows["stim_to_task"]["mu"]["min"], "task_max": rows["stim_to_task"]["mu"]["max"],
             "task_misses": rows["stim_to_task"]["misses"]}
    return [f"{k} {found[k]} (expected {want[k]})" for k in found if found[k] != want[k]]


def capture(url, records, out, readers=False):
    stimuli = stream_rig.stimuli_for(records)
    out.mkdir(parents=True)
    log = out / "capture.log"
    with open(log, "w") as f:
        t0 = time.monotonic()
        proc = subprocess.Popen(stream_rig.capture_command(url, stimuli, out), stdout=f, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    result = {"n": records, "stimuli": stimuli, "wall": wall, "rss_mib": usage.ru_maxrss / 1024,
              "code": proc.returncode, "records": 0, "lost": None, "verdict": "no run directory"}
    run_dirs = [d for d in out.iterdir() if d.is_dir()]
    if run_dirs:
        meta = json.loads((run_dirs[0] / "meta.json").read_text())
        result["records"] = int(meta.get("records") or 0)
        result["lost"] = lost(meta)
        try:
            wrong = mismatches(json.loads((run_dirs[0] / "summary.json").read_text()), stimuli)
            result["verdict"] = "pattern found exactly" if not wrong else "WRONG: " + ", ".join(wrong)
        except FileNotFoundError:
            result["verdict"] = "no summary.json"
    if proc.returncode != 0:
        tail = log.read_text().strip().splitlines()[-5:]
        result["verdict"] += f"; capture exit code {proc.returncode}: " + " | ".join(tail)
    if readers and run_dirs:
        result["readers"] = read_back(run_dirs[0], out)
    shutil.rmtree(out)
    return result


# What a user runs on the run afterwards; each must stay within the capture's memory bound.
READERS = {"report": ["report", "{run}"], "compare": ["compare", "{run}", "{run}"],
           "export --hlog": ["export", "{run}", "--hlog", "{out}/isr.hlog"],
           "export --csv": ["export", "{run}", "--csv", "{out}/samples.csv"]}


def read_back(run_dir, out):
    """Wall time and peak RSS of each reader on the run (stdout to /dev/null)."""
    results = {}
    for name, argv in READERS.items():
        cmd = [sys.executable, "-m", "hilat", *(a.format(run=run_dir, out=out) for a in argv)]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        results[name] = {"wall": time.monotonic() - t0, "rss_mib": usage.ru_maxrss / 1024,
                         "code": os.waitstatus_to_exitcode(status)}
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=lambda t: [size(x) for x in t.split(",")], default=[10**6, 10**7, 10**8],
                    help="records per capture, comma-separated (default 1e6,1e7,1e8)")
    ap.add_argument("--raw-records", type=size, default=3 * 10**7,
                    help="records of the rig-alone measurement (default 3e7; 0: skip it)")
    ap.add_argument("--out", type=Path, default=None, help="where the run directories go (default: a temporary one)")
    ap.add_argument("--no-readers", action="store_true",
                    help="skip report, compare and exports on the largest run")
    args = ap.parse_args(argv)
    sizes = sorted(set(args.sizes) | {REFERENCE})
    base = Path(tempfile.mkdtemp(prefix="hilat-stream-", dir=args.out))
    results = {}
    try:
        with stream_rig.StreamRig() as rig:
            if args.raw_records:
                records, frames, received, seconds = raw_rate(rig.url, args.raw_records)
                print(f"stream rig alone: {records} records ({frames} frames, {received / 1e6:.1f} MB) in "
                      f"{seconds:.2f} s = {records / seconds:,.0f} records/s into a raw socket reader", flush=True)
            for n in sizes:
                r = capture(rig.url, n, base / f"n{n}", readers=not args.no_readers and n == sizes[-1])
                results[n] = r
                print(f"{n:>11,} records: {r['records']:,} captured ({r['stimuli']:,} stimuli) in {r['wall']:.1f} s "
                      f"= {r['records'] / r['wall']:,.0f} records/s, peak RSS {r['rss_mib']:.0f} MiB, "
                      f"lost {r['lost']}; {r['verdict']}", flush=True)
                for name, rr in (r.get("readers") or {}).items():
                    print(f"    hilat {name} of that run: {rr['wall']:.1f} s, peak RSS {rr['rss_mib']:.0f} MiB, "
                          f"exit code {rr['code']}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    r = results[sizes[-1]]
    ratio = r["rss_mib"] / results[REFERENCE]["rss_mib"]
    print(f"capture stream: {r['n']} records at {r['records'] / r['wall']:.0f} records/s, peak RSS "
          f"{r['rss_mib']:.0f} MiB ({ratio:.2f} of the 10^6 run), lost {r['lost']}")
    return 0 if all(x["code"] == 0 for x in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
