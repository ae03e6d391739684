"""The Colorlight i5 bitstream (its default: Gigabit Ethernet, no engine) builds with the open toolchain
and meets timing at its requested clocks, eth_rx / eth_tx included.

The build (several minutes) is reused when ``build/boards/colorlight_i5`` holds a report whose source
hash matches the current sources and whose bitstream still has the recorded hash; otherwise it runs
``python -m targets.colorlight_i5 --build``, exactly what ``make bitstream`` runs, in the background from
the moment the tests are collected (conftest.py), beside the rest of the suite. The checks below read
nextpnr's log and the build outputs themselves rather than trusting the report.
"""

import json
import re
import subprocess
import sys

import pytest

from targets import board_flow, build_report, colorlight_i5

pytestmark = pytest.mark.slow   # the bitstream build (minutes of nextpnr)

BOARD = "colorlight_i5"
IDCODE_LFE5U_25F = bytes.fromhex("41111043")  # the bitstream's VERIFY_ID operand


def reusable(out):
    path = out / "build_report.json"
    if not path.exists():
        return False
    report = json.loads(path.read_text())
    bit = report.get("bitstream")
    return (report.get("source_hash") == board_flow.source_hash(colorlight_i5.__file__) and bit is not None
            and (board_flow.ROOT / bit["path"]).exists()
            and build_report.sha256(board_flow.ROOT / bit["path"]) == bit["sha256"])


# The build started in the background at collection (tests/boards/conftest.py): (process, log file).
_started = None


def start_build():
    """Start the build unless a reusable one is there; the ``build`` fixture waits for it."""
    global _started
    out = board_flow.board_dir(BOARD)
    if _started is not None or reusable(out):
        return
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "build.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "targets.colorlight_i5", "--build"], cwd=board_flow.ROOT,
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    _started = (process, log)


def stop_build():
    """At the session's end: a build no test waited for (-x, an interrupt) is stopped."""
    if _started is not None and _started[0].poll() is None:
        _started[0].kill()
        _started[0].wait()


@pytest.fixture(scope="module")
def build():
    out = board_flow.board_dir(BOARD)
    start_build()           # a no-op when the build runs already or is reusable
    if _started is not None:
        process, log_file = _started
        returncode = process.wait(timeout=3600)
        log_file.close()
        tail = "\n".join((out / "build.log").read_text(errors="replace").splitlines()[-25:])
        assert returncode == 0, f"bitstream build failed (see {out / 'build.log'}):\n{tail}"
    return out, json.loads((out / "build_report.json").read_text())


def test_timing_met_at_requested_clocks(build):
    out, report = build
    assert report["timing_met"] and build_report.problems(report) == []
    assert set(report["clocks"]) == {"sys", "ts", "eth_rx", "eth_tx"}
    # The PHY's receive clock, timed at 125 MHz on the net of its own pin; eth_tx is that net too.
    eth_nets = report["clocks"]["eth_rx"]["nets"]
    assert eth_nets and all(board_flow.eth_clock_net(0) in net for net in eth_nets)
    assert report["clocks"]["eth_tx"]["nets"] == eth_nets
    assert report["clocks"]["eth_rx"]["requested_mhz"] == board_flow.ETH_CLK_FREQ / 1e6
    assert report["clocks"]["sys"]["requested_mhz"] == colorlight_i5.SYS_CLK_FREQ / 1e6
    assert report["clocks"]["ts"]["requested_mhz"] == colorlight_i5.TS_CLK_FREQ / 1e6
    # Built for the rate its DAPLink bridge carries, stated with LiteX's divider (docs/boards.md).
    assert report["uart"]["baud"] == colorlight_i5.UART_BAUDRATE and report["uart"]["within_bridge"]
    # nextpnr's own post-route verdicts, read here from its log, agree with the report.
    log = (out / "gateware" / "nextpnr.log").read_text()
    verdicts = {}
    for net, achieved, verdict, constraint in re.findall(
            r"Max frequency for clock\s+'([^']+)':\s+([0-9.]+) MHz \((PASS|FAIL) at ([0-9.]+) MHz\)", log):
        verdicts[net] = (float(achieved), verdict, float(constraint))
    assert verdicts and all(v[1] == "PASS" for v in verdicts.values())
    for clock in report["clocks"].values():
        for net in clock["nets"]:
            achieved, _, constraint = verdicts[net]
            assert constraint == pytest.approx(clock["requested_mhz"], rel=2e-4)
            assert achieved >= clock["requested_mhz"]
        assert clock["achieved_mhz"] == min(verdicts[n][0] for n in clock["nets"])
    # The bitstream comes from the last seed tried; every earlier one missed a clock.
    tries = report["seed_tries"]
    assert tries and tries[-1]["seed"] == report["nextpnr_seed"]
    assert tries[-1]["achieved_mhz"] == {d: c["achieved_mhz"] for d, c in report["clocks"].items()}
    for earlier in tries[:-1]:
        assert any(earlier["achieved_mhz"][d] < c["requested_mhz"] for d, c in report["clocks"].items())


