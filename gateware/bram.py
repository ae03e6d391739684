"""ECP5 block RAM for the engine's histogram banks: DP16KD blocks, port A writing, port B reading.

``RAM36`` instantiates the blocks instead of leaving a ``Memory`` to yosys, so a bank's blocks are
exactly what the build report counts. A deep table of 36-bit words is mostly groups of four 2048 x 9
blocks (each block holds 9 bits of 2048 words; two for 18-bit words) and, for the rest, 512 x 36
blocks: 4,608 words are two groups and one block, nine blocks in all (five at 18 bits), and a read
picks its word among three sources instead of nine (one 512 x 36 block per 512 words would need a
nine-way multiplexer on every bit, whose wires all converge from the block RAM rows). The blocks run
without their output register: the data comes about 5.8 ns after the clock (speed grade 6), which
the ``sys`` domain (20 ns) absorbs with the multiplexer and the bank's compute behind it. (Were the
register wanted at a faster clock: in the 36-bit form the low half leaves on DOA, whose register is
REGMODE_A's, not REGMODE_B's.) Simulation uses ``sim_models/DP16KD.v`` (see
``gateware.dsp.SIM_MODELS``), written from Lattice's memory usage guide for these two forms.
"""

from litex.gen import LiteXModule
from migen import Array, Cat, ClockSignal, Instance, Signal, log2_int

WIDTH       = 36
GROUP_WORDS = 2048   # four 2048 x 9 blocks side by side
BLOCK_WORDS = 512    # one 512 x 36 block


def _dp16kd(clk, width, we, write_address, read_address, dat_w, dat_r):
    """One block: ``width`` 36 (512 words, AD*13..5; AD*3..0 the write's byte enables) or 9 (2048
    words, AD*13..3)."""
    low = {36: 5, 9: 3}[width]
    ports = dict(
        i_CLKA=clk, i_CEA=we, i_OCEA=0, i_WEA=1, i_RSTA=0, i_CSA0=0, i_CSA1=0, i_CSA2=0,
        i_CLKB=clk, i_CEB=1, i_OCEB=0, i_WEB=0, i_RSTB=0, i_CSB0=0, i_CSB1=0, i_CSB2=0,
    )
    for i in range(14):
        ports[f"i_ADA{i}"] = write_address[i - low] if i >= low else (1 if width == 36 and i < 4 else 0)
        ports[f"i_ADB{i}"] = read_address[i - low] if i >= low else 0
    for i in range(18):
        ports[f"i_DIA{i}"] = dat_w[i] if i < len(dat_w) else 0
        ports[f"i_DIB{i}"] = dat_w[18 + i] if width == 36 and 18 + i < len(dat_w) else 0
    if width == 36:
        ports.update({f"o_DOA{i}": dat_r[i] for i in range(18)})
        ports.update({f"o_DOB{i}": dat_r[18 + i] for i in range(18)})
    else:
        ports.update({f"o_DOB{i}": dat_r[i] for i in range(9)})
    return Instance("DP16KD",
        p_DATA_WIDTH_A=width, p_DATA_WIDTH_B=width, p_REGMODE_A="NOREG", p_REGMODE_B="NOREG",
        p_RESETMODE="SYNC", p_ASYNC_RESET_RELEASE="SYNC", p_CSDECODE_A="0b000",
        p_CSDECODE_B="0b000", p_WRITEMODE_A="NORMAL", p_WRITEMODE_B="NORMAL", p_GSR="DISABLED",
        **ports)


class RAM36(LiteXModule):
    """``depth`` words of ``width`` bits (a multiple of 9 up to 36; ``depth`` a multiple of 512): a
    group is ``width / 9`` blocks of 2048 x 9; the rest, 512 x 36 blocks (their upper bits unused
    when narrower). Write: ``we``, ``write_address`` and ``dat_w`` of one cycle write the word at its
    end. Read: ``read_address`` of cycle c gives ``dat_r`` in cycle c + ``latency`` (a word written
    at the read's own edge reads as before)."""
    latency = 1

    def __init__(self, depth, clock_domain, width=WIDTH):
        assert depth % BLOCK_WORDS == 0 and width % 9 == 0 and 0 < width <= WIDTH
        lanes_per_group = width // 9
        groups, rest = divmod(depth, GROUP_WORDS)
        singles = rest // BLOCK_WORDS
        self.blocks = lanes_per_group * groups + singles
        self.write_address = Signal(max=depth)
        self.dat_w         = Signal(width)
        self.we            = Signal()
        self.read_address  = Signal(max=depth)
        self.dat_r         = Signal(width)

        # # #

        sync = getattr(self.sync, clock_domain)
        clk = ClockSignal(clock_domain)
        # Sources of a word: each group, then each single block, numbered by address >> 9.
        sources = []
        group_bits, block_bits = log2_int(GROUP_WORDS), log2_int(BLOCK_WORDS)
        for g in range(groups):
            out = Signal(width, name=f"group{g}_out")
            sources.append(out)
            we = self.we & (self.write_address[group_bits:] == g)
            lanes = [Signal(9, name=f"group{g}_lane{lane}") for lane in range(lanes_per_group)]
            self.comb += out.eq(Cat(*lanes))
            for lane in range(lanes_per_group):
                self.specials += _dp16kd(clk, 9, we, self.write_address[:group_bits],
                    self.read_address[:group_bits], self.dat_w[9*lane:9*(lane + 1)], lanes[lane])
        first_single = groups * GROUP_WORDS // BLOCK_WORDS   # in units of 512 words
        for b in range(singles):
            out = Signal(WIDTH, name=f"block{b}_out")
            sources.append(out[:width])
            we = self.we & (self.write_address[block_bits:] == first_single + b)
            self.specials += _dp16kd(clk, 36, we, self.write_address[:block_bits],
                                     self.read_address[:block_bits], self.dat_w, out)
        # The source of each read, registered with the address the blocks take: its word is picked
        # from their outputs in the cycle they hold it.
        source_of = [unit // (GROUP_WORDS // BLOCK_WORDS) if unit < first_single else groups + unit - first_single
                     for unit in range(depth // BLOCK_WORDS)]
        if len(sources) > 1:
            # One multiplexer for every reader of dat_r: without `keep`, synthesis copies it into
            # each path that reads the word.
            self.dat_r.attr.add(("keep", "true"))
            source = Signal(max=len(sources))
            unit = self.read_address[block_bits:]
            sync += source.eq(Array(source_of)[unit])
            self.comb += self.dat_r.eq(Array(sources)[source])
        else:
            self.comb += self.dat_r.eq(sources[0])
