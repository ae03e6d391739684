"""Every `python` block of docs/api.md runs, in order, in one namespace, against the simulated rig
(the first block starts it with hilat.simulate(); built once per test session)."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_every_example_of_the_api_docs_runs(sim_dir, tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 6
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HILAT_CALIBRATION_DIR", str(tmp_path / "calibration"))   # no stored calibration
    namespace = {"__name__": "api_docs"}
    for number, code in enumerate(blocks, 1):
        exec(compile(code, f"{DOC.name} block {number}", "exec"), namespace)
    # What the blocks left behind: two runs whose latencies equal the DUT model's (checked in block 3).
    assert namespace["run"].stats("stim_to_isr").count > 1000
    assert (tmp_path / "baseline.json").exists() and len(list((tmp_path / "runs").iterdir())) == 2
