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
``at_time`` is set (a start time already passed is refused and flagged ``late``, never silently
moved), else as soon as the commit reaches the ``ts`` domain. The pin level (``pins``) also feeds
the EdgeCapture core, so every stimulus edge is recorded with its exact timestamp.

Constraints the host checks before it commits (and the firmware enforces): every interval >=
``MIN_INTERVAL``, ``width`` >= 1 and shorter than the shortest interval. The hardware relies on
them (what it does otherwise is unspecified).

A channel is its scheduler (states, ``fire``, interval and pulse counters) around four named
stages: ``_StartComparator``, ``_Prng``, ``_DitherInterval`` and ``_PulseShaper``. How each is
pipelined, cycle by cycle: docs/timing-cores.md, "Stimulus pipeline".

Each channel also counts the pulses it fired (``_FiredCounter``: 32 bits, saturating, zeroed by a
commit that starts the channel, kept by one that stops it), which software reads through a
``Snapshot``: past the link's rate the capture drops edges, and this count is what the pins did.
"""


from litex.gen import LiteXModule
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage
from migen import *
from migen.genlib.cdc import MultiReg

from gateware.cdc import ConfigCommit, Snapshot
from gateware.dsp import Multiplier18

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
# Ticks the start comparator looks ahead: its pipeline, then `fire` and the pulse's `active`, which
# are registers too.
START_LEAD = 6
# Cycles a pulse-count snapshot waits once its request reaches `ts`. The count shows a commit (or a
# clear) 3 cycles after its strobe arrives; a snapshot copies 1 + lag cycles after its request
# arrives, which may be a cycle before the strobe written earlier (two synchronizers): 3 - 1 + 1.
FIRED_SNAPSHOT_LAG = 3
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


# Channel stages ------------------------------------------------------------------------------------

class _StartComparator(LiteXModule):
    """``ts >= start`` over all bits of ``ts``, as a tree: 8-bit chunk compares, then merges of pairs,
    most significant first (docs/timing-cores.md, "Start comparator"). In cycle c, ``reached_next``
    compares ``ts`` of cycle c - ``latency``; ``reached`` is it registered."""
    def __init__(self, ts, start, clock_domain):
        self.reached_next = Signal()  # ts(c - latency) >= start
        self.exact_next   = Signal()  # ts(c - latency) == start
        self.reached      = Signal()  # reached_next, registered
        self.exact        = Signal()  # exact_next, registered

        # # #

        sync = getattr(self.sync, clock_domain)
        chunks = [slice(lo, min(lo + 8, len(ts))) for lo in range(0, len(ts), 8)]
        assert len(chunks) & (len(chunks) - 1) == 0
        self.latency = 1 + bits_for(len(chunks) - 1)  # compare, then merges
        gt, eq = [], []
        for k, chunk in enumerate(chunks):
            gt_k, eq_k = Signal(name=f"start_gt{k}"), Signal(name=f"start_eq{k}")
            sync += [
                gt_k.eq(ts[chunk] >= start[chunk] if k == 0 else ts[chunk] > start[chunk]),
                eq_k.eq(ts[chunk] == start[chunk]),
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
        self.comb += [
            self.reached_next.eq(gt[0]),
            self.exact_next.eq(eq[0]),
        ]
        sync += [
            self.reached.eq(self.reached_next),
            self.exact.eq(self.exact_next),
        ]


class _Prng(LiteXModule):
    """xorshift32, kept as the next two values it steps to, so a step is a register copy and every
    compare starts at a register; and RANDOM mode's per-tick hit flag, registered from the value the
    PRNG takes next (docs/timing-cores.md, "PRNG"). ``load``: take the seed (a commit); ``advance``:
    step once (a draw, or a RANDOM tick)."""
    def __init__(self, seed, seed_step, probability, load, advance, clock_domain):
        self.value = Signal(32, reset=1)  # the operand of the next draw
        self.hit   = Signal()             # value < probability

        # # #

        sync = getattr(self.sync, clock_domain)
        next2 = Signal(32, reset=xorshift32_int(1))  # == xorshift32(value)
        after_next2, after_next2_logic = xorshift32(next2)
        self.comb += after_next2_logic
        sync += [
            If(load,
                self.value.eq(seed),
                next2.eq(seed_step),
            ).Elif(advance,
                self.value.eq(next2),
                next2.eq(after_next2),
            ),
            self.hit.eq(Mux(load, seed < probability,
                            Mux(advance, next2 < probability, self.value < probability))),
        ]


class _DitherInterval(LiteXModule):
    """The interval loaded on the next fire, registered: ``base + (operand * span) >> 32`` in DITHER
    mode, else ``other``. The four 18 x 18 partial products are MULT18X18D blocks with their input
    and output registers (``gateware.dsp``), summed in two carry-save levels and one 32-bit add; a
    draw in cycle c (``draw``) gives ``next_interval`` from c + ``latency`` on
    (docs/timing-cores.md, "Dither interval")."""
    latency = 4

    def __init__(self, operand, span, base, other, dither_mode, draw, clock_domain):
        self.next_interval = Signal(32, name="dither_next_interval")  # named: tests read it

        # # #

        sync = getattr(self.sync, clock_domain)
        stage1, stage2 = Signal(), Signal()
        # operand = a1 * 2**18 + a0, span = b1 * 2**18 + b0; the blocks see the operand of cycle c - 1
        # (the same as cycle c's for a draw in c) and give their products in c + 1.
        a0, a1 = operand[:18], operand[18:32]
        b0, b1 = span[:18], span[18:33]
        partial = {}
        for (i, a), (j, b) in [((0, a0), (0, b0)), ((0, a0), (1, b1)), ((1, a1), (0, b0)), ((1, a1), (1, b1))]:
            multiplier = Multiplier18(a, b, clock_domain)
            setattr(self, f"multiplier_a{i}b{j}", multiplier)
            partial[i, j] = multiplier.p << 18*(i + j)
        assert Multiplier18.latency == 2
        # c + 1: 4 rows -> 2 (the product modulo 2**64, all that is needed).
        rows2 = _registered_rows(sync, _carry_save([partial[0, 0], partial[0, 1], partial[1, 0], partial[1, 1]],
                                                   levels=2), 64, enable=stage1)
        assert len(rows2) == 2
        # offset = bits 32..63 of the product: no 64-bit carry chain, one 32-bit add per stage.
        low, high = slice(0, 32), slice(32, 64)
        interval_rows = [Signal(32), Signal(32)]
        high_rows = _carry_save([rows2[0][high], rows2[1][high], base], levels=1)
        sync += [
            stage1.eq(draw),
            stage2.eq(stage1),
            # The other modes' interval goes through the same two rows (as value + 0), so the
            # adder feeds next_interval with no mode select after it.
            If(~dither_mode,
                interval_rows[0].eq(other),
                interval_rows[1].eq(0),
            ).Elif(stage2,
                interval_rows[0].eq(high_rows[0]),
                # Bit 0 of the carry row is always 0: the low halves' carry goes in there.
                interval_rows[1].eq(Cat((rows2[0][low] + rows2[1][low])[32], high_rows[1][1:32])),
            ),
            self.next_interval.eq(interval_rows[0] + interval_rows[1]),
        ]


class _PulseShaper(LiteXModule):
    """The pulse before polarity: ``active`` from a ``fire`` for ``width`` ticks; a commit
    (``applied``) ends it. The width counter's compares are taken a cycle early, from the previous
    cycle's value (docs/timing-cores.md, "Pulse shaper")."""
    def __init__(self, width, fire, fire_d, applied, applied_d, clock_domain):
        self.active = Signal()

        # # #

        sync = getattr(self.sync, clock_domain)
        width_left = Signal(32)
        width_left_is_1 = Signal()    # width_left == 1
        width_left_gt_1 = Signal()    # width_left > 1
        width_is_1, width_gt_1 = Signal(), Signal()
        width_is_2, width_gt_2 = Signal(), Signal()
        width_left_was_3  = Signal()  # width_left == 3 in the previous cycle
        width_left_was_gt_3 = Signal()  # width_left > 3 in the previous cycle
        # The "greater than" compares as OR trees of the high bits: as `>` they became 6-deep LUT
        # chains, the routed critical path of `ts` once the engine crowds the device.
        sync += [
            width_is_1.eq(width == 1),
            width_gt_1.eq(width[1:] != 0),
            width_is_2.eq(width == 2),
            width_gt_2.eq((width[2:] != 0) | (width[:2] == 3)),
            width_left_was_3.eq(width_left == 3),
            width_left_was_gt_3.eq(width_left[2:] != 0),
            width_left_is_1.eq(~applied & Mux(fire, width_is_1,
                ~applied_d & Mux(fire_d, width_is_2, width_left_was_3))),
            width_left_gt_1.eq(~applied & Mux(fire, width_gt_1,
                ~applied_d & Mux(fire_d, width_gt_2, width_left_was_gt_3))),
            If(fire,
                self.active.eq(1),
                width_left.eq(width),
            ).Elif(width_left_is_1,
                self.active.eq(0),
                width_left.eq(0),
            ).Elif(width_left_gt_1,
                width_left.eq(width_left - 1),
            ),
            If(applied,
                self.active.eq(0),
                width_left.eq(0),
            ),
        ]


