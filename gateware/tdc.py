"""TDC: a carry-chain time-to-digital converter on one DUT input (docs/tdc.md).

The input runs into a chain of ECP5 carry cells (``_CarryLine``): a feed-in cell takes the pin into
the carry (its LUT2 "generate" is A, its LUT4 "propagate" 0), then ``n_taps`` cells pass the carry
on (propagate 1), each a ~33 ps step on the dedicated FCO -> FCI wires. Each tap cell's sum output
(``F = 1 ^ FCI``, the carry in inverted) is caught by the flip-flop of its own slice half at every
``ts`` clock edge, so a tick's samples are a thermometer: how far the input's last change has run
along the line. ``_Encoder`` counts, in a pipelined adder tree, the taps at the new level in the tick
the line's state changed (bubble-tolerant: the order of the taps does not matter), giving the fine
code beside the tick.

Every cell is an explicit nextpnr cell (``TRELLIS_COMB`` in ``MODE "CCU2"``, ``TRELLIS_FF``) with its
own ``BEL`` attribute from ``placement`` (gateware placement per device: ``carry_bels``), what the
pinned yosys 0.70 / nextpnr 0.11.1 accept (issue 35's probe); the chain's CIN is tied to 1'bx.

Simulation (Verilator has no delays): ``line="model"`` replaces the carry line by
``_ThermometerModel``, a thermometer generator fed with each edge's position inside its tick
(``phase_ps``, set with the pin's change) and a table of tap arrival times, producing the thermometer
the samplers would catch, bubbles and zero-width bins included.
"""

import math
from pathlib import Path

from litex.gen import LiteXModule
from migen import Cat, ClockSignal, Constant, If, Instance, Mux, Signal

N_TAPS = 256
# The synthesis side of the carry line (board builds add it as a source): TRELLIS_COMB as a black
# box, and the 1'bx the chain starts on.
CELLS_VERILOG = Path(__file__).resolve().parent.parent / "targets" / "tdc" / "hilat_tdc_cells.v"
UNDEF_MODULE = "hilat_tdc_undef"
COMBS_PER_TILE = 8          # a PLC2 tile: SLICEA .. SLICED, two LUT/carry halves (K0, K1) each
SLICES = "ABCD"

# Carry-cell LUT contents (INITVAL: the LUT4 in bits 15..0, its LUT2 "generate" in bits 3..0; the
# carry out is LUT4 ? FCI : LUT2, nextpnr's own carry feed-in uses the same): the feed-in's LUT4 is 0
# with its unused C, D inputs high, its LUT2 = A; a tap's LUT4 is 1 whatever its inputs.
FEED_IN_INITVAL = 0x000A
TAP_INITVAL = 0xFFFF

# Regions of each device the lines are placed in (docs/tdc.md, "Placement"). Logic tiles (PLC2) fill
# whole rows, columns 2 .. 70 on the 25F (rows 2 .. 48 but the block RAM / DSP rows 13, 25, 37) and
# 2 .. 88 on the 45F (rows 2 .. 69 but 10, 22, 34, 46, 58): prjtrellis' tilegrid.json, the database
# nextpnr-ecp5 uses (tests/boards/test_tdc_placement.py checks the regions there). The top eight
# logic rows, beside the top bank the boards' inputs are on (the Colorlight's P3, the ULX3S's J1),
# two lines of 33 tiles a row from column 2. (Rows 26 .. 33 of the 25F, across its middle, walled the
# rest of the rig in two: ts missed 140 MHz, docs/tdc.md.) On the 45F every third row from row 2, so
# each line has two free logic rows beside it for its encoder's first stage: eight lines on four
# adjacent rows did not route beside the engine and Ethernet (the i9 build, docs/tdc.md).
REGIONS = {
    "LFE5U-25F": dict(first_column=2, last_column=70, rows=(2, 3, 4, 5, 6, 7, 8, 9)),
    "LFE5U-45F": dict(first_column=2, last_column=88, rows=(2, 5, 8, 11, 14, 17, 20, 23)),
}


def line_tiles(n_taps=N_TAPS):
    """Tiles a line spans: the feed-in cell and ``n_taps`` tap cells, eight a tile."""
    return math.ceil((n_taps + 1) / COMBS_PER_TILE)


