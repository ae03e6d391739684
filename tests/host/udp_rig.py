"""A fake Ethernet rig on 127.0.0.1: a UDP command port and the datagram stream (docs/ethernet.md).

    python tests/host/udp_rig.py [--port 0] [--stimuli N] [--rate DATAGRAMS_PER_S] [--sender EXE]

It prints its URL (``udp://127.0.0.1:PORT``) and serves until its stdin ends (``--watch-stdin``) or
it is killed; ``UdpRigProcess`` starts it from a test or a benchmark, ``UdpRig`` runs it in a thread
of the test itself (with ``faults`` and ``drop_replies``).

It is stream_rig.py's rig (the same IDENTIFY with an Ethernet tail, the same exact pattern of
stimuli, ISR and task edges: ``stream_rig.pattern_records``) over UDP. Commands: one frame a
datagram, each reply one datagram back to its sender; a command equal to the last one (same bytes)
is answered with the stored reply and not executed again, but HELLO (``executed`` counts executions
by name). ``drop_replies={"TIME_REQ": 1}`` drops the first reply of that command, stored replies to repeats
included (the host must send it again). START (stim0 in its mask) restarts the stream with the
session of the last STREAM_CONFIG and sends the pattern's records in full datagrams, ``rate``
datagrams/s at most, then a heartbeat (``base`` = the rig's clock) every ``heartbeat_ms`` while the
stream is enabled. ``faults``: a function of the list of data datagrams (bytes, in seq order) giving
what is sent, in order (drop, duplicate, reorder, add stale ones on purpose). STREAM_STATUS counts
what it generated (heartbeats included), whatever ``faults`` did.

With ``sender`` (benchmarks/udp_sender.c built), the data datagrams come from that C program
(sendmmsg) at line rate instead, and its progress is read from a shared status file.
"""

import argparse
import mmap
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from hilat.link import protocol as p
from hilat.link import udp

try:
    import stream_rig
    from fake_rig import identify
except ImportError:  # run as python -m tests.host.udp_rig
    from tests.host import stream_rig
    from tests.host.fake_rig import identify

STIM = stream_rig.STIM
MAC = 0x10E2D5000050


def ethernet_identify(port):
    ident = identify()
    ethernet = p.EthernetInfo(ip=0x7F000001, mac=MAC, command_port=port, stream_port=udp.STREAM_PORT,
                              record_words=udp.DEFAULT_RECORD_WORDS, max_records=udp.max_records())
    return replace(ident, capabilities=ident.capabilities | p.CAP_ETHERNET, ethernet=ethernet)


def pattern_arrays(start, stimuli, period=stream_rig.DEFAULT_PERIOD):
    """(ticks, channel masks, levels) of the pattern's first ``stimuli`` stimuli from tick ``start``."""
    records = np.array(stream_rig.pattern_records(start, 0, stimuli, period), np.int64).reshape(-1, 3)
    return records[:, 0].astype(np.uint64), records[:, 1], records[:, 2]


STATUS_FIELDS = struct.Struct("<QQQQ")   # the C sender's status file: datagrams, records, last tick, done


