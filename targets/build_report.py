"""Build report of a board bitstream: clocks requested and achieved, resources, bitstream hash.

The achieved frequencies are nextpnr's own post-route timing analysis, read from its log lines

    Info: Max frequency for clock '$glbnet$ts_clk': 212.36 MHz (PASS at 200.00 MHz)

(the last such line per clock is the post-route one). Resources come from nextpnr's ``--report`` JSON
(its "Device utilisation" table). A clock domain is matched to nextpnr's clock nets by requested
frequency, since nextpnr derives each PLL output's constraint from the PLL settings; a requested domain
that nextpnr did not time is a problem too, not a pass.
"""

import hashlib
import re
from pathlib import Path

_FMAX = re.compile(r"Max frequency for clock\s+'(?P<net>[^']+)':\s+(?P<achieved>[0-9.]+) MHz\s+"
                   r"\((?P<verdict>PASS|FAIL) at (?P<constraint>[0-9.]+) MHz\)")
_UTIL = re.compile(r"^Info:\s+(?P<bel>[A-Za-z0-9_]+):\s+(?P<used>\d+)/\s*(?P<available>\d+)\s+\d+%", re.M)


def parse_fmax(log_text):
    """{clock net: {achieved_mhz, constraint_mhz, pass}} from nextpnr's log (last report per clock)."""
    clocks = {}
    for m in _FMAX.finditer(log_text):
        clocks[m["net"]] = {
            "achieved_mhz":   float(m["achieved"]),
            "constraint_mhz": float(m["constraint"]),
            "pass":           m["verdict"] == "PASS",
        }
    return clocks


def parse_utilisation(log_text):
    """{bel type: {used, available}} from the last "Device utilisation" table of nextpnr's log."""
    start = log_text.rfind("Device utilisation:")
    if start < 0:
        return {}
    table = {}
    for line in log_text[start:].splitlines()[1:]:
        m = _UTIL.match(line)
        if not m:
            if table:
                break
            continue
        table[m["bel"]] = {"used": int(m["used"]), "available": int(m["available"])}
    return table


def domain_nets(requested_mhz, fmax, tolerance=2e-4):
    """nextpnr's clock nets timed at ``requested_mhz``.

    nextpnr derives each PLL output's constraint from the PLL's settings, and names the clock net after
    whatever wire Yosys kept (``$glbnet$crg_clkout1``, or a CPU wire for ``sys``), so the frequency
    identifies a domain and the name does not. Domains with equal frequencies share their nets.
    The match is relative (``tolerance``): the constraint comes from a period rounded to 1 ps, e.g.
    7.142 ns, printed as 140.02 MHz for 140 MHz.
    """
    return sorted(net for net, f in fmax.items()
                  if abs(f["constraint_mhz"] - requested_mhz) <= tolerance * requested_mhz)


def _port_nets(port, fmax):
    """nextpnr's clock nets driven from the top-level port ``port`` (a clock coming in on a pin, e.g.
    an RGMII receive clock): ``$glbnet$eth_clocks0_rx$TRELLIS_IO_IN`` and the like."""
    pattern = re.compile(rf"(^|\$){re.escape(port)}($|\$)")
    return sorted(net for net in fmax if pattern.search(net))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sampling(samples_per_tick, ts_hz, io_clock_limit_hz=None):
    """The report's ``sampling`` entry: samples a tick, their spacing, and for S > 1 the clock the I/O
    cells sample on against its speed grade 6 limit (``io_clock_limit_hz``: S = 2, IDDRX1F's SCLK,
    which is ts; S = 4, IDDRX2F's ECLK, the edge clock at 2 x ts)."""
    entry = {"samples_per_tick": samples_per_tick, "sample_spacing_ns": round(1e9 / ts_hz / samples_per_tick, 4)}
    if samples_per_tick > 1:
        primitive, pin, hz = ("IDDRX2F", "ECLK", 2 * ts_hz) if samples_per_tick == 4 else ("IDDRX1F", "SCLK", ts_hz)
        entry["io_clock"] = {"primitive": primitive, "pin": pin, "mhz": round(hz / 1e6, 6),
                             "limit_mhz": round(io_clock_limit_hz / 1e6, 6), "speed_grade": 6,
                             "half_period_ps": round(0.5e12 / hz),
                             "min_half_period_ps": round(0.5e12 / io_clock_limit_hz),
                             "within_limit": hz <= io_clock_limit_hz}
    return entry


