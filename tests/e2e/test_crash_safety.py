"""What survives a failure (docs/analysis.md, "What survives a failure"), against the simulated rig:

- no orphans: `hilat sim` stopped by SIGTERM, SIGHUP, SIGINT or even SIGKILL leaves no process behind
  (the simulator is in a process group of its own, stopped on the way out, and dies with its parent);
- `kill -9` of a capture mid-run: `hilat report` reads the run from raw.bin and says it was cut short;
- a full disk or a file size limit while capturing: a one-line error, a nonzero exit, what was written
  readable.
"""

import errno
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time

import pytest

from targets import sim

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


# A program of the API's: the simulator runs in a `with hilat.simulate()` block that the signal
# interrupts; the program does not catch the exception (SIGTERM, SIGHUP: hilat.shutdown.Terminated,
# exit status 1 with its traceback; SIGINT: KeyboardInterrupt, Python ends by SIGINT).
SIMULATE = """
import sys, time
import hilat
with hilat.simulate(workdir=sys.argv[1]) as sim:
    print(sim.url, flush=True)
    time.sleep(300)
"""
EXIT_SIMULATE = {signal.SIGTERM: 1, signal.SIGHUP: 1, signal.SIGINT: -signal.SIGINT,
                 signal.SIGKILL: -signal.SIGKILL}


