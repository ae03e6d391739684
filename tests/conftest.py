import pytest


@pytest.fixture(scope="session")
def sim_dir():
    """The simulated rig (Verilator build of the SoC + DUT model), built once per session (cached by
    content hash across sessions)."""
    from targets import sim
    return sim.build()
