"""InputSampler: a DUT input sampled ``samples_per_tick`` times a tick, in an ECP5 I/O cell.

``samples_per_tick`` (S):

- 1: two flip-flops (a MultiReg), the pin's level once a tick;
- 2: IDDRX1F, D sampled on both edges of the ``ts`` clock (any pin);
- 4: IDDRX2F, D sampled on both edges of an edge clock at twice ``ts`` (left and right bank pins
  only; ``ts`` is the edge clock divided by 2 in CLKDIVF, so the two are in phase).

``samples`` bit k is the pin at ``k + 1`` S-ths of a tick after the tick's clock edge: bit S - 1 is
the sample a one-sample rig takes (at the next edge), so the tick-level path (glitch filter, edge
detect, levels) sees the same level whatever S, and an edge driven during (edge + k/S, edge + (k+1)/S]
of tick t is at ``t + k / S``. The I/O cell hands over its word of S samples once a tick, starting
at the clock edge (``(edge, edge + 1/S, ...)``); the sampler re-pairs them (the last S - 1 samples of
one word with the first of the next) so the tick's last sample is the one at the next edge.

Simulation uses ``sim_models/IDDRX1F.v`` and ``IDDRX2F.v`` (see ``gateware.dsp.SIM_MODELS``),
written from Lattice's documented behaviour. docs/subtick.md has the timing.
"""

from litex.gen import LiteXModule
from migen import Cat, ClockSignal, Instance, Mux, Signal
from migen.genlib.cdc import MultiReg

SAMPLES_PER_TICK = (1, 2, 4)


def fraction_bits(samples_per_tick):
    """Bits of a channel's sub-tick position: log2(S)."""
    assert samples_per_tick in SAMPLES_PER_TICK, f"samples per tick: one of {SAMPLES_PER_TICK}"
    return samples_per_tick.bit_length() - 1


class InputSampler(LiteXModule):
    """``pin`` sampled S times a tick; ``samples`` (registered in ``clock_domain``) holds a tick's
    samples, bit 0 the earliest, ``latency`` ticks after the tick. ``edge_clock_domain``: the edge
    clock's domain (S = 4 only)."""
    @staticmethod
    def latency_of(samples_per_tick, sync_stages=2):
        """Ticks from the pin to ``samples``. S = 1: the synchronizer's flip-flops. S > 1: the I/O
        cell's sample and output registers, then ``samples`` (the tick's last sample is the first of
        the next word, one tick later)."""
        return sync_stages if samples_per_tick == 1 else 3

    def __init__(self, pin, samples_per_tick=1, clock_domain="ts", edge_clock_domain=None, sync_stages=2):
        S = samples_per_tick
        fraction_bits(S)
        assert (edge_clock_domain is not None) == (S == 4), "an edge clock is for (and needed by) S = 4"
        self.samples_per_tick = S
        self.samples = Signal(S)
        self.latency = self.latency_of(S, sync_stages)

        # # #

        if S == 1:
            self.specials += MultiReg(pin, self.samples, odomain=clock_domain, n=sync_stages)
            return
        sync = getattr(self.sync, clock_domain)
        word = Signal(S)        # the I/O cell's samples of the tick before, bit 0 at its clock edge
        later = Signal(S - 1)   # that word's samples after its edge, kept for the next word's first
        if S == 2:
            self.specials += Instance("IDDRX1F",
                i_D=pin, i_SCLK=ClockSignal(clock_domain), i_RST=0,
                o_Q0=word[0], o_Q1=word[1])
        else:
            # ALIGNWD is left unconnected, not tied to 0: nextpnr routes it to the I/O cell's SLIP
            # input, which only the A and C pins of a bank have.
            self.specials += Instance("IDDRX2F",
                i_D=pin, i_SCLK=ClockSignal(clock_domain), i_ECLK=ClockSignal(edge_clock_domain),
                i_RST=0,
                o_Q0=word[0], o_Q1=word[1], o_Q2=word[2], o_Q3=word[3])
        sync += [
            later.eq(word[1:]),
            self.samples.eq(Cat(later, word[0])),
        ]


def subtick_position(samples, previous_level):
    """(level, fraction) of a tick's ``samples``: the level is its last sample; the fraction, where
    the level changed from ``previous_level`` (the tick before's), is the index of the first sample
    at the new level (0 without a change). A pulse that starts and ends inside one tick is no change."""
    S = len(samples)
    level = samples[S - 1]
    fraction = S - 1
    for k in reversed(range(S - 1)):    # the earliest sample at the new level wins
        fraction = Mux(samples[k] == level, k, fraction)
    if S > 1:
        fraction = Mux(level != previous_level, fraction, 0)
    return level, fraction
