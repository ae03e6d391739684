"""scripts/board-tdc-check (docs/tdc.md, "The board check"): it cannot run here (no board), so its
analysis is checked on constructed data (single-shot precision = sigma of the pair difference /
sqrt 2, exactly; the model's prediction of it), its arguments, and that it refuses clearly without a
board and on a rig without a TDC."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_rig import FakeRig, capture_script
from hilat.calibration import tdc_check, tdc_line, tdc_rig

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "board-tdc-check"
TICK_PS = 1000.0


def test_pair_precision_is_sigma_of_the_difference_over_sqrt2():
    # Input A's code c at T = 4 c ps; input B's at 4 c - 30 ps (30 ps later: the skew). The same edges,
    # B's code one above or one below A's in turn: differences 30 -+ 4 ps.
    centres_a = 4.0 * np.arange(256)
    centres_b = 4.0 * np.arange(256) - 30
    n = 1000
    ticks = np.arange(n, dtype=np.int64) * 37 + 5000
    codes_a = np.random.default_rng(3).integers(2, 200, n)
    step = np.where(np.arange(n) % 2 == 0, 1, -1)
    codes_b = codes_a + step
    result = tdc_check.pair_precision(ticks, codes_a, ticks, codes_b, centres_a, centres_b, TICK_PS)
    diffs = 30.0 - 4.0 * step
    assert result["pairs"] == n and result["unpaired_a"] == result["unpaired_b"] == 0
    assert result["skew_ps"] == pytest.approx(30.0, abs=1e-9)
    assert result["sigma_difference_ps"] == pytest.approx(np.std(diffs, ddof=1), rel=1e-12)
    assert result["single_shot_ps"] == pytest.approx(4.0 * math.sqrt(n / (n - 1)) / math.sqrt(2), rel=1e-12)


def test_pairs_found_across_a_tick_boundary_and_strays_left_unpaired():
    # A at tick 100, late in it (T = 100 ps before its end); B sees the same edge 150 ps later: in tick
    # 101, 950 ps before that tick's end. Another A edge has no B edge near it.
    centres = np.zeros(256)
    centres[10], centres[20], centres[30] = 100.0, 950.0, 500.0
    result = tdc_check.pair_precision([100, 110, 5000], [10, 10, 30], [101, 111], [20, 20], centres, centres, TICK_PS)
    assert result["pairs"] == 2 and result["unpaired_a"] == 1 and result["unpaired_b"] == 0
    assert result["skew_ps"] == pytest.approx(150.0) and result["sigma_difference_ps"] == 0.0
    with pytest.raises(ValueError, match="is one source split to both inputs"):
        tdc_check.pair_precision([100, 200], [10, 10], [150, 300], [20, 20], centres, centres, TICK_PS)
    with pytest.raises(ValueError, match="no edges on one of the two inputs"):
        tdc_check.pair_precision([], [], [1], [1], centres, centres, TICK_PS)


def test_the_models_prediction_and_the_table():
    # Bins of 100 ps over a 20 ns tick: quantization rms 100 / sqrt(12) for each line, and so for the pair.
    uniform = tdc_line.TapTable(500.0 + 100.0 * np.arange(256), 20000.0, source="uniform test line")
    assert tdc_check.predicted_single_shot_ps(uniform) == pytest.approx(100 / math.sqrt(12))
    assert tdc_check.quantization_rms_ps([0, 50, 150], 200) == pytest.approx(math.sqrt((50 ** 3 + 150 ** 3) / 2400))

    class Ident:
        ts_hz, tdc_taps = 50e6, 256
    density = tdc_rig.tdc_resolution_calibration(np.repeat(np.arange(1, 201), 100), Ident, 4, "u", uniform)
    precision = {"pairs": 999, "unpaired_a": 1, "unpaired_b": 0, "skew_ps": 30.0, "single_shot_ps": 2.83,
                 "channels": [2, 3]}
    text = tdc_check.check_table(density, precision, uniform)
    lines = text.splitlines()
    assert lines[0].split() == ["figure", "board", "(measured)", "model", "(predicted)"]
    assert any(line.startswith("LSB, channel 4") and line.split()[-4:] == ["100", "ps", "100", "ps"]
               for line in lines)
    single = next(line for line in lines if line.startswith("single-shot precision"))
    assert single.split()[-4:] == ["2.83", "ps", f"{100 / math.sqrt(12):.3g}", "ps"]


def test_arguments():
    args = tdc_check.parse_args(["udp://10.0.0.2", "--pair", "in0", "in1", "--edges", "5000"])
    assert args.pair == ["in0", "in1"] and args.edges == 5000 and args.jumper_input == "spare"
    with pytest.raises(SystemExit):
        tdc_check.parse_args(["x", "--pair", "in0", "in0"])
    with pytest.raises(SystemExit):
        tdc_check.parse_args(["x", "--edges", "10"])
    with pytest.raises(SystemExit):
        tdc_check.parse_args([])


def _script(*argv):
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=60)


def test_refuses_without_a_board():
    done = _script("socket://127.0.0.1:1", "--yes")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("board-tdc-check: no rig answers at socket://127.0.0.1:1")
    assert "connect a board built with --tdc" in done.stderr


def test_refuses_a_rig_without_a_tdc(tmp_path):
    with FakeRig(capture_script()) as rig:
        done = _script(rig.url, "--yes", "--no-store")
    assert done.returncode == 2
    assert "has no TDC: build it with --tdc" in done.stderr
