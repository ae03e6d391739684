"""benchmarks/tdc.py, short (10^6 edges, 4000 pairs, on the synthetic line or the committed i5 table):
the true zero-width codes are found, the pair error lies between the two edges' quantization alone and
that plus their centres' estimation errors, and the last line has the documented form."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_short_tdc_benchmark():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tdc.py"), "--edges", "1e6", "--pairs", "4000"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert any("true zero-width codes found: True" in line for line in lines)
    low, high = map(float, re.search(r"expected between ([\d.]+) ps .* and ([\d.]+) ps", out.stdout).groups())
    last = re.fullmatch(r"tdc: (\d+) bins, mean bin ([\d.]+) ps, effective resolution ([\d.]+) ps, "
                        r"pair error rms ([\d.]+) ps \(model\)", lines[-1])
    assert last is not None, lines[-1]
    bins, mean_bin, eff, rms = int(last.group(1)), *map(float, last.groups()[1:])
    assert bins == 256 and 20 < mean_bin < 50
    assert mean_bin <= eff <= 100 and rms <= 100
    assert 0.95 * low <= rms <= 1.05 * high          # 4000 pairs: the rms to a few %
