"""Where calibrations are kept, and which one a capture on a rig applies.

Calibration files live in ``$HILAT_CALIBRATION_DIR`` or ``~/.config/hilat/calibration/`` (or
``--calibration-dir``), one JSON file per rig identity: the gateware string and clocks IDENTIFY
reports. A capture applies the file of its rig's identity; failing that, the newest one of the same
board and nominal clock, with a warning. Older than :data:`~hilat.calibration.statement.STALE_DAYS`:
applied, with a warning.
"""

import hashlib
import json
import logging
import os
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from hilat.calibration.statement import STALE_DAYS, applied

log = logging.getLogger("hilat")

FORMAT = "hilat-calibration"
VERSION = 1
# Fields of IDENTIFY that make a rig's timing what it is (the firmware string is kept, not keyed).
IDENTITY_FIELDS = ("gateware", "ts_hz", "sys_hz", "n_stimulus", "n_inputs", "pin_to_stamp_delay")


class CalibrationError(Exception):
    """A calibration could not be made; the message says why and what to do."""


def made_now():
    """Now (UTC) as a calibration records when it was made: ISO 8601 to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def rig_identity(ident):
    """The identity a calibration belongs to, from an IDENTIFY message."""
    out = {name: getattr(ident, name) for name in IDENTITY_FIELDS}
    out["firmware"] = ident.firmware
    out["samples_per_tick"] = ident.samples_per_tick   # in the file key when above 1 (identity_key)
    # A carry-chain TDC's inputs and taps (docs/tdc.md): in the file key when there is one.
    out["tdc_inputs"] = ident.tdc_inputs
    out["tdc_taps"] = ident.tdc_taps
    return out


def identity_key(identity):
    """File-name key: readable board/clock part plus a hash of every identity field, and of the samples
    per tick when above 1 (a rig's builds at 1, 2 and 4 samples a tick keep files of their own; a rig
    sampling once a tick keeps the key it always had), and of the TDC's inputs and taps when it has one."""
    fields = {k: identity[k] for k in IDENTITY_FIELDS}
    if int(identity.get("samples_per_tick") or 1) > 1:
        fields["samples_per_tick"] = int(identity["samples_per_tick"])
    if int(identity.get("tdc_inputs") or 0) > 0:
        fields["tdc_inputs"] = int(identity["tdc_inputs"])
        fields["tdc_taps"] = int(identity.get("tdc_taps") or 0)
    blob = json.dumps(fields, sort_keys=True).encode()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", str(identity["gateware"])).strip("-")[:40] or "rig"
    return f"{slug}-{int(identity['ts_hz'])}Hz-{hashlib.sha256(blob).hexdigest()[:8]}"


def _board(identity):
    return str(identity.get("gateware", "")).split(" ")[0]


def default_dir():
    env = os.environ.get("HILAT_CALIBRATION_DIR")
    if env:
        return Path(env)
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / "hilat" / "calibration"


def resolve_dir(explicit=None):
    """``--calibration-dir`` if given, else ``$HILAT_CALIBRATION_DIR``, else the user config dir."""
    return Path(explicit) if explicit else default_dir()


class Store:
    """Calibration files in one directory, one per rig identity."""

    def __init__(self, directory):
        self.dir = Path(directory)

    def path(self, identity):
        return self.dir / f"{identity_key(identity)}.json"

    def load(self, identity):
        return self._read(self.path(identity))

    def _read(self, path):
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise CalibrationError(f"calibration file {path} is unreadable ({e}): move it away and "
                                   "calibrate again") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CalibrationError(f"{path} is not a hilat calibration file")
        if data.get("version") != VERSION:
            raise CalibrationError(f"{path} has calibration format version {data.get('version')}, this hilat "
                                   f"reads version {VERSION}: calibrate again")
        data["file"] = str(path)
        return data

    def find(self, identity):
        """(calibration, exact): this identity's file, else the newest of the same board and nominal
        ts_hz (exact = False), else (None, False)."""
        own = self.load(identity)
        if own is not None:
            return own, True
        candidates = []
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []:
            try:
                cal = self._read(path)
            except CalibrationError as e:
                log.warning("%s", e)
                continue
            other = cal.get("rig_identity") or {}
            if _board(other) == _board(identity) and other.get("ts_hz") == identity["ts_hz"]:
                candidates.append((cal.get("updated", ""), str(path), cal))
        if candidates:
            return max(candidates, key=lambda c: c[:2])[2], False
        return None, False

    def update(self, identity, part, result):
        """Store ``result`` as the ``part`` ("loopback", "clock", "resolution" or "tdc") of this identity's
        calibration, keeping the other parts. Returns (path, the replaced result or None)."""
        path = self.path(identity)
        cal = self.load(identity) or {"format": FORMAT, "version": VERSION, "rig_identity": identity,
                                      "loopback": None, "clock": None}
        cal.pop("file", None)
        previous = cal.get(part)
        cal[part] = result
        cal["rig_identity"] = identity
        cal["updated"] = result["made"]
        self.dir.mkdir(parents=True, exist_ok=True)
        # Written beside and renamed over: a crash or a second writer never leaves half a file.
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=path.stem, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(cal, indent=1) + "\n")
        os.replace(tmp, path)
        return path, previous


def store_result(ident, part, result, directory):
    """Store ``result`` as the ``part`` ("loopback", "clock", "resolution") of this rig's calibration in ``directory``;
    ``directory`` None stores nothing (--no-store). Returns (the rig identity, the file or None)."""
    identity = rig_identity(ident)
    if directory is None:
        log.info("not stored (--no-store)")
        return identity, None
    path, previous = Store(directory).update(identity, part, result)
    if previous:
        log.info("replaces the %s calibration of %s", part, previous.get("made"))
    return identity, path


# ---- which calibration a capture applies -----------------------------------------------------------

def for_rig(ident, directory, now=None, stale_days=STALE_DAYS, reason_if_none="no calibration directory given"):
    """The calibration a capture on this rig applies (see :func:`applied`), from ``directory``;
    ``directory`` None applies none, for ``reason_if_none``."""
    identity = rig_identity(ident)
    if directory is None:
        return applied(identity, None, reason=reason_if_none)
    try:
        cal, exact = Store(directory).find(identity)
    except CalibrationError as e:
        # A broken file must not stop a capture: it runs uncalibrated and says why.
        out = applied(identity, None, reason=str(e), now=now)
        out["warnings"].append(str(e))
        out["statement"].append(f"WARNING: {e}")
        return out
    if cal is None:
        return applied(identity, None, reason=f"none stored for this rig in {directory}", now=now)
    return applied(identity, cal, exact, now=now, stale_days=stale_days)
