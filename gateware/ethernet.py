"""EthernetLink: LiteEth's MAC + ARP + IP (+ ICMP) + UDP on a PHY, with the rig's two UDP ports
(docs/ethernet.md).

- The stack is ``liteeth.core.LiteEthUDPIPCore`` with the 32-bit datapath in ``sys``
  (``with_sys_datapath``: the MAC's CRC and the packetizers run at 32 bits in ``sys``; only the PHY
  and the MAC's clock-crossing FIFOs are in ``eth_rx`` / ``eth_tx``). The crossing FIFOs are 16 deep
  (``tx_cdc_depth``/``rx_cdc_depth``): at LiteEth's 32 the ECP5 misses 125 MHz on ``eth_rx`` in most
  builds (a LUT-RAM read behind a Gray pointer), at 16 it met in every build measured (issue 33).
- The rig's IPv4 and MAC addresses are registers (``ethnet_ip``, ``ethnet_mac``) whose reset values
  are the build's: LiteEth only compares and copies its address arguments (ARP, IP, ICMP), so a
  Signal serves as well as a constant and NET_CONFIG can change them at run time.
- IP packets addressed to another IPv4 address are refused (no IP broadcast): the rig answers only
  its own address (ARP requests for it, and, with ``with_icmp``, ping).
- Two UDP user ports (32-bit, ``sys``): ``command_port`` (5800, gateware/ethcmd.py) and
  ``stream_port`` (5801, gateware/ethstream.py; what arrives there is discarded).
- ``rx_frames``: Ethernet frames the MAC delivered (any destination address, good CRC or not): the
  link is up when it grows.
"""

from litex.gen import LiteXModule
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage
from migen import *

from gateware.ethcmd import COMMAND_PORT
from gateware.ethstream import STREAM_PORT

IP_DEFAULT  = "192.168.1.50"
MAC_DEFAULT = 0x10E2D5000050
CDC_DEPTH   = 16   # the MAC's clock-crossing FIFOs (see the module's docstring)


def ip_value(ip):
    """An IPv4 address as its numeric value (``"192.168.1.50"`` -> 0xC0A80132)."""
    if isinstance(ip, int):
        assert 0 <= ip < 2**32
        return ip
    parts = [int(p) for p in ip.split(".")]
    assert len(parts) == 4 and all(0 <= p < 256 for p in parts), f"not an IPv4 address: {ip}"
    return (parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]


def mac_value(mac):
    """A MAC address as its numeric value, first byte on the wire most significant
    (``"10:e2:d5:00:00:50"`` -> 0x10E2D5000050)."""
    if isinstance(mac, int):
        assert 0 <= mac < 2**48
        return mac
    parts = [int(p, 16) for p in mac.split(":")]
    assert len(parts) == 6 and all(0 <= p < 256 for p in parts), f"not a MAC address: {mac}"
    value = 0
    for p in parts:
        value = (value << 8) | p
    return value


class EthernetLink(LiteXModule):
    """The UDP/IP stack on ``phy`` (a LiteEth PHY: ``LiteEthPHYRGMII`` on the boards, a GMII model in
    the simulator), in ``sys`` at ``sys_clk_freq`` Hz."""
    def __init__(self, phy, sys_clk_freq, ip_address=IP_DEFAULT, mac_address=MAC_DEFAULT,
                 with_icmp=False, cdc_depth=CDC_DEPTH, with_csr=True):
        from liteeth.core import LiteEthUDPIPCore

        self.ip_default  = ip_value(ip_address)
        self.mac_default = mac_value(mac_address)
        self.ip  = Signal(32, reset=self.ip_default)    # the rig's address now
        self.mac = Signal(48, reset=self.mac_default)
        self.rx_frames = Signal(32)

        # # #

        self.core = LiteEthUDPIPCore(phy, mac_address=self.mac, ip_address=self.ip,
            clk_freq=int(sys_clk_freq), dw=32, with_icmp=with_icmp, with_ip_broadcast=False,
            with_sys_datapath=True, tx_cdc_depth=cdc_depth, rx_cdc_depth=cdc_depth)
        self.command_port = self.core.udp.crossbar.get_port(COMMAND_PORT, dw=32)
        self.stream_port  = self.core.udp.crossbar.get_port(STREAM_PORT, dw=32)
        # Nothing is received on the stream port: what arrives there is taken and dropped, so it never
        # holds up the receive path.
        self.comb += self.stream_port.source.ready.eq(1)

        frames = self.core.mac.core.source
        self.sync += If(frames.valid & frames.ready & frames.last, self.rx_frames.eq(self.rx_frames + 1))

        if with_csr:
            self.add_csr()

    def add_csr(self):
        self._ip = CSRStorage(32, reset=self.ip_default, description=
            "The rig's IPv4 address, numeric (192.168.1.50 = 0xC0A80132); reset: the build's.")
        self._mac = CSRStorage(48, reset=self.mac_default, description=
            "The rig's MAC address, first byte on the wire most significant; reset: the build's.")
        self._status = CSRStatus(fields=[
            CSRField("rx_frames", size=32, description=
                "Ethernet frames received (any destination address), a count: the link is up when it grows."),
        ], description="Link status.")
        self.comb += [
            self.ip.eq(self._ip.storage),
            self.mac.eq(self._mac.storage),
            self._status.fields.rx_frames.eq(self.rx_frames),
        ]


