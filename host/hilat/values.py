"""Values a user writes as text, in one place: durations ("10us", "2 ms", "1500 ticks") parsed and
formatted, and the stimulus modes by name. The CLI, the API, measurement definitions, the pytest
plugin and the formats' limits all parse with these, so one text means one thing everywhere."""

import re
from dataclasses import dataclass

# Seconds per unit of a duration; "ticks" is the rig's tick, known only with its tick frequency.
UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
TICKS = "ticks"
_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s|ticks?)?\s*")

# The stimulus generator's modes by name, with their codes on the wire (STIM_CONFIG's mode; the
# protocol's MODE_* are these, firmware/protocol.h's HILAT_MODE_* and gateware/stimulus.py's too).
STIMULUS_MODES = {"periodic": 0, "dither": 1, "random": 2, "burst": 3, "oneshot": 4}


class DurationError(ValueError):
    """A duration that cannot be read or used; the message is one line naming the text."""


@dataclass(frozen=True)
class Duration:
    """A non-negative duration as written: a number and its unit (``UNIT_SECONDS`` or ``TICKS``)."""
    value: float
    unit: str
    text: str

    @property
    def in_ticks(self):
        return self.unit == TICKS

    def seconds(self, ts_hz=None):
        """Seconds; a tick count needs the rig's tick frequency."""
        if self.in_ticks:
            if not ts_hz:
                raise DurationError(f"{self.text!r}: ticks need the rig's tick frequency; give a time with a unit")
            return self.value / ts_hz
        return self.value * UNIT_SECONDS[self.unit]

    def ticks(self, ts_hz=None):
        """Whole ticks: a tick count as given (exact), a time rounded to the nearest tick."""
        if self.in_ticks:
            return int(self.value)
        if not ts_hz:
            raise DurationError(f"{self.text!r}: a time needs the rig's tick frequency; give ticks")
        return int(round(self.value * UNIT_SECONDS[self.unit] * ts_hz))


def parse_duration(text, default_unit=None):
    """A ``Duration`` from text such as "30us", "1.5 ms", "2e-3 s", "500 ticks" ("µs" is "us").
    A bare number takes ``default_unit`` (the CLI's and definitions' ticks); without one it is an
    error. Tick counts must be whole."""
    m = _DURATION.fullmatch(str(text))
    unit = m and (m.group(2) or default_unit)
    if not unit:
        with_ticks = " (ticks, or a number with ns/us/ms/s)" if default_unit == TICKS else \
            " (a number with ns/us/ms/s, or N ticks)"
        raise DurationError(f"not a duration: {text!r}{with_ticks}")
    unit = TICKS if unit.startswith("tick") else unit.replace("µ", "u")
    value = float(m.group(1))
    if unit == TICKS and not value.is_integer():
        raise DurationError(f"ticks must be a whole number: {text!r}")
    return Duration(value, unit, str(text).strip())


def seconds(value, ts_hz=None):
    """Seconds from a number of seconds or a duration's text (ticks with ``ts_hz``): the API's
    ``hilat.parse_duration``."""
    if isinstance(value, bool):
        raise TypeError(f"a duration is seconds or a string with a unit, not {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise DurationError(f"a duration cannot be negative: {value!r}")
        return float(value)
    return parse_duration(value).seconds(ts_hz)


def format_seconds(s):
    """A duration for people: 4 significant digits in s, ms, us or ns ("-" for none)."""
    if s is None:
        return "-"
    if s == float("inf"):
        return "inf"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:.4g} {unit}"
    return f"{s / 1e-9:.4g} ns"


def format_ticks(ticks, ts_hz):
    """Ticks as a time for a message: '573.1 us (28656 ticks)'."""
    return f"{format_seconds(ticks / ts_hz)} ({ticks} ticks)"


def stimulus_mode(name):
    """The protocol code of a stimulus mode's name; a one-line error naming the modes otherwise."""
    try:
        return STIMULUS_MODES[name]
    except (KeyError, TypeError):
        raise ValueError(f"mode is one of {', '.join(STIMULUS_MODES)}, got {name!r}") from None
