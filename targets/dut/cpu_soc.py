"""A real CPU as the simulated DUT (issue 17, docs/dut-cpus-design.md): a small LiteX SoC (CPU, ROM
with the DUT firmware, SRAM, a timer with an uptime counter, GPIO outputs for the pins the rig
watches, a GPIO input whose edge interrupts the CPU, and a console byte) written as one plain Verilog
module, ``hilat_dut_soc``, which ``hilat_dut_cpu.v`` puts behind the DUT model's ports.

    python -m targets.dut.cpu_soc --cpu picorv32 --out build/dut   # Verilog + firmware, ~1 s

The firmware (``firmware/dut/``) is built against the SoC's generated headers and loaded into its
ROM in one pass (``init_mems``, which LiteX's Builder calls after writing the headers).

The CPU's Verilog shares one namespace with the rig's (Verilator has no per-library modules): a
VexRiscv variant other than the rig's own defines the same modules (VexRiscv, DataCache,
InstructionCache) and macros with other contents, and LiteX's Verilator build (-Wno-fatal) would
silently keep one of each. So the DUT gets a copy of its CPU's Verilog with the modules and macros
it defines renamed ``dut_<name>`` (``prefix_sources``), the SoC top's instance with them; only the
rig's own variant is shared as it is.

LiteX is imported where the SoC is built: the CLI reads ``CPUS`` without it.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT         = Path(__file__).resolve().parents[2]
FIRMWARE_DIR = ROOT / "firmware" / "dut"
TOP          = "hilat_dut_soc"
# CPU name -> (LiteX cpu_type, variant).
CPUS = {
    "vexriscv":      ("vexriscv", "standard"),   # the rig's own variant (its Verilog is shared)
    "vexriscv_full": ("vexriscv", "full"),       # mcycle/cycle CSRs
    "vexriscv_lite": ("vexriscv", "lite"),
    "vexriscv_min":  ("vexriscv", "minimal"),
    "picorv32":      ("picorv32", "standard"),   # rdcycle; LiteX's crt0 saves every register on an IRQ
}
RIG_CPU = ("vexriscv", "standard")   # gateware/soc.py's RigSoC: its Verilog needs no prefix
PREFIX  = "dut_"
GPIO_PINS = 4   # isr, task, tag, spare (hilat_dut_cpu.v)
ROM_BYTES = 0x4000
# The firmware's ROM images (firmware/dut/experiments.c): name -> its compile-time settings. The
# first is in the ROM the SoC is built with; SimulatedRig(dut_args={"firmware": name}) starts with
# another (targets/dut/experiments.py, docs/dut-benchmarks.md).
FIRMWARE_IMAGES = {
    "response":     "-DEXPERIMENT=1",
    "response-dma": "-DEXPERIMENT=1 -DBACKGROUND_MASK_CYCLES=500 -DBACKGROUND_OPEN_CYCLES=600",
    "pipeline":     "-DEXPERIMENT=2",
    "ipc":          "-DEXPERIMENT=3",
}
DEFAULT_IMAGE = "response"


def rom_image_name(image):
    """The init file of a firmware image (in the SoC's gateware directory, and the rig's)."""
    return f"{TOP}_rom.{image}.init"


def link_march(gcc_flags):
    """LiteX spells -march=rv32i2p0_m; Debian's GCC matches its multilibs (rv32i/ilp32, rv32im/ilp32)
    only by the plain spelling, else it links the rv64 libgcc and fails: the link takes the plain one."""
    return re.sub(r"-march=rv32i2p0_?([a-z]*)", lambda m: "-march=rv32i" + m.group(1), gcc_flags)


def defined_names(text):
    """(module names, macro names) a Verilog text defines."""
    modules = re.findall(r"^\s*module\s+(\w+)", text, re.M)
    macros = re.findall(r"^\s*`define\s+(\w+)", text, re.M)
    return set(modules), set(macros)


def prefix_sources(top, cpu_sources, out_dir, prefix=PREFIX):
    """Copy ``cpu_sources`` into ``out_dir`` with the modules and macros they define renamed
    ``prefix + name``, in them and in the SoC ``top`` (rewritten in place; its instance of the CPU).
    Modules are renamed as whole words, macros where they are used (`` `NAME``) or tested
    (`ifdef NAME ...), so a macro's name that is also a signal's keeps the signal. Returns the copies."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = {Path(s): Path(s).read_text() for s in cpu_sources}
    modules, macros = set(), set()
    for text in texts.values():
        m, d = defined_names(text)
        modules |= m
        macros |= d
    module_re = re.compile(r"\b(" + "|".join(sorted(modules, key=len, reverse=True)) + r")\b") if modules else None
    macro_re = (re.compile(r"(`(?:define|undef|ifdef|ifndef|elsif)\s+|`)(" +
                           "|".join(sorted(macros, key=len, reverse=True)) + r")\b") if macros else None)

    def rename(text):
        if module_re:
            text = module_re.sub(lambda m: prefix + m.group(1), text)
        if macro_re:
            text = macro_re.sub(lambda m: m.group(1) + prefix + m.group(2), text)
        return text

    copies = []
    for source, text in texts.items():
        copy = out_dir / (prefix + source.name)
        copy.write_text(rename(text))
        copies.append(str(copy))
    Path(top).write_text(rename(Path(top).read_text()))
    return copies


