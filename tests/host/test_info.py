"""`hilat info` shows the build identity IDENTIFY carries: board, git hash, clocks."""

import dataclasses
import json

import pytest
from fake_rig import FakeRig, identify
from hilat.cli import main
from hilat.link import protocol as p


def rig_identifying_as(ident):
    def script(receive, send):
        seq = 0
        while (frames := receive()) is not None:
            for frame in frames:
                if isinstance(frame.msg, p.Hello):
                    send(ident.encode(seq))
                elif isinstance(frame.msg, p.StatusReq):
                    send(p.Status(0, 0, 0, 0, [0] * 6, [0, 0]).encode(seq))
                seq += 1
    return FakeRig(script)


BOARD_IDENT = dataclasses.replace(identify(), ts_hz=150_000_000, sys_hz=50_000_000,
                                  gateware="colorlight_i5 0123abcdef-dirty", uart_baud=2_000_000)


def test_info_prints_board_git_hash_and_clocks(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HILAT_CALIBRATION_DIR", str(tmp_path / "calibration"))
    with rig_identifying_as(BOARD_IDENT) as rig:
        assert main(["info", rig.url]) == 0
    out = capsys.readouterr().out
    assert "board      colorlight_i5" in out
    assert "gateware   git 0123abcdef-dirty  (built from uncommitted changes)" in out
    assert "ts 150 MHz nominal (1 tick = 6.66667 ns, clock not calibrated), sys 50 MHz" in out


def test_info_json_has_identity_fields(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HILAT_CALIBRATION_DIR", str(tmp_path / "calibration"))
    with rig_identifying_as(BOARD_IDENT) as rig:
        assert main(["info", rig.url, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["board"], info["git_hash"], info["ts_hz"], info["sys_hz"]) == \
        ("colorlight_i5", "0123abcdef-dirty", 150_000_000, 50_000_000)
    assert info["tick_ns"] == pytest.approx(1e9 / 150e6)


def test_info_shows_an_unstructured_gateware_string_as_is(capsys):
    with rig_identifying_as(dataclasses.replace(identify(), gateware="custom")) as rig:
        assert main(["info", rig.url]) == 0
    out = capsys.readouterr().out
    assert "gateware   custom" in out and "board" not in out


def test_info_states_the_sampling_of_a_sub_tick_rig(capsys, tmp_path, monkeypatch):
    """A rig sampling its inputs four times a tick says so, with the spacing of its samples; a rig
    sampling once a tick says that too."""
    monkeypatch.setenv("HILAT_CALIBRATION_DIR", str(tmp_path / "calibration"))
    subtick = dataclasses.replace(BOARD_IDENT, ts_hz=135_000_000, samples_per_tick=4,
                                  capabilities=BOARD_IDENT.capabilities | p.CAP_SUBTICK)
    with rig_identifying_as(subtick) as rig:
        assert main(["info", rig.url]) == 0
    out = capsys.readouterr().out
    assert "sampling   each input 4 times a tick: 1.85 ns between samples (sub-tick positions in every record)" in out
    assert "sub-tick" in out.split("features")[1].splitlines()[0]
    with rig_identifying_as(subtick) as rig:
        assert main(["info", rig.url, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["samples_per_tick"] == 4 and info["sample_ns"] == pytest.approx(1e9 / 135e6 / 4)
    with rig_identifying_as(BOARD_IDENT) as rig:
        assert main(["info", rig.url]) == 0
    assert "sampling   each input 1 time a tick: 6.67 ns between samples\n" in capsys.readouterr().out


def test_info_states_a_rigs_tdc(capsys, tmp_path, monkeypatch):
    """A rig with a TDC on its first inputs (IDENTIFY's tdc_inputs, tdc_taps: protocol 5) says so;
    one without has no TDC line and "tdc" null."""
    monkeypatch.setenv("HILAT_CALIBRATION_DIR", str(tmp_path / "calibration"))
    tdc = dataclasses.replace(BOARD_IDENT, tdc_inputs=3, tdc_taps=256)
    with rig_identifying_as(tdc) as rig:
        assert main(["info", rig.url]) == 0
    out = capsys.readouterr().out
    assert (f"tdc        inputs 0..2 of {tdc.n_inputs}: carry-chain TDCs of 256 taps, 8 bits of code per input "
            "in every record (docs/tdc.md)") in out
    with rig_identifying_as(tdc) as rig:
        assert main(["info", rig.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tdc"] == {"inputs": 3, "taps": 256, "code_bits": 8}
    with rig_identifying_as(BOARD_IDENT) as rig:
        assert main(["info", rig.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tdc"] is None


@pytest.mark.parametrize("uart_baud, line", [
    (2_000_000, "link       UART 2000000 baud (the gateware's --uart-baudrate)"),
    (0, "link       no serial line (the simulator's UART is bridged to TCP)"),
])
def test_info_states_the_uart_rate_the_rig_was_built_for(uart_baud, line, capsys, tmp_path, monkeypatch):
    """IDENTIFY's uart_baud: the rate of the bitstream loaded (a Colorlight i5's 2 Mbaud), none on the
    simulator, and a rig built before it was sent says so rather than guessing."""
    monkeypatch.setenv("HILAT_CALIBRATION_DIR", str(tmp_path / "calibration"))
    with rig_identifying_as(dataclasses.replace(BOARD_IDENT, uart_baud=uart_baud)) as rig:
        assert main(["info", rig.url]) == 0
    assert f"  {line}\n" in capsys.readouterr().out
    with rig_identifying_as(dataclasses.replace(BOARD_IDENT, uart_baud=uart_baud)) as rig:
        assert main(["info", rig.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["uart_baud"] == uart_baud
