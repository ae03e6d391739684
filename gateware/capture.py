"""EdgeCapture: timestamps every edge on the rig's channels, in hardware, and never loses one silently.

Channels are fixed at build time: first the ``internal`` levels (the stimulus pins, already in the
``ts`` domain), then the external ``inputs`` (the DUT's pins; ``gateware/channels.py`` names them).
Each has an enable, an edge select (rise / fall / both) and an optional glitch filter. The inputs
are sampled ``samples_per_tick`` times a tick (``gateware/sampler.py``); a record's ``fraction``
says where inside its tick each input's edge fell (docs/subtick.md).

Structure (docs/timing-cores.md, "EdgeCapture" and "Capture pipeline"):

- ``_ChannelFrontEnd`` per channel: ``InputSampler`` (an input; ``_Aligner``, a stimulus pin)
  -> ``_GlitchFilter`` -> ``_EdgeDetect``, the sub-tick position riding alongside. Each
  stage declares its ``latency`` in ticks; ``PIN_TO_STAMP_DELAY`` is their sum, and records are
  stamped from a counter that many ticks behind the timebase, so a timestamp names the tick in
  which the edge reached the pin.
- the record register: one record per tick that holds edges (same-tick edges share it);
- ``_DropAccounting``: records the FIFO to ``sys`` refuses are counted per channel, flagged, and
  marked in the stream. Nothing is dropped silently.
"""

from functools import reduce
from operator import and_

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage
from migen import *

from gateware.cdc import ConfigCommit, Snapshot, StreamAsyncFIFO
from gateware.sampler import InputSampler, fraction_bits, subtick_position

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


def _delayed(sync, signal, cycles, reset_less=False):
    """``signal`` through ``cycles`` registers (each with the signal's reset value; ``reset_less``:
    none, for data whose meaning comes with a flag that has one)."""
    for _ in range(cycles):
        delayed = Signal.like(signal, reset=signal.reset, reset_less=reset_less)
        sync += delayed.eq(signal)
        signal = delayed
    return signal


# Channel front end ---------------------------------------------------------------------------------

class _Aligner(LiteXModule):
    """``stages`` plain registers for a level already in ``clock_domain`` (a stimulus pin): as many
    ticks as an input's sampler takes (``InputSampler``), so both kinds of channel align."""
    def __init__(self, pin, stages, clock_domain):
        self.latency = stages
        self.o = Signal()  # `pin`, `latency` ticks late

        # # #

        sync  = getattr(self.sync, clock_domain)
        chain = [Signal(name=f"aligned{k}") for k in range(stages)]
        sync += [chain[0].eq(pin)] + [chain[k].eq(chain[k - 1]) for k in range(1, stages)]
        self.comb += self.o.eq(chain[-1])


class _GlitchFilter(LiteXModule):
    """A delay line of ``taps`` flip-flops, and the registered verdict on its oldest tap: ``held``
    says whether ``level`` holds on the taps the glitch setting asks for, from its edge on (the
    filter looks *ahead*, so an accepted edge keeps its tick; docs/timing-cores.md, "Glitch
    filter"). ``ignore`` bit k: tap k need not hold (the setting is <= k)."""
    def __init__(self, i, ignore, taps, clock_domain):
        self.latency         = taps + 1  # the line, then the verdict registered with its candidate
        self.setting_latency = 2         # `ignore` -> `held`: the per-tap holds, then the verdict
        self.level = Signal()  # `i`, `latency` ticks late: the candidate judged
        self.held  = Signal()  # verdict on `level`

        # # #

        sync = getattr(self.sync, clock_domain)
        line = [Signal(name=f"line{k}") for k in range(taps)]
        sync += [line[0].eq(i)] + [line[k].eq(line[k - 1]) for k in range(1, taps)]
        # holds[k] = (line[taps-1-k] == line[taps-1]) | ignore[k], registered from the values the line
        # takes next (it shifts).
        before = [i] + line[:-1]  # before[j] becomes line[j]
        holds = [Signal(name=f"holds{k}", reset=1) for k in range(taps)]
        for k in range(taps):
            sync += holds[k].eq((before[taps - 1 - k] == before[taps - 1]) | ignore[k])
        sync += [
            self.held.eq(reduce(and_, holds)),
            self.level.eq(line[-1]),
        ]


