"""The stream rig (tests/host/stream_rig.py, a fake rig in its own process) against `hilat capture`:
every latency of its pattern is found exactly and nothing is lost, after another host left it
mid-stream; and its --rate ceiling keeps a stream (and a capture) going for seconds."""

import socket
import subprocess
import time

import numpy as np
from hilat.link import protocol as p
from hilat.link.rig import Rig
from hilat.link.transport import Transport
from hilat.rundir.reader import load_run
from stream_rig import DEFAULT_PERIOD, StreamRig, capture_command, latencies, pattern_records, records_for, stimuli_for


def leave_mid_stream(url):
    """A host that starts a stream and disconnects with data unread."""
    host, port = url.removeprefix("socket://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(p.Hello().encode(0) + p.Start(channels=1).encode(1))
        received = 0
        while received < 200_000:
            received += len(s.recv(65536))


def check_run(run_dir, stimuli):
    """The run holds every stimulus with exactly the pattern's latencies, and lost nothing."""
    run = load_run(run_dir)
    pairing = run.pairing
    isr, task = latencies(stimuli)
    assert len(pairing.stim_mu) == stimuli
    np.testing.assert_array_equal(pairing.stim_mu - pairing.stim_mu[0], np.arange(stimuli) * DEFAULT_PERIOD)
    np.testing.assert_array_equal(pairing.isr_latency, isr)
    np.testing.assert_array_equal(pairing.task_latency, task)
    assert (task == -1).sum() == stimuli // 96
    assert run.losses == {} and run.problems == []
    counters = run.meta["counters"]
    assert run.meta["records"] == records_for(stimuli) == counters["rig_records_sent"]
    assert counters["decoder"]["frames_ok"] == counters["rig_frames_sent"]  # the rig's last STATUS included


def test_capture_finds_the_exact_pattern_and_loses_nothing(tmp_path):
    stimuli = 20_000
    with StreamRig() as rig:
        leave_mid_stream(rig.url)
        result = subprocess.run(capture_command(rig.url, stimuli, tmp_path), capture_output=True, text=True,
                                timeout=120)
    assert result.returncode == 0, result.stderr
    (run_dir,) = tmp_path.iterdir()
    check_run(run_dir, stimuli)


def test_rate_limited_stream_is_still_running_after_a_second():
    limit = 10_000   # 59,479 records: ~3 s at 20,000 records/s, a few ms without the ceiling
    with StreamRig(stimuli=limit, rate=20_000) as rig, Transport(rig.url) as transport:
        rig_session = Rig(transport)
        rig_session.hello()
        start = rig_session.now() + 50_000
        rig_session.command(p.Start(channels=1, at_time=1, start=start))
        time.sleep(1.0)
        running = rig_session.status()
        rig_session.command(p.Stop(channels=1))
        stopped = rig_session.status()
        before, after = rig_session.now(), (time.sleep(0.05), rig_session.now())[1]
        # Records that arrived while the commands waited for their replies, kept in order as arrays.
        received = [tuple(r) for part in rig_session.pending_records
                    for r in zip(*(column.tolist() for column in part[:3]))]
    assert running.stim_status[0] == p.STIM_RUNNING
    assert 0 < running.records_sent < records_for(limit)
    assert stopped.stim_status[0] == 0
    # What was sent up to STOP is the pattern from the START tick, whole stimuli, nothing lost.
    assert len(received) == stopped.records_sent
    assert received == pattern_records(start, 0, limit)[:len(received)]
    assert records_for(stimuli_for(len(received))) == len(received) and rig_session.decoder.lost == 0
    # Stopped, the rig's clock moves on in real time from the last record.
    assert received[-1][0] < before < after


def test_capture_of_a_rate_limited_rig_outlasts_a_second(tmp_path):
    # The shape of a test that signals a capture under way (Ctrl-C, SIGUSR1).
    stimuli = 6_000  # 35,687 records: ~1.8 s at 20,000 records/s
    with StreamRig(rate=20_000) as rig:
        capture = subprocess.Popen(capture_command(rig.url, stimuli, tmp_path), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        time.sleep(1.0)
        still_capturing = capture.poll() is None
        output, _ = capture.communicate(timeout=120)
    assert still_capturing, output
    assert capture.returncode == 0, output
    (run_dir,) = tmp_path.iterdir()
    check_run(run_dir, stimuli)
