"""``hilat calibrate loopback|clock|resolution``: the options, and the API's ``Rig.calibrate_*``
behind them (docs/calibration.md)."""

import argparse
import json
import logging

from hilat import calibration
from hilat.cli.options import TimeValue, _add_calibration_dir, _add_link_options, _duration, _positive_int, _rig

log = logging.getLogger("hilat")


def _calibrate(args, measure):
    """Run ``measure(rig)`` (a ``Rig.calibrate_*``), print what it found (--json: as JSON); a calibration
    that cannot be made is one line on stderr and exit status 1."""
    try:
        result = measure(_rig(args.url, args))
    except calibration.CalibrationError as e:
        if getattr(e, "analysis", "") and not args.json:
            print(e.analysis)   # the 1PPS pulses: which were missing or extra, why it was refused
        log.error("%s", e)
        if args.json and isinstance(e, calibration.ImplausibleClock):
            print(json.dumps({"error": str(e), "clock": e.result}, indent=1))
        return 1
    print(json.dumps(result.to_json(), indent=1) if args.json else result.text())
    return 0


def cmd_calibrate_loopback(args):
    return _calibrate(args, lambda rig: rig.calibrate_loopback(
        count=args.count, period=_duration(args.period), jitter=_duration(args.jitter), width=_duration(args.width),
        seed=args.seed, stimulus_channel=args.stimulus_channel, channel=args.channel, store=not args.no_store))


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a number above 0 expected")
    return value


def cmd_calibrate_resolution(args):
    if args.channel is not None and args.input is not None:
        log.error("give --channel or --input, not both")
        return 2
    channel = args.input if args.input is not None else args.channel
    return _calibrate(args, lambda rig: rig.calibrate_resolution(
        edges=args.edges, channel=channel, precision_ps=args.precision_ps,
        tap_table=args.tap_table, store=not args.no_store))


def cmd_calibrate_clock(args):
    return _calibrate(args, lambda rig: rig.calibrate_clock(
        args.against, duration=_duration(args.duration), channel=args.channel, pps_period=_duration(args.pps_period),
        tries=args.tries, store=not args.no_store))


def _add_calibrate_common(parser):
    _add_link_options(parser)
    _add_calibration_dir(parser)
    parser.add_argument("--no-store", action="store_true", help="measure and print, store nothing")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def add_parsers(sub):
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
                         "width, DNL, INL and centre; later captures place input edges at the centres. On a rig "
                         "with a carry-chain TDC the same over the TDC's 256 codes, per input (docs/tdc.md).")
    rs.add_argument("url")
    rs.add_argument("--edges", type=_positive_int, default=None,
                    help="edges to collect (default 20000: each width to about 0.003 tick; on a TDC rig 100000, "
                    "or what --precision needs)")
    rs.add_argument("--channel", type=int, default=None,
                    help="capture input of the source (default: the rig's input whose role is spare)")
    rs.add_argument("--input", default=None, metavar="NAME",
                    help="the same by name or number (a TDC rig: the input the jumper is on; each input's bins "
                    "are stored on their own)")
    rs.add_argument("--precision-ps", type=_positive_float, default=None, metavar="PS",
                    help="TDC: each bin's width sigma to reach, in ps (e.g. 1): collects what the widest predicted "
                    "bin needs, and refuses a result short of it")
    rs.add_argument("--tap-table", default=None, metavar="FILE",
                    help="TDC: the predicted bins' tap table (default: the board's targets/tdc/taps_BOARD.json; "
                    "the simulator's is the i5 table stretched to its tick)")
    _add_calibrate_common(rs)
    rs.set_defaults(func=cmd_calibrate_resolution)
