"""A fake rig in its own process that streams EVENTS as fast as the host takes them.

    python tests/host/stream_rig.py --port 0 [--period TICKS] [--stimuli N] [--rate R]
    python -m tests.host.stream_rig ...                # the same, from the repository root

It prints its URL (``socket://127.0.0.1:PORT``) on stdout, then serves one host at a time: a new
connection replaces the old one, and a host that disconnects ends its session (the rig waits for the
next). From Python, ``StreamRig`` starts it and stops it (see its docstring).

The rig is ``fake_rig.identify()`` (2 stimulus outputs, 4 inputs, ts_hz 50 MHz). One thread, one
select() loop, one writer: command replies go out between EVENTS frames, and every frame sent takes
the next seq, replies included, as on the real rig. It answers HELLO (IDENTIFY; a new session: seqs,
counters and the stream reset), ACKs STIM_CONFIG, CAPTURE_CONFIG and STOP, answers TIME_REQ and
STATUS_REQ. START with stim0 in its mask starts the stream at START's tick (``at_time`` 0: now; a start
tick in the past is accepted, this rig has no ACK_LATE); STOP ends it at the next frame (frames hold
whole stimuli). The stream ends by itself after ``--stimuli`` stimuli or STIM_CONFIG's ``count`` for
stim0, whichever is lower (0: no limit), and STATUS then says STIM_DONE for stim0 (not after a STOP);
STIM_RUNNING while it streams. Nothing else (modes, widths, the capture configuration) changes what it sends.

Pattern (exact; ``isr_latency``, ``task_latency``, ``latencies`` and ``expected`` compute it for a test):
stimulus k rises at tick ``start + k * period`` and falls STIM_WIDTH ticks later; the ISR input (in0,
channel 2) rises ``isr_latency(k)`` ticks after the stimulus, the task input (in1, channel 3)
``task_latency(k)`` ticks after it, each for PULSE_WIDTH ticks; edges on the same tick share one record
(the ISR's fall and the task's rise, for some k). Every TASK_MISS_EVERY-th stimulus (k % 96 == 95) has
no task response at all (a miss). ISR latencies take 32 values (12..43), task latencies 50 (18..74);
a stimulus has 6 records, 5 when two edges share a tick, 4 when its task misses (5.95 on average).
The pattern repeats every PATTERN_CYCLE = 96 stimuli, all of whose edges lie within SPAN = 95 ticks
of the stimulus, so any ``--period`` of at least 95 keeps its responses before the next stimulus.

Clock (TIME): the tick of the last record sent plus the wall time since it was generated times ts_hz;
before the first START, the wall time since the process started. So after the stream ends the clock
moves on in real time, and while it streams it is never behind what was sent.

Speed: the EVENTS frames of a cycle of CYCLE_STIMULI stimuli are built once (bodies relative to their
base, whole stimuli per frame); per batch of frames only the seqs, bases and CRC32s change, written
with numpy, and the whole batch is COBS-encoded at once (a zero-delimited concatenation of frames
encodes frame by frame). Sends are non-blocking from a buffer refilled below LOW_WATER bytes: tens of
millions of records/s into a local socket. ``--rate R`` caps the records per second (a token bucket),
for tests that need a capture to last a few seconds.
"""

import argparse
import itertools
import os
import select
import socket
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
from hilat.link import protocol as p

try:
    from fake_rig import identify
except ImportError:  # run as python -m tests.host.stream_rig
    from tests.host.fake_rig import identify

# ---- the pattern -----------------------------------------------------------------------------------

STIM, ISR, TASK = 0, 2, 3        # channels: stim0, in0 (isr), in1 (task)
STIM_WIDTH = 10                  # ticks
PULSE_WIDTH = 20                 # ticks, ISR and task
TASK_MISS_EVERY = 96
PATTERN_CYCLE = 96               # isr_latency, task_latency and the misses repeat every 96 stimuli
MISSING = -1                     # hilat.analysis.MISSING
DEFAULT_PERIOD = 100             # ticks: 2 us at 50 MHz
CYCLE_STIMULI = PATTERN_CYCLE * 64   # stimuli of the precomputed frames
# Bytes in flight delay every reply (a host reads them first): the send buffer is refilled below
# LOW_WATER bytes, BATCH_FRAMES frames (~32 KB) at a time, into a socket of SNDBUF bytes.
LOW_WATER = 32 * 1024
BATCH_FRAMES = 128
SNDBUF = 32 * 1024


