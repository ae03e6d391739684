"""The door to the simulated rig: hilat never imports the checkout's ``targets`` or ``gateware``.

The simulated rig (Verilator builds of the gateware, the rig's firmware, the DUT models) works from a
clone of the repository only. hilat starts it as a subprocess, ``python -m targets.simrig SETTINGS``,
with the checkout on its PYTHONPATH; the checkout is ``$HILAT_CHECKOUT`` or, for the editable install
of a clone, the directory holding ``host/hilat``. The interface (docs/architecture.md, "The simulated
rig's launcher"):

- argv: one JSON object of settings (``SETTINGS`` below), every option of ``hilat sim``.
- stdout: one JSON line once the rig listens: ``url``, ``udp_url`` (or null), ``dut_log``, ``run_dir``,
  ``console`` (a CPU DUT's, or null), ``pid`` (the simulator's) and ``sim_dir``; or, for settings it
  refuses, ``{"error": "...", "usage": true}`` and exit status 2 (before any build).
- stderr: the build's and the simulator's messages, passed through.
- it stops the simulator and exits when its stdin closes, or on SIGTERM/SIGINT.
"""

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from hilat import shutdown

CHECKOUT_ENV = "HILAT_CHECKOUT"
LAUNCHER = "targets.simrig"
NOT_IN_CHECKOUT = ("the simulated rig runs from a clone of the repository (make demo); this hilat is installed "
                   "without it")

# The launcher's settings and their defaults (None: the launcher's own default). The calibration
# sources' settings are hilat sim's options of the same names.
SETTINGS = {
    "port": None, "dut": {}, "dut_model": None, "dut_top": "hilat_dut_model", "dut_cpu": None,
    "dut_firmware": None, "dut_cpu_clk_hz": None, "samples_per_tick": 1, "edge_clock_high_ps": None,
    "async_source_cycles": None, "on_rig": False, "ethernet": False, "trace": False, "run_dir": None,
    "dut_log": None, "pps_log": None, "loopback": None, "loopback_jitter": 0, "pps_period": None, "pps_ppm": 0.0,
    "pps_jitter": 0, "pps_missing_every": 0, "pps_missing_run": 1, "pps_extra_every": 0,
    "tdc": False, "tdc_source_ticks": None, "edge_phase_seed": None, "edge_phase_log": None,
}

DUT_LOG_COLUMNS = ("index", "missed", "isr", "task", "tagged")


class SimulatorUnavailable(RuntimeError):
    """No simulated rig here (an installed hilat without a checkout), or it failed to start."""


class SimulatorSettingsError(ValueError):
    """Settings the simulated rig cannot take (refused before any build)."""


def checkout_root():
    """The clone whose simulated rig hilat starts, or None: ``$HILAT_CHECKOUT``, else the clone this
    hilat is installed from (editable: host/hilat/ of a clone)."""
    env = os.environ.get(CHECKOUT_ENV)
    candidates = [Path(env)] if env else [Path(__file__).resolve().parents[2]]
    for root in candidates:
        if (root / "targets" / "simrig.py").is_file():
            return root
    return None


def read_dut_log(path):
    """The DUT model's log of what it injected (``+dut_log``), one row per stimulus, as an int64 array
    with the columns DUT_LOG_COLUMNS (latencies in the DUT model's clock cycles: ticks, or sub-ticks on
    a rig sampling more than once a tick)."""
    rows = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2)
    return rows.reshape(-1, len(DUT_LOG_COLUMNS))


class SimulatorProcess:
    """The launcher subprocess: ``start()`` returns once the rig listens (its ``info`` the launcher's
    JSON line), ``stop()`` closes its stdin and waits for it to stop the simulator."""

    def __init__(self, settings):
        unknown = set(settings) - set(SETTINGS)
        if unknown:
            raise TypeError(f"unknown simulated-rig settings: {', '.join(sorted(unknown))}")
        self.settings = {**SETTINGS, **settings}
        self.process = None
        self.info = {}

    def start(self, timeout_s=3600):
        root = checkout_root()
        if root is None:
            raise SimulatorUnavailable(NOT_IN_CHECKOUT)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
        # A process group of its own that dies with us (hilat.shutdown); stderr passes through.
        self.process = subprocess.Popen([sys.executable, "-m", LAUNCHER, json.dumps(self.settings, default=str)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
                                        **shutdown.child_options())
        try:
            line = self.process.stdout.readline()   # the build may take minutes: it answers when ready
        except BaseException:
            self.stop()
            raise
        try:
            self.info = json.loads(line) if line.strip() else {}
        except json.JSONDecodeError:
            self.info = {"error": f"the simulated rig's launcher said: {line.strip()[:300]}"}
        if "url" not in self.info:
            self.stop()
            message = (self.info.get("error")
                       or f"the simulated rig did not start (exit status {self.process.returncode})")
            raise (SimulatorSettingsError if self.info.get("usage") else SimulatorUnavailable)(message)
        return self

    def wait(self):
        return self.process.wait()

    def stop(self):
        if self.process is None:
            return
        try:
            if self.process.stdin and not self.process.stdin.closed:
                self.process.stdin.close()    # the launcher stops the simulator and exits
            self.process.wait(timeout=15)
        except (subprocess.TimeoutExpired, OSError):
            shutdown.stop_child(self.process, timeout=5)
        except BaseException:
            shutdown.stop_child(self.process, timeout=5)
            raise
        finally:
            if self.process.stdout:
                self.process.stdout.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def join_network_namespace(pid):
    """Move this thread (and the threads it starts) into the network namespace of process ``pid``: the
    simulated rig's Ethernet link exists only there (docs/ethernet.md, "Simulation")."""
    clone_newnet = 0x40000000
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/proc/{int(pid)}/ns/net") as ns:
        if libc.setns(ns.fileno(), clone_newnet) != 0:
            raise SimulatorUnavailable(f"joining the simulated rig's network namespace: "
                                       f"{os.strerror(ctypes.get_errno())}")
