"""The rig's measurement engine, host side (docs/engine.md): what to ask of it, what to make of what it sends.

The engine pairs and bins on the rig; the host only configures it and collects. Layers, bottom up:

- the bins: ``ENGINE_HDR`` is the HdrHistogram whose counts-array index the rig computes
  (``bin_of``), so the host adds the rig's counts at their index, never re-binning; bin
  ``OVERFLOW_BIN`` counts values beyond that histogram's range;
- ``EngineConfig``: the capture's roles and settings, as the ENGINE_CONFIG message;
- ``RigHistograms``: ENGINE_BINS / ENGINE_OUTLIERS / ENGINE_STATS frames in, closed intervals out
  (a callback and ``hlog/rig.hlog``), run totals per kind and tag, ``outliers.bin``, and the check
  of the bins against the engine's exact statistics;
- ``hilat.statistics``: a ``Distribution`` of the rig's bins (``Distribution.rig``), so the report
  renders an on-rig run as any other.
"""

from hilat.engine.bins import (  # noqa: F401
    _LAYOUT,
    BINS,
    ENGINE_HDR,
    HDR_BINS,
    INTERVAL_SHIFT_MAX,
    KINDS,
    MAX_COUNT,
    OVERFLOW_BIN,
    OVERFLOW_FROM,
    SWEEP_TICKS,
    TAGS,
    bin_of,
    bin_value,
    bins_std,
    engine_histogram,
    engine_percentiles,
    ns_histogram,
    tick_histogram,
)
from hilat.engine.collector import EngineInterval, RigHistograms, _Open  # noqa: F401
from hilat.engine.config import EngineConfig, Trigger, deadline_limit, shift_for_deadline  # noqa: F401
