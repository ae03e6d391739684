"""Bad input gets a clear error and loses nothing: ports, silent rigs, versions, dropped links, CLI."""

import subprocess
import sys

import pytest
from fake_rig import FakeRig, PtyRig, capture_script
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.cli import main
from hilat.link import protocol as p
from hilat.link.rig import Rig, RigError
from hilat.link.transport import Transport, TransportError


def test_wrong_port_names_port_and_cause():
    with pytest.raises(TransportError, match=r"cannot open /dev/ttyNOSUCH0: .*No such file"):
        Transport("/dev/ttyNOSUCH0")
    with pytest.raises(TransportError, match=r"cannot open socket://127.0.0.1:1: .*[Cc]onnection refused"):
        Transport("socket://127.0.0.1:1")


def test_second_hilat_on_the_same_port_is_refused():
    with FakeRig(lambda receive, send: receive()) as rig, Transport(rig.url):
        with pytest.raises(TransportError, match=r"in use by another hilat \(pid \d+\)"):
            Transport(rig.url)


def test_no_answer_to_hello_times_out_clearly():
    with FakeRig(lambda receive, send: receive() and receive()) as rig, Transport(rig.url) as t:
        with pytest.raises(RigError, match=r"no answer to HELLO from socket://.* within 0.5 s"):
            Rig(t, hello_timeout=0.5).hello()


def test_silence_on_a_serial_port_names_the_rate_and_the_boards():
    """A rig at another rate reads as silence (a Colorlight i5 at 2 Mbaud opened at 3): the error names
    the rate tried and each board's."""
    with PtyRig(lambda receive, send: receive() and receive()) as rig, Transport(rig.url) as t:
        with pytest.raises(RigError, match=r"no answer to HELLO from /dev/\S+ within 0.5 s at 3000000 baud "
                                           r"\(--board colorlight_i5 is 2000000, --board colorlight_i9 is 2000000, "
                                           r"--board ulx3s is 3000000; "
                                           r"or --baud\)"):
            Rig(t, hello_timeout=0.5).hello()


def test_a_newer_rig_is_refused_naming_both_versions():
    # A rig of version 6 answers our HELLO in its own version (as ours answers a version-1 host).
    def script(receive, send):
        receive()
        send(p.encode_frame(p.MSG_ACK, 0, p.Ack(0, p.ACK_VERSION, "the rig speaks protocol version 6").body(),
                            version=6))
        receive()
    with FakeRig(script) as rig, Transport(rig.url) as t:
        with pytest.raises(RigError, match=r"speaks protocol version 6, this hilat speaks version 5"):
            Rig(t, hello_timeout=0.5).hello()


def test_a_version_1_rig_is_refused_naming_both_versions():
    """A version-1 rig ignores a HELLO of version 5 (v1 firmware sends nothing to a frame of another
    version before a session): the host asks again in version 1 and names both versions."""
    def v1_rig(receive, send):
        while (data := receive()) is not None:
            for frame in data.split(b"\x00"):
                try:
                    version, msg_type, seq, _ = p.decode_payload(frame)
                except p.ProtocolError:
                    continue
                if version == 1 and msg_type == p.MSG_HELLO:  # v1 IDENTIFY: 19 fixed bytes + 2 str
                    send(p.encode_frame(p.MSG_IDENTIFY, 0, bytes([1]) + bytes(18) + b"\x00\x00", version=1))
    with FakeRig(v1_rig, raw=True) as rig, Transport(rig.url) as t:
        with pytest.raises(RigError, match=r"speaks protocol version 1, this hilat speaks version 5"):
            Rig(t, hello_timeout=0.5).hello()


def test_link_dropped_mid_capture_keeps_raw_bytes_and_events(tmp_path):
    """The rig acknowledges, streams 3 stimuli with responses, then the link drops."""
    settings = CaptureSettings(count=10, out_dir=tmp_path, progress=False, label="dropped",
                               stimulus=StimulusSettings(mode="periodic", period=1500, jitter=0))
    with FakeRig(capture_script((60, 61, 62), drop_link=True)) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error and "link to socket://" in capture.error and "lost" in capture.error
    assert (capture.run_dir / "raw.bin").read_bytes() == bytes(rig.sent)
    pairing = capture.pairing()
    # The last window runs past the drop: what came after is not known, so that stimulus is neither
    # a latency nor a miss (its ISR rise was seen, but a second one, or its task, may have been lost).
    assert list(pairing.isr_latency) == [60, 61, -1] and list(pairing.unknown_of("stim_to_isr")) == [0, 0, 1]
    summary = (capture.run_dir / "summary.json").read_text()
    assert '"unknown": 1' in summary
    assert capture.load().edge_count == 12
    assert "link to" in (capture.run_dir / "meta.json").read_text()


@pytest.mark.parametrize("argv, message", [
    (["capture"], "the following arguments are required: url"),
    (["capture", "loop://", "--period", "abc"], "not a duration"),
    (["capture", "loop://", "--count", "-3"], "must be > 0"),
    (["capture", "loop://", "--glitch", "-1"], "must be >= 0"),
    (["frobnicate"], "invalid choice"),
    (["demo", "--dut", "isr_base"], "NAME=NUMBER"),
])
def test_malformed_cli_options_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_runtime_error_is_one_line_not_a_traceback():
    result = subprocess.run([sys.executable, "-m", "hilat.cli", "info", "socket://127.0.0.1:1"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "cannot open socket://127.0.0.1:1" in result.stderr and "Traceback" not in result.stderr
