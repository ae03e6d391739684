"""MeasurementEngine: pairs stimuli with responses and bins the latencies on the rig.

It taps the capture core's record register (the edges the raw path records, in the same cycle), so
raw and on-rig results describe the same edges. Definitions, interval rules and limits:
``docs/engine.md``. Two halves: what needs every tick runs in ``clock_domain`` (``ts``), the rest in
``sys``, where a 140 MHz timestamp clock does not bound its logic:

- ``_RecordDecode`` (ts): the run-time roles (start, isr, task, tag) picked out of each record, and
  the interval number of its tick (``tick >> interval_shift``);
- ``_Pairing`` (ts): one response window at a time; emits a sample when it closes, and a close
  pulse per interval once none of its samples can still come; drives the trigger pin;
- ``_Crossing`` (ts -> sys): samples, closes and the run's begin, flush and clear, in order, through
  an asynchronous FIFO; a sample that finds it full is lost and counted; ``sys`` takes one sample
  every ``2 * SLOT`` cycles at most, so the banks always have free slots for their sweeps;
- ``_SampleValues`` (sys): the three kinds' values (offset subtracted), misses, below-range;
- ``_Binning`` (sys, per kind): HdrHistogram's bucket index of a value, its block RAM address;
- ``_HistogramBank`` (sys, per kind): block RAM of 18-bit words (17-bit count, epoch bit); one
  operation every ``SLOT`` cycles: a sample's increment, a sweep step, or a clear step;
- ``_Statistics`` (sys, shared by the kinds): exact run totals in LUT RAM, and their snapshot.
"""

from functools import reduce
from operator import or_

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage
from migen import *
from migen.genlib.cdc import MultiReg
from migen.genlib.roundrobin import SP_CE, RoundRobin

from gateware.bram import RAM36
from gateware.cdc import ConfigCommit, StreamAsyncFIFO

KINDS = ("stim_to_isr", "stim_to_task", "isr_to_task")
# HdrHistogram(lowest 1, highest 2**24 - 1, 2 significant digits): 256 sub-buckets (half 128), 17
# buckets; bin 2304 counts the values above the range.
SUB_BUCKET_HALF_MAGNITUDE = 7
VALUE_BITS    = 24
HDR_BINS      = 2304
OVERFLOW_BIN  = HDR_BINS
TAG_BINS      = HDR_BINS + 1        # bins per tag half of a bank
BANK_WORDS    = 2 * TAG_BINS
# A bank's bins in block RAM: all but the two overflow bins, which are registers, so the RAM is
# exactly nine 512 x 36 blocks (docs/engine.md, "Room on the FPGA").
BANK_RAM_WORDS = 2 * HDR_BINS
COUNT_BITS    = 35                  # a bins entry's count
# A bank word: the count of one bin in one interval, and its epoch bit. A count that would pass
# 2**WORD_COUNT_BITS - 1 is sent as a spill of 2**WORD_COUNT_BITS and the word starts again at 0, so
# 18-bit words (x9 block RAM pairs) hold any rate: five blocks a bank instead of nine.
WORD_COUNT_BITS = 17
SLOT          = 2                   # sys cycles per bank operation (issue and write back, read and compute)
# The sys half keeps up with a ts clock up to this many times its own frequency (both boards: 140
# MHz over 50 MHz); the limits below are in ticks for that ratio, and a build above it is refused.
MAX_TS_PER_SYS = 3
CROSSING_DEPTH = 16                 # entries of the ts -> sys FIFO
# One sample every 2 * SLOT sys cycles, half the bank's slots: the other half is the sweeps'.
MIN_SPACING   = 2 * SLOT * MAX_TS_PER_SYS   # shortest sustained stimulus spacing (and deadline), ticks
# One interval's sweep of a bank at most, in ticks: every word, plus the crossing's entries and the
# pipeline ahead of the close (deadline_limit counts it twice: samples may take every other slot).
SWEEP_TICKS   = (BANK_WORDS + CROSSING_DEPTH + 8) * SLOT * MAX_TS_PER_SYS
INTERVAL_SHIFT_MIN = 16
INTERVAL_SHIFT_MAX = 31


def deadline_limit(interval_shift):
    """The longest deadline (ticks) a run at ``interval_shift`` may set: no window stays open
    across two interval boundaries (docs/engine.md, "Intervals without stopping")."""
    return (1 << interval_shift) - 2 * SWEEP_TICKS


MISS_VALUE    = 0xFFFFFFFF          # outlier record: no value (a miss)
BELOW_VALUE   = 0xFFFFFFFE          # outlier record: below range (negative)
ENTRY_BIN, ENTRY_CLOSE = 0, 1


def hdr_bin(value):
    """The bin of ``value`` (ticks >= 0), as the gateware computes it (docs/engine.md)."""
    if value >= 1 << VALUE_BITS:
        return OVERFLOW_BIN
    bucket = max((value | 255).bit_length() - 8, 0)
    return (bucket << SUB_BUCKET_HALF_MAGNITUDE) + (value >> bucket)


def bins_layout():
    return [("type", 1), ("kind", 2), ("tag", 1), ("bin", 12), ("count", COUNT_BITS), ("interval", 32)]


def outlier_layout():
    return [("start", 64), ("values", 96), ("flags", 2)]


class _Config:
    """The engine's run-time settings (``sys`` CSR fields, then their ``clock_domain`` copies)."""
    FIELDS = [
        ("start_channel", 4), ("start_level", 1), ("isr_channel", 4), ("isr_level", 1),
        ("task_channel", 4), ("task_level", 1), ("tag_channel", 4), ("tag_level", 1), ("tag_enable", 1),
        ("interval_shift", 4),  # shift - INTERVAL_SHIFT_MIN
        ("trigger_response", 1), ("trigger_on_late", 1),
        ("deadline", 32), ("offset", 16),
        ("threshold0", 32), ("threshold1", 32), ("threshold2", 32),
        ("trigger_threshold", 32), ("trigger_width", 16),
    ]

    SYS_ONLY = ("offset", "threshold0", "threshold1", "threshold2")   # not needed in clock_domain

    def __init__(self):
        for name, width in self.FIELDS:
            setattr(self, name, Signal(width, name=name))

    def ts_fields(self):
        return [name for name, _ in self.FIELDS if name not in self.SYS_ONLY]

    def with_copies(self, names, signals):
        """This configuration with ``names`` read from ``signals`` (their clock-domain copies)."""
        cfg = _Config.__new__(_Config)
        cfg.__dict__.update(self.__dict__)
        for name, signal in zip(names, signals):
            setattr(cfg, name, signal)
        return cfg


# Decode ---------------------------------------------------------------------------------------------

class _RecordDecode(LiteXModule):
    """Registered: this tick's start, response and tag edges, the tag's level, the tick and its
    interval number. Runs every cycle (a tick without a record has no edges). Two stages: the
    first registers, per role, the channels with an edge of its level (so the engine is placed
    apart from the capture that also reads the record) and does half of the interval's shift; the
    second picks each role's channel and does the rest of the shift."""
    latency = 2

    def __init__(self, record, tick, cfg, clock_domain):
        self.start    = Signal()
        self.isr      = Signal()
        self.task     = Signal()
        self.tag_edge = Signal()   # an active edge of the tag
        self.tag      = Signal()   # the tag's level is active (after this tick's edges)
        self.tick     = Signal(64)
        self.interval = Signal(32)

        # # #

        sync = getattr(self.sync, clock_domain)
        # Stage 1: per role, which channels have an edge of the role's level (the level compares
        # ahead of the channel mux); the tick; the tick shifted by the shift's low two bits.
        n = len(record.channels)
        levels = [cfg.start_level, cfg.isr_level, cfg.task_level, cfg.tag_level]
        edges = [Signal(n, name=f"role_edges{r}") for r in range(len(levels))]  # valid and an edge at the level
        tag_levels = Signal(n)     # the channels at the tag's level
        tick_r = Signal(64)
        assert INTERVAL_SHIFT_MAX - INTERVAL_SHIFT_MIN == 15
        part = Signal(32 + 12)     # tick >> (INTERVAL_SHIFT_MIN + shift % 4)
        sync += [
            *[edges[r][i].eq(record.valid & record.channels[i] & (record.levels[i] == level))
              for r, level in enumerate(levels) for i in range(n)],
            *[tag_levels[i].eq(record.levels[i] == cfg.tag_level) for i in range(n)],
            tick_r.eq(tick),
            Case(cfg.interval_shift[:2], {j: part.eq(tick[INTERVAL_SHIFT_MIN + j:]) for j in range(4)}),
        ]
        # Stage 2: the role's channel picked, the rest of the shift (by 4 * (shift // 4)).
        def pick(bits, channel):
            return Array(bits[i] for i in range(n))[channel]

        sync += [
            self.start.eq(pick(edges[0], cfg.start_channel)),
            self.isr.eq(pick(edges[1], cfg.isr_channel)),
            self.task.eq(pick(edges[2], cfg.task_channel)),
            self.tag_edge.eq(cfg.tag_enable & pick(edges[3], cfg.tag_channel)),
            self.tag.eq(cfg.tag_enable & pick(tag_levels, cfg.tag_channel)),
            self.tick.eq(tick_r),
            Case(cfg.interval_shift[2:], {a: self.interval.eq(part[4 * a:4 * a + 32]) for a in range(4)}),
        ]


