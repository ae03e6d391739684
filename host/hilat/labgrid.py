"""A labgrid driver for the hilat rig (the ``labgrid`` extra).

labgrid places give the rig's UART as a ``SerialPort`` (a local one: ``RawSerialPort``,
``USBSerialPort``) or a ``NetworkSerialPort`` (what an exporter shares: ``raw`` TCP or ``rfc2217``),
or an Ethernet rig as a ``NetworkService`` (its ``address``: ``udp://ADDRESS:5800``);
``HilatDriver`` binds to any of them and opens the rig through ``hilat.api``::

    imports:
      - hilat.labgrid
    targets:
      main:
        resources:
          RemotePlace:
            name: hilat-rig
        drivers:
          HilatDriver: {}

    rig = target.get_driver("HilatDriver")      # activated: the rig is open (HELLO/IDENTIFY)
    rig.info()["ts_hz"]
    run = rig.capture(count=2000, period="100us", jitter="20us")
    run.stats("stim_to_isr").percentile(99.9)

Import it by module name as above, not by the path of this file: labgrid registers a module
imported from a ``.py`` path under its file name, and ``labgrid`` would replace labgrid itself in
``sys.modules``. Nothing imports this module on ``import hilat``: only labgrid's ``imports:`` (or the
user) does, in a venv with labgrid (labgrid's ``pyserial-labgrid`` serves serial ports there; plain
pyserial must not be installed beside it, labgrid issue #1245).
"""

import attr
from labgrid.driver.common import Driver
from labgrid.factory import target_factory
from labgrid.resource import NetworkService, SerialPort
from labgrid.step import step
from labgrid.util.proxy import proxymanager

from hilat.api import Rig
from hilat.link.transport import UDP_COMMAND_PORT

__all__ = ["HilatDriver", "rig_url"]


def rig_url(port):
    """``(url, baud)`` by which hilat reaches the rig on a bound labgrid resource.

    A local ``SerialPort``: its device path at its ``speed``. A ``NetworkSerialPort``: ``socket://HOST:PORT``
    for protocol ``raw`` (a plain TCP byte stream: no baud rate to set), ``rfc2217://HOST:PORT`` for
    ``rfc2217`` (the exporter's ser2net sets the UART to ``speed``), both through labgrid's proxy
    manager, which tunnels through SSH where the exporter or ``LG_PROXY`` asks for it. A
    ``NetworkService``: an Ethernet rig at its ``address``, ``udp://ADDRESS:5800`` (its ``port``, SSH's,
    is not the rig's; the host must reach the address directly: UDP does not go through the proxy).
    """
    if isinstance(port, SerialPort):
        return port.port, port.speed
    if isinstance(port, NetworkService):   # an Ethernet rig: its command port (docs/ethernet.md)
        return f"udp://{port.address}:{UDP_COMMAND_PORT}", None
    host, tcp_port = proxymanager.get_host_and_port(port)
    if ":" in host:
        host = f"[{host}]"
    if port.protocol == "raw":
        return f"socket://{host}:{tcp_port}", None
    if port.protocol == "rfc2217":
        # ign_set_control, as labgrid's SerialDriver: ser2net does not answer every SET_CONTROL.
        return f"rfc2217://{host}:{tcp_port}?ign_set_control", port.speed
    raise ValueError(f"HilatDriver: unknown protocol {port.protocol!r} of {port} (raw or rfc2217)")


@target_factory.reg_driver
@attr.s(eq=False)
class HilatDriver(Driver):
    """The hilat rig on the bound serial port: open while the driver is active.

    Args:
        out_dir (str): where ``capture`` writes its run directories unless it is given ``out_dir``
            (default: hilat's own, ``runs`` in the working directory)
    """

    bindings = {"port": {"SerialPort", "NetworkSerialPort", "NetworkService"}}

    out_dir = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        self.url = None         # the hilat URL while active
        self.rig = None         # the open hilat.api.Rig while active

    def on_activate(self):
        url, baud = rig_url(self.port)
        self.rig = Rig(url, baud=baud).open()     # HELLO/IDENTIFY now: a wrong port fails the activation
        self.url = url

    def on_deactivate(self):
        rig, self.rig, self.url = self.rig, None, None
        if rig is not None:
            rig.close()

    @Driver.check_active
    @step(result=True)
    def info(self):
        """The rig's identity: the facts ``hilat info --json`` prints."""
        return dict(self.rig.identity)

    @Driver.check_active
    @step(args=["settings"])
    def capture(self, **settings):
        """Capture with ``hilat.api.Rig.capture``'s settings (``count=2000, period="100us", ...``);
        returns its run (``run.stats(kind)``, ``run.path``)."""
        if self.out_dir is not None:
            settings.setdefault("out_dir", self.out_dir)
        return self.rig.capture(**settings)
