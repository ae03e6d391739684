"""What to ask of the engine: the capture's roles and settings as the ENGINE_CONFIG message, and
the limits its interval length puts on a deadline."""

from __future__ import annotations

from dataclasses import dataclass

from hilat import analysis
from hilat.engine.bins import INTERVAL_SHIFT_MAX, KINDS, SWEEP_TICKS
from hilat.link import protocol as p


def deadline_limit(interval_shift: int) -> int:
    """The longest deadline (ticks) the engine takes at ``interval_shift``: the engine holds two
    intervals per bank, so no window may stay open across two interval boundaries (docs/engine.md,
    "Intervals without stopping"). The firmware refuses a deadline of 0 or above it."""
    return (1 << interval_shift) - 2 * SWEEP_TICKS


def shift_for_deadline(deadline: int) -> int | None:
    """The smallest interval shift whose deadline limit takes ``deadline`` ticks (None: none does)."""
    return next((s for s in range(1, INTERVAL_SHIFT_MAX + 1) if deadline_limit(s) >= deadline), None)


# ---- configuration ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trigger:
    """The trigger pin: a pulse of ``width`` ticks when ``response`` ("isr" or "task") has not come
    ``threshold`` ticks after the stimulus (and, ``on_late``, when it then comes)."""

    threshold: int
    response: str = "isr"
    width: int = 1
    on_late: bool = False


@dataclass(frozen=True)
class EngineConfig:
    """What the engine pairs and how (docs/engine.md, "Pairing"). Roles are (channel, level after
    the active edge); ``deadline``: a window runs to the next start or this many ticks, 1 ..
    ``deadline_limit(interval_shift)`` (None: that limit, the longest the engine takes); ``offset``:
    the calibrated rig offset in ticks; ``thresholds``: per kind, the value above which a sample is an
    outlier record (None: never); ``raw``: raw edges (EVENTS) as well."""

    start: tuple[int, int]
    isr: tuple[int, int]
    task: tuple[int, int]
    tag: tuple[int, int] | None = None
    deadline: int | None = None
    offset: int = 0
    interval_shift: int = 24
    thresholds: tuple = (None, None, None)
    trigger: Trigger | None = None
    raw: bool = False

    def __post_init__(self):
        if self.deadline is None:
            object.__setattr__(self, "deadline", deadline_limit(self.interval_shift))

    @classmethod
    def from_roles(cls, roles: analysis.Channels, **settings) -> EngineConfig:
        """The engine's roles from the capture's (``analysis.Channels``), each at its active level."""
        missing = [role for role in ("isr", "task") if roles.channel_of(role) is None]
        if missing:
            raise ValueError("the engine pairs the stimulus with an ISR and a task channel: no "
                             f"{' and no '.join(missing)} channel on this rig (give --role)")

        def role(channel):
            return channel, roles.active_level(channel)
        tag = None if roles.tag is None else role(roles.tag)
        return cls(start=role(roles.stimulus), isr=role(roles.isr), task=role(roles.task), tag=tag, **settings)

    @property
    def interval_ticks(self) -> int:
        return 1 << self.interval_shift

    def check_limits(self, stats: p.EngineStats) -> None:
        """Raise ValueError naming a setting below the engine's limits (its ENGINE_STATS)."""
        if self.interval_shift < stats.interval_shift_min:
            raise ValueError(f"interval shift {self.interval_shift}: the engine takes {stats.interval_shift_min} "
                             "at least")
        if self.deadline < stats.min_spacing:
            raise ValueError(f"deadline {self.deadline} ticks: the engine takes {stats.min_spacing} at least")

    def message(self) -> p.EngineConfig:
        """The ENGINE_CONFIG message; ValueError names a setting the wire cannot carry."""
        for name, value, top in (("deadline", self.deadline, 0xFFFFFFFF), ("offset", self.offset, 0xFFFF),
                                 ("interval shift", self.interval_shift, 63)):
            if not 0 <= value <= top:
                raise ValueError(f"engine {name} {value} out of 0..{top}")
        limit = deadline_limit(self.interval_shift)
        if not 0 < self.deadline <= limit:
            raise ValueError(f"engine deadline {self.deadline} ticks out of 1..{limit} (the limit at interval "
                             f"shift {self.interval_shift}: 2**shift - 2 sweeps of {SWEEP_TICKS} ticks)")
        thresholds = [p.ENGINE_NEVER if t is None else int(t) for t in self.thresholds]
        if len(thresholds) != len(KINDS) or not all(0 <= t <= p.ENGINE_NEVER for t in thresholds):
            raise ValueError(f"engine thresholds {self.thresholds}: one per kind, ticks below 2**32 - 1, or None")
        flags = p.ENGINE_ENABLE | (p.ENGINE_RAW if self.raw else 0)
        trigger = self.trigger
        if trigger is not None:
            if trigger.response not in ("isr", "task") or not 1 <= trigger.width <= 0xFFFF \
                    or not 0 < trigger.threshold <= 0xFFFFFFFF:
                raise ValueError(f"trigger {trigger}: response isr or task, width 1..65535, threshold 1..2**32-1")
            flags |= p.ENGINE_TRIGGER_ON_LATE if trigger.on_late else 0
        tag_channel, tag_level = self.tag if self.tag is not None else (p.ENGINE_NO_TAG, 1)
        return p.EngineConfig(
            flags, *self.start, *self.isr, *self.task, tag_channel, tag_level, self.deadline, self.offset,
            self.interval_shift, thresholds,
            p.ENGINE_TRIGGER_TASK if trigger is not None and trigger.response == "task" else p.ENGINE_TRIGGER_ISR,
            trigger.threshold if trigger is not None else 0, trigger.width if trigger is not None else 0)
