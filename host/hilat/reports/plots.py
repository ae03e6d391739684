"""The four latency plots (matplotlib, PNG and SVG), several runs overlaid with their labels.

- ``faller``: latency on a log axis against percentile on Faller's exponential axis: the median sits
  near the left edge and the tail is stretched out, so a flat curve means a predictable system;
- ``percentiles``: HdrHistogram's percentile distribution, x = 1/(1-p) on a log axis;
- ``histogram``: a log-log histogram of latencies (Realfeel's worst-case view);
- ``timeseries``: latency over the run's rig time, misses marked (and, apart, windows a gap made
  unknown: neither a value nor a miss), to show drift and bursts.

Curves are drawn from exact percentiles of the stored samples (at most a few thousand points per run,
whatever the sample count), so a plot of 10^7 samples costs no more than one of 10^3.
"""

import io
import weakref

import numpy as np

from hilat import analysis
from hilat.extras import require
from hilat.statistics import percentiles
from hilat.statistics.run_statistics import RunStatistics

PLOTS = ["faller", "percentiles", "histogram", "timeseries"]
# Each plot's title in the HTML report.
PLOT_TITLES = {"faller": "latency vs percentile (Faller: log latency, exponential percentile)",
               "percentiles": "percentile distribution (HdrHistogram: x = 1/(1-p))",
               "histogram": "histogram (log-log)", "timeseries": "latency over the run"}
DEFAULT_KINDS = ["stim_to_isr", "stim_to_task"]   # of the built-in kinds; every defined kind is plotted too
FALLER_LAMBDA = 10.0     # p=0.5 -> 0.7% of the axis, p=0.9 -> 37%, p=0.99 -> 90%


def faller_forward(p, lam=FALLER_LAMBDA):
    """Faller's exponential percentile axis: p in [0, 1] -> position in [0, 1], (e^(lam p) - 1)/(e^lam - 1)."""
    p = np.asarray(p, dtype=float)
    return np.expm1(lam * p) / np.expm1(lam)


def faller_inverse(x, lam=FALLER_LAMBDA):
    # Clipped at 0: matplotlib probes a little outside the axis, where the inverse is undefined.
    x = np.maximum(np.asarray(x, dtype=float), 0.0)
    return np.log1p(x * np.expm1(lam)) / lam


