"""The seeds' experiments on real CPUs as simulated DUTs (docs/dut-benchmarks.md): each runs the
simulated rig with a CPU DUT and one of the DUT firmware's experiments (firmware/dut/experiments.c)
and ends in the table its paper used.

    python -m targets.dut.experiments ssc --cpu vexriscv      # interrupt service / task response
    python -m targets.dut.experiments faller                  # ... without and with the DMA stand-in
    python -m targets.dut.experiments sacha                   # send/receive, signal, semaphore, yield
    python -m targets.dut.experiments realfeel --count 20000  # worst case, log-log histogram
    python -m targets.dut.experiments realstone               # pipeline deadlines missed
    python -m targets.dut.experiments cpus                    # make demo-cpus: a row per CPU

Every stimulus experiment also cross-checks the rig against the firmware's own cycle counts
(``cross_check``): for every sample, the rig's ISR duration and ISR -> task time equal the
firmware's, in DUT cycles, plus one constant each.
"""

import argparse
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings
from hilat.statistics.percentiles import exact_percentile

from targets import sim
from targets.dut import cpu_soc
from targets.dut.clock_check import clock_cross_check, most_common

TICKS_PER_CYCLE = sim.TS_CLK_FREQ // sim.DUT_CPU_CLK_FREQ
NS_PER_TICK = 1e9 / sim.TS_CLK_FREQ

# Stimulus periods in ticks per CPU, (response, pipeline): long enough for the CPU to answer and
# print each sample before the next, with a margin (measured: VexRiscv takes about 1,500 cycles a
# sample and its pipeline 4,000-5,500; PicoRV32, with CPI about 4 and no cache, about 5,000 a
# sample). A CPU that falls behind makes its console lag the stimuli, which the cross-check reports.
PERIODS = {
    "vexriscv":      (8000, 24000),
    "vexriscv_full": (8000, 24000),
    "vexriscv_lite": (16000, 48000),
    "vexriscv_min":  (30000, 90000),
    "picorv32":      (30000, 90000),
}
RESPONSE_PERIOD, PIPELINE_PERIOD = PERIODS["vexriscv"]

# Sacha's operations: each between two pin edges no other uses (experiments.c, EXPERIMENT_IPC).
IPC_MEASURES = {
    "send_to_receive":   "in2:rise..task:rise",
    "signal_to_handler": "in2:fall..task:fall",
    "semaphore_handoff": "tag:rise..isr:rise",
    "yield_to_other":    "tag:fall..isr:fall",
}
IPC_TITLES = {"send_to_receive": "send -> receive", "signal_to_handler": "signal -> handler",
              "semaphore_handoff": "semaphore handoff", "yield_to_other": "yield -> other task"}

_CONSOLE_LINE = re.compile(r"irq (\S+) isr_cycles (\S+) task_cycles (\S+) entry (\S+)")
CONSOLE_COLUMNS = ("index", "isr_cycles", "task_cycles", "entry")


def read_console(path):
    """The firmware's samples, one row per stimulus, from its console (its banner and warm-up lines
    skipped): CONSOLE_COLUMNS, in DUT cycles; ``entry`` is the counter's value (its low 32 bits) at the
    handler's first read, the others as their names say."""
    rows = [tuple(int(x, 0) for x in m.groups())
            for m in map(_CONSOLE_LINE.fullmatch, Path(path).read_text().splitlines()) if m]
    return np.array(rows, dtype=np.int64).reshape(-1, len(CONSOLE_COLUMNS))


@dataclass
class CrossCheck:
    samples: int            # stimuli the rig paired
    isr_constant: int       # rig ISR duration - firmware isr_cycles x ticks per cycle, in ticks
    task_constant: int      # rig ISR -> task - firmware task_cycles x ticks per cycle, in ticks
    mismatches: int         # samples where either differs from its constant, or one side lacks it

    def describe(self):
        return (f"cross-check: {self.samples} samples, rig = firmware x {TICKS_PER_CYCLE} ticks + {self.isr_constant} "
                f"(ISR duration), + {self.task_constant} (ISR -> task); mismatches {self.mismatches}")


