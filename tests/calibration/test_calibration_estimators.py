"""The calibration estimators and store, against inputs whose truth is known exactly.

The host-clock method gets a fake rig counter on a fake host clock with a known ppm and random round
trips; the 1PPS analysis gets pulse trains with a known ppm, jitter, missing and extra pulses; the
loopback pairing gets edge records with known delays.
"""

import json
import math
import random
import threading
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from fake_rig import FakeRig, identify
from hilat import calibration as cal
from hilat.cli import main
from hilat.link import protocol as p

TS_HZ = 50_000_000


# ---- host clock ---------------------------------------------------------------------------------

class FakeHost:
    """A host clock and a rig counter off by ``ppm``; each TIME_REQ takes a random round trip and the
    counter is latched at a random point inside it (``latch`` overrides: 0 = at sending, 1 = at
    receiving)."""

    def __init__(self, ppm, seed=1, rtt=(40e-6, 900e-6), latch=None):
        self.t = 1234.5
        self.ppm = ppm
        self.rng = random.Random(seed)
        self.rtt = rtt
        self.latch = latch

    def clock(self):
        return self.t

    def sleep(self, seconds):
        self.t += seconds

    def now(self):
        rtt = self.rng.uniform(*self.rtt)
        at = self.latch(self) if callable(self.latch) else self.rng.random()
        self.t += rtt * at
        tick = math.floor(self.t * TS_HZ * (1 + self.ppm * 1e-6))
        self.t += rtt * (1 - at)
        return tick


@pytest.mark.parametrize("ppm", [23.4, -151.0, 0.0, 612.5])
def test_host_clock_recovers_ppm_within_the_stated_bound(ppm):
    results = {}
    for duration in (10.0, 100.0, 1000.0):
        host = FakeHost(ppm, seed=int(duration))
        r = cal.host_clock_estimate(host.now, TS_HZ, duration, clock=host.clock, sleep=host.sleep)
        assert abs(r["ppm"] - ppm) <= r["uncertainty_ppm"], (duration, r)
        assert r["coverage"] == "bound" and "rtt_a" in r["basis"] and "duration" in r["basis"]
        assert r["readings_off_line"] == 0
        # The stated bound is exactly the stated basis.
        bound = ((r["rtt_a_s"] + r["rtt_b_s"]) / 2 + 1 / TS_HZ) / r["duration_s"] * 1e6
        assert r["uncertainty_ppm"] == pytest.approx(bound, rel=1e-3)
        results[duration] = r
    assert results[1000.0]["uncertainty_ppm"] < 1.0


def test_host_clock_bound_shrinks_with_duration():
    """With the same round trips, ten times the duration gives a tenth of the bound."""
    bounds = []
    for duration in (1.0, 10.0, 100.0):
        host = FakeHost(-75.0, rtt=(300e-6, 300e-6))
        r = cal.host_clock_estimate(host.now, TS_HZ, duration, clock=host.clock, sleep=host.sleep)
        assert abs(r["ppm"] + 75.0) <= r["uncertainty_ppm"]
        bounds.append(r["uncertainty_ppm"])
    assert bounds[0] == pytest.approx(300.0, rel=0.01)     # (300 us + 20 ns) / 1 s
    assert bounds[1] == pytest.approx(bounds[0] / 10, rel=0.01)
    assert bounds[2] == pytest.approx(bounds[0] / 100, rel=0.01)


def test_host_clock_bound_holds_and_is_tight_in_the_worst_case():
    """Latched at the very start of the first round trip and the very end of the last: the error
    reaches most of the bound, never more."""
    calls = []

    def latch(host):
        calls.append(host.t)
        return 0.0 if len(calls) <= 8 else 1.0   # the first end's 8 tries, then everything else
    host = FakeHost(50.0, rtt=(500e-6, 500e-6), latch=latch)
    r = cal.host_clock_estimate(host.now, TS_HZ, 10.0, clock=host.clock, sleep=host.sleep)
    error = abs(r["ppm"] - 50.0)
    assert error <= r["uncertainty_ppm"]
    assert error > 0.8 * r["uncertainty_ppm"]


def test_host_clock_against_the_simulator_is_called_implausible():
    """Simulated time runs ~80x slower than real time: the estimator says so and stores nothing."""
    host = FakeHost(1e6 * (1 / 80 - 1))
    with pytest.raises(cal.ImplausibleClock, match=r"looks like the simulator .* or a wrong ts_hz") as e:
        cal.host_clock_estimate(host.now, TS_HZ, 5.0, clock=host.clock, sleep=host.sleep)
    assert e.value.result["ppm"] == pytest.approx(-987500, abs=100)