# Pairing --------------------------------------------------------------------------------------------

class _Sample:
    def __init__(self):
        self.valid      = Signal()
        self.start      = Signal(64)
        self.interval   = Signal(32)
        self.found_isr  = Signal()
        self.found_task = Signal()
        self.isr        = Signal(32)   # latency in ticks (E - S), valid when found
        self.task       = Signal(32)
        self.dup_isr    = Signal(16)   # saturating
        self.dup_task   = Signal(16)
        self.tag_at     = Signal()
        self.tag_in     = Signal()

    def fields(self):
        return [self.start, self.interval, self.found_isr, self.found_task, self.isr, self.task,
                self.dup_isr, self.dup_task, self.tag_at, self.tag_in]


class _Pairing(LiteXModule):
    """One response window at a time (docs/engine.md, "Pairing"). ``sample`` is valid for a cycle
    when a window closes; ``close`` pulses once per interval, after that interval's last sample.
    ``run`` (set by the start pulse with ``first_interval``), ``flush`` closes the open window
    and every interval up to the current one, then ``flushed`` holds until the next start."""
    latency = 1

    def __init__(self, d, cfg, clock_domain):
        self.begin    = Signal()    # pulse: start a run at the current tick's interval
        self.flush    = Signal()    # pulse
        self.stop     = Signal()    # pulse: end a run without closing (clear)
        self.running  = Signal()
        self.flushed  = Signal()
        self.sample   = _Sample()
        self.close    = Signal()    # pulse: the oldest unclosed interval is complete
        self.closing_done = Signal()  # every interval up to the flush point has been closed
        self.first_interval = Signal(32)  # the interval of the run's first tick (banks start there)
        self.trigger  = Signal()    # pulse: the trigger condition held at this tick

        # # #

        sync = getattr(self.sync, clock_domain)
        opened    = Signal()
        start     = Signal(64)
        start_iv  = Signal(32)
        age       = Signal(32, name="window_age")  # this tick - start, saturating (named: tests reach it)
        in_deadline = Signal()      # this tick is before start + deadline
        found_isr, found_task = Signal(), Signal()
        lat_isr, lat_task = Signal(32), Signal(32)
        dup_isr, dup_task = Signal(16), Signal(16)
        dup_isr_full, dup_task_full = Signal(), Signal()   # saturated (set with the count: no compare on its enable)
        tag_at, tag_in = Signal(), Signal()
        next_close = Signal(32)     # the oldest interval not closed yet
        final      = Signal(32)     # after a flush: close every interval before this one

        age_next = Signal(32)
        age_full = Signal()         # age has saturated (decided a tick ahead: no 32-bit AND before the add)
        live     = Signal()         # the open window includes this tick: opened & (no deadline | in_deadline),
                                    # kept as a register beside the two (its LUT levels fed every
                                    # window register's enable: the i9 --tdc ts critical path)
        close_now = Signal()
        opens    = Signal()
        closable = Signal(32)       # every interval before this one is complete, a cycle ago
        behind   = Signal()         # next_close != closable, a cycle ago
        # Settings derived once (the settings hold still during a run), off the per-tick paths.
        has_deadline  = Signal()
        deadline_two = Signal()     # deadline == 2: a window opened now ends after the next tick
        deadline_near = Signal(32)  # deadline - 2: the age one tick before the last
        reaching = Signal()         # age == deadline - 1, the window's last tick (decided a tick ahead)
        reaching_lo, reaching_hi = Signal(), Signal()   # its two 16-bit halves (registers)
        trigger_on = Signal()
        threshold_one = Signal()        # trigger_threshold == 1
        threshold_before = Signal(32)   # trigger_threshold - 1
        at_threshold = Signal()     # age == trigger_threshold (decided a tick ahead, as `reaching`)
        threshold_lo, threshold_hi = Signal(), Signal()   # its two 16-bit halves (registers)
        late     = Signal()         # age > trigger_threshold (likewise)
        self.comb += [at_threshold.eq(threshold_lo & threshold_hi), reaching.eq(reaching_lo & reaching_hi)]
        sync += [has_deadline.eq(cfg.deadline != 0),
                 deadline_two.eq(cfg.deadline == 2), deadline_near.eq(cfg.deadline - 2),
                 trigger_on.eq(cfg.trigger_threshold != 0), threshold_one.eq(cfg.trigger_threshold == 1),
                 threshold_before.eq(cfg.trigger_threshold - 1)]
        self.comb += [
            age_next.eq(age + (age_full == 0)),   # not ~age_full: Verilog widens it before inverting
            opens.eq(self.running & ~self.flushed & ~self.flush & d.start),
            close_now.eq(opened & (d.start | ~live | self.flush)),
        ]

        def respond(edge, found, latency, dups, dups_full):
            return If(live & ~d.start & edge,
                If(found,
                    If(~dups_full, dups.eq(dups + 1), dups_full.eq(dups == 0xFFFE)),
                ).Else(
                    found.eq(1),
                    latency.eq(age),
                ),
            )

        s = self.sample
        sync += [
            s.valid.eq(close_now & self.running),
            # Copied every tick, read only with `valid`: no enable fanning out to 230 flip-flops.
            s.start.eq(start), s.interval.eq(start_iv),
            s.found_isr.eq(found_isr), s.found_task.eq(found_task),
            s.isr.eq(lat_isr), s.task.eq(lat_task),
            s.dup_isr.eq(dup_isr), s.dup_task.eq(dup_task),
            s.tag_at.eq(tag_at), s.tag_in.eq(tag_in),
            If(opens,
                opened.eq(1),
                start.eq(d.tick), start_iv.eq(d.interval),
                age.eq(1), age_full.eq(0),
                in_deadline.eq(cfg.deadline != 1), late.eq(~trigger_on),
                live.eq(cfg.deadline != 1),     # the next tick is in the window unless the deadline is 1
                found_isr.eq(d.isr), lat_isr.eq(0), dup_isr.eq(0), dup_isr_full.eq(0),
                found_task.eq(d.task), lat_task.eq(0), dup_task.eq(0), dup_task_full.eq(0),
                tag_at.eq(d.tag), tag_in.eq(d.tag),
            ).Elif(close_now,
                opened.eq(0), live.eq(0),
            ).Else(
                age.eq(age_next),
                If(age == 0xFFFFFFFE, age_full.eq(1)),
                # age_next == deadline; `reaching` (age == deadline - 1) was compared a tick ahead.
                in_deadline.eq(in_deadline & ~reaching),
                live.eq(opened & (~has_deadline | (in_deadline & ~reaching))),
                If(~age_full, late.eq(late | at_threshold)),
                respond(d.isr, found_isr, lat_isr, dup_isr, dup_isr_full),
                respond(d.task, found_task, lat_task, dup_task, dup_task_full),
                If(live & d.tag_edge, tag_in.eq(1)),
            ),
            # Decided a tick ahead, outside the open/close chain above (a closed window reads neither;
            # an open resets both): the next age is this one plus one, unless saturated.
            # `reaching` in two registered halves too: its 32-bit compare, six LUT levels, was the
            # 45F builds' ts critical path once the reset left general routing (docs/tdc.md).
            reaching_lo.eq(Mux(opens, deadline_two, age[:16] == deadline_near[:16])),
            reaching_hi.eq(Mux(opens, 1, age[16:] == deadline_near[16:])),
            # at_threshold in two registered halves (one 32-bit compare and its muxes was the routed
            # critical path); an open sets both to the threshold-of-one case, saturation holds both.
            threshold_lo.eq(Mux(opens, threshold_one,
                                Mux(age_full, threshold_lo, age[:16] == threshold_before[:16]))),
            threshold_hi.eq(Mux(opens, 1, Mux(age_full, threshold_hi, age[16:] == threshold_before[16:]))),
            # Closes: each after its interval's last sample (a sample leaves this stage the cycle its
            # window closes; `closable` moves on only from the next cycle, and is itself a register: it
            # only ever moves forward, so a late one only delays a close). The compare is registered
            # too (`behind`), so it lags a close by a cycle: a close at most every other cycle.
            closable.eq(Mux(self.flushed, final, Mux(opened, start_iv, d.interval))),
            behind.eq(self.running & (next_close != closable)),
            self.closing_done.eq(self.flushed & (next_close == final)),
            self.close.eq(0),
            If(behind & ~self.close & self.running,
                self.close.eq(1),
                next_close.eq(next_close + 1),
            ),
            If(self.flush & self.running & ~self.flushed,
                self.flushed.eq(1),
                final.eq(d.interval + 1),
            ),
            If(self.begin,
                self.running.eq(1), self.flushed.eq(0), opened.eq(0), live.eq(0),
                next_close.eq(d.interval), self.first_interval.eq(d.interval),
            ),
            If(self.stop,
                self.running.eq(0), self.flushed.eq(0), opened.eq(0), live.eq(0),
            ),
        ]

        # Trigger: the chosen response has not come `threshold` ticks after the stimulus (or, with
        # on_late, it comes later than that).
        waiting  = Signal()
        arrives  = Signal()
        self.comb += [
            waiting.eq(~Mux(cfg.trigger_response, found_task, found_isr)),
            arrives.eq(Mux(cfg.trigger_response, d.task, d.isr)),
        ]
        sync += self.trigger.eq(
            self.running & trigger_on & live & ~d.start & waiting &
            (at_threshold | (cfg.trigger_on_late & arrives & late)))


