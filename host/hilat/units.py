"""The run's unit: what one unit of a run's times and latencies is (docs/analysis.md, "The run's unit").

A rig stamps edges in ticks of its ``ts`` clock; one that samples its inputs S times a tick
(IDENTIFY's ``samples_per_tick``) places them in 1/S tick, or in 1/(64 S) tick with a resolution
calibration in force (docs/subtick.md, ``analysis.Subticks``); one with a carry-chain TDC on its
inputs in 1/4096 tick (docs/tdc.md, ``analysis.TdcSubticks``). Whichever it is, that unit is the
run's **machine unit**, ``mu`` (ARTIQ's name for its fine unit): every field, column and key holding
a value in it ends in ``_mu``; ``_ticks`` is kept for values that are whole ticks (the user's
durations, the rig's settings), ``ts_hz`` is the tick clock and ``tick_ns`` the tick's length.

``RunUnit`` is built once (from IDENTIFY and the calibration in force) and carried by the capture, the
run, the report document and the API; conversions to ns go through it.
"""

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

UNIT_NAME = "mu"
# meta.json's "version": 5 names the run's unit ("unit", this module's to_json); 4 and earlier, whose
# values are in the same unit (from "time_unit" and the rig's tick clock), still read.
RUN_FORMAT_VERSION = 5


@dataclass(frozen=True)
class RunUnit:
    """One mu = 1 / ``units_per_tick`` tick of a ``tick_hz`` tick clock (ticks/s, the calibrated
    frequency when a clock calibration is in force). ``units_per_tick``: 1, S, or 64 S when
    ``calibrated`` (a resolution calibration places input edges at their bins' measured centres)."""
    tick_hz: float
    samples_per_tick: int = 1
    units_per_tick: int = 1
    calibrated: bool = False
    # A TDC rig's (docs/tdc.md, "The run's unit"): per TDC input {"channel", "placement": "measured",
    # "predicted" or "online", "source"}: where its edges' positions come from. Empty elsewhere.
    tdc_placement: tuple = ()

    def __post_init__(self):
        if not self.tick_hz > 0:
            raise ValueError(f"tick clock {self.tick_hz!r} Hz: not a positive frequency")
        if int(self.units_per_tick) < 1 or int(self.samples_per_tick) < 1:
            raise ValueError(f"{self.units_per_tick} mu a tick, {self.samples_per_tick} samples a tick: "
                             "both must be at least 1")
        object.__setattr__(self, "tdc_placement", tuple(dict(p) for p in self.tdc_placement))

    @classmethod
    def of(cls, tick_hz, subticks=None):
        """The unit of edges placed by ``subticks`` (``analysis.Subticks``; None: whole ticks)."""
        if subticks is None:
            return cls(float(tick_hz))
        return cls(float(tick_hz), int(subticks.samples_per_tick), int(subticks.units_per_tick),
                   bool(subticks.calibrated), tuple(getattr(subticks, "placement", ())))

    @property
    def mu_hz(self) -> float:
        """mu per second."""
        return self.tick_hz * self.units_per_tick

    @property
    def tick_ns(self) -> float:
        """One tick in ns."""
        return 1e9 / self.tick_hz

    @property
    def mu_fraction_ns(self) -> Fraction:
        """One mu in ns, as an exact fraction of the tick clock as given (1e9 / (tick_hz units_per_tick))."""
        return Fraction(10**9) / (Fraction(self.tick_hz) * self.units_per_tick)

    @property
    def mu_ns(self) -> float:
        """One mu in ns (5.0 at S = 4 on a 50 MHz tick; 0.078125 with a resolution calibration)."""
        return float(self.mu_fraction_ns)

    @property
    def mu_ps(self) -> float:
        """One mu in ps."""
        return float(self.mu_fraction_ns * 1000)

    @property
    def name(self) -> str:
        """What one mu is, in words: 'tick', 'sub-tick (1/4 tick)', '1/256 tick' or '1/4096 tick (TDC)'."""
        if self.units_per_tick == 1:
            return "tick"
        if self.tdc_placement:
            return f"1/{self.units_per_tick} tick (TDC)"
        if not self.calibrated:
            return f"sub-tick (1/{self.units_per_tick} tick)"
        return f"1/{self.units_per_tick} tick"

    def to_ns(self, values_mu):
        """``values_mu`` (int arrays, -1 / analysis.MISSING kept as NaN by the caller) in ns as float64.
        Exact whenever one mu is a whole number of ps and the product stays below 2^53 ps."""
        values = np.asarray(values_mu)
        step = self.mu_fraction_ns * 1000
        if step.denominator == 1 and values.dtype.kind in "iu":
            return (values.astype(np.int64) * int(step.numerator)) / 1000.0
        return values * self.mu_ns

    def ticks_to_mu(self, ticks):
        """A duration in whole ticks (the user's deadline, the rig's settings) in mu."""
        return None if ticks is None else int(ticks) * self.units_per_tick

    def to_json(self) -> dict:
        """The unit as the report document, summary.json and the exports' metadata state it."""
        out = {"name": UNIT_NAME, "tick_hz": self.tick_hz, "samples_per_tick": self.samples_per_tick,
               "mu_per_tick": self.units_per_tick, "mu_hz": self.mu_hz, "mu_ns": self.mu_ns,
               "mu_ps": self.mu_ps, "calibrated": self.calibrated, "description": self.name}
        if self.tdc_placement:
            out["tdc_placement"] = [dict(p) for p in self.tdc_placement]
        return out

    @classmethod
    def from_json(cls, doc):
        try:
            return cls(float(doc["tick_hz"]), int(doc.get("samples_per_tick", 1)), int(doc["mu_per_tick"]),
                       bool(doc.get("calibrated", False)), tuple(doc.get("tdc_placement") or ()))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"unreadable run unit {doc!r} ({e})") from None
