"""What survives a failure (docs/analysis.md, "What survives a failure"), against the simulated rig:

- no orphans: `hilat sim` stopped by SIGTERM, SIGHUP, SIGINT or even SIGKILL leaves no process behind
  (the simulator is in a process group of its own, stopped on the way out, and dies with its parent);
- `kill -9` of a capture mid-run: `hilat report` reads the run from raw.bin and says it was cut short;
- a full disk or a file size limit while capturing: a one-line error, a nonzero exit, what was written
  readable.
"""

import os
import select
import signal
import subprocess
import sys
import time

import pytest

HILAT = [sys.executable, "-m", "hilat"]


# ---- processes, from /proc --------------------------------------------------------------------------------

def _processes():
    """{pid: (ppid, pgid, state, start time)} of every process."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:   # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(name)] = (int(fields[1]), int(fields[2]), fields[0], int(fields[19]))
    return out


def _descendants(root):
    """{pid: (pgid, start time)} of every process below ``root``, and root's."""
    procs = _processes()
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in procs and pid not in found:
            found[pid] = (procs[pid][1], procs[pid][3])
            todo += [child for child, info in procs.items() if info[0] == pid]
    return found


def _alive(tree):
    """The processes of ``tree`` (``_descendants``) still running (zombies are dead: they wait for
    a parent to reap them), and any running process in one of its process groups."""
    groups = {pgid for pgid, _start in tree.values()}
    return sorted(pid for pid, (_ppid, pgid, state, start) in _processes().items()
                  if state != "Z" and ((pid in tree and tree[pid][1] == start) or pgid in groups))


def _kill_all(tree):
    procs = _processes()
    for pid, (_pgid, start) in tree.items():
        if pid in procs and procs[pid][3] == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _read_line(proc, timeout, what):
    """The first line of ``proc``'s stdout, within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if ready:
            line = proc.stdout.readline()
            if line:
                return line.strip()
        if proc.poll() is not None:
            break
    raise AssertionError(f"no {what} within {timeout} s (exit status {proc.poll()}): {proc.stderr.read()[-2000:]}")


def _until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


# ---- no orphans ---------------------------------------------------------------------------------------------

# The exit status of `hilat sim` after each signal: 128 + its number after SIGTERM/SIGHUP (a clean
# stop) or SIGINT (Ctrl-C), killed by SIGKILL (the simulator then dies by its death signal).
EXIT = {signal.SIGTERM: 128 + signal.SIGTERM, signal.SIGHUP: 128 + signal.SIGHUP, signal.SIGINT: 128 + signal.SIGINT,
        signal.SIGKILL: -signal.SIGKILL}


@pytest.mark.parametrize("sig", list(EXIT), ids=lambda s: signal.Signals(s).name)
def test_hilat_sim_leaves_no_process_behind(sim_dir, sig):
    # A session of its own: the process groups below it are all hilat's (the signal goes to hilat alone).
    proc = subprocess.Popen([*HILAT, "sim"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    tree = {}
    try:
        url = _read_line(proc, 120, "URL")
        assert url.startswith("socket://127.0.0.1:")
        tree = _descendants(proc.pid)
        assert len(tree) >= 2, "the simulator should run below hilat"
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == EXIT[sig], proc.stderr.read()[-2000:]
        _until(lambda: not _alive(tree), 10, f"every process hilat started to end (left: {_alive(tree)})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        _kill_all(tree)
        proc.stdout.close()
        proc.stderr.close()
