"""From captured edges to latencies: pairing each stimulus with its responses, then statistics.

Pairing (per stimulus k, active edge at tick S_k; its window runs to the next stimulus, or to
``S_k + deadline`` if that is earlier):

- stimulus -> ISR entry: first ISR-pin rise in the window (SSC "interrupt service response");
- stimulus -> task: first task-pin rise in the window (SSC "interrupt task response");
- ISR entry -> task: their difference (rescheduling latency);
- ISR and task durations: from that rise to the pin's next fall (the DUT raises the pin on entry and
  drops it on exit), whether or not the fall lies inside the window;
- no rise in the window: a **miss** (kept as ``MISSING``, counted, reported as a share of stimuli);
  more than one: a **duplicate** (counted, the first is used);
- the tag level at the stimulus and whether the tag was high at any time in the window are kept, so
  every figure can be given with and without tagged samples (Faller's "incl./excl. DMA").

A calibrated rig offset (``offset_mu``, in the run's unit; stored in ticks: the rig's own stimulus-pin
-> capture delay, measured with a loopback jumper) is subtracted from the two stimulus -> response latencies only.

The package: ``channels`` (roles, sub-tick positions, edges from records), ``gaps`` (holes in the
record stream), ``measures`` (measurement definitions and their series), ``pairing`` (one window
search for every kind). Statistics of the pairs are ``hilat.statistics``'s.
"""

from hilat.analysis.channels import (  # noqa: F401
    KIND_TITLES,
    KINDS,
    TDC_UNITS_PER_TICK,
    Channels,
    Subticks,
    TdcSubticks,
    edges_from_records,
    in_subticks,
)
from hilat.analysis.gaps import (  # noqa: F401
    ALL_CHANNELS,
    GAP_CUT_SHORT,
    GAP_LINK,
    GAP_OPEN_END,
    GAP_OVERFLOW,
    GAP_REASONS,
    GAP_UNMEASURED,
    TAG_UNKNOWN,
    Gaps,
    GapTracker,
    gap_tracker,
)
from hilat.analysis.measures import MISSING, Series, channel_bit  # noqa: F401
from hilat.analysis.pairing import EdgeGroups, Measurements, Pairing, kind_titles, measure, pair  # noqa: F401