def cross_check(pairing, console_rows):
    """The rig's figures against the firmware's own for the same stimuli (in order: the n-th console
    sample is the n-th stimulus). The constants are the ones most samples show."""
    n = min(len(pairing), len(console_rows))
    missing = abs(len(pairing) - len(console_rows))
    if not n:
        return CrossCheck(len(pairing), 0, 0, missing)
    isr = pairing.isr_duration[:n] - TICKS_PER_CYCLE * console_rows[:n, 1]
    task = pairing.isr_to_task[:n] - TICKS_PER_CYCLE * console_rows[:n, 2]
    answered = (pairing.isr_duration[:n] >= 0) & (pairing.isr_to_task[:n] >= 0)
    isr_constant, task_constant = (most_common(v[answered]) for v in (isr, task))
    # The n-th line must be the n-th stimulus's: a console that skipped or repeated one (a DUT that
    # restarted) mismatches from there on.
    out_of_order = console_rows[:n, 0] != np.arange(1, n + 1)
    bad = ~answered | out_of_order | (isr != isr_constant) | (task != task_constant)
    return CrossCheck(len(pairing), isr_constant, task_constant, int(bad.sum()) + missing)


@dataclass
class Result:
    cpu: str
    label: str
    capture: object
    console: Path
    check: object          # CrossCheck (the default clock) or clock_check.ClockCheck; None without stimuli
    dut_hz: int = sim.DUT_CPU_CLK_FREQ

    def cycles(self, ticks):
        """Rig ticks in DUT cycles (exact at the default clock, 2 ticks a cycle)."""
        return ticks * self.dut_hz / sim.TS_CLK_FREQ


def run(sim_dir, work, cpu, firmware, *, count, period=None, jitter=None, mode="dither",
        measures=None, no_stimulus=False, seed=1, dut_hz=None):
    """One capture of ``firmware`` (a ROM image of cpu_soc.FIRMWARE_IMAGES) on the simulated rig;
    ``period`` in ticks, by default the CPU's (PERIODS) for the image; ``dut_hz`` the DUT's clock
    (default sim.DUT_CPU_CLK_FREQ, 2 ticks a cycle, checked by ``cross_check``; any other is unrelated
    to the rig's, checked through its edges' schedule by clock_check)."""
    work = Path(work)
    if period is None:
        period = PERIODS[cpu][1 if firmware == "pipeline" else 0]
    label = f"{cpu}-{firmware}"
    console = work / f"{label}.console.txt"
    settings = CaptureSettings(
        count=count, out_dir=work / "runs", progress=False, label=label, no_stimulus=no_stimulus,
        measures=[f"{name}={spec}" for name, spec in (measures or {}).items()],
        stimulus=StimulusSettings(mode=mode, period=period, jitter=period // 4 if jitter is None else jitter,
                                  seed=seed))
    with sim.SimulatedRig(sim_dir, work / f"sim-{label}", dut_args={"console": console},
                          dut_firmware=firmware, dut_cpu_clk_hz=dut_hz) as rig:
        capture = Capture(rig.url, settings).run()
    if capture.error:
        raise RuntimeError(f"{label}: capture failed: {capture.error}")
    dut_hz = dut_hz or sim.DUT_CPU_CLK_FREQ
    check = None
    if not no_stimulus and dut_hz == sim.DUT_CPU_CLK_FREQ:
        check = cross_check(capture.pairing(), read_console(console))
    elif not no_stimulus:   # a clock unrelated to the rig's: each pin event through the clock's schedule
        check = clock_cross_check(capture.pairing(), read_console(console), dut_hz)
    return Result(cpu, label, capture, console, check, dut_hz)


# ---- tables -----------------------------------------------------------------------------------

def _stats(ticks):
    v = np.asarray(ticks)
    v = v[v >= 0]
    if not len(v):
        return None
    # The median as every hilat figure states it: p50, the inverted CDF (docs/analysis.md, "One median").
    return v.min(), float(exact_percentile(np.sort(v), 0.5)), float(v.mean()), v.max()


def _cycles_us(result, ticks):
    return f"{result.cycles(ticks):.6g} cyc {ticks * NS_PER_TICK / 1000:.2f} us"


def table(head, rows):
    """A plain text table: columns right-aligned but the first."""
    cells = [head] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]

    def line(r):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths)] + [line(r) for r in cells[1:]])


