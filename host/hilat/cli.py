"""``hilat``: the command line. Logs go to stderr, results to stdout or files.

    hilat info URL                     identify the rig
    hilat capture URL [options]        run stimuli, record every edge, write a run directory
    hilat sim [options]                start the simulated rig and DUT; print the URL
    hilat demo [options]               sim + capture + summary in one command
"""

import argparse
import json
import logging
import re
import sys
from pathlib import Path

from hilat import protocol as p

log = logging.getLogger("hilat")

_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class UsageError(ValueError):
    """A command-line value that parses but cannot be used; reported as a usage error."""


class TimeValue:
    """A duration given as ticks ("1500") or with a unit ("20us"); converted once ts_hz is known."""

    def __init__(self, text):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ns|us|ms|s|ticks?)?\s*", text)
        if not m:
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (ticks, or a number with ns/us/ms/s)")
        self.value = float(m.group(1))
        self.unit = m.group(2) or "ticks"
        if self.unit.startswith("tick") and not self.value.is_integer():
            raise argparse.ArgumentTypeError(f"ticks must be a whole number: {text!r}")
        self.text = text

    def ticks(self, ts_hz):
        if self.unit.startswith("tick"):
            return int(self.value)
        return int(round(self.value * _UNITS[self.unit] * ts_hz))

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


def _dut_setting(text):
    if not re.fullmatch(r"[a-z_0-9]+=[0-9]+", text):
        raise argparse.ArgumentTypeError(f"DUT setting must be NAME=NUMBER, got {text!r}")
    return tuple(text.split("=", 1))


def _add_capture_options(parser, default_count=2000):
    g = parser.add_argument_group("capture")
    g.add_argument("--count", type=_positive_int, default=None,
                   help=f"stimuli to send (default {default_count} unless --duration is given)")
    g.add_argument("--duration", type=TimeValue, help="capture for this long (rig time), e.g. 50ms")
    g.add_argument("--deadline", type=TimeValue,
                   help="response window after each stimulus (default: until the next stimulus)")
    g.add_argument("--glitch", type=int, default=0, choices=range(16), metavar="TICKS",
                   help="glitch filter on the DUT inputs, 0..15 ticks (default 0)")
    g.add_argument("--label", default="", help="name of the run (directory suffix, report titles)")
    g.add_argument("--out", type=Path, default=Path("runs"), help="directory for run directories (default runs)")
    g.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    s = parser.add_argument_group("stimulus (channel 0)")
    s.add_argument("--mode", choices=["periodic", "dither", "random", "burst", "oneshot"], default="dither")
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


def _capture_settings(args, ts_hz, default_count=2000):
    from hilat.capture import CaptureSettings, StimulusSettings

    period = args.period.ticks(ts_hz)
    probability = 0
    if args.mode == "random":
        if args.mean is None:
            raise UsageError("--mode random needs --mean (the mean interval)")
        mean = args.mean.ticks(ts_hz)
        if mean <= period:
            raise UsageError("--mean must be longer than --period (the hold-off)")
        # interval = hold-off + geometric(p) failures: mean = P + (1-p)/p  =>  p = 1/(mean - P + 1)
        probability = min(int(round(2**32 / (mean - period + 1))), 2**32 - 1)
    count = args.count if args.count is not None else (None if args.duration else default_count)
    stim = StimulusSettings(mode=args.mode, period=period, jitter=args.jitter.ticks(ts_hz) if args.mode == "dither"
                            else 0, width=args.width.ticks(ts_hz), probability=probability,
                            burst_count=args.burst_count, burst_spacing=args.burst_spacing.ticks(ts_hz),
                            seed=args.seed, invert=args.invert)
    return CaptureSettings(count=count, duration_ticks=args.duration.ticks(ts_hz) if args.duration else None,
                           deadline_ticks=args.deadline.ticks(ts_hz) if args.deadline else None,
                           glitch=args.glitch, label=args.label, out_dir=args.out,
                           progress=not args.no_progress, stimulus=stim)


def _identify(url):
    from hilat.rig import Rig
    from hilat.transport import Transport

    with Transport(url) as transport:
        rig = Rig(transport)
        ident = rig.hello()
        status = rig.status()
    return ident, status


def cmd_info(args):
    ident, status = _identify(args.url)
    tick_ns = 1e9 / ident.ts_hz
    caps = [name for name, bit in [("dither", p.CAP_DITHER), ("random", p.CAP_RANDOM), ("burst", p.CAP_BURST),
                                   ("absolute-start", p.CAP_ABSOLUTE_START), ("glitch-filter", p.CAP_GLITCH_FILTER),
                                   ("tag", p.CAP_TAG_CHANNEL), ("sub-tick", p.CAP_SUBTICK)] if ident.capabilities & bit]
    # The gateware string is "<board> <git hash>" (gateware/soc.py); anything else is shown as it is.
    board, _, git_hash = ident.gateware.partition(" ")
    info = {
        "url": args.url, "protocol": ident.version, "gateware": ident.gateware, "board": board if git_hash else None,
        "git_hash": git_hash or None, "firmware": ident.firmware,
        "ts_hz": ident.ts_hz, "sys_hz": ident.sys_hz, "tick_ns": tick_ns,
        "stimulus_channels": ident.n_stimulus, "capture_inputs": ident.n_inputs,
        "tag_channel": ident.tag_channel, "fifo_depth": ident.fifo_depth,
        "pin_to_stamp_delay_ticks": ident.pin_to_stamp_delay, "capabilities": caps,
        "dropped_per_channel": list(status.dropped),
    }
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"rig on {args.url}")
    if git_hash:
        print(f"  board      {board}")
        dirty = "  (built from uncommitted changes)" if git_hash.endswith("-dirty") else ""
        print(f"  gateware   git {git_hash}{dirty}")
    else:
        print(f"  gateware   {ident.gateware}")
    print(f"  firmware   {ident.firmware} (protocol {ident.version})")
    print(f"  clocks     ts {ident.ts_hz / 1e6:g} MHz (1 tick = {tick_ns:g} ns, uncalibrated), "
          f"sys {ident.sys_hz / 1e6:g} MHz")
    print(f"  channels   {ident.n_stimulus} stimulus, {ident.n_inputs} capture inputs, tag = channel "
          f"{ident.tag_channel}")
    print(f"  fifo       {ident.fifo_depth} records; pin-to-stamp delay {ident.pin_to_stamp_delay} ticks "
          "(subtracted in gateware)")
    print(f"  features   {', '.join(caps)}")
    return 0