def add_ethernet_path(module, phy, record_layout, ts, heartbeat_depth, sys_clk_freq, ts_clk_freq,
                      ip_address=IP_DEFAULT, mac_address=MAC_DEFAULT, with_icmp=False):
    """The Ethernet path of a rig on ``module`` (docs/ethernet.md): ``ethnet`` (the UDP/IP stack on
    ``phy``), ``ethstream`` (records of ``record_layout`` into datagrams on the stream port, its
    heartbeats bounded by the timebase ``ts`` and ``heartbeat_depth``) and ``ethcmd`` (the command
    port). RigSoC and the boards' cost synthesis (targets/board_flow.py) both build it here, so what
    is costed is what is built. The records' source is the caller's to connect to ``ethstream.sink``."""
    from gateware.ethcmd import EthCommandBridge
    from gateware.ethstream import EthStream

    module.ethnet = EthernetLink(phy, sys_clk_freq, ip_address, mac_address, with_icmp=with_icmp)
    module.ethstream = EthStream(record_layout, ts, heartbeat_depth, udp=module.ethnet.stream_port.sink,
                                 sys_clk_freq=sys_clk_freq,
                                 quiet_cycles=EthStream.quiet_cycles_for(sys_clk_freq, ts_clk_freq))
    module.ethcmd = EthCommandBridge(module.ethnet.command_port)


# Units without a CPU: what the gateware tests simulate and the cost synthesis measures --------------

ETH_BANKS = ["timebase", "stimulus", "capture", "ethstream", "ethcmd"]


def _bring_out(module, endpoint, prefix, sink):
    """``endpoint``'s signals as ports of ``module`` (added to ``module.ios``): driven from outside
    when ``sink`` (the module reads the endpoint), else read out; ``ready`` the other way."""
    names = ["valid", "last"] + [f for f, _ in endpoint.description.payload_layout] + \
            [f for f, _ in endpoint.description.param_layout]
    for name in names + ["ready"]:
        port = Signal(len(getattr(endpoint, name)), name=f"{prefix}_{name}")
        inward = (name != "ready") == sink
        module.comb += getattr(endpoint, name).eq(port) if inward else port.eq(getattr(endpoint, name))
        module.ios.add(port)


