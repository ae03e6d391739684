"""``hilat capture``, ``hilat sim`` and ``hilat demo``: their options, and the API's capture
(``Rig.capture_raw``) and simulated rig (``hilat.simulate``) behind them."""

import logging
from pathlib import Path

from hilat.api import SettingsError, load, simulate
from hilat.cli.options import (
    TimeValue,
    UsageError,
    _add_calibration_dir,
    _add_link_options,
    _duration,
    _dut_setting,
    _fire_setting,
    _interval_seconds,
    _non_negative_int,
    _outlier_setting,
    _positive_int,
    _rig,
    _role_setting,
    _signed_float,
    _trigger_setting,
)
from hilat.cli.runs import html_report
from hilat.extras import MissingExtra
from hilat.reports import plots, report
from hilat.simulator import SETTINGS, join_network_namespace
from hilat.values import STIMULUS_MODES

log = logging.getLogger("hilat")


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
    g.add_argument("--tdc-online", action="store_true",
                   help="a TDC rig: re-estimate each TDC input's bins from this run's own edges where there are "
                        "enough uncorrelated ones; stored for later captures, stated in the run (docs/tdc.md)")
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
                label=args.label, out_dir=args.out, progress=not args.no_progress, default_count=default_count,
                tdc_online=getattr(args, "tdc_online", False))


def _run_capture(url, args, extra_meta=None):
    rig = _rig(url, args, calibrate=not args.no_calibration)
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
                        "dut_cpu_clk_hz": "dut_cpu_clock", "tdc_source_ticks": "tdc_source"}


def _sim_settings(args):
    """The ``hilat.simulate`` keyword arguments of hilat sim's or demo's options (one launcher for both)."""
    settings = {name: getattr(args, _SIM_SETTING_OPTIONS.get(name, name), None) for name in SETTINGS}
    settings = {name: value for name, value in settings.items() if value is not None}
    settings.update(dut=_dut_args(args), dut_cpu=_dut_cpu(args))
    if getattr(args, "pps_period", None) is not None:
        settings["pps_period"] = args.pps_period.text   # converted with the simulated rig's tick rate
    for path in ("dut_log", "pps_log", "edge_phase_log"):
        if path in settings:
            settings[path] = str(settings[path])
    return settings


def _simulate(args):
    """The simulated rig of the options (``hilat.simulate``); refused settings are usage errors."""
    try:
        return simulate(**_sim_settings(args))
    except SettingsError as e:
        raise UsageError(str(e)) from None


def _enter_simulation(simulation):
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
        run = load(run_dir)
        try:
            images = plots.make_plots([run], formats=("png",))
        except MissingExtra as e:
            log.warning("no report.html: %s", e)
            return code
        (run_dir / "report.html").write_text(html_report(report.build_report([run]), images))
        print(f"\nHTML report with plots: {run_dir / 'report.html'}\n"
              f"percentiles, other formats, comparisons: hilat report {run_dir}; hilat compare RUN_A RUN_B")
    return code


def _add_sim_options(sp):
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
    sp.add_argument("--tdc", action="store_true",
                    help="a carry-chain TDC on every input (docs/tdc.md): the model of the i5's line stretched to "
                         "the simulator's 20 ns tick, each DUT edge at a random place in its tick (a separate, "
                         "cached build; one sample a tick, the Verilog DUT model)")
    sp.add_argument("--tdc-source", type=_positive_int, metavar="TICKS",
                    help="with --tdc: a source unrelated to the rig's clock toggles the SPARE input every TICKS "
                         "ticks (at least 3) at random places in the tick (hilat calibrate resolution)")
    sp.add_argument("--edge-phase-seed", type=_non_negative_int, metavar="N",
                    help="with --tdc: the seed of the DUT edges' places in their ticks (default 1)")
    sp.add_argument("--edge-phase-log", type=Path, metavar="FILE",
                    help="with --tdc: write every input change as input,level,phase_ps to FILE")


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


def add_parsers(sub):
    cap = sub.add_parser("capture", help="run stimuli and capture every edge")
    cap.add_argument("url")
    _add_link_options(cap)
    _add_capture_options(cap)
    cap.set_defaults(func=cmd_capture)

    s = sub.add_parser("sim", help="start the simulated rig and DUT; print the URL")
    s.add_argument("--port", type=_positive_int, default=None, help="TCP port on 127.0.0.1 (default: a free one)")
    s.add_argument("--dut-log", type=Path, help="write the DUT model's injected latencies here (CSV)")
    s.add_argument("--on-rig", action="store_true", help="the rig with the measurement engine (a separate, cached "
                   "build): captures on it take --on-rig (docs/engine.md)")
    s.add_argument("--trace", action="store_true", help="a simulator build (of its own) that writes every signal "
                   "to sim.vcd for waveforms: slower, and the file grows by about 100 MB a second")
    _add_sim_options(s)
    _add_sim_calibration_options(s)
    s.set_defaults(func=cmd_sim)

    d = sub.add_parser("demo", help="simulated rig + DUT, capture, latency table")
    _add_capture_options(d)
    _add_sim_options(d)
    d.set_defaults(func=cmd_demo)
