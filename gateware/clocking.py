"""EdgeClock: the clocks of four samples a tick (docs/subtick.md): the edge clock through the bank's
ECLKSYNCB, and ``ts`` as that same net divided by 2 in CLKDIVF.

IDDRX2F samples on both edges of the edge clock and hands over its word on ``ts``; both must come
from one net so they are in phase by construction (nextpnr places a CLKDIVF only when its input is
the IDDRs' ECLK net), and the ``ts`` rising edge is the first of each pair of edge-clock rising
edges. The edge clock must come from a PLL's CLKOP or CLKOS output (nextpnr routes an edge clock
only from those), at 2 x ts within the I/O cells' limit (speed grade 6: 277.9 MHz).

Simulation uses ``sim_models/ECLKSYNCB.v``, ``CLKDIVF.v`` and ``FD1S3BX.v`` (see ``gateware.dsp.SIM_MODELS``),
written from Lattice's documented behaviour.
"""

from litex.gen import LiteXModule
from migen import ClockDomain, Instance, Signal


class EdgeClock(LiteXModule):
    """From ``edge_clock`` (a PLL output at twice the tick rate) and ``reset`` (asynchronous, high):
    ``cd_eclk`` (the edge clock, no reset) and ``cd_ts`` (the tick), in reset at once with ``reset``
    and released on ts's second rising edge after it falls."""
    def __init__(self, edge_clock, reset, eclk_domain="eclk", ts_domain="ts"):
        self.cd_eclk = ClockDomain(eclk_domain, reset_less=True)
        self.cd_ts   = ClockDomain(ts_domain)

        # # #

        eclk = Signal()
        self.specials += [
            Instance("ECLKSYNCB", i_ECLKI=edge_clock, i_STOP=0, o_ECLKO=eclk),
            Instance("CLKDIVF", p_DIV="2.0", i_CLKI=eclk, i_RST=reset, i_ALIGNWD=0, o_CDIVX=self.cd_ts.clk),
        ]
        self.comb += self.cd_eclk.clk.eq(eclk)
        # ts's reset from two flip-flops on ts with an asynchronous preset (ts stops while the divider
        # is held, so only a preset can set them), released on a ts edge, which is an edge-clock
        # edge. Not on the edge clock itself: it reaches I/O cells and CLKDIVF, not the fabric's
        # flip-flops (nextpnr cannot route it there). FD1S3BX, as LiteX's ECP5 reset synchronizer,
        # instantiated here so that simulation runs the same cells (sim_models/FD1S3BX.v).
        held = Signal()
        self.specials += [
            Instance("FD1S3BX", i_D=0,    i_CK=self.cd_ts.clk, i_PD=reset, o_Q=held),
            Instance("FD1S3BX", i_D=held, i_CK=self.cd_ts.clk, i_PD=reset, o_Q=self.cd_ts.rst),
        ]