def uart(baud, sys_hz, bridge=None, bridge_max_baud=None):
    """The report's ``uart`` entry: the rate the rig's UART was built for and what LiteX's UART makes
    of it at ``sys_hz``. Its PHY steps a 32-bit phase accumulator by int(baud / sys_hz * 2**32) each sys
    cycle and starts a bit on its carry: the mean rate is that word's, a truncation error of under
    sys_hz / 2**32 baud, and each bit edge falls on a sys cycle, so it sits up to one sys period away
    from the ideal edge without adding up across a byte. ``bridge``: the USB-serial bridge at the
    other end and the highest rate it carries (docs/boards.md, "Serial link")."""
    tuning_word = int(baud / sys_hz * 2**32)
    achieved = tuning_word * sys_hz / 2**32
    entry = {"baud": baud, "bridge": bridge, "sys_mhz": round(sys_hz / 1e6, 6), "tuning_word": tuning_word,
             "achieved_baud": round(achieved, 3), "rate_error_ppm": round((achieved - baud) / baud * 1e6, 6),
             "edge_step_ns": round(1e9 / sys_hz, 3),
             "edge_step_bit_percent": round(100 * baud / sys_hz, 3)}
    if bridge_max_baud is not None:
        # --uart-baudrate may ask for more than the bridge carries: built, but said (the host would
        # read nothing or garbage).
        entry.update(bridge_max_baud=bridge_max_baud, within_bridge=baud <= bridge_max_baud)
    return entry


def uart_line(uart):
    """The summary's UART line, e.g. "UART 2000000 baud (DAPLink ...): LiteX's divider at 50 MHz gives
    1999999.990 baud (-0.005 ppm), bit edges on a 20.000 ns grid (4.000 % of a bit)"."""
    bridge = f" ({uart['bridge']})" if uart.get("bridge") else ""
    line = (f"UART {uart['baud']} baud{bridge}: LiteX's divider at {uart['sys_mhz']:g} MHz gives "
            f"{uart['achieved_baud']:.3f} baud ({uart['rate_error_ppm']:+.3f} ppm), bit edges on a "
            f"{uart['edge_step_ns']:.3f} ns grid ({uart['edge_step_bit_percent']:.3f} % of a bit)")
    if uart.get("within_bridge") is False:
        line += f"; ABOVE the bridge's {uart['bridge_max_baud']} baud: the host cannot read it"
    return line


def make(board, device, requested_hz, nextpnr_log, bitstream, root, nextpnr_report=None, sampling=None,
         uart=None):
    """The report as a dict (see ``problems`` for what makes it a failure). ``requested_hz``: {domain:
    Hz} for a domain matched by frequency (a PLL output), or {domain: (Hz, port)} for a clock that
    comes in on the top-level port ``port`` (matched by the net's name and frequency; its nets are
    then no other domain's). ``sampling``: see ``sampling``; ``uart``: see ``uart``."""
    fmax = parse_fmax(nextpnr_log)
    named_by_port = {domain: (hz_port[0], _port_nets(hz_port[1], fmax))
                     for domain, hz_port in requested_hz.items() if isinstance(hz_port, tuple)}
    claimed = {net for _, nets in named_by_port.values() for net in nets}
    clocks = {}
    for domain, hz in requested_hz.items():
        if domain in named_by_port:
            hz, nets = named_by_port[domain]
            nets = [n for n in nets if n in domain_nets(hz / 1e6, fmax)]
        else:
            nets = [n for n in domain_nets(hz / 1e6, fmax) if n not in claimed]
        entry = {"requested_mhz": round(hz / 1e6, 6), "nets": nets, "achieved_mhz": None, "met": False}
        if nets:
            achieved = min(fmax[n]["achieved_mhz"] for n in nets)
            entry.update(achieved_mhz=achieved,
                         met=all(fmax[n]["pass"] for n in nets) and achieved >= hz / 1e6)
        clocks[domain] = entry
    named = {n for c in clocks.values() for n in c["nets"]}
    other = {net: {"achieved_mhz": f["achieved_mhz"], "constraint_mhz": f["constraint_mhz"], "met": f["pass"]}
             for net, f in fmax.items() if net not in named}

    resources = parse_utilisation(nextpnr_log)
    if nextpnr_report and nextpnr_report.get("utilization"):
        resources = {bel: {"used": u["used"], "available": u["available"]}
                     for bel, u in nextpnr_report["utilization"].items()}

    bitstream = Path(bitstream)
    bit = None
    if bitstream.exists():
        rel = bitstream.resolve()
        rel = rel.relative_to(root) if rel.is_relative_to(root) else rel
        bit = {"path": str(rel), "bytes": bitstream.stat().st_size, "sha256": sha256(bitstream)}

    report = {
        "board": board,
        "device": device,
        "clocks": clocks,
        "other_clocks": other,
        "resources": {k: v for k, v in sorted(resources.items()) if v["used"] > 0},
        "bitstream": bit,
    }
    if sampling:
        report["sampling"] = sampling
    if uart:
        report["uart"] = uart
    report["timing_met"] = not _timing_problems(report)
    return report


def _timing_problems(report):
    out = []
    for domain, c in report["clocks"].items():
        if not c["nets"]:
            out.append(f"clock '{domain}' ({c['requested_mhz']:.3f} MHz) not found in nextpnr's timing report")
        elif not c["met"]:
            out.append(f"clock '{domain}' reaches {c['achieved_mhz']:.2f} MHz, "
                       f"below the requested {c['requested_mhz']:.2f} MHz")
    for net, c in report["other_clocks"].items():
        if not c["met"]:
            out.append(f"clock {net} reaches {c['achieved_mhz']:.2f} MHz, below its {c['constraint_mhz']:.2f} MHz")
    io = report.get("sampling", {}).get("io_clock")
    if io and not io["within_limit"]:   # nextpnr does not check it: the build must stay inside by construction
        out.append(f"{io['primitive']} {io['pin']} at {io['mhz']:.2f} MHz, above its {io['limit_mhz']:.2f} MHz")
    return out


