"""targets/dut/cpu_soc.py: a DUT CPU's Verilog coexists with the rig's VexRiscv (standard).

Verilator has no per-library modules, and LiteX's build passes -Wno-fatal: a DUT on another VexRiscv
variant, unrenamed, would define VexRiscv, DataCache and InstructionCache (and 30-odd macros) a second
time, and the build would silently keep one of each (MODDUP, REDEFMACRO). So the generator copies the
CPU's Verilog with the modules and macros it defines renamed dut_<name>."""

import shutil
import subprocess
from pathlib import Path

import pytest

from targets.dut import cpu_soc

pythondata_cpu_vexriscv = pytest.importorskip("pythondata_cpu_vexriscv")
RIG_CPU_VERILOG = Path(pythondata_cpu_vexriscv.data_location) / "VexRiscv.v"


def _names(paths):
    modules, macros = set(), set()
    for path in paths:
        m, d = cpu_soc.defined_names(Path(path).read_text())
        modules |= m
        macros |= d
    return modules, macros


def test_prefix_renames_modules_and_macros_not_signals_of_the_same_name(tmp_path):
    cpu = tmp_path / "cpu.v"
    cpu.write_text("`define WIDTH 8\n`define debug(x) x\n"
                   "module core(input [`WIDTH-1:0] WIDTH, output debug);\n"
                   "`ifdef WIDTH\n  sub sub(.debug(debug));\n`endif\nendmodule\n"
                   "module sub(output debug); `debug(assign debug = 1;) endmodule\n")
    top = tmp_path / "top.v"
    top.write_text('module top; core core(); initial $readmemh("top_core.init", m); endmodule\n')
    (copy,) = cpu_soc.prefix_sources(top, [cpu], tmp_path / "out")
    text = Path(copy).read_text()
    assert Path(copy).name == "dut_cpu.v"
    assert cpu_soc.defined_names(text) == ({"dut_core", "dut_sub"}, {"dut_WIDTH", "dut_debug"})
    assert "[`dut_WIDTH-1:0] WIDTH" in text and "`ifdef dut_WIDTH" in text   # the port keeps its name
    assert "dut_sub dut_sub(.debug(debug))" in text and "`dut_debug(assign debug = 1;)" in text
    assert top.read_text() == 'module top; dut_core dut_core(); initial $readmemh("top_core.init", m); endmodule\n'


@pytest.fixture(scope="module", params=["vexriscv_full", "picorv32"])
def generated(request, tmp_path_factory):
    """A DUT SoC other than the rig's CPU (its firmware included: about a second)."""
    out = tmp_path_factory.mktemp(request.param)
    sources, _inits = cpu_soc.generate(out, request.param)
    return request.param, sources


def test_a_dut_cpu_defines_nothing_the_rigs_vexriscv_does(generated):
    cpu, sources = generated
    rig_modules, rig_macros = _names([RIG_CPU_VERILOG])
    assert {"VexRiscv", "DataCache", "InstructionCache"} <= rig_modules and rig_macros
    assert all(Path(s).is_relative_to(Path(sources[0]).parents[1]) for s in sources)   # copies, in its dir
    modules, macros = _names(sources)
    assert not modules & rig_modules and not macros & rig_macros
    assert all(m.startswith(cpu_soc.PREFIX) for m in modules - {cpu_soc.TOP}) and len(modules) > 1
    assert all(m.startswith(cpu_soc.PREFIX) for m in macros) and macros
    top = Path(sources[0]).read_text()
    core = "dut_VexRiscv" if cpu.startswith("vexriscv") else "dut_picorv32"
    assert f"\n{core} " in top                                             # the SoC instantiates the copy


@pytest.mark.skipif(not shutil.which("verilator"), reason="needs Verilator")
def test_verilator_sees_no_duplicate_beside_the_rigs_vexriscv(generated):
    _cpu, sources = generated
    result = subprocess.run(["verilator", "--lint-only", "-Wno-fatal", "--top-module", cpu_soc.TOP,
                             str(RIG_CPU_VERILOG), *sources], capture_output=True, text=True, timeout=120)
    assert "%Error" not in result.stderr, result.stderr[-2000:]
    for warning in ("MODDUP", "REDEFMACRO"):
        assert warning not in result.stderr, result.stderr[-2000:]


def test_the_rigs_own_variant_is_shared_unrenamed(tmp_path):
    sources, _inits = cpu_soc.generate(tmp_path, "vexriscv")
    assert Path(sources[1]) == RIG_CPU_VERILOG
    assert "\nVexRiscv VexRiscv(" in Path(sources[0]).read_text()
