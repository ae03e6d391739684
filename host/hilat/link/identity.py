"""What a rig says it is (IDENTIFY): its build, clocks, channels, limits and features, as the facts
``hilat info --json`` prints and as the table ``hilat info`` prints."""

import ipaddress

from hilat.link import protocol as p

# IDENTIFY's capability bits, by the name they are shown with.
CAPABILITIES = [("dither", p.CAP_DITHER), ("random", p.CAP_RANDOM), ("burst", p.CAP_BURST),
                ("absolute-start", p.CAP_ABSOLUTE_START), ("glitch-filter", p.CAP_GLITCH_FILTER),
                ("tag", p.CAP_TAG_CHANNEL), ("sub-tick", p.CAP_SUBTICK), ("engine", p.CAP_ENGINE),
                ("ethernet", p.CAP_ETHERNET)]


def describe(ident, status, url, resolution, engine=None):
    """The rig's facts: its IDENTIFY, the drop counters of its STATUS, ``resolution``, the
    calibration a capture on it applies (``calibration.for_rig``), and the limits of its measurement
    engine (its ENGINE_STATS; None: the rig has none)."""
    # The gateware string is "<board> <git hash>" (gateware/soc.py); anything else is shown as it is.
    board, _, git_hash = ident.gateware.partition(" ")
    return {
        "url": url, "protocol": ident.version, "gateware": ident.gateware, "board": board if git_hash else None,
        "git_hash": git_hash or None, "firmware": ident.firmware,
        "ts_hz": ident.ts_hz, "sys_hz": ident.sys_hz, "tick_ns": 1e9 / ident.ts_hz,
        # The rate the rig's UART was built for (0: no serial line; None: a rig built before IDENTIFY
        # carried it).
        "uart_baud": ident.uart_baud,
        # The Ethernet link (docs/ethernet.md; None: the rig has none): its address now, its UDP ports,
        # the stream's record size and records per datagram.
        "ethernet": _ethernet(getattr(ident, "ethernet", None)),
        "stimulus_channels": ident.n_stimulus, "capture_inputs": ident.n_inputs,
        "channels": [{"channel": n, "name": name, "direction": "out" if n < ident.n_stimulus else "in",
                      "default_role": role or None} for n, (name, role) in enumerate(ident.channels)],
        "min_interval_ticks": ident.min_interval, "glitch_max_ticks": ident.glitch_max,
        "start_margin_ticks": ident.start_margin, "fifo_depth": ident.fifo_depth,
        "pin_to_stamp_delay_ticks": ident.pin_to_stamp_delay,
        # Sub-tick sampling (docs/subtick.md): samples of each input a tick, and their spacing.
        "samples_per_tick": ident.samples_per_tick,
        "sample_ns": 1e9 / ident.ts_hz / ident.samples_per_tick,
        # The carry-chain TDC (docs/tdc.md; None: none): the first `inputs` DUT inputs have one of
        # `taps` taps, an 8-bit code each in every record (protocol 5).
        "tdc": ({"inputs": ident.tdc_inputs, "taps": ident.tdc_taps, "code_bits": p.TDC_CODE_BITS}
                if ident.tdc_inputs else None),
        "capabilities": [name for name, bit in CAPABILITIES if ident.capabilities & bit],
        "dropped_per_channel": list(status.dropped),
        "engine": None if engine is None else {
            "min_spacing_ticks": engine.min_spacing, "interval_shift_min": engine.interval_shift_min,
            "bins": engine.bins, "trigger_delay_ticks": engine.trigger_delay},
        "calibration": resolution,
    }