# Values --------------------------------------------------------------------------------------------

class _SampleValues(LiteXModule):
    """A closed window's three values: present, below range, value (ticks), tag; its interval
    (passed on for every entry: a begin's first interval too)."""
    latency = 1

    def __init__(self, s, cfg, clock_domain):
        self.valid    = Signal()
        self.start    = Signal(64)
        self.interval = Signal(32)
        self.tag_at   = Signal()
        self.tag      = Signal()        # tagged: the tag was active in the window
        self.present  = [Signal(name=f"present{k}") for k in range(3)]
        self.below    = [Signal(name=f"below{k}") for k in range(3)]
        self.value    = [Signal(32, name=f"value{k}") for k in range(3)]
        self.dups     = [Signal(16, name=f"dups{k}") for k in range(3)]
        self.outlier_values = Signal(96)  # as an outlier record carries them

        # # #

        sync = getattr(self.sync, clock_domain)
        raw = [Signal(33, name=f"raw{k}") for k in range(3)]  # two's complement, bit 32: negative
        self.comb += [
            raw[0].eq(Cat(s.isr, C(0, 1)) - cfg.offset),
            raw[1].eq(Cat(s.task, C(0, 1)) - cfg.offset),
            raw[2].eq(Cat(s.task, C(0, 1)) - s.isr),
        ]
        found = [s.found_isr, s.found_task, s.found_isr & s.found_task]
        sync += [
            self.valid.eq(s.valid), self.start.eq(s.start), self.interval.eq(s.interval),
            self.tag_at.eq(s.tag_at), self.tag.eq(s.tag_in),
            self.dups[0].eq(s.dup_isr), self.dups[1].eq(s.dup_task), self.dups[2].eq(0),
        ]
        for k in range(3):
            sync += [
                self.present[k].eq(found[k] & ~raw[k][32]),
                self.below[k].eq(found[k] & raw[k][32]),
                self.value[k].eq(raw[k][:32]),
            ]
            self.comb += self.outlier_values[32*k:32*(k + 1)].eq(
                Mux(self.present[k], self.value[k], Mux(self.below[k], BELOW_VALUE, MISS_VALUE)))


# Crossing ------------------------------------------------------------------------------------------

E_SAMPLE, E_CLOSE, E_BEGIN, E_FLUSHED, E_CLEAR = range(5)


def crossing_layout():
    return [("type", 3), ("tick", 64), ("interval", 32), ("found_isr", 1), ("found_task", 1), ("isr", 32), ("task", 32),
            ("dup_isr", 16), ("dup_task", 16), ("tag_at", 1), ("tag_in", 1), ("lost", 32)]


class _Crossing(LiteXModule):
    """The pairing's output to ``sys``, in order: samples, interval closes, and the run's begin (with
    its first interval), flush completion and clear. In ``clock_domain`` a sample is written the cycle it
    comes or lost (counted, and the count rides on the next entry written, so ``sys`` adds every
    loss exactly once); closes owed wait for cycles without a sample, and the run's events for the
    closes before them. In ``sys``, ``sample`` gives one entry a cycle (its ``valid`` only for
    samples) and the pulses the others; a sample is taken at most every ``2 * SLOT`` cycles."""
    latency = 1   # sys: from the FIFO's output to `sample` and the pulses

    def __init__(self, pairing, begin, clear, clock_domain, depth=CROSSING_DEPTH):
        self.sample   = _Sample()       # sys; `interval` is a begin's first interval too
        self.close    = Signal()        # sys pulses
        self.begin    = Signal()
        self.flushed  = Signal()
        self.clear    = Signal()
        self.lost     = Signal(32)      # sys: windows lost since the previous entry
        self.pending  = Signal()        # sys: entries on their way
        self.windows_lost = Signal(32)  # clock_domain: lost since power-up, modulo 2**32

        # # #

        sync = getattr(self.sync, clock_domain)
        self.fifo = fifo = ClockDomainsRenamer({"write": clock_domain, "read": "sys"})(
            StreamAsyncFIFO(crossing_layout(), depth))
        sink, s = fifo.sink, pairing.sample
        owed = Signal(16)   # closes not yet written
        owing = Signal()    # owed != 0, kept as a register (the event is picked from registers only)
        begin_p, flushed_p, clear_p = Signal(), Signal(), Signal()
        closing_seen = Signal()
        event = Signal(3)
        self.comb += [
            event.eq(Mux(s.valid, E_SAMPLE, Mux(owing, E_CLOSE,
                     Mux(flushed_p, E_FLUSHED, Mux(clear_p, E_CLEAR, E_BEGIN))))),
            sink.valid.eq(s.valid | owing | flushed_p | clear_p | begin_p),
            sink.type.eq(event),
            # A begin's first interval is the pairing's, which holds still from the begin on.
            sink.tick.eq(s.start),
            sink.interval.eq(Mux(s.valid, s.interval, pairing.first_interval)),
            sink.found_isr.eq(s.found_isr), sink.found_task.eq(s.found_task),
            sink.isr.eq(s.isr), sink.task.eq(s.task),
            sink.dup_isr.eq(s.dup_isr), sink.dup_task.eq(s.dup_task),
            sink.tag_at.eq(s.tag_at), sink.tag_in.eq(s.tag_in),
            sink.lost.eq(self.windows_lost),
        ]
        close_written = Signal()
        events_free = Signal()   # the FIFO takes an entry and no sample or close comes first
        self.comb += [
            events_free.eq(sink.ready & ~s.valid & ~owing),
            close_written.eq(~s.valid & owing & sink.ready),
        ]
        sync += [
            If(pairing.close & ~close_written,
                owed.eq(owed + 1), owing.eq(1),
            ).Elif(~pairing.close & close_written,
                owed.eq(owed - 1), owing.eq(owed != 1),
            ),
            # A running count, never reset: every entry carries it and sys takes the difference
            # from the previous entry's (no reset fanning out to 32 flip-flops from the FIFO's ready).
            If(s.valid & ~sink.ready, self.windows_lost.eq(self.windows_lost + 1)),
            closing_seen.eq(pairing.closing_done),
            If(pairing.closing_done & ~closing_seen, flushed_p.eq(1)),
            If(clear, clear_p.eq(1)),
            If(begin, begin_p.eq(1)),
            # Each written as `event` picks it: nothing before it pending and the FIFO taking it
            # (the same as "written and `event` == E_...", without the event's mux and compare).
            # A begin never waits beside a clear under the CSR contract (start once busy has dropped
            # after a clear); the order is kept all the same.
            If(flushed_p & events_free, flushed_p.eq(0)),
            If(clear_p & events_free & ~flushed_p, clear_p.eq(0)),
            If(begin_p & events_free & ~flushed_p & ~clear_p, begin_p.eq(0)),
        ]

        # sys: a sample at most every 2 * SLOT cycles; the other entries as they come.
        src = fifo.source
        gap = Signal(max=2 * SLOT)
        take = Signal()
        lost_carried = Signal(32)   # the count the previous entry carried
        self.comb += [
            take.eq(src.valid & ((src.type != E_SAMPLE) | (gap == 0))),
            src.ready.eq(take),
            self.pending.eq(src.valid),
        ]
        o = self.sample
        self.sync += [
            If(take & (src.type == E_SAMPLE),
                gap.eq(2 * SLOT - 1),
            ).Elif(gap != 0,
                gap.eq(gap - 1),
            ),
            o.valid.eq(take & (src.type == E_SAMPLE)),
            self.close.eq(take & (src.type == E_CLOSE)),
            self.begin.eq(take & (src.type == E_BEGIN)),
            self.flushed.eq(take & (src.type == E_FLUSHED)),
            self.clear.eq(take & (src.type == E_CLEAR)),
            self.lost.eq(Mux(take, src.lost - lost_carried, 0)),
            If(take, lost_carried.eq(src.lost)),
            o.start.eq(src.tick), o.interval.eq(src.interval),
            o.found_isr.eq(src.found_isr), o.found_task.eq(src.found_task),
            o.isr.eq(src.isr), o.task.eq(src.task),
            o.dup_isr.eq(src.dup_isr), o.dup_task.eq(src.dup_task),
            o.tag_at.eq(src.tag_at), o.tag_in.eq(src.tag_in),
        ]