@pytest.mark.parametrize("command", ["hilat sim", "hilat.simulate()"])
@pytest.mark.parametrize("sig", list(EXIT), ids=lambda s: signal.Signals(s).name)
def test_no_process_is_left_behind(sim_dir, tmp_path, command, sig):
    argv = [*HILAT, "sim"] if command == "hilat sim" else [sys.executable, "-c", SIMULATE, str(tmp_path)]
    expected = (EXIT if command == "hilat sim" else EXIT_SIMULATE)[sig]
    # A session of its own: the process groups below it are all hilat's (the signal goes to hilat alone).
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    tree = {}
    try:
        url = _read_line(proc, 120, "URL")
        assert url.startswith("socket://127.0.0.1:")
        tree = _descendants(proc.pid)
        assert len(tree) >= 2, "the simulator should run below hilat"
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == expected, proc.stderr.read()[-2000:]
        _until(lambda: not _alive(tree), 10, f"every process hilat started to end (left: {_alive(tree)})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        _kill_all(tree)
        proc.stdout.close()
        proc.stderr.close()


# ---- a capture that does not finish -------------------------------------------------------------------------

def _capture_cmd(url, out, period="100us"):
    return [*HILAT, "capture", url, "--count", "10000000", "--no-calibration", "--out", str(out), "--mode",
            "periodic", "--period", period, "--label", "crash", "--no-progress"]


def _run_dir(out):
    dirs = sorted(out.iterdir()) if out.exists() else []
    return dirs[0] if len(dirs) == 1 else None


def _report(run, *args):
    done = subprocess.run([*HILAT, "report", str(run), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def _stimuli_in_edges_bin(run):
    """Stimulus rises (channel 0) in edges.bin, as the killed capture left it."""
    from hilat.rundir.layout import EDGE_DTYPE, EDGES_MAGIC
    from hilat.rundir.stores import iter_store

    return sum(int(((items["channel"] == 0) & (items["level"] == 1)).sum())
               for items in iter_store(run / "edges.bin", EDGES_MAGIC, EDGE_DTYPE, 1 << 20))


def test_kill_9_mid_capture_leaves_a_run_that_reports(sim_dir, tmp_path):
    out = tmp_path / "runs"
    # A DUT that answers every stimulus: a miss in the report would be a window the kill cut.
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 5, "miss_per1024": 0}) as rig:
        proc = subprocess.Popen(_capture_cmd(rig.url, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        try:
            # Some records in (raw.bin is written as they arrive), edges.bin flushed at least once.
            _until(lambda: (run := _run_dir(out)) and (run / "raw.bin").exists()
                   and (run / "raw.bin").stat().st_size > 8000 and (run / "edges.bin").stat().st_size > 1000,
                   120, "records in raw.bin")
            proc.kill()
            assert proc.wait(timeout=10) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)
    run = _run_dir(out)
    meta = json.loads((run / "meta.json").read_text())
    assert meta["interim"] is True, "meta.json is the one written as the stimuli started"
    text = _report(run)
    assert "stimulus -> ISR entry (ns), all samples" in text
    assert "the capture was cut short" in text
    doc = json.loads(_report(run, "--format", "json"))["runs"][0]
    assert doc["edges_source"] == "raw.bin"
    assert any(p.startswith("the capture was cut short") for p in doc["problems"])
    # Every stimulus edges.bin had (flushed up to a second before the kill) is in the report, less the
    # last one at most (left out with the edges after it), each with its responses.
    stimuli = _stimuli_in_edges_bin(run)
    assert stimuli > 50 and doc["stimuli"] >= stimuli - 1
    for kind in ("stim_to_isr", "stim_to_task"):
        row = doc["subsets"]["all"][kind]
        assert row["starts"] == doc["stimuli"] and row["misses"] == 0, (kind, row)
    assert doc["losses"] == {}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
def test_sigterm_and_sighup_stop_a_capture_as_ctrl_c_does(sim_dir, tmp_path, sig):
    """The rig stopped, everything captured written as at a normal end, the signal named; exit 128 + it."""
    out = tmp_path / "runs"
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 6, "miss_per1024": 0}) as rig:
        proc = subprocess.Popen(_capture_cmd(rig.url, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _until(lambda: (run := _run_dir(out)) and (run / "raw.bin").exists()
                   and (run / "raw.bin").stat().st_size > 4000, 120, "records in raw.bin")
            proc.send_signal(sig)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, stderr
    assert f"interrupted ({name}): stopping the rig and keeping what was captured" in stderr
    run = _run_dir(out)
    meta = json.loads((run / "meta.json").read_text())
    assert meta["interrupted"] is True and meta["interim"] is False and meta["stopped_by"] == name
    assert meta["counters"]["rig_records_sent"] == meta["records"] > 0
    summary = json.loads((run / "summary.json").read_text())["runs"][0]
    assert f"the capture was interrupted ({name}): the figures cover what was captured" in summary["problems"]
    assert "stim_to_isr" in stdout


def _fill_up(capture_cmd, preexec=None, timeout=120):
    """Run a capture until its disk fills up; its CompletedProcess."""
    done = subprocess.run(capture_cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)
    return done


def _check_disk_full(done, out, reason):
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("hilat: cannot write")]
    assert len(errors) == 1 and reason in errors[0], done.stderr
    run = _run_dir(out)
    # What was written is readable: raw.bin decodes, the report reads the run and says what happened.
    from hilat.rundir.replay import read_raw

    ticks, _chans, _levels, _counters = read_raw(run / "raw.bin")
    assert len(ticks) > 100
    text = _report(run)
    assert "stimulus -> ISR entry (ns), all samples" in text
    assert "the capture was cut short" in text or f"cannot write the run directory {run}: {reason}" in text
    return run


def test_a_file_size_limit_while_capturing(sim_dir, tmp_path):
    """RLIMIT_FSIZE (SIGXFSZ ignored, so that a write past it fails with EFBIG): no run file may grow
    past 32 KiB; the capture stops with one line of error, what fitted stays readable."""
    out = tmp_path / "runs"

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (32 << 10, 32 << 10))

    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 7}) as rig:
        done = _fill_up(_capture_cmd(rig.url, out, period="30us"), preexec=limit)
    run = _check_disk_full(done, out, os.strerror(errno.EFBIG))
    assert max(f.stat().st_size for f in run.rglob("*") if f.is_file()) <= 32 << 10


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (root with CAP_SYS_ADMIN, as in CI), unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True,
                             text=True, timeout=30)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30)


def test_a_full_disk_while_capturing(sim_dir, tmp_path, small_disk):
    out = small_disk / "runs"
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 8}) as rig:
        done = _fill_up(_capture_cmd(rig.url, out, period="30us"))
    _check_disk_full(done, out, os.strerror(errno.ENOSPC))
