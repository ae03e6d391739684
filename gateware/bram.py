"""ECP5 block RAM with the output register on, for tables the ``ts`` domain reads every few cycles.

A DP16KD without its output register gives its data about 5.8 ns after the clock (speed grade 6):
with the route to the next register that alone fills a 140 MHz cycle, and a word spread over
several blocks adds a multiplexer on top. yosys infers blocks only that way, so ``RegisteredRAM36``
instantiates them: 512 x 36 pseudo-dual-port blocks with ``REGMODE_B = "OUTREG"`` (the data two
edges after the address), and the word of a deep table picked from its block a cycle later, from
registers. Simulation uses ``sim_models/DP16KD.v`` (see ``gateware.dsp.SIM_MODELS``), written from
Lattice's memory usage guide for this subset.
"""

from litex.gen import LiteXModule
from migen import Array, ClockSignal, Instance, Signal, log2_int

BLOCK_WORDS = 512
WIDTH       = 36


class RegisteredRAM36(LiteXModule):
    """``depth`` words of 36 bits in ``depth / 512`` blocks. Write: ``we``, ``write_address`` and
    ``dat_w`` of one cycle write the word at its end. Read: ``read_address`` of cycle c gives
    ``dat_r`` in cycle c + ``latency`` (a word written at the read's own edge reads as before)."""
    latency = 3

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
                i_CLKB=clk, i_CEB=1, i_OCEB=1, i_WEB=0, i_RSTB=0, i_CSB0=0, i_CSB1=0, i_CSB2=0,
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
                p_DATA_WIDTH_A=36, p_DATA_WIDTH_B=36, p_REGMODE_A="NOREG", p_REGMODE_B="OUTREG",
                p_RESETMODE="SYNC", p_ASYNC_RESET_RELEASE="SYNC", p_CSDECODE_A="0b000",
                p_CSDECODE_B="0b000", p_WRITEMODE_A="NORMAL", p_WRITEMODE_B="NORMAL", p_GSR="DISABLED",
                **ports)
        # The block of each read, as its data leaves the output registers, then the word.
        block = Signal(max=max(blocks, 2))
        block_at_output = Signal(max=max(blocks, 2))
        sync += [
            block.eq(self.read_address[word_bits:]),
            block_at_output.eq(block),
            self.dat_r.eq(Array(outputs)[block_at_output] if blocks > 1 else outputs[0]),
        ]
