"""What a calibration says in words: the resolution statement every run and ``hilat info`` carry (with
its warnings), and what ``hilat calibrate`` prints and logs while it measures.
"""

import logging
import time
from datetime import datetime, timezone

from hilat.analysis import Subticks
from hilat.calibration import tdc_placement

log = logging.getLogger("hilat")

# A calibration older than this is applied with a warning.
STALE_DAYS = 30.0


# ---- the resolution statement -----------------------------------------------------------------------

def _age_days(made, now):
    try:
        then = datetime.fromisoformat(made)
    except (TypeError, ValueError):
        return None
    return (now - then).total_seconds() / 86400


def _age_text(days):
    if days is None:
        return "age unknown"
    if days < 1 / 24:
        return f"{days * 1440:.0f} min old"
    if days < 2:
        return f"{days * 24:.1f} h old"
    return f"{days:.0f} days old"


def _fmt_ns(ns):
    return f"{ns:.6g} ns"


def _times(n):
    n = int(n or 1)
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _usable_resolution(res, samples, warnings):
    """The stored resolution calibration if captures of this rig can apply it, else None (and why)."""
    if not res:
        return None
    if int(res.get("samples_per_tick") or 0) != samples:
        warnings.append(f"the resolution calibration has {res.get('samples_per_tick')} bins a tick, this rig samples "
                        f"{_times(samples)} a tick: not applied"
                        + ("; recalibrate (hilat calibrate resolution)" if samples > 1 else ""))
        return None
    try:
        if len(res["centres_ticks"]) != samples:
            raise ValueError(f"{len(res['centres_ticks'])} bin centres for {samples} bins")
        Subticks.from_centres(res["centres_ticks"])
        missing = [key for key in ("widths_ticks", "width_sigma_ticks", "dnl", "edges", "effective_resolution_s",
                                   "made") if key not in res]
        if missing:
            raise KeyError(", ".join(missing))
    except (KeyError, TypeError, ValueError) as e:
        warnings.append(f"the resolution calibration is unreadable ({e}): not applied; recalibrate "
                        "(hilat calibrate resolution)")
        return None
    return res


