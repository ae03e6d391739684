"""hilat's pytest plugin, run the way a user runs it: pytest in a subprocess (the plugin loaded through
its pytest11 entry point) against the simulated rig. examples/test_latency_budget.py passes; budgets
that the DUT model's latencies break fail with the distribution in the message; a percentile the count
cannot support is not judged; baselines refuse another gateware."""

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "test_latency_budget.py"


@pytest.fixture(scope="module")
def rig_url(sim_dir, tmp_path_factory):
    from targets import sim

    with sim.SimulatedRig(sim_dir, tmp_path_factory.mktemp("plugin-sim")) as rig:
        yield rig.url


def _run(pytester, *args):
    # A subprocess: the entry point loads the plugin as in a user's project (no in-process state).
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *map(str, args))


def test_importing_the_plugin_imports_nothing_of_the_capture():
    import subprocess
    import sys

    code = ("import sys, hilat.pytest_plugin; "
            "print(sorted(m for m in ('numpy', 'hilat.api', 'hilat.acquisition.capture', 'serial') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_without_a_rig_the_tests_are_skipped_with_the_reason(pytester, monkeypatch):
    monkeypatch.delenv("HILAT_PORT", raising=False)
    shutil.copy(EXAMPLE, pytester.path / EXAMPLE.name)
    result = _run(pytester, "-rs", EXAMPLE.name)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*no hilat rig configured: give --hilat-port URL, set HILAT_PORT, or --hilat-sim*"])


def test_the_example_passes_with_properties_and_a_summary(pytester, sim_dir):
    shutil.copy(EXAMPLE, pytester.path / EXAMPLE.name)
    # --hilat-sim: the plugin starts the simulated rig itself (its build is sim_dir's, cached).
    result = _run(pytester, EXAMPLE.name, "--hilat-sim", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*hilat latencies*", "test_declared_budgets*stim_to_isr*p99.9 pass*",
                                 "test_declared_budgets*stim_to_task*max pass*"])
    cases = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}
             for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    declared = cases["test_declared_budgets"]
    assert declared["hilat.budget.stim_to_isr.p99.9"] == "pass"
    label = "test_declared_budgets"
    count = int(declared[f"hilat.{label}.stim_to_isr.count"])
    assert count + int(declared[f"hilat.{label}.stim_to_isr.misses"]) == 1100
    # The figures are the run's own, in seconds.
    from hilat import api

    run = api.load(declared[f"hilat.{label}.run"])
    assert float(declared[f"hilat.{label}.stim_to_isr.p99.9_s"]) == float(run.stats("stim_to_isr").percentile(99.9))
    assert float(declared[f"hilat.{label}.stim_to_isr.max_s"]) == float(run.stats("stim_to_isr").max)


FAILING = '''
import pytest

SETTINGS = dict(count=150, period="100us", jitter="20us", deadline="15us")


def test_plain_assert(hilat_capture):
    run = hilat_capture(**SETTINGS)
    assert run.stats("stim_to_isr").percentile(99) < 1e-6


@pytest.mark.hilat_budget("stim_to_task", "1us")
def test_budget_exceeded(hilat_capture):
    hilat_capture(**SETTINGS)


@pytest.mark.hilat_budget("stim_to_isr", "1ms", percentile=99.99)
def test_cannot_judge(hilat_capture):
    hilat_capture(**SETTINGS)


@pytest.mark.hilat_budget("stim_to_isr", "1ms", marginal="1us")
def test_marginal(hilat_capture):
    hilat_capture(**SETTINGS)
'''


def test_broken_budgets_fail_with_the_distribution(pytester, rig_url):
    pytester.makepyfile(test_failing=FAILING)
    result = _run(pytester, "--hilat-port", rig_url)
    result.assert_outcomes(failed=3, passed=1, warnings=1)
    out = result.stdout.str()
    # The plain assert: the statistic, then the distribution and the worst stimuli.
    assert "assert p99 of stim_to_isr = " in out and "< 1e-06" in out
    assert "worst: " in out and "mu (its start)" in out
    # The declared budget: its value against the budget, then the distribution.
    assert "stim_to_task max (all) = " in out and "exceeds the budget 1 us" in out
    assert "cannot judge: stim_to_isr: p99.99 needs at least 10000 samples, the run has" in out
    assert "hilat: marginal: stim_to_isr max (all) = " in out


BASELINED = '''
def test_latency(hilat_capture):
    hilat_capture(count=150, period="100us", jitter="20us", deadline="15us", seed=3)
'''


def test_baselines_pass_the_same_run_and_refuse_another_gateware(pytester, rig_url):
    pytester.makepyfile(test_baselined=BASELINED)
    _run(pytester, "--hilat-port", rig_url, "--hilat-compare-fail", "p90:5%").assert_outcomes(failed=1)
    _run(pytester, "--hilat-port", rig_url, "--hilat-save-baseline").assert_outcomes(passed=1)
    (baseline,) = (pytester.path / ".hilat" / "baselines").glob("*/*.json")
    assert baseline.parent.name == "sim"   # per board: the simulated rig's
    # The same DUT model: its random latencies differ from run to run, but not at the median and p90
    # (its rare long tail makes p99 and the max of 150 samples differ by 4x).
    _run(pytester, "--hilat-port", rig_url, "--hilat-compare-fail", "p90:50%",
         "--hilat-compare-fail", "p50:20%").assert_outcomes(passed=1)
    doc = json.loads(baseline.read_text())
    doc["kinds"]["stim_to_isr"]["seconds"]["p90"] /= 2
    baseline.write_text(json.dumps(doc))
    result = _run(pytester, "--hilat-port", rig_url, "--hilat-compare-fail", "stim_to_isr:p90:10%")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*against the baseline*stim_to_isr p90: B * > A *"])
    doc["rig"]["gateware"] = "sim 0000000000"
    baseline.write_text(json.dumps(doc))
    result = _run(pytester, "--hilat-port", rig_url, "--hilat-compare-fail", "p90:1000%")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the baseline was taken on another rig or gateware (gateware: baseline "
                                 "'sim 0000000000'*"])


def test_a_bad_compare_rule_is_a_usage_error(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = _run(pytester, "--hilat-compare-fail", "p99.9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hilat-compare-fail: a fail rule is [[]KIND:[]]STATISTIC:LIMIT*"])
