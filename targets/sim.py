#!/usr/bin/env python3
"""The simulated rig: the rig SoC in Verilator (LiteX SimPlatform), with a simulated DUT attached.

The UART is bridged to a TCP port on 127.0.0.1 (``hilat_serial2tcp``, LiteX's serial2tcp bound to
the loopback interface). The DUT model is a Verilog module with a fixed port list (see
``targets/dut/hilat_dut_model.v``), chosen with ``--dut-model``/``--dut-top``; its settings are
plusargs (``+dut_isr_base=50`` ...), so changing them needs no rebuild.

The SPARE input (capture channel 4) can carry the calibration sources of the model: a loopback of
STIM0 with a delay (``+dut_loopback=1 +dut_loopback_delay=7``) or a 1PPS with a frequency error
(``+dut_pps_period=50000 +dut_pps_ppb=37500``); see the model and ``docs/calibration.md``.

A CPU DUT (``build(dut_cpu=...)``) runs on a clock of its own at any frequency (``SimulatedRig``'s
``dut_cpu_clk_hz``; ``dut_clock_edges`` gives its edges). A build with ``trace=True`` writes every
signal to ``sim.vcd`` for waveforms; the default build has no tracing (faster).

The build is cached under ``build/sim/<key>``: the key hashes the gateware, the firmware, this file
and the DUT model, so a second run starts within seconds and any change rebuilds.

    python -m targets.sim --build                  # build (or reuse) the simulator
    python -m targets.sim --run --port 0           # run it; prints the URL to connect to
"""

import argparse
import fcntl
import hashlib
import json
import math
import numbers
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from hilat import shutdown
from litex.build.generic_platform import Pins, Subsignal
from litex.build.io import CRG
from litex.build.sim import SimPlatform
from litex.build.sim.config import SimConfig
from migen import *

from targets import compiler_cache

ROOT           = Path(__file__).resolve().parent.parent
DEFAULT_DUT    = ROOT / "targets" / "dut" / "hilat_dut_model.v"
ASYNC_SOURCE   = ROOT / "targets" / "dut" / "hilat_async_source.v"
# With a TDC on every input (build(tdc=True), docs/tdc.md, "Simulation"): each edge's place in its tick,
# and the model line's tap table, the i5 build's stretched to the simulator's tick.
EDGE_PHASE     = ROOT / "targets" / "dut" / "hilat_edge_phase.v"
TDC_TAPS_BOARD = ROOT / "targets" / "tdc" / "taps_colorlight_i5.json"
DUT_CPU_TOP    = ROOT / "targets" / "dut" / "hilat_dut_cpu.v"
# A CPU DUT's own clock, not derived from the rig's: its default frequency (2 ticks a cycle). It is
# a run-time setting (SimulatedRig's dut_cpu_clk_hz), clocked by DUT_CLOCK_MODULE on the simulator's
# existing time step at any mean frequency (dut_clock_edges).
DUT_CPU_CLK_FREQ = int(25e6)
SIM_MODULES    = ROOT / "targets" / "sim_modules"
SERIAL_MODULE  = "hilat_serial2tcp"
DUT_CLOCK_MODULE = "hilat_dut_clock"
SYS_CLK_FREQ   = int(50e6)
TS_CLK_FREQ    = int(50e6)
N_STIMULUS     = 2
# The simulated Ethernet link (docs/ethernet.md, "Simulation"): the TAP interface the simulator makes and
# the host's address on it; they exist only in the network namespace the simulator runs in (targets/netns.py).
ETH_TAP        = "tap0"
ETH_HOST_IP    = "192.168.1.100"
ETH_MODULE     = "gmii_ethernet"
N_INPUTS       = 4

_io = [
    ("sys_clk", 0, Pins(1)),
    # Sub-tick sampling (samples_per_tick > 1): the edge clock at 2 x ts (four samples a tick, ts its
    # half through CLKDIVF), and the DUT's clock at S x ts, half a sample after the rig's sampling
    # instants, so the DUT answers in sub-ticks with no edge on a sampling instant.
    ("eclk", 0, Pins(1)),
    ("dut_clk", 0, Pins(1)),
    # The edge clock is eclk OR eclk_late: eclk_late in phase with eclk (the default) leaves it as it
    # is; later, it holds the edge clock high longer, which moves its falling-edge samples (uneven
    # sub-tick bins, as a duty-cycle error does on a board). src_clk clocks the free-running source
    # of the resolution calibration (hilat_async_source), unrelated to ts.
    ("eclk_late", 0, Pins(1)),
    ("src_clk", 0, Pins(1)),
    # A CPU DUT's clock (targets/dut/cpu_soc.py).
    ("dut_cpu_clk", 0, Pins(1)),
    # Ethernet: a GMII PHY (LiteEthPHYGMII(model=True)) to LiteX's gmii_ethernet module, which bridges it
    # to a TAP interface (ETH_TAP, address ETH_HOST_IP) and checks every frame's preamble and CRC. The
    # module clocks GMII with sys_clk (the PHY model's eth_rx/eth_tx are sys).
    ("gmii_eth", 0,
        Subsignal("rx_data", Pins(8)),
        Subsignal("rx_dv",   Pins(1)),
        Subsignal("rx_er",   Pins(1)),
        Subsignal("tx_data", Pins(8)),
        Subsignal("tx_en",   Pins(1)),
        Subsignal("tx_er",   Pins(1)),
    ),
    ("serial", 0,
        Subsignal("source_valid", Pins(1)),
        Subsignal("source_ready", Pins(1)),
        Subsignal("source_data",  Pins(8)),
        Subsignal("sink_valid",   Pins(1)),
        Subsignal("sink_ready",   Pins(1)),
        Subsignal("sink_data",    Pins(8)),
    ),
]