def applied(identity, calibration=None, exact=True, reason=None, now=None, stale_days=STALE_DAYS):
    """What a capture records as ``meta["calibration"]`` and applies: offset_ticks, ts_hz, warnings and
    the resolution statement. ``calibration`` is a stored calibration (or None: uncalibrated)."""
    now = now or datetime.now(timezone.utc)
    nominal = float(identity["ts_hz"])
    tick_ns = 1e9 / nominal
    warnings = []
    loop = (calibration or {}).get("loopback")
    clock = (calibration or {}).get("clock")
    res = (calibration or {}).get("resolution")
    samples = int(identity.get("samples_per_tick") or 1)
    res = _usable_resolution(res, samples, warnings)
    if calibration is not None and not exact:
        other = calibration.get("rig_identity") or {}
        warnings.append(f"calibration made on another rig identity (gateware '{other.get('gateware')}', "
                        f"{other.get('ts_hz')} Hz); this rig is '{identity['gateware']}': recalibrate "
                        "(hilat calibrate loopback / clock" + (" / resolution)" if samples > 1 else ")"))
    ages = {}
    for name, part in (("loopback", loop), ("clock", clock), ("resolution", res)):
        if part:
            ages[name] = _age_days(part.get("made"), now)
            if ages[name] is not None and ages[name] > stale_days:
                warnings.append(f"{name} calibration is stale: made {part.get('made')}, {ages[name]:.0f} days ago "
                                f"(> {stale_days:g} days): run hilat calibrate {name}")
    offset = loop["offset_ticks"] if loop else 0   # whole ticks, or whole sub-ticks in ticks (7.25)
    if loop and int(loop.get("samples_per_tick") or 1) != samples:
        warnings.append(f"the loopback calibration was made on a rig sampling {_times(loop.get('samples_per_tick'))} "
                        f"a tick, this rig samples {_times(samples)}: recalibrate (hilat calibrate loopback)")
    # The loopback offset is measured with the bin positions in force then; captures use today's.
    positions = f"calibrated {res['made']}" if res else "nominal"
    if loop and samples > 1 and loop.get("subtick_positions", "nominal") != positions:
        warnings.append(f"the loopback offset was measured with the sub-tick bins at "
                        f"{loop.get('subtick_positions', 'nominal')} positions, captures now use {positions} ones: "
                        "recalibrate (hilat calibrate loopback)")
    ppm = float(clock["ppm"]) if clock else 0.0
    ts_hz = nominal * (1 + ppm * 1e-6)
    tdc = (calibration or {}).get("tdc")
    placement = None
    if int(identity.get("tdc_inputs") or 0):
        placement, tdc_lines = _tdc_placement(identity, tdc, warnings)
        key = placement_key(placement)
        if loop and loop.get("subtick_positions", "nominal") != key:
            warnings.append(f"the loopback offset was measured with the TDC bins at '{loop.get('subtick_positions')}', "
                            f"captures now place them at '{key}': recalibrate (hilat calibrate loopback)")
        channels = [p["channel"] for p in placement]
        lines = [f"timebase: {nominal / 1e6:g} MHz nominal, 1 tick = {_fmt_ns(tick_ns)}; channels "
                 f"{channels[0]}..{channels[-1]} have a carry-chain TDC: their edges stand at their codes' bin centres "
                 "(tens of ps); stimulus edges and the other inputs fall on ticks"] + tdc_lines
    elif samples == 1:
        lines = [f"timebase: {nominal / 1e6:g} MHz nominal, 1 tick = {_fmt_ns(tick_ns)}; every edge is quantized "
                 f"to 1 tick (a latency is +-1 tick)"]
    else:
        # Each input edge carries its sample in the tick (docs/subtick.md); the analysis counts in
        # sub-ticks, with the nominal, equal bins.
        lines = [f"timebase: {nominal / 1e6:g} MHz nominal, 1 tick = {_fmt_ns(tick_ns)}; each input is sampled "
                 f"{samples} times a tick, so input edges are quantized to 1/{samples} tick "
                 f"({_fmt_ns(tick_ns / samples)}) and stimulus edges fall on ticks: a latency is +-1 sub-tick",
                 f"sub-tick: times and latencies are in sub-ticks of {_fmt_ns(tick_ns / samples)} (1/{samples} tick), "
                 "the bins taken as equal (nominal positions; uncalibrated: run hilat calibrate resolution)"]
        if res:
            widths = " ".join(f"{w:.3f}" for w in res["widths_ticks"])
            lines[1] = (f"sub-tick bins calibrated ({res['edges']} edges on channel {res.get('channel')}, "
                        f"{res.get('made')}, {_age_text(ages.get('resolution'))}): widths {widths} tick "
                        f"(sigma <= {max(res['width_sigma_ticks']):.2g}), DNL "
                        + " ".join(f"{d:+.2f}" for d in res["dnl"])
                        + f"; effective resolution {_fmt_ns(res['effective_resolution_s'] * 1e9)} "
                        f"(equal bins: {_fmt_ns(tick_ns / samples)}); each input edge at its bin's measured centre, "
                        f"times in 1/{samples * Subticks.CALIBRATED_UNITS_PER_BIN} tick")
    if clock:
        source = f"1PPS on channel {clock.get('channel')}" if clock["method"] == "pps" else "against the host clock"
        lines.append(f"clock: {ppm:+.4g} ppm +- {clock['uncertainty_ppm']:.2g} ppm ({clock['coverage']}, {source}, "
                     f"{clock.get('made')}, {_age_text(ages.get('clock'))}): ts = {ts_hz:.1f} Hz, "
                     f"1 tick = {_fmt_ns(1e9 / ts_hz)}")
    else:
        lines.append("clock: not calibrated: ticks are converted at the nominal frequency (its error is unknown; "
                     "run hilat calibrate clock)")
    if loop:
        lines.append(f"rig offset: {offset:g} ticks ({_fmt_ns(offset * 1e9 / ts_hz)}) subtracted from every "
                     f"stimulus->response latency (loopback STIM{loop.get('stimulus_channel')} -> channel "
                     f"{loop.get('capture_channel')}, {loop.get('made')}, {_age_text(ages.get('loopback'))})")
        lines.append(f"rig jitter (loopback): {loop['min_ticks']:g}..{loop['max_ticks']:g} ticks "
                     f"(peak-to-peak {loop['max_ticks'] - loop['min_ticks']:g} ticks, std {loop['std_ticks']:.3g} "
                     f"ticks, N = {loop['n']})")
    else:
        lines.append("rig offset: not calibrated: latencies include the rig's own stimulus->capture delay "
                     "(run hilat calibrate loopback)")
    if tdc:
        # The TDC inputs' measured bins (docs/tdc.md): LSB, DNL, INL, effective resolution, age.
        tdc_lines, tdc_warnings = tdc_statement(tdc, now, stale_days)
        lines += tdc_lines
        warnings += tdc_warnings
    if calibration is None and reason:
        lines.append(f"calibration: none applied ({reason})")
    elif calibration is not None:
        lines.append(f"calibration file: {calibration.get('file')}")
    lines += [f"WARNING: {w}" for w in warnings]
    identity_of = (calibration or {}).get("rig_identity")
    return {"applied": calibration is not None, "offset_ticks": offset, "ts_hz": ts_hz, "ts_hz_nominal": nominal,
            "resolution": res, "tdc": tdc or None, "tdc_placement": placement,
            "ppm": ppm if clock else None, "rig_identity": identity_of, "file": (calibration or {}).get("file"),
            "loopback": loop, "clock": clock, "warnings": warnings, "statement": lines}


