"""hilat.link.session against a scripted rig: a START the rig refuses as late is tried again further
ahead; any other refusal is the caller's error at once."""

import time

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


def rig_losing_status_replies(lost, unasked=0):
    """A rig whose first ``lost`` STATUS replies never arrive (a host stalled while they came, over
    a byte stream that drops what it cannot deliver). ``unasked``: STATUS frames it sends before
    its reply to TIME_REQ, counting records_sent 1, 2, ... (older than any STATUS_REQ after it)."""
    asked = []

    def script(receive, send):
        seq = 0
        while (frames := receive()) is not None:
            for frame in frames:
                if isinstance(frame.msg, p.Hello):
                    send(identify().encode(seq))
                    seq += 1
                elif isinstance(frame.msg, p.TimeReq):
                    for k in range(unasked):
                        send(p.Status(k + 1, 0, 0, 0).encode(seq))
                        seq += 1
                    send(p.Time(frame.seq, 1000).encode(seq))
                    seq += 1
                elif isinstance(frame.msg, p.StatusReq):
                    asked.append(frame.seq)
                    if len(asked) > lost:
                        send(p.Status(100 + len(asked), 0, 0, 0).encode(seq))
                    seq += 1   # a reply lost on the way still took its seq
    rig = FakeRig(script)
    rig.asked = asked
    return rig


def test_a_lost_status_reply_is_asked_again_with_a_new_seq():
    with rig_losing_status_replies(lost=2) as rig:
        session = Session(rig.url).open()
        try:
            status = session.rig.status()
        finally:
            session.rig.close()
    # Asked three times, each a new command (a repeat would bring back a kept reply with an old seq).
    assert len(rig.asked) == 3 and len(set(rig.asked)) == 3
    assert status.records_sent == 103 and session.rig.resends == 2


def test_status_is_not_one_read_before_it_was_asked():
    with rig_losing_status_replies(lost=0, unasked=2) as rig:
        session = Session(rig.url).open()
        try:
            session.rig.now()   # the two STATUS frames before its reply wait in pending
            assert sum(isinstance(f.msg, p.Status) for f in session.rig.pending) == 2
            status = session.rig.status()
        finally:
            session.rig.close()
    assert status.records_sent == 101


def test_time_the_host_was_stopped_is_not_the_rigs_silence(monkeypatch):
    """A read that returns 3 s later (the process was stopped): the 1 s wait is not over."""
    with rig_losing_status_replies(lost=1) as rig:
        session = Session(rig.url).open()
        try:
            session.rig.command_timeout = 1.0
            read, calls = session.rig._read_frames, []

            def stalled_once():
                calls.append(1)
                if len(calls) == 1:
                    time.sleep(3.0)   # stands for SIGSTOP: no pass of the loop ran meanwhile
                return read()
            monkeypatch.setattr(session.rig, "_read_frames", stalled_once)
            status = session.rig.status()
        finally:
            session.rig.close()
    assert status.records_sent == 102
