"""labgrid: the simulated rig shared by a real labgrid-exporter through a real labgrid-coordinator,
the place acquired with labgrid-client, a capture through HilatDriver (examples/labgrid) that
measures exactly what the DUT model injected.

labgrid lives in .venv-labgrid (scripts/setup-labgrid.sh), not in .venv: it depends on
pyserial-labgrid, which installs the same `serial` module as plain pyserial, and the one installed
beside the other replaces its files (labgrid issue #1245). So every labgrid process here runs from
.venv-labgrid/bin, and the checks of both venvs say that each keeps its own `serial`.
"""

import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from targets import sim

ROOT = Path(__file__).resolve().parents[2]
LG_VENV = ROOT / ".venv-labgrid"
EXAMPLE = ROOT / "examples" / "labgrid"
PLACE = "hilat-rig"              # examples/labgrid/env.yaml's RemotePlace
EXPORTER = "hilat-test"
N_STIMULI = 300


def _bin(name):
    return str(LG_VENV / "bin" / name)


@pytest.fixture(scope="module")
def lg_venv():
    if not (LG_VENV / "bin" / "python").exists():
        pytest.fail(f"{LG_VENV.name} is missing: run scripts/setup-labgrid.sh (make test / make setup runs it)")
    return LG_VENV


def _lg_env(tmp_path, **extra):
    """The environment of the labgrid processes: none of the caller's LG_* settings (a proxy, another
    coordinator or place), no calibration of the caller's applied to the simulated rig."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LG_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(HILAT_CALIBRATION_DIR=str(tmp_path / "calibration"), **extra)
    return env


class Daemons:
    """Background processes, each in a process group of its own; ``stop`` ends every one (SIGTERM,
    then SIGKILL), whatever the test did."""

    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.procs = {}

    def start(self, name, argv, env):
        log = open(self.log_dir / f"{name}.log", "w")
        proc = subprocess.Popen(argv, cwd=self.log_dir, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs[name] = proc
        return proc

    def log(self, name):
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def wait_for(self, name, ready, what, timeout=30):
        deadline = time.monotonic() + timeout
        while not ready():
            if self.procs[name].poll() is not None:
                pytest.fail(f"{name} exited ({self.procs[name].returncode}) before {what}:\n{self.log(name)[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"{name}: no {what} within {timeout} s:\n{self.log(name)[-3000:]}")
            time.sleep(0.1)

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            try:  # anything the process left in its group
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def daemons(tmp_path):
    d = Daemons(tmp_path)
    yield d
    d.stop()


def _accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _run(argv, env, check=True, timeout=60):
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, argv))} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def test_capture_through_labgrid_coordinator_and_exporter(lg_venv, sim_dir, tmp_path, daemons):
    dut_log = tmp_path / "injected.csv"
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 5, "miss_per1024": 20},
                          dut_log=dut_log) as rig:
        coordinator = f"127.0.0.1:{sim.free_port()}"
        env = _lg_env(tmp_path, LG_COORDINATOR=coordinator, HILAT_SIM_PORT=str(rig.port))
        daemons.start("coordinator", [_bin("labgrid-coordinator"), "--listen", coordinator], env)
        daemons.wait_for("coordinator", lambda: _accepts(int(coordinator.rpartition(":")[2])), "listening port")
        daemons.start("exporter", [_bin("labgrid-exporter"), "--coordinator", coordinator, "--name", EXPORTER,
                                   str(EXAMPLE / "exporter.yaml")], env)
        daemons.wait_for("exporter", lambda: "Exporter ready" in daemons.log("exporter"), "connection")

        client = [_bin("labgrid-client"), "-x", coordinator, "-p", PLACE]
        deadline = time.monotonic() + 20
        while f"{EXPORTER}/hilat-sim/NetworkSerialPort" not in _run(client[:3] + ["resources"], env).stdout:
            assert time.monotonic() < deadline, daemons.log("exporter")
            time.sleep(0.2)
        _run(client + ["create"], env)
        _run(client + ["add-match", f"{EXPORTER}/hilat-sim/*"], env)
        _run(client + ["acquire"], env)
        try:
            result = _run([_bin("python"), str(EXAMPLE / "capture.py"), "--count", str(N_STIMULI),
                           "--period", "100us", "--jitter", "20us", "--seed", "9", "--out", str(tmp_path / "runs"),
                           "--json"], env)
        finally:
            released = _run(client + ["release"], env, check=False)
        assert released.returncode == 0, released.stderr
        shown = _run(client + ["show"], env).stdout
        assert "acquired: None" in shown, shown

    out = json.loads(result.stdout)
    # The exporter's NetworkSerialPort (raw) became the simulator's own socket:// URL.
    assert out["url"] == rig.url and out["identity"]["url"] == rig.url
    assert out["identity"]["ts_hz"] == 50_000_000 and "Traceback" not in result.stderr
    injected = sim.read_dut_log(dut_log)
    missed = injected[:, 1] == 1
    assert len(injected) == N_STIMULI and missed.any()
    for kind, column in (("stim_to_isr", 2), ("stim_to_task", 3)):
        got = out["kinds"][kind]
        assert got["misses"] == missed.sum() and got["count"] == N_STIMULI - missed.sum()
        np.testing.assert_array_equal(got["values_mu"], np.sort(injected[~missed, column]))
    assert out["run"].startswith(str(tmp_path / "runs"))


def test_driver_url_of_each_resource(lg_venv, tmp_path):
    """A local serial port at its speed; NetworkSerialPort raw -> socket://, rfc2217 -> rfc2217://
    (with ser2net's ign_set_control, as labgrid's SerialDriver); another protocol is refused."""
    script = """
