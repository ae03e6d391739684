"""The TDC front end (gateware/tdc.py) on Verilator with its simulation line: edges at known phases
through the thermometer model give, to the bin, the code a table of tap arrival times predicts, at
the declared latency, rising and falling, bubbles and zero-width bins included.

Two tables: the Colorlight i5 build's (targets/tdc/taps_colorlight_i5.json, nextpnr's typical corner:
every second tap out of order, a line longer than a tick) at a 7,142 ps tick, and a made-up one of 64
taps with zero-width bins and a bubble of three taps at a 2,000 ps tick. Every tap arrival is visited
from both sides (the edge's age at the sampling edge 1 ps short of it and at it), plus edges too late
in their tick to reach any tap (seen a tick later, with the code of a tick and a bit), plus random
phases. The expected code is computed here from the table alone. And the readout of a --tdc board
build (TDCBank's CSRs, ts to sys) in Migen's simulator with unequal clocks.
"""

import json
import os
import random
from pathlib import Path

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TOPLEVEL = "hilat_tdc_model"


def _synthetic_table():
    taps = [300 + 35 * k for k in range(64)]
    taps[11] = taps[10]                            # a zero-width bin
    taps[21] = taps[22] = taps[20]                 # two more in a row
    taps[30], taps[31] = taps[31], taps[30]        # a swapped pair
    taps[44] = taps[47] + 5                        # a tap later than the three after it
    return taps


def _tables():
    i5 = json.loads((ROOT / "targets" / "tdc" / "taps_colorlight_i5.json").read_text())
    return {"i5": (i5["taps_ps"], 7_142), "synthetic": (_synthetic_table(), 2_000)}


def expected_code(taps, tick, phase, code_bits):
    """(ticks late, code) of an edge ``phase`` ps into its tick: the taps it passed before the tick's
    closing clock edge, or, when it passed none, before the next one (one tick late)."""
    since = tick - phase
    passed = sum(t < since for t in taps)
    late = 0
    if passed == 0:
        late, passed = 1, sum(t < since + tick for t in taps)
    return late, min(passed, 2**code_bits - 1)


def _phases(taps, tick, rng):
    """Phases (ps after the tick's opening edge, 1 .. tick) visiting every tap arrival from both sides,
    late edges, and random ones."""
    ages = set()
    for t in taps:
        for age in (t, t + 1):
            if 0 <= age < tick:
                ages.add(age)
            if 0 <= age - tick < min(taps):   # reached only a tick later
                ages.add(age - tick)
    ages |= {0, 1, min(taps) - 1}
    ages |= {rng.randrange(tick) for _ in range(60)}
    phases = [tick - a for a in sorted(ages)]
    rng.shuffle(phases)
    return phases


@cocotb.test()
async def codes_exact_to_the_bin(dut):
    info = json.loads(Path(os.environ["HILAT_TDC_INFO"]).read_text())
    taps, tick, latency, code_bits = info["taps"], info["tick_ps"], info["latency"], info["code_bits"]
    cocotb.start_soon(Clock(dut.ts_clk, tick, unit="ps").start())
    dut.pin.value = 0
    dut.phase_ps.value = 0
    await ClockCycles(dut.ts_clk, 4)

    rng = random.Random(35)
    phases = _phases(taps, tick, rng)
    schedule, expected = {}, []
    t, level = 10, 0
    for p in phases:
        level ^= 1
        schedule[t] = (level, p)
        late, code = expected_code(taps, tick, p, code_bits)
        expected.append((t + late + latency, level, code))
        t += rng.randint(3, 6)      # the line settles within 2 ticks of a change (3 at the i5's table)
    horizon = t + latency + 4

    got = []
    for n in range(horizon):
        await FallingEdge(dut.ts_clk)          # the outputs registered at clock edge n
        if int(dut.edge_out.value):
            got.append((n, int(dut.rising.value), int(dut.code.value)))
        if n in schedule:
            level_n, p = schedule[n]
            dut.pin.value = level_n
            dut.phase_ps.value = p
    assert got == expected, next((g, e) for g, e in zip(got, expected) if g != e) if len(got) == len(expected) \
        else (len(got), len(expected))

    codes = {c for *_, c in expected}
    assert len(expected) >= 100 and len(codes) >= len(set(taps)) // 2, (len(expected), len(codes))
    # Bubbles: edges whose age at the sampling edge lies between two taps out of order.
    bubbles = sum(any(taps[k + 1] < tick - p <= taps[k] for k in range(len(taps) - 1)) for p in phases)
    assert bubbles >= 2, "no edge landed inside a bubble"
    if len(set(taps)) < len(taps):
        assert any(expected_code(taps, tick, p, code_bits)[1] - expected_code(taps, tick, p + 1, code_bits)[1] >= 2
                   for p in range(1, tick)), "no code skipped by a zero-width bin"