class _FiredCounter(LiteXModule):
    """Pulses fired, ``width`` bits, saturating at 2**width - 1. ``count``: a pulse fired (a
    register); ``clear``: zero it (a register; wins over a ``count`` in the same cycle). Both come
    in registered, so nothing of the scheduler's fan-out sits in front of the 32-bit adder; the
    saturation flag is registered from the value the counter takes next (no wide compare in front of
    the counter's enable), as the capture's drop counters do."""
    def __init__(self, count, clear, clock_domain, width=32):
        self.value = Signal(width)

        # # #

        sync = getattr(self.sync, clock_domain)
        saturated = Signal()  # value == 2**width - 1
        step = Signal()
        self.comb += step.eq(count & ~saturated)
        sync += [
            If(step, self.value.eq(self.value + 1)),
            saturated.eq(Mux(step, self.value == 2**width - 2, saturated)),
            If(clear,
                self.value.eq(0),
                saturated.eq(0),
            ),
        ]


# Channel -------------------------------------------------------------------------------------------

class StimulusChannel(LiteXModule):
    """One stimulus pin. Settings in ``sys``, applied at once by ``commit``; ``pin`` and the status
    flags in ``clock_domain``."""
    def __init__(self, ts, clock_domain="ts", with_csr=True):
        # Settings, in sys (CSRs of the same names: add_csr()).
        self.enable        = Signal()                # run (0: stop, pin idle)
        self.mode          = Signal(3)               # MODE_*
        self.invert        = Signal()                # active-low pin
        self.at_time       = Signal()                # first pulse at `start_time`, else at once
        self.width         = Signal(32, reset=1)     # ticks
        self.period        = Signal(32, reset=1000)  # ticks
        self.jitter        = Signal(32)              # ticks
        self.probability   = Signal(32)              # per tick, in units of 2**-32
        self.burst_count   = Signal(16, reset=1)     # pulses per burst
        self.burst_spacing = Signal(32, reset=10)    # ticks
        self.count         = Signal(32)              # pulses (0: free-running)
        self.start_time    = Signal(64)              # absolute tick
        self.seed          = Signal(32, reset=1)
        self.commit        = Signal()                # apply the settings (pulse)
        # Outputs, in clock_domain.
        self.pin     = Signal()  # pin level, registered
        self.running = Signal()  # armed or pulsing
        self.done    = Signal()  # pulse count reached (until the next commit)
        self.late    = Signal()  # `start_time` had already passed: not started
        self.fired   = Signal(32)  # pulses fired since the last commit that started the channel
        self.fired_clear = Signal()  # sys: zero `fired` (pulse)

        # # #

        self.clock_domain = clock_domain
        # Values derived in sys (slow, quasi-static) so the ts domain only sees registers.
        dither_base = Signal(32)  # P - J
        dither_span = Signal(33)  # 2J + 1
        burst_last  = Signal(16)  # K - 1
        burst_before_last = Signal(16)  # K - 2 (mod 2**16; unused when K = 1)
        burst_gap   = Signal(32)  # P - (K-1)*S: last rising edge of a burst to the next burst
        start_lead  = Signal(64)  # start_time - START_LEAD: the start comparator's pipeline looks ahead
        seed_nz     = Signal(32)  # the seed, 0 replaced (xorshift32 has 0 as a fixed point)
        self.comb += [
            dither_base.eq(self.period - self.jitter),
            dither_span.eq(2*self.jitter + 1),
            burst_last.eq(self.burst_count - 1),
            burst_before_last.eq(self.burst_count - 2),
            burst_gap.eq(self.period - burst_last * self.burst_spacing),
            # Saturated: a start before tick START_LEAD must still read as reached (and passed).
            start_lead.eq(Mux(self.start_time < START_LEAD, 0, self.start_time - START_LEAD)),
            seed_nz.eq(Mux(self.seed == 0, ZERO_SEED_REPLACEMENT, self.seed)),
        ]

        seed_step, seed_step_logic = xorshift32(seed_nz)  # the PRNG's state one step after the seed
        self.comb += seed_step_logic
        sources = [self.enable, self.mode, self.invert, self.at_time, self.width, self.period,
                   dither_base, dither_span, self.probability, burst_last, self.burst_spacing,
                   burst_gap, self.count, start_lead, seed_nz, seed_step,
                   burst_before_last]
        self.config = ConfigCommit(sources, clock_domain)
        self.comb += self.config.commit.eq(self.commit)
        (enable, mode, invert, at_time, width, period, dither_base, dither_span, probability,
         burst_last, burst_spacing, burst_gap, count, start_lead, seed, seed_step,
         burst_before_last) = self.config.outputs
        applied = self.config.applied

        sync = getattr(self.sync, clock_domain)

        # Scheduler state. `fire` is a register decided a cycle ahead (it fans out to ~150 flip-flops)
        # from flags registered ahead too; exact because fires are >= MIN_INTERVAL apart
        # (docs/timing-cores.md, "Fire decision").
        fire        = Signal()    # a rising edge starts now
        fire_d      = Signal()
        applied_d   = Signal()
        applied_d2  = Signal()
        remaining   = Signal(32)  # ticks to the next rising edge, fires at 1
        pulses_left = Signal(32)
        free        = Signal()
        burst_pos   = Signal(16)
        arm_left    = Signal(max=ARM_CYCLES + 1)
        dither_mode = Signal()    # registered mode == DITHER
        burst_mode  = Signal()    # registered mode == BURST
        random_mode = Signal()    # registered mode == RANDOM: the PRNG steps every RUN tick
        burst_wrap  = Signal(reset=1)  # == (burst_pos == burst_last), registered ahead
        # Flags `fire` reads, registered ahead:
        remaining_near = Signal()     # remaining in {1, 2}
        remaining_le_1 = Signal(reset=1)  # remaining <= 1 (the counter holds)
        pulses_done    = Signal(reset=1)  # pulses_left == 0
        # ... or compared one cycle after their values change:
        pulses_left_is_1 = Signal()   # pulses_left == 1
        burst_next_wraps = Signal()   # burst_pos + 1 == burst_last
        burst_last_is_0  = Signal()   # settings: stale in a commit's cycle only
        # Channel states IDLE -> ARM -> WAIT -> RUN -> IDLE, one-hot, with the commit (which overrides
        # any state) in the last gate.
        idle, arming, waiting, run = (Signal(reset=1, name="state_idle"), Signal(name="state_arm"),
                                      Signal(name="state_wait"), Signal(name="state_run"))
        armed    = Signal()  # ARM ends this cycle
        finished = Signal()  # RUN ends this cycle
        draw      = Signal()  # the PRNG steps for a draw (a cycle after it)
        step      = Signal()  # the PRNG steps every RUN tick in RANDOM mode
        fire_draw = Signal()  # a DITHER pulse fires (and draws), not overridden by a commit

        # Stages.
        self.start_compare = _StartComparator(ts, start_lead, clock_domain)
        assert START_LEAD == self.start_compare.latency + 2
        self.prng = _Prng(seed, seed_step, probability, load=applied, advance=draw | step,
                          clock_domain=clock_domain)
        assert _DitherInterval.latency <= MIN_INTERVAL
        self.dither = _DitherInterval(self.prng.value, dither_span, dither_base,
            other=Mux(burst_mode, Mux(burst_wrap, burst_gap, burst_spacing), period),
            dither_mode=dither_mode, draw=fire_draw | applied_d2, clock_domain=clock_domain)
        self.shaper = _PulseShaper(width, fire, fire_d, applied, applied_d, clock_domain)
        reached_next, exact_next = self.start_compare.reached_next, self.start_compare.exact_next
        reached, exact = self.start_compare.reached, self.start_compare.exact
        next_hit = self.prng.hit  # RANDOM mode: next cycle's PRNG value hits
        self.comb += self.pin.eq(self.shaper.active ^ invert)

        self.comb += [
            armed.eq(arming & (arm_left == 0)),
            finished.eq(run & ~free & pulses_done & ~self.shaper.active),
            step.eq(random_mode & run),
            fire_draw.eq(fire & dither_mode & ~applied),
            # The commit draws its seed a cycle after it, a fire's successor is drawn a cycle after
            # the fire: the PRNG's enable comes from registers only.
            draw.eq(applied_d | fire_d & dither_mode),
        ]
        sync += [
            idle.eq(Mux(applied, ~enable, idle | waiting & ~fire & reached | finished)),
            arming.eq(Mux(applied, enable, arming & ~armed)),
            waiting.eq(~applied & (armed | waiting & ~fire & ~reached)),
            run.eq(~applied & (waiting & fire | run & ~finished)),
        ]
        # Next cycle's fire. In WAIT: the channel is in WAIT next cycle and then starts (at once,
        # or at the exact start tick). In RUN: it stays in RUN (pulses left), the interval ends
        # (remaining == 1 next cycle) and, in RANDOM mode, next cycle's PRNG value hits.
        wait_next = Signal()
        self.comb += wait_next.eq(armed | waiting & at_time & ~reached)
        sync += [
            fire.eq(~applied & (
                wait_next & (~at_time | reached_next & exact_next) |
                run & ~fire & remaining_near & (free | ~pulses_done) &
                    (~random_mode | next_hit))),
            fire_d.eq(fire),
            applied_d.eq(applied),
            applied_d2.eq(applied_d),
            dither_mode.eq(mode == MODE_DITHER),
            burst_mode.eq(mode == MODE_BURST),
            random_mode.eq(mode == MODE_RANDOM),
            remaining_near.eq(~applied & ~fire & (remaining[2:] == 0) & (remaining[:2] != 0)),
            remaining_le_1.eq(applied | ~fire & (remaining[2:] == 0) & (remaining[:2] != 3)),
            burst_last_is_0.eq(burst_last == 0),
            burst_next_wraps.eq(burst_pos == burst_before_last),
            burst_wrap.eq(Mux(applied, burst_last == 0,
                              Mux(fire, Mux(burst_wrap, burst_last_is_0, burst_next_wraps), burst_wrap))),
            pulses_left_is_1.eq(pulses_left == 1),
            pulses_done.eq(Mux(applied, Mux(mode == MODE_ONESHOT, 1, count) == 0,
                               Mux(fire, pulses_left_is_1, pulses_done))),
        ]
        sync += [
            If(fire,
                remaining.eq(self.dither.next_interval),
                pulses_left.eq(pulses_left - 1),
                burst_pos.eq(Mux(burst_wrap, 0, burst_pos + 1)),
            ).Elif(~remaining_le_1,
                remaining.eq(remaining - 1),
            ),
            If(arming, arm_left.eq(arm_left - 1)),
            If(waiting & at_time & reached & ~exact, self.late.eq(1)),
            If(finished, self.done.eq(1)),
            If(applied,
                # A new configuration stops whatever ran: counters reloaded (the pulse shaper idles
                # the pin).
                remaining.eq(0),
                burst_pos.eq(0),
                arm_left.eq(ARM_CYCLES),
                pulses_left.eq(Mux(mode == MODE_ONESHOT, 1, count)),
                free.eq((mode != MODE_ONESHOT) & (count == 0)),
                self.done.eq(0),
                self.late.eq(0),
            ),
        ]
        self.comb += self.running.eq(~idle)

        # Pulses fired. A pulse is a fire not overridden by a commit in the same cycle (the shaper
        # drops it then); counted from fire_d/applied_d, registers already, so `fire` fans out to
        # nothing more. A commit that starts the channel zeroes the count: its old pulses (fires up
        # to the cycle before `applied`) are counted by then, and the clear wins. A commit that stops
        # it keeps the count, so the pulses of a stopped run can still be read.
        fired_count = Signal()
        fired_clear = Signal()
        self.fired_clear_sync = ConfigCommit([], clock_domain)
        self.comb += self.fired_clear_sync.commit.eq(self.fired_clear)
        sync += [
            fired_count.eq(fire_d & ~applied_d),
            fired_clear.eq(applied & enable | self.fired_clear_sync.applied),
        ]
        self.fired_counter = _FiredCounter(fired_count, fired_clear, clock_domain, width=len(self.fired))
        self.comb += self.fired.eq(self.fired_counter.value)

        if with_csr:
            self.add_csr()

    def add_csr(self):
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
        ], description="Channel mode (bit fields); takes effect on ``commit``.")
        # The plain registers, in address order: one CSR per setting, of its width and reset value.
        for name, description in [
            ("width",         "Pulse width, in ticks (>= 1)."),
            ("period",        "Period (PERIODIC, DITHER), burst-start period (BURST) or hold-off (RANDOM), "
                              "in ticks."),
            ("jitter",        "DITHER: half-width J of the uniform dither, in ticks; intervals lie in [P-J, P+J]."),
            ("probability",   "RANDOM: per-tick firing probability after the hold-off, in units of 2**-32."),
            ("burst_count",   "BURST: pulses per burst (>= 1)."),
            ("burst_spacing", "BURST: ticks between the rising edges of a burst."),
            ("count",         "Pulses to emit before stopping; ``0``: free-running (ONESHOT always emits one)."),
            ("start_time",    "Absolute tick (``ts`` clock periods) of the first rising edge when "
                              "``control.at_time`` is set."),
            ("seed",          "Seed of the channel's xorshift32 PRNG (32-bit state; 0 is replaced by a fixed "
                              "non-zero seed)."),
        ]:
            setting = getattr(self, name)
            csr = CSRStorage(len(setting), reset=setting.reset.value, name=name, description=description)
            setattr(self, f"_{name}", csr)
            self.comb += setting.eq(csr.storage)
        self._commit = CSRStorage(fields=[
            CSRField("commit", size=1, pulse=True, description=
                "Write ``1`` to apply all settings of the channel at once (in the ``ts`` domain)."),
        ], description="Apply the channel's settings (write-1 strobe).")
        self._status = CSRStatus(fields=[
            CSRField("running", size=1, description="Channel armed or pulsing."),
            CSRField("done",    size=1, description="Pulse count reached (set until next commit)."),
            CSRField("late",    size=1, description="``start_time`` had already passed: not started."),
        ], description="Channel state (flags, synchronized from ``ts``).")
        self._fired_control = CSRStorage(fields=[
            CSRField("snapshot", size=1, pulse=True, description=
                "Write ``1`` to copy the pulse count into ``fired``; ``fired_status.valid`` rises when "
                "the copy is complete."),
            CSRField("clear", size=1, pulse=True, description=
                "Write ``1`` to zero the pulse count (a ``commit`` that starts the channel zeroes it too)."),
        ], description="Pulse-count control (write-1 strobes).")
        self._fired_status = CSRStatus(fields=[
            CSRField("valid", size=1, description="Snapshot complete: ``fired`` holds it."),
        ], description="Pulse-count snapshot status (flag).")
        self._fired = CSRStatus(32, description=
            "Pulses fired (count of rising edges of the active level) since the last ``commit`` that "
            "started the channel or the last ``fired_control.clear``, at the last snapshot; a ``commit`` "
            "that stops the channel keeps it. Saturates at 2**32-1.")

        control, status = self._control.fields, self._status.fields
        self.comb += [
            self.enable.eq(control.enable),
            self.mode.eq(control.mode),
            self.invert.eq(control.invert),
            self.at_time.eq(control.at_time),
            self.commit.eq(self._commit.fields.commit),
        ]
        self.specials += [
            MultiReg(self.running, status.running),
            MultiReg(self.done, status.done),
            MultiReg(self.late, status.late),
        ]
        # The count changes during a run: all 32 bits cross at once, latched in the channel's domain.
        # A commit's or a clear's strobe zeroes the count 3 cycles after it arrives (applied, then
        # the registered clear, then the counter); a snapshot asked after it copies no earlier than
        # that (FIRED_SNAPSHOT_LAG).
        self.fired_snapshot = Snapshot([self.fired], self.clock_domain, lag=FIRED_SNAPSHOT_LAG)
        self.comb += [
            self.fired_snapshot.request.eq(self._fired_control.fields.snapshot),
            self.fired_clear.eq(self._fired_control.fields.clear),
            self._fired_status.fields.valid.eq(self.fired_snapshot.valid),
            self._fired.status.eq(self.fired_snapshot.outputs[0]),
        ]


