"""EdgeClock: the clocks of four samples a tick (docs/subtick.md): the edge clock through the bank's
ECLKSYNCB, and ``ts`` as that same net divided by 2 in CLKDIVF.

IDDRX2F samples on both edges of the edge clock and hands over its word on ``ts``; both must come
from one net so they are in phase by construction (nextpnr places a CLKDIVF only when its input is
the IDDRs' ECLK net), and the ``ts`` rising edge is the first of each pair of edge-clock rising
edges. The edge clock must come from a PLL's CLKOP or CLKOS output (nextpnr routes an edge clock
only from those), at 2 x ts within the I/O cells' limit (speed grade 6: 277.9 MHz).

Simulation uses ``sim_models/ECLKSYNCB.v`` and ``CLKDIVF.v`` (see ``gateware.dsp.SIM_MODELS``),
written from Lattice's documented behaviour.
"""

from litex.gen import LiteXModule
from migen import ClockDomain, Instance, Signal


class EdgeClock(LiteXModule):
    """From ``edge_clock`` (a PLL output at twice the tick rate) and ``reset`` (asynchronous, high):
    ``cd_eclk`` (the edge clock, no reset) and ``cd_ts`` (the tick), whose reset is released
    ``reset_stages`` ticks after ``reset`` falls, synchronously."""
    def __init__(self, edge_clock, reset, eclk_domain="eclk", ts_domain="ts", reset_stages=2):
        self.cd_eclk = ClockDomain(eclk_domain, reset_less=True)
        self.cd_ts   = ClockDomain(ts_domain)

        # # #

        eclk = Signal()
        self.specials += [
            Instance("ECLKSYNCB", i_ECLKI=edge_clock, i_STOP=0, o_ECLKO=eclk),
            Instance("CLKDIVF", p_DIV="2.0", i_CLKI=eclk, i_RST=reset, i_ALIGNWD=0, o_CDIVX=self.cd_ts.clk),
        ]
        self.comb += self.cd_eclk.clk.eq(eclk)
        # ts's reset, from registers on the edge clock (it runs while the divider is held): released
        # reset_stages ticks after `reset` falls, on an edge-clock edge (in phase with ts's).
        chain = [Signal(reset=1, name=f"ts_reset{k}") for k in range(2 * reset_stages)]
        sync = getattr(self.sync, eclk_domain)
        sync += [chain[0].eq(reset)] + [chain[k].eq(chain[k - 1]) for k in range(1, len(chain))]
        self.comb += self.cd_ts.rst.eq(chain[-1])
