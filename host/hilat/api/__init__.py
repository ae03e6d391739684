"""hilat's Python API: open a rig, capture, and read a run's latency statistics in seconds.

    import hilat

    with hilat.Rig("socket://127.0.0.1:7000") as rig:
        run = rig.capture(count=2000, period="100us", jitter="20us", deadline="50us")
    isr = run.stats("stim_to_isr")
    assert isr.percentile(99.9) < 50e-6 and isr.misses == 0

Everything is in seconds (a float, or a string with a unit: "30us", "1.5ms", "250ns", "2s"; whole
ticks as "1500 ticks"). The statistics are exact where the run keeps its samples, else from
HdrHistogram bins (``Stats.resolution`` says which). ``docs/api.md`` has the whole surface; the CLI
(``hilat.cli``) is a thin layer over this module.
"""

from hilat.api.compare import Baseline, Comparison, FailRule, compare, parse_fail_rule
from hilat.api.rig import CaptureError, Rig, Simulation, capture_settings, simulate
from hilat.api.run import Run, load
from hilat.api.stats import (
                             SUBSETS,
                             WORST_SHOWN,
                             InsufficientSamples,
                             Seconds,
                             SettingsError,
                             Stats,
                             WorstSample,
                             _ticks,
                             parse_duration,
)

__all__ = ["Rig", "Run", "Stats", "Seconds", "Comparison", "FailRule", "InsufficientSamples", "load", "compare",
           "simulate", "parse_duration", "parse_fail_rule", "SettingsError", "CaptureError", "Baseline", "SUBSETS",
           "Simulation", "WorstSample", "WORST_SHOWN", "capture_settings", "_ticks"]
