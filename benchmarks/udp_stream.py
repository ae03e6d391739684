"""The Ethernet stream at gigabit line rate against ``hilat capture udp://``.

Not a test: figures are printed, nothing is asserted by timing. The rig is tests/host/udp_rig.py
with its C sender (benchmarks/udp_sender.c, built here with cc): the stream rig's pattern (stimulus,
ISR and task edges, 5.95 records a stimulus, a stimulus every 100 ticks) in full datagrams of 1,472
bytes, ``--rate`` datagrams/s (81,000: gigabit Ethernet's line rate) for ``--seconds``. Against it one
``hilat capture udp://127.0.0.1:PORT`` subprocess doing all a capture does (stream.bin, decoding,
pairing, aggregation, edges.bin, samples, the .hlog, the live counters on stderr). Printed: what the
rig sent and the run received (meta.json ``counters.stream``), what was lost, the link's records/s
(the records sent over the time the C sender took), the processing's records/s (records over
the time from the first datagram decoded to the last records paired), how long after the last
datagram the processing was done, whether the summary finds the pattern exactly, and the capture's
peak RSS (``os.wait4``). The run directory (stream.bin: ~125 MB a second of stream) is deleted after.

    .venv/bin/python benchmarks/udp_stream.py                 # 60 s at 81,000 datagrams/s
    .venv/bin/python benchmarks/udp_stream.py --seconds 3

The last line is exactly
``udp stream: N records at R records/s, datagrams lost L, processing P records/s, peak RSS M MiB``.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # gateware/ and targets/ of the checkout
sys.path.insert(0, str(ROOT / "tests" / "host"))
import stream_rig  # noqa: E402
import udp_rig  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from capture_stream import mismatches  # noqa: E402

LINE_RATE = 81_000            # datagrams/s of 1,472 bytes on gigabit Ethernet
RECORDS_PER_DATAGRAM = 179


def build_sender(out_dir):
    exe = Path(out_dir) / "udp_sender"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(ROOT / "benchmarks" / "udp_sender.c")], check=True)
    return exe


def run(seconds, rate, out_dir, sender, progress=True):
    """One capture of ``seconds`` of stream at ``rate`` datagrams/s: the figures (a dict)."""
    stimuli = stream_rig.stimuli_for(int(seconds * rate * RECORDS_PER_DATAGRAM))
    with udp_rig.UdpRigProcess(stimuli=stimuli, rate=rate, sender=sender) as rig:
        cmd = stream_rig.capture_command(rig.url, stimuli, out_dir)
        if progress:
            cmd.remove("--no-progress")
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        stderr = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        sent = rig.proc.stdout.readline().split()   # udp_sender: D datagrams, R records in T s
    (run_dir,) = Path(out_dir).iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else None
    stream = meta["counters"]["stream"] or {}
    out = {"exit": os.waitstatus_to_exitcode(status), "wall_s": wall, "peak_rss_mib": usage.ru_maxrss / 1024,
           "cpu_user_s": usage.ru_utime, "cpu_system_s": usage.ru_stime,
           "stimuli": stimuli, "records": meta["records"], "stream": stream, "error": meta["error"],
           "stream_bin_mb": (run_dir / "stream.bin").stat().st_size / 1e6, "stderr": stderr,
           "sender_seconds": float(sent[-2]) if len(sent) >= 2 else None,
           "pattern": (", ".join(mismatches(summary, stimuli)) or "pattern found exactly") if summary else "no summary"}
    shutil.rmtree(run_dir)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds of stream at --rate (default 60)")
    ap.add_argument("--rate", type=float, default=LINE_RATE, help=f"datagrams/s (default {LINE_RATE})")
    ap.add_argument("--out", default=None, help="where the run directory goes (default: a temporary one)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hilat-udp-stream-", dir=args.out) as tmp:
        sender = build_sender(tmp)
        runs_dir = Path(tmp) / "runs"
        runs_dir.mkdir()
        r = run(args.seconds, args.rate, runs_dir, sender)
    s = r["stream"]
    sent = r["sender_seconds"] or 0
    processing = s.get("processing_seconds") or 0
    link_rate = (s.get("rig_records_sent") or 0) / sent if sent else 0.0
    proc_rate = r["records"] / processing if processing else 0.0
    print(f"rig: {r['stimuli']} stimuli, sent {s.get('rig_datagrams_sent')} datagrams "
          f"({s.get('rig_records_sent')} records); stream.bin {r['stream_bin_mb']:.0f} MB")
    print(f"run: {r['records']} records in {s.get('datagrams')} datagrams, lost {s.get('datagrams_lost')} datagrams "
          f"({s.get('records_lost')} records), socket buffer {s.get('socket_buffer_bytes', 0) >> 20} MiB; exit code "
          f"{r['exit']}, error {r['error']}")
    print(f"link: the sender took {sent:.2f} s: {link_rate:,.0f} records/s, "
          f"{(s.get('rig_datagrams_sent') or 0) / max(sent, 1e-9):,.0f} datagrams/s")
    print(f"processing: {processing:.2f} s, {proc_rate:,.0f} records/s ({proc_rate / max(link_rate, 1):.2f} of the "
          f"link); done {s.get('processing_done_after_last_arrival_s', 0):.2f} s after the last datagram, at most "
          f"{s.get('peak_lag_datagrams')} datagrams behind; capture wall {r['wall_s']:.1f} s")
    cpu_s = r["cpu_user_s"] + r["cpu_system_s"]
    print(f"capture CPU (every thread, its receiver process included): user {r['cpu_user_s']:.1f} s, system "
          f"{r['cpu_system_s']:.1f} s, {r['records'] / max(cpu_s, 1e-9):,.0f} records per CPU second")
    print(f"pattern: {r['pattern']}")
    live = [line for line in r["stderr"].splitlines() if "datagrams/s" in line]
    if live:
        print(f"last live line: {live[-1][-160:]}")
    print(f"udp stream: {r['records']} records at {link_rate:.0f} records/s, datagrams lost "
          f"{s.get('datagrams_lost')}, processing {proc_rate:.0f} records/s, peak RSS {r['peak_rss_mib']:.0f} MiB")
    return 0 if r["exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
