"""No process hilat starts outlives it (docs/analysis.md, "What survives a failure").

- ``signals_stop()``: SIGTERM and SIGHUP raise ``Terminated`` (a ``KeyboardInterrupt``) in the main
  thread, as Ctrl-C does, so ``with`` blocks and ``finally`` clauses run: the simulator is stopped, a
  capture stops the rig and writes its run directory. A second such signal ends the process at once.
  A signal set to be ignored (``nohup``) stays ignored.
- ``child_options()``: Popen arguments for a child that must not outlive us: a process group of its
  own (``stop_child`` signals the whole group; Ctrl-C on a terminal reaches hilat only, which stops
  it), and on Linux PR_SET_PDEATHSIG, so that the kernel kills the child when hilat dies of anything,
  ``kill -9`` included.
"""

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the main thread is. A ``KeyboardInterrupt``, so that whatever
    handles Ctrl-C (a capture keeps what it captured) handles these the same way."""

    def __init__(self, signum):
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


# The stop signal received (SIGTERM, SIGHUP), once one came; exit_code() answers with it.
received = None


def exit_code(code):
    """The process's exit status: ``code``, or 128 + the stop signal's number after one came."""
    return 128 + received if received is not None else code


def _on_signal(signum, frame):
    global received
    if received is not None:
        # A second stop signal while shutting down: end now, as the signal's default would (children
        # go too, by their death signal).
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    received = signum
    raise Terminated(signum)


@contextlib.contextmanager
def signals_stop():
    """Within: SIGTERM and SIGHUP raise ``Terminated`` (the handlers before are restored on leaving).
    Signals already handled (by the caller) or ignored are left alone; outside the main thread,
    where Python cannot take signals, this does nothing."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) == signal.SIG_DFL:
                previous[sig] = signal.signal(sig, _on_signal)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def uninterrupted():
    """Within: a stop signal (Ctrl-C, SIGTERM, SIGHUP) is held until the block ends, then acts as it
    would have. A step that moves data from the link into the run (read, raw.bin, decode, edges.bin,
    pairing) is never cut in half: what one file has, the others have too. Ignored signals stay
    ignored; outside the main thread this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = []
    previous = {}
    for sig in (signal.SIGINT, *STOP_SIGNALS):
        handler = signal.getsignal(sig)
        if handler not in (signal.SIG_IGN, None):
            previous[sig] = signal.signal(sig, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            handler = previous[held[0]]
            if callable(handler):
                handler(held[0], None)
            else:   # SIG_DFL: the signal's own default, now that the handler is back
                os.kill(os.getpid(), held[0])


def _die_with_parent():
    """A preexec_fn: the child gets SIGKILL when the thread that started it ends (Linux; for a
    process, its main thread ends with it). None where that is not available, or off the main
    thread (a helper thread ending would kill the child early)."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl   # looked up before the fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec():
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:   # the parent died before the call: nobody would stop us
            os._exit(1)

    return preexec


def child_options():
    """Keyword arguments of ``subprocess.Popen`` for a child that does not outlive us."""
    options = {"process_group": 0}
    preexec = _die_with_parent()
    if preexec is not None:
        options["preexec_fn"] = preexec
    return options


def stop_child(process, timeout=5.0):
    """Stop a child started with ``child_options`` and everything in its process group: SIGTERM,
    then SIGKILL after ``timeout`` seconds; reaped before returning."""
    if process.returncode is None:
        # The leader is not reaped yet (at worst a zombie), so its group id is still ours to signal.
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()


def _signal_group(process, sig):
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):   # not a group leader (started otherwise): the child alone
        process.send_signal(sig)
