"""The API's statistics names and durations: part of ``hilat.api`` (its docstring has the whole).

A kind's statistics are a ``hilat.statistics.Distribution`` (``Stats`` is its API name): the one model
the report, the live view, the formats and the comparisons read too."""

from __future__ import annotations

from hilat import values
from hilat.statistics.distribution import WORST_SHOWN, Distribution, InsufficientSamples, Seconds, WorstSample

Stats = Distribution
SUBSETS = ("all", "untagged", "tagged")
__all__ = ["Stats", "Seconds", "WorstSample", "InsufficientSamples", "WORST_SHOWN", "SUBSETS", "SettingsError",
           "parse_duration"]


class SettingsError(ValueError):
    """Capture settings that cannot run on this rig (a bad value, a role or measure it lacks)."""


# The API's duration: seconds, or a string with a unit ("30us", "1.5 ms", "N ticks" with ts_hz).
parse_duration = values.seconds


def _ticks(value, ts_hz: float) -> int:
    """Whole ticks of a duration (a tick count given as "N ticks" stays exact)."""
    if isinstance(value, str):
        return values.parse_duration(value).ticks(ts_hz)
    return int(round(values.seconds(value) * ts_hz))
