import sys
from pathlib import Path

import pytest

# tests/analysis/synth.py (synthetic run directories) serves the tests of other folders too.
sys.path.insert(0, str(Path(__file__).parent / "analysis"))


@pytest.fixture(scope="session")
def sim_dir():
    """The simulated rig (Verilator build of the SoC + DUT model), built once per session (cached by
    content hash across sessions)."""
    from targets import sim
    return sim.build()
