# hilat — top-level entry points. `make test` and `make demo` set themselves up.
PY      := .venv/bin/python
BUILD   := build

.PHONY: setup test lint verilog clean

setup:
	@bash scripts/setup.sh

test: setup
	$(PY) -m pytest -q tests

# Generated Verilog of the timing cores, for linting and inspection.
verilog: setup
	$(PY) -m gateware.export $(BUILD)/verilog

lint: verilog
	.venv/bin/ruff check host gateware targets tests scripts
	verilator --lint-only -Wall -Wno-DECLFILENAME -Wno-UNUSEDSIGNAL -Wno-WIDTHTRUNC -Wno-WIDTHEXPAND \
	    --top-module hilat_timing_cores $(BUILD)/verilog/hilat_timing_cores.v

clean:
	rm -rf $(BUILD) tests/gateware/sim_build