def _run_capture(url, args, extra_meta=None):
    from hilat.capture import Capture
    from hilat.rig import Rig
    from hilat.transport import Transport

    # Settings need the rig's tick frequency: identify first (a short session of its own).
    with Transport(url) as transport:
        ts_hz = Rig(transport).hello().ts_hz
    settings = _capture_settings(args, ts_hz)
    capture = Capture(url, settings, extra_meta).run()
    if capture.run_dir:
        log.info("run directory: %s", capture.run_dir)
    if capture.identity is not None:
        print(capture.report())
    if capture.error:
        log.error("%s (what was captured is kept in %s)", capture.error, capture.run_dir)
        return 1
    return 130 if capture.interrupted else 0


def cmd_capture(args):
    return _run_capture(args.url, args)


def _dut_args(args):
    return dict(args.dut or [])


def cmd_sim(args):
    from targets import sim

    sim_dir = sim.build(dut_model=args.dut_model, dut_top=args.dut_top)
    rig = sim.SimulatedRig(sim_dir, sim_dir / "run-sim", port=args.port, dut_args=_dut_args(args),
                           dut_log=args.dut_log)
    with rig:
        print(rig.url, flush=True)
        log.info("simulated rig running; Ctrl-C to stop")
        try:
            rig.process.wait()
        except KeyboardInterrupt:
            pass
    return 0


def cmd_demo(args):
    import tempfile

    from targets import sim

    log.info("building the simulated rig (cached after the first run)")
    sim_dir = sim.build(dut_model=args.dut_model, dut_top=args.dut_top)
    run_tmp = Path(tempfile.mkdtemp(prefix="hilat-sim-"))
    dut_log = run_tmp / "dut_injected.csv"
    rig = sim.SimulatedRig(sim_dir, run_tmp, dut_args=_dut_args(args), dut_log=dut_log)
    with rig:
        log.info("simulated rig and DUT on %s", rig.url)
        if not args.label:
            args.label = "demo"
        code = _run_capture(rig.url, args, extra_meta={"simulated": True, "dut_settings": _dut_args(args)})
    # Keep what the DUT model injected next to the run, for comparison.
    runs = sorted(Path(args.out).glob("*"), key=lambda d: d.stat().st_mtime)
    if runs and dut_log.exists():
        (runs[-1] / "dut_injected.csv").write_bytes(dut_log.read_bytes())
    return code


def build_parser():
    parser = argparse.ArgumentParser(prog="hilat", description="Measure a device's real-time latency with "
                                     "the hilat FPGA rig.")
    parser.add_argument("-v", "--verbose", action="store_true", help="more log output on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = sub.add_parser("info", help="identify the rig on URL")
    info.add_argument("url", help="/dev/ttyUSB0, socket://127.0.0.1:PORT, ...")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=cmd_info)

    cap = sub.add_parser("capture", help="run stimuli and capture every edge")
    cap.add_argument("url")
    _add_capture_options(cap)
    cap.set_defaults(func=cmd_capture)

    def add_sim_options(sp):
        sp.add_argument("--dut", action="append", type=_dut_setting, metavar="NAME=VALUE",
                        help="DUT model setting (see targets/dut/hilat_dut_model.v), e.g. isr_base=80")
        sp.add_argument("--dut-model", default=None, help="Verilog file of your own DUT model")
        sp.add_argument("--dut-top", default="hilat_dut_model", help="module name of the DUT model")

    s = sub.add_parser("sim", help="start the simulated rig and DUT; print the URL")
    s.add_argument("--port", type=_positive_int, default=None, help="TCP port on 127.0.0.1 (default: a free one)")
    s.add_argument("--dut-log", type=Path, help="write the DUT model's injected latencies here (CSV)")
    add_sim_options(s)
    s.set_defaults(func=cmd_sim)

    d = sub.add_parser("demo", help="simulated rig + DUT, capture, latency table")
    _add_capture_options(d)
    add_sim_options(d)
    d.set_defaults(func=cmd_demo)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    # Our messages at INFO; other libraries' (LiteX's build chatter) only when they matter.
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="hilat: %(message)s",
                        stream=sys.stderr)
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    if getattr(args, "dut_model", "unset") is None:
        from targets import sim
        args.dut_model = str(sim.DEFAULT_DUT)
    from hilat.rig import RigError
    from hilat.transport import TransportError
    try:
        return args.func(args)
    except (RigError, TransportError) as e:
        log.error("%s", e)
        return 1
    except UsageError as e:
        parser.error(str(e))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
