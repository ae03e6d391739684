#!/usr/bin/env bash
# Break each timing core on purpose, one mutation at a time, in a scratch copy of the tree, and
# check that the gateware tests catch it. Prints one line per mutant: CAUGHT or MISSED.
# Usage: scripts/mutation-check.sh [PREFIX]   (after `make setup`; takes a few minutes a core, and
# about 25 minutes for the engine's). PREFIX: only the mutants whose name starts with it ("engine").
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

only="${1:-}"

# name@file@text@mutated text[@tests] ('@' separates: the patterns contain '|'); tests: the pytest
# paths that must catch it (default: tests/gateware)
#
# Mutants removed as equivalent under the engine's contract (the reasons are in engine.py too):
# - "status.flushed before the last closes reach the banks" (busy without the delay stages' events):
#   the crossing writes the flush's entry after every close owed, so the closes are in the banks'
#   own busy by the time it arrives.
# - "a begin written over a pending clear" (begin_p cleared with clear_p pending): a start is only
#   allowed once status.busy has dropped after a clear (the CSR's contract; the firmware waits), and
#   busy covers the clear from its strobe through the crossing, so the two are never pending together.
mutants=(
  "capture: edge detect declares one tick more than it takes (timestamps shifted)@gateware/capture.py@    latency = 1@    latency = 2"
  "capture: one record in 16 lost silently@gateware/capture.py@any_edge.eq(edges != 0)@any_edge.eq((edges != 0) & (stamp[:4] != 5))"
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
  "stimulus: the high partial product (a1 * b1) of the dither at the wrong weight@gateware/stimulus.py@partial[i, j] = multiplier.p << 18*(i + j)@partial[i, j] = multiplier.p << (18*(i + j) + (i & j))"
  "stimulus: dither multiplier loses a carry@gateware/stimulus.py@((a & b) | (a & c) | (b & c)) << 1@((a & b) | (a & c)) << 1"
  "sub-tick: the tick's samples not re-paired (the I/O cell's word as it comes)@gateware/sampler.py@self.samples.eq(Cat(later, word[0])),@self.samples.eq(word),@tests/gateware/test_sampler.py"
  "sub-tick: the last sample at the new level taken, not the first@gateware/sampler.py@for k in reversed(range(S - 1)):@for k in range(S - 1):@tests/gateware/test_sampler.py"
  "sub-tick: a dropped edge's position left in the record@gateware/capture.py@self.fraction.eq(Mux(accepted & enable & Mux(level, rise, fall), fraction, 0)),@self.fraction.eq(Mux(accepted, fraction, 0)),@tests/gateware/test_sampler.py"
  "sub-tick: the position a tick ahead of its level@gateware/capture.py@fraction = _delayed(sync, position, self.glitch_filter.latency)@fraction = _delayed(sync, position, self.glitch_filter.latency - 1)@tests/gateware/test_sampler.py"
  "timebase: carry into the high word one tick late@gateware/timebase.py@low_full.eq(low == low_mask - 1),@low_full.eq(low == low_mask),"
  "engine: statistics record updated after the snapshot not copied first@gateware/engine.py@self.comb += copy_now.eq(snapping & ~self.clearing & ~(copied >> address)[0])@self.comb += copy_now.eq(snapping & ~self.clearing & ~active & ~(copied >> address)[0])@tests/gateware/test_engine.py"
  "engine: statistics snapshot taken in the middle of a sample@gateware/engine.py@take.eq((self.snapshot | wanted) & ~active & ~self.clearing)@take.eq((self.snapshot | wanted) & ~self.clearing)@tests/gateware/test_engine.py"
  "engine: a full bank word wraps without its spill@gateware/engine.py@emit.eq(incremented[word_count_bits]),@emit.eq(0),@tests/gateware/test_engine.py"
  "engine: the waiting sample taken again when a lost one arrives at its slot@gateware/engine.py@If(take & pending,@If(take & pending & ~valid,@tests/gateware/test_engine.py"
  "engine: values 2**24..2**25-1 not in the overflow bin@gateware/engine.py@over.eq(value[VALUE_BITS:] != 0)@over.eq(value[VALUE_BITS + 1:] != 0)@tests/gateware/test_engine.py"
  "engine: an ISR edge at the start's own tick not in its window@gateware/engine.py@found_isr.eq(d.isr), lat_isr.eq(0),@found_isr.eq(0), lat_isr.eq(0),@tests/gateware/test_engine.py"
  "engine: the tag's level at the start ignored (edges only)@gateware/engine.py@tag_at.eq(d.tag), tag_in.eq(d.tag),@tag_at.eq(d.tag), tag_in.eq(d.tag_edge),@tests/gateware/test_engine.py"
  "engine: deadline one tick long@gateware/engine.py@deadline_two, age == deadline_near)),@deadline_two, age == deadline_near + 1)),@tests/gateware/test_engine.py"
  "engine: a deadline of 1 takes the tick after the start too@gateware/engine.py@in_deadline.eq(cfg.deadline != 1), late@in_deadline.eq(1), late@tests/gateware/test_engine.py"
  "engine: deadline 2 as long as deadline 3@gateware/engine.py@reaching.eq(Mux(opens, deadline_two,@reaching.eq(Mux(opens, 0,@tests/gateware/test_engine.py"
  "engine: a sample in the interval of the tick its window closes@gateware/engine.py@s.start.eq(start), s.interval.eq(start_iv),@s.start.eq(start), s.interval.eq(d.interval),@tests/gateware/test_engine.py"
  "engine: a spilled count labelled with the new interval@gateware/engine.py@emit_count.eq(w_count), emit_interval.eq(interval_k),@emit_count.eq(w_count), emit_interval.eq(interval_k + 1),@tests/gateware/test_engine.py"
  "engine: the tagged overflow bin kept in the untagged one's register@gateware/engine.py@If(op_ovf[1], overflow_words[1].eq(new_word)),@If(op_ovf[1], overflow_words[0].eq(new_word)),@tests/gateware/test_engine.py"
  "engine: a sweep's RAM address not held at an overflow word@gateware/engine.py@If(scan_ovf == 0, scan_ram.eq(scan_ram + 1)),@scan_ram.eq(scan_ram + 1),@tests/gateware/test_engine.py"
  "engine: sweep ends a word early (the tagged overflow bin)@gateware/engine.py@If(scan == BANK_WORDS,@If(scan == BANK_WORDS - 1,@tests/gateware/test_engine.py"
  "engine: trigger one tick late@gateware/engine.py@threshold_lo, age[:16] == threshold_before[:16])))@threshold_lo, age[:16] == threshold_before[:16] - 1)))@tests/gateware/test_engine.py"
  "engine: the threshold's high half not compared@gateware/engine.py@Mux(age_full, threshold_hi, age[16:] == threshold_before[16:])@Mux(age_full, threshold_hi, 1)@tests/gateware/test_engine.py"
  "engine: a late response never late@gateware/engine.py@late.eq(late | at_threshold)@late.eq(late)@tests/gateware/test_engine.py"
  "engine: a threshold of 1 missed at the window's first tick@gateware/engine.py@threshold_lo.eq(Mux(opens, threshold_one,@threshold_lo.eq(Mux(opens, 0,@tests/gateware/test_engine.py"
  "engine: windows lost at the crossing counted again by every later entry@gateware/engine.py@If(take, lost_carried.eq(src.lost)),@If(0, lost_carried.eq(src.lost)),@tests/gateware/test_engine.py"
  "engine: a role's level ignored (rising edges only)@gateware/engine.py@record.channels[i] & (record.levels[i] == level)@record.channels[i] & (record.levels[i] == 1)@tests/gateware/test_engine.py"
  "engine: the tag's level ignored (high is active)@gateware/engine.py@tag_levels[i].eq(record.levels[i] == cfg.tag_level)@tag_levels[i].eq(record.levels[i])@tests/gateware/test_engine.py"
  "engine: an outlier at a value equal to the threshold@gateware/engine.py@(values.value[k] > thresholds[k])@(values.value[k] >= thresholds[k])@tests/gateware/test_engine.py"
  "engine: duplicates wrap instead of saturating@gateware/engine.py@dups_full.eq(dups == 0xFFFE)),@dups_full.eq(0)),@tests/gateware/test_engine.py"
  "engine: below range counted as a miss@gateware/engine.py@self.below[k].eq(found[k] & raw[k][32]),@self.below[k].eq(0),@tests/gateware/test_engine.py"
  "engine: clear leaves the histograms@gateware/engine.py@clearing.eq(1), *scan_restart, closes.eq(0),@*scan_restart, closes.eq(0),@tests/gateware/test_engine.py"
  "engine: an interval closes with a window of it still open@gateware/engine.py@Mux(opened, start_iv, d.interval))),@d.interval)),@tests/gateware/test_engine.py"
  "engine: offset not subtracted from the task latency@gateware/engine.py@raw[1].eq(Cat(s.task, C(0, 1)) - cfg.offset),@raw[1].eq(Cat(s.task, C(0, 1))),@tests/gateware/test_engine.py"
  "engine: samples of the interval after next binned while the sweep lags@gateware/engine.py@inc_in_range.eq(intervals_ahead < 2),@inc_in_range.eq(intervals_ahead < 3),@tests/gateware/test_engine.py"
)

for m in "${mutants[@]}"; do
  IFS='@' read -r name file from to tests <<<"$m"
  [[ "$name" == "$only"* ]] || continue
  rm -rf "$scratch/tree"; mkdir -p "$scratch/tree"
  git ls-files -z | xargs -0 -I{} cp --parents {} "$scratch/tree/"
  grep -qF "$from" "$scratch/tree/$file" || { echo "STALE   $name (pattern not found)"; continue; }
  python3 - "$scratch/tree/$file" "$from" "$to" <<'PY'
import sys; p, a, b = sys.argv[1:]; s = open(p).read(); open(p, "w").write(s.replace(a, b, 1))
PY
  if (cd "$scratch/tree" && PYTHONPATH="$scratch/tree" "$root/.venv/bin/python" -m pytest -q -x ${tests:-tests/gateware} \
        -p no:cacheprovider >"$scratch/log" 2>&1); then
    echo "MISSED  $name"
  else
    echo "CAUGHT  $name: $(grep -m1 -oE 'AssertionError: .{0,100}|^E +assert .{0,100}' "$scratch/log" || echo failed)"
  fi
done
