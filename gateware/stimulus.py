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

Constraints the host checks before it commits (and the firmware enforces): every interval >=
``MIN_INTERVAL``, and ``width`` >= 1 and shorter than the shortest interval. The hardware relies on
them: it decides each rising edge a cycle ahead from flags that assume edges >= MIN_INTERVAL ticks
apart (what it does with shorter intervals is unspecified). ``start_time`` is compared over all 64
bits: a start numerically below the current tick has passed.
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

# Shortest interval between rising edges, in ticks: the dither pipeline needs 4 cycles per draw,
# and `fire` is decided a cycle ahead from flags that may lag one cycle behind a fire.
MIN_INTERVAL = 4
# Cycles from the commit reaching `ts` to the channel accepting its start (pipelines settle).
ARM_CYCLES = 6
# Ticks the start comparator looks ahead: its 4 pipeline stages, then 2 more (`reached_next`
# is what `reached` will be next cycle, which is itself one tick ahead of the start).
START_LEAD = 6
# Seed used instead of 0 (xorshift32 has 0 as a fixed point).
ZERO_SEED_REPLACEMENT = 0x2545F491


def xorshift32_int(x):
    """One xorshift32 step on a Python int (for reset values)."""
    x ^= (x << 13) & 0xFFFFFFFF
    x ^= x >> 17
    x ^= (x << 5) & 0xFFFFFFFF
    return x


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


def _carry_save(rows, levels):
    """Reduce non-negative ``rows`` with ``levels`` levels of 3:2 compressors (the sum is unchanged:
    a + b + c = (a ^ b ^ c) + 2 * majority(a, b, c)); returns the remaining rows."""
    rows = list(rows)
    for _ in range(levels):
        if len(rows) <= 2:
            break
        reduced = []
        for i in range(0, len(rows) - 2, 3):
            a, b, c = rows[i:i + 3]
            reduced += [a ^ b ^ c, ((a & b) | (a & c) | (b & c)) << 1]
        reduced += rows[len(rows) - len(rows) % 3:]
        rows = reduced
    return rows


