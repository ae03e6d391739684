"""benchmarks/udp_stream.py, short: a fraction of a second of the C sender's line-rate stream against
``hilat capture udp://`` finds the pattern exactly and loses nothing (the stream fits the socket
buffer: nothing here depends on the host's speed), and the last line has the documented form."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_short_udp_stream_benchmark(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "udp_stream.py"), "--seconds", "0.3",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert "pattern: pattern found exactly" in lines
    last = re.fullmatch(r"udp stream: (\d+) records at (\d+) records/s, datagrams lost (\d+), processing (\d+) "
                        r"records/s, peak RSS (\d+) MiB", lines[-1])
    assert last is not None, lines[-1]
    records, _rate, lost, _processing, _rss = map(int, last.groups())
    assert lost == 0 and records == int(re.search(r"\((\d+) records\)", lines[0]).group(1))
    assert list(tmp_path.iterdir()) == []   # the run directory and the sender are gone
