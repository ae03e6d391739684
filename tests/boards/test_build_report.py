"""The build report's reading of nextpnr: what counts as timing met, and what does not."""

from targets import build_report

# Shaped like nextpnr-ecp5 0.11's log: a pre-route estimate, then the post-route figures.
LOG = """\
Info: Max frequency for clock '$glbnet$VexRiscv.IBusCachedPlugin_cache.clk': 60.10 MHz (PASS at 50.00 MHz)
Warning: Max frequency for clock                         '$glbnet$crg_clkout1': 140.00 MHz (FAIL at 150.00 MHz)
Info: Device utilisation:
Info: \t          TRELLIS_IO:    10/   197     5%
Info: \t        TRELLIS_COMB:  8708/ 24288    35%
Info: \t              DP16KD:    25/    56    44%
Info: \t          MULT18X18D:     0/    28     0%

Info: Max frequency for clock '$glbnet$VexRiscv.IBusCachedPlugin_cache.clk': 72.59 MHz (PASS at 50.00 MHz)
Info: Max frequency for clock '$glbnet$crg_clkout1': 157.03 MHz (PASS at 150.00 MHz)
"""


def make(log, requested, tmp_path):
    bit = tmp_path / "x.bit"
    bit.write_bytes(b"\xff\x00bitstream")
    return build_report.make("board", "LFE5U-25F-6BG381C", requested, log, bit, tmp_path)


def test_post_route_figures_and_domains(tmp_path):
    report = make(LOG, {"sys": 50e6, "ts": 150e6}, tmp_path)
    assert report["clocks"]["sys"]["achieved_mhz"] == 72.59
    assert report["clocks"]["ts"]["achieved_mhz"] == 157.03  # the last (post-route) line wins
    assert report["clocks"]["ts"]["nets"] == ["$glbnet$crg_clkout1"]
    assert report["timing_met"] and build_report.problems(report) == []
    assert report["resources"]["TRELLIS_COMB"] == {"used": 8708, "available": 24288}
    assert "MULT18X18D" not in report["resources"]  # unused resources are left out
    assert report["bitstream"]["sha256"] == build_report.sha256(tmp_path / "x.bit")


def test_failing_clock_fails_the_build(tmp_path):
    log = LOG.replace("157.03 MHz (PASS at 150.00 MHz)", "149.20 MHz (FAIL at 150.00 MHz)")
    report = make(log, {"sys": 50e6, "ts": 150e6}, tmp_path)
    assert not report["timing_met"]
    assert report["clocks"]["sys"]["met"] and not report["clocks"]["ts"]["met"]
    assert any("'ts' reaches 149.20 MHz" in p for p in build_report.problems(report))


def test_clock_nextpnr_did_not_time_fails(tmp_path):
    # nextpnr timed ts at 150 MHz, but 200 MHz was requested: not a pass.
    report = make(LOG, {"sys": 50e6, "ts": 200e6}, tmp_path)
    assert not report["timing_met"]
    assert any("'ts' (200.000 MHz) not found" in p for p in build_report.problems(report))


def test_equal_clocks_must_all_pass(tmp_path):
    log = LOG.replace("(PASS at 150.00 MHz)", "(PASS at 50.00 MHz)").replace("157.03", "49.00")
    report = make(log, {"sys": 50e6, "ts": 50e6}, tmp_path)
    assert len(report["clocks"]["ts"]["nets"]) == 2
    assert report["clocks"]["ts"]["achieved_mhz"] == 49.00 and not report["timing_met"]


def test_missing_bitstream_is_a_problem(tmp_path):
    report = build_report.make("board", "dev", {"sys": 50e6}, LOG, tmp_path / "none.bit", tmp_path)
    assert report["timing_met"] and report["bitstream"] is None
    assert build_report.problems(report) == ["no bitstream was written"]


def test_domain_matched_despite_period_rounding():
    """LiteX constrains 140 MHz as a 7.142 ns period, which nextpnr prints as 140.02 MHz."""
    fmax = {"$glbnet$crg_clkout1": {"constraint_mhz": 140.02}, "$glbnet$sys_clk": {"constraint_mhz": 50.0}}
    assert build_report.domain_nets(140e6 / 1e6, fmax) == ["$glbnet$crg_clkout1"]
    assert build_report.domain_nets(50.0, fmax) == ["$glbnet$sys_clk"]
    assert build_report.domain_nets(140.1, fmax) == []