class Platform(SimPlatform):
    def __init__(self):
        SimPlatform.__init__(self, "SIM", _io)


def tdc_taps_ps():
    """The simulated rig's TDC line (docs/tdc.md, "Simulation"): the Colorlight i5 build's tap arrivals
    (nextpnr's typical corner, ``TDC_TAPS_BOARD``), stretched from its 7.14 ns tick to the simulator's
    20 ns one: the line longer than a tick by the same ratio, the same bubbles and bin ratios, whole ps."""
    board = json.loads(TDC_TAPS_BOARD.read_text())
    scale = (10**12 / TS_CLK_FREQ) / board["tick_ps"]
    return [int(round(t * scale)) for t in board["taps_ps"]]


def build_soc(dut_model=DEFAULT_DUT, dut_top="hilat_dut_model", fifo_depth=1024, with_engine=False,
              samples_per_tick=1, dut_cpu=None, dut_dir=None, ethernet=False, tdc=False):
    """The simulated rig SoC with its DUT: a Verilog model (``dut_model``/``dut_top``), or with
    ``dut_cpu`` a LiteX SoC with that CPU (targets/dut/cpu_soc.py), generated into ``dut_dir``.
    ``ethernet``: the rig's Ethernet link (docs/ethernet.md) on a GMII PHY model (the ``gmii_eth`` pads).
    ``tdc``: a TDC on every input, its line the simulation model fed each edge's phase (EDGE_PHASE)."""
    from gateware import channels, dsp
    from gateware.clocking import EdgeClock
    from gateware.soc import RigSoC

    platform = Platform()

    class SimRig(RigSoC):
        def __init__(self):
            # Power-on reset (the simulator drives no reset pin).
            self.crg   = CRG(platform.request("sys_clk"))
            edge_clock_domain = None
            if samples_per_tick == 4:
                # As on a board: ts is the edge clock's half (EdgeClock), sys a clock of its own.
                edge_clock = Signal()
                self.comb += edge_clock.eq(platform.request("eclk") | platform.request("eclk_late"))
                self.edge_clock = EdgeClock(edge_clock, ResetSignal("sys"))
                edge_clock_domain = "eclk"
            else:
                # sys and ts share the simulator's clock (the gateware tests cover unequal clocks);
                # the timebase still runs in its own `ts` domain, as on a board. Two samples a tick
                # take both edges of ts.
                self.cd_ts = ClockDomain()
                self.comb += [
                    self.cd_ts.clk.eq(ClockSignal("sys")),
                    self.cd_ts.rst.eq(ResetSignal("sys")),
                ]
            eth = {}
            if ethernet:
                from liteeth.phy.gmii import LiteEthPHYGMII

                # model=True: eth_rx and eth_tx are sys (the module clocks GMII with sys_clk); ping on, to
                # see the link answer (`ping 192.168.1.50` in the namespace).
                eth = {"ethernet_phy": LiteEthPHYGMII(None, platform.request("gmii_eth"), model=True),
                       "eth_with_icmp": True}
            table = channels.channel_table(N_STIMULUS, N_INPUTS)
            stimulus_pads = [Signal(name=c.name) for c in channels.outputs(table)]
            capture_pads  = [Signal(name=c.name) for c in channels.inputs(table)]
            tdc_inputs = None
            if tdc:
                from gateware.tdc import TDCInputs

                tdc_inputs = TDCInputs(N_INPUTS, taps_ps=tdc_taps_ps(), tick_ps=10**12 // TS_CLK_FREQ)
            RigSoC.__init__(self, platform, SYS_CLK_FREQ, TS_CLK_FREQ, stimulus_pads, capture_pads,
                            board="sim", fifo_depth=fifo_depth, uart_name="sim", with_engine=with_engine,
                            samples_per_tick=samples_per_tick, edge_clock_domain=edge_clock_domain,
                            tdc=tdc_inputs, **eth)
            if ethernet:
                self.ethphy = eth["ethernet_phy"]   # a submodule of the SoC, as on the boards (its clock domains)
            # The DUT model's output <role>_pin drives the input whose default role that is. It runs
            # on ts (its latencies in ticks), or on a clock S times faster (in sub-ticks).
            outputs = {f"o_{c.role}_pin": pad for c, pad in zip(channels.inputs(table), capture_pads) if c.role}
            if samples_per_tick > 1:
                # The resolution calibration's source shares the SPARE input with the DUT's calibration
                # sources (each is off unless enabled at run time).
                spare_pad, dut_spare, source = outputs["o_spare_pin"], Signal(), Signal()
                outputs["o_spare_pin"] = dut_spare
                self.specials += Instance("hilat_async_source", i_clk=platform.request("src_clk"), o_out=source)
                self.comb += spare_pad.eq(dut_spare | source)
                platform.add_source(str(ASYNC_SOURCE))
            if tdc:
                # Each input's changes get a place in their tick (the TDC's model line takes it), and
                # the resolution calibration's source toggles on SPARE at phases uniform over the tick.
                spare_pad, dut_spare, source = outputs["o_spare_pin"], Signal(), Signal()
                outputs["o_spare_pin"] = dut_spare
                self.comb += spare_pad.eq(dut_spare | source)
                phases = Signal(16 * N_INPUTS)
                self.specials += Instance("hilat_edge_phase", p_N=N_INPUTS, p_TICK_PS=10**12 // TS_CLK_FREQ,
                                          i_clk=ClockSignal("ts"), i_pins=Cat(*capture_pads), o_phase_ps=phases,
                                          o_source=source)
                self.comb += [t.phase_ps.eq(phases[16 * i:16 * i + 16]) for i, t in enumerate(self.tdc.tdcs)]
                platform.add_source(str(EDGE_PHASE))
            model_source, model_top = dut_model, dut_top
            if dut_cpu:
                from targets.dut import cpu_soc

                sources, inits = cpu_soc.generate(dut_dir, dut_cpu, DUT_CPU_CLK_FREQ)
                for source in sources:
                    platform.add_source(source)
                for init in inits:   # read at run time from the simulator's directory (SimulatedRig links them)
                    platform.add_source(init, copy=True)
                outputs["i_cpu_clk"] = platform.request("dut_cpu_clk")
                model_source, model_top = DUT_CPU_TOP, "hilat_dut_cpu"
            self.specials += Instance(model_top,
                i_clk  = ClockSignal("ts") if samples_per_tick == 1 else platform.request("dut_clk"),
                i_rst  = ResetSignal("ts"),
                i_stim = Cat(*stimulus_pads),
                **outputs,
            )
            platform.add_source(str(model_source))
            for model in dsp.SIM_MODELS:  # the vendor blocks the rig instantiates, modelled
                platform.add_source(model)

    return SimRig()


def build_key(dut_model=DEFAULT_DUT, dut_top="hilat_dut_model", with_engine=False, samples_per_tick=1, dut_cpu=None,
              trace=False, ethernet=False, tdc=False):
    """Hash of everything the simulator binary depends on."""
    h = hashlib.sha256()
    # variables.mak is written into sim_modules by the build itself: hashing it would make the
    # second call of a fresh tree miss the first build.
    files = sorted(list((ROOT / "gateware").glob("*.py")) + list((ROOT / "gateware" / "sim_models").glob("*.v"))
                   + list((ROOT / "firmware").glob("*.[chS]"))
                   + [ROOT / "firmware" / "Makefile", Path(dut_model), ASYNC_SOURCE]
                   + ([EDGE_PHASE, TDC_TAPS_BOARD] if tdc else [])
                   + ([DUT_CPU_TOP, ROOT / "targets" / "dut" / "cpu_soc.py"]
                      + sorted((ROOT / "firmware" / "dut").glob("*")) if dut_cpu else [])
                   + [f for f in SIM_MODULES.rglob("*") if f.name != "variables.mak"])
    # This file's build half (everything above the runtime marker) is part of the key too.
    h.update(Path(__file__).read_text().split(_RUNTIME_MARKER)[0].encode())
    for f in files:
        if f.is_file():
            h.update(f.name.encode())
            h.update(f.read_bytes())
    h.update(dut_top.encode())
    h.update(b"engine" if with_engine else b"")
    h.update(b"" if samples_per_tick == 1 else f"samples {samples_per_tick}".encode())
    h.update(f"cpu {dut_cpu}".encode() if dut_cpu else b"")
    h.update(b"trace" if trace else b"")
    h.update(b"ethernet" if ethernet else b"")
    h.update(b"tdc" if tdc else b"")
    import litex
    h.update(str(getattr(litex, "__version__", "")).encode())
    return h.hexdigest()[:16]


def _log(msg):
    print(f"sim: {msg}", file=sys.stderr, flush=True)


def build(build_root=None, dut_model=DEFAULT_DUT, dut_top="hilat_dut_model", force=False, with_engine=False,
          samples_per_tick=1, dut_cpu=None, trace=False, ethernet=False, tdc=False):
    """Build (or reuse) the simulator; return its directory (with ``obj_dir/Vsim``). ``samples_per_tick``
    (1, 2 or 4): how often the rig samples each input a tick; above 1 the DUT model runs on a clock that
    many times faster than ts, so its settings are in sub-ticks. ``dut_cpu`` ("vexriscv"): the DUT is a
    LiteX SoC with that CPU on a clock of its own (targets/dut/cpu_soc.py), not the model. ``trace``: a
    build (of its own) that writes every signal to ``sim.vcd`` in the run directory, for waveforms; it
    runs about a fifth slower, and the file grows fast. ``ethernet``: the rig's Ethernet link on a GMII PHY
    model bridged to a TAP interface (run it in a network namespace: SimulatedRig, targets/netns.py).
    ``tdc``: a TDC on every input (docs/tdc.md, "Simulation"; one sample a tick, the Verilog DUT model)."""
    if tdc and (samples_per_tick != 1 or dut_cpu):
        raise ValueError("a simulated rig with TDCs samples once a tick and runs the Verilog DUT model")
    if samples_per_tick not in (1, 2, 4):
        raise ValueError(f"samples_per_tick is 1, 2 or 4, not {samples_per_tick}")
    if dut_cpu and samples_per_tick != 1:
        raise ValueError("a CPU DUT runs with a rig sampling once a tick")
    build_root = Path(build_root or ROOT / "build" / "sim")
    out = build_root / build_key(dut_model, dut_top, with_engine, samples_per_tick, dut_cpu, trace, ethernet, tdc)
    done = out / "sim.json"          # written last: a build with it is complete
    if done.exists() and not force:
        return out
    build_root.mkdir(parents=True, exist_ok=True)
    # Another process building the same key (test runs side by side) would remove this one's files
    # midway: wait for it, then reuse its build.
    with open(build_root / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists() or force:
            _build(out, dut_model, dut_top, with_engine, samples_per_tick, dut_cpu, trace, ethernet, tdc)
    return out


def _build(out, dut_model, dut_top, with_engine, samples_per_tick, dut_cpu, trace, ethernet, tdc):
    from gateware.soc import RigBuilder

    binary = out / "gateware" / "obj_dir" / "Vsim"
    _log(f"building the simulated rig in {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}"
         " (about a minute)")
    shutil.rmtree(out, ignore_errors=True)
    # LiteX runs meson/ninja from PATH: use the ones installed next to this Python.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    # The firmware's and the model's compilers through ccache, its cache shared by every clone.
    compiler_cache.enable(ROOT)
    soc = build_soc(dut_model, dut_top, with_engine=with_engine, samples_per_tick=samples_per_tick,
                    dut_cpu=dut_cpu, dut_dir=out / "dut", ethernet=ethernet, tdc=tdc)
    if trace:
        soc.comb += soc.platform.trace.eq(1)   # LiteX's harness dumps while sim_trace is high
    builder = RigBuilder(soc, output_dir=str(out), compile_gateware=False)
    sim_config = _sim_config(port=0, samples_per_tick=samples_per_tick, dut_cpu=bool(dut_cpu), ethernet=ethernet)
    with _quiet():
        # The harness's C at -O3 (LiteX's default is -O0; the model's code keeps Verilator's -Os).
        builder.build(sim_config=sim_config, run=False, interactive=False, opt_level="O3", trace=trace,
                      extra_mods=[SERIAL_MODULE, DUT_CLOCK_MODULE], extra_mods_path=str(SIM_MODULES))
    gateware = out / "gateware"
    # LiteX's own harness (core/veril.cpp): it traces only while sim_trace is high. A harness of ours
    # without the tracer (+18 %) made on-rig captures hang and was removed (docs/dut-cpus-design.md, 4).
    result = _run_build(["bash", "build_sim.sh"], gateware)
    if result.returncode != 0 or not binary.exists():
        (out / "build.log").write_text(result.stdout + result.stderr)
        raise RuntimeError(f"simulator build failed, see {out / 'build.log'}")
    # What the runtime needs to clock it as it was built (its sim_config.js).
    (out / "sim.json").write_text(json.dumps({"samples_per_tick": samples_per_tick, "dut_cpu": dut_cpu,
                                              "trace": trace, "ethernet": ethernet, "tdc": tdc}))


def _run_build(args, cwd):
    """subprocess.run(capture_output=True, text=True) of a build script in a process group of its own,
    the whole group (make, verilator, the compilers) stopped if we are interrupted."""
    process = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               **shutdown.child_options())
    try:
        stdout, stderr = process.communicate()
    except BaseException:
        shutdown.stop_child(process, timeout=2)
        raise
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


class _quiet:
    """LiteX prints its build chatter on stdout; keep stdout for results (it goes to stderr)."""
    def __enter__(self):
        sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(2, 1)

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)


