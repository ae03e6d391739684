"""Clock-domain-crossing helpers shared by the hilat timing cores.

ConfigCommit and Snapshot move *bundles* of bits coherently between ``sys`` (where the CSRs live)
and a core's own clock domain (``ts``), at any frequency ratio. They follow the "data + synchronized
strobe" pattern: the data is held still by its owner while a single-bit strobe crosses through a
2-FF synchronizer, so the receiving side samples it only once it has settled. The capture records
cross in RegisteredFullAsyncFIFO, whose Gray-coded pointers (one bit changes per step) go through
MultiReg as in Migen's AsyncFIFO.
"""

from litex.gen import LiteXModule
from litex.gen.reduce import Reduce
from litex.soc.interconnect import stream
from migen import *
from migen.genlib.cdc import GrayCounter, MultiReg, PulseSynchronizer
from migen.genlib.fifo import _FIFOInterface


def _copy_of(signal):
    return Signal(len(signal), reset=getattr(signal, "reset", 0))


class ConfigCommit(LiteXModule):
    """Copy quasi-static ``sys`` configuration into ``clock_domain`` on a commit strobe.

    ``sources`` are ``sys`` signals (typically CSRStorage fields) that software writes *before*
    pulsing ``commit``; they must not change until ``applied``. ``outputs`` are the copies in
    ``clock_domain``; ``applied`` pulses there the cycle after they took the new values.

    ``registered_enable``: the copy's enable is a register of the synchronized strobe (a cycle later)
    instead of the strobe's XOR itself, for a wide bundle whose flip-flops spread over the device
    (the capture's settings: the XOR's route to their CE was a 45F build's ts critical path).
    """
    def __init__(self, sources, clock_domain, registered_enable=False):
        self.commit  = Signal()                        # sys: one-cycle pulse
        self.applied = Signal()                        # clock_domain: one-cycle pulse
        self.outputs = [_copy_of(s) for s in sources]  # clock_domain registers

        # # #

        self.strobe = PulseSynchronizer("sys", clock_domain)
        sync = getattr(self.sync, clock_domain)
        self.comb += self.strobe.i.eq(self.commit)
        take = self.strobe.o
        if registered_enable:
            take = Signal()
            sync += take.eq(self.strobe.o)
        sync += [
            If(take, *[o.eq(s) for o, s in zip(self.outputs, sources)]),
            self.applied.eq(take),
        ]


class Snapshot(LiteXModule):
    """Atomic copy of values that keep changing in ``clock_domain``, for ``sys`` to read (latch, then
    read).

    Pulse ``request`` in ``sys``; ``valid`` drops at once and rises when ``outputs`` hold a coherent
    copy of ``sources`` taken in ``clock_domain`` a few cycles after the request. ``outputs`` are the
    ``clock_domain`` latch itself: it changes only on a request and is settled long before ``valid``
    rises, so ``sys`` reads it while ``valid`` holds without a second copy. One request at a time: software waits
    for ``valid`` before it reads, and before it asks again.

    ``lag``: cycles of ``clock_domain`` the copy waits after the request arrives. A request written
    after another ``sys`` strobe (a commit that zeroes a counter) may arrive up to a cycle before it
    (two synchronizers, one metastable): with ``lag`` covering the cycles that strobe takes to act
    on ``sources``, plus that one, the copy always shows its effect.
    """
    def __init__(self, sources, clock_domain, lag=0):
        self.request = Signal()                           # sys: one-cycle pulse
        self.valid   = Signal()                           # sys
        self.outputs = [Signal(len(s)) for s in sources]  # clock_domain, still while `valid`

        # # #

        take, taken = Signal(), Signal()
        self.to_cd   = PulseSynchronizer("sys", clock_domain)
        self.to_sys  = PulseSynchronizer(clock_domain, "sys")
        sync = getattr(self.sync, clock_domain)
        self.comb += [
            self.to_cd.i.eq(self.request),
            self.to_sys.i.eq(taken),
        ]
        arrived = self.to_cd.o
        for k in range(lag):
            delayed = Signal(name=f"snapshot_lag{k}")
            sync += delayed.eq(arrived)
            arrived = delayed
        sync += [
            # The synchronizer's pulse is an XOR of two flip-flops: registered once more before it
            # enables every flip-flop of the latch.
            take.eq(arrived),
            If(take, *[o.eq(s) for o, s in zip(self.outputs, sources)]),
            # Signal back one cycle after the latch was written: it is stable by the time sys sees it.
            taken.eq(take),
        ]
        self.sync += [
            If(self.request,
                self.valid.eq(0),
            ).Elif(self.to_sys.o,
                self.valid.eq(1),
            )
        ]


class GrayToBinary(Module):
    """``binary`` = ``gray`` converted, ``latency`` (2) cycles later, in ``sys`` (rename the domain).
    Bit i is the XOR of the Gray code's bits i and above: as a chain, a LUT per bit, too long at
    ts's 140 MHz (it was the critical path); here two registered stages, the XOR of each 4-bit
    group's bits above it first, then each bit from its own group and that."""
    latency = 2

    def __init__(self, bits):
        self.gray   = Signal(bits)
        self.binary = Signal(bits)

        # # #

        groups = [(lo, min(lo + 4, bits)) for lo in range(0, bits, 4)]
        gray_d = Signal(bits)
        above = [Signal(name=f"above{k}") for k in range(len(groups))]   # XOR of the groups above group k
        out = []
        for k, (lo, hi) in enumerate(groups):
            for i in range(lo, hi):
                out.append(Reduce("XOR", [gray_d[j] for j in range(i, hi)] + [above[k]]))
        self.sync += [
            gray_d.eq(self.gray),
            *[above[k].eq(Reduce("XOR", [self.gray[j] for j in range(groups[k][1], bits)] or [0]))
              for k in range(len(groups))],
            self.binary.eq(Cat(*out)),
        ]