def isr_latency(k):
    """Ticks from stimulus k to its ISR rise (k an int or a numpy array)."""
    return 12 + (7 * k) % 32


def task_latency(k):
    """Ticks from stimulus k to its task rise, MISSING for a miss (k an int or a numpy array)."""
    k = np.asarray(k, dtype=np.int64)
    j = k % PATTERN_CYCLE
    t = np.where(k % TASK_MISS_EVERY == TASK_MISS_EVERY - 1, MISSING, isr_latency(k) + 6 + (j + 5 * (j // 4)) % 28)
    return t if t.ndim else int(t)


def stimulus_records(k):
    """Records (offset from the stimulus tick, channel mask, levels) of stimulus k, in tick order."""
    isr, task = isr_latency(k), task_latency(k)
    edges = [(0, STIM, 1), (STIM_WIDTH, STIM, 0), (isr, ISR, 1), (isr + PULSE_WIDTH, ISR, 0)]
    if task != MISSING:
        edges += [(task, TASK, 1), (task + PULSE_WIDTH, TASK, 0)]
    records, levels = [], 0
    for tick, group in itertools.groupby(sorted(edges), key=lambda e: e[0]):
        mask = 0
        for _, ch, level in group:
            mask |= 1 << ch
            levels = levels & ~(1 << ch) | level << ch
        records.append((tick, mask, levels))
    return records


def pattern_records(start, first, end, period=DEFAULT_PERIOD):
    """Records (tick, mask, levels) of stimuli first..end-1 of a stream that started at tick ``start``."""
    return [(start + k * period + off, mask, levels)
            for k in range(first, end) for off, mask, levels in stimulus_records(k)]


_CYCLE_RECORDS = [len(stimulus_records(k)) for k in range(PATTERN_CYCLE)]
RECORDS_PER_CYCLE = sum(_CYCLE_RECORDS)     # records of PATTERN_CYCLE stimuli
SPAN = max(stimulus_records(k)[-1][0] for k in range(PATTERN_CYCLE)) + 1  # ticks a stimulus's edges take


def records_for(stimuli):
    """Records the rig sends for that many stimuli."""
    q, r = divmod(stimuli, PATTERN_CYCLE)
    return q * RECORDS_PER_CYCLE + sum(_CYCLE_RECORDS[:r])


def stimuli_for(records):
    """The most stimuli whose records do not exceed ``records``."""
    q, r = divmod(records, RECORDS_PER_CYCLE)
    extra = sum(1 for n in itertools.accumulate(_CYCLE_RECORDS) if n <= r)
    return q * PATTERN_CYCLE + extra


def latencies(n):
    """(ISR latencies, task latencies) of stimuli 0..n-1 as int64 arrays, MISSING for a miss."""
    k = np.arange(n, dtype=np.int64)
    return isr_latency(k), task_latency(k)


def expected(stimuli):
    """What a capture of ``stimuli`` stimuli must find: counts, min and max of each latency, misses."""
    isr, task = latencies(min(stimuli, PATTERN_CYCLE))   # every value the pattern takes is in one cycle
    ok = task[task != MISSING]
    q, r = divmod(stimuli, PATTERN_CYCLE)
    misses = q * int((latencies(PATTERN_CYCLE)[1] == MISSING).sum()) + int((task[:r] == MISSING).sum())
    return {"stimuli": stimuli, "records": records_for(stimuli),
            "isr_min": int(isr.min()), "isr_max": int(isr.max()), "isr_misses": 0,
            "task_min": int(ok.min()), "task_max": int(ok.max()), "task_misses": misses}


# ---- precomputed frames --------------------------------------------------------------------------


class Frames:
    """The EVENTS frames of CYCLE_STIMULI stimuli, ``period`` ticks apart, each holding whole stimuli,
    laid out as [0x00][payload][crc32][0x00] (the leading zero becomes the COBS code byte) with base,
    seq and CRC zero; ``encode`` fills them in and COBS-encodes a run of them."""

    def __init__(self, period, mask_bytes=1):
        if period < SPAN:
            raise ValueError(f"period {period} ticks: the pattern needs at least {SPAN}")
        self.period = period
        frames, cur, size, prev = [], None, 0, 0
        for k in range(CYCLE_STIMULI):
            recs = [(k * period + off, mask, levels) for off, mask, levels in stimulus_records(k)]
            if cur is not None:
                need = 0
                last = prev
                for ts, _, _ in recs:
                    need += len(p.uleb128(ts - last)) + 2 * mask_bytes
                    last = ts
                if size + need > p.MAX_PAYLOAD:
                    cur = None
            if cur is None:
                cur = [k, 0, []]
                frames.append(cur)
                size, prev = p.EVENTS_EMPTY, recs[0][0]
            for ts, _, _ in recs:
                size += len(p.uleb128(ts - prev)) + 2 * mask_bytes
                prev = ts
            cur[1] += 1
            cur[2] += recs
        parts, starts, plen = [], [], []
        pos = 0
        for _, _, recs in frames:
            base = recs[0][0]
            body = p.Events(0, [(ts - base, m, lv) for ts, m, lv in recs], mask_bytes).body()
            payload = bytes((p.PROTOCOL_VERSION, p.MSG_EVENTS, 0, 0)) + body
            parts.append(b"\x00" + payload + bytes(4) + b"\x00")
            starts.append(pos)
            plen.append(len(payload))
            pos += len(parts[-1])
        self.template = np.frombuffer(b"".join(parts), dtype=np.uint8)
        self.n = len(frames)
        self.start = np.array(starts + [pos], dtype=np.int64)
        self.plen = np.array(plen, dtype=np.int64)
        self.first_stim = np.array([f[0] for f in frames], dtype=np.int64)
        self.end_stim = np.array([f[0] + f[1] for f in frames], dtype=np.int64)
        self.cum_records = np.concatenate([[0], np.cumsum([len(f[2]) for f in frames])]).astype(np.int64)
        edges = [sum(bin(m).count("1") for _, m, _ in f[2]) for f in frames]
        self.cum_edges = np.concatenate([[0], np.cumsum(edges)]).astype(np.int64)
        self.last_tick = np.array([f[2][-1][0] for f in frames], dtype=np.int64)  # from the cycle start

    def encode(self, f0, f1, seq, cycle_tick):
        """Wire bytes of frames f0..f1-1 of the cycle starting at ``cycle_tick``, seqs from ``seq``."""
        a = self.start[f0]
        buf = self.template[a:self.start[f1]].copy()
        at = self.start[f0:f1] - a
        n = f1 - f0
        seqs = (seq + np.arange(n)) & 0xFFFF
        buf[at + 3] = seqs & 0xFF
        buf[at + 4] = seqs >> 8
        bases = (np.uint64(cycle_tick) + self.first_stim[f0:f1].astype(np.uint64) * np.uint64(self.period))
        buf[(at + 5)[:, None] + np.arange(8)] = bases.astype("<u8").view(np.uint8).reshape(n, 8)
        mv = memoryview(buf)
        ends = at + 1 + self.plen[f0:f1]
        crcs = [zlib.crc32(mv[s:e]) for s, e in zip((at + 1).tolist(), ends.tolist())]
        buf[ends[:, None] + np.arange(4)] = np.array(crcs, dtype="<u4").view(np.uint8).reshape(n, 4)
        # COBS: each zero but the delimiters holds the distance to the next zero (frames are at most
        # 254 bytes, so no block is longer than 254 and no 0xFF block arises).
        zeros = np.flatnonzero(buf == 0)
        buf[zeros[:-1]] = np.diff(zeros)
        buf[ends + 4] = 0
        return buf.tobytes()


# ---- the rig -------------------------------------------------------------------------------------


class Server:
    def __init__(self, port=0, period=DEFAULT_PERIOD, stimuli=None, rate=None, watch_stdin=False):
        self.ident = identify()
        self.ts_hz = self.ident.ts_hz
        self.n_channels = self.ident.n_channels
        self.frames = Frames(period, p.mask_bytes_for(self.n_channels))
        self.period = period
        self.stimuli = stimuli or None
        self.rate = rate or None
        self.watch_stdin = watch_stdin
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(4)
        self.url = f"socket://127.0.0.1:{self.listener.getsockname()[1]}"
        self.conn = None
        self.anchor = (0, time.monotonic())    # (tick, monotonic time) the clock counts from
        self._reset()

    # session state -------------------------------------------------------------------------------

    def _reset(self):
        self.session = False
        self.out = bytearray()
        self.rx = b""
        self.seq = 0
        self.records_sent = self.events_sent = self.frames_sent = 0
        self.streaming = False
        self.done = False
        self.config_count = 0

    def clock(self):
        tick, t = self.anchor
        return tick + int((time.monotonic() - t) * self.ts_hz)

    def _send(self, msg):
        self.out += msg.encode(self.seq)
        self.seq = (self.seq + 1) & 0xFFFF
        self.frames_sent += 1

    def _start(self, start):
        self.streaming, self.done = True, False
        self.start_tick = start
        self.cycle, self.frame = 0, 0
        self.stream_records = 0
        self.stream_t0 = time.monotonic()
        limits = [n for n in (self.stimuli, self.config_count) if n]
        self.limit = min(limits) if limits else None

    # commands ------------------------------------------------------------------------------------

    def _on_frame(self, enc):
        try:
            version, msg_type, seq, body = p.decode_payload(enc)
        except p.CorruptFrame:
            return
        if msg_type == p.MSG_HELLO and version != p.PROTOCOL_VERSION:
            self._send(p.Ack(seq, p.ACK_VERSION, f"protocol version {p.PROTOCOL_VERSION}"))
            return
        if version != p.PROTOCOL_VERSION or (msg_type != p.MSG_HELLO and not self.session):
            return
        cls = p.HOST_MESSAGES.get(msg_type)
        try:
            if cls is None:
                raise p.MalformedFrame(f"unknown command 0x{msg_type:02x}")
            msg = cls.from_body(body)
        except p.ProtocolError as e:
            self._send(p.Ack(seq, p.ACK_MALFORMED, str(e)[:200]))
            return
        if isinstance(msg, p.Hello):
            self._reset()
            self.session = True
            self._send(self.ident)
        elif isinstance(msg, p.TimeReq):
            self._send(p.Time(seq, self.clock()))
        elif isinstance(msg, p.StatusReq):
            stim0 = (p.STIM_RUNNING if self.streaming else 0) | (p.STIM_DONE if self.done else 0)
            # frames_sent: this STATUS included, as the firmware counts.
            self._send(p.Status(self.records_sent & 0xFFFFFFFF, self.events_sent & 0xFFFFFFFF,
                                (self.frames_sent + 1) & 0xFFFFFFFF, 0, [0] * self.n_channels,
                                [stim0] + [0] * (self.ident.n_stimulus - 1)))
        elif isinstance(msg, p.Start):
            self._send(p.Ack(seq))
            if msg.channels & 1 << STIM:
                self._start(msg.start if msg.at_time else self.clock())
        elif isinstance(msg, p.Stop):
            if msg.channels & 1 << STIM:
                self.streaming = False
            self._send(p.Ack(seq))
        else:
            if isinstance(msg, p.StimConfig) and msg.channel == STIM:
                self.config_count = msg.count
            self._send(p.Ack(seq))

    def _receive(self):
        try:
            data = self.conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop()
            return
        *frames, self.rx = (self.rx + data).split(b"\x00")
        for enc in frames:
            if enc:
                self._on_frame(enc)
        if len(self.rx) > p.MAX_ENCODED:
            self.rx = b""

    # stream --------------------------------------------------------------------------------------

    def _emit_records(self, records, tick_of_last):
        self.records_sent += records[0]
        self.events_sent += records[1]
        self.stream_records += records[0]
        self.anchor = (tick_of_last, time.monotonic())

    def _generate(self):
        """Append frames to the send buffer; returns seconds to wait for the rate budget, or None."""
        F = self.frames
        f0 = self.frame
        f1 = min(F.n, f0 + BATCH_FRAMES)
        first = self.cycle * CYCLE_STIMULI
        if self.limit is not None:
            f1 = min(f1, max(f0, int(np.searchsorted(F.end_stim, self.limit - first, side="right"))))
        if self.rate is not None and f1 > f0:
            budget = self.rate * (time.monotonic() - self.stream_t0) + 100 - self.stream_records
            f1 = min(f1, max(f0, int(np.searchsorted(F.cum_records, F.cum_records[f0] + budget, side="right")) - 1))
            if f1 == f0:
                return max(0.001, float(F.cum_records[f0 + 1] - F.cum_records[f0] - budget) / self.rate)
        cycle_tick = self.start_tick + first * self.period
        if f1 > f0:
            self.out += F.encode(f0, f1, self.seq, cycle_tick)
            n = f1 - f0
            self.seq = (self.seq + n) & 0xFFFF
            self.frames_sent += n
            self._emit_records((int(F.cum_records[f1] - F.cum_records[f0]), int(F.cum_edges[f1] - F.cum_edges[f0])),
                               cycle_tick + int(F.last_tick[f1 - 1]))
            self.frame = f1
            if f1 == F.n:
                self.cycle, self.frame = self.cycle + 1, 0
            return None
        # The limit falls inside the next frame: its stimuli up to the limit, packed as they come.
        k0 = first + int(F.first_stim[f0])
        records = pattern_records(self.start_tick, k0, self.limit, self.period)
        for events in p.pack_events(records, mask_bytes=p.mask_bytes_for(self.n_channels)):
            self._send(events)
        if records:
            edges = sum(bin(m).count("1") for _, m, _ in records)
            self._emit_records((len(records), edges), records[-1][0])
        self.streaming, self.done = False, True
        return None

    def _flush(self):
        try:
            with memoryview(self.out) as mv:
                sent = self.conn.send(mv[:1 << 20])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop()
            return
        del self.out[:sent]

    # connections ---------------------------------------------------------------------------------

    def _accept(self):
        conn, _ = self.listener.accept()
        if self.conn is not None:
            self._drop()
        conn.setblocking(False)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF)
        self.conn = conn

    def _drop(self):
        try:
            self.conn.close()
        except OSError:
            pass
        self.conn = None
        self._reset()

    def serve(self):
        while True:
            wait = None
            if self.conn is not None and self.streaming and len(self.out) < LOW_WATER:
                wait = self._generate() or 0.0
                if self.streaming and len(self.out) >= LOW_WATER:
                    wait = None
            rlist = [self.listener] + ([self.conn] if self.conn is not None else [])
            if self.watch_stdin:
                rlist.append(sys.stdin)
            wlist = [self.conn] if self.conn is not None and self.out else []
            readable, writable, _ = select.select(rlist, wlist, [], wait)
            if self.watch_stdin and sys.stdin in readable and not os.read(sys.stdin.fileno(), 4096):
                return
            if self.listener in readable:
                self._accept()
                continue
            if self.conn is not None and self.conn in readable:
                self._receive()
            if self.conn is not None and self.out:
                self._flush()


# ---- from a test ---------------------------------------------------------------------------------


def capture_command(url, stimuli, out, period=DEFAULT_PERIOD):
    """``hilat capture`` (this Python's hilat) of ``stimuli`` stimuli, with the settings the stream
    matches: periodic, ``period`` ticks, no jitter, a window of one period, no calibration."""
    return [sys.executable, "-m", "hilat.cli", "capture", url, "--count", str(stimuli), "--mode", "periodic",
            "--period", str(period), "--jitter", "0", "--deadline", str(period), "--no-progress",
            "--no-calibration", "--out", str(out)]


class StreamRig:
    """The stream rig in a child process, for a test or a benchmark::

        with StreamRig(rate=20_000) as rig:                    # ~3,400 stimuli/s
            capture = subprocess.Popen(capture_command(rig.url, 10_000, tmp_path))
            time.sleep(1)                                       # still capturing: signal it here
            capture.send_signal(signal.SIGINT)

    ``url`` is its socket:// URL (one host at a time; a new connection replaces the old one, so
    several captures may use one rig in turn). ``close()`` (or leaving the ``with``) stops it; it also
    stops by itself when this process ends (it watches its stdin, a pipe from here)."""

    def __init__(self, period=DEFAULT_PERIOD, stimuli=None, rate=None, port=0):
        args = [sys.executable, str(Path(__file__).resolve()), "--port", str(port), "--period", str(period),
                "--watch-stdin"]
        if stimuli:
            args += ["--stimuli", str(stimuli)]
        if rate:
            args += ["--rate", str(rate)]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("socket://"):
            self.close()
            raise RuntimeError(f"the stream rig did not start (exit code {self.proc.returncode})")

    @property
    def pid(self):
        return self.proc.pid

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free one)")
    ap.add_argument("--period", type=int, default=DEFAULT_PERIOD, help=f"ticks between stimuli (>= {SPAN})")
    ap.add_argument("--stimuli", type=int, default=0, help="stop streaming after this many stimuli (0: never)")
    ap.add_argument("--rate", type=float, default=0, help="at most this many records/s (0: as fast as taken)")
    ap.add_argument("--watch-stdin", action="store_true", help="exit when stdin reaches its end")
    args = ap.parse_args(argv)
    try:
        server = Server(args.port, args.period, args.stimuli, args.rate, args.watch_stdin)
    except ValueError as e:
        ap.error(str(e))
    print(server.url, flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
