"""The CLI's wording where it used to mislead, and options that reach the transport (--baud)."""

import json
import termios

import pytest
from fake_rig import FakeRig, PtyRig, capture_script
from hilat import calibration
from hilat.cli import main


def test_no_calibration_run_says_it_was_asked_for(tmp_path, capsys):
    # Before: "calibration: none applied (no calibration directory given)" though the user asked.
    with FakeRig(capture_script()) as rig:
        code = main(["capture", rig.url, "--count", "3", "--period", "1500", "--jitter", "0", "--mode", "periodic",
                     "--out", str(tmp_path), "--no-progress", "--no-calibration"])
    assert code == 0
    out = capsys.readouterr().out
    assert "calibration: none applied (--no-calibration: the user asked for none)" in out
    assert "no calibration directory given" not in out
    (run_dir,) = tmp_path.iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert "calibration: none applied (--no-calibration: the user asked for none)" in meta["calibration"]["statement"]
    assert "no calibration directory given" not in (run_dir / "summary.txt").read_text()


def test_capture_with_calibration_dir_names_it(tmp_path, capsys):
    with FakeRig(capture_script()) as rig:
        code = main(["capture", rig.url, "--count", "3", "--period", "1500", "--jitter", "0", "--mode", "periodic",
                     "--out", str(tmp_path / "runs"), "--no-progress", "--calibration-dir", str(tmp_path / "cal")])
    assert code == 0
    out = capsys.readouterr().out
    assert f"calibration: none applied (none stored for this rig in {tmp_path / 'cal'})" in out
    assert "stimulus -> ISR entry" in out


def _loopback_result():
    # 100 pulses, every copy 7 ticks later (edge records as the rig sends them).
    records = []
    for k in range(100):
        t = 10_000 + 5000 * k
        records += [(t, 0b1, 0b1), (t + 7, 0b10000, 0b10001), (t + 100, 0b1, 0b10000), (t + 107, 0b10000, 0)]
    return calibration.loopback_delays(records, 0, 4)


@pytest.mark.parametrize("store", [True, False])
def test_loopback_says_whether_the_offset_will_be_applied(store, tmp_path, capsys, monkeypatch):
    # Before: --no-store said the offset is "subtracted ... from now on" though nothing was stored.
    monkeypatch.setattr(calibration, "run_loopback", lambda *a, **k: _loopback_result())
    argv = ["calibrate", "loopback", "URL", "--calibration-dir", str(tmp_path)] + ([] if store else ["--no-store"])
    with FakeRig(capture_script()) as rig:
        argv[2] = rig.url
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "rig offset    7 ticks (140 ns)" in out
    if store:
        assert "subtracted from stimulus->response latencies from now on" in out and "stored in " in out
        assert len(list(tmp_path.iterdir())) == 1
    else:
        assert "from now on" not in out and "stored in" not in out
        assert "not stored (--no-store): later captures do not subtract it" in out
        assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv,speed", [([], termios.B3000000), (["--baud", "115200"], termios.B115200),
                                        (["--baud", "921600"], termios.B921600),
                                        (["--board", "colorlight_i5"], termios.B2000000),
                                        (["--board", "ulx3s"], termios.B3000000),
                                        (["--board", "colorlight_i5", "--baud", "115200"], termios.B115200)])
def test_baud_reaches_the_serial_port(argv, speed, capsys):
    # Before: every command opened the port at 3 Mbaud, so a board built with another
    # --uart-baudrate, or a Colorlight i5 (its DAPLink bridge tops out at 2.25 Mbaud), could not be
    # reached. --board picks the board's rate; --baud decides over it.
    with PtyRig(capture_script()) as rig:
        assert main(["info", rig.url, "--json", *argv]) == 0
    assert json.loads(capsys.readouterr().out)["gateware"] == "fake rig"
    assert rig.line_speeds and set(rig.line_speeds) == {(speed, speed)}


@pytest.mark.parametrize("command", [["info", "URL"], ["capture", "URL"], ["calibrate", "loopback", "URL"],
                                     ["calibrate", "clock", "URL", "--against", "host"]])
def test_every_command_that_opens_a_rig_takes_baud(command, monkeypatch):
    from hilat import api

    opened = []
    # every command goes through the Python API's Rig, which opens its own transport
    monkeypatch.setattr(api.Rig, "_transport", lambda rig: opened.append((rig.url, rig.baud)) or _refuse())
    with pytest.raises(SystemExit):
        main([*command, "--baud", "57600"])
    assert opened == [("URL", 57600)]


@pytest.mark.parametrize("command", [["info", "URL"], ["capture", "URL"], ["calibrate", "loopback", "URL"]])
def test_board_sets_the_baud_of_every_command_that_opens_a_rig(command, monkeypatch):
    from hilat import api

    opened = []
    monkeypatch.setattr(api.Rig, "_transport", lambda rig: opened.append((rig.url, rig.baud)) or _refuse())
    with pytest.raises(SystemExit):
        main([*command, "--board", "colorlight_i5"])
    assert opened == [("URL", 2_000_000)]


def test_board_must_be_known(capsys):
    with pytest.raises(SystemExit) as e:
        main(["info", "/dev/ttyUSB0", "--board", "colorlight_i7"])
    assert e.value.code == 2 and "invalid choice: 'colorlight_i7'" in capsys.readouterr().err


def _refuse():
    raise SystemExit(3)


