"""``hilat``: the command line, a thin layer of argparse and dispatch over the API (``hilat.api``).
Logs go to stderr, results to stdout or files.

    hilat info URL                     identify the rig
    hilat capture URL [options]        run stimuli, record every edge, write a run directory
    hilat sim [options]                start the simulated rig and DUT; print the URL
    hilat demo [options]               sim + capture + summary in one command
    hilat report RUN... [options]      Faller tables, percentiles, plots, HTML (one or more runs)
    hilat compare RUN_A RUN_B          side by side, with the difference at each percentile
    hilat export RUN --csv/--parquet/--json/--hlog/--vcd   samples, HDR interval log, raw edges
    hilat calibrate loopback URL       the rig's own offset and jitter (jumper STIM0 -> SPARE)
    hilat calibrate clock URL          the rig's clock error in ppm (--against host | pps)
    hilat calibrate resolution URL     the sub-tick bins' widths (a source unrelated to the rig's clock)

The parser and ``main`` are ``parser``; each command's options and dispatch are in its module:
``info``, ``capture`` (capture, sim, demo), ``runs`` (report, compare, export), ``calibrate``; the
value types and shared options are ``options``.
"""

from hilat.cli.parser import build_parser, main

__all__ = ["build_parser", "main"]
