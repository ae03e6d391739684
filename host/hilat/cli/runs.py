"""``hilat report``, ``hilat compare`` and ``hilat export``: the commands over run directories."""

import argparse
import json
import logging
import sys
from datetime import datetime
from pathlib import Path

from hilat import api
from hilat.cli.options import UsageError, _kind_time, _seconds
from hilat.reports import export, formats, plots, report
from hilat.reports.plots import PLOT_TITLES

log = logging.getLogger("hilat")


def _load_runs(paths):
    return [api.load(p) for p in paths]


def _write_output(text, path):
    if path is None or str(path) == "-":
        sys.stdout.write(text)
    else:
        Path(path).write_text(text)
        log.info("wrote %s", path)


def cmd_report(args):
    if args.hdr and (args.plots or args.html):
        raise UsageError("--hdr keeps no samples, so it cannot draw plots: leave out --plots/--html")
    runs = _load_runs(args.runs)
    doc = report.build_report(runs, hdr=True if args.hdr else (False if args.exact else None))
    _write_output(report.format_report(doc, args.format), args.output)
    if args.plots or args.html:
        try:
            kinds = plots.check_kinds(runs, args.kinds or plots.default_kinds(runs))
        except ValueError as e:
            raise UsageError(str(e)) from None
        formats = ("png", "svg") if args.plots else ("png",)
        images = plots.make_plots(runs, kinds, formats)
        if args.plots:
            args.plots.mkdir(parents=True, exist_ok=True)
            for name, by_fmt in images.items():
                for fmt, data in by_fmt.items():
                    (args.plots / f"{name}.{fmt}").write_bytes(data)
            log.info("wrote %d plots (PNG and SVG) to %s", len(images), args.plots)
        if args.html:
            args.html.write_text(html_report(doc, images))
            log.info("wrote %s", args.html)
    return 0


def html_report(doc, images):
    """The self-contained HTML report: ``doc`` (``report.build_report``) with the PNG plots of
    ``plots.make_plots`` (hilat report --html, hilat demo's report.html)."""
    return report.format_html(doc, {PLOT_TITLES[n]: images[n]["png"] for n in plots.PLOTS})


