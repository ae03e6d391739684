"""The host stalls mid-run, the rig stops answering mid-run: whatever was lost is counted and is a
gap, nothing wrong is reported, and the run up to the failure is kept."""

import json
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from hilat.rundir.reader import load_run

from targets import sim

HILAT = [sys.executable, "-m", "hilat"]
PERIOD = 4000
COUNT = 2500     # about 10 M ticks: several seconds of the simulator


def _run_dir(out):
    dirs = sorted(out.iterdir()) if out.exists() else []
    return dirs[0] if len(dirs) == 1 else None


class _SerialBridge:
    """The link of a board: a UART without flow control into the host's buffer. Bytes from the rig
    are forwarded to the host's socket, except while ``losing`` is set, when they are dropped as a
    stalled host's full buffer drops them (the simulator waits for a TCP client that does not read,
    a board's UART does not wait). Commands pass through."""

    def __init__(self, rig_url):
        host, _, port = rig_url[len("socket://"):].rpartition(":")
        self.rig = socket.create_connection((host, int(port)), timeout=10)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.listener.getsockname()[1]}"
        self.losing = threading.Event()
        self.lost_bytes = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.listener.settimeout(60)
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        with client, self.rig:
            while not self.stop.is_set():
                ready, _, _ = select.select([client, self.rig], [], [], 0.1)
                for sock in ready:
                    data = sock.recv(1 << 16)
                    if not data:
                        self.closed_by = "host" if sock is client else "rig"
                        return
                    if sock is client:
                        self.rig.sendall(data)
                    elif self.losing.is_set():
                        self.lost_bytes += len(data)
                    else:
                        client.sendall(data)

    def close(self):
        self.stop.set()
        self.thread.join(timeout=10)
        self.listener.close()


def test_host_stalled_mid_run(sim_dir, tmp_path):
    """SIGSTOP of `hilat capture` for 3 s, then SIGCONT, while the link drops what the stalled host
    could not take: the frames lost are counted, their span is a gap, and every judged stimulus
    equals the DUT's log."""
    out, dut_log = tmp_path / "runs", tmp_path / "injected.csv"
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 13}, dut_log=dut_log) as rig:
        bridge = _SerialBridge(rig.url)
        proc = subprocess.Popen([*HILAT, "capture", bridge.url, "--count", str(COUNT), "--mode", "periodic",
                                 "--period", str(PERIOD), "--jitter", "0", "--no-calibration", "--out", str(out),
                                 "--label", "stall", "--no-progress"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while not ((run := _run_dir(out)) and (run / "raw.bin").exists()
                       and (run / "raw.bin").stat().st_size > 20_000):
                assert proc.poll() is None and time.monotonic() < deadline, "the capture did not start"
                time.sleep(0.05)
            proc.send_signal(signal.SIGSTOP)
            bridge.losing.set()
            time.sleep(3)
            bridge.losing.clear()
            proc.send_signal(signal.SIGCONT)
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
            bridge.close()
    assert bridge.lost_bytes > 1000, "the stall must lose bytes on the link"
    assert proc.returncode == 0, err
    run = load_run(_run_dir(out))
    meta = run.meta
    injected = sim.read_dut_log(dut_log)
    result = sim.compare_with_dut_log(run, injected, PERIOD)
    assert result["wrong"] == 0
    decoder = meta["counters"]["decoder"]
    dropped = sum(meta["counters"]["gateware_dropped_per_channel"])
    lost = decoder["lost"] + decoder["corrupt"] + dropped
    print(f"stall: decoder {decoder}, dropped in gateware {dropped}, gaps {meta['counters']['gaps']}, {result}")
    # What was lost is counted, is a gap and its windows are unknown, never misses.
    assert decoder["lost"] > 0 and lost > 0 and meta["counters"]["gaps"] > 0 and result["unknown"] > 0
    assert result["judged"] + result["unknown"] == result["stimuli"]
    summary = json.loads((run.path / "summary.json").read_text())["runs"][0]
    acc = summary["stimuli_accounting"]
    assert acc["fired"] == len(injected) == COUNT and acc["measured"] + acc["unknown"] == COUNT
    assert acc["measured"] == result["judged"]