def _registered_rows(sync, rows, width, enable=None):
    """Registers holding ``rows`` modulo 2**width (the product is only needed modulo 2**64)."""
    regs = [Signal(min(len(r), width)) for r in rows]
    assigns = [reg.eq(row) for reg, row in zip(regs, rows)]
    sync += assigns if enable is None else [If(enable, *assigns)]
    return regs


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
        dither_span3 = Signal(35)  # 3 * span, for the radix-4 multiplier
        burst_last  = Signal(16)  # K - 1
        burst_before_last = Signal(16)  # K - 2 (mod 2**16; unused when K = 1)
        burst_gap   = Signal(32)  # P - (K-1)*S: last rising edge of a burst to the next burst
        start_lead  = Signal(64)  # start_time - START_LEAD: the start comparator's pipeline looks ahead
        seed_nz     = Signal(32)  # the seed, 0 replaced (xorshift32 has 0 as a fixed point)
        self.comb += [
            dither_base.eq(period - jitter),
            dither_span.eq(2*jitter + 1),
            dither_span3.eq(dither_span + (dither_span << 1)),
            burst_last.eq(self._burst_count.storage - 1),
            burst_before_last.eq(self._burst_count.storage - 2),
            burst_gap.eq(period - burst_last * self._burst_spacing.storage),
            # Saturated: a start before tick START_LEAD must still read as reached (and passed).
            start_lead.eq(Mux(self._start_time.storage < START_LEAD, 0,
                              self._start_time.storage - START_LEAD)),
            seed_nz.eq(Mux(self._seed.storage == 0, ZERO_SEED_REPLACEMENT, self._seed.storage)),
        ]

        seed_step, seed_step_logic = xorshift32(seed_nz)  # the PRNG's state one step after the seed
        self.comb += seed_step_logic
        sources = [control.enable, control.mode, control.invert, control.at_time,
                   self._width.storage, period, dither_base, dither_span,
                   self._probability.storage, burst_last, self._burst_spacing.storage,
                   burst_gap, self._count.storage, start_lead, seed_nz, seed_step, dither_span3,
                   burst_before_last]
        self.config = ConfigCommit(sources, clock_domain)
        self.comb += self.config.commit.eq(self._commit.fields.commit)
        (enable, mode, invert, at_time, width, period, dither_base, dither_span, probability,
         burst_last, burst_spacing, burst_gap, count, start_lead, seed, seed_step, span3,
         burst_before_last) = self.config.outputs
        applied = self.config.applied

        # # #

        sync = getattr(self.sync, clock_domain)

        # Start comparator, pipelined: in cycle c, `reached_next` <=> ts(c) + 2 >= start_time (what
        # `reached` is in cycle c + 1), `reached` <=> ts(c) + 1 >= start_time. Stage 1 compares
        # 8-bit chunks (>= for the lowest, > and == for the others); each further stage merges
        # pairs, most significant first, so `ts` (loaded by every comparator) feeds a short path.
        chunks = [slice(lo, min(lo + 8, len(ts))) for lo in range(0, len(ts), 8)]
        assert len(chunks) & (len(chunks) - 1) == 0
        gt, eq = [], []
        for k, chunk in enumerate(chunks):
            gt_k, eq_k = Signal(name=f"start_gt{k}"), Signal(name=f"start_eq{k}")
            sync += [
                gt_k.eq(ts[chunk] >= start_lead[chunk] if k == 0 else ts[chunk] > start_lead[chunk]),
                eq_k.eq(ts[chunk] == start_lead[chunk]),
            ]
            gt.append(gt_k)
            eq.append(eq_k)
        while len(gt) > 1:
            merged_gt = [Signal() for _ in range(len(gt) // 2)]
            merged_eq = [Signal() for _ in range(len(gt) // 2)]
            for k in range(len(gt) // 2):
                low, high = 2*k, 2*k + 1
                sync += [
                    merged_gt[k].eq(gt[high] | (eq[high] & gt[low])),
                    merged_eq[k].eq(eq[high] & eq[low]),
                ]
            gt, eq = merged_gt, merged_eq
        start_stages = 1 + bits_for(len(chunks) - 1)  # compare + merges
        assert START_LEAD == start_stages + 2
        reached_next, exact_next = gt[0], eq[0]
        reached, exact = Signal(), Signal()
        sync += [
            reached.eq(reached_next),
            exact.eq(exact_next),
        ]

        # PRNG and the dither pipeline: a DITHER fire in cycle c -> `next_interval` valid from c+4
        # (MIN_INTERVAL); a commit in cycle a -> valid from a+6.
        # offset = (operand * span) >> 32, uniform in [0, span), as a carry-save multiplier in LUTs
        # (a MULT18X18D costs 3.9 ns by itself plus routing, more than a fast `ts` cycle):
        #   cycle c-1  16 radix-4 rows, selected by the operand the cycle c will see   (every cycle)
        #   cycle c    2 carry-save levels, 16 -> 8 rows                               (every cycle)
        #   cycle c+1  3 more levels, 8 -> 3 rows                                    (if c drew)
        #   cycle c+2  1 more level, 3 -> 2 rows; the high halves and dither_base folded into
        #              2 rows, the low halves' carry in the empty bit 0 of the second
        #   cycle c+3  next_interval <= dither_base + offset = the sum of those 2 rows  (every cycle)
        # The xorshift32 PRNG is kept as the next two values it steps to: `prng_next` (the operand
        # of the next draw; in RANDOM mode the value the next RUN tick compares) and `prng_next2`
        # == xorshift32(prng_next). Stepping is a register copy, and every compare and the
        # multiplier start at a register with nothing in between.
        # The operand of a firing draw in cycle c is `prng_next`, unchanged since the step one
        # cycle after the previous draw (>= MIN_INTERVAL cycles before), so the rows selected in
        # c-1 are already the right ones. A commit loads the seed as `prng_next` and draws it in
        # the next cycle (a step like any other): its rows are selected then, and it goes through
        # the multiplier as a draw two cycles after the commit, which its first use (after
        # ARM_CYCLES) allows.
        draw = Signal()
        random_mode = Signal()  # registered mode == RANDOM: the PRNG steps every RUN tick
        prng_next = Signal(32, reset=1)
        prng_next2 = Signal(32, reset=xorshift32_int(1))
        prng_after_next2, prng_after_logic = xorshift32(prng_next2)
        self.comb += prng_after_logic
        fire_draw = Signal()  # comb, below: a DITHER pulse fires (and draws), not overridden by a commit
        applied_d = Signal()
        stage1, stage2 = Signal(), Signal()
        # Radix 4: 16 rows, each 0, span, 2*span or 3*span (precomputed) by 2 bits of the operand.
        rows = []
        for i in range(16):
            digit = prng_next[2*i:2*i + 2]
            rows.append(Mux(digit[1], Mux(digit[0], span3, dither_span << 1), Mux(digit[0], dither_span, 0)))
        rows0 = [row << 2*i for i, row in enumerate(_registered_rows(sync, rows, 64))]
        rows1 = _registered_rows(sync, _carry_save(rows0, levels=2), 64)
        rows2 = _registered_rows(sync, _carry_save(rows1, levels=3), 64, enable=stage1)
        last_two = _carry_save(rows2, levels=1)
        assert len(last_two) == 2
        # offset = bits 32..63 of the product: no 64-bit carry chain, one 32-bit add per stage.
        low, high = slice(0, 32), slice(32, 64)
        interval_rows = [Signal(32), Signal(32)]
        high_rows = _carry_save([last_two[0][high], last_two[1][high], dither_base], levels=1)
        dither_mode = Signal()  # registered mode == DITHER
        burst_mode  = Signal()  # registered mode == BURST
        burst_wrap  = Signal(reset=1)  # == (burst_pos == burst_last), registered ahead
        # The interval loaded on the next `fire`, registered: fires are >= MIN_INTERVAL apart, and it
        # is valid 4 cycles after a draw (as dither_base + offset) or 2 cycles after a burst step.
        next_interval = Signal(32)
        applied_d2 = Signal()
        sync += [
            applied_d.eq(applied),
            applied_d2.eq(applied_d),
            stage1.eq(fire_draw | applied_d2),
            stage2.eq(stage1),
            # The other modes' interval goes through the same two rows (as value + 0), so the
            # adder feeds next_interval with no mode select after it.
            If(~dither_mode,
                interval_rows[0].eq(Mux(burst_mode, Mux(burst_wrap, burst_gap, burst_spacing), period)),
                interval_rows[1].eq(0),
            ).Elif(stage2,
                interval_rows[0].eq(high_rows[0]),
                # Bit 0 of the carry row is always 0: the low halves' carry goes in there.
                interval_rows[1].eq(Cat((last_two[0][low] + last_two[1][low])[32], high_rows[1][1:32])),
            ),
            dither_mode.eq(mode == MODE_DITHER),
            burst_mode.eq(mode == MODE_BURST),
            next_interval.eq(interval_rows[0] + interval_rows[1]),
        ]

        # Channel state.
        active      = Signal()    # pulse in progress (before polarity)
        remaining   = Signal(32)  # ticks to the next rising edge, fires at 1
        width_left  = Signal(32)
        pulses_left = Signal(32)
        free        = Signal()
        burst_pos   = Signal(16)
        arm_left    = Signal(max=ARM_CYCLES + 1)
        running, done, late = Signal(), Signal(), Signal()
        self.comb += self.pin.eq(active ^ invert)

        # `fire` (a rising edge starts now) is a register, decided one cycle ahead, because it fans
        # out to ~150 flip-flops; every flag that decision reads is itself registered ahead, so no
        # wide compare sits on any path through `fire`. What makes this possible: rising edges are
        # >= MIN_INTERVAL ticks apart (the firmware refuses shorter intervals; the hardware assumes
        # them), so a fire now means none next cycle, and every value a flag compares changes only
        # on a fire (or a commit, which overrides everything and is followed by ARM_CYCLES without
        # a fire): a flag compared one cycle late is stale only when no fire can follow.
        fire = Signal()
        next_hit = Signal()           # prng_next < probability (RANDOM mode)
        remaining_near = Signal()     # remaining in {1, 2}
        remaining_le_1 = Signal(reset=1)  # remaining <= 1 (the counter holds)
        pulses_done    = Signal(reset=1)  # pulses_left == 0
        width_left_is_1 = Signal()    # width_left == 1
        width_left_gt_1 = Signal()    # width_left > 1
        # Compared one cycle after their values change (see above):
        pulses_left_is_1 = Signal()   # pulses_left == 1
        burst_next_wraps = Signal()   # burst_pos + 1 == burst_last
        burst_last_is_0  = Signal()   # settings: stale in a commit's cycle only
        width_is_1, width_gt_1 = Signal(), Signal()
        width_is_2, width_gt_2 = Signal(), Signal()
        width_left_was_3  = Signal()  # width_left == 3 in the previous cycle
        width_left_was_gt_3 = Signal()  # width_left > 3 in the previous cycle
        fire_d = Signal()

        # Channel states, one-hot, with the commit (which overrides any state) in the last gate:
        #   IDLE -> (commit, enabled) ARM -> ARM_CYCLES later WAIT -> (start) RUN -> (count done,
        #   pulse over) IDLE; WAIT -> IDLE when the start time had already passed (`late`).
        idle, arming, waiting, run = (Signal(reset=1, name="state_idle"), Signal(name="state_arm"),
                                      Signal(name="state_wait"), Signal(name="state_run"))
        armed = Signal()     # ARM ends this cycle
        finished = Signal()  # RUN ends this cycle
        self.comb += [
            armed.eq(arming & (arm_left == 0)),
            finished.eq(run & ~free & pulses_done & ~active),
        ]
        sync += [
            idle.eq(Mux(applied, ~enable, idle | waiting & ~fire & reached | finished)),
            arming.eq(Mux(applied, enable, arming & ~armed)),
            waiting.eq(~applied & (armed | waiting & ~fire & ~reached)),
            run.eq(~applied & (waiting & fire | run & ~finished)),
        ]
        step = Signal()  # the PRNG steps every RUN tick in RANDOM mode
        self.comb += [
            step.eq(random_mode & run),
            fire_draw.eq(fire & dither_mode & ~applied),
            # The PRNG steps for a draw a cycle after it (the commit draws its seed then, a fire's
            # successor is not needed before MIN_INTERVAL): its enable comes from registers only.
            draw.eq(applied_d | fire_d & dither_mode),
        ]
        # Next cycle's fire. In WAIT: the channel is in WAIT next cycle and then starts (at once,
        # or at the exact start tick). In RUN: it stays in RUN (pulses left), the interval ends
        # (remaining == 1 next cycle) and, in RANDOM mode, next cycle's PRNG value hits (the PRNG
        # steps every RUN tick, so that is prng_next < probability now).
        wait_next = Signal()
        self.comb += wait_next.eq(armed | waiting & at_time & ~reached)
        sync += [
            fire.eq(~applied & (
                wait_next & (~at_time | reached_next & exact_next) |
                run & ~fire & remaining_near & (free | ~pulses_done) &
                    (~random_mode | next_hit))),
            random_mode.eq(mode == MODE_RANDOM),
            next_hit.eq(Mux(applied, seed < probability,
                            Mux(draw | step, prng_next2 < probability, prng_next < probability))),
            remaining_near.eq(~applied & ~fire & (remaining[2:] == 0) & (remaining[:2] != 0)),
            remaining_le_1.eq(applied | ~fire & (remaining[2:] == 0) & (remaining[:2] != 3)),
            burst_last_is_0.eq(burst_last == 0),
            burst_next_wraps.eq(burst_pos == burst_before_last),
            burst_wrap.eq(Mux(applied, burst_last == 0,
                              Mux(fire, Mux(burst_wrap, burst_last_is_0, burst_next_wraps), burst_wrap))),
            pulses_left_is_1.eq(pulses_left == 1),
            pulses_done.eq(Mux(applied, Mux(mode == MODE_ONESHOT, 1, count) == 0,
                               Mux(fire, pulses_left_is_1, pulses_done))),
            width_is_1.eq(width == 1),
            width_gt_1.eq(width > 1),
            width_is_2.eq(width == 2),
            width_gt_2.eq(width > 2),
            # The pulse counter steps down by one per cycle unless reloaded (fire) or cleared
            # (commit), so its compares are taken a cycle early: width_left == 2 now <=> it was 3
            # (or was reloaded with a width of 2); > 2 now <=> it was > 3 (or reloaded with > 2).
            fire_d.eq(fire),
            width_left_was_3.eq(width_left == 3),
            width_left_was_gt_3.eq(width_left > 3),
            width_left_is_1.eq(~applied & Mux(fire, width_is_1,
                ~applied_d & Mux(fire_d, width_is_2, width_left_was_3))),
            width_left_gt_1.eq(~applied & Mux(fire, width_gt_1,
                ~applied_d & Mux(fire_d, width_gt_2, width_left_was_gt_3))),
        ]
        sync += [
            If(applied,
                prng_next.eq(seed),
                prng_next2.eq(seed_step),
            ).Elif(draw | step,
                prng_next.eq(prng_next2),
                prng_next2.eq(prng_after_next2),
            ),
            If(fire,
                remaining.eq(next_interval),
                pulses_left.eq(pulses_left - 1),
                burst_pos.eq(Mux(burst_wrap, 0, burst_pos + 1)),
            ).Elif(~remaining_le_1,
                remaining.eq(remaining - 1),
            ),
            If(fire,
                active.eq(1),
                width_left.eq(width),
            ).Elif(width_left_is_1,
                active.eq(0),
                width_left.eq(0),
            ).Elif(width_left_gt_1,
                width_left.eq(width_left - 1),
            ),
            If(arming, arm_left.eq(arm_left - 1)),
            If(waiting & at_time & reached & ~exact, late.eq(1)),
            If(finished, done.eq(1)),
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
        self.comb += running.eq(~idle)

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
