"""The inside-vs-outside cross-check at any DUT clock, related to the rig's or not (docs/dut-benchmarks.md).

``experiments.cross_check`` compares differences: the rig's ISR duration against 2 x the firmware's cycles.
That holds only at 25 MHz, where a DUT cycle is exactly 2 ticks. At a clock of the DUT's own (e.g.
31,415,927 Hz, ``SimulatedRig(dut_cpu_clk_hz=...)``), a number of cycles is not a fixed number of ticks,
so this check places each pin event on the DUT clock edge it happened at and maps that edge to a rig tick
through the clock's own schedule (``sim.dut_clock_edges``):

- The firmware's line for a stimulus gives its counter at the handler's first read (``entry`` C, the low
  32 bits of the DUT's cycle count since its reset), the second read C + isr_cycles, the task's read
  C + task_cycles. The count is made monotonic by unwrapping (``full_counts``).
- Each pin event happens at DUT clock edge ``count + K``: K, one integer per event (ISR rise, ISR fall,
  task rise), is the cycles between the pin write and the counter read beside it plus the counter's
  origin (the edge at which it read 0). K is fitted once, the value most samples agree on; then every
  sample is compared exactly.
- The rule from edge to tick (``edge_ticks``): a DUT output that changes at the simulator step s of its
  clock's edge is timestamped by the rig at tick ``s // 2 - 1`` (TICK_OFFSET). The rig's ts rises every
  2 steps; a DUT change at step s is sampled at the first ts edge after s (at an even s, where both
  clocks rise, the rig still samples the old level), step 2 (s // 2 + 1), and the rig's timestamp of a
  sample there is that ts edge's index less 2. Found from the simulation: of every rule s // 2 + T and
  (s + 1) // 2 + T, T in -40..9, only this one fits every sample of 300-stimulus pipeline runs at six
  clocks from 12.3 to 50 MHz, and with the same K at each (VexRiscv: -4, 17, -4).

At 25 MHz (edges every 4 steps) it is ``experiments.cross_check``: the ISR duration constant there is
2 x (K_fall - K_rise) ticks, the ISR -> task one 2 x (K_task - K_rise).
"""

from dataclasses import dataclass

import numpy as np

from targets import sim

EVENTS = ("isr_rise", "isr_fall", "task_rise")
STEPS_PER_TICK = 2       # the rig's ts (50 MHz) on the simulator's 10 ns step
TICK_OFFSET = -1         # rig tick of a DUT change at step s: s // STEPS_PER_TICK + TICK_OFFSET
COUNTER_BITS = 32        # the firmware prints the low 32 bits of the count
_STEP_PS = None


def most_common(values):
    """The value most samples show (0 of none): the firmware-to-pin constants of both cross-checks."""
    if not len(values):
        return 0
    distinct, counts = np.unique(values, return_counts=True)
    return int(distinct[counts.argmax()])


def step_ps():
    global _STEP_PS
    if _STEP_PS is None:
        _STEP_PS = sim.sim_step_ps(dut_cpu=True)
    return _STEP_PS


def edge_ticks(n, dut_hz):
    """The rig tick at which a DUT output changed on the DUT clock's edge ``n`` (int array) is timed."""
    return sim.dut_clock_edges(np.asarray(n, dtype=np.int64), dut_hz, step_ps()) // STEPS_PER_TICK + TICK_OFFSET


def edge_in_tick(ticks, dut_hz):
    """The inverse of ``edge_ticks``: the index of the DUT clock edge timed at each of ``ticks``, -1 where
    none is (at most one is: edges are at least a tick apart up to 50 MHz)."""
    ticks = np.asarray(ticks, dtype=np.int64)
    steps = (ticks - TICK_OFFSET) * STEPS_PER_TICK
    # The first edge at or after the tick's first step: an estimate within a fraction of an edge
    # (float), made exact with the schedule itself on the edges around it.
    estimate = np.floor(steps.astype(np.float64) * (dut_hz * step_ps() / 1e12)).astype(np.int64)
    window = np.maximum(estimate[:, None] + np.arange(-2, 3), 0)
    at = edge_ticks(window, dut_hz) == ticks[:, None]
    return np.where(at.any(axis=1), window[np.arange(len(ticks)), at.argmax(axis=1)], -1)


