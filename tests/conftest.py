"""Shared fixtures, and the test tiers (README, "Tests"): `sim` (the simulated rig, a gateware
simulation: Verilator, LiteX/Migen), `board` (the board toolchain), `fuzz` (the fuzz harnesses), marked
here by directory, by file and by the fixtures a test uses; the rest is the host tier (`make test-host`).
gateware/ and targets/ come from the checkout (pyproject's pytest pythonpath), never site-packages."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# The scripts the tests start as subprocesses (tests/host/stream_rig.py, benchmarks/...) find gateware/ and
# targets/ of the checkout too.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS.parent), os.environ.get("PYTHONPATH")) if p)

# tests/analysis/synth.py (synthetic run directories) serves the tests of other folders too.
sys.path.insert(0, str(TESTS / "analysis"))

# Tier -> paths under tests/ whose every test is in it (a folder, or one file).
TIER_PATHS = {
    "sim": ("e2e", "gateware", "targets", "firmware/test_eth_sim.py", "calibration/test_calibration_sim.py",
            # the engine's gateware in Migen's simulator behind a scripted rig (tests/host/engine_rig.py)
            "host/test_engine_capture.py", "host/test_on_rig_export.py", "host/test_on_rig_live.py"),
    "board": ("boards",),
    "fuzz": ("firmware/test_fuzz.py",),
}
# Tests (node id prefixes under tests/) of the host folders that import LiteX/Migen when they run: the
# simulated rig's launcher, the gateware's own constants, the DUT experiments.
SIM_TESTS = ("calibration/test_calibration_estimators.py::test_sim_calibration_sources",
             "host/test_rig_histograms.py::test_deadline_limit_is_the_gateware_s",
             "analysis/test_one_median.py::test_make_demo_cpus_rows")
# A test using one of these fixtures (directly or through another) starts the simulated rig.
SIM_FIXTURES = ("sim_dir", "engine_sim_dir", "eth_sim_dir", "subtick_sim_dir", "cpu_sim", "vex_sim")

# Files that import LiteX/Migen when collected: without the gateware extra they are not collected at
# all (pytest_report_header says so), as their tests are all `sim` anyway, or would be skipped.
NEEDS_GATEWARE_TO_COLLECT = ("e2e", "gateware", "targets", "boards", "firmware", "calibration/test_calibration_sim.py",
                             "host/test_engine_capture.py", "host/test_on_rig_export.py", "host/test_on_rig_live.py",
                             "host/test_labgrid.py")
def _installed(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:   # hidden (tests/host/blocker) or broken: not installed, for us
        return False


HAVE_GATEWARE = _installed("litex") and _installed("migen")
collect_ignore = [] if HAVE_GATEWARE else list(NEEDS_GATEWARE_TO_COLLECT)


def pytest_report_header(config):
    if not HAVE_GATEWARE:
        return ("hilat: LiteX/Migen (the gateware extra) not installed: not collected: "
                + ", ".join(NEEDS_GATEWARE_TO_COLLECT))
    return None


def _under(relative, path):
    return relative == path or relative.startswith(path.rstrip("/") + "/")


def pytest_collection_modifyitems(config, items):
    for item in items:
        try:
            relative = Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
        except ValueError:   # a test outside tests/ (pytester's): no tier of ours
            continue
        for tier, paths in TIER_PATHS.items():
            if any(_under(relative, p) for p in paths):
                item.add_marker(tier)
        node = relative + item.nodeid[len(item.nodeid.split("::")[0]):]
        if "sim" not in item.keywords and (node.startswith(SIM_TESTS)
                                           or any(f in getattr(item, "fixturenames", ()) for f in SIM_FIXTURES)):
            item.add_marker("sim")


@pytest.fixture(scope="session")
def sim_dir():
    """The simulated rig (Verilator build of the SoC + DUT model), built once per session (cached by
    content hash across sessions)."""
    from targets import sim
    return sim.build()