def min_med_max(result, ticks):
    """Min, median, max of ``ticks``, each as DUT cycles / ns."""
    s = _stats(ticks)
    if s is None:
        return ["-", "-", "-"]
    return [f"{result.cycles(s[i]):.6g} / {s[i] * NS_PER_TICK:.0f}" for i in (0, 1, 3)]


def ssc_table(results):
    """SSC: interrupt-service response (stimulus -> first handler instruction's pin write) and
    interrupt-task response (stimulus -> the woken task's pin), min / average / max."""
    rows = []
    for r in results:
        p = r.capture.pairing()
        for name, ticks in (("interrupt service response", p.isr_latency), ("interrupt task response", p.task_latency)):
            s = _stats(ticks)
            rows.append([r.cpu, name] + [f"{r.cycles(x):.6g} / {x * NS_PER_TICK / 1000:.2f}"
                                         for x in (s[0], s[2], s[3])])
    return table(["cpu", "response (DUT cycles / us)", "min", "average", "max"], rows)


def faller_table(pairs):
    """Faller: stimulus -> ISR and -> task, without and with the DMA stand-in (interrupts masked for a
    set number of cycles, tag pin high), min / median / max in DUT cycles."""
    rows = []
    for quiet, dma in pairs:
        pq, pd = quiet.capture.pairing(), dma.capture.pairing()
        rows.append([quiet.cpu] + min_med_max(quiet, pq.isr_latency) + min_med_max(dma, pd.isr_latency)
                    + min_med_max(quiet, pq.task_latency) + min_med_max(dma, pd.task_latency))
    head = ["cpu (DUT cycles / ns)", "ISR min", "med", "max", "ISR+DMA min", "med", "max",
            "task min", "med", "max", "task+DMA min", "med", "max"]
    return table(head, rows)


def sacha_table(results):
    """Sacha: the kernel's operations, task to task, min / average / max."""
    rows = []
    for r in results:
        ms = r.capture.measurements()
        for name in IPC_MEASURES:
            s = _stats(ms.latency(name))
            rows.append([r.cpu, IPC_TITLES[name]] + (["-"] * 3 if s is None else
                        [_cycles_us(r, s[0]), _cycles_us(r, s[2]), _cycles_us(r, s[3])]))
    return table(["cpu", "operation", "min", "average", "max"], rows)


BINS_PER_OCTAVE = 8


def realfeel_table(result):
    """Realfeel: the worst case, and the histogram in log-spaced bins (a log-log plot's points)."""
    v = np.asarray(result.capture.pairing().task_latency)
    answered = v[v >= 0]
    cycles = result.cycles(answered)
    # Eight bins an octave: equal widths on the log axis of Realfeel's log-log plot.
    lo, hi = np.log2(max(cycles.min(), 1)), np.log2(cycles.max() + 1)
    edges = 2 ** (np.arange(int(np.floor(lo * BINS_PER_OCTAVE)), int(np.ceil(hi * BINS_PER_OCTAVE)) + 1)
                  / BINS_PER_OCTAVE)
    counts, _ = np.histogram(cycles, bins=edges)
    us_per_cycle = 1e6 / result.dut_hz
    rows = [[f"{a:.1f} .. {b:.1f}", f"{a * us_per_cycle:.2f} .. {b * us_per_cycle:.2f}", c]
            for a, b, c in zip(edges[:-1], edges[1:], counts)]
    head = (f"{result.cpu}: {len(v)} periodic stimuli, stimulus -> task worst case "
            f"{_cycles_us(result, answered.max())}, "
            f"unanswered {int((v < 0).sum())}\n")
    return head + table(["DUT cycles", "us", "samples"], rows)


def realstone_table(result, deadlines_us):
    """REAL/STONE: the share of the pipeline's responses later than each deadline (or missing)."""
    v = np.asarray(result.capture.pairing().task_latency)
    rows = []
    for d in deadlines_us:
        late = int(((v < 0) | (v * NS_PER_TICK > d * 1000)).sum())
        rows.append([f"{d:g} us", len(v), late, f"{100 * late / len(v):.1f} %"])
    return f"{result.cpu}: stimulus -> end of a three-task pipeline\n" + table(
        ["deadline", "samples", "missed", "share missed"], rows)