def _top(taps, tick):
    from migen import ClockDomain, Module, Signal

    from gateware.tdc import TDC

    m = Module()
    m.clock_domains.cd_ts = ClockDomain("ts", reset_less=True)
    m.pin = Signal(name="pin")
    m.submodules.tdc = tdc = TDC(m.pin, line="model", taps_ps=taps, tick_ps=tick, n_taps=len(taps))
    m.ios = {m.cd_ts.clk, m.pin, tdc.phase_ps, tdc.code, tdc.edge, tdc.rising}
    return m, tdc


@pytest.mark.parametrize("table", ["i5", "synthetic"])
def test_tdc(table):
    from migen.fhdl.verilog import convert
    from tb import run_tests, verilator_build

    taps, tick = _tables()[table]
    build_dir = HERE / "sim_build" / f"tdc_{table}"
    build_dir.mkdir(parents=True, exist_ok=True)
    top, tdc = _top(taps, tick)
    assert tdc.code_bits == (len(taps) - 1).bit_length()
    names = {top.cd_ts.clk: "ts_clk", tdc.phase_ps: "phase_ps", tdc.code: "code", tdc.edge: "edge_out",
             tdc.rising: "rising"}
    for signal, name in names.items():
        signal.name_override = name
    verilog = build_dir / f"{TOPLEVEL}.v"
    convert(top, ios=top.ios, name=TOPLEVEL).write(str(verilog))
    info = build_dir / "tdc.json"
    info.write_text(json.dumps({"taps": [int(round(t)) for t in taps], "tick_ps": tick, "latency": tdc.latency,
                                "code_bits": tdc.code_bits}))
    runner = verilator_build(verilog, TOPLEVEL, build_dir)
    run_tests(runner, TOPLEVEL, build_dir, __file__, {"HILAT_TDC_INFO": str(info)}, f"the {table} table")


def test_readout_across_clocks():
    """TDCBank's readout (the CSR a --tdc board build has) in Migen's simulator, ts and sys unequal: after
    each edge on either of two inputs, sys reads that input's code, direction and edge count; the other
    input's word does not move."""
    from migen import ClockDomain, Module, Signal, run_simulation

    from gateware.tdc import TDCBank

    taps, tick = [100 + 60 * k for k in range(16)], 1_000
    m = Module()
    m.clock_domains.cd_ts = ClockDomain("ts", reset_less=True)
    m.clock_domains.cd_sys = ClockDomain("sys", reset_less=True)
    pins = [Signal(), Signal()]
    m.submodules.bank = bank = TDCBank(pins, "LFE5U-25F", n_taps=len(taps), taps_ps=taps, tick_ps=tick)
    code_bits = bank.code_bits
    edges = [(0, 1, 250), (1, 1, 900), (0, 0, 600), (1, 0, 40), (0, 1, 1000)]   # (input, level, phase)
    reads = []

    def drive():
        for _ in range(5):
            yield
        for i, level, phase in edges:
            yield pins[i].eq(level)
            yield bank.tdcs[i].phase_ps.eq(phase)
            for _ in range(12):     # the line settles, the encoder and the readout catch up
                yield

    def read():
        for _ in range(5 + 12 * len(edges) * 2):
            yield
            words = []
            for i in range(2):
                words.append((yield getattr(bank, f"last{i}").status))
            reads.append(words)

    run_simulation(m, {"ts": drive(), "sys": read()}, clocks={"ts": 10, "sys": 17})
    count = [0, 0]
    expected = []
    for i, level, phase in edges:
        count[i] += 1
        _late, code = expected_code(taps, tick, phase, code_bits)
        expected.append((i, code, level, count[i]))
    # The distinct words sys saw, in order, per input.
    seen = {0: [], 1: []}
    for words in reads:
        for i, w in enumerate(words):
            decoded = (w & 0xFF, (w >> 8) & 1, w >> 16)      # code, rising, edge count (docs/tdc.md)
            if w and (not seen[i] or seen[i][-1] != decoded):
                seen[i].append(decoded)
    for i in range(2):
        assert seen[i] == [(code, level, n) for j, code, level, n in expected if j == i], (i, seen[i])
    # Codes across the line; late edges (seen a tick later) and a full line (saturated at 15) among them.
    assert {code for _, code, _, _ in expected} == {5, 11, 15}
    assert sum(expected_code(taps, tick, phase, code_bits)[0] for _, _, phase in edges) == 2


