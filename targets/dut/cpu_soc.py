"""A real CPU as the simulated DUT (issue 17, docs/dut-cpus-design.md): a small LiteX SoC (CPU, ROM
with the DUT firmware, SRAM, a timer with an uptime counter, GPIO outputs for the pins the rig
watches, a GPIO input whose edge interrupts the CPU, and a console byte) written as one plain Verilog
module, ``hilat_dut_soc``, which ``hilat_dut_cpu.v`` puts behind the DUT model's ports.

    python -m targets.dut.cpu_soc --cpu vexriscv --out build/dut   # Verilog + firmware, ~1 s

The firmware (``firmware/dut/``) is built against the SoC's generated headers and loaded into its
ROM in one pass (``init_mems``, which LiteX's Builder calls after writing the headers). Only the
rig's own CPU variant (VexRiscv standard) is offered for now: another variant would define the
same Verilog modules as the rig's CPU with other contents.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from litex.build.generic_platform import GenericPlatform, Pins
from litex.build.io import CRG
from litex.gen import LiteXModule
from litex.soc.cores.gpio import GPIOIn, GPIOOut
from litex.soc.integration.builder import Builder
from litex.soc.integration.soc_core import SoCCore, get_mem_data
from litex.soc.interconnect.csr import CSRStorage

ROOT         = Path(__file__).resolve().parents[2]
FIRMWARE_DIR = ROOT / "firmware" / "dut"
TOP          = "hilat_dut_soc"
# CPU name -> (LiteX cpu_type, variant). VexRiscv standard is the rig's own (its Verilog is shared).
CPUS = {"vexriscv": ("vexriscv", "standard")}
GPIO_PINS = 4   # isr, task, tag, spare (hilat_dut_cpu.v)

_io = [
    ("clk", 0, Pins(1)), ("rst", 0, Pins(1)),
    ("gpio_out", 0, Pins(GPIO_PINS)), ("irq_in", 0, Pins(1)),
    ("console_valid", 0, Pins(1)), ("console_data", 0, Pins(8)),
]


class _VerilogPlatform(GenericPlatform):
    """Writes the SoC's Verilog and nothing else (the rig's simulator build compiles it)."""
    def __init__(self):
        GenericPlatform.__init__(self, "", _io)

    def build(self, fragment, build_dir="build", build_name=TOP, run=False, **kwargs):
        os.makedirs(build_dir, exist_ok=True)
        cwd = os.getcwd()
        os.chdir(build_dir)   # the memories' .init files are written where the Verilog is generated
        try:
            self.finalize(fragment)
            verilog = self.get_verilog(fragment, name=build_name)
            verilog.write(build_name + ".v")
        finally:
            os.chdir(cwd)
        return verilog.ns


def link_march(gcc_flags):
    """LiteX spells -march=rv32i2p0_m; Debian's GCC matches its multilibs (rv32i/ilp32, rv32im/ilp32)
    only by the plain spelling, else it links the rv64 libgcc and fails: the link takes the plain one."""
    return re.sub(r"-march=rv32i2p0_?([a-z]*)", lambda m: "-march=rv32i" + m.group(1), gcc_flags)


class DutSoC(SoCCore):
    def __init__(self, platform, cpu="vexriscv", clk_freq=25e6):
        cpu_type, cpu_variant = CPUS[cpu]
        self.crg = CRG(platform.request("clk"), rst=platform.request("rst"))
        SoCCore.__init__(self, platform, int(clk_freq), ident="hilat DUT", cpu_type=cpu_type,
                         cpu_variant=cpu_variant, integrated_rom_size=0x4000, integrated_sram_size=0x2000,
                         with_uart=False, with_timer=True, timer_uptime=True)
        self.gpio = GPIOOut(platform.request("gpio_out"))
        # The rig's stimulus pin: its rising edge interrupts the CPU (GPIOIn synchronises it).
        self.stim = GPIOIn(platform.request("irq_in"), with_irq=True)
        self.irq.add("stim", use_loc_if_exists=True)
        valid, data = platform.request("console_valid"), platform.request("console_data")
        self.console = LiteXModule()
        self.console._out = CSRStorage(8, description="A console byte: each write is one character.")
        self.comb += [valid.eq(self.console._out.re), data.eq(self.console._out.storage)]

    def init_mems(self, **kwargs):
        """The firmware, against this SoC's headers, into its ROM (fixed size: a new firmware keeps the
        simulator's build)."""
        out = Path(self.platform.output_dir).resolve()
        subprocess.run(["make", "-s", "-C", str(FIRMWARE_DIR), f"BUILD={out / 'firmware'}",
                        f"GENERATED={out / 'software' / 'include'}", f"CPU={self.cpu_type}",
                        f"MARCH={self.cpu.gcc_flags}", f"LINK_MARCH={link_march(self.cpu.gcc_flags)}",
                        f"PYTHON={sys.executable}"], check=True, stdout=sys.stderr)
        self.init_rom("rom", get_mem_data(str(out / "firmware" / "firmware.bin"), data_width=32,
                                          endianness="little"), auto_size=False)


def generate(out_dir, cpu="vexriscv", clk_freq=25e6):
    """Write the DUT SoC for ``cpu`` into ``out_dir``; returns (its Verilog sources, its memory init
    files): the generated top, then the CPU's own sources."""
    platform = _VerilogPlatform()
    soc = DutSoC(platform, cpu, clk_freq)
    out_dir = Path(out_dir)
    Builder(soc, output_dir=str(out_dir), compile_software=False, compile_gateware=False).build(build_name=TOP)
    gateware = out_dir / "gateware"
    sources = [str(gateware / f"{TOP}.v")] + [path for path, _lang, _lib, *_ in platform.sources]
    return sources, sorted(str(p) for p in gateware.glob("*.init"))


def main(argv=None):
    parser = argparse.ArgumentParser(description="hilat DUT SoC with a real CPU: Verilog and firmware")
    parser.add_argument("--cpu", choices=sorted(CPUS), default="vexriscv")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    sources, inits = generate(args.out, args.cpu)
    print("\n".join(sources + inits))


if __name__ == "__main__":
    main()
