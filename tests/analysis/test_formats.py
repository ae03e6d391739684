"""hilat.reports.formats against the readers of each format: OSADL's plot pipeline (cyclictest -h text), Linaro
test-definitions' rt-tests JSON parser and send-to-lava.sh rules, Java HdrHistogram's .hgrm output,
prometheus_client's parsers. Truths are computed apart: integer tick arithmetic, exact fractions.

Where ``HILAT_TEST_DEFINITIONS`` names a checkout of Linaro's test-definitions, its parser and
send-to-lava.sh also run as they are (skipped otherwise; nothing of theirs is kept here)."""

import json
import os
import re
import shutil
import subprocess
from decimal import Decimal
from email.utils import parsedate_to_datetime
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hilat import engine
from hilat.api import Stats, load
from hilat.reports import formats

TS_HZ = 150_000_000            # 6.67 ns ticks: whole microseconds are 150 ticks, not a float-exact tick
TICK_S = 1.0 / TS_HZ
ENGINE_OVERFLOW = engine.OVERFLOW_FROM

JAVA_SOURCE = Path(__file__).with_name("HgrmReference.java")
JAR = os.environ.get("HILAT_HDRHISTOGRAM_JAR", "/usr/share/java/hdrhistogram.jar")
needs_java = pytest.mark.skipif(shutil.which("java") is None or not os.path.exists(JAR),
                                reason=f"Java HdrHistogram not installed (java on PATH and {JAR}; "
                                       "Debian: default-jdk-headless libhdrhistogram-java)")
TEST_DEFINITIONS = os.environ.get("HILAT_TEST_DEFINITIONS")
needs_test_definitions = pytest.mark.skipif(
    not TEST_DEFINITIONS, reason="HILAT_TEST_DEFINITIONS (a checkout of Linaro's test-definitions) not set")


def whole_us(ticks):
    """Truth for cyclictest's truncation to microseconds: integer arithmetic."""
    return int(ticks) * 1_000_000 // TS_HZ


# Latencies in ticks: exact microsecond boundaries (150 ticks = 1 us), one tick either side, a tail.
ISR = np.array([0, 1, 149, 150, 151, 299, 300, 750, 750, 1499, 1500, 7500, 15_000, 150_000, 1_234_567],
               dtype=np.int64)
TASK = np.array([300, 449, 450, 451, 3000, 3001, 29_999], dtype=np.int64)


@pytest.fixture
def exact():
    # Windows a gap touched (unknown) are neither samples nor misses: stated apart in every format.
    return [Stats.exact("stim_to_isr", ISR, TICK_S, misses=2, unknown=3),
            Stats.exact("stim_to_task", TASK, TICK_S)]


def rig_values(n=20_000, seed=5, overflows=3):
    rng = np.random.default_rng(seed)
    v = rng.lognormal(np.log(9000), 0.9, n).astype(np.int64)
    v[:overflows] = ENGINE_OVERFLOW + np.arange(overflows) * 1000        # beyond the rig's bins
    v[overflows:overflows + 20] = rng.integers(0, 256, 20)              # the exact region
    return v


def rig_stats(kind, values, misses=0):
    """An on-rig-like Stats: the engine's bins (2 significant digits, overflow bin) and exact count,
    min, max and mean, no samples."""
    counts = np.bincount(engine.bin_of(values), minlength=engine.BINS)
    n = len(values)
    exact = {"count": n, "min": int(values.min()), "max": int(values.max()), "sum": int(values.sum())}
    return Stats.rig(kind, TICK_S, counts, exact, starts=n + misses, misses=misses)


