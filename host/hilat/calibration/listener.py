"""Talking to the rig for a calibration: a session that enables some capture channels and collects
their records, and the channel a calibration source is wired to."""

import time

from hilat import protocol as p
from hilat.calibration.store import CalibrationError

# The default role of the input a loopback jumper or a 1PPS is wired to (the rig's channel table).
CALIBRATION_ROLE = "spare"


class Listener:
    """A session that enables some capture channels and collects their records."""

    def __init__(self, rig, ident):
        self.rig = rig
        self.ident = ident
        self.records = []
        self.overflows = []
        self.status = None

    def configure(self, flags_by_channel):
        n = self.ident.n_stimulus + self.ident.n_inputs
        self.rig.command(p.CaptureConfig([(flags_by_channel.get(ch, 0), 0) for ch in range(n)]))

    def pump(self):
        got = 0
        while self.rig.pending:
            got += self._ingest(self.rig.pending.pop(0))
        for frame in self.rig.frames():
            got += self._ingest(frame)
        return got

    def _ingest(self, frame):
        msg = frame.msg
        if isinstance(msg, p.Events):
            self.records.extend(msg.records)
            return len(msg.records)
        if isinstance(msg, p.Overflow):
            self.overflows.append((msg.timestamp, msg.channels))
        elif isinstance(msg, p.Status):
            self.status = msg
        return 0

    def drain(self, quiet=0.3):
        """Read until nothing arrived for ``quiet`` seconds."""
        until = time.monotonic() + quiet
        while time.monotonic() < until:
            if self.pump():
                until = time.monotonic() + quiet

    def until_tick(self, tick, idle_timeout=10.0, poll=0.25, progress=None):
        """Collect until the rig's counter has passed ``tick``."""
        last_progress = (time.monotonic(), self.rig.now())
        while True:
            self.pump()
            now_tick = self.rig.now()
            if now_tick >= tick:
                return
            if progress:
                progress(now_tick)
            if now_tick != last_progress[1]:
                last_progress = (time.monotonic(), now_tick)
            elif time.monotonic() - last_progress[0] > idle_timeout:
                raise CalibrationError("the rig's clock does not advance")
            end = time.monotonic() + poll
            while time.monotonic() < end:
                self.pump()

    def finish(self):
        """Disable capture, read what is still on its way, then the counters."""
        self.configure({})
        self.drain()
        self.status = self.rig.status()
        self.pump()

    def lost(self):
        dropped = sum(self.status.dropped) if self.status else 0
        return dropped + len(self.overflows)


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