def test_baud_must_be_a_positive_number(capsys):
    with pytest.raises(SystemExit) as e:
        main(["info", "/dev/ttyUSB0", "--baud", "fast"])
    assert e.value.code == 2 and "--baud: not a whole number: 'fast'" in capsys.readouterr().err


def test_glitch_filter_beyond_the_rigs_maximum_is_refused(tmp_path, caplog):
    # The limit is the rig's (IDENTIFY's glitch_max), not a number in the host.
    with FakeRig(capture_script()) as rig:
        code = main(["capture", rig.url, "--count", "3", "--period", "1500", "--jitter", "0", "--mode", "periodic",
                     "--out", str(tmp_path), "--no-progress", "--glitch", "16"])
    assert code == 1 and "glitch filter of 16 ticks: this rig's longest is 15 ticks" in caplog.text


def test_capture_on_a_rig_with_ten_channels(tmp_path):
    """A board with 8 inputs: 2-byte masks on the wire; edges on in7 (channel 9) are recorded as
    channel 9, and the pairing (roles from the rig's IDENTIFY) is unchanged."""
    in7 = 1 << 9
    extra = [(700, in7, in7), (720, in7, 0)]
    with FakeRig(capture_script((60, 61, 62), n_inputs=8, extra_edges=extra)) as rig:
        code = main(["capture", rig.url, "--count", "3", "--period", "1500", "--jitter", "0", "--mode", "periodic",
                     "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    from hilat.rundir.reader import load_run

    run = load_run(run_dir)
    assert (run.chans == 9).sum() == 2
    assert run.pairing.isr_latency.tolist() == [60, 61, 62]
    assert run.roles.names[9] == "in7" and run.roles.label(9) == "in7"


def test_roles_moved_and_an_active_low_isr_pin(tmp_path):
    """--role isr=in4 --active-low in4: the ISR is the falling edge of in4 (channel 6); the run
    directory keeps the roles, so a later report pairs the same way."""
    in4 = 1 << 6
    extra = []
    for k in range(3):
        extra += [(1500 * k + 80, in4, 0), (1500 * k + 100, in4, in4)]  # pulled low on entry
    with FakeRig(capture_script((60, 61, 62), n_inputs=8, extra_edges=extra)) as rig:
        code = main(["capture", rig.url, "--count", "3", "--period", "1500", "--jitter", "0", "--mode", "periodic",
                     "--out", str(tmp_path), "--no-progress", "--role", "isr=in4", "--active-low", "in4"])
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    from hilat.rundir.reader import load_run

    run = load_run(run_dir)
    assert run.roles.isr == 6 and run.roles.active_low == (6,)
    assert run.pairing.isr_latency.tolist() == [80, 80, 80]
    assert run.pairing.isr_duration.tolist() == [20, 20, 20]   # low from 80 to 100


@pytest.mark.parametrize("argv,message", [
    (["--role", "isr=in9"], "no channel 'in9' on this rig"),
    (["--role", "isr=stim1"], "stim1 cannot be the isr: it is an output"),
    (["--role", "stimulus=in0"], "in0 cannot be the stimulus: the stimulus must be an output"),
    (["--role", "isr=in1"], "two roles on one channel: isr=in1, task=in1"),
    (["--role", "frob=in1"], "unknown role 'frob'"),
    (["--active-low", "stim0"], "stim0 is a stimulus output"),
    (["--role", "isr"], "a role is ROLE=CHANNEL"),
    (["--measure", "a=in0..in9"], "no channel 'in9' on this rig"),
    (["--measure", "a=in0:up..in1"], "the edge is rise or fall, not 'up'"),
    (["--measure", "a=in0..in0"], "from an edge to the same edge is a period: use period:in0"),
    (["--measure", "Bad=in0..in1"], "lower-case letters, digits and _"),
    (["--measure", "stim_to_isr=in0..in1"], "measurement name 'stim_to_isr' is taken"),
    (["--measure", "a=in0..in1", "--measure", "a=in1..in2"], "a measurement name is given twice"),
    (["--measure", "a=in0..in1@0"], "the deadline must be > 0"),
    (["--measure", "a=in0"], "SPEC is A..B[@DEADLINE], period:A or width:A"),
    (["--no-stimulus"], "--no-stimulus measures nothing by itself"),
    (["--also-fire", "in0"], "in0 is an input: only stimulus outputs fire"),
    (["--also-fire", "stim0"], "stim0 fires already"),
    (["--also-fire", "stim1:perod=5"], "unknown stimulus setting(s) perod for stim1"),
    (["--also-fire", "stim1:period=fast"], "period='fast' is not a whole number of ticks"),
])
def test_wrong_roles_measures_and_stimuli_are_usage_errors(argv, message, capsys):
    with FakeRig(capture_script()) as rig, pytest.raises(SystemExit) as e:
        main(["capture", rig.url, "--count", "3", "--no-progress", *argv])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_a_defined_interval_on_a_fake_rig(tmp_path):
    """--measure with a deadline: the ISR rises 60..62 ticks after each stimulus, so a 61-tick
    deadline turns the last one into a miss; the run keeps the definition for later reports."""
    with FakeRig(capture_script((60, 61, 62))) as rig:
        code = main(["capture", rig.url, "--count", "3", "--period", "1500", "--jitter", "0", "--mode", "periodic",
                     "--out", str(tmp_path), "--no-progress", "--measure", "quick=stimulus..isr@62"])
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    from hilat.rundir.reader import load_run

    run = load_run(run_dir)
    assert run.measurements.latency("quick").tolist() == [60, 61, -1]
    assert run.measurements.latency("stim_to_isr").tolist() == [60, 61, 62]