class EthernetCores(LiteXModule):
    """The timing cores as gateware/standalone.py's ``TimingCores`` builds them (records read through
    CSRs), with EthStream and EthCommandBridge on them, all CSRs on one bus, and the two UDP user
    ports as ports (``stream_*``: datagrams out; ``cmd_in_*``: datagrams in; ``cmd_out_*``: out).

    ``records_from_port`` (an input): 1 feeds EthStream from the ``rec_*`` ports instead of the
    capture (tests of ticks the timebase takes too long to reach: offsets beyond 32 bits, the wrap).

    ``with_link``: the UDP ports go to an EthernetLink on LiteEth's PHY model instead (frames as
    bytes on ``phy_rx_*`` / ``phy_tx_*``, no preamble or CRC; ``eth_rx``/``eth_tx`` run on ``sys``):
    what the rig puts on the wire, ARP and IP included.
    """
    def __init__(self, fifo_depth=64, n_stimulus=2, n_inputs=4, glitch_max=4, sys_clk_freq=100e6,
                 ts_clk_freq=100e6, with_link=False):
        from litex.soc.interconnect import stream

        from gateware.capture import EdgeCapture
        from gateware.ethcmd import EthCommandBridge
        from gateware.ethstream import EthStream, heartbeat_depth, route_records
        from gateware.standalone import _add_csr_bus
        from gateware.stimulus import StimulusGenerator
        from gateware.timebase import Timebase

        self.cd_sys = ClockDomain()
        self.cd_ts  = ClockDomain()
        self.timebase = Timebase("ts")
        self.stimulus = StimulusGenerator(self.timebase.ts, n_stimulus, "ts")
        self.inputs   = Signal(n_inputs)
        self.capture  = capture = EdgeCapture(self.timebase, inputs=[self.inputs[i] for i in range(n_inputs)],
            internal=self.stimulus.pins, clock_domain="ts", fifo_depth=fifo_depth, glitch_max=glitch_max)
        quiet_cycles = EthStream.quiet_cycles_for(sys_clk_freq, ts_clk_freq)
        self.ethstream = EthStream(capture.layout, self.timebase.ts, heartbeat_depth(capture),
                                   quiet_cycles=quiet_cycles)
        self.ethcmd = EthCommandBridge()
        # Routed as in RigSoC: the capture's CSR reader on one side, EthStream on the other (or the
        # rec_* ports' records, by `records_from_port`).
        to_csr, to_stream = stream.Endpoint(capture.layout), stream.Endpoint(capture.layout)
        capture.add_csr_reader(to_csr)
        self.records_from_port = Signal()
        records = stream.Endpoint(capture.layout)
        self.comb += [
            route_records(capture.source, to_stream, to_csr, self.ethstream.enable),
            If(self.records_from_port,
                records.connect(self.ethstream.sink),
            ).Else(
                to_stream.connect(self.ethstream.sink),
            ),
        ]
        self.ts = Signal(64)
        self.stim_pins = Signal(n_stimulus)
        self.comb += [self.ts.eq(self.timebase.ts), self.stim_pins.eq(Cat(*self.stimulus.pins))]
        self.ios = {self.cd_sys.clk, self.cd_sys.rst, self.cd_ts.clk, self.cd_ts.rst, self.ts, self.stim_pins,
                    self.inputs, self.records_from_port}
        _bring_out(self, records, "rec", sink=True)
        if with_link:
            self._add_link(sys_clk_freq)
        else:
            _bring_out(self, self.ethstream.udp, "stream", sink=False)
            _bring_out(self, self.ethcmd.udp.source, "cmd_in", sink=True)
            _bring_out(self, self.ethcmd.udp.sink, "cmd_out", sink=False)
        banks = ETH_BANKS + ["ethnet"]
        self.ios |= _add_csr_bus(self, lambda name, memory: banks.index(name) if name in banks else None)
        self.parameters = dict(n_stimulus=n_stimulus, n_inputs=n_inputs, fifo_depth=fifo_depth,
            glitch_max=glitch_max, event_port="csr", n_channels=capture.n_channels,
            pin_to_stamp_delay=capture.PIN_TO_STAMP_DELAY, record_delay=capture.RECORD_DELAY,
            record_words=self.ethstream.words, max_records=self.ethstream.max_records,
            heartbeat_depth=self.ethstream.depth, quiet_cycles=quiet_cycles)

    def _add_link(self, sys_clk_freq):
        from types import SimpleNamespace

        from liteeth.phy.model import LiteEthPHYModel

        pads = SimpleNamespace(**{f"{side}_{what}": Signal(8 if what == "data" else 1, name=f"phy_{side}_{what}")
                                  for side in ("source", "sink") for what in ("valid", "data")})
        self.phy = phy = LiteEthPHYModel(pads)
        self.ethnet = link = EthernetLink(phy, sys_clk_freq)
        ethcmd = self.ethcmd.udp
        self.comb += [
            self.ethstream.udp.connect(link.stream_port.sink),
            link.command_port.source.connect(ethcmd.source),
            ethcmd.sink.connect(link.command_port.sink),
        ]
        self.ios |= set(vars(pads).values())

    def csr_map(self):
        from gateware.standalone import TimingCores
        return TimingCores.csr_map(self)


def export(build_dir, name="hilat_ethernet_cores", **params):
    """Write ``<name>.v`` and ``<name>.json`` (parameters and CSR map) of EthernetCores into ``build_dir``."""
    from gateware import standalone
    return standalone.export(build_dir, name, top_class=EthernetCores, **params)

