"""hilat.shutdown: stop signals as a clean stop, children that do not outlive us (no simulator needed;
the simulator's own cases are in tests/e2e/test_crash_safety.py)."""

import os
import signal
import subprocess
import sys
import time

import pytest
from hilat import shutdown


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(shutdown, "received", None)


@pytest.mark.parametrize("sig", shutdown.STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_raises_terminated_and_the_handlers_come_back(sig):
    before = signal.getsignal(sig)
    with pytest.raises(shutdown.Terminated) as caught:
        with shutdown.signals_stop():
            os.kill(os.getpid(), sig)
            time.sleep(5)   # the handler runs at once; reaching the end of this is a failure
    assert isinstance(caught.value, KeyboardInterrupt) and caught.value.signum == sig
    assert shutdown.received == sig and shutdown.exit_code(0) == 128 + sig
    assert signal.getsignal(sig) == before


@pytest.mark.parametrize("sig", (signal.SIGINT, signal.SIGTERM), ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_waits_for_the_end_of_an_uninterrupted_step(sig):
    """Ctrl-C (or SIGTERM under signals_stop) in the middle of a step: the step ends, then the stop
    acts as it would have, and the handlers are those of before."""
    before = signal.getsignal(sig)
    done = []
    with pytest.raises(KeyboardInterrupt) as caught:
        with shutdown.signals_stop():
            with shutdown.uninterrupted():
                os.kill(os.getpid(), sig)
                time.sleep(0.01)
                done.append("the step's second half")
            done.append("after the step")   # never: the held signal acts when the step ends
    assert done == ["the step's second half"]
    assert isinstance(caught.value, shutdown.Terminated) == (sig != signal.SIGINT)
    assert signal.getsignal(sig) == before


def test_an_ignored_signal_stays_ignored():
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)   # as nohup leaves it
    try:
        with shutdown.signals_stop():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
        assert shutdown.received is None
    finally:
        signal.signal(signal.SIGHUP, previous)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_stop_child_stops_its_whole_process_group():
    # A child that starts a grandchild of its own (as make starts the compilers) and prints its pid.
    child = subprocess.Popen(["bash", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE, text=True,
                             **shutdown.child_options())
    try:
        grandchild = int(child.stdout.readline())
        assert os.getpgid(grandchild) == child.pid
        shutdown.stop_child(child, timeout=5)
        assert child.returncode is not None
        deadline = time.monotonic() + 5
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(grandchild)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=5)
        child.stdout.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_dies_with_its_parent_killed_outright():
    """kill -9 of a process that started a child with child_options: the kernel kills the child."""
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                               "from hilat import shutdown\n"
                               "c = subprocess.Popen(['sleep', '300'], **shutdown.child_options())\n"
                               "print(c.pid, flush=True)\n"
                               "time.sleep(300)\n"], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=5)
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
        parent.stdout.close()
