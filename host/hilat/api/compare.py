"""Comparisons of runs, fail rules and baselines: part of ``hilat.api`` (its docstring has the whole)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from hilat.api.run import Run, load
from hilat.api.stats import InsufficientSamples, Seconds, Stats, parse_duration
from hilat.reports import report
from hilat.values import format_seconds

# ---- comparisons and fail rules --------------------------------------------------------------------------

@dataclass(frozen=True)
class FailRule:
    """B fails against A when ``statistic`` of B exceeds A's by more than ``percent`` % (or by more
    than ``absolute_s`` seconds); ``statistic``: "max", "mean", "min", or a percentile "p99.9"."""
    statistic: str
    percent: float | None = None
    absolute_s: float | None = None
    kind: str | None = None          # None: every kind both runs have

    def text(self) -> str:
        limit = f"{self.percent:g}%" if self.percent is not None else format_seconds(self.absolute_s).replace(" ", "")
        return f"{self.kind + ':' if self.kind else ''}{self.statistic}:{limit}"


def parse_fail_rule(text: str) -> FailRule:
    """``[KIND:]STATISTIC:LIMIT``: ``p99.9:10%`` (B's p99.9 more than 10 % above A's fails),
    ``stim_to_isr:max:500ns`` (more than 500 ns above), ``mean:5%``."""
    parts = text.strip().split(":")
    if len(parts) == 2:
        kind, (statistic, limit) = None, parts
    elif len(parts) == 3:
        kind, statistic, limit = parts
    else:
        raise ValueError(f"a fail rule is [KIND:]STATISTIC:LIMIT, e.g. p99.9:10% or stim_to_isr:max:500ns; "
                         f"got {text!r}")
    statistic = statistic.strip()
    if not (statistic in ("min", "max", "mean") or re.fullmatch(r"p(100|[0-9]{1,2}(\.[0-9]+)?)", statistic)):
        raise ValueError(f"{text!r}: the statistic is min, max, mean or a percentile like p99.9")
    limit = limit.strip()
    if limit.endswith("%"):
        try:
            percent = float(limit[:-1])
        except ValueError:
            raise ValueError(f"{text!r}: {limit!r} is not a percentage") from None
        return FailRule(statistic, percent=percent, kind=kind)
    try:
        return FailRule(statistic, absolute_s=parse_duration(limit), kind=kind)
    except ValueError:
        raise ValueError(f"{text!r}: the limit is a percentage (10%) or a time (500ns)") from None


def _statistic(stats: Stats, statistic: str) -> Seconds | None:
    if statistic in ("min", "max", "mean"):
        return getattr(stats, statistic)
    return stats.percentile(float(statistic[1:]))


def _judge(rules, kinds_a, kinds_b, value_a, value_b) -> list[str]:
    """Lines for every (rule, kind) where B exceeds A beyond the rule; ``value_x(kind, statistic)``
    gives seconds or None (no samples) and raises InsufficientSamples where it cannot say."""
    failures = []
    for rule in (parse_fail_rule(r) if isinstance(r, str) else r for r in rules):
        for kind in [rule.kind] if rule.kind else [k for k in kinds_b if k in kinds_a and k not in _NOT_COMPARED]:
            if kind not in kinds_a or kind not in kinds_b:
                failures.append(f"{rule.text()}: {kind} is not in both")
                continue
            try:
                va, vb = value_a(kind, rule.statistic), value_b(kind, rule.statistic)
            except InsufficientSamples as e:
                failures.append(f"{rule.text()}: cannot judge: {e}")
                continue
            if va is None or vb is None:
                failures.append(f"{rule.text()}: {kind} has no samples in {'A' if va is None else 'B'}")
                continue
            allowed = va * (1 + rule.percent / 100) if rule.percent is not None else va + rule.absolute_s
            if vb > allowed:
                failures.append(f"{kind} {rule.statistic}: B {format_seconds(vb)} > A {format_seconds(va)} "
                                f"+ {rule.text().rpartition(':')[2]} = {format_seconds(allowed)}")
    return failures


# Pulse durations are what the DUT spends, not latencies: compared only when a rule names them.
_NOT_COMPARED = ("isr_duration", "task_duration")


class Comparison:
    """Run B against run A: the report's side-by-side rows and fail rules (``check``)."""

    def __init__(self, a: Run, b: Run):
        self.a, self.b = a, b
        self.document = report.compare_document(report.build_report([a, b]))
        self.kinds = list(self.document["kinds"])

    def text(self, markdown: bool = False) -> str:
        return report.format_compare(self.document, markdown=markdown)

    def check(self, rules: list[FailRule | str]) -> list[str]:
        """One line per rule and kind that B breaks (empty: B passes). A percentile either run's count
        cannot support is a failure too: it cannot be judged."""
        return _judge(rules, self.a.kinds, self.b.kinds, lambda k, st: _statistic(self.a.stats(k), st),
                      lambda k, st: _statistic(self.b.stats(k), st))