class StimulusGenerator(LiteXModule):
    """``n_channels`` independent stimulus channels sharing the timebase ``ts``.

    ``pins`` is the list of pin levels (registered, in ``clock_domain``).
    """
    def __init__(self, ts, n_channels=2, clock_domain="ts", with_csr=True):
        assert n_channels >= 1
        self.n_channels = n_channels
        self.channels = []
        # Each channel runs in a domain of its own on the same clock, its reset a register of the
        # domain's reset (a chain, one more tick each: copies with the same input would be merged by
        # synthesis). The domain's reset is one flip-flop driving every register of the device; a
        # channel combines it with its commit in front of its resets, and that route across the
        # chip was the routed critical path. The release comes a tick or two later, while idle.
        sync = getattr(self.sync, clock_domain)
        reset = ResetSignal(clock_domain)
        for i in range(n_channels):
            domain = f"{clock_domain}_stim{i}"
            cd = ClockDomain(domain)
            setattr(self, f"cd_{domain}", cd)
            local = Signal(reset=1, name=f"stim{i}_reset")   # high through the domain's reset too
            sync += local.eq(reset)
            self.comb += [cd.clk.eq(ClockSignal(clock_domain)), cd.rst.eq(local)]
            reset = local
            channel = StimulusChannel(ts, domain, with_csr=with_csr)
            setattr(self, f"ch{i}", channel)
            self.channels.append(channel)
        self.pins = [c.pin for c in self.channels]
