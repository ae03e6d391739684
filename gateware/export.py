"""``python -m gateware.export DIR``: generate the timing cores' Verilog and CSR map (for lint)."""

import sys

from gateware.standalone import export

if __name__ == "__main__":
    print(export(sys.argv[1] if len(sys.argv) > 1 else "build/verilog"))