def test_capture_records_codes():
    """EdgeCapture with TDCs on two of three inputs (the model line, 16 taps), in Migen's simulator with
    ts and sys unequal: every edge's record carries, in its input's 8 bits of the fraction, the code
    the table predicts for its phase (0 on inputs without an edge), its timestamp names the tick the
    pin changed in (a late edge: the tick after), and a stimulus pin, a TDC input and the input
    without a TDC changing in the same tick share one record (the channels aligned to the TDCs'
    latency)."""
    from migen import ClockDomain, Module, Signal, run_simulation

    from gateware.capture import EdgeCapture
    from gateware.tdc import TDCInputs
    from gateware.timebase import Timebase

    taps, tick = [100 + 60 * k for k in range(16)], 1_000
    m = Module()
    m.clock_domains.cd_ts = ClockDomain("ts")
    m.clock_domains.cd_sys = ClockDomain("sys")
    stim, pins = Signal(), [Signal(), Signal(), Signal()]
    m.submodules.timebase = timebase = Timebase("ts", with_csr=False)
    tdc = TDCInputs(2, taps_ps=taps, tick_ps=tick)
    m.submodules.capture = capture = EdgeCapture(timebase, pins, internal=[stim], glitch_max=0,
                                                 with_csr=False, tdc=tdc)
    assert len(capture.source.fraction) == 16 and capture.PIN_TO_STAMP_DELAY >= tdc.tdcs[0].latency
    # (tick the pins change in, {pin: (level, phase)}, stimulus level or None)
    steps = [(40, {0: (1, 250)}, None), (60, {1: (1, 999)}, None), (80, {0: (0, 600), 2: (1, 1)}, 1),
             (100, {0: (1, 1000), 1: (0, 10)}, 0), (120, {2: (0, 1)}, None)]
    records, changed_at = [], {}

    def drive():
        for t in range(160):
            now = yield timebase.ts
            for at, changes, stimulus in steps:
                if t == at:
                    changed_at[at] = now + 1    # a generator's writes take effect at the next clock edge
                    for i, (level, phase) in changes.items():
                        yield pins[i].eq(level)
                        if i < 2:
                            yield tdc.tdcs[i].phase_ps.eq(phase)
                    if stimulus is not None:
                        yield stim.eq(stimulus)
            yield

    def read():
        for s in capture.settings:
            yield s.enable.eq(1)
        yield capture.commit.eq(1)
        yield
        yield capture.commit.eq(0)
        yield capture.source.ready.eq(1)
        for _ in range(300):
            yield
            if (yield capture.source.valid):
                records.append(((yield capture.source.timestamp), (yield capture.source.channels),
                                (yield capture.source.levels), (yield capture.source.fraction)))

    run_simulation(m, {"ts": drive(), "sys": read()}, clocks={"ts": 10, "sys": 17})
    expected = []
    for at, changes, stimulus in steps:
        late = {i: expected_code(taps, tick, phase, 4)[0] for i, (_level, phase) in changes.items() if i < 2}
        for shift in sorted(set([0] + [1 for i in late if late[i]])):
            channels, fraction = 0, 0
            for i, (_level, phase) in changes.items():
                if i < 2:
                    is_late, code = expected_code(taps, tick, phase, 4)
                    if is_late != shift:
                        continue
                    fraction |= code << (8 * i)
                elif shift:
                    continue
                channels |= 1 << (1 + i)
            if stimulus is not None and not shift:
                channels |= 1
            if channels:
                expected.append((changed_at[at] + shift, channels, fraction))
    assert [(ts, ch, fr) for ts, ch, _levels, fr in records] == expected, records
    # The levels after the last record: the pins as last driven (input 0 high; the stimulus, inputs 1, 2 low).
    assert records[-1][2] == 0b0010
