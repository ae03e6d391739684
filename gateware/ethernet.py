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