# ---- commands ---------------------------------------------------------------------------------

def _sim(cpu):
    return sim.build(dut_cpu=cpu)


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="the seeds' experiments on simulated CPU DUTs (docs/dut-benchmarks.md)")
    parser.add_argument("experiment", choices=("ssc", "faller", "sacha", "realfeel", "realstone", "cpus"))
    parser.add_argument("--cpu", action="append", choices=sorted(cpu_soc.CPUS),
                        help="the DUT's CPU (repeatable; default: every one for cpus, else vexriscv)")
    parser.add_argument("--count", type=int, default=None, help="stimuli (or IPC rounds) per capture")
    parser.add_argument("--deadline", type=float, action="append", metavar="US",
                        help="realstone: a deadline in us (repeatable; default 160, 180, 200, 240)")
    parser.add_argument("--dut-clock", type=int, default=sim.DUT_CPU_CLK_FREQ, metavar="HZ",
                        help="the DUT's clock in whole Hz (default 25000000, 2 ticks a cycle; any other, e.g. "
                             "31415927, is unrelated to the rig's, and the cross-check follows its edges)")
    parser.add_argument("--work", type=Path, default=None, help="directory for the runs (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.count is not None and args.count < 1:
        parser.error("--count must be at least 1")
    try:
        sim.check_clock_settings(1, dut_cpu=True, dut_cpu_clk_hz=args.dut_clock)
    except ValueError as e:
        parser.error(f"--dut-clock: {e}")
    cpus = args.cpu or (sorted(cpu_soc.CPUS) if args.experiment == "cpus" else ["vexriscv"])
    work = args.work or Path(tempfile.mkdtemp(prefix="hilat-dut-"))
    _log(f"runs in {work}")
    mismatches = 0
    stimuli = 0

    def run_at_clock(*a, **kw):
        return run(*a, dut_hz=args.dut_clock, **kw)

    def checked(result):
        nonlocal mismatches, stimuli
        if result.check:
            _log(f"{result.label}: {result.check.describe()}")
            mismatches += result.check.mismatches
            stimuli += result.check.samples
        return result

    if args.experiment == "ssc":
        results = [checked(run_at_clock(_sim(c), work, c, "response", count=args.count or 500)) for c in cpus]
        print(ssc_table(results))
    elif args.experiment == "faller":
        pairs = [(checked(run_at_clock(_sim(c), work, c, "response", count=args.count or 500)),
                  checked(run_at_clock(_sim(c), work, c, "response-dma", count=args.count or 500))) for c in cpus]
        print(faller_table(pairs))
    elif args.experiment == "sacha":
        results = [run_at_clock(_sim(c), work, c, "ipc", count=args.count or 200, no_stimulus=True,
                                measures=IPC_MEASURES) for c in cpus]
        print(sacha_table(results))
    elif args.experiment == "realfeel":
        for c in cpus:
            print(realfeel_table(checked(run_at_clock(_sim(c), work, c, "response-dma", count=args.count or 5000,
                                             mode="periodic", jitter=0))))
    elif args.experiment == "realstone":
        for c in cpus:
            print(realstone_table(checked(run_at_clock(_sim(c), work, c, "pipeline", count=args.count or 500)),
                                  args.deadline or [160, 180, 200, 240]))
    else:
        count = args.count or 300
        pairs, ipc = [], []
        for c in cpus:
            sim_dir = _sim(c)
            pairs.append((checked(run_at_clock(sim_dir, work, c, "response", count=count)),
                          checked(run_at_clock(sim_dir, work, c, "response-dma", count=count))))
            ipc.append(run_at_clock(sim_dir, work, c, "ipc", count=count, no_stimulus=True, measures=IPC_MEASURES))
        print(faller_table(pairs))
        print()
        print(sacha_table(ipc))
        print()
        print(f"dut cpus: {len(cpus)} cpus, {stimuli} stimuli, cross-check mismatches {mismatches}")
        return 1 if mismatches else 0
    if stimuli:
        print(f"\ncross-check mismatches {mismatches} over {stimuli} stimuli")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
