"""The acquisition engine: one session with the rig, from HELLO to the last record drained.

``Session`` opens the link (one HELLO, as a context manager), configures capture and stimuli,
starts at an absolute tick, and hands every record it receives, as arrays, to a consumer: the
capture, every calibration. Records arrive as (ticks uint64, channel masks, level masks) arrays,
one batch per read of the link; the consumer decides when it has enough (``collect``'s ``done``).
The rig's measurement engine (docs/engine.md) is configured here too; its frames go, in arrival
order, to ``engine_sink`` (an on-rig capture's ``engine.RigHistograms.feed``).

Over udp:// the raw edges come as datagrams apart from the commands (docs/ethernet.md): ``open_stream``
starts the receiver (``hilat.link.udp_receiver``, into the run's stream.bin) and sends STREAM_CONFIG;
``poll`` hands the stream's records to the consumer after the command link's, with its holes as
``on_gap``; ``close_stream`` asks the rig what it sent (STREAM_STATUS), disables the stream and
decodes the rest.
"""

import ipaddress
import logging
import secrets
import time

from hilat.link import protocol as p
from hilat.link.batch import holes, segments
from hilat.link.rig import Rig, RigError, RigSilent
from hilat.link.transport import DEFAULT_BAUDRATE, Transport
from hilat.shutdown import uninterrupted
from hilat.values import stimulus_mode

log = logging.getLogger("hilat")

ENGINE_FRAMES = (p.EngineBins, p.EngineOutliers, p.EngineStats)



COMMAND_READ_S = 0.05   # a read of the command link waits this long for data (Transport's default)
START_ATTEMPTS = 5   # a START refused as late is tried again this often, 4 times further ahead each time


