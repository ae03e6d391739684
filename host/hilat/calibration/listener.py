"""What a calibration collects from its ``hilat.link.session.Session`` (the records of the channels it
enabled), and the channel a calibration source is wired to."""

import numpy as np

from hilat.calibration.store import CalibrationError
from hilat.link.batch import join_records

# The default role of the input a loopback jumper or a 1PPS is wired to (the rig's channel table).
CALIBRATION_ROLE = "spare"


class RecordCollector:
    """The consumer of a calibration's ``Session``: keeps its records (a calibration is bounded by
    its pulse count or duration) and counts the rises of one channel as they arrive."""

    def __init__(self, count_channel=None):
        self.parts = []
        self.count_channel = count_channel
        self.rises = 0
        self.last_rise = None

    def __call__(self, ticks, masks, levels, fractions):
        self.parts.append((ticks, masks, levels, fractions))
        if self.count_channel is not None:
            rising = np.flatnonzero((masks >> self.count_channel) & (levels >> self.count_channel) & 1)
            if len(rising):
                self.rises += len(rising)
                self.last_rise = int(ticks[rising[-1]])

    @property
    def records(self):
        """(ticks, channel masks, level masks, fractions) arrays of everything received."""
        return join_records(self.parts)


def end_collection(session, collector):
    """Disable capture, read what is still on its way, then the counters; returns the edges the
    rig dropped (FIFO full) during the session."""
    session.configure_capture({})
    session.drain(collector)
    status = session.finish(collector)
    return (sum(status.dropped) if status else 0) + session.overflows


def role_channel(ident, role):
    """The first channel of this rig whose default role is ``role`` (its IDENTIFY table)."""
    for number, (_name, channel_role) in enumerate(ident.channels):
        if channel_role == role:
            return number
    table = ", ".join(f"{n} {name} ({r or '-'})" for n, (name, r) in enumerate(ident.channels))
    raise CalibrationError(f"this rig has no channel with the role '{role}' ({table}): name the channel")


def check_input(ident, channel, what):
    first, last = ident.n_stimulus, ident.n_stimulus + ident.n_inputs - 1
    if not first <= channel <= last:
        raise CalibrationError(f"{what}: channel {channel} is not a capture input of this rig (inputs are "
                               f"channels {first}..{last})")



def input_channel(ident, ref):
    """A channel by name, number or default role (spare, isr, ...) of this rig's IDENTIFY table."""
    ref = str(ref)
    names = [name for name, _role in ident.channels]
    if ref in names:
        return names.index(ref)
    if ref.isdigit() and int(ref) < len(names):
        return int(ref)
    if any(role == ref for _name, role in ident.channels):
        return role_channel(ident, ref)
    raise CalibrationError(f"no channel {ref!r} on this rig (channels: {', '.join(names)}, 0..{len(names) - 1}, "
                           "or a role: " + ", ".join(sorted({r for _n, r in ident.channels if r})) + ")")
