"""hilat.link.session against a scripted rig: a START the rig refuses as late is tried again further
ahead; any other refusal is the caller's error at once."""

import pytest
from fake_rig import FakeRig, identify
from hilat.link import protocol as p
from hilat.link.rig import RigError
from hilat.link.session import START_ATTEMPTS, Session, start_margin


def rig_refusing_starts(late, code=p.ACK_LATE):
    """A rig whose counter stands at 1000 + 10 per TIME asked; it refuses the first ``late``
    STARTs with ``code`` and arms the next. ``starts`` keeps every START's tick."""
    starts = []

    def script(receive, send):
        seq, now = 0, 1000
        while (frames := receive()) is not None:
            for frame in frames:
                msg = frame.msg
                if isinstance(msg, p.Hello):
                    send(identify().encode(seq))
                elif isinstance(msg, p.TimeReq):
                    send(p.Time(frame.seq, now).encode(seq))
                    now += 10
                elif isinstance(msg, p.Start):
                    starts.append(msg.start)
                    refused = len(starts) <= late
                    send(p.Ack(frame.seq, code if refused else p.ACK_OK, "late" if refused else "").encode(seq))
                seq += 1
    rig = FakeRig(script)
    rig.starts = starts
    return rig


def test_a_start_refused_as_late_is_tried_further_ahead():
    with rig_refusing_starts(late=2) as rig:
        session = Session(rig.url).open()
        try:
            at = session.start(0b01)
        finally:
            session.rig.close()
    margin = start_margin(identify())
    # Each attempt asks the time again (1000, 1010, 1020) and goes 4 times further ahead.
    assert rig.starts == [1000 + margin, 1010 + 4 * margin, 1020 + 16 * margin]
    assert at == rig.starts[-1]


def test_a_start_late_every_time_gives_up_with_the_rigs_reason():
    with rig_refusing_starts(late=START_ATTEMPTS) as rig:
        session = Session(rig.url).open()
        try:
            with pytest.raises(RigError, match="refused START: late") as e:
                session.start(0b01)
        finally:
            session.rig.close()
    assert e.value.code == p.ACK_LATE and len(rig.starts) == START_ATTEMPTS


def test_another_refusal_is_not_retried():
    with rig_refusing_starts(late=1, code=p.ACK_REFUSED) as rig:
        session = Session(rig.url).open()
        try:
            with pytest.raises(RigError) as e:
                session.start(0b01)
        finally:
            session.rig.close()
    assert e.value.code == p.ACK_REFUSED and len(rig.starts) == 1
