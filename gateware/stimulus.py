"""StimulusGenerator: drives the interrupt pins of the device under test.

Each channel produces pulses on one pin, in the ``ts`` clock domain, with tick-exact timing:

=========  ==============================================================================
mode       rising edges (active level) at
=========  ==============================================================================
PERIODIC   start, start + P, start + 2P, ...
DITHER     intervals P - J + u, u uniform in [0, 2J] from a seeded xorshift32 PRNG
           (Faller's de-synchronization: sampling never locks to the DUT's OS tick)
RANDOM     intervals P + G, G geometric: after the hold-off P, each tick fires with
           probability ``probability`` / 2**32 (Poisson-like arrivals)
BURST      bursts of K pulses S ticks apart; burst starts P ticks apart
ONESHOT    a single pulse at start
=========  ==============================================================================

Every pulse is ``width`` ticks long; ``invert`` makes the pin active-low. ``count`` limits the
number of pulses (0: free-running). The first pulse starts at the absolute tick ``start_time`` when
``control.at_time`` is set (a start time already passed is refused and flagged ``late``, never
silently moved), else as soon as the commit reaches the ``ts`` domain.

The pin level (``pins``) is also fed to the EdgeCapture core, so every stimulus edge is recorded with
its exact timestamp: the host never infers when a stimulus happened.

Constraints the host checks before it commits: every interval >= ``MIN_INTERVAL``, and
``width`` >= 1 and shorter than the shortest interval (a pulse still active when the next one fires
is held active: the two merge into one).
"""

from litex.gen import LiteXModule
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage
from migen import *
from migen.genlib.cdc import MultiReg

from gateware.cdc import ConfigCommit

MODE_PERIODIC = 0
MODE_DITHER   = 1
MODE_RANDOM   = 2
MODE_BURST    = 3
MODE_ONESHOT  = 4

# Shortest interval between rising edges, in ticks: the dither pipeline needs 4 cycles per draw.
MIN_INTERVAL = 4
# Cycles from the commit reaching `ts` to the channel accepting its start (pipelines settle).
ARM_CYCLES = 6
# Seed used instead of 0 (xorshift32 has 0 as a fixed point).
ZERO_SEED_REPLACEMENT = 0x2545F491


def xorshift32(state):
    """One xorshift32 step (Marsaglia 13/17/5) as a Migen expression list: returns the next state."""
    x1 = Signal(32)
    x2 = Signal(32)
    x3 = Signal(32)
    return x3, [
        x1.eq(state ^ (state << 13)[:32]),
        x2.eq(x1 ^ (x1 >> 17)),
        x3.eq(x2 ^ (x2 << 5)[:32]),
    ]


