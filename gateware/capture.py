"""EdgeCapture: timestamps every edge on the rig's channels, in hardware, and never loses one silently.

Channels
--------
Channel numbers are fixed at build time: first the ``internal`` levels (the stimulus pins, already in
the ``ts`` domain), then the external ``inputs`` (the DUT's pins; ``gateware/channels.py`` names
them). Each channel has an enable, an edge select (rise / fall / both) and an optional glitch filter.

Path of an edge, and the delay that is subtracted
-------------------------------------------------
``pin -> synchronizer (sync_stages FFs) -> delay line (filter_taps FFs) -> filter verdict (1 FF)
-> edge detect (1 FF) -> record``

External inputs cross a ``sync_stages``-deep MultiReg; internal levels pass through as many plain
registers, so both kinds arrive aligned. The delay line lets the glitch filter look *ahead*: an edge
is accepted when the new level holds for ``glitch`` ticks from the edge on, so the accepted edge
keeps the tick it reached the pin at, whatever ``glitch`` is. Records are stamped from a counter
that runs exactly ``PIN_TO_STAMP_DELAY = sync_stages + filter_taps + 2`` ticks behind the timebase
(ARTIQ's input collector subtracts its known delay the same way): a timestamp names the ``ts``
cycle in which the edge reached the pin, i.e. the last cycle before the first synchronizer flip-flop
sampled the new level.

Records
-------
One record per ``ts`` cycle that holds an edge, so edges on several channels in the same cycle share
one timestamp, and an edge every cycle is one record every cycle:

===========  =====================================================================================
timestamp    64-bit tick of the edge at the pin (kind 0) / of the first dropped record (kind 1)
channels     bit i set: channel i had an edge (kind 0) / lost events (kind 1)
levels       level of every channel after this cycle's edges; the edge polarity of channel i is
             ``levels[i]`` (1: rising)
kind         0: edges; 1: overflow marker, written as soon as the FIFO has room again
fraction     reserved for a sub-tick phase (multi-phase sampler); 0 today
===========  =====================================================================================

Overflow
--------
Records cross to ``sys`` through an async FIFO of ``fifo_depth`` entries. A record that finds the
FIFO full is dropped and counted, per channel, in saturating counters; a sticky ``overflow`` flag
is raised and an overflow marker goes into the stream where the gap is. Nothing is dropped silently.
"""

from functools import reduce
from operator import and_

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage
from migen import *
from migen.genlib.cdc import MultiReg

from gateware.cdc import ConfigCommit, Snapshot, StreamAsyncFIFO

RECORD_KIND_EDGES    = 0
RECORD_KIND_OVERFLOW = 1


def record_layout(n_channels, fraction_width):
    return [
        ("timestamp", 64),
        ("channels",  n_channels),
        ("levels",    n_channels),
        ("kind",      1),
        ("fraction",  fraction_width),
    ]


