"""The rig SoC: VexRiscv + UART + Timebase + StimulusGenerator + EdgeCapture (+ the Ethernet link).

Board targets and the simulator build this same SoC; they provide the clock domains (``sys`` and
``ts``, which may be the same clock or not) and the pads:

- ``stimulus`` pads: one output per stimulus channel (to the DUT's interrupt inputs);
- ``capture`` pads: one input per DUT input (``in0``, ``in1``, ...: ISR entry, task dispatch, spare,
  tag by default; see ``gateware/channels.py``);
- ``ethernet_phy`` (optional): a LiteEth PHY (its ``eth_rx``/``eth_tx`` clock domains are its own),
  added to the SoC as ``ethphy`` unless the target did (under that name, before or after); with it
  the SoC gets the UDP/IP stack, the record stream and the command bridge
  (docs/ethernet.md; ``eth_ip``, ``eth_mac``: the build's addresses, ``eth_with_icmp``: ping).
  Without it nothing of the Ethernet path is built.

Everything the firmware and the host need to know of this build (channel table, limits, clocks) is
a ``soc.h`` constant, sent to the host in IDENTIFY: nothing is typed again in C or Python.

The firmware in ``firmware/`` is built against this SoC's generated ``csr.h`` and baked into ROM
by :class:`RigBuilder` in place of LiteX's BIOS.
"""

import os
import subprocess

from litex.soc.integration.builder import Builder
from litex.soc.integration.soc_core import SoCCore
from migen import *

from gateware import channels, engine
from gateware.capture import EdgeCapture
from gateware.stimulus import MIN_INTERVAL, StimulusGenerator
from gateware.timebase import Timebase

FIRMWARE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "firmware"))

# The firmware refuses a start time closer than this to now (ticks): its START handling and the
# stimulus core's arming take well under this at any supported clock.
START_MARGIN = 1000


