"""``hilat``: the command line. Logs go to stderr, results to stdout or files.

    hilat info URL                     identify the rig
    hilat capture URL [options]        run stimuli, record every edge, write a run directory
    hilat sim [options]                start the simulated rig and DUT; print the URL
    hilat demo [options]               sim + capture + summary in one command
    hilat report RUN... [options]      Faller tables, percentiles, plots, HTML (one or more runs)
    hilat compare RUN_A RUN_B          side by side, with the difference at each percentile
    hilat export RUN --csv/--parquet/--json/--hlog/--vcd   samples, HDR interval log, raw edges
    hilat calibrate loopback URL       the rig's own offset and jitter (jumper STIM0 -> SPARE)
    hilat calibrate clock URL          the rig's clock error in ppm (--against host | pps)
"""

import argparse
import json
import logging
import re
import signal
import sys
from pathlib import Path

from hilat.reports.plots import PLOT_TITLES as _PLOT_TITLES  # the HTML report's plot titles (cmd_demo, cmd_report)
from hilat.values import STIMULUS_MODES, TICKS, DurationError, parse_duration

log = logging.getLogger("hilat")

class UsageError(ValueError):
    """A command-line value that parses but cannot be used; reported as a usage error."""


class TimeValue:
    """A duration given as ticks ("1500") or with a unit ("20us"); converted once ts_hz is known."""

    def __init__(self, text):
        try:
            self.duration = parse_duration(text, default_unit=TICKS)
        except DurationError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        self.value, self.unit, self.text = self.duration.value, self.duration.unit, text

    def ticks(self, ts_hz):
        return self.duration.ticks(ts_hz)

    def __repr__(self):
        return self.text


