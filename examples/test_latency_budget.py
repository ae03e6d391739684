"""Latency budgets of a device under test, as pytest tests (hilat's pytest plugin).

    pytest examples/test_latency_budget.py --hilat-sim             # the simulated rig and DUT model
    pytest examples/test_latency_budget.py --hilat-port /dev/ttyUSB0   # a rig wired to your DUT

Without a rig (no --hilat-port, $HILAT_PORT or --hilat-sim) these tests are skipped. Add
--hilat-save-baseline once, then --hilat-compare-fail p99.9:10% to fail when a change makes the tail
10 % slower than that baseline; --junitxml keeps every figure as a test property.
"""

import pytest

# 1100 stimuli (p99.9 needs 1000) every 100 us +/- 20 us; a response after 15 us counts as missed.
SETTINGS = dict(count=1100, period="100us", jitter="20us", deadline="15us")


def test_interrupt_latency_within_budget(hilat_capture):
    run = hilat_capture(**SETTINGS)
    isr = run.stats("stim_to_isr")
    # Plain asserts on the API; a failure shows the distribution and the worst stimuli.
    assert isr.miss_share < 0.01          # the DUT model drops a few interrupts on purpose
    assert isr.percentile(99.9) < 50e-6
    assert run.stats("stim_to_task").max < 100e-6


@pytest.mark.hilat_budget("stim_to_isr", "50us", percentile=99.9, marginal="40us")
@pytest.mark.hilat_budget("stim_to_task", "100us")
def test_declared_budgets(hilat_capture):
    # The budgets are judged on the test's last run once the test body has passed.
    hilat_capture(**SETTINGS, seed=7)
