"""Timebase: the rig's free-running high-resolution tick counter.

Every timestamp the rig produces is a value of this counter. It runs in its own clock domain
(``ts`` by default), which may be faster or slower than ``sys`` and unrelated to it. Software reads
it atomically from ``sys``: write ``latch``, wait for ``status.valid``, read ``value``.
"""

from litex.gen import LiteXModule
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage
from migen import *

from gateware.cdc import Snapshot


class Timebase(LiteXModule):
    """Free-running ``width``-bit counter in ``clock_domain``, one tick per clock cycle.

    The carry is pipelined at ``carry_split`` bits so only a ``carry_split``-bit adder sits on the
    critical path: the low part's "will be all ones" flag is registered one cycle ahead, so the high
    part increments in the very cycle the low part wraps and the value is always coherent.

    ``reset_value`` presets the counter (tests use it to reach a wrap quickly).
    """
    def __init__(self, clock_domain="ts", width=64, carry_split=32, reset_value=0, with_csr=True):
        assert 0 < carry_split <= width
        self.clock_domain = clock_domain
        self.width        = width
        self.carry_split  = carry_split
        self.reset_value  = reset_value % 2**width

        # Current tick count, in `clock_domain`: during cycle n it reads n (+ reset_value).
        self.ts = Signal(width)

        # # #

        self.comb += self.ts.eq(self.lagging(0))

        if with_csr:
            self.add_csr()

    def lagging(self, delay):
        """Return a counter that always reads ``ts - delay`` (mod 2**width).

        A second counter preset ``delay`` behind is cheaper and faster than a wide subtractor on
        every event path, and it is exact because both counters leave reset in the same cycle.
        """
        width, split = self.width, self.carry_split
        low_mask  = 2**split - 1
        preset    = (self.reset_value - delay) % 2**width
        low       = Signal(split, reset=preset & low_mask)
        value     = Signal(width)
        sync      = getattr(self.sync, self.clock_domain)
        if split == width:
            sync += low.eq(low + 1)
            self.comb += value.eq(low)
            return value
        high      = Signal(width - split, reset=preset >> split)
        low_full  = Signal(reset=int((preset & low_mask) == low_mask))  # low == all ones now
        sync += [
            low.eq(low + 1),
            low_full.eq(low == low_mask - 1),
            If(low_full, high.eq(high + 1)),
        ]
        self.comb += value.eq(Cat(low, high))
        return value

    def add_csr(self):
        """Atomic read from ``sys``: ``latch``, wait for ``status.valid``, read ``value``."""
        self._latch = CSRStorage(fields=[
            CSRField("latch", size=1, pulse=True, description=
                "Write ``1`` to copy the current tick count (ticks of the ``ts`` clock) into "
                "``value``; ``status.valid`` rises when the copy has crossed into ``sys``."),
        ], description="Latch control of the tick counter (write-1 strobe).")
        self._status = CSRStatus(fields=[
            CSRField("valid", size=1, description=
                "``1`` when ``value`` holds a complete, coherent copy taken after the last latch."),
        ], description="Latch status (flag).")
        self._value = CSRStatus(self.width, description=
            "Tick count (in ticks of the ``ts`` clock, one tick per period) captured by the last "
            "``latch``; it names a cycle between the latch write and ``status.valid`` rising.")
        self.snapshot = Snapshot([self.ts], self.clock_domain)
        self.comb += [
            self.snapshot.request.eq(self._latch.fields.latch),
            self._status.fields.valid.eq(self.snapshot.valid),
            self._value.status.eq(self.snapshot.outputs[0]),
        ]
