"""Will the link carry the raw edges? The expected record rate of a capture against what the rig's
link carries, planned before it starts (docs/analysis.md, "Gaps": a capture past the link's rate
loses edges in the gateware, and every window they touch is unknown).

- Expected: each fired stimulus channel's pulse rate (its mode's mean interval) times the records a
  stimulus makes: its own rise and fall, and a rise and a fall on each response role (ISR, task)
  for the paced channel; a second channel's response is not known (one pulse counted).
- The link: the UART's bytes per second over the wire bytes of a record in full EVENTS frames
  (delta, masks and fraction; frame header, base, CRC, COBS and delimiter shared by the frame's
  records), and the firmware's own limit, sys clock over the cycles it spends per record
  (``FIRMWARE_SYS_CYCLES_PER_RECORD``, measured by benchmarks/sim_rig.py). A TCP link (the simulator)
  has only the firmware's.
"""

from dataclasses import dataclass

from hilat.link import protocol as p

# The rig's firmware drains the FIFO, frames and sends a record in about this many sys cycles
# (VexRiscv "standard", the firmware as built), measured on the simulated rig (the same CPU and
# firmware as a board's, sys at 50 MHz, no UART limit): 3000 periodic stimuli of 6 records lost
# nothing a stimulus every 2300 ticks (130 k records/s) and 4554 edges every 2000 (150 k/s); 380
# cycles puts the limit at 131.6 k records/s (docs/analysis.md, "Gaps").
FIRMWARE_SYS_CYCLES_PER_RECORD = 380
UART_BITS_PER_BYTE = 10   # 8N1: start + 8 data + stop


@dataclass(frozen=True)
class LinkPlan:
    stimuli_per_s: float        # of the paced stimulus channel
    records_per_s: float        # expected, all channels
    link_records_per_s: float   # what the link carries
    limit: str                  # what sets the link's figure
    shortest_period: int | None  # ticks: the paced channel's period at which the link would carry it

    @property
    def over(self):
        return self.records_per_s > self.link_records_per_s

    def warning(self):
        way_out = "measure on the rig (--on-rig)"
        if self.shortest_period is not None:
            way_out += f" or give a period of at least {self.shortest_period} ticks"
        return (f"about {self.records_per_s / 1e3:.1f} k records/s expected ({self.stimuli_per_s / 1e3:.2f} k "
                f"stimuli/s), more than the link carries ({self.link_records_per_s / 1e3:.1f} k records/s, "
                f"{self.limit}): the gateware will drop edges and every window they touch will be unknown; "
                f"{way_out}")


def stimulus_rate(s, ts_hz):
    """Mean pulses per second of a stimulus channel's settings (``settings.StimulusSettings``)."""
    if s.mode in ("periodic", "dither"):
        return ts_hz / max(s.period, 1)
    if s.mode == "burst":
        return ts_hz * max(s.burst_count, 1) / max(s.period, 1)
    if s.mode == "random":
        return ts_hz * s.probability / 2**32
    return 0.0   # oneshot


def wire_bytes_per_record(ident, delta_ticks):
    """Bytes on the wire per record in full EVENTS frames, records ``delta_ticks`` apart."""
    n_channels = ident.n_stimulus + ident.n_inputs
    mask_bytes = p.mask_bytes_for(n_channels)
    s = getattr(ident, "samples_per_tick", 1) or 1
    tdc_inputs = ident.tdc_inputs   # 8 bits of TDC code each (docs/tdc.md)
    fraction_bits = p.TDC_CODE_BITS * tdc_inputs if tdc_inputs else ident.n_inputs * (s.bit_length() - 1)
    fraction_bytes = -(-fraction_bits // 8)
    delta_bytes = max(1, -(-max(int(delta_ticks), 1).bit_length() // 7))
    record = delta_bytes + 2 * mask_bytes + fraction_bytes
    per_frame = (p.MAX_PAYLOAD - p.EVENTS_EMPTY) // record
    # COBS adds one byte to a frame of at most 254 decoded bytes, then the delimiter.
    frame_bytes = p.EVENTS_EMPTY + per_frame * record + p.CRC_SIZE + 1 + 1
    return frame_bytes / per_frame


def plan(fired, pace_channel, roles, ident, baudrate=None, count=None):
    """The ``LinkPlan`` of firing ``fired`` ({channel: StimulusSettings}) on the rig ``ident``, its
    UART at ``baudrate`` (None: no serial line, the simulator's TCP). ``count``: the paced channel's
    stimuli, when the run is that long: a run whose records all fit in the rig's FIFO loses none."""
    responses = sum(1 for c in (roles.isr, roles.task) if c is not None)
    rates = {ch: stimulus_rate(s, ident.ts_hz) for ch, s in fired.items()}
    per_stimulus = {ch: 2 + 2 * (responses if ch == pace_channel else 1) for ch in fired}
    records = sum(rates[ch] * per_stimulus[ch] for ch in fired)
    paced = rates.get(pace_channel, 0.0)
    delta = ident.ts_hz / records if records else 1 << 20
    firmware = ident.sys_hz / FIRMWARE_SYS_CYCLES_PER_RECORD
    link, limit = firmware, f"the firmware at {FIRMWARE_SYS_CYCLES_PER_RECORD} sys cycles a record"
    if baudrate:
        uart = baudrate / UART_BITS_PER_BYTE / wire_bytes_per_record(ident, delta)
        if uart < link:
            link, limit = uart, f"{baudrate / 1e6:g} Mbaud UART"
    shortest = None
    if pace_channel in fired and paced and fired[pace_channel].mode in ("periodic", "dither"):
        others = records - paced * per_stimulus[pace_channel]
        room = link - others
        if room > 0:
            shortest = int(-(-ident.ts_hz * per_stimulus[pace_channel] // room))
    if count is not None and paced and count * sum(per_stimulus.values()) <= getattr(ident, "fifo_depth", 0):
        records = min(records, link)   # the FIFO holds the whole run
    return LinkPlan(paced, records, link, limit, shortest)
