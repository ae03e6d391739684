"""ECP5 block RAM for the engine's histogram banks: 512 x 36 pseudo-dual-port DP16KD blocks.

``RAM36`` instantiates the blocks instead of leaving a ``Memory`` to yosys, so a bank is exactly
``depth / 512`` blocks in their 36-bit form (what the build report counts), with port A writing and
port B reading. The blocks run without their output register: the data comes about 5.8 ns after the
clock (speed grade 6), which the ``sys`` domain (20 ns) absorbs with the block multiplexer and the
bank's compute behind it. (Were the register wanted at a faster clock: in the 36-bit form the low
half leaves on DOA, whose register is REGMODE_A's, not REGMODE_B's.) Simulation uses
``sim_models/DP16KD.v`` (see ``gateware.dsp.SIM_MODELS``), written from Lattice's memory usage guide
for this subset.
"""

from litex.gen import LiteXModule
from migen import Array, ClockSignal, Instance, Signal, log2_int

BLOCK_WORDS = 512
WIDTH       = 36


class RAM36(LiteXModule):
    """``depth`` words of 36 bits in ``depth / 512`` blocks. Write: ``we``, ``write_address`` and
    ``dat_w`` of one cycle write the word at its end. Read: ``read_address`` of cycle c gives
    ``dat_r`` in cycle c + ``latency`` (a word written at the read's own edge reads as before)."""
    latency = 1

    def __init__(self, depth, clock_domain):
        assert depth % BLOCK_WORDS == 0
        blocks = depth // BLOCK_WORDS
        self.write_address = Signal(max=depth)
        self.dat_w         = Signal(WIDTH)
        self.we            = Signal()
        self.read_address  = Signal(max=depth)
        self.dat_r         = Signal(WIDTH)

        # # #

        word_bits = log2_int(BLOCK_WORDS)
        sync = getattr(self.sync, clock_domain)
        clk = ClockSignal(clock_domain)
        outputs = [Signal(WIDTH, name=f"block{b}_out") for b in range(blocks)]
        write_word, read_word = self.write_address[:word_bits], self.read_address[:word_bits]
        for b in range(blocks):
            ports = dict(
                i_CLKA=clk, i_CEA=self.we & (self.write_address[word_bits:] == b), i_OCEA=0, i_WEA=1,
                i_RSTA=0, i_CSA0=0, i_CSA1=0, i_CSA2=0,
                i_CLKB=clk, i_CEB=1, i_OCEB=0, i_WEB=0, i_RSTB=0, i_CSB0=0, i_CSB1=0, i_CSB2=0,
            )
            # AD*0-3: byte enables (write) / unused (read); AD*4: unused; AD*5-13: the word.
            for i in range(14):
                ports[f"i_ADA{i}"] = 1 if i < 4 else (write_word[i - 5] if i >= 5 else 0)
                ports[f"i_ADB{i}"] = read_word[i - 5] if i >= 5 else 0
            for i in range(18):
                ports[f"i_DIA{i}"] = self.dat_w[i]
                ports[f"i_DIB{i}"] = self.dat_w[18 + i]
                ports[f"o_DOA{i}"] = outputs[b][i]
                ports[f"o_DOB{i}"] = outputs[b][18 + i]
            self.specials += Instance("DP16KD",
                p_DATA_WIDTH_A=36, p_DATA_WIDTH_B=36, p_REGMODE_A="NOREG", p_REGMODE_B="NOREG",
                p_RESETMODE="SYNC", p_ASYNC_RESET_RELEASE="SYNC", p_CSDECODE_A="0b000",
                p_CSDECODE_B="0b000", p_WRITEMODE_A="NORMAL", p_WRITEMODE_B="NORMAL", p_GSR="DISABLED",
                **ports)
        # The block of each read, registered with the address the block takes: its word is picked
        # from the block outputs in the cycle they hold it.
        if blocks > 1:
            # One multiplexer for every reader of dat_r: without `keep`, synthesis copies it into
            # each path that reads the word (three times the LUTs of a bank).
            self.dat_r.attr.add(("keep", "true"))
            block = Signal(max=blocks)
            sync += block.eq(self.read_address[word_bits:])
            self.comb += self.dat_r.eq(Array(outputs)[block])
        else:
            self.comb += self.dat_r.eq(outputs[0])