def _dut_soc(cpu, clk_freq):
    """The DUT SoC for ``cpu`` on its Verilog-only platform."""
    from litex.build.generic_platform import GenericPlatform, Pins
    from litex.build.io import CRG
    from litex.gen import LiteXModule
    from litex.soc.cores.gpio import GPIOIn
    from litex.soc.integration.soc_core import SoCCore, get_mem_data
    from litex.soc.interconnect.csr import CSRStatus, CSRStorage
    from migen import If

    io = [
        ("clk", 0, Pins(1)), ("rst", 0, Pins(1)),
        ("gpio_out", 0, Pins(GPIO_PINS)), ("irq_in", 0, Pins(1)),
        ("console_valid", 0, Pins(1)), ("console_data", 0, Pins(8)),
    ]

    class VerilogPlatform(GenericPlatform):
        """Writes the SoC's Verilog and nothing else (the rig's simulator build compiles it)."""
        def __init__(self):
            GenericPlatform.__init__(self, "", io)

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

    class DutSoC(SoCCore):
        def __init__(self, platform):
            cpu_type, cpu_variant = CPUS[cpu]
            self.crg = CRG(platform.request("clk"), rst=platform.request("rst"))
            SoCCore.__init__(self, platform, int(clk_freq), ident="hilat DUT", cpu_type=cpu_type,
                             cpu_variant=cpu_variant, integrated_rom_size=ROM_BYTES, integrated_sram_size=0x2000,
                             with_uart=False, with_timer=True, timer_uptime=True)
            # The pins the rig watches, written through set and clear registers: each write changes
            # only the pins it names, so a handler and the tasks never undo each other's pins (as a
            # read-modify-write of one output register could, preempted between read and write).
            pins = platform.request("gpio_out")
            self.pins = LiteXModule()
            self.pins._set = CSRStorage(GPIO_PINS, name="set", description="Pins to raise: each 1 raises its "
                                        "pin (0: isr, 1: task, 2: tag, 3: spare).")
            self.pins._clear = CSRStorage(GPIO_PINS, name="clear", description="Pins to lower: each 1 lowers its pin.")
            self.pins._out = CSRStatus(GPIO_PINS, name="out", description="The pins' levels.")
            self.sync += If(self.pins._set.re, pins.eq(pins | self.pins._set.storage)).Elif(
                self.pins._clear.re, pins.eq(pins & ~self.pins._clear.storage))
            self.comb += self.pins._out.status.eq(pins)
            # The rig's stimulus pin: its rising edge interrupts the CPU (GPIOIn synchronises it).
            self.stim = GPIOIn(platform.request("irq_in"), with_irq=True)
            self.irq.add("stim", use_loc_if_exists=True)
            valid, data = platform.request("console_valid"), platform.request("console_data")
            self.console = LiteXModule()
            self.console._out = CSRStorage(8, description="A console byte: each write is one character.")
            self.comb += [valid.eq(self.console._out.re), data.eq(self.console._out.storage)]

        def init_mems(self, **kwargs):
            """Every firmware image, against this SoC's headers; the default one into its ROM, the
            others as init files beside it (the ROM's size is fixed: another image needs no new
            simulator, only another file read at start-up)."""
            out = Path(self.platform.output_dir).resolve()
            for image, defines in FIRMWARE_IMAGES.items():
                subprocess.run(["make", "-s", "-C", str(FIRMWARE_DIR), f"BUILD={out / 'firmware' / image}",
                                f"GENERATED={out / 'software' / 'include'}", f"CPU={self.cpu_type}",
                                f"MARCH={self.cpu.gcc_flags}", f"LINK_MARCH={link_march(self.cpu.gcc_flags)}",
                                f"DEFINES={defines}", f"PYTHON={sys.executable}"], check=True, stdout=sys.stderr)
                words = get_mem_data(str(out / "firmware" / image / "firmware.bin"), data_width=32,
                                     endianness="little")
                if len(words) > ROM_BYTES // 4:
                    raise RuntimeError(f"firmware image {image}: {4 * len(words)} bytes, the ROM has {ROM_BYTES}")
                gateware = out / "gateware"
                gateware.mkdir(parents=True, exist_ok=True)
                (gateware / rom_image_name(image)).write_text("".join(f"{w:08x}\n" for w in words))
                if image == DEFAULT_IMAGE:
                    self.init_rom("rom", words, auto_size=False)

    return DutSoC(VerilogPlatform())


def generate(out_dir, cpu="vexriscv", clk_freq=25e6):
    """Write the DUT SoC for ``cpu`` into ``out_dir``; returns (its Verilog sources, its memory init
    files): the generated top, then the CPU's own sources (prefixed copies unless the rig's CPU)."""
    from litex.soc.integration.builder import Builder

    soc = _dut_soc(cpu, clk_freq)
    out_dir = Path(out_dir)
    Builder(soc, output_dir=str(out_dir), compile_software=False, compile_gateware=False).build(build_name=TOP)
    gateware = out_dir / "gateware"
    top = gateware / f"{TOP}.v"
    cpu_sources = [path for path, _lang, _lib, *_ in soc.platform.sources]
    if CPUS[cpu] != RIG_CPU:
        cpu_sources = prefix_sources(top, cpu_sources, out_dir / "cpu")
    return [str(top)] + cpu_sources, sorted(str(p) for p in gateware.glob("*.init"))


def main(argv=None):
    parser = argparse.ArgumentParser(description="hilat DUT SoC with a real CPU: Verilog and firmware")
    parser.add_argument("--cpu", choices=sorted(CPUS), default="vexriscv")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    sources, inits = generate(args.out, args.cpu)
    print("\n".join(sources + inits))


if __name__ == "__main__":
    main()