def run_sh(script, cwd, env=None):
    done = subprocess.run(["sh", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout


# ---- cyclictest -h ---------------------------------------------------------------------------------------

def test_cyclictest_histogram_is_cyclictests_print_hist(exact):
    text = formats.cyclictest_histogram(exact, buckets_us=60)
    lines = text.split("\n")
    head = [ln for ln in lines if ln.startswith("# hilat:")]
    assert head[1].startswith("# hilat: column 1 (thread 0) = stim_to_isr:")
    assert "2 missed windows, 3 unknown windows" in head[1]
    assert head[2].startswith("# hilat: column 2 (thread 1) = stim_to_task:")
    start = lines.index("# Histogram") + 1
    rows = lines[start:start + 60]
    # cyclictest: "%06d " then "%06lu" counts joined by tabs
    for i, row in enumerate(rows):
        b, _, rest = row.partition(" ")
        assert b == f"{i:06d}" and all(len(c) == 6 for c in rest.split("\t")), row
    table = np.array([[int(c) for c in row.split(" ")[1].split("\t")] for row in rows])
    for col, values in enumerate((ISR, TASK)):
        us = [whole_us(v) for v in values]
        assert table[:, col].tolist() == [us.count(i) for i in range(60)]
    isr_us, task_us = [whole_us(v) for v in ISR], [whole_us(v) for v in TASK]
    over = (sum(u >= 60 for u in isr_us), sum(u >= 60 for u in task_us))
    assert over == (3, 1)
    tail = lines[start + 60:]
    assert tail[0] == f"# Total: {len(ISR) - over[0]:09d} {len(TASK) - over[1]:09d}"
    assert tail[1] == f"# Min Latencies: {min(isr_us):05d} {min(task_us):05d}"
    # cyclictest's Avg: the sum of truncated samples over the cycles, truncated
    assert tail[2] == f"# Avg Latencies: {sum(isr_us) // len(ISR):05d} {sum(task_us) // len(TASK):05d}"
    assert tail[3] == f"# Max Latencies: {max(isr_us):05d} {max(task_us):05d}" == "# Max Latencies: 08230 00199"
    assert tail[4] == "# Histogram Overflows: 00003 00001"
    assert tail[5:] == ["# Histogram Overflow at cycle number:", "# Thread 0: # 00003 others",
                        "# Thread 1: # 00001 others", "", ""]


def test_osadl_plot_pipeline_reads_every_column_and_the_max(exact, tmp_path):
    # OSADL's mklatencyplot.bash (osadl.org/uploads/media/mklatencyplot.bash), steps 2, 3 and 5, as it
    # runs them on cyclictest's output file.
    (tmp_path / "output").write_text(formats.cyclictest_histogram(exact))
    out = run_sh('max=`grep "Max Latencies" output | tr " " "\\n" | sort -n | tail -1 | sed s/^0*//`\n'
                 'echo "$max"\n'
                 'grep -v -e "^#" -e "^$" output | tr " " "\\t" >histogram\n'
                 'for i in 1 2; do column=`expr $i + 1`; cut -f1,$column histogram >histogram$i; done\n',
                 tmp_path)
    assert out.strip() == str(whole_us(ISR.max())) == "8230"
    size = whole_us(ISR.max()) + 1                       # default: up to the largest max, no overflow
    for i, values in ((1, ISR), (2, TASK)):
        rows = [ln.split("\t") for ln in (tmp_path / f"histogram{i}").read_text().splitlines()]
        assert len(rows) == size
        us = [whole_us(v) for v in values]
        assert [(int(b), int(c)) for b, c in rows] == [(b, us.count(b)) for b in range(size)]
    # rteval's cyclictest module (rteval/modules/measurement/cyclictest.py) skips '#' lines but the Max
    # line, whose numbers it takes after the colon, and splits data rows on blanks.
    text = (tmp_path / "output").read_text()
    (max_line,) = [ln for ln in text.splitlines() if ln.startswith("# Max Latencies: ")]
    assert [int(x) for x in max_line.split(":")[1].split()] == [whole_us(ISR.max()), whole_us(TASK.max())]
    rows = [ln.split() for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert [int(r[0]) for r in rows] == list(range(size)) and {len(r) for r in rows} == {3}


def test_cyclictest_histogram_of_an_on_rig_run_counts_buckets_at_their_highest_value():
    values = rig_values()
    st = rig_stats("stim_to_isr", values)
    assert st.values_mu() is None
    size = 300
    text = formats.cyclictest_histogram([st], buckets_us=size)
    lines = text.split("\n")
    start = lines.index("# Histogram") + 1
    got = [int(r.split(" ")[1]) for r in lines[start:start + size]]
    h = engine.engine_histogram()
    expected = [0] * size
    overflows = 0
    for v in values.tolist():
        if v >= ENGINE_OVERFLOW:
            overflows += 1
            continue
        at = min(max(h.highest_equivalent_value(v), int(values.min())), int(values.max()))
        if whole_us(at) < size:
            expected[whole_us(at)] += 1
        else:
            overflows += 1
    assert got == expected
    # The exact region (< 256 ticks: single-tick buckets) agrees with the samples themselves.
    small = [whole_us(v) for v in values if v < 256]
    assert got[0] == small.count(0) and got[1] == small.count(1)
    assert f"# Total: {sum(expected):09d}" in lines and sum(expected) + overflows == len(values)
    assert f"# Histogram Overflows: {overflows:05d}" in lines and overflows >= 3
    assert f"# Max Latencies: {whole_us(values.max()):05d}" in lines
    assert f"# Avg Latencies: {int(values.mean() * 1e6 / TS_HZ):05d}" in lines


# ---- rt-tests JSON ------------------------------------------------------------------------------------

def linaro_parse_rt_tests_results(rawdata, testname):
    """The reading logic of Linaro test-definitions' automated/lib/parse_rt_tests_results.py (MIT,
    Daniel Wagner), re-implemented: its result.txt lines for a parsed rt-tests JSON."""
    out = []
    if "num_threads" in rawdata:
        for tid in map(str, range(int(rawdata["num_threads"]))):
            data = rawdata["thread"][tid]
            data = data.get("receiver", data)
            out += [f"t{tid}-{key}-latency pass {data[key]} us" for key in ("min", "avg", "max")]
    if "num_irqs" in rawdata:
        for iid in map(str, range(int(rawdata["num_irqs"]))):
            out += [f"i{iid}-{key}-latency pass {rawdata['irq'][iid][key]} us" for key in ("min", "avg", "max")]
    elif "inversion" in rawdata:
        out.append(f"inversion pass {rawdata['inversion']} count\n")
    out.append(f"{testname} {'pass' if int(rawdata['return_code']) == 0 else 'fail'}")
    return out


def test_rt_tests_json_fields_are_rt_write_jsons_and_linaros_parser_reads_them(exact):
    doc = formats.rt_tests_json(exact, start_time=1_700_000_000, end_time=1_700_000_060, sysinfo={"machine": "ulx3s"})
    assert json.loads(formats.rt_tests_json_text(exact, start_time=1_700_000_000, end_time=1_700_000_060,
                                                 sysinfo={"machine": "ulx3s"})) == doc
    # rt_write_json's fields, in its order and spelling ("cmdline:" with the colon), then write_stats'
    assert list(doc)[:10] == ["file_version", "cmdline:", "rt_test_version:", "start_time", "end_time", "return_code",
                              "sysinfo", "num_threads", "resolution_in_ns", "thread"]
    assert doc["file_version"] == 1 and doc["resolution_in_ns"] == 0
    assert set(doc["sysinfo"]) == {"sysname", "nodename", "release", "version", "machine", "realtime"}
    assert doc["sysinfo"]["machine"] == "ulx3s"
    # RFC 2822, as rt-tests' strftime "%a, %d %b %Y %T %z"
    assert re.fullmatch(r"[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d [+-]\d{4}", doc["start_time"])
    assert parsedate_to_datetime(doc["start_time"]).timestamp() == 1_700_000_000
    assert parsedate_to_datetime(doc["end_time"]).timestamp() == 1_700_000_060
    assert doc["return_code"] == 1                                      # stim_to_isr missed windows
    assert (doc["num_threads"], doc["num_irqs"]) == (1, 1)
    assert doc["hilat"]["irq"] == {"0": "stim_to_isr"} and doc["hilat"]["thread"] == {"0": "stim_to_task"}
    # Misses and unknown windows apart, next to each other (unknown ones are in no bin and no cycle).
    assert doc["hilat"]["misses"] == {k.kind: k.misses for k in exact}
    assert doc["hilat"]["unknown"] == {k.kind: k.unknown for k in exact} == {"stim_to_isr": 3, "stim_to_task": 0}
    for entry, values in ((doc["irq"]["0"], ISR), (doc["thread"]["0"], TASK)):
        assert list(entry) == ["histogram", "cycles", "min", "max", "avg", "cpu", "node"]
        us = [whole_us(v) for v in values]
        assert entry["histogram"] == {str(u): us.count(u) for u in sorted(set(us))}
        assert (entry["cycles"], entry["min"], entry["max"]) == (len(values), min(us), max(us))
        assert abs(Fraction(entry["avg"]) - Fraction(sum(us), len(us))) <= Fraction(1, 200)
        assert len(repr(entry["avg"]).split(".")[1]) <= 2                # "%.2f"
        assert (entry["cpu"], entry["node"]) == (-1, -1)
    lines = linaro_parse_rt_tests_results(doc, "hilat")
    t, i = doc["thread"]["0"], doc["irq"]["0"]
    assert lines == [f"t0-min-latency pass {t['min']} us", f"t0-avg-latency pass {t['avg']} us",
                     f"t0-max-latency pass {t['max']} us", f"i0-min-latency pass {i['min']} us",
                     f"i0-avg-latency pass {i['avg']} us", f"i0-max-latency pass {i['max']} us", "hilat fail"]
    # Without misses the run passes; a kind absent from the list is an empty, counted-out entry.
    only_task = formats.rt_tests_json(exact[1:], start_time=0)
    assert only_task["return_code"] == 0 and only_task["num_irqs"] == 0 and only_task["irq"] == {}
    assert linaro_parse_rt_tests_results(only_task, "x")[-1] == "x pass"
    # Values beyond the histogram are in no bin (cyclictest's JSON has no overflow field), but in cycles/max.
    small = formats.rt_tests_json(exact, buckets_us=10, start_time=0)
    assert sum(small["irq"]["0"]["histogram"].values()) == sum(whole_us(v) < 10 for v in ISR)
    assert small["irq"]["0"]["cycles"] == len(ISR) and small["hilat"]["overflows"]["stim_to_isr"] == 5


@needs_test_definitions
def test_linaros_parse_rt_tests_results_as_it_is(exact, tmp_path):
    script = Path(TEST_DEFINITIONS) / "automated" / "lib" / "parse_rt_tests_results.py"
    path = tmp_path / "hilat.json"
    path.write_text(formats.rt_tests_json_text(exact, start_time=0))
    done = subprocess.run([shutil.which("python3") or "python3", str(script), "hilat", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == linaro_parse_rt_tests_results(json.loads(path.read_text()), "hilat")


# ---- HdrHistogram .hgrm -------------------------------------------------------------------------------

def hgrm_cases():
    rng = np.random.default_rng(11)
    wide = rng.lognormal(np.log(3000), 1.3, 50_000).astype(np.int64)
    wide[:40] = rng.integers(1 << 20, 1 << 36, 40)
    wide[40:50] = 0
    return {
        "small": Stats.exact("stim_to_isr", [3, 5, 5, 8, 13, 2000, 2047, 2048, 2049, 4097], TICK_S),
        "wide": Stats.exact("stim_to_task", wide, TICK_S),
        "single": Stats.exact("stim_to_isr", [12_345], TICK_S),
        "on_rig": rig_stats("stim_to_isr", rig_values()),
        "empty": Stats.exact("stim_to_isr", [], TICK_S),
    }


def java_hgrm(specs):
    done = subprocess.run(["java", "-cp", JAR, str(JAVA_SOURCE)], input="".join(f"{s}\n" for s in specs),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    parts = done.stdout.split("#END\n")
    assert parts[-1] == ""
    return parts[:-1]


@needs_java
def test_hgrm_is_java_hdrhistograms_output_byte_for_byte():
    cases = hgrm_cases()
    assert cases["on_rig"].histogram().significant_figures == 2
    specs, ours = [], []
    for st in cases.values():
        for per_half, ratio in ((5, None), (1, 1.0), (3, 1000.0)):
            h = st.histogram()
            java_ratio = 150.0 if ratio is None else ratio        # ticks per microsecond at 150 MHz
            specs.append(f"{per_half} {java_ratio!r} {h.encode_base64()}")
            ours.append(formats.hgrm(st, per_half, ratio))
    theirs = java_hgrm(specs)
    assert len(theirs) == len(ours)
    for spec, mine, java in zip(specs, ours, theirs):
        assert mine == java, spec[:20]
    assert ours[0].startswith("       Value     Percentile TotalCount 1/(1-Percentile)\n\n")


def test_hgrm_rows_and_footer():
    st = hgrm_cases()["small"]
    text = formats.hgrm(st)
    lines = text.splitlines()
    h = st.histogram()
    d = h.percentile_distribution(5)
    rows = lines[2:-3]
    assert len(rows) == len(d.value)
    for row, v, p, n in zip(rows, d.value.tolist(), d.percentile.tolist(), d.total_count.tolist()):
        f = row.split()
        assert Decimal(f[0]) == round(Decimal(v) / 150, 3) and Decimal(f[1]) == round(Decimal(repr(p)) / 100, 12)
        assert int(f[2]) == n and (len(f) == 3) == (p == 100.0)
    # 4097 ticks is in the bucket 4096..4099 (3 digits, width 4): Max is 4099 ticks, 27.3267 us
    assert lines[-2] == f"#[Max     = {'27.327':>12}, Total count    = {10:>12}]"
    assert lines[-1] == f"#[Buckets = {h.bucket_count:>12}, SubBuckets     = {2048:>12}]"
    mean = float(lines[-3].split("=")[1].split(",")[0])
    assert mean == pytest.approx(h.mean / 150, abs=5e-4)
    # Java's %f rounds the shortest decimal text half up: 0.125 -> 0.13 (C and Python: 0.12).
    assert formats._java_f(0.125, 2) == "0.13" and formats._java_f(1.005, 2) == "1.01"
    assert formats.hgrm(h) == formats.hgrm(st, unit_ratio=1.0)          # a bare histogram: ratio 1


# ---- Prometheus ---------------------------------------------------------------------------------------

def parse_prometheus(text):
    from prometheus_client.parser import text_string_to_metric_families

    return {f.name: f for f in text_string_to_metric_families(text)}


def le_truth(values, le):
    """Samples <= le seconds, in exact arithmetic (ticks / TS_HZ)."""
    bound = Fraction(repr(le))
    return sum(1 for v in values.tolist() if Fraction(v, TS_HZ) <= bound)


def test_default_buckets_are_a_1_2_5_ladder():
    b = formats.PROMETHEUS_BUCKETS_S
    assert b[:4] == (1e-07, 2e-07, 5e-07, 1e-06) and b[-2:] == (5.0, 10.0) and len(b) == 25
    assert all(Fraction(repr(x)) == Fraction(m) * Fraction(10) ** e for x, (m, e) in
               zip(b, [(m, e) for e in range(-7, 1) for m in (1, 2, 5)] + [(1, 1)]))


def test_prometheus_histograms_parse_and_count_samples_at_or_below_le(exact):
    text = formats.prometheus_text(exact, labels={"board": 'ulx3s "85F"'})
    fams = parse_prometheus(text)
    assert set(fams) == {"hilat_latency_seconds", "hilat_missed_windows", "hilat_unknown_windows"}
    hist, misses = fams["hilat_latency_seconds"], fams["hilat_missed_windows"]
    unknown = fams["hilat_unknown_windows"]
    assert (hist.type, misses.type, unknown.type) == ("histogram", "gauge", "gauge")
    for st, values in zip(exact, (ISR, TASK)):
        mine = [s for s in hist.samples if s.labels["kind"] == st.kind]
        assert all(s.labels["board"] == 'ulx3s "85F"' for s in mine)
        buckets = [(s.labels["le"], s.value) for s in mine if s.name.endswith("_bucket")]
        assert [le for le, _ in buckets[:-1]] == [repr(b) for b in formats.PROMETHEUS_BUCKETS_S]
        for le, n in buckets[:-1]:
            assert n == le_truth(values, float(le)), (st.kind, le)
        assert buckets[-1] == ("+Inf", len(values))
        (count,) = [s.value for s in mine if s.name.endswith("_count")]
        (total,) = [s.value for s in mine if s.name.endswith("_sum")]
        assert count == len(values)
        assert total == pytest.approx(float(Fraction(int(values.sum()), TS_HZ)), rel=1e-12)
        (missed,) = [s.value for s in misses.samples if s.labels["kind"] == st.kind]
        assert missed == st.misses
        (unknown_windows,) = [s.value for s in unknown.samples if s.labels["kind"] == st.kind]
        assert unknown_windows == st.unknown
    assert [st.unknown for st in exact] == [3, 0]
    # The boundary cases: 150 ticks is 1 us exactly, 151 above it.
    assert le_truth(ISR, 1e-06) == 4 and dict(
        (s.labels["le"], s.value) for s in hist.samples if s.labels["kind"] == "stim_to_isr"
        and s.name.endswith("_bucket"))["1e-06"] == 4
    # OpenMetrics' stricter parser (buckets ascending, cumulative, +Inf = _count) takes it too.
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om

    assert {f.name for f in om(text + "# EOF\n")} == set(fams)


def test_prometheus_custom_buckets_and_an_on_rig_run():
    values = rig_values()
    st = rig_stats("stim_to_isr", values, misses=7)
    bounds = [1e-6, 2e-5, 5e-5, 1e-4, 0.5]
    fams = parse_prometheus(formats.prometheus_text([st], buckets_s=bounds, metric="dut_latency_seconds"))
    samples = fams["dut_latency_seconds"].samples
    got = {s.labels["le"]: s.value for s in samples if s.name.endswith("_bucket")}
    h = engine.engine_histogram()
    at = [min(h.highest_equivalent_value(v), int(values.max())) for v in values.tolist() if v < ENGINE_OVERFLOW]
    for b in bounds:
        assert got[repr(b)] == le_truth(np.array(at), b), b          # each bucket at its highest value
    assert got["+Inf"] == len(values) and got[repr(0.5)] == len(values) - 3   # the overflow bin: +Inf only
    (total,) = [s.value for s in samples if s.name.endswith("_sum")]
    assert total == pytest.approx(float(values.sum()) / TS_HZ, rel=1e-12)
    assert fams["hilat_missed_windows"].samples[0].value == 7
    with pytest.raises(ValueError):
        formats.prometheus_text([st], labels={"le": "x"})
    with pytest.raises(ValueError):
        formats.prometheus_text([st], metric="bad name")


# ---- LAVA ---------------------------------------------------------------------------------------------

# Linaro test-definitions' automated/utils/send-to-lava.sh, its line rules re-implemented (the same
# grep -E patterns and awk fields; lava-test-case is whatever is first on PATH).
SEND_TO_LAVA_RULES = r"""
while read -r line; do
    if echo "${line}" | grep -iq -E ".* +(pass|fail|skip|unknown)$"; then
        lava-test-case "${line%% *}" --result "${line##* }"
    elif echo "${line}" | grep -iq -E ".*+ (pass|fail|skip|unknown)+ .*+"; then
        test="$(echo "${line}" | awk '{print $1}')"
        result="$(echo "${line}" | awk '{print $2}')"
        measurement="$(echo "${line}" | awk '{print $3}')"
        units="$(echo "${line}" | awk '{print $4}')"
        if [ -n "${units}" ]; then
            lava-test-case "${test}" --result "${result}" --measurement "${measurement}" --units "${units}"
        else
            lava-test-case "${test}" --result "${result}" --measurement "${measurement}"
        fi
    fi
done < result.txt
"""


def fake_lava_test_case(tmp_path):
    """A lava-test-case that records its arguments, one call a line (fields split by \\x1f)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "lava-test-case"
    tool.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\037" "$a"; done >> "$LAVA_CALLS"\n'
                    'echo >> "$LAVA_CALLS"\n')
    tool.chmod(0o755)
    calls = tmp_path / "calls"
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "LAVA_CALLS": str(calls)}, calls


def recorded_calls(calls):
    return [line.split("\x1f")[:-1] for line in calls.read_text().splitlines()]


def us_of(ticks):
    return Fraction(int(ticks) * 10**6, TS_HZ)


def assert_lava(lines, expected):
    """Lines as expected: (name, result, value in us or None, units); the value printed with 3 decimals,
    so within 0.0005 us of the exact one."""
    assert len(lines) == len(expected), lines
    for line, (name, result, value, units) in zip(lines, expected):
        f = line.split(" ")
        assert f[:2] == [name, result], line
        if value is None:
            assert len(f) == 2, line
        else:
            assert len(f) == 4 and f[3] == units, line
            assert len(f[2].split(".")[1]) == 3 if units == "us" else f[2].isdigit(), line
            assert abs(Fraction(f[2]) - value) <= Fraction(1, 2000), (line, float(value))


def expected_lava():
    isr, task = [us_of(v) for v in ISR], [us_of(v) for v in TASK]
    return [
        ("stim_to_isr-min-latency", "pass", min(isr), "us"),
        ("stim_to_isr-avg-latency", "pass", sum(isr) / len(isr), "us"),
        ("stim_to_isr-max-latency", "fail", max(isr), "us"),             # 8230.4 us > 5 ms
        ("stim_to_isr-misses", "fail", 2, "windows"),
        ("stim_to_isr-unknown", "pass", 3, "windows"),                   # a gap's windows: not misses
        ("stim_to_task-min-latency", "pass", min(task), "us"),
        ("stim_to_task-avg-latency", "pass", sum(task) / len(task), "us"),
        ("stim_to_task-max-latency", "pass", max(task), "us"),           # 199.99 us <= 200 us
        ("stim_to_task-misses", "pass", 0, "windows"),
        ("stim_to_task-unknown", "pass", 0, "windows"),
    ]


def check_lava_calls(lines, calls):
    """What lava-test-case received is each line's fields, and LAVA's dispatcher and database take it:
    a name without blanks <= 100 characters, a known result, a measurement float() parses that fits
    the results table's Decimal(30, 10), units <= 100 characters."""
    assert len(calls) == len(lines)
    for line, call in zip(lines, calls):
        f = line.split()
        assert call[:3] == [f[0], "--result", f[1]]
        assert f[1] in ("pass", "fail", "skip", "unknown") and len(f[0]) <= 100
        if len(f) > 2:
            assert call[3:] == ["--measurement", f[2], "--units", f[3]]
            value = Decimal(repr(float(f[2])))
            assert value == value.quantize(Decimal("1e-10")) and abs(value) < Decimal(10) ** 20
            assert len(f[3]) <= 100
        else:
            assert call[3:] == []


def test_lava_lines_judge_budgets_and_misses_and_send_to_lava_reads_them(exact, tmp_path):
    text = formats.lava_lines(exact, budgets={"stim_to_isr": "5ms", "stim_to_task": 200e-6})
    lines = text.splitlines()
    assert not exact[0].supports(99.9) and not exact[1].supports(99.9)   # 15 and 7 samples: no p99.9 line
    assert_lava(lines, expected_lava())
    (tmp_path / "result.txt").write_text(text)
    env, calls = fake_lava_test_case(tmp_path)
    run_sh(SEND_TO_LAVA_RULES, tmp_path, env)
    check_lava_calls(lines, recorded_calls(calls))
    # Without budgets every figure passes; the misses line still fails.
    plain = formats.lava_lines(exact).splitlines()
    assert [ln.split()[1] for ln in plain] == ["pass"] * 3 + ["fail"] + ["pass"] * 6
    # At the budget exactly the max passes; just under it fails.
    top = float(exact[0].max)
    assert " pass " in formats.lava_lines(exact, budgets={"stim_to_isr": top}).splitlines()[2]
    assert " fail " in formats.lava_lines(exact, budgets={"stim_to_isr": top * (1 - 1e-9)}).splitlines()[2]
    with pytest.raises(ValueError, match="isr_to_task"):
        formats.lava_lines(exact, budgets={"isr_to_task": 1e-3})


def test_lava_lines_percentiles_an_on_rig_run_and_an_empty_kind(tmp_path):
    values = rig_values(overflows=0)
    st = rig_stats("stim_to_isr", values, misses=0)
    empty = Stats.exact("stim_to_task", [], TICK_S, misses=4)
    lines = formats.lava_lines([st, empty], percentiles=(99.9, 99.999), prefix="rig1 ").splitlines()
    # p99.9 on the rig: HdrHistogram's (highest equivalent value of the sample at rank ceil(0.999 n))
    h = engine.engine_histogram()
    ranked = np.sort(values)[int(np.ceil(0.999 * len(values))) - 1]
    p999 = min(h.highest_equivalent_value(int(ranked)), int(values.max()))
    assert_lava(lines, [
        ("rig1_stim_to_isr-min-latency", "pass", us_of(values.min()), "us"),
        ("rig1_stim_to_isr-avg-latency", "pass", Fraction(int(values.sum()) * 10**6, TS_HZ * len(values)), "us"),
        ("rig1_stim_to_isr-max-latency", "pass", us_of(values.max()), "us"),
        ("rig1_stim_to_isr-p99.9-latency", "pass", us_of(p999), "us"),    # 20000 samples: no p99.999
        ("rig1_stim_to_isr-misses", "pass", 0, "windows"), ("rig1_stim_to_isr-unknown", "pass", 0, "windows"),
        ("rig1_stim_to_task-min-latency", "skip", None, None), ("rig1_stim_to_task-avg-latency", "skip", None, None),
        ("rig1_stim_to_task-max-latency", "skip", None, None), ("rig1_stim_to_task-misses", "fail", 4, "windows"),
        ("rig1_stim_to_task-unknown", "pass", 0, "windows"),
    ])
    (tmp_path / "result.txt").write_text("\n".join(lines) + "\n")
    env, calls = fake_lava_test_case(tmp_path)
    run_sh(SEND_TO_LAVA_RULES, tmp_path, env)
    check_lava_calls(lines, recorded_calls(calls))


def test_a_percentile_in_the_rigs_overflow_bin_is_unknown_to_lava_and_inf_only_to_prometheus(tmp_path):
    # As Run.stats gives an on-rig kind: the rig's bins (rig_counts), 1% of them in the overflow bin.
    values = rig_values(n=10_000, overflows=100)
    counts = np.bincount(engine.bin_of(values), minlength=engine.BINS)
    exact = {"count": len(values), "min": int(values.min()), "max": int(values.max()), "sum": int(values.sum())}
    st = Stats.rig("stim_to_isr", TICK_S, counts, exact, title="stimulus -> ISR entry")
    assert st.percentile(99.9) == float("inf")
    lines = formats.lava_lines([st]).splitlines()
    assert lines[3] == "stim_to_isr-p99.9-latency unknown"
    (tmp_path / "result.txt").write_text("\n".join(lines) + "\n")
    env, calls = fake_lava_test_case(tmp_path)
    run_sh(SEND_TO_LAVA_RULES, tmp_path, env)
    check_lava_calls(lines, recorded_calls(calls))
    fams = parse_prometheus(formats.prometheus_text([st], buckets_s=[1.0]))
    got = {s.labels["le"]: s.value for s in fams["hilat_latency_seconds"].samples if s.name.endswith("_bucket")}
    assert got == {"1.0": len(values) - 100, "+Inf": len(values)}
    text = formats.cyclictest_histogram([st], buckets_us=100_000)
    assert "# Histogram Overflows: 00100" in text.splitlines()
    # .hgrm holds what the histogram holds: the overflow bin's values are neither in its count nor its Max.
    (max_line,) = [ln for ln in formats.hgrm(st).splitlines() if ln.startswith("#[Max")]
    top = max(v for v in values.tolist() if v < engine.OVERFLOW_FROM)
    assert max_line == (f"#[Max     = {engine.engine_histogram().highest_equivalent_value(top) / 150:>12.2f}, "
                        f"Total count    = {len(values) - 100:>12}]")


@needs_test_definitions
def test_linaros_send_to_lava_as_it_is(exact, tmp_path):
    script = Path(TEST_DEFINITIONS) / "automated" / "utils" / "send-to-lava.sh"
    text = formats.lava_lines(exact, budgets={"stim_to_isr": "5ms"})
    (tmp_path / "result.txt").write_text(text)
    env, calls = fake_lava_test_case(tmp_path)
    run_sh(f'sh "{script}" result.txt', tmp_path, env)
    check_lava_calls(text.splitlines(), recorded_calls(calls))


# ---- stats_of -----------------------------------------------------------------------------------------

def test_stats_of_a_run_leaves_the_durations_out_unless_asked(tmp_path):
    from synth import random_run

    path, isr, _ = random_run(tmp_path / "run", n=400, seed=2, miss_every=100)
    run = load(path)
    stats = formats.stats_of(run)
    assert [s.kind for s in stats] == [k for k in run.kinds if k not in ("isr_duration", "task_duration")]
    assert "isr_duration" in run.kinds and "stim_to_isr" in [s.kind for s in stats]
    assert stats[0].misses == isr.count(None) and stats[0].count == len(isr) - isr.count(None)
    assert [s.kind for s in formats.stats_of(run, ["isr_duration", "stim_to_isr"])] == ["isr_duration", "stim_to_isr"]
    # A whole run through every format.
    assert formats.cyclictest_histogram(stats).count("\n# hilat: column") == len(stats)
    assert formats.rt_tests_json(stats, start_time=0)["irq"]["0"]["cycles"] == stats[0].count
    assert "hilat_latency_seconds_count{kind=\"stim_to_isr\"} " + str(stats[0].count) in formats.prometheus_text(stats)
    assert formats.lava_lines(stats).count("\n") == sum(5 + s.supports(99.9) for s in stats)
    assert formats.hgrm(stats[0]).endswith("]\n")
