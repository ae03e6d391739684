import sys
from pathlib import Path

# The scripted rig of the host tests (tests/host/fake_rig.py) serves these tests too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "host"))