class _EdgeDetect(LiteXModule):
    """An accepted change of the filtered level is an edge (if enabled and selected); the edge and
    the channel's level are registered here, where the channel's logic is, so their merge into one
    record is off any long path."""
    latency = 1

    def __init__(self, level, held, enable, rise, fall, clock_domain, fraction=0, fraction_width=0):
        self.edge  = Signal()  # registered
        self.level = Signal()  # registered: the channel's level after `edge`
        self.fraction = Signal(max(fraction_width, 1))  # registered: the edge's sample in its tick (0: no edge)

        # # #

        sync = getattr(self.sync, clock_domain)
        accepted = Signal()
        current  = Signal()  # the last accepted level
        self.comb += accepted.eq((level != current) & held)
        sync += [
            If(accepted, current.eq(level)),
            self.edge.eq(accepted & enable & Mux(level, rise, fall)),
            self.level.eq(Mux(accepted, level, current)),
            self.fraction.eq(Mux(accepted & enable & Mux(level, rise, fall), fraction, 0)),
        ]


class _ChannelFrontEnd(LiteXModule):
    """One channel from its pin to its registered edge. ``settings``: the channel's enable, rise,
    fall and glitch mask, in ``clock_domain``. An input is sampled ``samples_per_tick`` times a tick
    and its edge carries ``fraction`` (its first sample at the new level, docs/subtick.md); an
    internal level changes on the clock edge (fraction 0) and takes as many registers as the
    inputs' sampler (``sampler_latency``). An input with a ``tdc`` (gateware/tdc.py) takes its level
    and edges from it, its code as the fraction (docs/tdc.md, "The record"); an input without one is
    delayed to ``sampler_latency`` when the TDCs take longer. ``latency``, in ticks from the pin to
    ``edge``, is the sum of the stages' own."""
    def __init__(self, pin, internal, settings, sync_stages, filter_taps, clock_domain,
                 samples_per_tick=1, edge_clock_domain=None, sampler_latency=None, tdc=None):
        self.edge  = Signal()  # registered
        self.level = Signal()  # registered
        self.fraction_width = (0 if internal else tdc.record_bits if tdc is not None
                               else fraction_bits(samples_per_tick))
        self.fraction = Signal(max(self.fraction_width, 1))  # registered with `edge`

        # # #

        enable, rise, fall, ignore = settings
        sync = getattr(self.sync, clock_domain)
        if internal:
            self.synchronizer = _Aligner(pin, sampler_latency or sync_stages, clock_domain)
            level, fraction = self.synchronizer.o, 0
        elif tdc is not None:
            assert samples_per_tick == 1 and tdc.latency == (sampler_latency or tdc.latency)
            self.synchronizer = tdc
            level, fraction = self._tdc_level(tdc, sync), Mux(tdc.edge, tdc.code, 0)
        else:
            self.synchronizer = InputSampler(pin, samples_per_tick, clock_domain, edge_clock_domain, sync_stages)
            previous_level = Signal()   # the tick before's level (its last sample)
            level, fraction = subtick_position(self.synchronizer.samples, previous_level)
            sync += previous_level.eq(level)
        # Beside TDC inputs, the others wait as long as the TDCs' encoders take (one sample a tick:
        # no fraction to delay with them).
        self.alignment_latency = max(0, (sampler_latency or 0) - self.synchronizer.latency)
        if self.alignment_latency:
            assert not self.fraction_width
            undelayed = Signal()
            self.comb += undelayed.eq(level)
            level = _delayed(sync, undelayed, self.alignment_latency)
        self.glitch_filter = _GlitchFilter(level, ignore, filter_taps, clock_domain)
        # The edge selects are delayed as long as the glitch mask takes to reach the verdict: all
        # settings change between the same two ticks. The fraction travels with its level.
        enable, rise, fall = [_delayed(sync, s, self.glitch_filter.setting_latency) for s in (enable, rise, fall)]
        if self.fraction_width:
            position = Signal(self.fraction_width)
            self.comb += position.eq(fraction)
            # No reset: a fraction means something only with its edge, which has one. (With it, the
            # ts reset and a TDC's edge shared the registers' LSR: the i9 --tdc build's critical
            # path, 7.3 ns of routing from the reset synchronizer to the lines' corner.)
            fraction = _delayed(sync, position, self.glitch_filter.latency, reset_less=True)
        self.edge_detect = _EdgeDetect(self.glitch_filter.level, self.glitch_filter.held,
                                       enable, rise, fall, clock_domain, fraction, self.fraction_width)
        self.comb += [
            self.edge.eq(self.edge_detect.edge),
            self.level.eq(self.edge_detect.level),
            self.fraction.eq(self.edge_detect.fraction),
        ]
        self.latency = (sum(stage.latency for stage in (self.synchronizer, self.glitch_filter, self.edge_detect))
                        + self.alignment_latency)

    def _tdc_level(self, tdc, sync):
        """The input's level from its TDC: the direction of its last edge, in the cycle of the edge. A
        line that settles at the other level with no edge (the input changed again before the line
        had settled: a pulse shorter than the line) is followed there, so the level never sticks;
        that change has no code (0): its place in the tick was not measured (docs/tdc.md)."""
        level, held = Signal(), Signal()
        sync += held.eq(level)
        # The encoder's `settled` is aligned with its `level`: no count compared here, by the capture.
        self.comb += level.eq(Mux(tdc.edge, tdc.rising, Mux(tdc.encoder.settled, tdc.level, held)))
        return level


