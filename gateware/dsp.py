"""ECP5 sysDSP multipliers, for products the ``ts`` domain cannot afford in LUTs.

``Multiplier18`` is one MULT18X18D with its input and output registers on: nextpnr times only the
fabric side of those registers (the multiply between them is the block's own registered path, rated
by Lattice well above the rig's 140 MHz). Simulation (Verilator, cocotb) uses the model in
``sim_models/MULT18X18D.v`` (``SIM_MODELS``), written from Lattice's sysDSP usage guide for the
subset this module drives; board builds leave the instance to yosys and nextpnr.
"""

from pathlib import Path

from litex.gen import LiteXModule
from migen import ClockSignal, Instance, Signal

# Every vendor block the rig instantiates (this multiplier, gateware.bram's block RAM), modelled.
SIM_MODELS = sorted(str(p) for p in (Path(__file__).parent / "sim_models").glob("*.v"))

WIDTH = 18


class Multiplier18(LiteXModule):
    """``p = a * b``, unsigned, up to 18 x 18 -> 36 bits: ``a`` and ``b`` of cycle c give ``p`` in
    cycle c + ``latency`` (registered in and out, free-running)."""
    latency = 2

    def __init__(self, a, b, clock_domain):
        assert len(a) <= WIDTH and len(b) <= WIDTH
        self.p = Signal(len(a) + len(b))

        # # #

        product = Signal(2*WIDTH)
        registers = {}
        for reg in ("INPUTA", "INPUTB", "OUTPUT"):
            registers.update({f"p_REG_{reg}_CLK": "CLK0", f"p_REG_{reg}_CE": "CE0", f"p_REG_{reg}_RST": "RST0"})
        for reg in ("INPUTC", "PIPELINE"):
            registers[f"p_REG_{reg}_CLK"] = "NONE"
        self.specials += Instance("MULT18X18D",
            p_GSR="DISABLED", p_RESETMODE="SYNC", p_MULT_BYPASS="DISABLED", p_CAS_MATCH_REG="FALSE",
            p_SOURCEB_MODE="B_SHIFT", p_CLK0_DIV="ENABLED", p_HIGHSPEED_CLK="NONE",
            i_CLK0=ClockSignal(clock_domain), i_CE0=1, i_RST0=0,
            i_SIGNEDA=0, i_SIGNEDB=0, i_SOURCEA=0, i_SOURCEB=0,
            **registers,
            **{f"i_A{i}": a[i] if i < len(a) else 0 for i in range(WIDTH)},
            **{f"i_B{i}": b[i] if i < len(b) else 0 for i in range(WIDTH)},
            **{f"i_C{i}": 0 for i in range(WIDTH)},
            **{f"o_P{i}": product[i] for i in range(2*WIDTH)},
        )
        self.comb += self.p.eq(product[:len(self.p)])  # the rest is 0 (unsigned operands)
