"""A capture as a user runs it, in a real terminal and under signals, against the simulated rig.

- the live view: a rich table on a terminal (tmux; the screen text is asserted), a plain line and
  the new-maximum lines otherwise;
- SIGUSR1: an interim summary and .hlog intervals, the capture goes on;
- Ctrl-C (SIGINT): the rig is stopped and everything captured is kept and summarised.
"""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from targets import sim


def _capture_cmd(url, out, *extra):
    return [sys.executable, "-m", "hilat", "capture", url, "--count", "10000000", "--no-calibration",
            "--out", str(out), "--mode", "periodic", "--period", "100us", "--label", "live", *extra]


def _wait(predicate, timeout, what, show=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}" + (f"; last seen:\n{show()}" if show else ""))


def _run_dir(out):
    dirs = list(out.iterdir()) if out.exists() else []
    return dirs[0] if dirs else None


def _edges_written(out, at_least):
    run = _run_dir(out)
    edges = run / "edges.bin" if run else None
    return edges is not None and edges.exists() and edges.stat().st_size > 16 + 10 * at_least


def test_sigusr1_writes_an_interim_summary_and_ctrl_c_keeps_everything(sim_dir, tmp_path):
    out = tmp_path / "runs"
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 3}) as rig:
        proc = subprocess.Popen(_capture_cmd(rig.url, out, "--hlog-interval", "2ms"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait(lambda: _edges_written(out, 2000), 120, "edges in edges.bin")
            run = _run_dir(out)
            proc.send_signal(signal.SIGUSR1)
            interim = _wait(lambda: (run / "summary.json").exists() and json.loads((run / "summary.json").read_text()),
                            30, "the interim summary")
            first = interim["runs"][0]
            assert first["problems"][0].startswith("interim summary #1 while capturing")
            assert json.loads((run / "meta.json").read_text())["interim"] is True
            interim_stimuli = first["stimuli"]
            assert interim_stimuli > 100 and first["subsets"]["all"]["stim_to_isr"]["count"] > 0
            hlog = (run / "hlog" / "capture.hlog").read_text()
            assert "Tag=stim_to_isr," in hlog
            assert proc.poll() is None, "SIGUSR1 must not stop the capture"
            _wait(lambda: _edges_written(out, 4 * interim_stimuli * 4), 120, "the capture to go on")
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted: stopping the rig and keeping what was captured" in stderr
    meta = json.loads((run / "meta.json").read_text())
    assert meta["interrupted"] is True and meta["interim"] is False and meta["error"] is None
    final = json.loads((run / "summary.json").read_text())["runs"][0]
    assert final["stimuli"] > interim_stimuli
    assert any("interrupted (Ctrl-C)" in p for p in final["problems"])
    assert not any(p.startswith("interim") for p in final["problems"])
    # Everything received is in the run: the summary's stimuli are those of edges.bin, and every
    # byte the rig sent before the stop is decoded without loss.
    from hilat.rundir.reader import load_run

    loaded = load_run(run)
    assert len(loaded.pairing.stim_mu) == final["stimuli"]
    assert meta["counters"]["decoder"]["lost"] == 0 and meta["counters"]["decoder"]["corrupt"] == 0
    assert meta["counters"]["rig_records_sent"] == meta["records"]
    assert "stim_to_isr" in stdout


def test_plain_progress_lines_when_not_a_terminal(sim_dir, tmp_path):
    out = tmp_path / "runs"
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 4}) as rig:
        cmd = _capture_cmd(rig.url, out)
        cmd[cmd.index("10000000")] = "1500"
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    progress = [line for line in lines if line.startswith("T: ")]
    assert progress, done.stderr
    assert "stimuli" in progress[-1] and "stim_to_isr Min" in progress[-1] and "lost 0" in progress[-1]
    maxima = [line for line in lines if line.startswith("new max stim_to_isr: ")]
    assert maxima
    # The last new maximum is the run's maximum, as the summary says.
    final = json.loads((_run_dir(out) / "summary.json").read_text())["runs"][0]
    assert f"({final['worst']['stim_to_isr']['mu']} ticks)" in maxima[-1]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is installed by scripts/setup.sh")
def test_live_view_in_a_real_terminal(sim_dir, tmp_path):
    """tmux gives the capture a real terminal; the screen must show the live table and update it."""
    out = tmp_path / "runs"
    session = f"hilat-live-{os.getpid()}"
    # A tmux server of its own: its window has the size asked for, whatever other servers run.
    tmux = ["tmux", "-L", session]
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 6}) as rig:
        cmd = " ".join(shlex.quote(c) for c in _capture_cmd(rig.url, out))
        # The terminal's own size, not one inherited from the environment.
        env = f"-u COLUMNS -u LINES PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))}"
        subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "200", "-y", "50",
                        f"env {env} {cmd}; sleep 30"], check=True)
        try:
            def screen():
                return subprocess.run([*tmux, "capture-pane", "-p", "-t", session], capture_output=True,
                                      text=True).stdout

            # The table is drawn before the first record arrives; wait for a first maximum too.
            first = _wait(lambda: (s := screen()) and "stim_to_task" in s and "p99.9" in s
                          and "new max stim_to_isr:" in s and s, 120, "the live table", show=screen)
            assert "hilat capture:" in first and "stimuli" in first and "lost:" in first
            later = _wait(lambda: (s := screen()) != first and "p99.9" in s and s, 30, "a refresh")
            count = [line for line in later.splitlines() if "hilat capture:" in line]
            assert count, later
            subprocess.run([*tmux, "send-keys", "-t", session, "C-c"], check=True)
            _wait(lambda: (r := _run_dir(out)) and (r / "summary.txt").exists(), 60, "the summary after Ctrl-C")
            assert json.loads((_run_dir(out) / "meta.json").read_text())["interrupted"] is True
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)