class StimulusChannel(LiteXModule):
    def __init__(self, ts, clock_domain="ts"):
        self.pin = Signal()  # pin level, in `clock_domain`, registered

        # CSRs (sys) ------------------------------------------------------------------------------
        self._control = CSRStorage(fields=[
            CSRField("enable",  size=1, description="``1`` runs the channel, ``0`` stops it (pin idle)."),
            CSRField("mode",    size=3, description="Timing mode.", values=[
                ("``0``", "PERIODIC", "Period ``period``."),
                ("``1``", "DITHER",   "Period ``period`` +/- ``jitter``, uniform."),
                ("``2``", "RANDOM",   "Hold-off ``period``, then Bernoulli(``probability``) per tick."),
                ("``3``", "BURST",    "``burst_count`` pulses ``burst_spacing`` apart every ``period``."),
                ("``4``", "ONESHOT",  "One pulse."),
            ]),
            CSRField("invert",  size=1, description="``1``: active-low pin (idle high)."),
            CSRField("at_time", size=1, description="``1``: first pulse at ``start_time``; "
                                                    "``0``: as soon as committed."),
        ], description="Channel mode; takes effect on ``commit``.")
        self._width = CSRStorage(32, reset=1, description="Pulse width, in ticks (>= 1).")
        self._period = CSRStorage(32, reset=1000, description=
            "Period (PERIODIC, DITHER), burst-start period (BURST) or hold-off (RANDOM), in ticks.")
        self._jitter = CSRStorage(32, description=
            "DITHER: half-width J of the uniform dither, in ticks; intervals lie in [P-J, P+J].")
        self._probability = CSRStorage(32, description=
            "RANDOM: per-tick firing probability after the hold-off, in units of 2**-32.")
        self._burst_count = CSRStorage(16, reset=1, description="BURST: pulses per burst (>= 1).")
        self._burst_spacing = CSRStorage(32, reset=10, description=
            "BURST: ticks between the rising edges of a burst.")
        self._count = CSRStorage(32, description=
            "Pulses to emit before stopping; ``0``: free-running (ONESHOT always emits one).")
        self._start_time = CSRStorage(64, description=
            "Absolute tick of the first rising edge when ``control.at_time`` is set.")
        self._seed = CSRStorage(32, reset=1, description="Seed of the channel's xorshift32 PRNG.")
        self._commit = CSRStorage(fields=[
            CSRField("commit", size=1, pulse=True, description=
                "Write ``1`` to apply all settings of the channel at once (in the ``ts`` domain)."),
        ], description="Apply the channel's settings.")
        self._status = CSRStatus(fields=[
            CSRField("running", size=1, description="Channel armed or pulsing."),
            CSRField("done",    size=1, description="Pulse count reached (set until next commit)."),
            CSRField("late",    size=1, description="``start_time`` had already passed: not started."),
        ], description="Channel state (synchronized from ``ts``).")

        # Values derived in sys (slow, quasi-static) so the ts domain only sees registers.
        control = self._control.fields
        period = self._period.storage
        jitter = self._jitter.storage
        dither_base = Signal(32)  # P - J
        dither_span = Signal(33)  # 2J + 1
        burst_last  = Signal(16)  # K - 1
        burst_gap   = Signal(32)  # P - (K-1)*S: last rising edge of a burst to the next burst
        start_m3    = Signal(64)  # the start comparator pipeline looks 3 ticks ahead
        self.comb += [
            dither_base.eq(period - jitter),
            dither_span.eq(2*jitter + 1),
            burst_last.eq(self._burst_count.storage - 1),
            burst_gap.eq(period - burst_last * self._burst_spacing.storage),
            start_m3.eq(self._start_time.storage - 3),
        ]

        sources = [control.enable, control.mode, control.invert, control.at_time,
                   self._width.storage, period, dither_base, dither_span,
                   self._probability.storage, burst_last, self._burst_spacing.storage,
                   burst_gap, self._count.storage, start_m3, self._seed.storage]
        self.config = ConfigCommit(sources, clock_domain)
        self.comb += self.config.commit.eq(self._commit.fields.commit)
        (enable, mode, invert, at_time, width, period, dither_base, dither_span, probability,
         burst_last, burst_spacing, burst_gap, count, start_m3, seed) = self.config.outputs
        applied = self.config.applied

        # # #

        sync = getattr(self.sync, clock_domain)

        # Start comparator, 2-stage pipelined: in cycle c, `reached` <=> ts(c) + 1 >= start_time.
        half = len(ts) // 2
        hi_gt, hi_eq, lo_ge, lo_eq = Signal(), Signal(), Signal(), Signal()
        reached, exact = Signal(), Signal()
        sync += [
            hi_gt.eq(ts[half:] > start_m3[half:]),
            hi_eq.eq(ts[half:] == start_m3[half:]),
            lo_ge.eq(ts[:half] >= start_m3[:half]),
            lo_eq.eq(ts[:half] == start_m3[:half]),
            reached.eq(hi_gt | (hi_eq & lo_ge)),
            exact.eq(hi_eq & lo_eq),
        ]

        # PRNG and the dither pipeline: `draw` -> dither_interval valid 4 cycles later.
        prng = Signal(32, reset=1)
        draw = Signal()
        step_every_tick = Signal()
        prng_next, prng_logic = xorshift32(prng)
        self.comb += prng_logic
        d1, d2 = Signal(), Signal()
        product_hi = Signal(49)
        product_lo = Signal(49)
        offset = Signal(32)
        dither_interval = Signal(32)
        sync += [
            d1.eq(draw), d2.eq(d1),
            If(d1,
                product_hi.eq(prng[16:] * dither_span),
                product_lo.eq(prng[:16] * dither_span),
            ),
            # (prng * span) >> 32 = (hi*span + (lo*span >> 16)) >> 16: uniform in [0, span).
            If(d2, offset.eq((product_hi + product_lo[16:])[16:48])),
            dither_interval.eq(dither_base + offset),
        ]

        # Channel state.
        active      = Signal()    # pulse in progress (before polarity)
        remaining   = Signal(32)  # ticks to the next rising edge, fires at 1
        width_left  = Signal(32)
        pulses_left = Signal(32)
        free        = Signal()
        burst_pos   = Signal(16)
        arm_left    = Signal(max=ARM_CYCLES + 1)
        fire        = Signal()
        hit         = Signal()
        running, done, late = Signal(), Signal(), Signal()
        next_interval = Signal(32)
        self.comb += [
            hit.eq(prng < probability),
            step_every_tick.eq(mode == MODE_RANDOM),
            Case(mode, {
                MODE_DITHER: next_interval.eq(dither_interval),
                MODE_BURST:  next_interval.eq(Mux(burst_pos == burst_last, burst_gap, burst_spacing)),
                "default":   next_interval.eq(period),
            }),
            self.pin.eq(active ^ invert),
        ]

        self.fsm = fsm = ClockDomainsRenamer(clock_domain)(FSM(reset_state="IDLE"))
        fsm.act("IDLE")
        fsm.act("ARM",
            If(arm_left == 0, NextState("WAIT")),
        )
        fsm.act("WAIT",
            If(~at_time | (reached & exact),
                fire.eq(1),
                NextState("RUN"),
            ).Elif(reached,
                NextState("IDLE"),  # start time already passed: refuse, flag `late`
            )
        )
        fsm.act("RUN",
            If(~free & (pulses_left == 0),
                If(~active, NextState("IDLE")),
            ).Elif((remaining == 1) & ((mode != MODE_RANDOM) | hit),
                fire.eq(1),
            )
        )
        self.comb += draw.eq(applied | (fire & (mode == MODE_DITHER)))
        sync += [
            If(applied,
                prng.eq(Mux(seed == 0, ZERO_SEED_REPLACEMENT, seed)),
            ).Elif(draw | (step_every_tick & fsm.ongoing("RUN")),
                prng.eq(prng_next),
            ),
            If(fire,
                remaining.eq(next_interval),
                pulses_left.eq(pulses_left - 1),
                burst_pos.eq(Mux(burst_pos == burst_last, 0, burst_pos + 1)),
            ).Elif(remaining > 1,
                remaining.eq(remaining - 1),
            ),
            If(fire,
                active.eq(1),
                width_left.eq(width),
            ).Elif(width_left == 1,
                active.eq(0),
                width_left.eq(0),
            ).Elif(width_left > 1,
                width_left.eq(width_left - 1),
            ),
            If(fsm.ongoing("ARM"), arm_left.eq(arm_left - 1)),
            If(fsm.ongoing("WAIT") & at_time & reached & ~exact, late.eq(1)),
            If(fsm.ongoing("RUN") & ~free & (pulses_left == 0) & ~active, done.eq(1)),
            If(applied,
                # A new configuration stops whatever ran: pin idle, counters reloaded.
                active.eq(0),
                width_left.eq(0),
                remaining.eq(0),
                burst_pos.eq(0),
                arm_left.eq(ARM_CYCLES),
                pulses_left.eq(Mux(mode == MODE_ONESHOT, 1, count)),
                free.eq((mode != MODE_ONESHOT) & (count == 0)),
                done.eq(0),
                late.eq(0),
            ),
        ]
        # The commit overrides the FSM from any state.
        fsm.act("IDLE", If(applied & enable, NextState("ARM")))
        for state in ("ARM", "WAIT", "RUN"):
            fsm.act(state, If(applied, If(enable, NextState("ARM")).Else(NextState("IDLE"))))
        self.comb += running.eq(~fsm.ongoing("IDLE"))

        status = self._status.fields
        self.specials += [
            MultiReg(running, status.running),
            MultiReg(done, status.done),
            MultiReg(late, status.late),
        ]


class StimulusGenerator(LiteXModule):
    """``n_channels`` independent stimulus channels sharing the timebase ``ts``.

    ``pins`` is the list of pin levels (registered, in ``clock_domain``).
    """
    def __init__(self, ts, n_channels=2, clock_domain="ts"):
        assert n_channels >= 1
        self.n_channels = n_channels
        self.channels = []
        for i in range(n_channels):
            channel = StimulusChannel(ts, clock_domain)
            setattr(self, f"ch{i}", channel)
            self.channels.append(channel)
        self.pins = [c.pin for c in self.channels]