def carry_bels(device, channel, n_taps=N_TAPS):
    """[(comb bel, flip-flop bel)] of cell 0 (the feed-in; its flip-flop bel unused) .. ``n_taps``
    (tap k is cell k + 1) of TDC line ``channel`` on ``device``: the same bels for a given device
    and channel in every build, so a stored calibration stays close to the next build's bins."""
    region = REGIONS.get(device)
    if region is None:
        raise SystemExit(f"no TDC region for device {device}: one of {', '.join(REGIONS)} (gateware/tdc.py)")
    tiles = line_tiles(n_taps)
    per_row = (region["last_column"] - region["first_column"] + 1) // tiles
    row, slot = divmod(channel, per_row)
    if row >= len(region["rows"]):
        raise SystemExit(f"{device}: room for {per_row * len(region['rows'])} TDC lines of {n_taps} taps, "
                         f"not {channel + 1}")
    y, x0 = region["rows"][row], region["first_column"] + slot * tiles
    bels = []
    for i in range(n_taps + 1):
        x = x0 + i // COMBS_PER_TILE
        s, half = SLICES[(i % COMBS_PER_TILE) // 2], i % 2
        bels.append((f"X{x}/Y{y}/SLICE{s}.K{half}", f"X{x}/Y{y}/SLICE{s}.FF{half}"))
    return bels


class _CarryLine(LiteXModule):
    """``pin`` into a chain of ``len(bels) - 1`` tap cells; ``samples`` bit k: tap k's flip-flop at
    the ``clock_domain`` edge, which holds ``F = 1 ^ FCI``: the input's level as it had reached tap k,
    *inverted* (``inverted``: the encoder counts accordingly)."""
    def __init__(self, pin, bels, clock_domain):
        n_taps = len(bels) - 1
        self.samples = Signal(n_taps)
        self.inverted = True

        # # #

        carry = [Signal(name=f"carry{i}") for i in range(n_taps + 1)]     # FCO of cell i
        cin = Signal()
        self.specials += Instance(UNDEF_MODULE, o_o=cin)
        raw = Signal(n_taps)
        for i, (comb_bel, ff_bel) in enumerate(bels):
            feed_in = i == 0
            # The chain starts on 1'bx (CELLS_VERILOG): a constant makes nextpnr add a feed-in cell
            # of its own, no net at all crashes it.
            ports = dict(i_A=pin, i_FCI=cin) if feed_in else dict(i_FCI=carry[i - 1], o_F=raw[i - 1])
            self.specials += Instance("TRELLIS_COMB", attr={("BEL", comb_bel), ("keep", 1)},
                p_MODE="CCU2", p_INITVAL=Constant(FEED_IN_INITVAL if feed_in else TAP_INITVAL, 16),
                p_CCU2_INJECT1="NO",
                o_FCO=carry[i], **ports)
            if not feed_in:
                self.specials += Instance("TRELLIS_FF", attr={("BEL", ff_bel), ("keep", 1)},
                    p_GSR="DISABLED", p_CEMUX="1", p_CLKMUX="CLK", p_LSRMUX="LSR", p_REGSET="RESET",
                    p_SRMODE="LSR_OVER_CE",
                    i_CLK=ClockSignal(clock_domain), i_DI=raw[i - 1], o_Q=self.samples[i - 1])


class _ThermometerModel(LiteXModule):
    """The carry line in simulation: at each ``clock_domain`` edge, tap k shows the input's level
    ``taps_ps[k]`` ps before the edge. ``pin`` and ``phase_ps`` are driven together during the tick
    the change happens in (after the clock edge that opens it); ``phase_ps`` is the change's time
    after that edge (0 < phase <= tick). The model keeps the last change only: changes at least one line
    length apart (docs/tdc.md)."""
    def __init__(self, pin, taps_ps, tick_ps, clock_domain):
        taps = [int(round(t)) for t in taps_ps]
        n_taps = len(taps)
        limit = max(taps) + tick_ps + 1   # the line has settled past this
        self.phase_ps = Signal(max=tick_ps + 1)
        self.samples = Signal(n_taps)
        self.inverted = False

        # # #

        level, old = Signal(), Signal()
        since = Signal(max=limit + tick_ps + 1)       # ps from the last change to this edge
        elapsed_new = Signal.like(since)
        elapsed_next = Signal.like(since)
        sync = getattr(self.sync, clock_domain)
        self.comb += [
            elapsed_new.eq(tick_ps - self.phase_ps),
            elapsed_next.eq(Mux(since >= limit, limit, since + tick_ps)),
        ]
        sync += If(pin != level,
            level.eq(pin), old.eq(level), since.eq(elapsed_new),
            self.samples.eq(Cat(*[Mux(elapsed_new > t, pin, level) for t in taps])),
        ).Else(
            since.eq(elapsed_next),
            self.samples.eq(Cat(*[Mux(elapsed_next > t, level, old) for t in taps])),
        )


def _Reg(*args, **kwargs):
    """A TDC pipeline register without reset: the samples flush it in ``latency`` ticks, and the ts
    reset net (the ULX3S build's second critical path, 6.5 ns of routing) need not reach the lines'
    encoders at the device's edge: about 450 flip-flops each (docs/tdc.md)."""
    return Signal(*args, reset_less=True, **kwargs)


def _popcount_tree(module, bits, clock_domain, levels_per_stage):
    """(count, stages): the number of ones of ``bits``, summed four bits at a time into registers,
    then in an adder tree registered every ``levels_per_stage`` levels."""
    sync = getattr(module.sync, clock_domain)
    values = []
    for g in range(0, len(bits), 4):
        group = bits[g:g + 4]
        s = Signal(max=len(group) + 1, reset_less=True)
        sync += s.eq(sum(group[j] for j in range(len(group))))
        values.append(s)
    stages = 1
    while len(values) > 1:
        for _ in range(levels_per_stage):
            if len(values) == 1:
                break
            pairs = []
            for j in range(0, len(values), 2):
                if j + 1 == len(values):
                    pairs.append(values[j])
                    continue
                a, b = values[j], values[j + 1]
                s = Signal(max=(2**len(a) - 1) + (2**len(b) - 1) + 1, reset_less=True)
                module.comb += s.eq(a + b)
                pairs.append(s)
            values = pairs
        registered = []
        for v in values:
            r = Signal.like(v, reset_less=True)
            sync += r.eq(v)
            registered.append(r)
        values = registered
        stages += 1
    return values[0], stages


class _Encoder(LiteXModule):
    """Counts the taps at the new level in the tick the line's state changed.

    A tick whose count of ones differs from the tick before's, when that was settled (0 or
    ``n_taps``: the line all low or all high), has an edge: ``edge`` for one cycle, ``rising`` its
    direction, ``code`` the taps it passed (rising: the ones, falling: the zeros), saturated to
    ``2**code_bits - 1``. Bubbles (taps out of order) change which taps are counted, not how many: the
    count is the line's code. ``level``: the line's level once settled; ``settled``: the line is all
    low or all high, in the cycle of the outputs. ``count``: the ones of a tick's samples (0 ..
    n_taps), two registers before the outputs (``latency`` - 2 ticks after the samples)."""
    def __init__(self, samples, clock_domain, inverted=False, levels_per_stage=2):
        n_taps = len(samples)
        self.code_bits = code_bits = max(1, (n_taps - 1).bit_length())
        self.code = _Reg(code_bits)
        self.edge = _Reg()
        self.rising = _Reg()
        self.level = _Reg()          # the line's level once settled (after the last edge)
        self.settled = _Reg()        # the line all low or all high

        # # #

        # A carry line's samples are inverted (``_CarryLine``): count their zeros, free in the first
        # stage's LUTs, rather than subtract the count from n_taps after the tree.
        tree_count, stages = _popcount_tree(self, ~samples if inverted else samples, clock_domain,
                                            levels_per_stage)
        sync = getattr(self.sync, clock_domain)
        # The count once more before the edge stage: a register-to-register hop the placer can stretch
        # from the tree, beside the line, towards the edge stage, which it puts by the capture (the i5
        # builds' ts path: 3.2-3.9 ns of routing from the tree, then the edge stage's logic: 127-135 MHz).
        count = Signal.like(tree_count, reset_less=True)
        sync += count.eq(tree_count)
        # The count, two registers before the outputs, for a reader that needs it; the capture takes
        # ``settled`` (aligned with the outputs), not the 9 bits and a comparison beside itself.
        self.count = Signal.like(count, reset_less=True)
        sync += self.count.eq(count)
        top = 2**code_bits - 1
        # Two stages: the edge and both candidate codes (saturated), then the code of the edge's direction;
        # then the outputs' register.
        previous = Signal.like(count, reset_less=True)
        edge, rising, level, settled = _Reg(), _Reg(), _Reg(), _Reg()
        rising_code, falling_code = _Reg(code_bits), _Reg(code_bits)
        # This stage may be placed far from the tree (the i5 build's ts path: 3.9 ns of routing from
        # the count), so its logic is kept shallow: with 2**code_bits taps the count is full (all
        # taps) exactly when its top bit is set, which replaces two comparators (carry chains).
        zero = Signal()   # combinational
        self.comb += zero.eq(count == 0)
        if n_taps == 2**code_bits:
            full, above_top, below_one = count[code_bits], count[code_bits], zero
        else:
            full, above_top, below_one = count == n_taps, count > top, count < n_taps - top
        sync += [
            previous.eq(count),
            edge.eq(((previous == 0) | (previous == n_taps)) & (count != previous)),
            rising.eq(previous == 0),
            rising_code.eq(Mux(above_top, top, count)),
            falling_code.eq(Mux(below_one, top, n_taps - count)),
            If(zero, level.eq(0)).Elif(full, level.eq(1)),
            settled.eq(zero | full),
        ]
        edge_out, rising_out, code_out, level_out, settled_out = (_Reg(), _Reg(), _Reg(code_bits),
                                                                  _Reg(), _Reg())
        sync += [
            edge_out.eq(edge),
            rising_out.eq(rising),
            code_out.eq(Mux(rising, rising_code, falling_code)),
            level_out.eq(level),
            settled_out.eq(settled),
        ]
        # The outputs once more: a register the placer can put between the encoder, beside its line,
        # and the capture, which may be half the chip away (the ULX3S build's ts critical path was 4.3
        # ns of routing from the adder tree to the edge stage, placed by the capture: 130 MHz).
        sync += [
            self.edge.eq(edge_out),
            self.rising.eq(rising_out),
            self.code.eq(code_out),
            self.level.eq(level_out),
            self.settled.eq(settled_out),
        ]
        # From the samples: the adder tree, its count again, the two stages above, the outputs.
        self.latency = stages + 4


class TDC(LiteXModule):
    """A TDC front end on ``pin`` (docs/tdc.md).

    ``edge`` is 1 for one ``clock_domain`` cycle ``latency`` ticks after the tick the input changed
    in (counted as ``InputSampler.latency``: from the tick's closing clock edge, where the samplers
    catch the line, ``latency`` - 1 more registers), with ``rising`` and ``code``: the taps the
    change passed before that edge (0 .. 2**code_bits - 1; a larger code is an earlier change).

    ``line``: "carry" (the placed carry chain; ``bels`` from ``carry_bels``) or "model" (simulation:
    ``taps_ps`` and ``tick_ps``; the model's ``phase_ps`` is this module's ``phase_ps``).
    """
    def __init__(self, pin, line="carry", bels=None, taps_ps=None, tick_ps=None, n_taps=N_TAPS,
                 clock_domain="ts", levels_per_stage=2):
        assert line in ("carry", "model")
        if line == "carry":
            assert bels is not None and len(bels) == n_taps + 1, "bels: carry_bels(device, channel, n_taps)"
            self.line = _CarryLine(pin, bels, clock_domain)
        else:
            assert taps_ps is not None and len(taps_ps) == n_taps and tick_ps
            self.line = _ThermometerModel(pin, taps_ps, tick_ps, clock_domain)
            self.phase_ps = self.line.phase_ps
        self.n_taps = n_taps
        self.encoder = _Encoder(self.line.samples, clock_domain, self.line.inverted, levels_per_stage)
        self.code_bits = self.encoder.code_bits
        self.code, self.edge, self.rising, self.level = (self.encoder.code, self.encoder.edge,
                                                         self.encoder.rising, self.encoder.level)
        # The samplers' register (the tick's closing edge), then the encoder's.
        self.latency = 1 + self.encoder.latency


class TDCBank(LiteXModule):
    """A TDC front end on each of ``pins`` (line i at ``carry_bels(device, i, n_taps)``), and a readout
    of each input's last edge for the CPU: ``last<i>`` (CSR, sys domain) holds its code (bits 0-7),
    its direction (bit 8, 1 = rising) and a count of its edges (bits 16-31, wrapping).

    The readout crosses from ``clock_domain`` bit by bit (two flip-flops each, ``MultiReg``): a read
    during an edge's update may mix the two; read until two reads agree. It is what a board build with
    ``--tdc`` does with the codes until the record carries them beside the tick (docs/tdc.md, "What
    the record needs"), and it keeps synthesis from removing the encoders."""
    def __init__(self, pins, device, n_taps=N_TAPS, clock_domain="ts", cpu_domain="sys", taps_ps=None, tick_ps=None):
        from litex.soc.interconnect.csr import CSRStatus
        from migen.genlib.cdc import MultiReg

        self.device = device
        self.n_taps = n_taps
        self.tdcs = []
        for i, pin in enumerate(pins):
            if taps_ps is None:
                tdc = TDC(pin, bels=carry_bels(device, i, n_taps), n_taps=n_taps, clock_domain=clock_domain)
            else:   # simulation: the model line (``TDC``'s ``line="model"``)
                tdc = TDC(pin, line="model", taps_ps=taps_ps, tick_ps=tick_ps, n_taps=n_taps,
                          clock_domain=clock_domain)
            setattr(self, f"tdc{i}", tdc)
            self.tdcs.append(tdc)
            status = CSRStatus(32, name=f"last{i}", description=f"Input {i}'s last edge: code, rising, edge count.")
            setattr(self, f"last{i}", status)
        self.code_bits = self.tdcs[0].code_bits if self.tdcs else 0

        # # #

        for tdc, status in zip(self.tdcs, [getattr(self, f"last{i}") for i in range(len(self.tdcs))]):
            code, rising, count = Signal(tdc.code_bits), Signal(), Signal(16)
            getattr(self.sync, clock_domain).__iadd__(
                If(tdc.edge, code.eq(tdc.code), rising.eq(tdc.rising), count.eq(count + 1)))
            assert tdc.code_bits <= 8
            padded = Signal(8)      # the code, zero-extended to bits 0-7 whatever its width
            self.comb += padded.eq(code)
            self.specials += MultiReg(Cat(padded, rising, Constant(0, 7), count), status.status, odomain=cpu_domain)


class TDCInputs:
    """Which DUT inputs have a TDC in the capture (``EdgeCapture(tdc=...)``) and how their lines are
    made: the first ``n_inputs`` inputs; on a board, ``device``'s lines at ``carry_bels(device, i)``;
    in simulation (``taps_ps`` given), the model line with that tap table and ``tick_ps``. The
    capture fills ``tdcs`` (the build report reads them, with ``device`` and ``n_taps``)."""
    code_bits = 8       # a code per TDC input in the record's fraction (docs/tdc.md, "The record")

    def __init__(self, n_inputs, device=None, taps_ps=None, tick_ps=None, n_taps=N_TAPS):
        assert n_inputs >= 1 and (device is not None or taps_ps is not None)
        assert (n_taps - 1).bit_length() <= self.code_bits
        self.n_inputs = n_inputs
        self.device = device
        self.taps_ps = taps_ps
        self.tick_ps = tick_ps
        self.n_taps = n_taps if taps_ps is None else len(taps_ps)
        self.tdcs = []

    def make(self, i, pin, clock_domain):
        """Input ``i``'s TDC on ``pin`` (None for an input without one)."""
        if i >= self.n_inputs:
            return None
        if self.taps_ps is None:
            tdc = TDC(pin, bels=carry_bels(self.device, i, self.n_taps), n_taps=self.n_taps,
                      clock_domain=clock_domain)
        else:
            tdc = TDC(pin, line="model", taps_ps=self.taps_ps, tick_ps=self.tick_ps, n_taps=self.n_taps,
                      clock_domain=clock_domain)
        tdc.record_bits = self.code_bits    # its code, zero-extended, in the record's fraction
        self.tdcs.append(tdc)
        return tdc