# The resolution calibration's source: a clock of 9 ns, 500 ps off the 1 ns grid the rig's sampling
# instants lie on (so no edge falls on one), toggling every N cycles: with N prime to 10 its edges
# visit the twenty phases of the 20 ns tick in turn, 1 ns apart (docs/subtick.md).
SOURCE_CLK_FREQ  = 111_111_111
SOURCE_CLK_PHASE = 20


def _sim_config(port, samples_per_tick=1, edge_clock_high_ps=None, async_source=False, dut_cpu=False,
                dut_cpu_clk_hz=DUT_CPU_CLK_FREQ, ethernet=False):
    """``edge_clock_high_ps``: S = 4, how long the edge clock stays high in each of its cycles
    (default: half its period); ``async_source``: clock the resolution calibration's source. Each
    makes the simulator's time step finer (slower), so they are off unless asked for: an unclocked
    pad stays low. ``dut_cpu``: clock a CPU DUT at ``dut_cpu_clk_hz`` (any whole Hz whose half period
    is at least the time step; DUT_CLOCK_MODULE, which leaves the step as the other clocks make it).
    ``ethernet``: LiteX's gmii_ethernet module on the ``gmii_eth`` pads, clocked by sys_clk, which makes
    the TAP interface ETH_TAP with the host's address ETH_HOST_IP/24 when the simulator starts."""
    cfg = SimConfig()
    cfg.add_clocker("sys_clk", freq_hz=SYS_CLK_FREQ)
    if samples_per_tick == 4:
        eclk_hz = 2 * TS_CLK_FREQ
        half_ps = 10**12 // eclk_hz // 2
        late_ps = (edge_clock_high_ps or half_ps) - half_ps
        # The clock generator takes whole degrees that are whole ps: steps of period / gcd(360, period).
        step_ps = 2 * half_ps // math.gcd(360, 2 * half_ps)
        if not 0 <= late_ps < half_ps or late_ps % step_ps:
            raise ValueError(f"edge clock high for {edge_clock_high_ps} ps: {half_ps} .. {2 * half_ps - step_ps} ps, "
                             f"in steps of {step_ps} ps")
        cfg.add_clocker("eclk", freq_hz=eclk_hz)
        if late_ps:
            cfg.add_clocker("eclk_late", freq_hz=eclk_hz, phase_deg=late_ps * 360 // (2 * half_ps))
    if samples_per_tick > 1:
        cfg.add_clocker("dut_clk", freq_hz=samples_per_tick * TS_CLK_FREQ, phase_deg=180)
        if async_source:
            cfg.add_clocker("src_clk", freq_hz=SOURCE_CLK_FREQ, phase_deg=SOURCE_CLK_PHASE)
    if dut_cpu:
        step_ps = _timebase_ps(cfg)
        if not isinstance(dut_cpu_clk_hz, numbers.Integral) or not 0 < 2 * dut_cpu_clk_hz * step_ps <= 10**12:
            raise ValueError(f"a CPU DUT's clock of {dut_cpu_clk_hz} Hz: whole Hz, with a half period no shorter "
                             f"than the simulator's time step of {step_ps} ps (at most {10**12 // (2 * step_ps)} Hz)")
        cfg.add_module(DUT_CLOCK_MODULE, [], clocks="dut_cpu_clk", tickfirst=True,
                       args={"freq_hz": int(dut_cpu_clk_hz)})
    cfg.add_module(SERIAL_MODULE, "serial", args={"port": port})
    if ethernet:
        cfg.add_module(ETH_MODULE, "gmii_eth", args={"interface": ETH_TAP, "ip": ETH_HOST_IP})
    return cfg


def _timebase_ps(cfg):
    """The simulator's time step (ps) under ``cfg``, as LiteX derives it from its clockers."""
    return json.loads(cfg.get_json())[-1]["timebase"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_RUNTIME_MARKER = "# ---- runtime: not part of the build key " + "-" * 50


# ---- runtime: not part of the build key --------------------------------------------------


def _listening(port):
    """Whether something listens on 127.0.0.1:port (Linux: /proc/net/tcp, state 0A = LISTEN)."""
    wanted = f"0100007F:{port:04X}"
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    return any(line.split()[1] == wanted and line.split()[3] == "0A" for line in lines)


# The DUT model's log (``+dut_log``): its format is hilat's, which reads it for hilat.simulate().
from hilat.simulator import DUT_LOG_COLUMNS, read_dut_log  # noqa: E402, F401


def compare_with_dut_log(run, injected, period):
    """A periodic capture's stimulus -> ISR and -> task results (``run``: a ``hilat.rundir.reader.Run``) against
    the DUT model's log (``read_dut_log``): stimulus k of the log is the one fired k periods after the
    run's start tick. Returns {judged, unknown, wrong, stimuli}: the stimuli seen with a judged
    (sample or miss) stimulus -> ISR result, those unknown, and the judged results of either kind
    that differ from the log (a latency off by any tick, a miss that was not one, or the reverse)."""

    found = run.measurements
    isr, task = found.series["stim_to_isr"], found.series["stim_to_task"]
    first = int(run.meta["start_tick"]) * run.units_per_tick
    index = (isr.start_mu - first) // (period * run.units_per_tick)
    if ((isr.start_mu - first) % (period * run.units_per_tick)).any() or (index >= len(injected)).any():
        raise ValueError("stimuli off the periodic grid the DUT log is indexed by")
    wrong = 0
    for series, column in ((isr, 2), (task, 3)):
        judged = series.unknown == 0
        log_missed = injected[index, 1] != 0
        measured_missed = series.values == -1
        wrong += int((judged & (log_missed != measured_missed)).sum())
        both = judged & ~log_missed & ~measured_missed
        wrong += int((series.values[both] != injected[index[both], column] * run.units_per_tick).sum())
    return {"judged": int((isr.unknown == 0).sum()), "unknown": isr.n_unknown, "wrong": wrong,
            "stimuli": len(isr)}


def calibration_plusargs(loopback=None, loopback_jitter=0, pps_period=None, pps_ppm=0.0, pps_jitter=0,
                         pps_missing_every=0, pps_missing_run=1, pps_extra_every=0):
    """DUT-model settings (``dut_args``) of the calibration sources on the SPARE input, as
    ``targets/dut/hilat_dut_model.v`` reads them: a loopback of STIM0 delayed by ``loopback`` ticks (plus
    a uniform 0..``loopback_jitter``), or a 1PPS every ``pps_period`` ticks whose rate is off by
    ``pps_ppm``, moved by up to +-``pps_jitter`` ticks, with runs of ``pps_missing_run`` pulses dropped
    every ``pps_missing_every`` and an extra pulse after every ``pps_extra_every``-th. Raises ValueError
    for settings the model cannot carry, naming them as ``hilat sim`` options."""
    if loopback is not None and pps_period is not None:
        raise ValueError("--loopback and --pps-period both drive the SPARE input: choose one")
    if loopback is None and loopback_jitter:
        raise ValueError("--loopback-jitter needs --loopback")
    if pps_period is None and (pps_ppm or pps_jitter or pps_missing_every or pps_extra_every):
        raise ValueError("the --pps-* options need --pps-period")
    out = {}
    if loopback is not None:
        if loopback + loopback_jitter > 255:
            raise ValueError("--loopback + --loopback-jitter must be <= 255 ticks")
        out.update(loopback=1, loopback_delay=loopback, loopback_jitter=loopback_jitter)
    if pps_period is not None:
        if not 30 <= pps_period < 2**32:
            raise ValueError("--pps-period must be 30 ticks .. 85 s")
        out.update(pps_period=pps_period, pps_ppb=int(round(pps_ppm * 1000)), pps_jitter=pps_jitter,
                   pps_missing_every=pps_missing_every, pps_missing_run=pps_missing_run,
                   pps_extra_every=pps_extra_every)
        if not -2**31 <= out["pps_ppb"] < 2**31:
            raise ValueError("--pps-ppm out of range")
    return out


def check_clock_settings(samples_per_tick, edge_clock_high_ps=None, async_source_cycles=None, dut_cpu=False,
                         dut_cpu_clk_hz=None):
    """ValueError, with the reason, for simulated clocks a rig built with ``samples_per_tick`` (and a CPU
    DUT if ``dut_cpu``) cannot take."""
    if dut_cpu_clk_hz is not None and not dut_cpu:
        raise ValueError("the DUT's clock frequency goes with a CPU DUT (--dut-cpu): the DUT model runs on ts")
    if (edge_clock_high_ps or async_source_cycles) and samples_per_tick == 1:
        raise ValueError("uneven bins and the resolution source need a rig built with sub-tick sampling "
                         "(--samples-per-tick 2 or 4)")
    if edge_clock_high_ps and samples_per_tick != 4:
        raise ValueError("uneven bins need the edge clock: a rig built with 4 samples a tick")
    _sim_config(0, samples_per_tick, edge_clock_high_ps, bool(async_source_cycles), dut_cpu,
                DUT_CPU_CLK_FREQ if dut_cpu_clk_hz is None else dut_cpu_clk_hz)


def sim_step_ps(samples_per_tick=1, dut_cpu=False):
    """The simulator's time step (ps) of a rig built so, without the optional clocks of ``_sim_config``."""
    return _timebase_ps(_sim_config(0, samples_per_tick, dut_cpu=dut_cpu))


def dut_clock_edges(n, freq_hz=DUT_CPU_CLK_FREQ, step_ps=None):
    """The simulator step (time / ``step_ps``) of a CPU DUT's clock's rising edge ``n`` (an int, or an
    array of them), at ``freq_hz``, as DUT_CLOCK_MODULE schedules it: each on the first step at or after
    its exact time n / freq_hz. Edge 0 is step 0, where the clock goes high from its initial low, as the
    rig's clock (LiteX's clocker) does. The rig's ts rises every 2 steps (20 ns a tick, 10 ns a step), so
    an edge at step k is in rig tick k // 2; a DUT output it sets is sampled at the next ts edge."""
    import numpy as np

    step_ps = step_ps or sim_step_ps(dut_cpu=True)
    # ceil(n * 1e12 / (f * step)), the fraction reduced; in int64 while that is exact, else Python's integers.
    g = math.gcd(10**12, int(freq_hz) * step_ps)
    num, den = 10**12 // g, int(freq_hz) * step_ps // g
    if np.ndim(n) == 0:
        return -(-int(n) * num // den)
    n = np.asarray(n, dtype=np.int64)
    if n.size and int(np.abs(n).max()) < 2**62 // num:
        return -(-n * num // den)
    return np.array([-(-int(i) * num // den) for i in n.ravel()], dtype=np.int64).reshape(n.shape)


def read_edge_phase_log(path):
    """hilat_edge_phase's log (``edge_phase_log``): an int64 array of rows (input, level, phase_ps), every
    change of the rig's inputs in order, the phase of each in its tick (docs/tdc.md, "Simulation")."""
    import numpy as np

    rows = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2)
    return rows.reshape(-1, 3)


class SimulatedRig:
    """A running simulator process. ``url`` is what ``hilat`` connects to. A rig built with sub-tick
    sampling takes ``edge_clock_high_ps`` (S = 4: uneven bins, see ``_sim_config``) and
    ``async_source_cycles`` (the SPARE input toggles every that many cycles of a 9 ns clock of its
    own: the resolution calibration's source). One built with a CPU DUT takes ``dut_cpu_clk_hz``, its
    clock's frequency in whole Hz (default DUT_CPU_CLK_FREQ; any other, e.g. 33_333_700, is unrelated
    to the rig's clock: its edges as ``dut_clock_edges`` gives them), and ``dut_firmware``, the firmware
    image its ROM starts with (targets/dut/cpu_soc.py's FIRMWARE_IMAGES; default: the one it was built
    with).

    A rig built with Ethernet (``build(ethernet=True)``) runs with its link (``ethernet``: None, as built)
    only inside a network namespace other than the machine's (targets/netns.py; the simulator makes the TAP
    interface there, with the host's address): ``udp_url`` reaches it there, ``url`` (serial) as always.
    ``ethernet=False`` runs it without the link (the serial link only, no namespace needed).

    A rig built with TDCs (``build(tdc=True)``) takes ``edge_phase_seed`` (the DUT's edges' phases in
    their ticks, from hilat_edge_phase's PRNG), ``edge_phase_log`` (every input change with its phase:
    ``read_edge_phase_log``) and ``tdc_source_ticks`` (the resolution calibration's source on SPARE,
    toggling every that many ticks at random phases; at least 3)."""

    def __init__(self, sim_dir, run_dir, port=None, dut_args=None, dut_log=None, pps_log=None,
                 edge_clock_high_ps=None, async_source_cycles=None, dut_cpu_clk_hz=None, dut_firmware=None,
                 ethernet=None, edge_phase_seed=None, edge_phase_log=None, tdc_source_ticks=None):
        self.sim_dir = Path(sim_dir)
        self.run_dir = Path(run_dir)
        self.port = port or free_port()
        self.dut_args = dict(dut_args or {})
        self.dut_log = Path(dut_log) if dut_log else None
        self.pps_log = Path(pps_log) if pps_log else None
        self.process = None
        built = json.loads((self.sim_dir / "sim.json").read_text()) if (self.sim_dir / "sim.json").exists() else {}
        self.samples_per_tick = built.get("samples_per_tick", 1)
        self.dut_cpu = built.get("dut_cpu")
        self.tdc = bool(built.get("tdc"))
        if not self.tdc and (edge_phase_seed is not None or edge_phase_log or tdc_source_ticks):
            raise ValueError("edge phases and the TDC's calibration source go with a rig built with TDCs "
                             "(sim.build(tdc=True), --tdc)")
        if tdc_source_ticks is not None and not (isinstance(tdc_source_ticks, numbers.Integral)
                                                 and tdc_source_ticks >= 3):
            raise ValueError(f"the TDC's calibration source toggles every {tdc_source_ticks!r} ticks: a whole "
                             "number, at least 3 (the line settles between changes)")
        self.edge_phase_seed = edge_phase_seed
        self.edge_phase_log = Path(edge_phase_log) if edge_phase_log else None
        self.tdc_source_ticks = tdc_source_ticks
        self.ethernet = bool(built.get("ethernet")) if ethernet is None else bool(ethernet)
        if self.ethernet and not built.get("ethernet"):
            raise ValueError("this simulator was built without Ethernet (sim.build(ethernet=True), --ethernet)")
        check_clock_settings(self.samples_per_tick, edge_clock_high_ps, async_source_cycles, bool(self.dut_cpu),
                             dut_cpu_clk_hz)
        self.edge_clock_high_ps = edge_clock_high_ps
        self.async_source_cycles = async_source_cycles
        self.dut_cpu_clk_hz = DUT_CPU_CLK_FREQ if dut_cpu_clk_hz is None else dut_cpu_clk_hz
        self.dut_firmware = dut_firmware
        if dut_firmware is not None:
            from targets.dut import cpu_soc

            if not self.dut_cpu:
                raise ValueError("a firmware image goes with a CPU DUT (sim.build(dut_cpu=...))")
            if dut_firmware not in cpu_soc.FIRMWARE_IMAGES:
                raise ValueError(f"no firmware image {dut_firmware!r} (images: {', '.join(cpu_soc.FIRMWARE_IMAGES)})")

    @property
    def url(self):
        return f"socket://127.0.0.1:{self.port}"

    @property
    def udp_url(self):
        """The rig's command port over the simulated Ethernet link (in the simulator's namespace)."""
        from gateware.ethernet import IP_DEFAULT

        if not self.ethernet:
            raise ValueError("a simulated rig without Ethernet has no udp:// URL")
        return f"udp://{IP_DEFAULT}"

    def start(self, timeout=60):
        if self.ethernet:
            from targets import netns

            if not netns.isolated():
                raise RuntimeError("the simulated rig's Ethernet makes a TAP interface with the host's address "
                                   f"({ETH_HOST_IP}): run it in a network namespace of its own with nothing but lo "
                                   "(`unshare --net`, targets/netns.py), not the machine's, one rig a namespace")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        gateware = self.sim_dir / "gateware"
        # The simulator reads its modules and memory images relative to its working directory.
        for item in [gateware / "modules", *gateware.glob("*.init")]:
            link = self.run_dir / item.name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(item)
        if self.dut_firmware is not None:   # the CPU DUT's ROM starts with this image (cpu_soc.FIRMWARE_IMAGES)
            from targets.dut import cpu_soc

            rom = self.run_dir / f"{cpu_soc.TOP}_rom.init"
            rom.unlink()
            rom.symlink_to(gateware / cpu_soc.rom_image_name(self.dut_firmware))
        for _attempt in range(5):
            (self.run_dir / "sim_config.js").write_text(self._sim_config(self.port).get_json())
            args = [str(self.sim_dir / "gateware" / "obj_dir" / "Vsim")]
            args += [f"+dut_{k}={v}" for k, v in self.dut_args.items()]
            if self.dut_log:
                args.append(f"+dut_log={self.dut_log.resolve()}")
            if self.pps_log:
                args.append(f"+dut_pps_log={self.pps_log.resolve()}")
            if self.async_source_cycles:
                args.append(f"+async_source_cycles={self.async_source_cycles}")
            if self.edge_phase_seed is not None:
                args.append(f"+edge_phase_seed={int(self.edge_phase_seed)}")
            if self.edge_phase_log:
                args.append(f"+edge_phase_log={self.edge_phase_log.resolve()}")
            if self.tdc_source_ticks:
                args.append(f"+tdc_source_ticks={int(self.tdc_source_ticks)}")
            self.stderr = open(self.run_dir / "sim.log", "w")
            # A process group of its own, stopped whole by stop(), and killed by the kernel if we die
            # (hilat.shutdown): no simulator outlives the process that started it.
            self.process = subprocess.Popen(args, cwd=self.run_dir, stdin=subprocess.DEVNULL,
                                            stdout=self.stderr, stderr=subprocess.STDOUT,
                                            **shutdown.child_options())
            started = False
            try:
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline:
                    if self.process.poll() is not None:
                        break
                    if _listening(self.port):  # no probe connection: the first client is the user's
                        if self.ethernet:      # made by the module at start-up, before the TCP port
                            from targets import netns

                            netns.wait_for_interface(ETH_TAP, max(1, deadline - time.monotonic()), self.process)
                        started = True
                        return self
                    time.sleep(0.05)
            finally:
                if not started:
                    self.stop()   # failed, or interrupted while starting (no __exit__ then)
            log = (self.run_dir / "sim.log").read_text(errors="replace")
            if "bind" in log.lower():  # port taken meanwhile: pick another one
                self.port = free_port()
                continue
            raise RuntimeError(f"simulator did not start: {log[-2000:]}")
        raise RuntimeError("simulator could not bind a TCP port")

    def _sim_config(self, port):
        return _sim_config(port, self.samples_per_tick, self.edge_clock_high_ps, bool(self.async_source_cycles),
                           bool(self.dut_cpu), self.dut_cpu_clk_hz, self.ethernet)

    def stop(self):
        if self.process:
            shutdown.stop_child(self.process, timeout=5)
        if getattr(self, "stderr", None):
            self.stderr.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description="hilat simulated rig (Verilator)")
    parser.add_argument("--build", action="store_true", help="build (or reuse) the simulator")
    parser.add_argument("--rebuild", action="store_true", help="build even if a cached build exists")
    parser.add_argument("--run", action="store_true", help="run the simulator until interrupted")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: pick a free one)")
    parser.add_argument("--dut-model", default=str(DEFAULT_DUT), help="Verilog file of the DUT model")
    parser.add_argument("--dut-top", default="hilat_dut_model", help="module name of the DUT model")
    parser.add_argument("--dut", action="append", default=[], metavar="NAME=VALUE",
                        help="DUT model setting, e.g. --dut isr_base=80 (repeatable)")
    parser.add_argument("--samples-per-tick", type=int, choices=(1, 2, 4), default=1,
                        help="samples of each input a tick (sub-tick timestamps; the DUT model then runs "
                             "that many times faster than ts, its settings in sub-ticks)")
    parser.add_argument("--trace", action="store_true", help="a build that writes every signal to sim.vcd (slower)")
    parser.add_argument("--ethernet", action="store_true",
                        help="the rig's Ethernet link (GMII model + TAP interface: --run needs a network namespace)")
    args = parser.parse_args(argv)
    if not (args.build or args.run or args.rebuild):
        parser.error("nothing to do: give --build and/or --run")
    sim_dir = build(dut_model=args.dut_model, dut_top=args.dut_top, force=args.rebuild,
                    samples_per_tick=args.samples_per_tick, trace=args.trace, ethernet=args.ethernet)
    print(json.dumps({"sim_dir": str(sim_dir)}))
    if args.run:
        dut_args = dict(kv.split("=", 1) for kv in args.dut)
        rig = SimulatedRig(sim_dir, sim_dir / "run", port=args.port or None, dut_args=dut_args)
        with rig:
            print(rig.url, flush=True)
            try:
                rig.process.wait()
            except KeyboardInterrupt:
                pass


if __name__ == "__main__":
    main()
