"""A run's latency statistics in the formats other tools read: cyclictest's histogram text, rt-tests
JSON, HdrHistogram's ``.hgrm``, Prometheus text-format histograms and LAVA result lines.

Every function takes ``hilat.api.Stats`` objects (``stats_of(run)``) and returns text (or a dict); none
writes files. Each docstring names the reader the output was checked against
(tests/analysis/test_formats.py).

Every format states each kind's misses (windows seen whole without a response) and, apart, its
unknown windows (``Stats.unknown``: a gap in the record stream touched them, or the stimulus's edge
was lost): neither a sample nor a miss, in no bin, bucket or figure.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from email.utils import format_datetime
from typing import Iterable, Mapping, Sequence

import numpy as np

from hilat.values import seconds as parse_duration
from hilat.version import __version__

__all__ = ["stats_of", "cyclictest_histogram", "rt_tests_json", "rt_tests_json_text", "hgrm", "prometheus_text",
           "lava_lines", "PROMETHEUS_BUCKETS_S", "DEFAULT_SKIPPED_KINDS"]

# Kinds ``stats_of`` leaves out unless asked: durations, not latencies.
DEFAULT_SKIPPED_KINDS = ("isr_duration", "task_duration")
# cyclictest's largest histogram (its HIST_MAX, in 1 us bins).
CYCLICTEST_HIST_MAX = 1_000_000
# Prometheus buckets: 1-2-5 per decade from 100 ns to 10 s (written from decimal text: 2e-07, not 2 * 1e-07).
PROMETHEUS_BUCKETS_S = tuple(float(f"{m}e{e}") for e in range(-7, 1) for m in (1, 2, 5)) + (10.0,)


def stats_of(run, kinds: Iterable[str] | None = None) -> list:
    """``[run.stats(k) for k in kinds]`` of a ``hilat.api.Run``; by default every kind of the run but
    the durations (``DEFAULT_SKIPPED_KINDS``)."""
    if kinds is None:
        kinds = [k for k in run.kinds if k not in DEFAULT_SKIPPED_KINDS]
    return [run.stats(k) for k in kinds]


# ---- microsecond bins (cyclictest, rt-tests JSON) ------------------------------------------------------

def _whole_us(ticks, mu_s: float) -> np.ndarray:
    """Ticks as whole microseconds, truncated as cyclictest truncates (its ``calcdiff``: ns / 1000). The
    1 ps added keeps an exact multiple (200 ticks of 5 ns) from falling 1 ulp short of its microsecond."""
    return np.floor(np.asarray(ticks, dtype=np.float64) * (mu_s * 1e6) + 1e-6).astype(np.int64)


class _UsBins:
    """One kind in cyclictest's terms: counts per 1 us bin below ``size``, overflows, cycles, and
    min/max/avg in whole microseconds."""

    def __init__(self, stats, size: int):
        self.stats = stats
        self.counts = np.zeros(size, np.int64)
        values = stats.values_mu()
        if values is not None:
            us = _whole_us(values, stats.mu_s)
            inside = us < size
            self.counts += np.bincount(us[inside], minlength=size)[:size]
            self.overflows = int(np.count_nonzero(~inside))
            # cyclictest sums the truncated samples (its avg) and divides by its cycles.
            self.avg = float(us.sum()) / len(us) if len(us) else 0.0
        else:
            # Histogram only (on-rig): each bucket counted at its highest equivalent value (HdrHistogram's
            # convention, as Stats.counts_between), kept within the exact min and max; values the histogram
            # could not hold (the rig's overflow bin) are overflows here too.
            at, count, above = stats.buckets()
            us = _whole_us(at, stats.mu_s)
            inside = us < size
            np.add.at(self.counts, us[inside], count[inside])
            self.overflows = int(count[~inside].sum()) + above
            mean = stats.mean_mu
            self.avg = float(mean * stats.mu_s * 1e6) if mean is not None and stats.count else 0.0
        self.cycles = int(stats.count)
        # cyclictest starts min at 1000000 and max at 0: what it prints for a thread without cycles.
        self.min = int(_whole_us(stats.min_mu, stats.mu_s)) if stats.count else 1_000_000
        self.max = int(_whole_us(stats.max_mu, stats.mu_s)) if stats.count else 0


def _default_bins(stats_list) -> int:
    top = max((int(_whole_us(s.max_mu, s.mu_s)) for s in stats_list if s.count), default=0)
    return min(top + 1, CYCLICTEST_HIST_MAX)


def _bins(stats_list, buckets_us) -> list[_UsBins]:
    size = _default_bins(stats_list) if buckets_us is None else int(buckets_us)
    if not 1 <= size <= CYCLICTEST_HIST_MAX:
        raise ValueError(f"buckets_us is 1..{CYCLICTEST_HIST_MAX} (cyclictest's limit), got {buckets_us!r}")
    return [_UsBins(s, size) for s in stats_list]


def cyclictest_histogram(stats_list: Sequence, buckets_us: int | None = None) -> str:
    """cyclictest's ``-h`` histogram text (rt-tests src/cyclictest/cyclictest.c ``print_hist``), one
    column per measurement kind where cyclictest has one per thread: the input of OSADL's latency plots
    (mklatencyplot.bash: ``grep -v -e "^#" -e "^$" | tr " " "\\t"``, ``cut -f1,N``, and the largest
    number on the ``# Max Latencies:`` line) and of rteval's cyclictest parser.

    Rows ``%06d `` (the microsecond) then the counts ``%06lu`` joined by tabs, one row per bin 0 ..
    ``buckets_us`` - 1 (default: up to the largest max, so nothing overflows; at most 1000000 as
    cyclictest); then ``# Total:`` (``%09llu``: samples inside the histogram), ``# Min/Avg/Max
    Latencies:`` and ``# Histogram Overflows:`` (``%05lu``), and ``# Histogram Overflow at cycle
    number:`` with each column's overflows as ``# NNNNN others`` (hilat keeps no cycle numbers). A
    leading ``# hilat:`` comment says which kind each column is.

    A sample's bin is its value truncated to whole microseconds, as cyclictest's ``calcdiff``; min, max
    and Avg too (Avg: the truncated samples' mean, truncated). Misses have no latency and are in no
    column (the leading comment counts them). Exact from ``Stats.values_mu()``; a histogram-only
    (on-rig) kind is approximated: each HdrHistogram bucket's count goes to the microsecond of its
    highest equivalent value (within the exact min and max), the rig's overflow bin to the overflows,
    and Avg is the exact mean truncated (not the mean of truncated samples, up to 1 us more).
    """
    cols = _bins(stats_list, buckets_us)
    out = [f"# hilat: cyclictest -h histogram, 1 us bins, one column per measurement kind ({len(cols)})\n"]
    for i, c in enumerate(cols):
        s = c.stats
        out.append(f"# hilat: column {i + 1} (thread {i}) = {s.kind}: {s.title}; {s.count} samples, "
                   f"{s.misses} missed windows, {s.unknown} unknown windows\n")
    out.append("# Histogram\n")
    table = np.stack([c.counts for c in cols], axis=1) if cols else np.zeros((0, 0), np.int64)
    for i, row in enumerate(table.tolist()):
        out.append(f"{i:06d} " + "\t".join(f"{n:06d}" for n in row) + "\n")
    out.append("# Total:" + "".join(f" {int(c.counts.sum()):09d}" for c in cols) + "\n")
    out.append("# Min Latencies:" + "".join(f" {c.min:05d}" for c in cols) + "\n")
    out.append("# Avg Latencies:" + "".join(f" {int(c.avg):05d}" for c in cols) + "\n")
    out.append("# Max Latencies:" + "".join(f" {c.max:05d}" for c in cols) + "\n")
    out.append("# Histogram Overflows:" + "".join(f" {c.overflows:05d}" for c in cols) + "\n")
    out.append("# Histogram Overflow at cycle number:\n")
    for i, c in enumerate(cols):
        out.append(f"# Thread {i}:" + (f" # {c.overflows:05d} others" if c.overflows else "") + "\n")
    out.append("\n")
    return "".join(out)


# ---- rt-tests JSON -------------------------------------------------------------------------------------

def _rfc2822(when) -> str:
    """rt-tests' timestamps: strftime "%a, %d %b %Y %T %z" of local time (RFC 2822)."""
    if isinstance(when, str):
        return when
    if isinstance(when, (int, float)):
        when = datetime.fromtimestamp(when).astimezone()
    if when.tzinfo is None:
        when = when.astimezone()
    return format_datetime(when)


def _rt_tests_entry(c: _UsBins) -> dict:
    return {"histogram": {str(i): int(n) for i, n in enumerate(c.counts.tolist()) if n},
            "cycles": c.cycles, "min": c.min if c.cycles else 0, "max": c.max,
            "avg": float(f"{c.avg:.2f}"), "cpu": -1, "node": -1}


def rt_tests_json(stats_list: Sequence, buckets_us: int | None = None, *, irq_kind: str = "stim_to_isr",
                  thread_kind: str = "stim_to_task", start_time=None, end_time=None,
                  return_code: int | None = None, cmdline: str = "hilat export", sysinfo: Mapping | None = None,
                  version: str | None = None) -> dict:
    """rt-tests' JSON (``--json``: src/lib/rt-utils.c ``rt_write_json``, cyclictest's ``write_stats``),
    ``file_version`` 1, in the rtla timerlat shape Linaro's test-definitions build for LAVA
    (automated/linux/rtla/parse_rtla.py) and read (automated/lib/parse_rt_tests_results.py): the
    stimulus -> ISR entry kind (``irq_kind``) as ``irq`` "0" (``num_irqs`` 1), the stimulus -> task
    kind (``thread_kind``) as ``thread`` "0" (``num_threads`` 1); a kind missing from ``stats_list``
    gives 0 and an empty object. Other kinds are not in it (``cyclictest_histogram`` has them all).

    Top level as rt_write_json writes it: ``file_version``, ``cmdline:`` and ``rt_test_version:``
    (colons inside the key, as rt-tests spells them), ``start_time``/``end_time`` (RFC 2822; datetime,
    epoch seconds or text; default now), ``return_code`` (default 1 if a kind has misses, else 0),
    ``sysinfo`` (sysname, nodename, release, version, machine, realtime: the measured device is not
    this host, so the defaults say hilat; pass the rig's identity), ``num_threads``,
    ``resolution_in_ns`` 0 (microseconds). Each entry: ``histogram`` {us: count} of non-empty bins
    below ``buckets_us`` (as cyclictest: overflows are in no bin), ``cycles``, ``min``, ``max``,
    ``avg`` (2 decimals), ``cpu`` and ``node`` -1 (cyclictest's "not pinned"). Values in whole
    microseconds as ``cyclictest_histogram`` bins them (the same approximation for histogram-only
    kinds). A top-level ``hilat`` object names the kinds and counts misses, unknown windows (a gap
    touched them: neither a sample nor a miss) and overflows.
    """

    now = datetime.now().astimezone()
    by_kind = {s.kind: s for s in stats_list}
    chosen = [by_kind[k] for k in (irq_kind, thread_kind) if k in by_kind]
    bins = dict(zip([s.kind for s in chosen], _bins(chosen, buckets_us))) if chosen else {}
    if return_code is None:
        return_code = 1 if any(s.misses for s in stats_list) else 0
    info = {"sysname": "hilat", "nodename": "", "release": version or __version__, "version": "",
            "machine": "", "realtime": 0}
    info.update(sysinfo or {})
    irq = {"0": _rt_tests_entry(bins[irq_kind])} if irq_kind in bins else {}
    thread = {"0": _rt_tests_entry(bins[thread_kind])} if thread_kind in bins else {}
    return {
        "file_version": 1,
        "cmdline:": cmdline,
        "rt_test_version:": version or __version__,
        "start_time": _rfc2822(now if start_time is None else start_time),
        "end_time": _rfc2822(end_time if end_time is not None else now if start_time is None else start_time),
        "return_code": int(return_code),
        "sysinfo": info,
        "num_threads": len(thread),
        "resolution_in_ns": 0,
        "thread": thread,
        "num_irqs": len(irq),
        "irq": irq,
        "hilat": {
            "irq": {"0": irq_kind} if irq else {}, "thread": {"0": thread_kind} if thread else {},
            "misses": {k: int(by_kind[k].misses) for k in bins},
            "unknown": {k: int(by_kind[k].unknown) for k in bins},
            "overflows": {k: c.overflows for k, c in bins.items()},
        },
    }


def rt_tests_json_text(stats_list: Sequence, buckets_us: int | None = None, **kw) -> str:
    """``rt_tests_json`` as the file's text (2-space indent, as rt-tests writes it)."""
    return json.dumps(rt_tests_json(stats_list, buckets_us, **kw), indent=2) + "\n"


# ---- HdrHistogram .hgrm --------------------------------------------------------------------------------

_WIDE = Context(prec=80)


def _java_f(x: float, decimals: int) -> str:
    """Java's ``%.Nf`` (java.util.Formatter): the double's shortest decimal text rounded half up, not
    the binary value rounded half even as C and Python do (0.125 -> "0.13")."""
    with localcontext(_WIDE):
        d = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    return format(d, "f")


def _mu_per_us(mu_s: float) -> float:
    r = 1e-6 / mu_s
    return float(round(r)) if abs(r - round(r)) <= 1e-9 * r else r


def hgrm(stats, ticks_per_half_distance: int = 5, unit_ratio: float | None = None) -> str:
    """HdrHistogram's percentile distribution text (``.hgrm``): byte for byte what Java HdrHistogram's
    ``AbstractHistogram.outputPercentileDistribution(out, ticks_per_half_distance, unit_ratio)``
    prints for the same histogram (checked against Debian's libhdrhistogram-java), so HdrHistogram's
    plotter and every .hgrm reader take it.

    ``stats``: a ``hilat.api.Stats`` (its ``histogram()`` in ticks: exact samples at 3 significant
    digits, on-rig runs the engine's 2-digit bins) or an ``hilat.hdr.HdrHistogram``. ``unit_ratio``
    divides the values: default ticks per microsecond (the Value column in us) for a Stats, 1 for a
    bare histogram. Rows at the percentile iterator's levels (``ticks_per_half_distance`` per halving),
    the last at 100% without an inverse; the footer's mean and standard deviation are Java's (bucket
    median equivalent values), Max the highest equivalent value of the largest sample. Values beyond
    the histogram's range (the rig's overflow bin) are not in it, as in any HdrHistogram.
    """
    if hasattr(stats, "histogram"):
        h = stats.histogram()
        ratio = _mu_per_us(stats.histogram_unit_s) if unit_ratio is None else float(unit_ratio)
    else:
        h = stats
        ratio = 1.0 if unit_ratio is None else float(unit_ratio)
    digits = h.significant_figures
    out = [f"{'Value':>12} {'Percentile':>14} {'TotalCount':>10} {'1/(1-Percentile)':>14}\n\n"]
    dist = h.percentile_distribution(ticks_per_half_distance)
    for value, level, total in zip(dist.value.tolist(), dist.percentile.tolist(), dist.total_count.tolist()):
        v = f"{_java_f(value / ratio, digits):>12}"
        p = f"{_java_f(level / 100.0, 12):>2}"
        if level != 100.0:
            out.append(f"{v} {p} {total:>10d} {_java_f(1 / (1.0 - level / 100.0), 2):>14}\n")
        else:
            out.append(f"{v} {p} {total:>10d}\n")
    mean, std = h.mean, h.stddev           # Java's getMean/getStdDeviation, in its summation order
    mean, std = _java_f(mean / ratio, digits), _java_f(std / ratio, digits)
    out.append(f"#[Mean    = {mean:>12}, StdDeviation   = {std:>12}]\n")
    out.append(f"#[Max     = {_java_f(h.max / ratio, digits):>12}, Total count    = {h.total_count:>12d}]\n")
    out.append(f"#[Buckets = {h.bucket_count:>12d}, SubBuckets     = {h.sub_bucket_count:>12d}]\n")
    return "".join(out)


# ---- Prometheus text format ----------------------------------------------------------------------------

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _label_value(v) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _help_text(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n")


def _float(x: float) -> str:
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(float(x))


def _le_counts(stats, le_s: Sequence[float]) -> list[int]:
    """Samples <= each bound (seconds): exact from the samples, else each histogram bucket at its highest
    equivalent value. Compared in ticks: a bound is its whole ticks (1e-12 relative slack, so that 150
    ticks of 1/150 MHz are <= 1 us whatever the float rounding of mu_s)."""
    bound_mu = np.floor(np.asarray(le_s, dtype=np.float64) / stats.mu_s * (1 + 1e-12))
    values = stats.values_mu()
    if values is not None:
        return np.searchsorted(np.asarray(values, dtype=np.float64), bound_mu, side="right").tolist()
    at, count, _above = stats.buckets()
    cum = np.concatenate([[0], np.cumsum(count)])
    return cum[np.searchsorted(at.astype(np.float64), bound_mu, side="right")].tolist()


def prometheus_text(stats_list: Sequence, buckets_s: Sequence[float] | None = None,
                    metric: str = "hilat_latency_seconds", labels: Mapping[str, str] | None = None,
                    misses_metric: str = "hilat_missed_windows",
                    unknown_metric: str = "hilat_unknown_windows") -> str:
    """Prometheus text exposition format (0.0.4) for node_exporter's textfile collector (a ``.prom``
    file), read back in the tests with ``prometheus_client.parser``: one histogram family ``metric`` in
    seconds, a ``kind`` label per measurement kind (and ``labels`` on every sample), cumulative
    ``_bucket{le=...}`` ending with ``+Inf``, ``_sum`` (mean * count, exact) and ``_count`` (samples
    with a value); a gauge ``misses_metric`` of each kind's missed windows (no latency: in no bucket);
    and a gauge ``unknown_metric`` of each kind's unknown windows (a gap touched them: neither a sample
    nor a miss, in no bucket and not in ``misses_metric``).

    ``buckets_s``: upper bounds in seconds; default ``PROMETHEUS_BUCKETS_S``, a fixed 1-2-5 ladder from
    100 ns to 10 s, the same for every run so that series compare across runs. A bucket counts the
    samples <= its bound, exactly from the samples; a histogram-only (on-rig) kind counts each
    HdrHistogram bucket at its highest equivalent value (never early: a bucket straddling a bound
    is counted above it), its overflow bin only in ``+Inf``.
    """
    for name in (metric, misses_metric, unknown_metric):
        if not _METRIC_NAME.fullmatch(name):
            raise ValueError(f"not a Prometheus metric name: {name!r}")
    extra = dict(labels or {})
    for name in extra:
        if not _LABEL_NAME.fullmatch(name) or name.startswith("__") or name in ("kind", "le"):
            raise ValueError(f"not a label name hilat can add: {name!r}")
    bounds = sorted({float(b) for b in (PROMETHEUS_BUCKETS_S if buckets_s is None else buckets_s)} - {math.inf})
    if any(not math.isfinite(b) for b in bounds):
        raise ValueError("bucket bounds are finite seconds (+Inf is always added)")

    def labelset(kind, **more):
        pairs = [("kind", kind), *extra.items(), *more.items()]
        return "{" + ",".join(f'{k}="{_label_value(v)}"' for k, v in pairs) + "}"

    out = [f"# HELP {metric} {_help_text('hilat: latency per measurement kind (seconds), from the rig')}\n",
           f"# TYPE {metric} histogram\n"]
    for s in stats_list:
        counts = _le_counts(s, bounds)
        for b, n in zip(bounds, counts):
            out.append(f"{metric}_bucket{labelset(s.kind, le=_float(b))} {min(int(n), s.count)}\n")
        out.append(f"{metric}_bucket{labelset(s.kind, le='+Inf')} {s.count}\n")
        total = float(s.mean_mu) * s.mu_s * s.count if s.count and s.mean_mu is not None else 0.0
        out.append(f"{metric}_sum{labelset(s.kind)} {_float(total)}\n")
        out.append(f"{metric}_count{labelset(s.kind)} {s.count}\n")
    out.append(f"# HELP {misses_metric} {_help_text('hilat: stimuli without a response in the window, per kind')}\n")
    out.append(f"# TYPE {misses_metric} gauge\n")
    for s in stats_list:
        out.append(f"{misses_metric}{labelset(s.kind)} {s.misses}\n")
    unknown_help = "hilat: windows a gap in the record stream touched (neither a sample nor a miss), per kind"
    out.append(f"# HELP {unknown_metric} {_help_text(unknown_help)}\n")
    out.append(f"# TYPE {unknown_metric} gauge\n")
    for s in stats_list:
        out.append(f"{unknown_metric}{labelset(s.kind)} {s.unknown}\n")
    return "".join(out)


# ---- LAVA ----------------------------------------------------------------------------------------------

def _case_name(text: str) -> str:
    return re.sub(r"\s+", "_", text.strip())


def lava_lines(stats_list: Sequence, budgets: Mapping[str, float | str] | None = None,
               percentiles: Sequence[float] = (99.9,), prefix: str = "") -> str:
    """LAVA test-case result lines ``NAME pass|fail VALUE UNITS``, one a line: the result.txt that
    Linaro test-definitions' automated/utils/send-to-lava.sh turns into ``lava-test-case NAME --result
    R --measurement V --units U`` (and parse_rt_tests_results.py's shape: ``t0-max-latency pass 12 us``).

    Per kind: ``KIND-min-latency``, ``-avg-latency``, ``-max-latency`` and ``-pNN-latency`` for each of
    ``percentiles`` the count supports (microseconds, 3 decimals), then ``KIND-misses N windows`` and
    ``KIND-unknown N windows`` (windows a gap touched: neither a sample nor a miss; it passes, the
    run's losses are judged elsewhere).
    ``budgets`` {kind: max seconds, or text as "50us"} fails the kind's max line above its budget;
    figures without a budget pass. A misses line fails when the kind missed windows. A kind without
    samples gives its figures as ``skip`` (no value); a percentile above the rig's range as ``unknown``.
    Names: ``prefix`` + kind, whitespace made ``_`` (LAVA splits its signal on blanks).
    """
    known = {s.kind for s in stats_list}
    limits = {}
    for kind, limit in (budgets or {}).items():
        if kind not in known:
            raise ValueError(f"budget for {kind!r}, which is not among the kinds ({', '.join(sorted(known))})")
        limits[kind] = parse_duration(limit)
    lines = []
    for s in stats_list:
        name = _case_name(prefix + s.kind)
        if not s.count:
            lines += [f"{name}-{what}-latency skip" for what in ("min", "avg", "max")]
        else:
            lines.append(f"{name}-min-latency pass {float(s.min) * 1e6:.3f} us")
            lines.append(f"{name}-avg-latency pass {float(s.mean) * 1e6:.3f} us")
            over = s.kind in limits and float(s.max) > limits[s.kind]
            lines.append(f"{name}-max-latency {'fail' if over else 'pass'} {float(s.max) * 1e6:.3f} us")
            for p in percentiles:
                if not s.supports(p):
                    continue
                value = float(s.percentile(p))
                label = _case_name(f"{name}-p{p:g}-latency")
                lines.append(f"{label} pass {value * 1e6:.3f} us" if math.isfinite(value) else f"{label} unknown")
        lines.append(f"{name}-misses {'fail' if s.misses else 'pass'} {s.misses} windows")
        lines.append(f"{name}-unknown pass {s.unknown} windows")
    return "".join(line + "\n" for line in lines)