# Binning -------------------------------------------------------------------------------------------

class _Binning(LiteXModule):
    """HdrHistogram's bin of a value and where the bank keeps it: its block RAM address (tagged
    bins after the untagged), or ``overflow`` (the bin is a register)."""
    latency = 2

    def __init__(self, valid, value, tag, interval, clock_domain):
        self.valid    = Signal()
        self.bin      = Signal(max=TAG_BINS)
        self.tag      = Signal()
        self.ram_address = Signal(max=BANK_RAM_WORDS)
        self.overflow = Signal()
        self.interval = Signal(32)

        # # #

        sync = getattr(self.sync, clock_domain)
        # Stage 1: the bucket (leading one of bits 8..23), the overflow flag.
        bucket = Signal(5)
        over   = Signal()
        v1     = Signal(VALUE_BITS)
        tag1, valid1, interval1 = Signal(), Signal(), Signal(32)
        leading = 0
        for b in range(8, VALUE_BITS):   # later assignments win: the highest set bit
            leading = Mux(value[b], b - 7, leading)
        sync += [
            bucket.eq(leading), over.eq(value[VALUE_BITS:] != 0), v1.eq(value[:VALUE_BITS]),
            tag1.eq(tag), valid1.eq(valid), interval1.eq(interval),
        ]
        # Stage 2: (bucket << 7) + (v >> bucket), or the overflow bin; tagged half after untagged.
        # Above bucket 0 the top bit of v >> bucket is the leading one, so the sum is only the
        # high part: (bucket + sub[7]) << 7 | sub[:7] (5-bit adds, not 12-bit ones).
        sub = Signal(8)
        self.comb += Case(bucket, {b: sub.eq(v1[b:b + 8]) for b in range(VALUE_BITS - 8 + 1)})
        high = Signal(5)
        tag_high = HDR_BINS >> SUB_BUCKET_HALF_MAGNITUDE   # the tagged half's offset, in 128s
        self.comb += high.eq(bucket + sub[7])
        sync += [
            self.bin.eq(Mux(over, OVERFLOW_BIN, Cat(sub[:SUB_BUCKET_HALF_MAGNITUDE], high))),
            self.tag.eq(tag1),
            self.ram_address.eq(Cat(sub[:SUB_BUCKET_HALF_MAGNITUDE], high + Mux(tag1, tag_high, 0))),
            self.overflow.eq(over),
            self.valid.eq(valid1), self.interval.eq(interval1),
        ]


# Histogram bank ------------------------------------------------------------------------------------

