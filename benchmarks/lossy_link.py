"""The simulated rig driven past its link, raw edges only (issue 32; not a test: figures are printed).

At 2, 4 and 8 times the stimulus rate the link carries (``hilat.acquisition.link_plan``'s shortest period for
this rig, halved, quartered, eighthed), 20,000 periodic stimuli each against the model DUT, whose
responses end well inside the shortest period (so the DUT itself never drops one). Every stimulus
the run judged (a latency or a miss of stimulus -> ISR) is compared with the DUT's log, stimulus ->
task too; the generator's own count gives the stimuli fired. Per rate, then the last line over the
three together:

    lossy link: N stimuli fired, M measured, U unknown, wrong W

M: stimuli judged; U: those not judged (a gap touched their window, or their edge was lost);
N = M + U; W: judged results that differ from the DUT's log.

    .venv/bin/python benchmarks/lossy_link.py [--stimuli 20000] [--factors 2,4,8]
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from hilat import analysis
from hilat.acquisition import link_plan
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.link.rig import Rig
from hilat.link.transport import Transport
from hilat.rundir.reader import load_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # gateware/ and targets/ of the checkout
from targets import sim, simrig  # noqa: E402

# Responses that end well inside any period tried: ISR 20..35 ticks, task 20..27 after it, 10-tick
# pulses, no masked windows; a few misses and tags.
DUT = {"seed": 21, "isr_base": 20, "isr_spread_bits": 4, "mask_per1024": 0, "resched_base": 20,
       "resched_spread_bits": 3, "isr_width": 10, "task_width": 10, "miss_per1024": 10, "tag_per1024": 0}


def link_period(url):
    """The shortest period whose raw edges the link carries, by the capture's own plan."""
    with Transport(url) as t:
        ident = Rig(t).hello()
    roles = analysis.Channels.from_table(ident.channels)
    plan = link_plan.plan({roles.stimulus: StimulusSettings(mode="periodic", period=10_000, jitter=0)},
                          roles.stimulus, roles, ident)
    return plan.shortest_period, plan


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stimuli", type=int, default=20_000)
    ap.add_argument("--factors", default="2,4,8")
    args = ap.parse_args(argv)
    factors = [int(f) for f in args.factors.split(",")]
    total = {"fired": 0, "judged": 0, "unknown": 0, "wrong": 0}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for factor in factors:
            dut_log = tmp / f"injected-{factor}.csv"
            with simrig.running({"dut": DUT, "run_dir": tmp / f"sim-{factor}", "dut_log": dut_log}) as rig:
                base, plan = link_period(rig.url)
                period = max(base // factor, 100)
                settings = CaptureSettings(count=args.stimuli, out_dir=tmp / "runs", progress=False,
                                           label=f"x{factor}",
                                           stimulus=StimulusSettings(mode="periodic", period=period, jitter=0))
                cap = Capture(rig.url, settings).run()
            if cap.error:
                print(f"x{factor}: capture failed: {cap.error}", file=sys.stderr)
                return 1
            meta = json.loads((cap.run_dir / "meta.json").read_text())
            fired = int(meta["counters"]["rig_stimuli_fired"][0])
            injected = sim.read_dut_log(dut_log)
            result = sim.compare_with_dut_log(load_run(cap.run_dir), injected, period)
            unknown = fired - result["judged"]
            dropped = sum(meta["counters"]["gateware_dropped_per_channel"] or [])
            print(f"x{factor}: period {period} ticks (link carries {base}: {plan.link_records_per_s / 1e3:.1f} k "
                  f"records/s, {plan.limit}); fired {fired} (DUT saw {len(injected)}), seen {result['stimuli']}, "
                  f"measured {result['judged']}, unknown {unknown}, wrong {result['wrong']}; "
                  f"{dropped} edges dropped in gateware, {meta['counters']['gaps']} gaps", flush=True)
            total["fired"] += fired
            total["judged"] += result["judged"]
            total["unknown"] += unknown
            total["wrong"] += result["wrong"]
    print(f"lossy link: {total['fired']} stimuli fired, {total['judged']} measured, {total['unknown']} unknown, "
          f"wrong {total['wrong']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
