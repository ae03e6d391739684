"""hilat's pytest plugin (entry point ``pytest11``): latency budgets in the user's own tests.

- ``hilat_rig`` (session fixture): the rig of ``--hilat-port URL`` / ``$HILAT_PORT``, or the simulated
  rig started for the session with ``--hilat-sim``; without either, tests that use it are skipped.
- ``hilat_capture`` (fixture): ``hilat_capture(count=..., period="100us", ...)`` captures on that rig
  and returns the ``hilat.api.Run``; the plugin keeps the test's runs for its budgets, baselines, JUnit
  properties and the summary table.
- ``@pytest.mark.hilat_budget(kind, limit, percentile=None, marginal=None, subset="all")``: a
  declarative budget on the test's last run (``percentile`` None: the max). Above ``limit`` fails;
  between ``marginal`` and ``limit`` passes as marginal (OpenHTF's band); a percentile the sample count
  cannot support, or a kind without samples (every window missed, or unknown: a gap in the record
  stream touched it), fails as "cannot judge". The summary table counts unknown windows apart.
- Baselines: ``--hilat-save-baseline`` writes each test's figures to
  ``.hilat/baselines/BOARD/TEST.json``; ``--hilat-compare-fail p99.9:10%`` fails a test whose run is
  worse than its baseline, or whose baseline was taken on another rig, gateware or firmware.
- A failed ``assert`` on a latency (``run.stats("stim_to_isr").percentile(99.99) < 50e-6``) shows the
  distribution and the worst stimuli.

Importing this module imports neither hilat's capture stack nor numpy: that happens when a fixture
is used.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from hilat.values import format_seconds
from hilat.values import seconds as parse_duration

_RUNS = pytest.StashKey[list]()       # the test's runs (hilat_capture)
_VERDICTS = pytest.StashKey[list]()   # the test's budgets judged: (budget, verdict, value)
_RULES = pytest.StashKey[list]()      # --hilat-compare-fail, parsed
_SUMMARY = pytest.StashKey[list]()    # (test, last run, verdicts) for the terminal summary


def pytest_addoption(parser):
    group = parser.getgroup("hilat", "hilat: latency budgets measured by a hilat rig")
    group.addoption("--hilat-port", metavar="URL", default=None,
                    help="the rig's URL for the hilat_rig fixture (/dev/ttyUSB0, socket://HOST:PORT, "
                         "udp://HOST[:PORT]; default $HILAT_PORT)")
    group.addoption("--hilat-sim", action="store_true",
                    help="start the simulated rig and DUT model for the session (from a clone of the repository, "
                         "with the gateware extra: hilat.simulator)")
    group.addoption("--hilat-baud", type=int, default=None, metavar="RATE", help="the rig's UART baud rate")
    group.addoption("--hilat-out", metavar="DIR", default=None,
                    help="where the captured run directories go (default: pytest's temporary directory)")
    group.addoption("--hilat-baseline-dir", metavar="DIR", default=None,
                    help="where baselines are kept (default .hilat/baselines under the rootdir)")
    group.addoption("--hilat-save-baseline", action="store_true",
                    help="write each test's last run as its baseline (per board; the rig's identity inside)")
    group.addoption("--hilat-compare-fail", action="append", default=[], metavar="[KIND:]STAT:LIMIT",
                    help="fail a test whose run is worse than its baseline: p99.9:10%%, max:500ns (repeatable)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "hilat_budget(kind, limit, percentile=None, marginal=None, subset='all'): a latency budget "
        "on the test's last hilat run: percentile (None: the max) of kind must not exceed limit ('50us' or "
        "seconds); between marginal and limit it passes as marginal")
    if config.getoption("hilat_compare_fail"):
        from hilat.api import parse_fail_rule

        try:
            config.stash[_RULES] = [parse_fail_rule(r) for r in config.getoption("hilat_compare_fail")]
        except ValueError as e:
            raise pytest.UsageError(f"--hilat-compare-fail: {e}") from None
    config.stash[_SUMMARY] = []


# ---- fixtures --------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def hilat_rig(request):
    """The session's rig (``hilat.api.Rig``), opened once; skips the test when none is configured."""
    config = request.config
    url = config.getoption("hilat_port") or os.environ.get("HILAT_PORT")
    sim = None
    if url is None and config.getoption("hilat_sim"):
        from hilat.api import simulate
        from hilat.simulator import SimulatorUnavailable

        sim = simulate()
        try:
            url = sim.__enter__().url
        except SimulatorUnavailable as e:   # an installed hilat, or the build failed: one line, no traceback
            pytest.fail(f"--hilat-sim: {e}", pytrace=False)
        request.addfinalizer(lambda: sim.__exit__(None, None, None))
    if url is None:
        pytest.skip("no hilat rig configured: give --hilat-port URL, set HILAT_PORT, or --hilat-sim")
    from hilat.api import Rig

    rig = Rig(url, baud=config.getoption("hilat_baud"))
    rig.open()
    return rig


