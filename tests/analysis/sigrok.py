"""sigrok-cli (Debian's, installed by `make setup`) as the third-party reader of our VCD exports: the
edges it reads and what its `jitter` decoder measures, checked against the run itself."""

import re
import shutil
import subprocess

import numpy as np
from hilat import analysis
from hilat.reports import export


def sigrok_cli(*args):
    exe = shutil.which("sigrok-cli")
    assert exe, "sigrok-cli is not installed: run `make setup` (Debian package sigrok-cli)"
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, check=True, timeout=300).stdout


def sigrok_edges(vcd):
    """{channel name: [(sample, level), ...]}: every change sigrok reads from ``vcd``, written back out
    by sigrok's own VCD writer (one sample per unit of the input's timescale)."""
    text = sigrok_cli("-i", vcd, "-O", "vcd")
    names = dict(re.findall(r"\$var wire 1 (\S+) (\S+) \$end", text))
    body = text.partition("$enddefinitions $end")[2]
    edges = {name: [] for name in names.values()}
    initial = {}
    for line in body.splitlines():
        if not line.startswith("#"):
            continue
        stamp, *changes = line.split()
        sample = int(stamp[1:])
        for change in changes:
            level, ident = int(change[0]), change[1:]
            if sample == 0 and ident not in initial:
                initial[names[ident]] = level
            else:
                edges[names[ident]].append((sample, level))
    return initial, edges


def sigrok_jitter(vcd, clk, sig):
    """[(clock sample, signal sample)] of every measurement of sigrok's jitter decoder: from a rising
    edge of ``clk`` to the next rising edge of ``sig``."""
    text = sigrok_cli("-i", vcd, "-P", f"jitter:clk={clk}:sig={sig}", "-A", "jitter=jitter",
                      "--protocol-decoder-samplenum")
    return [(int(a), int(b)) for a, b in re.findall(r"^(\d+)-(\d+) jitter-1: ", text, re.M)]


def check_vcd_with_sigrok(run, vcd):
    """What sigrok reads from the run's VCD equals the run: per channel every edge of the run at
    its tick and level, the level before it, and, for every stimulus that does not follow a miss,
    the jitter decoder's stimulus -> ISR delay equals the pairing's latency. Returns the number of
    delays compared."""
    _, _, per_tick, exact = export.vcd_timescale(run.unit.mu_hz)
    assert exact, "sample numbers are exact only for an exact timescale"
    origin = int(run.ticks[0]) - 1
    initial, edges = sigrok_edges(vcd)
    rows = list(zip(run.ticks.tolist(), run.chans.tolist(), run.levels.tolist()))
    for ch in sorted({c for _, c, _ in rows}):
        name = run.roles.label(ch)
        expect = [((t - origin) * per_tick, lv) for t, c, lv in rows if c == ch]
        assert edges[name] == expect, f"{name}: sigrok reads {len(edges[name])} edges, the run has {len(expect)}"
        assert initial[name] == 1 - expect[0][1], f"{name}: level before the first edge"

    p = run.pairing
    stim_sample = (p.stim_mu - origin) * per_tick
    missed = p.isr_latency == analysis.MISSING
    after_miss = np.concatenate([[False], missed[:-1]])
    measured = {start: end - start for start, end in sigrok_jitter(vcd, "stim0", "isr")}
    compared = 0
    for k in range(len(p)):
        if after_miss[k]:
            continue  # the decoder still waits on the missed stimulus and measures from it
        if missed[k]:
            # No response before the next stimulus: sigrok measures from here to the next ISR edge,
            # which hilat gives the next stimulus (skipped above).
            continue
        start = int(stim_sample[k])
        assert start in measured, f"stimulus {k} at tick {p.stim_mu[k]}: no jitter measurement"
        # The pairing subtracts the calibrated rig offset; sigrok sees the raw edges.
        assert measured[start] == (int(p.isr_latency[k]) + run.offset_mu) * per_tick, f"stimulus {k}"
        compared += 1
    return compared
