"""``python -m gateware.export DIR``: generate the timing cores' Verilog and CSR map (for lint): the
default build, one sampling its inputs four times a tick (the I/O cells' models; docs/subtick.md),
and the Ethernet cores on them (EthStream, EthCommandBridge: gateware/ethernet.py's EthernetCores)."""

import sys

from gateware import ethernet
from gateware.standalone import export

if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "build/verilog"
    print(export(out))
    print(export(out, name="hilat_timing_cores_subtick", samples_per_tick=4))
    print(ethernet.export(out))