@pytest.fixture
def hilat_capture(request, hilat_rig, tmp_path_factory):
    """``hilat_capture(**settings) -> Run``: a capture on the session's rig (settings as
    ``hilat.api.capture_settings``: count, duration, period, jitter, deadline, ...)."""
    out = request.config.getoption("hilat_out")
    runs = request.node.stash.setdefault(_RUNS, [])

    def capture(**settings):
        settings.setdefault("out_dir", Path(out) if out else tmp_path_factory.mktemp("hilat-runs"))
        settings.setdefault("label", re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:60])
        run = hilat_rig.capture(**settings)
        runs.append(run)
        return run

    return capture


# ---- budgets, baselines, properties -----------------------------------------------------------------------

class _Budget:
    def __init__(self, kind, limit, percentile=None, marginal=None, subset="all"):
        self.kind, self.percentile, self.subset = kind, percentile, subset
        self.limit = parse_duration(limit)
        self.marginal = None if marginal is None else parse_duration(marginal)
        if self.marginal is not None and self.marginal > self.limit:
            raise pytest.UsageError(f"hilat_budget({kind}): marginal {marginal} is above the limit {limit}")

    @property
    def statistic(self):
        return "max" if self.percentile is None else f"p{self.percentile:g}"

    def judge(self, run):
        """(verdict, value or None, message): verdict pass, marginal, fail or cannot judge."""
        from hilat.api import InsufficientSamples

        stats = run.stats(self.kind, self.subset)
        what = f"{self.kind} {self.statistic} ({self.subset})"
        try:
            value = stats.max if self.percentile is None else stats.percentile(self.percentile)
        except InsufficientSamples as e:
            return "cannot judge", None, f"{what}: cannot judge: {e}"
        if value is None:
            why = (": a gap in the record stream touched every window" if stats.unknown and not stats.misses
                   else "")
            return "cannot judge", None, (f"{what}: no samples ({stats.misses} missed, {stats.unknown} unknown"
                                          f"{why})")
        budget = f"budget {format_seconds(self.limit)}"
        if value > self.limit:
            return "fail", value, f"{what} = {format_seconds(value)} exceeds the {budget}\n{stats.describe()}"
        if self.marginal is not None and value > self.marginal:
            return "marginal", value, (f"{what} = {format_seconds(value)} is within the {budget} but above the "
                                       f"marginal {format_seconds(self.marginal)}")
        return "pass", value, f"{what} = {format_seconds(value)} within the {budget}"