# ---- the TDC inputs' bins (issue 35; docs/tdc.md, "Calibration and the model") ------------------------

def _tdc_placement(identity, tdc, warnings):
    """Where captures of a TDC rig place each TDC input's edges (tdc_placement.tdc_subticks): the
    placement (per input: channel, measured / predicted / none, source) and its statement lines."""
    table, why = tdc_placement.predicted_table(identity)
    subticks, problems = tdc_placement.tdc_subticks(identity, tdc, table, why)
    warnings += problems
    unmeasured = [p["channel"] for p in subticks.placement if p["placement"] != "measured"]
    if unmeasured:
        warnings.append(f"TDC channels {unmeasured} have no measured bins: their edges stand at "
                        + ("the tap table's PREDICTED bins" if table is not None else "whole ticks")
                        + " (hilat calibrate resolution --input CHANNEL measures them)")
    return list(subticks.placement), tdc_placement.placement_lines(subticks.placement, tick_ps=1e12 / float(
        identity["ts_hz"]))


def placement_key(placement):
    """How a loopback records the TDC placement it used (``applied`` compares it with today's)."""
    return "tdc " + "; ".join(f"{p['channel']} {p['placement']}"
                              + (f" {p['source']}" if p["placement"] in ("measured", "online") else "")
                              for p in placement)


def _ps(seconds):
    return f"{seconds * 1e12:.3g} ps"