def _fail_rule(text):
    try:
        return api.parse_fail_rule(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _is_baseline(path):
    return path.is_file() and path.suffix == ".json"


def cmd_compare(args):
    if args.save_baseline:
        if args.run_b is not None or _is_baseline(args.run_a):
            raise UsageError("--save-baseline takes one run directory (RUN_A) and no RUN_B")
        path = api.Baseline.from_run(api.load(args.run_a)).save(args.save_baseline)
        log.info("wrote the baseline of %s to %s", args.run_a, path)
        return 0
    if args.run_b is None:
        raise UsageError("compare needs RUN_A and RUN_B (or --save-baseline FILE with RUN_A alone)")
    if _is_baseline(args.run_a):
        # A baseline has figures, not samples: only the rules can be judged against it.
        if not args.fail_if:
            raise UsageError(f"{args.run_a} is a baseline: compare it with --fail-if rules")
        try:
            failures = api.Baseline.load(args.run_a).check(api.load(args.run_b), args.fail_if)
        except ValueError as e:
            raise UsageError(str(e)) from None
    else:
        try:
            comparison = api.compare(args.run_a, args.run_b)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if args.format == "json":
            text = json.dumps(comparison.document, indent=1) + "\n"
        else:
            text = report.format_compare(comparison.document, markdown=args.format == "markdown")
        _write_output(text, args.output)
        failures = comparison.check(args.fail_if) if args.fail_if else []
    for line in failures:
        print(f"FAIL {line}", file=sys.stderr)
    if args.fail_if and not failures:
        log.info("pass: %s", ", ".join(r.text() for r in args.fail_if))
    return 1 if failures else 0


# (option, default file name in the run directory, the reader it is for)
TOOL_FORMATS = [("cyclictest", "cyclictest.hist",
                 "cyclictest's -h histogram text, one column per kind (OSADL's plots)"),
                ("rt-tests-json", "rt-tests.json", "rt-tests JSON, file_version 1: stim_to_isr as irq, stim_to_task "
                 "as thread (Linaro's parsers)"),
                ("hgrm", "KIND.hgrm", "HdrHistogram's percentile distribution of --kind, in us (as "
                 "outputPercentileDistribution prints it)"),
                ("prometheus", "latency.prom", "Prometheus text-format histograms in seconds (node_exporter's "
                 "textfile collector)"),
                ("lava", "lava.txt", "LAVA test-case result lines: name pass|fail value units")]


def _budget_setting(text):
    """KIND=TIME -> (kind, seconds): the LAVA max line of KIND fails above it."""
    kind, value = _kind_time(text, "--budget", "stim_to_isr=50us")
    return kind, _seconds(value.text)


def _started(run):
    try:
        return datetime.fromisoformat(run.meta["started"])
    except (KeyError, TypeError, ValueError):
        return None


def _export_tool_formats(run, args, wanted):
    """The formats of ``TOOL_FORMATS`` asked for, from the statistics of ``run`` (an ``api.Run``)."""
    stats = formats.stats_of(run)
    budgets = dict(args.budget)
    unknown = [k for k in budgets if k not in run.kinds]
    if unknown:
        raise UsageError(f"--budget: the run has no kind {', '.join(unknown)} (kinds: {', '.join(run.kinds)})")
    if budgets and "lava" not in wanted:
        raise UsageError("--budget goes with --lava")
    for what, target in wanted.items():
        if what == "cyclictest":
            text = formats.cyclictest_histogram(stats)
        elif what == "rt-tests-json":
            rig = run.rig
            text = formats.rt_tests_json_text(stats, cmdline=f"hilat capture (run {run.label})",
                                              start_time=_started(run),
                                              sysinfo={"sysname": "hilat", "nodename": rig.get("gateware") or "rig",
                                                       "release": rig.get("firmware") or "", "version": "",
                                                       "machine": rig.get("board") or ""})
        elif what == "hgrm":
            text = formats.hgrm(run.stats(args.kind))
        elif what == "prometheus":
            text = formats.prometheus_text(stats, labels={"run": run.label})
        else:
            text = formats.lava_lines(stats, budgets=budgets or None)
        default = dict((w, d) for w, d, _ in TOOL_FORMATS)[what].replace("KIND", args.kind)
        if target == "-":
            sys.stdout.write(text)
        else:
            path = Path(target) if target else run.path / default
            path.write_text(text)
            print(path)


def cmd_export(args):
    (run,) = _load_runs([args.run])
    tool = {w: getattr(args, w.replace("-", "_")) for w, _, _ in TOOL_FORMATS
            if getattr(args, w.replace("-", "_")) is not None}
    wanted = {k: getattr(args, k) for k in ("csv", "parquet", "json", "hlog", "vcd") if getattr(args, k) is not None}
    if not wanted and not tool:
        raise UsageError("say what to export: --csv, --parquet, --json, --hlog, --vcd, or a tool's format: "
                         + ", ".join("--" + w for w, _, _ in TOOL_FORMATS))
    if (args.hlog is not None or "hgrm" in tool) and args.kind not in run.kind_titles:
        raise UsageError(f"--kind {args.kind}: the run has no such kind (kinds: {', '.join(run.kind_titles)})")
    if tool:
        _export_tool_formats(run, args, tool)
    if not wanted:
        return 0
    missing = export.needs_raw_edges(run, wanted)
    if missing:
        raise UsageError(f"{run.path}: the run has on-rig results only (the engine's histograms; no raw edges, "
                         f"capture with --on-rig --raw to keep them): {', '.join('--' + m for m in missing)} "
                         "need the raw edges; --hlog exports the engine's histograms")
    defaults = {"csv": "samples.csv", "parquet": "samples.parquet", "json": "samples.json", "hlog": f"{args.kind}.hlog",
                "vcd": "edges.vcd"}
    for what, target in wanted.items():
        path = Path(target) if target else run.path / defaults[what]
        if what == "csv":
            export.write_csv(run, path)
        elif what == "parquet":
            export.write_parquet(run, path)
        elif what == "json":
            export.write_json(run, path)
        elif what == "hlog" and not run.has_raw_edges:
            try:
                n = export.write_rig_hlog(run, path, kind=args.kind, interval_s=args.interval)
            except ValueError as e:
                raise UsageError(str(e)) from None
            log.info("%d intervals of %g s (the engine's, from hlog/rig.hlog)", n,
                     args.interval or export.engine_interval_s(run))
        elif what == "hlog":
            interval = args.interval or 1.0
            n = export.write_hlog(run, path, kind=args.kind, interval_s=interval)
            log.info("%d intervals of %g s", n, interval)
        else:
            export.write_vcd(run, path, unit_fs=args.vcd_timescale)
        print(path)
    return 0


def _vcd_unit(text):
    try:
        return export.parse_vcd_unit(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parsers(sub):
    r = sub.add_parser("report", help="latency tables, percentiles and plots of one or more runs")
    r.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run directories (overlaid in tables and plots)")
    r.add_argument("--format", choices=["text", "markdown", "json", "csv"], default="text",
                   help="format of the report on stdout (default text)")
    r.add_argument("-o", "--output", type=Path, help="write the report here instead of stdout")
    r.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report with plots")
    r.add_argument("--plots", type=Path, metavar="DIR", help="also write the four plots as PNG and SVG")
    r.add_argument("--kinds", nargs="+", metavar="KIND", help="kinds to plot, built-in (stim_to_isr, "
                   "stim_to_task, isr_to_task, isr_duration, task_duration) or defined with --measure (default "
                   "stim_to_isr stim_to_task and every defined kind)")
    exact = r.add_mutually_exclusive_group()
    exact.add_argument("--hdr", action="store_true", help="bounded memory: stream the run's edges through HDR "
                       "histograms (median and percentiles to 3 significant digits; the rest exact). The "
                       "default for runs of more than 2*10^7 edges")
    exact.add_argument("--exact", action="store_true", help="exact percentiles even for a long run (holds "
                       "every edge in memory: ~100 bytes per edge)")
    r.set_defaults(func=cmd_report)

    c = sub.add_parser("compare", help="two runs side by side; --fail-if: exit 1 when B is worse than A")
    c.add_argument("run_a", type=Path, metavar="RUN_A", help="the reference: a run directory or a baseline JSON "
                   "(the pytest plugin's .hilat/baselines/...; hilat compare RUN --save-baseline FILE)")
    c.add_argument("run_b", type=Path, metavar="RUN_B", nargs="?", help="the run judged")
    c.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    c.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    c.add_argument("--fail-if", action="append", type=_fail_rule, default=[], metavar="[KIND:]STAT:LIMIT",
                   help="fail (exit 1) when B's statistic exceeds A's by more than LIMIT: p99.9:10%%, max:500ns, "
                        "stim_to_isr:mean:5%%; every latency kind both have unless KIND is given. A percentile "
                        "a count cannot support fails (cannot judge); so does a baseline of another rig or "
                        "gateware (repeatable)")
    c.add_argument("--save-baseline", type=Path, metavar="FILE",
                   help="write RUN_A's figures and rig identity as a baseline JSON (no RUN_B)")
    c.set_defaults(func=cmd_compare)

    e = sub.add_parser("export", help="samples (CSV, Parquet), HDR interval log, VCD of the raw edges (an on-rig "
                       "run without raw edges: the HDR interval log of the engine's bins only)")
    e.add_argument("run", type=Path, metavar="RUN")
    for what, default in (("csv", "samples.csv"), ("parquet", "samples.parquet"), ("json", "samples.json"),
                          ("hlog", "KIND.hlog"), ("vcd", "edges.vcd")):
        e.add_argument(f"--{what}", nargs="?", const="", metavar="FILE", help=f"default RUN/{default}")
    e.add_argument("--kind", default="stim_to_isr", help="kind in the .hlog, built-in or defined with --measure "
                   "(default stim_to_isr)")
    e.add_argument("--interval", type=_seconds, default=None,
                   help="HDR log interval in rig time (default 1s; an on-rig run without raw edges: the engine's "
                        "intervals, or their merge per this much)")
    e.add_argument("--vcd-timescale", type=_vcd_unit, default=None, metavar="UNIT",
                   help="VCD time unit, e.g. 1fs, 10ps, 1ns (default: the coarsest exact one, else 1ns rounded)")
    t = e.add_argument_group("formats other tools read (FILE '-': stdout; these work on on-rig runs too)")
    for what, default, reader in TOOL_FORMATS:
        t.add_argument(f"--{what}", nargs="?", const="", metavar="FILE", help=f"{reader} (default RUN/{default})")
    t.add_argument("--budget", action="append", type=_budget_setting, default=[], metavar="KIND=TIME",
                   help="--lava: the max line of KIND fails above TIME, e.g. stim_to_isr=50us (repeatable)")
    e.set_defaults(func=cmd_export)