def _clock_rig(ppm, t0):
    """A scripted rig whose TIME replies run ``ppm`` fast against the host's monotonic clock."""
    def script(receive, send):
        seq = 0
        while True:
            frames = receive()
            if frames is None:
                return
            for frame in frames:
                if isinstance(frame.msg, p.Hello):
                    send(identify().encode(0))
                    seq = 1
                elif isinstance(frame.msg, p.TimeReq):
                    tick = int((time.monotonic() - t0) * TS_HZ * (1 + ppm * 1e-6))
                    send(p.Time(frame.seq, tick).encode(seq))
                    seq += 1
    return FakeRig(script)


def test_calibrate_clock_against_host_through_the_cli(tmp_path, capsys):
    """`hilat calibrate clock --against host` over the wire protocol, stored, then shown by the next
    capture's calibration lookup."""
    with _clock_rig(250.0, time.monotonic() - 100.0) as rig:
        code = main(["calibrate", "clock", rig.url, "--against", "host", "--duration", "2s",
                     "--calibration-dir", str(tmp_path), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    clock = out["clock"]
    assert abs(clock["ppm"] - 250.0) <= clock["uncertainty_ppm"] < 500   # best of 8 local round trips < 1 ms
    stored = json.loads((tmp_path / (cal.identity_key(out["rig_identity"]) + ".json")).read_text())
    assert stored["clock"]["ppm"] == clock["ppm"] and stored["loopback"] is None
    applied = cal.for_rig(identify(), tmp_path)
    assert applied["ts_hz"] == pytest.approx(TS_HZ * (1 + clock["ppm"] * 1e-6))
    assert applied["offset_ticks"] == 0 and applied["warnings"] == []


def test_calibrate_clock_against_host_refuses_a_slow_counter(tmp_path, caplog):
    with _clock_rig(1e6 * (1 / 80 - 1), time.monotonic()) as rig:
        code = main(["calibrate", "clock", rig.url, "--against", "host", "--duration", "1s",
                     "--calibration-dir", str(tmp_path)])
    assert code == 1
    assert "looks like the simulator" in caplog.text and "Nothing stored" in caplog.text
    assert not list(tmp_path.iterdir())


# ---- 1PPS -----------------------------------------------------------------------------------------

def pulse_train(n, period, ppm, jitter=0, seed=1, t0=123_456):
    rng = np.random.default_rng(seed)
    k = np.arange(n)
    ideal = t0 + np.floor(k * period * (1 + ppm * 1e-6)).astype(np.int64)
    return ideal + (rng.integers(-jitter, jitter + 1, n) if jitter else 0)


@pytest.mark.parametrize("ppm,jitter", [(37.5, 0), (-12.25, 0), (3.0, 40), (-480.0, 400)])
def test_pps_recovers_ppm_within_uncertainty(ppm, jitter):
    ticks = pulse_train(300, 1_000_000, ppm, jitter)
    r = cal.analyse_pps(ticks, 1_000_000)
    assert r.missing == [] and r.extra == [] and len(r.accepted) == 300
    assert abs(r.ppm - ppm) <= r.uncertainty_ppm
    # The stated uncertainty follows the scatter: jitter widens it, quantization is its floor.
    assert r.uncertainty_ppm >= 2 * (1 / math.sqrt(12)) / 1_000_000 / math.sqrt(300 ** 3 / 12) * 1e6 * 0.99


def test_pps_missing_and_extra_pulses_are_named_and_excluded():
    period = 1_000_000
    ticks = pulse_train(120, period, 21.0, jitter=30)
    dropped = [10, 40, 41, 77]                        # 2x and 3x intervals
    extra = [int(ticks[20]) + period // 3, int(ticks[60]) + 7 * period // 10,
             int(ticks[90]) + 2000]                   # the last is within 1 % of a real pulse
    edges = np.sort(np.concatenate([np.delete(ticks, dropped), extra]))
    r = cal.analyse_pps(edges, period)
    assert [n for n, _ in r.missing] == dropped
    for n, expected in r.missing:
        assert abs(expected - ticks[n]) <= 60          # named with where it should have been
    assert sorted(t for t, _ in r.extra) == sorted(extra)
    used = {t for _, t in r.accepted}
    assert used.isdisjoint(extra) and int(ticks[90]) in used   # the real pulse kept, not the intruder
    assert len(r.accepted) == 120 - len(dropped)
    assert abs(r.ppm - 21.0) <= r.uncertainty_ppm
    # Never averaged in: the same fit as on the clean pulses alone.
    clean = cal.analyse_pps(np.delete(ticks, dropped), period)
    assert r.ppm == pytest.approx(clean.ppm, abs=1e-9)
    stored = cal.pps_calibration(r, TS_HZ, 0.02, 4, "socket://x", len(edges))
    assert [m["pulse"] for m in stored["missing"]] == dropped and len(stored["extra"]) == 3


def test_pps_extra_edges_before_the_first_pulse():
    ticks = pulse_train(50, 10_000, 100.0)
    edges = np.sort(np.concatenate([ticks, [ticks[0] - 4321, ticks[0] - 1234]]))
    r = cal.analyse_pps(edges, 10_000)
    assert sorted(t for t, _ in r.extra) == [ticks[0] - 4321, ticks[0] - 1234]
    assert r.missing == [] and abs(r.ppm - 100.0) <= r.uncertainty_ppm


def test_pps_bad_signals_are_refused_clearly():
    with pytest.raises(cal.CalibrationError, match=r"no pulses on capture channel 4: connect the 1PPS"):
        cal.pps_calibration(cal.analyse_pps([], 50_000_000), TS_HZ, 1.0, 4, "u", 0)
    noise = np.cumsum(np.random.default_rng(3).integers(1000, 900_000, 40))
    with pytest.raises(cal.CalibrationError, match=r"is --pps-period right"):
        cal.pps_calibration(cal.analyse_pps(noise, 1_000_000), TS_HZ, 0.02, 4, "u", len(noise))
    one_pps = pulse_train(40, 1_000_000, 0.0)          # a 1PPS said to be a 2PPS
    with pytest.raises(cal.CalibrationError, match=r"\(0.01 s = 500000 ticks\) apart: is --pps-period right"):
        cal.pps_calibration(cal.analyse_pps(one_pps, 500_000), TS_HZ, 0.01, 4, "u", len(one_pps))
    dropped = sorted(set(range(4, 98, 5)) | set(range(50, 90)))       # 51 of 99
    sparse = np.delete(pulse_train(99, 1_000_000, 0.0), dropped)
    r = cal.analyse_pps(sparse, 1_000_000)
    assert [n for n, _ in r.missing] == dropped
    with pytest.raises(cal.CalibrationError, match=r"51 missing and 0 extra pulses against 48 good ones"):
        cal.pps_calibration(r, TS_HZ, 0.02, 4, "u", len(sparse))


# ---- loopback -------------------------------------------------------------------------------------

def loopback_records(delays, period=2000, width=50, start=10_000, loop_channel=4):
    records = []
    for k, d in enumerate(delays):
        s = start + k * period
        edges = [(s, 1, 1)]
        if d is not None:
            edges += [(s + d, 1 << loop_channel, 1 << loop_channel), (s + width + d, 1 << loop_channel, 0)]
        edges.append((s + width, 1, 0))
        for tick, mask, level in sorted(edges):
            records.append((tick, mask, level))
    return records


def test_loopback_offset_is_the_median_and_the_spread_is_reported():
    delays = [7] * 50 + [8] * 30 + [6] * 5 + [12]
    r = cal.loopback_delays(loopback_records(delays), 0, 4)
    loop = cal.loopback_calibration(r, TS_HZ, 0, 4, {}, "u")
    assert loop["offset_ticks"] == 7 and loop["min_ticks"] == 6 and loop["max_ticks"] == 12
    assert loop["n"] == len(delays) and loop["missing"] == 0
    assert loop["histogram"] == {"6": 5, "7": 50, "8": 30, "12": 1}
    assert loop["std_ticks"] == pytest.approx(np.std(delays, ddof=1))
    assert loop["fall"]["median_ticks"] == 7


def test_no_loopback_edges_says_what_to_wire():
    r = cal.loopback_delays(loopback_records([None] * 20), 0, 4)
    with pytest.raises(cal.CalibrationError, match=r"no edges on capture channel 4 during 20 stimulus pulses.*"
                       r"Wire stimulus output STIM0 to the SPARE capture input \(channel 4\)"):
        cal.loopback_calibration(r, TS_HZ, 0, 4, {}, "u")


def test_intermittent_loopback_is_refused():
    r = cal.loopback_delays(loopback_records([3] * 95 + [None] * 5), 0, 4)
    with pytest.raises(cal.CalibrationError, match=r"5 of 100 stimulus pulses never reached channel 4"):
        cal.loopback_calibration(r, TS_HZ, 0, 4, {}, "u")


# ---- store and what a capture applies --------------------------------------------------------------

def _loop(made, offset=5):
    return {"offset_ticks": offset, "min_ticks": offset, "max_ticks": offset + 1, "std_ticks": 0.5, "n": 100,
            "mean_ticks": offset + 0.5, "stimulus_channel": 0, "capture_channel": 4, "made": made}


def _clock(made, ppm=12.5):
    return {"method": "pps", "ppm": ppm, "uncertainty_ppm": 0.01, "coverage": "k=2", "channel": 4, "made": made}


def test_store_keeps_parts_per_identity_and_applies_them(tmp_path):
    ident = identify()
    identity = cal.rig_identity(ident)
    store = cal.Store(tmp_path)
    now = datetime.now(timezone.utc)
    path, previous = store.update(identity, "loopback", _loop(now.isoformat()))
    assert previous is None and path.parent == tmp_path and path.name.startswith("fake-rig-50000000Hz-")
    store.update(identity, "clock", _clock(now.isoformat()))
    applied = cal.for_rig(ident, tmp_path)
    assert applied["applied"] and applied["offset_ticks"] == 5
    assert applied["ts_hz"] == pytest.approx(TS_HZ * (1 + 12.5e-6))
    assert applied["warnings"] == []
    text = "\n".join(applied["statement"])
    assert "1 tick = 20 ns" in text and "+12.5 ppm" in text and "5 ticks" in text
    assert "rig jitter (loopback): 5..6 ticks" in text and "min old" in text
    # A second loopback replaces the first and keeps the clock.
    _, previous = store.update(identity, "loopback", _loop(now.isoformat(), offset=6))
    assert previous["offset_ticks"] == 5
    assert cal.for_rig(ident, tmp_path)["offset_ticks"] == 6
    assert cal.for_rig(ident, tmp_path)["clock"]["ppm"] == 12.5


def test_uncalibrated_statement_says_so(tmp_path):
    applied = cal.for_rig(identify(), tmp_path)
    assert not applied["applied"] and applied["offset_ticks"] == 0 and applied["ts_hz"] == TS_HZ
    text = "\n".join(applied["statement"])
    assert "1 tick = 20 ns" in text and "clock: not calibrated" in text and "rig offset: not calibrated" in text


def test_statement_gives_the_sub_tick_resolution(tmp_path):
    """A rig sampling four times a tick: the statement gives the quantization of input edges (a
    quarter tick) and that results are in sub-ticks; a rig sampling once a tick gets no such line."""
    ident = identify()
    ident.samples_per_tick = 4
    text = "\n".join(cal.for_rig(ident, tmp_path)["statement"])
    assert "each input is sampled 4 times a tick, so input edges are quantized to 1/4 tick (5 ns)" in text
    assert "a latency is +-1 sub-tick" in text
    assert "sub-tick: times and latencies are in sub-ticks of 5 ns (1/4 tick)" in text
    once = "\n".join(cal.for_rig(identify(), tmp_path)["statement"])
    assert "sub-tick" not in once and "every edge is quantized to 1 tick (a latency is +-1 tick)" in once


def test_stale_calibration_warns(tmp_path):
    ident = identify()
    old = (datetime.now(timezone.utc) - timedelta(days=45)).isoformat()
    cal.Store(tmp_path).update(cal.rig_identity(ident), "loopback", _loop(old))
    applied = cal.for_rig(ident, tmp_path)
    assert applied["offset_ticks"] == 5
    assert len(applied["warnings"]) == 1 and "loopback calibration is stale" in applied["warnings"][0]
    assert any(line.startswith("WARNING: loopback calibration is stale") for line in applied["statement"])


def test_calibration_of_another_identity_warns(tmp_path):
    """New gateware on the same board: the old calibration is the best there is, applied with a warning."""
    old_rig = identify()
    old_rig.gateware = "fake 0123456789"
    cal.Store(tmp_path).update(cal.rig_identity(old_rig), "loopback", _loop(datetime.now(timezone.utc).isoformat()))
    new_rig = identify()
    new_rig.gateware = "fake abcdef0123"
    applied = cal.for_rig(new_rig, tmp_path)
    assert applied["offset_ticks"] == 5
    assert applied["rig_identity"]["gateware"] == "fake 0123456789"
    assert "another rig identity" in applied["warnings"][0] and "fake abcdef0123" in applied["warnings"][0]
    # Another board entirely: nothing applies.
    other_board = identify()
    other_board.gateware = "arty 0123456789"
    assert not cal.for_rig(other_board, tmp_path)["applied"]


def test_broken_calibration_file_does_not_stop_a_capture(tmp_path):
    ident = identify()
    cal.Store(tmp_path).path(cal.rig_identity(ident)).write_text("{not json")
    applied = cal.for_rig(ident, tmp_path)
    assert not applied["applied"] and "unreadable" in applied["warnings"][0]


def test_calibration_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HILAT_CALIBRATION_DIR", str(tmp_path / "env"))
    assert cal.resolve_dir(None) == tmp_path / "env"
    assert cal.resolve_dir(tmp_path / "flag") == tmp_path / "flag"
    monkeypatch.delenv("HILAT_CALIBRATION_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert cal.resolve_dir(None) == tmp_path / "cfg" / "hilat" / "calibration"


def test_store_writes_are_atomic(tmp_path):
    """Concurrent updates of one identity never leave a half-written file."""
    identity = cal.rig_identity(identify())
    store = cal.Store(tmp_path)
    now = datetime.now(timezone.utc).isoformat()

    def writer(offset):
        for _ in range(20):
            store.update(identity, "loopback", _loop(now, offset))
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(1, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.load(identity)["loopback"]["offset_ticks"] in (1, 2, 3)


def test_capture_subtracts_the_offset_from_stimulus_latencies_only(tmp_path):
    """Offset 100 ticks: stimulus->ISR and stimulus->task lose 100, ISR->task keeps its value, and a
    response sooner than the rig's own delay is counted (by the capture's streaming pairing) and
    warned about."""
    from fake_rig import capture_script
    from hilat.acquisition.capture import Capture
    from hilat.acquisition.settings import CaptureSettings, StimulusSettings

    ident = identify()
    cal.Store(tmp_path).update(cal.rig_identity(ident), "loopback",
                               _loop(datetime.now(timezone.utc).isoformat(), offset=100))
    # ISR 60 and 300 ticks after its stimulus; the task (channel 3) 200 and 400 ticks after.
    task = [(200, 0b1000, 0b1000), (230, 0b1000, 0), (1500 + 400, 0b1000, 0b1000), (1500 + 430, 0b1000, 0)]
    settings = CaptureSettings(count=2, calibration_dir=tmp_path, out_dir=tmp_path / "runs", progress=False,
                               stimulus=StimulusSettings(mode="periodic", period=1500, jitter=0))
    with FakeRig(capture_script((60, 300), extra_edges=task)) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error is None
    pairing = capture.pairing()
    assert pairing.isr_latency.tolist() == [-40, 200]
    assert pairing.task_latency.tolist() == [100, 300]
    assert pairing.isr_to_task.tolist() == [140, 100]
    meta = json.loads((capture.run_dir / "meta.json").read_text())["calibration"]
    assert meta["offset_ticks"] == 100 and meta["responses_before_offset"] == 1
    assert "1 responses came sooner than the rig's own loopback delay (100 ticks)" in meta["warnings"][-1]
    assert meta["statement"][-1].startswith("WARNING: 1 responses came sooner")
    assert "WARNING: 1 responses came sooner" in (capture.run_dir / "summary.txt").read_text()


@pytest.mark.parametrize("argv,message", [
    (["--loopback", "3", "--pps-period", "1ms"], "both drive the SPARE input"),
    (["--pps-ppm", "3"], "the --pps-* options need --pps-period"),
    (["--loopback-jitter", "2"], "--loopback-jitter needs --loopback"),
    (["--loopback", "250", "--loopback-jitter", "10"], "must be <= 255 ticks"),
])
def test_sim_calibration_sources_refuse_contradictions(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(["sim", *argv])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_sim_calibration_sources_become_plusargs():
    # hilat sim's options become the launcher's settings (hilat.cli), the DUT model's plusargs there.
    simrig = pytest.importorskip("targets.simrig", reason="the simulated rig's launcher needs the gateware extra")
    from hilat.cli import build_parser
    from hilat.cli.capture import _sim_settings

    args = build_parser().parse_args(["sim", "--pps-period", "1ms", "--pps-ppm", "-42.125", "--pps-jitter", "5",
                                      "--pps-missing-every", "10", "--pps-extra-every", "7"])
    assert simrig.calibration_sources(_sim_settings(args)) == {
        "pps_period": 50_000, "pps_ppb": -42_125, "pps_jitter": 5, "pps_missing_every": 10, "pps_missing_run": 1,
        "pps_extra_every": 7}
    args = build_parser().parse_args(["sim", "--loopback", "7"])
    assert simrig.calibration_sources(_sim_settings(args)) == {"loopback": 1, "loopback_delay": 7,
                                                               "loopback_jitter": 0}