def tdc_statement(part, now=None, stale_days=STALE_DAYS):
    """The resolution statement's lines for a rig's stored ``tdc`` part (``tdc.store_input``): per input
    the code-density bins (LSB, DNL, INL, effective resolution, age) and, when the calibration had a tap
    table, the model's predicted bins beside them. Returns (lines, warnings)."""
    now = now or datetime.now(timezone.utc)
    lines, warnings = [], []
    inputs = (part or {}).get("inputs") or {}
    for channel in sorted(inputs, key=int):
        r = inputs[channel]
        age = _age_days(r.get("made"), now)
        lines.append(
            f"TDC channel {channel}: {r['n_codes']} codes, {r['span']} bins over the tick "
            f"({len(r['zero_width'])} zero-width), LSB {_ps(r['lsb_s'])}, DNL "
            f"{r['dnl_range'][0]:+.2f}..{r['dnl_range'][1]:+.2f} LSB, INL "
            f"{r['inl_range'][0]:+.2f}..{r['inl_range'][1]:+.2f} LSB, effective resolution "
            f"{_ps(r['effective_resolution_s'])} (rms quantization {_ps(r['quantization_rms_s'])}); code density of "
            f"{r['edges']} edges ({r.get('made')}, {_age_text(age)}), width sigma <= "
            f"{_ps(max(r['width_sigma_ticks']) * r['tick_s'])}; each edge at its code's measured centre"
            + (f"; {r['unmeasured_edges']} edges of code 0 (not measured) left out" if r.get("unmeasured_edges")
               else ""))
        p = r.get("predicted")
        if p:
            lines.append(f"  predicted by the model ({p['source']}): LSB {_ps(p['lsb_s'])}, effective resolution "
                         f"{_ps(p['effective_resolution_s'])}; measured - predicted widths: rms "
                         f"{_ps(p['rms_difference_s'])}, max |z| {p['max_abs_z']:.2g}")
        if age is not None and age > stale_days:
            warnings.append(f"TDC calibration of channel {channel} is stale: made {r.get('made')}, {age:.0f} days ago "
                            f"(> {stale_days:g} days): run hilat calibrate resolution")
    return lines, warnings


def tdc_text(r, url):
    """What ``hilat calibrate resolution`` prints for one TDC input (``tdc.tdc_calibration``): the
    statement and every code of the tick's span with its edges, width, sigma, DNL, INL and centre."""
    lines = [f"TDC bins of channel {r['channel']} on {url}:"] + tdc_statement({"inputs": {str(r["channel"]): r}})[0]
    tick_ps = r["tick_s"] * 1e12
    lines.append(f"  {'code':>4}  {'edges':>8}  {'width ps':>8}  {'sigma':>6}  {'DNL':>6}  {'INL':>6}  "
                 f"{'centre (tick)':>13}" + ("  predicted ps" if r.get("predicted") else ""))
    for c in range(r["first_code"], r["codes_used"]):
        lines.append(f"  {c:>4}  {r['counts'][c]:>8}  {r['widths_ticks'][c] * tick_ps:>8.2f}  "
                     f"{r['width_sigma_ticks'][c] * tick_ps:>6.2f}  {r['dnl'][c]:>+6.2f}  {r['inl'][c]:>+6.2f}  "
                     f"{r['centres_ticks'][c]:>13.5f}"
                     + (f"  {r['predicted']['widths_ticks'][c] * tick_ps:>12.2f}" if r.get("predicted") else ""))
    return "\n".join(lines)


# ---- what hilat calibrate prints ----------------------------------------------------------------------

class ProgressLog:
    """A progress line on stderr, at most every 2 s (so the simulator's slow runs show life)."""

    def __init__(self, what):
        self.what = what
        self.last = time.monotonic()

    def __call__(self, done, total):
        now = time.monotonic()
        if now - self.last >= 2.0:
            self.last = now
            log.info("%s: %d%%", self.what, min(100, int(100 * done / max(total, 1))))


def stored_text(path):
    """What a calibration says about where it was stored (``path``; None: not)."""
    return f"stored in {path}" if path else "not stored (--no-store): captures apply the calibration stored before"


