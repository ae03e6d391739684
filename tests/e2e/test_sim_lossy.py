"""Past the link's rate, raw edges only, on the simulated rig: the gateware drops edges, and every
figure the run reports is still measured. The DUT model logs what it injected; every judged
stimulus equals its log to the tick, misses are the model's among the judged ones, the generator's
own count equals the stimuli the model saw, and the summary, `hilat report`, the API and the export
agree."""

import csv
import json

from hilat import api
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.cli import main
from hilat.rundir.reader import load_run

from targets import sim

N = 3000
PERIOD = 1500     # ~33 k stimuli/s at the simulator's 50 MHz: more than the firmware carries


def test_past_the_links_rate_every_reported_figure_is_measured(sim_dir, tmp_path, capsys):
    dut_log = tmp_path / "injected.csv"
    settings = CaptureSettings(count=N, out_dir=tmp_path / "runs", progress=False, label="lossy",
                               stimulus=StimulusSettings(mode="periodic", period=PERIOD, jitter=0))
    with sim.SimulatedRig(sim_dir, tmp_path / "sim", dut_args={"seed": 9, "miss_per1024": 20},
                          dut_log=dut_log) as rig:
        cap = Capture(rig.url, settings).run()
    assert cap.error is None
    injected = sim.read_dut_log(dut_log)
    meta = json.loads((cap.run_dir / "meta.json").read_text())
    dropped = sum(meta["counters"]["gateware_dropped_per_channel"])
    assert dropped > 0, "the test must drive the rig past the link's rate"
    assert meta["link_plan"]["records_per_s"] > meta["link_plan"]["link_records_per_s"]
    fired = meta["counters"]["rig_stimuli_fired"][0]
    assert fired == len(injected) == N
    run = load_run(cap.run_dir)
    isr = run.measurements.series["stim_to_isr"]
    result = sim.compare_with_dut_log(run, injected, PERIOD)
    judged = result["judged"]
    assert result["wrong"] == 0 and result["unknown"] > 0 and judged > N // 10
    summary = json.loads((cap.run_dir / "summary.json").read_text())["runs"][0]
    acc = summary["stimuli_accounting"]
    row = summary["subsets"]["all"]["stim_to_isr"]
    assert acc["fired"] == N and acc["measured"] + acc["unknown"] == N and acc["unknown"] > 0
    assert row["count"] + row["misses"] == judged and row["misses"] == isr.n_misses
    seen = len(isr)
    assert acc["seen"] == seen and acc["unseen"] == N - seen
    # hilat report reads the run again: the same figures; its text states the accounting.
    assert main(["report", str(cap.run_dir), "--format", "json"]) == 0
    again = json.loads(capsys.readouterr().out)["runs"][0]
    for key in ("count", "misses", "unknown"):
        assert again["subsets"]["all"]["stim_to_isr"][key] == row[key], key
    assert again["stimuli_accounting"] == acc
    assert main(["report", str(cap.run_dir)]) == 0
    assert f"stimuli: fired {N}, seen {seen}, unknown {acc['unknown']}, measured {acc['measured']}" in \
        capsys.readouterr().out
    # The API.
    stats = api.load(cap.run_dir).stats("stim_to_isr")
    assert (stats.count, stats.misses) == (row["count"], row["misses"])
    assert stats.max_mu == row["mu"]["max"] == int(isr.valid().max())
    # The exported samples: the judged values, each unknown one flagged or absent.
    assert main(["export", str(cap.run_dir), "--csv", str(tmp_path / "samples.csv")]) == 0
    capsys.readouterr()
    with open(tmp_path / "samples.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == "stim_to_isr"]
    values = [int(r["value_mu"]) for r in rows
              if r["value_mu"] not in ("", "-1") and r.get("unknown", "0") in ("0", "")]
    assert sorted(values) == sorted(isr.valid().tolist())