def _positive_int(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def _role_setting(text):
    role, sep, channel = text.partition("=")
    if not sep or not role or not channel:
        raise argparse.ArgumentTypeError(f"a role is ROLE=CHANNEL (e.g. isr=in4), got {text!r}")
    return role.strip(), channel.strip()


def _fire_setting(text):
    """CHANNEL[:KEY=VALUE,...] -> (channel, {key: value}); values are whole ticks (invert: 0/1)."""
    channel, _, settings = text.partition(":")
    if not channel.strip():
        raise argparse.ArgumentTypeError(f"--also-fire CHANNEL[:KEY=VALUE,...], got {text!r}")
    overrides = {}
    for item in filter(None, (x.strip() for x in settings.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[a-z_]+", key.strip()):
            raise argparse.ArgumentTypeError(f"--also-fire: {item!r} is not KEY=VALUE")
        key, value = key.strip(), value.strip()
        if key == "mode":
            if value not in STIMULUS_MODES:
                raise argparse.ArgumentTypeError(f"--also-fire: mode {value!r} (modes: {', '.join(STIMULUS_MODES)})")
            overrides[key] = value
        elif key == "invert":
            overrides[key] = value in ("1", "true", "yes")
        else:
            try:
                overrides[key] = int(value, 0)
            except ValueError:
                raise argparse.ArgumentTypeError(f"--also-fire: {key}={value!r} is not a whole number of ticks") \
                    from None
    return channel.strip(), overrides


def _kind_time(text, option, example):
    """KIND=TIME -> (kind, TimeValue), for ``option``."""
    kind, sep, value = text.partition("=")
    if not sep or not kind.strip():
        raise argparse.ArgumentTypeError(f"{option} KIND=TIME (e.g. {example}), got {text!r}")
    return kind.strip(), TimeValue(value)


def _outlier_setting(text):
    """KIND=TIME: outlier records of the engine above that value."""
    return _kind_time(text, "--outlier", "stim_to_isr=20us")


def _trigger_setting(text):
    """[RESPONSE=]TIME -> (response, TimeValue): the engine's trigger-out when RESPONSE (isr, the
    default, or task) has not come TIME after the stimulus."""
    response, sep, value = text.rpartition("=")
    response = response.strip() if sep else "isr"
    if response not in ("isr", "task"):
        raise argparse.ArgumentTypeError(f"--trigger [isr=|task=]TIME (e.g. 50us, task=200us), got {text!r}")
    return response, TimeValue(value)


def _dut_setting(text):
    if not re.fullmatch(r"[a-z_0-9]+=[0-9]+", text):
        raise argparse.ArgumentTypeError(f"DUT setting must be NAME=NUMBER, got {text!r}")
    return tuple(text.split("=", 1))


def _add_link_options(parser):
    from hilat.link.transport import BOARD_BAUDRATES, DEFAULT_BAUDRATE

    rates = ", ".join(f"{board} {rate}" for board, rate in BOARD_BAUDRATES.items())
    parser.add_argument("--baud", type=_positive_int, default=None, metavar="RATE",
                        help=f"baud rate of the rig's UART, the gateware's --uart-baudrate (default: the "
                             f"--board's, else {DEFAULT_BAUDRATE}; ignored for socket:// and udp://)")
    parser.add_argument("--board", choices=sorted(BOARD_BAUDRATES), default=None,
                        help=f"the rig's board: its UART's default rate ({rates}; docs/boards.md)")


def _open(url, args):
    """The transport to the rig at ``url`` with the command's link options."""
    from hilat.link.transport import DEFAULT_BAUDRATE, Transport

    baud = getattr(args, "baud", None)
    if baud is not None and url.startswith(("socket://", "udp://")):
        log.info("--baud %d ignored: %s has no baud rate", baud, url)
    return Transport(url, baudrate=baud or DEFAULT_BAUDRATE)


def _add_capture_options(parser, default_count=2000):
    g = parser.add_argument_group("capture")
    g.add_argument("--count", type=_positive_int, default=None,
                   help=f"stimuli to send (default {default_count} unless --duration is given)")
    g.add_argument("--duration", type=TimeValue, help="capture for this long (rig time), e.g. 50ms")
    g.add_argument("--deadline", type=TimeValue,
                   help="response window after each stimulus (default: until the next stimulus)")
    g.add_argument("--glitch", type=_non_negative_int, default=0, metavar="TICKS",
                   help="glitch filter on the DUT inputs, in ticks up to the rig's maximum (hilat info; default 0)")
    g.add_argument("--label", default="", help="name of the run (directory suffix, report titles)")
    g.add_argument("--out", type=Path, default=Path("runs"), help="directory for run directories (default runs)")
    g.add_argument("--no-progress", action="store_true",
                   help="no live view on stderr (a table on a terminal, else a line every 2 s; new maxima)")
    g.add_argument("--hlog-interval", type=_interval_seconds, default=10.0, metavar="TIME",
                   help="rolling HdrHistogram log hlog/capture.hlog: one interval per this much rig time, "
                        "per kind, e.g. 10s, 500ms (default 10s; 0: none). SIGUSR1 writes an interim summary "
                        "and cuts the open intervals")
    _add_calibration_dir(g)
    g.add_argument("--no-calibration", action="store_true",
                   help="apply no stored calibration (offset 0, nominal tick frequency)")
    r = parser.add_argument_group("channel roles (default: the rig's table, see hilat info)")
    r.add_argument("--role", action="append", type=_role_setting, default=[], metavar="ROLE=CHANNEL",
                   help="move a role to another channel, by name or number: stimulus=stim1, isr=in4, task=7, "
                        "tag=in6 (repeatable)")
    r.add_argument("--active-low", action="append", default=[], metavar="CHANNEL",
                   help="an input whose active level is low (the DUT pulls it down on entry), by name or "
                        "number (repeatable)")
    m = parser.add_argument_group(
        "measurements (beyond the built-in stimulus -> ISR/task kinds; docs/analysis.md)",
        "A definition is NAME=SPEC. SPEC: A..B[@DEADLINE] (from each edge A to the first edge B after it, "
        "before the next A or the deadline; no B is a miss), period:A (from each A to the next A), width:A "
        "(from each A to the channel's next opposite edge). An edge is CHANNEL[:rise|:fall], CHANNEL a name, "
        "number or role (stimulus, isr, task, tag); without :rise/:fall, the channel's active edge.")
    m.add_argument("--measure", action="append", default=[], metavar="NAME=SPEC",
                   help="e.g. send_to_recv=in0..in1, timer=period:in2, pulse=width:in3:rise, "
                        "irq2=stim1..in2@50us (repeatable)")
    m.add_argument("--no-stimulus", action="store_true",
                   help="fire no stimulus: the rig only timestamps (DUT-paced tests); needs --measure, and "
                        "--count counts the first measurement's start edges")
    m.add_argument("--also-fire", action="append", type=_fire_setting, default=[], metavar="CHANNEL[:K=V,...]",
                   help="fire another stimulus output at the same time, with the stimulus settings below "
                        "except those given, e.g. stim1:period=7001,seed=5 (ticks; repeatable); pair it "
                        "with --measure")
    e = parser.add_argument_group("on-rig measurement (a rig with the engine: hilat info, docs/engine.md)")
    e.add_argument("--on-rig", action="store_true",
                   help="the rig pairs and bins (hlog/rig.hlog, engine.json, outliers.bin); complete at any "
                        "stimulus rate; raw edges off unless --raw")
    e.add_argument("--raw", action="store_true", help="with --on-rig: stream the raw edges too, as the link allows")
    e.add_argument("--interval-shift", type=_positive_int, default=24, metavar="N",
                   help="with --on-rig: the engine's intervals (rig.hlog lines) are 2**N ticks (default 24)")
    e.add_argument("--outlier", action="append", type=_outlier_setting, default=[], metavar="KIND=TIME",
                   help="with --on-rig: the engine records every sample above TIME in KIND (stim_to_isr, "
                        "stim_to_task, isr_to_task) in outliers.bin (repeatable)")
    e.add_argument("--trigger", type=_trigger_setting, metavar="[isr=|task=]TIME",
                   help="with --on-rig: pulse the rig's trigger-out pin (docs/wiring.md) when the ISR (or the "
                        "task) has not come TIME after a stimulus, e.g. 50us, task=200us; the pin rises the "
                        "engine's trigger delay (hilat info) after that moment. TIME is below the deadline")
    e.add_argument("--trigger-on-late", action="store_true",
                   help="with --trigger: also pulse when that response comes later than TIME")
    e.add_argument("--trigger-width", type=TimeValue, metavar="TIME",
                   help="with --trigger: the pulse's width, 1 to 65535 ticks (default 1us)")
    s = parser.add_argument_group("stimulus (the channel with the stimulus role)")
    s.add_argument("--mode", choices=list(STIMULUS_MODES), default="dither")
    s.add_argument("--period", type=TimeValue, default=TimeValue("100us"),
                   help="period, burst period, or random hold-off (default 100us)")
    s.add_argument("--jitter", type=TimeValue, default=TimeValue("20us"),
                   help="dither: +/- this much, uniform (default 20us)")
    s.add_argument("--mean", type=TimeValue, help="random: mean interval (> --period, the hold-off)")
    s.add_argument("--width", type=TimeValue, default=TimeValue("10"), help="pulse width (default 10 ticks)")
    s.add_argument("--burst-count", type=_positive_int, default=1)
    s.add_argument("--burst-spacing", type=TimeValue, default=TimeValue("10"))
    s.add_argument("--seed", type=int, default=1, help="PRNG seed of the stimulus (dither, random)")
    s.add_argument("--invert", action="store_true", help="active-low stimulus")


def _duration(value):
    """A TimeValue as the API takes it: a string with a unit, or whole ticks as "N ticks"."""
    if value is None:
        return None
    return f"{int(value.value)} ticks" if value.duration.in_ticks else value.text


def _capture_kwargs(args, default_count=2000):
    """The API's capture settings (``hilat.api.capture_settings``) from the command's options."""
    roles = dict(args.role)
    if len(roles) != len(args.role):
        raise UsageError("a role is given twice in --role")
    # Combinations checked here too, so the message names the options (the API names its arguments).
    if args.mode == "random" and args.mean is None:
        raise UsageError("--mode random needs --mean (the mean interval)")
    if args.no_stimulus and not args.measure:
        raise UsageError("--no-stimulus measures nothing by itself: give at least one --measure")
    if args.raw and not args.on_rig:
        raise UsageError("--raw goes with --on-rig (without it a capture streams the raw edges anyway)")
    if (args.trigger_on_late or args.trigger_width is not None) and args.trigger is None:
        raise UsageError("--trigger-on-late and --trigger-width go with --trigger")
    return dict(count=args.count, duration=_duration(args.duration), deadline=_duration(args.deadline),
                mode=args.mode, period=_duration(args.period), jitter=_duration(args.jitter),
                mean=_duration(args.mean), width=_duration(args.width), burst_count=args.burst_count,
                burst_spacing=_duration(args.burst_spacing), seed=args.seed, invert=args.invert, glitch=args.glitch,
                roles=roles, active_low=list(args.active_low), measures=list(args.measure),
                no_stimulus=args.no_stimulus, also_fire=list(args.also_fire), on_rig=args.on_rig,
                raw=args.raw or None, interval_shift=args.interval_shift,
                outliers={kind: _duration(t) for kind, t in args.outlier},
                trigger=None if args.trigger is None else (args.trigger[0], _duration(args.trigger[1])),
                trigger_on_late=args.trigger_on_late, trigger_width=_duration(args.trigger_width),
                label=args.label, out_dir=args.out, progress=not args.no_progress, default_count=default_count)


def cmd_info(args):
    from hilat.api import Rig
    from hilat.link import identity

    with Rig(args.url, baud=args.baud, calibration_dir=args.calibration_dir) as rig:
        info = rig.identity
    print(json.dumps(info, indent=1) if args.json else identity.text(info))
    return 0


def _run_capture(url, args, extra_meta=None):
    from hilat.api import Rig, SettingsError

    rig = Rig(url, baud=getattr(args, "baud", None), calibration_dir=args.calibration_dir,
              calibrate=not args.no_calibration)
    if rig.baud is not None and url.startswith(("socket://", "udp://")):
        log.info("--baud %d ignored: %s has no baud rate", rig.baud, url)
    try:
        capture = rig.capture_raw(hlog_interval=args.hlog_interval, extra_meta=extra_meta,
                                  no_calibration_reason="--no-calibration: the user asked for none",
                                  **_capture_kwargs(args))
    except SettingsError as e:
        raise UsageError(str(e)) from None
    if capture.run_dir:
        log.info("run directory: %s", capture.run_dir)
    if capture.identity is not None and capture.run_dir and (capture.run_dir / "summary.txt").exists():
        print(capture.report())
    if capture.error:
        log.error("%s (what was captured is kept in %s)", capture.error, capture.run_dir)
        return 1, capture
    return (130 if capture.interrupted else 0), capture


def cmd_capture(args):
    return _run_capture(args.url, args)[0]


def _dut_args(args):
    return dict(args.dut or [])


def _dut_cpu(args):
    """The CPU of a CPU DUT (targets/dut/cpu_soc.py), None for the Verilog model."""
    return None if args.dut_cpu == "model" else args.dut_cpu


# The options of hilat sim/demo whose names differ from the simulated rig's settings
# (hilat.simulator.SETTINGS); the others, the calibration sources' among them, keep their names.
_SIM_SETTING_OPTIONS = {"edge_clock_high_ps": "edge_clock_high", "async_source_cycles": "async_source",
                        "dut_cpu_clk_hz": "dut_cpu_clock"}


def _sim_settings(args):
    """The ``hilat.simulate`` keyword arguments of hilat sim's or demo's options (one launcher for both)."""
    from hilat.simulator import SETTINGS

    settings = {name: getattr(args, _SIM_SETTING_OPTIONS.get(name, name), None) for name in SETTINGS}
    settings = {name: value for name, value in settings.items() if value is not None}
    settings.update(dut=_dut_args(args), dut_cpu=_dut_cpu(args))
    if getattr(args, "pps_period", None) is not None:
        settings["pps_period"] = args.pps_period.text   # converted with the simulated rig's tick rate
    for path in ("dut_log", "pps_log"):
        if path in settings:
            settings[path] = str(settings[path])
    return settings


def _simulate(args):
    """The simulated rig of the options (``hilat.simulate``); refused settings are usage errors."""
    from hilat.api import SettingsError, simulate

    try:
        return simulate(**_sim_settings(args))
    except SettingsError as e:
        raise UsageError(str(e)) from None


def _enter_simulation(simulation):
    from hilat.api import SettingsError

    try:
        return simulation.__enter__()
    except SettingsError as e:
        raise UsageError(str(e)) from None


def cmd_sim(args):
    simulation = _simulate(args)
    sim = _enter_simulation(simulation)
    try:
        print(sim.url, flush=True)
        if sim.udp_url:
            # Both links live in the simulator's namespace: other processes reach them through nsenter.
            print(sim.udp_url, flush=True)
            log.info("the simulated rig's links are in its network namespace: reach them with "
                     "`nsenter --net=/proc/%d/ns/net hilat info %s`", sim.pid, sim.udp_url)
        if sim.console:
            log.info("the DUT's console: %s", sim.console)
        if args.trace:
            log.info("waveforms of every signal: %s", sim.run_dir / "sim.vcd")
        log.info("simulated rig running; Ctrl-C to stop")
        # Ctrl-C, SIGTERM or SIGHUP end the wait (KeyboardInterrupt): leaving stops the simulator.
        sim.wait()
    finally:
        simulation.__exit__(None, None, None)
    return 0


def cmd_demo(args):
    simulation = _simulate(args)
    sim = _enter_simulation(simulation)
    try:
        if sim.udp_url:   # the Ethernet link exists only in the simulator's network namespace
            from hilat.simulator import join_network_namespace

            join_network_namespace(sim.pid)
        url = sim.udp_url or sim.url
        log.info("simulated rig and DUT on %s", url)
        if not args.label:
            args.label = "demo"
        code, capture = _run_capture(url, args, extra_meta={"simulated": True, "dut_settings": _dut_args(args)})
    finally:
        simulation.__exit__(None, None, None)
    run_dir = capture.run_dir
    # Keep what the DUT model injected (or a CPU DUT wrote on its console) next to the run.
    for kept in (sim.dut_log, sim.console):
        if run_dir and kept and kept.exists():
            (run_dir / kept.name).write_bytes(kept.read_bytes())
    if code == 0 and run_dir:
        from hilat.extras import MissingExtra
        from hilat.reports import plots, report
        from hilat.rundir.reader import load_run

        run = load_run(run_dir)
        try:
            images = plots.make_plots([run], formats=("png",))
        except MissingExtra as e:
            log.warning("no report.html: %s", e)
            return code
        html = report.format_html(report.build_report([run]), {_PLOT_TITLES[n]: images[n]["png"] for n in plots.PLOTS})
        (run_dir / "report.html").write_text(html)
        print(f"\nHTML report with plots: {run_dir / 'report.html'}\n"
              f"percentiles, other formats, comparisons: hilat report {run_dir}; hilat compare RUN_A RUN_B")
    return code


def _load_runs(paths):
    from hilat.rundir.reader import load_run

    return [load_run(p) for p in paths]


def _write_output(text, path):
    if path is None or str(path) == "-":
        sys.stdout.write(text)
    else:
        Path(path).write_text(text)
        log.info("wrote %s", path)


def cmd_report(args):
    from hilat.reports import plots, report

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
            html = report.format_html(doc, {_PLOT_TITLES[n]: images[n]["png"] for n in plots.PLOTS})
            args.html.write_text(html)
            log.info("wrote %s", args.html)
    return 0


def _fail_rule(text):
    from hilat.api import parse_fail_rule

    try:
        return parse_fail_rule(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _is_baseline(path):
    return path.is_file() and path.suffix == ".json"


def cmd_compare(args):
    from hilat import api
    from hilat.reports import report

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
    from datetime import datetime

    try:
        return datetime.fromisoformat(run.meta["started"])
    except (KeyError, TypeError, ValueError):
        return None


def _export_tool_formats(run_dir, args, wanted):
    """The formats of ``TOOL_FORMATS`` asked for, from the run's statistics (``hilat.reports.formats``)."""
    from hilat import api
    from hilat.reports import formats

    run = api.load(run_dir)
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
    from hilat.reports import export

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
        _export_tool_formats(args.run, args, tool)
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
    from hilat.reports.export import parse_vcd_unit

    try:
        return parse_vcd_unit(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _interval_seconds(text):
    """A time with a unit, or 0 (none)."""
    if text.strip() == "0":
        return 0.0
    return _seconds(text)


def _seconds(text):
    value = TimeValue(text)
    if value.duration.in_ticks:
        raise argparse.ArgumentTypeError(f"give a time with a unit (e.g. 1s, 100ms), not ticks: {text!r}")
    return value.duration.seconds()


# ---- calibration (hilat calibrate, hilat sim's calibration sources) --------------------------------

def _add_calibration_dir(parser):
    parser.add_argument("--calibration-dir", type=Path, default=None,
                        help="calibration files (default $HILAT_CALIBRATION_DIR or ~/.config/hilat/calibration)")


def _signed_float(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _non_negative_int(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def _add_sim_calibration_options(parser):
    g = parser.add_argument_group("calibration sources on the SPARE input (capture channel 4)")
    g.add_argument("--loopback", type=_non_negative_int, metavar="TICKS",
                   help="loopback jumper STIM0 -> SPARE with this delay (the rig's own offset), 0..255 ticks")
    g.add_argument("--loopback-jitter", type=_non_negative_int, default=0, metavar="TICKS",
                   help="plus a uniform 0..TICKS per pulse (default 0)")
    g.add_argument("--pps-period", type=TimeValue, metavar="TIME",
                   help="a 1PPS source on SPARE with this nominal period, e.g. 1ms (a real 1s takes ~80 s of "
                        "simulation per pulse)")
    g.add_argument("--pps-ppm", type=_signed_float, default=0.0,
                   help="the rig clock's error the 1PPS reveals, in ppm (signed, exact in the long run)")
    g.add_argument("--pps-jitter", type=_non_negative_int, default=0, metavar="TICKS",
                   help="move each pulse by a uniform -TICKS..+TICKS")
    g.add_argument("--pps-missing-every", type=_non_negative_int, default=0, metavar="N",
                   help="drop pulses N, 2N, ... (bad-input test)")
    g.add_argument("--pps-missing-run", type=_positive_int, default=1, metavar="R",
                   help="drop R pulses in a row each time (default 1)")
    g.add_argument("--pps-extra-every", type=_non_negative_int, default=0, metavar="M",
                   help="an extra pulse a third of a period after pulses M, 2M, ... (bad-input test)")
    g.add_argument("--pps-log", type=Path, help="write every 1PPS pulse the model emits here (CSV)")


def _add_calibrate_parser(sub):
    cal = sub.add_parser("calibrate", help="measure the rig itself: its offset and jitter, its clock error")
    csub = cal.add_subparsers(dest="what", required=True, metavar="WHAT")

    lb = csub.add_parser("loopback", help="the rig's own stimulus->capture delay and its spread, with a "
                         "jumper from STIM0 to SPARE (channel 4)")
    lb.add_argument("url")
    lb.add_argument("--count", type=_positive_int, default=1000, help="pulses (default 1000)")
    lb.add_argument("--period", type=TimeValue, default=TimeValue("100us"), help="mean interval (default 100us)")
    lb.add_argument("--jitter", type=TimeValue, default=TimeValue("25us"),
                    help="dither: intervals uniform in period +- jitter (default 25us)")
    lb.add_argument("--width", type=TimeValue, default=TimeValue("1us"), help="pulse width (default 1us)")
    lb.add_argument("--seed", type=int, default=1, help="PRNG seed of the dither")
    lb.add_argument("--stimulus-channel", type=int, default=None,
                    help="stimulus output of the jumper (default: the rig's first stimulus channel)")
    lb.add_argument("--channel", type=int, default=None,
                    help="capture input of the jumper (default: the rig's input whose role is spare)")
    _add_calibrate_common(lb)
    lb.set_defaults(func=cmd_calibrate_loopback)

    ck = csub.add_parser("clock", help="the rig's ts clock error in ppm, against the host clock or a 1PPS")
    ck.add_argument("url")
    ck.add_argument("--against", choices=["host", "pps"], required=True,
                    help="host: the host's monotonic clock over TIME_REQ round trips; pps: a GPS 1PPS on a "
                         "capture input")
    ck.add_argument("--duration", type=TimeValue, default=None,
                    help="how long to measure (default 10s against the host, 60s against a 1PPS); the "
                         "uncertainty shrinks with it")
    ck.add_argument("--channel", type=int, default=None,
                    help="pps: capture input of the 1PPS (default: the rig's input whose role is spare)")
    ck.add_argument("--pps-period", type=TimeValue, default=TimeValue("1s"),
                    help="pps: the nominal interval between pulses (default 1s; the simulator's is shorter)")
    ck.add_argument("--tries", type=_positive_int, default=8,
                    help="host: round trips at each end, the fastest one is used (default 8)")
    _add_calibrate_common(ck)
    ck.set_defaults(func=cmd_calibrate_clock)

    rs = csub.add_parser("resolution", help="the widths of the sub-tick bins, by code density, from edges of a "
                         "source unrelated to the rig's clock",
                         description="Collects edges on one input from a source unrelated to the rig's ts clock "
                         "(a free-running DUT timer or UART line, a second oscillator, an output driven from an "
                         "unrelated clock; not the rig's own stimulus, nor a DUT clocked from the rig's "
                         "oscillator): they fall in each sub-tick bin in proportion to its width. Stores each bin's "
                         "width, DNL, INL and centre; later captures place input edges at the centres.")
    rs.add_argument("url")
    rs.add_argument("--edges", type=_positive_int, default=20000,
                    help="edges to collect (default 20000: each width to about 0.003 tick)")
    rs.add_argument("--channel", type=int, default=None,
                    help="capture input of the source (default: the rig's input whose role is spare)")
    _add_calibrate_common(rs)
    rs.set_defaults(func=cmd_calibrate_resolution)


def _add_calibrate_common(parser):
    _add_link_options(parser)
    _add_calibration_dir(parser)
    parser.add_argument("--no-store", action="store_true", help="measure and print, store nothing")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _store(args, calibration, ident, part, result):
    """Store the result (unless --no-store) and print it as JSON with --json; returns the file."""
    directory = None if args.no_store else calibration.resolve_dir(args.calibration_dir)
    identity, path = calibration.store_result(ident, part, result, directory)
    if args.json:
        print(json.dumps({"rig_identity": identity, part: result, "stored": str(path) if path else None}, indent=1))
    return path


def cmd_calibrate_loopback(args):
    from hilat import calibration
    from hilat.link.session import Session

    with Session(args.url, transport=_open(args.url, args)) as session:
        ident = session.identity
        ts = ident.ts_hz
        stimulus = {"mode": "dither", "count": args.count, "period_ticks": args.period.ticks(ts),
                    "jitter_ticks": args.jitter.ticks(ts), "width_ticks": args.width.ticks(ts), "seed": args.seed}
        try:
            if args.stimulus_channel is None:
                args.stimulus_channel = calibration.role_channel(ident, "stimulus")
            if args.channel is None:
                args.channel = calibration.role_channel(ident, calibration.CALIBRATION_ROLE)
            log.info("loopback: %d pulses from STIM%d, watching channel %d", args.count, args.stimulus_channel,
                     args.channel)
            # A resolution calibration in force places the copies' edges as captures will.
            in_force = calibration.for_rig(ident, calibration.resolve_dir(args.calibration_dir))
            result = calibration.run_loopback(
                session, args.count, stimulus["period_ticks"], stimulus["jitter_ticks"], stimulus["width_ticks"],
                args.stimulus_channel, args.channel, args.seed, progress=calibration.ProgressLog("loopback"),
                resolution=in_force.get("resolution"))
            loop = calibration.loopback_calibration(result, ts, args.stimulus_channel, args.channel, stimulus,
                                                    args.url)
        except calibration.CalibrationError as e:
            log.error("%s", e)
            return 1
    path = _store(args, calibration, ident, "loopback", loop)
    if not args.json:
        print(calibration.loopback_text(loop, args.url, ts, path))
    return 0


def cmd_calibrate_resolution(args):
    from hilat import calibration
    from hilat.calibration import resolution
    from hilat.link.session import Session

    with Session(args.url, transport=_open(args.url, args)) as session:
        ident = session.identity
        try:
            if args.channel is None:
                args.channel = calibration.role_channel(ident, calibration.CALIBRATION_ROLE)
            log.info("resolution: %d edges on channel %d", args.edges, args.channel)
            fractions = resolution.run_resolution(session, args.channel, args.edges,
                                                  progress=calibration.ProgressLog("resolution"))
            result = resolution.resolution_calibration(fractions, ident, ident.ts_hz, args.channel, args.url)
        except calibration.CalibrationError as e:
            log.error("%s", e)
            return 1
    path = _store(args, calibration, ident, "resolution", result)
    if not args.json:
        print(calibration.resolution_text(result, args.url, ident.ts_hz, path))
    return 0


def cmd_calibrate_clock(args):
    from hilat import calibration
    from hilat.link.session import Session

    with Session(args.url, transport=_open(args.url, args)) as session:
        ident = session.identity
        ts = ident.ts_hz
        duration = args.duration or TimeValue("10s" if args.against == "host" else "60s")
        try:
            if args.against == "pps" and args.channel is None:
                args.channel = calibration.role_channel(ident, calibration.CALIBRATION_ROLE)
            if args.against == "host":
                seconds = duration.ticks(ts) / ts
                log.info("clock against the host: %g s of TIME_REQ round trips", seconds)
                clock = calibration.host_clock_estimate(session.rig.now, ts, seconds, tries=args.tries,
                                                        progress=calibration.ProgressLog("clock"))
                clock["url"] = args.url
                pps = None
            else:
                period_ticks = args.pps_period.ticks(ts)
                period_s = period_ticks / ts
                log.info("clock against a 1PPS on channel %d: %g s of rig time, nominal period %g s",
                         args.channel, duration.ticks(ts) / ts, period_s)
                ticks = calibration.run_pps(session, args.channel, duration.ticks(ts),
                                            progress=calibration.ProgressLog("1PPS"))
                pps = calibration.analyse_pps(ticks, period_ticks)
                if not args.json:
                    print(calibration.pps_text(pps, len(ticks), args.channel, args.url))
                clock = calibration.pps_calibration(pps, ts, period_s, args.channel, args.url, len(ticks))
        except calibration.ImplausibleClock as e:
            log.error("%s", e)
            if args.json:
                print(json.dumps({"error": str(e), "clock": e.result}, indent=1))
            return 1
        except calibration.CalibrationError as e:
            log.error("%s", e)
            return 1
    path = _store(args, calibration, ident, "clock", clock)
    if not args.json:
        print(calibration.clock_text(clock, ts, path))
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="hilat", description="Measure a device's real-time latency with "
                                     "the hilat FPGA rig.")
    parser.add_argument("-v", "--verbose", action="store_true", help="more log output on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = sub.add_parser("info", help="identify the rig on URL")
    info.add_argument("url", help="/dev/ttyUSB0, socket://127.0.0.1:PORT, udp://HOST[:PORT], ...")
    info.add_argument("--json", action="store_true", help="print JSON")
    _add_link_options(info)
    _add_calibration_dir(info)
    info.set_defaults(func=cmd_info)

    cap = sub.add_parser("capture", help="run stimuli and capture every edge")
    cap.add_argument("url")
    _add_link_options(cap)
    _add_capture_options(cap)
    cap.set_defaults(func=cmd_capture)

    def add_sim_options(sp):
        sp.add_argument("--dut", action="append", type=_dut_setting, metavar="NAME=VALUE",
                        help="DUT model setting (see targets/dut/hilat_dut_model.v), e.g. isr_base=80")
        sp.add_argument("--dut-model", default=None, help="Verilog file of your own DUT model")
        sp.add_argument("--ethernet", action="store_true",
                        help="the rig with its Ethernet link (a separate, cached build), reached as "
                             "udp://192.168.1.50 from the host address 192.168.1.100 on a TAP interface, all in a "
                             "network namespace of the simulator's own (root; docs/ethernet.md, \"Simulation\")")
        sp.add_argument("--dut-top", default="hilat_dut_model", help="module name of the DUT model")
        sp.add_argument("--dut-cpu", default="model", metavar="CPU",
                        help="the DUT: the Verilog model (default), or a LiteX SoC with this CPU (vexriscv, "
                             "picorv32, vexriscv_min...: targets/dut/cpu_soc.py's CPUS) running "
                             "hkern and its experiments (firmware/dut, docs/dut-benchmarks.md) on a 25 MHz clock "
                             "of its own; its console goes to dut_console.txt (give the stimuli --period 160us "
                             "or more on vexriscv, 600us on picorv32 and vexriscv_min)")
        sp.add_argument("--dut-firmware", default=None, metavar="IMAGE",
                        help="with --dut-cpu: the firmware image its ROM starts with (default response: stimulus "
                             "-> handler -> task; response-dma adds interrupts masked by a background task, "
                             "pipeline three tasks through queues, ipc kernel calls timed without stimulus)")
        sp.add_argument("--dut-cpu-clock", type=_positive_int, metavar="HZ",
                        help="with --dut-cpu: its clock's frequency in whole Hz (default 25000000, two ticks a "
                             "cycle); any other, e.g. 33_333_700, is unrelated to the rig's clock, its edges on the "
                             "simulator's 10 ns step (at most 50000000)")
        sp.add_argument("--samples-per-tick", type=int, choices=(1, 2, 4), default=1,
                        help="the simulated rig samples each input this often a tick (sub-tick timestamps, "
                             "docs/subtick.md); the DUT model then runs this many times faster than the rig's "
                             "ts clock, so its --dut settings are in sub-ticks (default 1)")
        sp.add_argument("--edge-clock-high", type=_positive_int, metavar="PS",
                        help="with --samples-per-tick 4: hold the edge clock high this many ps of its 10,000 "
                             "(uneven sub-tick bins, as a duty-cycle error makes them; 5000 .. 9750 in steps of 250)")
        sp.add_argument("--async-source", type=_positive_int, metavar="N",
                        help="with --samples-per-tick 2 or 4: a source unrelated to the rig's clock toggles the "
                             "SPARE input every N cycles of a 9 ns clock (hilat calibrate resolution; N prime to "
                             "10 visits every phase of the tick)")

    s = sub.add_parser("sim", help="start the simulated rig and DUT; print the URL")
    s.add_argument("--port", type=_positive_int, default=None, help="TCP port on 127.0.0.1 (default: a free one)")
    s.add_argument("--dut-log", type=Path, help="write the DUT model's injected latencies here (CSV)")
    s.add_argument("--on-rig", action="store_true", help="the rig with the measurement engine (a separate, cached "
                   "build): captures on it take --on-rig (docs/engine.md)")
    s.add_argument("--trace", action="store_true", help="a simulator build (of its own) that writes every signal "
                   "to sim.vcd for waveforms: slower, and the file grows by about 100 MB a second")
    add_sim_options(s)
    _add_sim_calibration_options(s)
    s.set_defaults(func=cmd_sim)

    d = sub.add_parser("demo", help="simulated rig + DUT, capture, latency table")
    _add_capture_options(d)
    add_sim_options(d)
    d.set_defaults(func=cmd_demo)

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
    _add_calibrate_parser(sub)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "board", None) is not None:
        # --board is only the default of --baud: every command below reads args.baud.
        from hilat.link.transport import baudrate_for

        args.baud = baudrate_for(args.board, args.baud)
    # Our messages at INFO; other libraries' (LiteX's build chatter) only when they matter.
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="hilat: %(message)s",
                        stream=sys.stderr)
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    from hilat import shutdown
    from hilat.extras import MissingExtra
    from hilat.link.rig import RigError
    from hilat.link.transport import TransportError
    from hilat.rundir.layout import RunError
    from hilat.simulator import SimulatorUnavailable
    try:
        # SIGTERM and SIGHUP stop a command as Ctrl-C does: the simulator it started is stopped, a
        # capture keeps what it captured (hilat.shutdown); the exit status is then 128 + the signal.
        with shutdown.signals_stop():
            return shutdown.exit_code(args.func(args))
    except (RigError, TransportError, RunError, MissingExtra, SimulatorUnavailable) as e:
        log.error("%s", e)
        return 1
    except UsageError as e:
        parser.error(str(e))
    except KeyboardInterrupt as e:
        return 128 + getattr(e, "signum", signal.SIGINT)


if __name__ == "__main__":
    sys.exit(main())
