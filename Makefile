# hilat — top-level entry points. `make test` and `make demo` set themselves up.
PY      := .venv/bin/python
BUILD   := build

.PHONY: demo-cpus setup test test-host demo lint verilog bitstream clean

setup:
	@bash scripts/setup.sh

test: lint
	$(PY) -m pytest -q --durations=25 tests

# The host tier alone (README, "Tests"): no simulated rig, gateware simulation, board toolchain or fuzzing
# (the markers of tests/conftest.py); it runs without the gateware extra too. Under two minutes.
test-host:
	$(PY) -m pytest -q -m "not sim and not board and not fuzz and not slow" tests

# The main job: a capture against the simulated rig and DUT, ending in a latency table.
demo: setup
	.venv/bin/hilat demo $(DEMO_ARGS)

# The seeds' experiments on real CPUs as simulated DUTs (docs/dut-benchmarks.md): a Faller-style row
# per CPU and hkern's IPC costs, ending in "dut cpus: C cpus, S stimuli, cross-check mismatches M".
# One simulator build per CPU (about a minute each, cached in build/sim).
demo-cpus: setup
	.venv/bin/python -m targets.dut.experiments cpus $(DEMO_CPUS_ARGS)

# Bitstream for a real board with the open toolchain (YoWASP, from PyPI), with a build report in
# build/boards/$(BOARD)/build_report.json; fails when a clock misses its requested frequency.
BOARDS ?= colorlight_i5 colorlight_i9 ulx3s
BOARD  ?= colorlight_i5
bitstream: setup
	@case " $(BOARDS) " in *" $(BOARD) "*) ;; *) echo "BOARD must be one of: $(BOARDS)" >&2; exit 2;; esac
	$(PY) -m targets.$(BOARD) --build $(BITSTREAM_ARGS)

# Generated Verilog of the timing cores, for linting and inspection.
verilog: setup
	$(PY) -m gateware.export $(BUILD)/verilog

# Python style, then Verilator lint of the generated Verilog. The waived classes are how Migen/LiteX
# write Verilog (non-blocking comb assigns, register initialisers, zero-extension, partial cases).
VERILATOR_WAIVE := -Wno-DECLFILENAME -Wno-UNUSEDSIGNAL -Wno-COMBDLY -Wno-PROCASSINIT -Wno-WIDTHEXPAND \
                   -Wno-CASEINCOMPLETE
lint: verilog
	.venv/bin/ruff check .
	@# The host's layers (pyproject.toml [tool.importlinter], docs/architecture.md "Layers").
	.venv/bin/lint-imports
	scripts/verilator --lint-only -Wall $(VERILATOR_WAIVE) --top-module hilat_timing_cores \
	    $(BUILD)/verilog/hilat_timing_cores.v gateware/sim_models/*.v
	@# IDDRX2F's ALIGNWD is left unconnected on purpose (gateware/sampler.py): PINMISSING waived here.
	scripts/verilator --lint-only -Wall $(VERILATOR_WAIVE) -Wno-PINMISSING --top-module hilat_timing_cores_subtick \
	    $(BUILD)/verilog/hilat_timing_cores_subtick.v gateware/sim_models/*.v
	scripts/verilator --lint-only -Wall $(VERILATOR_WAIVE) --top-module hilat_ethernet_cores \
	    $(BUILD)/verilog/hilat_ethernet_cores.v gateware/sim_models/*.v

clean:
	rm -rf $(BUILD) tests/gateware/sim_build runs
