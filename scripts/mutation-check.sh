#!/usr/bin/env bash
# Break each timing core on purpose, one mutation at a time, in a scratch copy of the tree, and
# check that the gateware tests catch it. Prints one line per mutant: CAUGHT or MISSED.
# Usage: scripts/mutation-check.sh   (after `make setup`; takes a few minutes)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# name@file@text@mutated text ('@' separates: the patterns contain '|')
mutants=(
  "capture: edge detect declares one tick more than it takes (timestamps shifted)@gateware/capture.py@    latency = 1@    latency = 2"
  "capture: one record in 16 lost silently@gateware/capture.py@record.valid.eq(edges != 0),@record.valid.eq((edges != 0) & (stamp[:4] != 5)),"
  "capture: channel 2 drops not counted@gateware/capture.py@count_drop[i].eq(drop_d & dropped_channels[i]@count_drop[i].eq(drop_d & dropped_channels[i] & (i != 2)"
  "capture: glitch filter one tick short@gateware/capture.py@s.glitch <= k for k@s.glitch <= k + 1 for k"
  "capture: FIFO full flag ignores the write in flight@gateware/cdc.py@writable.eq(~Mux(ce, full(wgray_inc, consume_wdomain),@writable.eq(~Mux(ce, full(wgray, consume_wdomain),"
  "capture: marker written while a drop is still to be merged@gateware/capture.py@sink.valid.eq(marker_pending & ~drop_d),@sink.valid.eq(marker_pending),"
  "stimulus: dither interval off by one@gateware/stimulus.py@interval_rows[0].eq(high_rows[0]),@interval_rows[0].eq(high_rows[0] + 1),"
  "stimulus: pulse one tick short@gateware/stimulus.py@width_left.eq(width),@width_left.eq(width - 1),"
  "stimulus: pulse end for width 2 read from the wrong flag@gateware/stimulus.py@Mux(fire_d, width_is_2, width_left_was_3)@Mux(fire_d, width_is_1, width_left_was_3)"
  "stimulus: burst spacing ignored for the last pulse@gateware/stimulus.py@Mux(burst_wrap, burst_gap, burst_spacing)@Mux(burst_wrap, period, burst_spacing)"
  "stimulus: random hit decided on the PRNG one step late@gateware/stimulus.py@Mux(advance, next2 < probability,@Mux(advance, self.value < probability,"
  "stimulus: fire ignores the pulse count@gateware/stimulus.py@remaining_near & (free | ~pulses_done)@remaining_near & (free | 1)"
  "stimulus: start compare lets a lower chunk outrank a higher one@gateware/stimulus.py@merged_gt[k].eq(gt[high] | (eq[high] & gt[low])),@merged_gt[k].eq(gt[high] | gt[low]),"
  "stimulus: dither multiplier loses a carry@gateware/stimulus.py@((a & b) | (a & c) | (b & c)) << 1@((a & b) | (a & c)) << 1"
  "timebase: carry into the high word one tick late@gateware/timebase.py@low_full.eq(low == low_mask - 1),@low_full.eq(low == low_mask),"
)

for m in "${mutants[@]}"; do
  IFS='@' read -r name file from to <<<"$m"
  rm -rf "$scratch/tree"; mkdir -p "$scratch/tree"
  git ls-files -z | xargs -0 -I{} cp --parents {} "$scratch/tree/"
  grep -qF "$from" "$scratch/tree/$file" || { echo "STALE   $name (pattern not found)"; continue; }
  python3 - "$scratch/tree/$file" "$from" "$to" <<'PY'
import sys; p, a, b = sys.argv[1:]; s = open(p).read(); open(p, "w").write(s.replace(a, b, 1))
PY
  if (cd "$scratch/tree" && PYTHONPATH="$scratch/tree" "$root/.venv/bin/python" -m pytest -q -x tests/gateware \
        -p no:cacheprovider >"$scratch/log" 2>&1); then
    echo "MISSED  $name"
  else
    echo "CAUGHT  $name: $(grep -m1 -oE 'AssertionError: .{0,100}' "$scratch/log" || echo failed)"
  fi
done