def _baseline_path(config, item, run):
    base = config.getoption("hilat_baseline_dir")
    base = Path(base) if base else Path(config.rootpath) / ".hilat" / "baselines"
    board = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(run.rig.get("board") or run.rig.get("gateware") or "rig"))
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)
    return base / board / f"{name}.json"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    runs = item.stash.get(_RUNS, [])
    budgets = [_Budget(*m.args, **m.kwargs) for m in item.iter_markers("hilat_budget")]
    if not runs:
        if budgets:
            raise AssertionError("hilat_budget: the test captured no run (use the hilat_capture fixture)")
        return result
    run = runs[-1]
    config = item.config
    failures, verdicts = [], []
    for budget in budgets:
        verdict, value, message = budget.judge(run)
        verdicts.append((budget, verdict, value))
        item.user_properties.append((f"hilat.budget.{budget.kind}.{budget.statistic}", verdict))
        if verdict in ("fail", "cannot judge"):
            failures.append(message)
        elif verdict == "marginal":
            item.warn(pytest.PytestWarning(f"hilat: marginal: {message}"))
    item.stash[_VERDICTS] = verdicts
    from hilat.api import Baseline

    if config.getoption("hilat_save_baseline"):
        Baseline.from_run(run, name=item.nodeid).save(_baseline_path(config, item, run))
    rules = config.stash.get(_RULES, None)
    if rules:
        path = _baseline_path(config, item, run)
        if not path.exists():
            failures.append(f"no baseline for this test on this board ({path}): run once with --hilat-save-baseline")
        else:
            failures += [f"against the baseline {path}: {line}" for line in Baseline.load(path).check(run, rules)]
    if failures:
        raise AssertionError("\n".join(failures))
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    # JUnit XML writes the properties of the teardown report, which copies item.user_properties.
    if call.when == "call":
        for run in item.stash.get(_RUNS, []):
            for kind in run.kinds:
                st = run.stats(kind)
                prefix = f"hilat.{run.label}.{kind}"
                item.user_properties.append((f"{prefix}.count", st.count))
                item.user_properties.append((f"{prefix}.misses", st.misses))
                item.user_properties.append((f"{prefix}.unknown", st.unknown))
                for label, value in st.ladder():
                    item.user_properties.append((f"{prefix}.{label}_s", None if value is None else float(value)))
            item.user_properties.append((f"hilat.{run.label}.run", str(run.path)))
        if item.stash.get(_RUNS, []):
            item.config.stash[_SUMMARY].append((item.nodeid, item.stash[_RUNS][-1], item.stash.get(_VERDICTS, [])))
    return report


def pytest_terminal_summary(terminalreporter, config):
    rows = config.stash.get(_SUMMARY, [])
    if not rows:
        return
    from hilat.api import InsufficientSamples

    terminalreporter.section("hilat latencies")
    head = (f"{'test':<32} {'kind':<14} {'count':>7} {'misses':>6} {'unknown':>7} {'p50':>10} {'p99.9':>10} "
            f"{'max':>10}  budget")
    terminalreporter.write_line(head)
    for nodeid, run, verdicts in rows:
        judged = {b.kind: f"{b.statistic} {v}" for b, v, _ in verdicts}
        for kind in run.kinds:
            if kind in ("isr_duration", "task_duration"):
                continue
            st = run.stats(kind)

            def p(q, st=st):
                try:
                    return format_seconds(st.percentile(q)) if st.count else "-"
                except InsufficientSamples:
                    return "-"
            name = nodeid.rpartition("::")[2]
            terminalreporter.write_line(f"{name[:32]:<32} {kind:<14} {st.count:>7} {st.misses:>6} {st.unknown:>7} "
                                        f"{p(50):>10} {p(99.9):>10} {format_seconds(st.max):>10}  "
                                        f"{judged.get(kind, '')}")


def pytest_assertrepr_compare(config, op, left, right):
    """A comparison with a latency from ``hilat.api`` (a ``Seconds``): the distribution it came from."""
    if op not in ("<", "<=", ">", ">=", "==", "!="):
        return None
    from_api = [x for x in (left, right) if type(x).__name__ == "Seconds" and getattr(x, "stats", None) is not None]
    if not from_api:
        return None
    latency = from_api[0]
    other = right if latency is left else left
    lines = [f"{latency.describe()} {op} {other!r}" if latency is left else f"{other!r} {op} {latency.describe()}"]
    return lines + latency.stats.describe().splitlines()