class RegisteredFullAsyncFIFO(Module, _FIFOInterface):
    """Migen's ``AsyncFIFOBuffered``, with ``writable`` a register.

    In Migen's AsyncFIFO, ``writable`` is a Gray-code compare of the synchronized read pointer,
    combinational, and it gates the block RAM's write enable and the write counter in the same
    cycle: at a fast write clock that compare plus the route to the RAM is the critical path. Here
    ``writable`` is decided one cycle ahead from registers: from the write pointer the cycle will
    end with (``+1`` is kept registered, so no adder sits on the path) and the read pointer as
    synchronized one cycle earlier. An older read pointer can only see the FIFO fuller than it is,
    so a write is never accepted without room. The cost: an entry the reader frees is seen by the
    writer one cycle later than in Migen's FIFO (as with a 3-stage synchronizer), so with the FIFO
    full a write can be refused for one more cycle.

    Clock domains ``write`` and ``read``, as Migen's FIFOs (``ClockDomainsRenamer`` to rename them).
    """
    def __init__(self, width, depth):
        _FIFOInterface.__init__(self, width, depth)

        # # #

        bits = log2_int(depth, True) + 1  # pointer width: one wrap bit above the address
        # Write side: binary and Gray pointers, each with its successor registered alongside.
        wbin, wbin_inc = Signal(bits), Signal(bits, reset=1)
        wgray, wgray_inc = Signal(bits), Signal(bits, reset=1)  # gray(1) == 1
        wbin_inc2 = Signal(bits)
        self.comb += wbin_inc2.eq(wbin_inc + 1)
        ce = Signal()
        consume_wdomain = Signal(bits)
        wgray.attr.add("no_retiming")

        def full(produce, consume):
            return ((produce[-1] != consume[-1]) & (produce[-2] != consume[-2]) &
                    (produce[:-2] == consume[:-2]))

        writable = Signal(reset=1)
        self.comb += [
            self.writable.eq(writable),
            ce.eq(writable & self.we),
        ]
        self.sync.write += [
            If(ce,
                wbin.eq(wbin_inc),
                wgray.eq(wgray_inc),
                wbin_inc.eq(wbin_inc2),
                wgray_inc.eq(wbin_inc2 ^ wbin_inc2[1:]),
            ),
            # Both outcomes compared in parallel; the write in flight only selects.
            writable.eq(~Mux(ce, full(wgray_inc, consume_wdomain), full(wgray, consume_wdomain))),
        ]

        # Half free (write side, two registers late, so never on a path that decides a write): at
        # most depth/2 entries in use as the write side last saw the read pointer. A writer that
        # overflowed waits for it before it resumes (capture's drop accounting: a gap, then a whole
        # half FIFO of records, not a record between every two drops).
        self.half_free = Signal(reset=1)
        self.submodules.consume_to_bin = to_bin = ClockDomainsRenamer("write")(GrayToBinary(bits))
        self.comb += to_bin.gray.eq(consume_wdomain)
        self.sync.write += self.half_free.eq(((wbin - to_bin.binary) & (2**bits - 1)) <= depth // 2)

        # Read side, as Migen's AsyncFIFO.
        consume = ClockDomainsRenamer("read")(GrayCounter(bits))
        self.submodules += consume
        consume.q.attr.add("no_retiming")
        produce_rdomain = Signal(bits)
        self.specials += [
            MultiReg(wgray, produce_rdomain, "read"),
            MultiReg(consume.q, consume_wdomain, "write"),
        ]
        fifo_readable = Signal()
        fifo_re = Signal()
        self.comb += [
            fifo_readable.eq(consume.q != produce_rdomain),
            consume.ce.eq(fifo_readable & fifo_re),
        ]

        storage = Memory(self.width, depth)
        self.specials += storage
        wrport = storage.get_port(write_capable=True, clock_domain="write")
        rdport = storage.get_port(clock_domain="read")
        self.specials += wrport, rdport
        self.comb += [
            wrport.adr.eq(wbin[:-1]),
            wrport.dat_w.eq(self.din),
            # Written whenever there is room, a write or not: the slot at the write pointer is not
            # the reader's until the pointer moves past it, and the RAMs' enable is then a register
            # (with `we` in it, it was a wide fan-out behind the stream's valid logic).
            wrport.we.eq(writable),
            rdport.adr.eq(consume.q_next_binary[:-1]),
        ]

        # Output register (as AsyncFIFOBuffered): the block RAM's clock-to-out is not on a path.
        self.sync.read += If(self.re | ~self.readable,
            self.dout.eq(rdport.dat_r),
            self.readable.eq(fifo_readable),
        )
        self.comb += fifo_re.eq(self.re | ~self.readable)


class StreamAsyncFIFO(stream._FIFOWrapper):
    """``stream.AsyncFIFO(layout, depth, buffered=True)`` built on RegisteredFullAsyncFIFO."""
    def __init__(self, layout, depth):
        assert depth >= 4
        stream._FIFOWrapper.__init__(self, RegisteredFullAsyncFIFO, layout, depth)
