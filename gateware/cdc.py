"""Clock-domain-crossing helpers shared by the hilat timing cores.

Both helpers move *bundles* of bits coherently between ``sys`` (where the CSRs live) and a core's
own clock domain (``ts``), at any frequency ratio. They follow the "data + synchronized strobe"
pattern: the data is held still by its owner while a single-bit strobe crosses through a 2-FF
synchronizer, so the receiving side samples it only once it has settled. MultiReg is used only for
that strobe (a toggle) and for single quasi-static status bits.
"""

from litex.gen import LiteXModule
from migen import *
from migen.genlib.cdc import PulseSynchronizer


def _copy_of(signal):
    return Signal(len(signal), reset=getattr(signal, "reset", 0))


class ConfigCommit(LiteXModule):
    """Copy quasi-static ``sys`` configuration into ``clock_domain`` on a commit strobe.

    ``sources`` are ``sys`` signals (typically CSRStorage fields) that software writes *before*
    pulsing ``commit``; they must not change until ``applied``. ``outputs`` are the copies in
    ``clock_domain``; ``applied`` pulses there the cycle after they took the new values.
    """
    def __init__(self, sources, clock_domain):
        self.commit  = Signal()                        # sys: one-cycle pulse
        self.applied = Signal()                        # clock_domain: one-cycle pulse
        self.outputs = [_copy_of(s) for s in sources]  # clock_domain registers

        # # #

        self.strobe = PulseSynchronizer("sys", clock_domain)
        sync = getattr(self.sync, clock_domain)
        self.comb += self.strobe.i.eq(self.commit)
        sync += [
            If(self.strobe.o, *[o.eq(s) for o, s in zip(self.outputs, sources)]),
            self.applied.eq(self.strobe.o),
        ]


class Snapshot(LiteXModule):
    """Atomic copy into ``sys`` of values that keep changing in ``clock_domain`` (latch, then read).

    Pulse ``request`` in ``sys``; ``valid`` drops at once and rises when ``outputs`` hold a coherent
    copy of ``sources`` taken in ``clock_domain`` a few cycles after the request. One request at a
    time: software waits for ``valid`` before it asks again.
    """
    def __init__(self, sources, clock_domain):
        self.request = Signal()                           # sys: one-cycle pulse
        self.valid   = Signal()                           # sys
        self.outputs = [Signal(len(s)) for s in sources]  # sys

        # # #

        held = [Signal(len(s)) for s in sources]
        taken = Signal()
        self.to_cd   = PulseSynchronizer("sys", clock_domain)
        self.to_sys  = PulseSynchronizer(clock_domain, "sys")
        sync = getattr(self.sync, clock_domain)
        self.comb += [
            self.to_cd.i.eq(self.request),
            self.to_sys.i.eq(taken),
        ]
        sync += [
            If(self.to_cd.o, *[h.eq(s) for h, s in zip(held, sources)]),
            # Signal back one cycle after `held` was written: it is stable by the time sys sees it.
            taken.eq(self.to_cd.o),
        ]
        self.sync += [
            If(self.request,
                self.valid.eq(0),
            ).Elif(self.to_sys.o,
                *[o.eq(h) for o, h in zip(self.outputs, held)],
                self.valid.eq(1),
            )
        ]