class _HistogramBank(LiteXModule):
    """One kind's bins (untagged, then tagged): increments, interval sweeps, clears (docs/engine.md,
    "Intervals without stopping"). ``close`` pulses, one per interval in order from ``first``;
    ``source``: bins and closes of this kind."""
    def __init__(self, kind, valid, bin, tag, ram_address, overflow, interval, clock_domain, out_depth=16,
                 word_count_bits=WORD_COUNT_BITS):
        self.close    = Signal()    # pulse: the next interval is complete (all its samples are in)
        self.begin    = Signal()    # pulse: a run starts; intervals from `first`
        self.first    = Signal(32)
        self.clear    = Signal()    # pulse: zero every word (engine stopped)
        self.busy     = Signal()    # clearing, or closes / samples / bins not yet out
        self.samples_lost = Signal(32)  # a sample that found the previous one waiting, or overran
        self.bins_lost    = Signal(32)  # a spilled count that found the output full
        self.source   = stream.Endpoint(bins_layout())

        # # #

        sync = getattr(self.sync, clock_domain)
        word_bits = 1 + word_count_bits
        self.ram = ram = RAM36(BANK_RAM_WORDS, clock_domain, width=-(-word_bits // 9) * 9)
        assert ram.latency == SLOT - 1
        self.out = out = ClockDomainsRenamer(clock_domain)(stream.SyncFIFO(bins_layout(), out_depth))
        self.comb += out.source.connect(self.source)

        interval_k = Signal(32)     # the interval the next close completes
        closes     = Signal(16)     # closes received, not yet done
        dirty      = Signal(2)      # per epoch: counts were added since its last sweep
        sweeping   = Signal()
        clearing   = Signal()
        scan       = Signal(max=BANK_WORDS + 1)   # next word of a sweep or clear
        scan_ram   = Signal(max=BANK_RAM_WORDS)   # its RAM address (the overflow words skipped)
        scan_ovf   = Signal(2)                    # it is the untagged (0) or tagged (1) overflow word
        scan_tag   = Signal()
        scan_bin   = Signal(max=TAG_BINS + 1)
        # The waiting sample (at most one: the crossing gives one every 2 * SLOT cycles at most).
        pending, pending_bin, pending_tag, pending_epoch = Signal(), Signal(12), Signal(), Signal()
        pending_ram, pending_ovf = Signal(max=BANK_RAM_WORDS), Signal(2)

        # Operation slots: phase 0 issues (address to the read port) and writes and emits the
        # previous slot's result; phase 1 has the word (from the block RAM, an overflow register, or
        # the word the previous slot just wrote) and computes. A read issued at the edge that writes
        # its own word would read the old word: that case takes the written word instead (the bypass).
        phase = Signal(max=SLOT)
        OP_NONE, OP_INC, OP_SWEEP, OP_CLEAR = range(4)
        op, op_epoch = Signal(2), Signal()
        op_ram, op_ovf = Signal(max=BANK_RAM_WORDS), Signal(2)
        overflow_words = [Signal(word_bits, name=f"overflow_word{t}") for t in range(2)]
        op_tag, op_bin = Signal(), Signal(12)
        word = Signal(word_bits)
        alt_word, use_alt = Signal(word_bits), Signal()      # overflow or bypassed word
        wrote, wrote_ram = Signal(), Signal(max=BANK_RAM_WORDS)   # the previous slot's RAM write
        writes_word, writes_ram = Signal(), Signal()              # this slot's result is written: anywhere, to RAM
        new_word, write, emit = Signal(word_bits), Signal(), Signal()
        emit_count, emit_interval, emit_tag, emit_bin = Signal(COUNT_BITS), Signal(32), Signal(), Signal(12)
        w_count, w_epoch = word[:word_count_bits], word[word_count_bits]
        incremented = Signal(word_count_bits + 1)   # w_count + 1; its top bit: the word is full
        self.comb += incremented.eq(w_count + 1)
        sweep_epoch = interval_k[0]
        interval_next = Signal(32)                  # interval_k + 1, kept alongside
        room = Signal()
        self.comb += room.eq(out.level < out_depth - 2)

        # A new sample: it waits for the next phase 0 (it is taken there).
        take = Signal()
        inc_in_range = Signal()
        intervals_ahead = Signal(32)    # modulo 2**32, as a signal: an interval before k is far ahead
        self.comb += [
            intervals_ahead.eq(interval - interval_k),
            inc_in_range.eq(intervals_ahead < 2),   # k or k+1: never a bank two intervals on
            take.eq(phase == 0),
        ]
        sync += [
            # The waiting sample is taken at phase 0 whatever arrives then (a new one waits in its
            # place, unless it is lost).
            If(take & pending,
                pending.eq(0),
            ),
            If(valid,
                If(pending & ~take | ~inc_in_range,
                    If(self.samples_lost != 0xFFFFFFFF, self.samples_lost.eq(self.samples_lost + 1)),
                ).Else(
                    pending.eq(1), pending_bin.eq(bin), pending_tag.eq(tag), pending_epoch.eq(interval[0]),
                    pending_ram.eq(ram_address),
                    pending_ovf.eq(Mux(overflow, Mux(tag, 0b10, 0b01), 0)),
                ),
            ),
        ]

        scan_last = Signal()
        self.comb += scan_last.eq(scan == BANK_WORDS - 1)
        # scan_ram and scan_ovf follow scan; an overflow word has no RAM address (scan_ram is then
        # the next RAM word's).
        scan_restart = [scan.eq(0), scan_ram.eq(0), scan_ovf.eq(0)]
        scan_advance = [
            scan.eq(scan + 1),
            If(scan_ovf == 0, scan_ram.eq(scan_ram + 1)),
            scan_ovf.eq(Cat(scan == TAG_BINS - 2, scan == BANK_WORDS - 2)),
        ]
        out_close = Signal()
        sync += [
            phase.eq(phase + 1),
            out_close.eq(0),
            Case(phase, {
                0: [
                    op.eq(OP_NONE),
                    If(pending,
                        op.eq(OP_INC), op_epoch.eq(pending_epoch),
                        op_ram.eq(pending_ram), op_ovf.eq(pending_ovf),
                        op_tag.eq(pending_tag), op_bin.eq(pending_bin),
                        # It marks its epoch as it is issued: that interval has counts to sweep
                        # (no sweep decision can come between the issue and the write).
                        If(pending_epoch, dirty[1].eq(1)).Else(dirty[0].eq(1)),
                    ).Elif(clearing,
                        op.eq(OP_CLEAR), op_ram.eq(scan_ram), op_ovf.eq(scan_ovf),
                        *scan_advance, If(scan_last, clearing.eq(0)),
                    ).Elif(sweeping,
                        If(scan == BANK_WORDS,
                            # Every word swept: the close follows this interval's last bin.
                            If(room,
                                sweeping.eq(0), out_close.eq(1),
                            ),
                        ).Elif(room,
                            op.eq(OP_SWEEP), op_tag.eq(scan_tag), op_bin.eq(scan_bin),
                            op_ram.eq(scan_ram), op_ovf.eq(scan_ovf),
                            *scan_advance,
                            If(scan_bin == TAG_BINS - 1,
                                scan_bin.eq(0), scan_tag.eq(1),
                            ).Else(
                                scan_bin.eq(scan_bin + 1),
                            ),
                        ),
                    ).Elif(closes != 0,
                        If(Mux(sweep_epoch, dirty[1], dirty[0]),
                            sweeping.eq(1), *scan_restart, scan_tag.eq(0), scan_bin.eq(0),
                            If(sweep_epoch, dirty[1].eq(0)).Else(dirty[0].eq(0)),
                        ).Elif(room,
                            out_close.eq(1),   # nothing counted in this interval: nothing to sweep
                        ),
                    ),
                ],
                1: [
                    write.eq(0), emit.eq(0),
                    # By default taken whatever the word (the block RAM's data comes late).
                    emit_count.eq(w_count), emit_interval.eq(interval_k),
                    emit_tag.eq(op_tag), emit_bin.eq(op_bin),
                    Case(op, {
                        OP_INC: [
                            write.eq(1),
                            # A word still holding the previous interval's count spills it; a full
                            # word spills its count with this sample (and wraps to 0), labelled with
                            # the sample's interval (k or k + 1, by its epoch).
                            If(w_epoch == op_epoch,
                                new_word.eq(Cat(incremented[:word_count_bits], op_epoch)),
                                emit.eq(incremented[word_count_bits]),
                                emit_count.eq(incremented),
                                emit_interval.eq(Mux(op_epoch == sweep_epoch, interval_k, interval_next)),
                            ).Else(
                                new_word.eq(Cat(C(1, word_count_bits), op_epoch)),
                                emit.eq(w_count != 0),
                            ),
                        ],
                        OP_SWEEP: [
                            write.eq((w_epoch == sweep_epoch) & (w_count != 0)),
                            new_word.eq(Cat(C(0, word_count_bits), ~sweep_epoch)),
                            emit.eq((w_epoch == sweep_epoch) & (w_count != 0)),
                        ],
                        OP_CLEAR: [write.eq(1), new_word.eq(0)],
                    }),
                ],
            }),
            # Phase 0: the previous slot's result (`op` and the rest still describe that slot).
            If(phase == 0,
                wrote.eq(writes_ram), wrote_ram.eq(op_ram),
                If(writes_word,
                    If(op_ovf[0], overflow_words[0].eq(new_word)),
                    If(op_ovf[1], overflow_words[1].eq(new_word)),
                ),
                If((op == OP_INC) & emit & ~out.sink.ready,
                    If(self.bins_lost != 0xFFFFFFFF, self.bins_lost.eq(self.bins_lost + 1)),
                ),
            ),
            If(out_close,
                interval_k.eq(interval_next), interval_next.eq(interval_next + 1),
            ),
            # Closes counted here, done above (both can happen in one cycle).
            closes.eq(closes + self.close - out_close),
            If(self.begin,
                interval_k.eq(self.first), interval_next.eq(self.first + 1), closes.eq(0), dirty.eq(0),
                sweeping.eq(0),
            ),
            If(self.clear,
                clearing.eq(1), *scan_restart, closes.eq(0), dirty.eq(0), sweeping.eq(0),
                self.samples_lost.eq(0), self.bins_lost.eq(0),
            ),
        ]

        self.comb += [
            use_alt.eq((op_ovf != 0) | (wrote & (wrote_ram == op_ram))),
            alt_word.eq(Mux(op_ovf[0], overflow_words[0], Mux(op_ovf[1], overflow_words[1], new_word))),
            word.eq(Mux(use_alt, alt_word, ram.dat_r)),
            ram.read_address.eq(Mux(phase == 0, Mux(pending, pending_ram, scan_ram), op_ram)),
            ram.write_address.eq(op_ram),
            ram.dat_w.eq(new_word),
            writes_word.eq(write & (op != OP_NONE)),
            writes_ram.eq(writes_word & (op_ovf == 0)),
            ram.we.eq((phase == 0) & writes_ram),
            out.sink.valid.eq(((phase == 0) & emit & (op != OP_NONE) & (op != OP_CLEAR)) | out_close),
            out.sink.type.eq(Mux(out_close, ENTRY_CLOSE, ENTRY_BIN)),
            out.sink.kind.eq(kind),
            out.sink.tag.eq(emit_tag),
            out.sink.bin.eq(emit_bin),
            out.sink.count.eq(emit_count),
            out.sink.interval.eq(Mux(out_close, interval_k, emit_interval)),
            self.busy.eq(clearing | sweeping | (closes != 0) | pending | (op != OP_NONE) | out.source.valid),
        ]


# Statistics ----------------------------------------------------------------------------------------

# The run totals are records of a small RAM: per kind four slots (untagged, tagged, misses, below
# range), record index kind * STAT_SLOTS + slot. Each record has a count; the two tag slots also the
# min, max and sum of their binned values.
STAT_SLOTS = 4
STAT_UNTAGGED, STAT_TAGGED, STAT_MISSES, STAT_BELOW = range(STAT_SLOTS)
STAT_RECORDS = 16                   # the RAMs' depth (12 records used): one LUT RAM deep


def stat_index(kind, slot):
    return kind * STAT_SLOTS + slot


class _Statistics(LiteXModule):
    """Every kind's exact run totals, with one adder and one pair of compares for all of them.

    The records live in LUT RAMs (count, min, max, sum: one RAM each, 16 deep). A sample (at most one
    every ``2 * SLOT`` cycles) is latched, then its kinds take one cycle each: read the record of the
    kind's slot, compute, write it back. Duplicates (per kind) and samples are registers.

    ``snapshot`` takes a copy of everything at one instant (the first cycle no kind is being
    updated, so a sample is in the copy whole or not at all) without holding up the samples:
    registers at once, records copy-on-write into a second set of RAMs (a record's old value is
    copied the first time it is updated after the instant, the others in the free cycles); ``valid``
    once the copy is complete. ``also`` are counters kept elsewhere, copied at the same instant.
    ``index`` picks the record of the copy that ``count``, ``min``, ``max``, ``sum`` show.
    The min is kept complemented, so a zeroed record (power-up, clear) reads 0xFFFFFFFF: none."""
    def __init__(self, valid, present, below, value, tag, dups, clock_domain, also=()):
        n_kinds = len(present)
        assert n_kinds * STAT_SLOTS <= STAT_RECORDS
        assert 2 * SLOT >= n_kinds + 1, "a sample's kinds must be done before the next sample comes"
        self.clear      = Signal()     # pulse: zero every total (no samples until it is done)
        self.clearing   = Signal()
        self.snapshot   = Signal()     # pulse
        self.valid      = Signal()     # the copy is complete and still
        self.index      = Signal(max=STAT_RECORDS)
        self.count      = Signal(40)   # of the copy's record `index`
        self.min        = Signal(32)
        self.max        = Signal(32)
        self.sum        = Signal(64)
        self.duplicates = Signal(40)   # of the copy, the kind of `index`
        self.samples    = Signal(40)   # of the copy
        self.also       = [Signal(len(a), name=f"also{i}") for i, a in enumerate(also)]  # of the copy

        # # #

        sync = getattr(self.sync, clock_domain)
        # The latched sample, shifted one kind per cycle: the kind being updated is always at [0].
        active = Signal()              # a kind's update this cycle
        kind   = Signal(2)
        v      = [Signal(32, name=f"stat_value{k}") for k in range(n_kinds)]
        slot   = [Signal(2, name=f"stat_slot{k}") for k in range(n_kinds)]
        binned = [Signal(name=f"stat_binned{k}") for k in range(n_kinds)]
        d      = [Signal(16, name=f"stat_dups{k}") for k in range(n_kinds)]
        last = n_kinds - 1
        sync += If(valid,
            active.eq(1), kind.eq(0),
            *[v[k].eq(value[k]) for k in range(n_kinds)],
            *[slot[k].eq(Mux(present[k], tag, Mux(below[k], STAT_BELOW, STAT_MISSES))) for k in range(n_kinds)],
            *[binned[k].eq(present[k]) for k in range(n_kinds)],
            *[d[k].eq(dups[k]) for k in range(n_kinds)],
        ).Elif(active,
            kind.eq(kind + 1),
            If(kind == last, active.eq(0)),
            *[x[k].eq(x[k + 1]) for x in (v, slot, binned, d) for k in range(last)],
        )

        # Live records and their copy. One address for the live RAMs: the clear's, the update's or
        # the copier's; the copy is written at the same address with what the live RAM reads there.
        scan   = Signal(max=STAT_RECORDS)        # clear
        copier = Signal(max=STAT_RECORDS)
        address = Signal(max=STAT_RECORDS)
        self.comb += address.eq(Mux(self.clearing, scan, Mux(active, Cat(slot[0], kind), copier)))
        snapping = Signal()
        copied   = Signal(STAT_RECORDS)          # records copied since the instant
        copy_now = Signal()
        self.comb += copy_now.eq(snapping & ~self.clearing & ~(copied >> address)[0])

        old, new = {}, {}
        widths = {"count": 40, "min": 32, "max": 32, "sum": 64}
        outputs = {"count": self.count, "min": Signal(32), "max": self.max, "sum": self.sum}
        for name, width in widths.items():
            live = Memory(width, STAT_RECORDS, name=f"stats_{name}")
            copy = Memory(width, STAT_RECORDS, name=f"stats_{name}_copy")
            port = live.get_port(write_capable=True, async_read=True, clock_domain=clock_domain)
            copy_w = copy.get_port(write_capable=True, async_read=True, clock_domain=clock_domain)
            copy_r = copy.get_port(async_read=True, clock_domain=clock_domain)
            self.specials += live, copy, port, copy_w, copy_r
            old[name] = port.dat_r
            new[name] = Signal(width, name=f"stats_{name}_new")
            writes = self.clearing | (active & (binned[0] if name != "count" else 1))
            self.comb += [
                port.adr.eq(address), port.dat_w.eq(Mux(self.clearing, 0, new[name])), port.we.eq(writes),
                copy_w.adr.eq(address), copy_w.dat_w.eq(port.dat_r), copy_w.we.eq(copy_now),
                copy_r.adr.eq(self.index), outputs[name].eq(copy_r.dat_r),
            ]
        min_c = Signal(32)                       # the value complemented: the min record's form
        self.comb += [
            min_c.eq(~v[0]),
            new["count"].eq(old["count"] + 1),
            new["min"].eq(Mux(min_c > old["min"], min_c, old["min"])),
            new["max"].eq(Mux(v[0] > old["max"], v[0], old["max"])),
            new["sum"].eq(old["sum"] + v[0]),
            self.min.eq(~outputs["min"]),
        ]

        # Registers: duplicates per kind, samples (counted with a sample's last kind).
        dup_live = [Signal(40, name=f"duplicates{k}") for k in range(n_kinds)]
        dup_copy = [Signal(40, name=f"duplicates_copy{k}") for k in range(n_kinds)]
        samples = Signal(40)
        sync += [
            If(active & (kind == last), samples.eq(samples + 1)),
            *[If(active & (kind == k), dup_live[k].eq(dup_live[k] + d[0])) for k in range(n_kinds)],
        ]
        self.comb += self.duplicates.eq(Array(dup_copy)[self.index[2:]])

        # Snapshot: asked, then taken at the first cycle without an update (or clear) under way.
        wanted, take = Signal(), Signal()
        self.comb += take.eq((self.snapshot | wanted) & ~active & ~self.clearing)
        sync += [
            If(self.snapshot, self.valid.eq(0), wanted.eq(1)),
            If(take,
                wanted.eq(0), snapping.eq(1), copied.eq(0), copier.eq(0), self.valid.eq(0),
                self.samples.eq(samples),
                *[c.eq(x) for c, x in zip(dup_copy, dup_live)],
                *[c.eq(x) for c, x in zip(self.also, also)],
            ).Elif(snapping,
                If(copy_now, copied.eq(copied | (1 << address))),
                If(~active & ~self.clearing, copier.eq(copier + 1)),
                If(copied == (1 << STAT_RECORDS) - 1, snapping.eq(0), self.valid.eq(1)),
            ),
        ]

        # Clear: every record zeroed, one a cycle; a copy under way starts again once it is done.
        sync += [
            If(self.clearing,
                scan.eq(scan + 1),
                If(scan == STAT_RECORDS - 1, self.clearing.eq(0)),
            ),
            If(self.clear,
                self.clearing.eq(1), scan.eq(0),
                samples.eq(0), *[x.eq(0) for x in dup_live],
                If(snapping, snapping.eq(0), wanted.eq(1)),
            ),
        ]


# MeasurementEngine ---------------------------------------------------------------------------------

class MeasurementEngine(LiteXModule):
    """Pairing, histograms, statistics, outliers and trigger-out on the capture's record stream.

    ``record``      the capture core's record register (``valid``, ``channels``, ``levels``).
    ``record_tick`` the tick each cycle of ``record`` stands for (its timestamp, every cycle).
    ``record_delay`` ticks from an edge at its pin to its record in ``record``.
    ``bins``, ``outliers``: streams in ``sys``. ``trigger``: the trigger-out pin.
    """
    def __init__(self, record, record_tick, record_delay, clock_domain="ts", bins_depth=512,
                 outlier_depth=16, with_csr=True, word_count_bits=WORD_COUNT_BITS):
        self.clock_domain = clock_domain
        self.n_channels   = len(record.channels)
        assert self.n_channels <= 16
        self.config   = _Config()            # sys
        self.start    = Signal()             # sys pulses
        self.flush    = Signal()
        self.clear    = Signal()
        self.bins     = stream.Endpoint(bins_layout())      # sys
        self.outliers = stream.Endpoint(outlier_layout())   # sys
        self.trigger  = Signal()             # clock_domain: the trigger-out pin
        self.outliers_lost = Signal(32)      # sys

        # # #

        sync = getattr(self.sync, clock_domain)
        # clock_domain: the settings it uses, copied on start; sys reads its own (offset, thresholds)
        # from the CSRs, which hold still during a run.
        ts_names = self.config.ts_fields()
        self.apply = ConfigCommit([getattr(self.config, n) for n in ts_names], clock_domain)
        cfg = self.config.with_copies(ts_names, self.apply.outputs)
        self.flush_sync = ConfigCommit([], clock_domain)
        self.clear_sync = ConfigCommit([], clock_domain)
        self.comb += [
            self.apply.commit.eq(self.start),
            self.flush_sync.commit.eq(self.flush),
            self.clear_sync.commit.eq(self.clear),
        ]

        self.decode  = _RecordDecode(record, record_tick, cfg, clock_domain)
        self.pairing = _Pairing(self.decode, cfg, clock_domain)
        # The run begins once the decode stage has seen the new settings (the interval number
        # of its first tick is taken under the new shift).
        begin, applied_seen = Signal(), Signal()
        sync += [applied_seen.eq(self.apply.applied), begin.eq(applied_seen)]
        self.comb += [
            self.pairing.begin.eq(begin),
            self.pairing.flush.eq(self.flush_sync.applied),
            self.pairing.stop.eq(self.clear_sync.applied),
        ]
        # The trigger pin, from the tick the condition held: record_delay, decode, pairing, pulse.
        self.TRIGGER_DELAY = record_delay + _RecordDecode.latency + _Pairing.latency + 1
        remaining = Signal(16)
        sync += If(self.pairing.trigger,
            remaining.eq(cfg.trigger_width),
        ).Elif(remaining != 0,
            remaining.eq(remaining - 1),
        )
        self.comb += self.trigger.eq(remaining != 0)

        # To sys, in order.
        self.crossing = crossing = _Crossing(self.pairing, begin, self.clear_sync.applied, clock_domain)
        self.values = values = _SampleValues(crossing.sample, self.config, "sys")

        # Per kind: binning, bank, statistics. The run's events follow the samples through the same
        # stages (a close after its interval's samples, a begin or clear after what came before).
        close, begin_banks, clear_banks, flushed = crossing.close, crossing.begin, crossing.clear, crossing.flushed
        first_interval = Signal(32)
        for stage in range(_SampleValues.latency + _Binning.latency):
            delayed = [Signal() for _ in range(4)]
            self.sync += [d.eq(x) for d, x in zip(delayed, (close, begin_banks, clear_banks, flushed))]
            close, begin_banks, clear_banks, flushed = delayed
            if stage == _SampleValues.latency - 1:
                # The begin's first interval has just been through the values stage.
                self.sync += If(begin_banks, first_interval.eq(values.interval))
        self.banks = []
        for k in range(3):
            binning = _Binning(values.valid & values.present[k], values.value[k], values.tag, values.interval,
                               "sys")
            bank = _HistogramBank(k, binning.valid, binning.bin, binning.tag, binning.ram_address,
                                  binning.overflow, binning.interval, "sys", word_count_bits=word_count_bits)
            self.add_module(f"binning{k}", binning)
            self.add_module(f"bank{k}", bank)
            self.comb += [
                bank.close.eq(close), bank.begin.eq(begin_banks), bank.first.eq(first_interval),
                bank.clear.eq(clear_banks),
            ]
            self.banks.append(bank)

        # Counters of what was lost, since the clear (copied with the statistics).
        self.windows_lost = Signal(32)   # samples lost at the crossing (whole windows)
        self.samples_lost = Signal(32)   # those, plus a kind's values beyond the sweep
        self.bins_lost    = Signal(32)
        lost_sum = Signal(33)
        self.comb += lost_sum.eq(self.windows_lost + crossing.lost)
        self.sync += [
            self.windows_lost.eq(Mux(lost_sum[32], 0xFFFFFFFF, lost_sum[:32])),
            If(clear_banks, self.windows_lost.eq(0)),
            self.samples_lost.eq(reduce(lambda a, b: a + b, [self.windows_lost]
                                        + [bank.samples_lost for bank in self.banks])[:32]),
            self.bins_lost.eq(reduce(lambda a, b: a + b, [bank.bins_lost for bank in self.banks])[:32]),
        ]
        self.stats = _Statistics(values.valid, values.present, values.below, values.value, values.tag,
                                 values.dups, "sys", also=[self.samples_lost, self.bins_lost, self.outliers_lost])
        self.comb += self.stats.clear.eq(clear_banks)

        # Bins of the three banks, round robin.
        self.arbiter = RoundRobin(3, SP_CE)
        self.bins_fifo = bins_fifo = stream.SyncFIFO(bins_layout(), bins_depth, buffered=True)
        cases = {}
        for k, bank in enumerate(self.banks):
            self.comb += self.arbiter.request[k].eq(bank.source.valid)
            cases[k] = bank.source.connect(bins_fifo.sink)
        self.comb += [
            Case(self.arbiter.grant, cases),
            self.arbiter.ce.eq(~bins_fifo.sink.valid | bins_fifo.sink.ready),
            bins_fifo.source.connect(self.bins),
        ]

        # Outliers: a sample above any kind's threshold.
        self.outlier_fifo = outlier_fifo = stream.SyncFIFO(outlier_layout(), outlier_depth)
        thresholds = [self.config.threshold0, self.config.threshold1, self.config.threshold2]
        above = Signal()
        record_out = Signal(64 + 96 + 2)
        self.comb += above.eq(reduce(or_, [values.valid & values.present[k] & (values.value[k] > thresholds[k])
                                        for k in range(3)]))
        self.sync += [
            outlier_fifo.sink.valid.eq(above),
            record_out.eq(Cat(values.start, values.outlier_values, values.tag_at, values.tag)),
            If(outlier_fifo.sink.valid & ~outlier_fifo.sink.ready,
                If(self.outliers_lost != 0xFFFFFFFF, self.outliers_lost.eq(self.outliers_lost + 1)),
            ),
            If(clear_banks, self.outliers_lost.eq(0)),
        ]
        self.comb += [
            Cat(outlier_fifo.sink.start, outlier_fifo.sink.values, outlier_fifo.sink.flags).eq(record_out),
            outlier_fifo.source.connect(self.outliers),
        ]

        # Status, in sys. A clear is under way from its strobe until its entry reaches the banks (the
        # banks' and statistics' own clearing take over in the same edge); a flush is complete once its
        # entry has come through and the banks are idle. The events still in the delay stages need not
        # be in `busy`: the crossing writes the flush's entry after every sample and close owed, so
        # when it reaches the banks the closes ahead of it are in the banks' `closes` already.
        self.busy    = Signal()
        self.flushed = Signal()
        self.running = Signal()
        clearing, flush_seen = Signal(), Signal()
        self.sync += [
            If(self.clear, clearing.eq(1)).Elif(clear_banks, clearing.eq(0)),
            If(self.start | self.clear, flush_seen.eq(0)).Elif(flushed, flush_seen.eq(1)),
        ]
        self.specials += MultiReg(self.pairing.running, self.running)
        self.comb += [
            self.busy.eq(reduce(or_, [bank.busy for bank in self.banks]
                                + [clearing, crossing.pending, values.valid, self.stats.clearing])),
            self.flushed.eq(flush_seen & ~self.busy),
        ]

        if with_csr:
            self.add_csr()

    def add_csr(self):
        """Settings and their application, control strobes, status, and the statistics snapshot."""
        descriptions = {
            "start_channel": "Channel whose edge starts a window (the stimulus).",
            "start_level": "Level after the start edge: 1 rising, 0 falling.",
            "isr_channel": "Channel of the first response (ISR entry).",
            "isr_level": "Level after its active edge.",
            "task_channel": "Channel of the second response (task dispatch).",
            "task_level": "Level after its active edge.",
            "tag_channel": "Channel of the tag input.",
            "tag_level": "The tag's active level.",
            "tag_enable": "``1``: split the samples by the tag.",
            "interval_shift": f"Interval boundaries at multiples of 2**(this + {INTERVAL_SHIFT_MIN}) ticks.",
            "trigger_response": "The response the trigger waits for: 0 isr, 1 task.",
            "trigger_on_late": "``1``: pulse the trigger also when that response arrives late.",
        }
        fields = [CSRField(name, size=width, description=descriptions[name])
                  for name, width in _Config.FIELDS if name in descriptions]
        self._config = CSRStorage(fields=fields, description=
            "Engine roles and options; take effect on ``control.start``.")
        for f in fields:
            self.comb += getattr(self.config, f.name).eq(getattr(self._config.fields, f.name))
        wide = {
            "deadline": "Window length limit, in ticks (0: none; else >= the minimum spacing).",
            "offset": "Calibrated rig offset, in ticks, subtracted from both stimulus latencies.",
            "threshold0": "Outlier threshold of stim_to_isr, in ticks (0xFFFFFFFF: none).",
            "threshold1": "Outlier threshold of stim_to_task, in ticks (0xFFFFFFFF: none).",
            "threshold2": "Outlier threshold of isr_to_task, in ticks (0xFFFFFFFF: none).",
            "trigger_threshold": "Ticks without the response before the trigger pulses (0: off).",
            "trigger_width": "Trigger pulse width, in ticks.",
        }
        for name, description in wide.items():
            signal = getattr(self.config, name)
            csr = CSRStorage(len(signal), name=name, description=description)
            setattr(self, f"_{name}", csr)
            self.comb += signal.eq(csr.storage)

        self._control = CSRStorage(fields=[
            CSRField("start", size=1, pulse=True, description=
                "Write ``1`` to apply the settings and start measuring at the current tick."),
            CSRField("flush", size=1, pulse=True, description=
                "Write ``1`` to close the open window and every interval up to the current tick; "
                "``status.flushed`` rises when their bins are all in the bins FIFO."),
            CSRField("clear", size=1, pulse=True, description=
                "Write ``1`` to stop and zero the histograms, statistics and counters; wait for "
                "``status.busy`` to drop."),
            CSRField("snapshot", size=1, pulse=True, description=
                "Write ``1`` to copy the statistics (one instant, samples whole); ``status.valid`` rises "
                "when the copy is complete, then ``stats_index`` picks what ``stats_*`` show."),
        ], description="Engine control (write-1 strobes).")
        self.comb += [
            self.start.eq(self._control.fields.start),
            self.flush.eq(self._control.fields.flush),
            self.clear.eq(self._control.fields.clear),
        ]

        # Statistics: a copy taken on `snapshot`, one record at a time through `stats_index`.
        st = self.stats
        self._stats_index = CSRStorage(len(st.index), description=
            f"Record of the statistics copy the ``stats_*`` registers show: kind * {STAT_SLOTS} + slot (kind "
            "0 stim_to_isr, 1 stim_to_task, 2 isr_to_task; slot 0 untagged, 1 tagged, 2 misses, 3 below range).")
        self.comb += st.index.eq(self._stats_index.storage)
        outputs = [
            ("stats_count", st.count, "The record's count: binned samples (slots 0, 1), windows without the "
                                      "response(s) (slot 2) or negative values, not binned (slot 3)."),
            ("stats_min", st.min, "The record's smallest value, ticks (slots 0, 1; 0xFFFFFFFF: none)."),
            ("stats_max", st.max, "The record's largest value, ticks (slots 0, 1)."),
            ("stats_sum", st.sum, "The sum of the record's values, ticks (slots 0, 1)."),
            ("stats_duplicates", st.duplicates, "Extra responses in windows of the record's kind, count."),
            ("samples", st.samples, "Windows closed (samples), count."),
            ("samples_lost", st.also[0],
             "Samples not counted: windows lost at the crossing to sys (stimuli closer than the minimum "
             "spacing for longer than its FIFO holds), plus a kind's values beyond the sweep (count)."),
            ("bins_lost", st.also[1], "Spilled bin counts that found the bins FIFO full (count)."),
            ("outliers_lost", st.also[2], "Outlier records that found their FIFO full (count)."),
        ]
        for name, signal, description in outputs:
            csr = CSRStatus(len(signal), name=name, description=description + " At the last snapshot.")
            setattr(self, f"_{name}", csr)
            self.comb += csr.status.eq(signal)

        self._status = CSRStatus(fields=[
            CSRField("valid",   size=1, description="Statistics snapshot complete."),
            CSRField("busy",    size=1, description="Clearing, sweeping, or bins still to go out."),
            CSRField("flushed", size=1, description="After ``flush``: every interval closed and out."),
            CSRField("running", size=1, description="Started and not cleared."),
        ], description="Engine status (flags).")
        self.comb += [
            st.snapshot.eq(self._control.fields.snapshot),
            self._status.fields.valid.eq(st.valid),
            self._status.fields.busy.eq(self.busy),
            self._status.fields.flushed.eq(self.flushed),
            self._status.fields.running.eq(self.running),
        ]

    def add_csr_reader(self):
        """Bins and outlier records for the firmware: the head entry as CSRs, ``pop`` to advance."""
        self._bins_status = CSRStatus(fields=[
            CSRField("pending", size=1, description="``1``: a bins entry is waiting."),
        ], description="Bins FIFO status (flag).")
        self._bins_info = CSRStatus(fields=[
            CSRField("type", size=1, description="0: a bin's count; 1: close of the interval (kind)."),
            CSRField("kind", size=2, description="0 stim_to_isr, 1 stim_to_task, 2 isr_to_task."),
            CSRField("tag",  size=1, description="``1``: the tagged samples' bin."),
            CSRField("bin",  size=12, description=
                f"HdrHistogram bin index (0..{OVERFLOW_BIN}; {OVERFLOW_BIN}: overflow)."),
        ], description="Head bins entry (bit fields).")
        self._bins_count = CSRStatus(COUNT_BITS, description="Head bins entry: count of samples in the bin.")
        self._bins_interval = CSRStatus(32, description=
            "Head bins entry: interval number (start tick >> shift), low 32 bits.")
        self._bins_pop = CSRStorage(fields=[
            CSRField("pop", size=1, pulse=True, description="Write ``1`` to drop the head entry."),
        ], description="Bins FIFO read strobe (write-1).")
        self._outlier_status = CSRStatus(fields=[
            CSRField("pending", size=1, description="``1``: an outlier record is waiting."),
        ], description="Outlier FIFO status (flag).")
        self._outlier_start = CSRStatus(64, description="Head outlier: the stimulus tick.")
        self._outlier_values = CSRStatus(96, description=
            "Head outlier: the three values in ticks, kind 0 in the low word (0xFFFFFFFF miss, "
            "0xFFFFFFFE below range).")
        self._outlier_flags = CSRStatus(fields=[
            CSRField("tag_at_start",  size=1, description="The tag was active at the stimulus."),
            CSRField("tag_in_window", size=1, description="The tag was active in the window."),
        ], description="Head outlier: tag flags.")
        self._outlier_pop = CSRStorage(fields=[
            CSRField("pop", size=1, pulse=True, description="Write ``1`` to drop the head record."),
        ], description="Outlier FIFO read strobe (write-1).")
        b, o = self.bins, self.outliers
        self.comb += [
            self._bins_status.fields.pending.eq(b.valid),
            self._bins_info.fields.type.eq(b.type), self._bins_info.fields.kind.eq(b.kind),
            self._bins_info.fields.tag.eq(b.tag), self._bins_info.fields.bin.eq(b.bin),
            self._bins_count.status.eq(b.count), self._bins_interval.status.eq(b.interval),
            b.ready.eq(self._bins_pop.fields.pop),
            self._outlier_status.fields.pending.eq(o.valid),
            self._outlier_start.status.eq(o.start), self._outlier_values.status.eq(o.values),
            self._outlier_flags.fields.tag_at_start.eq(o.flags[0]),
            self._outlier_flags.fields.tag_in_window.eq(o.flags[1]),
            o.ready.eq(self._outlier_pop.fields.pop),
        ]