def full_counts(entries, anchor_ticks=None, dut_hz=sim.DUT_CPU_CLK_FREQ):
    """The DUT's cycle count at each ``entry`` (its low 32 bits, in order), made monotonic: each step from
    one sample to the next is taken modulo 2**32 (stimuli are far less than 2**32 cycles apart). The
    first sample's wraps: 0 (a count that starts at the DUT's reset), or, given the rig's tick of each
    sample (``anchor_ticks``, < 0 where unknown), the number of wraps that puts the first known one
    nearest the cycle the rig saw it at (a run that starts after the count first wrapped)."""
    entries = np.asarray(entries, dtype=np.int64)
    if not len(entries):
        return entries
    span = 1 << COUNTER_BITS
    counts = entries[0] + np.concatenate([[0], np.cumsum(np.diff(entries) % span)])
    if anchor_ticks is not None:
        known = np.flatnonzero(np.asarray(anchor_ticks) >= 0)
        if len(known):
            i = known[0]
            seen = (int(anchor_ticks[i]) - TICK_OFFSET) * STEPS_PER_TICK * step_ps() * dut_hz // 10**12
            counts = counts + span * round((seen - int(counts[i])) / span)
    return counts


@dataclass
class ClockCheck:
    dut_hz: int
    samples: int            # stimuli the rig paired
    constants: dict         # {event: K}: the event is at DUT clock edge count + K
    mismatches: int         # samples where any event's tick differs from its edge's, or one side lacks it

    def describe(self):
        ks = ", ".join(f"{e} {k:+d}" for e, k in self.constants.items())
        return (f"clock cross-check at {self.dut_hz} Hz: {self.samples} samples, pin events at DUT clock edge "
                f"count + K ({ks}), tick = step // {STEPS_PER_TICK} {TICK_OFFSET:+d}; mismatches {self.mismatches}")


def _event_ticks(pairing, n):
    """The rig's ISR rise, ISR fall and task rise ticks of the first ``n`` stimuli (-1 where it has none)."""
    isr = np.asarray(pairing.isr_mu[:n], dtype=np.int64)
    duration = np.asarray(pairing.isr_duration[:n], dtype=np.int64)
    task = np.asarray(pairing.task_mu[:n], dtype=np.int64)
    fall = np.where((isr >= 0) & (duration >= 0), isr + duration, -1)
    return isr, fall, task


def clock_cross_check(pairing, console_rows, dut_hz=sim.DUT_CPU_CLK_FREQ, constants=None):
    """The rig's ISR rise, ISR fall and task rise ticks against the ticks of the DUT clock edges the
    firmware's counts put them at, for the same stimuli (in order: the n-th console sample is the n-th
    stimulus). ``constants``: {event: K} to compare against; by default fitted, the K most samples show.
    A sample the rig did not pair, or whose console line is missing or out of order, mismatches."""
    n = min(len(pairing), len(console_rows))
    missing = abs(len(pairing) - len(console_rows))
    if not n:
        return ClockCheck(int(dut_hz), len(pairing), dict(constants or dict.fromkeys(EVENTS, 0)), missing)
    rows = np.asarray(console_rows[:n], dtype=np.int64)
    ticks = dict(zip(EVENTS, _event_ticks(pairing, n)))
    entry = full_counts(rows[:, 3], ticks["isr_rise"], dut_hz)
    counts = {"isr_rise": entry, "isr_fall": entry + rows[:, 1], "task_rise": entry + rows[:, 2]}
    answered = np.logical_and.reduce([t >= 0 for t in ticks.values()])
    out_of_order = rows[:, 0] != np.arange(1, n + 1)
    if constants is None:
        constants = {}
        for e in EVENTS:
            use = answered & ~out_of_order
            edge = edge_in_tick(ticks[e][use], dut_hz)
            constants[e] = most_common((edge - counts[e][use])[edge >= 0])
    bad = ~answered | out_of_order
    for e in EVENTS:
        bad |= edge_ticks(np.maximum(counts[e] + constants[e], 0), dut_hz) != ticks[e]
    return ClockCheck(int(dut_hz), len(pairing), dict(constants), int(bad.sum()) + missing)
