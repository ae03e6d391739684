"""The ``hilat`` command line: its parser (each command's module adds its own) and ``main``, which
turns the errors a command can meet into one line on stderr and an exit status."""

import argparse
import logging
import signal
import sys

from hilat import shutdown
from hilat.cli import calibrate, capture, info, runs
from hilat.cli.options import UsageError
from hilat.extras import MissingExtra
from hilat.link.rig import RigError
from hilat.link.transport import TransportError, baudrate_for
from hilat.rundir.layout import RunError
from hilat.simulator import SimulatorUnavailable

log = logging.getLogger("hilat")


def build_parser():
    parser = argparse.ArgumentParser(prog="hilat", description="Measure a device's real-time latency with "
                                     "the hilat FPGA rig.")
    parser.add_argument("-v", "--verbose", action="store_true", help="more log output on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info.add_parsers(sub)
    capture.add_parsers(sub)
    runs.add_parsers(sub)
    calibrate.add_parsers(sub)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "board", None) is not None:
        # --board is only the default of --baud: every command below reads args.baud.
        args.baud = baudrate_for(args.board, args.baud)
    # Our messages at INFO; other libraries' (LiteX's build chatter) only when they matter.
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="hilat: %(message)s",
                        stream=sys.stderr)
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)
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