import json
from labgrid import Target
from labgrid.resource import NetworkSerialPort, RawSerialPort
from hilat.labgrid import rig_url
t = Target("t")
out = [rig_url(RawSerialPort(t, "a", port="/dev/ttyUSB7", speed=3000000)),
       rig_url(NetworkSerialPort(t, "b", host="lab7", port=4001, protocol="raw")),
       rig_url(NetworkSerialPort(t, "c", host="lab7", port=4002, protocol="rfc2217", speed=1000000))]
try:
    rig_url(NetworkSerialPort(t, "d", host="lab7", port=4003, protocol="telnet"))
except ValueError as e:
    out.append(str(e))
print(json.dumps(out))
"""
    out = json.loads(_run([_bin("python"), "-c", script], _lg_env(tmp_path)).stdout)
    assert out[:3] == [["/dev/ttyUSB7", 3000000], ["socket://lab7:4001", None],
                       ["rfc2217://lab7:4002?ign_set_control", 1000000]]
    assert "unknown protocol 'telnet'" in out[3]


def test_each_venv_keeps_its_own_serial_module(lg_venv, tmp_path):
    """labgrid issue #1245: .venv-labgrid has pyserial-labgrid (whose files `serial` is) and not
    pyserial, and its requirements hold; .venv has plain pyserial and no labgrid."""
    env = _lg_env(tmp_path)
    check = _run([_bin("python"), "-m", "pip", "check", "--disable-pip-version-check"], env, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    script = """
import json, importlib.metadata as md, pathlib, serial
def has(name):
    try:
        return md.distribution(name).version
    except md.PackageNotFoundError:
        return None
files = {str(pathlib.Path(f.locate()).resolve()) for f in md.distribution("pyserial-labgrid").files}
print(json.dumps({"pyserial-labgrid": has("pyserial-labgrid"), "pyserial": has("pyserial"),
                  "labgrid": has("labgrid"), "hilat": has("hilat"),
                  "serial_owned": str(pathlib.Path(serial.__file__).resolve()) in files,
                  "serial_packages": md.packages_distributions().get("serial")}))
"""
    out = json.loads(_run([_bin("python"), "-c", script], env).stdout)
    assert out["pyserial-labgrid"] and out["labgrid"] and out["hilat"], out
    assert out["pyserial"] is None and out["serial_packages"] == ["pyserial-labgrid"], out
    assert out["serial_owned"], out
    # This venv (.venv): plain pyserial, no labgrid.
    assert importlib.metadata.distribution("pyserial").version
    for name in ("labgrid", "pyserial-labgrid"):
        with pytest.raises(importlib.metadata.PackageNotFoundError):
            importlib.metadata.distribution(name)
