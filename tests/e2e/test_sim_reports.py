"""`hilat demo` twice with different DUT-model settings, then `hilat report` and `hilat compare`:
every figure must equal what the DUT model says it injected, to the tick."""

import json

import pytest
from hilat.cli import main
from hilat.statistics.distribution import exact_figures

from targets import sim

N = 1000
DUT_A = ["isr_base=50", "resched_base=80"]
DUT_B = ["isr_base=90", "resched_base=150", "isr_width=35"]


def injected(run_dir):
    rows = sim.read_dut_log(run_dir / "dut_injected.csv")
    ok = rows[:, 1] == 0
    return rows[ok, 2], rows[ok, 3], int((rows[:, 1] == 1).sum())


def demo(tmp_path, label, dut):
    argv = ["demo", "--count", str(N), "--out", str(tmp_path / "runs"), "--label", label, "--no-progress",
            "--period", "5000", "--jitter", "1000"]
    for setting in dut:
        argv += ["--dut", setting]
    assert main(argv) == 0
    (run_dir,) = (tmp_path / "runs").glob(f"*-{label}")
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo")
    return demo(tmp, "a", DUT_A), demo(tmp, "b", DUT_B)


def test_report_equals_injected(runs, capsys):
    capsys.readouterr()
    assert main(["report", *map(str, runs), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for run_doc, run_dir, isr_width in zip(doc["runs"], runs, (20, 35)):
        isr, task, misses = injected(run_dir)
        row = run_doc["subsets"]["all"]["stim_to_isr"]
        assert (row["count"], row["misses"]) == (len(isr), misses)
        expect = exact_figures(isr)
        assert row["mu"]["min"] == expect["min"] and row["mu"]["max"] == expect["max"]
        assert row["mu"]["percentiles"] == expect["percentiles"]
        assert row["mu"]["mean"] == pytest.approx(isr.mean(), rel=1e-12)
        assert run_doc["subsets"]["all"]["stim_to_task"]["mu"]["percentiles"] == exact_figures(task)["percentiles"]
        # ISR duration: the DUT holds the pin for exactly isr_width ticks.
        dur = run_doc["subsets"]["all"]["isr_duration"]["mu"]
        assert dur["min"] == dur["max"] == isr_width


def test_compare_equals_injected_differences(runs, capsys):
    capsys.readouterr()
    assert main(["compare", *map(str, runs), "--format", "json"]) == 0
    cmp = json.loads(capsys.readouterr().out)
    (isr_a, _, _), (isr_b, _, _) = injected(runs[0]), injected(runs[1])
    rows = {r["statistic"]: r for r in cmp["kinds"]["stim_to_isr"]["rows"]}
    pa, pb = exact_figures(isr_a)["percentiles"], exact_figures(isr_b)["percentiles"]
    for p in ("p50", "p90", "p99"):
        assert rows[p]["b_minus_a"] == pytest.approx((pb[p] - pa[p]) * 20.0), p
    assert rows["max"]["b_minus_a"] == pytest.approx((isr_b.max() - isr_a.max()) * 20.0)
    assert rows["p50"]["b_minus_a"] > 0          # B's ISR base latency is 40 ticks longer


def test_demo_writes_an_html_report_with_four_plots(runs):
    for run_dir in runs:
        page = (run_dir / "report.html").read_text()
        assert page.count('src="data:image/png;base64,') == 4
        assert "stimulus -&gt; ISR entry (ns), all samples" in page


def test_vcd_of_a_demo_run_read_by_sigrok(runs, tmp_path):
    """The simulated rig's own edges, exported and read by sigrok-cli: every edge of events.csv, and
    the jitter decoder's stimulus -> ISR delay equals hilat's and the DUT model's, to the tick."""
    from hilat.rundir.reader import load_run
    from sigrok import check_vcd_with_sigrok

    run = load_run(runs[0])
    vcd = tmp_path / "demo.vcd"
    assert main(["export", str(run.path), "--vcd", str(vcd)]) == 0
    compared = check_vcd_with_sigrok(run, vcd)
    isr, _, misses = injected(runs[0])
    assert compared >= N - 2 * misses - 1 and compared <= len(isr)