def test_bitstream_matches_report_and_device(build):
    out, report = build
    bit = board_flow.ROOT / report["bitstream"]["path"]
    data = bit.read_bytes()
    assert len(data) == report["bitstream"]["bytes"] > 100_000
    assert build_report.sha256(bit) == report["bitstream"]["sha256"]
    assert IDCODE_LFE5U_25F in data[:4096], "bitstream is not for an LFE5U-25F"
    assert report["device"] == "LFE5U-25F-6BG381C"


def test_ethernet_stated(build):
    _, report = build
    assert report["ethernet"] == {"phy": 0, "rx_clock_port": "eth_clocks0_rx", "ip": "192.168.1.50",
                                  "mac": "10:e2:d5:00:00:50", "icmp": False, "command_port": 5800,
                                  "stream_port": 5801, "record_words": 2, "max_records": 179}
    cost = report["ethernet_cost"]
    # Synthesized alone: the UDP/IP stack, the stream and the command bridge take thousands of LUT4s,
    # less than the whole rig does; the block RAMs are EthStream's payload FIFO (512 x 36) and the
    # command bridge's receive and send buffers (2048 x 9, 512 x 32): three, the stack's FIFOs are LUT
    # RAM. The LUT4 equivalents add up from the cell counts (a carry cell 2, a 16x4 LUT RAM 4).
    from gateware.ethcmd import RX_FIFO_BYTES
    from gateware.ethstream import PAYLOAD_FIFO_WORDS
    from gateware.standalone import LUT4_PER_CELL

    assert PAYLOAD_FIFO_WORDS == 512 and RX_FIFO_BYTES == 2048
    assert cost["block_rams"] == cost["cells"]["DP16KD"] == 3
    assert cost["lut4_equivalent"] == sum(cost["cells"].get(c, 0) * k for c, k in LUT4_PER_CELL.items())
    assert 1000 < cost["lut4_equivalent"] < report["resources"]["TRELLIS_COMB"]["used"]
    assert 0 < cost["flip_flops"] < report["resources"]["TRELLIS_FF"]["used"]
    assert cost["block_rams"] <= report["resources"]["DP16KD"]["used"]


def test_resources_plausible(build):
    _, report = build
    res = report["resources"]
    for bel in ("TRELLIS_COMB", "TRELLIS_FF", "DP16KD", "EHXPLLL", "TRELLIS_IO"):
        assert 0 < res[bel]["used"] <= res[bel]["available"], bel
    assert res["EHXPLLL"]["used"] == 1
    # clk25, reset, UART tx/rx, LED-less rig: 6 rig signals -> at least 10 pins.
    assert res["TRELLIS_IO"]["used"] >= 10


def test_build_identity_is_baked_in(build):
    """What IDENTIFY reports: the gateware string and the ts frequency, compiled into the firmware."""
    out, report = build
    soc_h = (out / "software" / "include" / "generated" / "soc.h").read_text()
    ts_hz = int(re.search(r"#define HILAT_TS_CLOCK_FREQUENCY (\d+)", soc_h).group(1))
    sys_hz = int(re.search(r"#define CONFIG_CLOCK_FREQUENCY (\d+)", soc_h).group(1))
    assert ts_hz == int(colorlight_i5.TS_CLK_FREQ) and sys_hz == int(colorlight_i5.SYS_CLK_FREQ)
    identity = report["gateware_identity"]
    assert identity == f"{BOARD} {report['git']}" and re.fullmatch(r"[0-9a-f]{10}(-dirty)?|unknown", report["git"])
    # The ROM image (32-bit little-endian words, one per line) holds the firmware with that string.
    words = (out / "gateware" / f"{BOARD}_rom.init").read_text().split()
    rom = b"".join(int(w, 16).to_bytes(4, "little") for w in words)
    assert identity.encode() + b"\0" in rom
