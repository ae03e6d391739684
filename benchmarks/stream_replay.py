"""The capture's processing of an Ethernet stream without the network: a run's stream.bin replayed.

Not a test: figures are printed, nothing is asserted by timing. The first ``--slots`` datagrams of a
udp:// run's stream.bin (keep one from ``benchmarks/udp_stream.py --out DIR``, or any capture) go
through the capture's own path: ``udp.StreamDecoder.feed`` in batches of 4,096 slots, then
``Session._deliver_stream`` into ``stream._Stream`` (edges.bin, the streaming pairing, samples/, the
rolling .hlog) writing into a temporary run directory. Printed: the decoder's and the processing's
records/s (wall and CPU time), both stages together; ``--profile``: cProfile's top functions of the
processing.

    .venv/bin/python benchmarks/stream_replay.py RUN_DIR [--slots 100000] [--profile]
"""

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from hilat import analysis
from hilat.acquisition.stream import _Stream
from hilat.link import udp
from hilat.link.session import Session
from hilat.reports.interval_log import IntervalLog
from hilat.rundir.reader import load_run
from hilat.rundir.replay import stream_of
from hilat.rundir.writer import RunWriter

DECODE_SLOTS = 4096


def replay(run_dir, slots, out_dir, profile=False):
    run = load_run(run_dir)
    stream_info = stream_of(run.meta)
    if stream_info is None:
        raise SystemExit(f"{run_dir}: not a udp:// run (no stream in meta.json)")
    with open(Path(run_dir) / "stream.bin", "rb") as f:
        udp.check_file_header(f.read(udp.FILE_HEADER), f.name)
        data = np.fromfile(f, np.uint8, count=slots * udp.SLOT_BYTES)
    data = data[:len(data) // udp.SLOT_BYTES * udp.SLOT_BYTES].reshape(-1, udp.SLOT_BYTES)
    kinds = list(analysis.kind_titles(run.roles, run.analysis_measures, run.builtin))
    writer = RunWriter(out_dir)
    writer.set_kinds(kinds)
    (Path(out_dir) / "hlog").mkdir()
    hlog = IntervalLog(Path(out_dir) / "hlog" / "capture.hlog", run.unit.mu_hz, 1.0, time.time())
    stream = _Stream(writer, run.roles, run.analysis_measures, run.builtin, run.deadline_mu, run.offset_mu,
                     (run.roles.stimulus, run.roles.stimulus_active), run.unit.mu_hz, hlog=hlog, subticks=run.subticks)
    decoder = udp.StreamDecoder(stream_info["layout"], session=stream_info["session"])
    session = Session.__new__(Session)   # only its delivery to the consumer is used
    session.stream, session.overflows = None, 0

    t0, c0 = time.perf_counter(), time.process_time()
    batches = [decoder.feed(data[i:i + DECODE_SLOTS]) for i in range(0, len(data), DECODE_SLOTS)]
    batches.append(decoder.flush())
    decode = (time.perf_counter() - t0, time.process_time() - c0)
    records = sum(len(b.ticks) for b in batches)
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    t0, c0 = time.perf_counter(), time.process_time()
    for batch in batches:
        session._deliver_stream(batch, stream)
    stream.finish()
    process = (time.perf_counter() - t0, time.process_time() - c0)
    if profiler:
        profiler.disable()
    hlog.close(stream.last_mu)
    writer.close()
    return records, decode, process, stream, profiler


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="a udp:// run directory with its stream.bin")
    ap.add_argument("--slots", type=int, default=100_000, help="datagrams replayed (default 100,000)")
    ap.add_argument("--profile", action="store_true", help="cProfile the processing")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hilat-replay-") as tmp:
        records, decode, process, stream, profiler = replay(args.run_dir, args.slots, tmp, args.profile)
    rate = [records / max(s, 1e-9) for s in (*decode, *process)]
    print(f"stimuli {stream.aggregator.stimuli}, edges {stream.aggregator.edges}")
    print(f"decoder: {rate[0]:,.0f} records/s ({rate[1]:,.0f} of CPU time)")
    print(f"processing: {rate[2]:,.0f} records/s ({rate[3]:,.0f} of CPU time)")
    both = records / max(decode[0] + process[0], 1e-9)
    print(f"stream replay: {records} records, decoder and processing {both:.0f} records/s")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