class UdpRig:
    """The rig, served by a thread of this process (``close()`` stops it)."""

    def __init__(self, stimuli=2000, period=stream_rig.DEFAULT_PERIOD, rate=20_000, faults=None, drop_replies=None,
                 sender=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        self.port = self.sock.getsockname()[1]
        self.url = f"udp://127.0.0.1:{self.port}"
        self.ident = ethernet_identify(self.port)
        self.layout = udp.Layout.of(self.ident)
        self.stimuli, self.period, self.rate = stimuli, period, rate
        self.faults = faults
        self.drop_replies = dict(drop_replies or {})
        self.sender = sender
        self.executed = {}
        self.received = 0           # command datagrams
        self.config = p.StreamConfig(0, 0)
        self.dst = None
        self._stop = threading.Event()
        self._reset()
        self.anchor = (0, time.monotonic())
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def _reset(self):
        self.seq = 0
        self.last = None             # (command bytes, reply bytes) of the last command
        self.queue = []              # data datagrams still to send
        self.sent_seq = 0            # the stream's next seq
        self.records_sent = 0
        self.streaming = self.done = False
        self.config_count = 0
        self.next_heartbeat = None
        self._stop_sender()

    # -- the clock: the last record's tick, then real time --

    def clock(self):
        tick, t = self.anchor
        return tick + int((time.monotonic() - t) * self.ident.ts_hz)

    # -- commands --

    def _reply(self, msg, addr, command):
        data = msg.encode(self.seq)
        self.seq = (self.seq + 1) & 0xFFFF
        self.last = (command, data, self._name)
        self._send_reply(data, addr, self._name)

    def _send_reply(self, data, addr, name):
        if self.drop_replies.get(name):   # lost on the way, on purpose
            self.drop_replies[name] -= 1
            return
        self.sock.sendto(data, addr)

    def _on_datagram(self, data, addr):
        self.received += 1
        if self.last is not None and data == self.last[0] and self.last[2] != "HELLO":   # HELLO: always executed
            self._send_reply(self.last[1], addr, self.last[2])   # a repeat: the stored reply, not executed again
            return
        for enc in data.split(b"\x00"):
            if enc:
                self._on_frame(enc, addr, data)

    def _on_frame(self, enc, addr, command):
        try:
            version, msg_type, seq, body = p.decode_payload(enc)
            msg = p.HOST_MESSAGES[msg_type].from_body(body)
        except (p.ProtocolError, KeyError):
            return
        self._name = msg.NAME
        self.executed[msg.NAME] = self.executed.get(msg.NAME, 0) + 1
        if isinstance(msg, p.Hello):
            self._reset()
            self._reply(self.ident, addr, command)
        elif isinstance(msg, p.TimeReq):
            self._reply(p.Time(seq, self.clock()), addr, command)
        elif isinstance(msg, p.StatusReq):
            self._sync_sender()
            stim0 = (p.STIM_RUNNING if self.streaming else 0) | (p.STIM_DONE if self.done else 0)
            # fired: what the stream carried (the C sender's count when it ran), as the generator counts.
            self._reply(p.Status(self.records_sent & 0xFFFFFFFF, 0, 0, 0, [0] * self.ident.n_channels, [stim0, 0],
                                 fired=[self._stimuli_sent(), 0]), addr, command)
        elif isinstance(msg, p.StreamConfig):
            self.config = msg
            self.dst = (socket.inet_ntoa(struct.pack(">I", msg.dst_ip)) if msg.dst_ip else addr[0],
                        msg.dst_port or addr[1])
            if not msg.enable:
                self.queue = []
                self.streaming = False
                self._stop_sender()
            self._reply(p.Ack(seq), addr, command)
        elif isinstance(msg, p.StreamStatusReq):
            self._sync_sender()
            c = self.config
            self._reply(p.StreamStatus(seq, c.enable, 1, c.session, c.dst_ip, self.dst[1] if self.dst else 0,
                                       c.flush_us, c.heartbeat_ms, self.sent_seq, self.records_sent, self.received, 0),
                        addr, command)
        elif isinstance(msg, p.Start):
            self._reply(p.Ack(seq), addr, command)
            if msg.channels & 1 << STIM and self.config.enable:
                self._start(msg.start if msg.at_time else self.clock())
            elif self.config.enable:   # every START restarts the stream: heartbeats from seq 0
                self.sent_seq = self.records_sent = 0
                self.next_heartbeat = time.monotonic() + self.config.heartbeat_ms / 1e3
        elif isinstance(msg, p.Stop):
            if msg.channels & 1 << STIM:
                self.queue = []
                self.streaming = False
                self._stop_sender()
            self._reply(p.Ack(seq), addr, command)
        else:
            if isinstance(msg, p.StimConfig) and msg.channel == STIM:
                self.config_count = msg.count
            self._reply(p.Ack(seq), addr, command)

    # -- the stream --

    def _limit(self):
        limits = [n for n in (self.stimuli, self.config_count) if n]
        return min(limits) if limits else 100_000

    def _stimuli_sent(self):
        return stream_rig.stimuli_for(self.records_sent)

    def _start(self, start):
        self.sent_seq = self.records_sent = 0
        self.streaming, self.done = True, False
        self.start_tick = start
        self.next_heartbeat = time.monotonic() + self.config.heartbeat_ms / 1e3
        if self.sender is not None:
            self._start_sender(start)
            return
        ticks, masks, levels = pattern_arrays(start, self._limit(), self.period)
        datagrams = udp.encode_stream(self.layout, ticks, masks, levels, self.config.session)
        full = udp.max_records(self.layout.record_words)   # the pattern's offsets never need a datagram closed early
        starts = np.arange(len(datagrams)) * full
        ends = np.minimum(starts + full, len(ticks))
        # (records, last tick) of each datagram
        self.counts = list(zip((ends - starts).tolist(), ticks[ends - 1].astype(np.int64).tolist()))
        sent = self.faults(list(datagrams)) if self.faults else list(datagrams)
        self.queue = sent
        self.generated = len(datagrams)
        self.t_stream = time.monotonic()
        self.sent_data = 0

    def _send_some(self):
        now = time.monotonic()
        if self.queue:
            budget = int((now - self.t_stream) * self.rate) + 16 - self.sent_data if self.rate else 64
            n = max(0, min(budget, 64, len(self.queue)))
            for d in self.queue[:n]:
                self.sock.sendto(d, self.dst)
            del self.queue[:n]
            self.sent_data += n
            # What is generated counts as sent (faults are the network's): all of it once the queue is empty.
            k = min(self.generated, self.sent_data) if self.queue else self.generated
            if k > self.sent_seq:
                self.records_sent = sum(c for c, _ in self.counts[:k])
                self.anchor = (self.counts[k - 1][1], time.monotonic())
                self.sent_seq = k
            if not self.queue:
                self.streaming, self.done = False, True
            return
        if self.config.enable and self.config.heartbeat_ms and self.next_heartbeat is not None \
                and now >= self.next_heartbeat and self.dst is not None and not self.streaming:
            self._sync_sender()
            hb = udp.encode_datagram(self.config.session, self.sent_seq, self.records_sent, self.clock(),
                                     heartbeat=True)
            self.sock.sendto(hb, self.dst)
            self.sent_seq += 1
            self.next_heartbeat = now + self.config.heartbeat_ms / 1e3

    # -- the C sender (benchmarks/udp_sender.c) --

    def _start_sender(self, start):
        self.status_file = tempfile.NamedTemporaryFile(prefix="hilat-udp-sender-", suffix=".status")
        self.status_file.write(bytes(STATUS_FIELDS.size))
        self.status_file.flush()
        table = tempfile.NamedTemporaryFile(prefix="hilat-udp-pattern-", suffix=".bin", delete=False)
        cycle = [(k, off, m, lv) for k in range(stream_rig.PATTERN_CYCLE)
                 for off, m, lv in stream_rig.stimulus_records(k)]
        table.write(np.array(cycle, np.uint32).tobytes())
        table.close()
        self.proc = subprocess.Popen([self.sender, self.dst[0], str(self.dst[1]), str(self.config.session),
                                      str(start), str(self.period), str(self._limit()), str(self.rate or 0),
                                      str(self.ident.n_channels), table.name, self.status_file.name])
        self._table = table.name
        self.status_map = mmap.mmap(self.status_file.fileno(), STATUS_FIELDS.size, prot=mmap.PROT_READ)

    def _sync_sender(self):
        if self.sender is None or getattr(self, "status_map", None) is None:
            return
        datagrams, records, last_tick, done = STATUS_FIELDS.unpack(self.status_map[:STATUS_FIELDS.size])
        if datagrams > self.sent_seq:
            self.sent_seq, self.records_sent = datagrams, records
            self.anchor = (last_tick, time.monotonic())
        if done and self.streaming:
            self.streaming, self.done = False, True

    def _stop_sender(self):
        proc = getattr(self, "proc", None)
        if proc is not None:
            self._sync_sender()
            proc.kill()
            proc.wait()
            self.proc = None
            os.unlink(self._table)

    # -- the loop --

    def serve(self):
        while not self._stop.is_set():
            busy = bool(self.queue)
            ready, _, _ = select.select([self.sock], [], [], 0 if busy else 0.005)
            if ready:
                try:
                    data, addr = self.sock.recvfrom(65536)
                except OSError:
                    continue
                self._on_datagram(data, addr)
            if self.sender is not None and self.streaming:
                self._sync_sender()
            else:
                self._send_some()
            if busy and self.rate:
                time.sleep(0.001)

    def close(self):
        self._stop.set()
        self.thread.join(timeout=5)
        self._stop_sender()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class UdpRigProcess(stream_rig.StreamRig):
    """The rig in a child process (``url``); it ends when this process closes its stdin (closing as
    the stream rig's)."""

    def __init__(self, stimuli=2000, rate=20_000, sender=None, period=stream_rig.DEFAULT_PERIOD):
        args = [sys.executable, str(Path(__file__).resolve()), "--stimuli", str(stimuli), "--rate", str(rate),
                "--period", str(period), "--watch-stdin"] + (["--sender", str(sender)] if sender else [])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("udp://"):
            self.close()
            raise RuntimeError(f"the UDP rig did not start (exit code {self.proc.returncode})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stimuli", type=int, default=2000)
    ap.add_argument("--period", type=int, default=stream_rig.DEFAULT_PERIOD)
    ap.add_argument("--rate", type=float, default=20_000, help="data datagrams/s at most (0: as fast as it can)")
    ap.add_argument("--sender", default=None, help="the built C sender (benchmarks/udp_sender.c)")
    ap.add_argument("--watch-stdin", action="store_true")
    args = ap.parse_args(argv)
    rig = UdpRig(args.stimuli, args.period, args.rate, sender=args.sender)
    print(rig.url, flush=True)
    try:
        if args.watch_stdin:
            while sys.stdin.read(4096):
                pass
        else:
            rig.thread.join()
    except KeyboardInterrupt:
        pass
    rig.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
