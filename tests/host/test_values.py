"""hilat.values: the one duration parser and formatter, and the one list of stimulus modes."""

import argparse
import re
from pathlib import Path

import hilat
import pytest
from hilat import values
from hilat.analysis import measures
from hilat.cli.options import TimeValue
from hilat.link import protocol as p
from hilat.values import TICKS, DurationError, parse_duration

TS_HZ = 50e6


@pytest.mark.parametrize("text,value,unit", [
    ("10us", 10.0, "us"), ("2 ms", 2.0, "ms"), (" 1.5ms ", 1.5, "ms"), ("2e-3 s", 2e-3, "s"),
    (".5us", 0.5, "us"), ("3µs", 3.0, "us"), ("100ns", 100.0, "ns"), ("500 ticks", 500.0, TICKS),
    ("1 tick", 1.0, TICKS), ("0", 0.0, TICKS),
])
def test_texts_and_their_units(text, value, unit):
    d = parse_duration(text, default_unit=TICKS)
    assert (d.value, d.unit, d.in_ticks) == (value, unit, unit == TICKS)


@pytest.mark.parametrize("text,default,message", [
    ("abc", TICKS, "not a duration: 'abc' (ticks, or a number with ns/us/ms/s)"),
    ("", TICKS, "not a duration: ''"),
    ("-5us", TICKS, "not a duration: '-5us'"),
    ("10 kHz", TICKS, "not a duration: '10 kHz'"),
    ("500", None, "not a duration: '500' (a number with ns/us/ms/s, or N ticks)"),
    ("1.5 ticks", TICKS, "ticks must be a whole number: '1.5 ticks'"),
    ("1.5", TICKS, "ticks must be a whole number: '1.5'"),
])
def test_bad_texts_are_one_line_errors(text, default, message):
    with pytest.raises(DurationError) as e:
        parse_duration(text, default_unit=default)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_ticks_and_seconds():
    assert parse_duration("10us").ticks(TS_HZ) == 500
    assert parse_duration("10.01us").ticks(TS_HZ) == 500          # the nearest tick
    assert parse_duration("10.04us").ticks(TS_HZ) == 502
    assert parse_duration("7 ticks").ticks() == 7                 # exact, no tick frequency needed
    assert parse_duration("7 ticks").seconds(TS_HZ) == 7 / TS_HZ
    assert parse_duration("2ms").seconds() == pytest.approx(2e-3, rel=1e-15)
    with pytest.raises(DurationError, match="ticks need the rig's tick frequency"):
        parse_duration("7 ticks").seconds()
    with pytest.raises(DurationError, match="a time needs the rig's tick frequency"):
        parse_duration("7us").ticks()


def test_the_apis_durations_are_seconds():
    assert hilat.parse_duration is values.seconds
    assert values.seconds(0.25) == 0.25 and values.seconds(3) == 3.0
    assert values.seconds("30us") == pytest.approx(30e-6, rel=1e-15)
    assert values.seconds("100 ticks", TS_HZ) == 100 / TS_HZ
    with pytest.raises(DurationError, match="cannot be negative"):
        values.seconds(-1)
    with pytest.raises(TypeError):
        values.seconds(True)


@pytest.mark.parametrize("seconds,text", [
    (None, "-"), (float("inf"), "inf"), (0, "0 ns"), (999e-9, "999 ns"), (1e-6, "1 us"), (573.12e-6, "573.1 us"),
    (1.5e-3, "1.5 ms"), (2.0, "2 s"), (-3e-6, "-3 us"),
])
def test_format_seconds(seconds, text):
    assert values.format_seconds(seconds) == text


def test_format_ticks():
    assert values.format_ticks(28656, TS_HZ) == "573.1 us (28656 ticks)"


def test_one_list_of_stimulus_modes():
    # The codes are the firmware's (the wire contract), and the protocol's names are the same codes.
    header = (Path(__file__).parents[2] / "firmware" / "protocol.h").read_text()
    firmware = {m.group(1).lower(): int(m.group(2)) for m in re.finditer(r"#define HILAT_MODE_(\w+) (\d+)u", header)}
    assert values.STIMULUS_MODES == firmware
    assert values.STIMULUS_MODES == {"periodic": p.MODE_PERIODIC, "dither": p.MODE_DITHER, "random": p.MODE_RANDOM,
                                     "burst": p.MODE_BURST, "oneshot": p.MODE_ONESHOT}
    assert values.stimulus_mode("burst") == p.MODE_BURST
    with pytest.raises(ValueError, match="^mode is one of periodic, dither, random, burst, oneshot, got 'sine'$"):
        values.stimulus_mode("sine")
    with pytest.raises(ValueError, match="mode is one of"):
        hilat.api.capture_settings(TS_HZ, mode="sine")


def test_the_callers_parse_alike():
    # The CLI's options and a definition's deadline read a bare number as ticks, as the parser does.
    assert TimeValue("20us").ticks(TS_HZ) == TimeValue("1000").ticks(TS_HZ) == 1000
    with pytest.raises(argparse.ArgumentTypeError, match="^not a duration: 'x'"):
        TimeValue("x")
    assert measures._ticks("20us", TS_HZ) == measures._ticks("1000", None) == 1000
    with pytest.raises(measures.MeasureError, match="^ticks must be a whole number"):
        measures._ticks("2.5", TS_HZ)