def loopback_text(loop, url, ts_hz, path):
    """The report of a loopback calibration (``loopback_calibration``), stored in ``path`` (None: not)."""
    tick_ns = 1e9 / ts_hz
    fall = loop["fall"]
    lines = [f"loopback STIM{loop['stimulus_channel']} -> channel {loop['capture_channel']} on {url}: "
             f"{loop['stimuli']} pulses, {loop['n']} arrived, {loop['missing']} missing"]
    applies = ("subtracted from stimulus->response latencies from now on" if path else
               "not stored (--no-store): later captures do not subtract it")
    units = loop.get("units_per_tick") or 1
    resolution = f" (a whole number of 1/{units} ticks: the input sampled more than once a tick)" if units > 1 else ""
    lines.append(f"  rig offset    {loop['offset_ticks']:g} ticks ({loop['offset_ticks'] * tick_ns:g} ns), the median "
                 f"rising-edge delay{resolution}: {applies}")
    lines.append(f"  rig jitter    {loop['min_ticks']:g}..{loop['max_ticks']:g} ticks (peak-to-peak "
                 f"{loop['max_ticks'] - loop['min_ticks']:g}), std {loop['std_ticks']:.3g} ticks, mean "
                 f"{loop['mean_ticks']:.3f}")
    if fall.get("n"):
        lines.append(f"  falling edge  {fall['min_ticks']:g}..{fall['max_ticks']:g} ticks "
                     f"(median {fall['median_ticks']:g})")
    lines.append("  histogram     " + ", ".join(f"{k}: {v}" for k, v in loop["histogram"].items()))
    lines.append(stored_text(path))
    return "\n".join(lines)


def pps_text(result, edges, channel, url, listed=20):
    """What a 1PPS analysis (``analyse_pps``) found: the pulses used, and each missing pulse and extra
    edge, up to ``listed`` of each."""
    lines = [f"1PPS on channel {channel} ({url}): {edges} rising edges, {len(result.accepted)} pulses used, "
             f"{len(result.missing)} missing, {len(result.extra)} extra"]
    lines += [f"  missing pulse {n} (expected near tick {tick}): excluded" for n, tick in result.missing[:listed]]
    if len(result.missing) > listed:
        lines.append(f"  ... and {len(result.missing) - listed} more missing pulses")
    lines += [f"  extra edge at tick {tick} ({why}): excluded" for tick, why in result.extra[:listed]]
    if len(result.extra) > listed:
        lines.append(f"  ... and {len(result.extra) - listed} more extra edges")
    return "\n".join(lines)


def clock_text(clock, ts_hz, path):
    """The report of a clock calibration (``host_clock_estimate`` or ``pps_calibration``), stored in
    ``path`` (None: not)."""
    calibrated = ts_hz * (1 + clock["ppm"] * 1e-6)
    against = "the host clock" if clock["method"] == "host" else "the 1PPS"
    return "\n".join([
        f"clock: {clock['ppm']:+.4f} ppm +- {clock['uncertainty_ppm']:.4f} ppm ({clock['coverage']}) against "
        f"{against}: ts = {calibrated:.3f} Hz (nominal {ts_hz} Hz), 1 tick = {1e9 / calibrated:.6f} ns",
        f"  basis: {clock['basis']}",
        stored_text(path)])


def resolution_text(res, url, ts_hz, path):
    """The report of a resolution calibration (``resolution.resolution_calibration``), stored in ``path``."""
    tick_ns = 1e9 / ts_hz
    S = res["samples_per_tick"]
    lines = [f"sub-tick bins of channel {res['channel']} on {url}: {res['edges']} edges, {S} samples a tick "
             f"(nominal bin {tick_ns / S:.4g} ns)",
             f"  {'bin':>3}  {'edges':>8}  {'width (tick)':>12}  {'sigma':>7}  {'width (ns)':>10}  {'DNL':>6}  "
             f"{'INL':>6}  {'centre (tick)':>13}"]
    for k in range(S):
        lines.append(f"  {k:>3}  {res['counts'][k]:>8}  {res['widths_ticks'][k]:>12.4f}  "
                     f"{res['width_sigma_ticks'][k]:>7.4f}  {res['widths_ticks'][k] * tick_ns:>10.3f}  "
                     f"{res['dnl'][k]:>+6.3f}  {res['inl'][k]:>+6.3f}  {res['centres_ticks'][k]:>13.4f}")
    lines.append(f"  effective resolution {res['effective_resolution_s'] * 1e9:.4g} ns (equal bins: "
                 f"{res['nominal_s'] * 1e9:.4g} ns)")
    lines.append(stored_text(path))
    return "\n".join(lines)