def git_identity():
    """Short hash of the source tree (with ``-dirty`` when it has changes), or ``unknown``."""
    root = os.path.dirname(FIRMWARE_DIR)
    try:
        rev = subprocess.check_output(["git", "-C", root, "rev-parse", "--short=10", "HEAD"],
                                      stderr=subprocess.DEVNULL, text=True).strip()
        dirty = subprocess.call(["git", "-C", root, "diff", "--quiet", "HEAD", "--", "gateware", "firmware"],
                                stderr=subprocess.DEVNULL) != 0
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class RigSoC(SoCCore):
    def __init__(self, platform, sys_clk_freq, ts_clk_freq, stimulus_pads, capture_pads,
                 board="unknown", fifo_depth=None, glitch_max=15, cpu_variant="standard",
                 identity=None, with_engine=False, trigger_pad=None, samples_per_tick=1,
                 edge_clock_domain=None, ethernet_phy=None, eth_ip=None, eth_mac=None,
                 eth_with_icmp=False, tdc=None, **kwargs):
        # With the engine, 20 KiB of ROM hold the firmware with room; the block RAM this frees goes
        # to the engine's histograms (docs/engine.md, "Room on the FPGA").
        kwargs.setdefault("integrated_rom_size", 0x5000 if with_engine else 0x8000)
        # The engine's banks take the block RAM of half the raw capture FIFO: with it, the raw path
        # is best effort (drops counted) and the histograms are complete whatever it drops.
        fifo_depth = fifo_depth or (512 if with_engine else 1024)
        kwargs.setdefault("integrated_sram_size", 0x2000)
        # Board targets give the rate their USB-serial bridge carries (UART_BAUDRATE, docs/boards.md);
        # 3 Mbaud is the ULX3S's FT231X and the host's default.
        kwargs.setdefault("uart_baudrate", 3_000_000)
        # IDENTIFY's uart_baud: the rate the host must open the port at; 0 when the link is no serial
        # line (the simulator's UART is bridged to TCP).
        self.uart_baudrate = 0 if kwargs.get("uart_name") == "sim" else int(kwargs["uart_baudrate"])
        SoCCore.__init__(self, platform, sys_clk_freq, ident=f"hilat rig on {board}",
                         cpu_type="vexriscv", cpu_variant=cpu_variant, **kwargs)

        n_stimulus = len(stimulus_pads)
        n_inputs   = len(capture_pads)
        self.channels = channels.channel_table(n_stimulus, n_inputs)
        self.timebase = Timebase("ts")
        self.stimulus = StimulusGenerator(self.timebase.ts, n_stimulus, "ts")
        self.capture  = EdgeCapture(self.timebase, inputs=list(capture_pads),
            internal=self.stimulus.pins, clock_domain="ts", fifo_depth=fifo_depth,
            glitch_max=glitch_max, samples_per_tick=samples_per_tick, edge_clock_domain=edge_clock_domain, tdc=tdc)
        self.tdc = tdc      # gateware.tdc.TDCInputs (its TDCs in the capture's front ends), or None
        if ethernet_phy is None:
            self.capture.add_csr_reader()
        else:
            self._add_ethernet(ethernet_phy, sys_clk_freq, ts_clk_freq, eth_ip, eth_mac, eth_with_icmp)
        self.comb += [pad.eq(pin) for pad, pin in zip(stimulus_pads, self.stimulus.pins)]
        if with_engine:
            # The engine's limits in ticks (minimum spacing, sweep time) hold for ts up to this ratio.
            assert ts_clk_freq <= engine.MAX_TS_PER_SYS * sys_clk_freq, \
                f"engine: ts {ts_clk_freq / 1e6} MHz above {engine.MAX_TS_PER_SYS} x sys {sys_clk_freq / 1e6} MHz"
            self.engine = engine.MeasurementEngine(self.capture.record, self.capture.record.timestamp,
                                                   self.capture.RECORD_DELAY, clock_domain="ts")
            self.engine.add_csr_reader()
            if trigger_pad is not None:
                self.comb += trigger_pad.eq(self.engine.trigger)

        # What the firmware reports in IDENTIFY (soc.h), so no number is hard-coded in C.
        identity = identity or git_identity()
        self.ts_clk_freq = int(ts_clk_freq)
        self.gateware_identity = f"{board} {identity}"
        # IDENTIFY must fit one frame: header, 26 fixed bytes, the firmware's name (<= 32 bytes), the
        # gateware's, the channel table, uart_baud and the TDC's inputs and taps (docs/protocol.md).
        identify_bytes = (4 + 26 + 1 + 32 + 1 + len(self.gateware_identity.encode())
                          + sum(2 + len(c.name) + len(c.role) for c in self.channels) + 4 + 3)
        assert identify_bytes <= 250, f"IDENTIFY of {identify_bytes} bytes does not fit a frame: fewer channels"
        self.add_constant("HILAT_TS_CLOCK_FREQUENCY", self.ts_clk_freq)
        self.add_constant("HILAT_N_STIMULUS", n_stimulus)
        self.add_constant("HILAT_N_INPUTS", n_inputs)
        self.add_constant("HILAT_N_CHANNELS", len(self.channels))
        self.add_constant("HILAT_CHANNELS", channels.identify_text(self.channels))
        self.add_constant("HILAT_MIN_INTERVAL", MIN_INTERVAL)
        self.add_constant("HILAT_GLITCH_MAX", glitch_max)
        self.add_constant("HILAT_START_MARGIN", START_MARGIN)
        self.add_constant("HILAT_FIFO_DEPTH", fifo_depth)
        self.add_constant("HILAT_PIN_TO_STAMP_DELAY", self.capture.PIN_TO_STAMP_DELAY)
        # Sub-tick sampling: samples a tick, and the record's fraction bits the inputs fill.
        self.add_constant("HILAT_SAMPLES_PER_TICK", self.capture.samples_per_tick)
        self.add_constant("HILAT_FRACTION_BITS", self.capture.fraction_total_bits)
        # The carry-chain TDCs (docs/tdc.md): on the first HILAT_TDC_INPUTS inputs, 8-bit codes in the fraction.
        self.add_constant("HILAT_TDC_INPUTS", 0 if tdc is None else tdc.n_inputs)
        self.add_constant("HILAT_TDC_TAPS", 0 if tdc is None else tdc.n_taps)
        self.add_constant("HILAT_GATEWARE_IDENTITY", self.gateware_identity)
        self.add_constant("HILAT_UART_BAUDRATE", self.uart_baudrate)
        if with_engine:
            self.add_constant("HILAT_ENGINE_MIN_SPACING", engine.MIN_SPACING)
            self.add_constant("HILAT_ENGINE_INTERVAL_SHIFT_MIN", engine.INTERVAL_SHIFT_MIN)
            self.add_constant("HILAT_ENGINE_INTERVAL_SHIFT_MAX", engine.INTERVAL_SHIFT_MAX)
            self.add_constant("HILAT_ENGINE_BINS", engine.TAG_BINS)
            self.add_constant("HILAT_ENGINE_SWEEP_TICKS", engine.SWEEP_TICKS)
            self.add_constant("HILAT_ENGINE_TRIGGER_DELAY", self.engine.TRIGGER_DELAY)
            self.add_constant("HILAT_ENGINE_STAT_SLOTS", engine.STAT_SLOTS)
            self.add_constant("HILAT_ENGINE_STAT_MISSES", engine.STAT_MISSES)
            self.add_constant("HILAT_ENGINE_STAT_BELOW", engine.STAT_BELOW)


    def _add_ethernet(self, phy, sys_clk_freq, ts_clk_freq, ip, mac, with_icmp):
        """The Ethernet link (docs/ethernet.md): the UDP/IP stack on ``phy``, the record stream
        (EthStream, fed from the capture FIFO while ``ethstream_control.enable``, the CPU's CSR reader
        otherwise) and the command bridge, with their soc.h constants."""
        from litex.soc.interconnect import stream

        from gateware.ethcmd import COMMAND_PORT
        from gateware.ethernet import IP_DEFAULT, MAC_DEFAULT, add_ethernet_path
        from gateware.ethstream import STREAM_PORT, heartbeat_depth, route_records

        # LiteEth only connects the PHY's streams: the PHY is the SoC's `ethphy` (CSRs `ethphy_*`), unless
        # the target added it already (LiteX targets do, as `self.ethphy`; doing so after this is a no-op).
        if not any(m is phy for _, m in self._submodules):
            self.ethphy = phy
        add_ethernet_path(self, phy, self.capture.layout, self.timebase.ts, heartbeat_depth(self.capture),
                          sys_clk_freq, ts_clk_freq, ip or IP_DEFAULT, mac or MAC_DEFAULT, with_icmp)
        to_csr = stream.Endpoint(self.capture.layout)
        self.capture.add_csr_reader(to_csr)
        self.comb += route_records(self.capture.source, self.ethstream.sink, to_csr, self.ethstream.enable)
        self.add_constant("HILAT_ETHERNET", 1)
        self.add_constant("HILAT_ETH_IP_DEFAULT", self.ethnet.ip_default)
        self.add_constant("HILAT_ETH_MAC_DEFAULT", self.ethnet.mac_default)
        self.add_constant("HILAT_ETH_COMMAND_PORT", COMMAND_PORT)
        self.add_constant("HILAT_ETH_STREAM_PORT", STREAM_PORT)
        self.add_constant("HILAT_ETH_RECORD_WORDS", self.ethstream.words)
        self.add_constant("HILAT_ETH_MAX_RECORDS", self.ethstream.max_records)


class RigBuilder(Builder):
    """LiteX's builder, with the rig firmware as the ROM program instead of the BIOS."""
    def add_software_package(self, name, src_dir=None):
        if name == "bios" and src_dir is None:
            src_dir = FIRMWARE_DIR
        Builder.add_software_package(self, name, src_dir)
