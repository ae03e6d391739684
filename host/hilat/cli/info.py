"""``hilat info URL``: the rig's identity, its channels, its calibration in force."""

import json

from hilat.cli.options import _add_calibration_dir, _add_link_options, _rig
from hilat.link import identity


def cmd_info(args):
    with _rig(args.url, args) as rig:
        info = rig.identity
    print(json.dumps(info, indent=1) if args.json else identity.text(info))
    return 0


def add_parsers(sub):
    info = sub.add_parser("info", help="identify the rig on URL")
    info.add_argument("url", help="/dev/ttyUSB0, socket://127.0.0.1:PORT, udp://HOST[:PORT], ...")
    info.add_argument("--json", action="store_true", help="print JSON")
    _add_link_options(info)
    _add_calibration_dir(info)
    info.set_defaults(func=cmd_info)