def compare(a: Run | str | Path, b: Run | str | Path) -> Comparison:
    """Run B (new) against run A (reference); paths or ``Run`` objects."""
    return Comparison(a if isinstance(a, Run) else load(a), b if isinstance(b, Run) else load(b))


# ---- baselines ---------------------------------------------------------------------------------------------

# What makes two rigs measure alike: a baseline taken on another identity is not compared.
# Percentiles a baseline keeps besides the report's (p50 .. p99.9999), where the count supports them.
BASELINE_PERCENTILES = (95.0, 99.5, 99.95)
BASELINE_IDENTITY = ("gateware", "firmware", "ts_hz", "sys_hz", "n_stimulus", "n_inputs", "pin_to_stamp_delay")


class Baseline:
    """A run's figures kept as JSON to judge later runs of the same test on the same rig: per kind,
    the counts and min / mean / max and the percentiles the count supports, in seconds, and the rig's
    identity (``BASELINE_IDENTITY``)."""

    FORMAT = "hilat-baseline"
    VERSION = 1

    def __init__(self, doc: dict):
        if doc.get("format") != self.FORMAT:
            raise ValueError(f"not a hilat baseline (format {doc.get('format')!r})")
        self.doc = doc

    @classmethod
    def from_run(cls, run: Run, name: str = "") -> Baseline:
        rig = run.rig
        kinds = {}
        for kind in run.kinds:
            st = run.stats(kind)
            figures = {label: None if v is None else float(v) for label, v in st.ladder()} if st.count else {}
            if st.count:
                figures["mean"] = float(st.mean)
                figures.update((f"p{p:g}", float(st.percentile(p))) for p in BASELINE_PERCENTILES if st.supports(p))
            kinds[kind] = {"count": st.count, "misses": st.misses, "unknown": st.unknown, "seconds": figures}
        return cls({"format": cls.FORMAT, "version": cls.VERSION, "name": name,
                    "taken": datetime.now(timezone.utc).isoformat(timespec="seconds"), "run": str(run.path),
                    "board": rig.get("board"), "rig": {k: rig.get(k) for k in BASELINE_IDENTITY}, "kinds": kinds})

    @classmethod
    def load(cls, path: str | Path) -> Baseline:
        try:
            return cls(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: cannot read the baseline ({e})") from None

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.doc, indent=1, sort_keys=True) + "\n")
        return path

    @property
    def kinds(self) -> dict:
        return self.doc["kinds"]

    def identity_differences(self, run: Run) -> list[str]:
        rig = run.rig
        return [f"{k}: baseline {self.doc['rig'].get(k)!r}, run {rig.get(k)!r}" for k in BASELINE_IDENTITY
                if self.doc["rig"].get(k) != rig.get(k)]

    def value(self, kind: str, statistic: str) -> float | None:
        entry = self.kinds[kind]
        if not entry["count"]:
            return None
        if statistic.startswith("p"):
            statistic = f"p{float(statistic[1:]):g}"        # p99.90 is p99.9
        if statistic not in entry["seconds"]:
            raise InsufficientSamples(f"{kind}: the baseline has no {statistic} ({entry['count']} samples "
                                      "do not support it)")
        return entry["seconds"][statistic]

    def check(self, run: Run, rules: list[FailRule | str]) -> list[str]:
        """Lines for every rule the run breaks against this baseline (A), after its identity: another
        rig, gateware or firmware fails outright."""
        differences = self.identity_differences(run)
        if differences:
            return [f"the baseline was taken on another rig or gateware ({'; '.join(differences)}): take a new "
                    "baseline on this one"]
        return _judge(rules, self.kinds, run.kinds, self.value, lambda k, st: _statistic(run.stats(k), st))