def problems(report):
    """Why this build is not usable ([] when it is): missed timing, missing bitstream."""
    out = _timing_problems(report)
    if not report.get("bitstream"):
        out.append("no bitstream was written")
    return out


def summary(report):
    lines = [f"{report['board']} ({report['device']}): timing {'met' if report['timing_met'] else 'NOT MET'}"]
    for domain, c in report["clocks"].items():
        achieved = "n/a" if c["achieved_mhz"] is None else f"{c['achieved_mhz']:.2f}"
        verdict = "PASS" if c["met"] else "FAIL"
        lines.append(f"  {domain:6} requested {c['requested_mhz']:8.3f} MHz, achieved Fmax {achieved} MHz  {verdict}")
    if report.get("sampling"):
        lines.append("  " + sampling_line(report["sampling"]))
    if report.get("uart"):
        lines.append("  " + uart_line(report["uart"]))
    for bel, u in report["resources"].items():
        lines.append(f"  {bel:14} {u['used']:6} / {u['available']:6} ({100 * u['used'] / u['available']:.0f}%)")
    if report.get("bitstream"):
        b = report["bitstream"]
        lines.append(f"  bitstream {b['path']} ({b['bytes']} bytes) sha256 {b['sha256']}")
    if report.get("engine_cost"):
        e = report["engine_cost"]
        lines.append(f"  engine: {e['lut4_equivalent']} LUT4-equivalents, {e['flip_flops']} FF, "
                     f"{e['block_rams']} DP16KD, {e['distributed_rams']} LUT RAMs (synthesized alone)")
    if report.get("ethernet"):
        e = report["ethernet"]
        ping = "on" if e["icmp"] else "off"
        lines.append(f"  Ethernet: PHY {e['phy']} ({e['rx_clock_port']}), {e['ip']} {e['mac']}, UDP "
                     f"{e['command_port']} (commands) / {e['stream_port']} (stream), ping {ping}")
    if report.get("ethernet_cost"):
        e = report["ethernet_cost"]
        lines.append(f"  Ethernet cost: {e['lut4_equivalent']} LUT4-equivalents, {e['flip_flops']} FF, "
                     f"{e['block_rams']} DP16KD, {e['distributed_rams']} LUT RAMs (synthesized alone)")
    if report.get("sampling_cost"):
        c = report["sampling_cost"]
        lines.append(f"  sampling: {c['lut4_equivalent']:+d} LUT4-equivalents, {c['flip_flops']:+d} FF over one "
                     f"sample a tick (timing cores synthesized alone both ways)")
    if report.get("tdc"):
        lines.extend("  " + line for line in tdc_lines(report["tdc"]))
    if "build_seconds" in report:
        lines.append(f"  built in {report['build_seconds']:.0f} s")
    return "\n".join(lines)


def sampling_line(sampling):
    """The summary's line on sub-tick sampling, e.g. "4 samples a tick, 2.000 ns apart; IDDRX2F ECLK
    (edge clock) 250.00 MHz, speed grade 6 limit 277.90 MHz (half period 2000 ps >= 1799 ps)"."""
    S = sampling["samples_per_tick"]
    line = f"{S} sample{'s' if S > 1 else ''} a tick, {sampling['sample_spacing_ns']:.3f} ns apart"
    io = sampling.get("io_clock")
    if io:
        clock = "edge clock" if io["pin"] == "ECLK" else "ts"
        verdict = ">=" if io["within_limit"] else "<"
        line += (f"; {io['primitive']} {io['pin']} ({clock}) {io['mhz']:.2f} MHz, speed grade {io['speed_grade']} "
                 f"limit {io['limit_mhz']:.2f} MHz (half period {io['half_period_ps']} ps {verdict} "
                 f"{io['min_half_period_ps']} ps)")
    return line


def tdc_lines(tdc):
    """The summary's lines on the TDC (``--tdc``): its cost and each line's predicted bins."""
    c = tdc["cost"]
    out = [f"TDC: {tdc['inputs']} inputs x {tdc['taps']} taps, {tdc['code_bits']}-bit codes, "
           f"{tdc['latency_ticks']} ticks from the pin; cost {c['lut4_equivalent']} LUT4-equivalents "
           f"({c['line_carry_cells']} carry cells), "
           f"{c['flip_flops']} FF, {c['block_rams']} DP16KD (synthesized alone)"]
    for line in tdc["lines"]:
        b = line["bins"][tdc["table_corner"]]
        out.append(f"  in{line['input']} at {line['first_bel']}: line {b['line_ps']:.0f} ps, bins {b['min_ps']}/"
                   f"{b['mean_ps']}/{b['max_ps']} ps min/mean/max, {b['zero_width']} zero-width, "
                   f"{b['out_of_order']} out of order ({tdc['table_corner']} corner, predicted)")
    return out