def text(info):
    """The table of ``hilat info`` from :func:`describe`'s facts, with the resolution statement."""
    lines = [f"rig on {info['url']}"]
    if info["git_hash"]:
        dirty = "  (built from uncommitted changes)" if info["git_hash"].endswith("-dirty") else ""
        lines += [f"  board      {info['board']}", f"  gateware   git {info['git_hash']}{dirty}"]
    else:
        lines.append(f"  gateware   {info['gateware']}")
    clock = ", clock calibrated: see resolution" if info["calibration"]["clock"] else ", clock not calibrated"
    channels = ", ".join(f"{c['channel']} {c['name']}" + (f" ({c['default_role']})" if c["default_role"] else "")
                         for c in info["channels"])
    lines += [
        f"  firmware   {info['firmware']} (protocol {info['protocol']})",
        f"  clocks     ts {info['ts_hz'] / 1e6:g} MHz nominal (1 tick = {info['tick_ns']:g} ns{clock}), "
        f"sys {info['sys_hz'] / 1e6:g} MHz",
        f"  link       {_link(info.get('uart_baud'))}",
        *_ethernet_lines(info.get("ethernet")),
        f"  channels   {info['stimulus_channels']} stimulus outputs, {info['capture_inputs']} inputs: {channels}",
        f"  limits     stimulus intervals >= {info['min_interval_ticks']} ticks, glitch filter <= "
        f"{info['glitch_max_ticks']} ticks, start >= {info['start_margin_ticks']} ticks ahead",
        f"  fifo       {info['fifo_depth']} records; pin-to-stamp delay {info['pin_to_stamp_delay_ticks']} ticks "
        "(subtracted in gateware)",
        f"  sampling   each input {info['samples_per_tick']} time{'s' if info['samples_per_tick'] > 1 else ''} a "
        f"tick: {info['sample_ns']:.3g} ns between samples" + (" (sub-tick positions in every record)"
                                                               if info['samples_per_tick'] > 1 else ""),
        *_tdc_lines(info.get("tdc"), info["capture_inputs"]),
        f"  features   {', '.join(info['capabilities'])}",
    ]
    engine = info.get("engine")
    if engine:
        lines.append(f"  engine     on-rig measurement (capture --on-rig): stimuli >= {engine['min_spacing_ticks']} "
                     f"ticks apart, intervals >= 2**{engine['interval_shift_min']} ticks, {engine['bins']} bins per "
                     f"kind and tag, trigger {engine['trigger_delay_ticks']} ticks after its threshold")
    else:
        lines.append("  engine     none (every edge goes to the host)")
    lines.append("resolution")
    lines += [f"  {line}" for line in info["calibration"]["statement"]]
    return "\n".join(lines)


def _link(uart_baud):
    if uart_baud is None:
        return "UART rate not reported (gateware built before IDENTIFY carried it)"
    if uart_baud == 0:
        return "no serial line (the simulator's UART is bridged to TCP)"
    return f"UART {uart_baud} baud (the gateware's --uart-baudrate)"


def _ethernet(ethernet):
    if ethernet is None:
        return None
    mac = ethernet.mac.to_bytes(6, "big").hex(":")
    return {"ip": str(ipaddress.IPv4Address(ethernet.ip)), "mac": mac, "command_port": ethernet.command_port,
            "stream_port": ethernet.stream_port, "record_words": ethernet.record_words,
            "max_records": ethernet.max_records}


def _ethernet_lines(ethernet):
    if not ethernet:
        return []
    return [f"  ethernet   {ethernet['ip']} ({ethernet['mac']}): commands on UDP port {ethernet['command_port']} "
            f"(udp://{ethernet['ip']}:{ethernet['command_port']}), raw edges streamed from port "
            f"{ethernet['stream_port']}, {ethernet['max_records']} records of {4 * ethernet['record_words']} bytes "
            "a datagram"]


def _tdc_lines(tdc, n_inputs):
    if not tdc:
        return []
    which = f"input {tdc['inputs'] - 1}" if tdc["inputs"] == 1 else f"inputs 0..{tdc['inputs'] - 1}"
    return [f"  tdc        {which} of {n_inputs}: carry-chain TDCs of {tdc['taps']} taps, {tdc['code_bits']} bits of "
            "code per input in every record (docs/tdc.md)"]