def _pyplot():

    matplotlib = require("matplotlib", "report", "plots (--plots, --html, the demo's report.html)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def default_kinds(runs):
    """The built-in stimulus responses, then every defined kind, of any of ``runs``."""
    kinds = []
    for run in runs:
        for kind in run.kind_titles:
            if kind not in kinds and (kind in DEFAULT_KINDS or kind not in analysis.KIND_TITLES):
                kinds.append(kind)
    return kinds


def check_kinds(runs, kinds):
    """``kinds`` if each is a kind of at least one run, else ValueError naming the ones there are."""
    there = {k for run in runs for k in run.kind_titles}
    missing = [k for k in kinds if k not in there]
    if missing:
        raise ValueError(f"no run has the kind(s) {', '.join(missing)} (kinds: {', '.join(sorted(there))})")
    return kinds


_STATISTICS = weakref.WeakKeyDictionary()


def _distribution(run, kind):
    """The run's ``Distribution`` of ``kind`` (all samples): the API's run has its statistics, a
    run read back gets them once (the report's source: exact, streamed or the rig's bins)."""
    if kind not in run.kind_titles:
        return None
    stats = getattr(run, "statistics", None)
    if not isinstance(stats, RunStatistics):
        stats = _STATISTICS.get(run)
        if stats is None:
            stats = _STATISTICS[run] = RunStatistics.of(run)
    return stats.distribution(kind)


def percentile_curve(sorted_values, ps):
    """Exact percentiles (inverted CDF, ``percentiles.exact_percentile``) of sorted samples at the fractions
    ``ps``, as an array."""
    return percentiles.exact_percentile(sorted_values, np.asarray(ps))


def _unit(runs, kinds):
    """Pick µs or ns for the axes from the largest latency."""
    tops = [d.max_mu * r.unit.mu_ns for r in runs for k in kinds
            if (d := _distribution(r, k)) is not None and d.max_mu is not None]
    return ("us", 1e-3) if max(tops, default=0.0) >= 10_000 else ("ns", 1.0)


def _plain_log(axis):
    """Log axis labelled 2, 5, 10, 20 ... instead of 2x10^0."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))


def _legend(ax, **kw):
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, **kw)
    else:
        ax.text(0.5, 0.5, "no samples", transform=ax.transAxes, ha="center", va="center", color="gray")


def _title(runs, kind):
    return next((r.kind_titles[kind] for r in runs if kind in r.kind_titles), kind)


def plot_faller(runs, kinds=None, lam=FALLER_LAMBDA):
    plt = _pyplot()
    kinds = kinds or default_kinds(runs)
    unit, scale = _unit(runs, kinds)
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.2 * len(kinds), 4.6), squeeze=False)
    ticks = [0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 1.0]
    for ax, kind in zip(axes[0], kinds):
        for run in runs:
            d = _distribution(run, kind)
            if d is None or not d.count:
                continue
            # Points evenly spaced on the transformed axis, plus the maximum at p = 1.
            ps = faller_inverse(np.linspace(0.0, 1.0, 1500)[1:], lam)
            ys = d.percentiles_mu(ps) * run.unit.mu_ns * scale
            ax.plot(ps, ys, label=f"{run.label} (n={d.count})", drawstyle="steps-post")
        ax.set_xscale("function", functions=(lambda p: faller_forward(p, lam), lambda x: faller_inverse(x, lam)))
        ax.set_xlim(0.0, 1.0)
        ax.set_xticks(ticks, [f"{100 * t:g}%" for t in ticks])
        ax.set_yscale("log")
        _plain_log(ax.yaxis)
        ax.set_xlabel("percentile (exponential scale)")
        ax.set_ylabel(f"latency ({unit}, log)")
        ax.set_title(_title(runs, kind))
        ax.grid(True, which="both", alpha=0.3)
        _legend(ax)
    fig.tight_layout()
    return fig


def plot_percentiles(runs, kinds=None):
    plt = _pyplot()
    kinds = kinds or default_kinds(runs)
    unit, scale = _unit(runs, kinds)
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.2 * len(kinds), 4.6), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        top = 10
        for run in runs:
            d = _distribution(run, kind)
            if d is None or not d.count:
                continue
            n = d.count
            # x = 1/(1-p) from 1 to n: the last point is the maximum.
            xs = np.unique(np.geomspace(1.0, float(n), 800))
            ps = 1.0 - 1.0 / xs
            ys = d.percentiles_mu(ps) * run.unit.mu_ns * scale
            ax.plot(xs, ys, label=f"{run.label} (n={n})", drawstyle="steps-post")
            top = max(top, n)
        ax.set_xscale("log")
        decades = [10 ** k for k in range(0, int(np.ceil(np.log10(top))) + 1)]
        ax.set_xticks(decades, ["0%" if d == 1 else f"{100 * (1 - 1 / d):.{max(0, int(np.log10(d)) - 2)}f}%"
                                for d in decades])
        ax.set_xlabel("percentile, x = 1/(1-p) (log)")
        ax.set_ylabel(f"latency ({unit})")
        ax.set_title(f"{_title(runs, kind)}: percentile distribution")
        ax.grid(True, which="both", alpha=0.3)
        _legend(ax)
    fig.tight_layout()
    return fig


def histogram_bins(lo, hi, max_bins=120):
    """Log-spaced bin edges over whole ticks [lo, hi]; one tick per bin where the range is narrow."""
    lo = max(int(lo), 1)
    hi = max(int(hi), lo)
    if hi - lo + 1 <= max_bins:
        return np.arange(lo, hi + 2, dtype=float)
    return np.unique(np.round(np.geomspace(lo, hi + 1, max_bins + 1)))


def plot_histogram(runs, kinds=None):
    plt = _pyplot()
    kinds = kinds or default_kinds(runs)
    unit, scale = _unit(runs, kinds)
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.2 * len(kinds), 4.6), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        for run in runs:
            d = _distribution(run, kind)
            if d is None or not d.count:
                continue
            values, weights, _above = d.buckets()
            edges = histogram_bins(values[0], values[-1])
            counts, _ = np.histogram(values, bins=edges, weights=weights)
            nz = counts > 0
            centres = edges[:-1][nz] * run.unit.mu_ns * scale
            worst = (d.max_mu if d.max_mu is not None else values[-1]) * run.unit.mu_ns * scale
            ax.plot(centres, counts[nz], marker=".", linestyle="-", label=f"{run.label} (max {worst:.4g} {unit})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log(ax.xaxis)
        ax.set_xlabel(f"latency ({unit}, log)")
        ax.set_ylabel("samples (log)")
        ax.set_title(f"{_title(runs, kind)}: histogram")
        ax.grid(True, which="both", alpha=0.3)
        _legend(ax)
    fig.tight_layout()
    return fig


def plot_timeseries(runs, kinds=None, max_points=20000):
    plt = _pyplot()
    kinds = kinds or default_kinds(runs)
    unit, scale = _unit(runs, kinds)
    fig, axes = plt.subplots(len(kinds), 1, figsize=(11, 3.2 * len(kinds)), squeeze=False, sharex=True)
    for ax, kind in zip(axes[:, 0], kinds):
        for run in runs:
            if kind not in run.kind_titles or not len(run.measurements.series[kind]):
                continue
            series = run.measurements.series[kind]
            t = (series.start_mu - series.start_mu[0]) / run.unit.mu_hz
            lat = series.values
            unknown = series.unknown != 0
            ok = (lat != analysis.MISSING) & ~unknown
            y = lat * run.unit.mu_ns * scale
            if ok.sum() > max_points:
                # Too many to draw one by one: the max and median of each time bin.
                bins = np.linspace(t[0], t[-1] + 1e-12, max_points // 4 + 1)
                idx = np.clip(np.digitize(t[ok], bins) - 1, 0, len(bins) - 2)
                ymax = np.full(len(bins) - 1, np.nan)
                np.fmax.at(ymax, idx, y[ok])
                line, = ax.plot(bins[:-1], ymax, linewidth=0.6, label=f"{run.label} (max per bin)")
            else:
                line, = ax.plot(t[ok], y[ok], ".", markersize=2, label=run.label, rasterized=True)
            missed = ~ok & ~unknown
            if missed.any():
                # A miss has no latency: a short mark at the top of the axes, at its time.
                ax.vlines(t[missed], 0.93, 1.0, transform=ax.get_xaxis_transform(), color=line.get_color(),
                          linewidth=0.8, label=f"{run.label}: {int(missed.sum())} missed")
            if unknown.any():
                # Unknown (a gap touched the window): neither a value nor a miss; a faint mark at the bottom.
                ax.vlines(t[unknown], 0.0, 0.05, transform=ax.get_xaxis_transform(), color=line.get_color(),
                          linewidth=0.8, alpha=0.4, label=f"{run.label}: {int(unknown.sum())} unknown (gaps)")
        ax.set_yscale("log")
        _plain_log(ax.yaxis)
        ax.set_ylabel(f"latency ({unit}, log)")
        ax.set_title(f"{_title(runs, kind)} over the run")
        ax.grid(True, which="both", alpha=0.3)
        _legend(ax, loc="upper right")
    axes[-1, 0].set_xlabel("time since the kind's first sample (s, rig clock)")
    fig.tight_layout()
    return fig


PLOTTERS = {"faller": plot_faller, "percentiles": plot_percentiles, "histogram": plot_histogram,
            "timeseries": plot_timeseries}


def render(fig, fmt):
    """Figure -> bytes of PNG or SVG; closes the figure."""
    plt = _pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    plt.close(fig)
    return buf.getvalue()


def make_plots(runs, kinds=None, formats=("png", "svg")):
    """{plot name: {format: bytes}} for the four plots."""
    kinds = check_kinds(runs, kinds or default_kinds(runs))
    out = {}
    for name in PLOTS:
        out[name] = {}
        for fmt in formats:
            out[name][fmt] = render(PLOTTERS[name](runs, kinds), fmt)
    return out