# Drop accounting -----------------------------------------------------------------------------------

class _DropAccounting(LiteXModule):
    """Writes ``record`` (valid: edges this tick) into ``sink``; a record that finds it full is
    counted per channel (saturating), raises the sticky ``overflow``, and gets one overflow marker
    per gap, written once there is room and ``resume`` (the FIFO half free) allows; records wait
    behind it (docs/timing-cores.md, "Drop accounting")."""
    def __init__(self, record, sink, n_channels, counter_width, clock_domain, resume=1):
        n = n_channels
        self.clear    = Signal()  # zero the counters and the flag
        self.dropped  = [Signal(counter_width, name=f"dropped{i}") for i in range(n)]  # edges
        self.overflow = Signal()

        # # #

        sync = getattr(self.sync, clock_domain)
        dropped, overflow = self.dropped, self.overflow
        # `drop` (from the FIFO's pointer compare) is registered with the record it drops before
        # anything acts on it: the full flag never fans out to the marker or the counters directly.
        marker_pending   = Signal()
        marker_timestamp = Signal(64)
        marker_channels  = Signal(n)
        drop  = Signal()
        drop_d = Signal()
        dropped_timestamp = Signal(64)
        dropped_channels  = Signal(n)
        # From a drop until its marker is written, records are refused (dropped and merged into the
        # marker): no record later than a gap's first lost one reaches the stream before the gap's
        # marker, so the host knows a gap before it sees anything after its start.
        blocked = Signal()
        self.comb += [
            blocked.eq(drop_d | marker_pending),
            drop.eq(record.valid & (~sink.ready | blocked)),
            If(record.valid & ~blocked,
                record.connect(sink, omit={"ready"}),
            ).Else(
                # A drop still to be merged holds the marker back a cycle: one marker per gap; and
                # the gap lasts until the FIFO can take a run of records again (`resume`).
                sink.valid.eq(marker_pending & ~drop_d & resume),
                sink.timestamp.eq(marker_timestamp),
                sink.channels.eq(marker_channels),
                sink.kind.eq(RECORD_KIND_OVERFLOW),
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
            ).Elif(marker_pending & sink.ready & resume,
                marker_pending.eq(0),
            ),
            *[If(count_drop[i], dropped[i].eq(dropped[i] + 1)) for i in range(n)],
            # Each saturation flag is registered from the value its counter takes next (no wide
            # compare in front of the counter's enable).
            *[saturated_flag[i].eq(Mux(count_drop[i], dropped[i] == saturated - 1, dropped[i] == saturated))
              for i in range(n)],
            If(self.clear, overflow.eq(0), *[d.eq(0) for d in dropped], *[f.eq(0) for f in saturated_flag]),
        ]


