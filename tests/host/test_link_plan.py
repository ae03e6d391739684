"""The capture's plan of the raw edges against the link: wire bytes per record as protocol.md gives
them, a one-line warning before the start when the link cannot carry the rate, none otherwise."""

import dataclasses
import logging

import pytest
from fake_rig import FakeRig, capture_script, identify
from hilat import analysis
from hilat.acquisition import link_plan
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings

IDENT = identify()
ROLES = analysis.Channels.from_table(IDENT.channels)


def test_wire_bytes_per_record_as_the_protocol_says():
    # docs/protocol.md: 4-byte records (2-byte delta, 1-byte masks) fill a frame with 59 in 255 bytes.
    assert link_plan.wire_bytes_per_record(IDENT, 1000) == pytest.approx(255 / 59)
    # 1-byte deltas: 79 records of 3 bytes, 13 + 237 + CRC 4 + COBS 1 + delimiter 1 = 256 bytes.
    assert link_plan.wire_bytes_per_record(IDENT, 100) == pytest.approx(256 / 79)
    # A TDC on 4 inputs (protocol 5): a 4-byte fraction, 7-byte records with 1-byte deltas: 33 in a
    # frame, 13 + 231 + CRC 4 + COBS 1 + delimiter 1 = 250 bytes.
    tdc = dataclasses.replace(IDENT, tdc_inputs=4, tdc_taps=256)
    assert link_plan.wire_bytes_per_record(tdc, 100) == pytest.approx(250 / 33)


def test_rates_and_the_shortest_period():
    fired = {0: StimulusSettings(mode="periodic", period=2000, jitter=0)}
    plan = link_plan.plan(fired, 0, ROLES, IDENT, baudrate=3_000_000)
    assert plan.stimuli_per_s == pytest.approx(25_000) and plan.records_per_s == pytest.approx(150_000)
    assert plan.over and "3 Mbaud UART" in plan.limit
    assert plan.link_records_per_s == pytest.approx(300_000 / (255 / 59))
    # At the shortest period it names, the link carries the rate; one tick shorter it does not.
    ok = link_plan.plan({0: StimulusSettings(mode="periodic", period=plan.shortest_period)}, 0, ROLES, IDENT,
                        baudrate=3_000_000)
    assert not ok.over
    tight = link_plan.plan({0: StimulusSettings(mode="periodic", period=plan.shortest_period - 30)}, 0, ROLES,
                           IDENT, baudrate=3_000_000)
    assert tight.over
    # No serial line: the firmware's own limit.
    tcp = link_plan.plan(fired, 0, ROLES, IDENT)
    assert "firmware" in tcp.limit
    assert tcp.link_records_per_s == pytest.approx(IDENT.sys_hz / link_plan.FIRMWARE_SYS_CYCLES_PER_RECORD)
    burst = link_plan.plan({0: StimulusSettings(mode="burst", period=20000, burst_count=4)}, 0, ROLES, IDENT)
    assert burst.stimuli_per_s == pytest.approx(10_000)


# 500 stimuli of 6 records overflow the rig's FIFO (1024 records) at a period the link cannot carry;
# 3 fit in it whatever the period.
@pytest.mark.parametrize("count, period, warned", [(500, 300, True), (500, 50_000, False), (3, 300, False)])
def test_capture_warns_before_it_starts(tmp_path, caplog, count, period, warned):
    settings = CaptureSettings(count=count, out_dir=tmp_path, progress=False,
                               stimulus=StimulusSettings(mode="periodic", period=period, jitter=0))
    with caplog.at_level(logging.WARNING, logger="hilat"), FakeRig(capture_script(period=period)) as rig:
        cap = Capture(rig.url, settings).run()
    lines = [r.getMessage() for r in caplog.records if "more than the link carries" in r.getMessage()]
    assert len(lines) == (1 if warned else 0)
    if warned:
        assert "--on-rig" in lines[0] and "period of at least" in lines[0]
    assert cap.link_plan is not None and cap.link_plan.over == warned
