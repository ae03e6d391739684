"""Calibration: what the rig knows about itself, and what every number it reports can claim.

Four measurements, each stored per rig identity and applied by later captures:

- **loopback** (``hilat calibrate loopback``, ``loopback.py``): the rig's own stimulus->capture offset
  and jitter, through a jumper from STIM0 to the SPARE input; the offset is subtracted from every
  stimulus->response latency;
- **clock against the host** and **clock against a 1PPS** (``hilat calibrate clock``, ``clock.py``):
  the error of the rig's ts clock in ppm, with a hard bound (host) or a fit uncertainty (1PPS);
- **resolution** (``hilat calibrate resolution``, ``resolution.py``): the sub-tick bins' widths by
  code density (docs/subtick.md); captures place input edges at the bins' measured centres; on a
  rig with a carry-chain TDC on its inputs, the same code density over the TDC's 256 codes
  (``tdc.py``), with the line's model (``tdc_line.py``) for the predicted bins (docs/tdc.md).

``store.py`` keeps the measurements, one file per rig identity, and picks the one a capture
applies (``for_rig``); ``statement.py`` words them: the resolution statement every run carries, and
what ``hilat calibrate`` prints; ``listener.py`` collects a calibration's edges from its session.
"""

from hilat.calibration.clock import (
    PLAUSIBLE_PPM,
    Exchange,
    ImplausibleClock,
    PpsResult,
    analyse_pps,
    best_exchange,
    host_clock_estimate,
    pps_calibration,
    run_pps,
)
from hilat.calibration.listener import CALIBRATION_ROLE, RecordCollector, input_channel, role_channel
from hilat.calibration.loopback import (
    LoopbackResult,
    loopback_calibration,
    loopback_delays,
    no_loopback_message,
    run_loopback,
)
from hilat.calibration.statement import (
    STALE_DAYS,
    ProgressLog,
    applied,
    clock_text,
    loopback_text,
    pps_text,
    resolution_text,
    stored_text,
    tdc_statement,
    tdc_text,
)
from hilat.calibration.store import (
    FORMAT,
    IDENTITY_FIELDS,
    VERSION,
    CalibrationError,
    Store,
    default_dir,
    for_rig,
    identity_key,
    resolve_dir,
    rig_identity,
    store_result,
)

__all__ = [
    "FORMAT", "VERSION", "IDENTITY_FIELDS", "CalibrationError", "Store", "default_dir", "resolve_dir", "rig_identity",
    "identity_key", "store_result", "for_rig",
    "LoopbackResult", "loopback_delays", "no_loopback_message", "loopback_calibration", "run_loopback",
    "PLAUSIBLE_PPM", "ImplausibleClock", "Exchange", "best_exchange", "host_clock_estimate", "PpsResult",
    "analyse_pps", "pps_calibration", "run_pps",
    "CALIBRATION_ROLE", "RecordCollector", "role_channel", "input_channel",
    "STALE_DAYS", "applied", "ProgressLog", "loopback_text", "pps_text", "clock_text", "resolution_text",
    "stored_text", "tdc_statement", "tdc_text",
]