# EdgeCapture ---------------------------------------------------------------------------------------

class _ChannelSettings:
    """One channel's capture settings, in ``sys``; they take effect on ``EdgeCapture.commit``."""
    def __init__(self, i, glitch_bits):
        self.enable = Signal(name=f"ch{i}_enable")               # record this channel's edges
        self.rise   = Signal(name=f"ch{i}_rise", reset=1)        # record rising edges
        self.fall   = Signal(name=f"ch{i}_fall", reset=1)        # record falling edges
        self.glitch = Signal(glitch_bits, name=f"ch{i}_glitch")  # glitch filter, in ticks


class EdgeCapture(LiteXModule):
    """Edge timestamping on ``len(internal) + len(inputs)`` channels.

    ``timebase``     the Timebase whose ticks stamp the edges (same clock domain).
    ``inputs``       asynchronous external pins (synchronized here).
    ``internal``     levels already registered in ``clock_domain`` (stimulus pins).
    ``glitch_max``   longest configurable glitch filter, in ticks (0: no filter hardware).
    ``samples_per_tick``  samples of each input a tick (1, 2 or 4; docs/subtick.md); 4 needs
                     ``edge_clock_domain``, the edge clock at twice ``clock_domain``, in phase.
    ``tdc``          a ``gateware.tdc.TDCInputs``: a carry-chain TDC on the first inputs, their codes
                     in the record's fraction, 8 bits each (docs/tdc.md); one sample a tick.
    ``source``       the record stream, in ``sys``.
    """
    def __init__(self, timebase, inputs, internal=(), clock_domain="ts", fifo_depth=256,
                 sync_stages=2, glitch_max=15, fraction_width=8, counter_width=32, with_csr=True,
                 samples_per_tick=1, edge_clock_domain=None, tdc=None):
        assert fifo_depth >= 4 and (fifo_depth & (fifo_depth - 1)) == 0, "fifo_depth: power of 2"
        internal, inputs = list(internal), list(inputs)
        n = len(internal) + len(inputs)
        self.n_channels    = n
        self.clock_domain  = clock_domain
        self.fifo_depth    = fifo_depth
        self.sync_stages   = sync_stages
        self.glitch_max    = glitch_max
        self.filter_taps   = max(glitch_max, 1)
        self.counter_width = counter_width
        self.samples_per_tick = samples_per_tick
        self.tdc = tdc
        if tdc is not None:
            assert samples_per_tick == 1, "a TDC replaces sub-tick sampling: one sample a tick"
            assert tdc.n_inputs <= len(inputs)
            # The codes of the TDC inputs, and nothing else (docs/tdc.md, "The record").
            fraction_width = tdc.code_bits * tdc.n_inputs
            self.fraction_bits = tdc.code_bits                  # per TDC input, in `fraction`
            self.fraction_total_bits = fraction_width
        else:
            self.fraction_bits = fraction_bits(samples_per_tick)   # per input, in `fraction`
            self.fraction_total_bits = len(inputs) * self.fraction_bits
        self.layout        = record_layout(n, fraction_width)
        assert self.fraction_total_bits <= fraction_width, (
            f"{len(inputs)} inputs at {samples_per_tick} samples a tick need "
            f"{self.fraction_total_bits} fraction bits; the record has {fraction_width}")

        # Settings, in sys: written, then applied to all channels at once by `commit`.
        self.settings = [_ChannelSettings(i, max(bits_for(glitch_max), 1)) for i in range(n)]
        self.raw      = Signal(reset=1)  # records go to the FIFO (0: to `record` taps only)
        self.commit   = Signal()
        # Records, in sys.
        self.source   = stream.Endpoint(self.layout)
        # Drop accounting, in `clock_domain` (`clear`: zero the counters and the flag).
        self.dropped  = [Signal(counter_width, name=f"dropped{i}") for i in range(n)]  # edges
        self.overflow = Signal()
        self.clear    = Signal()

        # # #

        sync = getattr(self.sync, clock_domain)

        # Settings, sys -> clock_domain on commit. The glitch setting goes as a mask, bit k = "tap k
        # need not hold" (glitch <= k), decoded here in sys so the ts side only sees registers.
        sources = []
        for i, s in enumerate(self.settings):
            glitch_reset = s.glitch.reset.value
            ignore = Signal(self.filter_taps, name=f"ignore{i}",
                            reset=sum(1 << k for k in range(self.filter_taps) if glitch_reset <= k))
            self.comb += ignore.eq(Cat(*[s.glitch <= k for k in range(self.filter_taps)]))
            sources += [s.enable, s.rise, s.fall, ignore]
        sources.append(self.raw)
        self.config = ConfigCommit(sources, clock_domain, registered_enable=True)
        raw = self.config.outputs[-1]
        self.comb += self.config.commit.eq(self.commit)

        # Channel front ends: pin -> registered edge, all with the same latency.
        front_ends = []
        tdcs = [None] * len(internal) + [tdc and tdc.make(i, pin, clock_domain) for i, pin in enumerate(inputs)]
        sampler_latency = max([InputSampler.latency_of(samples_per_tick, sync_stages)]
                              + [t.latency for t in tdcs if t is not None])
        for i, pin in enumerate(internal + inputs):
            front_end = _ChannelFrontEnd(pin, i < len(internal), self.config.outputs[4*i:4*i + 4],
                                         sync_stages, self.filter_taps, clock_domain,
                                         samples_per_tick, edge_clock_domain, sampler_latency, tdcs[i])
            self.add_module(f"channel{i}", front_end)
            front_ends.append(front_end)
        latencies = {front_end.latency for front_end in front_ends}
        assert len(latencies) == 1, f"channels not aligned: latencies {latencies}"
        # The record register below takes the edges and their stamp in the same cycle, so it adds
        # nothing: a stamp lagging the front ends' latency names the tick at the pin (as ARTIQ's
        # input collector subtracts the PHY's declared delay).
        self.PIN_TO_STAMP_DELAY = latencies.pop()
        stamp = timebase.lagging(self.PIN_TO_STAMP_DELAY)

        # Record register, then the FIFO to sys. `record` is also the tap of the measurement engine:
        # its timestamp is the tick of every cycle, valid or not (`RECORD_DELAY` ticks after the pin).
        edges  = Cat(*[front_end.edge for front_end in front_ends])
        levels = Cat(*[front_end.level for front_end in front_ends])
        self.record = record = stream.Endpoint(self.layout)  # clock_domain; valid = "edges this cycle"
        self.RECORD_DELAY = self.PIN_TO_STAMP_DELAY + 1
        any_edge = Signal()
        raw_valid = Signal()    # record.valid & raw, as its own register: the FIFO's write enable is
                                # then one LUT of registers (it was two, the capture's routed critical path)
        self.comb += any_edge.eq(edges != 0)
        sync += [
            record.valid.eq(any_edge),
            raw_valid.eq(any_edge & raw),
            record.timestamp.eq(stamp),
            record.channels.eq(edges),
            record.levels.eq(levels),
            record.kind.eq(RECORD_KIND_EDGES),
            # Each input's sub-tick position, in channel order (0 where no edge; docs/subtick.md).
            record.fraction.eq(Cat(*[front_end.fraction[:front_end.fraction_width]
                                     for front_end in front_ends if front_end.fraction_width] or [0])),
        ]
        self.fifo = fifo = ClockDomainsRenamer({"write": clock_domain, "read": "sys"})(
            StreamAsyncFIFO(self.layout, fifo_depth))
        self.comb += fifo.source.connect(self.source)

        # Drops: counted per channel, flagged, and marked in the stream. With `raw` off the FIFO takes
        # nothing (and nothing is dropped).
        to_fifo = stream.Endpoint(self.layout)
        self.comb += [record.connect(to_fifo, omit={"valid", "ready"}), to_fifo.valid.eq(raw_valid)]
        self.drops = _DropAccounting(to_fifo, fifo.sink, n, counter_width, clock_domain,
                                     resume=fifo.fifo.half_free)
        self.comb += [
            self.drops.clear.eq(self.clear),
            self.overflow.eq(self.drops.overflow),
            *[d.eq(counter) for d, counter in zip(self.dropped, self.drops.dropped)],
        ]

        if with_csr:
            self.add_csr()

    def add_csr(self):
        """Channel settings, their commit, and the drop counters (snapshot / clear)."""
        n, cd = self.n_channels, self.clock_domain
        for i, s in enumerate(self.settings):
            csr = CSRStorage(name=f"ch{i}_config", fields=[
                CSRField("enable", size=1, reset=s.enable.reset.value, description=
                    "``1``: record this channel's edges."),
                CSRField("rise",   size=1, reset=s.rise.reset.value, description="Record rising edges."),
                CSRField("fall",   size=1, reset=s.fall.reset.value, description="Record falling edges."),
                CSRField("glitch", size=len(s.glitch), reset=s.glitch.reset.value, description=
                    f"Glitch filter, in ticks (0..{self.glitch_max}): a level must hold this many ticks "
                    "to count; pulses shorter than that are ignored. 0 and 1: no filtering."),
            ], description=f"Channel {i} capture settings (glitch filter in ticks); take effect on ``commit``.")
            setattr(self, f"_ch{i}_config", csr)
            self.comb += [
                s.enable.eq(csr.fields.enable),
                s.rise.eq(csr.fields.rise),
                s.fall.eq(csr.fields.fall),
                s.glitch.eq(csr.fields.glitch),
            ]
        self._commit = CSRStorage(fields=[
            CSRField("commit", size=1, pulse=True, description=
                "Write ``1`` to apply all channels' settings at once (in the ``ts`` domain, 2 ticks "
                "after the strobe arrives there)."),
        ], description="Apply the channel settings (write-1 strobe).")
        self._raw = CSRStorage(fields=[
            CSRField("enable", size=1, reset=1, description=
                "``1``: records go to the FIFO (the raw path); ``0``: only to the measurement "
                "engine. Takes effect on ``commit``."),
        ], description="Raw record path switch.")
        self.comb += [
            self.commit.eq(self._commit.fields.commit),
            self.raw.eq(self._raw.fields.enable),
        ]

        self._control = CSRStorage(fields=[
            CSRField("snapshot", size=1, pulse=True, description=
                "Write ``1`` to copy the drop counters and the overflow flag into ``status`` and "
                "``dropped*``; ``status.valid`` rises when the copy is complete."),
            CSRField("clear", size=1, pulse=True, description=
                "Write ``1`` to zero the drop counters and clear the overflow flag."),
        ], description="Drop-counter control (write-1 strobes).")
        self._status = CSRStatus(fields=[
            CSRField("valid",    size=1, description="Snapshot complete."),
            CSRField("overflow", size=1, description="Sticky: at least one record was dropped "
                                                     "since the last ``clear`` (at snapshot time)."),
        ], description="Drop status (flags, from the last snapshot).")
        for i in range(n):
            setattr(self, f"_dropped{i}", CSRStatus(self.counter_width, name=f"dropped{i}", description=
                f"Events of channel {i} dropped because the FIFO was full (count of edges, "
                f"saturates at 2**{self.counter_width}-1), at the last snapshot."))
        self.snapshot   = Snapshot(self.dropped + [self.overflow], cd)
        self.clear_sync = ConfigCommit([], cd)
        self.comb += [
            self.snapshot.request.eq(self._control.fields.snapshot),
            self._status.fields.valid.eq(self.snapshot.valid),
            self._status.fields.overflow.eq(self.snapshot.outputs[-1]),
            self.clear_sync.commit.eq(self._control.fields.clear),
            self.clear.eq(self.clear_sync.applied),
            *[getattr(self, f"_dropped{i}").status.eq(self.snapshot.outputs[i]) for i in range(n)],
        ]

    def add_csr_reader(self, source=None):
        """Event read-out for the firmware: the head record as CSRs, ``pop`` to advance. ``source``:
        the record stream read (default ``self.source``; gateware/ethstream.py routes it)."""
        n = self.n_channels
        source = self.source if source is None else source
        self._ev_status = CSRStatus(fields=[
            CSRField("pending", size=1, description="``1``: a record is waiting in ``ev_*``."),
        ], description="Record FIFO status (flag).")
        self._ev_timestamp = CSRStatus(64, description=
            "Head record: tick (``ts`` clock periods) at which the edges reached the pins.")
        fraction_width = len(source.fraction)
        if self.tdc is None:
            fraction_text = (f"Sub-tick positions: per input in channel order, {self.fraction_bits} bits, the sample "
                             f"({self.samples_per_tick} a tick) at which its edge reached the new level; 0 without an "
                             "edge (docs/subtick.md).")
        else:
            fraction_text = (f"TDC codes: per TDC input (the first {self.tdc.n_inputs}) in channel order, "
                             f"{self.fraction_bits} bits, the taps its edge passed before the closing clock edge "
                             "of its tick (a larger code is an earlier edge); 0 without an edge (docs/tdc.md).")
        # One 32-bit word per record keeps the firmware's read-out at three CSR reads a record; a
        # fraction that does not fit beside the masks (the TDC's codes) takes a CSR of its own.
        fraction_in_info = 2 * n + 1 + fraction_width <= 32
        assert 2 * n + 1 <= 32, f"{n} channels: channels + levels + kind exceed the 32-bit ev_info word"
        self._ev_info = CSRStatus(fields=[
            CSRField("channels", size=n, description="Channels with an edge (bit i: channel i)."),
            CSRField("levels",   size=n, description="Channel levels after the edges."),
            CSRField("kind",     size=1, description="0: edges; 1: overflow marker."),
        ] + ([CSRField("fraction", size=fraction_width, description=fraction_text)] if fraction_in_info else []),
            description="Head record: channels, levels, kind (bit fields; offsets in csr.h).")
        if not fraction_in_info:
            self._ev_fraction = CSRStatus(fraction_width, name="ev_fraction",
                                          description="Head record: " + fraction_text)
            self.comb += self._ev_fraction.status.eq(source.fraction)
        else:
            self.comb += self._ev_info.fields.fraction.eq(source.fraction)
        self._ev_pop = CSRStorage(fields=[
            CSRField("pop", size=1, pulse=True, description="Write ``1`` to drop the head record."),
        ], description="Record FIFO read strobe (write-1).")
        self.comb += [
            self._ev_status.fields.pending.eq(source.valid),
            self._ev_timestamp.status.eq(source.timestamp),
            self._ev_info.fields.channels.eq(source.channels),
            self._ev_info.fields.levels.eq(source.levels),
            self._ev_info.fields.kind.eq(source.kind),
            source.ready.eq(self._ev_pop.fields.pop),
        ]
