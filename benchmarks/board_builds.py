"""The Colorlight bitstreams with Gigabit Ethernet, built as `make bitstream` builds them, with their
figures: the i9 (LFE5U-45F: engine + Ethernet + ping) and, with --board, the i5 (Ethernet, no engine;
tests/boards/test_bitstream.py builds that one in `make test`). Not in `make test`: a build is 10 to
25 minutes of nextpnr on one core (run one at a time on a shared machine: it is niced).

    .venv/bin/python benchmarks/board_builds.py                      # the i9
    .venv/bin/python benchmarks/board_builds.py --board colorlight_i5 --seed-tries 5

The build itself fails (exit status 1) when a clock misses within the seed retries. Its last line is

    colorlight_i9: timing met (seed S), sys A / ts B / eth_rx C MHz, N LUT4 (P %), F FF, R DP16KD, \
Ethernet L LUT4 / G FF / K DP16KD, built in T s

with the figures read from build/boards/<board>/build_report.json (docs/boards.md, "Measured: Ethernet").
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # gateware/ and targets/ of the checkout
from targets import board_flow  # noqa: E402


def line(report):
    clocks = report["clocks"]
    comb, ff, bram = (report["resources"][k] for k in ("TRELLIS_COMB", "TRELLIS_FF", "DP16KD"))
    fmax = " / ".join(f"{d} {clocks[d]['achieved_mhz']:.1f}" for d in ("sys", "ts", "eth_rx") if d in clocks)
    met = "met" if report["timing_met"] else "NOT met"
    text = (f"{report['board']}: timing {met} (seed {report['nextpnr_seed']}), "
            f"{fmax} MHz, {comb['used']} LUT4 ({100 * comb['used'] / comb['available']:.0f} %), {ff['used']} FF, "
            f"{bram['used']} DP16KD")
    if report.get("ethernet_cost"):
        e = report["ethernet_cost"]
        text += f", Ethernet {e['lut4_equivalent']} LUT4 / {e['flip_flops']} FF / {e['block_rams']} DP16KD"
    return text + f", built in {report['build_seconds']:.0f} s"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="colorlight_i9", choices=("colorlight_i9", "colorlight_i5"))
    parser.add_argument("--seed-tries", default=3, type=int)
    parser.add_argument("--report-only", action="store_true", help="Print the line of the last build.")
    args, rest = parser.parse_known_args(argv)
    out = board_flow.board_dir(args.board)
    if not args.report_only:
        command = ["nice", "-n", "5", sys.executable, "-m", f"targets.{args.board}", "--build",
                   "--seed-tries", str(args.seed_tries), *rest]
        status = subprocess.call(command, cwd=board_flow.ROOT, env=dict(os.environ))
        if status != 0:
            return status
    print(line(json.loads((out / "build_report.json").read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