def start_margin(ident):
    """Ticks ahead of now to start at: 1 ms, and at least twice the rig's own start margin (the
    commands take a round trip before the start is armed)."""
    return max(ident.ts_hz // 1000, 2 * ident.start_margin)


class Session:
    """``with Session(url) as rig_session:`` opens the link and says HELLO (``identity``)."""

    def __init__(self, url, baudrate=DEFAULT_BAUDRATE, raw_sink=None, hello_timeout=5.0, command_timeout=5.0,
                 transport=None):
        self.url = url
        self.transport = transport    # an open Transport to use, else one is opened
        self.baudrate = baudrate
        # Every byte received goes to raw_sink before it is decoded; until there is one (the CLI
        # identifies the rig before the run directory exists) the bytes wait in raw_backlog.
        self.raw_sink = raw_sink
        self.raw_backlog = bytearray()   # only the session set-up arrives before there is a sink
        self.hello_timeout = hello_timeout
        self.command_timeout = command_timeout
        self.rig = None
        self.identity = None
        self.status = None            # the last STATUS
        self.overflows = 0            # gateware OVERFLOW markers received
        self.last_tick = None         # tick of the last record received
        self.last_now = None          # the rig's counter at the last TIME asked for
        self.engine_sink = None       # called with every engine frame (ENGINE_BINS, _OUTLIERS, _STATS)
        self._overflow_warned = 0.0   # when the last overflow warning was logged
        self.stream = None            # udp_receiver.StreamLink while the Ethernet stream is on
        self.complete_before = None   # the stream's last heartbeat: every record before this tick is here

    # ---- link ----

    def open(self):
        transport = self.transport or Transport(self.url, baudrate=self.baudrate)
        self.rig = Rig(transport, raw_sink=self._raw, hello_timeout=self.hello_timeout,
                       command_timeout=self.command_timeout)
        try:
            self.identity = self.rig.hello()
        except BaseException:
            self.rig.close()
            raise
        return self

    def _raw(self, data):
        if self.raw_sink is not None:
            self.raw_sink(data)
        else:
            self.raw_backlog += data

    def set_raw_sink(self, sink):
        """From now on bytes go to ``sink``, after those received so far."""
        if self.raw_backlog:
            sink(bytes(self.raw_backlog))
            self.raw_backlog.clear()
        self.raw_sink = sink

    def close(self):
        if self.stream is not None:
            self.stream.stop()
        if self.rig is not None:
            self.rig.close()

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    @property
    def decoder_counters(self):
        return self.rig.decoder.counters() if self.rig else {}

    @property
    def datagrams(self):
        """Whether the rig is reached over UDP (udp://): its raw edges can come as a datagram stream."""
        return bool(self.rig is not None and getattr(self.rig.transport, "datagrams", False))

    @property
    def n_channels(self):
        return self.identity.n_stimulus + self.identity.n_inputs

    # ---- commands ----

    def configure_capture(self, flags_by_channel, glitch_by_channel=None):
        """Capture flags (``protocol.CAPTURE_*``) and glitch filter (ticks) per channel; unnamed
        channels are disabled."""
        glitch = glitch_by_channel or {}
        if glitch and max(glitch.values()) > self.identity.glitch_max:
            raise RigError(f"glitch filter of {max(glitch.values())} ticks: this rig's longest is "
                           f"{self.identity.glitch_max} ticks")
        self.rig.command(p.CaptureConfig([(flags_by_channel.get(ch, 0), glitch.get(ch, 0))
                                          for ch in range(self.n_channels)]))

    def configure_stimulus(self, channel, mode, width, period, jitter=0, probability=0, burst_count=1,
                           burst_spacing=10, count=0, seed=1, invert=False):
        """Stimulus output ``channel`` (ticks); ``mode`` a name of ``values.STIMULUS_MODES``."""
        self.rig.command(p.StimConfig(channel=channel, mode=stimulus_mode(mode), invert=int(invert), width=width,
                                      period=period, jitter=jitter, probability=probability,
                                      burst_count=burst_count, burst_spacing=burst_spacing, count=count,
                                      seed=seed))

    def now(self):
        self.last_now = self.rig.now()
        return self.last_now

    def start(self, channels_mask, at=None):
        """Start the stimuli of ``channels_mask`` at the absolute tick ``at`` (default: a start margin
        from now, so that the start is exact and recorded). Returns the start tick.

        Without ``at``: a start the rig refuses as late (the round trip took longer than the margin:
        a loaded host, or a simulated rig running faster than usual) is tried again with a margin 4
        times longer, up to START_ATTEMPTS times; a refused START arms nothing."""
        # With the Ethernet stream on, START restarts it (its session latched, seq from 0): a run
        # without stimulus sends one with mask 0 (docs/protocol.md, "Ethernet").
        needed = bool(channels_mask) or self.stream is not None
        if at is not None:
            if needed:
                self.rig.command(p.Start(channels=channels_mask, at_time=1, start=at))
            return at
        margin = start_margin(self.identity)
        for attempt in range(START_ATTEMPTS):
            at = self.rig.now() + margin
            if not needed:
                return at
            try:
                self.rig.command(p.Start(channels=channels_mask, at_time=1, start=at))
                return at
            except RigError as e:
                if e.code != p.ACK_LATE or attempt == START_ATTEMPTS - 1:
                    raise
                log.info("the rig refused a start %d ticks ahead as late; trying %d ticks ahead", margin, 4 * margin)
                margin *= 4

    def stop(self, channels_mask=None):
        mask = (1 << self.identity.n_stimulus) - 1 if channels_mask is None else channels_mask
        if mask:
            self.rig.command(p.Stop(channels=mask))

    def ask_status(self):
        self.status = self.rig.status()
        return self.status

    # ---- the measurement engine ----

    def configure_engine(self, config):
        """ENGINE_CONFIG of an ``engine.EngineConfig``: clears the engine and starts it with these roles
        and settings (RigError names a setting the rig refused)."""
        self.rig.command(config.message())

    def engine_stats(self):
        """ENGINE_STATS: the engine's run totals and limits (the reply is returned, not sent to
        ``engine_sink``)."""
        return self.rig.command(p.EngineStatsReq(), reply=p.EngineStats)

    def engine_flush(self, consumer=None, timeout=30.0):
        """ENGINE_FLUSH: the engine closes the open window and every interval; its ACK follows the
        last bins (the sweep may take a while: ``timeout`` s). With ``consumer``, what arrived before
        the ACK is handed over now (bins to ``engine_sink``, records to ``consumer``), else at the
        next ``poll``."""
        saved, self.rig.command_timeout = self.rig.command_timeout, max(self.rig.command_timeout, timeout)
        try:
            self.rig.command(p.EngineFlush())
        finally:
            self.rig.command_timeout = saved
        if consumer is not None:
            self.poll(consumer)

    # ---- the Ethernet stream ----

    def open_stream(self, path, flush_us=100, heartbeat_ms=100):
        """udp://: the receiver on this host's address toward the rig (into ``path``, stream.bin), a
        random session, and STREAM_CONFIG enabling the stream to it (it restarts at START)."""
        from hilat.link import udp
        from hilat.link.udp_receiver import StreamLink

        ident = self.identity
        ethernet = getattr(ident, "ethernet", None)
        if ethernet is None:
            raise RigError(f"the rig on {self.url} says it has no Ethernet stream (IDENTIFY): capture over its "
                           "serial port")
        layout = udp.Layout.of(ident, ethernet.record_words)
        local_ip = self.rig.transport.local_address()[0]
        session_id = secrets.randbits(32) or 1
        try:
            link = StreamLink(path, layout, session_id, bind_ip=local_ip)
        except OSError as e:
            raise RigError(f"cannot receive the Ethernet stream on {local_ip}: {e.strerror or e}") from None
        try:
            self.rig.command(p.StreamConfig(enable=1, session=session_id, dst_ip=int(ipaddress.IPv4Address(local_ip)),
                                            dst_port=link.port, flush_us=flush_us, heartbeat_ms=heartbeat_ms))
        except BaseException:
            link.stop()
            raise
        self.stream = link
        log.info("stream: datagrams to %s:%d, session %08x", local_ip, link.port, session_id)
        return link

    def stream_status(self):
        """STREAM_STATUS: what the rig's packetizer sent since its restart."""
        return self.rig.command(p.StreamStatusReq(), reply=p.StreamStatus)

    def close_stream(self, consumer):
        """The rig's counts (STREAM_STATUS), the stream disabled, the receiver stopped once quiet, and
        every record still on its way handed to ``consumer``. Returns the StreamLink (its counters)."""
        link = self.stream
        if link is None:
            return None
        try:
            link.rig_status = self.stream_status()
            self.rig.command(p.StreamConfig(enable=0, session=link.session_id, dst_ip=0, dst_port=link.port,
                                            flush_us=100, heartbeat_ms=0))
        finally:
            link.close()
            for batch in link.drain():
                self._deliver_stream(batch, consumer)
            link.stop()
            self.stream = None
        return link

    # ---- the stream ----

    def poll(self, consumer):
        """One read of the link; its records go to ``consumer(ticks, channel_masks, level_masks,
        fractions)`` (fractions: the inputs' sub-tick positions, docs/subtick.md), engine frames to
        ``engine_sink``. A consumer with an ``on_gap(what)`` method is told, in stream order between
        the records, where the stream has a hole: ``what`` an OVERFLOW (the gateware dropped
        records) or the number lost on the link (frames on the serial link, records in the UDP
        stream). Returns the number of records and engine frames. A stop signal waits until the
        read's records are delivered (``shutdown.uninterrupted``)."""
        with uninterrupted():
            return self._poll(consumer)

    def _poll(self, consumer):
        stream = self.stream
        if stream is not None:   # a backlog of datagrams: no waiting for the command link
            self.rig.transport.set_read_timeout(0 if stream.backlog else 0.005)
            try:
                (ticks, masks, levels, fractions), frames, marks = self.rig.read_marked()
            finally:   # a command's wait for its reply waits as before
                self.rig.transport.set_read_timeout(COMMAND_READ_S)
        else:
            (ticks, masks, levels, fractions), frames, marks = self.rig.read_marked()
        engine_frames = 0
        for frame in frames:
            msg = frame.msg
            if isinstance(msg, p.Overflow):
                self.overflows += 1
                self._warn_overflow(msg)
            elif isinstance(msg, p.Status):
                self.status = msg
            elif isinstance(msg, ENGINE_FRAMES):
                engine_frames += 1
                if self.engine_sink is not None:
                    self.engine_sink(msg)
        n = self._deliver(consumer, ticks, masks, levels, fractions, marks)
        if stream is not None:
            batch = stream.poll()
            if batch is None and not n:
                stream.wait(0.005)
                batch = stream.poll()
            if batch is not None:
                n += self._deliver_stream(batch, consumer)
        return n + engine_frames

    def _deliver_stream(self, batch, consumer):
        for _at, what in batch.marks:
            if not isinstance(what, int):
                self.overflows += 1
                self._warn_overflow(what.msg)
        n = self._deliver(consumer, batch.ticks, batch.channels, batch.levels, batch.fractions, batch.marks,
                          batch.edges)
        if self.stream is not None:
            self.complete_before = self.stream.complete_before
            advance = getattr(consumer, "advance", None)   # stream._Stream: heartbeats close windows
            if advance is not None:
                advance(self.complete_before)
            if n:
                self.stream.last_processed = time.monotonic()
        return n

    def _deliver(self, consumer, ticks, masks, levels, fractions, marks, edges=None):
        """Records to ``consumer``, split at the holes among them (``on_gap``); returns how many.
        ``edges``: the records' edges worked out already (``RecordBatch.edges``), given to a consumer
        that takes them (``takes_edges``) as ``edges=`` beside each piece's records."""
        n = len(ticks)
        on_gap = getattr(consumer, "on_gap", None)
        if edges is not None and not getattr(consumer, "takes_edges", False):
            edges = None

        def give(lo, hi):
            if edges is None:
                consumer(ticks[lo:hi], masks[lo:hi], levels[lo:hi], fractions[lo:hi])
            else:
                a, b = int(edges[3][lo]), int(edges[3][hi])
                consumer(ticks[lo:hi], masks[lo:hi], levels[lo:hi], fractions[lo:hi],
                         edges=(edges[0][a:b], edges[1][a:b], edges[2][a:b], edges[3][lo:hi + 1] - a))

        gaps = holes(marks)
        if on_gap is not None and gaps:
            for lo, hi, what in segments(n, gaps):
                if what is None:
                    give(lo, hi)
                else:
                    on_gap(what if isinstance(what, int) else what.msg)
        elif n:
            give(0, n)
        if n:
            self.last_tick = int(ticks[-1])
        return n

    def _warn_overflow(self, msg):
        # The first overflow is named; after it one line every few seconds at most (an overloaded
        # rig sends a marker per burst: a warning each would bury everything else).
        now = time.monotonic()
        if self.overflows == 1 or now - self._overflow_warned >= 5.0:
            log.warning("rig FIFO overflow at tick %d: edges lost on channels %s (%d overflow markers so far, "
                        "all counted)", msg.timestamp, bin(msg.channels), self.overflows)
            self._overflow_warned = now

    def collect(self, consumer, done, on_status=None, status_every=1.0, idle_timeout=10.0, tick=None):
        """Read until ``done()``. Every ``status_every`` s the rig's STATUS goes to ``on_status``
        (returning True ends the collection: e.g. the rig finished its stimuli). ``tick()`` is
        called after every read (progress, signals). Raises RigError when nothing arrived for
        ``idle_timeout`` s (None: the rig may be silent, as an engine between two intervals)."""
        last_status = last_data = time.monotonic()
        while not done():
            if self.poll(consumer):
                last_data = time.monotonic()
            if tick is not None:
                tick()
            now = time.monotonic()
            if now - last_status >= status_every:
                last_status = now
                status = self.ask_status()
                if on_status is not None and on_status(status):
                    return
            if idle_timeout is not None and now - last_data > idle_timeout:
                raise RigSilent(f"the rig on {self.url} sent nothing for {idle_timeout:g} s")

    def wait_clock(self, target_tick, consumer, timeout=30.0, tick=None, poll_s=0.02):
        """Read until the rig's counter has passed ``target_tick`` (asked every ``poll_s`` s);
        RigError when it stands still for ``timeout`` s."""
        deadline = time.monotonic() + timeout
        last_now = None
        while True:
            now = self.now()
            if now >= target_tick:
                return now
            if now != last_now:
                last_now, deadline = now, time.monotonic() + timeout
            elif time.monotonic() > deadline:
                raise RigError("the rig's clock does not advance")
            until = time.monotonic() + poll_s
            while time.monotonic() < until:
                self.poll(consumer)
            if tick is not None:
                tick()

    def drain(self, consumer, quiet=0.3, until_tick=None):
        """Read until nothing arrived for ``quiet`` s, or until a record at or past ``until_tick``
        arrived (records come in tick order, so an input that never stops toggling cannot hold
        the session open)."""
        quiet_until = time.monotonic() + quiet
        while time.monotonic() < quiet_until:
            if until_tick is not None and self.last_tick is not None and self.last_tick >= until_tick:
                return
            # A heartbeat past it: the rig has sent every record before (docs/ethernet.md, "Heartbeat").
            if until_tick is not None and self.complete_before is not None and self.complete_before >= until_tick:
                return
            if self.poll(consumer):
                quiet_until = time.monotonic() + quiet

    def finish(self, consumer):
        """The rig's final counters, and whatever arrived with them."""
        self.ask_status()
        self.poll(consumer)
        return self.status