class EdgeCapture(LiteXModule):
    """Edge timestamping on ``len(internal) + len(inputs)`` channels.

    ``timebase``     the Timebase whose ticks stamp the edges (same clock domain).
    ``inputs``       asynchronous external pins (synchronized here).
    ``internal``     levels already registered in ``clock_domain`` (stimulus pins).
    ``glitch_max``   longest configurable glitch filter, in ticks (0: no filter hardware).
    ``source``       the record stream, in ``sys``.
    """
    def __init__(self, timebase, inputs, internal=(), clock_domain="ts", fifo_depth=256,
                 sync_stages=2, glitch_max=15, fraction_width=8, counter_width=32, with_csr=True):
        assert sync_stages >= 2, "a synchronizer needs at least two flip-flops"
        assert fifo_depth >= 4 and (fifo_depth & (fifo_depth - 1)) == 0, "fifo_depth: power of 2"
        internal, inputs = list(internal), list(inputs)
        n = len(internal) + len(inputs)
        self.n_channels       = n
        self.clock_domain     = clock_domain
        self.fifo_depth       = fifo_depth
        self.sync_stages      = sync_stages
        self.glitch_max       = glitch_max
        self.filter_taps      = max(glitch_max, 1)
        self.counter_width    = counter_width
        # + 2: the filter's verdict (all taps hold) is registered before the edge is detected, and
        # each channel's edge before the record is built.
        self.PIN_TO_STAMP_DELAY = sync_stages + self.filter_taps + 2
        self.layout           = record_layout(n, fraction_width)
        self.source           = stream.Endpoint(self.layout)  # sys

        glitch_bits = max(bits_for(glitch_max), 1)
        sync = getattr(self.sync, clock_domain)

        # Per-channel configuration (sys CSRs -> ts registers on commit) --------------------------
        self._channel_config = []
        for i in range(n):
            csr = CSRStorage(name=f"ch{i}_config", fields=[
                CSRField("enable", size=1, description="``1``: record this channel's edges."),
                CSRField("rise",   size=1, reset=1, description="Record rising edges."),
                CSRField("fall",   size=1, reset=1, description="Record falling edges."),
                CSRField("glitch", size=glitch_bits, description=
                    f"Glitch filter, in ticks (0..{glitch_max}): a level must hold this many ticks "
                    "to count; pulses shorter than that are ignored. 0 and 1: no filtering."),
            ], description=f"Channel {i} capture settings; take effect on ``commit``.")
            setattr(self, f"_ch{i}_config", csr)
            self._channel_config.append(csr)
        self._commit = CSRStorage(fields=[
            CSRField("commit", size=1, pulse=True, description=
                "Write ``1`` to apply all channels' settings at once (in the ``ts`` domain)."),
        ], description="Apply the channel settings.")
        sources = []
        for csr in self._channel_config:
            f = csr.fields
            # The glitch setting as a mask, bit k = "tap k need not hold" (glitch <= k), decoded here
            # in sys so the ts side only sees registers.
            glitch_reset = f.glitch.reset.value
            ignore = Signal(self.filter_taps, name=f"ignore{len(sources) // 4}",
                            reset=sum(1 << k for k in range(self.filter_taps) if glitch_reset <= k))
            self.comb += ignore.eq(Cat(*[f.glitch <= k for k in range(self.filter_taps)]))
            sources += [f.enable, f.rise, f.fall, ignore]
        self.config = ConfigCommit(sources, clock_domain)
        self.comb += self.config.commit.eq(self._commit.fields.commit)
        configs = [self.config.outputs[4*i:4*i + 4] for i in range(n)]

        # Stamp: the timebase, PIN_TO_STAMP_DELAY ticks behind, i.e. the tick at the pin.
        stamp = timebase.lagging(self.PIN_TO_STAMP_DELAY)

        # Synchronize, filter, detect ---------------------------------------------------------------
        edges  = Signal(n)
        levels = Signal(n)
        for i, pin in enumerate(internal + inputs):
            synced = Signal(name=f"synced{i}")
            if i < len(internal):
                # Already in our domain: plain registers, so all channels share one delay.
                chain = [Signal(name=f"aligned{i}_{k}") for k in range(sync_stages)]
                sync += [chain[0].eq(pin)] + [chain[k].eq(chain[k - 1]) for k in range(1, sync_stages)]
                self.comb += synced.eq(chain[-1])
            else:
                self.specials += MultiReg(pin, synced, odomain=clock_domain, n=sync_stages)
            taps = self.filter_taps
            line = [Signal(name=f"line{i}_{k}") for k in range(taps)]
            sync += [line[0].eq(synced)] + [line[k].eq(line[k - 1]) for k in range(1, taps)]
            enable, rise, fall, ignore = configs[i]
            # A commit reaches the glitch mask's users two cycles before the edge detect sees their
            # verdict, so the edge selects are delayed as much: all settings change between the
            # same two ticks, two ticks after the commit.
            enable, rise, fall = [self._delayed(sync, setting, 2) for setting in (enable, rise, fall)]
            candidate = line[-1]
            # The new level must hold on the `glitch` taps from the edge on (newest at index 0):
            # holds[k] = (line[taps-1-k] == candidate) | ignore[k], registered from the values the
            # line takes next (it shifts).
            before = [synced] + line[:-1]  # before[j] becomes line[j]
            holds = [Signal(name=f"holds{i}_{k}", reset=1) for k in range(taps)]
            for k in range(taps):
                sync += holds[k].eq((before[taps - 1 - k] == before[taps - 1]) | ignore[k])
            # The verdict is registered with the candidate it judges, so the edge detect and the
            # record run one cycle behind the line (counted in PIN_TO_STAMP_DELAY).
            held = Signal(name=f"held{i}")
            judged = Signal(name=f"judged{i}")
            sync += [
                held.eq(reduce(and_, holds)),
                judged.eq(candidate),
            ]
            accepted = Signal(name=f"accepted{i}")
            level = Signal(name=f"level{i}")
            self.comb += [
                accepted.eq((judged != level) & held),
                edges[i].eq(accepted & enable & Mux(judged, rise, fall)),
                levels[i].eq(Mux(accepted, judged, level)),
            ]
            sync += If(accepted, level.eq(judged))

        # Record register, then the FIFO ------------------------------------------------------------
        # Each channel's edge and level are registered where they are made, and the record a cycle
        # later (counted in PIN_TO_STAMP_DELAY): the channels' logic lies spread over the device,
        # and this keeps their merge into one record off any long path.
        channel_edges  = Signal(n)
        channel_levels = Signal(n)
        record = stream.Endpoint(self.layout)  # ts; valid = "edges this cycle"
        sync += [
            channel_edges.eq(edges),
            channel_levels.eq(levels),
            record.valid.eq(channel_edges != 0),
            record.timestamp.eq(stamp),
            record.channels.eq(channel_edges),
            record.levels.eq(channel_levels),
            record.kind.eq(RECORD_KIND_EDGES),
            record.fraction.eq(0),
        ]
        self.fifo = fifo = ClockDomainsRenamer({"write": clock_domain, "read": "sys"})(
            StreamAsyncFIFO(self.layout, fifo_depth))
        self.comb += fifo.source.connect(self.source)

        # Drops: counted per channel, flagged, and marked in the stream -----------------------------
        # `drop` comes from the FIFO's pointer compare; it is registered (with the record it drops)
        # before anything acts on it, so the full flag never fans out to the 64-bit marker or the
        # counters in the same cycle. While a registered drop is pending, the marker waits a cycle
        # so that drop's channels are merged into it, never into a second marker.
        dropped  = [Signal(counter_width, name=f"dropped{i}") for i in range(n)]
        overflow = Signal()
        marker_pending   = Signal()
        marker_timestamp = Signal(64)
        marker_channels  = Signal(n)
        drop  = Signal()
        clear = Signal()
        drop_d = Signal()
        dropped_timestamp = Signal(64)
        dropped_channels  = Signal(n)
        self.comb += [
            drop.eq(record.valid & ~fifo.sink.ready),
            If(record.valid,
                record.connect(fifo.sink, omit={"ready"}),
            ).Else(
                fifo.sink.valid.eq(marker_pending & ~drop_d),
                fifo.sink.timestamp.eq(marker_timestamp),
                fifo.sink.channels.eq(marker_channels),
                fifo.sink.kind.eq(RECORD_KIND_OVERFLOW),
            ),
        ]
        saturated = 2**counter_width - 1
        saturated_flag = [Signal(name=f"dropped_saturated{i}") for i in range(n)]
        count_drop = Signal(n)
        self.comb += [count_drop[i].eq(drop_d & dropped_channels[i] & ~saturated_flag[i]) for i in range(n)]
        sync += [
            drop_d.eq(drop),
            dropped_timestamp.eq(record.timestamp),
            dropped_channels.eq(record.channels),
            If(drop_d,
                overflow.eq(1),
                marker_pending.eq(1),
                If(marker_pending,
                    marker_channels.eq(marker_channels | dropped_channels),
                ).Else(
                    marker_timestamp.eq(dropped_timestamp),
                    marker_channels.eq(dropped_channels),
                ),
            ).Elif(~record.valid & marker_pending & fifo.sink.ready,
                marker_pending.eq(0),
            ),
            *[If(count_drop[i], dropped[i].eq(dropped[i] + 1)) for i in range(n)],
            # Saturation flags registered from the value each counter takes next (no wide compare
            # in front of the counter's enable).
            *[saturated_flag[i].eq(Mux(count_drop[i], dropped[i] == saturated - 1, dropped[i] == saturated))
              for i in range(n)],
            If(clear, overflow.eq(0), *[d.eq(0) for d in dropped], *[f.eq(0) for f in saturated_flag]),
        ]

        self.dropped, self.overflow = dropped, overflow
        if with_csr:
            self.add_csr(dropped, overflow, clear)

    @staticmethod
    def _delayed(sync, signal, cycles):
        for _ in range(cycles):
            delayed = Signal.like(signal, reset=signal.reset)
            sync += delayed.eq(signal)
            signal = delayed
        return signal

    def add_csr(self, dropped, overflow, clear):
        n = self.n_channels
        self._control = CSRStorage(fields=[
            CSRField("snapshot", size=1, pulse=True, description=
                "Write ``1`` to copy the drop counters and the overflow flag into ``status`` and "
                "``dropped*``; ``status.valid`` rises when the copy is complete."),
            CSRField("clear", size=1, pulse=True, description=
                "Write ``1`` to zero the drop counters and clear the overflow flag."),
        ], description="Drop-counter control.")
        self._status = CSRStatus(fields=[
            CSRField("valid",    size=1, description="Snapshot complete."),
            CSRField("overflow", size=1, description="Sticky: at least one record was dropped "
                                                     "since the last ``clear`` (at snapshot time)."),
        ], description="Drop status (from the last snapshot).")
        for i in range(n):
            setattr(self, f"_dropped{i}", CSRStatus(self.counter_width, name=f"dropped{i}", description=
                f"Events of channel {i} dropped because the FIFO was full (count of edges, "
                f"saturates at 2**{self.counter_width}-1), at the last snapshot."))
        self.snapshot = Snapshot(dropped + [overflow], self.clock_domain)
        self.clear_sync = ConfigCommit([], self.clock_domain)
        self.comb += [
            self.snapshot.request.eq(self._control.fields.snapshot),
            self._status.fields.valid.eq(self.snapshot.valid),
            self._status.fields.overflow.eq(self.snapshot.outputs[-1]),
            self.clear_sync.commit.eq(self._control.fields.clear),
            clear.eq(self.clear_sync.applied),
        ]
        for i in range(n):
            self.comb += getattr(self, f"_dropped{i}").status.eq(self.snapshot.outputs[i])

    def add_csr_reader(self):
        """Event read-out for the firmware: the head record as CSRs, ``pop`` to advance."""
        n = self.n_channels
        self._ev_status = CSRStatus(fields=[
            CSRField("pending", size=1, description="``1``: a record is waiting in ``ev_*``."),
        ], description="Record FIFO status.")
        self._ev_timestamp = CSRStatus(64, description=
            "Head record: tick (``ts`` clock periods) at which the edges reached the pins.")
        fraction_width = len(self.source.fraction)
        # One 32-bit word per record keeps the firmware's read-out at three CSR reads a record.
        assert 2 * n + 1 + fraction_width <= 32, (
            f"{n} channels: channels + levels + kind + fraction ({2 * n + 1 + fraction_width} bits) "
            "exceed the 32-bit ev_info word")
        self._ev_info = CSRStatus(fields=[
            CSRField("channels", size=n, description="Channels with an edge (bit i: channel i)."),
            CSRField("levels",   size=n, description="Channel levels after the edges."),
            CSRField("kind",     size=1, description="0: edges; 1: overflow marker."),
            CSRField("fraction", size=fraction_width, description=
                "Sub-tick phase, in 1/2**width ticks (reserved: 0)."),
        ], description="Head record: channels, levels, kind (field offsets in csr.h).")
        self._ev_pop = CSRStorage(fields=[
            CSRField("pop", size=1, pulse=True, description="Write ``1`` to drop the head record."),
        ], description="Record FIFO read strobe.")
        self.comb += [
            self._ev_status.fields.pending.eq(self.source.valid),
            self._ev_timestamp.status.eq(self.source.timestamp),
            self._ev_info.fields.channels.eq(self.source.channels),
            self._ev_info.fields.levels.eq(self.source.levels),
            self._ev_info.fields.kind.eq(self.source.kind),
            self._ev_info.fields.fraction.eq(self.source.fraction),
            self.source.ready.eq(self._ev_pop.fields.pop),
        ]
