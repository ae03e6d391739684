"""The CLI's value types and the options several commands share: durations (ticks or with a unit),
whole numbers, the link options (--baud, --board) and --calibration-dir. A value that does not parse
is an argparse error (usage, exit 2); one that parses but cannot be used raises ``UsageError``."""

import argparse
import logging
import re
from pathlib import Path

from hilat.api import Rig
from hilat.link.transport import BOARD_BAUDRATES, DEFAULT_BAUDRATE
from hilat.values import STIMULUS_MODES, TICKS, DurationError, parse_duration

log = logging.getLogger("hilat")


class UsageError(ValueError):
    """A command-line value that parses but cannot be used; reported as a usage error."""


class TimeValue:
    """A duration given as ticks ("1500") or with a unit ("20us"); converted once ts_hz is known."""

    def __init__(self, text):
        try:
            self.duration = parse_duration(text, default_unit=TICKS)
        except DurationError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        self.value, self.unit, self.text = self.duration.value, self.duration.unit, text

    def ticks(self, ts_hz):
        return self.duration.ticks(ts_hz)

    def __repr__(self):
        return self.text


def _positive_int(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def _non_negative_int(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def _signed_float(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _role_setting(text):
    role, sep, channel = text.partition("=")
    if not sep or not role or not channel:
        raise argparse.ArgumentTypeError(f"a role is ROLE=CHANNEL (e.g. isr=in4), got {text!r}")
    return role.strip(), channel.strip()


def _fire_setting(text):
    """CHANNEL[:KEY=VALUE,...] -> (channel, {key: value}); values are whole ticks (invert: 0/1)."""
    channel, _, settings = text.partition(":")
    if not channel.strip():
        raise argparse.ArgumentTypeError(f"--also-fire CHANNEL[:KEY=VALUE,...], got {text!r}")
    overrides = {}
    for item in filter(None, (x.strip() for x in settings.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[a-z_]+", key.strip()):
            raise argparse.ArgumentTypeError(f"--also-fire: {item!r} is not KEY=VALUE")
        key, value = key.strip(), value.strip()
        if key == "mode":
            if value not in STIMULUS_MODES:
                raise argparse.ArgumentTypeError(f"--also-fire: mode {value!r} (modes: {', '.join(STIMULUS_MODES)})")
            overrides[key] = value
        elif key == "invert":
            overrides[key] = value in ("1", "true", "yes")
        else:
            try:
                overrides[key] = int(value, 0)
            except ValueError:
                raise argparse.ArgumentTypeError(f"--also-fire: {key}={value!r} is not a whole number of ticks") \
                    from None
    return channel.strip(), overrides


def _kind_time(text, option, example):
    """KIND=TIME -> (kind, TimeValue), for ``option``."""
    kind, sep, value = text.partition("=")
    if not sep or not kind.strip():
        raise argparse.ArgumentTypeError(f"{option} KIND=TIME (e.g. {example}), got {text!r}")
    return kind.strip(), TimeValue(value)


def _outlier_setting(text):
    """KIND=TIME: outlier records of the engine above that value."""
    return _kind_time(text, "--outlier", "stim_to_isr=20us")


def _trigger_setting(text):
    """[RESPONSE=]TIME -> (response, TimeValue): the engine's trigger-out when RESPONSE (isr, the
    default, or task) has not come TIME after the stimulus."""
    response, sep, value = text.rpartition("=")
    response = response.strip() if sep else "isr"
    if response not in ("isr", "task"):
        raise argparse.ArgumentTypeError(f"--trigger [isr=|task=]TIME (e.g. 50us, task=200us), got {text!r}")
    return response, TimeValue(value)


def _dut_setting(text):
    if not re.fullmatch(r"[a-z_0-9]+=[0-9]+", text):
        raise argparse.ArgumentTypeError(f"DUT setting must be NAME=NUMBER, got {text!r}")
    return tuple(text.split("=", 1))


def _interval_seconds(text):
    """A time with a unit, or 0 (none)."""
    if text.strip() == "0":
        return 0.0
    return _seconds(text)


def _seconds(text):
    value = TimeValue(text)
    if value.duration.in_ticks:
        raise argparse.ArgumentTypeError(f"give a time with a unit (e.g. 1s, 100ms), not ticks: {text!r}")
    return value.duration.seconds()


def _duration(value):
    """A TimeValue as the API takes it: a string with a unit, or whole ticks as "N ticks"."""
    if value is None:
        return None
    return f"{int(value.value)} ticks" if value.duration.in_ticks else value.text


def _add_link_options(parser):
    rates = ", ".join(f"{board} {rate}" for board, rate in BOARD_BAUDRATES.items())
    parser.add_argument("--baud", type=_positive_int, default=None, metavar="RATE",
                        help=f"baud rate of the rig's UART, the gateware's --uart-baudrate (default: the "
                             f"--board's, else {DEFAULT_BAUDRATE}; ignored for socket:// and udp://)")
    parser.add_argument("--board", choices=sorted(BOARD_BAUDRATES), default=None,
                        help=f"the rig's board: its UART's default rate ({rates}; docs/boards.md)")


def _rig(url, args, **settings):
    """The API's rig at ``url`` with the command's link options (--baud) and --calibration-dir."""
    baud = getattr(args, "baud", None)
    if baud is not None and url.startswith(("socket://", "udp://")):
        log.info("--baud %d ignored: %s has no baud rate", baud, url)
    return Rig(url, baud=baud, calibration_dir=args.calibration_dir, **settings)


def _add_calibration_dir(parser):
    parser.add_argument("--calibration-dir", type=Path, default=None,
                        help="calibration files (default $HILAT_CALIBRATION_DIR or ~/.config/hilat/calibration)")
